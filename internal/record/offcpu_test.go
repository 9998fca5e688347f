package record

import (
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestSwitchFilter: a switch-out sample is dropped once a switch-in of its
// thread within the minimum is seen, whichever drain or ring brought it
// first; one proven long, by its switch-in or by the drain's horizon, is
// written at once; one not proven short is written at the next drain at
// the latest, or at the last; the records are laid out as newAttr lays
// them out.
func TestSwitchFilter(t *testing.T) {
	const min = 100_000
	main := newAttr(Event{Name: "cpu-clock"}, attrConfig{freq: 99, callGraph: FramePointers})
	main.IDs = []uint64{1}
	sw := offCPUAttr(main)
	sw.IDs = []uint64{2}
	out := func(tid uint32, at uint64) []byte {
		b, err := perfdata.AppendRecord(nil, &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: sw}, ID: 2, Pid: tid, Tid: tid, Time: at, Period: 1, Callchain: []uint64{0x401000}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	in := func(tid uint32, at uint64) []byte {
		b, err := perfdata.AppendRecord(nil, &perfdata.Switch{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSwitch, Attr: sw}, Trailer: perfdata.Trailer{Pid: tid, Tid: tid, Time: at, ID: 2}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cpuSample, err := perfdata.AppendRecord(nil, &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: main}, ID: 1, Pid: 5, Tid: 5, Time: 10, Period: 1})
	if err != nil {
		t.Fatal(err)
	}
	type drain struct {
		recs    [][]byte
		horizon uint64 // every switch-in before it seen
		final   bool
		want    []uint64 // times of the switch-out samples written in it
	}
	for _, tc := range []struct {
		name    string
		drains  []drain
		dropped uint64
	}{
		{"short, in order", []drain{{recs: [][]byte{out(5, 1000), in(5, 1000+min-1)}}, {final: true}}, 1},
		{"short, switch-in first (another ring)", []drain{{recs: [][]byte{in(5, 1000+min-1), out(5, 1000)}}, {final: true}}, 1},
		{"short, switch-in a drain later", []drain{{recs: [][]byte{out(5, 1000)}}, {recs: [][]byte{in(5, 1010)}, final: true}}, 1},
		{"long, its switch-in in the drain", []drain{{recs: [][]byte{out(5, 1000), in(5, 1000+min)}, want: []uint64{1000}}, {}}, 0},
		{"long, its switch-in a drain later", []drain{{recs: [][]byte{out(5, 1000)}}, {recs: [][]byte{in(5, 1000+min)}, want: []uint64{1000}}}, 0},
		{"long by the horizon", []drain{{recs: [][]byte{out(5, 1000)}, horizon: 1000 + min, want: []uint64{1000}}, {}}, 0},
		{"not yet long by the horizon", []drain{{recs: [][]byte{out(5, 1000)}, horizon: 1000 + min - 1}, {recs: [][]byte{in(5, 1010)}}}, 1},
		{"another thread's switch-in proves nothing", []drain{{recs: [][]byte{out(5, 1000), in(6, 1010)}}, {want: []uint64{1000}}}, 0},
		{"an earlier switch-in proves nothing", []drain{{recs: [][]byte{in(5, 990), out(5, 1000)}}, {want: []uint64{1000}}}, 0},
		{"unproven at the last drain", []drain{{recs: [][]byte{out(5, 1000)}, final: true, want: []uint64{1000}}}, 0},
		{"held one drain at most", []drain{{recs: [][]byte{out(5, 1000)}}, {recs: [][]byte{out(6, 5000)}, want: []uint64{1000}}, {recs: [][]byte{in(5, 1010)}, want: []uint64{5000}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &switchFilter{min: min, ids: map[uint64]bool{2: true}, ins: map[uint32][]switchIn{}}
			for i, d := range tc.drains {
				var got []uint64
				write := func(rec []byte) error {
					if le.Uint64(rec[sampleIDOff:]) != 2 {
						t.Errorf("drain %d: wrote a sample of id %d", i, le.Uint64(rec[sampleIDOff:]))
					}
					got = append(got, le.Uint64(rec[sampleTimeOff:]))
					return nil
				}
				// As drainRings: every ring looked through for switch-ins,
				// then each record given to take.
				for _, rec := range d.recs {
					f.see(rec)
				}
				f.sortIns()
				f.horizon = d.horizon
				if !f.take(cpuSample) {
					t.Fatalf("drain %d: a CPU sample was held", i)
				}
				for _, rec := range d.recs {
					if f.take(rec) && perfdata.RecordType(le.Uint32(rec)) == perfdata.TypeSample {
						write(rec)
					}
				}
				if err := f.flush(write, d.final); err != nil {
					t.Fatal(err)
				}
				if len(got) != len(d.want) || len(got) > 0 && got[0] != d.want[0] {
					t.Errorf("drain %d wrote samples at %v, want %v", i, got, d.want)
				}
			}
			if f.dropped != tc.dropped {
				t.Errorf("dropped %d, want %d", f.dropped, tc.dropped)
			}
		})
	}
	// the switch attr: a sample at every switch, context_switch records,
	// nothing of main's side band, the kernel not excluded
	if sw.SamplePeriod != 1 || sw.Flags&perfdata.AttrFreq != 0 || sw.Flags&perfdata.AttrContextSwitch == 0 ||
		sw.Flags&(perfdata.AttrMmap|perfdata.AttrComm|perfdata.AttrTask|perfdata.AttrExcludeKernel) != 0 {
		t.Errorf("switch attr: period %d, flags %#x", sw.SamplePeriod, sw.Flags)
	}
}

// BenchmarkSwitchFilter drains 2 MiB of switch-outs with 8 KiB of stack
// each, every one's switch-in after it, half of them within the minimum:
// the filter's work at one wakeup of a DWARF recording with --off-cpu.
func BenchmarkSwitchFilter(b *testing.B) {
	const min, size = 100_000, 2 << 20
	main := newAttr(Event{Name: "cpu-clock"}, attrConfig{freq: 99, callGraph: FramePointers})
	main.IDs = []uint64{1}
	sw := offCPUAttr(main)
	sw.IDs = []uint64{2}
	var recs [][]byte
	n := 0
	for t := uint64(1_000_000); n < size-9000; t += 1_000_000 {
		out, err := perfdata.AppendRecord(nil, &perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: sw}, ID: 2, Pid: 5, Tid: 5, Time: t, Period: 1, Callchain: make([]uint64, 1000)})
		if err != nil {
			b.Fatal(err)
		}
		back := t + min/2
		if len(recs)%4 == 0 {
			back = t + 2*min
		}
		in, err := perfdata.AppendRecord(nil, &perfdata.Switch{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSwitch, Attr: sw}, Trailer: perfdata.Trailer{Pid: 5, Tid: 5, Time: back, ID: 2}})
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, out, in)
		n += len(out) + len(in)
	}
	data, head := ringOf(1<<22, 0, recs...)
	var scratch []byte
	b.SetBytes(int64(head))
	for b.Loop() {
		f := &switchFilter{min: min, ids: map[uint64]bool{2: true}, ins: map[uint32][]switchIn{}}
		if _, err := readRing(data, 0, head, &scratch, f.see); err != nil {
			b.Fatal(err)
		}
		f.sortIns()
		written := 0
		take := func(rec []byte) error {
			if f.take(rec) {
				written++
			}
			return nil
		}
		if _, err := readRing(data, 0, head, &scratch, take); err != nil {
			b.Fatal(err)
		}
		if err := f.flush(func([]byte) error { written++; return nil }, true); err != nil {
			b.Fatal(err)
		}
	}
}
