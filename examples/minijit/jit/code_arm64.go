package jit

import (
	"encoding/binary"
	"unsafe"

	"github.com/jitprof/jitprof/jitdump"
)

// The arm64 convention, which the trampolines in call_arm64.s follow:
//
//   - a kernel takes n in X0, counts it down in place, accumulates in X1
//     and returns X0;
//   - the driver takes the kernel's address in X2, n in X3 and the number
//     of calls in X4, and sums the results in X5.
//
// All are scratch registers for Go's ABI0 assembly. The frame saves X29 and
// X30, which the driver's calls overwrite.
const (
	regResult  = 0
	regN       = 0
	regAcc     = 1
	regKernel  = 2
	regDriverN = 3
	regCalls   = 4
	regSum     = 5
)

// Call frame information: DWARF numbers SP 31, X29 29, X30 30. At entry the
// CFA is SP itself and the return address is in X30; stp x29, x30 saves
// them 16 and 8 bytes below the CFA.
const (
	codeAlign  = 4
	entryCFA   = 0
	regSPDwarf = 31
	regFPDwarf = 29
	regRADwarf = 30
)

var (
	entryRules = jitdump.CFAProgram{}.DefCFA(regSPDwarf, entryCFA)
	frameSaves = []frameSave{{reg: regFPDwarf, slot: 2}, {reg: regRADwarf, slot: 1}}
)

var trap = binary.LittleEndian.AppendUint32(nil, 0xd4200000) // brk #0

func (a *asm) emit(insn uint32) { a.code = binary.LittleEndian.AppendUint32(a.code, insn) }

// enter builds the frame: stp x29, x30, [sp, #-16]!; mov x29, sp.
func (a *asm) enter() {
	a.emit(0xa9bf7bfd)
	a.frame.saved = len(a.code)
	a.emit(0x910003fd)
	a.frame.set = len(a.code)
}

// leave drops the frame and returns: ldp x29, x30, [sp], #16; ret.
func (a *asm) leave() {
	a.emit(0xa8c17bfd)
	a.frame.restored = len(a.code)
	a.emit(0xd65f03c0)
}

func (a *asm) zero(r uint32)                { a.emit(0xd2800000 | r) }                              // mov r, #0
func (a *asm) mov(dst, src uint32)          { a.emit(0xaa0003e0 | src<<16 | dst) }                  // mov dst, src
func (a *asm) add(dst, src uint32)          { a.emit(0x8b000000 | src<<16 | dst<<5 | dst) }         // add dst, dst, src
func (a *asm) xor(dst, src uint32)          { a.emit(0xca000000 | src<<16 | dst<<5 | dst) }         // eor dst, dst, src
func (a *asm) addImm(dst uint32, imm uint8) { a.emit(0x91000000 | uint32(imm)<<10 | dst<<5 | dst) } // add dst, dst, #imm
func (a *asm) call(r uint32)                { a.emit(0xd63f0000 | r<<5) }                           // blr r
func (a *asm) nop()                         { a.emit(0xd503201f) }

// skipIfZero branches forward, to where patchSkip is called, when r is 0.
// It returns the branch's offset.
func (a *asm) skipIfZero(r uint32) int {
	a.emit(0xb4000000 | r) // cbz r, patched
	return len(a.code) - 4
}

func (a *asm) patchSkip(at int) {
	cbz := binary.LittleEndian.Uint32(a.code[at:])
	binary.LittleEndian.PutUint32(a.code[at:], cbz|imm19(len(a.code)-at)<<5)
}

// loopBack counts r down and branches to top while it is not 0.
func (a *asm) loopBack(r uint32, top int) {
	a.emit(0xf1000400 | r<<5 | r)                  // subs r, r, #1
	a.emit(0x54000001 | imm19(top-len(a.code))<<5) // b.ne top
}

// imm19 encodes a conditional branch's displacement in instructions.
func imm19(d int) uint32 { return uint32(d/4) & (1<<19 - 1) }

// syncICache makes code just written visible to instruction fetch, which on
// arm64 is not coherent with stores.
func syncICache(code []byte) {
	if len(code) > 0 {
		flushICache(uintptr(unsafe.Pointer(&code[0])), uintptr(len(code)))
	}
}

func flushICache(addr, n uintptr)
