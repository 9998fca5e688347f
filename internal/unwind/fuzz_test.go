package unwind

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/jitdump"
)

// checkTable checks what every table must be: rows strictly increasing,
// rule indexes in range, the page index agreeing with a linear search, and
// rules only inside [lo, hi).
func checkTable(t *testing.T, tab *Table, lo, hi uint64) {
	if !slices.IsSorted(tab.addr) || len(slices.Compact(slices.Clone(tab.addr))) != len(tab.addr) {
		t.Fatalf("rows not strictly increasing: %v", tab.addr)
	}
	linear := func(pc uint64) (Rule, bool) {
		var r Rule
		for i, a := range tab.addr {
			if tab.base+uint64(a) > pc {
				break
			}
			r = tab.rules[tab.rule[i]]
		}
		return r, r.Kind != KindNone && pc >= tab.base
	}
	for i, a := range tab.addr {
		if int(tab.rule[i]) >= len(tab.rules) {
			t.Fatalf("row %d: rule %d of %d", i, tab.rule[i], len(tab.rules))
		}
		for _, pc := range []uint64{tab.base + uint64(a) - 1, tab.base + uint64(a), tab.base + uint64(a) + 1} {
			got, ok := tab.Lookup(pc)
			want, wok := linear(pc)
			if got != want || ok != wok {
				t.Fatalf("Lookup(%#x) = %v, %v; rows say %v, %v", pc, got, ok, want, wok)
			}
			if ok && (pc < lo || pc >= hi) {
				t.Fatalf("Lookup(%#x) = %v outside [%#x, %#x)", pc, got, lo, hi)
			}
		}
	}
}

func ehSeeds(f *testing.F) {
	for _, p := range []jitdump.CFAProgram{
		jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(3).DefCFARegister(rbp).AdvanceLoc(30).DefCFA(rsp, 8),
		raw(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).AdvanceLoc(4), cfi.OpRememberState, cfi.OpDefCFAOffset, 8, 0x41, cfi.OpRestoreState),
		raw(nil, cfi.OpDefCFAExpr, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22),
	} {
		u, err := x86(p).UnwindingInfo(64)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(u.EHFrame, uint16(64))
	}
	eh, _ := ehFrame(0x1000+0x100, []testFDE{{start: 0x1000, size: 0x10, instr: []byte{0x41, cfi.OpDefCFAOffset, 16}}, {start: 0x1020, size: 0x10}})
	f.Add(eh, uint16(0x100))
}

// FuzzEHFrame: an UNWINDING_INFO's .eh_frame of any bytes gives a table or
// an error, never a panic, and a table's rules lie inside the code.
func FuzzEHFrame(f *testing.F) {
	ehSeeds(f)
	f.Fuzz(func(t *testing.T, eh []byte, size uint16) {
		const code = 0x1000
		tab, err := FromUnwindingInfo(&jitdump.UnwindingInfo{EHFrame: eh}, code, uint64(size))
		if err != nil {
			return
		}
		checkTable(t, tab, code, code+uint64(size))
	})
}

// FuzzDebugFrame: the same for a .debug_frame, whose addresses are absolute
// and may lie anywhere.
func FuzzDebugFrame(f *testing.F) {
	f.Add(debugFrame([]testFDE{
		{start: 0x1000, size: 0x40, instr: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(64)},
		{start: 0x1040, size: 0x40, instr: raw(jitdump.CFAProgram{}.AdvanceLoc(4), cfi.OpUndefined, rip)},
	}))
	f.Add(debugFrame([]testFDE{{start: 1 << 40, size: 0x40, instr: []byte{cfi.OpSetLoc, 1, 0, 0, 0, 0, 1, 0, 0}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab := &Table{}
		sec := &cfi.Section{File: "fuzz", Name: ".debug_frame", Data: data, Order: binary.LittleEndian}
		m := &cfi.Machine{Arch: cfi.X86_64}
		if err := tab.build(m, parseSection(sec, m, nil, prioDebugFrame, tab.problem), nil); err != nil {
			return
		}
		checkTable(t, tab, 0, ^uint64(0))
	})
}

// FuzzWalk: any stack and registers end a walk, within MaxDepth frames,
// the leaf's IP first.
func FuzzWalk(f *testing.F) {
	regs, s, _ := chain()
	f.Add(s.mem, regs.IP, regs.SP, regs.FP)
	f.Add(s.mem, uint64(0x500b), regs.SP, regs.SP)
	u, err := x86(jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(rbp, 2).AdvanceLoc(3).DefCFARegister(rbp)).UnwindingInfo(0x100)
	if err != nil {
		f.Fatal(err)
	}
	tab, err := FromUnwindingInfo(u, 0x1000, 0x100)
	if err != nil {
		f.Fatal(err)
	}
	plt := Rule{Kind: KindPLT, CFAOff: 8, RAOff: -8, PLTMin: 11}
	find := func(pc uint64) (Rule, bool) {
		if pc >= 0x5000 && pc < 0x5100 {
			return plt, true
		}
		return tab.Lookup(pc)
	}
	f.Fuzz(func(t *testing.T, stack []byte, ip, sp, bp uint64) {
		pcs, stop := Walk(Regs{IP: ip, SP: sp, FP: bp}, stack, find, nil)
		if len(pcs) == 0 || pcs[0] != ip || len(pcs) > MaxDepth || stop > StopDepth {
			t.Fatalf("Walk = %d frames, %v", len(pcs), stop)
		}
	})
}
