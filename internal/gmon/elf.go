package gmon

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"strings"

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

// Section indexes of the symbol file.
const (
	secText = 1 + iota
	secSymtab
	secStrtab
	secShstrtab
	numSections
)

// WriteELF writes an ELF64 executable for gprof to read the layout's symbols
// from: a .text section spanning the synthetic text, without contents (a
// NOBITS section, so the file stays small), and a global function symbol
// with its size for _unaccounted_ and every function. Global symbols are
// taken by gprof whatever their names hold: JIT names with dots, spaces and
// dollars stay as the report shows them.
func (p *Program) WriteELF(w io.Writer, m elf.Machine, o ByteOrder, l *Layout) error {
	const (
		ehdrSize = 64
		shdrSize = 64
		symSize  = 24
	)
	var strtab strings.Builder
	strtab.WriteByte(0)
	addName := func(name string) uint32 {
		off := uint32(strtab.Len())
		strtab.WriteString(name)
		strtab.WriteByte(0)
		return off
	}
	symtab := make([]byte, symSize, symSize*(len(p.Functions)+3)) // symbol 0 is null
	addSym := func(name string, start, end uint64) {
		var s [symSize]byte
		o.PutUint32(s[0:], addName(name))
		s[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC))
		o.PutUint16(s[6:], secText)
		o.PutUint64(s[8:], start)
		o.PutUint64(s[16:], end-start)
		symtab = append(symtab, s[:]...)
	}
	addSym(UnaccountedName, l.Unaccounted, l.Unaccounted+binBytes)
	for i, f := range p.Functions {
		if strings.IndexByte(f.Name, 0) >= 0 {
			return fmt.Errorf("gmon: function %d's name %q holds a NUL byte", i, f.Name)
		}
		addSym(f.Name, l.Start[i], l.End[i])
	}
	// gprof ends each symbol where the next one starts, ignoring sizes: the
	// last function needs one after it.
	addSym(endName, l.TextEnd, l.TextEnd)
	shstrtab := "\x00.text\x00.symtab\x00.strtab\x00.shstrtab\x00"
	nameOff := func(s string) uint32 { return uint32(strings.Index(shstrtab, "\x00"+s+"\x00") + 1) }

	symOff := uint64(ehdrSize)
	strOff := symOff + uint64(len(symtab))
	shstrOff := strOff + uint64(strtab.Len())
	shOff := (shstrOff + uint64(len(shstrtab)) + 7) &^ 7

	b := make([]byte, ehdrSize, shOff+numSections*shdrSize)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	if o.Uint16([]byte{0, 1}) == 1 {
		b[elf.EI_DATA] = byte(elf.ELFDATA2MSB)
	}
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	o.PutUint16(b[16:], uint16(elf.ET_EXEC))
	o.PutUint16(b[18:], uint16(m))
	o.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	o.PutUint64(b[40:], shOff)
	o.PutUint16(b[52:], ehdrSize)
	o.PutUint16(b[58:], shdrSize)
	o.PutUint16(b[60:], numSections)
	o.PutUint16(b[62:], secShstrtab)

	b = append(b, symtab...)
	b = append(b, strtab.String()...)
	b = append(b, shstrtab...)
	b = append(b, make([]byte, shOff-uint64(len(b)))...)

	section := func(name string, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64, link, info uint32, align, entsize uint64) {
		var s [shdrSize]byte
		if name != "" {
			o.PutUint32(s[0:], nameOff(name))
		}
		o.PutUint32(s[4:], uint32(typ))
		o.PutUint64(s[8:], uint64(flags))
		o.PutUint64(s[16:], addr)
		o.PutUint64(s[24:], off)
		o.PutUint64(s[32:], size)
		o.PutUint32(s[40:], link)
		o.PutUint32(s[44:], info)
		o.PutUint64(s[48:], align)
		o.PutUint64(s[56:], entsize)
		b = append(b, s[:]...)
	}
	section("", elf.SHT_NULL, 0, 0, 0, 0, 0, 0, 0, 0)
	section(".text", elf.SHT_NOBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, l.TextStart, shOff, l.TextEnd-l.TextStart, 0, 0, binBytes, 0)
	// sh_info is the index of the first global symbol: all but the null one.
	section(".symtab", elf.SHT_SYMTAB, 0, 0, symOff, uint64(len(symtab)), secStrtab, 1, 8, symSize)
	section(".strtab", elf.SHT_STRTAB, 0, 0, strOff, uint64(strtab.Len()), 0, 0, 1, 0)
	section(".shstrtab", elf.SHT_STRTAB, 0, 0, shstrOff, uint64(len(shstrtab)), 0, 0, 1, 0)
	_, err := w.Write(b)
	return err
}
