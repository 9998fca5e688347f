package agents

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// runningJVM is a JVM started without any flag, its home a temporary
// directory (where an attached agent writes its dump), killed at the
// test's end.
func runningJVM(t *testing.T, jdk string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(jdk, "bin", "java"), argv...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd
}

// frameNames are a sample's frames, innermost first, as the agent names
// Java methods (SystemName), inlined ones included.
func frameNames(s *profile.Sample) []string {
	var names []string
	for _, l := range s.Location {
		for _, line := range l.Line {
			names = append(names, line.Function.SystemName)
		}
	}
	return names
}

// reachesRoot tells a stack that holds main and ends at the thread's
// start, as glibc's clone3 (or clone) begins it.
func reachesRoot(names []string, main string) bool {
	if len(names) == 0 {
		return false
	}
	root := names[len(names)-1]
	return (root == "clone3" || root == "clone" || root == "start_thread") && slices.Contains(names, main)
}

// TestJVMDWARFStacks is the acceptance test of compiled Java frames
// unwound without frame pointers: a JVM started with no flag (compiled
// code uses rbp as a general register), recorded by record -p
// --call-graph dwarf, which attaches the agent. The rules of its compiled
// methods' frames are read from their code in the dump (symbolize's
// hotspot.go), its interpreter's from the layout of its frames. Most of
// the JVM's samples are in Work's methods, 90% of those stacks reach
// Work.main and the thread's start, and the compiled methods' shares of
// the main thread's samples are JFR's (started by jcmd for the same
// seconds) within 3 points.
func TestJVMDWARFStacks(t *testing.T) {
	fixtures.RealTier(t, "a JVM recorded with --call-graph dwarf")
	home := jdkHome(t, "java17")
	dir, classes, bin := javaWorkload(t, home, "Work.java")

	jvm := runningJVM(t, home, "-cp", classes, "Work", "120000")
	pid := jvm.Process.Pid
	// Warm, as a service is when it is attached to: its compilations,
	// which take the JVM's compiler threads' CPU, mostly done.
	fixtures.WaitCPU(t, pid, 2*time.Second)
	jcmd := filepath.Join(home, "bin", "jcmd")
	jfr := filepath.Join(dir, "run.jfr")
	// JFR samples a thread every millisecond (method-profiling=max), not
	// every 10: under load its own profile had 86 to 150 samples, too few
	// for shares within 3 points (a share of 95% counted on 150 samples is
	// known to 1.8 points).
	runCommand(t, []string{jcmd, fmt.Sprint(pid), "JFR.start", "name=dwarf", "settings=profile", "method-profiling=max", "filename=" + jfr})
	from := time.Now()
	data := filepath.Join(dir, "perf.data")
	// Not quiet: whether and when the agent was loaded is what a failure
	// below needs to know.
	recorded := runCommand(t, []string{bin, "record", "-p", fmt.Sprint(pid), "--call-graph", "dwarf", "--duration", "4s", "-o", data})
	runCommand(t, []string{jcmd, fmt.Sprint(pid), "JFR.stop", "name=dwarf"})
	pb := filepath.Join(dir, "profile.pb.gz")
	reported := runCommand(t, []string{bin, "report", "-i", data, "--format", "pprof", "-o", pb})
	p := fixtures.ReadProfile(t, pb)

	const main = "LWork;main([Ljava/lang/String;)V"
	jfrCounts, mainTid := jfrTopFrames(t, filepath.Join(home, "bin", "jfr"), jfr, from)
	var all, inWork, whole int64
	ours := map[string]int64{}
	for _, s := range p.Sample {
		if l := s.NumLabel["pid"]; len(l) != 1 || l[0] != int64(pid) {
			continue
		}
		// JFR's own threads, sampling every millisecond, are the test's
		// doing, not the program's.
		if c := s.Label["comm"]; len(c) == 1 && strings.HasPrefix(c[0], "JFR ") {
			continue
		}
		n := s.Value[0]
		all += n
		names := frameNames(s)
		if !containsPrefix(names, "LWork;") {
			continue
		}
		inWork += n
		if reachesRoot(names, main) {
			whole += n
		} else if whole < 5*n {
			t.Logf("not whole: %q", names)
		}
		if m := innermostJava(s); m != "" && s.NumLabel["tid"][0] == mainTid {
			ours[m] += n
		}
	}
	t.Logf("the JVM's %d samples: %d in Work's methods, of which %d reach %s and the thread's start", all, inWork, whole, main)
	if float64(inWork) < 0.6*float64(all) {
		t.Errorf("%d of the JVM's %d samples are in Work's methods, want 60%%; record said:\n%s\nreport said:\n%s", inWork, all, recorded, reported)
	}
	if inWork == 0 || float64(whole) < 0.9*float64(inWork) {
		t.Errorf("%d of %d stacks in Work's methods reach main and the thread's start, want 90%%", whole, inWork)
	}
	if sum(jfrCounts) < 100 || sum(ours) < 1000 {
		t.Fatalf("too few samples to compare: %d of JFR, %d of jitprof", sum(jfrCounts), sum(ours))
	}
	if off := worstDiff(t, "dwarf", shares(ours), shares(jfrCounts), 3); len(off) > 0 {
		t.Errorf("per-method shares differ from JFR's by more than 3 points: %s", strings.Join(off, "; "))
	}
}

func containsPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

// TestJVMInterpretedFrames is the acceptance test of interpreted frames
// named: a program run with -Xint, recorded with --call-graph dwarf. The
// agent names each class's methods by their Method* (JITPROF_METHODS), and
// the unwinder reads the Method* each interpreter frame holds: 90% of the
// samples in the interpreter name Work.main and the method the innermost
// interpreter frame runs, instead of Interpreter, and each method is one
// function of the profile, shown (its Name, which text, folded and HTML
// reports print) as that method. The cost is logged: the
// dump's size and the agent's time with and without the records.
func TestJVMInterpretedFrames(t *testing.T) {
	fixtures.RealTier(t, "a JVM with -Xint recorded with --call-graph dwarf")
	home := jdkHome(t, "java17")
	dir, classes, bin := javaWorkload(t, home, "Work.java")
	t.Setenv("PATH", filepath.Join(home, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))

	out := filepath.Join(dir, "rec") + "/"
	runCommand(t, []string{bin, "record", "-q", "--call-graph", "dwarf", "-o", out, "--", "java", "-Xint", "-cp", classes, "Work", "3000"})
	pb := filepath.Join(dir, "profile.pb.gz")
	runCommand(t, []string{bin, "report", "-q", "-i", filepath.Join(out, "perf.data"), "--format", "pprof", "-o", pb})
	p := fixtures.ReadProfile(t, pb)
	const main = "LWork;main([Ljava/lang/String;)V [interpreted]"
	var interp, named int64
	for _, s := range p.Sample {
		names := frameNames(s)
		innermost := slices.IndexFunc(names, func(n string) bool { return n == "Interpreter" || strings.HasSuffix(n, " [interpreted]") })
		if innermost < 0 {
			continue
		}
		interp += s.Value[0]
		if names[innermost] != "Interpreter" && slices.Contains(names, main) {
			named += s.Value[0]
		} else if named < 5*s.Value[0] {
			t.Logf("not named: %q", names)
		}
	}
	t.Logf("%d samples in the interpreter, %d name main and the method running", interp, named)
	if interp < 1000 || float64(named) < 0.9*float64(interp) {
		t.Errorf("%d of %d samples in the interpreter name main and the method running, want 90%%", named, interp)
	}
	// What reports show is the function's Name: an interpreted method is
	// shown as itself, not as the interpreter, and is one function however
	// many samples it has (one a sample made the report quadratic).
	seen := map[string]bool{}
	var misshown, twice []string
	for _, fn := range p.Function {
		if !strings.HasSuffix(fn.SystemName, contract.InterpretedSuffix) {
			continue
		}
		if want := demangle.Name(fn.SystemName); fn.Name != want {
			misshown = append(misshown, fmt.Sprintf("%q as %q, want %q", fn.SystemName, fn.Name, want))
		}
		if seen[fn.SystemName] {
			twice = append(twice, fn.SystemName)
		}
		seen[fn.SystemName] = true
	}
	if len(misshown) > 0 {
		t.Errorf("%d functions of interpreted methods are shown by another name, the first %s", len(misshown), misshown[0])
	}
	if len(twice) > 0 {
		t.Errorf("%d functions of the %d interpreted methods are another's copy, the first of %q", len(twice), len(seen), twice[0])
	}
	if !seen[main] {
		t.Errorf("no function %q among the profile's %d", main, len(p.Function))
	}

	// The cost of the records: the same run, with and without them.
	for _, opt := range []string{"", ",nomethods"} {
		dumps := t.TempDir()
		cmd := exec.Command(filepath.Join(home, "bin", "java"), "-agentpath:"+filepath.Join(fixtures.Agents(t), JVMTI.FileName())+"=dir="+dumps+",verbose"+opt,
			"-Xint", "-cp", classes, "Work", "1500")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("java: %v\n%s", err, b)
		}
		summary := ""
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "written to") {
				summary = strings.TrimSpace(line)
			}
		}
		dump := onlyDump(t, dumps)
		fi, err := os.Stat(dump)
		if err != nil {
			t.Fatal(err)
		}
		records := 0
		f, err := jitdump.Open(dump)
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := f.Next()
			if err != nil {
				break
			}
			if rec.Header().Type == jitdump.TypeMethodNames {
				records++
			}
		}
		f.Close()
		t.Logf("agent options %q: dump of %d bytes, %d JITPROF_METHODS records; %s", "verbose"+opt, fi.Size(), records, summary)
		if (records == 0) != (opt != "") {
			t.Errorf("agent options %q: %d JITPROF_METHODS records", opt, records)
		}
	}
}
