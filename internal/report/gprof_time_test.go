package report

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/contract"
)

// TestGprofTime: a wall-clock profile's histogram holds time, in ticks of
// a millisecond at a rate of 1000 a second, not its number of samples and
// blocked intervals; the frames that stand for time off the CPU and no
// code are unaccounted, never looked for as a file. A profile of samples
// is counted as before.
func TestGprofTime(t *testing.T) {
	perfMap := filepath.Join(t.TempDir(), "perf-7.map")
	if err := os.WriteFile(perfMap, []byte("1000 100 f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := &profile.Mapping{ID: 1, File: perfMap, Start: 0x1000, Limit: 0x1100}
	offCPU := &profile.Mapping{ID: 2, File: contract.OffCPUFile}
	f := &profile.Function{ID: 1, Name: "f"}
	pre := &profile.Function{ID: 2, Name: contract.PreemptedFrame}
	inF := &profile.Location{ID: 1, Mapping: code, Address: 0x1010, Line: []profile.Line{{Function: f}}}
	preempted := &profile.Location{ID: 2, Mapping: offCPU, Line: []profile.Line{{Function: pre}}}
	for _, tc := range []struct {
		name             string
		types            []string
		samples          [][]int64 // values of a sample in f, then of one preempted in f
		rate             uint32
		inF, unaccounted uint64
	}{
		{"wall", []string{"samples", "wall", contract.CPUType, contract.OffCPUType}, [][]int64{{5, 3_400_000, 3_000_000, 400_000}, {1, 2_600_000, 0, 2_600_000}}, 1000, 3, 3},
		{"samples", []string{"samples", "cpu-clock"}, [][]int64{{5, 5_000_000}, {1, 1_000_000}}, 1000, 5, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &profile.Profile{Mapping: []*profile.Mapping{code, offCPU}, Function: []*profile.Function{f, pre},
				Location: []*profile.Location{inF, preempted}, DefaultSampleType: tc.types[1],
				PeriodType: &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"}}
			for _, typ := range tc.types {
				p.SampleType = append(p.SampleType, &profile.ValueType{Type: typ, Unit: "nanoseconds"})
			}
			p.SampleType[0].Unit = "count"
			p.Sample = []*profile.Sample{
				{Location: []*profile.Location{inF}, Value: tc.samples[0]},
				{Location: []*profile.Location{preempted, inF}, Value: tc.samples[1]},
			}
			prog, profiles, err := gprofProgram(nil, contract.FromPProf(p))
			if err != nil {
				t.Fatal(err)
			}
			g := profiles[0]
			var inFunc uint64
			for pc, n := range g.Samples {
				if prog.Symbols[pc.Func].Name == "f" {
					inFunc += n
				}
			}
			if g.Rate != tc.rate || g.Dimension != "seconds" || inFunc != tc.inF || g.Unaccounted != tc.unaccounted {
				t.Errorf("rate %d %s, %d in f, %d unaccounted; want %d seconds, %d, %d", g.Rate, g.Dimension, inFunc, g.Unaccounted, tc.rate, tc.inF, tc.unaccounted)
			}
		})
	}
}
