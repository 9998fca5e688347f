package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// foldedStacks reads jitprof's folded output into stacks (outermost frame
// first, the command's name dropped) and their sample counts.
func foldedStacks(t *testing.T, out string) map[string]int {
	t.Helper()
	stacks := map[string]int{}
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		i := strings.LastIndexByte(line, ' ') // names may hold spaces
		n, err := strconv.Atoi(line[i+1:])
		if i < 0 || err != nil {
			t.Fatalf("folded line %q", line)
		}
		_, frames, _ := strings.Cut(line[:i], ";")
		stacks[frames] += n
	}
	return stacks
}

// scriptStacks reads perf script -F ip,sym into stacks as foldedStacks
// gives them. Where its unwinder ran past the stack copy, perf ends a stack
// with frames it could not name; jitprof ends it at the last frame found,
// so those are dropped.
func scriptStacks(out []byte) map[string]int {
	stacks := map[string]int{}
	for _, sample := range strings.Split(string(out), "\n\n") {
		var frames []string
		for line := range strings.Lines(sample) {
			if f := strings.Fields(line); len(f) >= 2 {
				frames = append(frames, strings.Join(f[1:], " "))
			}
		}
		for len(frames) > 1 && frames[len(frames)-1] == "[unknown]" {
			frames = frames[:len(frames)-1]
		}
		if len(frames) == 0 {
			continue
		}
		var b strings.Builder
		for i := len(frames) - 1; i >= 0; i-- {
			b.WriteString(frames[i])
			if i > 0 {
				b.WriteByte(';')
			}
		}
		stacks[b.String()]++
	}
	return stacks
}

// sameStacks counts the samples two sets of stacks agree on.
func sameStacks(a, b map[string]int) (same, total int) {
	for s, n := range a {
		same += min(n, b[s])
		total += n
	}
	return same, total
}

// perfLostVDSOCallers counts the samples perf's unwinder leaves without
// their user frames where jitprof has them: samples in the vDSO, or in a
// system call made from it (CPython's time.process_time, whose clock the
// vDSO leaves to the kernel), that perf gives as the kernel's frames alone
// (from entry_SYSCALL_64_after_hwframe), or as one [unknown] frame, where
// jitprof gives a whole user stack, from _start through the vDSO's
// function, ending in those same kernel frames. Measured: 3 to 11 samples
// of about 1,045 beside two busy loops (more of them are preempted on
// their way back from the system call), none or one alone; perf script
// gives other samples of the same stacks whole, and why it gives up on
// these was not found.
func perfLostVDSOCallers(perf, ours map[string]int) int {
	excess := map[string]int{}
	for s, n := range ours {
		if n > perf[s] && strings.HasPrefix(s, "_start;") {
			excess[s] = n - perf[s]
		}
	}
	lost := 0
	for p, n := range perf {
		missing := n - ours[p]
		var below func(string) bool // tells a stack of jitprof's that perf's p lost the user part of
		switch {
		case missing <= 0:
			continue
		case strings.HasPrefix(p, "entry_SYSCALL_64_after_hwframe;"):
			below = func(s string) bool {
				user, ok := strings.CutSuffix(s, ";"+p)
				return ok && strings.HasPrefix(user[strings.LastIndexByte(user, ';')+1:], "__vdso_")
			}
		case p == "[unknown]":
			below = func(s string) bool { return strings.HasPrefix(s[strings.LastIndexByte(s, ';')+1:], "__vdso_") }
		default:
			continue
		}
		for s, extra := range excess {
			if missing > 0 && extra > 0 && below(s) {
				took := min(missing, extra)
				excess[s] -= took
				missing -= took
				lost += took
			}
		}
	}
	return lost
}

