package perfdata_test

import (
	"bytes"
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

// BenchmarkDecodeDWARF decodes samples as perf record --call-graph dwarf
// writes them (20 registers, 8 KiB of user stack, 5,000 bytes of it
// real), in place and as a stream, with ReuseRecord: the registers are
// copied, the stack is not.
func BenchmarkDecodeDWARF(b *testing.B) {
	const samples = 2000
	a := dwarfAttr(0xff0fff, 8192, perfdata.SampleDataSrc)
	path := filepath.Join(b.TempDir(), "dwarf.data")
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{a}})
	if err != nil {
		b.Fatal(err)
	}
	stack := make([]byte, 8192)
	for i := range samples {
		s := &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: a, Misc: perfdata.MiscUser}, IP: 0x401000 + uint64(i), Time: uint64(i), ID: 5,
			RegsABI: perfdata.RegsABI64, RegsUser: regsFor(0xff0fff), StackUserSize: 8192, StackUser: stack[:5000], Rest: make([]byte, 8)}
		if err := w.WriteRecord(s); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"bytes", "stream"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var r *perfdata.Reader
				if mode == "bytes" {
					r, err = perfdata.NewBytesReader(data)
				} else {
					r, err = perfdata.NewReader(bytes.NewReader(data), int64(len(data)))
				}
				if err != nil {
					b.Fatal(err)
				}
				r.ReuseRecord = true
				var sps uint64
				for {
					rec, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					sp, _ := rec.(*perfdata.Sample).UserRegister(perfdata.RegX86SP)
					sps += sp + uint64(len(rec.(*perfdata.Sample).StackUser))
				}
				if sps == 0 {
					b.Fatal("no registers read")
				}
			}
			b.ReportMetric(float64(samples)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
