package perfdata_test

import (
	"io"
	"os"
	"testing"

	dumpsynth "github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
)

// TestReadingEvictsBehind: reading a mapped recording of a million
// samples (inject copies one whole) holds a window of it in memory, not all
// of it, and the records read before stay readable.
func TestReadingEvictsBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads a 32 MB recording")
	}
	const n = 500_000 // 32 MB of samples
	p, err := dumpsynth.Write(t.TempDir(), dumpsynth.Options{Functions: 1, Samples: n})
	if err != nil {
		t.Fatal(err)
	}
	f, err := perfdata.Open(p.Data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var first perfdata.RawRecord
	samples := 0
	for {
		rec, err := f.NextRaw()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Type() == perfdata.TypeSample {
			if samples == 0 {
				first = rec
			}
			samples++
		}
	}
	resident := int64(fixtures.MappedKB(t, p.Data)) << 10
	size, _ := os.Stat(p.Data)
	if samples != n {
		t.Fatalf("%d samples, want %d", samples, n)
	}
	// The window read before its pages are dropped is 8 MB.
	if resident > size.Size()/3 {
		t.Errorf("reading a %d-byte recording left %d bytes of it resident: want at most a third", size.Size(), resident)
	}
	if s, ok := f.Decode(first).(*perfdata.Sample); !ok || s.IP != dumpsynth.Base {
		t.Errorf("the first sample, evicted, reads back as %+v", f.Decode(first))
	}
}
