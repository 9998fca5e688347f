package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runAsMain makes the test binary testsummary itself, so that tests see
// its real exit status.
const runAsMain = "TESTSUMMARY_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsMain) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// summarized runs testsummary on input and returns its exit status and
// output.
func summarized(t *testing.T, input []byte) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runAsMain+"=1")
	cmd.Stdin = bytes.NewReader(input)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// The packages of a module made to fail in each way go test can, and one
// that passes.
var throwaway = map[string]string{
	"go.mod":                   "module example.com/throwaway\n\ngo 1.26\n",
	"hangs/hangs_test.go":      "package hangs\n\nimport \"testing\"\n\nfunc TestHangs(t *testing.T) {\n\tt.Log(\"waiting for nothing\")\n\tselect {}\n}\n",
	"panics/panics_test.go":    "package panics\n\nimport \"testing\"\n\nfunc TestPanics(t *testing.T) {\n\tvar m map[string]int\n\tm[\"x\"] = 1\n}\n",
	"broken/broken_test.go":    "package broken\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { undefinedFunction() }\n",
	"fails/fails_test.go":      "package fails\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"the wrong answer\") }\n",
	"exits/exits_test.go":      "package exits\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestExits(t *testing.T) { os.Exit(3) }\n",
	"passes/passes_test.go":    "package passes\n\nimport \"testing\"\n\nfunc TestPasses(t *testing.T) {}\n",
	"skips/skips_test.go":      "package skips\n\nimport \"testing\"\n\nfunc TestSkips(t *testing.T) { t.Skip(\"nothing to test here\") }\n",
	"nested/nested_test.go":    "package nested\n\nimport \"testing\"\n\nfunc TestOuter(t *testing.T) {\n\tt.Run(\"inner\", func(t *testing.T) { t.Error(\"inner broke\") })\n}\n",
	"crashes/crashes_test.go":  "package crashes\n\nimport (\n\t\"runtime/debug\"\n\t\"testing\"\n)\n\nfunc TestCrashes(t *testing.T) {\n\tdebug.SetMaxStack(1 << 16)\n\tdeeper(0)\n}\n\nfunc deeper(n int) int {\n\tvar frame [64]byte\n\treturn deeper(n+1) + int(frame[n%64])\n}\n",
	"gopanics/gopanic_test.go": "package gopanics\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\nfunc TestGoroutinePanics(t *testing.T) {\n\tgo func() { panic(\"in a goroutine of the test\") }()\n\ttime.Sleep(time.Minute)\n}\n",
}

// throwawayRun is go test -json's output on the throwaway module, made once.
var throwawayRun []byte

// goTestJSON runs go test -json on the throwaway module, with a timeout
// short enough for TestHangs to reach it soon.
func goTestJSON(t *testing.T) []byte {
	t.Helper()
	if throwawayRun != nil {
		return throwawayRun
	}
	dir := t.TempDir()
	for name, text := range throwaway {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "3s", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("go test -json on the throwaway module: %v, want exit status 1\n%s%s", err, stderr.String(), out)
	}
	throwawayRun = out
	return out
}

// failures splits the summary's failures section into each failure's
// title and excerpt.
func failures(t *testing.T, summary string) map[string]string {
	t.Helper()
	_, section, ok := strings.Cut(summary, "\n=== failures")
	if !ok {
		t.Fatalf("no failures section in\n%s", summary)
	}
	got := map[string]string{}
	title := ""
	for _, l := range strings.Split(section, "\n")[1:] {
		switch {
		case strings.HasPrefix(l, "FAIL "):
			title = l
			got[title] = ""
		case strings.HasPrefix(l, "    ") && title != "":
			got[title] += strings.TrimPrefix(l, "    ") + "\n"
		default:
			title = ""
		}
	}
	return got
}

