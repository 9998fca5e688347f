package record

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/perfdata"
)

// TestBlockedThreads: a thread off its CPU at a cut gets a switch-in at the
// cut, and in the next window its switch-out sample (its stack) and
// switch-out at the cut; a thread back on its CPU before the cut, as the
// times tell whatever order the rings gave, is not carried; a switch-in
// drained after the cut but timed before it is moved to it; beyond the
// bounds an interval is ended at the cut but not carried, and counted.
func TestBlockedThreads(t *testing.T) {
	main := newAttr(Event{Name: "cpu-clock"}, attrConfig{freq: 99, callGraph: FramePointers})
	main.IDs = []uint64{1}
	sw := offCPUAttr(main)
	sw.IDs = []uint64{2}
	rec := func(r perfdata.Record) []byte {
		b, err := perfdata.AppendRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sample := func(tid uint32, at, pc uint64) []byte {
		return rec(&perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: sw}, ID: 2, Pid: 5, Tid: tid, Time: at, Period: 1, Callchain: []uint64{pc}})
	}
	cpuSample := rec(&perfdata.Sample{RecordHeader: perfdata.RecordHeader{Attr: main}, ID: 1, Pid: 5, Tid: 5, Time: 10, Period: 1})
	switchRec := func(misc uint16) func(tid uint32, at uint64) []byte {
		return func(tid uint32, at uint64) []byte {
			return rec(&perfdata.Switch{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSwitch, Misc: misc, Attr: sw}, Trailer: perfdata.Trailer{Pid: 5, Tid: tid, Time: at, ID: 2}})
		}
	}
	out, preempted, in := switchRec(perfdata.MiscSwitchOut), switchRec(perfdata.MiscSwitchOut|perfdata.MiscSwitchOutPreempt), switchRec(0)
	exit := func(tid uint32, at uint64) []byte {
		return rec(&perfdata.Task{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeExit, Attr: sw}, Pid: 5, PPid: 1, Tid: tid, PTid: 1, Time: at})
	}
	// describe says what a record emitted is, read as newAttr lays it
	// out: a sample's thread, time and call chain, a switch's direction,
	// thread and time.
	describe := func(b []byte) string {
		switch perfdata.RecordType(le.Uint32(b)) {
		case perfdata.TypeSample:
			const chainOff = sampleTimeOff + 8 + 8 + 8 // time, cpu, period
			var chain []uint64
			for i := range le.Uint64(b[chainOff:]) {
				chain = append(chain, le.Uint64(b[chainOff+8+8*int(i):]))
			}
			return fmt.Sprintf("sample %d@%d %#x", le.Uint32(b[sampleTidOff:]), le.Uint64(b[sampleTimeOff:]), chain)
		case perfdata.TypeSwitch:
			dir, misc := "in", le.Uint16(b[4:])
			if misc&perfdata.MiscSwitchOut != 0 {
				dir = "out"
			}
			if misc&perfdata.MiscSwitchOutPreempt != 0 {
				dir += " preempted"
			}
			return fmt.Sprintf("%s %d@%d", dir, le.Uint32(b[len(b)-trailerTidEnd:]), le.Uint64(b[len(b)-trailerTimeEnd:]))
		}
		return perfdata.RecordType(le.Uint32(b)).String()
	}
	type step struct {
		observe [][]byte
		cut     uint64 // then cut there, and resume
	}
	for _, tc := range []struct {
		name     string
		threads  int // bound; 0: the default
		held     int
		steps    []step
		want     []string // what cut and resume emitted, and what observe changed, in order
		uncut    uint64
		followed int // threads followed at the end
	}{
		{"blocked across the cut", 0, 0, []step{{observe: [][]byte{cpuSample, sample(7, 1000, 0x401000), out(7, 1001)}, cut: 5000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x401000]", "resume: out 7@5000"}, 0, 1},
		{"back before the cut", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x401000), out(7, 1001), in(7, 2000)}, cut: 5000}},
			nil, 0, 0},
		{"back before the cut, another ring read first", 0, 0, []step{{observe: [][]byte{in(7, 2000), sample(7, 1000, 0x401000), out(7, 1001)}, cut: 5000}},
			nil, 0, 0},
		{"blocked again after coming back", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x1), out(7, 1001), in(7, 2000), sample(7, 3000, 0x2), out(7, 3001)}, cut: 5000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x2]", "resume: out 7@5000"}, 0, 1},
		{"preempted", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x401000), preempted(7, 1001)}, cut: 5000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x401000]", "resume: out preempted 7@5000"}, 0, 1},
		{"carried over two cuts", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x401000), out(7, 1001)}, cut: 5000}, {cut: 9000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x401000]", "resume: out 7@5000",
				"cut: in 7@9000", "resume: sample 7@9000 [0x401000]", "resume: out 7@9000"}, 0, 1},
		{"a switch-in drained after the cut, timed before it", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x401000), out(7, 1001)}, cut: 5000},
			{observe: [][]byte{in(7, 4990)}, cut: 9000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x401000]", "resume: out 7@5000", "observe: in 7@5000"}, 0, 0},
		{"exited", 0, 0, []step{{observe: [][]byte{sample(7, 1000, 0x401000), out(7, 1001), exit(7, 1002)}, cut: 5000}},
			nil, 0, 0},
		{"no stack sample (lost)", 0, 0, []step{{observe: [][]byte{out(7, 1001)}, cut: 5000}},
			[]string{"cut: in 7@5000"}, 1, 0},
		{"beyond the bound on threads", 1, 0, []step{{observe: [][]byte{sample(7, 1000, 0x1), out(7, 1001), sample(8, 1000, 0x2), out(8, 1001)}, cut: 5000}},
			[]string{"cut: in 7@5000", "resume: sample 7@5000 [0x1]", "resume: out 7@5000"}, 0, 1},
		{"beyond the bound on bytes", 0, len(sample(7, 0, 0)), []step{{observe: [][]byte{sample(7, 1000, 0x1), out(7, 1001), sample(8, 1000, 0x2), out(8, 1001)}, cut: 5000}},
			[]string{"cut: in 7@5000", "cut: in 8@5000", "resume: sample 7@5000 [0x1]", "resume: out 7@5000"}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlockedThreads(map[uint64]bool{2: true})
			if tc.threads > 0 {
				b.maxThreads = tc.threads
			}
			if tc.held > 0 {
				b.maxHeld = tc.held
			}
			var got []string
			emit := func(what string) func([]byte) error {
				return func(r []byte) error {
					got = append(got, what+": "+describe(r))
					return nil
				}
			}
			for _, st := range tc.steps {
				for _, r := range st.observe {
					orig := slices.Clone(r)
					if w := b.observe(r); !slices.Equal(w, orig) {
						got = append(got, "observe: "+describe(w))
					}
				}
				if err := b.cut(st.cut, emit("cut")); err != nil {
					t.Fatal(err)
				}
				if err := b.resume(emit("resume")); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("emitted:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if b.uncut != tc.uncut || len(b.threads) != tc.followed {
				t.Errorf("%d uncut, %d threads followed; want %d, %d", b.uncut, len(b.threads), tc.uncut, tc.followed)
			}
		})
	}
}
