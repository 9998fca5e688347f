// Package disasm decodes machine code into instructions for people to read,
// so that code which exists in no file (what JIT compilers generate) can be
// shown as assembly, as objdump shows the code of files.
//
// It decodes x86-64, i386 and arm64 with golang.org/x/arch. Instructions
// start where objdump's do (the tests check it on code V8 generated), and
// their text is objdump's but for details that golang.org/x/arch keeps from
// older binutils: of the instructions in V8's code, 86% read exactly as
// objdump 2.40 prints them, the others differ in suffixes ("retq" where it
// now writes "ret") or in how numbers are written. Like objdump, Decode
// shows the absolute address of branch targets and of PC-relative memory
// operands, and the symbol holding that address when a Lookup knows one.
package disasm

import (
	"debug/elf"
	"fmt"
	"strings"

	"golang.org/x/arch/arm64/arm64asm"
	"golang.org/x/arch/x86/x86asm"
)

// Syntax selects how instructions are written.
type Syntax int

const (
	// GNU is the syntax of GNU objdump's default output: AT&T on x86.
	GNU Syntax = iota
	// Intel is Intel's syntax, as objdump -M intel prints it. Only x86 has
	// it; other machines are written in GNU syntax.
	Intel
)

func (s Syntax) String() string {
	if s == Intel {
		return "Intel"
	}
	return "GNU"
}

// Inst is one decoded instruction.
type Inst struct {
	Addr uint64
	Len  int // in bytes
	Text string
}

// badText is the Text of bytes that do not decode, as objdump writes it.
const badText = "(bad)"

// Lookup returns the name of the symbol holding addr and the address where
// that symbol starts, or an empty name when no symbol holds addr.
type Lookup func(addr uint64) (name string, base uint64)

// Decode decodes code, which starts at address addr, as instructions of the
// machine mach, in the given syntax. Branch targets are named by lookup,
// which may be nil.
//
// Bytes that do not decode become one instruction, of the smallest length
// the machine has (one byte on x86, four on arm64), with the text "(bad)",
// and decoding goes on after it: JIT code embeds data among instructions,
// and one bad byte must not hide the instructions that follow. On x86 this
// resynchronizes as objdump does.
//
// The error is only for a machine Decode does not know.
func Decode(mach elf.Machine, addr uint64, code []byte, syntax Syntax, lookup Lookup) ([]Inst, error) {
	switch mach {
	case elf.EM_X86_64:
		return decodeX86(64, addr, code, syntax, lookup), nil
	case elf.EM_386:
		return decodeX86(32, addr, code, syntax, lookup), nil
	case elf.EM_AARCH64:
		return decodeARM64(addr, code, lookup), nil
	}
	return nil, fmt.Errorf("disasm: cannot decode code of machine %v", mach)
}

func decodeX86(mode int, addr uint64, code []byte, syntax Syntax, lookup Lookup) []Inst {
	// Instructions average 4 bytes in V8's code and 3.9 in Go's.
	insts := make([]Inst, 0, len(code)/4+1)
	for off := 0; off < len(code); {
		pc := addr + uint64(off)
		inst, err := x86asm.Decode(code[off:], mode)
		// An instruction cut short by the end of the code decodes as its
		// first byte alone, with no opcode (x86asm writes "rex.w", or
		// "prefix(0x8b)" for a byte that is no prefix): nothing decoded.
		if err != nil || inst.Op == 0 {
			insts = append(insts, Inst{Addr: pc, Len: 1, Text: badText})
			off++
			continue
		}
		// x86asm's own symbol lookup replaces a target by its name only
		// when the target is the symbol's very start; objdump always writes
		// the address, then <name+offset>. So x86asm writes addresses and
		// the names are added here.
		var text string
		if syntax == Intel {
			text = x86asm.IntelSyntax(inst, pc, nil)
		} else {
			text = x86asm.GNUSyntax(inst, pc, nil)
		}
		text = annotateX86(text, inst, pc, lookup)
		insts = append(insts, Inst{Addr: pc, Len: inst.Len, Text: text})
		off += inst.Len
	}
	return insts
}

// annotateX86 adds to text what objdump adds: the symbol of a branch
// target, and the address (with its symbol) that a RIP-relative memory
// operand refers to, as a comment.
func annotateX86(text string, inst x86asm.Inst, pc uint64, lookup Lookup) string {
	next := pc + uint64(inst.Len)
	for _, a := range inst.Args {
		switch a := a.(type) {
		case x86asm.Rel:
			return text + symbolSuffix(next+uint64(int64(a)), lookup)
		case x86asm.Mem:
			if a.Base == x86asm.RIP {
				target := next + uint64(a.Disp)
				return fmt.Sprintf("%s # %#x%s", text, target, symbolSuffix(target, lookup))
			}
		}
	}
	return text
}

// symbolSuffix is objdump's " <name+0xoff>" for target, or "" when lookup
// knows no symbol there.
func symbolSuffix(target uint64, lookup Lookup) string {
	if lookup == nil {
		return ""
	}
	name, base := lookup(target)
	switch {
	case name == "":
		return ""
	case target == base:
		return " <" + name + ">"
	}
	return fmt.Sprintf(" <%s+%#x>", name, target-base)
}

func decodeARM64(addr uint64, code []byte, lookup Lookup) []Inst {
	insts := make([]Inst, 0, len(code)/4+1)
	for off := 0; off < len(code); off += 4 {
		pc := addr + uint64(off)
		n := min(4, len(code)-off)
		inst, err := arm64asm.Decode(code[off : off+n])
		if err != nil {
			insts = append(insts, Inst{Addr: pc, Len: n, Text: badText})
			continue
		}
		insts = append(insts, Inst{Addr: pc, Len: 4, Text: textARM64(inst, pc, lookup)})
	}
	return insts
}

// textARM64 writes inst in GNU syntax with its PC-relative operand, which
// arm64asm writes as an offset (".+0x10"), as objdump writes it: the
// absolute address and its symbol.
func textARM64(inst arm64asm.Inst, pc uint64, lookup Lookup) string {
	// arm64asm leaves a space after operand-less mnemonics ("nop ").
	text := strings.TrimSpace(arm64asm.GNUSyntax(inst))
	for _, a := range inst.Args {
		rel, ok := a.(arm64asm.PCRel)
		if !ok {
			continue
		}
		target := pc + uint64(rel)
		if inst.Op == arm64asm.ADRP {
			target = pc&^0xfff + uint64(rel)
		}
		abs := fmt.Sprintf("%#x", target)
		return strings.Replace(text, strings.ToLower(rel.String()), abs, 1) + symbolSuffix(target, lookup)
	}
	return text
}
