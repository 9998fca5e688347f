package perfprof_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// TestOffCPUWeights: a switch-out sample at t whose thread switches in at
// t+d weighs d, whatever order the records came in; a block whose stack
// the recording left out weighs its own time on ShortFrame; a thread that
// never switches back weighs until the recording's end, and is warned of;
// one that exits, nothing; one preempted, still runnable, weighs on
// PreemptedFrame under its stack. The wall-clock view adds each thread's CPU
// samples, in time, to that.
func TestOffCPUWeights(t *testing.T) {
	ev := newOffCPUEvents(250_000)
	cpu, sw, sample, switchRec := ev.cpu, ev.sw, ev.sample, ev.switchRec
	const in, out, preempted = 0, perfdata.MiscSwitchOut, perfdata.MiscSwitchOut | perfdata.MiscSwitchOutPreempt
	const s = 1_000_000_000
	recs := []perfdata.Record{
		&perfdata.Comm{RecordHeader: perfdata.RecordHeader{Attr: cpu}, Pid: 7, Tid: 7, Comm: "main", Trailer: perfdata.Trailer{Pid: 7, Tid: 7, Time: 1, ID: 1}},
		// thread 7: 1 ms on the CPU
		sample(cpu, 7, 1*s, 0x1000), sample(cpu, 7, 1*s+250_000, 0x1000), sample(cpu, 7, 1*s+500_000, 0x1000), sample(cpu, 7, 1*s+750_000, 0x1000),
		// blocked 5 ms at 0x2000: its switch-in first, from another CPU's buffer
		switchRec(7, 2*s+5_000_000, in), sample(sw, 7, 2*s, 0x2000), switchRec(7, 2*s+100, out),
		// blocked 50 us, its stack left out
		switchRec(7, 3*s, out), switchRec(7, 3*s+50_000, in),
		// preempted 20 us at 0x1000
		sample(sw, 7, 3*s+100_000, 0x1000), switchRec(7, 3*s+100_010, preempted), switchRec(7, 3*s+120_000, in),
		// thread 8 blocks at 0x3000 for good
		sample(sw, 8, 4*s, 0x3000), switchRec(8, 4*s+10, out),
		// thread 9 exits: its last switch is no block
		&perfdata.Task{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeExit, Attr: cpu}, Pid: 7, PPid: 7, Tid: 9, PTid: 7, Time: 5 * s,
			Trailer: perfdata.Trailer{Pid: 7, Tid: 9, Time: 5 * s, ID: 1}},
		sample(sw, 9, 5*s+10, 0x4000), switchRec(9, 5*s+20, out),
		// the recording's last record
		sample(cpu, 7, 6*s, 0x1000),
	}
	data := filepath.Join(t.TempDir(), "perf.data")
	writeRecording(t, data, []*perfdata.Attr{cpu, sw}, recs)

	for _, tc := range []struct {
		view  perfprof.View
		types string
		want  map[string][]int64 // by thread and leaf: the values after the count
		warn  string
	}{
		{perfprof.OffCPUView, "samples/count off-cpu/nanoseconds", map[string][]int64{
			"7 0x2000": {5_000_000}, "7 " + perfprof.ShortFrame: {50_000}, "7 " + perfprof.PreemptedFrame: {20_000}, "8 0x3000": {2 * s},
		}, "1 threads were still off their CPU"},
		{perfprof.WallView, "samples/count wall/nanoseconds cpu/nanoseconds off-cpu/nanoseconds", map[string][]int64{
			"7 0x1000": {1_250_000, 1_250_000, 0}, "7 0x2000": {5_000_000, 0, 5_000_000},
			"7 " + perfprof.ShortFrame: {50_000, 0, 50_000}, "7 " + perfprof.PreemptedFrame: {20_000, 0, 20_000},
			"8 0x3000": {2 * s, 0, 2 * s},
		}, "1 threads were still off their CPU"},
	} {
		t.Run(tc.types, func(t *testing.T) {
			var warnings []string
			opts := perfprof.Options{Input: data, View: tc.view}
			opts.Warn = func(err error) { warnings = append(warnings, err.Error()) }
			res, err := perfprof.Run(opts)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Profile.PProf()
			if err := p.CheckValid(); err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, vt := range p.SampleType {
				types = append(types, vt.Type+"/"+vt.Unit)
			}
			if got := strings.Join(types, " "); got != tc.types {
				t.Fatalf("sample types %s, want %s", got, tc.types)
			}
			got := map[string][]int64{}
			for _, smp := range p.Sample {
				leaf := smp.Location[0]
				name := fmt.Sprintf("%#x", leaf.Address)
				if len(leaf.Line) > 0 {
					name = leaf.Line[0].Function.Name
				}
				key := fmt.Sprintf("%d %s", smp.NumLabel["tid"][0], name)
				if got[key] == nil {
					got[key] = make([]int64, len(smp.Value)-1)
				}
				for i, v := range smp.Value[1:] {
					got[key][i] += v
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("values by thread and leaf\n%v, want\n%v", got, tc.want)
			}
			if !strings.Contains(strings.Join(warnings, "\n"), tc.warn) {
				t.Errorf("warnings %q, want one saying %q", warnings, tc.warn)
			}
		})
	}
	if _, err := perfprof.Run(perfprof.Options{Input: data, View: perfprof.WallView, Event: "event-1:3"}); err == nil || !strings.Contains(err.Error(), "--event") {
		t.Errorf("the wall view of the switch event itself: %v, want an error naming --event", err)
	}
}

// TestOffCPUTimesAnyValue: a recording's times are its writer's, any value:
// an interval longer than an int64 holds, or a switch-out at the clock's
// last nanosecond (whose next instant wraps to 0), weighs no negative time.
func TestOffCPUTimesAnyValue(t *testing.T) {
	ev := newOffCPUEvents(250_000)
	const in, out = 0, perfdata.MiscSwitchOut
	const last = math.MaxUint64
	for _, tc := range []struct {
		name string
		recs []perfdata.Record
	}{
		{"longer than an int64", []perfdata.Record{
			ev.sample(ev.sw, 7, 1, 0x2000), ev.switchRec(7, 1, out), ev.switchRec(7, last-1, in),
			ev.sample(ev.cpu, 7, last-1, 0x1000),
		}},
		{"out at the clock's end", []perfdata.Record{
			ev.switchRec(7, 1_000, in), ev.sample(ev.sw, 7, last, 0x2000), ev.switchRec(7, last, out),
			ev.sample(ev.cpu, 7, last, 0x1000),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "perf.data")
			writeRecording(t, data, []*perfdata.Attr{ev.cpu, ev.sw}, tc.recs)
			for _, view := range []perfprof.View{perfprof.OffCPUView, perfprof.WallView} {
				res, err := perfprof.Run(perfprof.Options{Input: data, View: view})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range res.Profile.PProf().Sample {
					for i, v := range s.Value {
						if v < 0 {
							t.Errorf("view %v: value %d of a sample is %d", view, i, v)
						}
					}
				}
			}
		})
	}
}
