package perfdata_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// synthAttrs returns two events of sample type st, as perf record makes
// for -e a,b: ids 11, 12 and 21, 22.
func synthAttrs(st perfdata.SampleType, rf perfdata.ReadFormat, idAll bool) []*perfdata.Attr {
	flags := perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrUseClockID
	if idAll {
		flags |= perfdata.AttrSampleIDAll
	}
	attrs := []*perfdata.Attr{
		{Type: 1, Config: 0, SamplePeriod: 4000, SampleType: st, ReadFormat: rf, Flags: flags | perfdata.AttrFreq, ClockID: 1, IDs: []uint64{11, 12}},
		{Type: 1, Config: 1, SamplePeriod: 4000, SampleType: st, ReadFormat: rf, Flags: flags, ClockID: 1, IDs: []uint64{21, 22}},
	}
	for _, a := range attrs {
		if st&perfdata.SampleBranchStack != 0 {
			a.BranchSampleType = 1 | perfdata.BranchHWIndex // PERF_SAMPLE_BRANCH_USER
		}
		if st&perfdata.SampleRegsUser != 0 {
			a.SampleRegsUser = synthRegsMask
		}
		if st&perfdata.SampleStackUser != 0 {
			a.SampleStackUser = 64
		}
	}
	return attrs
}

// synthRegsMask is the registers perf record --call-graph dwarf asks for on
// x86-64: all general registers but the segment ones.
const synthRegsMask = 0xff0fff

