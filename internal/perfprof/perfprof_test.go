package perfprof_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// perfSelfCounts is perf report's count per symbol of data, with the
// addresses it could not name (it lists each) together as "[unknown]", as
// fixtures.LeafCounts counts them.
func perfSelfCounts(t *testing.T, data string) (map[string]int, int) {
	t.Helper()
	counts, total := fixtures.SymbolCounts(t, data, "-g", "none")
	for name, n := range counts {
		if strings.HasPrefix(name, "0x") {
			counts["[unknown]"] += n
			delete(counts, name)
		}
	}
	return counts, total
}

// logDiffs logs the symbols perf and jitprof count differently.
func logDiffs(t *testing.T, perf, jitprof map[string]int) {
	t.Helper()
	for s, n := range perf {
		if jitprof[s] != n {
			t.Logf("  %q: perf %d, jitprof %d", s, n, jitprof[s])
		}
	}
	for s, n := range jitprof {
		if _, ok := perf[s]; !ok {
			t.Logf("  %q: perf 0, jitprof %d", s, n)
		}
	}
}

func run(t testing.TB, opts perfprof.Options) *perfprof.Result {
	t.Helper()
	opts.Warn = func(err error) { t.Logf("warning: %v", err) }
	res, err := perfprof.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Profile.PProf().CheckValid(); err != nil {
		t.Fatalf("invalid profile: %v", err)
	}
	return res
}

// TestSameAttributionAsPerf: per symbol, the samples jitprof attributes
// straight from the recording are those perf report attributes after perf
// inject --jit, but for at most 0.5% of them.
func TestSameAttributionAsPerf(t *testing.T) {
	for _, rt := range []fixtures.Runtime{fixtures.Node, fixtures.Erlang, fixtures.PHP, fixtures.LLVM, fixtures.Python} {
		for _, callgraph := range []bool{false, true} {
			name := string(rt)
			var perfArgs []string
			if callgraph {
				name, perfArgs = name+"/-g", []string{"-g"}
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rec := fixtures.Record(t, rt, perfArgs...)
				want, total := perfSelfCounts(t, fixtures.Inject(t, rec))
				res := run(t, perfprof.Options{Input: rec.PerfData})
				got := fixtures.LeafCounts(res.Profile.PProf())
				d := fixtures.Differ(want, got)
				t.Logf("%d samples (jitprof %d), %d in jitted code, %d attributed differently", total, res.Kept, res.Jitted, d)
				if res.Kept != total {
					t.Errorf("jitprof counts %d samples, perf %d", res.Kept, total)
				}
				if res.Jitted == 0 {
					t.Errorf("no samples in jitted code")
				}
				if float64(d) > 0.005*float64(total) {
					t.Errorf("%d of %d samples attributed differently from perf", d, total)
				}
				if d > 0 {
					logDiffs(t, want, got)
				}
			})
		}
	}
}

// TestGroundTruth runs a JIT that moves a function and gives one address to
// three functions in turn: each function's share of the samples is its
// share of the CPU time the program measured, within sampling noise.
func TestGroundTruth(t *testing.T) {
	data, out := fixtures.RecordTestJIT(t, 4000, "2s")
	tr := fixtures.ParseJITTruth(t, out)
	res := run(t, perfprof.Options{Input: data})
	fixtures.CheckShares(t, tr, "jitprof report", fixtures.LeafCounts(res.Profile.PProf()))
}

// TestPerfMapAgainstPerf: a runtime that writes only a perf map (node
// --perf-basic-prof) gets the names perf report gives its samples.
func TestPerfMapAgainstPerf(t *testing.T) {
	rec := fixtures.Record(t, fixtures.NodePerfMap)
	name := fmt.Sprintf("perf-%d.map", rec.Pid)
	dir := filepath.Dir(rec.PerfData)
	// perf reads the map only in /tmp, where node wrote it (the fixture
	// moved it into dir): put it back for perf's report.
	link := filepath.Join("/tmp", name)
	if err := os.Symlink(filepath.Join(dir, name), link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) }) // should perf report fail
	want, total := perfSelfCounts(t, rec.PerfData)
	os.Remove(link) // jitprof must find the map in dir

	res := run(t, perfprof.Options{Input: rec.PerfData, Options: symbolize.Options{PerfMapDirs: []string{dir}}})
	got := fixtures.LeafCounts(res.Profile.PProf())
	named := 0
	for _, s := range res.Profile.PProf().Sample {
		if l := s.Location[0]; len(l.Line) > 0 && l.Mapping != nil && strings.HasSuffix(l.Mapping.File, name) {
			named += int(s.Value[0])
		}
	}
	d := fixtures.Differ(want, got)
	t.Logf("%d samples, %d named by the perf map, %d attributed differently", total, named, d)
	if named == 0 {
		t.Error("no sample named by the perf map")
	}
	if float64(d) > 0.005*float64(total) {
		t.Errorf("%d of %d samples attributed differently from perf", d, total)
		logDiffs(t, want, got)
	}
}
