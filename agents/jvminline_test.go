package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

// The methods of the Inline workload, as the agent names them.
const (
	mapWork     = "LInline;mapWork(Ljava/util/HashMap;I)I"
	hashPut     = "Ljava/util/HashMap;put(Ljava/lang/Object;Ljava/lang/Object;)Ljava/lang/Object;"
	putVal      = "Ljava/util/HashMap;putVal(ILjava/lang/Object;Ljava/lang/Object;ZZ)Ljava/lang/Object;"
	toHexString = "Ljava/lang/Integer;toHexString(I)Ljava/lang/String;"
	toUnsigned  = "Ljava/lang/Integer;toUnsignedString0(II)Ljava/lang/String;"
)

// jfrSamples is what `jfr print --json --events jdk.ExecutionSample` says,
// as far as the test reads it.
type jfrSamples struct {
	Recording struct {
		Events []struct {
			Values struct {
				StartTime     time.Time `json:"startTime"`
				SampledThread struct {
					OSThreadID int64  `json:"osThreadId"`
					JavaName   string `json:"javaName"`
				} `json:"sampledThread"`
				StackTrace struct {
					Frames []struct {
						Method struct {
							Type       struct{ Name string } `json:"type"`
							Name       string                `json:"name"`
							Descriptor string                `json:"descriptor"`
						} `json:"method"`
						Type string `json:"type"`
					} `json:"frames"`
				} `json:"stackTrace"`
			} `json:"values"`
		} `json:"events"`
	} `json:"recording"`
}

// jfrTopFrames counts JFR's samples of the main thread from the time from
// on by their top frame, named as the agent names methods, when it is
// compiled code (a method compiled or inlined); it returns the main
// thread's id too.
func jfrTopFrames(t *testing.T, jfr, recording string, from time.Time) (map[string]int, int64) {
	t.Helper()
	out, err := exec.Command(jfr, "print", "--json", "--events", "jdk.ExecutionSample", recording).Output()
	if err != nil {
		t.Fatalf("jfr print: %v", err)
	}
	var s jfrSamples
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("jfr print: %v", err)
	}
	counts := map[string]int{}
	main := int64(0)
	for _, e := range s.Recording.Events {
		v := e.Values
		if v.SampledThread.JavaName != "main" || len(v.StackTrace.Frames) == 0 {
			continue
		}
		main = v.SampledThread.OSThreadID
		if v.StartTime.Before(from) {
			continue
		}
		top := v.StackTrace.Frames[0]
		if top.Type != "JIT compiled" && top.Type != "Inlined" {
			continue
		}
		m := top.Method
		counts["L"+m.Type.Name+";"+m.Name+m.Descriptor]++
	}
	if main == 0 {
		t.Fatalf("JFR sampled no main thread in %s", recording)
	}
	return counts, main
}

// javaFrame is a frame of a sample, innermost first across locations.
type javaFrame struct {
	name, file string
	line       int64
	inlined    bool
}

func sampleFrames(s *profile.Sample) []javaFrame {
	var fs []javaFrame
	for _, l := range s.Location {
		for i, line := range l.Line {
			fs = append(fs, javaFrame{line.Function.SystemName, line.Function.Filename, line.Line, i < len(l.Line)-1})
		}
	}
	return fs
}

// innermostJava is the name of the innermost frame of s's user-space part
// when that is a compiled Java method (kernel frames skipped: a thread in a
// page fault is running Java code, for JFR), else "". With interpreted, a
// method HotSpot's interpreter runs counts too, as that method (a program's
// own measure of its time in a method counts it however it runs); without,
// it does not (JFR's count is of compiled code).
func innermostJava(s *profile.Sample, interpreted bool) string {
	for _, l := range s.Location {
		if l.Mapping != nil && l.Mapping.File == contract.KernelFile {
			continue
		}
		if contract.IsJIT(l.Mapping) && len(l.Line) > 0 {
			name, inInterpreter := strings.CutSuffix(l.Line[0].Function.SystemName, contract.InterpretedSuffix)
			if javaSig.MatchString(name) && (interpreted || !inInterpreter) {
				return name
			}
		}
		return ""
	}
	return ""
}

