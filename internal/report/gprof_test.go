package report

import (
	"bytes"
	"debug/elf"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/gmon"
	"github.com/jitprof/jitprof/internal/perfprof"
)

// gprofFiles analyses a recording and writes what --format gmon writes:
// the ELF symbol file and gmon.out, in a temporary directory.
func gprofFiles(t *testing.T, data string) (res *perfprof.Result, prog *gmon.Program, symbols, gmonOut string) {
	t.Helper()
	res, err := perfprof.Run(perfprof.Options{Input: data})
	if err != nil {
		t.Fatal(err)
	}
	prog, profiles, err := gprofProgram(nil, res.Profile)
	if err != nil {
		t.Fatal(err)
	}
	m, o, err := gmon.HostMachine()
	if err != nil {
		t.Skip(err)
	}
	l := prog.Layout(profiles...)
	dir := t.TempDir()
	var sym, hist bytes.Buffer
	if err := prog.WriteELF(&sym, m, o, l); err != nil {
		t.Fatal(err)
	}
	if err := gmon.WriteGmon(&hist, o, l, profiles[0]); err != nil {
		t.Fatal(err)
	}
	symbols, gmonOut = filepath.Join(dir, "symbols"), filepath.Join(dir, "gmon.out")
	for path, b := range map[string][]byte{symbols: sym.Bytes(), gmonOut: hist.Bytes()} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return res, prog, symbols, gmonOut
}

// textShares is each symbol's share in percent in jitprof report's text
// output sorted by symbol; addresses no symbol names count together as
// _unaccounted_, as gprof shows them.
func textShares(t *testing.T, p *Options, res *perfprof.Result) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	if err := Text(&b, res.Profile, *p); err != nil {
		t.Fatal(err)
	}
	shares := map[string]float64{}
	for line := range strings.Lines(b.String()) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") || (f[2] != "[.]" && f[2] != "[k]") {
			continue
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		if err != nil {
			t.Fatalf("text line %q", line)
		}
		name := strings.Join(f[3:], " ")
		if strings.HasPrefix(name, "0x") || name == "[unknown]" {
			name = gmon.UnaccountedName
		}
		shares[name] += pct
	}
	return shares
}

// sameShares checks that gprof gives each function the share the text
// report gives it, within the rounding of the two printouts (two decimals
// for each entry: gprof lists each incarnation of a name on its own).
func sameShares(t *testing.T, flat string, text map[string]float64) {
	t.Helper()
	gprofShares, entries := fixtures.FlatShares(t, flat)
	for name, pct := range text {
		tol := 0.0051 * float64(1+entries[name])
		if name == gmon.UnaccountedName {
			tol = 0.1
		}
		if math.Abs(gprofShares[name]-pct) > tol {
			t.Errorf("%q: gprof %.2f%%, jitprof report %.2f%%", name, gprofShares[name], pct)
		}
	}
	for name, pct := range gprofShares {
		if _, ok := text[name]; !ok && pct > 0.011 {
			t.Errorf("%q: gprof %.2f%%, not in jitprof report", name, pct)
		}
	}
}

