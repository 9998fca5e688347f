package report

import (
	"hash/maphash"
	"io"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/gmon"
	"github.com/jitprof/jitprof/internal/idindex"
	"github.com/jitprof/jitprof/internal/objtool"
)

// The bridge from perfprof's profiles to gprof's files: internal/gmon's
// model knows nothing of how samples were gathered.

// incarnation tells function incarnations apart: a name at a start in a
// module, and for jitted code its code_index, so that functions that held
// one address in turn keep apart. Modules go by name: each result (stage)
// has modules of its own.
type incarnation struct {
	name      string
	start     uint64
	codeIndex uint64
	// place numbers the module and the method inlined into it (a symbol
	// of its own; "" for none), of which there are few: a smaller key
	// for a map of a million incarnations.
	place int32
}

// gprofProgram builds one gmon.Program over the functions of all profiles
// (perfprof's, by address) and a gmon.Profile of each, in order (the stages of
// one recording). Samples are counted, not weighed by period, as jitprof
// report's text output counts them; the leaf of each sample goes into the
// histogram, and each distinct caller-callee pair of its call chain adds the
// sample's count to that arc once. An off-CPU or wall-clock profile is
// weighed by its time instead, in ticks of timeTick (gprof has no other
// unit of time than a sampling rate's tick). A method a JIT inlined (a location's
// lines but the last) is a symbol of its own for each function incarnation
// it was inlined into, spanning the incarnation's offsets, so that it has
// its own self time and arcs from its caller.
//
// Functions are named as the report names them (demangled); where each
// starts, how long it is and which code_index it was comes from the files
// the profiles' mappings name.
func gprofProgram(files *contract.Files, ps ...*contract.Profile) (*gmon.Program, []*gmon.Profile, error) {
	tool := objtool.ForProfiles(files, ps...)
	defer tool.Close()
	// Functions are most of the incarnations: sized for them, the symbols
	// are not copied over and over as they grow.
	functions := 0
	for _, p := range ps {
		functions += len(p.Functions)
	}
	prog := &gmon.Program{Symbols: make([]gmon.Symbol, 0, functions)}
	index := make(map[incarnation]int32, functions)
	places := make(map[[2]string]int32)
	symbol := func(f gmon.Symbol, key incarnation) int {
		i, ok := index[key]
		if !ok {
			i = int32(len(prog.Symbols))
			index[key] = i
			prog.Symbols = append(prog.Symbols, f)
		}
		return int(i)
	}
	// framesOf returns the places of loc, a location of p, innermost
	// first: the methods inlined there, each a symbol of its own in the
	// function's incarnation at the same offset, then the function.
	var pcs []gmon.PC
	framesOf := func(p *contract.Profile, loc *contract.Location) ([]gmon.PC, error) {
		pcs = pcs[:0]
		lines := p.LinesOf(loc)
		if len(lines) == 0 {
			return nil, nil
		}
		m := p.Mapping(loc.Mapping)
		fn, ok, err := tool.FuncIn(p, m, loc.Address)
		if err != nil || !ok {
			return nil, err
		}
		off := loc.Address - fn.Start
		for i, l := range lines {
			f := gmon.Symbol{Name: unknown, Size: fn.End - fn.Start, Addr: fn.Start, CodeIndex: fn.CodeIndex, Module: p.String(m.File)}
			place := [2]string{f.Module, ""}
			if lf := p.Function(l.Function); lf != nil {
				f.Name = p.String(p.PerfName(lf))
				if i < len(lines)-1 {
					place[1] = p.String(lf.Name)
				}
			}
			key := incarnation{name: fn.Name, start: fn.Start, codeIndex: fn.CodeIndex, place: intern(places, place)}
			pcs = append(pcs, gmon.PC{Func: symbol(f, key), Offset: off})
		}
		return pcs, nil
	}

	var profiles []*gmon.Profile
	for _, p := range ps {
		prof := &gmon.Profile{Samples: make(map[gmon.PC]uint64)}
		arcs := newArcTable()
		prof.Rate, prof.Dimension = rate(p)
		timed := timeValue(p)
		if timed >= 0 {
			prof.Rate, prof.Dimension = uint32(time.Second/timeTick), "seconds"
		}
		// A location's places are looked up once: stacks share their
		// callers.
		located := make([]span, p.Locations.Len()+1)
		places := make([]gmon.PC, 0, p.Locations.Len())
		seen := make(map[gmon.Arc]bool)
		for si := range p.Samples {
			values := p.Value(si)
			n := uint64(values[0])
			if timed >= 0 {
				n = uint64(max(values[timed], 0))
			}
			stack := p.Stack(&p.Samples[si])
			if len(stack) == 0 {
				continue
			}
			clear(seen)
			var callee gmon.PC
			calleeOK := false
			for i, loc := range stack {
				sp := &located[loc]
				if sp.n == 0 {
					frames, err := framesOf(p, p.Location(loc))
					if err != nil {
						return nil, nil, err
					}
					// n counts one more than the places, so that 0 is
					// a location not yet looked up.
					*sp = span{int32(len(places)), int32(len(frames)) + 1}
					places = append(places, frames...)
				}
				frames := places[sp.start : sp.start+sp.n-1]
				if i == 0 {
					if len(frames) == 0 {
						prof.Unaccounted += n
					} else {
						prof.Samples[frames[0]] += n
					}
				}
				for _, caller := range frames {
					if calleeOK {
						a := gmon.Arc{From: caller, Callee: callee.Func}
						if !seen[a] {
							seen[a] = true
							arcs.at(a).Count += n
						}
					}
					callee, calleeOK = caller, true
				}
				if len(frames) == 0 {
					calleeOK = false
				}
			}
		}
		prof.Arcs = arcs.list()
		if timed >= 0 {
			for pc, ns := range prof.Samples {
				prof.Samples[pc] = ticks(ns)
			}
			for _, a := range prof.Arcs.All() {
				a.Count = ticks(a.Count)
			}
			prof.Unaccounted = (prof.Unaccounted + uint64(timeTick/2)) / uint64(timeTick)
		}
		profiles = append(profiles, prof)
	}
	return prog, profiles, nil
}

