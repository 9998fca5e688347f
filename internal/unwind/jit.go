package unwind

import (
	"encoding/binary"
	"fmt"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/jitdump"
)

// FromUnwindingInfo builds the table of one jitted function loaded at
// codeAddr with codeSize bytes, from its UNWINDING_INFO. Addresses are the
// process's.
//
// The .eh_frame's pc-relative pointers are read as perf inject lays the
// tables out (and V8 and CPython keep them in memory): the .eh_frame
// 8-aligned right after the code, so the section is taken to start at
// codeAddr + align8(codeSize). The .eh_frame_hdr is not needed: every FDE
// is read. FDEs that do not lie within the code are skipped (Table.Err).
func FromUnwindingInfo(u *jitdump.UnwindingInfo, codeAddr, codeSize uint64) (*Table, error) {
	name := fmt.Sprintf("UNWINDING_INFO of the code at %#x", codeAddr)
	if codeAddr+codeSize < codeAddr || codeSize >= 1<<32 {
		return nil, fmt.Errorf("unwind: %s: code size %#x does not fit", name, codeSize)
	}
	// A dump is read on the machine it was recorded on, as perf reads it.
	sec := &cfi.Section{File: name, Name: ".eh_frame", Data: u.EHFrame, Addr: codeAddr + (codeSize+7)&^7, EH: true, Order: binary.LittleEndian}
	t := &Table{}
	m := &cfi.Machine{Arch: cfi.X86_64}
	fdes := parseSection(sec, m, nil, prioEHFrame, t.problem)
	for _, f := range fdes {
		if f.CIE.RA != m.Arch.RA {
			return nil, fmt.Errorf("unwind: %s: the return address is in DWARF register %d: not x86-64 CFI, and only x86-64 is supported", name, f.CIE.RA)
		}
	}
	err := t.build(m, fdes, func(start, end uint64) bool {
		return start >= codeAddr && end <= codeAddr+codeSize
	})
	if err != nil {
		return nil, fmt.Errorf("unwind: %s: %v", name, err)
	}
	if t.Len() == 0 {
		if err := t.Err(); err != nil {
			return nil, fmt.Errorf("unwind: %s: no usable CFI: %w", name, err)
		}
		return nil, fmt.Errorf("unwind: %s: %w: no FDE", name, ErrNoCFI)
	}
	return t, nil
}
