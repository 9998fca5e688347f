//go:build amd64 || arm64

// Command minijit is a tiny JIT runtime that shows how a runtime describes
// its generated code with the jitdump package, and that gives profilers a
// run whose truth is known. It compiles five loops and a driver that calls
// them into executable memory, describes each in a jitdump (its code, line
// table and unwinding tables), and runs them on a fixed schedule in four
// phases:
//
//   - initial: loop_a, loop_b and loop_c at their first addresses;
//   - moved: loop_b copied to a new address (a CODE_MOVE), its old code
//     replaced by traps;
//   - reused: loop_d loaded at loop_b's old address;
//   - reused again: loop_d freed, loop_e loaded in its place, so one
//     address held three functions.
//
// Go calls loop_a, loop_d and loop_e directly; loop_b and loop_c it calls
// through the jitted driver, so call chains hold jitted code below the top.
//
// It then prints the truth as JSON: where and when each function ran in each
// phase, how much thread CPU time and how many iterations it got, which
// jitted calls took how long, and the thread that ran it all with the CPU
// time the kernel gave that thread.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/examples/minijit/jit"
	"github.com/jitprof/jitprof/jitdump"
)

// Report is what the program prints.
type Report struct {
	Dump string `json:"dump"`
	// Functions are the kernels' totals over all phases. The driver is
	// not among them: see Placement.
	Functions map[string]*Work `json:"functions"`
	Calls     []*Arc           `json:"calls"` // totals over all phases
	Phases    []*Phase         `json:"phases"`
	// Thread ran everything: its samples are the program's work, which
	// its CPU time measures, where the process's also counts the Go
	// runtime's other threads.
	Thread Thread `json:"thread"`
}

// Thread is a thread's id and its whole CPU time, at the end of the run.
type Thread struct {
	Tid      int   `json:"tid"`
	CPUNanos int64 `json:"cpu_ns"`
}

// Phase says where each function lived while the phase ran, between Start
// and End on the jitdump's clock, so samples can be told apart by phase.
// Each phase is also a stage of the dump (jitdump.Writer.Stage) by its Name.
type Phase struct {
	Name      string       `json:"name"`
	Start     uint64       `json:"start_ns"`
	End       uint64       `json:"end_ns"`
	Functions []*Placement `json:"functions"`
	Calls     []*Arc       `json:"calls"`
}

// Placement is one function at one address for one phase. Size is the
// code's; the unwinding tables follow it in memory.
//
// The driver's Work is zero: its own instructions, a handful per call of a
// kernel that runs 65,536 iterations, take about 0.02% of the time and are
// not timed apart; the time of its calls is its callees', in Phase.Calls.
type Placement struct {
	Name      string `json:"name"`
	Addr      uint64 `json:"addr"`
	Size      uint64 `json:"size"`
	CodeIndex uint64 `json:"code_index"`
	// Caller is the jitted function that called this one in the phase, ""
	// when Go called it directly.
	Caller string `json:"caller,omitempty"`
	Work
}

// Work is how much a function ran. CPUNanos, the thread's CPU time inside
// its calls, is what a sampling profiler's shares should follow; Iterations
// is only proportional to it within one function.
type Work struct {
	Iterations uint64 `json:"iterations"`
	CPUNanos   int64  `json:"cpu_ns"`
}

// Arc is a jitted function calling another: how many calls, and the thread
// CPU time inside them.
type Arc struct {
	Caller   string `json:"caller"`
	Callee   string `json:"callee"`
	Calls    uint64 `json:"calls"`
	CPUNanos int64  `json:"cpu_ns"`
}

// Slots are 256 bytes apart, room for the largest function and its
// unwinding tables.
const slot = 256

// chunk is the iterations per kernel call: tens of microseconds, short
// enough that the goroutine, unpreemptible inside generated code, never
// holds up the garbage collector for long. callsPerDrive is the kernel
// calls the driver makes each time Go calls it.
const (
	chunk         = 1 << 16
	callsPerDrive = 2
)

// quantum is a schedule weight's share of CPU time per round.
const quantum = 250 * time.Microsecond

