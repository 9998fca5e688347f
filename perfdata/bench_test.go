package perfdata_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfdata"
)

var big struct {
	once    sync.Once
	dir     string
	path    string
	records int
	samples int
}

// bigRecording records two node processes for about three seconds at
// 20 kHz with callchains: over 100,000 samples, made when first needed and
// removed when the benchmarks end.
func bigRecording(b *testing.B) (path string, records int) {
	big.once.Do(func() {
		node, err := exec.LookPath("node")
		if err != nil {
			b.Skipf("node is not installed: %v", err)
		}
		if big.dir, err = os.MkdirTemp("", "perfdata-bench-"); err != nil {
			b.Fatal(err)
		}
		big.path = filepath.Join(big.dir, "perf.data")
		w := fixtures.Workload(b, "newfunctions.js")
		fixtures.Perf(b, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "20000", "-g", "-o", big.path,
			"--", "/bin/sh", "-c", `"$1" "$2" 1700 & "$1" "$2" 1700; wait`, "sh", node, w)
		f, err := perfdata.Open(big.path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for {
			rec, err := f.NextRaw()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			big.records++
			if rec.Type() == perfdata.TypeSample {
				big.samples++
			}
		}
	})
	if big.samples < 100000 {
		b.Fatalf("the recording has %d samples, want at least 100,000", big.samples)
	}
	return big.path, big.records
}

func TestMain(m *testing.M) {
	code := m.Run()
	if big.dir != "" {
		os.RemoveAll(big.dir)
	}
	os.Exit(code)
}

// BenchmarkRead reads a recording of over 100,000 samples: the records'
// bytes only (what copying needs), decoded, decoded from a stream, in time
// order, and copied to a new file.
func BenchmarkRead(b *testing.B) {
	path, records := bigRecording(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d records, %d samples, %d bytes", records, big.samples, st.Size())
	open := func(b *testing.B) *perfdata.File {
		f, err := perfdata.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.ReuseRecord = true
		return f
	}
	drain := func(b *testing.B, next func() (perfdata.Record, error)) {
		var ips uint64
		for {
			rec, err := next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if s, ok := rec.(*perfdata.Sample); ok {
				ips += s.IP + uint64(len(s.Callchain))
			}
		}
		if ips == 0 {
			b.Fatal("no samples")
		}
	}
	bench := func(name string, run func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(st.Size())
			for b.Loop() {
				run(b)
			}
			b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}

	bench("raw", func(b *testing.B) {
		f := open(b)
		defer f.Close()
		for {
			if _, err := f.NextRaw(); err != nil {
				break
			}
		}
	})
	bench("decode", func(b *testing.B) {
		f := open(b)
		defer f.Close()
		drain(b, f.Next)
	})
	bench("decode-stream", func(b *testing.B) {
		file, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer file.Close()
		r, err := perfdata.NewReader(file, st.Size())
		if err != nil {
			b.Fatal(err)
		}
		r.ReuseRecord = true
		drain(b, r.Next)
	})
	bench("time-order", func(b *testing.B) {
		f := open(b)
		defer f.Close()
		drain(b, f.TimeOrder().Next)
	})
	out := filepath.Join(b.TempDir(), "copy.data")
	bench("copy", func(b *testing.B) {
		f := open(b)
		defer f.Close()
		w, err := perfdata.Create(out, f.Options())
		if err != nil {
			b.Fatal(err)
		}
		if err := w.Copy(f.Reader, nil); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	})
}
