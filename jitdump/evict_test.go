package jitdump_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/jitdump"
)

// residentBytes is the process's resident memory now (statm), mapped file
// pages included.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := strconv.ParseInt(strings.Fields(string(b))[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestReadingEvictsBehind: reading a mapped dump of millions of tiny
// records holds a window of it in memory, not all of it, and the records
// read before stay readable.
func TestReadingEvictsBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 64 MB dump")
	}
	const n = 800_000 // 64 MB of records
	p, err := synth.Write(t.TempDir(), synth.Options{Functions: n})
	if err != nil {
		t.Fatal(err)
	}
	f, err := jitdump.Open(p.Dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.ReuseRecord = true // nothing allocated a record: the mapping is what grows
	before := residentBytes(t)
	var first []byte
	loads := 0
	for {
		rec, err := f.Next()
		if err != nil {
			break
		}
		if l, ok := rec.(*jitdump.CodeLoad); ok {
			if loads == 0 {
				first = l.Code
			}
			loads++
		}
	}
	grown := residentBytes(t) - before
	size, _ := os.Stat(p.Dump)
	if loads != n {
		t.Fatalf("%d loads, want %d", loads, n)
	}
	if grown > size.Size()*3/4 {
		t.Errorf("reading a %d-byte dump grew the resident memory by %d bytes: want well under its size", size.Size(), grown)
	}
	if len(first) != synth.CodeSize || first[len(first)-1] != 0xc3 {
		t.Errorf("the first function's code, evicted, reads back as % x", first)
	}
}