// synth returns one record of every kind this package decodes, and a raw
// one, attributed to attrs by their ids: as given to the writer (written),
// or as they read back, where the fields the attrs' sample type leaves out
// are zero.
func synth(attrs []*perfdata.Attr, written bool) []perfdata.Record {
	a, b := attrs[0], attrs[1]
	st, rf := a.SampleType, a.ReadFormat
	has := func(bit perfdata.SampleType, v uint64) uint64 {
		if written || st&bit != 0 {
			return v
		}
		return 0
	}
	has32 := func(bit perfdata.SampleType, v uint32) uint32 { return uint32(has(bit, uint64(v))) }
	trailer := func(attr *perfdata.Attr, id, time uint64) perfdata.Trailer {
		if !written && !attr.SampleIDAll() {
			return perfdata.Trailer{}
		}
		return perfdata.Trailer{Pid: has32(perfdata.SampleTID, 7), Tid: has32(perfdata.SampleTID, 8), Time: has(perfdata.SampleTime, time),
			ID: has(perfdata.SampleID|perfdata.SampleIdentifier, id), StreamID: has(perfdata.SampleStreamID, id+100), CPU: has32(perfdata.SampleCPU, 1)}
	}
	h := func(t perfdata.RecordType, attr *perfdata.Attr, misc uint16) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: t, Attr: attr, Misc: misc}
	}

	s := &perfdata.Sample{RecordHeader: h(perfdata.TypeSample, b, perfdata.MiscUser), IP: has(perfdata.SampleIP, 0x401000),
		Pid: has32(perfdata.SampleTID, 7), Tid: has32(perfdata.SampleTID, 8), Time: has(perfdata.SampleTime, 1000),
		Addr: has(perfdata.SampleAddr, 0xdead), ID: has(perfdata.SampleID|perfdata.SampleIdentifier, 22),
		StreamID: has(perfdata.SampleStreamID, 5), CPU: has32(perfdata.SampleCPU, 1), Period: has(perfdata.SamplePeriod, 250)}
	if st&perfdata.SampleRead != 0 {
		s.Read.Values = []perfdata.ReadValue{{Value: 10, ID: 21, Lost: 1}}
		if rf&perfdata.FormatGroup != 0 {
			s.Read.Values = append(s.Read.Values, perfdata.ReadValue{Value: 20, ID: 11, Lost: 2})
		}
		for i := range s.Read.Values {
			if rf&perfdata.FormatID == 0 {
				s.Read.Values[i].ID = 0
			}
			if rf&perfdata.FormatLost == 0 {
				s.Read.Values[i].Lost = 0
			}
		}
		if rf&perfdata.FormatTotalTimeEnabled != 0 {
			s.Read.TimeEnabled = 33
		}
		if rf&perfdata.FormatTotalTimeRunning != 0 {
			s.Read.TimeRunning = 44
		}
	}
	if st&perfdata.SampleCallchain != 0 {
		s.Callchain = []uint64{perfdata.ContextKernel, 0xffffffff81000010, perfdata.ContextUser, 0x401000, 0x401234}
	}
	if st&perfdata.SampleRaw != 0 {
		s.RawData = []byte{1, 2, 3, 4}
	}
	if st&perfdata.SampleBranchStack != 0 {
		s.BranchHWIndex = 3
		s.Branches = []perfdata.Branch{{From: 0x401010, To: 0x401200, Flags: 1}, {From: 0x401210, To: 0x401000, Flags: 2}}
	}
	if st&perfdata.SampleRegsUser != 0 {
		s.RegsABI = perfdata.RegsABI64
		for i := range 20 { // bits in synthRegsMask
			s.RegsUser = append(s.RegsUser, 0x7ffc00000000+uint64(i))
		}
	}
	if st&perfdata.SampleStackUser != 0 {
		s.StackUserSize = 64
		s.StackUser = []byte("the user stack, 40 bytes of it: 12345678")
	}
	// The fields after the user stack, kept as bytes.
	for _, bit := range []perfdata.SampleType{perfdata.SampleWeight, perfdata.SampleDataSrc} {
		if st&bit != 0 {
			s.Rest = append(s.Rest, 0, 1, 2, 3, 4, 5, 6, byte(bit>>12))
		}
	}

	return []perfdata.Record{
		&perfdata.Comm{RecordHeader: h(perfdata.TypeComm, a, perfdata.MiscCommExec), Pid: 7, Tid: 7, Comm: "node", Trailer: trailer(a, 11, 900)},
		&perfdata.Mmap{RecordHeader: h(perfdata.TypeMmap, a, perfdata.MiscKernel), Pid: ^uint32(0), Addr: 0xffffffff81000000, Len: 0x1000000,
			Pgoff: 0xffffffff81000000, Filename: "[kernel.kallsyms]_text", Trailer: trailer(a, 0, 0)},
		&perfdata.Mmap2{RecordHeader: h(perfdata.TypeMmap2, b, perfdata.MiscUser), Pid: 7, Tid: 7, Addr: 0x400000, Len: 0x2000, Pgoff: 0x1000,
			Maj: 0xfe, Min: 1, Ino: 1234, InoGeneration: 5, Prot: 5, Flags: 2, Filename: "/usr/bin/exactly8", Trailer: trailer(b, 21, 950)},
		&perfdata.Mmap2{RecordHeader: h(perfdata.TypeMmap2, b, perfdata.MiscUser|perfdata.MiscMmapBuildID), Pid: 7, Tid: 8, Addr: 0x7f0000000000, Len: 0x1000,
			BuildID: []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Prot: 5, Flags: 2,
			Filename: "/tmp/jitted-7-1.so", Trailer: trailer(b, 22, 960)},
		&perfdata.Task{RecordHeader: h(perfdata.TypeFork, a, 0), Pid: 7, PPid: 7, Tid: 9, PTid: 7, Time: 970, Trailer: trailer(a, 12, 970)},
		s,
		&perfdata.Lost{RecordHeader: h(perfdata.TypeLost, a, 0), ID: 11, Lost: 3, Trailer: trailer(a, 11, 1100)},
		&perfdata.Throttle{RecordHeader: h(perfdata.TypeThrottle, b, 0), Time: 1200, ID: 21, StreamID: 9, Trailer: trailer(b, 21, 1200)},
		&perfdata.Throttle{RecordHeader: h(perfdata.TypeUnthrottle, b, 0), Time: 1300, ID: 21, StreamID: 9, Trailer: trailer(b, 21, 1300)},
		&perfdata.Switch{RecordHeader: h(perfdata.TypeSwitch, a, perfdata.MiscSwitchOut|perfdata.MiscSwitchOutPreempt), Trailer: trailer(a, 11, 1310)},
		&perfdata.Switch{RecordHeader: h(perfdata.TypeSwitch, a, 0), Trailer: trailer(a, 11, 1320)},
		&perfdata.Switch{RecordHeader: h(perfdata.TypeSwitchCPUWide, b, perfdata.MiscSwitchOut), NextPrevPid: 7, NextPrevTid: 9, Trailer: trailer(b, 21, 1330)},
		&perfdata.FinishedRound{RecordHeader: h(perfdata.TypeFinishedRound, nil, 0)},
		&perfdata.Task{RecordHeader: h(perfdata.TypeExit, a, 0), Pid: 7, PPid: 7, Tid: 9, PTid: 7, Time: 1400, Trailer: trailer(a, 12, 1400)},
		&perfdata.TimeConv{RecordHeader: h(perfdata.TypeTimeConv, nil, 0), TimeShift: 31, TimeMult: 1 << 20, TimeZero: 5, Extended: true, TimeCycles: 77, TimeMask: 0xffff, CapUserTimeZero: true},
		&perfdata.BuildIDRecord{RecordHeader: h(perfdata.TypeHeaderBuildID, nil, perfdata.MiscUser|perfdata.MiscBuildIDSize), BuildID: perfdata.BuildID{Misc: perfdata.MiscUser | perfdata.MiscBuildIDSize, Pid: 7, ID: []byte{1, 2, 3, 4}, Filename: "/usr/lib/libx.so"}},
		&perfdata.Unknown{RecordHeader: perfdata.RecordHeader{Raw: []byte{99, 0, 0, 0, 0, 0, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8}}},
	}
}

