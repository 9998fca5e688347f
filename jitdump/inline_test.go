package jitdump_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"reflect"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// inlineSample is a function with a two-level inline tree, as the Intel JIT
// API collector writes it: the load, then one record per instance.
func inlineSample() []jitdump.Record {
	inl := func(id, parent uint32, addr, size uint64, name, file string, lines ...jitdump.InlineLine) *jitdump.InlineInfo {
		return &jitdump.InlineInfo{RecordHeader: jitdump.RecordHeader{Timestamp: 11}, CodeIndex: 1, CodeAddr: addr, CodeSize: size,
			MethodID: id, ParentID: parent, RootID: 1000, Lines: lines, Name: name, File: file}
	}
	return []jitdump.Record{
		load(10, 1, 0x1000, 0x40),
		inl(2000, 1000, 0x1008, 0x20, "b", "b.src", jitdump.InlineLine{Addr: 0x1008, Line: 20}, jitdump.InlineLine{Addr: 0x1010, Line: 21}),
		inl(3000, 2000, 0x1010, 0x8, "c", "", jitdump.InlineLine{Addr: 0x1010, Line: 30}),
		inl(2001, 1000, 0x1030, 0x8, "d\xff", "dir/d.src"),
	}
}

func TestInlineInfoRoundTrip(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			want := inlineSample()
			data := encode(t, jitdump.Header{ByteOrder: order}, want)
			r, err := jitdump.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := jitdump.Check(r)
			if err != nil || len(findings) != 0 {
				t.Fatalf("check: %v %v", findings, err)
			}
			r, _ = jitdump.NewBytesReader(data)
			for i, w := range want[1:] {
				var got jitdump.Record
				for got == nil || got.Header().Type != jitdump.TypeInlineInfo {
					if got, err = r.Next(); err != nil {
						t.Fatalf("record %d: %v", i, err)
					}
				}
				g, w := *got.(*jitdump.InlineInfo), *w.(*jitdump.InlineInfo)
				if g.Size%8 != 0 || g.Type.String() != "JITPROF_INLINE" {
					t.Errorf("record %d: size %d, type %s", i, g.Size, g.Type)
				}
				g.RecordHeader, w.RecordHeader = jitdump.RecordHeader{}, jitdump.RecordHeader{}
				if !reflect.DeepEqual(g, w) {
					t.Errorf("record %d:\n got %+v\nwant %+v", i, g, w)
				}
			}
			if _, err := readEveryWay(t, data); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInlineInfoLayout pins the bytes, which the C collector writes too
// (agents/ittjit/jitprofiling.h).
func TestInlineInfoLayout(t *testing.T) {
	rec := &jitdump.InlineInfo{RecordHeader: jitdump.RecordHeader{Timestamp: 5}, CodeIndex: 7, CodeAddr: 0x1008, CodeSize: 0x20,
		MethodID: 2, ParentID: 1, RootID: 1, Lines: []jitdump.InlineLine{{Addr: 0x1008, Line: 9}}, Name: "ab", File: "c"}
	got, err := jitdump.AppendRecord(nil, binary.LittleEndian, rec)
	if err != nil {
		t.Fatal(err)
	}
	want := "01 00 50 4a 50 00 00 00 05 00 00 00 00 00 00 00 " + // id, total_size 80, timestamp
		"07 00 00 00 00 00 00 00 08 10 00 00 00 00 00 00 20 00 00 00 00 00 00 00 " + // index, addr, size
		"02 00 00 00 01 00 00 00 01 00 00 00 01 00 00 00 " + // id, parent, root, nr_entry
		"08 10 00 00 00 00 00 00 09 00 00 00 00 00 00 00 " + // entry
		"61 62 00 63 00 00 00 00" // "ab", "c", padding
	if g := fmt.Sprintf("% x", got); g != want {
		t.Errorf("layout:\n got %s\nwant %s", g, want)
	}
}

// TestInlineInfoInvalid: a record whose fields do not fit is reported with
// its offset, and reading goes on after it.
func TestInlineInfoInvalid(t *testing.T) {
	fixed := func(nrEntry uint32) []byte {
		b := make([]byte, 40)
		binary.LittleEndian.PutUint32(b[36:], nrEntry)
		return b
	}
	tests := []struct {
		name string
		body []byte
		msg  string
	}{
		{"short", make([]byte, 39), "fixed fields"},
		{"entries past the end", append(fixed(2), make([]byte, 16+2)...), "nr_entry 2 cannot fit"},
		{"absurd nr_entry", append(fixed(0xffffffff), 0, 0), "nr_entry 4294967295 cannot fit"},
		{"name without NUL", append(fixed(0), 'a', 'b'), "name has no terminating NUL"},
		{"file without NUL", append(fixed(0), 'a', 0, 'b'), "file name has no terminating NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkInvalidBody(t, jitdump.TypeInlineInfo, tt.body, tt.msg) })
	}
}

func TestCheckInlineUnknownIndex(t *testing.T) {
	recs := inlineSample()
	recs[2].(*jitdump.InlineInfo).CodeIndex = 9
	r, _ := jitdump.NewBytesReader(encode(t, jitdump.Header{ByteOrder: binary.LittleEndian}, recs))
	findings, err := jitdump.Check(r)
	if err != nil || len(findings) != 1 || findings[0].Kind != jitdump.KindInlineUnknown || findings[0].Severity != jitdump.Error {
		t.Fatalf("findings %v, %v; want one %s error", findings, err, jitdump.KindInlineUnknown)
	}
}

func TestInlineInfoLineAt(t *testing.T) {
	in := &jitdump.InlineInfo{CodeAddr: 0x100, CodeSize: 0x10, Lines: []jitdump.InlineLine{{Addr: 0x108, Line: 2}, {Addr: 0x100, Line: 1}, {Addr: 0x10c, Line: 3}}}
	tests := []struct {
		addr     uint64
		line     uint32
		ok, in   bool
		describe string
	}{
		{0xff, 0, false, false, "before the code"},
		{0x100, 1, true, true, "first entry, given out of order"},
		{0x107, 1, true, true, "up to the next entry"},
		{0x108, 2, true, true, "second"},
		{0x10f, 3, true, true, "last byte"},
		{0x110, 3, true, false, "past the code: the last line, but not contained"},
	}
	for _, tt := range tests {
		line, ok := in.LineAt(tt.addr)
		if line != tt.line || ok != tt.ok || in.Contains(tt.addr) != tt.in {
			t.Errorf("%s: at %#x: line %d %t, contains %t", tt.describe, tt.addr, line, ok, in.Contains(tt.addr))
		}
	}
}

// FuzzInlineInfo: no input panics, and an inline record that decodes encodes
// back to a record that decodes to the same fields.
func FuzzInlineInfo(f *testing.F) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		data := encode(f, jitdump.Header{ByteOrder: order}, inlineSample())
		f.Add(data)
		f.Add(data[:len(data)-3])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		readEveryWay(t, data)
		r, err := jitdump.NewBytesReader(data)
		if err != nil {
			return
		}
		for {
			rec, err := r.Next()
			if err != nil {
				return
			}
			in, ok := rec.(*jitdump.InlineInfo)
			if !ok {
				continue
			}
			order := r.Header().ByteOrder
			var b bytes.Buffer
			b.Write(jitdump.AppendHeader(nil, &jitdump.Header{ByteOrder: order, Version: 1}))
			enc, err := jitdump.AppendRecord(nil, order, in)
			if err != nil {
				t.Fatal(err)
			}
			b.Write(enc)
			again, err := jitdump.NewBytesReader(b.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			rec2, err := again.Next()
			if err != nil {
				t.Fatal(err)
			}
			in2, ok := rec2.(*jitdump.InlineInfo)
			if !ok {
				t.Fatalf("re-encoded inline record reads as %T", rec2)
			}
			a, b2 := *in, *in2
			a.RecordHeader, b2.RecordHeader = jitdump.RecordHeader{}, jitdump.RecordHeader{}
			if !reflect.DeepEqual(a, b2) {
				t.Fatalf("round trip:\n%+v\n%+v", a, b2)
			}
		}
	})
}
