package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// TestOffCPUTruth: programs that print their own truth, recorded with
// --off-cpu: for each thread a program reports, the share of its time its
// blocking function spent off the CPU is the program's within 3 points, a
// function that only spins is not blocked (preempted aside: the machine
// may be busy), and the wall-clock view of the thread adds up to its life,
// from its first record to its exit as the kernel timed them, within 2%.
// Node sleeps in a JS function (Atomics.wait), named from its dump;
// CPython 3.11 blocks in os.read on a pipe, named by libpython's symbols;
// Java's threads wait for a ReentrantLock or a monitor the others hold,
// named from the JVMTI agent's dump, and JFR times the same run's parks
// or monitor entries, the time off the CPU under Unsafe.park or
// ObjectMonitor::enter, independently: within 3 points of it too.
func TestOffCPUTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node, python and java under record")
	}
	for _, tc := range []struct {
		name, tool, script string
		args               []string // the script's
		blocker, spinner   string   // a frame of the blocking function, and of the spinning one
		holder             string   // a frame the blocking function calls that its time leaves out
		jfrEvent, jfrFrame string   // the JFR event that times the blocks, the frame it times
	}{
		{name: "node", tool: "node", script: "offcpu_sleeper.js", blocker: "JS:~sleeper", spinner: "spinner"},
		{name: "python", tool: "python3", script: "offcpu_pipe.py", blocker: "os_read", spinner: "_PyEval_EvalFrameDefault"},
		{name: "java-lock", tool: "java", script: "OffCPULock.java", args: []string{"lock"},
			blocker: "OffCPULock.waitForLock(", spinner: "OffCPULock.spin(",
			jfrEvent: "jdk.ThreadPark", jfrFrame: "jdk.internal.misc.Unsafe.park("},
		{name: "java-monitor", tool: "java", script: "OffCPULock.java", args: []string{"monitor"},
			blocker: "OffCPULock.waitForMonitor(", spinner: "OffCPULock.spin(", holder: "OffCPULock.holdMonitor(",
			jfrEvent: "jdk.JavaMonitorEnter", jfrFrame: "ObjectMonitor::enter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				fixtures.Missing(t, "%s: %v", tc.tool, err)
			}
			script, err := filepath.Abs(filepath.Join("testdata", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			command := []string{tc.tool}
			jfr := filepath.Join(dir, "blocks.jfr")
			if tc.jfrEvent != "" {
				settings, err := filepath.Abs(filepath.Join("testdata", "offcpu_blocks.jfc"))
				if err != nil {
					t.Fatal(err)
				}
				command = append(command, "-XX:StartFlightRecording=filename="+jfr+",settings="+settings)
			}
			command = append(append(command, script), tc.args...)
			t.Chdir(dir)
			data := filepath.Join(dir, "perf.data")
			// DWARF samples (8.5 KB each) of busy threads at 4000 Hz
			// fill a CPU's default 2 MiB ring in 60 ms, and the kernel
			// wakes record when it is half full: on a loaded machine
			// record may not run that soon, and each chunk lost takes
			// CPU samples and switches out of the wall-clock view. 8 MiB
			// rings keep them (said in the summary logged).
			code, stdout, stderr := jitprofMsg(t, append([]string{"record", "--off-cpu", "--call-graph", "dwarf", "-m", "2048", "-o", data, "--"}, command...)...)
			if code != 0 {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
			t.Logf("record: %s", stderr)
			// perf reads the recording: the switch-out samples and the
			// switch records both.
			if perf, err := exec.LookPath("perf"); err != nil {
				fixtures.Missing(t, "perf: %v", err)
			} else {
				out, err := exec.Command(perf, "script", "-i", data, "--show-switch-events", "-F", "tid,time,event").CombinedOutput()
				if err != nil || !strings.Contains(string(out), "context-switches") || !strings.Contains(string(out), "PERF_RECORD_SWITCH IN") ||
					!strings.Contains(string(out), "PERF_RECORD_SWITCH OUT") {
					t.Errorf("perf script (%v) shows no switch-out sample or no switch record:\n%.2000s", err, out)
				}
			}
			// A line per thread: "truth FUNCTION [TID] BLOCKED_S", the
			// main thread's without a TID.
			truths := regexp.MustCompile(`(?m)^truth \S+ (?:(\d+) )?(\S+)`).FindAllStringSubmatch(stdout, -1)
			if truths == nil {
				t.Fatalf("the program printed no truth:\n%s", stdout)
			}
			var jfrBlocked map[int64]float64
			if tc.jfrEvent != "" {
				jfrBlocked = jfrDurations(t, jfr, tc.jfrEvent)
			}

			opts := perfprof.Options{Input: data, View: perfprof.WallView}
			opts.Warn = func(err error) { t.Logf("warning: %v", err) }
			res, err := perfprof.Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range truths {
				blocked, err := strconv.ParseFloat(m[2], 64)
				if err != nil {
					t.Fatalf("truth %q: %v", m[0], err)
				}
				tid := mainThread(res.Profile.PProf())
				if m[1] != "" {
					tid, _ = strconv.ParseInt(m[1], 10, 64)
				}
				var wall, offBlocker, offSpinner, offJFR, cpu, cpuSpinner int64
				for _, s := range res.Profile.PProf().Sample {
					if s.NumLabel["tid"][0] != tid {
						continue
					}
					wall += s.Value[1]
					cpu += s.Value[2]
					blocking := hasFrame(s.Location, tc.blocker) && (tc.holder == "" || !hasFrame(s.Location, tc.holder))
					if blocking {
						offBlocker += s.Value[3]
					}
					if hasFrame(s.Location, tc.spinner) && !blocking {
						cpuSpinner += s.Value[2]
						if !hasFrame(s.Location, perfprof.PreemptedFrame) {
							offSpinner += s.Value[3]
						}
					}
					if tc.jfrFrame != "" && hasFrame(s.Location, tc.jfrFrame) {
						offJFR += s.Value[3]
					}
				}
				sec := func(ns int64) float64 { return float64(ns) / 1e9 }
				age := sec(lifetime(t, data, uint32(tid)))
				t.Logf("thread %d: wall %.3f s (cpu %.3f), age %.3f s; %s off the CPU %.3f s, truth %.3f s; %s on the CPU %.3f s, off %.3f s",
					tid, sec(wall), sec(cpu), age, tc.blocker, sec(offBlocker), blocked, tc.spinner, sec(cpuSpinner), sec(offSpinner))
				if got, want := 100*sec(offBlocker)/sec(wall), 100*blocked/age; got < want-3 || got > want+3 {
					t.Errorf("thread %d: %s off the CPU: %.1f%% of its time, truth %.1f%%", tid, tc.blocker, got, want)
				}
				if want := 100 * blocked / age; want < 10 {
					t.Errorf("thread %d blocked %.1f%% of its time: too little to tell anything", tid, want)
				}
				// Its frame named: most of the thread's CPU time is in it.
				if cpuSpinner < cpu/2 {
					t.Errorf("thread %d: %s has %.3f s of its %.3f s on the CPU", tid, tc.spinner, sec(cpuSpinner), sec(cpu))
				}
				if got := 100 * sec(offSpinner) / sec(wall); got > 3 {
					t.Errorf("thread %d: %s, which never blocks, off the CPU %.1f%% of the time", tid, tc.spinner, got)
				}
				if r := sec(wall) / age; r < 0.98 || r > 1.02 {
					t.Errorf("thread %d: wall-clock time %.3f s, its age %.3f s (ratio %.3f)", tid, sec(wall), age, r)
				}
				if tc.jfrEvent != "" {
					t.Logf("thread %d: off the CPU under %s %.3f s, JFR's %s %.3f s", tid, tc.jfrFrame, sec(offJFR), tc.jfrEvent, jfrBlocked[tid])
					if got, want := 100*sec(offJFR)/sec(wall), 100*jfrBlocked[tid]/age; got < want-3 || got > want+3 {
						t.Errorf("thread %d: off the CPU under %s %.1f%% of its time, JFR's %s %.1f%%", tid, tc.jfrFrame, got, tc.jfrEvent, want)
					}
				}
			}
		})
	}
}

