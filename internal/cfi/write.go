package cfi

import (
	"encoding/binary"

	"github.com/jitprof/jitprof/internal/leb128"
)

// The writer's side: the instructions and entries a JIT's tables are made
// of, and the .eh_frame_hdr that indexes them.

// ByteOrder both reads and appends.
type ByteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// AppendAdvanceLoc appends an instruction that moves the row's start delta
// code alignment units on, in the shortest form.
func AppendAdvanceLoc(p []byte, o binary.AppendByteOrder, delta uint32) []byte {
	switch {
	case delta < 1<<6:
		return append(p, OpAdvanceLoc|byte(delta))
	case delta < 1<<8:
		return append(p, OpAdvanceLoc1, byte(delta))
	case delta < 1<<16:
		return o.AppendUint16(append(p, OpAdvanceLoc2), uint16(delta))
	}
	return o.AppendUint32(append(p, OpAdvanceLoc4), delta)
}

// AppendDefCFA appends DW_CFA_def_cfa: the CFA is reg + offset.
func AppendDefCFA(p []byte, reg, offset uint64) []byte {
	return leb128.AppendUnsigned(leb128.AppendUnsigned(append(p, OpDefCFA), reg), offset)
}

// AppendDefCFARegister appends DW_CFA_def_cfa_register.
func AppendDefCFARegister(p []byte, reg uint64) []byte {
	return leb128.AppendUnsigned(append(p, OpDefCFARegister), reg)
}

// AppendDefCFAOffset appends DW_CFA_def_cfa_offset.
func AppendDefCFAOffset(p []byte, offset uint64) []byte {
	return leb128.AppendUnsigned(append(p, OpDefCFAOffset), offset)
}

// AppendOffset appends an instruction saying reg is saved at CFA +
// factored * the data alignment factor, in the shortest form.
func AppendOffset(p []byte, reg, factored uint64) []byte {
	if reg < 1<<6 {
		return leb128.AppendUnsigned(append(p, OpOffset|byte(reg)), factored)
	}
	return leb128.AppendUnsigned(leb128.AppendUnsigned(append(p, OpOffsetExt), reg), factored)
}

// AppendRestore appends an instruction giving reg back its rule of the
// CIE, in the shortest form.
func AppendRestore(p []byte, reg uint64) []byte {
	if reg < 1<<6 {
		return append(p, OpRestore|byte(reg))
	}
	return leb128.AppendUnsigned(append(p, OpRestoreExt), reg)
}

// AppendEHEntry appends an .eh_frame CIE (id 0) or FDE (id: the CIE
// pointer) whose fields after the id body appends, padded with DW_CFA_nop
// so that the next entry is 8-aligned, as the LSB asks of 64-bit targets.
// body is given the section so far, the entry's start included.
func AppendEHEntry(b []byte, o ByteOrder, id uint32, body func([]byte) []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0) // length, set below
	b = o.AppendUint32(b, id)
	b = body(b)
	for (len(b)-start)%8 != 0 {
		b = append(b, OpNop)
	}
	o.PutUint32(b[start:], uint32(len(b)-start-4))
	return b
}

// AppendEHFrameHdr appends the fixed part of an .eh_frame_hdr, as every
// linker writes it: the .eh_frame's address pc-relative (ehFramePtr, from
// the field at the header's offset 4), then the count of the search
// table's entries, which the caller appends: pairs of 4-byte initial
// location and FDE address, both from the header's start.
func AppendEHFrameHdr(b []byte, o binary.AppendByteOrder, ehFramePtr, count uint32) []byte {
	b = append(b, 1, PEPCRel|PESdata4, PEUdata4, PEDataRel|PESdata4)
	b = o.AppendUint32(b, ehFramePtr)
	return o.AppendUint32(b, count)
}
