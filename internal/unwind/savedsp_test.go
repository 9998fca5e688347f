package unwind

import (
	"slices"
	"testing"
)

// TestWalkSavedSP: an interpreted frame (KindSavedSP) called by compiled
// code through an adapter that extended the caller's frame for the
// arguments: the caller's stack pointer is the one the interpreter saved
// below its frame pointer, not fp+16, and the compiled caller's rule,
// relative to it, finds the frames above.
//
//	interp   at 0x6010, rbp sp+0x40, sender sp saved at rbp-8: sp+0x80
//	compiled at 0x7020, CFA = its sp+0x30, rbp saved at CFA-16
//	old      at 0x3030, no rule: the frame pointer step
//	start    at 0x4040, return address undefined
func TestWalkSavedSP(t *testing.T) {
	const sp = 0x7ffc_0000_2000
	build := func() *stack {
		s := &stack{sp: sp, mem: make([]byte, 0x120)}
		s.put(sp+0x38, sp+0x80) // the interpreter's saved sender sp
		s.put(sp+0x40, 0x1234)  // rbp of the compiled caller: a general register there
		s.put(sp+0x48, 0x7020)
		for a := uint64(sp + 0x50); a < sp+0x80; a += 8 {
			s.put(a, 0xa5a5) // the arguments the adapter stored
		}
		s.put(sp+0xa0, sp+0xc0) // old's rbp, saved by the compiled frame
		s.put(sp+0xa8, 0x3030)
		s.put(sp+0xc0, sp+0x100)
		s.put(sp+0xc8, 0x4040)
		return s
	}
	rs := rules{
		{0x6000, 0x6100, Rule{Kind: KindSavedSP, CFAOff: -8}},
		{0x7000, 0x7100, Rule{Kind: KindSP, CFAOff: 0x30, RAOff: -8, FPOff: -16}},
		{0x4000, 0x4100, Rule{Kind: KindEnd}},
	}
	regs := Regs{IP: 0x6010, SP: sp, FP: sp + 0x40}
	cases := []struct {
		name string
		edit func(regs *Regs, s *stack)
		want []uint64
		stop Stop
	}{
		{"whole", nil, []uint64{0x6010, 0x7020, 0x3030, 0x4040}, StopOutermost},
		{"saved sp not above the frame", func(_ *Regs, s *stack) { s.put(sp+0x38, sp) },
			[]uint64{0x6010}, StopBadFrame},
		{"saved sp past the copy", func(_ *Regs, s *stack) { s.mem = s.mem[:0x3c] },
			[]uint64{0x6010}, StopCutShort},
		{"saved sp's slot below the stack pointer", func(r *Regs, _ *stack) { r.FP = sp + 4 },
			[]uint64{0x6010}, StopBadFrame},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, regs := build(), regs
			if c.edit != nil {
				c.edit(&regs, s)
			}
			pcs, stop := Walk(regs, s.mem, rs.find, nil)
			if !slices.Equal(pcs, c.want) || stop != c.stop {
				t.Errorf("Walk = %#x, %v; want %#x, %v", pcs, stop, c.want, c.stop)
			}
		})
	}
	// WalkFP gives each frame's frame pointer: the interpreter's, the one
	// it saved (the compiled caller's rbp, a general register there), the
	// one the compiled frame saved, old's caller's.
	pcs, fps, stop := WalkFP(regs, build().mem, rs.find, nil, nil)
	if want := []uint64{sp + 0x40, 0x1234, sp + 0xc0, sp + 0x100}; !slices.Equal(fps, want) || len(pcs) != len(fps) || stop != StopOutermost {
		t.Errorf("WalkFP: pcs %#x fps %#x %v, want fps %#x", pcs, fps, stop, want)
	}
	// The frame pointer step takes fp+16 for the compiled caller's stack
	// pointer, inside the arguments, and loses the frames above.
	pcs, _ = Walk(regs, build().mem, rules{rs[1], rs[2]}.find, nil)
	if slices.Contains(pcs, 0x3030) {
		t.Errorf("without the saved stack pointer the walk still found old: %#x", pcs)
	}
}
