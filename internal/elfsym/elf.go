package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/mapfile"
)

// NewTable reads the symbols of the ELF file r, named path in errors and
// by Path, without looking for debug files.
// Names are read from r when they are first looked up: it must stay
// readable while the Table is used.
func NewTable(r io.ReaderAt, path string) (*Table, error) {
	f, err := newELF(r, path)
	if err != nil {
		return nil, err
	}
	f.names = r
	return load(f, f)
}

// elfFile is an ELF file with the sections perf looks up by name.
type elfFile struct {
	*elf.File
	path    string
	symtab  *elf.Section
	dynsym  *elf.Section
	buildID []byte
	mapped  []byte      // the whole file, when it is mapped
	names   io.ReaderAt // where names are read from once the symbols are loaded

	mapping *mapfile.Mapping // with Open: the mapping and the open file
	file    *os.File
}

// sectionData returns the contents of s: in place when the file is mapped
// and s is stored as it is, else a copy.
func (f *elfFile) sectionData(s *elf.Section) ([]byte, error) {
	if f.mapped != nil && s.Type != elf.SHT_NOBITS && s.Flags&elf.SHF_COMPRESSED == 0 {
		if s.Offset > uint64(len(f.mapped)) || s.Size > uint64(len(f.mapped))-s.Offset {
			return nil, fmt.Errorf("section %s at %#x, %d bytes, runs past the end of the file", s.Name, s.Offset, s.Size)
		}
		return f.mapped[s.Offset : s.Offset+s.Size], nil
	}
	return s.Data()
}

func newELF(r io.ReaderAt, path string) (*elfFile, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("elfsym: %s: %w", path, err)
	}
	ef := &elfFile{File: f, path: path}
	// perf takes the first section of each name, and only if its type
	// is right (symsrc__init).
	if s := f.Section(".symtab"); s != nil && s.Type == elf.SHT_SYMTAB {
		ef.symtab = s
	}
	if s := f.Section(".dynsym"); s != nil && s.Type == elf.SHT_DYNSYM {
		ef.dynsym = s
	}
	ef.buildID = readBuildID(f)
	return ef, nil
}

func (f *elfFile) errorf(format string, args ...any) error {
	return fmt.Errorf("elfsym: %s: "+format, append([]any{f.path}, args...)...)
}

// readBuildID returns the GNU build-id note, looked for in the sections
// perf looks in (elf_read_build_id).
func readBuildID(f *elf.File) []byte {
	for _, name := range []string{".note.gnu.build-id", ".notes", ".note"} {
		s := f.Section(name)
		if s == nil {
			continue
		}
		data, err := s.Data()
		if err != nil {
			return nil
		}
		return noteBuildID(data, f.ByteOrder)
	}
	return nil
}

