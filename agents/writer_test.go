package agents

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/jitdump"
)

// The C writer is tested through testdata/writer_driver.c, which makes
// every call; the Go reader and checker read what it wrote.

var writerProgram = cProgram{name: "writer_driver", args: []string{"-Ijitdump", "testdata/writer_driver.c", "jitdump/jitdump_writer.c"}}

// writerDriver compiles the driver against the writer once and returns its
// path.
func writerDriver(t testing.TB) string { return writerProgram.build(t) }

type driverRun struct {
	out    map[string][]string // first word of each stdout line -> the rest of each
	stderr string
	code   int
}

func (r driverRun) get(key string) string {
	if v := r.out[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func runDriver(t *testing.T, env []string, args ...string) driverRun {
	t.Helper()
	cmd := exec.Command(writerDriver(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := driverRun{out: map[string][]string{}, stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		r.out[k] = append(r.out[k], v)
	}
	return r
}

// readDump reads every record of a dump and checks it: no error findings,
// and no warnings but those allowed.
func readDump(t *testing.T, path string, allowed ...string) (jitdump.Header, []jitdump.Record) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	findings, err := jitdump.Check(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, f := range findings {
		if f.Severity == jitdump.Error || !slices.Contains(allowed, f.Kind) {
			t.Errorf("%s: %v", path, f)
		}
	}
	r, _ = jitdump.NewBytesReader(data)
	var recs []jitdump.Record
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		recs = append(recs, rec)
	}
	return r.Header(), recs
}

// TestWriterAllRecords: every call of the writer, from one and from many
// threads at once, gives a dump the Go checker passes, with each function's
// DEBUG_INFO, CODE_LOAD and extension record adjacent and intact.
func TestWriterAllRecords(t *testing.T) {
	for _, threads := range []int{1, 8} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			const loads = 300
			dir := t.TempDir()
			begin := jitdump.Now()
			run := runDriver(t, nil, "all", dir, strconv.Itoa(threads), strconv.Itoa(loads))
			end := jitdump.Now()
			if run.code != 0 || run.stderr != "" {
				t.Fatalf("driver exit %d: %s", run.code, run.stderr)
			}
			pid, _ := strconv.Atoi(run.get("pid"))
			path := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", pid))
			if run.get("path") != path {
				t.Errorf("path %q, want %q", run.get("path"), path)
			}
			// The marker: the dump's first page, mapped private and executable.
			if m := run.get("map"); !regexp.MustCompile(`^[0-9a-f]+-[0-9a-f]+ r-xp 00000000 .* ` + regexp.QuoteMeta(path) + `$`).MatchString(m) {
				t.Errorf("marker mapping %q, want r-xp at offset 0 of %s", m, path)
			}
			if run.get("active") != "1" || run.get("after-close") != "0 0" {
				t.Errorf("active %q before close, %q after; want 1 and \"0 0\"", run.get("active"), run.get("after-close"))
			}

			h, recs := readDump(t, path, jitdump.KindUnknownRecord)
			if h.Version != 1 || h.Size != 40 || h.Pid != uint32(pid) || h.Flags != 0 || h.ByteOrder != binary.LittleEndian && runtime.GOARCH != "s390x" {
				t.Errorf("header %+v", h)
			}
			if want, _ := hostelf.Machine(); elf.Machine(h.ElfMach) != want {
				t.Errorf("elf_mach %v, want %v", elf.Machine(h.ElfMach), want)
			}
			var last uint64
			for _, rec := range recs {
				ts := rec.Header().Timestamp
				if ts < begin || ts > end || ts < last {
					t.Fatalf("timestamp %d of %s at %#x is not CLOCK_MONOTONIC in order within [%d, %d]", ts, rec.Header().Type, rec.Header().Offset, begin, end)
				}
				last = ts
			}

			// The records made before the threads start, in order.
			if len(recs) != 5+3*threads*loads+1 {
				t.Fatalf("%d records, want %d", len(recs), 5+3*threads*loads+1)
			}
			u, ok0 := recs[0].(*jitdump.UnwindingInfo)
			l, ok1 := recs[1].(*jitdump.CodeLoad)
			e, ok2 := recs[2].(*jitdump.CodeLoad)
			m, ok3 := recs[3].(*jitdump.CodeMove)
			x, ok4 := recs[4].(*jitdump.Unknown)
			if !ok0 || !ok1 || !ok2 || !ok3 || !ok4 {
				t.Fatalf("first records %T %T %T %T %T", recs[0], recs[1], recs[2], recs[3], recs[4])
			}
			if len(u.EHFrame) != 12 || len(u.EHFrameHdr) != 8 || u.MappedSize != 20 || u.EHFrame[0] != 1 || u.EHFrameHdr[0] != 13 || u.Size%8 != 0 {
				t.Errorf("unwinding info %+v", u)
			}
			if l.Name != "unwound" || l.CodeAddr != 0x5000 || l.VMA != 0x5000 || l.CodeSize != 32 || !bytes.Equal(l.Code, make([]byte, 32)) || l.Pid != uint32(pid) {
				t.Errorf("load %+v", l)
			}
			if e.Name != "" || e.CodeSize != 0 || e.CodeIndex == l.CodeIndex {
				t.Errorf("empty load %+v", e)
			}
			if m.CodeIndex != l.CodeIndex || m.OldCodeAddr != 0x5000 || m.NewCodeAddr != 0x7000 || m.VMA != 0x7000 || m.CodeSize != 32 {
				t.Errorf("move %+v", m)
			}
			if x.Type != 0x10000 || string(x.Body) != "extension payload\x00" {
				t.Errorf("extension %v %q", x.Type, x.Body)
			}
			if _, ok := recs[len(recs)-1].(*jitdump.CodeClose); !ok {
				t.Errorf("last record %T, want CODE_CLOSE", recs[len(recs)-1])
			}

			// Then each thread's loads, each group whole.
			next := make([]int, threads)
			indexes := map[uint64]bool{l.CodeIndex: true, e.CodeIndex: true}
			tids := map[uint32]bool{}
			nameRE := regexp.MustCompile(`^t(\d+)_f(\d+)$`)
			for i := 5; i+2 < len(recs); i += 3 {
				d, okd := recs[i].(*jitdump.DebugInfo)
				load, okl := recs[i+1].(*jitdump.CodeLoad)
				ext, oke := recs[i+2].(*jitdump.Unknown)
				if !okd || !okl || !oke {
					t.Fatalf("records %d-%d are %T %T %T, want DEBUG_INFO, CODE_LOAD, extension", i, i+2, recs[i], recs[i+1], recs[i+2])
				}
				sm := nameRE.FindStringSubmatch(load.Name)
				if sm == nil {
					t.Fatalf("load name %q", load.Name)
				}
				th, _ := strconv.Atoi(sm[1])
				f, _ := strconv.Atoi(sm[2])
				if f != next[th] {
					t.Fatalf("thread %d: function %d after %d", th, f, next[th]-1)
				}
				next[th]++
				addr := 0x100000*uint64(th+1) + 0x100*uint64(f)
				want := make([]byte, 64)
				for k := range want {
					want[k] = byte(addr + uint64(k))
				}
				if load.CodeAddr != addr || load.CodeSize != 64 || !bytes.Equal(load.Code, want) || d.CodeAddr != addr {
					t.Fatalf("%s: addr %#x size %d, debug info for %#x, code %x", load.Name, load.CodeAddr, load.CodeSize, d.CodeAddr, load.Code)
				}
				k := 0
				for entry := range d.Entries() {
					w := jitdump.DebugEntry{Addr: addr + 16*uint64(k), Line: uint32(f + 1 + k), Discrim: uint32(k), File: fmt.Sprintf("thread-%d.src", th)}
					if entry != w {
						t.Fatalf("%s entry %d: %+v, want %+v", load.Name, k, entry, w)
					}
					k++
				}
				if k != 3 {
					t.Fatalf("%s: %d entries", load.Name, k)
				}
				if ext.Type != 0x10001 || len(ext.Body) != 8 || binary.LittleEndian.Uint64(ext.Body) != load.CodeIndex {
					t.Fatalf("%s: extension %v %x, want its code index %d", load.Name, ext.Type, ext.Body, load.CodeIndex)
				}
				if indexes[load.CodeIndex] {
					t.Fatalf("code index %d given twice", load.CodeIndex)
				}
				indexes[load.CodeIndex] = true
				tids[load.Tid] = true
			}
			for th, n := range next {
				if n != loads {
					t.Errorf("thread %d: %d loads, want %d", th, n, loads)
				}
			}
			if len(tids) != threads {
				t.Errorf("%d distinct tids in %d threads' loads", len(tids), threads)
			}
		})
	}
}

