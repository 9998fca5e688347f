package agents

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
)

// The collector is driven by testdata/ittjit/driver.c, which loads it as
// Intel's stub does and sends the events; the Go reader and checker read
// what it wrote and compare it with what was sent.

var ittjitProgram = cProgram{name: "ittjit_driver", args: []string{"-Iittjit", "testdata/ittjit/driver.c", "-ldl"}}

// ittjitDriver compiles the driver once and returns its path.
func ittjitDriver(t testing.TB) string { return ittjitProgram.build(t) }

// ittjitRun is what one run of the driver said.
type ittjitRun struct {
	base uint64
	rc   map[string][]string // return values by event name, in order
	logs []string            // the collector's lines on stderr
}

// runIttjit runs the driver with the collector writing into dir, under
// perfPrefix (perf record ..., or nothing), and parses its output.
func runIttjit(t *testing.T, dir string, perfPrefix []string, args ...string) ittjitRun {
	t.Helper()
	argv := append([]string{"env", "JITDUMPDIR=" + dir, "INTEL_JIT_PROFILER64=" + agentPath(t, IttJIT)}, perfPrefix...)
	argv = append(append(argv, ittjitDriver(t)), args...)
	out := runCommand(t, argv)
	run := ittjitRun{rc: map[string][]string{}}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "jitprof-ittjit: "):
			run.logs = append(run.logs, line)
		case len(f) == 2 && f[0] == "base":
			v, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
			if err != nil {
				t.Fatalf("driver: %q: %v", line, err)
			}
			run.base = v
		case len(f) == 3 && f[0] == "rc":
			run.rc[f[1]] = append(run.rc[f[1]], f[2])
		}
	}
	return run
}

// codeAt is what the driver's buffer holds at offset off, before any update.
func codeAt(off uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((off+uint64(i))*7 + 1)
	}
	return b
}

type wantLine struct {
	off  uint64 // from the driver's base
	line uint32
	file string
}

type wantLoad struct {
	name  string
	off   uint64 // from the driver's base; abs means an absolute address
	abs   bool
	size  uint64
	lines []wantLine
	code  func() []byte // nil: the untouched buffer
}

type wantInline struct {
	index            uint64
	id, parent, root uint32
	off, size        uint64
	name, file       string
	lines            []wantLine
}

