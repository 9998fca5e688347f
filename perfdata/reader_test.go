package perfdata_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

func showAttr(a *perfdata.Attr) string {
	return fmt.Sprintf("type=%d config=%d period=%d st=%#x rf=%#x flags=%#x clock=%d branch=%#x regs=%#x stack=%d ids=%v",
		a.Type, a.Config, a.SamplePeriod, uint64(a.SampleType), uint64(a.ReadFormat), uint64(a.Flags), a.ClockID,
		a.BranchSampleType, a.SampleRegsUser, a.SampleStackUser, a.IDs)
}

// TestEncodeDecode writes records of every kind with the Writer, for
// several sample types, in file and pipe mode, and reads them back: every
// field, the attr each belongs to (found by its id), the attrs, features
// and build-ids, and each record's encoding equal to the bytes read.
func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		name  string
		st    perfdata.SampleType
		rf    perfdata.ReadFormat
		idAll bool
	}{
		{"perf record -e a,b", perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleID | perfdata.SamplePeriod,
			perfdata.FormatID | perfdata.FormatLost, true},
		{"identifier, stream id, cpu, callchain", perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
			perfdata.SampleID | perfdata.SampleStreamID | perfdata.SampleCPU | perfdata.SamplePeriod | perfdata.SampleCallchain, 0, true},
		{"group read, addr, raw", perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleAddr | perfdata.SampleID |
			perfdata.SampleRead | perfdata.SampleCallchain | perfdata.SampleRaw,
			perfdata.FormatTotalTimeEnabled | perfdata.FormatTotalTimeRunning | perfdata.FormatID | perfdata.FormatGroup | perfdata.FormatLost, true},
		{"read, no sample_id_all", perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleID | perfdata.SampleRead | perfdata.SamplePeriod,
			perfdata.FormatTotalTimeRunning | perfdata.FormatID, false},
		{"perf record --call-graph dwarf", perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleAddr | perfdata.SampleCallchain |
			perfdata.SampleID | perfdata.SamplePeriod | perfdata.SampleRegsUser | perfdata.SampleStackUser | perfdata.SampleDataSrc,
			perfdata.FormatID | perfdata.FormatLost, true},
		{"raw, branch stack, registers, no stack", perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
			perfdata.SampleRaw | perfdata.SampleBranchStack | perfdata.SampleRegsUser | perfdata.SampleWeight, 0, true},
	}
	for _, tt := range tests {
		for _, pipe := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pipe=%t", tt.name, pipe), func(t *testing.T) {
				attrs := synthAttrs(tt.st, tt.rf, tt.idAll)
				data := writeSynth(t, attrs, synth(attrs, true), pipe)
				var r *perfdata.Reader
				var err error
				if pipe {
					r, err = perfdata.NewPipeReader(bytes.NewReader(data))
				} else {
					r, err = perfdata.NewBytesReader(data)
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := readAll(r)
				if err != nil {
					t.Fatal(err)
				}
				want := synth(attrs, false)
				if pipe {
					var head []perfdata.Record
					for _, a := range attrs {
						head = append(head, &perfdata.AttrRecord{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeHeaderAttr}, Attr: a})
					}
					head = append(head, &perfdata.FeatureRecord{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeHeaderFeature}, Feature: synthFeature})
					bid := synthBuildID
					bid.Misc |= perfdata.MiscBuildIDSize
					want = append(append(head, want...), &perfdata.BuildIDRecord{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeHeaderBuildID, Misc: bid.Misc}, BuildID: bid})
				}
				if len(got) != len(want) {
					t.Fatalf("read %d records, want %d", len(got), len(want))
				}
				for i, g := range got {
					w := want[i]
					wantAttr := w.Header().Attr
					if _, ok := w.(*perfdata.Sample); !ok && wantAttr != nil && !wantAttr.SampleIDAll() {
						wantAttr = attrs[0] // as perf: without sample_id_all, the first
					}
					if ga := g.Header().Attr; (ga == nil) != (wantAttr == nil) || ga != nil && ga.Config != wantAttr.Config {
						t.Errorf("record %d (%T): attr %v, want %v", i, g, ga, wantAttr)
					}
					if ar, ok := g.(*perfdata.AttrRecord); ok {
						if showAttr(ar.Attr) != showAttr(w.(*perfdata.AttrRecord).Attr) {
							t.Errorf("record %d: attr\n%s, want\n%s", i, showAttr(ar.Attr), showAttr(w.(*perfdata.AttrRecord).Attr))
						}
						continue
					}
					if gs, ws := show(g), show(w); gs != ws {
						t.Errorf("record %d:\n got %s\nwant %s", i, gs, ws)
					}
					enc, err := perfdata.AppendRecord(nil, g)
					if err != nil || !bytes.Equal(enc, g.Header().Raw) {
						t.Errorf("record %d (%T) re-encodes to %x (%v), read from %x", i, g, enc, err, g.Header().Raw)
					}
				}

				if len(r.Attrs()) != len(attrs) {
					t.Fatalf("%d attrs, want %d", len(r.Attrs()), len(attrs))
				}
				for i, a := range r.Attrs() {
					if showAttr(a) != showAttr(attrs[i]) {
						t.Errorf("attr %d:\n%s, want\n%s", i, showAttr(a), showAttr(attrs[i]))
					}
				}
				var ids []perfdata.FeatureID
				for _, f := range r.Features() {
					ids = append(ids, f.ID)
					if f.ID == synthFeature.ID && !bytes.Equal(f.Data, synthFeature.Data) {
						t.Errorf("feature %d: %q, want %q", f.ID, f.Data, synthFeature.Data)
					}
				}
				if !pipe {
					if want := []perfdata.FeatureID{perfdata.FeatureBuildID, perfdata.FeatureHostname}; !slices.Equal(ids, want) {
						t.Errorf("features %v, want %v", ids, want)
					}
					bids, err := r.BuildIDs()
					if err != nil || len(bids) != 1 || fmt.Sprint(bids[0]) != fmt.Sprint(perfdata.BuildID{Misc: synthBuildID.Misc | perfdata.MiscBuildIDSize, Pid: 7, ID: synthBuildID.ID, Filename: synthBuildID.Filename}) {
						t.Errorf("build-ids %v (%v), want %v", bids, err, synthBuildID)
					}
				}
			})
		}
	}
}

