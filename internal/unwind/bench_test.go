package unwind

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/jitdump"
)

// The host's libc and node: small and large .eh_frame (3,700 and 76,000
// FDEs on Debian 12 and node 20).
var benchFiles = []struct{ name, path string }{
	{"libc", "/lib/x86_64-linux-gnu/libc.so.6"},
	{"node", "/usr/bin/node"},
}

func openBench(b *testing.B, path string) *Table {
	if _, err := os.Stat(path); err != nil {
		b.Skip(err)
	}
	tab, err := OpenELF(path, elfsym.Recorded{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return tab
}

func BenchmarkOpenELF(b *testing.B) {
	for _, f := range benchFiles {
		b.Run(f.name, func(b *testing.B) {
			tab := openBench(b, f.path)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := OpenELF(f.path, elfsym.Recorded{}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tab.Len()), "rows")
			b.ReportMetric(float64(tab.Size())/float64(tab.Len()), "B/row")
		})
	}
}

func BenchmarkLookup(b *testing.B) {
	for _, f := range benchFiles {
		b.Run(f.name, func(b *testing.B) {
			tab := openBench(b, f.path)
			end := tab.base + uint64(tab.addr[len(tab.addr)-1])
			r := rand.New(rand.NewPCG(1, 2))
			pcs := make([]uint64, 4096)
			for i := range pcs {
				pcs[i] = tab.base + r.Uint64N(end-tab.base)
			}
			i := 0
			for b.Loop() {
				tab.Lookup(pcs[i&4095])
				i++
			}
		})
	}
}

// BenchmarkWalk walks 100 frames, each in another of 1,000 functions of a
// jitted table, alternating rsp-based and rbp-based rules, and reports the
// cost of a frame.
func BenchmarkWalk(b *testing.B) {
	const code, fnSize, nfn, depth = 0x7f00_0000_0000, 64, 1000, 100
	push := jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(3).DefCFARegister(rbp)
	var fdes []testFDE
	for i := range nfn {
		fdes = append(fdes, testFDE{start: code + uint64(i)*fnSize, size: fnSize, instr: push})
	}
	eh, _ := ehFrame(code+nfn*fnSize, fdes)
	tab, err := FromUnwindingInfo(&jitdump.UnwindingInfo{EHFrame: eh}, code, nfn*fnSize)
	if err != nil {
		b.Fatal(err)
	}
	// Frames of 16 bytes: the saved rbp and the return address, as both
	// rules find them; pcs at +2 (rsp+16, before mov rbp,rsp) and +10
	// (rbp+16) in turn.
	const sp = 0x7ffc_0000_0000
	s := &stack{sp: sp, mem: make([]byte, 16*depth+16)}
	pcAt := func(i int) uint64 { return code + uint64(i*37%nfn)*fnSize + 2 + uint64(i%2)*8 }
	for i := range depth {
		fp := sp + uint64(16*i)
		s.put(fp, fp+16)
		s.put(fp+8, pcAt(i+1))
	}
	// The last frame returns to 0 (the copy is zeroed there).
	regs := Regs{IP: pcAt(0), SP: sp, FP: sp}
	pcs := make([]uint64, 0, MaxDepth)
	var frames int
	for b.Loop() {
		var stop Stop
		pcs, stop = Walk(regs, s.mem, tab.Lookup, pcs[:0])
		if stop != StopOutermost {
			b.Fatalf("stopped: %v after %d frames", stop, len(pcs))
		}
		frames += len(pcs)
	}
	if len(pcs) != depth+1 {
		b.Fatalf("%d frames, want %d", len(pcs), depth+1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(frames), "ns/frame")
}