// TestIttjitEvents: every event type, as the driver sends them under perf
// record, gives exactly the records the API's semantics call for; the dump
// passes the checker; perf inject --jit accepts it; bad input is dropped with
// one line each, never a crash.
func TestIttjitEvents(t *testing.T) {
	perf := fixtures.LookPath(t, "perf")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	run := runIttjit(t, dir, []string{perf, "record", "-q", "-k", "mono", "--no-bpf-event", "-e", "cpu-clock", "-o", data, "--"}, "all")

	for name, values := range run.rc {
		want := "1" // iJIT_SAMPLING_ON, or success
		if name == "unknown_type" {
			want = "0"
		}
		for _, v := range values {
			if v != want {
				t.Errorf("%s returned %s, want %s", name, v, want)
			}
		}
	}
	if len(run.rc["null_data"]) != 7 || len(run.rc["after_shutdown"]) != 1 {
		t.Fatalf("the driver did not get to the end: %v", run.rc)
	}
	wantLogs := []string{
		"no reported method", "came with no data", "event type 99", "method_id 0", "of 0 bytes was dropped",
		"line table at (nil)", "cut to its first 1048576", "code at 0x10 (16 bytes) is not readable",
	}
	for _, w := range wantLogs {
		n := 0
		for _, l := range run.logs {
			if strings.Contains(l, w) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d log lines say %q, want 1: %q", n, w, run.logs)
		}
	}
	if len(run.logs) != len(wantLogs) {
		t.Errorf("log lines: %q", run.logs)
	}

	path := onlyDump(t, dir)
	_, recs := readDump(t, path)

	updated := func() []byte { // epsilon after the driver wrote 0xcc over 0x510..0x520
		c := codeAt(0x500, 0x100)
		copy(c[0x10:0x20], bytes.Repeat([]byte{0xcc}, 0x10))
		return c
	}
	betaLines := []wantLine{{0x100, 5, "beta.src"}, {0x110, 7, "beta.src"}, {0x120, 9, "beta.src"}}
	loads := []wantLoad{
		{name: "Klass::alpha", off: 0x000, size: 0x40, lines: []wantLine{{0x000, 2, "alpha.src"}, {0x001, 4, "alpha.src"}, {0x00c, 2, "alpha.src"}}},
		{name: "beta", off: 0x100, size: 0x40, lines: betaLines},
		{name: "gamma", off: 0x200, size: 0x40},
		{name: "delta", off: 0x300, size: 0x20, lines: []wantLine{{0x300, 10, "delta.src"}}},
		{name: "delta", off: 0x400, size: 0x30, lines: []wantLine{{0x400, 11, "delta.src"}}}, // the first region's name and file
		{name: "epsilon", off: 0x500, size: 0x100},
		{name: "epsilon", off: 0x500, size: 0x100, code: updated},
		{name: "beta", off: 0x100, size: 0x40, lines: betaLines, code: func() []byte {
			c := codeAt(0x100, 0x40)
			copy(c, []byte{0x90, 0x90, 0x90, 0x90})
			return c
		}},
		{name: "zeta", off: 0x000, size: 0x40},
		{name: "alpha2", off: 0x600, size: 0x10}, // alpha's id, alpha being overwritten: a new method
		{name: "gamma2", off: 0x700, size: 0x10}, // gamma's id after its unload
		{name: "jit_method_14", off: 0x800, size: 0x10},
		{name: "huge_table", off: 0x900, size: 0x10},
		{name: "cl\uFFFD(::bad\uFFFD\uFFFD-name\uFFFD\uFFFD", off: 0xa00, size: 0x10, lines: []wantLine{{0xa00, 1, "src\uFFFD.c"}}},
		{name: "unreadable_code", off: 0x10, abs: true, size: 0x10, code: func() []byte { return make([]byte, 0x10) }},
		{name: strings.Repeat("x", 65536), off: 0xb00, size: 0x10},
	}
	inlines := func(index uint64) []wantInline {
		return []wantInline{
			{index: index, id: 7, parent: 6, root: 5, off: 0x520, size: 0x10, name: "inl_c", file: "c.src"},
			{index: index, id: 6, parent: 5, root: 5, off: 0x510, size: 0x30, name: "inl_b", file: "b.src", lines: []wantLine{{0x510, 20, ""}, {0x520, 21, ""}}},
			{index: index, id: 8, parent: 5, root: 5, off: 0x540, size: 0x20, name: "inl_d"},
		}
	}

	var gotLoads []*jitdump.CodeLoad
	var gotInlines []*jitdump.InlineInfo
	debugOf := map[int]*jitdump.DebugInfo{} // by load number
	var pending *jitdump.DebugInfo
	closed := false
	for _, rec := range recs {
		switch r := rec.(type) {
		case *jitdump.DebugInfo:
			pending = r
		case *jitdump.CodeLoad:
			if pending != nil {
				debugOf[len(gotLoads)] = pending
				pending = nil
			}
			gotLoads = append(gotLoads, r)
		case *jitdump.InlineInfo:
			gotInlines = append(gotInlines, r)
		case *jitdump.CodeClose:
			closed = true
		default:
			t.Errorf("unexpected record %s at %#x", rec.Header().Type, rec.Header().Offset)
		}
	}
	if !closed {
		t.Error("no CODE_CLOSE after SHUTDOWN")
	}
	if len(gotLoads) != len(loads) {
		names := []string{}
		for _, l := range gotLoads {
			names = append(names, l.Name[:min(len(l.Name), 20)])
		}
		t.Fatalf("%d loads, want %d: %q", len(gotLoads), len(loads), names)
	}
	at := func(off uint64, abs bool) uint64 {
		if abs {
			return off
		}
		return run.base + off
	}
	for i, w := range loads {
		g := gotLoads[i]
		if g.Name != w.name || g.CodeAddr != at(w.off, w.abs) || g.VMA != g.CodeAddr || g.CodeSize != w.size || g.CodeIndex != uint64(i+1) {
			t.Errorf("load %d: %.40q at %#x (vma %#x) size %d index %d, want %.40q at %#x size %d index %d", i, g.Name, g.CodeAddr, g.VMA, g.CodeSize, g.CodeIndex, w.name, at(w.off, w.abs), w.size, i+1)
		}
		code := codeAt(w.off, int(w.size))
		if w.code != nil {
			code = w.code()
		}
		if !bytes.Equal(g.Code, code) {
			t.Errorf("load %d (%s): code differs from what the driver's buffer held", i, w.name)
		}
		var got []wantLine
		if d := debugOf[i]; d != nil {
			if d.CodeAddr != g.CodeAddr {
				t.Errorf("load %d: DEBUG_INFO for %#x", i, d.CodeAddr)
			}
			for e := range d.Entries() {
				got = append(got, wantLine{e.Addr - run.base, e.Line, e.File})
			}
		}
		if !slices.Equal(got, w.lines) {
			t.Errorf("load %d (%s): lines %+v, want %+v", i, w.name, got, w.lines)
		}
	}

	// The inline tree after epsilon's load (index 6) and again after its
	// update (index 7); the orphan and the one into unloaded gamma dropped.
	want := append(inlines(6), inlines(7)...)
	if len(gotInlines) != len(want) {
		t.Fatalf("%d inline records, want %d", len(gotInlines), len(want))
	}
	for i, w := range want {
		g := gotInlines[i]
		var lines []wantLine
		for _, l := range g.Lines {
			lines = append(lines, wantLine{l.Addr - run.base, l.Line, ""})
		}
		if g.CodeIndex != w.index || g.MethodID != w.id || g.ParentID != w.parent || g.RootID != w.root ||
			g.CodeAddr != run.base+w.off || g.CodeSize != w.size || g.Name != w.name || g.File != w.file || !slices.Equal(lines, w.lines) {
			t.Errorf("inline %d: %+v, want %+v", i, g, w)
		}
	}

	// What the report will show: the chain inlined at an address.
	d, err := dumpindex.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	eps := d.Functions[6]
	chain := eps.InlineChain(run.base + 0x525)
	wantChain := []dumpindex.InlineFrame{{Name: "inl_b", File: "b.src", Line: 21}, {Name: "inl_c", File: "c.src"}}
	if !slices.Equal(chain, wantChain) {
		t.Errorf("inline chain at +0x525: %+v, want %+v", chain, wantChain)
	}

	// perf skips the extension records and makes an image of every load.
	fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", filepath.Join(dir, "perf.jit.data"))
	if images, _ := filepath.Glob(filepath.Join(dir, "jitted-*.so")); len(images) != len(loads) {
		t.Errorf("perf inject wrote %d images, want %d", len(images), len(loads))
	}
}

