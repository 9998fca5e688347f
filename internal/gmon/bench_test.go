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
	prof := &Profile{Rate: 4000, Samples: map[PC]uint64{}}
	arcs := map[Arc]uint64{}
	for i := range 100000 {
		prof.Samples[PC{i % 5000, uint64(i*7) % 1024}] += uint64(i%5 + 1)
		arcs[Arc{PC{(i * 3) % 5000, uint64(i) % 1024}, i % 5000}]++
	}
	prof.Arcs = counted(arcs)
	l := p.Layout(prof)
	for b.Loop() {
		if err := WriteGmon(io.Discard, binary.LittleEndian, l, prof); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteGmonScale: a JIT's million functions of 100 bytes, each
// sampled once and called from one place of the interpreter.
func BenchmarkWriteGmonScale(b *testing.B) {
	const n = 1_000_000
	p := &Program{Symbols: make([]Symbol, n+1)}
	for i := range p.Symbols {
		p.Symbols[i] = Symbol{Name: "f", Size: 100}
	}
	prof := &Profile{Rate: 4000, Samples: make(map[PC]uint64, n)}
	for i := 1; i <= n; i++ {
		prof.Samples[PC{i, uint64(i*7) % 100}]++
		prof.Arcs.Add(ArcCount{Arc{PC{0, 10}, i}, 1})
	}
	l := p.Layout(prof)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteGmon(io.Discard, binary.LittleEndian, l, prof); err != nil {
			b.Fatal(err)
		}
	}
}
