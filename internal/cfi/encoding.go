package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// DW_EH_PE pointer encodings (LSB 3.0, "DWARF Exception Header
// Encoding"): the low nibble is the format, the next three bits how the
// value applies, the top bit an indirection.
const (
	PEAbs     = 0x00 // absptr: address-sized
	PEUleb    = 0x01
	PEUdata2  = 0x02
	PEUdata4  = 0x03
	PEUdata8  = 0x04
	PESleb    = 0x09
	PESdata2  = 0x0a
	PESdata4  = 0x0b
	PESdata8  = 0x0c
	PEPCRel   = 0x10
	PEDataRel = 0x30
	PEAligned = 0x50
	PEInd     = 0x80
	PEOmit    = 0xff
)

// PtrSize is the size of a pointer of encoding enc, 0 when variable
// (LEB128) or not a format.
func PtrSize(enc byte, addrSize int) int {
	switch enc & 0x0f {
	case PEAbs:
		return addrSize
	case PEUdata2, PESdata2:
		return 2
	case PEUdata4, PESdata4:
		return 4
	case PEUdata8, PESdata8:
		return 8
	}
	return 0
}

// Fits tells whether v can be stored as a pointer of encoding enc. A
// pointer as wide as an address always can: address arithmetic wraps.
func Fits(v uint64, enc byte, addrSize int) bool {
	n := PtrSize(enc, addrSize)
	if n >= addrSize {
		return true
	}
	bits := 8 * n
	if enc&0x08 != 0 { // signed
		return int64(v)>>(bits-1) == 0 || int64(v)>>(bits-1) == -1
	}
	return v>>bits == 0
}

// PutPtr stores v as a fixed-size pointer of encoding enc at p.
func PutPtr(p []byte, o binary.ByteOrder, v uint64, enc byte, addrSize int) {
	switch PtrSize(enc, addrSize) {
	case 2:
		o.PutUint16(p, uint16(v))
	case 4:
		o.PutUint32(p, uint32(v))
	case 8:
		o.PutUint64(p, v)
	}
}

// ptr reads a pointer of encoding enc; at is the address of the field, for
// pc-relative pointers.
func (r *reader) ptr(enc byte, at uint64, addrSize int) (uint64, error) {
	if enc == PEOmit {
		return 0, nil
	}
	var v uint64
	switch enc & 0x0f {
	case PEAbs:
		v = r.fixed(addrSize)
	case PEUleb:
		v = r.uleb()
	case PEUdata2:
		v = r.fixed(2)
	case PEUdata4:
		v = r.fixed(4)
	case PEUdata8:
		v = r.fixed(8)
	case PESleb:
		v = uint64(r.sleb())
	case PESdata2:
		v = uint64(int16(r.fixed(2)))
	case PESdata4:
		v = uint64(int32(r.fixed(4)))
	case PESdata8:
		v = r.fixed(8)
	default:
		return 0, fmt.Errorf("pointer encoding %#x", enc)
	}
	if r.bad {
		return 0, errors.New("truncated")
	}
	switch enc & 0x70 {
	case PEAbs:
	case PEPCRel:
		v += at
	default:
		// datarel, textrel, funcrel and aligned need bases that FDEs
		// never use (datarel is for .eh_frame_hdr).
		return 0, fmt.Errorf("pointer encoding %#x", enc)
	}
	if enc&PEInd != 0 {
		return 0, fmt.Errorf("indirect pointer encoding %#x", enc)
	}
	return v, nil
}

// skipPtr passes over a pointer whose value is not needed (a CIE's
// personality routine), of any application but aligned, whose size
// depends on where it lies.
func (r *reader) skipPtr(enc byte, addrSize int) error {
	if enc == PEOmit {
		return nil
	}
	switch {
	case enc&0x70 == PEAligned:
		return fmt.Errorf("pointer encoding %#x", enc)
	case enc&0x0f == PEUleb:
		r.uleb()
	case enc&0x0f == PESleb:
		r.sleb()
	default:
		n := PtrSize(enc, addrSize)
		if n == 0 {
			return fmt.Errorf("pointer encoding %#x", enc)
		}
		r.fixed(n)
	}
	if r.bad {
		return errors.New("truncated")
	}
	return nil
}
