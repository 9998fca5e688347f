// Command testsummary reads `go test -json` and prints what `go test`
// prints (a line per package, the output of failed tests), then each
// failure again, cut to its first lines, and one line "N passed, N failed,
// N skipped" with the packages that failed, and each skipped test with its
// reason: a run that tested less than it should says so. It exits 1 when a
// test or a package failed.
//
// A package can fail with no test failing: it does not build, a test
// panics in a goroutine of its own, calls os.Exit, or runs past -timeout.
// test2json then reports only the package's "fail", the panic or goroutine
// dump as output of the test that last wrote, and no end for the tests that
// were running. Those tests are named, and the dump is cut to the panic and
// the goroutines that run them.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
)

// excerptLines is how much of each failure the end of the summary repeats:
// enough for a panic message and the stack of the goroutine that matters.
const excerptLines = 40

// event is one line of test2json's output. Build events name the package
// being built in ImportPath; a package whose build failed names it in
// FailedBuild.
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string
	FailedBuild string
}

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// line is one line of output, and the test it came from ("" for the
// package's own).
type line struct{ test, text string }

// pkg is a package under test, from its start to its end.
type pkg struct {
	// pending holds, in order, the output of tests that have not ended
	// and the package's own: a test's goes when it ends.
	pending     []line
	running     []string // tests started and not ended, in order
	testsFailed int
}

// failure is one failed test, or a package that failed beyond its tests
// with the tests that were running.
type failure struct {
	title   string
	lines   []string
	running []string
}

type summary struct {
	out      io.Writer
	pkgs     map[string]*pkg
	ended    []string            // packages, in the order they ended
	builds   map[string][]string // build output by the ImportPath built
	passed   int
	failed   []string // package and test
	skipped  map[string]string
	failures []failure
	broken   []string // packages that failed, with how
}

// summarize reads go test -json from in and writes the summary to out; it
// reports whether anything failed.
func summarize(in io.Reader, out io.Writer) (bool, error) {
	s := &summary{out: out, pkgs: map[string]*pkg{}, builds: map[string][]string{}, skipped: map[string]string{}}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, sc.Text()) // not an event: go test's own message
			continue
		}
		s.event(e)
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	// A package that never ended: go test itself was killed, or the
	// input cut short.
	for _, name := range slices.Sorted(maps.Keys(s.pkgs)) {
		p := s.pkgs[name]
		s.print(p.pending)
		s.broken = append(s.broken, name+" (no result: the run ended first)")
		s.failures = append(s.failures, failure{"FAIL " + name + ": no result, the run ended while it ran" + inTests(innermost(p.running)), texts(p.pending), innermost(p.running)})
	}
	s.report()
	return len(s.failed) > 0 || len(s.broken) > 0 || len(s.ended) == 0, nil
}

func (s *summary) event(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.out, e.Output)
		s.builds[e.ImportPath] = append(s.builds[e.ImportPath], e.Output)
		return
	case "build-fail":
		return
	}
	p := s.pkgs[e.Package]
	if p == nil {
		p = &pkg{}
		s.pkgs[e.Package] = p
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "run":
		p.running = append(p.running, e.Test)
	case "output":
		p.pending = append(p.pending, line{e.Test, e.Output})
	case "pass", "skip", "fail":
		if e.Test == "" {
			s.packageEnded(e, p)
			return
		}
		p.running = slices.DeleteFunc(p.running, func(name string) bool { return name == e.Test })
		var own []string
		p.pending = slices.DeleteFunc(p.pending, func(l line) bool {
			if l.test == e.Test {
				own = append(own, l.text)
			}
			return l.test == e.Test
		})
		switch e.Action {
		case "pass":
			s.passed++
		case "skip":
			s.skipped[key] = reason(own)
		case "fail":
			p.testsFailed++
			s.failed = append(s.failed, key)
			fmt.Fprint(s.out, strings.Join(own, ""))
			if !onlyFraming(own) || !slices.ContainsFunc(s.failed, func(f string) bool { return strings.HasPrefix(f, key+"/") }) {
				s.failures = append(s.failures, failure{"FAIL " + key, own, nil})
			}
		}
	}
}

// packageEnded prints what the package left (its ok or FAIL line; for a
// package that failed beyond its tests, the output of the tests that never
// ended) and notes a failure no failed test accounts for.
func (s *summary) packageEnded(e event, p *pkg) {
	delete(s.pkgs, e.Package)
	s.ended = append(s.ended, e.Package)
	if e.Action == "pass" {
		p.pending = slices.DeleteFunc(p.pending, func(l line) bool { return l.test == "" && l.text == "PASS\n" })
	}
	s.print(p.pending)
	if e.Action != "fail" {
		return
	}
	lines := texts(p.pending)
	timeout, fatal := firstWith(lines, "panic: test timed out"), firstWith(lines, "fatal error: ")
	how := ""
	switch {
	case e.FailedBuild != "":
		how = "build failed"
		lines = s.builds[e.FailedBuild]
	case timeout >= 0:
		how = strings.TrimPrefix(strings.TrimSpace(lines[timeout]), "panic: test ") // "timed out after 20m0s"
	case firstWith(lines, "panic: ") >= 0:
		how = "panicked"
	case fatal >= 0:
		how = strings.TrimSpace(lines[fatal]) // "fatal error: concurrent map writes"
	case len(p.running) > 0:
		how = "the test binary exited"
	case p.testsFailed > 0:
		s.broken = append(s.broken, fmt.Sprintf("%s (%d failed)", e.Package, p.testsFailed))
		return
	default:
		how = "failed outside any test"
	}
	running := innermost(p.running)
	how += inTests(running)
	s.broken = append(s.broken, e.Package+" ("+how+")")
	s.failures = append(s.failures, failure{"FAIL " + e.Package + ": " + how, lines, running})
}

