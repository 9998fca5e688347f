package webui

import (
	"bytes"
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"html"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// testProfile builds a CPU profile of three functions of the node dump at
// path. It is a test input, not a recording: its samples are stacks of two
// or three of the functions, at one of their line entries each, under main
// in node's executable as the native root.
func testProfile(t *testing.T, path string, d *dumpindex.Dump, node string) (*profile.Profile, []*dumpindex.Code) {
	t.Helper()
	fns := fixtures.LinedFunctions(d, 3)
	if len(fns) < 3 {
		t.Fatalf("node wrote %d functions with lines, want 3", len(fns))
	}
	fns = fns[:3]
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     100000,
		TimeNanos:  time.Now().UnixNano(),
	}
	jit := &profile.Mapping{ID: 1, File: path, BuildID: contract.JITBuildID, HasFunctions: true, HasFilenames: true, HasLineNumbers: true, Start: ^uint64(0)}
	p.Mapping = append(p.Mapping, jit)
	var locs []*profile.Location
	for _, fn := range fns {
		jit.Start = min(jit.Start, fn.CodeAddr)
		jit.Limit = max(jit.Limit, fn.CodeAddr+fn.CodeSize)
		e := fixtures.FirstEntry(fn)
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: fn.Name, SystemName: fn.Name, Filename: e.File}
		p.Function = append(p.Function, f)
		locs = append(locs, &profile.Location{ID: uint64(len(locs) + 1), Mapping: jit, Address: e.Addr,
			Line: []profile.Line{{Function: f, Line: int64(e.Line)}}})
	}

	ef, err := elf.Open(node)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	native := &profile.Mapping{ID: 2, File: node, HasFunctions: true}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_LOAD && prog.Flags&elf.PF_X != 0 {
			native.Start, native.Limit, native.Offset = prog.Vaddr&^0xfff, prog.Vaddr+prog.Memsz, prog.Off&^0xfff
		}
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(syms, func(s elf.Symbol) bool { return s.Name == "main" })
	if i < 0 {
		t.Fatalf("%s has no main", node)
	}
	mainFn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: "main", SystemName: "main"}
	p.Function = append(p.Function, mainFn)
	root := &profile.Location{ID: uint64(len(locs) + 1), Mapping: native, Address: syms[i].Value,
		Line: []profile.Line{{Function: mainFn}}}
	p.Mapping = append(p.Mapping, native)
	p.Location = append(locs, root)

	for _, s := range []struct {
		stack []*profile.Location // leaf first
		n     int64
	}{
		{[]*profile.Location{locs[0], locs[1], locs[2], root}, 50},
		{[]*profile.Location{locs[1], locs[2], root}, 30},
		{[]*profile.Location{locs[0], locs[2], root}, 20},
	} {
		p.Sample = append(p.Sample, &profile.Sample{Location: s.stack, Value: []int64{s.n, s.n * p.Period}})
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	return p, fns
}

// server is a web interface a test serves.
type server struct {
	base  string // such as http://127.0.0.1:8080
	token string
}

// at returns the URL of path on s with the query params (name, value
// pairs) and the token.
func (s server) at(path string, params ...string) string {
	q := url.Values{tokenParam: {s.token}}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return s.base + path + "?" + q.Encode()
}

// serveTest serves p with o (on 127.0.0.1, unless o says otherwise) until
// the test ends, which checks that Serve leaves no file behind.
func serveTest(t *testing.T, p *profile.Profile, o Options) server {
	t.Helper()
	if o.HostPort == "" {
		o.HostPort = "127.0.0.1:0"
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	o.Ready = func(u string) { ready <- u }
	go func() { done <- Serve(ctx, p, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return 10 s after its context was canceled")
		}
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("Serve left %s in its TMPDIR", left[0].Name())
		}
	})
	select {
	case u := <-ready:
		parsed, err := url.Parse(u)
		if err != nil || parsed.Path != "/ui/" || parsed.Query().Get(tokenParam) == "" {
			t.Fatalf("Serve gave the URL %q, want http://HOST:PORT/ui/?%s=...", u, tokenParam)
		}
		return server{base: "http://" + parsed.Host, token: parsed.Query().Get(tokenParam)}
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Serve was not ready after 30 s")
	}
	return server{}
}

// fetch GETs u and returns its status and body, unescaped from HTML.
func fetch(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, html.UnescapeString(string(body))
}

// get fetches u and returns its body, unescaped from HTML.
func get(t *testing.T, u string) string {
	t.Helper()
	code, body := fetch(t, u)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", u, code, body)
	}
	return body
}

