package main

import (
	"path/filepath"
	"strings"
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
