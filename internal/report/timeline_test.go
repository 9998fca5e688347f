package report

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/fixtures"
)

const (
	slotWidth = 10_000_000 // ns
	preempted = "[off-cpu]:" + contract.PreemptedFrame
)

// slotted adds to a wall-clock profile (samples, wall, cpu, off-cpu) the
// sample of a thread's stack in a time slot, on the CPU for on ns and off
// it for off ns, as perfprof's timeline makes them.
func (b *profBuilder) slotted(comm string, tid, slot, on, off int64, frames ...string) *profBuilder {
	b.add(comm, 10, 1, 0, frames...)
	s := b.p.Sample[len(b.p.Sample)-1]
	s.Value = []int64{1, on + off, on, off}
	if b.p.SampleType[1].Type != "wall" {
		s.Value = []int64{1, off}
	}
	s.NumLabel = map[string][]int64{"pid": {10}, "tid": {tid}, contract.SlotLabel: {slot}, contract.SlotWidthLabel: {slotWidth}}
	return b
}

func wallProfBuilder() *profBuilder {
	b := newProfBuilder()
	b.p.SampleType = []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "wall", Unit: "nanoseconds"},
		{Type: contract.CPUType, Unit: "nanoseconds"}, {Type: contract.OffCPUType, Unit: "nanoseconds"}}
	b.p.DefaultSampleType = "wall"
	return b
}

// timelineProfile is a wall-clock profile of thread 10 ("main", on the
// CPU, then blocked in sleeper and preempted in spin, then on the CPU),
// thread 11 ("worker", blocked throughout) and extra threads of 1 ms each
// in slot 0.
func timelineProfile(extra int) *profile.Profile {
	spin := []string{jit + ":run", jit + ":spin"}
	sleep := []string{jit + ":run", jit + ":sleeper", libc + ":syscall", kernel + ":entry_SYSCALL_64", kernel + ":schedule"}
	b := wallProfBuilder().
		slotted("main", 10, 0, 6_000_000, 0, spin...).
		slotted("main", 10, 0, 2_000_000, 0, jit+":run", libc+":memcmp").
		slotted("main", 10, 1, 0, 5_000_000, sleep...).
		slotted("main", 10, 1, 0, 1_000_000, jit+":run", jit+":sleeper", libc+":syscall").
		slotted("main", 10, 1, 0, 2_000_000, append(spin, preempted)...).
		slotted("main", 10, 1, 2_000_000, 0, spin...).
		slotted("main", 10, 2, 10_000_000, 0, spin...)
	for slot := range int64(3) {
		b.slotted("worker", 11, slot, 0, 10_000_000, libc+":epoll_wait", kernel+":schedule")
	}
	for i := range int64(extra) {
		b.slotted("extra", 100+i, 0, 1_000_000, 0, libc+":work")
	}
	return b.p
}

