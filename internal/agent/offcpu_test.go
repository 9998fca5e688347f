package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/procfs"
)

// held starts argv under a shell that execs it once released: the agent is
// given the shell's pid, which the program keeps, and has its events open
// from the program's first instruction. release returns when the shell has
// been told to go on.
func held(t *testing.T, dir string, argv ...string) (p *program, release func()) {
	t.Helper()
	fifo := filepath.Join(dir, "go-ahead")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p = start(t, dir, append([]string{"sh", "-c", `read -r _ < "$0"; exec "$@"`, fifo}, argv...)...)
	return p, func() {
		// Opening for writing waits for the shell's read end.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
}

// otlpThreadTimes sums, in what the backend received, the values of the
// profiles of sample type typ (unit nanoseconds) of pid's thread tid: all
// of them, and those whose stack's function names match.
func otlpThreadTimes(t *testing.T, ps []pprofile.Profiles, typ string, pid, tid int64, match func(names []string) bool) (all, matched int64) {
	t.Helper()
	for _, p := range ps {
		d := p.Dictionary()
		str := func(i int32) string { return d.StringTable().At(int(i)) }
		for _, rp := range p.ResourceProfiles().All() {
			if v, ok := rp.Resource().Attributes().Get("process.pid"); !ok || v.Int() != pid {
				continue
			}
			for _, sp := range rp.ScopeProfiles().All() {
				for _, pr := range sp.Profiles().All() {
					if str(pr.SampleType().TypeStrindex()) != typ {
						continue
					}
					if u := str(pr.SampleType().UnitStrindex()); u != "nanoseconds" {
						t.Errorf("a %s profile in %s", typ, u)
					}
					for _, s := range pr.Samples().All() {
						var thread int64 = -1
						for _, ai := range s.AttributeIndices().All() {
							if a := d.AttributeTable().At(int(ai)); str(a.KeyStrindex()) == "thread.id" {
								thread = a.Value().Int()
							}
						}
						if thread != tid {
							continue
						}
						var names []string
						for _, li := range d.StackTable().At(int(s.StackIndex())).LocationIndices().All() {
							for _, l := range d.LocationTable().At(int(li)).Lines().All() {
								names = append(names, str(d.FunctionTable().At(int(l.FunctionIndex())).NameStrindex()))
							}
						}
						v := s.Values().At(0)
						all += v
						if match(names) {
							matched += v
						}
					}
				}
			}
		}
	}
	return all, matched
}

// jsFunction returns whether a stack has the JS function fn, interpreted
// or compiled (the name of the script's other functions has its file's,
// offcpu_sleeper.js, in it).
func jsFunction(fn string) func(names []string) bool {
	re := regexp.MustCompile(`^JS:\W?` + fn + `( |$)`)
	return func(names []string) bool { return slices.ContainsFunc(names, re.MatchString) }
}

// TestOffCPUTruth runs jitprof agent --off-cpu against a real collector
// while node, which prints its own truth, spends ~30% of its main thread's
// time blocked in a JS function (Atomics.wait): the collector receives, for
// node's process, a cpu and an off-cpu profile in nanoseconds; the share of
// the main thread's time off the CPU under the blocking function is the
// truth within 3 points; a function that only spins is not blocked
// (preempted aside); the main thread's cpu and off-cpu time add up to its
// life within 5% (as timed from outside); the pprof files hold the
// wall-clock sample types and the same off-CPU time as the collector got.
func TestOffCPUTruth(t *testing.T) {
	jitprof, be, col := collectorAndBackend(t)
	node := fixtures.LookPath(t, "node")
	script, err := filepath.Abs("../../cmd/jitprof/testdata/offcpu_sleeper.js")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pp, status := filepath.Join(dir, "pprof"), filepath.Join(dir, "status.json")
	prog, release := held(t, dir, node, "--perf-prof", "--interpreted-frames-native-stack", script)
	pid := int64(prog.cmd.Process.Pid)
	// DWARF: frame pointers stop in libc's futex wait, Debian's built
	// without them, short of the JS function that blocked.
	ag := start(t, dir, jitprof, "agent", "-p", strconv.FormatInt(pid, 10), "--off-cpu", "-F", "499", "--call-graph", "dwarf",
		"--otlp", fmt.Sprintf("127.0.0.1:%d", col.port), "--pprof-dir", pp, "--window", "2s", "--status", status)
	waitStatus(t, status, 30*time.Second, func(s Status) bool { return s.Windows >= 1 })
	began := time.Now()
	release()
	prog.wait(t)
	age := time.Since(began)
	ag.interrupt(t)
	t.Logf("agent:\n%s", ag.out.String())
	m := regexp.MustCompile(`truth \S+ (\S+)`).FindStringSubmatch(prog.out.String())
	if m == nil {
		t.Fatalf("node printed no truth:\n%s", prog.out.String())
	}
	blocked, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	st := readStatus(t, status)
	if st.Sent != st.Windows || st.Switches == 0 {
		t.Fatalf("status %+v: want every window sent, switch-outs written", st)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(be.received()) < int(st.Sent) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	got := be.received()

	all := func([]string) bool { return true }
	sleeper, spinner := jsFunction("sleeper"), jsFunction("spinner")
	_, cpu := otlpThreadTimes(t, got, perfprof.CPUType, pid, pid, all)
	off, offBlocker := otlpThreadTimes(t, got, perfprof.OffCPUType, pid, pid, sleeper)
	_, offSpinner := otlpThreadTimes(t, got, perfprof.OffCPUType, pid, pid, func(names []string) bool {
		return spinner(names) && !sleeper(names) && !slices.Contains(names, perfprof.PreemptedFrame)
	})
	if offBlocker == 0 {
		_, names := otlpThreadTimes(t, got, perfprof.OffCPUType, pid, pid, func(names []string) bool { t.Logf("off-CPU stack %q", names); return false })
		t.Fatalf("no off-CPU time under sleeper (%d)", names)
	}
	sec := func(ns int64) float64 { return float64(ns) / 1e9 }
	wall := sec(cpu + off)
	t.Logf("status %+v; main thread: cpu %.3f s, off-cpu %.3f s, age %.3f s; under sleeper %.3f s off the CPU, truth %.3f s; spinner %.3f s",
		st, sec(cpu), sec(off), age.Seconds(), sec(offBlocker), blocked, sec(offSpinner))
	if cpu == 0 || off == 0 {
		t.Fatalf("the collector got %d ns of cpu and %d ns of off-cpu time for node's main thread: want both", cpu, off)
	}
	if got, want := 100*sec(offBlocker)/wall, 100*blocked/age.Seconds(); got < want-3 || got > want+3 {
		t.Errorf("sleeper off the CPU: %.1f%% of the main thread's time, truth %.1f%%", got, want)
	}
	if want := 100 * blocked / age.Seconds(); want < 10 {
		t.Errorf("node blocked %.1f%% of its time: too little to tell anything", want)
	}
	if got := 100 * sec(offSpinner) / wall; got > 3 {
		t.Errorf("spinner, which never blocks, off the CPU %.1f%% of the time", got)
	}
	if r := wall / age.Seconds(); r < 0.95 || r > 1.05 {
		t.Errorf("the main thread's cpu and off-cpu time is %.3f s, its age %.3f s (ratio %.3f)", wall, age.Seconds(), r)
	}

	// The pprof files: the wall-clock view's sample types, and the
	// collector's off-CPU time, window for window.
	files, err := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
	if err != nil || len(files) != int(st.PprofFiles) || len(files) == 0 {
		t.Fatalf("%d pprof files (%v), status says %d", len(files), err, st.PprofFiles)
	}
	var pprofOff int64
	for _, f := range files {
		p := fixtures.ReadProfile(t, f)
		var types []string
		for _, vt := range p.SampleType {
			types = append(types, vt.Type+"/"+vt.Unit)
		}
		if want := []string{"samples/count", "wall/nanoseconds", "cpu/nanoseconds", "off-cpu/nanoseconds"}; !slices.Equal(types, want) {
			t.Fatalf("%s: sample types %v, want %v", filepath.Base(f), types, want)
		}
		for _, s := range p.Sample {
			if slices.Equal(s.NumLabel["tid"], []int64{pid}) {
				pprofOff += s.Value[3]
			}
		}
	}
	if pprofOff != off {
		t.Errorf("the pprof files hold %d ns off the CPU for the main thread, the collector got %d", pprofOff, off)
	}
}

// pingpongBinary builds testdata/pingpong.
func pingpongBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pingpong")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/pingpong").CombinedOutput(); err != nil {
		t.Fatalf("go build testdata/pingpong: %v\n%s", err, out)
	}
	return bin
}

