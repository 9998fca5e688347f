package jitdump_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// minijitReport is the truth examples/minijit prints.
type minijitReport struct {
	Dump      string `json:"dump"`
	Functions map[string]struct {
		CPUNanos int64 `json:"cpu_ns"`
	} `json:"functions"`
	Phases []struct {
		Start     uint64 `json:"start_ns"`
		End       uint64 `json:"end_ns"`
		Functions []struct {
			Name      string `json:"name"`
			Addr      uint64 `json:"addr"`
			Size      uint64 `json:"size"`
			CodeIndex uint64 `json:"code_index"`
		} `json:"functions"`
	} `json:"phases"`
}

// TestPerfJIT profiles a real JIT, examples/minijit, with perf and checks
// that perf, reading the Writer's dump, names the jitted functions with the
// shares of CPU time they really had, through a move and an address reuse.
func TestPerfJIT(t *testing.T) {
	if testing.Short() {
		t.Skip("runs perf for several seconds")
	}
	data, out := fixtures.RecordTestJIT(t, 2000, "1.5s")
	tmp := filepath.Dir(data)
	// perf inject copies what it sees into a build-id cache; a private
	// one keeps ~/.debug clean.
	perf := []string{"perf", "--buildid-dir", filepath.Join(tmp, "buildid")}
	jitData := filepath.Join(tmp, "perf.jit.data")
	var truth minijitReport
	if err := json.Unmarshal(out, &truth); err != nil {
		t.Fatalf("minijit's report: %v\n%s", err, out)
	}
	lines := checkDump(t, &truth)

	run(t, append(perf, "inject", "--jit", "-i", data, "-o", jitData)...)
	report := run(t, append(perf, "report", "-i", jitData, "--stdio", "--sort", "sym", "-g", "none", "--show-nr-samples")...)
	logReport(t, report)
	checkShares(t, &truth, report)

	script := run(t, append(perf, "script", "-i", jitData, "--ns", "-F", "time,ip,sym")...)
	checkPlacements(t, &truth, script)

	bySrcline := run(t, append(perf, "script", "-i", jitData, "--ns", "-F", "time,ip,sym,srcline")...)
	checkSrclines(t, &truth, lines, bySrcline)
}

