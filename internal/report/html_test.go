package report

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/url"
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
)

// pageData returns the profile a page embeds.
// pageProfile is the page's data as its script reads them: htmlData with
// each stage's nodes decoded (its Stages hide htmlData's).
type pageProfile struct {
	htmlData
	Stages []pageStage `json:"stages"`
}

type pageStage struct {
	Name     string        `json:"name"`
	Samples  int64         `json:"samples"`
	Nodes    []int64       `json:"nodes"`
	Timeline *htmlTimeline `json:"timeline,omitempty"`
}

func pageData(t *testing.T, page []byte) pageProfile {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="profile">(.*?)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no profile in the page:\n%s", page)
	}
	var d pageProfile
	dec := json.NewDecoder(bytes.NewReader(m[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decoding the page's profile: %v\n%s", err, m[1])
	}
	return d
}

func htmlPage(t *testing.T, p *profile.Profile, o Options) ([]byte, pageProfile) {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, contract.FromPProf(p), o); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), pageData(t, b.Bytes())
}

// A pageNode is a node of a stage's tree, decoded.
type pageNode struct {
	frame    int
	value    int64
	children []*pageNode
}

// tree decodes the nodes of stage s, checking that they form one tree.
func (d *pageProfile) tree(t *testing.T, s int) *pageNode {
	t.Helper()
	nodes := d.Stages[s].Nodes
	if len(nodes)%3 != 0 {
		t.Fatalf("%d numbers in the nodes, not triples", len(nodes))
	}
	var read func() *pageNode
	read = func() *pageNode {
		n := &pageNode{frame: int(nodes[0]), value: nodes[1]}
		k := nodes[2]
		if n.frame < 0 || n.frame >= len(d.Names) {
			t.Fatalf("node of frame %d: the page has %d frames", n.frame, len(d.Names))
		}
		nodes = nodes[3:]
		for range k {
			if len(nodes) == 0 {
				t.Fatal("the nodes end within the tree")
			}
			n.children = append(n.children, read())
		}
		return n
	}
	root := read()
	if len(nodes) > 0 {
		t.Fatalf("%d numbers after the tree", len(nodes))
	}
	return root
}

// folded returns the tree's stacks as Folded writes them: names from the
// root's children down, joined by ";", each with its self value.
func (d *pageProfile) folded(t *testing.T, root *pageNode) map[string]int64 {
	t.Helper()
	stacks := make(map[string]int64)
	var walk func(n *pageNode, path []string)
	walk = func(n *pageNode, path []string) {
		self := n.value
		for i, c := range n.children {
			self -= c.value
			if c.value <= 0 {
				t.Errorf("%s;%s: value %d", strings.Join(path, ";"), d.Names[c.frame], c.value)
			}
			if i > 0 && d.Names[n.children[i-1].frame] >= d.Names[c.frame] {
				t.Errorf("%s: children %q and %q out of order", strings.Join(path, ";"), d.Names[n.children[i-1].frame], d.Names[c.frame])
			}
			walk(c, append(path, d.Names[c.frame]))
		}
		if self < 0 {
			t.Errorf("%s: children sum to more than its value %d", strings.Join(path, ";"), n.value)
		}
		if self > 0 {
			stacks[strings.Join(path, ";")] += self
		}
	}
	walk(root, nil)
	return stacks
}

func parseFolded(t *testing.T, b []byte) map[string]int64 {
	t.Helper()
	stacks := make(map[string]int64)
	for line := range strings.Lines(string(b)) {
		frames, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("folded line %q: %v", line, err)
		}
		stacks[frames] += n
	}
	return stacks
}

// TestHTMLFolded checks that the page's tree holds the stacks of Folded,
// with the same names, values and command roots.
func TestHTMLFolded(t *testing.T) {
	for _, tt := range foldedTests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := Folded(&b, contract.FromPProf(tt.p()), tt.o); err != nil {
				t.Fatal(err)
			}
			want := parseFolded(t, b.Bytes())
			_, d := htmlPage(t, tt.p(), tt.o)
			root := d.tree(t, 0)
			if got := d.folded(t, root); !maps.Equal(got, want) {
				t.Errorf("the page's stacks are\n%v\nFolded's\n%v", got, want)
			}
			var total int64
			for _, v := range want {
				total += v
			}
			if root.value != total || d.Names[root.frame] != "all" || d.Kind[root.frame] != 'r' {
				t.Errorf("root %q (kind %c) of value %d, want all (r) of %d", d.Names[root.frame], d.Kind[root.frame], root.value, total)
			}
		})
	}
}

