// Package gmon writes sampled profiles for GNU gprof: a gmon.out file
// (histogram and call-graph arcs) and an ELF symbol file for gprof to
// resolve its addresses with, plus an assembler symbol file in the style of
// Kaffe's xprof (kaffe-jit-symbols.s).
//
// gprof reads addresses, not names, so every function needs an address range
// of its own. Jitted code gives no such thing: a JIT reuses addresses for new
// functions, and its regions lie terabytes away from the native libraries.
// This package therefore lays the functions out afresh, back to back in a
// synthetic text segment, one range per function incarnation, and writes the
// histogram and arcs in those synthetic addresses; the symbol file it writes
// holds the same layout. Kaffe instead kept real addresses, gave up address
// reuse (it disabled class GC) and wrote one gmon file per distant region,
// whose percentages cannot be compared with each other.
//
// The input is a neutral model, Program and Profile, so that the formats do
// not depend on how the samples were gathered.
package gmon

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
)

// Symbol is one function incarnation: what gets a symbol and an address
// range of its own.
type Symbol struct {
	Name string
	Size uint64 // bytes of code; offsets past it widen the range
	// Addr and CodeIndex say where the function really was, for the
	// comments of the assembler file: its runtime address, and for jitted
	// code the dump's code_index (0 for native code).
	Addr      uint64
	CodeIndex uint64
	Module    string
}

// Program is the functions that share one layout: one symbol file serves
// every Profile over them (one per stage).
type Program struct {
	Symbols []Symbol
}

// PC is a place in a function: Program.Symbols[Func], Offset bytes in.
type PC struct {
	Func   int
	Offset uint64
}

// Arc is a call from a place in one function to another function.
type Arc struct {
	From   PC
	Callee int
}

// ArcCount is an arc and how many times it was taken.
type ArcCount struct {
	Arc
	Count uint64
}

// Profile is what was sampled in a Program's functions.
type Profile struct {
	// Rate is how many samples make one Dimension unit: the sampling
	// frequency in Hz when Dimension is "seconds".
	Rate uint32
	// Dimension names what samples measure, at most 15 bytes; empty means
	// "seconds". gprof prints it in its column headings.
	Dimension string
	Samples   map[PC]uint64
	// Arcs are the calls counted, each arc once, in any order: WriteGmon
	// sorts them in place. A slice, not a map: a profile of deep stacks
	// has millions of arcs.
	Arcs []ArcCount
	// Unaccounted counts samples in no known code; gprof shows them as
	// the function _unaccounted_, as Kaffe's xprof did.
	Unaccounted uint64
}

// ByteOrder is a byte order that can also append: binary.LittleEndian,
// BigEndian or NativeEndian.
type ByteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// UnaccountedName is the symbol samples outside known code count under.
const UnaccountedName = "_unaccounted_"

// Synthetic text starts at textBase: an address no tool takes for null.
const textBase = 0x100000

// binBytes is the histogram's resolution. gprof counts addresses in UNITs
// of 2 bytes and needs a whole number of them per bin, so 2 bytes is the
// finest; every function starts on a bin boundary, so no bin is shared
// between functions and gprof's overlap arithmetic never splits a count.
const binBytes = 2

// maxBin is the largest count a u16 bin holds. gprof adds up the bins of
// TIME_HIST records that cover the same range, so a fuller bin is written
// as several records.
const maxBin = math.MaxUint16

// Layout is where the Program's functions are in the synthetic text.
type Layout struct {
	Unaccounted uint64   // the address of _unaccounted_, one bin long
	Start       []uint64 // by function index
	End         []uint64 // exclusive
	TextStart   uint64
	TextEnd     uint64
}

// Layout places the functions in order, each over at least its size and
// every offset the profiles sampled, rounded up to a bin.
func (p *Program) Layout(profiles ...*Profile) *Layout {
	need := make([]uint64, len(p.Symbols))
	for i, f := range p.Symbols {
		need[i] = max(f.Size, 1)
	}
	for _, prof := range profiles {
		for pc := range prof.Samples {
			need[pc.Func] = max(need[pc.Func], pc.Offset+1)
		}
		for _, a := range prof.Arcs {
			need[a.From.Func] = max(need[a.From.Func], a.From.Offset+1)
		}
	}
	l := &Layout{TextStart: textBase, Unaccounted: textBase, Start: make([]uint64, len(need)), End: make([]uint64, len(need))}
	addr := l.Unaccounted + binBytes
	for i, n := range need {
		l.Start[i] = addr
		addr += (n + binBytes - 1) / binBytes * binBytes
		l.End[i] = addr
	}
	l.TextEnd = addr
	return l
}