// TestIttjitThreads: compiler threads reporting at once lose nothing, each
// DEBUG_INFO stays with its load, and iJIT_GetNewMethodID never gives an id
// twice.
func TestIttjitThreads(t *testing.T) {
	const threads, perThread = 8, 500
	dir := t.TempDir()
	run := runIttjit(t, dir, nil, "threads", strconv.Itoa(threads), strconv.Itoa(perThread))
	if len(run.logs) != 0 {
		t.Errorf("the collector complained: %q", run.logs)
	}
	path := onlyDump(t, dir)
	readDump(t, path)
	d, err := dumpindex.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Functions) != threads*perThread {
		t.Fatalf("%d loads, want %d", len(d.Functions), threads*perThread)
	}
	ids := map[int]bool{}
	for _, fn := range d.Functions {
		var thread, id int
		if _, err := fmt.Sscanf(fn.Name, "t%d_%d", &thread, &id); err != nil {
			t.Fatalf("name %q: %v", fn.Name, err)
		}
		ids[id] = true
		lines := fn.Lines()
		if len(lines) != 2 || lines[0].Addr != fn.CodeAddr || lines[1].Addr != fn.CodeAddr+16 || lines[1].Line != lines[0].Line+1 || lines[0].File != "threads.src" {
			t.Fatalf("%s: lines %+v", fn.Name, lines)
		}
		k := uint64(lines[0].Line - 1)
		if want := run.base + (uint64(thread)*perThread+k)*64; fn.CodeAddr != want || fn.CodeSize != 64 || !bytes.Equal(fn.Code(), codeAt(want-run.base, 64)) {
			t.Errorf("%s: at %#x size %d, want %#x", fn.Name, fn.CodeAddr, fn.CodeSize, want)
		}
	}
	for id := 1; id <= threads*perThread; id++ {
		if !ids[id] {
			t.Fatalf("method id %d was never given out: ids repeat", id)
		}
	}
}

