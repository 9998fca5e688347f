package perfmap

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
)

// TestRuntimeMaps has real runtimes write maps and reads them.
func TestRuntimeMaps(t *testing.T) {
	workloads := filepath.Dir(fixtures.Workload(t, "newfunctions.js"))
	tests := []struct {
		name    string
		prepare []string // run first, in the temporary directory
		run     []string
		want    []string // names the map must hold
	}{
		{"node", nil,
			[]string{"node", "--perf-basic-prof", filepath.Join(workloads, "newfunctions.js"), "20"},
			[]string{"JS:~fib " + filepath.Join(workloads, "newfunctions.js") + ":2:13"}},
		{"java", []string{"javac", "-d", ".", filepath.Join(workloads, "Work.java")},
			[]string{"java", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit", "-cp", ".", "Work", "300"},
			[]string{"long Work.fib(int)"}},
		{"erlang", nil,
			[]string{"erl", "-noshell", "+JPperf", "map", "-eval", `io:format("~p~n",[lists:seq(1,3)]), halt().`},
			[]string{"$global::apply_fun_shared"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, argv := range [][]string{tt.prepare, tt.run} {
				if argv == nil {
					continue
				}
				if _, err := exec.LookPath(argv[0]); err != nil {
					t.Skipf("%s is not installed: %v", argv[0], err)
				}
			}
			if tt.prepare != nil {
				cmd := exec.Command(tt.prepare[0], tt.prepare[1:]...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", tt.prepare, err, out)
				}
			}
			cmd := exec.Command(tt.run[0], tt.run[1:]...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// erl execs the emulator, so the pid stays that of the process
			// started here.
			name := "/tmp/perf-" + strconv.Itoa(cmd.Process.Pid) + ".map"
			t.Cleanup(func() { os.Remove(name) })
			if err := cmd.Wait(); err != nil {
				t.Fatalf("%s: %v\n%s", tt.run, err, out.Bytes())
			}
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}

			got, errs, err := ParseFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(errs) != 0 {
				t.Fatalf("%d bad lines, first %v", len(errs), errs[0])
			}
			want := splitMap(t, string(raw))
			if len(got) != len(want) || len(got) < 10 {
				t.Fatalf("%d entries, file has %d lines", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %+v, want %+v", got[i], want[i])
				}
			}
			names := make(map[string]bool)
			for _, e := range got {
				names[e.Name] = true
			}
			for _, n := range tt.want {
				if !names[n] {
					t.Errorf("no entry named %q", n)
				}
			}

			var buf bytes.Buffer
			if err := Write(&buf, got); err != nil {
				t.Fatal(err)
			}
			again, errs, err := Parse(&buf)
			if err != nil || len(errs) != 0 || !slices.Equal(again, got) {
				t.Errorf("Write then Parse differs: %v %v", errs, err)
			}
			checkTable(t, got)
		})
	}
}

// splitMap reads a map the naive way, to check Parse against.
func splitMap(t *testing.T, s string) []Entry {
	var entries []Entry
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			t.Fatalf("line %d: %q", i+1, line)
		}
		var n [2]uint64
		for j := range n {
			v, err := strconv.ParseUint(strings.TrimPrefix(f[j], "0x"), 16, 64)
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			n[j] = v
		}
		entries = append(entries, Entry{n[0], n[1], f[2], i + 1})
	}
	return entries
}
