package elfsym

import (
	"bytes"
	"slices"
	"testing"
)

// checkTable checks what holds for any table: the symbols are in order,
// and what Lookup finds holds the address.
func checkTable(t *testing.T, tab *Table) {
	syms := slices.Collect(tab.Symbols())
	if len(syms) != tab.Len() {
		t.Fatalf("Len() = %d, but %d symbols", tab.Len(), len(syms))
	}
	for i, s := range syms {
		if i > 0 && s.Start < syms[i-1].Start {
			t.Fatalf("symbols out of order: %+v before %+v", syms[i-1], s)
		}
		for _, addr := range []uint64{s.Start, s.End - 1, s.End} {
			if got, ok := tab.Lookup(addr); ok && !(got.Start <= addr && (addr < got.End || addr == got.Start)) {
				t.Fatalf("Lookup(%#x) = %+v, which does not hold it", addr, got)
			}
		}
		// Lookup reads names one by one, Symbols all at once.
		if got, ok := tab.Lookup(s.Start); ok && got.Start == s.Start && got.End == s.End && got.Name != s.Name {
			t.Fatalf("Lookup(%#x) names %+v %q, Symbols %q", s.Start, got, got.Name, s.Name)
		}
	}
}

func FuzzNewTable(f *testing.F) {
	// The vDSO is a small, real ELF file.
	img, err := VDSOImage()
	if err != nil {
		f.Skip(err)
	}
	f.Add(img)
	f.Add(img[:len(img)/2])
	f.Add(img[:64])
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := NewTable(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		checkTable(t, tab)
		for _, off := range []uint64{0, uint64(len(data) / 2), uint64(len(data))} {
			tab.Vaddr(off)
		}
	})
}

func FuzzParseKallsyms(f *testing.F) {
	f.Add([]byte(kallsymsText))
	f.Add([]byte("ffffffff81000000 T a\nffffffff81000000 t b\tx\nffffffffc0000000 t c\t[m]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseKallsyms(bytes.NewReader(data))
		if err != nil {
			return
		}
		checkTable(t, tab)
	})
}
