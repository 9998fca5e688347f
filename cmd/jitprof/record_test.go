package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// jitprofMsg runs the command in-process and returns its exit status, its
// standard output, and its standard error with the error main would print.
func jitprofMsg(t testing.TB, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return 0, out.String(), errOut.String()
	}
	code = 2
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	}
	if err != nil {
		errOut.WriteString("jitprof: " + err.Error() + "\n")
	}
	return code, out.String(), errOut.String()
}

func TestRecordArgs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "perf.data")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no target", []string{"record", "-o", out}, 2, "give a command"},
		{"command and -p", []string{"record", "-o", out, "-p", "1", "--", "true"}, 2, "only one"},
		{"-p and -a", []string{"record", "-o", out, "-p", "1", "-a"}, 2, "only one"},
		{"bad event", []string{"record", "-o", out, "-e", "no-such-event", "--", "true"}, 2, `event "no-such-event"`},
		{"bad modifier", []string{"record", "-o", out, "-e", "cpu-clock:k", "--", "true"}, 2, "only u"},
		{"missing command", []string{"record", "-o", out, "--", "no-such-command-jitprof"}, 1, "executable file not found"},
		// Usage errors all exit 2, those record.Run finds as well.
		{"ring not a power of two", []string{"record", "-o", out, "-m", "100", "--", "true"}, 2, "not a power of two"},
		{"frequency over the limit", []string{"record", "-o", out, "-F", "2000000000", "--", "true"}, 2, "-F 2000000000 exceeds the kernel's limit"},
		{"frequency zero", []string{"record", "-o", out, "-F", "0", "--", "true"}, 2, "-F 0: the frequency must be positive"},
		{"copy bound", []string{"record", "-o", out, "--jit-copy-max-mb", "0", "--", "true"}, 2, "--jit-copy-max-mb: must be positive"},
		{"call graph mode", []string{"record", "-o", out, "--call-graph", "lbr", "--", "true"}, 2, `--call-graph "lbr": fp or dwarf[,SIZE]`},
		{"stack size", []string{"record", "-o", out, "--call-graph", "dwarf,65536", "--", "true"}, 2, "between 1 and 65528 bytes"},
		{"pid gone", []string{"record", "-o", out, "-p", "1073741824"}, 1, "no such process"},
		{"command's status", []string{"record", "-q", "-o", out, "--", "sh", "-c", "exit 3"}, 3, "exited with status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := jitprofMsg(t, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant it to say %q", code, tc.code, stderr, tc.msg)
			}
		})
	}
}

// TestRecordThenReport: jitprof record then jitprof report, on node with no
// flag of its own, shows its JavaScript; the summary counts the samples.
func TestRecordThenReport(t *testing.T) {
	workload := fixtures.Workload(t, "newfunctions.js")
	dir := t.TempDir()
	t.Chdir(dir) // node writes its dump in the working directory
	data := filepath.Join(dir, "perf.data")
	code, _, stderr := jitprofMsg(t, "record", "-g", "-o", data, "--", "node", workload)
	if code != 0 || !strings.Contains(stderr, "samples in") || !strings.Contains(stderr, "none lost") {
		t.Fatalf("record: exit %d:\n%s", code, stderr)
	}
	code, text := jitprof(t, "report", "-i", data, "-q", "-g")
	if code != 0 || !strings.Contains(text, "JS:") {
		t.Errorf("report (exit %d) has no JavaScript function:\n%.2000s", code, text)
	}
}

