package perfprof_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// TestDeepDistinctStacks: samples whose call chains hold thousands of
// addresses no other sample has get one location per address, each in the
// jitted function that holds it, at its address, in the order of the
// chain: what a location kept as its function and address must give back.
func TestDeepDistinctStacks(t *testing.T) {
	const functions, samples, depth = 500, 4, 1000
	p, err := synth.Write(t.TempDir(), synth.Options{Functions: functions, Samples: samples, Depth: depth})
	if err != nil {
		t.Fatal(err)
	}
	res, err := perfprof.Run(perfprof.Options{Input: p.Data})
	if err != nil {
		t.Fatal(err)
	}
	// Locations at one line of one function share their Line (the
	// synthetic functions have no lines: one a function).
	if n := len(res.Profile.Lines); n > functions {
		t.Errorf("%d lines for %d locations in %d functions, want at most one a function", n, res.Profile.Locations.Len(), functions)
	}
	prof := res.Profile.PProf()
	if res.Kept != samples || len(prof.Sample) != samples {
		t.Fatalf("%d samples kept, %d in the profile, want %d", res.Kept, len(prof.Sample), samples)
	}
	// The callers are the first samples*depth addresses of the code, which
	// hold the leaves (the first functions' starts) too.
	if want := samples * depth; len(prof.Location) != want {
		t.Errorf("%d locations, want %d", len(prof.Location), want)
	}
	next := uint64(0)
	for i, s := range prof.Sample {
		if len(s.Location) != depth+1 {
			t.Fatalf("sample %d: %d frames, want %d", i, len(s.Location), depth+1)
		}
		for k, loc := range s.Location[1:] {
			addr := synth.Base + next%(functions*synth.CodeSize)
			next++
			fn := (addr - synth.Base) / synth.CodeSize
			if loc.Address != addr || len(loc.Line) != 1 || loc.Line[0].Function.SystemName != fmt.Sprintf("f%d", fn) ||
				loc.Mapping == nil || loc.Mapping.Start != synth.Base+fn*synth.CodeSize {
				t.Fatalf("sample %d frame %d: %#x in %v, want %#x in f%d", i, k+1, loc.Address, loc.Line, addr, fn)
			}
		}
	}
}

// BenchmarkScale runs the analysis on recordings of many tiny jitted
// functions, each sampled once, and of deep call chains of distinct
// addresses (the worst case for a profile with a location per address).
func BenchmarkScale(b *testing.B) {
	cases := []struct {
		name string
		o    synth.Options
	}{
		{"functions=100000", synth.Options{Functions: 100_000, Samples: 100_000}},
		{"functions=1000000", synth.Options{Functions: 1_000_000, Samples: 1_000_000}},
		{"depth=8000", synth.Options{Functions: 100_000, Samples: 200, Depth: 8000}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, err := synth.Write(b.TempDir(), c.o)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			var res *perfprof.Result
			for b.Loop() {
				if res, err = perfprof.Run(perfprof.Options{Input: p.Data}); err != nil {
					b.Fatal(err)
				}
			}
			// What the profile keeps alive when it is handed on.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/float64(res.Profile.Locations.Len()), "live-B/location")
		})
	}
}

// TestLeafAddresses: per function with the leaf by address (annotate's
// profile), deep distinct stacks keep a location per caller function, not
// per caller address, while each sample's leaf keeps the address and lines
// a profile by address gives it, and every frame its function.
func TestLeafAddresses(t *testing.T) {
	const functions, samples, depth = 500, 4, 1000
	p, err := synth.Write(t.TempDir(), synth.Options{Functions: functions, Samples: samples, Depth: depth})
	if err != nil {
		t.Fatal(err)
	}
	run := func(o perfprof.Options) *profile.Profile {
		o.Input = p.Data
		res, err := perfprof.Run(o)
		if err != nil {
			t.Fatal(err)
		}
		return res.Profile.PProf()
	}
	byAddress, mixed := run(perfprof.Options{}), run(perfprof.Options{PerFunction: true, LeafAddresses: true})
	if len(mixed.Location) > samples+functions {
		t.Errorf("%d locations, want at most a leaf per sample and a caller per function, %d", len(mixed.Location), samples+functions)
	}
	frames := func(prof *profile.Profile) map[string]int64 {
		out := map[string]int64{}
		for _, s := range prof.Sample {
			leaf := s.Location[0]
			k := fmt.Sprintf("leaf %#x %s line %d, callers", leaf.Address, leaf.Line[0].Function.SystemName, leaf.Line[0].Line)
			for _, loc := range s.Location[1:] {
				k += " " + loc.Line[0].Function.SystemName
			}
			out[k] += s.Value[0]
		}
		return out
	}
	want, got := frames(byAddress), frames(mixed)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("samples by leaf address and caller functions:\n%.600v\nwant (by address):\n%.600v", got, want)
	}
	leafs := map[uint64]bool{}
	for _, s := range mixed.Sample {
		leafs[s.Location[0].Address] = true
	}
	for _, loc := range mixed.Location {
		if !leafs[loc.Address] && loc.Line[0].Line != 0 {
			t.Errorf("caller location %#x has line %d: a location per function stands for all its lines", loc.Address, loc.Line[0].Line)
		}
	}
}