func shares[N int | int64](counts map[string]N) map[string]float64 {
	var total N
	for _, n := range counts {
		total += n
	}
	s := map[string]float64{}
	for k, n := range counts {
		s[k] = 100 * float64(n) / float64(total)
	}
	return s
}

// worstDiff compares per-method shares: every method above 5% on either
// side, within tolerance points. It returns the methods that differ more.
func worstDiff(t *testing.T, what string, ours, jfr map[string]float64, tolerance float64) []string {
	t.Helper()
	var names []string
	for k, v := range ours {
		if v >= 5 || jfr[k] >= 5 {
			names = append(names, k)
		}
	}
	for k, v := range jfr {
		if v >= 5 && ours[k] < 5 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var off []string
	for _, k := range slices.Compact(names) {
		d := ours[k] - jfr[k]
		t.Logf("%s: %-60s jitprof %5.1f%%  JFR %5.1f%%  (%+.1f)", what, demangle.Name(k), ours[k], jfr[k], d)
		if math.Abs(d) > tolerance {
			off = append(off, fmt.Sprintf("%s (jitprof %.1f%%, JFR %.1f%%)", demangle.Name(k), ours[k], jfr[k]))
		}
	}
	return off
}

// javaWorkload begins a JVM acceptance test: the workload compiled with
// the JDK at home into dir/classes, jitprof built into dir, and the agents
// it loads found where the build left them.
func javaWorkload(t *testing.T, home, workload string) (dir, classes, bin string) {
	t.Helper()
	dir = t.TempDir()
	classes = filepath.Join(dir, "classes")
	runCommand(t, []string{filepath.Join(home, "bin", "javac"), "-g", "-d", classes, fixtures.Workload(t, workload)})
	bin = buildJitprof(t, dir)
	t.Setenv("JITPROF_AGENT_DIR", fixtures.Agents(t))
	return dir, classes, bin
}

// buildJitprof builds the jitprof command into dir.
func buildJitprof(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "jitprof")
	runCommand(t, []string{"go", "build", "-o", bin, "github.com/jitprof/jitprof/cmd/jitprof"})
	return bin
}

