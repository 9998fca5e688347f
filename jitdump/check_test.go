package jitdump_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func load(t uint64, index, addr uint64, code int) *jitdump.CodeLoad {
	return &jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: t}, Pid: 1, Tid: 1, VMA: addr, CodeAddr: addr,
		CodeSize: uint64(code), CodeIndex: index, Name: "f", Code: make([]byte, code)}
}

func move(t uint64, index, size uint64) *jitdump.CodeMove {
	return &jitdump.CodeMove{RecordHeader: jitdump.RecordHeader{Timestamp: t}, CodeIndex: index, OldCodeAddr: 0x1000, NewCodeAddr: 0x9000, VMA: 0x9000, CodeSize: size}
}

func debugFor(t testing.TB, addr uint64, lineAddrs ...uint64) jitdump.Record {
	var lines []jitdump.DebugEntry
	for i, a := range lineAddrs {
		lines = append(lines, jitdump.DebugEntry{Addr: a, Line: uint32(i + 1), File: "x.js"})
	}
	data := encodeFunction(t, &jitdump.Function{Name: "f", Addr: addr, Code: []byte{0}, Lines: lines})
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	rec.Header().Timestamp = 1
	return rec
}

// badName is a DEBUG_INFO for code at 0x1000 whose entry names a file of
// raw bytes, as node 20 writes some.
func badName(t testing.TB) jitdump.Record {
	data := encodeFunction(t, &jitdump.Function{Name: "f", Addr: 0x1000, Code: []byte{0}, Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 8, File: "\xfd\xfd\x0c/"}}})
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	rec.Header().Timestamp = 1
	return rec
}

func encodeFunction(t testing.TB, fn *jitdump.Function) []byte {
	var b strings.Builder
	w, err := jitdump.NewWriter(&b, jitdump.Header{ByteOrder: binary.LittleEndian})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Load(fn); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	return []byte(b.String())
}

