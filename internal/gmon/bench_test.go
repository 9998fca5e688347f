package gmon

import (
	"encoding/binary"
	"io"
	"testing"
)

// BenchmarkWriteGmon: a profile the size of a large node run, 5,000
// functions of 1 KiB with 100,000 sampled places and as many arcs.
func BenchmarkWriteGmon(b *testing.B) {
	p := &Program{}
	for range 5000 {
		p.Symbols = append(p.Symbols, Symbol{Name: "f", Size: 1024})
	}
	prof := &Profile{Rate: 4000, Samples: map[PC]uint64{}, Arcs: map[Arc]uint64{}}
	for i := range 100000 {
		prof.Samples[PC{i % 5000, uint64(i*7) % 1024}] += uint64(i%5 + 1)
		prof.Arcs[Arc{PC{(i * 3) % 5000, uint64(i) % 1024}, i % 5000}]++
	}
	l := p.Layout(prof)
	for b.Loop() {
		if err := WriteGmon(io.Discard, binary.LittleEndian, l, prof); err != nil {
			b.Fatal(err)
		}
	}
}