// noteBuildID finds the NT_GNU_BUILD_ID note named "GNU" in notes.
func noteBuildID(notes []byte, bo binary.ByteOrder) []byte {
	const ntGNUBuildID = 3
	for len(notes) >= 12 {
		namesz, descsz, typ := bo.Uint32(notes), bo.Uint32(notes[4:]), bo.Uint32(notes[8:])
		notes = notes[12:]
		nameEnd := align4(uint64(namesz))
		descEnd := nameEnd + align4(uint64(descsz))
		if descEnd > uint64(len(notes)) {
			return nil
		}
		if typ == ntGNUBuildID && namesz == 4 && string(notes[:4]) == "GNU\x00" {
			return bytes.Clone(notes[nameEnd : nameEnd+uint64(descsz)])
		}
		notes = notes[descEnd:]
	}
	return nil
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// load builds the table from the symbols of syms, placed and completed
// with the program headers and PLT of runtime, the file that is mapped
// (dso__load_sym and dso__synthesize_plt_symbols).
func load(syms, runtime *elfFile) (*Table, error) {
	var tables []symbolTable
	n := 0
	for _, sec := range []*elf.Section{syms.symtab, syms.dynsym} {
		if sec == nil {
			continue
		}
		st, err := syms.symbolTable(sec)
		if err != nil {
			return nil, err
		}
		tables = append(tables, st)
		n += len(st.data) / st.entSize
	}
	if len(tables) == 0 {
		return nil, syms.errorf("no symbol table")
	}
	b := newBuilder(n)
	defer b.finishTree()
	for _, st := range tables {
		if err := b.addSymbols(syms, runtime, st); err != nil {
			return nil, err
		}
	}
	b.addPLT(runtime)
	t := b.table(syms.path, syms.names)
	t.buildID = runtime.buildID
	t.segments = segments(runtime.File)
	return t, nil
}

// A symbolTable is the contents of a symbol table and its strings.
type symbolTable struct {
	data, strtab []byte
	entSize      int
	// strtabOff is where the strings are in the file, or -1 when the
	// file does not hold them as they are (compressed).
	strtabOff int64
}

func (f *elfFile) symbolTable(sec *elf.Section) (symbolTable, error) {
	st := symbolTable{entSize: 24}
	if f.Class == elf.ELFCLASS32 {
		st.entSize = 16
	}
	var err error
	if st.data, err = f.sectionData(sec); err != nil {
		return st, f.errorf("%s: %v", sec.Name, err)
	}
	if int(sec.Link) >= len(f.Sections) {
		return st, f.errorf("%s: bad string table index %d", sec.Name, sec.Link)
	}
	strs := f.Sections[sec.Link]
	if st.strtab, err = f.sectionData(strs); err != nil {
		return st, f.errorf("%s: strings: %v", sec.Name, err)
	}
	st.strtabOff = -1
	if strs.Type != elf.SHT_NOBITS && strs.Flags&elf.SHF_COMPRESSED == 0 && strs.Offset <= math.MaxInt64-strs.Size {
		st.strtabOff = int64(strs.Offset)
	}
	return st, nil
}

// addSymbols loads one symbol table as dso__load_sym_internal does.
func (b *builder) addSymbols(syms, runtime *elfFile, st symbolTable) error {
	added := make([]rec, 0, len(st.data)/st.entSize)
	if st.strtabOff >= 0 {
		b.strtabs = append(b.strtabs, extent{uint64(st.strtabOff), uint64(st.strtabOff) + uint64(len(st.strtab))})
	}
	var err error
	for off := 0; off+st.entSize <= len(st.data); off += st.entSize {
		e := readSym(st.data[off:off+st.entSize], syms.Class, syms.ByteOrder)
		if added, err = b.symbol(added, syms, runtime, e, st); err != nil {
			return err
		}
	}
	if len(added) == 0 {
		return nil
	}
	b.insert(added)
	b.fixupEnd(false)
	b.fixupDuplicate()
	return nil
}

// rawSym is an ELF symbol table entry.
type rawSym struct {
	name        uint32
	info, other uint8
	shndx       uint16
	value, size uint64
}

// stringAt returns the NUL-terminated string at off in a string table,
// or false when off is past its end.
func stringAt(strtab []byte, off uint32) ([]byte, bool) {
	if int(off) >= len(strtab) {
		return nil, false
	}
	s := strtab[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s, true
}

func readSym(b []byte, class elf.Class, bo binary.ByteOrder) rawSym {
	if class == elf.ELFCLASS32 {
		return rawSym{name: bo.Uint32(b), value: uint64(bo.Uint32(b[4:])), size: uint64(bo.Uint32(b[8:])),
			info: b[12], other: b[13], shndx: bo.Uint16(b[14:])}
	}
	return rawSym{name: bo.Uint32(b), info: b[4], other: b[5], shndx: bo.Uint16(b[6:]),
		value: bo.Uint64(b[8:]), size: bo.Uint64(b[16:])}
}

// symbol adds the symbol of an entry if it passes perf's filters. An
// entry in a section that does not exist makes perf give up on the whole
// file; so does this.
func (b *builder) symbol(added []rec, syms, runtime *elfFile, e rawSym, st symbolTable) ([]rec, error) {
	typ, bind := e.info&0xf, e.info>>4
	if e.name == 0 || e.shndx == uint16(elf.SHN_UNDEF) {
		return added, nil
	}
	// Untyped symbols count as labels, but only if visible and in a
	// text or data section, checked below.
	label := false
	switch typ {
	case typeFunc, typeIFunc, typeObject:
	case typeNoType:
		vis := elf.SymVis(e.other & 3)
		label = e.shndx != uint16(elf.SHN_ABS) && vis != elf.STV_HIDDEN && vis != elf.STV_INTERNAL
		if !label {
			return added, nil
		}
	default:
		return added, nil
	}
	name, ok := stringAt(st.strtab, e.name)
	if !ok {
		return added, nil
	}
	// Mapping symbols mark code and data in ARM and RISC-V code.
	switch syms.Machine {
	case elf.EM_ARM, elf.EM_AARCH64:
		if len(name) >= 2 && name[0] == '$' && strings.IndexByte("adtx", name[1]) >= 0 && (len(name) == 2 || name[2] == '.') {
			return added, nil
		}
	case elf.EM_RISCV:
		if len(name) >= 2 && name[0] == '$' && (name[1] == 'd' || name[1] == 'x') {
			return added, nil
		}
	}
	if e.shndx == uint16(elf.SHN_ABS) {
		return added, nil
	}
	if int(e.shndx) >= len(syms.Sections) {
		return nil, syms.errorf("symbol %q in section %d of %d", name, e.shndx, len(syms.Sections))
	}
	sec := syms.Sections[e.shndx]
	if sec.Flags&elf.SHF_ALLOC == 0 {
		return added, nil
	}
	// A debug file keeps the headers of the sections it strips, as
	// NOBITS: the runtime file has the real ones.
	if sec.Type == elf.SHT_NOBITS {
		if int(e.shndx) >= len(runtime.Sections) {
			return nil, runtime.errorf("symbol %q in section %d of %d", name, e.shndx, len(runtime.Sections))
		}
		sec = runtime.Sections[e.shndx]
	}
	if label && !strings.Contains(sec.Name, "text") && !strings.Contains(sec.Name, "data") {
		return added, nil
	}
	start := e.value
	if syms.Machine == elf.EM_ARM && typ == typeFunc {
		start &^= 1 // the Thumb bit
	}
	ref := inFile | nameRef(uint64(st.strtabOff)+uint64(e.name))
	if st.strtabOff < 0 {
		ref = b.keep(name)
	}
	return b.add(added, name, ref, start, start+e.size, bind, typ), nil
}

// addPLT names the PLT entries of runtime as perf 6.1 does: .plt holds a
// header and then one entry per .rela.plt (or .rel.plt) relocation, in
// relocation order, each sh_entsize bytes (fixed sizes on ARM and
// SPARC), named after the relocation's dynamic symbol plus "@plt". The
// symbols go in after the fix-ups, so a symbol stretched over .plt by
// symbols__fixup_end (typically _init) stays there, overlapping them.
// Anything unexpected leaves the PLT unnamed, as in perf.
func (b *builder) addPLT(runtime *elfFile) {
	dynsym := runtime.dynsym
	if dynsym == nil {
		return
	}
	rel := runtime.Section(".rela.plt")
	if rel == nil {
		rel = runtime.Section(".rel.plt")
	}
	plt := runtime.Section(".plt")
	if rel == nil || plt == nil || rel.Entsize == 0 || int(rel.Link) >= len(runtime.Sections) || runtime.Sections[rel.Link] != dynsym {
		return
	}
	if rel.Type != elf.SHT_RELA && rel.Type != elf.SHT_REL {
		return
	}
	relData, err := runtime.sectionData(rel)
	if err != nil {
		return
	}
	st, err := runtime.symbolTable(dynsym)
	if err != nil || len(st.strtab) == 0 {
		return
	}
	header, entry := plt.Entsize, plt.Entsize
	switch runtime.Machine {
	case elf.EM_ARM:
		header, entry = 20, 12
	case elf.EM_AARCH64:
		header, entry = 32, 16
	case elf.EM_SPARC:
		header, entry = 48, 12
	case elf.EM_SPARCV9:
		header, entry = 128, 32
	}
	relSize := 16
	if runtime.Class == elf.ELFCLASS32 {
		relSize = 8
	}
	if rel.Type == elf.SHT_RELA {
		relSize += relSize / 2
	}
	n := rel.Size / rel.Entsize
	if max := uint64(len(relData) / relSize); n > max {
		n = max
	}
	addr := plt.Addr + header
	var added []rec
	for i := uint64(0); i < n; i++ {
		var symIdx uint64
		r := relData[i*uint64(relSize):]
		if runtime.Class == elf.ELFCLASS32 {
			symIdx = uint64(runtime.ByteOrder.Uint32(r[4:]) >> 8)
		} else {
			symIdx = runtime.ByteOrder.Uint64(r[8:]) >> 32
		}
		var name []byte
		if off := symIdx * uint64(st.entSize); off+uint64(st.entSize) <= uint64(len(st.data)) {
			e := readSym(st.data[off:off+uint64(st.entSize)], runtime.Class, runtime.ByteOrder)
			name, _ = stringAt(st.strtab, e.name)
		}
		name = append(slices.Clip(name), "@plt"...)
		added = b.add(added, name, b.keep(name), addr, addr+entry, bindGlobal, typeFunc)
		addr += entry
	}
	if len(added) > 0 {
		b.insert(added)
	}
}

// segments returns the mapping of file offsets to addresses: the PT_LOAD
// segments, or, when there are none, the allocated sections with file
// contents.
func segments(f *elf.File) []segment {
	var segs []segment
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Filesz > 0 {
			segs = append(segs, segment{off: p.Off, addr: p.Vaddr, size: p.Filesz})
		}
	}
	if len(segs) > 0 {
		return segs
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			segs = append(segs, segment{off: s.Offset, addr: s.Addr, size: s.Size})
		}
	}
	return segs
}
