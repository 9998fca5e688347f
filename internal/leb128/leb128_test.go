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
