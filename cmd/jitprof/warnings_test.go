package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestNodeDWARFQuiet: a clean node recording with DWARF stacks reports with
// no warning. V8 gives most of its code an UNWINDING_INFO with no FDE (code
// it has no tables for, stepped by the frame pointer), which is no problem:
// it printed a line for each such function (124 for one node run).
func TestNodeDWARFQuiet(t *testing.T) {
	node, workload := fixtures.LookPath(t, "node"), fixtures.Workload(t, "hotcold.js")
	dir := t.TempDir()
	t.Chdir(dir)
	data := filepath.Join(dir, "perf.data")
	code, _, stderr := jitprofMsg(t, "record", "--call-graph", "dwarf", "-o", data, "--", node, workload, "1")
	if code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	code, out, stderr := jitprofMsg(t, "report", "-i", data, "--format", "folded")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, "JS:") {
		t.Fatalf("no JavaScript function named:\n%.2000s", out)
	}
	if strings.Contains(stderr, "warning") {
		t.Errorf("warnings on a clean recording:\n%s", stderr)
	}
}

// TestUnnamedHint: a process's unnamed JIT code gets the hint to start its
// runtime with its flag only when nothing shows the runtime was asked: a
// recording whose dump moved, or whose dump or perf map cannot be read,
// has its runtime's flag set already, and the hint contradicted the
// warning about the file. The demo recording is edited in place: minijit
// renamed node (whose hint names its flag), its marker renamed so that it
// marks nothing.
func TestUnnamedHint(t *testing.T) {
	demo, err := os.ReadFile("../../testdata/demo/perf.data")
	if err != nil {
		t.Fatal(err)
	}
	node := bytes.ReplaceAll(demo, []byte("minijit\x00"), []byte("node\x00\x00\x00\x00"))
	unmarked := bytes.ReplaceAll(node, []byte("jit-30122.dump"), []byte("jot-30122.dump"))
	const flagHint, fileHint, mapHint = "jitprof record -- CMD sets that for you", "see the warning above", "Its perf map names only part of it"
	for _, tc := range []struct {
		name      string
		data      []byte
		beside    map[string]string // files beside the recording
		fifo      string            // a FIFO beside it
		want, not string
	}{
		{"no marker", unmarked, nil, "", "nodejs describes it when started with node --perf-prof", fileHint},
		{"dump moved", node, nil, "", fileHint, flagHint},
		{"dump unreadable", node, map[string]string{"jit-30122.dump": "garbage\n"}, "", fileHint, flagHint},
		{"perf map refused", unmarked, nil, "perf-30122.map", fileHint, flagHint},
		{"perf map partial", unmarked, map[string]string{"perf-30122.map": "7fc738a1d200 1e jit:loop_c\n"}, "", mapHint, flagHint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			if err := os.WriteFile(data, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			for name, text := range tc.beside {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tc.fifo != "" {
				if err := syscall.Mkfifo(filepath.Join(dir, tc.fifo), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, _, stderr := jitprofMsg(t, "report", "-i", data, "--format", "folded")
			if code != 0 || !strings.Contains(stderr, "(node) are in anonymous memory") {
				t.Fatalf("exit %d; no unnamed process said:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, tc.want) || strings.Contains(stderr, tc.not) {
				t.Errorf("stderr:\n%s\nwant it to say %q, not %q", stderr, tc.want, tc.not)
			}
		})
	}
}
