package perfdata_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestSampleTime reads HEADER_SAMPLE_TIME back, and says so when a
// recording has none or one too short to hold both times.
func TestSampleTime(t *testing.T) {
	both := perfdata.SampleTimeFeature(1500, 9000).Data
	for _, tc := range []struct {
		name        string
		features    []perfdata.Feature
		first, last uint64
		ok          bool
		err         string
	}{
		{"present", []perfdata.Feature{{ID: perfdata.FeatureSampleTime, Data: both}}, 1500, 9000, true, ""},
		{"absent", nil, 0, 0, false, ""},
		{"short", []perfdata.Feature{{ID: perfdata.FeatureSampleTime, Data: both[:12]}}, 0, 0, true, "sample time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			attr := &perfdata.Attr{Type: 1, SamplePeriod: 1, SampleType: perfdata.SampleIP, IDs: []uint64{1}}
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: tc.features})
			if err != nil {
				t.Fatal(err)
			}
			first, last, ok, err := closeAndOpen(t, w, path).SampleTime()
			if first != tc.first || last != tc.last || ok != tc.ok {
				t.Errorf("SampleTime = %d, %d, %v; want %d, %d, %v", first, last, ok, tc.first, tc.last, tc.ok)
			}
			if (err == nil) != (tc.err == "") || err != nil && (!strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path)) {
				t.Errorf("error %v, want one naming the file and %q", err, tc.err)
			}
		})
	}
}

// TestAddFeature: a section added once the data is written, as record adds
// HEADER_SAMPLE_TIME, takes the place of one of its ID given at Create,
// beside the others; a pipe has none to add.
func TestAddFeature(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1, SampleType: perfdata.SampleIP, IDs: []uint64{1}}
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: []perfdata.Feature{
		perfdata.StringFeatureOf(perfdata.FeatureHostname, "h"), perfdata.SampleTimeFeature(1, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddFeature(perfdata.SampleTimeFeature(1500, 9000)); err != nil {
		t.Fatal(err)
	}
	f := closeAndOpen(t, w, path)
	if first, last, ok, err := f.SampleTime(); first != 1500 || last != 9000 || !ok || err != nil {
		t.Errorf("SampleTime = %d, %d, %v, %v; want the one added, 1500, 9000", first, last, ok, err)
	}
	if host, ok, err := f.StringFeature(perfdata.FeatureHostname); host != "h" || !ok || err != nil {
		t.Errorf("host name = %q, %v, %v; want the one given at Create", host, ok, err)
	}

	pipe, err := perfdata.Create(filepath.Join(t.TempDir(), "pipe.data"), perfdata.Options{Pipe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pipe.Abort()
	if err := pipe.AddFeature(perfdata.SampleTimeFeature(1, 2)); err == nil {
		t.Error("a pipe took a feature section")
	}
}

// closeAndOpen closes w, writing path, and opens the file for reading.
func closeAndOpen(t *testing.T, w *perfdata.Writer, path string) *perfdata.File {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