func TestCheck(t *testing.T) {
	le := binary.LittleEndian
	nameless := encode(t, jitdump.Header{ByteOrder: le}, []jitdump.Record{load(1, 1, 0x1000, 4)})
	nameless = nameless[:len(nameless)-8] // drop the padding, NUL and code: the name runs to the end
	copy(nameless[40+56:], "abcd")
	le.PutUint64(nameless[40+40:], 0)
	le.PutUint32(nameless[40+4:], uint32(len(nameless)-40))

	tests := []struct {
		name  string
		hdr   jitdump.Header
		recs  []jitdump.Record
		raw   []byte // used instead of hdr and recs when set
		kinds []string
		sev   jitdump.Severity
	}{
		{name: "clean", recs: []jitdump.Record{debugFor(t, 0x1000, 0x1000, 0x1003), load(2, 1, 0x1000, 4), move(3, 1, 4)}},
		{name: "move of unknown index", recs: []jitdump.Record{load(1, 1, 0x1000, 4), move(2, 7, 4)}, kinds: []string{jitdump.KindMoveUnknown}, sev: jitdump.Error},
		{name: "move with another size", recs: []jitdump.Record{load(1, 1, 0x1000, 4), move(2, 1, 8)}, kinds: []string{jitdump.KindMoveSize}, sev: jitdump.Error},
		{name: "duplicate index", recs: []jitdump.Record{load(1, 1, 0x1000, 4), load(2, 1, 0x2000, 4)}, kinds: []string{jitdump.KindDuplicateIndex}, sev: jitdump.Error},
		{name: "indexes out of order", recs: []jitdump.Record{load(1, 5, 0x1000, 4), load(2, 3, 0x2000, 8), move(3, 3, 8), move(4, 5, 4)}},
		{name: "duplicate index out of order", recs: []jitdump.Record{load(1, 5, 0x1000, 4), load(2, 3, 0x2000, 4), load(3, 5, 0x3000, 4)}, kinds: []string{jitdump.KindDuplicateIndex}, sev: jitdump.Error},
		{name: "move of an index between others", recs: []jitdump.Record{load(1, 3, 0x1000, 4), load(2, 7, 0x2000, 4), move(3, 5, 4)}, kinds: []string{jitdump.KindMoveUnknown}, sev: jitdump.Error},
		{name: "runs of consecutive indexes", recs: []jitdump.Record{load(1, 1, 0x1000, 4), load(2, 2, 0x2000, 8), load(3, 3, 0x3000, 12), load(4, 10, 0x4000, 16), load(5, 11, 0x5000, 20), load(6, 20, 0x6000, 24),
			move(7, 1, 4), move(8, 3, 12), move(9, 10, 16), move(10, 11, 20), move(11, 20, 24), move(12, 4, 4), move(13, 9, 4), move(14, 12, 4), move(15, 21, 4), move(16, 0, 4)},
			kinds: []string{jitdump.KindMoveUnknown, jitdump.KindMoveUnknown, jitdump.KindMoveUnknown, jitdump.KindMoveUnknown, jitdump.KindMoveUnknown}, sev: jitdump.Error},
		{name: "sizes kept once indexes go out of order", recs: []jitdump.Record{load(1, 1, 0x1000, 4), load(2, 2, 0x2000, 8), load(3, 10, 0x3000, 12), load(4, 5, 0x4000, 16),
			move(5, 1, 4), move(6, 2, 8), move(7, 10, 12), move(8, 5, 16), move(9, 3, 4), move(10, 2, 4)},
			kinds: []string{jitdump.KindMoveUnknown, jitdump.KindMoveSize}, sev: jitdump.Error},
		{name: "duplicate inside a run", recs: []jitdump.Record{load(1, 1, 0x1000, 4), load(2, 2, 0x2000, 4), load(3, 3, 0x3000, 4), load(4, 2, 0x4000, 8), move(5, 2, 8)},
			kinds: []string{jitdump.KindDuplicateIndex}, sev: jitdump.Error},
		{name: "index 0 after the greatest", recs: []jitdump.Record{load(1, math.MaxUint64, 0x1000, 4), load(2, 0, 0x2000, 8), move(3, 0, 8), move(4, math.MaxUint64, 4)}},
		{name: "reserved flags", hdr: jitdump.Header{Flags: 1 << 5}, kinds: []string{jitdump.KindReservedFlags}, sev: jitdump.Error},
		{name: "arch timestamp flag is fine", hdr: jitdump.Header{Flags: jitdump.FlagArchTimestamp}},
		{name: "name without NUL", raw: nameless, kinds: []string{jitdump.KindInvalidRecord}, sev: jitdump.Error},
		{name: "time backwards", recs: []jitdump.Record{load(5, 1, 0x1000, 4), load(4, 2, 0x2000, 4)}, kinds: []string{jitdump.KindTimeBackwards}, sev: jitdump.Warning},
		{name: "debug outside code", recs: []jitdump.Record{debugFor(t, 0x1000, 0x1000, 0x5000), load(2, 1, 0x1000, 4)}, kinds: []string{jitdump.KindDebugOutside}, sev: jitdump.Warning},
		{name: "debug name not text", recs: []jitdump.Record{badName(t), load(2, 1, 0x1000, 4)}, kinds: []string{jitdump.KindDebugName}, sev: jitdump.Warning},
		{name: "unknown record", recs: []jitdump.Record{&jitdump.Unknown{RecordHeader: jitdump.RecordHeader{Type: 12}}}, kinds: []string{jitdump.KindUnknownRecord}, sev: jitdump.Warning},
		{name: "unknown version", hdr: jitdump.Header{Version: 9}, kinds: []string{jitdump.KindVersion}, sev: jitdump.Warning},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.raw
			if data == nil {
				tc.hdr.ByteOrder = le
				data = encode(t, tc.hdr, tc.recs)
			}
			r, err := jitdump.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := jitdump.Check(r)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, f := range findings {
				kinds = append(kinds, f.Kind)
				if f.Severity != tc.sev {
					t.Errorf("%v: severity %v, want %v", f, f.Severity, tc.sev)
				}
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Fatalf("findings %v, want kinds %v", findings, tc.kinds)
			}
		})
	}
}

func TestCheckTruncatedAndCorrupt(t *testing.T) {
	data := encode(t, jitdump.Header{ByteOrder: binary.LittleEndian}, []jitdump.Record{load(1, 1, 0x1000, 100), load(2, 2, 0x2000, 100)})
	for _, tc := range []struct {
		name string
		data []byte
		kind string
		sev  jitdump.Severity
	}{
		{"cut short", data[:len(data)-10], jitdump.KindTruncated, jitdump.Warning},
		{"size below header", append(data[:len(data):len(data)], 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), jitdump.KindCorrupt, jitdump.Error},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := jitdump.NewBytesReader(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			findings, err := jitdump.Check(r)
			if err != nil || len(findings) != 1 || findings[0].Kind != tc.kind || findings[0].Severity != tc.sev {
				t.Fatalf("findings %v, err %v; want one %v %s", findings, err, tc.sev, tc.kind)
			}
		})
	}
}
