package agents

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

// The JDKs the agent is tested on: Debian's (installed by scripts/test.sh)
// and Temurin 25, where present.
var jdks = []struct {
	name, home string
	required   bool // under CI, a missing JDK fails the test
}{
	{"java17", "/usr/lib/jvm/java-17-openjdk-amd64", true},
	{"temurin25", "/usr/lib/jvm/temurin-25-jdk-amd64", false},
}

func jdkHome(t testing.TB, name string) string {
	t.Helper()
	for _, j := range jdks {
		if j.name != name {
			continue
		}
		if _, err := os.Stat(filepath.Join(j.home, "bin", "java")); err != nil {
			if j.required && os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed (CI is set, so nothing may be missing): %v", name, err)
			}
			t.Skipf("%s is not installed: %v", name, err)
		}
		return j.home
	}
	t.Fatalf("unknown JDK %s", name)
	return ""
}

// A Java program under test: its main class, arguments, and its source
// files (relative to the package root, as the agent names them) with their
// line counts.
type javaProgram struct {
	name    string
	main    string
	args    []string
	own     string   // the prefix of its methods' names
	methods []string // methods that must be compiled
	inlined string   // a file of which a method must be inlined (JITPROF_INLINE)...
	into    string   // ...into this method
}

var programs = []javaProgram{
	{name: "Work", main: "Work", args: []string{"1200"}, own: "LWork;",
		methods: []string{"LWork;fib(I)J", "LWork;main([Ljava/lang/String;)V"},
		inlined: "java/lang/AbstractStringBuilder.java", into: "LWork;main([Ljava/lang/String;)V"},
	{name: "shapes", main: "org.example.app.Main", args: []string{"1200"}, own: "Lorg/example/",
		methods: []string{"Lorg/example/shapes/Polygon;area()D", "Lorg/example/app/Main;total(Ljava/util/List;Ljava/util/function/ToDoubleFunction;)D"},
		inlined: "org/example/shapes/Polygon.java", into: "Lorg/example/app/Main;total(Ljava/util/List;Ljava/util/function/ToDoubleFunction;)D"},
}

var classes struct {
	once  sync.Once
	dir   string
	lines map[string]int // source file -> its line count
	err   error
	out   []byte
}

// compileJava compiles the workload Work.java and testdata/java once, with
// Java 17's javac so that every JDK tested runs the classes.
func compileJava(t testing.TB) (string, map[string]int) {
	t.Helper()
	javac := filepath.Join(jdkHome(t, "java17"), "bin", "javac")
	work := fixtures.Workload(t, "Work.java")
	dir := fixtures.Agents(t)
	classes.once.Do(func() {
		classes.dir = filepath.Join(dir, "classes")
		classes.lines = map[string]int{}
		srcs := []string{work}
		classes.err = filepath.Walk("testdata/java", func(p string, info os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(p, ".java") {
				srcs = append(srcs, p)
			}
			return err
		})
		for _, src := range srcs {
			data, err := os.ReadFile(src)
			if err != nil {
				classes.err = err
				return
			}
			rel := filepath.Base(src)
			if r, err := filepath.Rel("testdata/java", src); err == nil && !strings.HasPrefix(r, "..") {
				rel = r
			}
			classes.lines[rel] = bytes.Count(data, []byte("\n"))
		}
		if classes.err == nil {
			classes.out, classes.err = exec.Command(javac, append([]string{"-g", "-d", classes.dir}, srcs...)...).CombinedOutput()
		}
	})
	if classes.err != nil {
		t.Fatalf("javac: %v\n%s", classes.err, classes.out)
	}
	return classes.dir, classes.lines
}

// javaCommand is the command line that runs p on the JDK with the agent
// writing into dir; prefix (perf record ...) goes first.
func javaCommand(t testing.TB, jdk string, p javaProgram, dir string, prefix ...string) []string {
	cp, _ := compileJava(t)
	argv := append(prefix, filepath.Join(jdkHome(t, jdk), "bin", "java"),
		"-agentpath:"+agentPath(t, JVMTI)+"=dir="+dir+",verbose", "-cp", cp, p.main)
	return append(argv, p.args...)
}

func runCommand(t testing.TB, argv []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// onlyDump returns the one jit-<pid>.dump in dir.
func onlyDump(t testing.TB, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "jit-*.dump"))
	if len(m) != 1 {
		t.Fatalf("want one dump in %s, found %v", dir, m)
	}
	return m[0]
}

var javaSig = regexp.MustCompile(`^L[^;(]+;[^;(]+\([^()]*\)[^()]+$`)

// loadedMethod is a CODE_LOAD with the DEBUG_INFO before it, if any, and
// the inline records after it.
type loadedMethod struct {
	load    *jitdump.CodeLoad
	lines   []jitdump.DebugEntry
	inlines []*jitdump.InlineInfo
}