type runtimeState struct {
	w      *jitdump.Writer
	region *jit.Region
}

// load places code at offset off, its unwinding tables right after it, and
// describes it in the dump.
func (r *runtimeState) load(name string, code *jit.Code, off int) (*Placement, error) {
	unwind, err := code.Unwinding()
	if err != nil {
		return nil, err
	}
	// The tables go where perf's image will have them, so that the size
	// the record says is mapped is really this function's.
	tablesAt := (len(code.Bytes) + 7) &^ 7
	image := make([]byte, tablesAt, tablesAt+int(unwind.MappedSize))
	copy(image, code.Bytes)
	image = append(append(image, unwind.EHFrame...), unwind.EHFrameHdr...)
	if len(image) > slot {
		return nil, fmt.Errorf("%s with its unwinding tables is %d bytes, more than a %d-byte slot", name, len(image), slot)
	}
	addr, err := r.region.Put(off, image)
	if err != nil {
		return nil, err
	}
	index, err := r.w.Load(&jitdump.Function{Name: name, Addr: addr, Code: code.Bytes, Lines: code.Lines(addr), Unwind: unwind})
	if err != nil {
		return nil, err
	}
	return &Placement{Name: name, Addr: addr, Size: uint64(len(code.Bytes)), CodeIndex: index}, nil
}

// move copies the function of p, with its tables, from offset from to
// offset to, records the move, and fills the old place with traps.
func (r *runtimeState) move(p *Placement, from, to int) (*Placement, error) {
	addr, err := r.region.Copy(from, to, slot)
	if err != nil {
		return nil, err
	}
	if err := r.w.Move(p.CodeIndex, p.Addr, addr, p.Size); err != nil {
		return nil, err
	}
	if err := r.region.Free(from, slot); err != nil {
		return nil, err
	}
	return &Placement{Name: p.Name, Addr: addr, Size: p.Size, CodeIndex: p.CodeIndex}, nil
}

func main() {
	dir := flag.String("dir", "", "directory for jit-<pid>.dump (default: $JITDUMPDIR or ~/.debug/jit)")
	// CPU time rather than wall time, so that a busy machine stretches the
	// run instead of thinning the samples a profiler gets.
	duration := flag.Duration("duration", time.Second, "CPU time to run the schedule for")
	framePointers := flag.Bool("frame-pointers", true, "build a frame in each function; false (amd64 only) leaves only the unwinding tables to find callers by")
	flag.Parse()
	frame := jit.Frame(*framePointers)
	if frame == jit.Frameless && runtime.GOARCH != "amd64" {
		fmt.Fprintln(os.Stderr, "minijit: -frame-pointers=false is for amd64 only: on arm64 the frame also saves the return address the driver's calls overwrite")
		os.Exit(2)
	}
	if err := run(*dir, *duration, frame); err != nil {
		fmt.Fprintln(os.Stderr, "minijit:", err)
		os.Exit(1)
	}
}