// TestRecordCallGraph: -g records frame-pointer call chains, --call-graph
// dwarf,SIZE user registers and SIZE bytes of stack, --call-graph winning
// over -g as in perf; the summary gives a DWARF recording's bytes per
// sample. Full stack copies are no warning (a copy of 8192 bytes is full
// above main, and every stack unwinds): the report says when stacks ran
// past their copies, and only then.
func TestRecordCallGraph(t *testing.T) {
	const cmd = "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done"
	const cutShort = "of the unwound stacks ran past the stack copy"
	all := perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
	for _, tc := range []struct {
		args  []string
		st    perfdata.SampleType
		stack uint32
		says  []string
		// The report's warning of stacks cut short, when DWARF stacks
		// are unwound: whether it is given.
		cut bool
	}{
		{args: []string{"-g"}, st: perfdata.SampleCallchain},
		{args: []string{"--call-graph", "fp"}, st: perfdata.SampleCallchain},
		{args: []string{"--call-graph", "dwarf"}, st: all, stack: 8192, says: []string{" KB a sample)"}},
		{args: []string{"-g", "--call-graph", "dwarf,64"}, st: all, stack: 64, cut: true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "perf.data")
			args := slices.Concat([]string{"record", "-F", "999", "--no-runtime-env", "-o", data}, tc.args, []string{"--", "sh", "-c", cmd})
			code, _, stderr := jitprofMsg(t, args...)
			if code != 0 {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
			for _, s := range tc.says {
				if !strings.Contains(stderr, s) {
					t.Errorf("the summary does not say %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "stack copy") {
				t.Errorf("record warns of stack copies, which only unwinding can judge:\n%s", stderr)
			}
			if tc.stack > 0 {
				code, _, stderr := jitprofMsg(t, "report", "-i", data)
				if code != 0 || strings.Contains(stderr, cutShort) != tc.cut {
					t.Errorf("report: exit %d; saying %q: %v, want %v:\n%s", code, cutShort, !tc.cut, tc.cut, stderr)
				}
			}
			f, err := perfdata.Open(data)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			a := f.Attrs()[0]
			if a.SampleType&all != tc.st || a.SampleStackUser != tc.stack {
				t.Errorf("sample_type %#x, stack %d; want %#x, %d", uint64(a.SampleType&all), a.SampleStackUser, uint64(tc.st), tc.stack)
			}
		})
	}
}

// TestRecordIntoDirectory: with -o DIR/, the recording and the files its
// runtimes wrote (node's dump and V8 log in the working directory, Erlang's
// dump and perf map in /tmp) end up in DIR, nothing of them is left behind,
// and DIR reports the same wherever it is moved.
func TestRecordIntoDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv func(t *testing.T, work string) []string
		want []string // patterns of the files DIR must hold
	}{
		{"node", func(t *testing.T, _ string) []string {
			return []string{fixtures.LookPath(t, "node"), fixtures.Workload(t, "newfunctions.js")}
		}, []string{"perf.data", "jit-*.dump", "isolate-*-v8.log"}},
		{"erlang", func(t *testing.T, work string) []string {
			erlc := fixtures.LookPath(t, "erlc")
			if out, err := exec.Command(erlc, "-o", work, fixtures.Workload(t, "w.erl")).CombinedOutput(); err != nil {
				t.Fatalf("erlc: %v\n%s", err, out)
			}
			return []string{fixtures.LookPath(t, "erl"), "-noshell", "-boot", "no_dot_erlang", "-pa", work, "-s", "w", "main"}
		}, []string{"perf.data", "jit-*.dump", "perf-*.map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work, out := t.TempDir(), filepath.Join(t.TempDir(), "rec")
			argv := tc.argv(t, work) // before the Chdir: workloads are found from the module
			t.Chdir(work)
			code, _, stderr := jitprofMsg(t, append([]string{"record", "-o", out + "/", "--"}, argv...)...)
			if code != 0 || !strings.Contains(stderr, "with it in "+out) {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
			for _, pattern := range tc.want {
				if m, _ := filepath.Glob(filepath.Join(out, pattern)); len(m) != 1 {
					t.Errorf("%s holds %q for %s", out, m, pattern)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(work, "*.*")); slices.ContainsFunc(left, func(l string) bool { return !strings.HasSuffix(l, ".beam") }) {
				t.Errorf("left in the working directory: %q", left)
			}
			gathered, _ := filepath.Glob(filepath.Join(out, "*-*.*")) // the dumps and maps, not perf.data
			for _, g := range gathered {
				if _, err := os.Lstat(filepath.Join("/tmp", filepath.Base(g))); err == nil {
					t.Errorf("%s left behind in /tmp", filepath.Base(g))
				}
			}
			moved := filepath.Join(t.TempDir(), "elsewhere")
			if err := os.Rename(out, moved); err != nil {
				t.Fatal(err)
			}
			res, err := perfprof.Run(perfprof.Options{Input: filepath.Join(moved, "perf.data")})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Dumps) != 1 || res.Jitted == 0 {
				t.Errorf("moved elsewhere, the recording reads dumps %q, %d of %d samples in jitted code", res.Dumps, res.Jitted, res.Kept)
			}
		})
	}
}

