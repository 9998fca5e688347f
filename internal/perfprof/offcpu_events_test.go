package perfprof_test

import (
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// offCPUEvents are the events of a recording as record --off-cpu writes
// one, of process 7: cpu, CPU samples each worth period ns, and sw, a
// sample at every switch-out, with the switch records.
type offCPUEvents struct{ cpu, sw *perfdata.Attr }

func newOffCPUEvents(period uint64) offCPUEvents {
	st := perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod
	return offCPUEvents{
		cpu: &perfdata.Attr{Type: 1, Config: 0, SamplePeriod: period, SampleType: st, IDs: []uint64{1},
			Flags: perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask | perfdata.AttrSampleIDAll},
		sw: &perfdata.Attr{Type: 1, Config: 3, SamplePeriod: 1, SampleType: st, IDs: []uint64{2},
			Flags: perfdata.AttrSampleIDAll | perfdata.AttrContextSwitch},
	}
}

// sample is a sample of event a by thread tid at ip.
func (e offCPUEvents) sample(a *perfdata.Attr, tid uint32, at, ip uint64) *perfdata.Sample {
	return &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: a, Misc: perfdata.MiscUser},
		ID: a.IDs[0], IP: ip, Pid: 7, Tid: tid, Time: at, Period: a.SamplePeriod}
}

// switchRec is a switch of thread tid: in, or out (misc's MiscSwitchOut),
// preempted or not.
func (e offCPUEvents) switchRec(tid uint32, at uint64, misc uint16) *perfdata.Switch {
	return &perfdata.Switch{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSwitch, Attr: e.sw, Misc: misc},
		Trailer: perfdata.Trailer{Pid: 7, Tid: tid, Time: at, ID: 2}}
}

// writeRecording writes recs, of attrs' events, to path.
func writeRecording(t *testing.T, path string, attrs []*perfdata.Attr, recs []perfdata.Record) {
	t.Helper()
	w, err := perfdata.Create(path, perfdata.Options{Attrs: attrs})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
