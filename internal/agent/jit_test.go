package agent

import (
	"encoding/json"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/procfs"
)

// leafCounts sums, over the agent's pprof files in dir, the samples of
// process pid by the name of their leaf function, as name gives it ("" to
// leave a function out).
func leafCounts(t *testing.T, dir string, pid int, name func(string) string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles in %s (%v)", dir, err)
	}
	counts := make(map[string]int)
	for _, f := range files {
		for _, s := range fixtures.ReadProfile(t, f).Sample {
			if v := s.NumLabel["pid"]; len(v) != 1 || v[0] != int64(pid) || len(s.Location) == 0 {
				continue
			}
			lines := s.Location[0].Line
			if len(lines) == 0 {
				continue
			}
			if n := name(contract.PerfName(lines[len(lines)-1].Function)); n != "" {
				counts[n] += int(s.Value[0])
			}
		}
	}
	return counts
}

// checkDropped checks that the agent removed the copies of process pid
// once the last window that carried it was read.
func checkDropped(t *testing.T, dir string, pid int) {
	t.Helper()
	if left, _ := filepath.Glob(filepath.Join(dir, fmt.Sprintf("*-%d.*", pid))); len(left) > 0 {
		t.Errorf("the copies of exited process %d are still there: %q", pid, left)
	}
}

// TestPerfMapReuse: a JIT that gives B the address A had and names both in
// its perf map (perfmap_reuse.c), run under the agent: the agent's copy of
// the map says when each line appeared, so each function has the samples of
// the time it held the address, their shares those of the CPU time the
// program measured, as jitprof record and report give them
// (cmd/jitprof's TestPerfMapReuse). Read once, the map would give every
// sample at the address to B.
func TestPerfMapReuse(t *testing.T) {
	jitprof, _ := binaries(t)
	bin := fixtures.BuildC(t, "perfmap_reuse.c", "-O2")
	dir := t.TempDir()
	windows, pp, status := filepath.Join(dir, "windows"), filepath.Join(dir, "pprof"), filepath.Join(dir, "status.json")
	ag := start(t, dir, jitprof, "agent", "--keep-windows", windows, "--pprof-dir", pp, "--status", status,
		"--window", "2s", "-F", "999", "-q")
	time.Sleep(1500 * time.Millisecond) // sampling
	work := start(t, dir, bin, "2", "1")
	work.wait(t)
	ag.interrupt(t)
	pid := work.cmd.Process.Pid
	var truth map[string]int64
	if err := json.Unmarshal([]byte(work.out.String()), &truth); err != nil {
		t.Fatalf("the workload's truth: %v\n%s", err, work.out.String())
	}
	counts := leafCounts(t, pp, pid, func(name string) string {
		if _, ok := truth[name]; ok {
			return name
		}
		return ""
	})
	fixtures.CheckCPUShares(t, "jitprof agent", truth, counts)
	st := readStatus(t, status)
	t.Logf("status: %+v", st)
	checkDropped(t, windows, pid)
}

// TestContainer: node in its own pid and mount namespaces, with its own
// /tmp, writes its dump and perf map there under the pid it has in the
// container, and exits, its /tmp with it, before the agent reads its
// window: the agent's profile still names its JavaScript functions under
// its pid on the host, hot's and cold's shares those of the CPU time the
// script measured, from the copies the agent made while it ran.
func TestContainer(t *testing.T) {
	jitprof, _ := binaries(t)
	for _, flag := range []string{"--perf-prof", "--perf-basic-prof"} {
		t.Run(flag, func(t *testing.T) {
			dir := t.TempDir()
			windows, pp := filepath.Join(dir, "windows"), filepath.Join(dir, "pprof")
			// One window, read after the container is gone. At 2999 Hz,
			// node's 3 s give CheckCPUShares its thousand samples even
			// with a quarter of a CPU (CI runs packages side by side).
			ag := start(t, dir, jitprof, "agent", "--keep-windows", windows, "--pprof-dir", pp,
				"--window", "1m", "-F", "2999", "-q")
			time.Sleep(1500 * time.Millisecond) // sampling
			pid, wait := fixtures.NodeContainer(t, flag, 3)
			if st, err := procfs.Host.Status(uint32(pid)); err != nil || st.NSpid == uint32(pid) {
				t.Fatalf("node, pid %d here, has pid %d in its container (%v)", pid, st.NSpid, err)
			}
			out := wait()
			ag.interrupt(t)
			var truth map[string]int64
			if err := json.Unmarshal([]byte(out), &truth); err != nil {
				t.Fatalf("the script's truth: %v: %q", err, out)
			}
			counts := leafCounts(t, pp, pid, func(name string) string {
				// JS:*hot /path/hotcold.js:2:13 counts for hot.
				if rest, ok := strings.CutPrefix(name, "JS:"); ok {
					if f := strings.Fields(strings.TrimLeft(rest, "*~^+")); len(f) > 0 && (f[0] == "hot" || f[0] == "cold") {
						return f[0]
					}
				}
				return ""
			})
			fixtures.CheckCPUShares(t, "jitprof agent", truth, counts)
			checkDropped(t, windows, pid)
		})
	}
}

// TestContainerNativeFrames: a native program run in a container (its own
// mount namespace, its image an overlay over a directory where this side
// has another program at the same path) is named in the agent's profiles
// from its own file, read in its root while it runs, each function's share
// of the samples its share of the CPU time by the program's own measure.
func TestContainerNativeFrames(t *testing.T) {
	jitprof, _ := binaries(t)
	dir := t.TempDir()
	pp := filepath.Join(dir, "pprof")
	ag := start(t, dir, jitprof, "agent", "--pprof-dir", pp, "--window", "1s", "-F", "2999", "-q")
	pid, _, stop := fixtures.NativeContainer(t)
	// Two windows read while the program runs, then one more.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if files, _ := filepath.Glob(filepath.Join(pp, "*.pb.gz")); len(files) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent wrote no three profiles in a minute")
		}
	}
	out := stop()
	ag.interrupt(t)
	var truth map[string]int64
	if err := json.Unmarshal([]byte(out), &truth); err != nil {
		t.Fatalf("the program's truth: %v: %q", err, out)
	}
	counts := leafCounts(t, pp, pid, func(name string) string {
		if strings.HasPrefix(name, "inside_") || strings.HasPrefix(name, "decoy_") {
			return name
		}
		return ""
	})
	fixtures.CheckCPUShares(t, "jitprof agent", truth, counts)
}