// TestIttjitDisabled: a dump that cannot be made or written makes the
// collector say so once and step aside; the host's calls still succeed.
func TestIttjitDisabled(t *testing.T) {
	t.Run("unwritable directory", func(t *testing.T) {
		notDir := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(notDir, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		run := runIttjit(t, notDir, nil, "all")
		if got := run.rc["initialize"]; !slices.Equal(got, []string{"0"}) || !slices.Equal(run.rc["active"], []string{"0"}) {
			t.Errorf("Initialize %v, iJIT_IsProfilingActive %v; want iJIT_NOTHING_RUNNING", got, run.rc["active"])
		}
		for name, values := range run.rc {
			if name != "initialize" && name != "active" && slices.Contains(values, "0") {
				t.Errorf("%s failed with the collector off", name)
			}
		}
		if len(run.logs) != 1 || !strings.Contains(run.logs[0], "cannot create the dump") {
			t.Errorf("log: %q", run.logs)
		}
	})
	t.Run("full disk", func(t *testing.T) {
		dir := t.TempDir()
		run := runIttjit(t, dir, nil, "full", "4096")
		if !slices.Equal(run.rc["loads"], []string{"1"}) || !slices.Equal(run.rc["active"], []string{"0"}) {
			t.Errorf("loads %v, active afterwards %v", run.rc["loads"], run.rc["active"])
		}
		if len(run.logs) != 1 || !strings.Contains(run.logs[0], "jitdump disabled") {
			t.Errorf("log: %q", run.logs)
		}
		_, recs := readDump(t, onlyDump(t, dir), jitdump.KindTruncated)
		if len(recs) < 10 {
			t.Errorf("only %d records before the disk filled", len(recs))
		}
	})
}

// TestIttjitPHP: PHP's opcache JIT, with the collector as its
// INTEL_JIT_PROFILER64, runs as usual; its dump passes the checker, perf
// inject accepts the recording, and jitprof's profile puts the jitted
// samples on functions named after the PHP functions.
func TestIttjitPHP(t *testing.T) {
	php := fixtures.LookPath(t, "php8.2")
	perf := fixtures.LookPath(t, "perf")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	out := runCommand(t, slices.Concat([]string{"env", "JITDUMPDIR=" + dir, "INTEL_JIT_PROFILER64=" + agentPath(t, IttJIT),
		perf, "record", "-q", "-k", "mono", "--no-bpf-event", "-e", "cpu-clock", "-F", "10000", "-o", data, "--",
		php}, fixtures.PHPJIT(128), []string{fixtures.Workload(t, "fib_mandel.php")}))
	if !strings.Contains(out, "75025 976575") || strings.Contains(out, "jitprof-ittjit") {
		t.Errorf("PHP's output: %q", out)
	}
	path := onlyDump(t, dir)
	_, recs := readDump(t, path)
	var names []string
	for _, r := range recs {
		if l, ok := r.(*jitdump.CodeLoad); ok {
			names = append(names, l.Name)
		}
	}
	if len(names) < 10 || names[0] != "JIT$$interrupt_handler" || !slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "$mandel$") }) {
		t.Errorf("PHP's JIT functions: %q", names)
	}

	fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", filepath.Join(dir, "perf.jit.data"))
	if images, _ := filepath.Glob(filepath.Join(dir, "jitted-*.so")); len(images) != len(names) {
		t.Errorf("perf inject wrote %d images for %d loads", len(images), len(names))
	}

	res, err := perfprof.Run(perfprof.Options{Input: data, Options: symbolizeWarn(t)})
	if err != nil {
		t.Fatal(err)
	}
	var own int64
	for _, s := range res.Profile.PProf().Sample {
		leaf := s.Location[0]
		if len(leaf.Line) == 0 {
			continue
		}
		if name := leaf.Line[len(leaf.Line)-1].Function.Name; strings.Contains(name, "$fib$") || strings.Contains(name, "$mandel$") {
			own += s.Value[0]
		}
	}
	t.Logf("%d samples, %d in jitted code, %d on functions named after fib and mandel", res.Kept, res.Jitted, own)
	if own*10 < int64(res.Jitted)*9 || own*4 < int64(res.Kept) {
		t.Errorf("only %d of %d jitted samples (%d in all) on PHP's functions", own, res.Jitted, res.Kept)
	}
}

