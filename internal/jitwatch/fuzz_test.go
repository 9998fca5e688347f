package jitwatch

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// FuzzWholeRecords: a dump being copied is its runtime's, any bytes; a
// copy of it, taken as it grows, ends where a record does, within what the
// file holds, never going back, and where a copy of it whole would end;
// sizes that make no sense have it copied as it is.
func FuzzWholeRecords(f *testing.F) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		var buf bytes.Buffer
		w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 1, Timestamp: 1, ByteOrder: o})
		if err != nil {
			f.Fatal(err)
		}
		for i, name := range []string{"f", "a longer name", "g"} {
			if _, err := w.Load(&jitdump.Function{Name: name, Addr: 0x1000 * uint64(i+1), Code: bytes.Repeat([]byte{0xc3}, 10*(i+1))}); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes(), uint16(jitdump.HeaderSize+30))
		f.Add(buf.Bytes()[:buf.Len()-5], uint16(buf.Len()/2))
	}
	path := filepath.Join(f.TempDir(), "jit-1.dump")
	src, err := os.Create(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { src.Close() })
	f.Fuzz(func(t *testing.T, data []byte, part uint16) {
		// The file overwritten in place: one truncated to nothing and
		// written again is flushed to disk when closed (ext4's
		// auto_da_alloc), a hundred times slower.
		if _, err := src.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		if err := src.Truncate(int64(len(data))); err != nil {
			t.Fatal(err)
		}
		whole := &tail{src: src, dump: true}
		end := whole.wholeRecords(int64(len(data)))
		growing := &tail{src: src, dump: true}
		last := int64(0)
		p := int64(min(int(part), len(data)))
		for _, size := range []int64{p, max(p, int64(len(data))/2), int64(len(data))} {
			got := growing.wholeRecords(size)
			switch {
			case !growing.dump:
				if got != size {
					t.Fatalf("at %d bytes, copied as it is: up to %d", size, got)
				}
				return
			case got > size || got < last:
				t.Fatalf("at %d bytes: up to %d, after %d", size, got, last)
			}
			last = max(last, got)
		}
		if whole.dump && last != end {
			t.Fatalf("copied as it grew up to %d, whole up to %d", last, end)
		}
	})
}
