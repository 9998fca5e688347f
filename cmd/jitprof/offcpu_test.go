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
// Java's threads wait for a ReentrantLock the others hold, its frames
// named from the JVMTI agent's dump, and JFR times the same run's parks
// (jdk.ThreadPark), the time off the CPU under Unsafe.park, independently.
func TestOffCPUTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node, python and java under record")
	}
	for _, tc := range []struct {
		name, tool, script string
		blocker, spinner   string // a frame of the blocking function, and of the spinning one
		jfr                bool   // the JVM records its parks with JFR
	}{
		{"node", "node", "offcpu_sleeper.js", "JS:~sleeper", "spinner", false},
		{"python", "python3", "offcpu_pipe.py", "os_read", "_PyEval_EvalFrameDefault", false},
		{"java", "java", "OffCPULock.java", "OffCPULock.waitForLock(", "OffCPULock.spin(", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				fixtures.Missing(t, "%s: %v", tc.tool, err)
			}
			script, err := filepath.Abs(filepath.Join("testdata", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			command := []string{tc.tool, script}
			dir := t.TempDir()
			jfr := filepath.Join(dir, "park.jfr")
			if tc.jfr {
				settings, err := filepath.Abs(filepath.Join("testdata", "offcpu_park.jfc"))
				if err != nil {
					t.Fatal(err)
				}
				command = []string{tc.tool, "-XX:StartFlightRecording=filename=" + jfr + ",settings=" + settings, script}
			}
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
			var parks map[int64]float64
			if tc.jfr {
				parks = jfrParks(t, jfr)
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
				tid := mainThread(res.Profile)
				if m[1] != "" {
					tid, _ = strconv.ParseInt(m[1], 10, 64)
				}
				var wall, offBlocker, offSpinner, offPark, cpu int64
				for _, s := range res.Profile.Sample {
					if s.NumLabel["tid"][0] != tid {
						continue
					}
					wall += s.Value[1]
					cpu += s.Value[2]
					if hasFrame(s.Location, tc.blocker) {
						offBlocker += s.Value[3]
					}
					if hasFrame(s.Location, tc.spinner) && !hasFrame(s.Location, tc.blocker) && !hasFrame(s.Location, perfprof.PreemptedFrame) {
						offSpinner += s.Value[3]
					}
					if hasFrame(s.Location, javaPark) {
						offPark += s.Value[3]
					}
				}
				sec := func(ns int64) float64 { return float64(ns) / 1e9 }
				age := sec(lifetime(t, data, uint32(tid)))
				t.Logf("thread %d: wall %.3f s (cpu %.3f), age %.3f s; %s off the CPU %.3f s, truth %.3f s; %s %.3f s",
					tid, sec(wall), sec(cpu), age, tc.blocker, sec(offBlocker), blocked, tc.spinner, sec(offSpinner))
				if got, want := 100*sec(offBlocker)/sec(wall), 100*blocked/age; got < want-3 || got > want+3 {
					t.Errorf("thread %d: %s off the CPU: %.1f%% of its time, truth %.1f%%", tid, tc.blocker, got, want)
				}
				if want := 100 * blocked / age; want < 10 {
					t.Errorf("thread %d blocked %.1f%% of its time: too little to tell anything", tid, want)
				}
				if got := 100 * sec(offSpinner) / sec(wall); got > 3 {
					t.Errorf("thread %d: %s, which never blocks, off the CPU %.1f%% of the time", tid, tc.spinner, got)
				}
				if r := sec(wall) / age; r < 0.98 || r > 1.02 {
					t.Errorf("thread %d: wall-clock time %.3f s, its age %.3f s (ratio %.3f)", tid, sec(wall), age, r)
				}
				if tc.jfr {
					t.Logf("thread %d: off the CPU under %s %.3f s, JFR's parks %.3f s", tid, javaPark, sec(offPark), parks[tid])
					if got, want := 100*sec(offPark)/sec(wall), 100*parks[tid]/age; got < want-3 || got > want+3 {
						t.Errorf("thread %d: off the CPU under %s %.1f%% of its time, JFR's parks %.1f%%", tid, javaPark, got, want)
					}
				}
			}
		})
	}
}

// javaPark is the frame of the native method a JVM parks its threads in.
const javaPark = "jdk.internal.misc.Unsafe.park("

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

// jfrParks returns the seconds each thread spent parked, by its kernel
// tid, as the jdk.ThreadPark events of a JFR recording time them.
func jfrParks(t *testing.T, recording string) map[int64]float64 {
	t.Helper()
	out, err := exec.Command(fixtures.LookPath(t, "jfr"), "print", "--json", "--stack-depth", "1", "--events", "jdk.ThreadPark", recording).Output()
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
	parks := map[int64]float64{}
	// java.time.Duration's text: PT[nH][nM][n.nS].
	iso := regexp.MustCompile(`^PT(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$`)
	for _, e := range doc.Recording.Events {
		m := iso.FindStringSubmatch(e.Values.Duration)
		if m == nil {
			t.Fatalf("jfr print %s: a park's duration %q", recording, e.Values.Duration)
		}
		var d float64
		for i, unit := range []float64{3600, 60, 1} {
			if m[i+1] != "" {
				v, _ := strconv.ParseFloat(m[i+1], 64)
				d += v * unit
			}
		}
		parks[e.Values.EventThread.OSThreadID] += d
	}
	if len(parks) == 0 {
		t.Fatalf("jfr print %s: no jdk.ThreadPark event", recording)
	}
	return parks
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