// Gmon header and record tags, as binutils' gmon_out.h defines them.
const (
	gmonMagic   = "gmon"
	gmonVersion = 1
	tagTimeHist = 0
	tagCGArc    = 1
)

// WriteGmon writes prof as a gmon.out over layout l, addresses 8 bytes wide
// in byte order o: those of the 64-bit ELF symbol file gprof is given.
func WriteGmon(w io.Writer, o ByteOrder, l *Layout, prof *Profile) error {
	dim := prof.Dimension
	if dim == "" {
		dim = "seconds"
	}
	if len(dim) > 15 {
		return fmt.Errorf("gmon: dimension %q is longer than 15 bytes", dim)
	}
	if prof.Rate == 0 {
		return fmt.Errorf("gmon: the sampling rate is 0")
	}
	b := make([]byte, 0, 4096)
	b = append(b, gmonMagic...)
	b = o.AppendUint32(b, gmonVersion)
	b = append(b, make([]byte, 12)...)

	// One histogram per sampled function, bins relative to its start, in
	// the order of the layout; _unaccounted_ is the function before all
	// others. The samples sorted by function fill one function's bins at
	// a time.
	type hist struct {
		start, end uint64
		pcs        []PC // the function's sampled places
	}
	// Slices sized ahead, not collected: grown by appending, a large one
	// allocates several times its size.
	pcs := slices.AppendSeq(make([]PC, 0, len(prof.Samples)), maps.Keys(prof.Samples))
	slices.SortFunc(pcs, func(x, y PC) int { return cmp.Compare(x.Func, y.Func) })
	hists := make([]hist, 0, len(pcs)+1)
	if prof.Unaccounted > 0 {
		hists = append(hists, hist{start: l.Unaccounted, end: l.Unaccounted + binBytes})
	}
	for i := 0; i < len(pcs); {
		f := pcs[i].Func
		if f < 0 || f >= len(l.Start) {
			return fmt.Errorf("gmon: sample in function %d of %d", f, len(l.Start))
		}
		start, end := l.Start[f], l.End[f]
		j := i
		for ; j < len(pcs) && pcs[j].Func == f; j++ {
			if pcs[j].Offset >= end-start {
				return fmt.Errorf("gmon: sample at offset %#x past the %d bytes laid out for function %d", pcs[j].Offset, end-start, f)
			}
		}
		hists = append(hists, hist{start: start, end: end, pcs: pcs[i:j]})
		i = j
	}
	var h []uint64
	for _, k := range hists {
		h = slices.Grow(h[:0], int((k.end-k.start)/binBytes))[:(k.end-k.start)/binBytes]
		clear(h)
		if k.pcs == nil {
			h[0] = prof.Unaccounted
		}
		for _, pc := range k.pcs {
			h[pc.Offset/binBytes] += prof.Samples[pc]
		}
		for more := true; more; {
			more = false
			b = append(b, tagTimeHist)
			b = o.AppendUint64(b, k.start)
			b = o.AppendUint64(b, k.end)
			b = o.AppendUint32(b, uint32(len(h)))
			b = o.AppendUint32(b, prof.Rate)
			var d [15]byte
			copy(d[:], dim)
			b = append(b, d[:]...)
			b = append(b, dim[0])
			for i, n := range h {
				part := min(n, maxBin)
				h[i] -= part
				more = more || h[i] > 0
				b = o.AppendUint16(b, uint16(part))
			}
		}
		if len(b) > 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}

	slices.SortFunc(prof.Arcs, func(x, y ArcCount) int {
		return cmp.Or(cmp.Compare(x.From.Func, y.From.Func), cmp.Compare(x.From.Offset, y.From.Offset), cmp.Compare(x.Callee, y.Callee))
	})
	for _, a := range prof.Arcs {
		if a.From.Func < 0 || a.From.Func >= len(l.Start) || a.Callee < 0 || a.Callee >= len(l.Start) {
			return fmt.Errorf("gmon: arc between functions %d and %d of %d", a.From.Func, a.Callee, len(l.Start))
		}
		from := l.Start[a.From.Func] + a.From.Offset
		if from >= l.End[a.From.Func] {
			return fmt.Errorf("gmon: arc from offset %#x past the end of function %d", a.From.Offset, a.From.Func)
		}
		// gprof adds up the counts of repeated arcs, so a count past
		// 32 bits is written in parts.
		for n := a.Count; n > 0; {
			part := min(n, math.MaxUint32)
			n -= part
			b = append(b, tagCGArc)
			b = o.AppendUint64(b, from)
			b = o.AppendUint64(b, l.Start[a.Callee])
			b = o.AppendUint32(b, uint32(part))
		}
		if len(b) > 1<<20 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}