func TestFailuresOfEveryKind(t *testing.T) {
	code, summary := summarized(t, goTestJSON(t))
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	const p = "example.com/throwaway/"
	got := failures(t, summary)
	for _, tc := range []struct {
		title string
		// Lines the excerpt must have, in this order, as regular
		// expressions.
		want []string
		// What it must not: the alarm's goroutine of a timeout says
		// nothing of the hang.
		not string
	}{
		{"FAIL " + p + "broken: build failed", []string{`broken_test.go:5:\d+: undefined: undefinedFunction`}, ""},
		{"FAIL " + p + "fails TestFails", []string{`fails_test.go:5: the wrong answer`, `--- FAIL: TestFails`}, ""},
		{"FAIL " + p + "panics TestPanics", []string{
			`^panic: assignment to entry in nil map`,
			`^goroutine \d+ \[running\]:`,
			`^example.com/throwaway/panics.TestPanics\(`,
			`panics_test.go:7`,
		}, ""},
		{"FAIL " + p + "hangs: timed out after 3s in TestHangs", []string{
			`hangs_test.go:6: waiting for nothing`,
			`^panic: test timed out after 3s`,
			`^\s+TestHangs \(`,
			`^goroutine \d+ \[select \(no cases\)\]:`,
			`^example.com/throwaway/hangs.TestHangs\(`,
			`hangs_test.go:7`,
		}, "startAlarm"},
		{"FAIL " + p + "gopanics: panicked in TestGoroutinePanics", []string{
			`^panic: in a goroutine of the test`,
			`^example.com/throwaway/gopanics.TestGoroutinePanics.func1\(`,
		}, ""},
		{"FAIL " + p + "crashes: fatal error: stack overflow in TestCrashes", []string{
			`^runtime: goroutine stack exceeds 65536-byte limit`,
			`^fatal error: stack overflow`,
			`^goroutine \d+ .*\[running\]:`,
			`^example.com/throwaway/crashes.deeper\(`,
		}, ""},
		{"FAIL " + p + "exits: the test binary exited in TestExits", []string{`FAIL\s+example.com/throwaway/exits`}, ""},
		{"FAIL " + p + "nested TestOuter/inner", []string{`nested_test.go:6: inner broke`}, ""},
	} {
		excerpt, ok := got[tc.title]
		if !ok {
			t.Errorf("no failure %q in\n%s", tc.title, summary)
			continue
		}
		lines := strings.Split(excerpt, "\n")
		if n := len(lines) - 1; n > excerptLines+1 {
			t.Errorf("%s: %d lines, more than %d and the note of those left out", tc.title, n, excerptLines)
		}
		at := 0
		for _, want := range tc.want {
			i := slices.IndexFunc(lines[at:], regexp.MustCompile(want).MatchString)
			if i < 0 {
				t.Errorf("%s: no line %q (after line %d) in\n%s", tc.title, want, at, excerpt)
				break
			}
			at += i + 1
		}
		if tc.not != "" && strings.Contains(excerpt, tc.not) {
			t.Errorf("%s: %q in\n%s", tc.title, tc.not, excerpt)
		}
	}
	// The parent of a failed subtest only says it failed, as the subtest
	// already does.
	if _, ok := got["FAIL "+p+"nested TestOuter"]; ok {
		t.Errorf("TestOuter listed besides its failed subtest:\n%s", summary)
	}
	if len(got) != 8 {
		t.Errorf("%d failures listed, want 8:\n%s", len(got), summary)
	}
	count := regexp.MustCompile(`(?m)^1 passed, 4 failed, 1 skipped; 8 of 10 packages failed: (.*)$`).FindStringSubmatch(summary)
	if count == nil {
		t.Fatalf("no line \"1 passed, 4 failed, 1 skipped; 8 of 10 packages failed: ...\" in\n%s", summary)
	}
	for _, broken := range []string{"broken (build failed)", "fails (1 failed)", "panics (1 failed)", "nested (2 failed)", "hangs (timed out after 3s in TestHangs)"} {
		if !strings.Contains(count[1], p+broken) {
			t.Errorf("%q not among the failed packages: %s", broken, count[1])
		}
	}
	if !strings.Contains(summary, "  skipped "+p+"skips TestSkips: skips_test.go:5: nothing to test here\n") {
		t.Errorf("the skipped test and its reason not listed in\n%s", summary)
	}
}

// eventsOf keeps the events of run for which keep says so.
func eventsOf(t *testing.T, run []byte, keep func(e event) bool) []byte {
	t.Helper()
	var kept bytes.Buffer
	for l := range bytes.Lines(run) {
		var e event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if keep(e) {
			kept.Write(l)
		}
	}
	return kept.Bytes()
}

func TestExitStatus(t *testing.T) {
	const p = "example.com/throwaway/"
	run := goTestJSON(t)
	// go test's run cut short while TestHangs ran, as when CI kills it:
	// the passing package's events, then the hanging one's up to the
	// alarm.
	timedOut := false
	cutShort := eventsOf(t, run, func(e event) bool {
		timedOut = timedOut || strings.HasPrefix(e.Output, "panic: test timed out")
		return e.Package == p+"passes" || (e.Package == p+"hangs" && !timedOut)
	})
	for _, tc := range []struct {
		name  string
		input []byte
		code  int
		want  string
	}{
		{"a package that passed", eventsOf(t, run, func(e event) bool { return e.Package == p+"passes" }), 0, "1 passed, 0 failed, 0 skipped\n"},
		{"a skip is no failure", eventsOf(t, run, func(e event) bool { return e.Package == p+"skips" }), 0, "0 passed, 0 failed, 1 skipped\n"},
		{"nothing tested", nil, 1, "0 passed, 0 failed, 0 skipped; no package was tested\n"},
		{"cut short", cutShort, 1, "FAIL " + p + "hangs: no result, the run ended while it ran in TestHangs\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, summary := summarized(t, tc.input)
			if code != tc.code || !strings.Contains(summary, tc.want) {
				t.Errorf("exit status %d, want %d, and %q in\n%s", code, tc.code, tc.want, summary)
			}
		})
	}
}
