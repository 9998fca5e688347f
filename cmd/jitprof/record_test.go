package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
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
		{"ring not a power of two", []string{"record", "-o", out, "-m", "100", "--", "true"}, 1, "not a power of two"},
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

// TestRecordAgents: jitprof record sets JAVA_TOOL_OPTIONS and
// INTEL_JIT_PROFILER64 to its own agents, so Java's compiled methods and
// PHP's JIT traces are named with no flag given to either runtime's
// profiling. (PHP's opcache calls the Intel API only with jit_debug=128,
// which is an ini setting, not an environment variable.)
func TestRecordAgents(t *testing.T) {
	t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
	for _, tc := range []struct {
		name    string
		hz      string // PHP's workload is short: sampled faster
		minOwn  int
		argv    []string
		jitName *regexp.Regexp // the program's own jitted functions
	}{
		{"java", "2000", 100, []string{"java", fixtures.Workload(t, "Work.java"), "2000"}, regexp.MustCompile(`^Work\.`)},
		{"php", "20000", 50, []string{"php8.2", "-d", "opcache.enable_cli=1", "-d", "opcache.jit_buffer_size=64M", "-d", "opcache.jit=tracing",
			"-d", "opcache.jit_debug=128", fixtures.Workload(t, "fib_mandel.php")}, regexp.MustCompile(`\$(fib|mandel)\$`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.argv[0]); err != nil {
				t.Skipf("%s is not installed", tc.argv[0])
			}
			data := filepath.Join(t.TempDir(), "perf.data")
			code, _, stderr := jitprofMsg(t, append([]string{"record", "-F", tc.hz, "-o", data, "--"}, tc.argv...)...)
			if code != 0 || strings.Contains(stderr, "not set") {
				t.Fatalf("record: exit %d:\n%s", code, stderr)
			}
			code, out := jitprof(t, "report", "-i", data, "-q", "--format", "json", "--sort", "module,symbol")
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