// run runs a command and returns its standard output; a failure ends the
// test with its standard error.
func run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	t.Logf("%s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// lineTable is what a function's DEBUG_INFO says, as perf can see it.
type lineTable struct {
	lines map[string]bool // "minijit.src:12"
	last  uint64          // the offset of the last entry
}

// checkDump checks that the dump is clean and tells what the program did:
// every load where the program put it, loop_b's move, and loop_d loaded
// where loop_b was. It returns the line table of each function name.
func checkDump(t *testing.T, truth *minijitReport) map[string]*lineTable {
	t.Helper()
	f, err := jitdump.Open(truth.Dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	findings, err := jitdump.Check(f.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range findings {
		if fd.Severity == jitdump.Error {
			t.Errorf("Check: %v", fd)
		} else {
			t.Logf("Check: %v", fd)
		}
	}

	f2, err := jitdump.Open(truth.Dump)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	var log []string
	lines := map[string]*lineTable{}
	var pending *jitdump.DebugInfo
	for {
		rec, err := f2.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch r := rec.(type) {
		case *jitdump.DebugInfo:
			pending = r
		case *jitdump.CodeLoad:
			log = append(log, fmt.Sprintf("load %s #%d at %#x+%d", r.Name, r.CodeIndex, r.CodeAddr, r.CodeSize))
			if pending == nil || pending.CodeAddr != r.CodeAddr {
				t.Errorf("CODE_LOAD %s has no DEBUG_INFO before it", r.Name)
				continue
			}
			// The name aliases the mapping, which is gone once we return.
			name := strings.Clone(r.Name)
			if lines[name] == nil {
				lines[name] = &lineTable{lines: map[string]bool{}}
			}
			for e := range pending.Entries() {
				lines[name].lines[fmt.Sprintf("%s:%d", e.File, e.Line)] = true
				lines[name].last = max(lines[name].last, e.Addr-r.CodeAddr)
				if e.File != "minijit.src" || e.Addr < r.CodeAddr || e.Addr >= r.CodeAddr+r.CodeSize {
					t.Errorf("DEBUG_INFO of %s: entry %+v is not in minijit.src within [%#x, %#x)", r.Name, e, r.CodeAddr, r.CodeAddr+r.CodeSize)
				}
			}
			pending = nil
		case *jitdump.CodeMove:
			log = append(log, fmt.Sprintf("move #%d from %#x to %#x+%d", r.CodeIndex, r.OldCodeAddr, r.NewCodeAddr, r.CodeSize))
		case *jitdump.CodeClose:
			log = append(log, "close")
		}
	}

	// What the records must be, from where the program says the functions
	// ran: the first phase's loads, then what changed in each later phase.
	type place struct{ index, addr, size uint64 }
	var want []string
	at := map[string]place{}
	names := map[uint64]map[string]bool{} // address -> the functions it held
	for _, ph := range truth.Phases {
		for _, fn := range ph.Functions {
			p := place{fn.CodeIndex, fn.Addr, fn.Size}
			switch old, ok := at[fn.Name]; {
			case !ok:
				want = append(want, fmt.Sprintf("load %s #%d at %#x+%d", fn.Name, p.index, p.addr, p.size))
			case old != p:
				want = append(want, fmt.Sprintf("move #%d from %#x to %#x+%d", p.index, old.addr, p.addr, p.size))
			}
			at[fn.Name] = p
			if names[fn.Addr] == nil {
				names[fn.Addr] = map[string]bool{}
			}
			names[fn.Addr][fn.Name] = true
		}
	}
	want = append(want, "close")
	got, w := strings.Join(log, "\n"), strings.Join(want, "\n")
	if got != w {
		t.Errorf("dump records:\n%s\nwant:\n%s", got, w)
	}
	// The point of the program: a move, and a load at a moved function's
	// old address under another name.
	if !strings.Contains(w, "move") {
		t.Error("minijit moved no function")
	}
	reused := false
	for _, ns := range names {
		reused = reused || len(ns) > 1
	}
	if !reused {
		t.Error("minijit reused no function's address")
	}
	return lines
}

// logReport logs the report's totals and its lines for the jitted code,
// leaving out the kernel's and the Go runtime's few samples.
func logReport(t *testing.T, report []byte) {
	t.Helper()
	var b strings.Builder
	for line := range strings.Lines(string(report)) {
		if strings.HasPrefix(line, "# Samples") || strings.HasPrefix(line, "# Overhead") || strings.Contains(line, "[.] jit:") {
			b.WriteString(line)
		}
	}
	t.Logf("perf report, jitted code:\n%s", b.String())
}

// checkShares compares each function's share of the samples in jitted code
// with its share of the CPU time the program measured.
//
// The bound: samples are a binomial draw, so a share p of N samples varies
// by sqrt(p(1-p)/N), and four of those leave chance about 1 in 16,000 per
// function. Two percentage points more cover what is not chance: the
// program's CPU clock also counts the Go code between calls, and a sample
// may land either side of a switch between functions. A 1.5 s run gives
// about 3,000 jitted samples, so the bound is about 5.5 points for loop_a
// and 4 for loop_d, against measured errors under 1 point. A lost move or
// reuse is bigger (it takes loop_b's or loop_d's later samples away: 20 and
// 7 points), and checkPlacements catches it sample by sample anyway.
func checkShares(t *testing.T, truth *minijitReport, report []byte) {
	t.Helper()
	samples := map[string]int{}
	jitTotal := 0
	for line := range strings.Lines(string(report)) {
		// "    36.55%           618  [.] jit:loop_a"
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") || f[2] != "[.]" {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			t.Fatalf("perf report line %q: %v", line, err)
		}
		name := strings.Join(f[3:], " ")
		samples[name] += n
		if _, ok := truth.Functions[name]; ok {
			jitTotal += n
		}
	}
	if jitTotal < 300 {
		t.Fatalf("only %d samples in jitted code, too few to judge shares; does perf see the code?", jitTotal)
	}
	var cpuTotal int64
	for _, w := range truth.Functions {
		cpuTotal += w.CPUNanos
	}
	for _, name := range slices.Sorted(maps.Keys(truth.Functions)) {
		want := float64(truth.Functions[name].CPUNanos) / float64(cpuTotal)
		got := float64(samples[name]) / float64(jitTotal)
		bound := 0.02 + 4*math.Sqrt(want*(1-want)/float64(jitTotal))
		t.Logf("%-12s %5d samples: %5.1f%% of jitted samples, truth %5.1f%% (bound ±%.1f)", name, samples[name], 100*got, 100*want, 100*bound)
		if samples[name] == 0 {
			t.Errorf("perf report has no samples for %s", name)
		} else if math.Abs(got-want) > bound {
			t.Errorf("%s has %.1f%% of the jitted samples, but %.1f%% of the CPU time", name, 100*got, 100*want)
		}
	}
}

// checkSrclines checks that perf, through the ELF images inject made from
// the DEBUG_INFO records, puts every jitted sample on a line of its
// function's line table. perf ends an image's line table at the last
// entry's address (genelf's end_sequence), so the code after the last entry
// (minijit's epilogue) has no line for perf: only there may a sample be on
// "??:0".
func checkSrclines(t *testing.T, truth *minijitReport, lines map[string]*lineTable, script []byte) {
	t.Helper()
	checked, epilogue := 0, 0
	text := strings.Split(string(script), "\n")
	for i, line := range text {
		// " 8236.461194733:      7f6ce5e29012 jit:loop_a", then "  minijit.src:12",
		// a line perf leaves out when it has none for the address.
		when, ip, sym, ok := parseScriptSample(line)
		if !ok || lines[sym] == nil {
			continue
		}
		srcline := "??:0"
		if i+1 < len(text) {
			if _, _, _, next := parseScriptSample(text[i+1]); !next && strings.TrimSpace(text[i+1]) != "" {
				srcline = strings.TrimSpace(text[i+1])
			}
		}
		checked++
		_, start := truth.placed(when, ip)
		switch {
		case lines[sym].lines[srcline]:
		case srcline == "??:0" && ip-start >= lines[sym].last:
			epilogue++
		default:
			t.Errorf("perf puts a sample of %s at %#x (offset %#x) on %s, not a line of its DEBUG_INFO", sym, ip, ip-start, srcline)
		}
	}
	t.Logf("%d samples' source lines checked, %d after the last line entry", checked, epilogue)
	if checked == 0 {
		t.Errorf("perf script lists no jitted samples with source lines:\n%.2000s", script)
	}
}

// parseScriptSample reads a line of perf script -F time,ip,sym.
func parseScriptSample(line string) (when, ip uint64, sym string, ok bool) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return 0, 0, "", false
	}
	secs, nanos, ok := strings.Cut(strings.TrimSuffix(f[0], ":"), ".")
	s, err1 := strconv.ParseUint(secs, 10, 64)
	ns, err2 := strconv.ParseUint(nanos, 10, 64)
	ip, err3 := strconv.ParseUint(f[1], 16, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, "", false
	}
	return s*1e9 + ns, ip, strings.Join(f[2:], " "), true
}