// TestTimelineData: each thread's row adds up its samples' times by slot
// and kind (on the CPU, blocked, preempted: runnable) to the nanosecond,
// the rows and the threads left out add up to the profile's time, the
// busiest threads come first, and each slot names its heaviest stack of
// each kind, root first.
func TestTimelineData(t *testing.T) {
	p := timelineProfile(40)
	_, d := htmlPage(t, p, Options{Value: 1})
	tl := d.Stages[0].Timeline
	if tl == nil {
		t.Fatal("no timeline in the page of a timeline profile")
	}
	if tl.Width != slotWidth || tl.Slots != 3 || !tl.CPU {
		t.Errorf("width %d, %d slots, cpu %v; want %d, 3, true", tl.Width, tl.Slots, tl.CPU, slotWidth)
	}

	// The profile's times by thread, slot and kind, summed here.
	want := map[int64][timeKinds][3]int64{}
	var total int64
	for _, s := range p.Sample {
		tid, slot := s.NumLabel["tid"][0], s.NumLabel[contract.SlotLabel][0]
		w := want[tid]
		w[onCPU][slot] += s.Value[2]
		if s.Location[0].Line[0].Function.Name == contract.PreemptedFrame {
			w[runnable][slot] += s.Value[3]
		} else {
			w[blocked][slot] += s.Value[3]
		}
		want[tid] = w
		total += s.Value[1]
	}
	if len(tl.Threads) != timelineThreads || tl.Hidden != 42-timelineThreads {
		t.Fatalf("%d rows, %d threads left out; want %d and %d", len(tl.Threads), tl.Hidden, timelineThreads, 42-timelineThreads)
	}
	shown := tl.HiddenTime
	for i, th := range tl.Threads {
		var got [timeKinds][3]int64
		var all int64
		for kind := range timeKinds {
			copy(got[kind][:], th.Time[kind])
			for _, v := range th.Time[kind] {
				all += v
			}
		}
		if got != want[th.Tid] {
			t.Errorf("thread %d: times %v, want %v", th.Tid, got, want[th.Tid])
		}
		shown += all
		if wantComm := map[int64]string{10: "main", 11: "worker"}[th.Tid]; (i < 2) != (wantComm != "") || (i < 2 && th.Comm != wantComm) || (i >= 2 && th.Comm != "extra") {
			t.Errorf("row %d: %s %d", i, th.Comm, th.Tid)
		}
	}
	if shown != total {
		t.Errorf("the rows and the threads left out hold %d ns, the profile %d", shown, total)
	}
	if tl.HiddenTime != 1_000_000*int64(tl.Hidden) {
		t.Errorf("the %d threads left out: %d ns, want 1 ms each", tl.Hidden, tl.HiddenTime)
	}

	stack := func(th htmlThread, kind, slot int) string {
		if th.Stack[kind][slot] < 0 {
			return ""
		}
		var names []string
		for _, f := range tl.Stacks[th.Stack[kind][slot]] {
			names = append(names, d.Names[f])
		}
		return fmt.Sprintf("%s (%d)", strings.Join(names, ";"), th.Top[kind][slot])
	}
	main := tl.Threads[slices.IndexFunc(tl.Threads, func(th htmlThread) bool { return th.Tid == 10 })]
	for _, c := range []struct {
		kind, slot int
		want       string
	}{
		{onCPU, 0, "run;spin (6000000)"},
		{onCPU, 1, "run;spin (2000000)"},
		{blocked, 1, "run;sleeper;syscall;entry_SYSCALL_64;schedule (5000000)"},
		{runnable, 1, "run;spin;" + contract.PreemptedFrame + " (2000000)"},
		{blocked, 0, ""},
		{runnable, 2, ""},
	} {
		if got := stack(main, c.kind, c.slot); got != c.want {
			t.Errorf("main's heaviest stack of kind %d in slot %d: %q, want %q", c.kind, c.slot, got, c.want)
		}
	}
	// Only the stacks named, each once.
	named := map[int32]bool{}
	for _, th := range tl.Threads {
		for _, kind := range th.Stack {
			for _, s := range kind {
				if s >= 0 {
					named[s] = true
				}
			}
		}
	}
	if len(named) != len(tl.Stacks) {
		t.Errorf("%d stacks in the page, %d named", len(tl.Stacks), len(named))
	}
	seen := map[string]bool{}
	for _, s := range tl.Stacks {
		if k := fmt.Sprint(s); seen[k] {
			t.Errorf("stack %v twice", s)
		} else {
			seen[k] = true
		}
	}
}

// TestTimelineNone: a profile without time slots (any CPU profile), or
// without time off the CPU, gets a page without a timeline, its script or
// its styles: the page it had before timelines.
func TestTimelineNone(t *testing.T) {
	cpuOnly := timelineProfile(0)
	cpuOnly.SampleType = cpuOnly.SampleType[:3]
	for _, s := range cpuOnly.Sample {
		s.Value = s.Value[:3]
	}
	for name, p := range map[string]*profile.Profile{"cpu": processes(), "slots without off-cpu": cpuOnly} {
		page, d := htmlPage(t, p, Options{})
		if d.Stages[0].Timeline != nil || bytes.Contains(page, []byte("timeline")) || bytes.Contains(page, []byte("trow")) {
			t.Errorf("%s: the page has a timeline", name)
		}
	}
	// The time off the CPU alone (report --off-cpu): no time on it.
	b := newProfBuilder()
	b.p.SampleType = []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: contract.OffCPUType, Unit: "nanoseconds"}}
	b.slotted("main", 10, 0, 0, 4_000_000, jit+":run", kernel+":schedule")
	_, d := htmlPage(t, b.p, Options{Value: 1})
	if tl := d.Stages[0].Timeline; tl == nil || tl.CPU || len(tl.Threads) != 1 || tl.Threads[0].Time[blocked][0] != 4_000_000 {
		t.Errorf("the timeline of an off-CPU profile: %+v", tl)
	}
}

