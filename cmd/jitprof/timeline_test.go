package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// TestTimelinePage: node blocking 30% of its 3 s loop in one JS function,
// recorded with --off-cpu, then report --wall --format html, the page
// loaded in headless Chromium: it has a row for each of the recording's
// threads; the main thread's (node, its tid its pid) says it was blocked
// the share of its time the profile without a timeline says, to the
// rounding; the page's slots of the program's loop (from the first to the
// last whose heaviest stacks name its functions) hold the time blocked
// that the timeline profile's do, to the nanosecond, and of it, the time
// blocked in the sleeping function is the share of the loop the program
// says it slept, within 3 points; and the pointer over the most blocked
// slot of the loop's middle half names a stack through the sleeping
// function, JS:~sleeper (or another tier's) as the dump names it.
//
// The program's clock sees neither the time node's main thread blocked
// elsewhere in the loop (V8's collector, its compiler's page faults read
// from a busy disk: half a second once, on a loaded machine) nor tells
// the time it spent preempted in its sleeping function, runnable, from
// its sleep: the page shows that as waiting for a CPU. Both, from the
// profile, are taken from the page's and the program's.

// The program's functions as V8 names them, whichever compiler's code
// (~ interpreted, ^ Sparkplug, + Maglev, * TurboFan) ran.
var (
	sleeperFrame = regexp.MustCompile(`JS:[~^+*]sleeper\b`)
	loopFrame    = regexp.MustCompile(`^JS:[~^+*](sleeper|spinner)\b`)
)

// inSleeper tells whether s's stack goes through sleeper.
func inSleeper(s *profile.Sample) bool {
	return slices.ContainsFunc(s.Location, func(l *profile.Location) bool {
		return slices.ContainsFunc(l.Line, func(ln profile.Line) bool { return sleeperFrame.MatchString(ln.Function.Name) })
	})
}

