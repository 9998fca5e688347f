package testjit

import (
	"encoding/binary"
	"unsafe"
)

// The arm64 convention: Call passes n in X0 and takes the result from X0.
// The code uses X0 as the counter and X1 as the accumulator, both scratch
// registers for Go's ABI0 assembly.

var trap = binary.LittleEndian.AppendUint32(nil, 0xd4200000) // brk #0

func (a *asm) emit(insn uint32) { a.code = binary.LittleEndian.AppendUint32(a.code, insn) }

func (a *asm) prologue() {
	a.emit(0xd2800001) // mov x1, #0
	a.skip = len(a.code)
	a.emit(0xb4000000) // cbz x0 to the epilogue
}

func (a *asm) op(op Op) {
	switch op.Kind {
	case AddImm:
		a.emit(0x91000021 | uint32(op.Imm)<<10) // add x1, x1, #imm
	case AddCounter:
		a.emit(0x8b000021) // add x1, x1, x0
	case XorCounter:
		a.emit(0xca000021) // eor x1, x1, x0
	case Nop:
		a.emit(0xd503201f)
	}
}

func (a *asm) loop(top int) {
	a.emit(0xf1000400)                             // subs x0, x0, #1
	a.emit(0x54000001 | imm19(top-len(a.code))<<5) // b.ne top
}

func (a *asm) epilogue() {
	cbz := binary.LittleEndian.Uint32(a.code[a.skip:])
	binary.LittleEndian.PutUint32(a.code[a.skip:], cbz|imm19(len(a.code)-a.skip)<<5)
	a.emit(0xaa0103e0) // mov x0, x1
	a.emit(0xd65f03c0) // ret
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
