package jitelf

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// benchFunctions makes n functions of 32 to 256 bytes of code with names of
// V8's shape, and, when asked for, 8 line entries and an FDE (in byte order
// o) each.
func benchFunctions(n int, o binary.ByteOrder, lines, unwind bool) []Function {
	code := make([]byte, 256)
	for i := range code {
		code[i] = byte(i * 7)
	}
	fns := make([]Function, n)
	for i := range fns {
		size := 32 + i*37%225
		addr := 0x7f0000000000 + uint64(i)*0x200
		fns[i] = Function{Name: fmt.Sprintf("JS:*handler%d /srv/app/lib/module%d.js:%d:%d", i, i%97, i%500, i%40), Code: code[:size], CodeAddr: addr}
		if lines {
			es := make([]jitdump.DebugEntry, 8)
			for k := range es {
				es[k] = jitdump.DebugEntry{Addr: addr + uint64(k*size/8), Line: uint32(10 + k*3 + i%50), Discrim: uint32(k), File: fmt.Sprintf("/srv/app/lib/module%d.js", i%97)}
			}
			fns[i].Lines = slices.Values(es)
		}
		if unwind {
			fns[i].Unwind = &jitdump.UnwindingInfo{EHFrame: testEHFrame(o, size, 1)}
		}
	}
	return fns
}

// BenchmarkSingle writes one image per function, as perf inject does.
func BenchmarkSingle(b *testing.B) {
	for _, c := range []struct {
		name          string
		lines, unwind bool
	}{{"plain", false, false}, {"lines+unwind", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			fns := benchFunctions(1, hostOpts.ByteOrder, c.lines, c.unwind)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Write(io.Discard, hostOpts, fns); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// BenchmarkPacked writes one image of 100,000 functions.
func BenchmarkPacked(b *testing.B) {
	const n = 100_000
	for _, c := range []struct {
		name          string
		opts          Options
		lines, unwind bool
	}{
		{"plain", hostOpts, false, false},
		{"lines", hostOpts, true, false},
		{"unwind", hostOpts, false, true},
		{"lines+unwind", hostOpts, true, true},
		{"lines+unwind/elf32-be", Options{elf.EM_ARM, elf.ELFCLASS32, binary.BigEndian}, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			fns := benchFunctions(n, c.opts.ByteOrder, c.lines, c.unwind)
			lay, err := Write(io.Discard, c.opts, fns)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(lay.Size)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Write(io.Discard, c.opts, fns); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "functions/s")
		})
	}
}
