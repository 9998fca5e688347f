package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestAttachJava: two JVMs started without any flag, one of them with
// -XX:+DisableAttachMechanism, sampled by the agent (-p). Without
// --attach-java none of the plain JVM's samples are named as the
// workload's methods; with it, the agent is loaded into that JVM, whose
// dump lands in its user's ~/.debug/jit, and most of its samples are
// named; the other JVM is counted refused, in the status file and the log.
func TestAttachJava(t *testing.T) {
	jitprof, _ := binaries(t)
	t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
	dir := t.TempDir()
	if out, err := exec.Command(fixtures.LookPath(t, "javac"), "-d", dir, fixtures.Workload(t, "Work.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	java := fixtures.LookPath(t, "java")
	// Each JVM's home, where an attached agent writes its dump, is the
	// test's.
	startJVM := func(flags ...string) (*program, string) {
		home := t.TempDir()
		t.Setenv("HOME", home)
		return start(t, dir, append(append([]string{java}, flags...), "-cp", dir, "Work", "120000")...), home
	}
	plain, home := startJVM()
	disabled, _ := startJVM("-XX:+DisableAttachMechanism")
	pids := fmt.Sprintf("%d,%d", plain.cmd.Process.Pid, disabled.cmd.Process.Pid)

	for _, tt := range []struct {
		flag              string
		attached, refused int64
		least, most       float64 // of the plain JVM's samples named as Work's methods
	}{
		{"--attach-java=false", 0, 0, 0, 0},
		{"--attach-java", 1, 1, 0.5, 1},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			run := t.TempDir()
			pp, status := filepath.Join(run, "pprof"), filepath.Join(run, "status.json")
			ag := start(t, run, jitprof, "agent", tt.flag, "-p", pids, "--pprof-dir", pp, "--status", status, "--window", "1s", "-F", "999")
			// Until the JVM that refuses has been waited for
			// (hotspot.DefaultTimeout), and a few windows more.
			deadline := time.Now().Add(time.Minute)
			for windows := int64(-1); ; time.Sleep(200 * time.Millisecond) {
				st, err := os.ReadFile(status)
				if err == nil && len(st) > 0 {
					s := readStatus(t, status)
					if windows < 0 && s.JavaRefused >= tt.refused && s.JavaAttached >= tt.attached {
						windows = s.Windows
					}
					if windows >= 0 && s.Windows >= windows+3 {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no JVM attached or refused after a minute; the agent says:\n%s", ag.out.String())
				}
			}
			ag.interrupt(t)
			s := readStatus(t, status)
			if s.JavaAttached != tt.attached || s.JavaAlready != 0 || s.JavaRefused != tt.refused {
				t.Errorf("status: %d JVMs attached, %d already, %d refused; want %d, 0, %d", s.JavaAttached, s.JavaAlready, s.JavaRefused, tt.attached, tt.refused)
			}
			if tt.attached > 0 && !strings.Contains(ag.out.String(), fmt.Sprintf("JVMs: jitprof's JVMTI agent loaded into %d, 0 wrote a jitdump already, %d refused", tt.attached, tt.refused)) {
				t.Errorf("the agent's log does not count the JVMs:\n%s", ag.out.String())
			}
			share, n := workShare(t, pp, plain.cmd.Process.Pid)
			t.Logf("%s: %.3f of the JVM's %d samples named as Work's methods", tt.flag, share, n)
			if share < tt.least || share > tt.most {
				t.Errorf("%.3f of the JVM's samples named as Work's methods, want %.1f to %.1f", share, tt.least, tt.most)
			}
			// The JVMs are all the agent samples: each profile's program
			// is their launcher, never sampled, not libjvm.so.
			exe, err := filepath.EvalSymlinks(java)
			if err != nil {
				t.Fatal(err)
			}
			files, _ := filepath.Glob(filepath.Join(pp, "*.pb.gz"))
			for _, f := range files {
				if p := fixtures.ReadProfile(t, f); len(p.Sample) > 0 && p.Mapping[0].File != exe {
					t.Errorf("%s: the first mapping is %s, want %s", filepath.Base(f), p.Mapping[0].File, exe)
				}
			}
		})
	}
	dumps, err := filepath.Glob(filepath.Join(home, ".debug", "jit", "*", fmt.Sprintf("jit-%d.dump", plain.cmd.Process.Pid)))
	if err != nil || len(dumps) != 1 {
		t.Errorf("the attached JVM's dumps in %s/.debug/jit: %q (%v), want one", home, dumps, err)
	}
}

// workShare returns the share of process pid's samples, over the agent's
// pprof files in dir, whose leaf is one of Work's methods (unnamed ones
// counted too), and how many samples it has.
func workShare(t *testing.T, dir string, pid int) (float64, int64) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no profiles in %s (%v)", dir, err)
	}
	var work, all int64
	for _, f := range files {
		for _, s := range fixtures.ReadProfile(t, f).Sample {
			if v := s.NumLabel["pid"]; len(v) != 1 || v[0] != int64(pid) {
				continue
			}
			all += s.Value[0]
			if len(s.Location) == 0 {
				continue
			}
			if l := s.Location[0].Line; len(l) > 0 && strings.HasPrefix(contract.PerfName(l[len(l)-1].Function), "Work.") {
				work += s.Value[0]
			}
		}
	}
	if all == 0 {
		t.Fatalf("no samples of process %d in %s", pid, dir)
	}
	return float64(work) / float64(all), all
}
