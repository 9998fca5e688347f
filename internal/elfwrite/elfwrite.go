// Package elfwrite writes ELF files, of either class and byte order: the
// file header, the program headers, the sections' contents laid out one
// after the other, a symbol table with its string table, and the section
// headers. Go's debug/elf only reads; its types and constants are the
// vocabulary here, so that what debug/elf reads back compares with what was
// written.
//
// What goes in the sections, and what the program headers say, is the
// caller's: jitelf's images of jitted code and gmon's symbol files for gprof
// both write through this package.
package elfwrite

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"strings"
)

// ByteOrder is a byte order that can also append: binary.LittleEndian,
// BigEndian or NativeEndian.
type ByteOrder interface {
	binary.ByteOrder
	binary.AppendByteOrder
}

// Format is what fixes how a file's structures are encoded.
type Format struct {
	Class elf.Class // ELFCLASS32 or ELFCLASS64
	Order ByteOrder
}

func (f Format) is64() bool { return f.Class == elf.ELFCLASS64 }

// bigEndianOne is 1 in big-endian order only. A variable, for a literal
// passed to Order's method would be allocated on every call.
var bigEndianOne = []byte{0, 1}

// Data is the file header's name for Order.
func (f Format) Data() elf.Data {
	if f.Order.Uint16(bigEndianOne) == 1 {
		return elf.ELFDATA2MSB
	}
	return elf.ELFDATA2LSB
}

// AddrSize is the size of an address, and of the fields that hold one or a
// file offset.
func (f Format) AddrSize() int { return int(f.pick(8, 4)) }

func (f Format) pick(size64, size32 uint64) uint64 {
	if f.is64() {
		return size64
	}
	return size32
}

// The sizes of the file header, a program header, a section header and a
// symbol.
func (f Format) headerSize() uint64  { return f.pick(64, 52) }
func (f Format) progSize() uint64    { return f.pick(56, 32) }
func (f Format) sectionSize() uint64 { return f.pick(64, 40) }
func (f Format) symSize() uint64     { return f.pick(24, 16) }

// AppendAddr appends an address-sized value.
func (f Format) AppendAddr(b []byte, v uint64) []byte {
	if f.is64() {
		return f.Order.AppendUint64(b, v)
	}
	return f.Order.AppendUint32(b, uint32(v))
}

// AlignUp rounds v up to a multiple of a, a power of two; 0 means 1, as in
// sh_addralign.
func AlignUp(v, a uint64) uint64 {
	a = max(a, 1)
	return (v + a - 1) &^ (a - 1)
}

// StringTable is the contents of a string table section: NUL-terminated
// names after the empty one at offset 0.
type StringTable []byte

// Add appends name, which must not hold a NUL, and returns its offset.
func (t *StringTable) Add(name string) uint32 {
	off := uint32(len(t.contents()))
	*t = append(append(*t, name...), 0)
	return off
}

// contents returns the table, which opens with the empty name.
func (t *StringTable) contents() StringTable {
	if len(*t) == 0 {
		*t = append(*t, 0)
	}
	return *t
}

// offset returns the offset of name, adding it if the table does not hold
// it yet.
func (t *StringTable) offset(name string) uint32 {
	tab := t.contents()
	for off := 0; off < len(tab); {
		end := off + bytes.IndexByte(tab[off:], 0)
		if string(tab[off:end]) == name {
			return uint32(off)
		}
		off = end + 1
	}
	return t.Add(name)
}

// Section is a section to write.
type Section struct {
	// SectionHeader is the section's header. Add sets Offset; FileSize
	// is not used.
	elf.SectionHeader
	// Data, when not nil, is the contents, and sets Size. Without, the
	// contents are what Contents writes, or else Size zeros; a SHT_NOBITS
	// section has none in the file.
	Data []byte
	// Contents, when set, writes the section's Size bytes as the file is
	// written, for contents too large to hold in memory.
	Contents func(w io.Writer) error
	name     uint32 // of Name, in File.Names
}

// Symbol is an entry of the symbol table.
type Symbol struct {
	Name        string // any bytes but NUL
	Info, Other byte   // st_info (elf.ST_INFO) and st_other
	Section     int    // its index
	Value, Size uint64
}

// File is an ELF file in the making. The program headers follow the file
// header; the sections added follow them in the order added, each at the
// next offset its alignment allows. Writing adds .symtab, .strtab and
// .shstrtab after them, and the section headers at the end.
//
// A File's zero value is an empty file of no program headers.
type File struct {
	Format
	Type    elf.Type
	Machine elf.Machine
	Entry   uint64

	// Progs are the program headers. Their number must be final before
	// the first Add, for the sections follow them; their values are read
	// as the file is written.
	Progs []elf.ProgHeader

	// Sections are those added, each at its index in the section header
	// table: the null section first.
	Sections []Section

	// Names holds the section names, .shstrtab's contents. A name it
	// holds already is not added again, so a caller may fill it first to
	// choose the table.
	Names StringTable

	// Symbols, when set, yields the symbol table's entries after the null
	// symbol, the local ones first as ELF wants, the same each time: it
	// is walked three times as the file is written (sizes, entries,
	// names) and never held, for an image of a million jitted functions
	// would hold tens of megabytes of tables.
	Symbols iter.Seq[Symbol]

	end uint64 // of the contents laid out so far
}

