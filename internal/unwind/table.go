// Package unwind turns call frame information (CFI: .eh_frame and
// .debug_frame of ELF files, and the .eh_frame of a jitdump's
// UNWINDING_INFO) into tables built once per module, and walks a sample's
// user stack with them.
//
// A module's CFA programs are run once, when its Table is built, and each
// row is kept as a small Rule over an address range, as samply's framehop
// and the OpenTelemetry eBPF profiler's stack deltas do: a frame then costs
// a binary search and two loads, not a CFA program run. The CFI itself is
// read by package cfi; the rules are of x86-64's shape (Supported).
package unwind

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/leb128"
)

// Kind says how a Rule finds the caller's frame.
type Kind uint8

const (
	KindNone Kind = iota // no rule here: the walker steps by the frame pointer
	KindSP               // CFA = the stack pointer + CFAOff
	KindFP               // CFA = the frame pointer + CFAOff
	// KindPLT is the CFA of a lazy-binding PLT entry of 16 bytes (the
	// DW_CFA_def_cfa_expression GNU ld writes for .plt): CFA = rsp + CFAOff,
	// plus 8 when the pc's offset in its 16-byte entry is PLTMin or more
	// (the entry has pushed its relocation index).
	KindPLT
	KindEnd // the CFI says the return address is undefined: the outermost frame
	// KindSavedSP is a frame record at the frame pointer, as the frame
	// pointer walk reads it (the caller's at [fp], the return address at
	// [fp+8]), whose CFA is not fp+16 but the value saved at fp+CFAOff:
	// HotSpot's interpreter frames keep their caller's stack pointer
	// there, below a caller whose frame was extended for the arguments.
	// No CFI says this; JVM dumps' rules do (symbolize).
	KindSavedSP
)

// Rule says how to find the caller's frame at one pc: the CFA (canonical
// frame address: the caller's stack pointer) from the stack or the frame
// pointer (rsp, rbp on x86-64), the return address at CFA+RAOff, the
// caller's frame pointer at CFA+FPOff, or the frame pointer unchanged when
// FPOff is 0. A row that says more than this can express (a CFA from
// another register or a general expression, the frame pointer or the
// return address kept in a register or given by an expression) has no
// Rule, and the walker falls back to the frame pointer there.
type Rule struct {
	Kind   Kind
	PLTMin uint8 // KindPLT only
	RAOff  int16
	FPOff  int16
	CFAOff int32
}

// String names the registers as x86-64's, the one shape Rules have yet.
func (r Rule) String() string {
	var s string
	switch r.Kind {
	case KindNone:
		return "none"
	case KindEnd:
		return "end"
	case KindSP:
		s = fmt.Sprintf("rsp%+d", r.CFAOff)
	case KindFP:
		s = fmt.Sprintf("rbp%+d", r.CFAOff)
	case KindPLT:
		s = fmt.Sprintf("plt(rsp%+d,%d)", r.CFAOff, r.PLTMin)
	case KindSavedSP:
		return fmt.Sprintf("[rbp%+d] ra=[rbp+8] rbp=[rbp]", r.CFAOff)
	}
	s += fmt.Sprintf(" ra=c%+d", r.RAOff)
	if r.FPOff != 0 {
		s += fmt.Sprintf(" rbp=c%+d", r.FPOff)
	}
	return s
}

// Table is one module's rules, sorted by address: row i's rule holds from
// base+addr[i] up to the next row. Addresses are kept as 32-bit offsets
// and rules as 16-bit indexes into the distinct rules, so a row costs 6
// bytes, 7 with the page index (measured: libc 28,271 rows and 299
// distinct rules, node 371,949 rows and 66 rules). A Table does not change
// once built: Lookup is safe for concurrent use.
type Table struct {
	base  uint64
	addr  []uint32
	rule  []uint16
	rules []Rule // rules[0] is the empty rule, of gaps between FDEs
	// page[p] is the first row at or after offset p<<shift: a lookup
	// searches one page's rows, which keeps a large table's binary search
	// from missing the cache at every step (node: 142 to 60 ns).
	page  []uint32
	shift uint

	loads    []load // ELF files: the PT_LOAD segments, for AddrOf
	problems []error
	more     int // problems not kept
}

// load is a PT_LOAD segment: file offsets [off, off+size) are at vaddr on.
type load struct{ off, size, vaddr uint64 }

// Lookup returns the rule at pc, false when the table has none for it.
func (t *Table) Lookup(pc uint64) (Rule, bool) {
	d := pc - t.base
	if pc < t.base || d > math.MaxUint32 {
		return Rule{}, false
	}
	p := uint32(d) >> t.shift
	if int(p)+1 >= len(t.page) {
		return Rule{}, false // after the last row, which ends the last FDE
	}
	// The first row with addr > d, by hand: sort.Search's closure costs a
	// third of a lookup.
	a := t.addr
	lo, hi := int(t.page[p]), int(t.page[p+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] <= uint32(d) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return Rule{}, false
	}
	r := t.rules[t.rule[lo-1]]
	return r, r.Kind != KindNone
}

