package jit

import "github.com/jitprof/jitprof/jitdump"

// The amd64 convention, which the trampolines in call_amd64.s follow:
//
//   - a kernel takes n in RCX, counts it down in place, accumulates in RAX
//     and returns RAX;
//   - the driver takes the kernel's address in RDX, n in RSI and the number
//     of calls in RDI, and sums the results in RBX.
//
// Between them they clobber only registers that Go's ABI0 assembly need not
// preserve. The register numbers are the ModRM encoding's (0 RAX ... 7 RDI),
// all below 8, so no instruction needs REX.R or REX.B.
const (
	regResult = 0 // RAX
	regAcc    = 0 // RAX
	regN      = 1 // RCX
	regKernel = 2 // RDX
	regSum    = 3 // RBX
	// the driver's copy of n, since each kernel call counts RCX down
	regDriverN = 6 // RSI
	regCalls   = 7 // RDI
)

// Call frame information: DWARF numbers RSP 7, RBP 6 and the return address
// 16. At entry the CFA, the stack pointer before the call, is RSP+8 and the
// return address is just below it; push rbp saves RBP 16 below the CFA.
const (
	codeAlign  = 1
	entryCFA   = 8
	regSPDwarf = 7
	regFPDwarf = 6
	regRADwarf = 16
)

var (
	entryRules = jitdump.CFAProgram{}.DefCFA(regSPDwarf, entryCFA).Offset(regRADwarf, 1)
	frameSaves = []frameSave{{reg: regFPDwarf, slot: 2}}
)

var trap = []byte{0xcc} // int3

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

// enter builds the frame, if any: push rbp; mov rbp, rsp.
func (a *asm) enter() {
	if !a.withFrame {
		return
	}
	a.emit(0x55)
	a.frame.saved = len(a.code)
	a.emit(0x48, 0x89, 0xe5)
	a.frame.set = len(a.code)
}

// leave drops the frame, if any, and returns: pop rbp; ret.
func (a *asm) leave() {
	if !a.withFrame {
		a.emit(0xc3)
		return
	}
	a.emit(0x5d)
	a.frame.restored = len(a.code)
	a.emit(0xc3)
}

// modrm is the register-direct ModRM byte of an instruction on reg and rm.
func modrm(reg, rm byte) byte { return 0xc0 | reg<<3 | rm }

func (a *asm) zero(r byte)           { a.emit(0x31, modrm(r, r)) }              // xor r32, r32
func (a *asm) mov(dst, src byte)     { a.emit(0x48, 0x89, modrm(src, dst)) }    // mov dst, src
func (a *asm) add(dst, src byte)     { a.emit(0x48, 0x01, modrm(src, dst)) }    // add dst, src
func (a *asm) xor(dst, src byte)     { a.emit(0x48, 0x31, modrm(src, dst)) }    // xor dst, src
func (a *asm) addImm(dst, imm uint8) { a.emit(0x48, 0x83, modrm(0, dst), imm) } // add dst, imm8
func (a *asm) call(r byte)           { a.emit(0xff, modrm(2, r)) }              // call r
func (a *asm) nop()                  { a.emit(0x90) }                           // nop

// skipIfZero branches forward, to where patchSkip is called, when r is 0.
// It returns the branch's offset.
func (a *asm) skipIfZero(r byte) int {
	a.emit(0x48, 0x85, modrm(r, r)) // test r, r
	a.emit(0x74, 0)                 // jz, patched
	return len(a.code) - 2
}

func (a *asm) patchSkip(at int) { a.code[at+1] = rel8(len(a.code) - (at + 2)) }

// loopBack counts r down and branches to top while it is not 0.
func (a *asm) loopBack(r byte, top int) {
	a.emit(0x48, 0xff, modrm(1, r))         // dec r
	a.emit(0x75, rel8(top-(len(a.code)+2))) // jnz top
}

// rel8 encodes a short branch displacement; loop bodies are a few bytes.
func rel8(d int) byte {
	if d < -128 || d > 127 {
		panic("minijit: loop body too long for a short branch")
	}
	return byte(int8(d))
}

// syncICache has nothing to do: x86 keeps instruction fetch coherent with
// stores to code.
func syncICache([]byte) {}