// Reset empties f for another file, keeping its memory.
func (f *File) Reset() {
	*f = File{Progs: f.Progs[:0], Sections: f.Sections[:0], Names: f.Names[:0]}
}

// Next returns the offset a section of alignment align added now gets.
func (f *File) Next(align uint64) uint64 {
	return AlignUp(max(f.end, f.headerSize()+uint64(len(f.Progs))*f.progSize()), align)
}

// Add lays s out and returns its section index.
func (f *File) Add(s Section) int {
	if len(f.Sections) == 0 {
		f.Sections = append(f.Sections, Section{})
	}
	if s.Data != nil {
		s.Size = uint64(len(s.Data))
	}
	// A NOBITS section takes no room in the file; writing gives it the
	// offset of the section headers, past every section's contents.
	if s.Type != elf.SHT_NOBITS {
		s.Offset = f.Next(s.Addralign)
		f.end = s.Offset + s.Size
	}
	s.name = f.Names.offset(s.Name)
	f.Sections = append(f.Sections, s)
	return len(f.Sections) - 1
}

// shAlign is the section header table's alignment, enough for either class.
const shAlign = 8

// WriteTo adds .symtab, .strtab and .shstrtab, and writes the file to w,
// front to back. It is called once per file; Reset makes another.
func (f *File) WriteTo(w io.Writer) (int64, error) {
	shoff, size, err := f.finish()
	if err != nil {
		return 0, err
	}
	// A buffer no larger than the file: an image of one function is a
	// few hundred bytes, and inject writes one per function with --no-pack.
	bw := bufio.NewWriterSize(w, int(min(size, 64<<10)))
	if err := f.write(bw, shoff); err != nil {
		return 0, err
	}
	return int64(size), bw.Flush()
}

// finish lays out the symbol and string tables, and returns where the
// section headers go and the size of the file.
func (f *File) finish() (shoff, size uint64, err error) {
	symbols, locals, names := 0, 0, uint64(1) // the null symbol and empty name
	for s := range f.symbols() {
		if strings.IndexByte(s.Name, 0) >= 0 {
			return 0, 0, fmt.Errorf("symbol %d's name %q holds a NUL byte", symbols, s.Name)
		}
		symbols++
		if elf.ST_BIND(s.Info) == elf.STB_LOCAL {
			locals++
		}
		if s.Name != "" {
			names += uint64(len(s.Name)) + 1
		}
	}
	syms := f.Add(Section{SectionHeader: elf.SectionHeader{Name: ".symtab", Type: elf.SHT_SYMTAB,
		Addralign: uint64(f.AddrSize()), Entsize: f.symSize(), Size: uint64(1+symbols) * f.symSize()}, Contents: f.writeSymbols})
	// sh_link is the string table's index, sh_info that of the first
	// global symbol.
	f.Sections[syms].Link = uint32(syms + 1)
	f.Sections[syms].Info = uint32(1 + locals)
	f.Add(Section{SectionHeader: elf.SectionHeader{Name: ".strtab", Type: elf.SHT_STRTAB, Addralign: 1, Size: names}, Contents: f.writeNames})
	shstrtab := Section{SectionHeader: elf.SectionHeader{Name: ".shstrtab", Type: elf.SHT_STRTAB, Addralign: 1}}
	f.Names.offset(shstrtab.Name) // before the contents are taken
	shstrtab.Data = f.Names
	f.Add(shstrtab)

	shoff = AlignUp(f.end, shAlign)
	size = shoff + uint64(len(f.Sections))*f.sectionSize()
	if !f.is64() && size > 1<<32 {
		return 0, 0, fmt.Errorf("the file needs %d bytes, more than ELF32 can address", size)
	}
	return shoff, size, nil
}

func (f *File) symbols() iter.Seq[Symbol] {
	if f.Symbols == nil {
		return func(func(Symbol) bool) {}
	}
	return f.Symbols
}