// checkJavaDump checks what every dump of the agent must hold and returns
// its compiled methods (by name) and stubs.
func checkJavaDump(t *testing.T, jdk, path string, p javaProgram, lines map[string]int) (map[string][]*loadedMethod, []string) {
	t.Helper()
	_, recs := readDump(t, path)
	methods := map[string][]*loadedMethod{}
	var stubs []string
	var pending *jitdump.DebugInfo
	var last *loadedMethod // the latest method loaded, which inline records follow
	withLines, java, inlines := 0, 0, 0
	for _, rec := range recs {
		switch r := rec.(type) {
		case *jitdump.InlineInfo:
			inlines++
			if last == nil || r.CodeIndex != last.load.CodeIndex {
				t.Errorf("inline record %q of code index %d does not follow its CODE_LOAD", r.Name, r.CodeIndex)
				break
			}
			checkInline(t, last, r)
			last.inlines = append(last.inlines, r)
		case *jitdump.DebugInfo:
			pending = r
		case *jitdump.CodeLoad:
			if !javaSig.MatchString(r.Name) {
				stubs = append(stubs, r.Name)
				if pending != nil {
					t.Errorf("stub %q has DEBUG_INFO", r.Name)
				}
				break
			}
			java++
			m := loadedMethod{load: r}
			if pending != nil {
				withLines++
				for e := range pending.Entries() {
					m.lines = append(m.lines, e)
					if e.Addr < r.CodeAddr || e.Addr >= r.CodeAddr+r.CodeSize || e.Line == 0 || !strings.HasSuffix(e.File, ".java") {
						t.Errorf("%s [%#x, +%d): entry %+v", r.Name, r.CodeAddr, r.CodeSize, e)
					}
					if n, own := lines[e.File]; own && int(e.Line) > n {
						t.Errorf("%s: line %d of %s, which has %d lines", r.Name, e.Line, e.File, n)
					}
				}
			}
			pending = nil
			methods[r.Name] = append(methods[r.Name], &m)
			last = &m
		}
	}
	t.Logf("%d compiled methods, %d with DEBUG_INFO, %d inline records; %d stubs", java, withLines, inlines, len(stubs))
	if !slices.Contains(stubs, "Interpreter") {
		t.Errorf("no Interpreter among the stubs %v", stubs)
	}
	checkLinesUnlessNoTable(t, jdk, methods)
	for _, name := range p.methods {
		if len(methods[name]) == 0 {
			t.Errorf("%s was not compiled", name)
		}
	}
	inlined := false
	for name, loads := range methods {
		if !strings.HasPrefix(name, p.own) || strings.Contains(name, "$$Lambda") {
			continue
		}
		// The file of the method's own class: pkg/Outer.java.
		cls := strings.TrimPrefix(name[:strings.IndexByte(name, ';')], "L")
		if i := strings.IndexByte(cls, '$'); i >= 0 {
			cls = cls[:i]
		}
		file := cls + ".java"
		for _, m := range loads {
			if len(m.lines) == 0 {
				t.Errorf("%s at %#x has no DEBUG_INFO", name, m.load.CodeAddr)
				continue
			}
			// The method's own lines: inlined callees' are in their
			// records.
			for _, e := range m.lines {
				if e.File != file {
					t.Errorf("%s: DEBUG_INFO entry %+v is not in %s", name, e, file)
					break
				}
			}
			for _, in := range m.inlines {
				inlined = inlined || name == p.into && in.File == p.inlined
			}
		}
	}
	if !inlined {
		t.Errorf("no method of %s is inlined into %s", p.inlined, p.into)
	}
	return methods, stubs
}

// checkInline checks an inline record against the method it belongs to and
// the records before it: a Java method inside the method's code, its parent
// the method or an earlier instance whose code holds it, lines in its code.
func checkInline(t *testing.T, m *loadedMethod, in *jitdump.InlineInfo) {
	t.Helper()
	load := m.load
	bad := func(format string, args ...any) {
		t.Errorf("%s [%#x, +%d): inlined %s [%#x, +%d) id %d parent %d: %s", load.Name, load.CodeAddr, load.CodeSize,
			in.Name, in.CodeAddr, in.CodeSize, in.MethodID, in.ParentID, fmt.Sprintf(format, args...))
	}
	if !javaSig.MatchString(in.Name) || (in.File != "" && !strings.HasSuffix(in.File, ".java")) {
		bad("not a Java method's name and file")
	}
	if in.CodeSize == 0 || in.CodeAddr < load.CodeAddr || in.CodeAddr+in.CodeSize > load.CodeAddr+load.CodeSize {
		bad("not inside the method's code")
	}
	if in.ParentID != in.RootID {
		i := slices.IndexFunc(m.inlines, func(p *jitdump.InlineInfo) bool { return p.MethodID == in.ParentID })
		if i < 0 || !m.inlines[i].Contains(in.CodeAddr) || !m.inlines[i].Contains(in.CodeAddr+in.CodeSize-1) {
			bad("its parent is no earlier instance holding its code")
		}
	}
	for _, e := range in.Lines {
		if !in.Contains(e.Addr) || e.Line == 0 {
			bad("line entry %+v", e)
		}
	}
}

