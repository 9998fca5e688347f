package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"github.com/jitprof/jitprof/internal/contract"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/fixtures"
)

func TestReportFormats(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node, "-g")
	jitted := fixtures.JITNames(t, rec.Dumps)
	anyJIT := func(s string) bool {
		for name := range jitted {
			if strings.Contains(s, name) {
				return true
			}
		}
		return false
	}
	dir := t.TempDir()

	code, text := jitprof(t, "report", "-i", rec.PerfData, "-q")
	if code != 0 || !anyJIT(text) || !strings.Contains(text, "Overhead") {
		t.Errorf("text report (exit %d) has no jitted function:\n%.2000s", code, text)
	}
	code, graph := jitprof(t, "report", "-i", rec.PerfData, "-q", "--children", "-g", "--sort", "symbol")
	if code != 0 || !anyJIT(graph) || len(graph) <= len(text)/4 {
		t.Errorf("--children -g report (exit %d):\n%.2000s", code, graph)
	}

	code, js := jitprof(t, "report", "-i", rec.PerfData, "-q", "--format", "json")
	var decoded map[string]any
	if err := json.Unmarshal([]byte(js), &decoded); code != 0 || err != nil || !anyJIT(js) {
		t.Errorf("json report (exit %d, %v):\n%.2000s", code, err, js)
	}

	folded := filepath.Join(dir, "out.folded")
	if code, _ := jitprof(t, "report", "-i", rec.PerfData, "-q", "--format", "folded", "-o", folded); code != 0 {
		t.Fatalf("folded: exit %d", code)
	}
	data, err := os.ReadFile(folded)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^[^\n]+ \d+$`)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for _, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("folded line %q is not `frames count`", l)
		}
	}
	if len(lines) < 10 || !anyJIT(string(data)) {
		t.Errorf("%d folded stacks, jitted functions in them: %v", len(lines), anyJIT(string(data)))
	}

	pb := filepath.Join(dir, "out.pb.gz")
	p := reportPprof(t, rec.PerfData, pb)
	for _, m := range p.Mapping {
		if !m.HasFunctions || !m.HasLineNumbers {
			t.Errorf("mapping %s lacks Has* flags: pprof would symbolize it again", m.File)
		}
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", pb).CombinedOutput()
	if err != nil || !anyJIT(string(top)) {
		t.Errorf("go tool pprof -top: %v\n%.2000s", err, top)
	}

	if code, _ := jitprof(t, "report", "-i", rec.PerfData, "-q", "--format", "pprof"); code != 2 {
		t.Errorf("pprof to a terminal: exit %d, want 2", code)
	}
	if code, _ := jitprof(t, "report", "-i", rec.PerfData, "-q", "--sort", "colour"); code != 2 {
		t.Errorf("an unknown sort key: exit %d, want 2", code)
	}
	if code, _ := jitprof(t, "report", "-i", filepath.Join(dir, "missing.data"), "-q"); code != 1 {
		t.Errorf("a missing recording: exit %d, want 1", code)
	}
}

// TestReportFilters: each filter keeps a part of the samples, and the parts
// add up where they should.
func TestReportFilters(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node)
	total := func(args ...string) int {
		t.Helper()
		code, out := jitprof(t, append([]string{"report", "-i", rec.PerfData, "-q", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("report %v: exit %d\n%s", args, code, out)
		}
		var r struct {
			Total int64 `json:"total"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return int(r.Total)
	}
	all := total()
	if all == 0 {
		t.Fatal("no samples")
	}
	pid := strconv.Itoa(rec.Pid)
	if n := total("--pid", pid); n == 0 || n > all {
		t.Errorf("--pid %s keeps %d of %d", pid, n, all)
	}
	if n := total("--pid", "1"); n != 0 {
		t.Errorf("--pid 1 keeps %d", n)
	}
	if n := total("--comm", "node"); n == 0 {
		t.Errorf("--comm node keeps nothing")
	}
	// Split the recording's time in two: the halves add up to the whole.
	script := string(fixtures.Perf(t, "script", "-i", rec.PerfData, "-F", "time"))
	times := strings.Fields(script)
	mid := strings.TrimSuffix(times[len(times)/2], ":")
	first, second := total("--time", ","+mid), total("--time", mid+",")
	if first == 0 || second == 0 || first+second != all {
		t.Errorf("--time halves at %s: %d + %d, want %d", mid, first, second, all)
	}
	if n := total("--symbol", "fib"); n == 0 || n >= all {
		t.Errorf("--symbol fib keeps %d of %d", n, all)
	}
}