// mainThread returns the thread with the most wall-clock time of those
// whose tid is their pid.
func mainThread(p *profile.Profile) int64 {
	walls := map[int64]int64{}
	for _, s := range p.Sample {
		if pid, tid := s.NumLabel["pid"][0], s.NumLabel["tid"][0]; pid == tid {
			walls[tid] += s.Value[1]
		}
	}
	var main int64
	for tid, w := range walls {
		if w > walls[main] {
			main = tid
		}
	}
	return main
}

// jfrDurations returns the seconds of a JFR recording's events of a
// type, summed by thread, by the kernel's tid.
func jfrDurations(t *testing.T, recording, event string) map[int64]float64 {
	t.Helper()
	out, err := exec.Command(fixtures.LookPath(t, "jfr"), "print", "--json", "--stack-depth", "1", "--events", event, recording).Output()
	if err != nil {
		t.Fatalf("jfr print %s: %v", recording, err)
	}
	var doc struct {
		Recording struct {
			Events []struct {
				Values struct {
					Duration    string
					EventThread struct{ OSThreadID int64 }
				}
			}
		}
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("jfr print %s: %v", recording, err)
	}
	sums := map[int64]float64{}
	// java.time.Duration's text: PT[nH][nM][n.nS].
	iso := regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$`)
	for _, e := range doc.Recording.Events {
		m := iso.FindStringSubmatch(e.Values.Duration)
		if m == nil {
			t.Fatalf("jfr print %s: an event's duration %q", recording, e.Values.Duration)
		}
		var d float64
		for i, unit := range []float64{3600, 60, 1} {
			if m[i+1] != "" {
				v, _ := strconv.ParseFloat(m[i+1], 64)
				d += v * unit
			}
		}
		sums[e.Values.EventThread.OSThreadID] += d
	}
	if len(sums) == 0 {
		t.Fatalf("jfr print %s: no %s event", recording, event)
	}
	return sums
}

// lifetime is the time from tid's first record (its exec when the exec
// enabled the events, its first switch or sample when that exec's comm
// came before) to its exit.
func lifetime(t *testing.T, data string, tid uint32) int64 {
	t.Helper()
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := perfdata.NewReader(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	var first, exit uint64
	seen := func(t uint64) {
		if first == 0 || t < first {
			first = t
		}
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec := rec.(type) {
		case *perfdata.Comm:
			if rec.Tid == tid {
				seen(rec.Trailer.Time)
			}
		case *perfdata.Sample:
			if rec.Tid == tid {
				seen(rec.Time)
			}
		case *perfdata.Switch:
			if rec.Trailer.Tid == tid {
				seen(rec.Trailer.Time)
			}
		case *perfdata.Task:
			if rec.Tid == tid && rec.Type == perfdata.TypeExit {
				exit = rec.Time
			}
		}
	}
	if first == 0 || exit == 0 {
		t.Fatalf("%s: thread %d has no record (%d) or no exit (%d)", data, tid, first, exit)
	}
	return int64(exit - first)
}

// hasFrame tells whether a stack has a function whose name has name in it.
func hasFrame(locs []*profile.Location, name string) bool {
	for _, l := range locs {
		for _, ln := range l.Line {
			if strings.Contains(ln.Function.Name, name) {
				return true
			}
		}
	}
	return false
}