func TestHTMLTree(t *testing.T) {
	page, d := htmlPage(t, processes(), Options{CommRoot: true})
	if d.Event != "cpu-clock" || d.Type != "samples" || d.Unit != "count" || len(d.Stages) != 1 || d.Stages[0].Samples != 100 || d.Stages[0].Name != "" {
		t.Errorf("event %q, type %q, unit %q, stages %+v", d.Event, d.Type, d.Unit, d.Stages)
	}
	if len(d.Module) != len(d.Names) || len(d.Kind) != len(d.Names) {
		t.Fatalf("%d names, %d modules, %d kinds", len(d.Names), len(d.Module), len(d.Kind))
	}

	// Each node, by its path of names, with its frame's kind and module.
	type node struct {
		kind   byte
		module string
		value  int64
	}
	nodes := make(map[string]node)
	var walk func(n *pageNode, path string)
	walk = func(n *pageNode, path string) {
		mod := ""
		if m := d.Module[n.frame]; m >= 0 {
			mod = d.Modules[m]
		}
		nodes[path] = node{d.Kind[n.frame], mod, n.value}
		for _, c := range n.children {
			walk(c, path+";"+d.Names[c.frame])
		}
	}
	walk(d.tree(t, 0), "all")
	for path, want := range map[string]node{
		"all":                                {'r', "", 100},
		"all;seq":                            {'c', "", 39},
		"all;seq;Interpreter::run":           {'j', "jit-200.dump", 39},
		"all;seq;Interpreter::run;Main.loop": {'j', "jit-200.dump", 35},
		"all;seq;Interpreter::run;Main.loop;memcmp":              {'n', "libc.so.6", 20},
		"all;sh;main;[libc.so.6]":                                {'u', "libc.so.6", 6},
		"all;sh;main;[libc.so.6];entry_SYSCALL_64":               {'k', "[kernel.kallsyms]", 6},
		"all;sh;main;evaltree":                                   {'n', "dash", 43},
		"all;node;LazyCompile:*fib;[perf-300.map]":               {'u', "perf-300.map", 4},
		"all;node;LazyCompile:*fib":                              {'j', "perf-300.map", 4}, // a perf map names jitted code too
		"all;sh;main;[libc.so.6];entry_SYSCALL_64;do_syscall_64": {'k', "[kernel.kallsyms]", 6},
	} {
		if got, ok := nodes[path]; !ok {
			t.Errorf("no node %s", path)
		} else if got != want {
			t.Errorf("%s: kind %c, module %q, value %d; want %c, %q, %d", path, got.kind, got.module, got.value, want.kind, want.module, want.value)
		}
	}
	if n := len(nodes); n != 20 {
		t.Errorf("%d nodes, want 20", n)
	}

	// Self-contained: nothing fetched from anywhere.
	if m := regexp.MustCompile(`(?i)https?://|\bsrc=|\bhref=|@import|url\(`).Find(page); m != nil {
		t.Errorf("the page refers to something to load: %q", m)
	}
	if bytes.Contains(bytes.ToLower([]byte(flameJS)), []byte("</script")) {
		t.Error("flame.js would end its script element early")
	}

	// Weighed by period, in nanoseconds.
	_, d = htmlPage(t, processes(), Options{Value: 1})
	if d.Type != "cpu-clock" || d.Unit != "nanoseconds" || d.Stages[0].Samples != 100 || d.tree(t, 0).value != 111_400_000 {
		t.Errorf("by period: type %q, unit %q, %d samples, total %d", d.Type, d.Unit, d.Stages[0].Samples, d.tree(t, 0).value)
	}
}

// TestHTMLNames checks that names that could end the page's script do
// not, and that a function two processes' dumps hold is one node naming
// both modules.
func TestHTMLNames(t *testing.T) {
	evil := "</script><script>alert(1)</script>&amp"
	p := newProfBuilder().
		add("node", 1, 2, 0, "/tmp/jit-1.dump:"+evil).
		add("node", 2, 3, 0, "/tmp/jit-2.dump:"+evil).
		p
	page, d := htmlPage(t, p, Options{CommRoot: true})
	if bytes.Contains(page, []byte("alert(1)</script>")) {
		t.Errorf("the name reaches the page unescaped:\n%s", page)
	}
	root := d.tree(t, 0)
	if len(root.children) != 1 || len(root.children[0].children) != 1 {
		t.Fatalf("want one command with one function, got %+v", root)
	}
	fn := root.children[0].children[0]
	if d.Names[fn.frame] != evil || d.Modules[d.Module[fn.frame]] != "jit-1.dump, jit-2.dump" || fn.value != 5 || d.Kind[fn.frame] != 'j' {
		t.Errorf("merged function: %q in %q, value %d, kind %c", d.Names[fn.frame], d.Modules[d.Module[fn.frame]], fn.value, d.Kind[fn.frame])
	}
}