// TestJVMTIInline is the acceptance test of inlined methods: Inline.java's
// mapWork, into which C2 inlines HashMap.put, putVal and
// Integer.toHexString, recorded by jitprof record with the agent and, in
// the same JVM, by JFR. The inlined methods are frames under their
// callers, with lines, in pprof, folded, JSON (and its call graph) and
// gprof's files; each compiled method's share of the main thread's
// samples (innermost frame, inlining included) from mapWork's last
// compilation on is JFR's within 8 points for every method above 5%, while
// the same shares with --no-inline are not.
// The agent keeps each method's inline records within its budget.
func TestJVMTIInline(t *testing.T) {
	fixtures.RealTier(t, "Java under jitprof record and JFR")
	home := jdkHome(t, "java17")
	dir, classes, bin := javaWorkload(t, home, "Inline.java")
	t.Setenv("PATH", filepath.Join(home, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))

	// A heap touched whole at the start: the run is not a kernel's
	// clearing of new pages. Frame pointers: C2's frames in the stacks.
	// C2 inlines putVal unless it compiled it first on its own, to code
	// too large to inline: the run inlines it always.
	data, jfr := filepath.Join(dir, "perf.data"), filepath.Join(dir, "run.jfr")
	runCommand(t, []string{bin, "record", "-q", "-g", "-F", "1999", "-o", data, "--",
		"java", "-Xms256m", "-Xmx256m", "-XX:+AlwaysPreTouch", "-XX:+PreserveFramePointer",
		"-XX:CompileCommand=quiet", "-XX:CompileCommand=inline,java.util.HashMap::put*", "-XX:CompileCommand=inline,java.lang.Integer::to*String*",
		"-XX:StartFlightRecording=filename=" + jfr + ",settings=profile,method-profiling=max",
		"-cp", classes, "Inline", "4000"})
	loads := checkInlineBudget(t, dir)

	// The comparison with JFR is of the run's steady part, from mapWork's
	// last compilation on. Before it the main thread runs other versions
	// of mapWork, whose shares differ (on a loaded machine, a C2 version
	// gave putVal 13% where the last gives it 3%), and JFR, which samples
	// at wall-clock ticks, and jitprof, which samples CPU time, weigh those
	// parts of the run differently when the thread does not have a whole
	// CPU: over the whole run, mapWork's shares differed by 8 points in a
	// run of the suite four packages at a time on two cores.
	if loads[mapWork] == 0 {
		t.Fatalf("the dump loads no code of %s", mapWork)
	}
	steady := loads[mapWork] + uint64(50*time.Millisecond)
	jfrCounts, mainTid := jfrTopFrames(t, filepath.Join(home, "bin", "jfr"), jfr, monotonicToWall(steady))
	report := func(args ...string) string {
		return runCommand(t, append([]string{bin, "report", "-q", "-i", data}, args...))
	}
	readPprof := func(args ...string) *profile.Profile {
		pb := filepath.Join(dir, "profile.pb.gz")
		report(append([]string{"--format", "pprof", "-o", pb}, args...)...)
		return fixtures.ReadProfile(t, pb)
	}
	p := readPprof()
	pSteady := readPprof("--time", fmt.Sprintf("%d.%09d,", steady/1e9, steady%1e9))

	// pprof: shares, and the inlined methods' callers with their lines.
	putLine, hexLine := int64(fixtures.WorkloadLine(t, "Inline.java", "map.put(")), int64(fixtures.WorkloadLine(t, "Inline.java", "Integer.toHexString("))
	leafPutVal := int64(0)          // samples of any thread whose innermost frame is putVal
	underMapWork := int64(0)        // ... with put and mapWork above it
	chains := map[string][4]int64{} // samples, under the caller, in mapWork, at its line
	for _, s := range p.Sample {
		n := s.Value[0]
		fs := sampleFrames(s)
		if len(fs) > 2 && fs[0].name == putVal && fs[1].name == hashPut && fs[2].name == mapWork {
			underMapWork += n
		}
		if len(fs) > 0 && fs[0].name == putVal {
			leafPutVal += n
		}
		// Where an inlined putVal or toUnsignedString0 is, with its line:
		// its caller with its line, and where that is mapWork (not code
		// the JVM ran before, such as JFR's start), mapWork at the call.
		for _, c := range []struct {
			name, caller, file string
			line               int64
		}{{putVal, hashPut, "java/util/HashMap.java", putLine}, {toUnsigned, toHexString, "java/lang/Integer.java", hexLine}} {
			i := slices.IndexFunc(fs, func(f javaFrame) bool { return f.name == c.name && f.inlined })
			if i < 0 {
				continue
			}
			got := chains[c.name]
			got[0] += n
			if i+1 < len(fs) && fs[i].file == c.file && fs[i].line > 0 && fs[i+1].name == c.caller && fs[i+1].file == c.file && fs[i+1].line > 0 {
				got[1] += n
			} else if got[0]-got[1] <= 3*n {
				t.Logf("%s inlined, frames %+v", demangle.Name(c.name), fs)
			}
			if i+2 < len(fs) && fs[i+2].name == mapWork {
				got[2] += n
				if fs[i+2].file == "Inline.java" && fs[i+2].line == c.line {
					got[3] += n
				}
			}
			chains[c.name] = got
		}
	}
	for _, name := range []string{putVal, toUnsigned} {
		c := chains[name]
		t.Logf("%d samples in an inlined %s, %d under its caller, both with lines; %d of them in mapWork, %d at the line of the call", c[0], demangle.Name(name), c[1], c[2], c[3])
		if c[1]*100 < c[0]*95 || c[2] < 50 || c[3] != c[2] {
			t.Errorf("%s inlined: %d samples, %d under its caller with lines, %d in mapWork, %d at the call's line", demangle.Name(name), c[0], c[1], c[2], c[3])
		}
	}

	ours := map[string]int64{}
	for _, s := range pSteady.Sample {
		if m := innermostJava(s, false); m != "" && s.NumLabel["tid"][0] == mainTid {
			ours[m] += s.Value[0]
		}
	}
	js := shares(jfrCounts)
	t.Logf("main thread %d, the %.1f s from mapWork's last compilation to the end: %d JFR samples in compiled code; jitprof %d samples",
		mainTid, float64(pSteady.DurationNanos)/1e9, sum(jfrCounts), sum(ours))
	if sum(jfrCounts) < 200 || sum(ours) < 200 {
		t.Fatalf("the run's steady part is too short to compare: %d JFR samples, %d of jitprof", sum(jfrCounts), sum(ours))
	}
	if off := worstDiff(t, "inlined", shares(ours), js, 8); len(off) > 0 {
		t.Errorf("per-method shares differ from JFR's by more than 8 points: %s", strings.Join(off, "; "))
	}

	// Folded stacks, JSON and its call graph: the same samples under the
	// same frames.
	folded := int64(0)
	suffix := ";" + strings.Join([]string{demangle.Name(mapWork), demangle.Name(hashPut), demangle.Name(putVal)}, ";")
	for line := range strings.Lines(report("--format", "folded")) {
		line = strings.TrimSpace(line)
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", line)
		}
		if strings.HasSuffix(line[:i], suffix) {
			folded += n
		}
	}
	if folded != underMapWork || folded == 0 {
		t.Errorf("folded stacks end in %s with %d samples; the pprof profile has %d", suffix, folded, underMapWork)
	}
	var r struct {
		Entries []struct {
			Symbol  string
			Samples int64
			Callers []*callNode
		}
	}
	if err := json.Unmarshal([]byte(report("--format", "json", "--sort", "symbol", "-g")), &r); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range r.Entries {
		if e.Symbol != demangle.Name(putVal) {
			continue
		}
		found = true
		if e.Samples != leafPutVal {
			t.Errorf("JSON: %s has %d samples, the pprof profile %d", e.Symbol, e.Samples, leafPutVal)
		}
		var chain []string
		for n := e.Callers; len(n) > 0 && len(chain) < 3; n = n[0].Callers {
			chain = append(chain, n[0].Symbol)
		}
		if want := []string{demangle.Name(putVal), demangle.Name(hashPut), demangle.Name(mapWork)}; !slices.Equal(chain, want) {
			t.Errorf("JSON call graph: %s's heaviest callers %q, want %q", e.Symbol, chain, want)
		}
	}
	if !found {
		t.Errorf("JSON has no entry %s", demangle.Name(putVal))
	}

	// gprof: putVal is a function of its own, with its share, called
	// from HashMap.put.
	gdir := filepath.Join(dir, "gmon")
	report("--format", "gmon", "-o", gdir)
	out := fixtures.RunGprof(t, filepath.Join(gdir, "jitprof-symbols"), filepath.Join(gdir, "gmon.out"))
	flat, _ := fixtures.FlatShares(t, out)
	pprofShare := 100 * float64(leafPutVal) / float64(sumValues(p))
	if g := flat[demangle.Name(putVal)]; math.Abs(g-pprofShare) > 1 {
		t.Errorf("gprof gives %s %.2f%%, the profile %.2f%%", demangle.Name(putVal), g, pprofShare)
	}
	if !gprofCalls(out, demangle.Name(hashPut), demangle.Name(putVal)) {
		t.Errorf("gprof's call graph has no arc from %s to %s:\n%s", demangle.Name(hashPut), demangle.Name(putVal), out)
	}

	// --no-inline: the inlined methods' samples are their holders', and
	// then the shares are not JFR's: the comparison above can fail.
	if err := json.Unmarshal([]byte(report("--format", "json", "--sort", "symbol", "--no-inline", "--tid", fmt.Sprint(mainTid))), &r); err != nil {
		t.Fatal(err)
	}
	folds := map[string]int64{}
	for _, e := range r.Entries {
		folds[e.Symbol] = e.Samples
	}
	// By the method that holds the code: of the sample's leaf, as the
	// report counts (the whole run), and of the innermost user frame, as
	// compared with JFR (the steady part).
	holder := func(s *profile.Sample) (string, bool) {
		if s.NumLabel["tid"][0] != mainTid || innermostJava(s, false) == "" {
			return "", false
		}
		i := slices.IndexFunc(s.Location, func(l *profile.Location) bool { return contract.IsJIT(l.Mapping) })
		return s.Location[i].Line[len(s.Location[i].Line)-1].Function.SystemName, i == 0
	}
	holders, leafHolders := map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		if h, leaf := holder(s); leaf {
			leafHolders[h] += s.Value[0]
		}
	}
	for _, s := range pSteady.Sample {
		if h, _ := holder(s); h != "" {
			holders[h] += s.Value[0]
		}
	}
	if folds[demangle.Name(mapWork)] != leafHolders[mapWork] || leafHolders[mapWork] == 0 {
		t.Errorf("--no-inline gives mapWork %d samples of the main thread, the profile's code of mapWork has %d", folds[demangle.Name(mapWork)], leafHolders[mapWork])
	}
	for _, name := range []string{putVal, toUnsigned} {
		if folds[demangle.Name(name)] != leafHolders[name] {
			t.Errorf("--no-inline gives %s %d samples, the profile's own code of it %d", demangle.Name(name), folds[demangle.Name(name)], leafHolders[name])
		}
	}
	if off := worstDiff(t, "--no-inline", shares(holders), js, 8); len(off) == 0 {
		t.Errorf("with inlined methods folded into their holders the shares still match JFR's: the comparison cannot tell")
	}
}

