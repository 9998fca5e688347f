package dumpindex

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
)

// TestReadAllocatesPerSlab: indexing a dump allocates for blocks of
// records, not for each (a JIT may load millions of tiny functions), keeps
// little more than a function's fields of each (88 bytes a function; 194
// when it kept the records too, 104 with its code as a slice), and finds every function's moves and events
// by its code index.
func TestReadAllocatesPerSlab(t *testing.T) {
	const n = 20000
	p, err := synth.Write(t.TempDir(), synth.Options{Functions: n})
	if err != nil {
		t.Fatal(err)
	}
	var d *Dump
	allocs := testing.AllocsPerRun(3, func() {
		if d, err = Read(p.Dump); err != nil {
			t.Fatal(err)
		}
		d.Close()
	})
	if len(d.Functions) != n || d.EventCount() != n || len(d.Problems) != 0 {
		t.Fatalf("%d functions, %d events, problems %v", len(d.Functions), d.EventCount(), d.Problems)
	}
	if allocs > n/20 {
		t.Errorf("%.0f allocations to index %d functions: want fewer than one per 20", allocs, n)
	}
	if live := liveHeap(t, p.Dump); live > 96*n {
		t.Errorf("the index of %d functions holds %d bytes: want at most 96 a function", n, live)
	}
	for _, i := range []uint64{1, n / 2, n} {
		if k := d.code(i); k != int(i-1) || d.Functions[k].Name != fmt.Sprintf("f%d", i-1) {
			t.Errorf("code index %d: function %d", i, k)
		}
	}
	if d.code(n+1) >= 0 || d.code(0) >= 0 {
		t.Error("a code index no load has was found")
	}
}

// BenchmarkRead indexes a dump of many tiny functions. live-B/function is
// what the index holds on the heap per function once read: what a profiler
// keeps while it uses the dump.
func BenchmarkRead(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p, err := synth.Write(b.TempDir(), synth.Options{Functions: n})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				d, err := Read(p.Dump)
				if err != nil {
					b.Fatal(err)
				}
				d.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/function")
			b.ReportMetric(float64(liveHeap(b, p.Dump))/float64(n), "live-B/function")
		})
	}
}

// liveHeap returns the heap bytes a Dump of path holds once read.
func liveHeap(tb testing.TB, path string) int {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := Read(path)
	if err != nil {
		tb.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(d)
	d.Close()
	return int(after.HeapAlloc) - int(before.HeapAlloc)
}
