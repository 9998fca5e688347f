package record

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/inject"
	"github.com/jitprof/jitprof/internal/runtimes"
)

// TestMono records Mono with no flag: record sets MONO_ENV_OPTIONS, Mono
// writes a perf map (through a 4 KiB stdio buffer, so most of its lines
// reach the file after the samples they name), and jitprof names the same
// samples as perf report does on the same recording, with the same shares
// of the four methods whose work is 40/30/20/10.
func TestMono(t *testing.T) {
	mono := fixtures.LookPath(t, "mono")
	dir := t.TempDir()
	exe := filepath.Join(dir, "shares.exe")
	if out, err := exec.Command(fixtures.LookPath(t, "mcs"), "-optimize+", "-out:"+exe, fixtures.Workload(t, "shares.cs")).CombinedOutput(); err != nil {
		t.Fatalf("mcs: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "perf.data")
	res, _ := record(t, Options{Freq: 999, Output: data, RuntimeEnv: true, Command: []string{mono, exe, "3"}})
	if res.ExitCode != 0 {
		t.Fatalf("mono exited with status %d", res.ExitCode)
	}
	maps, _ := filepath.Glob(filepath.Join(dir, "perf-*.map"))
	if len(maps) != 1 {
		t.Fatalf("perf maps beside the recording: %q, want Mono's", maps)
	}
	got := fixtures.LeafCounts(analyzeRecording(t, data).Profile.PProf())

	// perf reads the map from /tmp only, where Mono left it.
	tmp := filepath.Join("/tmp", filepath.Base(maps[0]))
	b, err := os.ReadFile(maps[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmp)
	want, total := fixtures.SymbolCounts(t, data, "-g", "none")

	methods := map[string]float64{"Alpha": 0.4, "Beta": 0.3, "Gamma": 0.2, "Delta": 0.1}
	shares := func(counts map[string]int) map[string]float64 {
		s, sum := map[string]float64{}, 0
		for name, n := range counts {
			for m := range methods {
				if strings.HasPrefix(name, "Shares:"+m+" ") {
					s[m] += float64(n)
					sum += n
				}
			}
		}
		for m := range s {
			s[m] /= float64(sum)
		}
		return s
	}
	perfShares, ourShares := shares(want), shares(got)
	for m := range methods {
		t.Logf("%s: perf %.3f, jitprof %.3f", m, perfShares[m], ourShares[m])
		if perfShares[m] == 0 || abs(perfShares[m]-ourShares[m]) > 0.01 {
			t.Errorf("%s: perf %.3f, jitprof %.3f of the four methods' samples", m, perfShares[m], ourShares[m])
		}
	}
	for name, n := range want {
		// Samples perf leaves unnamed are in Mono's trampolines, which
		// its map does not give: only what perf names is held to.
		if strings.HasPrefix(name, "0x") {
			continue
		}
		if strings.Contains(name, ":") && got[name] != n && abs(float64(got[name]-n)) > 0.005*float64(total) {
			t.Errorf("%q: perf %d samples, jitprof %d", name, n, got[name])
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDeno records Deno with no flag: record sets DENO_V8_FLAGS, V8 writes
// its dump, and jitprof names hot and cold with the shares of CPU time the
// program measured itself, and the same samples as perf after perf inject.
func TestDeno(t *testing.T) {
	deno, workload := fixtures.Deno(t), fixtures.Workload(t, "hotcold.js")
	dir := t.TempDir()
	t.Chdir(dir) // V8 writes its dump in the working directory
	data := filepath.Join(dir, "perf.data")
	var stdout strings.Builder
	// At 4 kHz for 4 s, a thousand samples even with a quarter of a CPU
	// (CI runs packages side by side).
	res, _ := record(t, Options{Freq: 4000, Output: data, RuntimeEnv: true, Stdout: &stdout,
		Command: []string{deno, "run", "--allow-all", workload, "4"}})
	if res.ExitCode != 0 {
		t.Fatalf("deno exited with status %d", res.ExitCode)
	}
	var truth map[string]int64
	if err := json.Unmarshal([]byte(stdout.String()), &truth); err != nil {
		t.Fatalf("deno's truth %q: %v", stdout.String(), err)
	}
	ar := analyzeRecording(t, data)
	if len(ar.Dumps) == 0 {
		t.Fatal("no dump: DENO_V8_FLAGS did not reach V8")
	}
	got := fixtures.LeafCounts(ar.Profile.PProf())
	js := map[string]int{}
	for name, n := range got {
		if v8, ok := runtimes.ParseV8Name(name); ok && (v8.Name == "hot" || v8.Name == "cold") {
			js[v8.Name] += n
		}
	}
	fixtures.CheckCPUShares(t, "jitprof", truth, js)

	want, total := fixtures.SymbolCounts(t, fixtures.Inject(t, fixtures.Recording{PerfData: data}), "-g", "none")
	for name, n := range want {
		if strings.HasPrefix(name, "JS:") && abs(float64(got[name]-n)) > 0.005*float64(total) {
			t.Errorf("%q: perf %d samples, jitprof %d", name, n, got[name])
		}
	}
}

// TestBun records Bun with no flag: record sets BUN_JSC_useJITDump and the
// directory of the dump, JavaScriptCore writes jit-<tid>-<pid>.dump (a
// name perf inject passes over), and jitprof names hot and cold with the
// shares of CPU time the program measured itself; perf, reading the
// images jitprof inject writes from the same recording, counts the same
// samples in each function.
func TestBun(t *testing.T) {
	bun, workload := fixtures.Bun(t), fixtures.Workload(t, "hotcold.js")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	var stdout strings.Builder
	res, _ := record(t, Options{Freq: 4000, Output: data, RuntimeEnv: true, Stdout: &stdout,
		Command: []string{bun, workload, "4"}})
	if res.ExitCode != 0 {
		t.Fatalf("bun exited with status %d", res.ExitCode)
	}
	var truth map[string]int64
	if err := json.Unmarshal([]byte(stdout.String()), &truth); err != nil {
		t.Fatalf("bun's truth %q: %v", stdout.String(), err)
	}
	ar := analyzeRecording(t, data)
	if len(ar.Dumps) != 1 || !regexp.MustCompile(`/jit-[0-9]+-[0-9]+\.dump$`).MatchString(ar.Dumps[0]) {
		t.Fatalf("dumps %q, want JavaScriptCore's one in the recording's directory", ar.Dumps)
	}
	got := fixtures.LeafCounts(ar.Profile.PProf())
	// JavaScriptCore names a function's code by its tier, its name and
	// the hash of its source: "JSC-FTL: hot#A843bs".
	jsc := regexp.MustCompile(`^JSC-[A-Za-z]+: (hot|cold)#`)
	js := map[string]int{}
	for name, n := range got {
		if m := jsc.FindStringSubmatch(name); m != nil {
			js[m[1]] += n
		}
	}
	fixtures.CheckCPUShares(t, "jitprof", truth, js)

	injected := filepath.Join(dir, "perf.jit.data")
	if _, err := inject.Run(inject.Options{Input: data, Output: injected}); err != nil {
		t.Fatal(err)
	}
	want, total := fixtures.SymbolCounts(t, injected, "-g", "none")
	perfNamed := 0
	for name, n := range want {
		if strings.HasPrefix(name, "JSC-") {
			perfNamed += n
			if abs(float64(got[name]-n)) > 0.005*float64(total) {
				t.Errorf("%q: perf %d samples, jitprof %d", name, n, got[name])
			}
		}
	}
	if perfNamed < total/2 {
		t.Errorf("perf names %d of %d samples from jitprof inject's images: too few to compare", perfNamed, total)
	}
}

// TestMonoAttach records a Mono already running with --jitmap (record -p):
// Mono's map is still in its stdio buffer while record looks, so record's
// copy lacks the lines Mono writes at exit; the report reads Mono's own
// map, which holds them all, and names what perf names.
func TestMonoAttach(t *testing.T) {
	mono := fixtures.LookPath(t, "mono")
	dir := t.TempDir()
	exe := filepath.Join(dir, "shares.exe")
	if out, err := exec.Command(fixtures.LookPath(t, "mcs"), "-optimize+", "-out:"+exe, fixtures.Workload(t, "shares.cs")).CombinedOutput(); err != nil {
		t.Fatalf("mcs: %v\n%s", err, out)
	}
	cmd := exec.Command(mono, "--jitmap", exe, "3")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	tmpMap := fmt.Sprintf("/tmp/perf-%d.map", pid)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.Remove(tmpMap)
	})
	time.Sleep(500 * time.Millisecond) // its methods compiled
	data := filepath.Join(dir, "perf.data")
	record(t, Options{Freq: 999, Output: data, Pids: []int{pid}, Duration: 1500 * time.Millisecond})
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mono: %v", err)
	}
	got := fixtures.LeafCounts(analyzeRecording(t, data).Profile.PProf())
	want, total := fixtures.SymbolCounts(t, data, "-g", "none")
	named := 0
	for name, n := range want {
		if !strings.HasPrefix(name, "Shares:") {
			continue
		}
		named += n
		if abs(float64(got[name]-n)) > 0.01*float64(total) {
			t.Errorf("%q: perf %d samples, jitprof %d", name, n, got[name])
		}
	}
	if named < total/2 {
		t.Errorf("perf names %d of %d samples in the workload's methods: the recording missed them", named, total)
	}
}