func TestTimelinePage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node under record, and Chromium")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		fixtures.Missing(t, "node: %v", err)
	}
	browser := fixtures.LookPath(t, "chromium")
	script, err := filepath.Abs(filepath.Join("testdata", "offcpu_sleeper.js"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	data, page := filepath.Join(dir, "perf.data"), filepath.Join(dir, "wall.html")
	// 8 MiB rings, as TestOffCPUTruth's: on a loaded machine the
	// default's DWARF samples are lost by the chunk, switches with them.
	code, stdout, stderr := jitprofMsg(t, "record", "--off-cpu", "--call-graph", "dwarf", "-m", "2048", "-o", data, "--", node, script)
	if code != 0 {
		t.Fatalf("record: exit %d:\n%s", code, stderr)
	}
	t.Logf("record: %s", stderr)
	m := regexp.MustCompile(`truth sleeper (\S+)`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("the program printed no truth:\n%s", stdout)
	}
	slept, _ := strconv.ParseFloat(m[1], 64)
	if code, _, stderr := jitprofMsg(t, "report", "--wall", "--format", "html", "-o", page, "-i", data); code != 0 {
		t.Fatalf("report: exit %d:\n%s", code, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the page: %d bytes", len(b))

	// The page's own data: its rows, and the main thread's most blocked
	// slot, which the pointer goes to.
	jm := regexp.MustCompile(`(?s)<script type="application/json" id="profile">(.*?)</script>`).FindSubmatch(b)
	if jm == nil {
		t.Fatal("no profile in the page")
	}
	var d struct {
		Names  []string
		Stages []struct {
			Timeline *struct {
				Slots   int
				Stacks  [][]int32
				Threads []struct {
					Comm     string
					Pid, Tid int64
					Time     [3][]int64
					Stack    [3][]int32
				}
			}
		}
	}
	if err := json.Unmarshal(jm[1], &d); err != nil {
		t.Fatal(err)
	}
	tl := d.Stages[0].Timeline
	if tl == nil {
		t.Fatal("the page of report --wall --format html has no timeline")
	}
	const blocked = 1 // htmlThread.Time's kinds: on the CPU, blocked, runnable
	var main, slot int64 = -1, 0
	var rows []int64
	var loop [3]int64   // the main thread's time in its loop, by kind
	var first, last int // the loop's slots
	for _, th := range tl.Threads {
		rows = append(rows, th.Tid)
		if th.Tid != th.Pid || th.Comm != "node" {
			continue
		}
		main = th.Tid
		inLoop := func(s int) bool {
			for _, stacks := range th.Stack {
				if k := stacks[s]; k >= 0 && slices.ContainsFunc(tl.Stacks[k], func(f int32) bool { return loopFrame.MatchString(d.Names[f]) }) {
					return true
				}
			}
			return false
		}
		first, last = 0, tl.Slots-1
		for first < last && !inLoop(first) {
			first++
		}
		for last > first && !inLoop(last) {
			last--
		}
		for kind, times := range th.Time {
			for _, v := range times[first : last+1] {
				loop[kind] += v
			}
		}
		t.Logf("the loop: slots %d to %d of %d", first, last, tl.Slots)
		if last-first < tl.Slots/4 {
			t.Fatalf("the loop's functions are in slots %d to %d of %d only", first, last, tl.Slots)
		}
		// The pointer goes to the middle half of the loop: its first
		// slot and its last hold some of the start-up and the exit.
		from, to := first+(last-first)/4, last-(last-first)/4
		middle := th.Time[blocked][from:to]
		slot = int64(from + slices.Index(middle, slices.Max(middle)))
	}
	if main < 0 {
		t.Fatalf("no row of node's main thread among %+v", tl.Threads)
	}

	// The recording's threads, as the profile has them.
	res, err := perfprof.Run(perfprof.Options{Input: data, View: perfprof.WallView})
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	var wall, off, preempted int64 // the main thread's: blocked (off the CPU, not preempted); preempted in sleeper
	for _, s := range res.Profile.PProf().Sample {
		tid := s.NumLabel["tid"][0]
		want = append(want, tid)
		leaf := s.Location[0].Line
		switch {
		case tid != main:
		case len(leaf) == 0 || leaf[0].Function.Name != perfprof.PreemptedFrame:
			wall += s.Value[1]
			off += s.Value[3]
		default:
			wall += s.Value[1]
			if inSleeper(s) {
				preempted += s.Value[3]
			}
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)

	// The pointer moves over the slot as a person's would, and what the
	// page then shows is put where --dump-dom prints it.
	probe := fmt.Sprintf(`<script>
(() => {
	const c = document.querySelector('.trow[data-tid="%d"] canvas'), r = c.getBoundingClientRect();
	c.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + (%d + 0.5) * r.width / %d, clientY: r.top + r.height / 2}));
	const out = (id, text) => document.body.append(Object.assign(document.createElement('pre'), {id, textContent: text}));
	out('probe-tip', document.getElementById('tip').hidden ? '' : document.getElementById('tip').innerText);
	out('probe-rows', [...document.querySelectorAll('.trow')].map(r => r.dataset.tid + ' ' + r.querySelector('.tname').textContent + ' ' + r.querySelector('.tshare').textContent).join('\n'));
})();
</script>
</body>`, main, slot, tl.Slots)
	probed := filepath.Join(dir, "probed.html")
	if err := os.WriteFile(probed, bytes.Replace(b, []byte("</body>"), []byte(probe), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, append(fixtures.ChromiumFlags(t), "--window-size=1200,800", "--dump-dom", "file://"+probed)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	shown := func(id string) string {
		m := regexp.MustCompile(`(?s)<pre id="` + id + `">(.*?)</pre>`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("the page shows no %s:\n%.3000s", id, out)
		}
		return html.UnescapeString(string(m[1]))
	}

	var drawn []int64
	share := -1.0
	for line := range strings.Lines(shown("probe-rows")) {
		f := strings.Fields(line)
		tid, _ := strconv.ParseInt(f[0], 10, 64)
		drawn = append(drawn, tid)
		if tid == main {
			if f[1] != "node" || f[2] != f[0] || len(f) != 5 || f[4] != "blocked" {
				t.Errorf("the main thread's row reads %q", line)
			}
			share, _ = strconv.ParseFloat(strings.TrimSuffix(f[3], "%"), 64)
		}
	}
	if !slices.Equal(drawn, rows) || len(want) > 32 || !slices.Equal(slices.Sorted(slices.Values(drawn)), want) {
		t.Errorf("rows of threads %v, the recording's threads %v", drawn, want)
	}
	if want := 100 * float64(off) / float64(wall); share < want-0.05 || share > want+0.05 {
		t.Errorf("the main thread's row says %.1f%% blocked, the profile %.2f%%", share, want)
	}
	// The loop's slots as the timeline profile has them: the page's
	// blocked time there, to the nanosecond, and how much of it was not
	// in sleeper (V8's collector and compiler, page faults read from a
	// busy disk), which the program's clock does not see.
	res, err = perfprof.Run(perfprof.Options{Input: data, View: perfprof.WallView, Timeline: true, PerFunction: true})
	if err != nil {
		t.Fatal(err)
	}
	var inLoop, elsewhere int64
	for _, s := range res.Profile.PProf().Sample {
		leaf := s.Location[0].Line
		if slot := s.NumLabel[contract.SlotLabel][0]; s.NumLabel["tid"][0] != main || slot < int64(first) || slot > int64(last) ||
			(len(leaf) > 0 && leaf[0].Function.Name == perfprof.PreemptedFrame) {
			continue
		}
		inLoop += s.Value[3]
		if !inSleeper(s) {
			elsewhere += s.Value[3]
		}
	}
	if inLoop != loop[blocked] {
		t.Errorf("the page's slots of the loop hold %d ns blocked, the profile's %d", loop[blocked], inLoop)
	}
	age := float64(lifetime(t, data, uint32(main))) / 1e9
	all := float64(loop[0] + loop[1] + loop[2])
	got, truth := 100*float64(loop[blocked]-elsewhere)/all, 100*(slept-float64(preempted)/1e9)/(all/1e9)
	t.Logf("main thread %d: %.1f%% blocked on the page over its life (the program slept %.3f s of %.3f s: %.1f%%); over its loop %.1f%% (%.3f s of it not in sleeper), the program %.1f%% (%.3f s of its sleep preempted)",
		main, share, slept, age, 100*slept/age, 100*float64(loop[blocked])/all, float64(elsewhere)/1e9, truth, float64(preempted)/1e9)
	if got < truth-3 || got > truth+3 {
		t.Errorf("the main thread's slots in its loop say it was blocked in sleeper %.1f%% of the time, the program %.1f%%", got, truth)
	}
	if tip := shown("probe-tip"); !strings.Contains(tip, "Blocked in") || !sleeperFrame.MatchString(tip) {
		t.Errorf("the pointer over the main thread's slot %d, the tooltip reads\n%s\nwant a blocked stack through JS:~sleeper", slot, tip)
	} else {
		t.Logf("the tooltip of slot %d:\n%s", slot, tip)
	}
}
