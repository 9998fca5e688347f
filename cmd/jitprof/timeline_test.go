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

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// TestTimelinePage: node blocking 30% of its time in one JS function,
// recorded with --off-cpu, then report --wall --format html, the page
// loaded in headless Chromium: it has a row for each of the recording's
// threads, the main thread's (node, its tid its pid) says it was blocked
// for the share of its life the program says it slept, within 3 points,
// and the pointer over the main thread's most blocked slot names a stack
// through the sleeping function, JS:~sleeper, as the dump names it.
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
	code, stdout, stderr := jitprofMsg(t, "record", "--off-cpu", "--call-graph", "dwarf", "-o", data, "--", node, script)
	if code != 0 {
		t.Fatalf("record: exit %d:\n%s", code, stderr)
	}
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
		Stages []struct {
			Timeline *struct {
				Slots   int
				Threads []struct {
					Comm     string
					Pid, Tid int64
					Time     [3][]int64
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
	for _, th := range tl.Threads {
		rows = append(rows, th.Tid)
		if th.Tid == th.Pid && th.Comm == "node" {
			main = th.Tid
			slot = int64(slices.Index(th.Time[blocked], slices.Max(th.Time[blocked])))
		}
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
	for _, s := range res.Profile.Sample {
		want = append(want, s.NumLabel["tid"][0])
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
	age := float64(lifetime(t, data, uint32(main))) / 1e9
	t.Logf("main thread %d: %.1f%% blocked on the page, truth %.3f s slept of %.3f s: %.1f%%", main, share, slept, age, 100*slept/age)
	if truth := 100 * slept / age; share < truth-3 || share > truth+3 {
		t.Errorf("the page says the main thread was blocked %.1f%% of its time, the program %.1f%%", share, truth)
	}
	if tip := shown("probe-tip"); !strings.Contains(tip, "Blocked in") || !strings.Contains(tip, "JS:~sleeper") {
		t.Errorf("the pointer over the main thread's slot %d, the tooltip reads\n%s\nwant a blocked stack through JS:~sleeper", slot, tip)
	} else {
		t.Logf("the tooltip of slot %d:\n%s", slot, tip)
	}
}