// timeTick is the tick of the histograms of time off and on the CPU.
const timeTick = time.Millisecond

// timeValue returns the index of the sample value an off-CPU or wall-clock
// profile is weighed by (its default type, nanoseconds), or -1 for a
// profile of samples.
func timeValue(p *contract.Profile) int {
	if !slices.ContainsFunc(p.SampleType, func(t contract.ValueType) bool { return t.Type == contract.OffCPUType }) {
		return -1
	}
	for i, t := range p.SampleType {
		if t.Type == p.DefaultSampleType && t.Unit == "nanoseconds" {
			return i
		}
	}
	return -1
}

// ticks returns ns nanoseconds in ticks of timeTick, rounded.
func ticks(ns uint64) uint64 { return (ns + uint64(timeTick/2)) / uint64(timeTick) }

// An arcTable counts a profile's arcs, each once: 32 bytes and an index
// slot an arc (deep distinct stacks have millions of arcs), where a map
// cost more and a sorted copy of its keys more again.
type arcTable struct {
	arcs arena.List[gmon.ArcCount]
	ids  idindex.Index // of the arcs (numbers + 1), by arc
	seed maphash.Seed
}

func newArcTable() *arcTable { return &arcTable{ids: idindex.New(0), seed: maphash.MakeSeed()} }

// arc returns arc id - 1.
func (t *arcTable) arc(id uint32) *gmon.ArcCount { return t.arcs.At(int(id - 1)) }

// at returns arc a's count, a zero one the first time, to be changed in
// place before the table's next at.
func (t *arcTable) at(a gmon.Arc) *gmon.ArcCount {
	h := maphash.Comparable(t.seed, a)
	id, i := t.ids.Find(h, func(id uint32) bool { return t.arc(id).Arc == a })
	if id == 0 {
		id = uint32(t.arcs.Add(gmon.ArcCount{Arc: a}) + 1)
		t.ids.Add(i, id, h, func(id uint32) uint64 { return maphash.Comparable(t.seed, t.arc(id).Arc) })
	}
	return t.arc(id)
}

// list returns the arcs as gmon.Profile holds them, and empties the
// table.
func (t *arcTable) list() arena.List[gmon.ArcCount] {
	arcs := t.arcs
	*t = arcTable{}
	return arcs
}

// rate tells what one sample is worth: for the clock events, which count
// nanoseconds, the mean sampling frequency, so that gprof's seconds are
// CPU seconds; for other events, gprof counts samples.
func rate(p *contract.Profile) (uint32, string) {
	if p.PeriodType.Unit != "nanoseconds" || len(p.SampleType) < 2 {
		return 1, "samples"
	}
	var count, period float64
	for i := range p.Samples {
		v := p.Value(i)
		count += float64(v[0])
		period += float64(v[1])
	}
	if count == 0 || period == 0 {
		return 1, "samples"
	}
	hz := math.Round(count * 1e9 / period)
	return uint32(min(max(hz, 1), math.MaxUint32)), "seconds"
}

// writeGprof writes profiles, one per stage, into dir for gprof: a
// histogram file per stage (gmon.out, or gmon.out.NAME for stage NAME) and
// the symbol file they share, an ELF file or, with kaffe, Kaffe's
// assembler file (with Kaffe's file names, xgmon.out and
// kaffe-jit-symbols.s). Each file is written whole or not at all. It
// returns the paths written.
func writeGprof(dir string, kaffe bool, names []string, ps []*contract.Profile, files *contract.Files) ([]string, error) {
	prog, profiles, err := gprofProgram(files, ps...)
	if err != nil {
		return nil, err
	}
	machine, order, err := gmon.HostMachine()
	if err != nil {
		return nil, err
	}
	layout := prog.Layout(profiles...)
	histName, symName := "gmon.out", "jitprof-symbols"
	writeSyms := func(w io.Writer) error { return prog.WriteELF(w, machine, order, layout) }
	if kaffe {
		histName, symName = "xgmon.out", "kaffe-jit-symbols.s"
		writeSyms = func(w io.Writer) error { return prog.WriteAssembler(w, layout) }
	}
	var written []string
	path := filepath.Join(dir, symName)
	if err := atomicfile.Private.Write(path, writeSyms); err != nil {
		return nil, err
	}
	written = append(written, path)
	for i, prof := range profiles {
		path := filepath.Join(dir, histName)
		if names[i] != "" {
			path += "." + names[i]
		}
		if err := atomicfile.Private.Write(path, func(w io.Writer) error { return gmon.WriteGmon(w, order, layout, prof) }); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	return written, nil
}
