package jitdump_test

import (
	"fmt"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// BenchmarkWriterLoad writes CODE_LOADs to a real file, as a JIT does.
func BenchmarkWriterLoad(b *testing.B) {
	for _, size := range []int{200, 4096} {
		b.Run(fmt.Sprintf("code=%dB", size), func(b *testing.B) {
			w, err := jitdump.Create(jitdump.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			fn := &jitdump.Function{Name: "JS:*someFunction /app/lib/module.js:120:7", Addr: 0x7f0000000000, Code: make([]byte, size)}
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := w.Load(fn); err != nil {
					b.Fatal(err)
				}
				fn.Addr += uint64(size)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
