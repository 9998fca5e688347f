package perfmap

import (
	"math"
	"testing"
)

func TestTable(t *testing.T) {
	const max = math.MaxUint64
	tests := []struct {
		name    string
		entries []Entry
		want    map[uint64]string // address: name found there, "" for none
	}{
		{"empty", nil, map[uint64]string{0: "", max: ""}},
		{"disjoint with a gap",
			[]Entry{{0x100, 0x10, "a", 1}, {0x200, 0x10, "b", 2}},
			map[uint64]string{0xff: "", 0x100: "a", 0x10f: "a", 0x110: "", 0x1ff: "", 0x200: "b", 0x20f: "b", 0x210: ""}},
		{"adjacent",
			[]Entry{{0x100, 0x10, "a", 1}, {0x110, 0x10, "b", 2}},
			map[uint64]string{0x10f: "a", 0x110: "b", 0x11f: "b", 0x120: ""}},
		{"same range: later wins",
			[]Entry{{0x100, 0x10, "old", 1}, {0x100, 0x10, "new", 2}},
			map[uint64]string{0x100: "new", 0x10f: "new"}},
		{"later inside earlier splits it",
			[]Entry{{0x100, 0x100, "outer", 1}, {0x140, 0x10, "inner", 2}},
			map[uint64]string{0x100: "outer", 0x13f: "outer", 0x140: "inner", 0x14f: "inner", 0x150: "outer", 0x1ff: "outer", 0x200: ""}},
		{"earlier inside later is hidden",
			[]Entry{{0x140, 0x10, "inner", 1}, {0x100, 0x100, "outer", 2}},
			map[uint64]string{0x140: "outer", 0x14f: "outer", 0x1ff: "outer"}},
		{"partial overlaps",
			[]Entry{{0x100, 0x20, "a", 1}, {0x110, 0x20, "b", 2}, {0x0f0, 0x18, "c", 3}},
			map[uint64]string{0xf0: "c", 0x107: "c", 0x108: "a", 0x10f: "a", 0x110: "b", 0x12f: "b", 0x130: ""}},
		{"an old entry shows again where no later one covers",
			[]Entry{{0x100, 0x30, "a", 1}, {0x100, 0x10, "b", 2}, {0x120, 0x10, "c", 3}, {0x108, 0x4, "d", 4}},
			map[uint64]string{0x100: "b", 0x108: "d", 0x10c: "b", 0x110: "a", 0x11f: "a", 0x120: "c", 0x130: ""}},
		{"size 0 is ignored and hides nothing",
			[]Entry{{0x100, 0x10, "a", 1}, {0x104, 0, "zero", 2}, {0x200, 0, "alone", 3}},
			map[uint64]string{0x104: "a", 0x200: ""}},
		{"ends of the address space",
			[]Entry{{0, 1, "first", 1}, {max - 1, 1, "last", 2}},
			map[uint64]string{0: "first", 1: "", max - 2: "", max - 1: "last", max: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(tt.entries)
			for addr, want := range tt.want {
				e, ok := tab.Lookup(addr)
				if ok != (want != "") || e.Name != want {
					t.Errorf("Lookup(%#x) = %q, %v; want %q", addr, e.Name, ok, want)
				}
			}
			checkTable(t, tt.entries)
		})
	}
	if _, ok := new(Table).Lookup(0); ok {
		t.Error("zero Table found something")
	}
}

func TestTableKeepsEntry(t *testing.T) {
	entries := []Entry{{0x100, 0x100, "outer", 7}, {0x140, 0x10, "inner", 9}}
	tab := NewTable(entries)
	entries[0].Name = "changed"
	if e, _ := tab.Lookup(0x180); e != (Entry{0x100, 0x100, "outer", 7}) {
		t.Errorf("got %+v, want the whole first entry as given", e)
	}
}

// checkTable compares Lookup with a search of all entries, latest first, at
// the addresses where the answer may change: around each entry, or around a
// sample of entries in a big map, as the search is slow.
func checkTable(t *testing.T, entries []Entry) {
	t.Helper()
	tab := NewTable(entries)
	want := func(addr uint64) (Entry, bool) {
		for i := len(entries) - 1; i >= 0; i-- {
			e := entries[i]
			if e.Size != 0 && e.Start+e.Size > e.Start && addr >= e.Start && addr-e.Start < e.Size {
				return e, true
			}
		}
		return Entry{}, false
	}
	step := max(1, len(entries)/256)
	for k := 0; k < len(entries); k += step {
		e := entries[k]
		for _, addr := range []uint64{e.Start - 1, e.Start, e.Start + e.Size - 1, e.Start + e.Size} {
			got, ok := tab.Lookup(addr)
			w, wok := want(addr)
			if got != w || ok != wok {
				t.Fatalf("Lookup(%#x) = %+v, %v; want %+v, %v", addr, got, ok, w, wok)
			}
		}
	}
}
