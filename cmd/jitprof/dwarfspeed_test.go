package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestDWARFReportSpeed: on perf's own --call-graph dwarf recording of
// CPython 3.13 (-X perf_jit) running calls3.py, over 100 MB of samples
// with 8 KiB stack copies, jitprof report -g (the built binary, as a
// process) is at least 5x faster than perf inject --jit followed by perf
// report -g, and its peak RSS is at most half the recording's size: it
// streams the samples rather than holding them.
//
// The two are timed in turn, five times each, and their medians compared:
// the machine's speed drifts, a ratio within one run does not.
func TestDWARFReportSpeed(t *testing.T) {
	python := fixtures.Python313(t)
	prog := fixtures.Workload(t, "calls3.py")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	// 2 kHz for 7 CPU seconds: about 14,000 samples of 8.4 KB.
	fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "1999", "--call-graph", "dwarf",
		"-o", data, "--", python, "-X", "perf_jit", prog, "7")
	fixtures.RemoveTmpJITFiles(t, data)
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= 100e6 {
		t.Fatalf("the recording is %.1f MB: the targets are set for over 100 MB", float64(fi.Size())/1e6)
	}

	bin := buildJitprof(t)
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Fatal(err)
	}
	injected := filepath.Join(dir, "perf.jit.data")
	// As fixtures.Perf does: perf's build-id cache would cost it more.
	nocache := []string{perf, "--buildid-dir", "/dev/null/no-buildid-cache"}
	inject := append(slices.Clone(nocache), "inject", "--jit", "-i", data, "-o", injected)
	report := append(slices.Clone(nocache), "report", "-i", injected, "-g", "--stdio")
	ours := []string{bin, "report", "-i", data, "-g", "--stdio"}

	// What each prints is a profile of the run: the Python frames are
	// there, reached only through the trampolines' unwinding tables.
	leaf := pythonFrame(prog, "leaf")
	for _, argv := range [][]string{ours, report} {
		if argv[0] == perf {
			timed(t, inject...)
		}
		out, err := exec.Command(argv[0], argv[1:]...).Output()
		if err != nil || !strings.Contains(string(out), leaf) {
			t.Fatalf("%s: %v; %s is not in its output", strings.Join(argv, " "), err, leaf)
		}
	}

	const runs = 5
	var oursT, perfT []time.Duration
	var peak int64
	for range runs {
		d, rss := timedPeak(t, ours...)
		oursT, peak = append(oursT, d), max(peak, rss)
		injectT, _ := timed(t, inject...)
		reportT, _ := timed(t, report...)
		perfT = append(perfT, injectT+reportT)
	}
	o, p := median(oursT), median(perfT)
	t.Logf("%.1f MB: jitprof report -g %v (median of %v), perf inject + perf report -g %v (%v): %.1fx; jitprof's peak RSS %.1f MB (%.2fx the recording)",
		float64(fi.Size())/1e6, o, oursT, p, perfT, p.Seconds()/o.Seconds(), float64(peak)/1e6, float64(peak)/float64(fi.Size()))
	if p < 5*o {
		t.Errorf("jitprof report -g took %v, perf inject + perf report -g %v (medians of %d): less than 5x faster", o, p, runs)
	}
	if peak > fi.Size()/2 {
		t.Errorf("jitprof report -g's peak RSS is %.1f MB, over half the recording's %.1f MB", float64(peak)/1e6, float64(fi.Size())/1e6)
	}
}

// median returns the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
