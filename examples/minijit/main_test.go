//go:build amd64 || arm64

package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/examples/minijit/jit"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// TestUnderPerf runs minijit under perf record with frame-pointer and with
// DWARF call chains, and checks what the program promises profilers: a dump
// jitdump.Check finds nothing wrong with, unwinding tables that readelf and
// llvm-dwarfdump read without complaint from the images perf inject makes,
// and call chains in which the driver's callees have the driver below them,
// and only they, for the share of the time the driver's calls took.
//
// DWARF chains pass through jitted frames only if the eh_frame is right, so
// that mode is the test of the tables; frame-pointer chains are the test of
// the frames the code builds.
func TestUnderPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("runs perf for a second")
	}
	bin := fixtures.BuildTestJIT(t)
	for _, c := range []struct {
		mode   string
		record []string
	}{
		{"frame pointers", []string{"-g"}},
		{"dwarf", []string{"--call-graph", "dwarf"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "perf.data")
			args := append([]string{"record", "-q", "-k", "mono", "--no-bpf-event", "-F", "2000", "-o", data}, c.record...)
			out := fixtures.Perf(t, append(args, "--", bin, "-dir", dir, "-duration", "0.5s")...)
			var truth Report
			if err := json.Unmarshal(out, &truth); err != nil {
				t.Fatalf("minijit's report: %v\n%s", err, out)
			}
			checkDump(t, truth.Dump)

			jitData := filepath.Join(dir, "perf.jit.data")
			fixtures.Perf(t, "inject", "--jit", "-i", data, "-o", jitData)
			checkImages(t, dir)
			script := fixtures.Perf(t, "script", "-i", jitData, "-F", "ip,sym")
			checkChains(t, &truth, script)
		})
	}
}

func checkDump(t *testing.T, path string) {
	t.Helper()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	findings, err := jitdump.Check(f.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range findings {
		t.Errorf("Check: %v", fd)
	}
}

// checkImages has readelf and llvm-dwarfdump read the .eh_frame of every
// image perf inject wrote, which holds the tables as the program wrote them.
func checkImages(t *testing.T, dir string) {
	t.Helper()
	images, err := filepath.Glob(filepath.Join(dir, "jitted-*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(images) == 0 {
		t.Fatal("perf inject wrote no images")
	}
	for _, img := range images {
		frames := tool(t, "readelf", "--debug-dump=frames", img)
		if !strings.Contains(frames, "FDE") {
			t.Errorf("readelf finds no FDE in %s:\n%s", img, frames)
		}
		if eh := tool(t, "llvm-dwarfdump-14", "--eh-frame", img); !strings.Contains(eh, "DW_CFA_def_cfa_register") {
			t.Errorf("llvm-dwarfdump finds no frame pointer rule in %s:\n%s", img, eh)
		}
	}
}

// tool runs a tool that must exit 0 and complain about nothing.
func tool(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	out := stdout.String()
	if lower := strings.ToLower(out); stderr.Len() > 0 || strings.Contains(lower, "warning") || strings.Contains(lower, "error") {
		t.Errorf("%s complains:\n%s%s", strings.Join(args, " "), stderr.Bytes(), out)
	}
	return out
}

// checkChains reads perf script's samples, each a call chain from the
// sampled function down, and checks the frame below each kernel: the
// driver for those it called, never the driver for those Go called. The
// samples under the driver must be its calls' share of the kernels' time.
func checkChains(t *testing.T, truth *Report, script []byte) {
	t.Helper()
	caller := map[string]string{}
	var calledNanos, allNanos int64
	for _, arc := range truth.Calls {
		caller[arc.Callee] = arc.Caller
		calledNanos += arc.CPUNanos
	}
	for _, w := range truth.Functions {
		allNanos += w.CPUNanos
	}
	if len(caller) == 0 {
		t.Fatal("minijit reports no jitted calls")
	}

	kernelSamples, underDriver, right := 0, 0, 0
	for _, sample := range strings.Split(string(script), "\n\n") {
		var chain []string
		for line := range strings.Lines(sample) {
			// "	    7f1c2d4e500b jit:loop_c"
			if f := strings.Fields(line); len(f) >= 2 {
				chain = append(chain, strings.Join(f[1:], " "))
			}
		}
		if len(chain) == 0 {
			continue
		}
		if _, ok := truth.Functions[chain[0]]; !ok {
			continue
		}
		kernelSamples++
		below := ""
		if len(chain) > 1 {
			below = chain[1]
		}
		if below == jit.DriverName {
			underDriver++
		}
		want := caller[chain[0]]
		if want == below || (want == "" && !strings.HasPrefix(below, "jit:")) {
			right++
		} else if kernelSamples-right <= 5 {
			t.Logf("a sample of %s has %q below it, want %q: %q", chain[0], below, want, chain)
		}
	}
	if kernelSamples < 300 {
		t.Fatalf("only %d samples in the kernels", kernelSamples)
	}
	// A sample taken in a prologue, before the frame is built, misses the
	// caller: two instructions of a function that runs for thousands.
	if frac := float64(right) / float64(kernelSamples); frac < 0.99 {
		t.Errorf("%d of %d kernel samples have the right caller below them (%.3f)", right, kernelSamples, frac)
	}
	want := float64(calledNanos) / float64(allNanos)
	got := float64(underDriver) / float64(kernelSamples)
	bound := 0.02 + 4*math.Sqrt(want*(1-want)/float64(kernelSamples))
	t.Logf("%d kernel samples, %d with the right caller, %.3f under the driver; its calls took %.3f of the time (bound ±%.3f)", kernelSamples, right, got, want, bound)
	if math.Abs(got-want) > bound {
		t.Errorf("%.3f of the kernel samples are under the driver, but its calls took %.3f of the time", got, want)
	}
}
