package perfdata_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestTruncatedData cuts a file at several places in and after its data
// section, as a copy taken while perf record ran or a full disk leaves it:
// the records whole before the cut are read, then an error matching
// ErrTruncated names the file, where the whole records end and how much of
// the data section the header declares is present. A file cut inside its
// attrs cannot be read at all, and says so.
func TestTruncatedData(t *testing.T) {
	attrs := synthAttrs(perfdata.SampleIP|perfdata.SampleTID|perfdata.SampleTime|perfdata.SampleID|perfdata.SamplePeriod|perfdata.SampleCallchain, 0, true)
	good := writeSynth(t, attrs, synth(attrs, true), false)
	r, err := perfdata.NewBytesReader(good)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := rawRecords(r)
	if err != nil {
		t.Fatal(err)
	}
	data := r.Header().Data
	var offs []int64 // of each record, then the data's end
	r, _ = perfdata.NewBytesReader(good)
	for rec, err := r.NextRaw(); err == nil; rec, err = r.NextRaw() {
		offs = append(offs, rec.Offset)
	}
	offs = append(offs, int64(data.Offset+data.Size))
	const sample = 5 // synth's sixth record

	tests := []struct {
		name    string
		size    int64  // where the file is cut
		records int    // whole before the cut
		text    string // in the error
	}{
		{"no record", int64(data.Offset), 0, "between two records"},
		{"in a record header", offs[2] + 5, 2, "5 bytes into a record of 8"},
		{"in the sample", offs[sample] + 20, sample, "20 bytes into a record of"},
		{"after the sample", offs[sample+1], sample + 1, "between two records"},
		{"one byte short", offs[len(offs)-1] - 1, len(whole) - 1, "bytes into a record of"},
		{"features missing", offs[len(offs)-1], len(whole), "file ends inside the feature sections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cut := good[:tt.size]
			for _, mode := range []string{"bytes", "readerat"} {
				var r *perfdata.Reader
				var err error
				if mode == "bytes" {
					r, err = perfdata.NewBytesReader(cut)
				} else {
					r, err = perfdata.NewReader(bytes.NewReader(cut), int64(len(cut)))
				}
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				r.SetName("cut.data")
				got, err := rawRecords(r)
				if !slices.Equal(got, whole[:tt.records]) {
					t.Errorf("%s: read %d records, want the %d whole before the cut", mode, len(got), tt.records)
				}
				var te *perfdata.TruncatedError
				if !errors.As(err, &te) || !errors.Is(err, perfdata.ErrTruncated) {
					t.Fatalf("%s: reading ends with %v, want a *TruncatedError", mode, err)
				}
				for _, want := range []string{"cut.data: ", tt.text} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: %q does not say %q", mode, err, want)
					}
				}
				if len(r.Features()) != 0 {
					t.Errorf("%s: %d feature sections read from a file that has none whole", mode, len(r.Features()))
				}
				if tt.records == len(whole) {
					continue // the data is whole: the features are what is missing
				}
				if te.Off != offs[tt.records] {
					t.Errorf("%s: %v: offset %#x, want %#x, where the whole records end", mode, err, te.Off, offs[tt.records])
				}
				if te.Data == nil || *te.Data != data || te.DataHave != tt.size-int64(data.Offset) {
					t.Errorf("%s: %v: data section %+v with %d bytes, want %+v with %d", mode, err, te.Data, te.DataHave, data, tt.size-int64(data.Offset))
				}
				if want := fmt.Sprintf("%d of the %d bytes", te.DataHave, data.Size); !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %q does not say %q", mode, err, want)
				}
			}
		})
	}

	// Without whole attrs nothing can be decoded: a clear error, no records.
	attrsAt := int64(r.Header().Attrs.Offset)
	_, err = perfdata.NewBytesReader(good[:attrsAt+10])
	if !errors.Is(err, perfdata.ErrTruncated) || !strings.Contains(fmt.Sprint(err), "file ends inside the attrs section") {
		t.Errorf("a file cut in its attrs opens with %v, want an error saying the attrs section is cut", err)
	}
}
