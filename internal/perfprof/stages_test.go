package perfprof

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/stages"
	"github.com/jitprof/jitprof/perfdata"
)

// TestStagesOnePass: four stages come from the two reads of one run (the
// address spaces, then the samples), not two per stage, and each stage's
// profile is the one a run over its times alone gives.
func TestStagesOnePass(t *testing.T) {
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod,
		Flags:      perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask | perfdata.AttrSampleIDAll}
	const first, n = 1_000_000_000, 400 // a sample every 10 ms from 1 s
	when := make([]byte, 16)
	binary.LittleEndian.PutUint64(when, first)
	binary.LittleEndian.PutUint64(when[8:], first+(n-1)*10_000_000)
	data := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr},
		Features: []perfdata.Feature{{ID: perfdata.FeatureSampleTime, Data: when}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(n) {
		s := &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSample, Attr: attr, Misc: perfdata.MiscUser},
			IP: 0x1000 + 0x10*(i%7), Pid: 7, Tid: 7, Time: first + i*10_000_000, Period: 1}
		if err := w.WriteRecord(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	specs, err := stages.Parse([]string{"a=0,1", "b=1,2", "c=2,3", "d=3,"})
	if err != nil {
		t.Fatal(err)
	}
	before := passes.Load()
	results, err := RunStages(Options{Input: data}, specs)
	if err != nil {
		t.Fatal(err)
	}
	if got := passes.Load() - before; got != 2 {
		t.Errorf("four stages read the recording %d times, want 2", got)
	}
	want := []int{100, 100, 100, 100}
	for i, res := range results {
		if res.Kept != want[i] {
			t.Errorf("stage %s kept %d samples, want %d", specs[i].Name, res.Kept, want[i])
		}
		f := Filter{Start: first + specs[i].Start, End: first + specs[i].End}
		if specs[i].End == 0 {
			f.End = 0
		}
		alone, err := Run(Options{Input: data, Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		if alone.Kept != res.Kept || len(alone.Profile.Samples) != len(res.Profile.Samples) {
			t.Errorf("stage %s: %d samples in %d stacks, alone %d in %d", specs[i].Name, res.Kept, len(res.Profile.Samples), alone.Kept, len(alone.Profile.Samples))
		}
	}
}
