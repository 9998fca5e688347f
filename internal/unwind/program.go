package unwind

import (
	"errors"
	"fmt"
)

// regKind is what a row says of a register the walker needs.
type regKind uint8

const (
	regSame   regKind = iota // unmentioned, DW_CFA_same_value: the caller's value is this frame's
	regUndef                 // DW_CFA_undefined
	regOffset                // saved at CFA + off
	regOther                 // in another register, or given by an expression: not expressible
)

type regRule struct {
	kind regKind
	off  int64
}

// state is one row of the CFI table, reduced to the columns the walker
// needs: the CFA, the return address and rbp. Other registers' rules are
// read and dropped.
type state struct {
	cfaReg  uint64
	cfaOff  int64
	cfaExpr []byte // non-nil: the CFA is this DWARF expression
	ra, bp  regRule
}

// DWARF call frame instructions (DWARF 5, section 6.4.2, and GNU's).
const (
	opAdvanceLoc     = 0x40
	opOffset         = 0x80
	opRestore        = 0xc0
	opNop            = 0x00
	opSetLoc         = 0x01
	opAdvanceLoc1    = 0x02
	opAdvanceLoc2    = 0x03
	opAdvanceLoc4    = 0x04
	opOffsetExt      = 0x05
	opRestoreExt     = 0x06
	opUndefined      = 0x07
	opSameValue      = 0x08
	opRegister       = 0x09
	opRememberState  = 0x0a
	opRestoreState   = 0x0b
	opDefCFA         = 0x0c
	opDefCFARegister = 0x0d
	opDefCFAOffset   = 0x0e
	opDefCFAExpr     = 0x0f
	opExpression     = 0x10
	opOffsetExtSF    = 0x11
	opDefCFASF       = 0x12
	opDefCFAOffsetSF = 0x13
	opValOffset      = 0x14
	opValOffsetSF    = 0x15
	opValExpression  = 0x16
	opGNUWindowSave  = 0x2d
	opGNUArgsSize    = 0x2e
	opGNUNegOffExt   = 0x2f
)

// maxRemembered bounds DW_CFA_remember_state's stack: compilers nest it
// once or twice; a program that nests deeper is not worth the memory.
const maxRemembered = 64

// run runs the call frame program prog from st, the rows starting at loc.
// For an FDE, emit is called with each row's start and its state, for the
// rows that begin before end; a CIE's initial instructions run with emit
// nil and init nil (DW_CFA_restore then has nothing to go back to).
func (c *cie) run(init *state, st state, prog []byte, loc, end uint64, emit func(uint64, *state)) (state, error) {
	r := reader{p: prog}
	var saved []state
	advance := func(to uint64) error {
		if to < loc {
			return fmt.Errorf("location %#x goes back from %#x", to, loc)
		}
		if to > loc && emit != nil && loc < end {
			emit(loc, &st)
		}
		loc = to
		return nil
	}
	set := func(reg uint64, rule regRule) {
		switch reg {
		case c.raReg:
			st.ra = rule
		case dwRBP:
			st.bp = rule
		}
	}
	restore := func(reg uint64) {
		if init == nil {
			set(reg, regRule{})
			return
		}
		switch reg {
		case c.raReg:
			st.ra = init.ra
		case dwRBP:
			st.bp = init.bp
		}
	}
	for len(r.p) > 0 && !r.bad {
		if emit != nil && loc >= end {
			return st, nil // the rest describes no code of this FDE
		}
		at := len(prog) - len(r.p)
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case opAdvanceLoc:
			err = advance(loc + uint64(op&0x3f)*c.codeAlign)
		case opOffset:
			set(uint64(op&0x3f), regRule{regOffset, int64(r.uleb()) * c.dataAlign})
		case opRestore:
			restore(uint64(op & 0x3f))
		default:
			switch op {
			case opNop:
			case opSetLoc:
				var to uint64
				if to, err = r.ptr(c.enc, 0, c.addrSize); err == nil {
					err = advance(to)
				}
			case opAdvanceLoc1:
				err = advance(loc + r.fixed(1)*c.codeAlign)
			case opAdvanceLoc2:
				err = advance(loc + r.fixed(2)*c.codeAlign)
			case opAdvanceLoc4:
				err = advance(loc + r.fixed(4)*c.codeAlign)
			case opOffsetExt:
				reg := r.uleb()
				set(reg, regRule{regOffset, int64(r.uleb()) * c.dataAlign})
			case opOffsetExtSF:
				reg := r.uleb()
				set(reg, regRule{regOffset, r.sleb() * c.dataAlign})
			case opGNUNegOffExt:
				reg := r.uleb()
				set(reg, regRule{regOffset, -int64(r.uleb()) * c.dataAlign})
			case opRestoreExt:
				restore(r.uleb())
			case opUndefined:
				set(r.uleb(), regRule{kind: regUndef})
			case opSameValue:
				set(r.uleb(), regRule{kind: regSame})
			case opRegister:
				reg := r.uleb()
				r.uleb()
				set(reg, regRule{kind: regOther})
			case opExpression, opValExpression:
				reg := r.uleb()
				r.block()
				set(reg, regRule{kind: regOther})
			case opValOffset:
				reg := r.uleb()
				r.uleb()
				set(reg, regRule{kind: regOther})
			case opValOffsetSF:
				reg := r.uleb()
				r.sleb()
				set(reg, regRule{kind: regOther})
			case opRememberState:
				if len(saved) == maxRemembered {
					err = fmt.Errorf("DW_CFA_remember_state nested over %d deep", maxRemembered)
				}
				saved = append(saved, st)
			case opRestoreState:
				if len(saved) == 0 {
					err = errors.New("DW_CFA_restore_state without a remembered state")
					break
				}
				st = saved[len(saved)-1]
				saved = saved[:len(saved)-1]
			case opDefCFA:
				st.cfaReg, st.cfaOff, st.cfaExpr = r.uleb(), int64(r.uleb()), nil
			case opDefCFASF:
				st.cfaReg = r.uleb()
				st.cfaOff, st.cfaExpr = r.sleb()*c.dataAlign, nil
			case opDefCFARegister:
				st.cfaReg, st.cfaExpr = r.uleb(), nil
			case opDefCFAOffset:
				st.cfaOff = int64(r.uleb())
			case opDefCFAOffsetSF:
				st.cfaOff = r.sleb() * c.dataAlign
			case opDefCFAExpr:
				st.cfaExpr = r.block()
				if st.cfaExpr == nil {
					st.cfaExpr = []byte{}
				}
			case opGNUArgsSize:
				r.uleb()
			case opGNUWindowSave:
			default:
				err = fmt.Errorf("unknown instruction %#x", op)
			}
		}
		if err != nil {
			return st, fmt.Errorf("instruction at +%#x: %v", at, err)
		}
	}
	if r.bad {
		return st, errors.New("instructions truncated")
	}
	if emit != nil && loc < end {
		emit(loc, &st)
	}
	return st, nil
}
