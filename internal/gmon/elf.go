package gmon

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"

	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/internal/hostelf"
)

// HostMachine returns the ELF machine and byte order of this host, which the
// symbol file must have for the host's gprof to open it.
func HostMachine() (elf.Machine, ByteOrder, error) {
	m, _ := hostelf.Machine()
	if m == elf.EM_NONE {
		return m, nil, fmt.Errorf("gmon: no ELF machine known for %s", runtime.GOARCH)
	}
	return m, binary.NativeEndian, nil
}

// endName marks the end of the synthetic text, as _etext ends a program's.
const endName = "_etext"

// WriteELF writes an ELF64 executable for gprof to read the layout's symbols
// from: a .text section spanning the synthetic text, without contents (a
// NOBITS section, so the file stays small), and a global function symbol
// with its size for _unaccounted_ and every function. Global symbols are
// taken by gprof whatever their names hold: JIT names with dots, spaces and
// dollars stay as the report shows them.
func (p *Program) WriteELF(w io.Writer, m elf.Machine, o ByteOrder, l *Layout) error {
	f := elfwrite.File{Format: elfwrite.Format{Class: elf.ELFCLASS64, Order: o}, Type: elf.ET_EXEC, Machine: m}
	text := f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: ".text", Type: elf.SHT_NOBITS,
		Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: l.TextStart, Size: l.TextEnd - l.TextStart, Addralign: binBytes}})
	sym := func(name string, start, end uint64) elfwrite.Symbol {
		return elfwrite.Symbol{Name: name, Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC), Section: text, Value: start, Size: end - start}
	}
	f.Symbols = func(yield func(elfwrite.Symbol) bool) {
		if !yield(sym(UnaccountedName, l.Unaccounted, l.Unaccounted+binBytes)) {
			return
		}
		for i, fn := range p.Symbols {
			if !yield(sym(fn.Name, l.Start[i], l.End[i])) {
				return
			}
		}
		// gprof ends each symbol where the next one starts, ignoring
		// sizes: the last function needs one after it.
		yield(sym(endName, l.TextEnd, l.TextEnd))
	}
	if _, err := f.WriteTo(w); err != nil {
		return fmt.Errorf("gmon: %w", err)
	}
	return nil
}
