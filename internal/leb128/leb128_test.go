package leb128

import (
	"bytes"
	"testing"
)

// The examples of DWARF 5, section 7.6, figures 22 and 23.
func TestAppend(t *testing.T) {
	unsigned := []struct {
		v    uint64
		want []byte
	}{
		{2, []byte{2}},
		{127, []byte{127}},
		{128, []byte{0x80, 1}},
		{129, []byte{1 | 0x80, 1}},
		{130, []byte{2 | 0x80, 1}},
		{12857, []byte{57 | 0x80, 100}},
		{1<<64 - 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}},
	}
	for _, c := range unsigned {
		if got := AppendUnsigned([]byte{0xaa}, c.v); !bytes.Equal(got, append([]byte{0xaa}, c.want...)) {
			t.Errorf("AppendUnsigned(%d) = % x, want aa % x", c.v, got, c.want)
		}
	}
	signed := []struct {
		v    int64
		want []byte
	}{
		{2, []byte{2}},
		{-2, []byte{0x7e}},
		{127, []byte{127 | 0x80, 0}},
		{-127, []byte{1 | 0x80, 0x7f}},
		{128, []byte{0 | 0x80, 1}},
		{-128, []byte{0 | 0x80, 0x7f}},
		{129, []byte{1 | 0x80, 1}},
		{-129, []byte{0x7f | 0x80, 0x7e}},
		{-1 << 63, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}},
	}
	for _, c := range signed {
		if got := AppendSigned([]byte{0xaa}, c.v); !bytes.Equal(got, append([]byte{0xaa}, c.want...)) {
			t.Errorf("AppendSigned(%d) = % x, want aa % x", c.v, got, c.want)
		}
	}
}

// Decoding gives back what Append wrote, with its length, and nothing for
// a truncated encoding.
func TestDecode(t *testing.T) {
	for _, v := range []uint64{0, 2, 127, 128, 129, 12857, 1<<63 - 1, 1 << 63, 1<<64 - 1} {
		b := AppendUnsigned(nil, v)
		if got, n := Unsigned(append(b, 0xaa)); got != v || n != len(b) {
			t.Errorf("Unsigned(% x) = %d, %d; want %d, %d", b, got, n, v, len(b))
		}
		if _, n := Unsigned(b[:len(b)-1]); n != 0 {
			t.Errorf("Unsigned(% x), truncated: n = %d", b[:len(b)-1], n)
		}
		s := int64(v)
		b = AppendSigned(nil, s)
		if got, n := Signed(append(b, 0xaa)); got != s || n != len(b) {
			t.Errorf("Signed(% x) = %d, %d; want %d, %d", b, got, n, s, len(b))
		}
		if got, n := Signed(AppendSigned(nil, -s)); got != -s || n == 0 {
			t.Errorf("Signed(-%d) = %d, %d", s, got, n)
		}
	}
}
