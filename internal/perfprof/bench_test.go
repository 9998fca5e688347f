package perfprof_test

import (
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// BenchmarkRun symbolizes and merges a recording of node with call chains:
// the whole of jitprof report but the rendering.
func BenchmarkRun(b *testing.B) {
	rec := fixtures.Record(b, fixtures.NodeMany, "-g")
	var samples int
	for b.Loop() {
		res, err := perfprof.Run(perfprof.Options{Input: rec.PerfData})
		if err != nil {
			b.Fatal(err)
		}
		samples = res.Samples
	}
	b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