func run(dir string, duration time.Duration, frame jit.Frame) error {
	// Thread CPU time only measures the goroutine's work if it stays on
	// one thread.
	runtime.LockOSThread()

	region, err := jit.NewRegion(os.Getpagesize())
	if err != nil {
		return err
	}
	defer region.Close()
	w, err := jitdump.Create(jitdump.Options{Dir: dir})
	if err != nil {
		return err
	}
	rt := &runtimeState{w: w, region: region}
	rep := &Report{Dump: w.Path(), Functions: map[string]*Work{}}

	a, err := rt.load(jit.LoopA.Name, jit.LoopA.Compile(frame), 0*slot)
	if err != nil {
		return err
	}
	b, err := rt.load(jit.LoopB.Name, jit.LoopB.Compile(frame), 1*slot)
	if err != nil {
		return err
	}
	c, err := rt.load(jit.LoopC.Name, jit.LoopC.Compile(frame), 2*slot)
	if err != nil {
		return err
	}
	driver, err := rt.load(jit.DriverName, jit.CompileDriver(frame), 4*slot)
	if err != nil {
		return err
	}
	b.Caller, c.Caller = driver.Name, driver.Name
	// Each phase is a stage of the dump, so a report can be limited to
	// one. Its records reach the file before its code runs, as a live
	// reader of the dump needs.
	runPhase := func(name string, d time.Duration, kernels []*Placement, weights []int) error {
		if err := w.Stage(name); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		rep.run(name, d, driver, kernels, weights)
		return nil
	}
	phase := duration / 4
	if err := runPhase("initial", phase, []*Placement{a, b, c}, []int{4, 4, 2}); err != nil {
		return err
	}

	if b, err = rt.move(b, 1*slot, 3*slot); err != nil {
		return err
	}
	b.Caller = driver.Name
	if err := runPhase("moved", phase, []*Placement{a, b, c}, []int{4, 4, 2}); err != nil {
		return err
	}

	d, err := rt.load(jit.LoopD.Name, jit.LoopD.Compile(frame), 1*slot)
	if err != nil {
		return err
	}
	if err := runPhase("reused", phase, []*Placement{a, b, c, d}, []int{4, 2, 2, 2}); err != nil {
		return err
	}

	if err := region.Free(1*slot, slot); err != nil {
		return err
	}
	e, err := rt.load(jit.LoopE.Name, jit.LoopE.Compile(frame), 1*slot)
	if err != nil {
		return err
	}
	if err := runPhase("reused again", duration-3*phase, []*Placement{a, b, c, e}, []int{2, 2, 2, 4}); err != nil {
		return err
	}

	if err := w.Close(); err != nil {
		return err
	}
	rep.Thread = Thread{Tid: unix.Gettid(), CPUNanos: threadCPU()}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

// run runs the kernels round-robin for d of CPU time, each for its weight
// in quanta per round, directly or through the driver as its Caller says,
// and adds up the work. The driver is listed last among the phase's
// functions, where it was loaded.
func (rep *Report) run(name string, d time.Duration, driver *Placement, kernels []*Placement, weights []int) {
	ph := &Phase{Name: name}
	arcs := map[string]*Arc{}
	for _, p := range append(kernels, driver) {
		q := *p
		ph.Functions = append(ph.Functions, &q)
		if q.Caller != "" {
			arcs[q.Name] = &Arc{Caller: q.Caller, Callee: q.Name}
			ph.Calls = append(ph.Calls, arcs[q.Name])
		}
	}
	rep.Phases = append(rep.Phases, ph)
	ph.Start = jitdump.Now()
	for end := threadCPU() + int64(d); threadCPU() < end; {
		for i, p := range ph.Functions[:len(kernels)] {
			budget := int64(weights[i]) * int64(quantum)
			start := threadCPU()
			for threadCPU()-start < budget {
				if arc := arcs[p.Name]; arc != nil {
					jit.Drive(driver.Addr, p.Addr, chunk, callsPerDrive)
					p.Iterations += callsPerDrive * chunk
					arc.Calls += callsPerDrive
				} else {
					jit.Call(p.Addr, chunk)
					p.Iterations += chunk
				}
			}
			p.CPUNanos += threadCPU() - start
			if arc := arcs[p.Name]; arc != nil {
				arc.CPUNanos = p.CPUNanos
			}
		}
	}
	ph.End = jitdump.Now()
	for _, p := range ph.Functions[:len(kernels)] {
		total := rep.Functions[p.Name]
		if total == nil {
			total = &Work{}
			rep.Functions[p.Name] = total
		}
		total.Iterations += p.Iterations
		total.CPUNanos += p.CPUNanos
	}
	for _, arc := range ph.Calls {
		rep.addCalls(arc)
	}
}

// addCalls adds a phase's arc to the run's totals.
func (rep *Report) addCalls(arc *Arc) {
	for _, t := range rep.Calls {
		if t.Caller == arc.Caller && t.Callee == arc.Callee {
			t.Calls += arc.Calls
			t.CPUNanos += arc.CPUNanos
			return
		}
	}
	total := *arc
	rep.Calls = append(rep.Calls, &total)
}

func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
