package dumpindex

import (
	"reflect"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// The tree of the API's documentation: c inlined into b, b and d into a.
//
//	        [-- c --]            3000 in 2000
//	  [---- d -----]             2001 in 1000  (after b)
//	[---- b ----]                2000 in 1000
//	[------------ a -------]     1000
func inlineTree() []jitdump.Record {
	inl := func(index uint64, id, parent uint32, addr, size uint64, name, file string, lines ...jitdump.InlineLine) *jitdump.InlineInfo {
		return &jitdump.InlineInfo{CodeIndex: index, CodeAddr: addr, CodeSize: size, MethodID: id, ParentID: parent, RootID: 1000, Name: name, File: file, Lines: lines}
	}
	return []jitdump.Record{
		&jitdump.CodeLoad{CodeIndex: 1, CodeAddr: 0x1000, VMA: 0x1000, CodeSize: 0x100, Code: make([]byte, 0x100), Name: "a"},
		inl(1, 3000, 2000, 0x1020, 0x10, "c", "c.src", jitdump.InlineLine{Addr: 0x1020, Line: 30}, jitdump.InlineLine{Addr: 0x1028, Line: 31}),
		inl(1, 2000, 1000, 0x1010, 0x30, "b", "b.src", jitdump.InlineLine{Addr: 0x1010, Line: 20}, jitdump.InlineLine{Addr: 0x1020, Line: 22}),
		inl(1, 2001, 1000, 0x1040, 0x20, "d", ""),
		inl(7, 9, 1000, 0x1000, 0x10, "of a missing load", ""),
		// A corrupt cycle of ids must not loop.
		&jitdump.CodeLoad{CodeIndex: 2, CodeAddr: 0x2000, VMA: 0x2000, CodeSize: 0x10, Code: make([]byte, 0x10), Name: "e"},
		&jitdump.InlineInfo{CodeIndex: 2, CodeAddr: 0x2000, CodeSize: 0x10, MethodID: 5, ParentID: 6, RootID: 6, Name: "x"},
		&jitdump.InlineInfo{CodeIndex: 2, CodeAddr: 0x2000, CodeSize: 0x10, MethodID: 6, ParentID: 5, RootID: 6, Name: "y"},
	}
}

func TestInlineChain(t *testing.T) {
	path := writeDump(t, func(w *jitdump.Writer) {
		for _, r := range inlineTree() {
			if err := w.WriteRecord(r); err != nil {
				t.Fatal(err)
			}
		}
	})
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Problems) != 1 {
		t.Errorf("problems %v, want the inline record of a missing load", d.Problems)
	}
	a, e := d.Functions[0], d.Functions[1]
	tests := []struct {
		fn   *Code
		addr uint64
		want []InlineFrame
	}{
		{a, 0x1000, nil},
		{a, 0x1010, []InlineFrame{{Name: "b", File: "b.src", Line: 20}}},
		{a, 0x101f, []InlineFrame{{Name: "b", File: "b.src", Line: 20}}},
		{a, 0x1020, []InlineFrame{{Name: "b", File: "b.src", Line: 22}, {Name: "c", File: "c.src", Line: 30}}},
		{a, 0x102f, []InlineFrame{{Name: "b", File: "b.src", Line: 22}, {Name: "c", File: "c.src", Line: 31}}},
		{a, 0x1030, []InlineFrame{{Name: "b", File: "b.src", Line: 22}}},
		{a, 0x1040, []InlineFrame{{Name: "d", File: "", Line: 0}}},
		{a, 0x1060, nil},
		{e, 0x2000, []InlineFrame{{Name: "x", File: "", Line: 0}, {Name: "y", File: "", Line: 0}}}, // cut at the number of records
	}
	for _, tt := range tests {
		if got := tt.fn.InlineChain(tt.addr); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s at %#x: %+v, want %+v", tt.fn.Name, tt.addr, got, tt.want)
		}
	}
}

func BenchmarkInlineChain(b *testing.B) {
	// A function of 64 inlined calls, 4 deep: what an optimizing JIT makes of
	// a hot loop.
	fn := &Code{CodeAddr: 0x10000, CodeSize: 64 * 0x100, extra: &attached{}}
	for i := range 64 {
		base := uint64(0x10000 + i*0x100)
		parent := uint32(1)
		for depth := range 4 {
			id := uint32(1000 + i*4 + depth)
			fn.extra.inlines = append(fn.extra.inlines, &jitdump.InlineInfo{CodeAddr: base + uint64(depth*8), CodeSize: 0x100 - uint64(depth*16),
				MethodID: id, ParentID: parent, RootID: 1, Name: "f", Lines: []jitdump.InlineLine{{Addr: base, Line: 1}, {Addr: base + 0x40, Line: 2}}})
			parent = id
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if len(fn.InlineChain(0x10000+uint64(i%64)*0x100+0x30)) != 4 {
			b.Fatal("wrong chain")
		}
	}
}
