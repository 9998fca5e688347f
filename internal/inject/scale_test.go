package inject

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitelf"
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

// TestImageLeavesDumpPages: the code a packed image copies from its dump
// does not stay in the process's memory beside the image: the dump's pages
// are dropped as the copy goes on and when it ends (without which a dump
// of a million functions stayed resident, 80 MB).
func TestImageLeavesDumpPages(t *testing.T) {
	dir := t.TempDir()
	p, err := synth.Write(dir, synth.Options{Functions: 200_000, Samples: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dumpindex.Read(p.Dump)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	resident := func() int { return fixtures.MappedKB(t, p.Dump) }
	fi, err := os.Stat(p.Dump)
	if err != nil {
		t.Fatal(err)
	}
	// The most the copy may hold between two drops: evictEvery
	// functions' records, twice over for the pages the kernel maps
	// around a fault, and a megabyte: a quarter of the dump.
	most := 2*int(fi.Size())/len(d.Functions)*evictEvery/1024 + 1024
	during := 0
	watched := func() {
		during = max(during, resident())
		d.Evict()
	}
	if _, _, err := writeImage(filepath.Join(dir, "img.so"), jitelf.OptionsFor(d.Header), d.Functions, watched); err != nil {
		t.Fatal(err)
	}
	after := resident()
	t.Logf("the dump (%d KB): at most %d KB of it resident during the copy, %d KB after", fi.Size()/1024, during, after)
	if during > most || after > 8 {
		t.Errorf("the dump's pages resident: up to %d KB during the copy, %d KB after; want at most %d KB, then none", during, after, most)
	}
}
