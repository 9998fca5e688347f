package jitelf

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTools runs the standard tools on images of every combination: on all,
// readelf and llvm-readelf, which must not warn; on the host's (x86-64)
// images, objdump, which must disassemble every function under its name,
// addr2line, llvm-addr2line and llvm-dwarfdump, which must resolve
// addresses to their function and line, and llvm-dwarfdump --verify.
func TestTools(t *testing.T) {
	for _, c := range combinations() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			img := c.write(t)
			path := img.save(t)
			checkReadelf(t, path, c.lines, c.unwind)
			if c.opts != hostOpts {
				return
			}
			checkObjdump(t, path, img)
			if c.lines {
				checkAddr2line(t, path, img, testRowsOf)
			}
		})
	}
}

// testRowsOf gives the rows of the test functions, for checkAddr2line.
func testRowsOf(img *image, i int) []wantRow { return testRows(len(img.fns[i].Code), i) }

func (img *image) save(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jitted.so")
	if err := os.WriteFile(path, img.data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tool runs a tool and returns what it printed on both outputs, skipping
// the test when the tool is missing (unless CI is set, where all are
// installed).
func tool(t testing.TB, name string, args ...string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: %v (CI is set, so nothing may be missing)", name, err)
		}
		t.Skipf("%s is not installed: %v", name, err)
	}
	out, err := exec.Command(p, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// complaint matches the warnings and errors of binutils ("readelf:
// Warning: ...") and LLVM ("llvm-readelf-14: warning: ...", "WARNING: ...");
// the lines that show names, which may say "Error", start otherwise.
var complaint = regexp.MustCompile(`(?i)^(\S+: )?(warning|error)\b`)

// noComplaints fails the test for every line of out that warns or errs.
func noComplaints(t testing.TB, what, out string) {
	t.Helper()
	n := 0
	for line := range strings.Lines(out) {
		if complaint.MatchString(line) {
			if n++; n <= 10 {
				t.Errorf("%s: %s", what, strings.TrimSpace(line))
			}
		}
	}
}

func checkReadelf(t testing.TB, path string, lines, unwind bool) {
	t.Helper()
	noComplaints(t, "readelf -a -W", tool(t, "readelf", "-a", "-W", path))
	noComplaints(t, "llvm-readelf-14 -a", tool(t, "llvm-readelf-14", "-a", path))
	if lines || unwind {
		noComplaints(t, "readelf -w", tool(t, "readelf", "-w", path))
	}
	if lines {
		out := tool(t, "llvm-dwarfdump-14", "--verify", path)
		if !strings.Contains(out, "No errors.") {
			t.Errorf("llvm-dwarfdump-14 --verify:\n%s", out)
		}
	}
	if unwind {
		out := tool(t, "llvm-dwarfdump-14", "--eh-frame", path)
		// V8 writes CIEs of version 3, which LLVM 14 reads but calls
		// unsupported; readelf takes them.
		noComplaints(t, "llvm-dwarfdump-14 --eh-frame", strings.ReplaceAll(out, "WARNING: unsupported CIE version\n", ""))
	}
}

var (
	objdumpSymbol = regexp.MustCompile(`^([0-9a-f]+) <(.*)>:$`)
	objdumpInsn   = regexp.MustCompile(`^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)`)
)

// checkObjdump checks that objdump -d shows every function with code and a
// name under that name (tabs shown as ^I) at its address, starting with its
// code bytes: all of them, unless objdump skips a run of zeros ("...")
// inside. An unnamed function gets no label of its own.
func checkObjdump(t testing.TB, path string, img *image) {
	t.Helper()
	type shown struct {
		addr  uint64
		bytes []byte
		cut   bool
	}
	syms := map[string]*shown{}
	var cur *shown
	sc := bufio.NewScanner(strings.NewReader(tool(t, "objdump", "-d", "-w", path)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := objdumpSymbol.FindStringSubmatch(line); m != nil {
			addr, _ := strconv.ParseUint(m[1], 16, 64)
			cur = &shown{addr: addr}
			syms[fmt.Sprintf("%s@%#x", m[2], addr)] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if strings.TrimSpace(line) == "..." {
			cur.cut = true
		}
		if m := objdumpInsn.FindStringSubmatch(line); m != nil && !cur.cut {
			for _, h := range strings.Fields(m[1]) {
				v, _ := strconv.ParseUint(h, 16, 8)
				cur.bytes = append(cur.bytes, byte(v))
			}
		}
	}
	for i, fn := range img.fns {
		if len(fn.Code) == 0 || fn.Name == "" {
			continue
		}
		key := fmt.Sprintf("%s@%#x", strings.ReplaceAll(fn.Name, "\t", "^I"), img.lay.Offsets[i])
		s := syms[key]
		switch {
		case s == nil:
			t.Errorf("objdump -d does not show %s", key)
		case len(s.bytes) < len(fn.Code) && !s.cut:
			t.Errorf("objdump -d shows %d bytes of %s, it has %d", len(s.bytes), key, len(fn.Code))
		case !bytes.Equal(s.bytes[:min(len(s.bytes), len(fn.Code))], fn.Code[:min(len(s.bytes), len(fn.Code))]):
			t.Errorf("objdump -d shows %s as % x, its code is % x", key, s.bytes, fn.Code)
		}
	}
}

// lookup is an address to resolve and what it must resolve to.
type lookup struct {
	addr     uint64
	fn, file string
	line     int
}

// lookups lists, for every row a function's rows give (rows superseded at
// the same address aside), its address and the one before the next row.
func lookups(img *image, rowsOf func(*image, int) []wantRow) []lookup {
	var ls []lookup
	for i, fn := range img.fns {
		rows := rowsOf(img, i)
		for k, r := range rows {
			if r.superseded {
				continue
			}
			end := uint64(len(fn.Code))
			if k+1 < len(rows) {
				end = rows[k+1].off
			}
			for _, off := range []uint64{r.off, end - 1} {
				ls = append(ls, lookup{addr: img.lay.Offsets[i] + off, fn: fn.Name, file: r.file, line: r.line})
			}
		}
	}
	return ls
}

// llvmLineInfo is the line llvm-dwarfdump --lookup prints for an address.
var llvmLineInfo = regexp.MustCompile(`Line info: file '(.*)', line (\d+)`)

// checkAddr2line resolves addresses with GNU addr2line, llvm-addr2line
// (function and file:line) and llvm-dwarfdump --lookup (file and line, for
// a few).
func checkAddr2line(t testing.TB, path string, img *image, rowsOf func(*image, int) []wantRow) {
	t.Helper()
	ls := lookups(img, rowsOf)
	args := []string{"-f", "-e", path}
	for _, l := range ls {
		args = append(args, fmt.Sprintf("%#x", l.addr))
	}
	for _, a2l := range []string{"addr2line", "llvm-addr2line-14"} {
		out := strings.Split(strings.TrimSuffix(tool(t, a2l, args...), "\n"), "\n")
		if len(out) != 2*len(ls) {
			t.Fatalf("%s printed %d lines for %d addresses", a2l, len(out), len(ls))
		}
		bad := 0
		for k, l := range ls {
			want := fmt.Sprintf("%s\n%s:%d", l.fn, l.file, l.line)
			if got := out[2*k] + "\n" + out[2*k+1]; got != want {
				if bad++; bad <= 5 {
					t.Errorf("%s %#x:\n%s\nwant\n%s", a2l, l.addr, got, want)
				}
			}
		}
	}
	for k := 0; k < len(ls); k += max(1, len(ls)/8) {
		l := ls[k]
		m := llvmLineInfo.FindStringSubmatch(tool(t, "llvm-dwarfdump-14", fmt.Sprintf("--lookup=%#x", l.addr), path))
		if m == nil || m[1] != l.file || m[2] != strconv.Itoa(l.line) {
			t.Errorf("llvm-dwarfdump --lookup=%#x: %q, want %s:%d", l.addr, m, l.file, l.line)
		}
	}
}

// TestToolsEdge runs the tools on the edge image.
func TestToolsEdge(t *testing.T) {
	code := sampleCode[elf.EM_X86_64]
	fns := []Function{
		{Name: "empty", CodeAddr: 0x1000},
		{Name: "", Code: code, CodeAddr: 0x2000},
		{Name: "with spaces and\ttabs 😀 λ", Code: code, CodeAddr: 0x9000},
		{Name: "empty at the end"},
	}
	img := writeImage(t, hostOpts, fns)
	path := img.save(t)
	checkReadelf(t, path, false, false)
	checkObjdump(t, path, img)
}
