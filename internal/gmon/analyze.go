package gmon

import (
	"errors"
	"math"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// incarnation tells function incarnations apart: a name at a start in a
// module, and for jitted code its code_index, so that functions that held
// one address in turn keep apart. Modules go by name: each result (stage)
// has modules of its own.
type incarnation struct {
	module    string
	name      string
	start     uint64
	codeIndex uint64
}

// FromResults builds one Program over the functions of all results and a
// Profile of each, in order (the stages of one recording). Samples are
// counted, not weighed by period, as jitprof report's text output counts
// them; the leaf of each sample goes into the histogram, and each distinct
// caller-callee pair of its call chain adds the sample's count to that arc
// once.
//
// Functions are named as the report names them (demangled). The results
// must keep their Frames (not perfprof.Options.ProfileOnly): the profile
// alone does not tell where a function starts, how long it is, nor which
// code_index it was.
func FromResults(results ...*perfprof.Result) (*Program, []*Profile, error) {
	prog := &Program{}
	index := make(map[incarnation]int)
	funcOf := func(res *perfprof.Result, loc *profile.Location) (PC, bool) {
		fr := res.Frames[loc.ID-1]
		if fr.Symbol.Name == "" || len(loc.Line) == 0 {
			return PC{}, false
		}
		f := Function{Name: loc.Line[0].Function.Name, Size: fr.Symbol.End - fr.Symbol.Start, Addr: fr.Symbol.Start}
		if fr.Module != nil {
			f.Module = fr.Module.Name
		}
		key := incarnation{module: f.Module, name: fr.Symbol.Name, start: fr.Symbol.Start}
		if jit := fr.Symbol.JIT; jit != nil {
			key.codeIndex, f.CodeIndex = jit.CodeIndex, jit.CodeIndex
		}
		i, ok := index[key]
		if !ok {
			i = len(prog.Functions)
			index[key] = i
			prog.Functions = append(prog.Functions, f)
		}
		return PC{Func: i, Offset: fr.Addr - fr.Symbol.Start}, true
	}

	var profiles []*Profile
	for _, res := range results {
		if res.Frames == nil {
			return nil, nil, errors.New("gmon: the analysis kept no frames (perfprof.Options.ProfileOnly)")
		}
		prof := &Profile{Samples: make(map[PC]uint64), Arcs: make(map[Arc]uint64)}
		prof.Rate, prof.Dimension = rate(res.Profile)
		seen := make(map[Arc]bool)
		for _, s := range res.Profile.Sample {
			n := uint64(s.Value[0])
			if len(s.Location) == 0 {
				continue
			}
			leaf, ok := funcOf(res, s.Location[0])
			if !ok {
				prof.Unaccounted += n
			} else {
				prof.Samples[leaf] += n
			}
			clear(seen)
			callee, calleeOK := leaf, ok
			for _, loc := range s.Location[1:] {
				caller, ok := funcOf(res, loc)
				if ok && calleeOK {
					a := Arc{From: caller, Callee: callee.Func}
					if !seen[a] {
						seen[a] = true
						prof.Arcs[a] += n
					}
				}
				callee, calleeOK = caller, ok
			}
		}
		profiles = append(profiles, prof)
	}
	return prog, profiles, nil
}

// rate tells what one sample is worth: for the clock events, which count
// nanoseconds, the mean sampling frequency, so that gprof's seconds are
// CPU seconds; for other events, gprof counts samples.
func rate(p *profile.Profile) (uint32, string) {
	if p.PeriodType == nil || p.PeriodType.Unit != "nanoseconds" || len(p.SampleType) < 2 {
		return 1, "samples"
	}
	var count, period float64
	for _, s := range p.Sample {
		count += float64(s.Value[0])
		period += float64(s.Value[1])
	}
	if count == 0 || period == 0 {
		return 1, "samples"
	}
	hz := math.Round(count * 1e9 / period)
	return uint32(min(max(hz, 1), math.MaxUint32)), "seconds"
}
