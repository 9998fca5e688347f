package cfi

import (
	"errors"
	"fmt"
)

// RegKind is what a row says of a register a walker needs.
type RegKind uint8

const (
	RegSame   RegKind = iota // unmentioned, DW_CFA_same_value: the caller's value is this frame's
	RegUndef                 // DW_CFA_undefined
	RegOffset                // saved at CFA + Off
	RegOther                 // in another register, or given by an expression
)

// RegRule is a row's rule for one register.
type RegRule struct {
	Kind RegKind
	Off  int64
}

// State is one row of the CFI table, reduced to the columns a walker
// needs: the CFA, the return address and the frame pointer (the Arch's
// FP). Other registers' rules are read and dropped.
type State struct {
	CFAReg  uint64
	CFAOff  int64
	CFAExpr []byte // non-nil: the CFA is this DWARF expression
	RA, FP  RegRule
}

// DWARF call frame instructions (DWARF 5, section 6.4.2, and GNU's). The
// first three carry an operand in their low 6 bits.
const (
	OpAdvanceLoc     = 0x40
	OpOffset         = 0x80
	OpRestore        = 0xc0
	OpNop            = 0x00
	OpSetLoc         = 0x01
	OpAdvanceLoc1    = 0x02
	OpAdvanceLoc2    = 0x03
	OpAdvanceLoc4    = 0x04
	OpOffsetExt      = 0x05
	OpRestoreExt     = 0x06
	OpUndefined      = 0x07
	OpSameValue      = 0x08
	OpRegister       = 0x09
	OpRememberState  = 0x0a
	OpRestoreState   = 0x0b
	OpDefCFA         = 0x0c
	OpDefCFARegister = 0x0d
	OpDefCFAOffset   = 0x0e
	OpDefCFAExpr     = 0x0f
	OpExpression     = 0x10
	OpOffsetExtSF    = 0x11
	OpDefCFASF       = 0x12
	OpDefCFAOffsetSF = 0x13
	OpValOffset      = 0x14
	OpValOffsetSF    = 0x15
	OpValExpression  = 0x16
	OpGNUWindowSave  = 0x2d
	OpGNUArgsSize    = 0x2e
	OpGNUNegOffExt   = 0x2f
)

// maxRemembered bounds DW_CFA_remember_state's stack: compilers nest it
// once or twice; a program that nests deeper is not worth the memory.
const maxRemembered = 64

// Machine runs call frame programs into rows. Reused from FDE to FDE, it
// allocates little while a table is built.
type Machine struct {
	Arch  *Arch
	c     *CIE
	init  *State // the CIE's rules, for DW_CFA_restore; nil while running the CIE's own
	st    State
	loc   uint64
	end   uint64
	emit  func(loc uint64, st *State) // nil while running a CIE's instructions
	saved []State
}

// Init runs c's initial instructions, once for the CIE: an error makes
// the CIE, and its FDEs, unusable.
func (m *Machine) Init(c *CIE) error {
	if c.archOf == m.Arch {
		return c.initErr
	}
	c.archOf, c.initErr = m.Arch, nil
	if c.CodeAlign == 0 {
		c.initErr = errors.New("code alignment factor 0")
		return c.initErr
	}
	m.c, m.init, m.st, m.emit, m.loc = c, nil, State{}, nil, 0
	if err := m.run(c.Initial); err != nil {
		c.initErr = fmt.Errorf("initial instructions: %v", err)
	}
	c.start = m.st
	return c.initErr
}

// Run runs f's program from its CIE's rules (Init must have accepted the
// CIE) and gives emit each row that starts inside [f.Start, f.End), in
// order: the rules st from loc on, up to the next row's loc or f.End. st
// is the machine's, valid during the call. Rows are given, not returned,
// so that a table's build reduces each as it comes rather than copying
// them all.
func (m *Machine) Run(f *FDE, emit func(loc uint64, st *State)) error {
	m.c, m.init, m.st, m.emit = f.CIE, &f.CIE.start, f.CIE.start, emit
	m.loc, m.end = f.Start, f.End
	return m.run(f.Program)
}

