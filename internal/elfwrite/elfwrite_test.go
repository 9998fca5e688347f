package elfwrite

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"testing"
)

var formats = []Format{
	{elf.ELFCLASS64, binary.LittleEndian},
	{elf.ELFCLASS64, binary.BigEndian},
	{elf.ELFCLASS32, binary.LittleEndian},
	{elf.ELFCLASS32, binary.BigEndian},
}

// symbol is a symbol to add, by name.
type symbol struct {
	name    string
	bind    elf.SymBind
	section int
	value   uint64
	size    uint64
}

// streamed is what writeStreamed writes, in two writes.
const streamed = "streamed!"

func writeStreamed(w io.Writer) error {
	_, err := io.WriteString(w, streamed[:3])
	if err == nil {
		_, err = io.WriteString(w, streamed[3:])
	}
	return err
}

// fileCase is a file to write and what to add to it.
type fileCase struct {
	name     string
	typ      elf.Type
	entry    uint64
	progs    int
	names    []string // put in Names first
	sections []Section
	symbols  []symbol // locals first
}

var fileCases = []fileCase{
	{name: "empty", typ: elf.ET_REL},
	{
		name: "symbol file", typ: elf.ET_EXEC,
		sections: []Section{
			{SectionHeader: elf.SectionHeader{Name: ".text", Type: elf.SHT_NOBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x100000, Size: 0x40, Addralign: 2}},
		},
		symbols: []symbol{{"f", elf.STB_GLOBAL, 1, 0x100000, 0x10}, {"g h.$", elf.STB_GLOBAL, 1, 0x100010, 0x30}, {"", elf.STB_GLOBAL, 1, 0x100040, 0}},
	},
	{
		name: "image", typ: elf.ET_DYN, entry: 0x1000, progs: 2,
		names: []string{".text", ".absent", ".data"},
		sections: []Section{
			{SectionHeader: elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x1000, Size: 13, Addralign: 16}},
			{SectionHeader: elf.SectionHeader{Name: ".data", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_WRITE, Addralign: 8}, Data: []byte("eight by")},
			{SectionHeader: elf.SectionHeader{Name: ".bss", Type: elf.SHT_NOBITS, Flags: elf.SHF_ALLOC | elf.SHF_WRITE, Size: 100, Addralign: 32}},
			{SectionHeader: elf.SectionHeader{Name: ".comment", Type: elf.SHT_PROGBITS, Addralign: 1}, Data: []byte("odd\x00")},
			{SectionHeader: elf.SectionHeader{Name: ".note", Type: elf.SHT_NOTE, Addralign: 4}, Data: []byte{}},
			{SectionHeader: elf.SectionHeader{Name: ".rodata", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addralign: 4096}, Data: []byte{1, 2, 3}},
			{SectionHeader: elf.SectionHeader{Name: ".streamed", Type: elf.SHT_PROGBITS, Size: 9, Addralign: 4}, Contents: writeStreamed},
		},
		symbols: []symbol{{"local", elf.STB_LOCAL, 1, 0x1000, 13}, {"λ", elf.STB_LOCAL, 2, 0, 8}, {"global", elf.STB_GLOBAL, 1, 0x1004, 2}, {"weak", elf.STB_WEAK, 6, 1, 1}},
	},
}

