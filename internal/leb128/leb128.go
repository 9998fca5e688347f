// Package leb128 appends the variable-length integers of DWARF (DWARF 5,
// section 7.6), which jitdump's unwinding tables and jitelf's debugging
// sections both write; Go's debug/dwarf only reads them.
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
