package cfi

import (
	"debug/elf"
	"fmt"

	"github.com/jitprof/jitprof/perfdata"
)

// Arch is what call frame information and perf's samples number
// differently from one architecture to another: the registers a walk
// reads. A rule's shape (CFA = register + offset, a register saved at
// CFA + offset) is the same on every architecture; which registers it
// names is not.
type Arch struct {
	Name    string // as uname(2) and perf.data's arch header say it
	Machine elf.Machine

	// DWARF register numbers.
	SP uint64 // the stack pointer: the CFA is usually SP + offset
	FP uint64 // the frame pointer, the walker's fallback where CFI is missing
	IP uint64 // the program counter, as CFA expressions read it
	RA uint64 // the column of the return address in this architecture's CIEs

	// Bits of perf's sample_regs_user mask (PERF_REG_*): a sample holds
	// the registers it asked for in the order of their bits.
	PerfIP, PerfSP, PerfFP int
}

// X86_64 is the System V psABI's numbering (figure 3.36) and perf's
// arch/x86/include/uapi/asm/perf_regs.h (perfdata's).
var X86_64 = &Arch{
	Name: "x86_64", Machine: elf.EM_X86_64,
	SP: 7, FP: 6, IP: 16, RA: 16, // rsp, rbp, rip: the return address is the caller's rip
	PerfIP: perfdata.RegX86IP, PerfSP: perfdata.RegX86SP, PerfFP: perfdata.RegX86BP,
}

// ARM64 is AADWARF64's numbering and perf's
// arch/arm64/include/uapi/asm/perf_regs.h. The return address is in x30
// (lr) until a prologue saves it: a rule of that shape is what an arm64
// walker adds.
var ARM64 = &Arch{
	Name: "aarch64", Machine: elf.EM_AARCH64,
	SP: 31, FP: 29, IP: 32, RA: 30, // sp, x29, pc, x30
	PerfIP: 32, PerfSP: 31, PerfFP: 29,
}

var arches = []*Arch{X86_64, ARM64}

// ArchNamed returns the architecture uname(2) or perf.data's arch header
// calls name.
func ArchNamed(name string) (*Arch, error) {
	for _, a := range arches {
		if a.Name == name || a == ARM64 && name == "arm64" {
			return a, nil
		}
	}
	return nil, fmt.Errorf("architecture %q is not known", name)
}

// ArchOf returns the architecture of ELF machine m.
func ArchOf(m elf.Machine) (*Arch, error) {
	for _, a := range arches {
		if a.Machine == m {
			return a, nil
		}
	}
	return nil, fmt.Errorf("machine %v is not known", m)
}