// TestReportWebUI serves the web UI from the command and finds a jitted
// function in the flame graph page of the URL it printed, which holds the
// token; without the token, or with --source-dir alone, it refuses.
func TestReportWebUI(t *testing.T) {
	for _, args := range [][]string{{"--source-dir", t.TempDir()}, {"--http", "127.0.0.1:0", "--source-dir", "/nonexistent"}} {
		if code, _ := jitprof(t, append([]string{"report", "-q", "-i", "/nonexistent"}, args...)...); code != 2 {
			t.Errorf("report %q: exit %d, want 2", args, code)
		}
	}
	rec := fixtures.Record(t, fixtures.Node, "-g")
	bin := buildJitprof(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "report", "-i", rec.PerfData, "--http", "127.0.0.1:0", "--no-browser")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(os.Interrupt)
	url := ""
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if m := regexp.MustCompile(`serving the profile on (\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
			break
		}
	}
	if url == "" {
		t.Fatal("jitprof report --http never said where it serves")
	}
	go io.Copy(io.Discard, stderr)
	fetch := func(u string) (*http.Response, []byte) {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, page
	}
	resp, page := fetch(url) // /ui/ sends the browser on to the flame graph
	found := false
	for name := range fixtures.JITNames(t, rec.Dumps) {
		found = found || bytes.Contains(page, []byte(name))
	}
	if resp.StatusCode != http.StatusOK || !found {
		t.Errorf("flame graph page of %s (%s): no jitted function in its %d bytes", url, resp.Status, len(page))
	}
	bare, _, _ := strings.Cut(url, "?")
	if resp, page := fetch(bare + "flamegraph"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the flame graph without the token: %s, want 403:\n%s", resp.Status, page)
	}
}

// reportPprof writes the pprof profile of the recording data to pb and
// returns it as pprof reads it.
func reportPprof(t *testing.T, data, pb string) *profile.Profile {
	t.Helper()
	if code, out := jitprof(t, "report", "-q", "-i", data, "--format", "pprof", "-o", pb); code != 0 {
		t.Fatalf("report --format pprof: exit %d\n%s", code, out)
	}
	return fixtures.ReadProfile(t, pb)
}

func buildJitprof(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jitprof")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// timedBound bounds one timed run; they take seconds.
const timedBound = 5 * time.Minute

// timed runs argv and returns its wall time and standard error. A run
// still going after timedBound is stopped with SIGQUIT, sent to its process
// group so that jitprof gets it under GNU time too, and the test fails
// with its standard error, which then ends with the stack of each of
// jitprof's goroutines.
func timed(t testing.TB, argv ...string) (time.Duration, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timedBound)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	begin := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after %v, stopped with SIGQUIT: %v\n%s", strings.Join(argv, " "), timedBound, err, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return time.Since(begin), stderr.String()
}

// timedPeak is timed, also returning argv's peak resident memory, which GNU
// time measures: the rusage of a child Go starts says more, since Go starts
// it with vfork and the kernel carries the parent's peak over the exec.
func timedPeak(t testing.TB, argv ...string) (time.Duration, int64) {
	t.Helper()
	wall, stderr := timed(t, append([]string{"/usr/bin/time", "-f", "peak %M"}, argv...)...)
	i := strings.LastIndex(stderr, "peak ")
	kb, err := strconv.ParseInt(strings.TrimSpace(stderr[max(i, 0)+len("peak "):]), 10, 64)
	if i < 0 || err != nil {
		t.Fatalf("no peak memory from GNU time in %q", stderr)
	}
	return wall, kb * 1024
}

func size(t testing.TB, paths ...string) int64 {
	var n int64
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// TestReportSpeed: on a recording of over 100,000 samples with call chains,
// jitprof report --children -g is at least 3x faster than perf inject --jit
// plus perf report --stdio (which shows children and call graphs for such a
// recording), and its peak memory stays under twice the input's size
// (perf.data and dumps).
func TestReportSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("records for 10 s and runs perf for 30 s")
	}
	rec := fixtures.Record(t, fixtures.NodeBig, "-g")
	bin := buildJitprof(t)
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "perf.jit.data")
	// As fixtures.Perf does: perf's build-id cache would cost it more.
	nocache := []string{perf, "--buildid-dir", "/dev/null/no-buildid-cache"}
	injectTime, _ := timed(t, append(nocache, "inject", "--jit", "-i", rec.PerfData, "-o", out)...)
	reportTime, _ := timed(t, append(nocache, "report", "-i", out, "--stdio")...)
	ours, rss := timedPeak(t, bin, "report", "-i", rec.PerfData, "--children", "-g", "-q")
	theirs := injectTime + reportTime

	input := size(t, append([]string{rec.PerfData}, rec.Dumps...)...)
	code, js := jitprof(t, "report", "-i", rec.PerfData, "-q", "--format", "json")
	var r struct {
		Total int64 `json:"total"`
	}
	if err := json.Unmarshal([]byte(js), &r); code != 0 || err != nil {
		t.Fatalf("json: exit %d, %v", code, err)
	}
	t.Logf("%d samples, input %.1f MB: perf inject %.2f s + perf report %.2f s = %.2f s; jitprof report %.2f s (%.1fx), peak RSS %.1f MB (%.2fx the input)",
		r.Total, float64(input)/1e6, injectTime.Seconds(), reportTime.Seconds(), theirs.Seconds(), ours.Seconds(),
		theirs.Seconds()/ours.Seconds(), float64(rss)/1e6, float64(rss)/float64(input))
	if r.Total < 100_000 {
		t.Errorf("only %d samples: the target is set for 100,000 or more", r.Total)
	}
	if theirs < 3*ours {
		t.Errorf("jitprof report took %v, perf inject + report %v: less than 3x faster", ours, theirs)
	}
	if rss >= 2*input {
		t.Errorf("jitprof report's peak RSS is %.1f MB, not under twice the input's %.1f MB", float64(rss)/1e6, float64(input)/1e6)
	}
}

// TestAnnotateAgainstPerf: jitprof annotate, straight from the recording,
// puts on each instruction of a jitted function the samples perf annotate
// puts there after perf inject, and gives the source line of each.
func TestAnnotateAgainstPerf(t *testing.T) {
	rec := fixtures.Record(t, fixtures.LLVM)
	perfOut := string(fixtures.Perf(t, "annotate", "-i", fixtures.Inject(t, rec), "--stdio", "-n", "-s", "fib"))
	perfLine := regexp.MustCompile(`^\s+(\d+) :\s+[0-9a-f]+:\s`)
	var want []string
	for l := range strings.Lines(perfOut) {
		if m := perfLine.FindStringSubmatch(l); m != nil {
			want = append(want, m[1])
		}
	}
	code, out := jitprof(t, "annotate", "fib", "-i", rec.PerfData, "-q")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	// "   47.48       66  7f0f4e0380bf      jge 0x7f0f4e0380c7    fib_sq.c:2"
	ours := regexp.MustCompile(`^\s*(?:[0-9.]+\s+(\d+)\s+)?([0-9a-f]{6,})\s+(.*\S)\s+(\S+:\d+)$`)
	var got []string
	for l := range strings.Lines(out) {
		m := ours.FindStringSubmatch(strings.TrimRight(l, "\n"))
		if m == nil {
			continue
		}
		if !strings.HasPrefix(m[4], "fib_sq.c:") {
			t.Errorf("instruction %s has source %s, want fib_sq.c", m[2], m[4])
		}
		got = append(got, cmp.Or(m[1], "0"))
	}
	if len(want) == 0 || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("samples per instruction:\njitprof %v\nperf    %v\n%s", got, want, out)
	}
	if code, _ := jitprof(t, "annotate", "no_such_function", "-i", rec.PerfData, "-q"); code != 1 {
		t.Errorf("an unknown function: exit %d, want 1", code)
	}
}

// demoData is the recording of minijit the repository holds, with call
// chains, beside its dump.
const demoData = "../../testdata/demo/perf.data"

// TestCallGraphOrderFlags: perf report's spellings of the call graph order
// give the same reports; -g alone is the order of a report without
// --call-graph's value; a chain of one branch reads the same both ways,
// reversed; what is not an order is refused before the recording is read.
func TestCallGraphOrderFlags(t *testing.T) {
	report := func(args ...string) string {
		t.Helper()
		code, out := jitprof(t, append([]string{"report", "-q", "-i", demoData}, args...)...)
		if code != 0 {
			t.Fatalf("report %q: exit %d", args, code)
		}
		return out
	}
	for _, same := range [][][]string{
		{{"-g", "caller"}, {"--call-graph=caller"}, {"-g=caller"}, {"--call-graph", "caller"}},
		{{"-g"}, {"-g", "graph"}, {"-g", "callee"}, {"--call-graph"}},
		{{"--children", "-g"}, {"--children", "-g", "caller"}},
	} {
		want := report(same[0]...)
		for _, args := range same[1:] {
			if got := report(args...); got != want {
				t.Errorf("report %q differs from report %q:\n%s\n---\n%s", args, same[0], got, want)
			}
		}
	}

	// With no branch hidden, a graph of one chain is every stack of its entry.
	callee, caller := perfGraphs(report("-g", "--graph-limit", "0")), perfGraphs(report("-g", "caller", "--graph-limit", "0"))
	chains := 0
	for entry, g := range callee {
		if len(g) < 3 || strings.TrimSpace(g[0]) != "|" || strings.Contains(strings.Join(g, "\n"), "%--") {
			continue // a graph with branches
		}
		chain := func(g []string) []string {
			var c []string
			for _, l := range g[1:] {
				c = append(c, strings.TrimPrefix(strings.TrimSpace(l), "---"))
			}
			return c
		}
		want := chain(g)
		slices.Reverse(want)
		if got := chain(caller[entry]); !slices.Equal(got, want) {
			t.Errorf("%s: caller order %q, want the callee order reversed, %q", entry, got, want)
		}
		chains++
	}
	t.Logf("%d entries with a graph of one chain", chains)
	if chains == 0 {
		t.Error("no entry has a call graph of one chain")
	}

	for _, args := range [][]string{{"-g", "callers"}, {"--call-graph=graph,0.5,caller"}, {"caller"}, {"-g", "caller", "extra"}} {
		if code, _ := jitprof(t, append([]string{"report", "-q", "-i", "/nonexistent"}, args...)...); code != 2 {
			t.Errorf("report %q: exit %d, want 2", args, code)
		}
	}
}

// perfEntry is a line of perf report --stdio that starts an entry: its
// percentages, samples and keys, the symbol after "[.] " or "[k] ".
var perfEntry = regexp.MustCompile(`^\s+[\d.]+%\s+(?:[\d.]+%\s+)?\d+\s+(.*\[[.k]\] .*)$`)

// perfGraphs splits a report that perf report --stdio -n or jitprof report
// printed into the call graph lines of each entry, ends of lines trimmed,
// by the entry's keys (spaces between them made one). An entry that
// appears twice, as perf lists a function loaded twice, is left out.
func perfGraphs(text string) map[string][]string {
	graphs := make(map[string][]string)
	twice := make(map[string]bool)
	key := ""
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, " \n")
		switch m := perfEntry.FindStringSubmatch(l); {
		case strings.HasPrefix(l, "#"):
		case m != nil:
			key = strings.Join(strings.Fields(m[1]), " ")
			if _, ok := graphs[key]; ok {
				twice[key] = true
			}
			graphs[key] = []string{}
		case l == "":
			key = ""
		case key != "":
			graphs[key] = append(graphs[key], l)
		}
	}
	for k := range twice {
		delete(graphs, k)
	}
	return graphs
}

// TestCallGraphOrderAgainstPerf: on a recording of LLVM's JIT with call
// chains, after jitprof inject, every entry whose callee-ordered graph
// jitprof prints as perf report does (no unresolved frame, which perf
// lists by address and jitprof by module) has its caller-ordered graph
// printed as perf report -g caller prints it, line for line.
func TestCallGraphOrderAgainstPerf(t *testing.T) {
	rec := fixtures.Record(t, fixtures.LLVM, "-g")
	injected := filepath.Join(t.TempDir(), "perf.jit.data")
	if code, out := jitprof(t, "inject", "-q", "-i", rec.PerfData, "-o", injected); code != 0 {
		t.Fatalf("inject: exit %d\n%s", code, out)
	}
	// perf's default sort: with --sort sym alone, perf 6.1's caller order
	// leaves out each chain's outermost frame.
	// perf names the module of jitted code after inject's image,
	// jitprof-PID.so, where jitprof names the dump.
	image := regexp.MustCompile(`jitprof-(\d+)\.so`)
	perfGraph := func(order string) map[string][]string {
		out := fixtures.Perf(t, "report", "-i", injected, "--stdio", "--no-children", "-n", "-g", order)
		return perfGraphs(image.ReplaceAllString(string(out), "jit-$1.dump"))
	}
	ours := func(order string) map[string][]string {
		code, out := jitprof(t, "report", "-q", "-i", rec.PerfData, "-g", order)
		if code != 0 {
			t.Fatalf("report -g %s: exit %d", order, code)
		}
		return perfGraphs(out)
	}
	perfCallee, perfCaller := perfGraph("callee"), perfGraph("caller")
	ourCallee, ourCaller := ours("callee"), ours("caller")
	compared, jitted := 0, false
	for entry, g := range ourCallee {
		text := strings.Join(slices.Concat(g, ourCaller[entry]), "\n")
		if len(g) == 0 || strings.Contains(text, unknownFrame) || !slices.Equal(graphPaths(g), graphPaths(perfCallee[entry])) {
			if strings.HasSuffix(entry, ".dump [.] fib") {
				t.Logf("%s, -g callee:\njitprof\n%s\nperf\n%s", entry, strings.Join(g, "\n"), strings.Join(perfCallee[entry], "\n"))
			}
			continue
		}
		got, want := ourCaller[entry], perfCaller[entry]
		if !slices.Equal(frameNames(got, g), frameNames(want, perfCallee[entry])) {
			// A frame the two name differently (ld.so's entry is _start to
			// jitprof, _dl_start_user to perf) that the callee order hid
			// below the limit.
			continue
		}
		compared++
		jitted = jitted || strings.HasSuffix(entry, ".dump [.] fib")
		if !slices.Equal(graphPaths(got), graphPaths(want)) {
			t.Errorf("%s, -g caller:\njitprof\n%s\nperf\n%s", entry, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	t.Logf("%d entries compared of %d with call graphs", compared, len(ourCallee))
	if compared < 3 || !jitted {
		t.Errorf("%d entries compared, jitted fib among them: %v; want 3 or more, fib included", compared, jitted)
	}
}

// graphPaths returns a call graph as perf report --stdio draws it as the
// path from its top of each frame, with the percentage of the branch it is
// in, sorted: graphs that differ only in the order of branches of equal
// value (perf and jitprof break such ties differently) give the same.
func graphPaths(graph []string) []string {
	type node struct {
		col   int // where its names start
		path  string
		value string
	}
	var stack []node
	var paths []string
	for _, l := range graph {
		col := len(l) - len(strings.TrimLeft(l, " |"))
		text := l[col:]
		switch {
		case text == "":
			continue
		case strings.HasPrefix(text, "---"): // the trunk
			col += len("---")
			stack = []node{{col: col, value: "trunk"}}
			text = text[len("---"):]
		case strings.HasPrefix(text, "--"): // a branch, drawn from its parent's column
			value, name, _ := strings.Cut(text[len("--"):], "--")
			for len(stack) > 0 && stack[len(stack)-1].col >= col {
				stack = stack[:len(stack)-1]
			}
			parent := ""
			if len(stack) > 0 {
				parent = stack[len(stack)-1].path
			}
			col += len("--" + value + "--")
			stack = append(stack, node{col: col, path: parent, value: value})
			text = name
		default: // the next frame of the node whose names start here
			for len(stack) > 0 && stack[len(stack)-1].col > col {
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) == 0 {
			return append(paths, "unparsed: "+l)
		}
		top := &stack[len(stack)-1]
		top.path += ";" + text
		paths = append(paths, top.value+" "+top.path)
	}
	slices.Sort(paths)
	return paths
}

// frameNames returns the names of the frames in the lines of call graphs,
// sorted, without repeats.
func frameNames(graphs ...[]string) []string {
	var names []string
	for _, l := range slices.Concat(graphs...) {
		l = strings.TrimLeft(l, " |-")
		if _, name, ok := strings.Cut(l, "%--"); ok {
			l = name
		}
		if l != "" {
			names = append(names, l)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// unknownFrame is how jitprof names an unresolved frame in a call graph.
const unknownFrame = "[unknown]"

// TestPprofNamesAgainstV8: jitprof record on node, then jitprof report
// --format pprof: each named JavaScript function carries the name, script
// and line V8's own profiler (node --cpu-prof, run at the same time) gives
// it, a location's column is V8's where the dump has no line, go tool pprof
// -top and -traces show the whole names, and the program pprof names is
// node.
func TestPprofNamesAgainstV8(t *testing.T) {
	workload := fixtures.Workload(t, "jsnames/main.js")
	dir := t.TempDir()
	t.Chdir(dir) // node writes its dump in the working directory
	data := filepath.Join(dir, "perf.data")
	if code, _, stderr := jitprofMsg(t, "record", "-q", "-g", "-F", "4000", "-o", data, "--", "node", "--cpu-prof", "--cpu-prof-dir", dir, workload); code != 0 {
		t.Fatalf("record: exit %d:\n%s", code, stderr)
	}
	pb := filepath.Join(dir, "profile.pb.gz")
	p := reportPprof(t, data, pb)

	// V8's functions, in perf's 1-based lines and columns. V8's profile
	// lists only the functions its own sampler saw, and it gives inlined
	// code to the caller: a function TurboFan inlined soon after its start
	// may never be seen (a CI run missed flatMap so). Where a function is
	// is a fact of the script, so a second run without inlining, where
	// every function runs its own code, makes the list whole.
	type place struct {
		name, file   string
		line, column int64
	}
	whole := filepath.Join(dir, "no-inlining")
	if out, err := exec.Command("node", "--no-turbo-inlining", "--cpu-prof", "--cpu-prof-dir", whole, "--cpu-prof-interval", "250", workload).CombinedOutput(); err != nil {
		t.Fatalf("node --no-turbo-inlining: %v\n%s", err, out)
	}
	v8 := map[place]bool{}
	v8Start := map[[3]string]int64{} // V8's column, by name, script and line
	for _, d := range []string{dir, whole} {
		cpuprofiles, _ := filepath.Glob(filepath.Join(d, "*.cpuprofile"))
		if len(cpuprofiles) != 1 {
			t.Fatalf("node --cpu-prof wrote %q", cpuprofiles)
		}
		raw, err := os.ReadFile(cpuprofiles[0])
		if err != nil {
			t.Fatal(err)
		}
		var cpuprofile struct {
			Nodes []struct {
				CallFrame struct {
					FunctionName string `json:"functionName"`
					URL          string `json:"url"`
					LineNumber   int64  `json:"lineNumber"`
					ColumnNumber int64  `json:"columnNumber"`
				} `json:"callFrame"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(raw, &cpuprofile); err != nil {
			t.Fatal(err)
		}
		for _, n := range cpuprofile.Nodes {
			cf := n.CallFrame
			pl := place{cf.FunctionName, strings.TrimPrefix(cf.URL, "file://"), cf.LineNumber + 1, cf.ColumnNumber + 1}
			v8[place{pl.name, pl.file, pl.line, 0}] = true
			v8Start[[3]string{pl.name, pl.file, strconv.FormatInt(pl.line, 10)}] = pl.column
		}
	}

	tier := regexp.MustCompile(`^JS:o?[~^+*]'?`)
	self := map[*profile.Function]int64{}
	for _, s := range p.Sample {
		if l := s.Location[0].Line; len(l) > 0 {
			self[l[len(l)-1].Function] += s.Value[0]
		}
	}
	workloadFns := map[string]bool{}
	for _, loc := range p.Location {
		for _, ln := range loc.Line {
			fn := ln.Function
			// An inlined function V8's positions gave is one of its own
			// functions too, named as such with a suffix.
			shown := tier.ReplaceAllString(strings.TrimSuffix(fn.Name, contract.InferredSuffix), "")
			if fn.Name == fn.SystemName || shown == fn.Name || !strings.Contains(fn.Filename, "jsnames") {
				continue // not a function of the workload's, split for pprof
			}
			// V8's profile names a function without a name "", where
			// DevTools, and jitprof, show "(anonymous)" and its place.
			name := shown
			if strings.HasPrefix(shown, "(anonymous) ") {
				name = ""
			}
			if !v8[place{name, fn.Filename, fn.StartLine, 0}] {
				// V8's profiles hold the functions its own sampler
				// caught: one run briefly (a callback at start-up, the
				// class's constructor, run once) may be missing from both
				// runs, the more so with no core to spare for the
				// sampler's thread (a CI run beside busy loops missed
				// Checker's constructor so). The source says where a
				// function starts and what it is called, independently of
				// either profiler.
				if !startsFunction(t, fn.Filename, name, fn.StartLine, startColumn(fn)) {
					t.Errorf("%q (%s:%d) is not a function of V8's profiles, nor one the source starts there with that name", fn.Name, fn.Filename, fn.StartLine)
				}
				continue
			}
			if want := v8Start[[3]string{name, fn.Filename, strconv.FormatInt(fn.StartLine, 10)}]; ln.Column != 0 && ln.Column != want {
				t.Errorf("%q at %#x: column %d, V8's %d", fn.Name, loc.Address, ln.Column, want)
			}
			if self[fn] > 0 {
				workloadFns[shown] = true
			}
		}
	}
	t.Logf("the workload's named functions with samples: %v", slices.Sorted(maps.Keys(workloadFns)))
	if len(workloadFns) < 3 {
		t.Errorf("%d of the workload's named functions have samples, want 3 or more", len(workloadFns))
	}

	top, err := exec.Command("go", "tool", "pprof", "-top", pb).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, top)
	}
	traces, err := exec.Command("go", "tool", "pprof", "-traces", pb).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -traces: %v\n%s", err, traces)
	}
	if !strings.HasPrefix(string(top), "File: node\n") {
		t.Errorf("go tool pprof -top names the program %.40q, want node", top)
	}
	lines, err := exec.Command("go", "tool", "pprof", "-top", "-lines", pb).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top -lines: %v\n%s", err, lines)
	}
	inTop := 0
	for name := range workloadFns {
		frame := regexp.MustCompile(`(?m)\sJS:[~^+*]` + regexp.QuoteMeta(name) + `(` + regexp.QuoteMeta(contract.InferredSuffix) + `)?$`)
		if frame.Match(top) {
			inTop++
		}
		if !frame.Match(traces) {
			t.Errorf("go tool pprof -traces has no frame JS:%s", name)
		}
	}
	// -top lists what is above 0.5% of the samples.
	if inTop < 2 {
		t.Errorf("go tool pprof -top lists %d of %v by their names:\n%s", inTop, slices.Sorted(maps.Keys(workloadFns)), top)
	}
	if !regexp.MustCompile(`\sJS:[~^+*]check /\S+/ts\.lib/_tsc\.js:\d+\n`).Match(lines) {
		t.Errorf("go tool pprof -top -lines has no line of JS:check in _tsc.js:\n%s", lines)
	}
}