// TestRecordAgents: jitprof record sets JAVA_TOOL_OPTIONS and
// INTEL_JIT_PROFILER64 to its own agents, so Java's compiled methods and
// PHP's JIT traces are named with no flag given to either runtime's
// profiling. (PHP's opcache calls the Intel API only with jit_debug=128,
// which is an ini setting, not an environment variable.)
//
// Java's samples are counted on the program's own thread while it worked
// (busyScope), where they must be the frequency times the CPU time the
// kernel gave it: the JVM's startup, the compiling of the source and the
// JIT's threads, whose share of the samples a busy machine changes, are
// left out.
func TestRecordAgents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hz      int // PHP's workload is short: sampled faster
		minOwn  int
		argv    []string
		jitName *regexp.Regexp // the program's own jitted functions
		// scope returns the report options that keep only the program's
		// own work, as it printed it, and the samples that work must
		// have; nil keeps every sample.
		scope func(t *testing.T, hz int, stdout string) (args []string, want float64)
	}{
		{"java", 2000, 100, []string{"java", "testdata/Busy.java", "1500"}, regexp.MustCompile(`^Busy\.`), busyScope},
		{"php", 20000, 50, slices.Concat([]string{"php8.2"}, fixtures.PHPJIT(128), []string{fixtures.Workload(t, "fib_mandel.php")}), regexp.MustCompile(`\$(fib|mandel)\$`), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixtures.LookPath(t, tc.argv[0])
			t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
			data := filepath.Join(t.TempDir(), "perf.data")
			code, stdout, stderr := jitprofMsg(t, append([]string{"record", "-F", strconv.Itoa(tc.hz), "-o", data, "--"}, tc.argv...)...)
			if code != 0 || strings.Contains(stderr, "not set") {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
			args := []string{"report", "-i", data, "-q", "--format", "json", "--sort", "module,symbol"}
			want := 0.0
			if tc.scope != nil {
				scope, w := tc.scope(t, tc.hz, stdout)
				args, want = append(args, scope...), w
			}
			code, out := jitprof(t, args...)
			if code != 0 {
				t.Fatalf("report: exit %d:\n%s", code, out)
			}
			var r struct {
				Samples int
				Entries []struct {
					Module, Symbol string
					Samples        int
				}
			}
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			if tc.scope != nil {
				tol := 5*math.Sqrt(want) + 0.01*want
				t.Logf("%d samples while the program worked; its CPU time says %.0f±%.0f", r.Samples, want, tol)
				if math.Abs(float64(r.Samples)-want) > tol {
					t.Errorf("%d samples while the program worked, not %.0f±%.0f", r.Samples, want, tol)
				}
			}
			jitted, own := 0, 0
			for _, e := range r.Entries {
				if !strings.HasPrefix(e.Module, "jit-") {
					continue
				}
				jitted += e.Samples
				if tc.jitName.MatchString(e.Symbol) {
					own += e.Samples
				}
			}
			t.Logf("%d samples, %d in jitted code, %d on the program's own functions", r.Samples, jitted, own)
			if own < tc.minOwn || 4*own < 3*jitted {
				t.Errorf("%d of %d jitted samples (of %d) on functions matching %v", own, jitted, r.Samples, tc.jitName)
			}
		})
	}
}

// busyScope reads what testdata/Busy.java printed and returns the report
// options that keep the samples of its thread while it worked, and how many
// those must be: the frequency times the CPU time the kernel gave the
// thread meanwhile, within five standard deviations of a Poisson count and
// a point.
func busyScope(t *testing.T, hz int, stdout string) ([]string, float64) {
	t.Helper()
	var truth struct {
		Tid   int   `json:"tid"`
		Start int64 `json:"start_ns"`
		End   int64 `json:"end_ns"`
		CPU   int64 `json:"cpu_ns"`
	}
	if err := json.Unmarshal([]byte(stdout), &truth); err != nil || truth.Tid == 0 {
		t.Fatalf("what the program says it ran: %v\n%s", err, stdout)
	}
	t.Logf("thread %d worked %v of CPU time in %v", truth.Tid, time.Duration(truth.CPU), time.Duration(truth.End-truth.Start))
	seconds := func(ns int64) string { return fmt.Sprintf("%d.%09d", ns/1e9, ns%1e9) }
	return []string{"--tid", strconv.Itoa(truth.Tid), "--time", seconds(truth.Start) + "," + seconds(truth.End)},
		float64(hz) * time.Duration(truth.CPU).Seconds()
}

// TestRecordDiskFull: when the disk fills, recording stops with an error
// saying so, and the file keeps what reached the disk, which perf reads.
func TestRecordDiskFull(t *testing.T) {
	data := filepath.Join(fixtures.SmallFS(t, 256<<10), "perf.data")
	code, _, stderr := jitprofMsg(t, "record", "-F", "20000", "-g", "-o", data, "--", "sh", "-c", "while :; do :; done")
	if code != 1 || !strings.Contains(stderr, "no space left on device") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	f, err := perfdata.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for {
		rec, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d records: %v", n, err)
		}
		if _, ok := rec.(*perfdata.Sample); ok {
			n++
		}
	}
	_, total := fixtures.SymbolCounts(t, data, "-g", "none")
	t.Logf("%d samples kept; perf report reads %d", n, total)
	if n < 100 || total != n {
		t.Errorf("%d samples kept, perf report reads %d", n, total)
	}
}