// cpuTime is a process's user and system time.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := procfs.Host.CPUTime(uint32(pid))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOffCPUWindows runs jitprof agent --off-cpu on two threads passing a
// byte back and forth ~50,000 times a second beside threads blocked all
// along: in every window the program spans whole, each blocked thread is
// off its CPU the window's length (within 2%): its interval is cut at
// each window's edge, counted once; the agent's memory at the end is
// within 10% of what it was after the first part. The agent's CPU time is
// logged, a share of one core.
func TestOffCPUWindows(t *testing.T) {
	span := 40 * time.Second
	if s := os.Getenv("JITPROF_AGENT_OFFCPU_SPAN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("JITPROF_AGENT_OFFCPU_SPAN=%q: %v", s, err)
		}
		span = d
	}
	jitprof, _ := binaries(t)
	dir := t.TempDir()
	pp, status := filepath.Join(dir, "pprof"), filepath.Join(dir, "status.json")
	const idle, window = 20, 2 * time.Second
	prog, release := held(t, dir, pingpongBinary(t), "-idle", strconv.Itoa(idle), "-rate", "25000", "-for", span.String())
	pid := prog.cmd.Process.Pid
	ag := start(t, dir, jitprof, "agent", "-p", strconv.Itoa(pid), "--off-cpu", "--pprof-dir", pp, "--window", window.String(), "--status", status)
	waitStatus(t, status, 30*time.Second, func(s Status) bool { return s.Windows >= 1 })
	release()

	type mark struct {
		at  time.Duration
		rss int64
		cpu time.Duration
	}
	var marks []mark
	began := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
