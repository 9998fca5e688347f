package perfdata_test

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// FuzzReader: no input panics or makes the readers allocate much more than
// its size; reading in place, through io.ReaderAt and (in pipe mode) as a
// stream agree; decoded records encode, and time order delivers them all.
func FuzzReader(f *testing.F) {
	for _, st := range []perfdata.SampleType{
		perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleID | perfdata.SamplePeriod | perfdata.SampleCallchain,
		perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU | perfdata.SampleRead | perfdata.SampleRaw,
		// perf record --call-graph dwarf, and every variable-size field before the user stack.
		perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCallchain | perfdata.SampleID |
			perfdata.SampleRegsUser | perfdata.SampleStackUser | perfdata.SampleDataSrc,
		perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleRaw | perfdata.SampleBranchStack | perfdata.SampleRegsUser |
			perfdata.SampleStackUser | perfdata.SampleWeight,
	} {
		attrs := synthAttrs(st, perfdata.FormatGroup|perfdata.FormatID|perfdata.FormatTotalTimeEnabled, true)
		for _, pipe := range []bool{false, true} {
			data := writeSynth(f, attrs, synth(attrs, true), pipe)
			f.Add(data)
			f.Add(data[:len(data)-5])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		readEveryWay(t, data)
		runtime.ReadMemStats(&ms)
		// Buffers and slabs cost a fixed amount; beyond that, allocation
		// must follow the input, not the sizes it claims.
		if got, limit := ms.TotalAlloc-before, uint64(4<<20+64*len(data)); got > limit {
			t.Errorf("reading %d bytes allocated %d bytes", len(data), got)
		}
	})
}

func readEveryWay(t *testing.T, data []byte) {
	br, berr := perfdata.NewBytesReader(data)
	ar, aerr := perfdata.NewReader(bytes.NewReader(data), int64(len(data)))
	if fmt.Sprint(berr) != fmt.Sprint(aerr) {
		t.Fatalf("opening: in place %v, through ReaderAt %v", berr, aerr)
	}
	if berr != nil {
		return
	}
	want, wantErr := rawRecords(br)
	if got, err := rawRecords(ar); fmt.Sprint(got, err) != fmt.Sprint(want, wantErr) {
		t.Fatalf("through ReaderAt: %d records, %v; in place: %d, %v", len(got), err, len(want), wantErr)
	}
	if br.Header().Pipe() {
		pr, err := perfdata.NewPipeReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := rawRecords(pr); fmt.Sprint(got, err) != fmt.Sprint(want, wantErr) {
			t.Fatalf("as a stream: %d records, %v; in place: %d, %v", len(got), err, len(want), wantErr)
		}
	}
	br.BuildIDs()
	br.EventDescs()
	br.StringFeature(perfdata.FeatureOSRelease)

	r, _ := perfdata.NewBytesReader(data)
	order := r.TimeOrder()
	n := 0
	for {
		rec, err := order.Next()
		if err != nil {
			if fmt.Sprint(err) != fmt.Sprint(wantErr) && !(err == io.EOF && wantErr == nil) {
				t.Fatalf("time order ends with %v, file order with %v", err, wantErr)
			}
			break
		}
		n++
		if _, err := perfdata.AppendRecord(nil, rec); err != nil {
			if _, ok := rec.(*perfdata.Sample); !ok {
				t.Fatalf("%T read does not encode: %v", rec, err)
			}
		}
	}
	if n != len(want) {
		t.Fatalf("time order delivered %d records, file order %d", n, len(want))
	}
}

// rawRecords returns every record's offset and bytes, and the error that
// ended reading (nil at a clean end).
func rawRecords(r *perfdata.Reader) ([]string, error) {
	var out []string
	for {
		rec, err := r.NextRaw()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, fmt.Sprintf("%d:%x", rec.Offset, rec.Bytes))
	}
}