// monotonicToWall converts a CLOCK_MONOTONIC time to the wall clock, by
// the clocks' difference now (JFR times its events by the wall clock).
func monotonicToWall(mono uint64) time.Time {
	var real, now unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &real)
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	return time.Unix(0, real.Nano()-now.Nano()+int64(mono))
}

type callNode struct {
	Symbol  string
	Callers []*callNode
}

func sum[N int | int64](m map[string]N) N {
	var s N
	for _, n := range m {
		s += n
	}
	return s
}

func sumValues(p *profile.Profile) int64 {
	var s int64
	for _, x := range p.Sample {
		s += x.Value[0]
	}
	return s
}

// gprofCalls tells whether gprof's call graph lists caller as a parent of
// callee: in callee's entry (the line with its [index]), a line before it
// that names caller.
func gprofCalls(out, caller, callee string) bool {
	var entry []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "---") {
			entry = entry[:0]
			continue
		}
		entry = append(entry, line)
		if strings.HasPrefix(line, "[") && strings.Contains(line, callee) {
			for _, l := range entry[:len(entry)-1] {
				if strings.Contains(l, caller) {
					return true
				}
			}
		}
	}
	return false
}

// checkInlineBudget: in the recording's dumps, the inline records of each
// method keep within the agent's budget (16 times its code, at least 32
// KiB), and the test says what they cost the dump. It returns when each
// method's code was last loaded, in CLOCK_MONOTONIC ns (the agent's clock).
func checkInlineBudget(t *testing.T, dir string) (lastLoads map[string]uint64) {
	t.Helper()
	lastLoads = make(map[string]uint64)
	dumps, _ := filepath.Glob(filepath.Join(dir, "jit-*.dump"))
	if len(dumps) == 0 {
		t.Fatalf("no dump in %s", dir)
	}
	for _, path := range dumps {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := jitdump.NewBytesReader(bytes.Clone(data))
		if err != nil {
			t.Fatal(err)
		}
		if r.Header().Flags&jitdump.FlagArchTimestamp != 0 {
			t.Fatalf("%s is timed by the TSC, not CLOCK_MONOTONIC", path)
		}
		var load *jitdump.CodeLoad
		var inlineBytes, perLoad, records uint64
		check := func() {
			if load != nil && perLoad > max(32<<10, 16*load.CodeSize) {
				t.Errorf("%s (%d bytes of code): %d bytes of inline records", load.Name, load.CodeSize, perLoad)
			}
		}
		for {
			rec, err := r.Next()
			if err != nil {
				break
			}
			switch x := rec.(type) {
			case *jitdump.CodeLoad:
				check()
				load, perLoad = x, 0
				lastLoads[x.Name] = x.Timestamp
			case *jitdump.InlineInfo:
				perLoad += uint64(x.Size)
				inlineBytes += uint64(x.Size)
				records++
			}
		}
		check()
		t.Logf("%s: %d bytes, %d of them in %d inline records (%.0f%%)", filepath.Base(path), len(data), inlineBytes, records, 100*float64(inlineBytes)/float64(len(data)))
		if records == 0 {
			t.Errorf("%s has no inline records", path)
		}
	}
	return lastLoads
}
