package jitdump_test

import (
	"os"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

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
	f.ReuseRecord = true
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
	resident := int64(fixtures.MappedKB(t, p.Dump)) << 10
	size, _ := os.Stat(p.Dump)
	if loads != n {
		t.Fatalf("%d loads, want %d", loads, n)
	}
	// The window read before its pages are dropped is 8 MB.
	if resident > size.Size()/4 {
		t.Errorf("reading a %d-byte dump left %d bytes of it resident: want at most a quarter", size.Size(), resident)
	}
	if len(first) != synth.CodeSize || first[len(first)-1] != 0xc3 {
		t.Errorf("the first function's code, evicted, reads back as % x", first)
	}
}
