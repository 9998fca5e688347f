package testjit

// The amd64 convention: Call passes n in RCX and takes the result from RAX.
// The code clobbers only RAX, RCX and the flags, which Go's ABI0 assembly
// does not expect preserved.

var trap = []byte{0xcc} // int3

func (a *asm) emit(b ...byte) { a.code = append(a.code, b...) }

func (a *asm) prologue() {
	a.emit(0x31, 0xc0)       // xor eax, eax
	a.emit(0x48, 0x85, 0xc9) // test rcx, rcx
	a.skip = len(a.code)
	a.emit(0x74, 0) // jz to the epilogue
}

func (a *asm) op(op Op) {
	switch op.Kind {
	case AddImm:
		a.emit(0x48, 0x83, 0xc0, op.Imm) // add rax, imm8
	case AddCounter:
		a.emit(0x48, 0x01, 0xc8) // add rax, rcx
	case XorCounter:
		a.emit(0x48, 0x31, 0xc8) // xor rax, rcx
	case Nop:
		a.emit(0x90)
	}
}

func (a *asm) loop(top int) {
	a.emit(0x48, 0xff, 0xc9)                // dec rcx
	a.emit(0x75, rel8(top-(len(a.code)+2))) // jnz top
}

func (a *asm) epilogue() {
	a.code[a.skip+1] = rel8(len(a.code) - (a.skip + 2))
	a.emit(0xc3) // ret
}

// rel8 encodes a short branch displacement; kernel bodies are a few bytes.
func rel8(d int) byte {
	if d < -128 || d > 127 {
		panic("testjit: loop body too long for a short branch")
	}
	return byte(int8(d))
}

// syncICache has nothing to do: x86 keeps instruction fetch coherent with
// stores to code.
func syncICache([]byte) {}
