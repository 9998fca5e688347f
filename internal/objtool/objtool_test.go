package objtool

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/driver"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

func TestObjToolNodeDump(t *testing.T) {
	path, d := fixtures.NodeDump(t)
	fns := fixtures.LinedFunctions(d, 3)
	if len(fns) == 0 {
		t.Fatal("node wrote no function with source lines inside its code")
	}
	fn := fns[0]
	tool := withDump(path, d)
	defer tool.Close()
	f, err := tool.Open(path, 0, ^uint64(0), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	start, end := fn.CodeAddr, fn.CodeAddr+fn.CodeSize-1
	syms, err := f.Symbols(regexp.MustCompile("^"+regexp.QuoteMeta(fn.Name)+"$"), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []*driver.Sym{{Name: []string{fn.Name}, File: path, Start: start, End: end}}
	if !reflect.DeepEqual(syms, want) {
		t.Errorf("Symbols(%q) = %v, want %v", fn.Name, syms, want)
	}
	syms, err = f.Symbols(nil, start+1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(syms, func(s *driver.Sym) bool { return s.Start == start && s.Name[0] == fn.Name }) {
		t.Errorf("Symbols(nil, %#x) = %v, without %s", start+1, syms, fn.Name)
	}

	insts, err := tool.Disasm(path, start, end, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(insts) == 0 || insts[0].Addr != start {
		t.Fatalf("Disasm(%s) starts with %v, want an instruction at %#x", fn.Name, insts[:min(1, len(insts))], start)
	}
	entries := fixtures.EntriesInside(fn)
	first := fixtures.FirstEntry(fn).Addr
	lined := 0
	for i, in := range insts {
		if in.Function != fn.Name || in.Addr > end || i > 0 && in.Addr <= insts[i-1].Addr {
			t.Fatalf("instruction %d: %+v, want one of %s after %#x", i, in, fn.Name, insts[max(i-1, 0)].Addr)
		}
		if in.Addr < first && in.Line != 0 {
			t.Errorf("%#x: line %d before the first entry, at %#x", in.Addr, in.Line, first)
		}
		e, ok := entries[in.Addr]
		if !ok {
			continue
		}
		lined++
		if in.File != e.File || in.Line != int(e.Line) {
			t.Errorf("%#x: %s:%d, want %s:%d", in.Addr, in.File, in.Line, e.File, e.Line)
		}
		frames, err := f.SourceLine(in.Addr)
		if want := []driver.Frame{{Func: fn.Name, File: e.File, Line: int(e.Line)}}; err != nil || !reflect.DeepEqual(frames, want) {
			t.Errorf("SourceLine(%#x) = %v, %v; want %v", in.Addr, frames, err, want)
		}
	}
	if lined == 0 {
		t.Errorf("no instruction of %s starts at one of its %d line entries", fn.Name, len(entries))
	}
	t.Logf("%s: %d instructions, %d at a line entry", fn.Name, len(insts), lined)

	intel, err := tool.Disasm(path, start, end, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(intel) != len(insts) || intel[0].Text == insts[0].Text && intel[1].Text == insts[1].Text {
		t.Errorf("Intel syntax: %d instructions starting %q, GNU %d starting %q", len(intel), intel[0].Text, len(insts), insts[0].Text)
	}

	// The source view asks for ranges around sampled addresses, which
	// start inside instructions and cross functions: instructions must
	// start where they do in each function's own listing.
	whole := make(map[uint64]bool)
	for _, in := range insts {
		whole[in.Addr] = true
	}
	ranged, err := tool.Disasm(path, start+1, end+500, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(ranged) == 0 || ranged[0].Addr != insts[1].Addr {
		t.Fatalf("Disasm from %#x starts at %v, want %#x", start+1, ranged[:min(1, len(ranged))], insts[1].Addr)
	}
	beyond := 0
	for _, in := range ranged {
		if in.Addr <= end && !whole[in.Addr] {
			t.Errorf("Disasm from %#x has an instruction at %#x, not one of %s", start+1, in.Addr, fn.Name)
		}
		if in.Addr > end {
			beyond++
		}
	}
	t.Logf("the range goes on into %d instructions of the functions after it", beyond)
}

// TestObjToolReuse checks which function an address means when a JIT put
// several there over time, and a moved function, on a dump written here:
// real runtimes do both, but not on demand.
func TestObjToolReuse(t *testing.T) {
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{ElfMach: uint32(elf.EM_X86_64)})
	if err != nil {
		t.Fatal(err)
	}
	nops := bytes.Repeat([]byte{0x90}, 16)
	traps := bytes.Repeat([]byte{0xcc}, 16)
	load := func(fn *jitdump.Function) uint64 {
		t.Helper()
		index, err := w.Load(fn)
		if err != nil {
			t.Fatal(err)
		}
		return index
	}
	load(&jitdump.Function{Name: "old", Addr: 0x1000, Code: nops,
		Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 1, File: "a.js"}}})
	// "same" replaces "old" exactly, "short" only the start of it.
	load(&jitdump.Function{Name: "same", Addr: 0x1000, Code: traps,
		Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 10, File: "b.js"}, {Addr: 0x1008, Line: 11, File: "b.js"}}})
	load(&jitdump.Function{Name: "short", Addr: 0x1000, Code: []byte{0x55, 0x48, 0x89, 0xe5}})
	moved := load(&jitdump.Function{Name: "moved", Addr: 0x2000, Code: []byte{0xc3},
		Lines: []jitdump.DebugEntry{{Addr: 0x2000, Line: 7, File: "c.js"}}})
	if err := w.Move(moved, 0x2000, 0x3000, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := dumpindex.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tool := withDump(path, d)
	f, err := tool.Open(path, 0x1000, 0x3001, 0, "")
	if err != nil {
		t.Fatal(err)
	}

	syms, err := f.Symbols(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range syms {
		got = append(got, strings.Join(s.Name, "|")+" "+strconv.FormatUint(s.Start, 16)+"-"+strconv.FormatUint(s.End, 16))
	}
	want := []string{"short 1000-1003", "same|old 1000-100f", "moved 2000-2000", "moved 3000-3000"}
	if !slices.Equal(got, want) {
		t.Errorf("Symbols = %q, want %q", got, want)
	}

	tests := []struct {
		start, end uint64
		want       []string // "addr text function file:line"
	}{
		// An exact range names the latest function over it.
		{0x1000, 0x1003, []string{"1000 push %rbp short :0", "1001 mov %rsp,%rbp short :0"}},
		{0x1006, 0x100f, []string{"1006 int3 same b.js:10", "1007 int3 same b.js:10", "1008 int3 same b.js:11",
			"1009 int3 same b.js:11", "100a int3 same b.js:11", "100b int3 same b.js:11", "100c int3 same b.js:11",
			"100d int3 same b.js:11", "100e int3 same b.js:11", "100f int3 same b.js:11"}},
		// Otherwise, each address is the latest function's over it.
		{0x1000, 0x1005, []string{"1000 push %rbp short :0", "1001 mov %rsp,%rbp short :0",
			"1004 int3 same b.js:10", "1005 int3 same b.js:10"}},
		// Lines move with the code; gaps are skipped.
		{0x100f, 0x3000, []string{"100f int3 same b.js:11", "2000 retq moved c.js:7", "3000 retq moved c.js:7"}},
		{0x4000, 0x5000, nil},
	}
	for _, tt := range tests {
		insts, err := tool.Disasm(path, tt.start, tt.end, false)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, in := range insts {
			got = append(got, strconv.FormatUint(in.Addr, 16)+" "+in.Text+" "+in.Function+" "+in.File+":"+strconv.Itoa(in.Line))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Disasm(%#x, %#x):\n\t%s\nwant\n\t%s", tt.start, tt.end, strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
		}
	}

	for addr, want := range map[uint64]driver.Frame{
		0x1002: {Func: "short"},
		0x1009: {Func: "same", File: "b.js", Line: 11},
		0x3000: {Func: "moved", File: "c.js", Line: 7},
	} {
		if frames, err := f.SourceLine(addr); err != nil || !reflect.DeepEqual(frames, []driver.Frame{want}) {
			t.Errorf("SourceLine(%#x) = %v, %v; want %v", addr, frames, err, want)
		}
	}
	if frames, err := f.SourceLine(0x2800); err == nil {
		t.Errorf("SourceLine(0x2800) = %v, want an error: no function is there", frames)
	}
}

// TestObjToolELF reads the symbols and code of executables: the go
// command, which is always there and keeps its symbol table, and node's,
// a C++ program, when it has one (NodeSource's does, Debian's is stripped).
func TestObjToolELF(t *testing.T) {
	tests := []struct {
		cmd, fn string
		named   string // part of a target fn's instructions name
	}{
		{"go", "main.main", "<runtime.morestack_noctxt"},
		// main goes to node::Start, whose name is demangled as perf does.
		{"node", "main", "<node::Start>"},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			path, err := exec.LookPath(tt.cmd)
			if err != nil {
				t.Skip(err)
			}
			tool := newTool(nil)
			defer tool.Close()
			f, err := tool.Open(path, 0, ^uint64(0), 0, "")
			if err != nil {
				t.Fatal(err)
			}
			rx := regexp.MustCompile("^" + regexp.QuoteMeta(tt.fn) + "$")
			syms, err := f.Symbols(rx, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(syms) == 0 && tt.cmd == "node" {
				t.Skipf("%s has no symbol %s", path, tt.fn)
			}
			if len(syms) != 1 {
				t.Fatalf("Symbols(%s) = %v, want one symbol", tt.fn, syms)
			}
			sym := syms[0]
			insts, err := tool.Disasm(path, sym.Start, sym.End, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(insts) == 0 || insts[0].Addr != sym.Start {
				t.Fatalf("Disasm(%s) = %v, want instructions from %#x", tt.fn, insts, sym.Start)
			}
			named := 0
			for i, in := range insts {
				if in.Function != tt.fn || in.Addr > sym.End || i > 0 && in.Addr <= insts[i-1].Addr {
					t.Fatalf("instruction %d: %+v", i, in)
				}
				if strings.Contains(in.Text, tt.named) {
					named++
				}
			}
			if named == 0 {
				t.Errorf("none of the %d instructions of %s has %q", len(insts), tt.fn, tt.named)
			}

			// A mapping of another part of the file holds no such function.
			f, err = tool.Open(path, 0x1000, 0x2000, 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if syms, err := f.Symbols(rx, 0); err != nil || len(syms) != 0 {
				t.Errorf("Symbols(%s) in a mapping of the file's first page = %v, %v; want none", tt.fn, syms, err)
			}
		})
	}
}

// TestObjToolELFBase checks the translation of run-time addresses to a
// file's own on a position-independent executable mapped at a random
// address: sleep's entry point, which the kernel tells in its auxiliary
// vector, must come out as the ELF header's.
func TestObjToolELFBase(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(sleep, "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	proc := "/proc/" + strconv.Itoa(cmd.Process.Pid)

	// Start returns once the child is past the point of no return in
	// execve, which may be before the kernel has written the auxiliary
	// vector.
	var entry uint64
	for deadline := time.Now().Add(5 * time.Second); entry == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		auxv, err := os.ReadFile(proc + "/auxv")
		if err != nil {
			t.Skip(err)
		}
		for i := 0; i+16 <= len(auxv); i += 16 {
			if binary.NativeEndian.Uint64(auxv[i:]) == 9 { // AT_ENTRY
				entry = binary.NativeEndian.Uint64(auxv[i+8:])
			}
		}
	}
	maps, err := os.ReadFile(proc + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(maps)) {
		// 55d4c0a00000-55d4c0a04000 r-xp 00002000 08:01 1234 /usr/bin/sleep
		fields := strings.Fields(line)
		if len(fields) < 6 || fields[5] != exe || !strings.Contains(fields[1], "x") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		limit, _ := strconv.ParseUint(hi, 16, 64)
		offset, _ := strconv.ParseUint(fields[2], 16, 64)

		ef, err := elf.Open(exe)
		if err != nil {
			t.Fatal(err)
		}
		defer ef.Close()
		tool := newTool(nil)
		defer tool.Close()
		f, err := tool.Open(exe, start, limit, offset, "")
		if err != nil {
			t.Fatal(err)
		}
		if addr, err := f.ObjAddr(entry); err != nil || addr != ef.Entry {
			t.Errorf("ObjAddr(%#x) in %s mapped at %#x from %#x = %#x, %v; want the entry point, %#x",
				entry, exe, start, offset, addr, err, ef.Entry)
		}
		return
	}
	t.Fatalf("no executable mapping of %s in\n%s", exe, maps)
}

// withDump returns a tool for the dump d, read already, at path.
func withDump(path string, d *dumpindex.Dump) *Tool {
	t := newTool(nil)
	t.dumps[path] = d
	return t
}