// writeSymbols writes .symtab: the null symbol, then Symbols', each
// named by the place writeNames gives its name.
func (f *File) writeSymbols(w io.Writer) error {
	o := f.Order
	b := make([]byte, f.symSize(), 64)
	if _, err := w.Write(b); err != nil {
		return err
	}
	name := uint32(1)
	for s := range f.symbols() {
		at := uint32(0) // the empty name that opens the table
		if s.Name != "" {
			at = name
			name += uint32(len(s.Name)) + 1
		}
		b = o.AppendUint32(b[:0], at)
		if f.is64() {
			b = append(b, s.Info, s.Other)
			b = o.AppendUint16(b, uint16(s.Section))
			b = o.AppendUint64(b, s.Value)
			b = o.AppendUint64(b, s.Size)
		} else {
			b = o.AppendUint32(b, uint32(s.Value))
			b = o.AppendUint32(b, uint32(s.Size))
			b = append(b, s.Info, s.Other)
			b = o.AppendUint16(b, uint16(s.Section))
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// writeNames writes .strtab: the empty name, then each symbol's that is
// not empty.
func (f *File) writeNames(w io.Writer) error {
	if _, err := w.Write(zeros[:1]); err != nil {
		return err
	}
	for s := range f.symbols() {
		if s.Name == "" {
			continue
		}
		if _, err := io.WriteString(w, s.Name); err != nil {
			return err
		}
		if _, err := w.Write(zeros[:1]); err != nil {
			return err
		}
	}
	return nil
}

// write writes the file, laid out by finish, to w.
func (f *File) write(w io.Writer, shoff uint64) error {
	c := counter{w: w}
	b := f.appendHeader(make([]byte, 0, f.headerSize()), shoff, len(f.Sections)-1)
	for i := range f.Progs {
		b = f.appendProg(b, &f.Progs[i])
	}
	c.Write(b)
	for i := range f.Sections {
		s := &f.Sections[i]
		if s.Type == elf.SHT_NULL {
			continue
		}
		if s.Type == elf.SHT_NOBITS {
			s.Offset = shoff
			continue
		}
		c.pad(s.Offset)
		switch {
		case s.Data != nil:
			c.Write(s.Data)
		case s.Contents != nil:
			if c.err == nil {
				if err := s.Contents(&c); err != nil && c.err == nil {
					c.err = err
				}
			}
			if c.err == nil && c.n != s.Offset+s.Size {
				return fmt.Errorf("section %s: %d bytes written, want %d", s.Name, c.n-s.Offset, s.Size)
			}
		default:
			c.pad(s.Offset + s.Size)
		}
	}
	c.pad(shoff)
	b = b[:0]
	for i := range f.Sections {
		b = f.appendSection(b, &f.Sections[i])
	}
	c.Write(b)
	return c.err
}

// counter counts the bytes written through it and keeps the first error.
type counter struct {
	w   io.Writer
	n   uint64
	err error
}

func (c *counter) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(b)
	c.n += uint64(n)
	c.err = err
	return n, err
}

// pad writes zeros up to offset off.
func (c *counter) pad(off uint64) {
	for c.err == nil && c.n < off {
		c.Write(zeros[:min(off-c.n, uint64(len(zeros)))])
	}
}

var zeros [4096]byte

func (f *File) appendHeader(b []byte, shoff uint64, shstrndx int) []byte {
	b = append(b, elf.ELFMAG...)
	b = append(b, byte(f.Class), byte(f.Data()), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE))
	b = append(b, make([]byte, elf.EI_NIDENT-8)...)
	o := f.Order
	b = o.AppendUint16(b, uint16(f.Type))
	b = o.AppendUint16(b, uint16(f.Machine))
	b = o.AppendUint32(b, uint32(elf.EV_CURRENT))
	b = f.AppendAddr(b, f.Entry)
	// Without program headers, e_phoff is 0, as the ELF spec asks, and
	// so is e_phentsize, as assemblers write it.
	phoff, phentsize := uint64(0), uint64(0)
	if len(f.Progs) > 0 {
		phoff, phentsize = f.headerSize(), f.progSize()
	}
	b = f.AppendAddr(b, phoff)
	b = f.AppendAddr(b, shoff)
	b = o.AppendUint32(b, 0) // flags
	b = o.AppendUint16(b, uint16(f.headerSize()))
	b = o.AppendUint16(b, uint16(phentsize))
	b = o.AppendUint16(b, uint16(len(f.Progs)))
	b = o.AppendUint16(b, uint16(f.sectionSize()))
	b = o.AppendUint16(b, uint16(len(f.Sections)))
	return o.AppendUint16(b, uint16(shstrndx))
}

func (f *File) appendProg(b []byte, p *elf.ProgHeader) []byte {
	o := f.Order
	b = o.AppendUint32(b, uint32(p.Type))
	if f.is64() {
		b = o.AppendUint32(b, uint32(p.Flags))
	}
	for _, v := range [...]uint64{p.Off, p.Vaddr, p.Paddr, p.Filesz, p.Memsz} {
		b = f.AppendAddr(b, v)
	}
	if !f.is64() {
		b = o.AppendUint32(b, uint32(p.Flags))
	}
	return f.AppendAddr(b, p.Align)
}

func (f *File) appendSection(b []byte, s *Section) []byte {
	o := f.Order
	b = o.AppendUint32(b, s.name)
	b = o.AppendUint32(b, uint32(s.Type))
	b = f.AppendAddr(b, uint64(s.Flags))
	b = f.AppendAddr(b, s.Addr)
	b = f.AppendAddr(b, s.Offset)
	b = f.AppendAddr(b, s.Size)
	b = o.AppendUint32(b, s.Link)
	b = o.AppendUint32(b, s.Info)
	b = f.AppendAddr(b, s.Addralign)
	return f.AppendAddr(b, s.Entsize)
}
