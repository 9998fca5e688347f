package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/perfdata"
)

// threadsEnv makes the test binary a multi-threaded busy workload: that
// many threads, thread i of n spinning for (i+1)/n of spinCPU of its own CPU
// time. It prints the CPU time each spinning thread had, as JSON by thread
// id: the truth the samples are held to.
const threadsEnv = "JITPROF_RECORD_TEST_THREADS"

const spinCPU = 500 * time.Millisecond

func TestMain(m *testing.M) {
	if n, err := strconv.Atoi(os.Getenv(threadsEnv)); err == nil {
		if err := json.NewEncoder(os.Stdout).Encode(spin(n, spinCPU)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	fixtures.RemoveAgents()
	os.Exit(code)
}

// spin runs n OS threads, thread i burning (i+1)/n of cpu of its own CPU
// time, and returns the CPU time of each by thread id, as the kernel
// accounts it when all are done: the first field of
// /proc/self/task/TID/schedstat, in nanoseconds. The threads are still
// there to be read: they wait, locked, for the process to exit.
func spin(n int, cpu time.Duration) map[int]int64 {
	tids := make(chan int)
	for i := range n {
		go func() {
			runtime.LockOSThread()
			start, budget := threadCPU(), cpu*time.Duration(i+1)/time.Duration(n)
			for x := 0; threadCPU()-start < budget; x++ {
				for j := 0; j < 100000; j++ {
					x ^= j
				}
			}
			tids <- unix.Gettid()
			select {}
		}()
	}
	times := map[int]int64{}
	for range n {
		tid := <-tids
		b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", tid))
		if err != nil {
			panic(err)
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
		if err != nil {
			panic(err)
		}
		times[tid] = ns
	}
	return times
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// spinCommand is the test binary spinning threads (threadsEnv).
func spinCommand(t *testing.T, threads int) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Command: []string{exe}, Env: append(os.Environ(), threadsEnv+"="+strconv.Itoa(threads))}
}

// record runs Run with o, output in a fresh directory, and checks what
// every recording must be: readable whole, with as many samples as Run
// counted, as many lost as its LOST records count, and the events timed by
// CLOCK_MONOTONIC; with a DWARF call graph, every user sample's registers
// its own (the IP register the sampled address) with a copy of its stack of
// the size asked for, and full copies as many as Run counted.
func record(t *testing.T, o Options) (*Result, string) {
	t.Helper()
	return recordUntil(t.Context(), t, o)
}

// recordUntil is record, ended when ctx is done.
func recordUntil(ctx context.Context, t *testing.T, o Options) (*Result, string) {
	t.Helper()
	if o.Output == "" {
		o.Output = filepath.Join(t.TempDir(), "perf.data")
	}
	if o.Freq == 0 {
		o.Freq = 999
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	o.Stderr = testWriter{t}
	o.Note = func(msg string) { t.Log(msg) }
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples, %d lost, %.2f s, command CPU time %.3f s", res.Samples, res.Lost, res.Elapsed.Seconds(), res.CPUTime.Seconds())
	f, err := perfdata.Open(o.Output)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := jitsources.CheckClock(f.Attrs()); err != nil {
		t.Error(err)
	}
	var samples, lost, full uint64
	for {
		rec, err := f.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch r := rec.(type) {
		case *perfdata.Sample:
			samples++
			if o.CallGraph == DWARF && checkDWARFSample(t, r, res.StackSize) {
				full++
			}
		case *perfdata.Lost:
			lost += r.Lost
		case *perfdata.Invalid:
			t.Fatalf("invalid record: %v", r.Err)
		}
	}
	if samples != res.Samples || lost != res.Lost || full != res.FullStacks {
		t.Errorf("the file has %d samples, %d lost, %d full stack copies; Run counted %d, %d, %d", samples, lost, full, res.Samples, res.Lost, res.FullStacks)
	}
	return res, o.Output
}

// checkDWARFSample checks a sample of a DWARF call graph, and tells
// whether its stack copy is full.
func checkDWARFSample(t *testing.T, s *perfdata.Sample, stackSize uint32) (full bool) {
	t.Helper()
	if s.StackUserSize != uint64(stackSize) && s.StackUserSize != 0 {
		t.Fatalf("sample at %#x: a stack copy of %d bytes, %d asked for", s.Offset, s.StackUserSize, stackSize)
	}
	if s.Misc&perfdata.MiscCPUModeMask == perfdata.MiscUser {
		ipReg, spReg := perfdata.RegX86IP, perfdata.RegX86SP
		if runtime.GOARCH == "arm64" {
			ipReg, spReg = perfdata.RegARM64PC, perfdata.RegARM64SP
		}
		ip, ok1 := s.UserRegister(ipReg)
		sp, ok2 := s.UserRegister(spReg)
		if !ok1 || !ok2 || ip != s.IP || sp == 0 || len(s.StackUser) == 0 {
			t.Fatalf("user sample at %#x (ip %#x): IP register %#x (%t), SP %#x (%t), %d bytes of stack", s.Offset, s.IP, ip, ok1, sp, ok2, len(s.StackUser))
		}
	}
	return s.StackUserSize > 0 && len(s.StackUser) == int(s.StackUserSize)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("%s", bytes.TrimRight(b, "\n"))
	return len(b), nil
}

// checkRate: the samples of the threads in cpu (their CPU time by thread
// id, as the kernel accounted it) are the frequency times that CPU time,
// within 10%; the command's CPU time, Result.CPUTime, holds theirs. It
// returns the samples of every thread. The threads in cpu are those that do
// the workload's work: the command's CPU time also counts the Go runtime's
// other threads, which run in slices of microseconds that the kernel
// accounts in full but the sampling timer mostly misses (measured under
// load: 8398 samples at 4 kHz for minijit, whose command had 2.360 s of CPU
// time, 11% short).
func checkRate(t *testing.T, res *Result, data string, hz int, cpu map[uint32]int64) map[uint32]int {
	t.Helper()
	f, err := perfdata.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	perTid := map[uint32]int{}
	var first, last uint64
	for {
		rec, err := f.Next()
		if err != nil {
			break
		}
		if s, ok := rec.(*perfdata.Sample); ok {
			perTid[s.Tid]++
			if last == 0 || s.Time < first {
				first = s.Time
			}
			last = max(last, s.Time)
		}
	}
	// HEADER_SAMPLE_TIME, which report --stage places its stages from.
	if gotFirst, gotLast, ok, err := f.SampleTime(); !ok || err != nil || gotFirst != first || gotLast != last {
		t.Errorf("sample time section: %d, %d (there: %v, %v); the samples' first and last times are %d, %d", gotFirst, gotLast, ok, err, first, last)
	}
	samples, total := 0, time.Duration(0)
	for tid, ns := range cpu {
		samples += perTid[tid]
		total += time.Duration(ns)
	}
	if total < 200*time.Millisecond {
		t.Fatalf("the workload's threads ran only %v of CPU time: %v", total, cpu)
	}
	if res.CPUTime < total*99/100 {
		t.Errorf("the command's CPU time is %v, less than its threads' %v", res.CPUTime, total)
	}
	want := float64(hz) * total.Seconds()
	t.Logf("%d samples of the workload's threads for their %.3f s of CPU time (%.0f expected)", samples, total.Seconds(), want)
	if math.Abs(float64(samples)-want) > 0.1*want {
		t.Errorf("%d samples of the workload's threads; %d Hz over their %.3f s of CPU time is %.0f", samples, hz, total.Seconds(), want)
	}
	return perTid
}

// spinTruth decodes what the spinning workload printed: its threads' CPU
// time by thread id.
func spinTruth(t *testing.T, out []byte, threads int) map[uint32]int64 {
	t.Helper()
	var cpu map[uint32]int64
	if err := json.Unmarshal(out, &cpu); err != nil || len(cpu) != threads {
		t.Fatalf("the workload's thread times: %v\n%s", err, out)
	}
	return cpu
}

// TestBusyLoop: a single-threaded busy loop gets the frequency times its
// CPU time in samples, none lost, at 999 Hz and at the default 4 kHz with
// call chains; perf report reads every one. The loop runs for an amount of
// CPU time, not of wall time, which a busy machine would thin out.
func TestBusyLoop(t *testing.T) {
	for _, tc := range []struct {
		hz        int
		callGraph CallGraph
	}{{999, NoCallGraph}, {4000, FramePointers}} {
		t.Run(fmt.Sprintf("%dHz/g=%v", tc.hz, tc.callGraph != NoCallGraph), func(t *testing.T) {
			var out bytes.Buffer
			o := spinCommand(t, 1)
			o.Freq, o.CallGraph, o.Stdout = tc.hz, tc.callGraph, &out
			res, data := record(t, o)
			checkRate(t, res, data, tc.hz, spinTruth(t, out.Bytes(), 1))
			if res.Lost != 0 {
				t.Errorf("%d samples lost", res.Lost)
			}
			counts, total := fixtures.SymbolCounts(t, data, "-g", "none")
			if uint64(total) != res.Samples {
				t.Errorf("perf report counts %d samples, the recording has %d: %v", total, res.Samples, counts)
			}
		})
	}
}

// TestThreads: the samples of a multi-threaded workload spread over its
// threads as their CPU time does, as the kernel accounted it per thread.
// The threads spin for different amounts of CPU time, so that an even
// spread would fail. The Go runtime's threads are left out, as checkRate
// says why (measured: one with 4 to 5% of the CPU time had 1 to 2.5% of the
// samples).
func TestThreads(t *testing.T) {
	const threads, hz = 4, 4000
	var out bytes.Buffer
	o := spinCommand(t, threads)
	o.Freq, o.Stdout = hz, &out
	res, data := record(t, o)
	cpu := spinTruth(t, out.Bytes(), threads)
	perTid := checkRate(t, res, data, hz, cpu)
	for tid := range perTid {
		if _, spun := cpu[tid]; !spun {
			delete(perTid, tid)
		}
	}
	fixtures.CheckCPUShares(t, "samples per thread", cpu, perTid)
}

// TestTestJIT records the test JIT, which moves a function and gives one
// address to three functions in turn: perf report reads every sample, and
// after perf inject --jit, perf report and jitprof report give each function
// its share of the CPU time.
func TestTestJIT(t *testing.T) {
	const hz = 4000
	bin := fixtures.BuildTestJIT(t)
	dir := t.TempDir()
	var out bytes.Buffer
	res, data := record(t, Options{Freq: hz, Output: filepath.Join(dir, "perf.data"), Stdout: &out,
		Command: []string{bin, "-dir", dir, "-duration", "2s"}})
	tr := fixtures.ParseJITTruth(t, out.Bytes())
	checkRate(t, res, data, hz, map[uint32]int64{tr.Thread.Tid: tr.Thread.CPUNanos})

	// jitprof's reading first: perf's, after it, is skipped under -short.
	ar := analyzeRecording(t, data)
	if ar.Kept != int(res.Samples) {
		t.Errorf("jitprof report reads %d samples of %d", ar.Kept, res.Samples)
	}
	fixtures.CheckShares(t, tr, "jitprof report", fixtures.LeafCounts(ar.Profile.PProf()))

	if _, total := fixtures.SymbolCounts(t, data, "-g", "none"); uint64(total) != res.Samples {
		t.Errorf("perf report reads %d samples of %d", total, res.Samples)
	}
	injected, _ := fixtures.SymbolCounts(t, fixtures.Inject(t, fixtures.Recording{PerfData: data}), "-g", "none")
	fixtures.CheckShares(t, tr, "perf inject + perf report", injected)
}

// analyzeRecording is what jitprof report makes of a recording.
func analyzeRecording(t *testing.T, data string) *perfprof.Result {
	t.Helper()
	o := perfprof.Options{Input: data}
	o.Warn = func(err error) { t.Logf("warning: %v", err) }
	res, err := perfprof.Run(o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRuntimesWithoutFlags records node, Erlang and CPython 3.13 with no
// runtime flag on their command lines: the environment makes them write
// dumps, and jitprof report names their jitted functions from them.
func TestRuntimesWithoutFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		hz   int
		argv func(t *testing.T, dir string) []string
	}{
		{"node", 4000, func(t *testing.T, dir string) []string {
			return []string{fixtures.LookPath(t, "node"), fixtures.Workload(t, "newfunctions.js")}
		}},
		{"erlang", 4000, func(t *testing.T, dir string) []string {
			erlc := fixtures.LookPath(t, "erlc")
			if out, err := exec.Command(erlc, "-o", dir, fixtures.Workload(t, "w.erl")).CombinedOutput(); err != nil {
				t.Fatalf("erlc: %v\n%s", err, out)
			}
			return []string{fixtures.LookPath(t, "erl"), "-noshell", "-boot", "no_dot_erlang", "-pa", dir, "-s", "w", "main"}
		}},
		// lli's only jitdump-writing JIT is MCJIT, which is no profiling
		// flag; its dump goes under $JITDUMPDIR, the output's directory.
		{"llvm", 4000, func(t *testing.T, dir string) []string {
			ll := filepath.Join(dir, "fib_sq.ll")
			if out, err := exec.Command(fixtures.LookPath(t, "clang-14"), "-g", "-S", "-emit-llvm", "-o", ll, fixtures.Workload(t, "fib_sq.c")).CombinedOutput(); err != nil {
				t.Fatalf("clang: %v\n%s", err, out)
			}
			return []string{fixtures.LookPath(t, "lli-14"), "--jit-kind=mcjit", ll}
		}},
		// CPython's jitted code is trampolines of a few instructions.
		{"python", 50000, func(t *testing.T, dir string) []string {
			return []string{fixtures.Python313(t), fixtures.Workload(t, "fib_sq.py")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			argv := tc.argv(t, dir)
			data := filepath.Join(dir, "perf.data")
			// In dir: node writes its dump in the working directory.
			t.Chdir(dir)
			res, _ := record(t, Options{Freq: tc.hz, Output: data, RuntimeEnv: true, Command: argv})
			fixtures.RemoveTmpJITFiles(t, data)
			if res.ExitCode != 0 {
				t.Fatalf("%s exited with status %d", argv[0], res.ExitCode)
			}
			ar := analyzeRecording(t, data)
			if tc.name == "llvm" {
				for _, d := range ar.Dumps {
					if !strings.HasPrefix(d, filepath.Join(dir, ".debug", "jit")+"/") {
						t.Errorf("dump %s is not under JITDUMPDIR=%s", d, dir)
					}
				}
			}
			// Named from a dump: in the dump's code, by a name it gives.
			// (By name alone, lli's own main, which a sample can hit,
			// would count as the workload's.)
			jitted := fixtures.JITNames(t, ar.Dumps)
			named := int64(0)
			for _, s := range ar.Profile.PProf().Sample {
				l := s.Location[0]
				if l.Mapping != nil && slices.Contains(ar.Dumps, l.Mapping.File) && len(l.Line) > 0 && jitted[contract.PerfName(l.Line[len(l.Line)-1].Function)] {
					named += s.Value[0]
				}
			}
			t.Logf("%d samples, %d in jitted code of %d dumps, %d named from them", ar.Kept, ar.Jitted, len(ar.Dumps), named)
			if named == 0 || named != int64(ar.Jitted) {
				t.Errorf("jitted code not named")
			}
		})
	}
}

// nodeSpin is a node program that keeps calling JavaScript functions and
// builtins for about four seconds.
const nodeSpin = `
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
const end = Date.now() + 4000;
let acc = 0;
while (Date.now() < end) {
	const a = [5, 3, 1, 4].map(x => x * 2).sort();
	acc += fib(15) + JSON.stringify({acc, a}).length + "abc".repeat(3).indexOf("ca");
}
console.log(acc);
`

// TestAttachNode records a node process that is already running, for one
// second: its JavaScript functions are named, from its dump when node was
// started with --perf-prof and from its perf map with --perf-basic-prof,
// and its builtins too, as perf names them after perf inject --jit (those
// embedded in node's executable by its symbols, Builtins_*; the others
// from the dump, Builtin:*).
func TestAttachNode(t *testing.T) {
	for _, flag := range []string{"--perf-prof", "--perf-basic-prof"} {
		t.Run(flag, func(t *testing.T) {
			dir := t.TempDir()
			node := exec.Command(fixtures.LookPath(t, "node"), flag, "--interpreted-frames-native-stack", "-e", nodeSpin)
			node.Dir = dir
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			pid := node.Process.Pid
			t.Cleanup(func() {
				node.Process.Kill()
				node.Wait()
				os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
			})
			// Let it compile what it runs.
			time.Sleep(700 * time.Millisecond)
			data := filepath.Join(dir, "perf.data")
			res, _ := record(t, Options{Freq: 999, Output: data, Pids: []int{pid}, Duration: time.Second})
			if res.Samples < 100 {
				t.Errorf("%d samples in a second of a busy node", res.Samples)
			}
			// A running node goes on adding to its dump and map: jitprof and
			// perf, reading them at different times, would name its latest
			// functions differently.
			node.Process.Kill()
			node.Wait()
			got := fixtures.LeafCounts(analyzeRecording(t, data).Profile.PProf())
			js, builtins := 0, 0
			for name, n := range got {
				switch {
				case strings.HasPrefix(name, "JS:"):
					js += n
				case strings.HasPrefix(name, "Builtin:"), strings.HasPrefix(name, "Builtins_"):
					builtins += n
				}
			}
			t.Logf("%d samples in JS: functions, %d in builtins", js, builtins)
			if js < int(res.Samples)/2 || builtins == 0 {
				t.Errorf("JavaScript and builtins not named")
			}

			perfData := data
			if flag == "--perf-prof" {
				perfData = fixtures.Inject(t, fixtures.Recording{PerfData: data})
			}
			want, total := fixtures.SymbolCounts(t, perfData, "-g", "none")
			for name, n := range want {
				// LeafCounts counts the vDSO as unnamed (perf usually
				// cannot name it); perf names it in this recording.
				if strings.HasPrefix(name, "0x") || strings.HasPrefix(name, "__vdso_") {
					want["[unknown]"] += n
					delete(want, name)
				}
			}
			if d := fixtures.Differ(want, got); float64(d) > 0.005*float64(total) {
				t.Errorf("%d of %d samples named differently from perf", d, total)
				for name, n := range want {
					if got[name] != n {
						t.Logf("  %q: perf %d, jitprof %d", name, n, got[name])
					}
				}
				for name, n := range got {
					if _, ok := want[name]; !ok {
						t.Logf("  %q: perf 0, jitprof %d", name, n)
					}
				}
			}
		})
	}
}

// TestAllCPUs records every CPU while a busy loop runs: its samples are
// there, under the name it had before recording began, from /proc, and they
// are the frequency times the CPU time the kernel gave the loop while it
// was recorded, whatever part of a CPU a busy machine leaves it.
func TestAllCPUs(t *testing.T) {
	const hz = 999
	busy := exec.Command("sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		busy.Process.Kill()
		busy.Wait()
	})
	cpus, err := onlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	// The loop's CPU time is read from its process CPU clock, once Run has
	// an event open on every CPU, and again once it has had busyCPU more;
	// then the recording ends.
	const busyCPU = 300 * time.Millisecond
	type reading struct{ at, cpu time.Duration } // CLOCK_MONOTONIC, the loop's CPU time
	read := func() reading {
		var mono, cpu unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
		unix.ClockGettime(int32(^busy.Process.Pid<<3|2), &cpu) // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)
		return reading{time.Duration(mono.Nano()), time.Duration(cpu.Nano())}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var from, to reading
	readings := make(chan struct{})
	go func() {
		defer close(readings)
		defer cancel()
		for perfEventFDs() < len(cpus) {
			if ctx.Err() != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
		from = read()
		for to = from; to.cpu-from.cpu < busyCPU && ctx.Err() == nil; to = read() {
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, data := recordUntil(ctx, t, Options{Freq: hz, AllCPUs: true})
	<-readings
	if to.cpu-from.cpu < busyCPU {
		t.Fatalf("the busy loop ran %v of CPU time while recorded (%+v to %+v)", to.cpu-from.cpu, from, to)
	}
	f, err := perfdata.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pid := uint32(busy.Process.Pid)
	var samples int
	comm := ""
	for {
		rec, err := f.Next()
		if err != nil {
			break
		}
		switch r := rec.(type) {
		case *perfdata.Sample:
			if at := time.Duration(r.Time); r.Pid == pid && at >= from.at && at <= to.at {
				samples++
			}
		case *perfdata.Comm:
			if r.Pid == pid && r.Trailer.Time == 0 {
				comm = r.Comm
			}
		}
	}
	// Within five standard deviations of a Poisson count, and a point.
	want := hz * (to.cpu - from.cpu).Seconds()
	tol := 5*math.Sqrt(want) + 0.01*want
	t.Logf("%d of %d samples in the busy loop while it ran %v of CPU time: %.0f±%.0f expected; named %q",
		samples, res.Samples, to.cpu-from.cpu, want, tol, comm)
	if math.Abs(float64(samples)-want) > tol || comm != "sh" {
		t.Errorf("the busy loop: %d samples for %v of CPU time at %d Hz, synthesized name %q", samples, to.cpu-from.cpu, hz, comm)
	}
}

// perfEventFDs counts this process's perf_event file descriptors: Run's
// events, once open.
func perfEventFDs() int {
	fds, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == "anon_inode:[perf_event]" {
			n++
		}
	}
	return n
}

// TestInterrupt: Ctrl-C (ctx done) ends the recording of a command that
// would run forever with a complete file, and ends the command.
func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	out := filepath.Join(t.TempDir(), "perf.data")
	res, err := Run(ctx, Options{Output: out, Freq: 999, Command: []string{"sh", "-c", "while :; do :; done"}, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples == 0 || res.ExitCode != -1 {
		t.Errorf("%d samples, exit code %d: want samples, and the command ended by a signal", res.Samples, res.ExitCode)
	}
	if _, total := fixtures.SymbolCounts(t, out, "-g", "none"); uint64(total) != res.Samples {
		t.Errorf("perf report reads %d samples of %d", total, res.Samples)
	}
}

// TestErrors: what a user can act on is said.
func TestErrors(t *testing.T) {
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
		is   error
	}{
		{name: "no such command", o: Options{Command: []string{"no-such-command-jitprof"}}, want: "no-such-command-jitprof"},
		{name: "pid gone", o: Options{Pids: []int{exited.Process.Pid}}, is: ErrGone},
		{name: "two targets", o: Options{Command: []string{"true"}, AllCPUs: true}, want: "exactly one"},
		{name: "frequency too high", o: Options{Command: []string{"true"}, Freq: 1 << 30}, want: "perf_event_max_sample_rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Output = filepath.Join(t.TempDir(), "perf.data")
			if o.Freq == 0 {
				o.Freq = 999
			}
			_, err := Run(context.Background(), o)
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			t.Log(err)
			if _, err := os.Stat(o.Output); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed recording left %s: %v", o.Output, err)
			}
		})
	}
}

// TestDWARFCallGraph records a C program built without frame pointers
// whose hot code is qsort's comparison callback, called from glibc's
// qsort, called from main: with --call-graph dwarf, perf unwinds jitprof's
// recording from cmp through qsort to main for nearly every sample in cmp;
// with frame pointers, the control, it cannot, nor with copies of 256
// bytes of stack, which the stack fills before main (record checks the
// samples' registers and stack copies).
func TestDWARFCallGraph(t *testing.T) {
	bin := fixtures.BuildC(t, "qsort_cmp.c", "-O2", "-fomit-frame-pointer")
	for _, tc := range []struct {
		cg        CallGraph
		stack     uint32
		unwound   float64 // the least share of cmp's samples that reach main through qsort
		fewerThan float64 // the share they must stay under
		full      float64 // the least share of samples whose stack copy was full
	}{
		{cg: DWARF, unwound: 0.9, fewerThan: 1.01},
		{cg: FramePointers, fewerThan: 0.1},
		{cg: DWARF, stack: 256, fewerThan: 0.1, full: 0.9},
	} {
		t.Run(fmt.Sprintf("call graph %d, stack %d", tc.cg, tc.stack), func(t *testing.T) {
			res, data := record(t, Options{Freq: 4000, CallGraph: tc.cg, StackSize: tc.stack, Command: []string{bin, "1000"}})
			st, err := os.Stat(data)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d samples, %.1f MB, %.0f bytes a sample, %d stack copies full", res.Samples, float64(st.Size())/1e6,
				float64(st.Size())/float64(res.Samples), res.FullStacks)
			cmp, unwound := unwoundToMain(t, data)
			share := float64(unwound) / float64(max(cmp, 1))
			t.Logf("perf script: %d samples in cmp, %d of them unwound to main through qsort (%.3f)", cmp, unwound, share)
			if cmp < int(res.Samples)/5 || share < tc.unwound || share >= tc.fewerThan {
				t.Errorf("%d of %d samples in cmp unwound to main: want a share in [%.2f, %.2f)", unwound, cmp, tc.unwound, tc.fewerThan)
			}
			if _, total := fixtures.SymbolCounts(t, data, "-g", "none"); uint64(total) != res.Samples {
				t.Errorf("perf report reads %d samples of %d", total, res.Samples)
			}
			if float64(res.FullStacks) < tc.full*float64(res.Samples) {
				t.Errorf("%d of %d samples filled their stack copies: want %.0f%% at least", res.FullStacks, res.Samples, 100*tc.full)
			}
		})
	}
}

// unwoundToMain counts, in perf script's call chains of the recording, the
// samples in cmp and those whose chain goes on through qsort to main.
func unwoundToMain(t *testing.T, data string) (cmp, unwound int) {
	t.Helper()
	out := fixtures.Perf(t, "script", "--no-inline", "-F", "ip,sym", "-i", data)
	for _, block := range strings.Split(string(out), "\n\n") {
		var syms []string
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				syms = append(syms, f[1])
			}
		}
		if len(syms) == 0 || syms[0] != "cmp" {
			continue
		}
		cmp++
		q := slices.IndexFunc(syms, func(s string) bool { return strings.Contains(s, "qsort") })
		if q > 0 && slices.Contains(syms[q:], "main") {
			unwound++
		}
	}
	return cmp, unwound
}