// TestJVMTIDump: on each JDK, each program's dump passes the checker and
// names every compiled method in perf's form, with lines from the right
// files, inlined callees' included.
func TestJVMTIDump(t *testing.T) {
	for _, jdk := range jdks {
		for _, p := range programs {
			t.Run(jdk.name+"/"+p.name, func(t *testing.T) {
				_, lines := compileJava(t)
				dir := t.TempDir()
				out := runCommand(t, javaCommand(t, jdk.name, p, dir))
				if !regexp.MustCompile(`jitprof-jvmti: \d+ compiled methods`).MatchString(out) {
					t.Errorf("no summary from the agent:\n%s", out)
				}
				methods, _ := checkJavaDump(t, jdk.name, onlyDump(t, dir), p, lines)
				for name := range methods {
					if d := demangle.Name(name); d == name || strings.ContainsAny(d, ";/") {
						t.Errorf("%s demangles to %q", name, d)
					}
				}
			})
		}
	}
}

// TestJVMTIProfile: a perf recording of a program under the agent is
// accepted by perf inject --jit, and jitprof report puts most of the
// program's samples on its own methods, with source lines.
func TestJVMTIProfile(t *testing.T) {
	for _, tt := range []struct {
		jdk string
		p   javaProgram
	}{{"java17", programs[0]}, {"java17", programs[1]}, {"temurin25", programs[1]}} {
		t.Run(tt.jdk+"/"+tt.p.name, func(t *testing.T) {
			perf := fixtures.LookPath(t, "perf")
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			runCommand(t, javaCommand(t, tt.jdk, tt.p, dir, perf, "record", "-q", "-k", "mono", "--no-bpf-event", "-e", "cpu-clock", "-F", "2000", "-o", data, "--"))

			injected := filepath.Join(dir, "perf.jit.data")
			fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", injected)
			if images, _ := filepath.Glob(filepath.Join(dir, "jitted-*.so")); len(images) < 100 {
				t.Errorf("perf inject wrote %d images", len(images))
			}

			res, err := perfprof.Run(perfprof.Options{Input: data, Options: symbolizeWarn(t)})
			if err != nil {
				t.Fatal(err)
			}
			var total, jitted, own, hidden, ownLines int64
			demangledOwn := strings.ReplaceAll(strings.Trim(tt.p.own, "L;"), "/", ".")
			for _, s := range res.Profile.PProf().Sample {
				n := s.Value[0]
				total += n
				leaf := s.Location[0]
				if len(leaf.Line) == 0 {
					continue
				}
				fn := leaf.Line[len(leaf.Line)-1].Function
				if !strings.HasPrefix(fn.Name, demangledOwn) {
					continue
				}
				own += n
				if strings.Contains(fn.Name, "$$Lambda") {
					// A lambda's hidden class, compiled on its own: the
					// JVM generates it with no line table, so it has no
					// line to give (with both cores busy, up to a tenth of the
					// samples, in the warm-up before C2 inlines it).
					hidden += n
					continue
				}
				// The line of the innermost frame with a source file: a
				// method inlined without a line table (a lambda's hidden
				// class) has neither, and its caller's line is the code's.
				i := slices.IndexFunc(leaf.Line, func(l profile.Line) bool { return l.Function.Filename != "" })
				if i >= 0 && leaf.Line[i].Line > 0 && strings.HasSuffix(leaf.Line[i].Function.Filename, ".java") {
					ownLines += n
				}
			}
			jitted = int64(res.Jitted)
			t.Logf("%d samples, %d in jitted code, %d on the program's own methods, %d of those in lambdas' hidden classes, %d of the others with a source line", total, jitted, own, hidden, ownLines)
			if own < jitted/2 || own < 200 {
				t.Errorf("only %d of %d jitted samples on the program's own methods", own, jitted)
			}
			if ownLines < (own-hidden)*95/100 {
				t.Errorf("only %d of the %d samples on own methods outside lambdas' hidden classes have a source line", ownLines, own-hidden)
			}
		})
	}
}