// placed returns the function the program had at ip at time when, and
// where it started; "no function" when none.
func (truth *minijitReport) placed(when, ip uint64) (name string, start uint64) {
	name = "no function"
	for _, ph := range truth.Phases {
		if when < ph.Start || when > ph.End {
			continue
		}
		for _, fn := range ph.Functions {
			if ip >= fn.Addr && ip < fn.Addr+fn.Size {
				name, start = fn.Name, fn.Addr
			}
		}
	}
	return name, start
}

// checkPlacements checks each sample perf script lists in the program's code
// against where the program says which function was during that phase: the
// move and the reuse must be followed exactly.
func checkPlacements(t *testing.T, truth *minijitReport, script []byte) {
	t.Helper()
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, ph := range truth.Phases {
		for _, fn := range ph.Functions {
			lo, hi = min(lo, fn.Addr), max(hi, fn.Addr+fn.Size)
		}
	}
	checked, wrong := 0, 0
	for line := range strings.Lines(string(script)) {
		// "  380.197061550:      7f438ce0000b jit:loop_a"
		when, ip, sym, ok := parseScriptSample(line)
		if !ok {
			t.Fatalf("perf script line %q: want time, ip, symbol", line)
		}
		if ip < lo || ip >= hi {
			continue
		}
		want, _ := truth.placed(when, ip)
		checked++
		if sym != want {
			wrong++
			if wrong <= 5 {
				t.Errorf("sample at %d.%09d, ip %#x: perf says %s, the program ran %s there", when/1e9, when%1e9, ip, sym, want)
			}
		}
	}
	t.Logf("%d samples in jitted code checked against the phases, %d wrong", checked, wrong)
	if checked == 0 {
		t.Error("perf script lists no samples in the jitted code")
	}
}
