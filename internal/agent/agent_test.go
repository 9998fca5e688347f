package agent

import (
	"encoding/json"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"maps"
	"math"
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

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
)

// fnKey is a function of a process.
type fnKey struct {
	pid  int64
	name string
}

// windowCounts are a window's samples by the function they landed in (the
// leaf frame's function, as report's self column counts them).
type windowCounts struct {
	total  int64
	counts map[fnKey]int64
	// procs are the resource attributes of each pid.
	procs map[int64]map[string]any
	// names are every function name in the window's stacks, inlined
	// ones included, by pid.
	names map[int64]map[string]bool
}

// received sorts what the backend received by window, the profile's start
// time.
func received(ps []pprofile.Profiles) map[int64]*windowCounts {
	out := make(map[int64]*windowCounts)
	for _, p := range ps {
		d := p.Dictionary()
		str := func(i int32) string { return d.StringTable().At(int(i)) }
		// Names as report shows them (perf's): the runtime's own name,
		// which pprof's Name splits into a function and its file.
		fnName := func(l pprofile.Line) string {
			f := d.FunctionTable().At(int(l.FunctionIndex()))
			return contract.PerfName(&profile.Function{Name: str(f.NameStrindex()), SystemName: str(f.SystemNameStrindex())})
		}
		for _, rp := range p.ResourceProfiles().All() {
			attrs := rp.Resource().Attributes().AsRaw()
			pid := int64(-1)
			if v, ok := rp.Resource().Attributes().Get("process.pid"); ok {
				pid = v.Int()
			}
			for _, sp := range rp.ScopeProfiles().All() {
				for _, pr := range sp.Profiles().All() {
					start := int64(pr.Time())
					w := out[start]
					if w == nil {
						w = &windowCounts{counts: make(map[fnKey]int64), procs: make(map[int64]map[string]any), names: make(map[int64]map[string]bool)}
						out[start] = w
					}
					w.procs[pid] = attrs
					if w.names[pid] == nil {
						w.names[pid] = make(map[string]bool)
					}
					for _, s := range pr.Samples().All() {
						n := s.Values().At(0)
						w.total += n
						locs := d.StackTable().At(int(s.StackIndex())).LocationIndices()
						leaf := ""
						for j := range locs.Len() {
							lines := d.LocationTable().At(int(locs.At(j))).Lines()
							for _, l := range lines.All() {
								w.names[pid][fnName(l)] = true
							}
							if j == 0 && lines.Len() > 0 {
								// Report's self column: the innermost
								// function, an inlined one if any.
								leaf = fnName(lines.At(0))
							}
						}
						w.counts[fnKey{pid, leaf}] += n
					}
				}
			}
		}
	}
	return out
}

