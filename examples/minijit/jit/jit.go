//go:build amd64 || arm64

// Package jit is the code generator of minijit, a small just-in-time
// compiler that shows how a runtime describes its code to profilers with the
// jitdump package. It assembles counting loops ("kernels") and a "driver"
// that calls a kernel repeatedly into executable memory, and runs them from
// Go.
//
// By default every generated function builds a frame (push rbp; mov rbp, rsp
// on amd64, stp x29, x30 on arm64), so that frame-pointer call chains (perf
// record -g) pass through it, and comes with call frame information saying
// so, so that DWARF call chains (perf record --call-graph dwarf) do too.
// Frameless code (amd64 only) builds none, as optimizing JITs often do:
// then only the call frame information leads to the caller.
//
// Only amd64 and arm64 are supported: each needs its own instruction
// encoder and call trampoline.
package jit

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/jitdump"
)

// Frame says whether generated code builds a frame.
type Frame bool

const (
	WithFrame Frame = true
	// Frameless code leaves the frame pointer alone, so that a
	// frame-pointer walk from it skips its caller.
	Frameless Frame = false
)

// Source is the pseudo source file the generated code's line tables name.
const Source = "minijit.src"

// Op is one instruction of a loop body, acting on an accumulator and the
// loop counter.
type Op struct {
	Kind OpKind
	Imm  uint8 // for AddImm; below 128, which every encoding takes as an immediate
}

// OpKind is what an Op does.
type OpKind uint8

const (
	AddImm     OpKind = iota // acc += Imm
	AddCounter               // acc += counter
	XorCounter               // acc ^= counter
	Nop
)

// Kernel is a function the JIT compiles: func(n uint64) uint64 that zeroes
// an accumulator, runs Body n times with the counter going from n down to 1,
// and returns the accumulator.
type Kernel struct {
	Name string
	Line uint32 // its first line in Source
	Body []Op
}

// The kernels have different bodies, so their code, per-iteration cost and
// build-ids differ.
var (
	LoopA = Kernel{Name: "jit:loop_a", Line: 10, Body: []Op{{AddImm, 1}}}
	LoopB = Kernel{Name: "jit:loop_b", Line: 20, Body: []Op{{AddCounter, 0}, {XorCounter, 0}}}
	LoopC = Kernel{Name: "jit:loop_c", Line: 30, Body: []Op{{AddCounter, 0}, {XorCounter, 0}, {AddImm, 7}, {Nop, 0}, {Nop, 0}}}
	LoopD = Kernel{Name: "jit:loop_d", Line: 40, Body: []Op{{XorCounter, 0}, {AddImm, 3}}}
	LoopE = Kernel{Name: "jit:loop_e", Line: 50, Body: []Op{{AddImm, 5}, {AddCounter, 0}, {Nop, 0}}}
)

// DriverName is the name of the function CompileDriver makes, and
// DriverLine its first line in Source.
const (
	DriverName        = "jit:driver"
	DriverLine uint32 = 60
)

// Eval computes in Go what the kernel's machine code returns.
func (k *Kernel) Eval(n uint64) uint64 {
	var acc uint64
	for i := n; i > 0; i-- {
		for _, op := range k.Body {
			switch op.Kind {
			case AddImm:
				acc += uint64(op.Imm)
			case AddCounter:
				acc += i
			case XorCounter:
				acc ^= i
			}
		}
	}
	return acc
}

// Code is a function's machine code and what a profiler needs to know about
// it besides: its line table and its frame.
type Code struct {
	Bytes []byte
	lines []lineAt
	frame frameAt // zero when frameless
}

// lineAt says the instructions from Off on come from Line of Source.
type lineAt struct {
	Off  int
	Line uint32
}

// frameAt is where the function's frame changes: the offsets just after
// the return address and frame pointer are saved, after the frame pointer
// is set, and after they are restored.
type frameAt struct{ saved, set, restored int }

// Compile assembles the kernel for this host. The line table gives the
// prologue the kernel's first line, each body op a line of its own, then the
// loop branch and the epilogue, so a profile by line shows which part ran.
func (k *Kernel) Compile(fr Frame) *Code {
	a := asm{line: k.Line, withFrame: bool(fr)}
	a.mark()
	a.enter()
	a.zero(regAcc)
	skip := a.skipIfZero(regN)
	top := len(a.code)
	for _, op := range k.Body {
		a.mark()
		switch op.Kind {
		case AddImm:
			a.addImm(regAcc, op.Imm)
		case AddCounter:
			a.add(regAcc, regN)
		case XorCounter:
			a.xor(regAcc, regN)
		case Nop:
			a.nop()
		}
	}
	a.mark()
	a.loopBack(regN, top)
	a.mark()
	a.patchSkip(skip)
	if regResult != regAcc {
		a.mov(regResult, regAcc)
	}
	a.leave()
	return a.finish()
}

// CompileDriver assembles the driver: func(kernel, n, calls uint64) uint64,
// which calls the kernel at address kernel calls times with argument n and
// returns the sum of the results. Through it, profiles show jitted code
// calling jitted code. Its own work, a few instructions per call, is
// negligible next to a kernel's thousands of iterations, so the time spent
// in it is all but entirely its callees'.
func CompileDriver(fr Frame) *Code {
	a := asm{line: DriverLine, withFrame: bool(fr)}
	a.mark()
	a.enter()
	a.zero(regSum)
	skip := a.skipIfZero(regCalls)
	top := len(a.code)
	a.mark()
	a.mov(regN, regDriverN)
	a.call(regKernel)
	a.add(regSum, regResult)
	a.mark()
	a.loopBack(regCalls, top)
	a.mark()
	a.patchSkip(skip)
	a.mov(regResult, regSum)
	a.leave()
	return a.finish()
}