// TestJVMTIAttach: loaded by jcmd into a running JVM, the agent names the
// methods and stubs generated before it came.
func TestJVMTIAttach(t *testing.T) {
	for _, jdk := range jdks {
		t.Run(jdk.name, func(t *testing.T) {
			home := jdkHome(t, jdk.name)
			cp, lines := compileJava(t)
			p := programs[1]
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(home, "bin", "java"), "-cp", cp, p.main, "4000", "1500")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Wait()
			sc := bufio.NewScanner(stdout)
			if !sc.Scan() || sc.Text() != "ready" {
				t.Fatalf("the program said %q, not ready: %s", sc.Text(), stderr.String())
			}
			out := runCommand(t, []string{filepath.Join(home, "bin", "jcmd"), strconv.Itoa(cmd.Process.Pid),
				"JVMTI.agent_load", agentPath(t, JVMTI), dir + ",verbose"})
			var ts unix.Timespec // the dump's clock: what came before was replayed
			if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
				t.Fatal(err)
			}
			attached := uint64(ts.Nano())
			if !strings.Contains(out, "return code: 0") {
				t.Errorf("jcmd: %s", out)
			}
			for sc.Scan() {
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("the program: %v\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), "jitprof-jvmti: writing "+filepath.Join(dir, fmt.Sprintf("jit-%d.dump", cmd.Process.Pid))) {
				t.Errorf("the agent did not say where it writes: %s", stderr.String())
			}
			// Polygon.area and the interpreter were compiled and
			// generated before the agent came: only the replay names them.
			// The replay gives the methods inlined too: Main.total,
			// compiled before, has Polygon's inlined.
			methods, _ := checkJavaDump(t, jdk.name, onlyDump(t, dir), p, lines)
			replayed := false
			for _, m := range methods[p.into] {
				if m.load.Timestamp < attached && slices.ContainsFunc(m.inlines, func(in *jitdump.InlineInfo) bool { return in.File == p.inlined }) {
					replayed = true
				}
			}
			if !replayed {
				t.Errorf("no load of %s replayed at the attach has %s inlined", p.into, p.inlined)
			}
		})
	}
}

func symbolizeWarn(t *testing.T) symbolize.Options {
	return symbolize.Options{Warn: func(err error) { t.Logf("warning: %v", err) }}
}

// checkLinesUnlessNoTable: a compiled method without DEBUG_INFO must be one
// without a line table, as javap shows it (native methods, the JVM's
// pregenerated lambda forms), or in a hidden class, which javap cannot read.
func checkLinesUnlessNoTable(t *testing.T, jdk string, methods map[string][]*loadedMethod) {
	t.Helper()
	without := map[string][]string{} // class -> methods as perf demangles them, class.name(params)
	for name, loads := range methods {
		for _, m := range loads {
			if len(m.lines) > 0 || strings.Contains(name, ".0x") {
				continue
			}
			cls := strings.ReplaceAll(name[1:strings.IndexByte(name, ';')], "/", ".")
			// perf's demangler writes constructors as Class<init>().
			d := strings.Replace(demangle.Name(name), cls+"<init>", cls+".<init>", 1)
			without[cls] = append(without[cls], d)
		}
	}
	if len(without) == 0 {
		return
	}
	cp, _ := compileJava(t)
	args := []string{"-p", "-c", "-l", "-cp", cp} // javap 25 prints line tables only with -c
	for cls := range without {
		args = append(args, cls)
	}
	// Temurin 25's javap fails on the JDK's pregenerated Holder classes
	// ("Unmatched bit position 0x2") after printing them: its exit status
	// says nothing about the rest.
	outb, err := exec.Command(filepath.Join(jdkHome(t, jdk), "bin", "javap"), args...).CombinedOutput()
	out := string(outb)
	if !strings.Contains(out, "LineNumberTable:") {
		t.Fatalf("javap %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	classRE := regexp.MustCompile(`^\S.*(?:class|interface) ([\w.$]+)`)
	methodRE := regexp.MustCompile(`^  \S.*?([\w$]+)(\([^)]*\))`)
	// By class.name(params), and by class.name: whether every overload has one.
	table := map[string]bool{}
	all := map[string]bool{}
	cls, method, name := "", "", ""
	for _, line := range strings.Split(out, "\n") {
		if m := classRE.FindStringSubmatch(line); m != nil {
			cls = m[1]
		} else if m := methodRE.FindStringSubmatch(line); m != nil {
			if m[1] == cls[strings.LastIndexAny(cls, ".$")+1:] {
				m[1] = "<init>" // javap names a constructor after its class
			}
			name = cls + "." + m[1]
			method = name + m[2]
			table[method] = false
			if _, seen := all[name]; !seen {
				all[name] = true
			}
			all[name] = all[name] && !strings.Contains(line, " native ")
		} else if strings.TrimSpace(line) == "LineNumberTable:" {
			table[method] = true
		}
	}
	for _, names := range without {
		for _, m := range names {
			has, known := table[m]
			if !known {
				// Generic parameters print differently: judge by name.
				has = all[m[:strings.IndexByte(m, '(')]]
			}
			if has {
				t.Errorf("%s has a line table but no DEBUG_INFO", m)
			}
		}
	}
}
