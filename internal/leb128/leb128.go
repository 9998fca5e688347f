// Package leb128 appends and decodes the variable-length integers of DWARF
// (DWARF 5, section 7.6), which jitdump's unwinding tables and jitelf's
// debugging sections write and unwind's CFI parser reads; Go's debug/dwarf
// only reads them, and only inside its own types.
package leb128

// AppendUnsigned appends v as unsigned LEB128.
func AppendUnsigned(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendSigned appends v as signed LEB128.
func AppendSigned(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Unsigned decodes the unsigned LEB128 at the start of p and returns it
// with its length in bytes; n is 0 when p ends inside it. Bits past the
// 64th are dropped.
func Unsigned(p []byte) (v uint64, n int) {
	for i, c := range p {
		if i < 10 {
			v |= uint64(c&0x7f) << (7 * i)
		}
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// Signed decodes the signed LEB128 at the start of p, as Unsigned does.
func Signed(p []byte) (v int64, n int) {
	for i, c := range p {
		if i < 10 {
			v |= int64(c&0x7f) << (7 * i)
		}
		if c&0x80 == 0 {
			if shift := 7 * (i + 1); shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v, i + 1
		}
	}
	return 0, 0
}
