package main

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
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