// TestIttjitInlineProfile: a busy loop that the driver wrote, loaded with a
// line table and inlined two deep (see spin_code in the driver), is profiled
// under perf; jitprof's profile gives every sample in it the inline chain at
// its address as pprof frames, innermost first, and pprof shows them from
// `jitprof report --format pprof`.
func TestIttjitInlineProfile(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the driver's loop is x86-64 code, not %s", runtime.GOARCH)
	}
	perf := fixtures.LookPath(t, "perf")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	run := runIttjit(t, dir, []string{perf, "record", "-q", "-k", "mono", "--no-bpf-event", "-e", "cpu-clock", "-F", "4000", "-o", data, "--"}, "inline", "500")
	for _, name := range []string{"initialize", "spin", "inline_middle", "inline_inner", "spin_result", "shutdown"} {
		if got := run.rc[name]; !slices.Equal(got, []string{"1"}) {
			t.Errorf("%s returned %v, want 1", name, got)
		}
	}
	if len(run.logs) != 0 {
		t.Errorf("the collector complained: %q", run.logs)
	}

	type frame struct {
		name, file string
		line       int64
	}
	outer := func(line int64) frame { return frame{"Spinner::spin", "spin.src", line} }
	middle := func(line int64) frame { return frame{"spin_middle", "middle.src", line} }
	inner := func(line int64) frame { return frame{"spin_inner", "inner.src", line} }
	const spinSize = 0x50
	// The frames at an offset in spin, as the driver laid it out.
	want := func(off uint64) []frame {
		switch {
		case off < 0x10:
			return []frame{outer(10)}
		case off < 0x20:
			return []frame{middle(20), outer(11)}
		case off < 0x28:
			return []frame{inner(30), middle(21), outer(11)}
		case off < 0x30:
			return []frame{inner(31), middle(21), outer(11)}
		case off < 0x40:
			return []frame{middle(22), outer(11)}
		}
		return []frame{outer(12)}
	}

	res, err := perfprof.Run(perfprof.Options{Input: data, Options: symbolizeWarn(t)})
	if err != nil {
		t.Fatal(err)
	}
	var inSpin, inLoop int64
	for _, s := range res.Profile.PProf().Sample {
		leaf := s.Location[0]
		off := leaf.Address - run.base
		if leaf.Address < run.base || off >= spinSize {
			continue
		}
		n := s.Value[0]
		inSpin += n
		var got []frame
		for _, l := range leaf.Line {
			got = append(got, frame{l.Function.Name, l.Function.Filename, l.Line})
		}
		if w := want(off); !slices.Equal(got, w) {
			t.Errorf("%d samples at spin+%#x: frames %+v, want %+v", n, off, got, w)
		}
		if off >= 0x20 && off < 0x28 {
			inLoop += n
		}
	}
	t.Logf("%d samples, %d in jitted code, %d in spin, %d in the loop three frames deep", res.Kept, res.Jitted, inSpin, inLoop)
	if inSpin != int64(res.Jitted) {
		t.Errorf("%d jitted samples, but %d in spin, the only jitted code", res.Jitted, inSpin)
	}
	if inLoop < 200 || inLoop*10 < inSpin*9 {
		t.Errorf("only %d of %d samples in spin are in its loop", inLoop, inSpin)
	}

	// pprof's own reading of the report: the loop's samples in traces of
	// the three frames, the inlined two marked so.
	bin := buildJitprof(t, dir)
	prof := filepath.Join(dir, "profile.pb.gz")
	runCommand(t, []string{bin, "report", "-q", "-i", data, "--format", "pprof", "-o", prof})
	traces := runCommand(t, []string{"go", "tool", "pprof", "-traces", "-lines", prof})
	wantTrace := []string{"spin_inner inner.src:30 (inline)", "spin_middle middle.src:21 (inline)", "Spinner::spin spin.src:11"}
	var shown int64
	lines := strings.Split(traces, "\n")
	for i, l := range lines {
		count, leaf, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok || strings.TrimSpace(leaf) != wantTrace[0] || i+len(wantTrace) > len(lines) {
			continue
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil {
			t.Fatalf("pprof -traces: %q: %v", l, err)
		}
		for k, w := range wantTrace[1:] {
			if got := strings.TrimSpace(lines[i+1+k]); got != w {
				t.Errorf("pprof -traces: frame %d under spin_inner is %q, want %q", k+1, got, w)
			}
		}
		shown += n
	}
	if shown != inLoop {
		t.Errorf("pprof -traces shows %d samples under %q, the profile has %d\n%s", shown, wantTrace, inLoop, traces)
	}
}

// BenchmarkIttjitLoad: the collector's cost per METHOD_LOAD_FINISHED of a
// 64-byte method, measured in the driver (the process start is not in it).
func BenchmarkIttjitLoad(b *testing.B) {
	for _, lines := range []int{0, 8} {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) {
			dir := b.TempDir()
			cmd := exec.Command(ittjitDriver(b), "bench", strconv.Itoa(b.N), strconv.Itoa(lines))
			cmd.Env = append(os.Environ(), "JITDUMPDIR="+dir, "INTEL_JIT_PROFILER64="+agentPath(b, IttJIT))
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("%v\n%s", err, out)
			}
			_, after, _ := strings.Cut(string(out), "ns_per_event ")
			ns, err := strconv.ParseFloat(strings.TrimSpace(after), 64)
			if err != nil {
				b.Fatalf("driver said %q: %v", out, err)
			}
			b.ReportMetric(ns, "ns/event")
		})
	}
}
