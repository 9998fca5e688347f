package perfprof

import (
	"hash/maphash"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/idindex"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// TestIntern: a location is one function at one address, whether its
// function is kept by its dump's index (a jitted function placed whole) or
// by its first frame (the rest), and whichever of the two was seen first;
// each location gives back the frame it was first seen as.
func TestIntern(t *testing.T) {
	codes := []*dumpindex.Code{{Name: "f", CodeSize: 64}, {Name: "g", CodeSize: 64}, {Name: "f", CodeSize: 32}, {Name: "", CodeSize: 16}, {Name: "Interpreter", CodeSize: 256}}
	dump := &symbolize.Module{Name: "jit-1.dump", Kind: symbolize.JIT, Dump: &jitsources.Dump{Dump: &dumpindex.Dump{Functions: codes}}}
	elf := &symbolize.Module{Name: "/bin/x", Kind: symbolize.ELF}
	whole := func(code uint32, start, addr uint64) symbolize.Frame {
		fr := symbolize.Frame{Addr: addr, Module: dump, Symbol: symbolize.Symbol{Name: codes[code].Name, Start: start, End: start + codes[code].CodeSize, JIT: codes[code], Function: code}}
		fr.Map.Start, fr.Map.End = start, start+codes[code].CodeSize
		return fr
	}
	// split is a jitted frame whose region another function's load cut
	// in two: its mapping begins inside it.
	split := func(code uint32, start, addr uint64) symbolize.Frame {
		fr := whole(code, start, addr)
		fr.Map.Start, fr.Map.Pgoff = start+16, 16
		return fr
	}
	// running is a frame of HotSpot's interpreter named as the method it
	// runs (symbolize.Space.Interpreted): the interpreter's code, another
	// name.
	running := func(method string, addr uint64) symbolize.Frame {
		fr := whole(4, 0x6000, addr)
		fr.Symbol.Name = method + " [interpreted]"
		return fr
	}
	named := symbolize.Frame{Addr: 0x401010, Module: elf, Symbol: symbolize.Symbol{Name: "_Z4mainv", Start: 0x401000, End: 0x401100}}
	named.Map.Start, named.Map.End = 0x400000, 0x500000

	for _, order := range []string{"whole first", "split first"} {
		t.Run(order, func(t *testing.T) {
			a := &aggregator{
				dumps: []*symbolize.Module{dump}, dumpIDs: map[*symbolize.Module]uint16{dump: 1},
				seed: maphash.MakeSeed(), fnIDs: idindex.New(0), locIDs: idindex.New(0), oddFrames: make(map[uint32]symbolize.Frame),
			}
			first, second := whole(0, 0x1000, 0x1004), split(0, 0x1000, 0x1020)
			if order == "split first" {
				first, second = split(0, 0x1000, 0x1004), whole(0, 0x1000, 0x1020)
			}
			frames := []struct {
				fr       symbolize.Frame
				sameAs   int // the frame whose location it is, or -1
				sameFnAs int // the frame whose function it is, or -1
			}{
				{first, -1, -1},
				{second, -1, 0},
				{whole(0, 0x1000, 0x1004), 0, 0},        // the first's address again
				{whole(0, 0x3000, 0x3004), -1, -1},      // f moved: another place, another function
				{whole(1, 0x2000, 0x2004), -1, -1},      // g
				{whole(2, 0x1000, 0x1008), -1, 0},       // f compiled again at the same place: the same function
				{whole(3, 0x4000, 0x4000), -1, -1},      // nameless
				{whole(3, 0x5000, 0x5000), -1, 6},       // nameless, elsewhere: as perf has it, one unnamed function
				{named, -1, -1},                         // an ELF symbol
				{split(1, 0x2000, 0x2030), -1, 4},       // g, split after it was seen whole
				{whole(1, 0x2000, 0x2004), 4, 4},        // g's first address again
				{symbolize.Frame{Addr: 0x9000}, -1, -1}, // nowhere
				{symbolize.Frame{Addr: 0x9000}, 11, 11}, // nowhere, again
				{symbolize.Frame{Addr: 0x9008}, -1, 11}, // nowhere, elsewhere
				{split(2, 0x1000, 0x1010), -1, 0},       // f compiled again, split
				{whole(0, 0x3000, 0x3004), 3, 3},        // f moved, again
				{whole(1, 0x2000, 0x2030), 9, 4},        // g, whole, at the split one's address: its location, as first seen
				{whole(2, 0x1000, 0x1008), 5, 0},        // f compiled again, again
				{split(0, 0x1000, 0x1020), 1, 0},        // the second again
				{named, 8, 8},                           // the ELF symbol again
				{whole(4, 0x6000, 0x6010), -1, -1},      // the interpreter
				{running("La;a()V", 0x6010), -1, -1},    // running a method, at the same address: another function
				{running("La;b()V", 0x6010), -1, -1},    // running another method
				{running("La;a()V", 0x6020), -1, 21},    // the first method, elsewhere in the interpreter
				{running("La;a()V", 0x6010), 21, 21},    // the first method at its first address again
				{whole(4, 0x6000, 0x6020), -1, 20},      // the interpreter, elsewhere
			}
			ids := make([]uint32, len(frames))
			for i, f := range frames {
				ids[i] = a.intern(f.fr, false)
				fn := a.loc(ids[i]).fn
				switch {
				case f.sameAs >= 0 && ids[i] != ids[f.sameAs]:
					t.Errorf("frame %d: location %d, want frame %d's, %d", i, ids[i], f.sameAs, ids[f.sameAs])
				case f.sameAs < 0 && ids[i] != uint32(a.locs.Len()):
					t.Errorf("frame %d: location %d, want a new one", i, ids[i])
				}
				switch {
				case f.sameFnAs >= 0 && fn != a.loc(ids[f.sameFnAs]).fn:
					t.Errorf("frame %d: function %d, want frame %d's, %d", i, fn, f.sameFnAs, a.loc(ids[f.sameFnAs]).fn)
				case f.sameFnAs < 0 && fn != uint32(len(a.fns)-1):
					t.Errorf("frame %d: function %d, want a new one", i, fn)
				}
			}
			for i, f := range frames {
				want := f.fr
				if f.sameAs >= 0 {
					want = frames[f.sameAs].fr
				}
				if got := a.frame(ids[i] - 1); got != want {
					t.Errorf("frame %d: location %d gives back %+v, want %+v", i, ids[i], got, want)
				}
			}
			if got := a.name(a.loc(ids[8]).fn); got != "main" {
				t.Errorf("the ELF symbol is named %q, want main", got)
			}
			if got := a.name(a.loc(ids[21]).fn); got != "a.a() [interpreted]" { // demangled as perf shows Java
				t.Errorf("the interpreter running a is named %q", got)
			}
			if got := a.name(a.loc(ids[0]).fn); got != "f" {
				t.Errorf("f is named %q", got)
			}
			if a.flags(ids[0])&jittedCode == 0 || a.flags(ids[8])&jittedCode != 0 {
				t.Errorf("flags: f's %b, the ELF symbol's %b", a.flags(ids[0]), a.flags(ids[8]))
			}
		})
	}
}