// asm collects code; the per-architecture files give it the instructions.
type asm struct {
	code  []byte
	lines []lineAt
	line  uint32 // the next line mark gives
	frame frameAt
	// withFrame makes enter and leave build and drop a frame; without,
	// leave only returns.
	withFrame bool
}

// mark starts the next source line at the current offset.
func (a *asm) mark() {
	a.lines = append(a.lines, lineAt{len(a.code), a.line})
	a.line++
}

func (a *asm) finish() *Code { return &Code{Bytes: a.code, lines: a.lines, frame: a.frame} }

// Lines returns the line table of the code placed at addr.
func (c *Code) Lines(addr uint64) []jitdump.DebugEntry {
	es := make([]jitdump.DebugEntry, len(c.lines))
	for i, l := range c.lines {
		es[i] = jitdump.DebugEntry{Addr: addr + uint64(l.Off), Line: l.Line, File: Source}
	}
	return es
}

// frameCFA is the CFA's offset from the stack pointer once the frame
// pointer is saved, which is also its offset from the frame pointer once
// that points at the save: 16 on both architectures (amd64's call pushed 8
// bytes and push rbp 8 more, arm64's stp 16).
const frameCFA = 16

// Unwinding returns the code's unwinding tables: at entry (and throughout
// frameless code) the caller's frame is found from the stack pointer; once the prologue has saved the
// frame pointer (and, on arm64, the return address) and pointed the frame
// pointer at them, from the frame pointer; after the epilogue has restored
// them, from the stack pointer again.
func (c *Code) Unwinding() (*jitdump.UnwindingInfo, error) {
	f := c.frame
	if f == (frameAt{}) {
		fi := jitdump.FrameInfo{CodeAlign: codeAlign, DataAlign: -8, ReturnAddress: regRADwarf, Initial: entryRules}
		return fi.UnwindingInfo(uint64(len(c.Bytes)))
	}
	p := jitdump.CFAProgram{}.AdvanceLoc(uint32(f.saved) / codeAlign).DefCFAOffset(frameCFA)
	for _, s := range frameSaves {
		p = p.Offset(s.reg, s.slot)
	}
	p = p.AdvanceLoc(uint32(f.set-f.saved) / codeAlign).DefCFARegister(regFPDwarf)
	p = p.AdvanceLoc(uint32(f.restored-f.set)/codeAlign).DefCFA(regSPDwarf, entryCFA)
	for _, s := range frameSaves {
		p = p.Restore(s.reg)
	}
	fi := jitdump.FrameInfo{CodeAlign: codeAlign, DataAlign: -8, ReturnAddress: regRADwarf, Initial: entryRules, Instructions: p}
	return fi.UnwindingInfo(uint64(len(c.Bytes)))
}

// frameSave is a register the prologue saves, slot*8 bytes below the CFA.
type frameSave struct{ reg, slot uint64 }

// Region is executable memory to place code in.
type Region struct {
	mem []byte
	// wx is set when the kernel refused a writable and executable mapping
	// (SELinux execmem, PaX): then the region is executable only and every
	// write flips it to writable and back.
	wx bool
}

// NewRegion maps size bytes of executable memory.
func NewRegion(size int) (*Region, error) {
	if r, err := mapRegion(size, false); err == nil {
		return r, nil
	}
	return mapRegion(size, true)
}

func mapRegion(size int, wx bool) (*Region, error) {
	prot := unix.PROT_READ | unix.PROT_EXEC
	if !wx {
		prot |= unix.PROT_WRITE
	}
	mem, err := unix.Mmap(-1, 0, size, prot, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("minijit: mapping %d bytes of code: %w", size, err)
	}
	return &Region{mem: mem, wx: wx}, nil
}

// Put copies code to offset off and returns its address.
func (r *Region) Put(off int, code []byte) (uint64, error) {
	if off < 0 || off+len(code) > len(r.mem) {
		return 0, fmt.Errorf("minijit: %d bytes at offset %d do not fit the %d-byte region", len(code), off, len(r.mem))
	}
	if r.wx {
		if err := unix.Mprotect(r.mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return 0, fmt.Errorf("minijit: making code writable: %w", err)
		}
	}
	dst := r.mem[off : off+len(code)]
	copy(dst, code)
	if r.wx {
		if err := unix.Mprotect(r.mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
			return 0, fmt.Errorf("minijit: making code executable: %w", err)
		}
	}
	syncICache(dst)
	return r.Addr(off), nil
}

// Copy copies n bytes of code from offset from to offset to and returns
// the new address, as a runtime moving a function does.
func (r *Region) Copy(from, to, n int) (uint64, error) {
	if from < 0 || from+n > len(r.mem) {
		return 0, fmt.Errorf("minijit: %d bytes at offset %d are outside the %d-byte region", n, from, len(r.mem))
	}
	return r.Put(to, slices.Clone(r.mem[from:from+n]))
}

// Free fills n bytes at off with trapping instructions, so a call to code
// that was moved away crashes instead of running stale code.
func (r *Region) Free(off, n int) error {
	fill := make([]byte, 0, n)
	for len(fill) < n {
		fill = append(fill, trap...)
	}
	_, err := r.Put(off, fill[:n])
	return err
}

// Addr returns the address of offset off.
func (r *Region) Addr(off int) uint64 {
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))) + uint64(off)
}

// Close unmaps the region; no code in it may run afterwards.
func (r *Region) Close() error {
	return unix.Munmap(r.mem)
}

// Call runs the kernel at fn with argument n and returns its result.
func Call(fn, n uint64) uint64

// Drive runs the driver at driver, which calls the kernel at kernel calls
// times with argument n, and returns the sum of the kernel's results.
func Drive(driver, kernel, n, calls uint64) uint64
