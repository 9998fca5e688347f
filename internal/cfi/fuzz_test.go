package cfi_test

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
)

// FuzzSection: a CFI section of any bytes, read as either section, in
// either byte order and address size, for either architecture, never
// panics: its entries tile it until one that cannot be read, whose error
// names the file, the section and the entry's offset; and each FDE's
// program gives rows in increasing order inside the FDE, no more of them
// than the program has bytes.
func FuzzSection(f *testing.F) {
	for _, a := range []*cfi.Arch{cfi.X86_64, cfi.ARM64} {
		for i, o := range []cfi.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			initial := cfi.AppendOffset(cfi.AppendDefCFA(nil, a.SP, 8), a.RA, 1)
			instr := cfi.AppendAdvanceLoc(nil, o, 1)
			instr = cfi.AppendDefCFAOffset(instr, 16)
			instr = cfi.AppendOffset(instr, a.FP, 2)
			instr = append(instr, cfi.OpRememberState)
			instr = cfi.AppendAdvanceLoc(instr, o, 300)
			instr = cfi.AppendDefCFARegister(instr, a.FP)
			instr = append(instr, cfi.OpRestoreState)
			instr = cfi.AppendAdvanceLoc(instr, o, 70000)
			instr = cfi.AppendRestore(instr, a.FP)
			eh := ehFrame(o, a, 1, cfi.PEPCRel|cfi.PESdata4, initial, instr, func(b []byte) []byte {
				b = o.AppendUint32(b, uint32(0x100-len(b)))
				return o.AppendUint32(b, 0x20000)
			})
			var flags uint8
			if a == cfi.ARM64 {
				flags |= 4
			}
			f.Add(eh, flags|uint8(i)<<1|1)
		}
	}
	// A .debug_frame: a version 4 CIE with its address size, and an FDE
	// of absolute addresses.
	df := binary.LittleEndian.AppendUint32(nil, 16)
	df = append(df, 0xff, 0xff, 0xff, 0xff, 4, 0, 8, 0, 1, 0x78, 16, 0x0c, 7, 8, 0x90, 1)
	df = binary.LittleEndian.AppendUint32(df, 28)
	df = binary.LittleEndian.AppendUint32(df, 0)
	df = binary.LittleEndian.AppendUint64(df, 0x401000)
	df = binary.LittleEndian.AppendUint64(df, 0x40)
	df = append(df, 0x41, 0x0e, 0x10, 0x86, 0x02, 0, 0, 0)
	f.Add(df, uint8(0))
	f.Add(df, uint8(8))

	f.Fuzz(func(t *testing.T, data []byte, flags uint8) {
		s := &cfi.Section{File: "fuzz.so", Name: ".debug_frame", Data: data, Addr: 0x500000, Order: binary.LittleEndian, AddrSize: 8}
		if flags&1 != 0 {
			s.Name, s.EH = ".eh_frame", true
		}
		if flags&2 != 0 {
			s.Order = binary.BigEndian
		}
		m := &cfi.Machine{Arch: cfi.X86_64}
		if flags&4 != 0 {
			m.Arch = cfi.ARM64
		}
		if flags&8 != 0 {
			s.AddrSize = 4
		}
		for off := 0; off < len(data); {
			e, err := s.Next(off)
			if err != nil {
				var ce *cfi.Error
				if !errors.As(err, &ce) || ce.Offset != uint64(off) || !strings.Contains(err.Error(), "fuzz.so: "+s.Name) {
					t.Fatalf("entry at %#x: the error %v names no file, section and offset", off, err)
				}
				break
			}
			if e.Off != off || len(e.Data) == 0 || len(e.Data) > len(data)-off || &e.Data[0] != &data[off] {
				t.Fatalf("entry at %#x: %d bytes at %#x of a %d-byte section", off, len(e.Data), e.Off, len(data))
			}
			off += len(e.Data)
			if e.Terminator() || e.CIE {
				continue
			}
			c, err := s.CIE(e.CIEOff)
			if err != nil {
				continue
			}
			fde, err := s.FDE(&e, c)
			if err != nil {
				continue
			}
			if fde.End < fde.Start || len(fde.Program) > len(e.Data) {
				t.Fatalf("FDE at %#x: [%#x, %#x), a program of %d bytes in an entry of %d", e.Off, fde.Start, fde.End, len(fde.Program), len(e.Data))
			}
			if m.Init(c) != nil {
				continue
			}
			rows, last := 0, uint64(0)
			m.Run(&fde, func(loc uint64, st *cfi.State) {
				if loc < fde.Start || loc >= fde.End || rows > 0 && loc <= last {
					t.Fatalf("FDE at %#x of [%#x, %#x): a row at %#x after one at %#x", e.Off, fde.Start, fde.End, loc, last)
				}
				rows, last = rows+1, loc
			})
			if rows > len(fde.Program)+1 {
				t.Fatalf("FDE at %#x: %d rows from a program of %d bytes", e.Off, rows, len(fde.Program))
			}
		}
	})
}