// TestTimelineErrors: samples whose slots are out of bounds or of
// different widths are refused, not drawn.
func TestTimelineErrors(t *testing.T) {
	for name, spoil := range map[string]func(s *profile.Sample){
		"slot past the bound": func(s *profile.Sample) { s.NumLabel[contract.SlotLabel] = []int64{timelineSlots} },
		"negative slot":       func(s *profile.Sample) { s.NumLabel[contract.SlotLabel] = []int64{-1} },
		"another width":       func(s *profile.Sample) { s.NumLabel[contract.SlotWidthLabel] = []int64{slotWidth / 2} },
		"no width":            func(s *profile.Sample) { delete(s.NumLabel, contract.SlotWidthLabel) },
		"no slot":             func(s *profile.Sample) { delete(s.NumLabel, contract.SlotLabel) },
	} {
		p := timelineProfile(0)
		spoil(p.Sample[len(p.Sample)-1])
		if err := HTML(&bytes.Buffer{}, contract.FromPProf(p), Options{}); err == nil || !strings.Contains(err.Error(), "timeline") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestTimelineBrowser opens a timeline page in Chromium: a row per
// thread, named, with its share of time blocked; hovering over a slot
// where the main thread blocked and was preempted names the heaviest
// stacks of both, and one where it only ran names its CPU stack; a stage
// chosen shows its own threads.
func TestTimelineBrowser(t *testing.T) {
	c := startChromium(t, fixtures.LookPath(t, "chromium"))
	c.call("Page.enable", nil, nil)
	c.call("Runtime.enable", nil, nil)
	var page bytes.Buffer
	other := wallProfBuilder().slotted("other", 12, 0, 0, 5_000_000, libc+":read").p
	if _, err := Write(FormatHTML, "", &page, []string{"one", "two"}, []*contract.Profile{contract.FromPProf(timelineProfile(3)), contract.FromPProf(other)}, Options{Value: 1, CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	c.load(page.Bytes())

	type row struct{ Name, Share string }
	var rows []row
	rowsOf := `[...document.querySelectorAll('.trow')].map(r => ({name: r.querySelector('.tname').textContent, share: r.querySelector('.tshare').textContent}))`
	c.eval(rowsOf, &rows)
	// main: 20 ms on its CPU, 6 ms blocked, 2 ms preempted.
	if want := []row{{"worker 11", "100.0% blocked"}, {"main 10", "21.4% blocked"}, {"extra 100", "0.0% blocked"}}; !slices.Equal(rows[:3], want) {
		t.Errorf("rows %+v, want %+v first", rows, want)
	}

	// The middle of a slot of main's row.
	at := func(slot int) (x, y float64) {
		var r struct{ Left, Top, Width, Height float64 }
		c.eval(`(r => ({left: r.left, top: r.top, width: r.width, height: r.height}))(document.querySelector('.trow[data-tid="10"] canvas').getBoundingClientRect())`, &r)
		return r.Left + (float64(slot)+0.5)*r.Width/3, r.Top + r.Height/2
	}
	tip := func() string {
		var s string
		c.eval(`document.getElementById('tip').hidden ? '' : document.getElementById('tip').innerText`, &s)
		return s
	}
	x, y := at(1)
	c.mouse("mouseMoved", x, y)
	got := tip()
	for _, want := range []string{"main 10", "0.010–0.020 s", "on CPU 20.0%, blocked 60.0%, waiting for a CPU 20.0%",
		"Blocked in (5.00 ms", "schedule … entry_SYSCALL_64 (kernel, 2 frames)\nsyscall\nsleeper\nrun",
		"Waiting for a CPU (preempted) in (2.00 ms", contract.PreemptedFrame + "\nspin\nrun", "On CPU in (2.00 ms"} {
		if !strings.Contains(got, want) {
			t.Errorf("hovering over main's slot 1, the tooltip reads\n%s\nwant %q in it", got, want)
		}
	}
	x, y = at(2)
	c.mouse("mouseMoved", x, y)
	if got := tip(); !strings.Contains(got, "on CPU 100.0%") || !strings.Contains(got, "On CPU in (10.0 ms") || strings.Contains(got, "Blocked") {
		t.Errorf("hovering over main's slot 2, the tooltip reads\n%s", got)
	}
	c.mouse("mouseMoved", 2, 2)
	if got := tip(); got != "" {
		t.Errorf("off the timeline, the tooltip still reads %q", got)
	}

	c.eval(`(s => { s.value = 1; s.dispatchEvent(new Event('change')); })(document.getElementById('stage'))`, nil)
	c.eval(rowsOf, &rows)
	if want := []row{{"other 12", "100.0% blocked"}}; !slices.Equal(rows, want) {
		t.Errorf("stage two's rows %+v, want %+v", rows, want)
	}
	if thrown := c.exceptions(); len(thrown) > 0 {
		t.Errorf("the page threw %s", thrown)
	}
}

// TestTimelineNames: a thread's name, which the profiled program chooses,
// cannot end the page's script: the row's data is escaped as the flame
// graph's is, and the script puts names in the page as text only.
func TestTimelineNames(t *testing.T) {
	evil := "</script><script>alert(1)</script>"
	p := wallProfBuilder().slotted(evil, 10, 0, 1_000_000, 1_000_000, jit+":"+evil).p
	page, d := htmlPage(t, p, Options{Value: 1})
	if bytes.Contains(page, []byte("alert(1)</script>")) {
		t.Errorf("the name reaches the page unescaped:\n%s", page)
	}
	if tl := d.Stages[0].Timeline; tl == nil || tl.Threads[0].Comm != evil {
		t.Errorf("the thread's name in the page: %+v", tl)
	}
	if regexp.MustCompile(`innerHTML|insertAdjacentHTML|document\.write`).MatchString(timelineJS) {
		t.Error("timeline.js writes markup: names must go in as text")
	}
}