// chromium runs headless Chromium, bin, with args after the options every
// run needs, and returns its standard output.
func chromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The virtual time budget lets the page's scripts finish before the
	// DOM or the screenshot is taken, however slow the machine.
	cmd := exec.CommandContext(ctx, bin, slices.Concat(fixtures.ChromiumFlags(t), []string{"--virtual-time-budget=10000"}, args)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// scriptElems matches script elements, which hold the profile's data: a
// name found outside them was put in the page by the flame graph's code.
var scriptElems = regexp.MustCompile(`(?s)<script.*?</script>`)

func TestWebUI(t *testing.T) {
	browser := fixtures.LookPath(t, "chromium")
	path, d := fixtures.NodeDump(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err) // nodeDump ran it
	}
	p, fns := testProfile(t, path, d, node)
	srv := serveTest(t, p, Options{})

	// The flame graph, drawn by its scripts in a real browser.
	dom := scriptElems.ReplaceAllString(chromium(t, browser, "--dump-dom", srv.at("/ui/flamegraph")), "")
	drawn := 0
	for _, fn := range fns {
		if strings.Contains(html.UnescapeString(dom), fn.Name) {
			drawn++
		}
	}
	if drawn == 0 || !strings.Contains(dom, `class="boxtext"`) {
		t.Errorf("the flame graph shows none of %q:\n%s", []string{fns[0].Name, fns[1].Name, fns[2].Name}, dom)
	}

	// The disassembly of a jitted function, from the dump: instructions,
	// with the function's source lines.
	fn := fns[0]
	text := get(t, srv.at("/ui/disasm", "f", regexp.QuoteMeta(fn.Name)))
	if !strings.Contains(text, "ROUTINE ======================== "+fn.Name) {
		t.Fatalf("the disassembly of %s has no routine for it:\n%s", fn.Name, text)
	}
	insts := regexp.MustCompile(`(?m)^\s+\S+\s+\S+\s+[0-9a-f]+: (\S+)`).FindAllStringSubmatch(text, -1)
	if len(insts) < 10 {
		t.Errorf("the disassembly of %s has %d instructions:\n%s", fn.Name, len(insts), text)
	}
	// pprof writes the base name of the file.
	e := fixtures.FirstEntry(fn)
	if line := fmt.Sprintf("%s %s:%d\n", fn.Name, filepath.Base(e.File), e.Line); !strings.Contains(text, line) {
		t.Errorf("the disassembly of %s has no %q:\n%s", fn.Name, line, text)
	}

	// pprof's source view falls back to the instructions' lines.
	if text := get(t, srv.at("/ui/source", "f", regexp.QuoteMeta(fn.Name))); !strings.Contains(text, fn.Name) {
		t.Errorf("the source view of %s does not name it:\n%s", fn.Name, text)
	}

	// Paths outside the driver's handlers are not served.
	if code, _ := fetch(t, srv.at("/ui/debug/pprof/")); code != http.StatusNotFound {
		t.Errorf("GET /ui/debug/pprof/: %d, want 404", code)
	}
}

var (
	screenshot        = flag.String("screenshot", "", "write a PNG `file` of the flame graph, such as docs/webui.png")
	screenshotProfile = flag.String("screenshot.profile", "", "show the pprof `file` that jitprof report --format pprof wrote, its dumps at their recorded paths, instead of the test's profile")
)

// TestScreenshot makes the documentation's picture of the web interface,
// when given -screenshot. For a real profile rather than the test's, record
// a node run and have jitprof make a profile of it:
//
//	cd $(mktemp -d)
//	perf record -g -k mono -F 10000 node --perf-prof testdata/workloads/manyfunctions.js 1500
//	jitprof report --format pprof -o profile.pb.gz
//	cd - && go test ./internal/webui -run TestScreenshot \
//		-screenshot $PWD/docs/webui.png -screenshot.profile $OLDPWD/profile.pb.gz
func TestScreenshot(t *testing.T) {
	if *screenshot == "" {
		t.Skip("no -screenshot file given")
	}
	browser := fixtures.LookPath(t, "chromium")
	out, err := filepath.Abs(*screenshot)
	if err != nil {
		t.Fatal(err)
	}
	var p *profile.Profile
	if *screenshotProfile != "" {
		f, err := os.Open(*screenshotProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if p, err = profile.Parse(f); err != nil {
			t.Fatal(err)
		}
	} else {
		path, d := fixtures.NodeDump(t)
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatal(err)
		}
		p, _ = testProfile(t, path, d, node)
	}
	srv := serveTest(t, p, Options{})
	chromium(t, browser, "--screenshot="+out, "--window-size=1400,900", "--hide-scrollbars", srv.at("/ui/flamegraph"))
	t.Logf("wrote %s", out)
}

