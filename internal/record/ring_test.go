package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// rec returns a record of type t and n bytes, its body filled with fill.
func rec(t uint32, n int, fill byte) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint32(b, t)
	binary.LittleEndian.PutUint16(b[6:], uint16(n))
	for i := perfdata.RecordHeaderSize; i < n; i++ {
		b[i] = fill
	}
	return b
}

// ringOf places records in a ring of size bytes starting at running offset
// tail, as the kernel would, and returns the ring and the head.
func ringOf(size int, tail uint64, recs ...[]byte) ([]byte, uint64) {
	data := make([]byte, size)
	head := tail
	for _, r := range recs {
		for _, c := range r {
			data[head%uint64(size)] = c
			head++
		}
	}
	return data, head
}

func TestReadRing(t *testing.T) {
	a, b, c := rec(9, 24, 0xaa), rec(10, 40, 0xbb), rec(3, 16, 0xcc)
	big := rec(9, 64, 0xdd)
	for _, tc := range []struct {
		name    string
		size    int
		tail    uint64
		recs    [][]byte
		headAdj func(uint64) uint64 // corrupts the head
		corrupt func([]byte)        // corrupts the data
		want    [][]byte            // records emitted
		err     string
	}{
		{name: "empty", size: 64, want: nil},
		{name: "in place", size: 128, recs: [][]byte{a, b, c}, want: [][]byte{a, b, c}},
		{name: "wraps in a body", size: 64, tail: 48, recs: [][]byte{a, b}, want: [][]byte{a, b}},
		{name: "wraps at a record's start", size: 64, tail: 40, recs: [][]byte{a, b}, want: [][]byte{a, b}},
		{name: "fills the ring", size: 64, tail: 8, recs: [][]byte{big}, want: [][]byte{big}},
		{name: "counters past 2^32", size: 64, tail: 1<<32 + 56, recs: [][]byte{a, c}, want: [][]byte{a, c}},
		{name: "head too far ahead", size: 64, recs: [][]byte{a}, headAdj: func(h uint64) uint64 { return h + 64 }, err: "ahead of tail"},
		{name: "size zero", size: 64, recs: [][]byte{a}, corrupt: func(d []byte) { d[6], d[7] = 0, 0 }, err: "record size 0"},
		{name: "size unaligned", size: 64, recs: [][]byte{a, c}, corrupt: func(d []byte) { d[6] = 20 }, err: "record size 20"},
		{name: "size past head", size: 64, recs: [][]byte{a}, corrupt: func(d []byte) { d[6] = 32 }, err: "record size 32"},
		{name: "head cuts a header", size: 64, recs: [][]byte{a}, headAdj: func(h uint64) uint64 { return h + 4 }, want: [][]byte{a}, err: "too few for a record header"},
		{name: "second record bad", size: 64, recs: [][]byte{a, c}, corrupt: func(d []byte) { d[24+6] = 0 }, want: [][]byte{a}, err: "record size 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, head := ringOf(tc.size, tc.tail, tc.recs...)
			if tc.headAdj != nil {
				head = tc.headAdj(head)
			}
			if tc.corrupt != nil {
				tc.corrupt(data)
			}
			var got [][]byte
			var scratch []byte
			tail, err := readRing(data, tc.tail, head, &scratch, func(r []byte) error {
				got = append(got, bytes.Clone(r))
				return nil
			})
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d records, want %d", len(got), len(tc.want))
			}
			var n uint64
			for i := range got {
				if !bytes.Equal(got[i], tc.want[i]) {
					t.Errorf("record %d: %x, want %x", i, got[i], tc.want[i])
				}
				n += uint64(len(got[i]))
			}
			if tail != tc.tail+n {
				t.Errorf("tail %d, want %d: past the records emitted", tail, tc.tail+n)
			}
		})
	}
}

func TestReadRingStopsAtEmitError(t *testing.T) {
	data, head := ringOf(64, 0, rec(9, 16, 1), rec(9, 16, 2))
	stop := errors.New("disk full")
	var scratch []byte
	tail, err := readRing(data, 0, head, &scratch, func([]byte) error { return stop })
	if !errors.Is(err, stop) || tail != 0 {
		t.Errorf("tail %d, error %v: want 0 and the emit error, so the record is not lost", tail, err)
	}
}

// FuzzReadRing: whatever the ring holds and whatever head and tail say,
// reading stays inside the ring, emits only records whose size field is
// their length, and moves the tail by exactly what it emitted.
func FuzzReadRing(f *testing.F) {
	data, head := ringOf(64, 48, rec(9, 24, 1), rec(10, 40, 2))
	f.Add(data, uint64(48), head)
	f.Add(make([]byte, 32), uint64(0), uint64(40))
	f.Fuzz(func(t *testing.T, data []byte, tail, head uint64) {
		size := 8
		for size*2 <= len(data) {
			size *= 2
		}
		if len(data) < 8 {
			return
		}
		data = data[:size]
		var scratch []byte
		var n uint64
		got, _ := readRing(data, tail, head, &scratch, func(r []byte) error {
			if int(binary.LittleEndian.Uint16(r[6:])) != len(r) {
				t.Fatalf("emitted %d bytes whose size field says %d", len(r), binary.LittleEndian.Uint16(r[6:]))
			}
			n += uint64(len(r))
			return nil
		})
		if got != tail+n {
			t.Fatalf("tail moved from %d to %d after %d bytes", tail, got, n)
		}
	})
}

// BenchmarkDrain drains a full 512 KiB ring of 200-byte samples (frame
// pointer call chains of 20 frames) into a perf.data file: the work of one
// wakeup of the recorder.
func BenchmarkDrain(b *testing.B) {
	const size = 512 << 10
	var recs [][]byte
	for n := 0; n+200 <= size; n += 200 {
		recs = append(recs, rec(uint32(perfdata.TypeSample), 200, byte(n)))
	}
	data, head := ringOf(size, 100, recs...)
	w, err := perfdata.Create(filepath.Join(b.TempDir(), "perf.data"), perfdata.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Abort()
	s := &session{w: w}
	b.SetBytes(int64(head - 100))
	for b.Loop() {
		if _, err := readRing(data, 100, head, &s.scratch, s.writeRaw); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(s.res.Samples)/b.Elapsed().Seconds(), "samples/s")
}