// TestReadBack writes files of every format and reads them back with
// debug/elf: headers, sections, contents and symbols as written, and every
// section at its alignment.
func TestReadBack(t *testing.T) {
	for _, c := range fileCases {
		for _, format := range formats {
			t.Run(fmt.Sprintf("%s/%v/%v", c.name, format.Class, format.Order), func(t *testing.T) {
				f := File{Format: format, Type: c.typ, Machine: elf.EM_AARCH64, Entry: c.entry, Progs: make([]elf.ProgHeader, c.progs)}
				for _, n := range c.names {
					f.Names.Add(n)
				}
				for _, s := range c.sections {
					f.Add(s)
				}
				for i := range f.Progs {
					s := &f.Sections[i+1]
					f.Progs[i] = elf.ProgHeader{Type: elf.PT_LOAD + elf.ProgType(i), Flags: elf.PF_R, Off: s.Offset, Vaddr: s.Addr, Paddr: s.Addr, Filesz: s.Size, Memsz: s.Size, Align: 0x1000}
				}
				f.Symbols = symbolsOf(c.symbols)
				data := writeFile(t, &f)
				ef, err := elf.NewFile(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				want := elf.FileHeader{Class: format.Class, Data: format.Data(), Version: elf.EV_CURRENT, ByteOrder: format.Order, Type: c.typ, Machine: elf.EM_AARCH64, Entry: c.entry}
				if ef.FileHeader != want {
					t.Errorf("file header %+v, want %+v", ef.FileHeader, want)
				}
				checkRawHeader(t, data, &f)
				for i := range ef.Progs {
					if ef.Progs[i].ProgHeader != f.Progs[i] {
						t.Errorf("program header %d: %+v, want %+v", i, ef.Progs[i].ProgHeader, f.Progs[i])
					}
				}
				checkSections(t, ef, &f, c, uint64(len(data)))
				checkSymbols(t, ef, c)
			})
		}
	}
}

// checkRawHeader checks what debug/elf does not tell: where the program
// and section headers are, and their entry sizes.
func checkRawHeader(t *testing.T, data []byte, f *File) {
	t.Helper()
	var phoff, shoff uint64
	var phentsize, shentsize uint16
	if f.Class == elf.ELFCLASS64 {
		var h elf.Header64
		binary.Read(bytes.NewReader(data), f.Order, &h)
		phoff, shoff, phentsize, shentsize = h.Phoff, h.Shoff, h.Phentsize, h.Shentsize
	} else {
		var h elf.Header32
		binary.Read(bytes.NewReader(data), f.Order, &h)
		phoff, shoff, phentsize, shentsize = uint64(h.Phoff), uint64(h.Shoff), h.Phentsize, h.Shentsize
	}
	wantPhoff, wantPhentsize := f.headerSize(), uint16(f.progSize())
	if len(f.Progs) == 0 {
		wantPhoff, wantPhentsize = 0, 0
	}
	if phoff != wantPhoff || phentsize != wantPhentsize {
		t.Errorf("e_phoff %d, e_phentsize %d, want %d, %d", phoff, phentsize, wantPhoff, wantPhentsize)
	}
	if shoff%shAlign != 0 || shoff+uint64(len(f.Sections))*uint64(shentsize) != uint64(len(data)) || uint64(shentsize) != f.sectionSize() {
		t.Errorf("section headers at %d, %d bytes each, in a file of %d", shoff, shentsize, len(data))
	}
}

func checkSections(t *testing.T, ef *elf.File, f *File, c fileCase, size uint64) {
	t.Helper()
	var names []string
	for _, s := range ef.Sections {
		names = append(names, s.Name)
	}
	want := []string{""}
	for _, s := range c.sections {
		want = append(want, s.Name)
	}
	want = append(want, ".symtab", ".strtab", ".shstrtab")
	if !slices.Equal(names, want) {
		t.Fatalf("sections %q, want %q", names, want)
	}
	// Names put in first stay, and no name is there twice.
	shstrtab, _ := ef.Sections[len(ef.Sections)-1].Data()
	for _, n := range append(c.names, want[1:]...) {
		if k := bytes.Count(shstrtab, []byte("\x00"+n+"\x00")); k != 1 {
			t.Errorf(".shstrtab %q holds %q %d times", shstrtab, n, k)
		}
	}
	end := f.headerSize() + uint64(len(f.Progs))*f.progSize()
	for i, s := range ef.Sections[1:] {
		h := s.SectionHeader
		w := f.Sections[i+1].SectionHeader
		w.FileSize = w.Size // as debug/elf sets it, for compressed sections
		if h.Type != elf.SHT_NOBITS {
			if h.Offset < end || h.Offset%max(h.Addralign, 1) != 0 || h.Offset+h.Size > size {
				t.Errorf("%s at %#x, %d bytes, aligned to %d: overlaps the previous contents (to %#x), misaligned or past the end", h.Name, h.Offset, h.Size, h.Addralign, end)
			}
			end = h.Offset + h.Size
		}
		if h != w {
			t.Errorf("section %d: %+v, want %+v", i+1, h, w)
		}
		if i < len(c.sections) && h.Type != elf.SHT_NOBITS {
			got, _ := s.Data()
			wantData := c.sections[i].Data
			if c.sections[i].Contents != nil {
				wantData = []byte(streamed)
			}
			if wantData == nil {
				wantData = make([]byte, h.Size)
			}
			if !bytes.Equal(got, wantData) {
				t.Errorf("%s holds %q, want %q", h.Name, got, wantData)
			}
		}
	}
	symtab := ef.Section(".symtab")
	locals := 1
	for _, s := range c.symbols {
		if s.bind == elf.STB_LOCAL {
			locals++
		}
	}
	if int(symtab.Link) != len(c.sections)+2 || int(symtab.Info) != locals || symtab.Entsize != f.symSize() || symtab.Addralign != uint64(f.AddrSize()) {
		t.Errorf(".symtab: link %d, info %d, entsize %d, align %d", symtab.Link, symtab.Info, symtab.Entsize, symtab.Addralign)
	}
}

func checkSymbols(t *testing.T, ef *elf.File, c fileCase) {
	t.Helper()
	syms, err := ef.Symbols()
	if len(c.symbols) == 0 {
		if len(syms) != 0 {
			t.Errorf("symbols %v, want none", syms)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var want []elf.Symbol
	for _, s := range c.symbols {
		want = append(want, elf.Symbol{Name: s.name, Info: elf.ST_INFO(s.bind, elf.STT_FUNC), Section: elf.SectionIndex(s.section), Value: s.value, Size: s.size})
	}
	if !slices.Equal(syms, want) {
		t.Errorf("symbols\n%+v, want\n%+v", syms, want)
	}
}

func TestStringTable(t *testing.T) {
	var tab StringTable
	if off := tab.offset(""); off != 0 || string(tab) != "\x00" {
		t.Errorf("the empty name at %d in %q, want 0 in the opening NUL", off, tab)
	}
	for _, c := range []struct {
		add  bool // Add rather than offset
		name string
		off  uint32
	}{
		{true, ".text", 1},
		{true, ".text", 7},   // Add adds again
		{false, ".text", 1},  // offset finds the first
		{false, "text", 13},  // a suffix is not shared
		{false, ".data", 18}, // added
		{false, ".data", 18}, // found
		{true, "", 24},       // an empty name of its own
		{false, "", 0},       // the opening one
	} {
		var off uint32
		if c.add {
			off = tab.Add(c.name)
		} else {
			off = tab.offset(c.name)
		}
		if off != c.off {
			t.Errorf("%q (add %v): offset %d, want %d", c.name, c.add, off, c.off)
		}
	}
	if want := "\x00.text\x00.text\x00text\x00.data\x00\x00"; string(tab[:len(want)]) != want {
		t.Errorf("table %q, want %q first", tab, want)
	}
}

func TestAlignUp(t *testing.T) {
	for _, c := range [][3]uint64{{0, 0, 0}, {5, 0, 5}, {5, 1, 5}, {5, 4, 8}, {8, 8, 8}, {9, 16, 16}, {0x1001, 0x1000, 0x2000}} {
		if got := AlignUp(c[0], c[1]); got != c[2] {
			t.Errorf("AlignUp(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}

// writeFile returns what f.WriteTo writes, which it says it wrote.
func writeFile(t *testing.T, f *File) []byte {
	t.Helper()
	var out bytes.Buffer
	n, err := f.WriteTo(&out)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(out.Len()) {
		t.Fatalf("WriteTo says %d bytes, wrote %d", n, out.Len())
	}
	return out.Bytes()
}

// symbolsOf gives symbols as File.Symbols does.
func symbolsOf(symbols []symbol) iter.Seq[Symbol] {
	return func(yield func(Symbol) bool) {
		for _, s := range symbols {
			if !yield(Symbol{Name: s.name, Info: elf.ST_INFO(s.bind, elf.STT_FUNC), Section: s.section, Value: s.value, Size: s.size}) {
				return
			}
		}
	}
}

// TestWrongContents checks that a file is not written whole when a
// section's Contents write more or fewer bytes than its Size, or fail, or
// a symbol's name holds a NUL.
func TestWrongContents(t *testing.T) {
	failed := errors.New("failed")
	for _, c := range []struct {
		name     string
		contents func(io.Writer) error
		symbol   string
		want     string
	}{
		{"short", func(w io.Writer) error { _, err := io.WriteString(w, "1234"); return err }, "s", "section .x: 4 bytes written, want 5"},
		{"long", func(w io.Writer) error { _, err := io.WriteString(w, "123456"); return err }, "s", "section .x: 6 bytes written, want 5"},
		{"failed", func(io.Writer) error { return failed }, "s", "failed"},
		{"NUL", writeStreamed, "a\x00b", `symbol 0's name "a\x00b" holds a NUL byte`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := File{Format: formats[0]}
			f.Add(Section{SectionHeader: elf.SectionHeader{Name: ".x", Type: elf.SHT_PROGBITS, Size: 5}, Contents: c.contents})
			f.Symbols = symbolsOf([]symbol{{c.symbol, elf.STB_LOCAL, 1, 0, 0}})
			if _, err := f.WriteTo(io.Discard); err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestTooLarge checks that a file ELF32 cannot address is refused before
// any of it is made.
func TestTooLarge(t *testing.T) {
	f := File{Format: Format{elf.ELFCLASS32, binary.LittleEndian}}
	f.Add(Section{SectionHeader: elf.SectionHeader{Name: ".big", Type: elf.SHT_PROGBITS, Size: 1 << 32}})
	var out bytes.Buffer
	if _, err := f.WriteTo(&out); err == nil || out.Len() > 0 {
		t.Errorf("error %v, %d bytes written", err, out.Len())
	}
}

// TestReset checks that a reset File writes the same bytes as a new one.
func TestReset(t *testing.T) {
	write := func(f *File) []byte {
		f.Format, f.Type = formats[2], elf.ET_DYN
		f.Add(Section{SectionHeader: elf.SectionHeader{Name: ".a", Type: elf.SHT_PROGBITS, Addralign: 4}, Data: []byte{1, 2, 3}})
		f.Symbols = symbolsOf([]symbol{{"s", elf.STB_LOCAL, 1, 0, 0}})
		return writeFile(t, f)
	}
	var used File
	used.Progs = make([]elf.ProgHeader, 1)
	used.Names.Add(".other")
	write(&used)
	used.Reset()
	if a, b := write(&used), write(&File{}); !bytes.Equal(a, b) {
		t.Errorf("after Reset\n% x\nnew\n% x", a, b)
	}
}
