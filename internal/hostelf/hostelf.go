// Package hostelf names, in ELF's terms, the machine this program was built
// for: what a jitdump's elf_mach 0 means, and what images and symbol files
// written for this host declare.
package hostelf

import (
	"debug/elf"
	"runtime"
)

// Machine returns the ELF machine and class of GOARCH, or EM_NONE and
// ELFCLASSNONE for an architecture ELF has no number for here.
func Machine() (elf.Machine, elf.Class) {
	switch runtime.GOARCH {
	case "amd64":
		return elf.EM_X86_64, elf.ELFCLASS64
	case "386":
		return elf.EM_386, elf.ELFCLASS32
	case "arm64":
		return elf.EM_AARCH64, elf.ELFCLASS64
	case "arm":
		return elf.EM_ARM, elf.ELFCLASS32
	case "riscv64":
		return elf.EM_RISCV, elf.ELFCLASS64
	case "loong64":
		return elf.EM_LOONGARCH, elf.ELFCLASS64
	case "ppc64", "ppc64le":
		return elf.EM_PPC64, elf.ELFCLASS64
	case "s390x":
		return elf.EM_S390, elf.ELFCLASS64
	case "mips", "mipsle":
		return elf.EM_MIPS, elf.ELFCLASS32
	case "mips64", "mips64le":
		return elf.EM_MIPS, elf.ELFCLASS64
	}
	return elf.EM_NONE, elf.ELFCLASSNONE
}
