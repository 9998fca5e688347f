package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNoRecording: a command that reads perf.data by default, run where
// there is none, says how to get one; a file -i names is only said missing.
func TestNoRecording(t *testing.T) {
	t.Chdir(t.TempDir())
	const hint = "jitprof: perf.data: no such file (record one with jitprof record -- CMD, or name one with -i FILE)"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"report", []string{"report"}, hint},
		{"annotate", []string{"annotate", "fib"}, hint},
		{"inject", []string{"inject", "-o", "out.data"}, hint},
		{"archive", []string{"archive"}, hint},
		{"report -i", []string{"report", "-i", "app.data"}, "app.data: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := jitprofMsg(t, tc.args...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 1; stderr:\n%s\nwant it to say %q", code, stderr, tc.want)
			}
			if tc.want != hint && strings.Contains(stderr, "record one") {
				t.Errorf("a file named with -i gets the hint:\n%s", stderr)
			}
		})
	}
}

// TestAnnotateArgs: annotate without its argument, or with a name that
// the shell split, says what the argument is.
func TestAnnotateArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"none", []string{"annotate"}, "jitprof: annotate needs a function's name, as jitprof report prints it: jitprof annotate 'JS:*fib /app/fib.js:3:13'"},
		{"split", []string{"annotate", "JS:*fib", "/app/fib.js:3:13"}, "jitprof: annotate takes one function's name, not 2: quote one with spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := jitprofMsg(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2; stderr:\n%s\nwant it to say %q", code, stderr, tc.want)
			}
		})
	}
}

// TestSwappedFiles: a perf.data given to a command that reads jitdumps,
// or a jitdump to one that reads perf.data, is named as what it is, with
// the command that reads it.
func TestSwappedFiles(t *testing.T) {
	data, dump := filepath.Join("..", "..", "testdata", "demo", "perf.data"), filepath.Join("..", "..", "testdata", "demo", "jit-30122.dump")
	const isData = `: offset 0x0: not a jitdump file but a perf.data recording (magic "PERFILE2"): jitprof report or inject reads it`
	const isDump = `offset 0x0: not a perf.data file but a jitdump (magic "DTiJ"): jitprof dump or check reads it`
	out := filepath.Join(t.TempDir(), "out.data")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"dump", []string{"dump", data}, 2, data + isData},
		{"check", []string{"check", data}, 2, data + isData},
		{"report", []string{"report", "-i", dump}, 1, dump + ": "},
		{"inject", []string{"inject", "-i", dump, "-o", out}, 1, dump + ": " + isDump},
		{"annotate", []string{"annotate", "fib", "-i", dump}, 1, isDump},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := jitprofMsg(t, tc.args...)
			all := stdout + stderr
			if code != tc.code || !strings.Contains(all, tc.want) || (tc.code == 1 && !strings.Contains(all, isDump)) {
				t.Errorf("exit %d, want %d; output:\n%s\nwant it to say %q", code, tc.code, all, tc.want)
			}
		})
	}
}

// TestZeroDurationDefaults: a duration flag whose default is zero shows
// none in the help: "(default 0s)" after --off-cpu's text read as its
// value (keep every block) when it means not recording switches at all.
func TestZeroDurationDefaults(t *testing.T) {
	for _, tc := range []struct {
		cmd, flag, want string
	}{
		{"record", "--off-cpu", "(100us for --off-cpu alone; 0 keeps all)"},
		{"record", "--duration", "stop after this long"},
		{"agent", "--off-cpu", "(100us for --off-cpu alone; 0 keeps all)"},
		{"agent", "--duration", "0 runs until SIGINT or SIGTERM"},
		{"agent", "--window", "(default 10s)"},
	} {
		t.Run(tc.cmd+" "+tc.flag, func(t *testing.T) {
			_, stdout, _ := jitprofMsg(t, tc.cmd, "--help")
			var line string
			for l := range strings.Lines(stdout) {
				if strings.Contains(l, "  "+tc.flag+" ") {
					line = l
				}
			}
			if !strings.Contains(line, tc.want) || strings.Contains(line, "(default 0") {
				t.Errorf("help line of %s:\n%s\nwant it to say %q, and no zero default", tc.flag, line, tc.want)
			}
		})
	}
}

// TestAgentUsage: the agent's values refused before it samples are usage
// errors, as record's.
func TestAgentUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"frequency zero", []string{"-F", "0"}, "-F 0: the frequency must be positive"},
		{"frequency over the limit", []string{"-F", "2000000000"}, "exceeds the kernel's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := jitprofMsg(t, append([]string{"agent", "--pprof-dir", dir, "--duration", "1"}, tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want 2; stderr:\n%s\nwant it to say %q", code, stderr, tc.want)
			}
		})
	}
}
