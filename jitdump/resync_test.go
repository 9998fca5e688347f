package jitdump_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// loadsDump writes n functions, each a DEBUG_INFO and a CODE_LOAD timed by
// the writer's clock, and returns the dump with the offsets of its loads.
func loadsDump(t *testing.T, n int, code func(i int) []byte) (data []byte, loads []int64) {
	t.Helper()
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, jitdump.Header{ByteOrder: binary.LittleEndian, Pid: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		addr := 0x10000 + uint64(i)*0x100
		if _, err := w.Load(&jitdump.Function{Name: fmt.Sprintf("fn%d", i), Addr: addr, Code: code(i),
			Lines: []jitdump.DebugEntry{{Addr: addr, Line: uint32(i + 1), File: "a.js"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r, err := jitdump.NewBytesReader(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for rec, err := r.Next(); err == nil; rec, err = r.Next() {
		if _, ok := rec.(*jitdump.CodeLoad); ok {
			loads = append(loads, rec.Header().Offset)
		}
	}
	return b.Bytes(), loads
}

// loaded reads data in place and returns the names it loads, the skipped
// records' offsets and sizes, and the error that ended reading.
func loaded(t *testing.T, data []byte) (names []string, skipped [][2]int64, err error) {
	t.Helper()
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return names, skipped, err
		}
		switch rec := rec.(type) {
		case *jitdump.CodeLoad:
			names = append(names, rec.Name)
		case *jitdump.Invalid:
			if rec.Skipped {
				skipped = append(skipped, [2]int64{rec.Offset, int64(rec.Size)})
			}
		}
	}
}

// TestResync: a CODE_LOAD whose total_size is corrupt in the middle of a
// dump is skipped, the records after it read, every reader agreeing and
// Check reporting it; a dump whose last record the end cuts is still one
// being written, even when what is there of that record holds what reads
// as records (timed before the records around them).
func TestResync(t *testing.T) {
	const n = 20
	plain := func(int) []byte { return []byte{0x55, 0x48, 0x89, 0xe5, 0xc3} }
	good, loads := loadsDump(t, n, plain)
	recSize := func(data []byte, off int64) int64 { return int64(binary.LittleEndian.Uint32(data[off+4:])) }
	setSize := func(data []byte, i int, v uint32) []byte {
		d := bytes.Clone(data)
		binary.LittleEndian.PutUint32(d[loads[i]+4:], v)
		return d
	}
	all := func(except ...int) []string {
		var out []string
		for i := range n {
			if !slices.Contains(except, i) {
				out = append(out, fmt.Sprintf("fn%d", i))
			}
		}
		return out
	}

	// The code of a load that holds two loads timed 1 ns after the clock's
	// start: what a search forward could take for records.
	fake, _ := loadsDump(t, 2, plain)
	fake = fake[jitdump.HeaderSize:]
	for off := 0; off < len(fake); off += int(binary.LittleEndian.Uint32(fake[off+4:])) {
		binary.LittleEndian.PutUint64(fake[off+8:], 1)
	}
	withFake, fakeLoads := loadsDump(t, n, func(i int) []byte {
		if i == n-1 {
			return fake
		}
		return plain(i)
	})

	tests := []struct {
		name    string
		data    []byte
		names   []string
		skipped [][2]int64 // offset, bytes
		trunc   bool       // reading ends as in a dump still being written
		corrupt bool       // reading ends at corruption
	}{
		{"sound", good, all(), nil, false, false},
		{"size far past the end", setSize(good, 7, 0xfffffff0), all(7), [][2]int64{{loads[7], recSize(good, loads[7])}}, false, false},
		{"size just past the end", setSize(good, 7, uint32(int64(len(good))-loads[7]+8)), all(7), [][2]int64{{loads[7], recSize(good, loads[7])}}, false, false},
		{"size below the header", setSize(good, 7, 3), all(7), [][2]int64{{loads[7], recSize(good, loads[7])}}, false, false},
		{"first load", setSize(good, 0, 0), all(0), [][2]int64{{loads[0], recSize(good, loads[0])}}, false, false},
		{"two loads", setSize(setSize(good, 3, 1<<30), 12, 9), all(3, 12),
			[][2]int64{{loads[3], recSize(good, loads[3])}, {loads[12], recSize(good, loads[12])}}, false, false},
		{"second to last load", setSize(good, n-2, 1<<30), all(n - 2), [][2]int64{{loads[n-2], recSize(good, loads[n-2])}}, false, false},
		{"corrupt, then cut", setSize(good, 4, 1<<30)[:loads[15]+30], all(4)[:14], [][2]int64{{loads[4], recSize(good, loads[4])}}, true, false},
		{"last load cut", good[:len(good)-3], all(n - 1), nil, true, false},
		{"last load's size corrupt", setSize(good, n-1, 1<<30), all(n - 1), nil, false, true},
		{"cut in a load holding old records", withFake[:fakeLoads[n-1]+int64(len(fake))], all(n - 1), nil, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			readEveryWay(t, tt.data) // stream, Scan and Next agree
			names, skipped, err := loaded(t, tt.data)
			if !slices.Equal(names, tt.names) {
				t.Errorf("loads %q\nwant %q", names, tt.names)
			}
			if fmt.Sprint(skipped) != fmt.Sprint(tt.skipped) {
				t.Errorf("skipped (offset, bytes) %v, want %v", skipped, tt.skipped)
			}
			var fe *jitdump.FormatError
			if errors.Is(err, jitdump.ErrTruncated) != tt.trunc || errors.As(err, &fe) != tt.corrupt {
				t.Errorf("reading ends with %v; want truncation %t, corruption %t", err, tt.trunc, tt.corrupt)
			}

			r, _ := jitdump.NewBytesReader(tt.data)
			findings, err := jitdump.Check(r)
			if err != nil {
				t.Fatal(err)
			}
			var found [][2]int64
			for _, f := range findings {
				if f.Kind == jitdump.KindSkipped {
					if !strings.Contains(f.Msg, fmt.Sprintf("the %d bytes before it are skipped", tt.skipped[len(found)][1])) {
						t.Errorf("finding %v does not count the bytes skipped", f)
					}
					found = append(found, [2]int64{f.Offset, tt.skipped[len(found)][1]})
				}
			}
			if fmt.Sprint(found) != fmt.Sprint(tt.skipped) {
				t.Errorf("Check finds skipped records at %v, want %v", found, tt.skipped)
			}
		})
	}
}

// TestResyncRealDump: in a real runtime's dump (PHP's), a corrupt size in
// any of a few loads in the middle loses that load alone.
func TestResyncRealDump(t *testing.T) {
	good, err := os.ReadFile("../testdata/php-fib_mandel.dump")
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := loaded(t, good)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := jitdump.NewBytesReader(good)
	var loads []int64
	for rec, err := r.Next(); err == nil; rec, err = r.Next() {
		if _, ok := rec.(*jitdump.CodeLoad); ok {
			loads = append(loads, rec.Header().Offset)
		}
	}
	if len(loads) < 10 {
		t.Fatalf("the dump has %d loads, want at least 10", len(loads))
	}
	for _, i := range []int{1, len(loads) / 3, len(loads) / 2, len(loads) - 2} {
		for _, size := range []uint32{0, 15, 0x7fffffff} {
			data := bytes.Clone(good)
			binary.LittleEndian.PutUint32(data[loads[i]+4:], size)
			got, skipped, err := loaded(t, data)
			if err != nil || len(skipped) != 1 || skipped[0][0] != loads[i] {
				t.Errorf("load %d of size %d: skipped %v, error %v", i, size, skipped, err)
			}
			if w := slices.Delete(slices.Clone(want), i, i+1); !slices.Equal(got, w) {
				t.Errorf("load %d of size %d: %d loads read, want the %d but %q", i, size, len(got), len(w), want[i])
			}
		}
	}
}
