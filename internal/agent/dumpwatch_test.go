package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// TestDumpWatch: a dump written in pieces, as a runtime's buffer flushes
// it, has caught up with a time once a whole record of that time or later
// is in the file, and only then.
func TestDumpWatch(t *testing.T) {
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 10, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ends []int // the file's length after each record
	for _, ts := range []uint64{100, 200, 300} {
		load := &jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: ts}, Pid: 10, Tid: 10, VMA: ts, CodeAddr: ts, CodeSize: 4,
			CodeIndex: ts, Name: "f", Code: []byte{1, 2, 3, 4}}
		if err := w.WriteRecord(load); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, buf.Len())
	}
	whole := buf.Bytes()
	copies := t.TempDir()
	path := filepath.Join(copies, "jit-10.dump")
	dw := newDumpWatch(copies, false)
	for _, tc := range []struct {
		name   string
		length int // of the file so far
		at     uint64
		want   bool
	}{
		{"the header only", jitdump.HeaderSize, 50, false},
		{"half the first record", jitdump.HeaderSize + 20, 50, false},
		{"the first record", ends[0], 50, true},
		{"not yet 150", ends[0], 150, false},
		{"into the second", ends[0] + 30, 150, false},
		{"the second record", ends[1], 150, true},
		{"200 exactly", ends[1], 200, true},
		{"the third in part", ends[2] - 1, 250, false},
		{"all", ends[2], 250, true},
		{"past the end", ends[2], 301, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, whole[:tc.length], 0o644); err != nil {
				t.Fatal(err)
			}
			if got := dw.caughtUp(10, path, tc.at, 1); got != tc.want {
				t.Errorf("caught up with %d at %d bytes: %v, want %v", tc.at, tc.length, got, tc.want)
			}
		})
	}
	// Read incrementally: the offset is the end of the last whole record.
	if p := dw.dumps[path]; p.off != int64(ends[2]) || p.last != 300 {
		t.Errorf("read to offset %d (time %d), want %d (300)", p.off, p.last, ends[2])
	}
	dw.forget(2)
	if len(dw.dumps) != 0 {
		t.Errorf("a dump no window needs is kept")
	}
	if !dw.caughtUp(10, filepath.Join(copies, "gone.dump"), 1, 3) {
		t.Errorf("a dump that cannot be read is waited for")
	}
}