// TestDWARFStacksAgainstPerf has jitprof unwind perf's own --call-graph
// dwarf recording of CPython 3.13 running three levels of Python calls
// (-X perf_jit: trampolines whose UNWINDING_INFO is the only way through
// them, in a libpython built without frame pointers) and compares each
// sample's frames with perf script's after perf inject --jit. Then it
// checks the truth the program's structure gives: the samples in leaf
// carry the whole chain of Python frames.
func TestDWARFStacksAgainstPerf(t *testing.T) {
	python := fixtures.Python313(t)
	prog := fixtures.Workload(t, "calls3.py")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "999", "--call-graph", "dwarf", "-o", data, "--", python, "-X", "perf_jit", prog, "1")
	fixtures.RemoveTmpJITFiles(t, data)
	injected := filepath.Join(dir, "perf.jit.data")
	fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", injected)
	perf := scriptStacks(fixtures.Perf(t, "script", "--no-inline", "-i", injected, "-F", "ip,sym"))

	code, out := jitprof(t, "report", "-i", data, "--format", "folded", "--jitdump-dir", dir)
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	ours := foldedStacks(t, out)
	same, total := sameStacks(perf, ours)
	lost := perfLostVDSOCallers(perf, ours)
	t.Logf("%d of %d samples have perf script's frames; %d more are system calls from the vDSO (or its own code) that perf left without the user frames below it, where jitprof has them from _start", same, total, lost)
	same += lost
	if total < 500 || float64(same) < 0.99*float64(total) {
		t.Errorf("%d of %d samples have perf script's frames, want 99%%", same, total)
		logDifferences(t, perf, ours)
	}

	chain := pythonChain(prog, "<module>", "outer", "middle", "leaf")
	inLeaf, whole := 0, 0
	for s, n := range ours {
		if !strings.Contains(s, pythonFrame(prog, "leaf")) {
			continue
		}
		inLeaf += n
		if strings.Contains(pythonFrames(s), chain) {
			whole += n
		}
	}
	t.Logf("%d of %d samples in leaf carry %s", whole, inLeaf, chain)
	if inLeaf < 300 || float64(whole) < 0.95*float64(inLeaf) {
		t.Errorf("%d of %d samples in leaf carry the whole chain %s, want 95%%", whole, inLeaf, chain)
	}
}

// pythonFrame is the name CPython's perf_jit gives a function of prog.
func pythonFrame(prog, fn string) string { return "py::" + fn + ":" + prog }

// pythonChain is the folded text of prog's Python functions calling one
// another, outermost first, with nothing but Python frames kept.
func pythonChain(prog string, fns ...string) string {
	names := make([]string, len(fns))
	for i, fn := range fns {
		names[i] = pythonFrame(prog, fn)
	}
	return strings.Join(names, ";")
}

// pythonFrames keeps a folded stack's Python frames.
func pythonFrames(stack string) string {
	var py []string
	for f := range strings.SplitSeq(stack, ";") {
		if strings.HasPrefix(f, "py::") {
			py = append(py, f)
		}
	}
	return strings.Join(py, ";")
}

// logDifferences shows the stacks two sets of stacks disagree most on.
func logDifferences(t *testing.T, perf, ours map[string]int) {
	t.Helper()
	shown := 0
	for s, n := range perf {
		if ours[s] < n && shown < 5 {
			t.Logf("perf %d, jitprof %d: %s", n, ours[s], s)
			shown++
		}
	}
	for s, n := range ours {
		if perf[s] < n && shown < 10 {
			t.Logf("jitprof %d, perf %d: %s", n, perf[s], s)
			shown++
		}
	}
}

// TestDWARFStacksFramelessJIT unwinds minijit's frameless jitted code,
// whose only way to its callers is the UNWINDING_INFO it writes, from perf's
// --call-graph dwarf recording: the kernels the driver called have it below
// them, the others Go, in the shares the program's own clock gives. perf
// itself loses the driver wherever a kernel had moved: perf inject writes no
// unwinding tables for moved code.
func TestDWARFStacksFramelessJIT(t *testing.T) {
	bin := fixtures.BuildTestJIT(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	out := fixtures.Perf(t, "record", "-q", "-k", "mono", "--no-bpf-event", "-F", "2000", "--call-graph", "dwarf", "-o", data, "--", bin, "-dir", dir, "-duration", "1s", "-frame-pointers=false")
	truth := fixtures.ParseJITTruth(t, out)
	code, folded := jitprof(t, "report", "-i", data, "--format", "folded")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, folded)
	}
	caller := map[string]string{}
	for _, c := range truth.Calls {
		caller[c.Callee] = c.Caller
	}
	var kernelSamples, right int
	arcs := map[string]int{} // "caller -> callee" by samples
	for s, n := range foldedStacks(t, folded) {
		frames := strings.Split(s, ";")
		leaf := frames[len(frames)-1]
		if _, ok := truth.Functions[leaf]; !ok {
			continue
		}
		kernelSamples += n
		below := ""
		if len(frames) > 1 {
			below = frames[len(frames)-2]
		}
		if want := caller[leaf]; want == below || (want == "" && !strings.HasPrefix(below, "jit:")) {
			right += n
		}
		arc := "Go -> kernels"
		if strings.HasPrefix(below, "jit:") {
			arc = fmt.Sprintf("%s -> %s", below, leaf)
		}
		arcs[arc] += n
	}
	t.Logf("%d kernel samples, %d with the caller minijit says; arcs %v", kernelSamples, right, arcs)
	if kernelSamples < 300 || right != kernelSamples {
		t.Errorf("%d of %d kernel samples have the caller minijit says", right, kernelSamples)
	}
	// The arcs' shares of the kernels' samples follow the calls' CPU time;
	// Go called the kernels for the rest.
	cpu := map[string]int64{}
	for _, f := range truth.Functions {
		cpu["Go -> kernels"] += f.CPUNanos
	}
	for _, c := range truth.Calls {
		cpu[fmt.Sprintf("%s -> %s", c.Caller, c.Callee)] = c.CPUNanos
		cpu["Go -> kernels"] -= c.CPUNanos
	}
	fixtures.CheckCPUShares(t, "call arcs", cpu, arcs)
}

