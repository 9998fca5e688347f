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

// machine runs call frame programs. It is reused from FDE to FDE so that
// a table's build allocates little.
type machine struct {
	c     *cie
	init  *state // the CIE's rules, for DW_CFA_restore; nil while running the CIE's own
	st    state
	loc   uint64
	end   uint64
	rows  []row // with emit, each row that starts before end
	emit  bool
	saved []state
}

// run runs the call frame program prog from the machine's state, the rows
// starting at m.loc.
func (m *machine) run(prog []byte) error {
	m.saved = m.saved[:0]
	c := m.c
	r := reader{p: prog}
	for len(r.p) > 0 && !r.bad {
		if m.emit && m.loc >= m.end {
			return nil // the rest describes no code of this FDE
		}
		at := len(prog) - len(r.p)
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case opAdvanceLoc:
			err = m.advance(m.loc + uint64(op&0x3f)*c.codeAlign)
		case opOffset:
			m.set(uint64(op&0x3f), regRule{regOffset, int64(r.uleb()) * c.dataAlign})
		case opRestore:
			m.restore(uint64(op & 0x3f))
		default:
			switch op {
			case opNop:
			case opSetLoc:
				var to uint64
				if to, err = r.ptr(c.enc, 0, c.addrSize); err == nil {
					err = m.advance(to)
				}
			case opAdvanceLoc1:
				err = m.advance(m.loc + r.fixed(1)*c.codeAlign)
			case opAdvanceLoc2:
				err = m.advance(m.loc + r.fixed(2)*c.codeAlign)
			case opAdvanceLoc4:
				err = m.advance(m.loc + r.fixed(4)*c.codeAlign)
			case opOffsetExt:
				reg := r.uleb()
				m.set(reg, regRule{regOffset, int64(r.uleb()) * c.dataAlign})
			case opOffsetExtSF:
				reg := r.uleb()
				m.set(reg, regRule{regOffset, r.sleb() * c.dataAlign})
			case opGNUNegOffExt:
				reg := r.uleb()
				m.set(reg, regRule{regOffset, -int64(r.uleb()) * c.dataAlign})
			case opRestoreExt:
				m.restore(r.uleb())
			case opUndefined:
				m.set(r.uleb(), regRule{kind: regUndef})
			case opSameValue:
				m.set(r.uleb(), regRule{kind: regSame})
			case opRegister:
				reg := r.uleb()
				r.uleb()
				m.set(reg, regRule{kind: regOther})
			case opExpression, opValExpression:
				reg := r.uleb()
				r.block()
				m.set(reg, regRule{kind: regOther})
			case opValOffset:
				reg := r.uleb()
				r.uleb()
				m.set(reg, regRule{kind: regOther})
			case opValOffsetSF:
				reg := r.uleb()
				r.sleb()
				m.set(reg, regRule{kind: regOther})
			case opRememberState:
				if len(m.saved) == maxRemembered {
					err = fmt.Errorf("DW_CFA_remember_state nested over %d deep", maxRemembered)
				}
				m.saved = append(m.saved, m.st)
			case opRestoreState:
				if len(m.saved) == 0 {
					err = errors.New("DW_CFA_restore_state without a remembered state")
					break
				}
				m.st = m.saved[len(m.saved)-1]
				m.saved = m.saved[:len(m.saved)-1]
			case opDefCFA:
				m.st.cfaReg, m.st.cfaOff, m.st.cfaExpr = r.uleb(), int64(r.uleb()), nil
			case opDefCFASF:
				m.st.cfaReg = r.uleb()
				m.st.cfaOff, m.st.cfaExpr = r.sleb()*c.dataAlign, nil
			case opDefCFARegister:
				m.st.cfaReg, m.st.cfaExpr = r.uleb(), nil
			case opDefCFAOffset:
				m.st.cfaOff = int64(r.uleb())
			case opDefCFAOffsetSF:
				m.st.cfaOff = r.sleb() * c.dataAlign
			case opDefCFAExpr:
				m.st.cfaExpr = r.block()
				if m.st.cfaExpr == nil {
					m.st.cfaExpr = []byte{}
				}
			case opGNUArgsSize:
				r.uleb()
			case opGNUWindowSave:
			default:
				err = fmt.Errorf("unknown instruction %#x", op)
			}
		}
		if err != nil {
			return fmt.Errorf("instruction at +%#x: %v", at, err)
		}
	}
	if r.bad {
		return errors.New("instructions truncated")
	}
	if m.emit && m.loc < m.end {
		m.rows = append(m.rows, row{m.loc, toRule(&m.st)})
	}
	return nil
}

// advance starts a new row at to.
func (m *machine) advance(to uint64) error {
	if to < m.loc {
		return fmt.Errorf("location %#x goes back from %#x", to, m.loc)
	}
	if to > m.loc && m.emit && m.loc < m.end {
		m.rows = append(m.rows, row{m.loc, toRule(&m.st)})
	}
	m.loc = to
	return nil
}

func (m *machine) set(reg uint64, rule regRule) {
	switch reg {
	case m.c.raReg:
		m.st.ra = rule
	case dwRBP:
		m.st.bp = rule
	}
}

func (m *machine) restore(reg uint64) {
	if m.init == nil {
		m.set(reg, regRule{})
		return
	}
	switch reg {
	case m.c.raReg:
		m.st.ra = m.init.ra
	case dwRBP:
		m.st.bp = m.init.bp
	}
}
