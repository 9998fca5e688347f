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

	"github.com/jitprof/jitprof/internal/arena"
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
	// sorts each of the list's arrays in place and writes them merged. A
	// list, not a map, nor one slice, which a list of millions (a profile
	// of deep distinct stacks) would be copied into to be sorted.
	Arcs arena.List[ArcCount]
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

// MaxFunctionBytes bounds the range a function is laid out over: a size
// comes from files other users write (a perf map line may claim a
// terabyte), and sums of such sizes would overflow the text's addresses.
// Offsets past it count in the function's last bytes.
const MaxFunctionBytes = 1 << 30

// clampOffset is where an offset into a function is laid out.
func clampOffset(off uint64) uint64 { return min(off, MaxFunctionBytes-1) }

// histGap is the most empty bins one histogram record spans between
// sampled ones: a function's histogram is written as records over the runs
// of its sampled bins, so that its size follows the samples, not the
// function's length. A function of up to histGap bins gets one record over
// all of it.
const histGap = 4096

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
		need[i] = max(min(f.Size, MaxFunctionBytes), 1)
	}
	for _, prof := range profiles {
		for pc := range prof.Samples {
			need[pc.Func] = max(need[pc.Func], clampOffset(pc.Offset)+1)
		}
		for _, a := range prof.Arcs.All() {
			need[a.From.Func] = max(need[a.From.Func], clampOffset(a.From.Offset)+1)
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

	// Histograms in the order of the layout, _unaccounted_'s first (the
	// function before all others), then each sampled function's: a record
	// over each run of its sampled bins (histGap), bins relative to the
	// run's start. The samples sorted by place fill one run at a time.
	// Slices sized ahead, not collected: grown by appending, a large one
	// allocates several times its size.
	pcs := slices.AppendSeq(make([]PC, 0, len(prof.Samples)), maps.Keys(prof.Samples))
	slices.SortFunc(pcs, func(x, y PC) int { return cmp.Or(cmp.Compare(x.Func, y.Func), cmp.Compare(x.Offset, y.Offset)) })
	for _, pc := range pcs {
		if pc.Func < 0 || pc.Func >= len(l.Start) {
			return fmt.Errorf("gmon: sample in function %d of %d", pc.Func, len(l.Start))
		}
		if size := l.End[pc.Func] - l.Start[pc.Func]; clampOffset(pc.Offset) >= size {
			return fmt.Errorf("gmon: sample at offset %#x past the %d bytes laid out for function %d", pc.Offset, size, pc.Func)
		}
	}
	var reused []uint64
	zeroBins := func(n int) []uint64 {
		reused = slices.Grow(reused[:0], n)[:n]
		clear(reused)
		return reused
	}
	var d [15]byte
	copy(d[:], dim)
	write := func(start uint64, h []uint64) error {
		for more := true; more; {
			more = false
			b = append(b, tagTimeHist)
			b = o.AppendUint64(b, start)
			b = o.AppendUint64(b, start+uint64(len(h))*binBytes)
			b = o.AppendUint32(b, uint32(len(h)))
			b = o.AppendUint32(b, prof.Rate)
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
		return nil
	}
	if prof.Unaccounted > 0 {
		h := zeroBins(1)
		h[0] = prof.Unaccounted
		if err := write(l.Unaccounted, h); err != nil {
			return err
		}
	}
	bin := func(pc PC) uint64 { return clampOffset(pc.Offset) / binBytes }
	for i := 0; i < len(pcs); {
		f := pcs[i].Func
		bins := (l.End[f] - l.Start[f]) / binBytes
		j := i
		for j < len(pcs) && pcs[j].Func == f {
			j++
		}
		for k := i; k < j; {
			lo, last := bin(pcs[k]), bin(pcs[k])
			if k == i && lo <= histGap {
				lo = 0
			}
			m := k + 1
			for ; m < j && bin(pcs[m])-last <= histGap; m++ {
				last = bin(pcs[m])
			}
			hi := last + 1
			if m == j && bins-hi <= histGap {
				hi = bins
			}
			h := zeroBins(int(hi - lo))
			for _, pc := range pcs[k:m] {
				h[bin(pc)-lo] += prof.Samples[pc]
			}
			if err := write(l.Start[f]+lo*binBytes, h); err != nil {
				return err
			}
			k = m
		}
		i = j
	}

	for a := range prof.Arcs.Sorted(compareArcs) {
		if a.From.Func < 0 || a.From.Func >= len(l.Start) || a.Callee < 0 || a.Callee >= len(l.Start) {
			return fmt.Errorf("gmon: arc between functions %d and %d of %d", a.From.Func, a.Callee, len(l.Start))
		}
		from := l.Start[a.From.Func] + clampOffset(a.From.Offset)
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

// compareArcs orders arcs as gmon.out lists them: by caller's place, then
// callee.
func compareArcs(x, y ArcCount) int {
	return cmp.Or(cmp.Compare(x.From.Func, y.From.Func), cmp.Compare(x.From.Offset, y.From.Offset), cmp.Compare(x.Callee, y.Callee))
}
