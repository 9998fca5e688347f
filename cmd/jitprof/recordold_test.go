package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecordKeepsOld: a recording the output held is kept as FILE.old, the
// same file renamed (not a copy), once the new one is written, and the
// summary says so; a failed start leaves it in place; a symbolic link at
// the output is not kept (nor followed); an older .old is replaced; where
// FILE.old cannot be had, the old recording stays under the hidden name the
// message gives. No hidden link is left behind otherwise.
func TestRecordKeepsOld(t *testing.T) {
	previous := []byte("the previous recording")
	for _, tc := range []struct {
		name string
		// before sets up dir, the output's directory.
		before  func(t *testing.T, dir string)
		command []string
		code    int
		// kept: the previous recording is at perf.data.old after.
		kept     bool
		says     string
		hiddenOK bool // a hidden link is left, as the message says
	}{
		{name: "nothing there", before: func(*testing.T, string) {}, command: []string{"true"}},
		{name: "a recording there", before: writeOutput(previous), command: []string{"true"}, kept: true,
			says: "; the previous recording is now "},
		{name: "an older .old", before: func(t *testing.T, dir string) {
			writeOutput(previous)(t, dir)
			if err := os.WriteFile(filepath.Join(dir, "perf.data.old"), []byte("older"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, command: []string{"true"}, kept: true, says: "; the previous recording is now "},
		{name: "command not found", before: writeOutput(previous), command: []string{"no-such-command-jitprof"}, code: 1,
			says: "executable file not found"},
		{name: "a symbolic link there", before: func(t *testing.T, dir string) {
			target := filepath.Join(dir, "target")
			if err := os.WriteFile(target, previous, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dir, "perf.data")); err != nil {
				t.Fatal(err)
			}
		}, command: []string{"true"}},
		{name: ".old a directory", before: func(t *testing.T, dir string) {
			writeOutput(previous)(t, dir)
			if err := os.Mkdir(filepath.Join(dir, "perf.data.old"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, command: []string{"true"}, says: "the previous recording of ", hiddenOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "perf.data")
			tc.before(t, dir)
			before, _ := os.Lstat(out)
			code, _, stderr := jitprofMsg(t, append([]string{"record", "--no-runtime-env", "-o", out, "--"}, tc.command...)...)
			if code != tc.code || !strings.Contains(stderr, tc.says) {
				t.Fatalf("exit %d, want %d; stderr:\n%s\nwant it to say %q", code, tc.code, stderr, tc.says)
			}
			old, err := os.Lstat(out + ".old")
			switch {
			case tc.kept && err != nil:
				t.Fatalf("no perf.data.old: %v", err)
			case tc.kept:
				if !os.SameFile(old, before) {
					t.Error("perf.data.old is not the file perf.data was: a copy")
				}
				if b, _ := os.ReadFile(out + ".old"); !bytes.Equal(b, previous) {
					t.Errorf("perf.data.old holds %q", b)
				}
				if !strings.Contains(stderr, "; the previous recording is now "+out+".old") {
					t.Errorf("the summary does not name %s.old:\n%s", out, stderr)
				}
			case err == nil && !old.IsDir():
				t.Errorf("a perf.data.old where nothing was to be kept:\n%s", stderr)
			}
			now, err := os.Lstat(out)
			if tc.code != 0 {
				if err != nil || !os.SameFile(now, before) {
					t.Errorf("a failed start changed perf.data (%v)", err)
				}
			} else if before != nil && os.SameFile(now, before) {
				t.Error("perf.data is the previous file still")
			}
			if b, err := os.ReadFile(filepath.Join(dir, "target")); err == nil && !bytes.Equal(b, previous) {
				t.Errorf("the link's target was written: %q", b)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					continue
				}
				if !tc.hiddenOK || !strings.Contains(stderr, e.Name()) {
					t.Errorf("%s left in the directory; stderr:\n%s", e.Name(), stderr)
				} else if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); !bytes.Equal(b, previous) {
					t.Errorf("%s, where the previous recording is said to be, holds %q", e.Name(), b)
				}
			}
		})
	}
}

func writeOutput(data []byte) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		if err := os.WriteFile(filepath.Join(dir, "perf.data"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRecordCommandNotRun: a command that exits 127 (a pyenv shim with no
// version selected) or 126 (not executable) is said to have found no
// command to run, or not run it, before the summary and with the exit
// status the command had.
func TestRecordCommandNotRun(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	notExec := filepath.Join(dir, "script")
	if err := os.WriteFile(notExec, []byte("echo hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		command []string
		code    int
		says    string
	}{
		{"pyenv shim", []string{shim, "app.py"}, 127, shim + " exited with status 127: command not found"},
		{"not executable", []string{"sh", "-c", notExec}, 126, "sh exited with status 126: command not executable"},
		{"other status", []string{"sh", "-c", "exit 3"}, 3, "sh exited with status 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := jitprofMsg(t, append([]string{"record", "--no-runtime-env", "-o", filepath.Join(t.TempDir(), "perf.data"), "--"}, tc.command...)...)
			status, summary := strings.Index(stderr, tc.says), strings.Index(stderr, " samples in ")
			if code != tc.code || status < 0 || summary < 0 || status > summary {
				t.Errorf("exit %d, want %d; stderr:\n%s\nwant %q before the summary", code, tc.code, stderr, tc.says)
			}
		})
	}
}
