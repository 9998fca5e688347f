package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stubs stand in for the commands scripts/test.sh runs, logging each call
// to $STUB_LOG: go prints $STUB_TEST_JSON for the test run and exits with
// $STUB_TEST_EXIT, lists two packages of one fuzz target each, fails the
// fuzzing of $STUB_FUZZ_FAILS, and leaves testsummary to the real go;
// gofmt finds $STUB_UNFORMATTED unformatted; dpkg finds nothing installed,
// so apt-get runs; npm installs nothing.
var stubs = map[string]string{
	"go": `echo "go $*" >>"$STUB_LOG"
case "$*" in
"run ./scripts/testsummary") exec "$REAL_GO" "$@" ;;
"list ./...") printf '%s\n' example.com/a example.com/b ;;
"test -list ^Fuzz "*) printf 'FuzzOne\nok  \t%s\t0.01s\n' "${@: -1}" ;;
"test -run ^\$ -fuzz "*)
	if [ "${@: -1}" = "$STUB_FUZZ_FAILS" ]; then
		echo "--- FAIL: FuzzOne"
		exit 1
	fi ;;
*" -json "*)
	cat "$STUB_TEST_JSON"
	exit "$STUB_TEST_EXIT" ;;
esac`,
	"gofmt":   `echo "gofmt" >>"$STUB_LOG"; printf '%s' "$STUB_UNFORMATTED"`,
	"dpkg":    `exit 1`,
	"apt-get": `echo "apt-get $*" >>"$STUB_LOG"`,
	"npm":     `echo "npm $*" >>"$STUB_LOG"`,
	"sudo":    `exec "$@"`,
}

// testRun is go test -json's output for a package whose test passed or
// failed.
func testRun(result string) string {
	return `{"Action":"start","Package":"example.com/a"}
{"Action":"run","Package":"example.com/a","Test":"TestA"}
{"Action":"output","Package":"example.com/a","Test":"TestA","Output":"--- ` + strings.ToUpper(result) + `: TestA (0.00s)\n"}
{"Action":"` + result + `","Package":"example.com/a","Test":"TestA"}
{"Action":"` + result + `","Package":"example.com/a"}
`
}

// TestScript runs scripts/test.sh with its commands stubbed: whatever
// failed, every stage runs, each failure is named at the end and the exit
// status is 1; apt-get waits for the dpkg lock.
func TestScript(t *testing.T) {
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		result      string // of the test run
		fuzzFails   string // the package whose fuzzing fails
		unformatted string // what gofmt lists
		code        int
		want, not   string
	}{
		{"tests fail", "fail", "", "", 1, "FAILED: tests\n", "FAILED: fuzzing"},
		{"fuzzing fails", "pass", "example.com/a", "", 1, "FAILED: fuzzing example.com/a FuzzOne\n", "FAILED: tests"},
		{"a file unformatted", "pass", "", "x/y.go\n", 1, "FAILED: gofmt\n", "FAILED: tests"},
		{"nothing fails", "pass", "", "", 0, "vet, gofmt, tests and fuzzing: no failures\n", "FAILED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			log, run := filepath.Join(dir, "calls"), filepath.Join(dir, "run.json")
			if err := os.WriteFile(run, []byte(testRun(tc.result)), 0o644); err != nil {
				t.Fatal(err)
			}
			exit := map[string]string{"pass": "0", "fail": "1"}[tc.result]
			cmd := exec.Command("../test.sh")
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "REAL_GO="+realGo, "STUB_LOG="+log,
				"STUB_TEST_JSON="+run, "STUB_TEST_EXIT="+exit, "STUB_FUZZ_FAILS="+tc.fuzzFails, "STUB_UNFORMATTED="+tc.unformatted)
			out, err := cmd.CombinedOutput()
			if cmd.ProcessState == nil {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), tc.not) {
				t.Errorf("exit status %d, want %d, with %q and no %q in\n%s", code, tc.code, tc.want, tc.not, out)
			}
			b, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			calls := string(b)
			if !regexp.MustCompile(`(?s) -json .*-fuzz \^FuzzOne\$ .* example.com/a\n.*-fuzz \^FuzzOne\$ .* example.com/b\n`).MatchString(calls) {
				t.Errorf("not both packages fuzzed after the test run; the calls:\n%s", calls)
			}
			apt := regexp.MustCompile(`(?m)^apt-get .*$`).FindAllString(calls, -1)
			if len(apt) != 2 {
				t.Errorf("apt-get run %d times, want 2 (update, install); the calls:\n%s", len(apt), calls)
			}
			for _, c := range apt {
				if !strings.HasPrefix(c, "apt-get -o DPkg::Lock::Timeout=600 ") {
					t.Errorf("%q does not wait for the dpkg lock", c)
				}
			}
		})
	}
}