// index builds t.page, with pages no more than rows.
func (t *Table) index() {
	if len(t.addr) == 0 {
		return
	}
	last := t.addr[len(t.addr)-1]
	t.shift = 8
	for uint64(last)>>t.shift > uint64(len(t.addr)) {
		t.shift++
	}
	n := int(last>>t.shift) + 1
	t.page = make([]uint32, n+1)
	i := 0
	for p := range n + 1 {
		for i < len(t.addr) && uint64(t.addr[i]) < uint64(p)<<t.shift {
			i++
		}
		t.page[p] = uint32(i)
	}
}

// Len is the number of rows, gaps between FDEs included.
func (t *Table) Len() int { return len(t.addr) }

// Size is the bytes the table's rows and rules take.
func (t *Table) Size() int { return 6*len(t.addr) + 12*len(t.rules) + 4*len(t.page) }

// Err tells what CFI was skipped when the table was built (each a
// *CFIError naming the file and the entry's offset in its section), nil
// when nothing was.
func (t *Table) Err() error {
	err := errors.Join(t.problems...)
	if t.more > 0 {
		err = errors.Join(err, fmt.Errorf("and %d more problems", t.more))
	}
	return err
}

// AddrOf maps a file offset (what a sample's mapping gives: pc - map start
// + pgoff) to the table's address space, the file's virtual addresses.
// Tables of jitted code have no file: ok is false.
func (t *Table) AddrOf(fileOffset uint64) (addr uint64, ok bool) {
	for _, l := range t.loads {
		if fileOffset >= l.off && fileOffset-l.off < l.size {
			return l.vaddr + (fileOffset - l.off), true
		}
	}
	return 0, false
}

// ErrNoCFI is the error (wrapped) of OpenELF and FromUnwindingInfo when
// there is no CFI at all, as opposed to CFI that could not be used: V8
// writes an empty .eh_frame for builtins it has no tables for. The walker
// steps through such code by the frame pointer.
var ErrNoCFI = errors.New("no CFI")

// maxProblems bounds the problems a table keeps: a broken section can have
// thousands, and the first few say what is wrong.
const maxProblems = 16

func (t *Table) problem(err error) {
	if len(t.problems) < maxProblems {
		t.problems = append(t.problems, err)
	} else {
		t.more++
	}
}