// TestTimeOrder checks perf's round semantics on samples whose periods
// name them, and a COMM perf synthesized (time 0), delivered at once.
func TestTimeOrder(t *testing.T) {
	attrs := synthAttrs(perfdata.SampleIP|perfdata.SampleTID|perfdata.SampleTime|perfdata.SampleID|perfdata.SamplePeriod, 0, true)
	var recs []perfdata.Record
	sample := func(time uint64) {
		recs = append(recs, &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: attrs[1]}, ID: 21, Time: time, Period: time})
	}
	round := func() { recs = append(recs, &perfdata.FinishedRound{}) }
	sample(5)
	sample(3)
	round()
	sample(4)
	sample(1)
	round()
	sample(2)
	sample(9)
	round()
	sample(7)
	recs = append(recs, &perfdata.Comm{RecordHeader: perfdata.RecordHeader{Attr: attrs[0]}, Comm: "synthesized"})
	sample(7)

	r, err := perfdata.NewBytesReader(writeSynth(t, attrs, recs, false))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	order := r.TimeOrder()
	for {
		rec, err := order.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec := rec.(type) {
		case *perfdata.Sample:
			got = append(got, fmt.Sprint(rec.Period))
		case *perfdata.FinishedRound:
			got = append(got, "R")
		case *perfdata.Comm:
			got = append(got, rec.Comm)
		}
	}
	// The first round releases nothing; each later one what is no later
	// than the newest time before the round before it.
	want := "R R 1 3 4 5 R 2 synthesized 7 7 9"
	if strings.Join(got, " ") != want {
		t.Errorf("time order %q, want %q", strings.Join(got, " "), want)
	}
}

