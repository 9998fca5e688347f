package jitdump

import (
	"encoding/binary"
	"fmt"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/leb128"
)

// This file builds the .eh_frame and .eh_frame_hdr a JIT puts in an
// UNWINDING_INFO record, so that perf's DWARF unwinder (perf record
// --call-graph dwarf) can step through jitted frames, with package cfi's
// writer, which the readers of such tables share.

// CFAProgram is a list of DWARF call frame instructions (DWARF 5 section
// 6.4.2): each row says how to find the caller's frame, the canonical frame
// address (CFA), and where the caller's registers are saved, from some code
// offset on. Build it by appending, e.g.
//
//	CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(6, 2)
//
// Registers are DWARF register numbers: rsp 7, rbp 6, return address 16 on
// x86-64; sp 31, x29 29, x30 30 on arm64.
type CFAProgram []byte

// AdvanceLoc moves the row's start delta code alignment units on: the
// instructions after it apply from there.
func (p CFAProgram) AdvanceLoc(delta uint32) CFAProgram {
	return cfi.AppendAdvanceLoc(p, binary.NativeEndian, delta)
}

// DefCFA says the CFA is register reg plus offset bytes.
func (p CFAProgram) DefCFA(reg, offset uint64) CFAProgram { return cfi.AppendDefCFA(p, reg, offset) }

// DefCFARegister keeps the CFA's offset and changes its register, as when a
// prologue has set up the frame pointer.
func (p CFAProgram) DefCFARegister(reg uint64) CFAProgram { return cfi.AppendDefCFARegister(p, reg) }

// DefCFAOffset keeps the CFA's register and changes its offset, as when a
// push has moved the stack pointer.
func (p CFAProgram) DefCFAOffset(offset uint64) CFAProgram { return cfi.AppendDefCFAOffset(p, offset) }

// Offset says the caller's reg is saved at CFA + factored * the data
// alignment factor (FrameInfo.DataAlign).
func (p CFAProgram) Offset(reg, factored uint64) CFAProgram {
	return cfi.AppendOffset(p, reg, factored)
}

// Restore gives reg back the rule it had at the function's entry, as after
// an epilogue has reloaded it.
func (p CFAProgram) Restore(reg uint64) CFAProgram { return cfi.AppendRestore(p, reg) }

// FrameInfo describes the frames of one function for UnwindingInfo: one CIE
// holding the rules at entry, one FDE holding how they change.
type FrameInfo struct {
	CodeAlign     uint32     // AdvanceLoc's unit in bytes: 1 on x86-64, 4 on arm64
	DataAlign     int32      // Offset's unit in bytes: -8 on x86-64 and arm64
	ReturnAddress uint8      // the register holding the return address: 16 on x86-64, 30 on arm64
	Initial       CFAProgram // the rules at the function's first instruction
	Instructions  CFAProgram // how they change from there
}

// UnwindingInfo returns the UNWINDING_INFO for a function of codeSize bytes
// that fi describes: an .eh_frame of one CIE and one FDE, and an
// .eh_frame_hdr with a one-entry search table.
//
// The tables locate the code with pc-relative pointers, so their values
// depend on where the tables lie relative to the code. They are laid out
// for where perf inject puts them in the ELF image it makes, which is where
// V8 keeps them in memory too: the .eh_frame 8-aligned right after the code,
// the .eh_frame_hdr right after the .eh_frame. MappedSize is set to their
// size because perf maps the image over the code and MappedSize more bytes:
// its unwinder reads the tables through that mapping, so with 0 it finds
// none. A JIT should therefore leave that many bytes after align8(codeSize)
// free of other code (copying the tables there, as V8 does, is the natural
// use of the room).
func (fi *FrameInfo) UnwindingInfo(codeSize uint64) (*UnwindingInfo, error) {
	// The pc-relative sdata4 pointers reach ±2 GiB; a function is far
	// smaller, but say so rather than wrap.
	if codeSize >= 1<<30 {
		return nil, fmt.Errorf("jitdump: unwinding tables for %d bytes of code: the code must be under 1 GiB", codeSize)
	}
	if fi.CodeAlign == 0 {
		return nil, fmt.Errorf("jitdump: FrameInfo.CodeAlign is 0")
	}
	o := binary.NativeEndian               // the tables describe code for this machine
	codeEnd := int64(alignUp(codeSize, 8)) // where the .eh_frame starts, from the code's start

	var eh []byte
	// CIE: version 1, augmentation "zR" (its data is the FDEs' pointer
	// encoding: pc-relative sdata4, what perf and libunwind expect).
	eh = cfi.AppendEHEntry(eh, o, 0, func(b []byte) []byte {
		b = append(b, 1, 'z', 'R', 0)
		b = leb128.AppendUnsigned(b, uint64(fi.CodeAlign))
		b = leb128.AppendSigned(b, int64(fi.DataAlign))
		b = append(b, fi.ReturnAddress)
		b = append(b, 1, cfi.PEPCRel|cfi.PESdata4) // augmentation data: its length, then the encoding
		return append(b, fi.Initial...)
	})
	fde := len(eh)
	eh = cfi.AppendEHEntry(eh, o, uint32(fde+4), func(b []byte) []byte { // CIE pointer: back from the field to the CIE at 0
		pcBegin := int64(len(b)) // the field's offset in the .eh_frame
		b = o.AppendUint32(b, uint32(int32(-(codeEnd + pcBegin))))
		b = o.AppendUint32(b, uint32(codeSize)) // pc_range
		b = append(b, 0)                        // no augmentation data
		return append(b, fi.Instructions...)
	})
	eh = o.AppendUint32(eh, 0) // terminator: readers walking the section stop here

	// .eh_frame_hdr: offsets of its pointers count from the header's start
	// (datarel) or from the field (pcrel).
	size := int64(len(eh))
	hdr := cfi.AppendEHFrameHdr(nil, o, uint32(int32(-(size + 4))), 1)
	hdr = o.AppendUint32(hdr, uint32(int32(-(codeEnd + size))))
	hdr = o.AppendUint32(hdr, uint32(int32(int64(fde)-size)))
	return &UnwindingInfo{EHFrame: eh, EHFrameHdr: hdr, MappedSize: uint64(len(eh) + len(hdr))}, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }
