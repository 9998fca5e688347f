package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// TestPerfMapReuse: a JIT that gives B the address A had and names both in
// its perf map (perfmap_reuse.c) has each named for the time it held the
// address, its share of the samples its share of the CPU time by its own
// measure. jitprof record's copy of the map says when each line appeared;
// without it (as perf report reads the map, once, at the end) one name takes
// every sample, which the truth rejects.
func TestPerfMapReuse(t *testing.T) {
	fixtures.RealTier(t, "recording a JIT")
	bin := fixtures.BuildC(t, "perfmap_reuse.c", "-O2")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	code, stdout, stderr := jitprofMsg(t, "record", "-q", "-F", "1999", "-o", data, "--", bin, "1", "0.5")
	if code != 0 {
		t.Fatalf("record: exit %d:\n%s", code, stderr)
	}
	var truth map[string]int64
	if err := json.Unmarshal([]byte(stdout), &truth); err != nil {
		t.Fatalf("the workload's truth: %v\n%s", err, stdout)
	}
	maps, _ := filepath.Glob(filepath.Join(dir, "perf-*.map"))
	if len(maps) != 1 {
		t.Fatalf("the recording's directory has maps %q, want the workload's", maps)
	}
	t.Cleanup(func() { os.Remove(filepath.Join("/tmp", filepath.Base(maps[0]))) })

	shares := func() map[string]int {
		res, err := perfprof.Run(perfprof.Options{Input: data})
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int{}
		for name, n := range fixtures.LeafCounts(res.Profile.PProf()) {
			if _, ok := truth[name]; ok {
				counts[name] = n
			}
		}
		return counts
	}
	fixtures.CheckCPUShares(t, "jitprof report", truth, shares())

	// An archive carries the times with the map.
	code, here := jitprof(t, "report", "-q", "-i", data)
	ar := filepath.Join(t.TempDir(), "rec.tar.gz")
	if c, _, stderr := jitprofMsg(t, "archive", "-i", data, "-o", ar); c != 0 || code != 0 {
		t.Fatalf("report: exit %d; archive: exit %d\n%s", code, c, stderr)
	}
	if code, there := jitprof(t, "report", "-q", "-i", ar); code != 0 || there != here {
		t.Errorf("the archive's report (exit %d) differs from the recording's:\n%.1000s\nhere:\n%.1000s", code, there, here)
	}

	perf, _ := fixtures.SymbolCounts(t, data, "-g", "none")
	t.Logf("perf report, the map read once: reused_A %d, reused_B %d samples", perf["reused_A"], perf["reused_B"])

	// The times are what tells A's samples from B's.
	if err := os.Remove(maps[0] + jitsources.TimesSuffix); err != nil {
		t.Fatal(err)
	}
	untimed := shares()
	t.Logf("without the times: %v", untimed)
	if a, b := untimed["reused_A"], untimed["reused_B"]; a != 0 || b == 0 {
		t.Errorf("without the times, the last line should take every sample: reused_A %d, reused_B %d", a, b)
	}
}

// TestContainer: node in its own pid and mount namespaces, with its own
// /tmp, writes its dump and perf map there under the pid it has in the
// container; `jitprof record -a` keeps them under node's pid on the host,
// and once the container is gone, with its /tmp, `jitprof report` still names
// node's JavaScript functions, hot's and cold's shares those of the CPU time
// the script measured. Without the copies they are unnamed.
func TestContainer(t *testing.T) {
	fixtures.RealTier(t, "running node in a container")
	for _, flag := range []string{"--perf-prof", "--perf-basic-prof"} {
		t.Run(flag, func(t *testing.T) {
			pid, wait := fixtures.NodeContainer(t, flag, 4)
			st, err := procfs.Host.Status(uint32(pid))
			if err != nil || st.NSpid == uint32(pid) {
				t.Fatalf("node, pid %d here, has pid %d in its container (%v)", pid, st.NSpid, err)
			}
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			if code, _, stderr := jitprofMsg(t, "record", "-a", "-q", "--duration", "2.5", "-o", data); code != 0 {
				t.Fatalf("record -a: exit %d:\n%s", code, stderr)
			}
			out := wait()
			var truth map[string]int64
			if err := json.Unmarshal([]byte(out), &truth); err != nil {
				t.Fatalf("the script's truth: %v: %q", err, out)
			}

			code, text := jitprof(t, "report", "-i", data, "--pid", strconv.Itoa(pid), "-q")
			if code != 0 || !strings.Contains(text, "JS:*hot ") || !strings.Contains(text, "JS:*cold ") {
				t.Errorf("report (exit %d) does not name hot and cold:\n%.3000s", code, text)
			}
			counts := jsCounts(t, data, pid)
			fixtures.CheckCPUShares(t, "jitprof report", truth, counts)

			copies, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("*-%d.*", pid)))
			t.Logf("copied: %q", copies)
			for _, c := range copies {
				if err := os.Remove(c); err != nil {
					t.Fatal(err)
				}
			}
			if without := jsCounts(t, data, pid); without["hot"]+without["cold"] != 0 {
				t.Errorf("without record's copies, the container's gone files name functions: %v", without)
			}
		})
	}
}