// innermost are the tests of running that have no subtest running: a
// parent only waits for its subtests.
func innermost(running []string) []string {
	var inner []string
	for _, name := range running {
		if !slices.ContainsFunc(running, func(other string) bool { return strings.HasPrefix(other, name+"/") }) {
			inner = append(inner, name)
		}
	}
	return inner
}

func inTests(tests []string) string {
	if len(tests) == 0 {
		return ""
	}
	return " in " + strings.Join(tests, ", ")
}

func (s *summary) print(lines []line) {
	for _, l := range lines {
		fmt.Fprint(s.out, l.text)
	}
}

func (s *summary) report() {
	if len(s.failures) > 0 {
		fmt.Fprintf(s.out, "\n=== failures (at most %d lines of each; all of its output is above)\n", excerptLines)
	}
	for _, f := range s.failures {
		fmt.Fprintln(s.out, f.title)
		for _, l := range excerpt(f.lines, f.running) {
			fmt.Fprintln(s.out, "    "+l)
		}
	}
	fmt.Fprintf(s.out, "%d passed, %d failed, %d skipped", s.passed, len(s.failed), len(s.skipped))
	switch {
	case len(s.broken) > 0:
		fmt.Fprintf(s.out, "; %d of %d packages failed: %s\n", len(s.broken), len(s.ended)+len(s.pkgs), strings.Join(s.broken, ", "))
	case len(s.ended) == 0:
		fmt.Fprintln(s.out, "; no package was tested")
	default:
		fmt.Fprintln(s.out)
	}
	for _, key := range slices.Sorted(maps.Keys(s.skipped)) {
		fmt.Fprintf(s.out, "  skipped %s: %s\n", key, s.skipped[key])
	}
}

var (
	goroutineHeader = regexp.MustCompile(`^goroutine \d+ .*\]:$`) // a crash's has gp=, m=
	framing         = regexp.MustCompile(`^=== (RUN|PAUSE|CONT|NAME) `)
)

// excerpt cuts a failure's output to excerptLines lines. Without a panic
// they are its first lines. With one, they are the lines just before it,
// the panic's message, and the goroutine that panicked; for a timeout,
// whose first goroutine is only the alarm's, the goroutines that run the
// tests still running (or that they started).
func excerpt(all []string, running []string) []string {
	var lines []string
	for _, l := range all {
		if l = strings.TrimRight(l, "\n"); !framing.MatchString(l) {
			lines = append(lines, l)
		}
	}
	at := firstWith(lines, "panic: ")
	if fatal := firstWith(lines, "fatal error: "); at < 0 || (fatal >= 0 && fatal < at) {
		at = fatal
	}
	if at < 0 {
		return cut(lines, len(lines))
	}
	cutout := lines[max(0, at-10):at]
	rest := lines[at:]
	first := slices.IndexFunc(rest, goroutineHeader.MatchString)
	if first < 0 {
		return cut(append(cutout, rest...), len(lines))
	}
	cutout = append(cutout, rest[:first]...)
	blocks := goroutines(rest[first:])
	chosen := blocks[:1]
	if strings.HasPrefix(lines[at], "panic: test timed out") {
		chosen = nil
		for _, b := range blocks {
			if slices.ContainsFunc(running, func(test string) bool { return runsTest(b, test) }) {
				chosen = append(chosen, b)
			}
		}
		if len(chosen) == 0 {
			chosen = blocks
		}
	}
	for _, b := range chosen {
		cutout = append(cutout, b...)
	}
	return cut(cutout, len(lines))
}

// runsTest says whether a goroutine's stack has a frame of test's
// function, a closure in it (subtests are), or was created by it.
func runsTest(stack []string, test string) bool {
	top, _, _ := strings.Cut(test, "/")
	frame := regexp.MustCompile(`\.` + regexp.QuoteMeta(top) + `\b`)
	return slices.ContainsFunc(stack, frame.MatchString)
}

// goroutines splits a goroutine dump into its goroutines' stacks, each
// with its header line and a blank line after.
func goroutines(dump []string) [][]string {
	var blocks [][]string
	for _, l := range dump {
		if goroutineHeader.MatchString(l) || len(blocks) == 0 {
			blocks = append(blocks, nil)
		}
		blocks[len(blocks)-1] = append(blocks[len(blocks)-1], l)
	}
	return blocks
}

// cut keeps the first excerptLines of lines and says how many of total
// were left out.
func cut(lines []string, total int) []string {
	if len(lines) > excerptLines {
		lines = lines[:excerptLines]
	}
	if left := total - len(lines); left > 0 {
		lines = append(lines, fmt.Sprintf("[%d more lines in the output above]", left))
	}
	return lines
}

func firstWith(lines []string, prefix string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func texts(lines []line) []string {
	var t []string
	for _, l := range lines {
		t = append(t, l.text)
	}
	return t
}

// onlyFraming says whether a failed test's output is nothing but the lines
// go test frames it with: a parent that failed because a subtest did, whose
// own failure is listed.
func onlyFraming(lines []string) bool {
	return !slices.ContainsFunc(lines, func(l string) bool {
		return !framing.MatchString(l) && !strings.HasPrefix(strings.TrimSpace(l), "--- FAIL: ")
	})
}

// reason is the message a skipped test gave: its last line of output that
// is not the "--- SKIP" line itself.
func reason(lines []string) string {
	for _, l := range slices.Backward(lines) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return "(no reason given)"
}