// run runs the call frame program prog from the machine's state, the rows
// starting at m.loc.
func (m *Machine) run(prog []byte) error {
	m.saved = m.saved[:0]
	c := m.c
	r := reader{p: prog, big: c.big}
	for len(r.p) > 0 && !r.bad {
		if m.emit != nil && m.loc >= m.end {
			return nil // the rest describes no code of this FDE
		}
		at := len(prog) - len(r.p)
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case OpAdvanceLoc:
			err = m.advance(m.loc + uint64(op&0x3f)*c.CodeAlign)
		case OpOffset:
			m.set(uint64(op&0x3f), RegRule{RegOffset, int64(r.uleb()) * c.DataAlign})
		case OpRestore:
			m.restore(uint64(op & 0x3f))
		default:
			switch op {
			case OpNop:
			case OpSetLoc:
				var to uint64
				if to, err = r.ptr(c.Enc, 0, c.AddrSize); err == nil {
					err = m.advance(to)
				}
			case OpAdvanceLoc1:
				err = m.advance(m.loc + r.fixed(1)*c.CodeAlign)
			case OpAdvanceLoc2:
				err = m.advance(m.loc + r.fixed(2)*c.CodeAlign)
			case OpAdvanceLoc4:
				err = m.advance(m.loc + r.fixed(4)*c.CodeAlign)
			case OpOffsetExt:
				reg := r.uleb()
				m.set(reg, RegRule{RegOffset, int64(r.uleb()) * c.DataAlign})
			case OpOffsetExtSF:
				reg := r.uleb()
				m.set(reg, RegRule{RegOffset, r.sleb() * c.DataAlign})
			case OpGNUNegOffExt:
				reg := r.uleb()
				m.set(reg, RegRule{RegOffset, -int64(r.uleb()) * c.DataAlign})
			case OpRestoreExt:
				m.restore(r.uleb())
			case OpUndefined:
				m.set(r.uleb(), RegRule{Kind: RegUndef})
			case OpSameValue:
				m.set(r.uleb(), RegRule{Kind: RegSame})
			case OpRegister:
				reg := r.uleb()
				r.uleb()
				m.set(reg, RegRule{Kind: RegOther})
			case OpExpression, OpValExpression:
				reg := r.uleb()
				r.block()
				m.set(reg, RegRule{Kind: RegOther})
			case OpValOffset:
				reg := r.uleb()
				r.uleb()
				m.set(reg, RegRule{Kind: RegOther})
			case OpValOffsetSF:
				reg := r.uleb()
				r.sleb()
				m.set(reg, RegRule{Kind: RegOther})
			case OpRememberState:
				if len(m.saved) == maxRemembered {
					err = fmt.Errorf("DW_CFA_remember_state nested over %d deep", maxRemembered)
				}
				m.saved = append(m.saved, m.st)
			case OpRestoreState:
				if len(m.saved) == 0 {
					err = errors.New("DW_CFA_restore_state without a remembered state")
					break
				}
				m.st = m.saved[len(m.saved)-1]
				m.saved = m.saved[:len(m.saved)-1]
			case OpDefCFA:
				m.st.CFAReg, m.st.CFAOff, m.st.CFAExpr = r.uleb(), int64(r.uleb()), nil
			case OpDefCFASF:
				m.st.CFAReg = r.uleb()
				m.st.CFAOff, m.st.CFAExpr = r.sleb()*c.DataAlign, nil
			case OpDefCFARegister:
				m.st.CFAReg, m.st.CFAExpr = r.uleb(), nil
			case OpDefCFAOffset:
				m.st.CFAOff = int64(r.uleb())
			case OpDefCFAOffsetSF:
				m.st.CFAOff = r.sleb() * c.DataAlign
			case OpDefCFAExpr:
				m.st.CFAExpr = r.block()
				if m.st.CFAExpr == nil {
					m.st.CFAExpr = []byte{}
				}
			case OpGNUArgsSize:
				r.uleb()
			case OpGNUWindowSave:
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
	if m.emit != nil && m.loc < m.end {
		m.emit(m.loc, &m.st)
	}
	return nil
}

// advance starts a new row at to.
func (m *Machine) advance(to uint64) error {
	if to < m.loc {
		return fmt.Errorf("location %#x goes back from %#x", to, m.loc)
	}
	if to > m.loc && m.emit != nil && m.loc < m.end {
		m.emit(m.loc, &m.st)
	}
	m.loc = to
	return nil
}

func (m *Machine) set(reg uint64, rule RegRule) {
	switch reg {
	case m.c.RA:
		m.st.RA = rule
	case m.Arch.FP:
		m.st.FP = rule
	}
}

func (m *Machine) restore(reg uint64) {
	if m.init == nil {
		m.set(reg, RegRule{})
		return
	}
	switch reg {
	case m.c.RA:
		m.st.RA = m.init.RA
	case m.Arch.FP:
		m.st.FP = m.init.FP
	}
}