// TestRecordDWARFStacks records programs whose callers only DWARF
// unwinding finds, with jitprof record --call-graph dwarf, and checks the
// chains their structure gives in jitprof's report: CPython 3.13's Python
// frames through its perf_jit trampolines, and a C program built without
// frame pointers whose hot code is qsort's comparison callback, called by
// glibc's qsort (built without frame pointers too) from main. perf's own
// DWARF unwinding of the same program is the yardstick, logged beside.
func TestRecordDWARFStacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv func(t *testing.T) []string
		// in tells a sample of the innermost function; whole, that its
		// stack holds the chain.
		in, whole func(stack string) bool
	}{
		{
			name: "CPython",
			argv: func(t *testing.T) []string {
				return []string{fixtures.Python313(t), "-X", "perf_jit", fixtures.Workload(t, "calls3.py"), "1"}
			},
			in: func(s string) bool { return strings.Contains(s, ";py::leaf:") },
			whole: func(s string) bool {
				return regexp.MustCompile(`py::<module>:[^;]*calls3\.py;py::outer:[^;]*;py::middle:[^;]*;py::leaf:`).MatchString(pythonFrames(s))
			},
		},
		{
			name: "qsort",
			argv: func(t *testing.T) []string {
				return []string{fixtures.BuildC(t, "qsort_cmp.c", "-O2", "-fomit-frame-pointer"), "1000"}
			},
			in:    func(s string) bool { return strings.HasSuffix(s, ";cmp") },
			whole: regexp.MustCompile(`;main;[^;]*qsort[^;]*;(msort_with_tmp[^;]*;)+cmp$`).MatchString,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := tc.argv(t)
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			code, _, stderr := jitprofMsg(t, append([]string{"record", "--call-graph", "dwarf", "-o", data, "--"}, argv...)...)
			if code != 0 {
				t.Fatalf("record: exit %d\n%s", code, stderr)
			}
			t.Logf("record: %s", strings.TrimSpace(stderr))
			fixtures.RemoveTmpJITFiles(t, data)
			code, out := jitprof(t, "report", "-i", data, "--format", "folded")
			if code != 0 {
				t.Fatalf("report: exit %d\n%s", code, out)
			}
			in, whole := chainShare(foldedStacks(t, out), tc.in, tc.whole)
			t.Logf("jitprof: %d of %d samples in the innermost function carry the whole chain", whole, in)
			if in < 300 || float64(whole) < 0.95*float64(in) {
				t.Errorf("%d of %d samples in the innermost function carry the whole chain, want 95%%", whole, in)
			}

			perfData := filepath.Join(dir, "perf-own.data")
			fixtures.Perf(t, append([]string{"record", "-q", "-k", "mono", "--no-bpf-event", "-F", "999", "--call-graph", "dwarf", "-o", perfData, "--"}, argv...)...)
			fixtures.RemoveTmpJITFiles(t, perfData)
			injected := filepath.Join(dir, "perf-own.jit.data")
			fixtures.Perf(t, "inject", "--jit", "-i", perfData, "-o", injected)
			in, whole = chainShare(scriptStacks(fixtures.Perf(t, "script", "--no-inline", "-i", injected, "-F", "ip,sym")), tc.in, tc.whole)
			t.Logf("perf: %d of %d samples in the innermost function carry the whole chain", whole, in)
		})
	}
}

