package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/gmon"
	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

// stagedChildEnv makes the test binary, run again under perf record, a
// program that marks its stages in its dump: see runStagedChild.
const stagedChildEnv = "JITPROF_STAGED_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(stagedChildEnv); dir != "" {
		if err := runStagedChild(dir); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	fixtures.RemoveAgents() // built by TestRecordAgents
	os.Exit(code)
}

// Stage lengths of the child, in CPU time: warmup, then as long with
// accounting off, then steady for twice as long.
const stageCPU = 150 * time.Millisecond

func runStagedChild(dir string) error {
	w, err := jitdump.Create(jitdump.Options{Dir: dir})
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return w.Stage("warmup") },
		func() error { return spin(stageCPU) },
		func() error { return w.Accounting(false) },
		func() error { return spin(stageCPU) },
		func() error { return w.Accounting(true) },
		func() error { return w.Stage("steady") },
		func() error { return spin(2 * stageCPU) },
		func() error { return w.Stage("") },
		w.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// spin burns d of the process's CPU time, in user code: the clock is read
// (a system call) once per 2^20 steps.
func spin(d time.Duration) error {
	var ts unix.Timespec
	cpu := func() int64 {
		unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts)
		return ts.Nano()
	}
	x := uint64(1)
	for end := cpu() + int64(d); cpu() < end; {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 { // keeps the loop from being optimised away
		return os.ErrInvalid
	}
	return nil
}

var samplesLine = regexp.MustCompile(`(?m)^# Samples: (\d+)`)

// sampleCounts is the "# Samples: N" of each section of a text report.
func sampleCounts(t *testing.T, text string) []int {
	t.Helper()
	var out []int
	for _, m := range samplesLine.FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// TestStagesAndGmon: a program that marks a warm-up, turns accounting off
// for as long, then marks a steady stage twice as long. The report drops
// the samples taken with accounting off, --stage NAME selects the program's
// stages, --stage NAME=START,END selects by time, and --format gmon and
// kaffe-as write one histogram per stage that gprof reads.
func TestStagesAndGmon(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "1000", "-o", data, "--", "env", stagedChildEnv+"="+dir, os.Args[0])

	// perf counts every sample: jitprof must drop the third taken with
	// accounting off.
	_, perfTotal := fixtures.SymbolCounts(t, data)
	code, all := jitprof(t, "report", "-i", data, "-q", "--sort", "symbol")
	code2, staged := jitprof(t, "report", "-i", data, "-q", "--sort", "symbol", "--stage", "warmup", "--stage", "steady")
	if code != 0 || code2 != 0 {
		t.Fatalf("exit %d, %d:\n%s\n%s", code, code2, all, staged)
	}
	kept, counts := sampleCounts(t, all), sampleCounts(t, staged)
	if len(kept) != 1 || len(counts) != 2 || !strings.Contains(staged, "stage warmup") || !strings.Contains(staged, "stage steady") {
		t.Fatalf("want one section, then two (warmup, steady):\n%s\n%s", all, staged)
	}
	warmup, steady := float64(counts[0]), float64(counts[1])
	dropped := float64(perfTotal - kept[0])
	t.Logf("perf %d samples; jitprof keeps %d: warmup %v, steady %v; %v dropped", perfTotal, kept[0], warmup, steady, dropped)
	// Ratios of one run: steady ran twice as long as warm-up, accounting
	// was off as long as warm-up ran.
	if r := steady / warmup; r < 1.4 || r > 2.8 {
		t.Errorf("steady/warmup = %.2f, want about 2", r)
	}
	if r := dropped / warmup; r < 0.6 || r > 1.6 {
		t.Errorf("dropped/warmup = %.2f, want about 1", r)
	}
	if outside := float64(kept[0]) - warmup - steady; outside < 0 || outside > 0.1*float64(kept[0]) {
		t.Errorf("%v samples outside both stages", outside)
	}

	code, early := jitprof(t, "report", "-i", data, "-q", "--stage", "early=,0.05")
	if n := sampleCounts(t, early); code != 0 || len(n) != 1 || n[0] == 0 || n[0] > 80 {
		t.Errorf("--stage early=,0.05 (exit %d): %v samples, want some, at most 50 ms of them:\n%.500s", code, n, early)
	}

	for _, tc := range []struct{ format, symbols, hist string }{
		{"gmon", "jitprof-symbols", "gmon.out"},
		{"kaffe-as", "kaffe-jit-symbols.s", "xgmon.out"},
	} {
		out := filepath.Join(dir, tc.format)
		if code, msg := jitprof(t, "report", "-i", data, "-q", "--format", tc.format, "-o", out, "--stage", "warmup", "--stage", "steady"); code != 0 {
			t.Fatalf("--format %s: exit %d: %s", tc.format, code, msg)
		}
		symbols := filepath.Join(out, tc.symbols)
		if tc.format == "kaffe-as" {
			obj := symbols + ".o"
			linked := filepath.Join(out, "kaffe-jit-symbols")
			for _, args := range [][]string{{"as", symbols, "-o", obj}, {"ld", "-Ttext=0x100000", "-e", "0", "-o", linked, obj}} {
				if msg, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, msg)
				}
			}
			symbols = linked
		}
		for _, st := range []string{"warmup", "steady"} {
			msg, err := exec.Command("gprof", "-b", "-p", symbols, filepath.Join(out, tc.hist+"."+st)).CombinedOutput()
			// go test strips its binaries, so the spinning is
			// _unaccounted_; the kernel's functions are named once.
			if err != nil || !strings.Contains(string(msg), gmon.UnaccountedName) || strings.Contains(string(msg), " #2") {
				t.Errorf("gprof on %s's %s stage: %v, no _unaccounted_ or a function twice:\n%.1000s", tc.format, st, err, msg)
			}
		}
	}
}