// build compiles fdes into t, running their programs with m. Where FDEs
// overlap, the one of lower prio (.eh_frame before .debug_frame) wins, and
// between FDEs of one section the earlier starting one. keep, when not
// nil, drops FDEs outside the code.
func (t *Table) build(m *cfi.Machine, all []fde, keep func(start, end uint64) bool) error {
	// Sorted by start through small keys: .eh_frame lists FDEs by object
	// file, not by address, and moving whole FDEs took a fifth of building
	// node's table (76,000 FDEs). Ties go to the earlier entry.
	order := make([]fdeKey, len(all))
	for i := range all {
		order[i] = fdeKey{all[i].Start, int32(all[i].prio), int32(i)}
	}
	slices.SortFunc(order, func(a, b fdeKey) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		if c := cmp.Compare(a.prio, b.prio); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	// Keep, in place, FDEs that do not overlap: sorted by start, an FDE can
	// only overlap the last one kept.
	fdes := make([]*fde, 0, len(order))
	for _, k := range order {
		f := &all[k.i]
		if keep != nil && !keep(f.Start, f.End) {
			t.problem(f.sec.Errorf(f.Off, "FDE covers [%#x, %#x), outside the code", f.Start, f.End))
			continue
		}
		if n := len(fdes); n > 0 && f.Start < fdes[n-1].End {
			last := &fdes[n-1]
			switch {
			case f.prio < (*last).prio:
				*last = f // described by a preferred section
			case f.prio == (*last).prio:
				t.problem(f.sec.Errorf(f.Off, "FDE [%#x, %#x) overlaps the one at %#x", f.Start, f.End, (*last).Off))
			}
			continue
		}
		fdes = append(fdes, f)
	}
	if len(fdes) == 0 {
		return nil
	}
	t.base = fdes[0].Start
	if end := fdes[len(fdes)-1].End; end-t.base > math.MaxUint32 {
		return fmt.Errorf("FDEs span [%#x, %#x), over 4 GiB", t.base, end)
	}

	b := builder{t: t, index: map[Rule]uint16{{}: 0}}
	t.rules = []Rule{{}}
	t.addr = make([]uint32, 0, len(fdes)*4)
	t.rule = make([]uint16, 0, len(fdes)*4)
	// Rows are added once the whole program has run: a bad FDE adds none.
	var rows []row
	emit := func(loc uint64, st *cfi.State) { rows = append(rows, row{loc, toRule(st, m.Arch)}) }
	for _, f := range fdes {
		rows = rows[:0]
		if err := m.Run(&f.FDE, emit); err != nil {
			t.problem(f.sec.Errorf(f.Off, "FDE [%#x, %#x): %v", f.Start, f.End, err))
			continue
		}
		for _, r := range rows {
			if err := b.add(r.loc, r.rule); err != nil {
				return err
			}
		}
		if err := b.add(f.End, Rule{}); err != nil {
			return err
		}
	}
	t.addr = slices.Clip(t.addr)
	t.rule = slices.Clip(t.rule)
	t.index()
	return nil
}

// row is the rule of a CFI row, from loc on.
type row struct {
	loc  uint64
	rule Rule
}

// fdeKey is what FDEs are sorted by, and the FDE's index.
type fdeKey struct {
	start   uint64
	prio, i int32
}

type builder struct {
	t     *Table
	index map[Rule]uint16
	// recent caches index's answers, direct-mapped by a hash of the rule:
	// a table has a few hundred distinct rules, and hashing each row's as
	// a map key took a tenth of building node's table. Slot 0 of rules
	// is the empty rule, so an empty slot answers for it, rightly.
	recent [64]uint16
}

// add appends a row at loc, which is not before the last row's start.
func (b *builder) add(loc uint64, r Rule) error {
	t := b.t
	h := uint32(r.CFAOff) ^ uint32(r.Kind)<<4 ^ uint32(uint16(r.RAOff))<<1 ^ uint32(uint16(r.FPOff))<<2
	slot := &b.recent[(h^h>>6)&63]
	idx := *slot
	if t.rules[idx] != r {
		var ok bool
		if idx, ok = b.index[r]; !ok {
			if len(t.rules) > math.MaxUint16 {
				return fmt.Errorf("over %d distinct rules", math.MaxUint16+1)
			}
			idx = uint16(len(t.rules))
			t.rules = append(t.rules, r)
			b.index[r] = idx
		}
		*slot = idx
	}
	a := uint32(loc - t.base)
	n := len(t.addr)
	if n > 0 && t.addr[n-1] == a { // an empty row: the new one replaces it
		t.addr, t.rule = t.addr[:n-1], t.rule[:n-1]
		n--
	}
	if n > 0 && t.rule[n-1] == idx {
		return nil // the same rule goes on
	}
	if n == 0 && idx == 0 {
		return nil
	}
	t.addr = append(t.addr, a)
	t.rule = append(t.rule, idx)
	return nil
}

// toRule reduces a row of arch's to a Rule, or the empty rule when it says
// more than a Rule can express.
func toRule(st *cfi.State, arch *cfi.Arch) Rule {
	var r Rule
	switch st.RA.Kind {
	case cfi.RegUndef:
		return Rule{Kind: KindEnd}
	case cfi.RegOffset:
		if st.RA.Off < math.MinInt16 || st.RA.Off > math.MaxInt16 {
			return Rule{}
		}
		r.RAOff = int16(st.RA.Off)
	default:
		return Rule{}
	}
	switch st.FP.Kind {
	case cfi.RegSame, cfi.RegUndef:
	case cfi.RegOffset:
		if st.FP.Off == 0 || st.FP.Off < math.MinInt16 || st.FP.Off > math.MaxInt16 {
			return Rule{}
		}
		r.FPOff = int16(st.FP.Off)
	default:
		return Rule{}
	}
	if st.CFAExpr != nil {
		off, min, ok := pltExpr(st.CFAExpr, arch)
		if !ok {
			return Rule{}
		}
		r.Kind, r.CFAOff, r.PLTMin = KindPLT, off, min
		return r
	}
	if st.CFAOff < math.MinInt32 || st.CFAOff > math.MaxInt32 {
		return Rule{}
	}
	r.CFAOff = int32(st.CFAOff)
	switch st.CFAReg {
	case arch.SP:
		r.Kind = KindSP
	case arch.FP:
		r.Kind = KindFP
	default:
		return Rule{}
	}
	return r
}

// pltExpr recognizes the CFA expression GNU ld writes for x86-64's lazy
// PLT, of 16-byte entries:
//
//	DW_OP_breg7 (rsp) off; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
//	DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
//
// that is rsp + off + ((rip & 15) >= N) << 3.
func pltExpr(e []byte, arch *cfi.Arch) (off int32, min uint8, ok bool) {
	const breg0, lit0, lit31 = 0x70, 0x30, 0x4f
	if arch != cfi.X86_64 || len(e) < 1 || e[0] != breg0+byte(arch.SP) {
		return 0, 0, false
	}
	o, n := leb128.Signed(e[1:])
	if n == 0 || o < math.MinInt32 || o > math.MaxInt32 {
		return 0, 0, false
	}
	e = e[1+n:]
	if len(e) < 1 || e[0] != breg0+byte(arch.IP) {
		return 0, 0, false
	}
	z, n := leb128.Signed(e[1:])
	if n == 0 || z != 0 {
		return 0, 0, false
	}
	e = e[1+n:]
	// lit15, and, litN, ge, lit3, shl, plus
	if len(e) != 7 || !bytes.Equal(e[:2], []byte{0x3f, 0x1a}) || e[2] < lit0 || e[2] > lit31 || !bytes.Equal(e[3:], []byte{0x2a, 0x33, 0x24, 0x22}) {
		return 0, 0, false
	}
	return int32(o), e[2] - lit0, true
}
