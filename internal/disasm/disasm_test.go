package disasm_test

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// lookup knows one symbol, "fn", at [0x1000, 0x1100).
func lookup(addr uint64) (string, uint64) {
	if addr >= 0x1000 && addr < 0x1100 {
		return "fn", 0x1000
	}
	return "", 0
}

func TestDecode(t *testing.T) {
	tests := []struct {
		mach   elf.Machine
		syntax disasm.Syntax
		code   []byte
		want   []string // "len text" per instruction
	}{
		// The usual x86-64 prologue and epilogue, in both syntaxes.
		{elf.EM_X86_64, disasm.GNU, []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
			[]string{"1 push %rbp", "3 mov %rsp,%rbp", "1 pop %rbp", "1 retq"}},
		{elf.EM_X86_64, disasm.Intel, []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3},
			[]string{"1 push rbp", "3 mov rbp, rsp", "1 pop rbp", "1 ret"}},
		// The same bytes are other instructions in 32-bit mode: 0x48 is no
		// REX prefix there but dec %eax.
		{elf.EM_386, disasm.GNU, []byte{0x55, 0x48, 0x89, 0xe5},
			[]string{"1 push %ebp", "1 dec %eax", "2 mov %esp,%ebp"}},
		// Branch targets are absolute, with the symbol holding them; the
		// code starts at 0x1005, so "call .-5+5" calls itself.
		{elf.EM_X86_64, disasm.GNU, []byte{0xe8, 0xfb, 0xff, 0xff, 0xff, 0xeb, 0xf9},
			[]string{"5 callq 0x1005 <fn+0x5>", "2 jmp 0x1005 <fn+0x5>"}},
		{elf.EM_X86_64, disasm.Intel, []byte{0xe8, 0xf6, 0xff, 0xff, 0xff},
			[]string{"5 call 0x1000 <fn>"}},
		// A target no symbol holds is an address alone.
		{elf.EM_X86_64, disasm.GNU, []byte{0xe9, 0x00, 0x10, 0x00, 0x00},
			[]string{"5 jmpq 0x200a"}},
		// A RIP-relative operand gets the address it refers to as a comment.
		{elf.EM_X86_64, disasm.GNU, []byte{0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00},
			[]string{"7 mov 0x10(%rip),%rax # 0x101c <fn+0x1c>"}},
		{elf.EM_X86_64, disasm.Intel, []byte{0xff, 0x25, 0x00, 0x20, 0x00, 0x00},
			[]string{"6 jmp qword ptr [rip+0x2000] # 0x300b"}},
		// Undecodable bytes (0x06 is push %es, invalid in 64-bit mode) and
		// an instruction cut short by the end of the code are (bad), one
		// byte at a time, and decoding resumes after them.
		{elf.EM_X86_64, disasm.GNU, []byte{0x06, 0x90, 0x48, 0x8b},
			[]string{"1 (bad)", "1 nop", "1 (bad)", "1 (bad)"}},
		{elf.EM_AARCH64, disasm.GNU, []byte{
			0xfd, 0x7b, 0xbf, 0xa9, // stp x29, x30, [sp, #-16]!
			0xff, 0xff, 0xff, 0x97, // bl .-4
			0x00, 0x00, 0x00, 0x90, // adrp x0, page of pc
			0x41, 0x00, 0x00, 0x54, // b.ne .+8
			0x1f, 0x20, 0x03, 0xd5, // nop
			0xc0, 0x03, 0x5f, 0xd6, // ret
		}, []string{"4 stp x29, x30, [sp,#-16]!", "4 bl 0x1005 <fn+0x5>", "4 adrp x0, 0x1000 <fn>",
			"4 b.ne 0x1019 <fn+0x19>", "4 nop", "4 ret"}},
		// arm64 instructions are four bytes: an undefined one is skipped
		// whole, and a tail shorter than an instruction is one (bad).
		{elf.EM_AARCH64, disasm.GNU, []byte{0, 0, 0, 0, 0xc0, 0x03, 0x5f, 0xd6, 0xc0, 0x03},
			[]string{"4 (bad)", "4 ret", "2 (bad)"}},
		// Intel syntax is x86's alone; arm64 is written in GNU syntax.
		{elf.EM_AARCH64, disasm.Intel, []byte{0xc0, 0x03, 0x5f, 0xd6}, []string{"4 ret"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%v/%x", tt.mach, tt.syntax, tt.code), func(t *testing.T) {
			insts, err := disasm.Decode(tt.mach, 0x1005, tt.code, tt.syntax, lookup)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			addr := uint64(0x1005)
			for _, in := range insts {
				if in.Addr != addr {
					t.Errorf("instruction at %#x, want %#x", in.Addr, addr)
				}
				addr += uint64(in.Len)
				got = append(got, fmt.Sprintf("%d %s", in.Len, in.Text))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
		})
	}
}

func TestDecodeUnknownMachine(t *testing.T) {
	if _, err := disasm.Decode(elf.EM_RISCV, 0, []byte{0x13, 0, 0, 0}, disasm.GNU, nil); err == nil {
		t.Error("decoding RISC-V code: no error")
	}
}