// synthBuildID is the entry writeSynth adds to the build-id table.
var synthBuildID = perfdata.BuildID{Misc: perfdata.MiscUser, Pid: 7, ID: bytes.Repeat([]byte{0xab}, 20), Filename: "/tmp/jitted-7-1.so"}

// synthFeature is the feature section writeSynth writes.
var synthFeature = perfdata.Feature{ID: perfdata.FeatureHostname, Data: []byte("\x08\x00\x00\x00synth\x00\x00\x00")}

// writeSynth writes attrs and recs to a file, in file or pipe mode, with a
// hostname feature and a build-id, and returns its bytes.
func writeSynth(t testing.TB, attrs []*perfdata.Attr, recs []perfdata.Record, pipe bool) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.data")
	opts := perfdata.Options{Pipe: pipe}
	if !pipe {
		opts.Attrs, opts.Features = attrs, []perfdata.Feature{synthFeature}
	}
	w, err := perfdata.Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if pipe {
		for _, a := range attrs {
			if err := w.WriteRecord(&perfdata.AttrRecord{Attr: a}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.WriteRecord(&perfdata.FeatureRecord{Feature: synthFeature}); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatalf("record %d (%T): %v", i, r, err)
		}
	}
	if err := w.AddBuildID(synthBuildID); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// show renders a record for comparison: every field but where it was
// found, its bytes and its attr (compared apart). %+v renders nil and
// empty slices alike.
func show(rec perfdata.Record) string {
	h := *rec.Header()
	defer func() { *rec.Header() = h }()
	switch rec := rec.(type) {
	case *perfdata.Unknown:
		return fmt.Sprintf("unknown %x", h.Raw)
	case *perfdata.FeatureRecord:
		return fmt.Sprintf("feature %d %x", rec.Feature.ID, rec.Feature.Data)
	}
	*rec.Header() = perfdata.RecordHeader{Type: h.Type, Misc: h.Misc}
	return fmt.Sprintf("%T %+v", rec, rec)
}

// readAll reads every record in file order and returns them with the error
// that ended reading (nil at a clean end).
func readAll(r *perfdata.Reader) ([]perfdata.Record, error) {
	var out []perfdata.Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}