// startColumn is the column a V8 function's perf name gives:
// "JS:~(anonymous) main.js:9:43".
func startColumn(fn *profile.Function) int64 {
	name := contract.PerfName(fn) // a named function's Name is cut short for pprof
	i := strings.LastIndexByte(name, ':')
	col, _ := strconv.ParseInt(strings.TrimSuffix(name[i+1:], contract.InferredSuffix), 10, 64)
	return col
}

// functionStart is how a function's source starts where V8 says it does: a
// function expression, or the parameters of an arrow function, a method or
// a named function.
var functionStart = regexp.MustCompile(`^(function\b|\(|[A-Za-z_$][\w$]*\s*=>)`)

// startsFunction tells whether line and column (from 1) of file start a
// function that the source names name ("get total" for a getter, the
// class's name for its constructor; "" for a nameless one): one of the
// source's, or the script's top-level code, which V8 compiles as a nameless
// function at the script's first byte (run once at start-up, V8's own
// sampler may miss it where jitprof's does not).
func startsFunction(t *testing.T, file, name string, line, column int64) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), name) {
		return false
	}
	if line == 1 && column == 1 && len(b) > 0 {
		return true
	}
	lines := strings.Split(string(b), "\n")
	if line < 1 || int(line) > len(lines) || column < 1 || int(column) > len(lines[line-1]) {
		return false
	}
	return functionStart.MatchString(lines[line-1][column-1:])
}