func TestHTMLStages(t *testing.T) {
	var b bytes.Buffer
	if _, err := Write(FormatHTML, "", &b, []string{"startup", "steady"}, []*contract.Profile{contract.FromPProf(recursion()), contract.FromPProf(processes())}, Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	d := pageData(t, b.Bytes())
	if len(d.Stages) != 2 || d.Stages[0].Name != "startup" || d.Stages[1].Name != "steady" {
		t.Fatalf("stages %+v", d.Stages)
	}
	for i, want := range []int64{4, 100} {
		if v := d.tree(t, i).value; v != want || d.Stages[i].Samples != want {
			t.Errorf("stage %s: total %d of %d samples, want %d", d.Stages[i].Name, v, d.Stages[i].Samples, want)
		}
	}
	if f, err := ParseFormat("html"); err != nil || f != FormatHTML || f.ByAddress() || f.Directory() || f.CheckOutput("") != nil {
		t.Errorf("ParseFormat(html) = %v, %v", f, err)
	}
}

func TestHTMLErrors(t *testing.T) {
	if err := HTML(io.Discard, contract.FromPProf(processes()), Options{Value: 2}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("value 2: %v", err)
	}
	if err := HTML(io.Discard, contract.FromPProf(processes()), Options{MinPercent: -1}); err == nil {
		t.Error("negative percent limit accepted")
	}
	if err := HTML(failWriter{}, contract.FromPProf(processes()), Options{}); !errors.Is(err, errWrite) {
		t.Errorf("failing writer: %v, want %v", err, errWrite)
	}
}

func BenchmarkHTML(b *testing.B) {
	benchmark(b, func(p *contract.Profile) error { return HTML(io.Discard, p, Options{CommRoot: true}) })
}

// A devtools drives Chromium over --remote-debugging-pipe: requests are
// JSON messages, each ended by a NUL, on its fd 3, answers and events on
// its fd 4.
type devtools struct {
	t       *testing.T
	w       io.Writer
	r       *bufio.Reader
	id      int
	session string
	events  []event // seen and not yet waited for
}

type event struct {
	method string
	params json.RawMessage
}

// startChromium runs headless Chromium, bin, on about:blank and attaches
// to its page.
func startChromium(t *testing.T, bin string) *devtools {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	toChrome, ourEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromChrome, chromeEnd, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, append(fixtures.ChromiumFlags(t),
		"--remote-debugging-pipe", "--window-size=1000,700", "--hide-scrollbars", "about:blank")...)
	cmd.ExtraFiles = []*os.File{toChrome, chromeEnd}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toChrome.Close()
	chromeEnd.Close()
	c := &devtools{t: t, w: ourEnd, r: bufio.NewReader(fromChrome)}
	t.Cleanup(func() {
		c.send("Browser.close", nil)
		ourEnd.Close()
		kill := time.AfterFunc(5*time.Second, cancel)
		cmd.Wait()
		kill.Stop()
		cancel()
		fromChrome.Close()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", stderr.Bytes())
		}
	})

	var targets struct {
		TargetInfos []struct{ TargetID, Type string }
	}
	c.call("Target.getTargets", nil, &targets)
	for _, ti := range targets.TargetInfos {
		if ti.Type == "page" {
			var attached struct{ SessionID string }
			c.call("Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true}, &attached)
			c.session = attached.SessionID
			return c
		}
	}
	t.Fatalf("chromium has no page: %+v", targets)
	return nil
}

func (c *devtools) send(method string, params any) int {
	c.id++
	if params == nil {
		params = struct{}{}
	}
	msg := map[string]any{"id": c.id, "method": method, "params": params}
	if c.session != "" && !strings.HasPrefix(method, "Target.") && method != "Browser.close" {
		msg["sessionId"] = c.session
	}
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.w.Write(append(b, 0))
	return c.id
}