// chainShare counts the samples for which in holds, and of them those for
// which whole does.
func chainShare(stacks map[string]int, in, whole func(string) bool) (n, w int) {
	for s, c := range stacks {
		if in(s) {
			n += c
			if whole(s) {
				w += c
			}
		}
	}
	return n, w
}

// TestRecordJavaStacks: with -g, jitprof record starts the JVM with frame
// pointers kept in compiled code (-XX:+PreserveFramePointer), so the stacks
// of the workload's methods reach main and the launcher's JavaMain on its
// thread; HotSpot's compiled code otherwise uses rbp as it likes and the
// walk stops at the first compiled frame, as the run with the flag turned
// off shows (logged).
func TestRecordJavaStacks(t *testing.T) {
	src := fixtures.Workload(t, "Work.java")
	dir := t.TempDir()
	javac := fixtures.LookPath(t, "javac")
	if out, err := exec.Command(javac, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	java := fixtures.LookPath(t, "java")
	share := func(t *testing.T, env string) (in, whole int) {
		t.Setenv("JAVA_TOOL_OPTIONS", env)
		data := filepath.Join(t.TempDir(), "perf.data")
		code, _, stderr := jitprofMsg(t, "record", "-g", "-o", data, "--", java, "-cp", dir, "Work", "1500")
		if code != 0 {
			t.Fatalf("record: exit %d\n%s", code, stderr)
		}
		code, out := jitprof(t, "report", "-i", data, "--format", "folded")
		if code != 0 {
			t.Fatalf("report: exit %d\n%s", code, out)
		}
		return chainShare(foldedStacks(t, out),
			regexp.MustCompile(`(^|;)Work\.`).MatchString,
			// main itself, or the interpreter still running it: with -g
			// an interpreted frame is the interpreter's (its Method* is
			// in stack memory a frame-pointer walk does not copy), and a
			// loaded machine keeps main interpreted longer (84% named it
			// in one CI rehearsal, all of the rest whole to JavaMain).
			regexp.MustCompile(`(^|;)(JavaMain|start_thread);.*;(Work\.main\(|call_stub;Interpreter;Work\.)`).MatchString)
	}
	in, whole := share(t, "")
	t.Logf("with frame pointers: %d of %d samples in Work's methods reach main and JavaMain", whole, in)
	// Work runs 1.5 s of wall time, of which a loaded machine gives it
	// less: 300 samples still put the share within 2 points.
	if in < 300 || float64(whole) < 0.9*float64(in) {
		t.Errorf("%d of %d samples in Work's methods reach main and JavaMain, want 90%%", whole, in)
	}
	in, whole = share(t, "-XX:-PreserveFramePointer")
	t.Logf("without: %d of %d", whole, in)
}

// TestRecordNodeInterpretedFrames: jitprof record runs node with
// --interpreted-frames-native-stack, so V8 gives each interpreted function
// a named copy of its interpreter trampoline, and frame-pointer stacks name
// interpreted JS functions (JS:~) instead of stacking anonymous
// InterpreterEntryTrampoline frames. What stays on the shared trampoline is
// code V8 made no copy for (the module wrapper node compiles), a sliver.
func TestRecordNodeInterpretedFrames(t *testing.T) {
	workload := fixtures.Workload(t, "manyfunctions.js")
	dir := t.TempDir()
	t.Chdir(dir)
	data := filepath.Join(dir, "perf.data")
	code, _, stderr := jitprofMsg(t, "record", "-g", "-o", data, "--", "node", workload)
	if code != 0 {
		t.Fatalf("record: exit %d\n%s", code, stderr)
	}
	code, out := jitprof(t, "report", "-i", data, "--format", "folded", "--comm", "node")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s", code, out)
	}
	var all, shared, interpreted int
	for s, n := range foldedStacks(t, out) {
		all += n
		if strings.Contains(s, "Builtin:InterpreterEntryTrampoline") {
			shared += n
		}
		if strings.Contains(s, "JS:~") {
			interpreted += n
		}
	}
	t.Logf("%d samples: %d with an interpreted JS function named, %d with the shared trampoline", all, interpreted, shared)
	if interpreted == 0 || float64(shared) > 0.02*float64(all) {
		t.Errorf("%d of %d samples pass through the shared interpreter trampoline, %d name an interpreted function", shared, all, interpreted)
	}
}
