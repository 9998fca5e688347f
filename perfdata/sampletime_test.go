package perfdata_test

import (
	"encoding/binary"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestSampleTime reads HEADER_SAMPLE_TIME back, and says so when a
// recording has none or one too short to hold both times.
func TestSampleTime(t *testing.T) {
	both := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 1500), 9000)
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
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			first, last, ok, err := f.SampleTime()
			if first != tc.first || last != tc.last || ok != tc.ok {
				t.Errorf("SampleTime = %d, %d, %v; want %d, %d, %v", first, last, ok, tc.first, tc.last, tc.ok)
			}
			if (err == nil) != (tc.err == "") || err != nil && (!strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path)) {
				t.Errorf("error %v, want one naming the file and %q", err, tc.err)
			}
		})
	}
}