// reportCounts runs jitprof report on a window's perf.data: samples by pid
// and function.
func reportCounts(t *testing.T, jitprof, data string) (map[fnKey]int64, int64) {
	t.Helper()
	out, err := exec.Command(jitprof, "report", "-q", "-i", data, "--format", "json", "--sort", "pid,symbol").Output()
	if err != nil {
		t.Fatalf("jitprof report -i %s: %v", data, err)
	}
	var rep struct {
		Total   int64 `json:"total"`
		Entries []struct {
			Pid    int64  `json:"pid"`
			Symbol string `json:"symbol"`
			Self   int64  `json:"self"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("jitprof report's JSON: %v\n%.2000s", err, out)
	}
	counts := make(map[fnKey]int64)
	for _, e := range rep.Entries {
		name := e.Symbol
		if name == "[unknown]" {
			name = ""
		}
		counts[fnKey{e.Pid, name}] += e.Self
	}
	return counts, rep.Total
}

// shareDiffs lists the functions whose shares (in points) differ by more
// than tolerance between two counts of one window, among the processes of
// pids (all when nil).
func shareDiffs(a map[fnKey]int64, at int64, b map[fnKey]int64, bt int64, tolerance float64, pids map[int64]bool) []string {
	var bad []string
	keys := make(map[fnKey]bool)
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		if pids != nil && !pids[k.pid] {
			continue
		}
		sa, sb := 100*float64(a[k])/float64(max(at, 1)), 100*float64(b[k])/float64(max(bt, 1))
		if math.Abs(sa-sb) > tolerance {
			bad = append(bad, fmt.Sprintf("pid %d %q: %.2f%% against %.2f%%", k.pid, k.name, sa, sb))
		}
	}
	slices.Sort(bad)
	return bad
}

func TestShareDiffs(t *testing.T) {
	half := map[fnKey]int64{{1, "f"}: 50, {1, "g"}: 50}
	for _, tc := range []struct {
		name string
		a, b map[fnKey]int64
		bad  int
	}{
		{"same", half, map[fnKey]int64{{1, "f"}: 50, {1, "g"}: 50}, 0},
		{"within a point", half, map[fnKey]int64{{1, "f"}: 501, {1, "g"}: 499}, 0},
		{"two points off", half, map[fnKey]int64{{1, "f"}: 52, {1, "g"}: 48}, 2},
		{"another pid", half, map[fnKey]int64{{2, "f"}: 50, {1, "g"}: 50}, 2},
		{"a function missing", half, map[fnKey]int64{{1, "f"}: 100}, 2},
		{"other pids ignored", map[fnKey]int64{{1, "f"}: 50, {3, "x"}: 50}, map[fnKey]int64{{1, "f"}: 50, {3, "y"}: 50}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := func(m map[fnKey]int64) (n int64) {
				for _, v := range m {
					n += v
				}
				return n
			}
			pids := map[int64]bool{1: true, 2: true}
			if bad := shareDiffs(tc.a, total(tc.a), tc.b, total(tc.b), 1, pids); len(bad) != tc.bad {
				t.Errorf("%d differences, want %d: %v", len(bad), tc.bad, bad)
			}
		})
	}
}

// keptWindows returns the agent's kept window files by start time.
func keptWindows(t *testing.T, dir string) map[int64]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "window-*.data"))
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]string)
	for _, p := range paths {
		f := strings.Split(strings.TrimSuffix(filepath.Base(p), ".data"), "-")
		ns, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("%s: no start time in the name", p)
		}
		out[ns] = p
	}
	return out
}

// javaWork compiles the Java workload and returns the command that runs it
// for ms milliseconds with jitprof's JVMTI agent writing its dump into dir.
func javaWork(t *testing.T, dir string, ms int) []string {
	t.Helper()
	javac, java := fixtures.LookPath(t, "javac"), fixtures.LookPath(t, "java")
	if out, err := exec.Command(javac, "-d", dir, fixtures.Workload(t, "Work.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	agentLib := filepath.Join(fixtures.Agents(t), "libjitprof-jvmti.so")
	return []string{java, "-agentpath:" + agentLib + "=dir=" + dir, "-cp", dir, "Work", strconv.Itoa(ms)}
}

// erlangBusy compiles testdata/busy.erl into dir and returns the command
// that runs it for ms milliseconds under the JIT, writing its dump.
func erlangBusy(t *testing.T, dir string, ms int) []string {
	t.Helper()
	erl, erlc := fixtures.LookPath(t, "erl"), fixtures.LookPath(t, "erlc")
	src, err := filepath.Abs("testdata/busy.erl")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(erlc, "-o", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("erlc: %v\n%s", err, out)
	}
	return []string{erl, "-noshell", "-boot", "no_dot_erlang", "+JPperf", "true", "-pa", dir, "-s", "busy", "main", strconv.Itoa(ms)}
}

// nodeBusy returns the command that runs testdata/busy.js for ms
// milliseconds writing a dump into its directory.
func nodeBusy(t *testing.T, ms int) []string {
	t.Helper()
	src, err := filepath.Abs("testdata/busy.js")
	if err != nil {
		t.Fatal(err)
	}
	return []string{fixtures.LookPath(t, "node"), "--perf-prof", "--interpreted-frames-native-stack", src, strconv.Itoa(ms)}
}

// TestCollector runs jitprof agent against a real collector while node,
// Java and Erlang programs start before and after it: their jitted
// functions must be named in what the collector received (its debug
// output, and what it forwarded to a backend), with the resource
// attributes of their processes, and each window's per-function shares
// must be jitprof report's on the same window's perf.data.
func TestCollector(t *testing.T) {
	jitprof, be, col := collectorAndBackend(t)
	dir := t.TempDir()
	windows, status := filepath.Join(dir, "windows"), filepath.Join(dir, "status.json")
	javaCmd := javaWork(t, dir, 7000)
	erlCmd := erlangBusy(t, dir, 14000)

	nodeBefore := start(t, dir, nodeBusy(t, 14000)...)
	erlBefore := start(t, dir, erlCmd...)
	time.Sleep(time.Second) // running when the agent starts
	ag := start(t, dir, jitprof, "agent", "--otlp", fmt.Sprintf("127.0.0.1:%d", col.port), "-F", "99",
		"--window", "4s", "--keep-windows", windows, "--status", status)
	time.Sleep(3 * time.Second)
	javaAfter := start(t, dir, javaCmd...)
	nodeAfter := start(t, dir, nodeBusy(t, 5000)...)
	for _, p := range []*program{nodeAfter, javaAfter, nodeBefore, erlBefore} {
		p.wait(t)
	}
	ag.interrupt(t)
	t.Logf("agent:\n%s", ag.out.String())
	st := readStatus(t, status)
	if st.Windows < 3 || st.Sent != st.Windows || st.Dropped != 0 {
		t.Fatalf("status %+v: want every window (3 or more) sent", st)
	}
	// The collector forwards each export as it comes.
	deadline := time.Now().Add(30 * time.Second)
	for len(be.received()) < int(st.Sent) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	got := received(be.received())
	if len(got) != int(st.Windows) {
		t.Fatalf("the backend has %d windows, the agent sent %d; the collector said:\n%s", len(got), st.Windows, col.log())
	}

	// Named in each program's process, whenever it started: node's
	// functions, HotSpot's compiled Work.fib, BEAM's busy:fib/1.
	debug := col.debugOutput(t)
	for _, tc := range []struct {
		who     string
		p       *program
		runtime string
		fn      *regexp.Regexp
	}{
		{"node started before", nodeBefore, "nodejs", regexp.MustCompile(`^JS:\*hot[AB] .*busy\.js`)},
		{"node started after", nodeAfter, "nodejs", regexp.MustCompile(`^JS:\*hot[AB] .*busy\.js`)},
		{"java started after", javaAfter, "java", regexp.MustCompile(`^Work\.fib\(int\)$`)},
		{"erlang started before", erlBefore, "erlang", regexp.MustCompile(`^\$?busy:fib/1`)},
	} {
		pid := int64(tc.p.cmd.Process.Pid)
		var names []string
		var attrs map[string]any
		for _, w := range got {
			for n := range w.names[pid] {
				if tc.fn.MatchString(n) {
					names = append(names, n)
				}
			}
			if a := w.procs[pid]; a != nil {
				attrs = a
			}
		}
		if len(names) == 0 {
			t.Errorf("%s (pid %d): no function matching %s in the profiles received", tc.who, pid, tc.fn)
			continue
		}
		if !strings.Contains(debug, "\n    "+names[0]+"\n") {
			t.Errorf("%s: %q is not in the collector's debug output's string table", tc.who, names[0])
		}
		if attrs["process.runtime.name"] != tc.runtime || !strings.Contains(fmt.Sprint(attrs["process.command_line"]), filepath.Base(tc.p.cmd.Args[len(tc.p.cmd.Args)-1])) {
			t.Errorf("%s: resource attributes %v", tc.who, attrs)
		}
	}

	// Processes running before the agent are named from its first window
	// on: from the state it read in /proc.
	first := slices.Min(slices.Collect(maps.Keys(got)))
	for _, p := range []*program{nodeBefore, erlBefore} {
		names := got[first].names[int64(p.cmd.Process.Pid)]
		if !slices.ContainsFunc(slices.Collect(maps.Keys(names)), regexp.MustCompile(`^JS:\*hot[AB] |^\$?busy:fib/1`).MatchString) {
			t.Errorf("%s, running before the agent: not named in its first window (%d names)", p.cmd.Args[0], len(names))
		}
	}

	// Every window: the shares the backend got are jitprof report's, for
	// the test's programs. Other processes on the machine are in the
	// windows too, but their dumps may be gone by the time report reads
	// them: only the agent read them in time.
	ours := make(map[int64]bool)
	for _, p := range []*program{nodeBefore, erlBefore, nodeAfter, javaAfter, ag} {
		ours[int64(p.cmd.Process.Pid)] = true
	}
	kept := keptWindows(t, windows)
	for start, w := range got {
		data := kept[start]
		if data == "" {
			t.Errorf("window of %v: no kept perf.data", time.Unix(0, start))
			continue
		}
		want, total := reportCounts(t, jitprof, data)
		if total != w.total {
			t.Errorf("%s: report counts %d samples, the backend %d", filepath.Base(data), total, w.total)
		}
		if bad := shareDiffs(w.counts, w.total, want, total, 1, ours); len(bad) > 0 {
			t.Errorf("%s: shares differ from jitprof report's by more than a point:\n%s", filepath.Base(data), strings.Join(bad, "\n"))
		}
	}
}

// outage is how long TestCollectorOutage keeps the collector down: a
// minute in the scenario, less by default to keep the suite short
// (JITPROF_AGENT_OUTAGE=60s for the full one).
func outage(t *testing.T) time.Duration {
	if s := os.Getenv("JITPROF_AGENT_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("JITPROF_AGENT_OUTAGE=%q: %v", s, err)
		}
		return d
	}
	return 16 * time.Second
}

// waitStatus polls the agent's status file until ok says so.
func waitStatus(t *testing.T, path string, within time.Duration, ok func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := os.ReadFile(path); err == nil {
			var s Status
			if json.Unmarshal(b, &s) == nil && ok(s) {
				return s
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			t.Fatalf("the agent's status did not come to the state awaited in %v: %s", within, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCollectorOutage stops the collector under a running agent and starts
// it again: windows are cut on time all along, those that cannot wait are
// dropped and counted, and sending resumes once the collector is back.
func TestCollectorOutage(t *testing.T) {
	jitprof, be, col := collectorAndBackend(t)
	dir := t.TempDir()
	status := filepath.Join(dir, "status.json")
	const window = 2 * time.Second
	down := outage(t)
	node := start(t, dir, nodeBusy(t, int((down+20*time.Second).Milliseconds()))...)
	began := time.Now()
	// --jit-wait 1s: windows are sent as they are cut, not held while
	// node's buffered dump lags.
	ag := start(t, dir, jitprof, "agent", "--otlp", fmt.Sprintf("127.0.0.1:%d", col.port), "--window", window.String(),
		"--buffer", "2", "--status", status, "--jit-wait", "1s")
	before := waitStatus(t, status, 30*time.Second, func(s Status) bool { return s.Sent >= 2 })
	col.stop()
	stopped := time.Now()
	time.Sleep(down)
	during := waitStatus(t, status, 10*time.Second, func(Status) bool { return true })
	col.start(t)
	restarted := time.Now()
	after := waitStatus(t, status, 60*time.Second, func(s Status) bool { return s.Sent >= during.Sent+2 })
	// The windows buffered through the outage go first: a window begun
	// after the restart comes a window's length later at the least, and
	// under load later still (a CI rehearsal stopped the agent once the
	// buffered two were out, before any had begun).
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if slices.ContainsFunc(slices.Collect(maps.Keys(received(be.received()))), func(start int64) bool { return time.Unix(0, start).After(restarted) }) {
			break
		}
	}
	ag.interrupt(t)
	node.cmd.Process.Kill()
	final := readStatus(t, status)
	t.Logf("before %+v\nduring %+v\nafter %+v\nfinal %+v\nagent:\n%s", before, during, after, final, ag.out.String())

	// Sampling went on: windows were cut at their pace through the
	// outage, and hold samples.
	downWindows := during.Windows - before.Windows
	if want := int64(down/window) - 2; downWindows < want {
		t.Errorf("%d windows cut in the %v the collector was down, want %d or more", downWindows, down, want)
	}
	if during.Samples <= before.Samples {
		t.Errorf("no samples taken while the collector was down: %d then %d", before.Samples, during.Samples)
	}
	if elapsed := time.Since(began); final.Windows < int64(elapsed/window)-2 {
		t.Errorf("%d windows in %v of %v each", final.Windows, elapsed.Round(time.Second), window)
	}
	// More windows than the buffer holds were dropped, each counted and
	// logged; every window is either sent or dropped.
	if final.Dropped == 0 || final.Sent+final.Dropped != final.Windows {
		t.Errorf("final status %+v: want drops, and sent+dropped = windows", final)
	}
	if n := int64(strings.Count(ag.out.String(), "dropped: ")); n != final.Dropped {
		t.Errorf("%d drops logged, %d counted", n, final.Dropped)
	}
	// What the backend holds: windows from before the outage, and windows
	// that began after the restart.
	var early, late int
	for start := range received(be.received()) {
		switch {
		case time.Unix(0, start).Before(stopped):
			early++
		case time.Unix(0, start).After(restarted):
			late++
		}
	}
	if early < 2 || late < 1 {
		t.Errorf("the backend has %d windows from before the outage and %d begun after it, want 2 and 1 or more", early, late)
	}
}

// rss returns a process's resident memory, in KiB.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q", line)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// TestSoak starts short-lived node programs one after the other under the
// agent: the agent's memory at the end is within 10% of what it was after
// the first part, the state of exited processes is dropped, and the
// programs' functions are named. 150 programs in 90 s here;
// JITPROF_AGENT_SOAK=full runs the 1,000 in ten minutes.
func TestSoak(t *testing.T) {
	n, span := 150, 90*time.Second
	if os.Getenv("JITPROF_AGENT_SOAK") == "full" {
		n, span = 1000, 10*time.Minute
	}
	jitprof, _ := binaries(t)
	dir := t.TempDir()
	// The programs start in a cgroup of their own, which the agent keeps:
	// host-wide, its memory follows whatever else runs on the machine
	// (other tests' JVMs and compilers, whose tables it reads while they
	// run: a CI run's medians went 62 -> 71 MB so), not the programs.
	cgDir, cg := newCgroup(t, true)
	cgFD, err := os.Open(cgDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cgFD.Close()
	pp, status := filepath.Join(dir, "pprof"), filepath.Join(dir, "status.json")
	ag := start(t, dir, jitprof, "agent", "--pprof-dir", pp, "--window", "5s", "--status", status, "--jit-wait", "5s", "--cgroup", cg)
	procsAtStart := waitStatus(t, status, 30*time.Second, func(s Status) bool { return s.Windows >= 1 }).Processes

	// Memory is sampled every half second; a part's figure is the median
	// of its samples. Peaks come from outside: the first window that meets
	// a large binary of another process on the machine reads its symbols
	// (node's: 10 MB of table, kept while it runs), so a peak says when
	// that happened, not whether memory grows; both are logged.
	type mark struct {
		at  time.Duration
		rss int64
	}
	var marks []mark
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(sampled)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				marks = append(marks, mark{time.Since(began), rss(t, ag.cmd.Process.Pid)})
			case <-stopSampling:
				return
			}
		}
	}()

	// 150 ms of CPU time each, not of the clock: with no core to spare a
	// fifth of the programs spent their 150 ms starting up, sampled but
	// never in hotA or hotB.
	cmd := append(nodeBusy(t, 150), "cpu")
	pids := make(map[int64]bool)
	var running []*exec.Cmd
	every := span / time.Duration(n)
	for i := range n {
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Dir = dir
		c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cgFD.Fd())}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		pids[int64(c.Process.Pid)] = true
		running = append(running, c)
		// Wait for those done, and remove their dumps a while after, as
		// a machine's temporary files go: their windows are long read.
		running = slices.DeleteFunc(running, func(c *exec.Cmd) bool {
			if c.ProcessState == nil && c.Process.Signal(syscall.Signal(0)) == nil {
				return false
			}
			c.Wait()
			pid := c.Process.Pid
			time.AfterFunc(15*time.Second, func() { os.Remove(filepath.Join(dir, fmt.Sprintf("jit-%d.dump", pid))) })
			return true
		})
		time.Sleep(time.Until(began.Add(time.Duration(i+1) * every)))
	}
	for _, c := range running {
		c.Wait()
	}
	time.Sleep(12 * time.Second) // the last windows
	close(stopSampling)
	<-sampled
	end := readStatus(t, status)
	ag.interrupt(t)

	part := func(from, to time.Duration) (median, peak int64) {
		var in []int64
		for _, k := range marks {
			if k.at >= from && k.at < to {
				in = append(in, k.rss)
			}
		}
		if len(in) == 0 {
			return 0, 0
		}
		slices.Sort(in)
		return in[len(in)/2], in[len(in)-1]
	}
	total := time.Since(began)
	first, firstPeak := part(span/5, 2*span/5)
	last, lastPeak := part(total-span/5, total)
	t.Logf("agent RSS median %d KiB after the first part, %d KiB at the end (%+.1f%%; peaks %d and %d KiB); processes kept: %d at start, %d at the end; status %+v",
		first, last, 100*float64(last-first)/float64(first), firstPeak, lastPeak, procsAtStart, end.Processes, end)
	if first == 0 || float64(last) > 1.10*float64(first) {
		t.Errorf("the agent's memory grew from %d KiB to %d KiB: more than 10%%", first, last)
	}
	// Exited processes are dropped: every program had exited two windows
	// and more before the last status. (The machine's other processes,
	// such as other tests', come and go as they like: only the programs'
	// own pids say what was dropped.)
	for _, pid := range end.KeptPids {
		if pids[int64(pid)] {
			t.Errorf("the state of program %d is kept two windows after it exited", pid)
		}
	}

	// The programs' functions are named in the windows that sampled them.
	files, err := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	seen, named := make(map[int64]bool), make(map[int64]bool)
	hot := regexp.MustCompile(`^JS:.hot[AB] `)
	for _, f := range files {
		p := fixtures.ReadProfile(t, f)
		for _, s := range p.Sample {
			v := s.NumLabel["pid"] // pprof files drop pid 0's label
			if len(v) != 1 || !pids[v[0]] {
				continue
			}
			pid := v[0]
			seen[pid] = true
			for _, l := range s.Location {
				for _, ln := range l.Line {
					if hot.MatchString(contract.PerfName(ln.Function)) {
						named[pid] = true
					}
				}
			}
		}
	}
	t.Logf("%d of %d programs sampled, %d with hotA or hotB named", len(seen), n, len(named))
	if len(seen) < n/2 || len(named) < len(seen)*8/10 {
		t.Errorf("%d of %d programs sampled, %d of them with hotA or hotB named: want half sampled, 80%% of those named", len(seen), n, len(named))
	}
}

// newCgroup makes a cgroup for the test, in cgroup v2 only if v2 (which
// lets a process start in it), and removes it when the test ends; it
// returns its directory and its path as /proc/PID/cgroup names it.
func newCgroup(t *testing.T, v2 bool) (dir, path string) {
	t.Helper()
	name := fmt.Sprintf("jitprof-%s-%d", t.Name(), os.Getpid())
	// cgroup v2 at the root, else v2 beside v1 (hybrid), else v1's pids.
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/pids"} {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); v2 && err != nil {
			continue
		}
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		t.Cleanup(func() {
			// A cgroup is removed once empty: its processes are killed
			// by the programs' own cleanups, which run first.
			for range 50 {
				if os.Remove(dir) == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
		return dir, "/" + name
	}
	fixtures.Missing(t, "no cgroup hierarchy here lets this test make a cgroup (v2: %v; root needed)", v2)
	return "", ""
}

// testCgroup makes a cgroup for the test and moves pid into it, returning
// its path as /proc/PID/cgroup names it.
func testCgroup(t *testing.T, pid int) string {
	t.Helper()
	dir, path := newCgroup(t, false)
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		t.Fatalf("moving %d into %s: %v", pid, dir, err)
	}
	return path
}

// TestCgroup: with --cgroup, the profiles hold the processes of that
// cgroup, whose functions are named, and no other.
func TestCgroup(t *testing.T) {
	jitprof, _ := binaries(t)
	dir := t.TempDir()
	outside := start(t, dir, nodeBusy(t, 4000)...)
	inside := start(t, dir, nodeBusy(t, 4000)...)
	cg := testCgroup(t, inside.cmd.Process.Pid)
	pp := filepath.Join(dir, "pprof")
	ag := start(t, dir, jitprof, "agent", "--pprof-dir", pp, "--window", "3s", "--cgroup", cg, "-q")
	// The programs end before the agent, so that node's buffered dumps
	// are whole when the windows are symbolized.
	inside.wait(t)
	outside.wait(t)
	ag.interrupt(t)
	files, err := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles in %s (%v)", pp, err)
	}
	pids := make(map[int64]int64)
	named := false
	for _, f := range files {
		for _, s := range fixtures.ReadProfile(t, f).Sample {
			pid := int64(0)
			if v := s.NumLabel["pid"]; len(v) == 1 {
				pid = v[0]
			}
			pids[pid] += s.Value[0]
			for _, l := range s.Location {
				for _, ln := range l.Line {
					named = named || strings.Contains(contract.PerfName(ln.Function), "hotA")
				}
			}
		}
	}
	if want := int64(inside.cmd.Process.Pid); len(pids) != 1 || pids[want] == 0 || !named {
		t.Errorf("samples by pid %v (outside the cgroup: %d), hotA named: %v; want pid %d's only, named", pids, outside.cmd.Process.Pid, named, want)
	}
}

// TestDWARFStacks: with --call-graph dwarf the agent's profiles carry
// whole stacks through code built without frame pointers. CPython 3.13
// under -X perf_jit runs calls3.py, whose leaf is called only through
// middle, outer and the module: the samples in leaf must carry that chain,
// as jitprof record --call-graph dwarf gives it (TestRecordDWARFStacks).
// Frame pointers, the agent's default, are the control: CPython's
// trampolines and libpython keep none.
func TestDWARFStacks(t *testing.T) {
	jitprof, _ := binaries(t)
	python := fixtures.Python313(t)
	// wholeChains runs the program under the agent in mode and counts the
	// samples in leaf and those of them that carry the whole chain.
	wholeChains := func(t *testing.T, mode string) (inLeaf, whole int64) {
		dir := t.TempDir()
		prog := start(t, dir, python, "-X", "perf_jit", fixtures.Workload(t, "calls3.py"), "4")
		pp := filepath.Join(dir, "pprof")
		ag := start(t, dir, jitprof, "agent", "-q", "-p", strconv.Itoa(prog.cmd.Process.Pid), "--call-graph", mode,
			"--pprof-dir", pp, "--window", "2s")
		// CPython writes its dump through a stdio buffer and flushes the
		// last of it, its trampolines for calls3's functions among it, only
		// at exit. The agent stops after python has exited, so every
		// window has the whole dump whatever the machine's load (CI's run
		// stopped the agent first, and no window could name a py:: frame).
		prog.wait(t)
		ag.interrupt(t)
		files, err := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no profiles in %s (%v)", pp, err)
		}
		chain := []string{"py::<module>", "py::outer", "py::middle", "py::leaf"}
		for _, f := range files {
			for _, s := range fixtures.ReadProfile(t, f).Sample {
				var names []string // root first
				for _, l := range slices.Backward(s.Location) {
					for _, ln := range slices.Backward(l.Line) {
						names = append(names, ln.Function.Name)
					}
				}
				if !slices.Contains(names, "py::leaf") {
					continue
				}
				inLeaf += s.Value[0]
				if isSubsequence(chain, names) {
					whole += s.Value[0]
				}
			}
		}
		t.Logf("%s: %d of %d samples in py::leaf carry <module> -> outer -> middle -> leaf", mode, whole, inLeaf)
		return inLeaf, whole
	}
	inLeaf, whole := wholeChains(t, "dwarf")
	if inLeaf < 100 || float64(whole) < 0.95*float64(inLeaf) {
		t.Errorf("%d of %d samples in py::leaf carry the whole chain, want 95%% of 100 or more", whole, inLeaf)
	}
	// The control: the chain is what DWARF unwinding gives, not what any
	// stack of this program holds.
	if _, fpWhole := wholeChains(t, "fp"); fpWhole*2 >= whole {
		t.Errorf("with frame pointers %d samples carry the whole chain, with DWARF %d: want DWARF's to be more than twice", fpWhole, whole)
	}
}

// isSubsequence tells whether sub's elements appear in s in order.
func isSubsequence(sub, s []string) bool {
	for _, x := range s {
		if len(sub) > 0 && x == sub[0] {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

// TestWindowsAgainstPerf holds the agent's profiles against perf: each
// window's perf.data, injected with perf inject --jit and read by perf
// report, gives node's jitted functions the samples the agent's profile
// of that window gives them.
func TestWindowsAgainstPerf(t *testing.T) {
	jitprof, _ := binaries(t)
	dir := t.TempDir()
	node := start(t, dir, nodeBusy(t, 6000)...)
	time.Sleep(500 * time.Millisecond)
	windows, pp := filepath.Join(dir, "windows"), filepath.Join(dir, "pprof")
	ag := start(t, dir, jitprof, "agent", "--keep-windows", windows, "--pprof-dir", pp, "--window", "3s", "-F", "199", "-q")
	node.wait(t) // its dump complete, for perf and for the agent's windows
	ag.interrupt(t)
	pid := int64(node.cmd.Process.Pid)
	kept, err := filepath.Glob(filepath.Join(windows, "window-*.data"))
	if err != nil || len(kept) < 2 {
		t.Fatalf("windows kept: %v (%v)", kept, err)
	}
	compared := 0
	for _, data := range kept {
		seq := strings.Split(filepath.Base(data), "-")[1]
		profiles, _ := filepath.Glob(filepath.Join(pp, "jitprof-*-"+seq+".pb.gz"))
		if len(profiles) != 1 {
			t.Fatalf("window %s: profiles %v", seq, profiles)
		}
		ours := make(map[string]int)
		for _, s := range fixtures.ReadProfile(t, profiles[0]).Sample {
			if v := s.NumLabel["pid"]; len(v) != 1 || v[0] != pid || len(s.Location) == 0 {
				continue
			}
			lines := s.Location[0].Line
			if len(lines) == 0 {
				continue
			}
			if name := contract.PerfName(lines[len(lines)-1].Function); strings.HasPrefix(name, "JS:") {
				ours[name] += int(s.Value[0])
			}
		}
		if len(ours) == 0 {
			// node ran through every window: started before the agent,
			// it must be named from the state the agent synthesized.
			t.Errorf("window %s: no sample of node's jitted functions", seq)
			continue
		}
		// perf inject stops at the first dump it cannot use, and the
		// machine's other processes' dumps come and go: perf gets node's
		// records only.
		nodeOnly := filepath.Join(dir, "node-"+seq+".data")
		keepPid(t, data, nodeOnly, uint32(pid))
		injected := filepath.Join(dir, "injected-"+seq+".data")
		fixtures.Perf(t, "inject", "--jit", "-i", nodeOnly, "-o", injected)
		all, _ := fixtures.SymbolCounts(t, injected, "--pid", strconv.FormatInt(pid, 10))
		perfs := make(map[string]int)
		for sym, n := range all {
			if strings.HasPrefix(sym, "JS:") {
				perfs[sym] = n
			}
		}
		t.Logf("window %s: agent %v, perf %v", seq, ours, perfs)
		if d := fixtures.Differ(ours, perfs); d != 0 {
			t.Errorf("window %s: %d of node's jitted samples attributed differently: agent %v, perf %v", seq, d, ours, perfs)
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no window had node's jitted functions sampled")
	}
}

// keepPid copies the recording in to out with the records of process pid
// only (and the kernel's mapping).
func keepPid(t *testing.T, in, out string, pid uint32) {
	t.Helper()
	f, err := perfdata.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := f.Reader
	w, err := perfdata.Create(out, r.Options())
	if err != nil {
		t.Fatal(err)
	}
	err = w.Copy(r, func(raw perfdata.RawRecord) (bool, error) {
		switch rec := r.Decode(raw).(type) {
		case *perfdata.Sample:
			return rec.Pid == pid, nil
		case *perfdata.Mmap2:
			return rec.Pid == pid, nil
		case *perfdata.Mmap:
			return rec.Pid == pid || rec.Pid == math.MaxUint32, nil
		case *perfdata.Comm:
			return rec.Pid == pid, nil
		case *perfdata.Task:
			return rec.Pid == pid, nil
		}
		return true, nil
	})
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		w.Abort()
		t.Fatal(err)
	}
}