// TestGprofGroundTruth is the acceptance test: a JIT that moves a function
// and gives one address to three functions in turn (examples/minijit) is
// recorded with call graphs; gprof, reading what jitprof wrote, gives every
// function the share of the samples jitprof report gives it and the share
// of CPU time the program measured, keeps each function incarnation apart,
// and shows the driver calling the loops.
func TestGprofGroundTruth(t *testing.T) {
	bin := fixtures.BuildTestJIT(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	out := fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-g", "-F", "4000", "-o", data, "--", bin, "-dir", dir, "-duration", "1.5s")
	tr := fixtures.ParseJITTruth(t, out)

	res, prog, symbols, gmonOut := gprofFiles(t, data)
	flat := fixtures.RunGprof(t, "-p", symbols, gmonOut)
	t.Logf("gprof's flat profile:\n%.2000s", flat)
	got, _ := fixtures.FlatShares(t, flat)
	sameShares(t, flat, textShares(t, &Options{Sort: []string{"symbol"}}, res))

	counts := map[string]float64{}
	for name, pct := range got {
		counts[name] = pct / 100 * float64(res.Kept)
	}
	fixtures.CheckShares(t, tr, "gprof", counts)

	// Each incarnation its own symbol, at its own address: the truth's
	// code indexes of the functions that shared an address are all there,
	// and the ELF file gives each function a range of its own.
	indexes := map[uint64]string{}
	for _, f := range prog.Symbols {
		if f.CodeIndex != 0 {
			indexes[f.CodeIndex] = f.Name
		}
	}
	for _, ph := range tr.Phases {
		for _, fn := range ph.Functions {
			if indexes[fn.CodeIndex] != fn.Name && tr.Functions[fn.Name].CPUNanos > 0 {
				t.Errorf("%s (code_index %d) has no symbol of its own: %v", fn.Name, fn.CodeIndex, indexes)
			}
		}
	}
	ef, err := elf.Open(symbols)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := ef.Symbols()
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	starts := map[uint64]string{}
	for _, s := range syms {
		if other, dup := starts[s.Value]; dup && s.Size > 0 {
			t.Errorf("%s and %s share address %#x", s.Name, other, s.Value)
		}
		if s.Size > 0 {
			starts[s.Value] = s.Name
		}
	}

	// The call graph has the arcs of the sampled call chains: the calls
	// between jitted functions that the program made.
	graph := fixtures.RunGprof(t, "-q", symbols, gmonOut)
	if len(tr.Calls) == 0 {
		t.Fatal("minijit reports no calls between jitted functions")
	}
	for _, c := range tr.Calls {
		if !callerOf(graph, c.Caller, c.Callee) {
			t.Errorf("gprof's call graph does not show %s calling %s:\n%.3000s", c.Caller, c.Callee, graph)
		}
	}
}

// callerOf tells whether gprof's call graph lists caller above the primary
// line of callee's entry.
func callerOf(graph, caller, callee string) bool {
	for entry := range strings.SplitSeq(graph, "-----") {
		var parents []string
		for line := range strings.Lines(entry) {
			if strings.HasPrefix(line, "[") {
				if strings.Contains(line, " "+callee+" [") {
					for _, p := range parents {
						if strings.Contains(p, " "+caller+" [") {
							return true
						}
					}
				}
				break
			}
			parents = append(parents, line)
		}
	}
	return false
}

// TestGprofNode: on node's recording with call graphs, gprof's flat
// profile gives every function, jitted and native, the share jitprof
// report's text output gives it.
func TestGprofNode(t *testing.T) {
	rec := fixtures.Record(t, fixtures.Node, "-g")
	res, prog, symbols, gmonOut := gprofFiles(t, rec.PerfData)
	jitted := 0
	for _, f := range prog.Symbols {
		if f.CodeIndex != 0 {
			jitted++
		}
	}
	if jitted == 0 || jitted == len(prog.Symbols) {
		t.Errorf("%d jitted functions of %d: want both jitted and native ones", jitted, len(prog.Symbols))
	}
	sameShares(t, fixtures.RunGprof(t, "-p", symbols, gmonOut), textShares(t, &Options{Sort: []string{"symbol"}}, res))
	graph := fixtures.RunGprof(t, "-q", symbols, gmonOut)
	if strings.Count(graph, "\n") < 50 || !strings.Contains(graph, "/") {
		t.Errorf("gprof's call graph of node shows no calls:\n%.2000s", graph)
	}
}

// TestGprofHostilePerfMap: a perf map line, which any process may write,
// claiming a terabyte of code around a sampled address costs the gmon
// output what the samples need: it used to size the function's histogram
// by the claim, and the report died out of memory.
func TestGprofHostilePerfMap(t *testing.T) {
	dir := t.TempDir()
	const pid, anon = 4242, 0x50000000
	claim := fmt.Sprintf("%x 10000000000 huge\n", anon) // 1 TiB
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("perf-%d.map", pid)), []byte(claim), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := synth.NewRecording()
	rec.Comm(pid, pid, "mono")
	rec.Map(pid, anon, 0x10000, "//anon")
	for range 10 {
		rec.Sample(pid, anon+0x10)
	}
	data := filepath.Join(dir, "perf.data")
	if err := rec.Write(data); err != nil {
		t.Fatal(err)
	}
	_, prog, symbols, gmonOut := gprofFiles(t, data)
	if len(prog.Symbols) != 1 || prog.Symbols[0].Name != "huge" {
		t.Fatalf("symbols %+v, want huge", prog.Symbols)
	}
	if fi, err := os.Stat(gmonOut); err != nil || fi.Size() > 64<<10 {
		t.Errorf("gmon.out: %v, %d bytes for one sampled place", err, fi.Size())
	}
	shares, _ := fixtures.FlatShares(t, fixtures.RunGprof(t, "-p", symbols, gmonOut))
	if shares["huge"] != 100 {
		t.Errorf("gprof's shares %v, want all in huge", shares)
	}
}
