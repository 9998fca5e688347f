package jitdump_test

import (
	"fmt"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/jitdump"
)

// BenchmarkCheck checks a dump of many tiny functions, which it must do in
// little memory beyond a few bytes a code index.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p, err := synth.Write(b.TempDir(), synth.Options{Functions: n})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				f, err := jitdump.Open(p.Dump)
				if err != nil {
					b.Fatal(err)
				}
				findings, err := jitdump.Check(f.Reader)
				if err != nil || len(findings) != 0 {
					b.Fatal(findings, err)
				}
				f.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/function")
		})
	}
}
