package main

import (
	"os"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// TestDemo: the recording `make demo` shows (minijit under jitprof record,
// bundled with its dump) reads anywhere, its dump found beside it, and gives each jitted function the share of CPU time
// minijit measured for it (its truth.json, written by the same run).
func TestDemo(t *testing.T) {
	const dir = "../../testdata/demo"
	res, err := perfprof.Run(perfprof.Options{Input: dir + "/perf.data"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dumps) != 1 || res.Jitted*10 < res.Kept*9 {
		t.Errorf("dumps %q, %d of %d samples in jitted code", res.Dumps, res.Jitted, res.Kept)
	}
	truth, err := os.ReadFile(dir + "/truth.json")
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CheckShares(t, fixtures.ParseJITTruth(t, truth), "jitprof report", fixtures.LeafCounts(res.Profile.PProf()))
}
