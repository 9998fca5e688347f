package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestNodeWasm: WebAssembly compiled by V8 is named with no flag but what
// record sets, each function by the name its module's name section gives
// (V8 names its code NAME-INDEX-TIER, liftoff then turbofan), and each
// function's share of the samples in the module's code is within 3 points
// of the share of its CPU time the program measured itself
// (testdata/workloads/wasm.js: function i loops (i+1) million times a
// call, so the shares differ, for 3 s of CPU time).
func TestNodeWasm(t *testing.T) {
	node, workload := fixtures.LookPath(t, "node"), fixtures.Workload(t, "wasm.js")
	dir := t.TempDir()
	t.Chdir(dir)
	data, truthFile := filepath.Join(dir, "perf.data"), filepath.Join(dir, "truth.json")
	const functions = 6
	run := fmt.Sprintf("%s %s %d 3 > %s", node, workload, functions, truthFile)
	if code, _, stderr := jitprofMsg(t, "record", "-o", data, "--", "sh", "-c", run); code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	b, err := os.ReadFile(truthFile)
	if err != nil {
		t.Fatal(err)
	}
	var truth map[string]float64
	if err := json.Unmarshal(b, &truth); err != nil || len(truth) != functions {
		t.Fatalf("the program's truth %q: %v", b, err)
	}
	code, out, stderr := jitprofMsg(t, "report", "-i", data, "--format", "folded")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, stderr)
	}
	tiered := regexp.MustCompile(`^JS:(wfun\d+)-\d+-(liftoff|turbofan)$`)
	samples := make(map[string]float64)
	var all float64
	for line := range strings.Lines(out) {
		stack, count, ok := strings.Cut(strings.TrimSpace(line), " ")
		n, err := strconv.ParseFloat(count, 64)
		if !ok || err != nil {
			continue
		}
		leaf := stack[strings.LastIndexByte(stack, ';')+1:]
		if m := tiered.FindStringSubmatch(leaf); m != nil {
			samples[m[1]] += n
			all += n
		}
	}
	// 3 s of CPU time give about 3,000 samples in the module's code at
	// record's rate, loaded machine or not: the largest share's standard
	// error is then under a point.
	if all < 1500 {
		t.Fatalf("%v samples in the module's functions, want 1,500 or more to judge shares:\n%.3000s", all, out)
	}
	for fn, want := range truth {
		got := 100 * samples[fn] / all
		t.Logf("%s: %.1f%% of the module's samples, %.1f%% of its CPU time by its own measure", fn, got, want)
		if math.Abs(got-want) > 3 {
			t.Errorf("%s: %.1f%% of the samples in jitprof's report, %.1f%% by the program's own measure: more than 3 points apart", fn, got, want)
		}
	}
}
