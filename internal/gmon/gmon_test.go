package gmon

import (
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// readBack is what a gmon.out holds, summed as gprof sums it: histogram
// bins of records over the same range added, arcs of the same addresses
// added.
type readBack struct {
	rate uint32
	dim  string
	bins map[uint64]uint64 // by bin address
	arcs map[[2]uint64]uint64
	// order is the arcs' addresses as written, a record each.
	order [][2]uint64
}

// readGmon reads a gmon.out as binutils' gprof does, checking what gprof
// would refuse: a bad header, an unknown tag, histograms that overlap
// without matching, scales or dimensions that differ.
func readGmon(data []byte, o binary.ByteOrder) (*readBack, error) {
	if len(data) < 20 || string(data[:4]) != "gmon" || o.Uint32(data[4:]) != 1 {
		return nil, fmt.Errorf("bad header")
	}
	rb := &readBack{bins: map[uint64]uint64{}, arcs: map[[2]uint64]uint64{}}
	ranges := map[[2]uint64]bool{}
	off := 20
	need := func(n int) error {
		if len(data)-off < n {
			return fmt.Errorf("offset %d: record cut short", off)
		}
		return nil
	}
	for off < len(data) {
		tag := data[off]
		off++
		switch tag {
		case tagTimeHist:
			if err := need(40); err != nil {
				return nil, err
			}
			lo, hi, n, rate := o.Uint64(data[off:]), o.Uint64(data[off+8:]), o.Uint32(data[off+16:]), o.Uint32(data[off+20:])
			dim := strings.TrimRight(string(data[off+24:off+39]), "\x00")
			if data[off+39] != dim[0] {
				return nil, fmt.Errorf("offset %d: abbreviation %q of %q", off, data[off+39], dim)
			}
			off += 40
			if n == 0 || hi <= lo || (hi-lo)/uint64(n) != binBytes || (hi-lo)%uint64(n) != 0 {
				return nil, fmt.Errorf("histogram [%#x, %#x) of %d bins: scale is not %d bytes", lo, hi, n, binBytes)
			}
			if rb.dim == "" {
				rb.rate, rb.dim = rate, dim
			} else if rb.rate != rate || rb.dim != dim {
				return nil, fmt.Errorf("histograms differ in rate or dimension")
			}
			if !ranges[[2]uint64{lo, hi}] {
				for r := range ranges {
					if lo < r[1] && r[0] < hi {
						return nil, fmt.Errorf("overlapping histograms [%#x, %#x) and [%#x, %#x)", lo, hi, r[0], r[1])
					}
				}
				ranges[[2]uint64{lo, hi}] = true
			}
			if err := need(2 * int(n)); err != nil {
				return nil, err
			}
			for i := range uint64(n) {
				if c := o.Uint16(data[off+2*int(i):]); c != 0 {
					rb.bins[lo+i*binBytes] += uint64(c)
				}
			}
			off += 2 * int(n)
		case tagCGArc:
			if err := need(20); err != nil {
				return nil, err
			}
			arc := [2]uint64{o.Uint64(data[off:]), o.Uint64(data[off+8:])}
			rb.arcs[arc] += uint64(o.Uint32(data[off+16:]))
			rb.order = append(rb.order, arc)
			off += 20
		default:
			return nil, fmt.Errorf("offset %d: unknown tag %d", off-1, tag)
		}
	}
	return rb, nil
}

// checkRoundTrip writes prof and reads it back: every sample in its
// function's bin, every arc from its call site to its callee, and nothing
// else.
func checkRoundTrip(t *testing.T, p *Program, prof *Profile) *readBack {
	t.Helper()
	l := p.Layout(prof)
	var b bytes.Buffer
	if err := WriteGmon(&b, binary.LittleEndian, l, prof); err != nil {
		t.Fatal(err)
	}
	rb, err := readGmon(b.Bytes(), binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint64]uint64{}
	if prof.Unaccounted > 0 {
		want[l.Unaccounted] = prof.Unaccounted
	}
	for pc, n := range prof.Samples {
		if n > 0 {
			want[l.Start[pc.Func]+clampOffset(pc.Offset)/binBytes*binBytes] += n
		}
	}
	for addr, n := range want {
		if rb.bins[addr] != n {
			t.Errorf("bin %#x: %d samples, want %d", addr, rb.bins[addr], n)
		}
	}
	if len(rb.bins) != len(want) {
		t.Errorf("%d bins hold samples, want %d", len(rb.bins), len(want))
	}
	wantArcs := map[[2]uint64]uint64{}
	for _, a := range prof.Arcs.All() {
		if a.Count > 0 {
			wantArcs[[2]uint64{l.Start[a.From.Func] + clampOffset(a.From.Offset), l.Start[a.Callee]}] += a.Count
		}
	}
	if fmt.Sprint(wantArcs) != fmt.Sprint(rb.arcs) {
		t.Errorf("arcs %v, want %v", rb.arcs, wantArcs)
	}
	for i := range p.Symbols {
		if l.Start[i]%binBytes != 0 || l.End[i] <= l.Start[i] || (i > 0 && l.Start[i] != l.End[i-1]) {
			t.Errorf("function %d laid out at [%#x, %#x)", i, l.Start[i], l.End[i])
		}
	}
	return rb
}

func TestRoundTrip(t *testing.T) {
	three := &Program{Symbols: []Symbol{{Name: "a", Size: 16}, {Name: "b", Size: 3}, {Name: "a", Size: 16}}}
	long := &Program{Symbols: []Symbol{{Name: "a", Size: 16}, {Name: "long", Size: 1 << 20}}}
	huge := &Program{Symbols: []Symbol{{Name: "huge", Size: 1 << 40}, {Name: "b", Size: 3}}} // as a perf map line may claim
	tests := []struct {
		name string
		p    *Program
		prof *Profile
	}{
		{"empty", &Program{}, &Profile{Rate: 100}},
		{"unaccounted only", &Program{}, &Profile{Rate: 100, Unaccounted: 7}},
		{"one sample per function", three, &Profile{Rate: 4000, Samples: map[PC]uint64{{0, 0}: 1, {1, 2}: 1, {2, 15}: 1}}},
		{"odd offsets share a bin", three, &Profile{Rate: 4000, Samples: map[PC]uint64{{0, 4}: 1, {0, 5}: 2}}},
		{"bins past u16", three, &Profile{Rate: 1, Samples: map[PC]uint64{{1, 0}: 3*maxBin + 5, {2, 1}: maxBin}, Unaccounted: maxBin + 1}},
		{"offset past the size widens", three, &Profile{Rate: 1, Samples: map[PC]uint64{{1, 40}: 9}}},
		{"a long function sampled far apart", long, &Profile{Rate: 1, Samples: map[PC]uint64{{1, 0}: 1, {1, 3 * histGap}: 2, {1, 1<<20 - 1}: 3, {1, 1 << 19}: 4}}},
		{"a function claiming a terabyte", huge, &Profile{Rate: 1, Samples: map[PC]uint64{{0, 1 << 39}: 5, {0, 7}: 1}, Arcs: counted(map[Arc]uint64{{PC{0, 1 << 38}, 1}: 2})}},
		{"arcs", three, &Profile{Rate: 1, Arcs: counted(map[Arc]uint64{{PC{0, 3}, 1}: 5, {PC{0, 9}, 1}: 2, {PC{1, 1}, 2}: math.MaxUint32 + 10})}},
		{"samples dimension", three, &Profile{Rate: 1, Dimension: "samples", Samples: map[PC]uint64{{0, 1}: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkRoundTrip(t, tc.p, tc.prof) })
	}
}

// TestWriteGmonFollowsSamples: a function's histogram costs what its
// samples need, not what its length claims: a perf map line of a terabyte,
// or a long function sampled in a few places, is a few small records.
func TestWriteGmonFollowsSamples(t *testing.T) {
	p := &Program{Symbols: []Symbol{{Name: "huge", Size: 1 << 40}, {Name: "long", Size: 1 << 28}}}
	prof := &Profile{Rate: 1, Samples: map[PC]uint64{{0, 1 << 39}: 5, {0, 12}: 1, {1, 0}: 1, {1, 1<<28 - 1}: 1}}
	l := p.Layout(prof)
	if size := l.End[0] - l.Start[0]; size > MaxFunctionBytes {
		t.Errorf("a function laid out over %d bytes, more than %d", size, MaxFunctionBytes)
	}
	var b bytes.Buffer
	if err := WriteGmon(&b, binary.LittleEndian, l, prof); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 64<<10 {
		t.Errorf("gmon.out of %d bytes for 4 sampled places", b.Len())
	}
}

// TestWriteGmonArcsInOrder: arcs counted in any order, across several of
// the list's arrays, are written in the order of their addresses, each
// once: the arrays sorted apart and merged.
func TestWriteGmonArcsInOrder(t *testing.T) {
	p := &Program{}
	for range 50 {
		p.Symbols = append(p.Symbols, Symbol{Name: "f", Size: 256})
	}
	arcs := map[Arc]uint64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for len(arcs) < 3*arena.ListChunk+7 {
		arcs[Arc{PC{rng.IntN(50), rng.Uint64N(256)}, rng.IntN(50)}] = 1 + rng.Uint64N(9)
	}
	prof := &Profile{Rate: 1, Arcs: counted(arcs)} // in the map's order
	rb := checkRoundTrip(t, p, prof)
	if len(rb.order) != len(arcs) {
		t.Fatalf("%d arc records, want %d", len(rb.order), len(arcs))
	}
	if !slices.IsSortedFunc(rb.order, func(x, y [2]uint64) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) }) {
		t.Error("the arcs are not written in the order of their addresses")
	}
}

