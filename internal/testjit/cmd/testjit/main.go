//go:build amd64 || arm64

// Command testjit is a tiny JIT runtime for testing profilers against known
// truth. It compiles four loops into executable memory, describes them in a
// jitdump, and runs them on a fixed schedule in three phases:
//
//   - initial: loop_a, loop_b and loop_c at their first addresses;
//   - moved: loop_b copied to a new address (a CODE_MOVE), its old code
//     replaced by traps;
//   - reused: loop_d loaded at loop_b's old address;
//   - reused again: loop_d freed, loop_e loaded in its place, so one
//     address held three functions.
//
// It then prints the truth as JSON: where and when each function ran in each
// phase and how much thread CPU time and how many iterations it got.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/testjit"
	"github.com/jitprof/jitprof/jitdump"
)

// Report is what the program prints.
type Report struct {
	Dump      string           `json:"dump"`
	Functions map[string]*Work `json:"functions"` // totals over all phases
	Phases    []*Phase         `json:"phases"`
}

// Phase says where each function lived while the phase ran, between Start
// and End on the jitdump's clock, so samples can be told apart by phase.
type Phase struct {
	Name      string       `json:"name"`
	Start     uint64       `json:"start_ns"`
	End       uint64       `json:"end_ns"`
	Functions []*Placement `json:"functions"`
}

// Placement is one function at one address for one phase.
type Placement struct {
	Name      string `json:"name"`
	Addr      uint64 `json:"addr"`
	Size      uint64 `json:"size"`
	CodeIndex uint64 `json:"code_index"`
	Work
}

// Work is how much a function ran. CPUNanos, the thread's CPU time inside
// its calls, is what a sampling profiler's shares should follow; Iterations
// is only proportional to it within one function.
type Work struct {
	Iterations uint64 `json:"iterations"`
	CPUNanos   int64  `json:"cpu_ns"`
}

// Slots are 64 bytes apart, more than the largest kernel.
const slot = 64

// chunk is the iterations per call: tens of microseconds, short enough that
// the goroutine, unpreemptible inside generated code, never holds up the
// garbage collector for long.
const chunk = 1 << 16

// quantum is a schedule weight's share of CPU time per round.
const quantum = 250 * time.Microsecond

type jit struct {
	w      *jitdump.Writer
	region *testjit.Region
}

// load places k at offset off and describes it in the dump.
func (j *jit) load(k *testjit.Kernel, off int) (*Placement, error) {
	code := k.Compile()
	if len(code.Bytes) > slot {
		return nil, fmt.Errorf("%s is %d bytes, more than a %d-byte slot", k.Name, len(code.Bytes), slot)
	}
	addr, err := j.region.Put(off, code.Bytes)
	if err != nil {
		return nil, err
	}
	index, err := j.w.Load(&jitdump.Function{Name: k.Name, Addr: addr, Code: code.Bytes, Lines: code.Lines(addr)})
	if err != nil {
		return nil, err
	}
	return &Placement{Name: k.Name, Addr: addr, Size: uint64(len(code.Bytes)), CodeIndex: index}, nil
}

// move copies the code of p from offset from to offset to, records the move,
// and fills the old place with traps.
func (j *jit) move(p *Placement, from, to int) (*Placement, error) {
	addr, err := j.region.Copy(from, to, int(p.Size))
	if err != nil {
		return nil, err
	}
	if err := j.w.Move(p.CodeIndex, p.Addr, addr, p.Size); err != nil {
		return nil, err
	}
	if err := j.region.Free(from, int(p.Size)); err != nil {
		return nil, err
	}
	return &Placement{Name: p.Name, Addr: addr, Size: p.Size, CodeIndex: p.CodeIndex}, nil
}

func main() {
	dir := flag.String("dir", "", "directory for jit-<pid>.dump (default: $JITDUMPDIR or ~/.debug/jit)")
	// CPU time rather than wall time, so that a busy machine stretches the
	// run instead of thinning the samples a profiler gets.
	duration := flag.Duration("duration", time.Second, "CPU time to run the schedule for")
	flag.Parse()
	if err := run(*dir, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "testjit:", err)
		os.Exit(1)
	}
}

func run(dir string, duration time.Duration) error {
	// Thread CPU time only measures the goroutine's work if it stays on
	// one thread.
	runtime.LockOSThread()

	region, err := testjit.NewRegion(os.Getpagesize())
	if err != nil {
		return err
	}
	defer region.Close()
	w, err := jitdump.Create(jitdump.Options{Dir: dir})
	if err != nil {
		return err
	}
	j := &jit{w: w, region: region}
	rep := &Report{Dump: w.Path(), Functions: map[string]*Work{}}

	a, err := j.load(&testjit.LoopA, 0*slot)
	if err != nil {
		return err
	}
	b, err := j.load(&testjit.LoopB, 1*slot)
	if err != nil {
		return err
	}
	c, err := j.load(&testjit.LoopC, 2*slot)
	if err != nil {
		return err
	}
	// Each phase's records reach the file before its code runs, as a live
	// reader of the dump needs.
	if err := w.Flush(); err != nil {
		return err
	}
	phase := duration / 4
	rep.run("initial", phase, []*Placement{a, b, c}, []int{4, 4, 2})

	b, err = j.move(b, 1*slot, 3*slot)
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	rep.run("moved", phase, []*Placement{a, b, c}, []int{4, 4, 2})

	d, err := j.load(&testjit.LoopD, 1*slot)
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	rep.run("reused", phase, []*Placement{a, b, c, d}, []int{4, 2, 2, 2})

	if err := region.Free(1*slot, int(d.Size)); err != nil {
		return err
	}
	e, err := j.load(&testjit.LoopE, 1*slot)
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	rep.run("reused again", duration-3*phase, []*Placement{a, b, c, e}, []int{2, 2, 2, 4})

	if err := w.Close(); err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	out.SetIndent("", "  ")
	return out.Encode(rep)
}

// run runs the placements round-robin for d of CPU time, each for its
// weight in quanta per round, and adds up the work.
func (rep *Report) run(name string, d time.Duration, ps []*Placement, weights []int) {
	ph := &Phase{Name: name}
	for _, p := range ps {
		q := *p
		ph.Functions = append(ph.Functions, &q)
	}
	rep.Phases = append(rep.Phases, ph)
	ph.Start = jitdump.Now()
	for end := threadCPU() + int64(d); threadCPU() < end; {
		for i, p := range ph.Functions {
			budget := int64(weights[i]) * int64(quantum)
			start := threadCPU()
			for threadCPU()-start < budget {
				testjit.Call(p.Addr, chunk)
				p.Iterations += chunk
			}
			p.CPUNanos += threadCPU() - start
		}
	}
	ph.End = jitdump.Now()
	for _, p := range ph.Functions {
		total := rep.Functions[p.Name]
		if total == nil {
			total = &Work{}
			rep.Functions[p.Name] = total
		}
		total.Iterations += p.Iterations
		total.CPUNanos += p.CPUNanos
	}
}

func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
