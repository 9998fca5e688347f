package unwind

import (
	"encoding/binary"
	"slices"
	"testing"
)

// stack is a hand-built copy of user memory from sp on.
type stack struct {
	sp  uint64
	mem []byte
}

func (s *stack) put(addr, v uint64) {
	binary.LittleEndian.PutUint64(s.mem[addr-s.sp:], v)
}

// rules is a find function over fixed pc ranges.
type rules []struct {
	start, end uint64
	r          Rule
}

func (rs rules) find(pc uint64) (Rule, bool) {
	for _, x := range rs {
		if pc >= x.start && pc < x.end {
			return x.r, true
		}
	}
	return Rule{}, false
}

// chain builds a stack of four frames, each reached a different way:
//
//	leaf  at 0x1010, rule rsp+16 (one push), no rbp saved
//	mid   at 0x2020, rule rbp+16 with rbp saved at c-16 (a framed function)
//	old   at 0x3030, no rule: the frame pointer step
//	start at 0x4040, return address undefined
func chain() (Regs, *stack, rules) {
	const sp = 0x7ffc_0000_1000
	s := &stack{sp: sp, mem: make([]byte, 0x100)}
	// leaf: CFA = sp+16, ra at sp+8
	s.put(sp+8, 0x2020)
	// mid: its frame's rbp at sp+0x30, CFA = rbp+16 = sp+0x40
	s.put(sp+0x30, sp+0x80) // old's rbp
	s.put(sp+0x38, 0x3030)
	// old: rbp sp+0x80: [rbp] caller's rbp, [rbp+8] return address
	s.put(sp+0x80, sp+0xc0)
	s.put(sp+0x88, 0x4040)
	rs := rules{
		{0x1000, 0x1100, Rule{Kind: KindSP, CFAOff: 16, RAOff: -8}},
		{0x2000, 0x2100, framed},
		{0x4000, 0x4100, Rule{Kind: KindEnd}},
	}
	return Regs{IP: 0x1010, SP: sp, FP: sp + 0x30}, s, rs
}

func TestWalk(t *testing.T) {
	regs, s, rs := chain()
	plt := rules{{0x5000, 0x5100, Rule{Kind: KindPLT, CFAOff: 8, RAOff: -8, PLTMin: 11}}}[0]
	all := []uint64{0x1010, 0x2020, 0x3030, 0x4040}
	cases := []struct {
		name  string
		edit  func(regs *Regs, s *stack, rs *rules)
		want  []uint64
		stop  Stop
		looks []uint64 // the pcs find is asked for
	}{
		{"whole", nil, all, StopOutermost, []uint64{0x1010, 0x201f, 0x302f, 0x403f}},
		{"copy cut before mid's frame", func(_ *Regs, s *stack, _ *rules) { s.mem = s.mem[:0x38] },
			all[:2], StopCutShort, nil},
		{"copy cut before old's return address", func(_ *Regs, s *stack, _ *rules) { s.mem = s.mem[:0x88] },
			all[:3], StopCutShort, nil},
		{"return address 0", func(_ *Regs, s *stack, _ *rules) { s.put(s.sp+0x88, 0) },
			all[:3], StopOutermost, nil},
		{"rbp below the stack pointer", func(_ *Regs, s *stack, _ *rules) { s.put(s.sp+0x30, s.sp-0x100) },
			all[:3], StopBadFrame, nil},
		{"frame pointer loop", func(_ *Regs, s *stack, _ *rules) { s.put(s.sp+0x30, s.sp+0x20) },
			all[:3], StopBadFrame, nil},
		{"no rules: frame pointers only", func(r *Regs, s *stack, rs *rules) {
			*rs = nil
			r.FP = s.sp + 0x30 // leaf's rbp is mid's frame: the leaf has none, so mid is skipped
		}, []uint64{0x1010, 0x3030, 0x4040}, StopOutermost, nil},
		{"PLT entry, after its push", func(r *Regs, s *stack, rs *rules) {
			r.IP = 0x500b // the 12th byte of the entry at 0x5000: rsp+16
			*rs = append(*rs, plt)
		}, []uint64{0x500b, 0x2020, 0x3030, 0x4040}, StopOutermost, nil},
		{"PLT entry, before its push", func(r *Regs, s *stack, rs *rules) {
			r.IP = 0x5016 // the 7th byte of the entry at 0x5010: rsp+8
			*rs = append(*rs, plt)
			s.put(s.sp, 0x2020)
			s.put(s.sp+8, 0xdead) // what the push would have put there
		}, []uint64{0x5016, 0x2020, 0x3030, 0x4040}, StopOutermost, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, st, rs := regs, &stack{sp: s.sp, mem: slices.Clone(s.mem)}, slices.Clone(rs)
			if c.edit != nil {
				c.edit(&r, st, &rs)
			}
			var looks []uint64
			pcs, stop := Walk(r, st.mem, func(pc uint64) (Rule, bool) {
				looks = append(looks, pc)
				return rs.find(pc)
			}, nil)
			if !slices.Equal(pcs, c.want) || stop != c.stop {
				t.Errorf("Walk = %#x, %v; want %#x, %v", pcs, stop, c.want, c.stop)
			}
			if c.looks != nil && !slices.Equal(looks, c.looks) {
				t.Errorf("find asked for %#x, want %#x", looks, c.looks)
			}
		})
	}
}

// A frame-pointer chain longer than MaxDepth stops there.
func TestWalkDepth(t *testing.T) {
	const sp = 0x7ffc_0000_0000
	s := &stack{sp: sp, mem: make([]byte, 16*(MaxDepth+10))}
	for i := range MaxDepth + 9 {
		fp := sp + uint64(16*i)
		s.put(fp, fp+16)
		s.put(fp+8, 0x1000+uint64(i))
	}
	pcs, stop := Walk(Regs{IP: 0x999, SP: sp, FP: sp}, s.mem, func(uint64) (Rule, bool) { return Rule{}, false }, nil)
	if stop != StopDepth || len(pcs) != MaxDepth {
		t.Errorf("Walk: %d frames, %v; want %d, %v", len(pcs), stop, MaxDepth, StopDepth)
	}
}
