package perfprof_test

import (
	"fmt"
	"math/bits"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// TestTimeline: a timeline profile holds the same values as the profile
// without one, each stack's split by time slot, to the nanosecond: CPU
// samples in the slot of their time, a blocked interval across the slots
// it spans by the time it spent in each (counted once, where it began).
// The slots are equal, a power of two of nanoseconds wide, at most 200
// and at least 100 over a recording long enough, and numbered from the
// first time seen even when that comes last in the file (records out of
// time order); without a timeline no sample has a slot.
func TestTimeline(t *testing.T) {
	const ms = 1_000_000
	ev := newOffCPUEvents(10 * ms)
	cpu, sw, sample, switchRec := ev.cpu, ev.sw, ev.sample, ev.switchRec
	const s = 1000 * ms
	var recs []perfdata.Record
	// Thread 7 runs from 1 s to 3 s, two functions in turn, but for
	// 1.5 s to 2.2 s, when it is blocked at 0x3000.
	for at := uint64(1 * s); at < 3*s; at += 10 * ms {
		if at >= 1500*ms && at < 2200*ms {
			continue
		}
		recs = append(recs, sample(cpu, 7, at, 0x1000+at/(10*ms)%2*0x1000))
	}
	recs = append(recs, sample(sw, 7, 1500*ms, 0x3000), switchRec(7, 1500*ms+100, perfdata.MiscSwitchOut), switchRec(7, 2200*ms, 0))
	// Thread 9 blocks at 0x4000 from 2.9 s to the recording's end; the
	// one sample of thread 8, at 0.9 s, comes last.
	recs = append(recs, sample(sw, 9, 2900*ms, 0x4000), switchRec(9, 2900*ms+7, perfdata.MiscSwitchOut), sample(cpu, 8, 900*ms, 0x1000))
	data := filepath.Join(t.TempDir(), "perf.data")
	writeRecording(t, data, []*perfdata.Attr{cpu, sw}, recs)

	for name, view := range map[string]perfprof.View{"wall": perfprof.WallView, "off-cpu": perfprof.OffCPUView} {
		t.Run(name, func(t *testing.T) {
			run := func(timeline bool) *profile.Profile {
				t.Helper()
				res, err := perfprof.Run(perfprof.Options{Input: data, View: view, Timeline: timeline})
				if err != nil {
					t.Fatal(err)
				}
				if err := res.Profile.PProf().CheckValid(); err != nil {
					t.Fatal(err)
				}
				return res.Profile.PProf()
			}
			whole, split := run(false), run(true)

			// By thread and leaf: the values, and per slot the
			// values after the count.
			leaf := func(smp *profile.Sample) string {
				return fmt.Sprintf("%d %#x", smp.NumLabel["tid"][0], smp.Location[0].Address)
			}
			want := map[string][]int64{}
			for _, smp := range whole.Sample {
				if _, ok := smp.NumLabel[contract.SlotLabel]; ok {
					t.Fatalf("a sample of the profile without a timeline has a slot: %v", smp.NumLabel)
				}
				want[leaf(smp)] = slices.Clone(smp.Value)
			}
			got := map[string][]int64{}
			slots := map[string]map[int64][]int64{}
			width := split.Sample[0].NumLabel[contract.SlotWidthLabel][0]
			var last int64
			for _, smp := range split.Sample {
				if w := smp.NumLabel[contract.SlotWidthLabel]; len(w) != 1 || w[0] != width {
					t.Fatalf("slot widths %v and %d", w, width)
				}
				slot := smp.NumLabel[contract.SlotLabel][0]
				last = max(last, slot)
				k := leaf(smp)
				if got[k] == nil {
					got[k] = make([]int64, len(smp.Value))
					slots[k] = map[int64][]int64{}
				}
				for i, v := range smp.Value {
					got[k][i] += v
				}
				if _, dup := slots[k][slot]; dup {
					t.Errorf("%s: two samples in slot %d", k, slot)
				}
				slots[k][slot] = smp.Value[1:]
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the timeline's values, summed over its slots:\n%v\nwithout a timeline:\n%v", got, want)
			}
			if width <= 0 || bits.OnesCount64(uint64(width)) != 1 {
				t.Fatalf("slots %d ns wide: not a power of two", width)
			}
			// The span's ends: thread 8's sample (a CPU sample, in the
			// wall view only, else thread 7's block) and the last
			// record, thread 7's sample at 2.99 s, where thread 9's
			// block ends.
			first := int64(900*ms) / width
			if view == perfprof.OffCPUView {
				first = int64(1500*ms) / width
			}
			if n := (2990*ms)/width - first + 1; n < 100 || n > 200 || last != n-1 {
				t.Errorf("%d slots of %d ns, the last numbered %d: want 100 to 200 over the recording, numbered from 0", n, width, last)
			}
			slotOf := func(at int64) int64 { return at/width - first }
			if view == perfprof.WallView {
				if v, ok := slots["8 0x1000"][0]; !ok || v[1] != 10*ms {
					t.Errorf("thread 8's sample, the first: slots %v, want 10 ms of CPU in slot 0", slots["8 0x1000"])
				}
				if v := slots["7 0x2000"][slotOf(1010*ms)]; v == nil || v[1] == 0 {
					t.Errorf("thread 7's sample at 1.01 s is not in slot %d: %v", slotOf(1010*ms), slots["7 0x2000"])
				}
			}
			// The block from 1.5 s to 2.2 s: whole slots inside, the
			// rest at its ends.
			off := len(whole.SampleType) - 2 // its index among the values after the count
			block := slots["7 0x3000"]
			from, until := int64(1500*ms), int64(2200*ms)
			for slot := slotOf(from); slot <= slotOf(until-1); slot++ {
				start, end := max(from, (slot+first)*width), min(until, (slot+first+1)*width)
				if v := block[slot]; v == nil || v[off] != end-start {
					t.Errorf("the block in slot %d: %v, want %d ns off the CPU", slot, v, end-start)
				}
			}
			if len(block) != int(slotOf(until-1)-slotOf(from)+1) {
				t.Errorf("the block is in %d slots, want %d: %v", len(block), slotOf(until-1)-slotOf(from)+1, block)
			}
		})
	}

	// A recording without times has no timeline.
	bare := filepath.Join(t.TempDir(), "bare.data")
	writeRecording(t, bare, []*perfdata.Attr{{Type: 1, SamplePeriod: ms, SampleType: cpu.SampleType &^ perfdata.SampleTime, IDs: []uint64{1}}}, nil)
	if _, err := perfprof.Run(perfprof.Options{Input: bare, Timeline: true}); err == nil || !strings.Contains(err.Error(), "no times") {
		t.Errorf("the timeline of samples without times: %v", err)
	}
}

// TestTimelineClockEnd: a blocked interval in the clock's last slot, whose
// end is 2^64 (a recording's times are its writer's, any value), is split
// across its slots as any other, and the analysis ends.
func TestTimelineClockEnd(t *testing.T) {
	ev := newOffCPUEvents(1)
	const from, until = 1 << 63, 0xff00_0000_7735_9464
	data := filepath.Join(t.TempDir(), "perf.data")
	writeRecording(t, data, []*perfdata.Attr{ev.cpu, ev.sw}, []perfdata.Record{
		ev.sample(ev.sw, 7, from, 0x3000), ev.switchRec(7, from+100, perfdata.MiscSwitchOut), ev.switchRec(7, until, 0),
	})
	done := make(chan *perfprof.Result, 1)
	go func() {
		res, err := perfprof.Run(perfprof.Options{Input: data, View: perfprof.OffCPUView, Timeline: true})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if res == nil {
			return
		}
		var off int64
		for _, s := range res.Profile.PProf().Sample {
			off += s.Value[1]
		}
		if off != until-from {
			t.Errorf("%d ns off the CPU, want %d", off, until-from)
		}
	case <-time.After(time.Minute):
		t.Fatal("the analysis did not end")
	}
}