sampling:
	for {
		select {
		case <-prog.done:
			break sampling
		case <-tick.C:
			marks = append(marks, mark{time.Since(began), rss(t, ag.cmd.Process.Pid), cpuTime(t, ag.cmd.Process.Pid)})
		}
	}
	prog.wait(t)
	ended := time.Now()
	ag.interrupt(t)
	st := readStatus(t, status)
	var truth struct {
		RoundsPerSecond float64 `json:"rounds_per_second"`
		Idle            []int64 `json:"idle"`
	}
	if err := json.Unmarshal([]byte(prog.out.String()), &truth); err != nil || len(truth.Idle) != idle {
		t.Fatalf("pingpong's truth: %v\n%s", err, prog.out.String())
	}

	// Memory and CPU: medians of the second fifth and of the last.
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
	first, firstPeak := part(span/5, 2*span/5)
	last, lastPeak := part(4*span/5, span)
	a, b := marks[len(marks)/5], marks[len(marks)-1]
	core := (b.cpu - a.cpu).Seconds() / (b.at - a.at).Seconds()
	t.Logf("pingpong: %.0f round trips/s (%.0f switch-outs/s); agent: %.1f%% of a core, RSS median %d KiB after the first part, %d KiB at the end (peaks %d, %d KiB); status %+v",
		truth.RoundsPerSecond, 2*truth.RoundsPerSecond, 100*core, first, last, firstPeak, lastPeak, st)
	if first == 0 || float64(last) > 1.10*float64(first) {
		t.Errorf("the agent's memory grew from %d KiB to %d KiB: more than 10%%", first, last)
	}

	// Each window within the program's life, a second after its start
	// (its threads made and blocked by then) and before its exit.
	files, err := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	var spanned int
	for _, f := range files {
		p := fixtures.ReadProfile(t, f)
		off := make(map[int64]int64)
		for _, s := range p.Sample {
			if tid := s.NumLabel["tid"]; len(tid) == 1 && slices.Contains(truth.Idle, tid[0]) {
				off[tid[0]] += s.Value[3]
			}
		}
		if time.Unix(0, p.TimeNanos).Before(began.Add(time.Second)) || time.Unix(0, p.TimeNanos+p.DurationNanos).After(ended) {
			continue
		}
		spanned++
		if len(off) != idle {
			t.Errorf("%s: %d of the %d blocked threads are in it", filepath.Base(f), len(off), idle)
		}
		for tid, ns := range off {
			if r := float64(ns) / float64(p.DurationNanos); r < 0.98 || r > 1.02 {
				t.Errorf("%s: thread %d, blocked all along, off its CPU %v of the window's %v", filepath.Base(f), tid, time.Duration(ns), time.Duration(p.DurationNanos))
			}
		}
	}
	if want := int(span/window) - 3; spanned < want {
		t.Errorf("%d windows have every blocked thread, want %d or more", spanned, want)
	}
}