// read returns the next message, recording events.
func (c *devtools) read() (id int, result json.RawMessage) {
	c.t.Helper()
	b, err := c.r.ReadBytes(0)
	if err != nil {
		c.t.Fatalf("reading from chromium: %v", err)
	}
	var m struct {
		ID     int
		Method string
		Params json.RawMessage
		Result json.RawMessage
		Error  *struct{ Message string }
	}
	if err := json.Unmarshal(b[:len(b)-1], &m); err != nil {
		c.t.Fatalf("chromium's message %s: %v", b, err)
	}
	if m.Error != nil {
		c.t.Fatalf("chromium: %s", m.Error.Message)
	}
	if m.Method != "" {
		c.events = append(c.events, event{m.Method, m.Params})
	}
	return m.ID, m.Result
}

// call sends a request and decodes its answer into result (when not nil).
func (c *devtools) call(method string, params, result any) {
	c.t.Helper()
	id := c.send(method, params)
	for {
		got, res := c.read()
		if got != id {
			continue
		}
		if result != nil {
			if err := json.Unmarshal(res, result); err != nil {
				c.t.Fatalf("%s: %v: %s", method, err, res)
			}
		}
		return
	}
}

// wait reads until the event method has been seen.
func (c *devtools) wait(method string) {
	c.t.Helper()
	is := func(e event) bool { return e.method == method }
	for !slices.ContainsFunc(c.events, is) {
		c.read()
	}
	c.events = slices.DeleteFunc(c.events, is)
}

// open loads the page of p in the browser, from a file.
func (c *devtools) open(p *profile.Profile, o Options) {
	c.t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, contract.FromPProf(p), o); err != nil {
		c.t.Fatal(err)
	}
	c.load(b.Bytes())
}

// load loads a page in the browser, from a file.
func (c *devtools) load(page []byte) {
	c.t.Helper()
	path := filepath.Join(c.t.TempDir(), "flame.html")
	if err := os.WriteFile(path, page, 0o600); err != nil {
		c.t.Fatal(err)
	}
	c.call("Page.navigate", map[string]any{"url": (&url.URL{Scheme: "file", Path: path}).String()}, nil)
	c.wait("Page.loadEventFired")
}

// exceptions returns what the page's scripts threw.
func (c *devtools) exceptions() []string {
	var thrown []string
	for _, e := range c.events {
		if e.method == "Runtime.exceptionThrown" {
			thrown = append(thrown, string(e.params))
		}
	}
	return thrown
}

// eval evaluates expr in the page after the page has drawn its next
// frame, decoding the value into result unless it is nil.
func (c *devtools) eval(expr string, result any) {
	c.t.Helper()
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails json.RawMessage
	}
	c.call("Runtime.evaluate", map[string]any{
		"expression":    "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))).then(() => (" + expr + "))",
		"awaitPromise":  true,
		"returnByValue": true,
	}, &r)
	if r.ExceptionDetails != nil {
		c.t.Fatalf("%s: %s", expr, r.ExceptionDetails)
	}
	if result == nil {
		return
	}
	if err := json.Unmarshal(r.Result.Value, result); err != nil {
		c.t.Fatalf("%s = %s: %v", expr, r.Result.Value, err)
	}
}

func (c *devtools) mouse(typ string, x, y float64) {
	c.t.Helper()
	c.call("Input.dispatchMouseEvent", map[string]any{"type": typ, "x": x, "y": y, "button": "left", "clickCount": 1}, nil)
}

func (c *devtools) click(x, y float64) {
	c.t.Helper()
	c.mouse("mouseMoved", x, y)
	c.mouse("mousePressed", x, y)
	c.mouse("mouseReleased", x, y)
}

// clickOn clicks the middle of the element of the given id.
func (c *devtools) clickOn(id string) {
	c.t.Helper()
	var at struct{ X, Y float64 }
	c.eval(`(r => ({x: r.left + r.width / 2, y: r.top + r.height / 2}))(document.getElementById('`+id+`').getBoundingClientRect())`, &at)
	c.click(at.X, at.Y)
}

// recordLabels is run in the page before its scripts: it keeps the text
// drawn on the canvas since it was last cleared, with its place in the
// window, since a canvas's text is not in the DOM.
const recordLabels = `(() => {
	window.labels = [];
	const proto = CanvasRenderingContext2D.prototype, fillText = proto.fillText, clearRect = proto.clearRect;
	proto.clearRect = function (...a) {
		window.labels = [];
		return clearRect.apply(this, a);
	};
	proto.fillText = function (s, x, y, ...a) {
		const r = this.canvas.getBoundingClientRect();
		window.labels.push({text: s, x: r.left + x, y: r.top + y});
		return fillText.call(this, s, x, y, ...a);
	};
})();`

