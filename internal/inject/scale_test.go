package inject

import (
	"fmt"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
)

// BenchmarkRun injects a dump of many tiny functions, each sampled once,
// into one packed image. live-B/function is the largest heap a garbage
// collection found live during the injection, per function.
func BenchmarkRun(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			dir := b.TempDir()
			p, err := synth.Write(dir, synth.Options{Functions: n, Samples: n})
			if err != nil {
				b.Fatal(err)
			}
			opts := Options{Input: p.Data, Output: filepath.Join(dir, "out.data"), Pack: true}
			stop, peak := make(chan struct{}), make(chan uint64)
			go func() { peak <- maxLiveHeap(stop) }()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Run(opts); err != nil {
					b.Fatal(err)
				}
			}
			close(stop)
			b.ReportMetric(float64(<-peak)/float64(n), "live-B/function")
		})
	}
}

// maxLiveHeap returns the largest live heap a garbage collection found
// until stop is closed.
func maxLiveHeap(stop chan struct{}) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	for {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
		select {
		case <-stop:
			return peak
		case <-time.After(time.Millisecond):
		}
	}
}