// jsCounts returns the samples of process pid in each JavaScript function,
// by its name alone: JS:*hot /path/hotcold.js:2:13 counts for hot.
func jsCounts(t *testing.T, data string, pid int) map[string]int {
	t.Helper()
	res, err := perfprof.Run(perfprof.Options{Input: data, Filter: perfprof.Filter{Pids: []uint32{uint32(pid)}}})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for name, n := range fixtures.LeafCounts(res.Profile.PProf()) {
		if rest, ok := strings.CutPrefix(name, "JS:"); ok {
			if f := strings.Fields(strings.TrimLeft(rest, "*~^+")); len(f) > 0 && (f[0] == "hot" || f[0] == "cold") {
				counts[f[0]] += n
			}
		}
	}
	return counts
}

// TestContainerNativeFrames: a native program run in its own mount
// namespace from its own file, at a path where this side has another file
// (the same code under other names), is named from its own file, read in
// its root while it runs, as perf reads a container's files in its mount
// namespace; each function's share of the samples is its share of the CPU
// time by the program's own measure. Once the program is gone the file at
// the path here is all there is, and it is not the one recorded: a warning
// names it, and none of its names is given.
func TestContainerNativeFrames(t *testing.T) {
	fixtures.RealTier(t, "running a program in a container")
	pid, path, stop := fixtures.NativeContainer(t)
	data := filepath.Join(t.TempDir(), "perf.data")
	if code, _, stderr := jitprofMsg(t, "record", "-q", "-p", strconv.Itoa(pid), "--duration", "2", "-o", data); code != 0 {
		t.Fatalf("record -p %d: exit %d:\n%s", pid, code, stderr)
	}
	// The build-id of the program's own file, as readelf reads it through
	// the kernel's link to what the process runs.
	note, err := exec.Command(fixtures.LookPath(t, "readelf"), "-n", fmt.Sprintf("/proc/%d/exe", pid)).Output()
	_, after, found := strings.Cut(string(note), "Build ID: ")
	if err != nil || !found {
		t.Fatalf("readelf -n of the program: %v\n%s", err, note)
	}
	buildID := strings.Fields(after)[0]
	var mapped []string // the build-ids of the profile's mappings of path
	leaves := func() (map[string]int, []string) {
		var warnings []string
		res, err := perfprof.Run(perfprof.Options{Input: data, Options: symbolize.Options{Warn: func(err error) { warnings = append(warnings, err.Error()) }}})
		if err != nil {
			t.Fatal(err)
		}
		p := res.Profile.PProf()
		counts := map[string]int{}
		for name, n := range fixtures.LeafCounts(p) {
			if strings.HasPrefix(name, "inside_") || strings.HasPrefix(name, "decoy_") {
				counts[name] = n
			}
		}
		mapped = nil
		for _, m := range p.Mapping {
			if m.File == path {
				mapped = append(mapped, m.BuildID)
			}
		}
		return counts, warnings
	}
	live, warnings := leaves()
	// The profile's mapping carries the build-id of the file it was named
	// from, which the recording did not give.
	if len(mapped) == 0 || slices.ContainsFunc(mapped, func(id string) bool { return id != buildID }) {
		t.Errorf("the mappings of %s have build-ids %q, want the program's %s", path, mapped, buildID)
	}
	// annotate shows the container's code, from the file the profile was
	// named from: its loop up to 3,000,000 (0x2dc6c0), where the decoy's
	// goes up to 7,777,777 (0x76adf1).
	code, stdout, stderr := jitprofMsg(t, "annotate", "-i", data, "inside_hot")
	if code != 0 || !strings.Contains(stdout, "$0x2dc6c0") || strings.Contains(stdout, "0x76adf1") {
		t.Errorf("annotate of the container's function: exit %d, %q\n%s", code, stderr, stdout)
	}
	var truth map[string]int64
	if out := stop(); json.Unmarshal([]byte(out), &truth) != nil {
		t.Fatalf("the program's truth: %q", out)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings while the program runs: %q", warnings)
	}
	fixtures.CheckCPUShares(t, "jitprof report, the program running", truth, live)

	gone, warnings := leaves()
	if len(gone) > 0 {
		t.Errorf("once the program is gone, named from the file at %s here: %v", path, gone)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, path) && strings.Contains(w, "the recording saw") }) {
		t.Errorf("once the program is gone, no warning that %s is not the recorded file: %q", path, warnings)
	}
}

// TestRecordRunningService: `record -p` of a node that another user started
// before the recording, as a service runs, reported while it runs. The
// recording describes a process that ran before it without a time (its
// marker among its mappings), so it is looked up as running by the time
// the recording began, and its dump, its user's own, is read (it was
// refused as a gone process's file that root does not own): hot and cold
// named, with the shares of the CPU time the script measured.
func TestRecordRunningService(t *testing.T) {
	fixtures.RealTier(t, "recording a running node")
	pid, wait := fixtures.NodeAs(t, fixtures.NewAttacker(t), 6)
	data := filepath.Join(t.TempDir(), "perf.data")
	if code, _, stderr := jitprofMsg(t, "record", "-q", "-p", strconv.Itoa(pid), "--duration", "2", "-o", data); code != 0 {
		t.Fatalf("record -p %d: exit %d:\n%s", pid, code, stderr)
	}
	counts := jsCounts(t, data, pid)
	var truth map[string]int64
	if out := wait(); json.Unmarshal([]byte(out), &truth) != nil {
		t.Fatalf("the script's truth: %q", out)
	}
	fixtures.CheckCPUShares(t, "jitprof report, node running", truth, counts)
}