func TestWriteGmonErrors(t *testing.T) {
	p := &Program{Symbols: []Symbol{{Name: "f", Size: 4}}}
	tests := []struct {
		name string
		prof *Profile
		want string
	}{
		{"no rate", &Profile{}, "rate is 0"},
		{"long dimension", &Profile{Rate: 1, Dimension: "sixteen-letters!"}, "longer than 15"},
		{"unknown function", &Profile{Rate: 1, Samples: map[PC]uint64{{3, 0}: 1}}, "function 3 of 1"},
		{"unknown callee", &Profile{Rate: 1, Arcs: counted(map[Arc]uint64{{PC{0, 0}, 5}: 1})}, "arc between"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteGmon(&bytes.Buffer{}, binary.LittleEndian, p.Layout(), tc.prof)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzGmonRoundTrip: any profile the bytes describe is written so that
// gprof's way of reading gives back its samples and arcs.
func FuzzGmonRoundTrip(f *testing.F) {
	f.Add([]byte{3, 10, 200, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{255}, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		rng := rand.New(rand.NewPCG(uint64(len(data)), 0))
		next := func() uint64 {
			if len(data) == 0 {
				return rng.Uint64N(4)
			}
			v := uint64(data[0])
			data = data[1:]
			return v
		}
		p := &Program{}
		for range 1 + next()%8 {
			p.Symbols = append(p.Symbols, Symbol{Name: "f", Size: next() * next()})
		}
		n := len(p.Symbols)
		prof := &Profile{Rate: 1 + uint32(next()), Samples: map[PC]uint64{}, Unaccounted: next() * next() * next()}
		arcs := map[Arc]uint64{}
		for range next() % 32 {
			prof.Samples[PC{int(next()) % n, next() * next()}] += 4 * next() * next()
			arcs[Arc{PC{int(next()) % n, next()}, int(next()) % n}] += next() * next()
		}
		prof.Arcs = counted(arcs)
		checkRoundTrip(t, p, prof)
	})
}

// TestGprofReadsBothSymbolFiles: gprof, given the ELF symbol file or the
// assembler file assembled and linked, prints the flat profile the model
// holds, names with spaces, dots and quotes included.
func TestGprofReadsBothSymbolFiles(t *testing.T) {
	p := &Program{Symbols: []Symbol{
		{Name: "JS:*fib /app/a.js:1:10", Size: 40, Addr: 0x7f0000001000, CodeIndex: 3, Module: "/tmp/jit-1.dump"},
		{Name: "loop.b$x", Size: 7},
		{Name: "main", Size: 100},
		{Name: `q"uote\d`, Size: 2},
		{Name: "loop.b$x", Size: 7},   // a second incarnation of the same name
		{Name: "long", Size: 1 << 20}, // sampled far apart: several records
	}}
	prof := &Profile{Rate: 1000, Samples: map[PC]uint64{{0, 3}: 64000, {1, 6}: 5000, {2, 99}: 20000, {3, 0}: 1000, {4, 6}: 2000,
		{5, 10}: 2000, {5, 1 << 19}: 2000, {5, 1<<20 - 1}: 2000}, Unaccounted: 2000}
	want := map[string]float64{"JS:*fib /app/a.js:1:10": 64, "loop.b$x": 7, "main": 20, `q"uote\d`: 1, "long": 6, UnaccountedName: 2}
	l := p.Layout(prof)
	dir := t.TempDir()
	m, o, err := HostMachine()
	if err != nil {
		t.Skip(err)
	}
	write := func(name string, w func(*os.File) error) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := w(f); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	gmonOut := write("gmon.out", func(f *os.File) error { return WriteGmon(f, o, l, prof) })
	syms := write("syms", func(f *os.File) error { return p.WriteELF(f, m, o, l) })
	asm := write("syms.s", func(f *os.File) error { return p.WriteAssembler(f, l) })

	ef, err := elf.Open(syms)
	if err != nil {
		t.Fatalf("the symbol file is no ELF file for Go's reader: %v", err)
	}
	esyms, err := ef.Symbols()
	ef.Close()
	if err != nil || len(esyms) != len(p.Symbols)+2 {
		t.Fatalf("%d symbols (%v), want %d", len(esyms), err, len(p.Symbols)+2)
	}

	check := func(what string, got map[string]float64) {
		t.Helper()
		for name, pct := range want {
			// gprof prints two decimals; the "#2" of the assembler's
			// second incarnation is summed with the first.
			if math.Abs(got[name]-pct) > 0.02 {
				t.Errorf("%s: %q has %.2f%%, want %.2f%% (all: %v)", what, name, got[name], pct, got)
			}
		}
	}
	elfShares, _ := fixtures.FlatShares(t, fixtures.RunGprof(t, "-p", syms, gmonOut))
	check("ELF", elfShares)

	for _, tool := range []string{"as", "ld"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(err)
		}
	}
	obj, linked := filepath.Join(dir, "syms.o"), filepath.Join(dir, "linked")
	for _, args := range [][]string{{"as", asm, "-o", obj}, {"ld", fmt.Sprintf("-Ttext=%#x", l.TextStart), "-e", "0", "-o", linked, obj}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	got, _ := fixtures.FlatShares(t, fixtures.RunGprof(t, "-p", linked, gmonOut))
	got["loop.b$x"] += got["loop.b$x #2"]
	check("assembled", got)
}

// counted lists arcs as a Profile holds them.
func counted(arcs map[Arc]uint64) arena.List[ArcCount] {
	var out arena.List[ArcCount]
	for a, n := range arcs {
		out.Add(ArcCount{a, n})
	}
	return out
}
