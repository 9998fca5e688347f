//go:build amd64 || arm64

// Package testjit is a minimal just-in-time compiler for testing profilers:
// it assembles small counting loops into executable memory, runs them from
// Go, and describes them in a jitdump like a real runtime would.
//
// Only amd64 and arm64 are supported: each needs its own encoder and call
// trampoline.
package testjit

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/jitdump"
)

// Source is the pseudo source file the generated code's line tables name.
const Source = "testjit.src"

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

// Code is a kernel's machine code.
type Code struct {
	Bytes []byte
	lines []lineAt
}

// lineAt says the instructions from Off on come from Line of Source.
type lineAt struct {
	Off  int
	Line uint32
}

// Compile assembles the kernel for this host. The line table gives the
// prologue the kernel's first line, each body op a line of its own, then the
// loop branch and the epilogue, so a profile by line shows which part ran.
func (k *Kernel) Compile() *Code {
	var a asm
	line := k.Line
	mark := func() {
		a.lines = append(a.lines, lineAt{len(a.code), line})
		line++
	}
	mark()
	a.prologue()
	top := len(a.code)
	for _, op := range k.Body {
		mark()
		a.op(op)
	}
	mark()
	a.loop(top)
	mark()
	a.epilogue()
	return &Code{Bytes: a.code, lines: a.lines}
}

// asm collects code; the per-architecture files give it prologue, op, loop
// and epilogue. The prologue's forward branch that skips the loop when n is 0
// is patched by epilogue.
type asm struct {
	code  []byte
	lines []lineAt
	skip  int // offset of the prologue's branch
}

// Lines returns the line table of the code placed at addr.
func (c *Code) Lines(addr uint64) []jitdump.DebugEntry {
	es := make([]jitdump.DebugEntry, len(c.lines))
	for i, l := range c.lines {
		es[i] = jitdump.DebugEntry{Addr: addr + uint64(l.Off), Line: l.Line, File: Source}
	}
	return es
}

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
		return nil, fmt.Errorf("testjit: mapping %d bytes of code: %w", size, err)
	}
	return &Region{mem: mem, wx: wx}, nil
}

// Put copies code to offset off and returns its address.
func (r *Region) Put(off int, code []byte) (uint64, error) {
	if off < 0 || off+len(code) > len(r.mem) {
		return 0, fmt.Errorf("testjit: %d bytes at offset %d do not fit the %d-byte region", len(code), off, len(r.mem))
	}
	if r.wx {
		if err := unix.Mprotect(r.mem, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return 0, fmt.Errorf("testjit: making code writable: %w", err)
		}
	}
	dst := r.mem[off : off+len(code)]
	copy(dst, code)
	if r.wx {
		if err := unix.Mprotect(r.mem, unix.PROT_READ|unix.PROT_EXEC); err != nil {
			return 0, fmt.Errorf("testjit: making code executable: %w", err)
		}
	}
	syncICache(dst)
	return r.Addr(off), nil
}

// Copy copies n bytes of code from offset from to offset to and returns
// the new address, as a runtime moving a function does.
func (r *Region) Copy(from, to, n int) (uint64, error) {
	if from < 0 || from+n > len(r.mem) {
		return 0, fmt.Errorf("testjit: %d bytes at offset %d are outside the %d-byte region", n, from, len(r.mem))
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

// Call runs the code at fn with argument n and returns its result. The code
// must follow this package's convention (see the per-architecture files).
func Call(fn, n uint64) uint64