// boxText matches the names the flame graph drew in its boxes.
var boxText = regexp.MustCompile(`<div class="boxtext"[^>]*>([^<]*)</div>`)

// TestFlameGraphNames: on a real node recording, the flame graph draws
// named JavaScript functions by their whole names, such as "JS:*get total",
// never by the end of their script's path after a dot ("js:11:12"), as
// pprof would cut V8's own names; its header names node as the program.
func TestFlameGraphNames(t *testing.T) {
	browser := fixtures.LookPath(t, "chromium")
	rec := fixtures.Record(t, fixtures.NodeNames, "-g")
	res, err := perfprof.Run(perfprof.Options{Input: rec.PerfData})
	if err != nil {
		t.Fatal(err)
	}
	// What the flame graph must not draw: the ends of named functions'
	// V8 names after a dot. Nameless ones keep V8's name, place and all.
	cut := map[string]string{}
	named := regexp.MustCompile(`^JS:[~^+*]?[^ ~^+*]`)
	for _, fn := range res.Profile.PProf().Function {
		if named.MatchString(fn.SystemName) {
			for i, c := range fn.SystemName {
				if c == '.' {
					cut[fn.SystemName[i+1:]] = fn.SystemName
				}
			}
		}
	}
	if len(cut) == 0 {
		t.Fatal("the profile has no named JavaScript function")
	}
	srv := serveTest(t, res.Profile.PProf(), Options{})

	page := get(t, srv.at("/ui/flamegraph"))
	if m := regexp.MustCompile(`id="details">([^<]*)<`).FindStringSubmatch(page); m == nil || !strings.HasPrefix(m[1], "node ") {
		t.Errorf("the header names %q as the program, want node", m)
	}

	// Wide, so that the boxes of functions with a few percent of the
	// samples are wide enough to hold their names.
	dom := html.UnescapeString(chromium(t, browser, "--window-size=3000,800", "--dump-dom", srv.at("/ui/flamegraph")))
	// A function TurboFan inlined is drawn as an inferred frame, by its
	// whole name too.
	whole := regexp.MustCompile(`^JS:[~^+*](flatMap|check|get total|square|evaldSum)(` + regexp.QuoteMeta(contract.InferredSuffix) + `)?$`)
	drawn := map[string]bool{}
	for _, m := range boxText.FindAllStringSubmatch(dom, -1) {
		text := m[1]
		if raw, ok := cut[text]; ok {
			t.Errorf("the flame graph draws %q for %q", text, raw)
		}
		if whole.MatchString(text) {
			drawn[whole.FindStringSubmatch(text)[1]] = true
		}
	}
	t.Logf("%d boxes drawn; whole JavaScript names among them: %v", len(boxText.FindAllString(dom, -1)), slices.Sorted(maps.Keys(drawn)))
	if len(drawn) < 3 {
		t.Errorf("the flame graph draws %d of the workload's named functions by their names (%v), want 3 or more", len(drawn), drawn)
	}
}

// TestOpenBrowser: the browser Serve opens shows the interface, let in by
// the token of a page it is sent to, which it never gets on its command
// line (where every local user reads it).
func TestOpenBrowser(t *testing.T) {
	browser := fixtures.LookPath(t, "chromium")
	dir := t.TempDir()
	args, dom := filepath.Join(dir, "args"), filepath.Join(dir, "dom")
	script := filepath.Join(dir, "browser")
	flags := strings.Join(slices.Concat(fixtures.ChromiumFlags(t), []string{"--virtual-time-budget=10000", "--dump-dom"}), " ")
	text := fmt.Sprintf("#!/bin/sh\necho \"$@\" > %s\n%s %s \"$@\" > %s.part 2>%s.err; mv %s.part %s\n", args, browser, flags, dom, dom, dom, dom)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BROWSER", script)
	p := sourceProfile(t, []sourceCase{{fn: "JS:*openedWork", file: "work.js", line: 1}}, "", "")
	srv := serveTest(t, p, Options{OpenBrowser: true})
	deadline := time.Now().Add(2 * time.Minute)
	var page []byte
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(dom); err == nil {
			page = b
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if page == nil {
		stderr, _ := os.ReadFile(dom + ".err")
		t.Fatalf("the browser wrote no page in 2 minutes:\n%s", stderr)
	}
	if !bytes.Contains(page, []byte("openedWork")) {
		stderr, _ := os.ReadFile(dom + ".err")
		t.Errorf("the browser's page does not show the profile:\n%s\nits errors:\n%s", page, stderr)
	}
	argv, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(argv, []byte(srv.token)) || !bytes.Contains(argv, []byte("file://")) {
		t.Errorf("the browser was started with %q: want a file, not the token", argv)
	}
}