// TestCorrupt checks what every kind of damage gives: the error, its type
// and offset, and the records read before it.
func TestCorrupt(t *testing.T) {
	attrs := synthAttrs(perfdata.SampleIP|perfdata.SampleTID|perfdata.SampleTime|perfdata.SampleID|perfdata.SamplePeriod|perfdata.SampleCallchain, 0, true)
	good := writeSynth(t, attrs, synth(attrs, true), false)
	pipe := writeSynth(t, attrs, synth(attrs, true), true)
	r, err := perfdata.NewBytesReader(good)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := readAll(r)
	offs := make([]int, len(recs))
	for i, rec := range recs {
		offs[i] = int(rec.Header().Offset)
	}
	sampleAt := offs[5] // synth's sixth record is the sample

	edit := func(data []byte, f func(b []byte)) []byte {
		b := bytes.Clone(data)
		f(b)
		return b
	}
	put64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
	}
	put16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint16(b[off:], v) }
	}

	tests := []struct {
		name    string
		data    []byte
		pipe    bool
		opening bool   // the error comes from opening, not reading records
		wantErr string // in the error's text; "" for none
		trunc   bool   // the error matches ErrTruncated, else it is a *FormatError
		off     int64  // the error's offset
		records int    // read before the error
		invalid int    // the index of the record read as *Invalid, or -1
	}{
		{name: "empty", data: nil, opening: true, wantErr: "0 of 16 bytes", trunc: true},
		{name: "not perf.data", data: []byte("PERFFILE\x68\x00\x00\x00\x00\x00\x00\x00"), opening: true, wantErr: "not a perf.data file"},
		{name: "a jitdump", data: []byte("DTiJ\x01\x00\x00\x00\x28\x00\x00\x00\x3e\x00\x00\x00"), opening: true, wantErr: `not a perf.data file but a jitdump (magic "DTiJ"): jitprof dump or check reads it`},
		{name: "a big-endian jitdump", data: []byte("JiTD\x00\x00\x00\x01\x00\x00\x00\x28\x00\x00\x00\x3e"), opening: true, wantErr: `not a perf.data file but a jitdump (magic "JiTD")`},
		{name: "big-endian", data: edit(good[:16], func(b []byte) { binary.BigEndian.PutUint64(b, perfdata.Magic) }), opening: true, wantErr: "big-endian"},
		{name: "header size", data: edit(good, put64(8, 72)), opening: true, wantErr: "header size 72", off: 8},
		{name: "header cut", data: good[:60], opening: true, wantErr: "60 of 104 bytes", trunc: true},
		{name: "attr_size", data: edit(good, put64(16, 100)), opening: true, wantErr: "attr_size 100", off: 16},
		{name: "attrs beyond the file", data: edit(good, put64(24, uint64(len(good)))), opening: true, trunc: true, off: int64(len(good))},
		{name: "data beyond the file", data: edit(good, put64(40, 1<<40)), opening: true, trunc: true, off: 1 << 40},
		{name: "data section overflows", data: edit(good, put64(48, ^uint64(0))), opening: true, wantErr: "ends beyond any file", off: 40},
		{name: "features cut", data: good[:len(good)-8], wantErr: "file ends inside the feature sections", trunc: true, records: len(recs), invalid: -1},
		{name: "record size 0", data: edit(good, put16(offs[3]+6, 0)), wantErr: "smaller than the record header", off: int64(offs[3]), records: 3, invalid: -1},
		{name: "record past the data", data: edit(good, put16(offs[len(offs)-1]+6, 0xfff8)), wantErr: "runs past the end of the data section", off: int64(offs[len(offs)-1]), records: len(recs) - 1, invalid: -1},
		{name: "callchain too long", data: edit(good, put64(sampleAt+48, 1<<60)), records: len(recs), invalid: 5},
		{name: "pipe cut in a record", data: pipe[:len(pipe)-3], pipe: true, trunc: true, records: len(recs) + 3, invalid: -1},
		{name: "pipe cut in a record header", data: pipe[:len(pipe)-len(lastRecord(t, pipe))+4], pipe: true, trunc: true, records: len(recs) + 3, invalid: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"bytes", "readerat", "stream"} {
				if mode == "stream" && !tt.pipe {
					continue
				}
				var r *perfdata.Reader
				var err error
				switch mode {
				case "bytes":
					r, err = perfdata.NewBytesReader(tt.data)
				case "readerat":
					r, err = perfdata.NewReader(bytes.NewReader(tt.data), int64(len(tt.data)))
				case "stream":
					r, err = perfdata.NewPipeReader(bytes.NewReader(tt.data))
				}
				var recs []perfdata.Record
				if err == nil {
					if tt.opening {
						t.Fatalf("%s: opened without error", mode)
					}
					recs, err = readAll(r)
				}
				if tt.wantErr == "" && !tt.trunc {
					if err != nil {
						t.Fatalf("%s: %v", mode, err)
					}
				} else {
					checkErr(t, mode, err, tt.wantErr, tt.trunc, tt.off)
				}
				if !tt.opening && len(recs) != tt.records {
					t.Errorf("%s: %d records before the error, want %d", mode, len(recs), tt.records)
				}
				for i, rec := range recs {
					if _, ok := rec.(*perfdata.Invalid); ok != (i == tt.invalid) {
						t.Errorf("%s: record %d is %T", mode, i, rec)
					}
				}
			}
		})
	}
}

func checkErr(t *testing.T, mode string, err error, text string, trunc bool, off int64) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %q", mode, text)
	}
	if !strings.Contains(err.Error(), text) {
		t.Errorf("%s: error %q does not say %q", mode, err, text)
	}
	var fe *perfdata.FormatError
	var te *perfdata.TruncatedError
	switch {
	case trunc && errors.As(err, &te):
		if off != 0 && te.Off != off {
			t.Errorf("%s: %v: offset %#x, want %#x", mode, err, te.Off, off)
		}
	case !trunc && errors.As(err, &fe):
		if fe.Off != off {
			t.Errorf("%s: %v: offset %#x, want %#x", mode, err, fe.Off, off)
		}
	default:
		t.Errorf("%s: error %v (%T), want truncation %t", mode, err, err, trunc)
	}
}

// lastRecord returns the bytes of a pipe-mode file's last record.
func lastRecord(t *testing.T, data []byte) []byte {
	r, err := perfdata.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	var last perfdata.RawRecord
	for {
		rec, err := r.NextRaw()
		if err != nil {
			return last.Bytes
		}
		last = rec
	}
}
