package annotate

import (
	"bufio"
	"bytes"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/runtimes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/report"
)

// TestNodeReportNames: node runs testdata/workloads/inlined.js under perf,
// where TurboFan inlines horner, mix and collatz into runLeaves. Each of
// the first ten names jitprof's report prints is annotated; every
// instruction of JavaScript code has a source, that of each sampled
// address is the line pprof -lines gives it (the innermost of its
// location's lines in jitprof's profile) and its samples are the
// profile's; an inlined function's rows are marked in its holder's code,
// and their lines are inside the function's source. node runs with
// --always-sparkplug, as in dumpindex's TestV8InlineShares: the inlined
// functions' own baseline code, which bounds them, is otherwise in the dump
// only by chance.
func TestNodeReportNames(t *testing.T) {
	workload := fixtures.Workload(t, "inlined.js")
	node := fixtures.LookPath(t, "node")
	dir := t.TempDir()
	t.Chdir(dir) // node writes its dump in the working directory
	data := filepath.Join(dir, "perf.data")
	fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "4000", "-g", "-o", data, "--",
		node, "--always-sparkplug", "--perf-prof", workload, "leaves", "2")
	res, err := perfprof.Run(perfprof.Options{Input: data})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Profile
	// The profile the command annotates: callers by function, only the
	// leaf by address. It must give what the profile by address gives.
	res, err = perfprof.Run(perfprof.Options{Input: data, PerFunction: true, LeafAddresses: true})
	if err != nil {
		t.Fatal(err)
	}
	leafOnly := res.Profile

	var text bytes.Buffer
	if err := report.Text(&text, p, report.Options{}); err != nil {
		t.Fatal(err)
	}
	symbolCol := regexp.MustCompile(`^\s+[0-9.]+%\s+\d+\s+\S+\s+\S+\s+\[.\] (.+)$`)
	var names []string
	for l := range strings.Lines(text.String()) {
		if m := symbolCol.FindStringSubmatch(strings.TrimRight(l, "\n")); m != nil && len(names) < 10 {
			names = append(names, m[1])
		}
	}
	if len(names) < 10 {
		t.Fatalf("the report names %d functions:\n%s", len(names), text.String())
	}

	// What pprof gives each sampled address of jitted code: by the start
	// of its function's place (its mapping) and address.
	type at struct{ start, addr uint64 }
	type place struct {
		source  string
		leaf    string // the innermost function's SystemName
		samples int64
	}
	pprof := make(map[at]place)
	for _, s := range p.PProf().Sample {
		loc := s.Location[0]
		if !contract.IsJIT(loc.Mapping) || len(loc.Line) == 0 {
			continue
		}
		k := at{loc.Mapping.Start, loc.Address}
		pl := pprof[k]
		leaf := loc.Line[0]
		pl.source = fmt.Sprintf("%s:%d", filepath.Base(leaf.Function.Filename), leaf.Line)
		pl.leaf = leaf.Function.SystemName
		pl.samples += s.Value[0]
		pprof[k] = pl
	}

	body := functionLines(t, workload)
	startRE := regexp.MustCompile(`, 0x([0-9a-f]+)-0x[0-9a-f]+, `)
	var jsRows, lined, sampledRows, inlinedSections int
	for _, name := range names {
		var out, asCommand bytes.Buffer
		if err := Write(&out, p, name, Options{Syntax: disasm.GNU}); err != nil {
			t.Errorf("annotate %q: %v", name, err)
			continue
		}
		if err := Write(&asCommand, leafOnly, name, Options{Syntax: disasm.GNU}); err != nil || asCommand.String() != out.String() {
			t.Errorf("annotate %q of the profile with only leaves by address (%v):\n%s\nof the profile by address:\n%s", name, err, asCommand.String(), out.String())
		}
		for _, sec := range parse(t, out.String()) {
			m := startRE.FindStringSubmatch(sec.header)
			if !strings.Contains(sec.header, "(jit-") || m == nil {
				continue
			}
			start, _ := strconv.ParseUint(m[1], 16, 64)
			holder, inlined, isInlined := strings.Cut(sec.header, " inlined into ")
			if isInlined {
				inlinedSections++
				holder = inlined
			}
			holder, _, _ = strings.Cut(holder, "  (")
			js := strings.HasPrefix(holder, "JS:")
			marked := 0
			for _, r := range sec.rows {
				source, atStart := strings.CutSuffix(r.source, " (start)")
				if js {
					jsRows++
					if source == "" {
						t.Errorf("%s %#x: no source", sec.header, r.addr)
					}
					if !atStart {
						lined++
					}
				}
				if r.marked {
					marked++
					n, _ := runtimes.ParseV8Name(strings.TrimSuffix(name, contract.InferredSuffix))
					lines := body[n.Name]
					line, _ := strconv.Atoi(source[strings.LastIndex(source, ":")+1:])
					if atStart || lines[0] == 0 || line < lines[0] || line > lines[1] {
						t.Errorf("%s: marked row %#x at %s, outside %s's lines %d-%d", name, r.addr, r.source, n.Name, lines[0], lines[1])
					}
				}
				want, sampled := pprof[at{start, r.addr}]
				if !sampled {
					if r.samples != 0 {
						t.Errorf("%s %#x: %d samples, none in pprof", sec.header, r.addr, r.samples)
					}
					continue
				}
				sampledRows++
				if source != want.source {
					t.Errorf("%s %#x: source %s, pprof's %s", sec.header, r.addr, source, want.source)
				}
				wantSamples := want.samples
				if isInlined && !r.marked {
					wantSamples = 0 // the holder's own, or another inlined function's
				}
				if int64(r.samples) != wantSamples {
					t.Errorf("%s %#x: %d samples, want %d", sec.header, r.addr, r.samples, wantSamples)
				}
			}
			if isInlined && marked == 0 {
				t.Errorf("%s: no row marked as the inlined function's", sec.header)
			}
		}
	}
	t.Logf("%d instructions of JavaScript functions annotated, %d (%.0f%%) with a line the dump gives, the rest the function's start; %d sampled ones compared with pprof; %d inlined sections",
		jsRows, lined, 100*float64(lined)/float64(max(jsRows, 1)), sampledRows, inlinedSections)
	// Measured: 45% (the inlined functions' code); the rest is runLeaves'
	// own, whose lines node 20 garbles.
	if 4*lined < jsRows {
		t.Errorf("only %d of %d instructions of JavaScript functions have a line the dump gives", lined, jsRows)
	}
	if inlinedSections == 0 || sampledRows == 0 {
		t.Errorf("the report's first ten names hold no inlined function or no sampled JavaScript: the test tests nothing\n%s", text.String())
	}
}

// functionLines returns the lines of each function of the script at path,
// from "function NAME(" to its closing brace, the first line that is "}".
func functionLines(t *testing.T, path string) map[string][2]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decl := regexp.MustCompile(`^function (\w+)\(`)
	lines := make(map[string][2]int)
	var open string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if m := decl.FindStringSubmatch(sc.Text()); m != nil {
			open = m[1]
			lines[open] = [2]int{n, 0}
		} else if sc.Text() == "}" && open != "" {
			lines[open] = [2]int{lines[open][0], n}
			open = ""
		}
	}
	return lines
}