// objdumpLine is one line of objdump -D that starts an instruction:
// "  addr:\tbytes\ttext". Bytes that do not fit on the line continue on the
// next ones, which have no text.
var objdumpLine = regexp.MustCompile(`^\s*([0-9a-f]+):\t[0-9a-f ]+\t`)

// TestObjdumpBoundaries decodes code V8 generated and checks that every
// instruction starts where objdump starts one. Instruction boundaries are
// what a profile's addresses are attributed to; the text may differ, as
// golang.org/x/arch follows an older objdump.
func TestObjdumpBoundaries(t *testing.T) {
	objdump := fixtures.LookPath(t, "objdump")
	d, err := dumpindex.Read(fixtures.Dump(t, fixtures.Node))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if m := elf.Machine(d.Header.ElfMach); m != elf.EM_X86_64 {
		t.Skipf("node wrote code of machine %v; objdump here reads x86-64", m)
	}
	raw := filepath.Join(t.TempDir(), "code")
	functions, insts := 0, 0
	for i, f := range d.Functions {
		// The functions compiled from the workload (those with source
		// lines), and a sample of V8's builtins: one objdump run per
		// function costs 5 ms, and node writes 2,300 of them.
		if len(f.Code()) == 0 || f.Debug() == nil && i%20 != 0 {
			continue
		}
		if err := os.WriteFile(raw, f.Code(), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(objdump, "-D", "-b", "binary", "-mi386:x86-64",
			fmt.Sprintf("--adjust-vma=%#x", f.CodeAddr), raw).Output()
		if err != nil {
			t.Fatalf("objdump: %v", err)
		}
		var want []uint64
		for line := range bytes.Lines(out) {
			if m := objdumpLine.FindSubmatch(line); m != nil {
				addr, err := strconv.ParseUint(string(m[1]), 16, 64)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, addr)
			}
		}
		got, err := disasm.Decode(elf.EM_X86_64, f.CodeAddr, f.Code(), disasm.GNU, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, in := range got {
			if j >= len(want) || in.Addr != want[j] {
				t.Errorf("%s: instruction %d (%s) at %#x, objdump has one at %#x", f.Name, j, in.Text, in.Addr, want[min(j, len(want)-1)])
				break
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d instructions, objdump has %d", f.Name, len(got), len(want))
		}
		functions++
		insts += len(got)
	}
	if functions < 100 {
		t.Errorf("compared %d functions; the dump should give over 100", functions)
	}
	t.Logf("%d functions, %d instructions, as objdump decodes them", functions, insts)
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}, uint64(0x1000), uint8(0), false)
	f.Add([]byte{0xe8, 0xfb, 0xff, 0xff, 0xff, 0x48, 0x8b, 0x05}, uint64(0xfffffffffffffffe), uint8(0), true)
	f.Add([]byte{0x62, 0xf1, 0x7c, 0x48, 0x10, 0x04, 0x24}, uint64(0), uint8(1), false) // EVEX
	f.Add([]byte{0xff, 0xff, 0xff, 0x97, 0x00, 0x00, 0x00, 0x90, 0xc0}, uint64(0x40), uint8(2), false)
	machines := []elf.Machine{elf.EM_X86_64, elf.EM_386, elf.EM_AARCH64}
	f.Fuzz(func(t *testing.T, code []byte, addr uint64, mach uint8, intel bool) {
		// An instruction is at most 15 bytes: longer inputs find nothing
		// more, and make each of the fuzzer's minimizing runs, which are
		// quadratic in the input's length, take minutes.
		code = code[:min(len(code), 64)]
		syntax := disasm.GNU
		if intel {
			syntax = disasm.Intel
		}
		insts, err := disasm.Decode(machines[int(mach)%len(machines)], addr, code, syntax, lookup)
		if err != nil {
			t.Fatal(err)
		}
		// The instructions tile the code: each starts where the one
		// before ends, and together they cover every byte.
		next := addr
		for _, in := range insts {
			if in.Addr != next || in.Len < 1 || in.Text == "" {
				t.Fatalf("instruction %+v, want one of some length at %#x", in, next)
			}
			next += uint64(in.Len)
		}
		if n := next - addr; n != uint64(len(code)) {
			t.Fatalf("instructions cover %d bytes of %d", n, len(code))
		}
	})
}

// BenchmarkDecode decodes the test binary's own code (x86-64 or arm64, the
// machine it runs on): what the compiler generates, like a JIT, rather than
// a few hand-picked instructions.
func BenchmarkDecode(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	text := f.Section(".text")
	if text == nil {
		b.Fatal("the test binary has no .text")
	}
	code, err := text.Data()
	if err != nil {
		b.Fatal(err)
	}
	code = code[:min(len(code), 1<<20)]
	for _, syntax := range []disasm.Syntax{disasm.GNU, disasm.Intel} {
		b.Run(fmt.Sprintf("%v/%v", f.Machine, syntax), func(b *testing.B) {
			b.SetBytes(int64(len(code)))
			for b.Loop() {
				if _, err := disasm.Decode(f.Machine, text.Addr, code, syntax, lookup); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