type label struct {
	Text string
	X, Y float64
}

func labelOf(labels []label, text string) (label, bool) {
	i := slices.IndexFunc(labels, func(l label) bool { return l.Text == text })
	if i < 0 {
		return label{}, false
	}
	return labels[i], true
}

// TestHTMLBrowser opens the page of a profile from disk in Chromium and
// uses it as a person would: the JIT functions' names are drawn, hovering
// names a frame, a click zooms into it, the search tells the share of the
// samples that match, Reset zooms out, and the flame layout puts the root
// at the bottom.
func TestHTMLBrowser(t *testing.T) {
	c := startChromium(t, fixtures.LookPath(t, "chromium"))
	c.call("Page.enable", nil, nil)
	c.call("Runtime.enable", nil, nil)
	c.call("Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": recordLabels}, nil)
	c.open(processes(), Options{CommRoot: true})

	var labels []label
	c.eval("window.labels", &labels)
	texts := make([]string, len(labels))
	for i, l := range labels {
		texts[i] = l.Text
	}
	for _, name := range []string{"Interpreter::run", "Main.loop", "evaltree", "strlen", "all"} {
		if !slices.Contains(texts, name) {
			t.Errorf("%s is not drawn; the page drew %q", name, texts)
		}
	}
	loop, ok := labelOf(labels, "Main.loop")
	if !ok {
		t.FailNow()
	}

	c.mouse("mouseMoved", loop.X+4, loop.Y)
	var tip string
	c.eval("document.getElementById('tip').hidden ? '' : document.getElementById('tip').innerText", &tip)
	for _, want := range []string{"Main.loop", "JIT-compiled in jit-200.dump", "35 samples, 35.00%"} {
		if !strings.Contains(tip, want) {
			t.Errorf("hovering over Main.loop, the tooltip reads %q, want %q in it", tip, want)
		}
	}

	c.click(loop.X+4, loop.Y)
	var title string
	c.eval("document.title", &title)
	if !strings.HasPrefix(title, "Main.loop — ") {
		t.Errorf("after a click on Main.loop the title is %q", title)
	}
	c.eval("window.labels", &labels)
	if l, ok := labelOf(labels, "Main.loop"); !ok || l.X > 10 {
		t.Errorf("zoomed into Main.loop, it is drawn at %+v (found %v), want the left edge", l, ok)
	}
	if l, ok := labelOf(labels, "memcmp"); !ok || l.X > 10 {
		t.Errorf("zoomed into Main.loop, its callee memcmp (20 of its 35 samples) is drawn at %+v (found %v)", l, ok)
	}
	if _, ok := labelOf(labels, "strlen"); ok {
		t.Error("zoomed into Main.loop, strlen of another process is still drawn")
	}

	c.eval("document.getElementById('search').focus()", nil)
	c.call("Input.insertText", map[string]any{"text": "loop"}, nil)
	var match string
	c.eval("document.getElementById('match').textContent", &match)
	if want := "matches 35.00% of samples (35 samples), 100.00% of Main.loop"; match != want {
		t.Errorf("searching for loop: %q, want %q", match, want)
	}

	c.clickOn("reset")
	c.eval("document.title", &title)
	if strings.Contains(title, "Main.loop") {
		t.Errorf("after Reset zoom the title is %q", title)
	}
	c.eval("window.labels", &labels)
	if _, ok := labelOf(labels, "strlen"); !ok {
		t.Error("after Reset zoom, strlen is not drawn")
	}

	c.clickOn("flame")
	c.eval("window.labels", &labels)
	root, _ := labelOf(labels, "all")
	if loop, ok := labelOf(labels, "Main.loop"); !ok || root.Y <= loop.Y {
		t.Errorf("in the flame layout the root is drawn at %+v, Main.loop at %+v (found %v): want the root below", root, loop, ok)
	}

	c.open(empty(), Options{})
	var shown bool
	c.eval("!document.getElementById('empty').hidden", &shown)
	if !shown {
		t.Error("the page of an empty profile does not say it has no samples")
	}
	if thrown := c.exceptions(); len(thrown) > 0 {
		t.Errorf("the page threw %s", thrown)
	}
}