// TestWriterDirectory: the dump goes into the directory given, else
// $JITDUMPDIR, else a new directory of its own under ~/.debug/jit, and only
// its user may read it: the directory can be /tmp.
func TestWriterDirectory(t *testing.T) {
	given, env, home := t.TempDir(), t.TempDir(), t.TempDir()
	tests := []struct {
		name string
		dir  string
		env  []string
		want string // regexp of the dump's path; PID stands for the pid
	}{
		{"given", given, []string{"JITDUMPDIR=" + env}, regexp.QuoteMeta(given) + "/jit-PID.dump"},
		{"JITDUMPDIR", "", []string{"JITDUMPDIR=" + env}, regexp.QuoteMeta(env) + "/jit-PID.dump"},
		{"home", "", []string{"JITDUMPDIR=", "HOME=" + home}, regexp.QuoteMeta(home) + `/\.debug/jit/driver-jit-\d{8}\.[A-Za-z0-9]{6}/jit-PID\.dump`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := runDriver(t, tt.env, "open", tt.dir)
			if run.code != 0 || run.stderr != "" {
				t.Fatalf("driver exit %d: %s", run.code, run.stderr)
			}
			want := strings.ReplaceAll(tt.want, "PID", run.get("pid"))
			if !regexp.MustCompile("^" + want + "$").MatchString(run.get("path")) {
				t.Fatalf("dump at %s, want %s", run.get("path"), want)
			}
			st, err := os.Stat(run.get("path"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm()&0o077 != 0 {
				t.Errorf("dump mode %v, want none for group or others", st.Mode())
			}
			_, recs := readDump(t, run.get("path"))
			if len(recs) != 1 || recs[0].Header().Type != jitdump.TypeCodeClose {
				t.Errorf("records %v, want only CODE_CLOSE", recs)
			}
		})
	}
}

// TestWriterFailures: what would make the writer fail logs one line and
// turns it off; the host goes on, and what was written stays readable.
func TestWriterFailures(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     []string
		log     string // regexp the one log line must match; "" for none
		loads   int    // CODE_LOADs the dump must hold, -1 for no dump
		allowed []string
	}{
		{name: "missing dir", args: []string{"open", "/nonexistent/dir"}, log: `^driver: cannot create the dump /nonexistent/dir/jit-\d+\.dump: No such file or directory; jitdump disabled`, loads: -1},
		{name: "dir is a file", args: []string{"open", file}, log: `: Not a directory; jitdump disabled`, loads: -1},
		{name: "no home", args: []string{"open", ""}, env: []string{"JITDUMPDIR=", "HOME=" + file}, log: `^driver: cannot create the dump ~/.debug/jit: Not a directory`, loads: -1},
		{name: "planted link", args: []string{"planted", "DIR"}, log: `: File exists; jitdump disabled`, loads: -1},
		{name: "file size limit", args: []string{"full", "DIR", "20000"}, log: `^driver: writing \S+/jit-\d+\.dump: File too large; jitdump disabled, the program goes on$`, loads: 4, allowed: []string{jitdump.KindTruncated}},
		{name: "absurd input", args: []string{"absurd", "DIR"}, log: `^driver: a function's code_size is absurd \(dump \S+\); jitdump disabled`, loads: 1},
		{name: "fork", args: []string{"fork", "DIR"}, loads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{}, tt.args...)
			if args[1] == "DIR" {
				args[1] = dir
			}
			run := runDriver(t, tt.env, args...)
			if run.code != 0 {
				t.Errorf("driver exit %d, stdout %v, stderr %s", run.code, run.out, run.stderr)
			}
			if ok := run.out["ok"]; len(ok) > 0 && ok[0] != "1" {
				t.Errorf("driver says not ok: %v", run.out)
			}
			lines := strings.Split(strings.TrimSuffix(run.stderr, "\n"), "\n")
			switch {
			case tt.log == "" && run.stderr != "":
				t.Errorf("logged %q, want nothing", run.stderr)
			case tt.log != "" && (len(lines) != 1 || !regexp.MustCompile(tt.log).MatchString(lines[0])):
				t.Errorf("logged %q, want one line matching %q", run.stderr, tt.log)
			}
			if tt.loads < 0 {
				if run.get("path") != "" {
					t.Errorf("path %q after a failed open", run.get("path"))
				}
				if entries, _ := os.ReadDir(dir); tt.name != "planted link" && len(entries) != 0 {
					t.Errorf("left %v behind", entries)
				}
				if target, err := os.Readlink(filepath.Join(dir, "jit-"+run.get("pid")+".dump")); tt.name == "planted link" && (err != nil || target != "target") {
					t.Errorf("the planted link was touched: %q, %v", target, err)
				}
				if _, err := os.Stat(filepath.Join(dir, "target")); err == nil {
					t.Error("the writer wrote through the planted link")
				}
				return
			}
			_, recs := readDump(t, run.get("path"), tt.allowed...)
			loads := 0
			for _, r := range recs {
				if l, ok := r.(*jitdump.CodeLoad); ok {
					loads++
					if l.Name != "good" || len(l.Code) != 4096 || l.Code[1] != 1 {
						t.Errorf("load %q of %d bytes", l.Name, len(l.Code))
					}
				}
			}
			if loads != tt.loads {
				t.Errorf("%d CODE_LOADs, want %d", loads, tt.loads)
			}
			if tt.name == "file size limit" {
				if st, err := os.Stat(run.get("path")); err != nil || st.Size() > 20000 {
					t.Errorf("dump grew past its limit: %v %v", st.Size(), err)
				}
				if run.get("loaded") != strconv.Itoa(tt.loads) {
					t.Errorf("the driver loaded %s before the writer stopped, the dump holds %d", run.get("loaded"), tt.loads)
				}
			}
		})
	}
}

// BenchmarkWriterCodeLoad: the C writer's cost per compiled method of a
// typical size (1 KiB of code, 20 line entries), as the driver times it.
func BenchmarkWriterCodeLoad(b *testing.B) {
	cmd := exec.Command(writerDriver(b), "bench", b.TempDir(), strconv.Itoa(max(b.N, 100)))
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("driver: %v\n%s", err, out)
	}
	_, v, ok := strings.Cut(strings.TrimSpace(string(out)), "ns/load ")
	ns, err := strconv.ParseFloat(v, 64)
	if !ok || err != nil {
		b.Fatalf("driver said %q", out)
	}
	b.ReportMetric(ns, "ns/load")
}
