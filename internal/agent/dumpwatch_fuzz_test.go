package agent

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// FuzzDumpProgress: a dump is its runtime's, any bytes, read while it is
// written; read in two steps, cut anywhere, it ends where one read of it
// whole ends: the same last time, and an offset within the file.
func FuzzDumpProgress(f *testing.F) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		var buf bytes.Buffer
		w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 10, Timestamp: 1, ByteOrder: o})
		if err != nil {
			f.Fatal(err)
		}
		for _, ts := range []uint64{100, 300, 200} {
			load := &jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: ts}, Pid: 10, Tid: 10, VMA: ts, CodeAddr: ts, CodeSize: 4,
				CodeIndex: ts, Name: "f", Code: []byte{1, 2, 3, 4}}
			if err := w.WriteRecord(load); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes(), uint16(jitdump.HeaderSize+20))
		f.Add(buf.Bytes(), uint16(buf.Len()-1))
	}
	path := filepath.Join(f.TempDir(), "jit-10.dump")
	file, err := os.Create(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Close() })
	// write makes b the file's bytes, overwritten in place: a file
	// truncated to nothing and written again is flushed to disk when
	// closed (ext4's auto_da_alloc), a hundred times slower.
	write := func(t *testing.T, b []byte) {
		if _, err := file.WriteAt(b, 0); err != nil {
			t.Fatal(err)
		}
		if err := file.Truncate(int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		write(t, data)
		whole := &dumpProgress{f: file}
		if err := whole.advance(); err != nil {
			return
		}
		if whole.off > int64(len(data)) {
			t.Fatalf("read to %d of %d bytes", whole.off, len(data))
		}
		write(t, data[:min(int(cut), len(data))])
		// Cut inside a record whose fields do not fit its total_size,
		// the dump may say it is corrupt: caughtUp then waits for it no
		// longer, and reads on when it has grown.
		steps := &dumpProgress{f: file}
		steps.advance()
		write(t, data)
		if err := steps.advance(); err != nil {
			t.Fatalf("read whole, then cut at %d and read again: %v", cut, err)
		}
		if steps.last != whole.last || steps.off != whole.off || steps.arch != whole.arch {
			t.Fatalf("cut at %d: read to %d, last time %d; whole: to %d, last time %d", cut, steps.off, steps.last, whole.off, whole.last)
		}
	})
}
