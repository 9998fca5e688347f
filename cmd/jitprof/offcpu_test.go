package main

import (
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
// --off-cpu: the share of its main thread's time its blocking function
// spent off the CPU is the program's within 3 points, a function that
// only spins is not blocked (preempted aside: the machine may be busy),
// and the wall-clock view of the main thread adds up to its life, from
// its first record to its exit as the kernel timed them, within 2%. Node sleeps in a
// JS function (Atomics.wait), named from its dump; CPython 3.11 blocks in
// os.read on a pipe, named by libpython's symbols.
func TestOffCPUTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node and python under record")
	}
	for _, tc := range []struct {
		name, tool, script string
		blocker, spinner   string // a frame of the blocking function, and of the spinning one
	}{
		{"node", "node", "offcpu_sleeper.js", "JS:~sleeper", "spinner"},
		{"python", "python3", "offcpu_pipe.py", "os_read", "_PyEval_EvalFrameDefault"},
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
			t.Chdir(dir)
			data := filepath.Join(dir, "perf.data")
			code, stdout, stderr := jitprofMsg(t, "record", "--off-cpu", "--call-graph", "dwarf", "-o", data, "--", tc.tool, script)
			if code != 0 {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
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
			m := regexp.MustCompile(`truth \S+ (\S+)`).FindStringSubmatch(stdout)
			if m == nil {
				t.Fatalf("the program printed no truth:\n%s", stdout)
			}
			blocked, _ := strconv.ParseFloat(m[1], 64)

			opts := perfprof.Options{Input: data, View: perfprof.WallView}
			opts.Warn = func(err error) { t.Logf("warning: %v", err) }
			res, err := perfprof.Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			// The main thread: the one with the most wall-clock time
			// whose tid is its pid.
			walls := map[int64]int64{}
			for _, s := range res.Profile.Sample {
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
			var wall, offBlocker, offSpinner, cpu int64
			for _, s := range res.Profile.Sample {
				if s.NumLabel["tid"][0] != main {
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
			}
			sec := func(ns int64) float64 { return float64(ns) / 1e9 }
			age := sec(lifetime(t, data, uint32(main)))
			t.Logf("main thread %d: wall %.3f s (cpu %.3f), age %.3f s; %s off the CPU %.3f s, truth %.3f s; %s %.3f s",
				main, sec(wall), sec(cpu), age, tc.blocker, sec(offBlocker), blocked, tc.spinner, sec(offSpinner))
			if got, want := 100*sec(offBlocker)/sec(wall), 100*blocked/age; got < want-3 || got > want+3 {
				t.Errorf("%s off the CPU: %.1f%% of the main thread's time, truth %.1f%%", tc.blocker, got, want)
			}
			if want := 100 * blocked / age; want < 10 {
				t.Errorf("the program blocked %.1f%% of its time: too little to tell anything", want)
			}
			if got := 100 * sec(offSpinner) / sec(wall); got > 3 {
				t.Errorf("%s, which never blocks, off the CPU %.1f%% of the time", tc.spinner, got)
			}
			if r := sec(wall) / age; r < 0.98 || r > 1.02 {
				t.Errorf("the main thread's wall-clock time is %.3f s, its age %.3f s (ratio %.3f)", sec(wall), age, r)
			}
		})
	}
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
