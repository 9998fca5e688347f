package gmon

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strings"

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
	addSym := func(name string, start, end uint64) {
		f.AddSymbol(elf.Sym64{Name: f.Strings.Add(name), Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC),
			Shndx: uint16(text), Value: start, Size: end - start})
	}
	addSym(UnaccountedName, l.Unaccounted, l.Unaccounted+binBytes)
	for i, fn := range p.Symbols {
		if strings.IndexByte(fn.Name, 0) >= 0 {
			return fmt.Errorf("gmon: function %d's name %q holds a NUL byte", i, fn.Name)
		}
		addSym(fn.Name, l.Start[i], l.End[i])
	}
	// gprof ends each symbol where the next one starts, ignoring sizes: the
	// last function needs one after it.
	addSym(endName, l.TextEnd, l.TextEnd)
	b, err := f.Append(nil)
	if err != nil {
		return fmt.Errorf("gmon: %w", err)
	}
	_, err = w.Write(b)
	return err
}
