package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// NewTable reads the symbols of the ELF file r, named path in errors and
// by Path, without looking for debug files. Names are read from r when
// they are first looked up: it must stay readable while the Table is used.
func NewTable(r interface {
	io.ReaderAt
	Size() int64
}, path string) (*Table, error) {
	f, err := NewFile(r, path, r.Size())
	if err != nil {
		return nil, err
	}
	ef := newELF(f)
	return load(ef, ef)
}

// elfFile is an ELF file with the sections perf looks up by name.
//
// Its symbol and string tables, tens of megabytes in large programs, are
// read a window at a time, neither mapped nor held whole: a profiler
// that reads them should not look bigger than the program it profiles.
type elfFile struct {
	*File
	symtab  *elf.Section
	dynsym  *elf.Section
	buildID []byte
}

func newELF(f *File) *elfFile {
	ef := &elfFile{File: f}
	// perf takes the first section of each name, and only if its type
	// is right (symsrc__init).
	if s := f.Section(".symtab"); s != nil && s.Type == elf.SHT_SYMTAB {
		ef.symtab = s
	}
	if s := f.Section(".dynsym"); s != nil && s.Type == elf.SHT_DYNSYM {
		ef.dynsym = s
	}
	ef.buildID = f.BuildID()
	return ef
}

func (f *elfFile) errorf(format string, args ...any) error {
	return fmt.Errorf("elfsym: %s: "+format, append([]any{f.name}, args...)...)
}

// stored tells whether s is in the file as it is (not compressed, not
// NOBITS), checking that it is all there.
func (f *elfFile) stored(s *elf.Section) (bool, error) {
	if s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_COMPRESSED != 0 {
		return false, nil
	}
	if s.Offset > uint64(f.size) || s.Size > uint64(f.size)-s.Offset {
		return false, f.errorf("section %s at %#x, %d bytes, runs past the end of the file", s.Name, s.Offset, s.Size)
	}
	return true, nil
}

// readerAt returns a random-access reader of s's contents.
func (f *elfFile) readerAt(s *elf.Section) (io.ReaderAt, error) {
	if ok, err := f.stored(s); err != nil || ok {
		return s, err
	}
	data, err := f.Data(s)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(data), nil
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
		n += st.len()
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
	t := b.table(syms.name, syms.r)
	t.buildID = runtime.buildID
	t.segments = segments(runtime.File.File)
	t.stripped = syms.symtab == nil
	return t, nil
}

// A symbolTable is a symbol table section and its string table.
type symbolTable struct {
	syms, strs *elf.Section
	entSize    int
	// symsStored and strsStored tell that the file holds the symbols,
	// the strings, as they are: names can then stay there.
	symsStored, strsStored bool
	// count is how many symbols there are, when the file's size bounds
	// what the header claims; else -1.
	count int
}

func (f *elfFile) symbolTable(sec *elf.Section) (symbolTable, error) {
	st := symbolTable{syms: sec, entSize: 24, count: -1}
	if f.Class == elf.ELFCLASS32 {
		st.entSize = 16
	}
	if int(sec.Link) >= len(f.Sections) {
		return st, f.errorf("%s: bad string table index %d", sec.Name, sec.Link)
	}
	st.strs = f.Sections[sec.Link]
	var err error
	if st.symsStored, err = f.stored(sec); err != nil {
		return st, err
	}
	if st.symsStored {
		st.count = int(sec.Size) / st.entSize
	}
	st.strsStored, err = f.stored(st.strs)
	return st, err
}

// len returns about how many symbols st has: exactly when the file's size
// bounds the header's claim, which is otherwise not taken for more than
// a guess.
func (st symbolTable) len() int {
	if st.count >= 0 {
		return st.count
	}
	return min(int(st.syms.Size/uint64(st.entSize)), 1<<16)
}

// addSymbols loads one symbol table as dso__load_sym_internal does, in
// three passes: over the symbols, then over their names in the order of
// the string table, then adding them to the tree in their order.
func (b *builder) addSymbols(syms, runtime *elfFile, st symbolTable) error {
	first := int32(len(b.info))
	added, bad, err := b.readSymbols(syms, runtime, st)
	if err != nil {
		return err
	}
	skip, err := b.readNames(syms, st, first, bad)
	if err != nil {
		return err
	}
	kept := added[:0]
	for _, r := range added {
		switch bad := bad[r.id]; {
		case skip[r.id]:
		case bad != nil:
			return bad.in.errorf("symbol %q in section %d of %d", bad.name, bad.section, len(bad.in.Sections))
		default:
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	b.insert(kept)
	b.fixupEnd(false)
	b.fixupDuplicate()
	return nil
}

// A badSymbol is in a section that is in neither the symbol file nor the
// runtime file, which makes perf give up on the whole file.
type badSymbol struct {
	section uint16
	in      *elfFile
	name    string
}

// readSymbols adds st's symbols that perf keeps, as far as that can be
// told without their names: the offset of its name in st's strings stands
// for each name until readNames reads it.
func (b *builder) readSymbols(syms, runtime *elfFile, st symbolTable) ([]rec, map[int32]*badSymbol, error) {
	r := st.syms.Open()
	buf := make([]byte, st.entSize*min(4096, max(st.len(), 1)))
	added := make([]rec, 0, st.len())
	var bad map[int32]*badSymbol
	var read uint64
	for {
		n, err := io.ReadFull(r, buf)
		read += uint64(n)
		for off := 0; off+st.entSize <= n; off += st.entSize {
			e := readSym(buf[off:off+st.entSize], syms.Class, syms.ByteOrder)
			start, end, problem, ok := perfKeeps(syms, runtime, e, st.strs.Size)
			if !ok {
				continue
			}
			typ, bind := e.info&0xf, e.info>>4
			added = b.add(added, symInfo{name: nameRef(e.name), bind: bind, typ: typ}, start, end)
			if problem != nil {
				if bad == nil {
					bad = make(map[int32]*badSymbol)
				}
				bad[added[len(added)-1].id] = problem
			}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			if st.symsStored && read < st.syms.Size {
				return nil, nil, syms.errorf("section %s at %#x, %d bytes, runs past the end of the file", st.syms.Name, st.syms.Offset, st.syms.Size)
			}
			return added, bad, nil
		case err != nil:
			return nil, nil, syms.errorf("%s: %v", st.syms.Name, err)
		}
	}
}

// perfKeeps applies perf's filters to a symbol table entry, but for the
// ones on names, and returns the symbol's range.
func perfKeeps(syms, runtime *elfFile, e rawSym, strsSize uint64) (start, end uint64, bad *badSymbol, ok bool) {
	typ := e.info & 0xf
	if e.name == 0 || e.shndx == uint16(elf.SHN_UNDEF) || uint64(e.name) >= strsSize {
		return 0, 0, nil, false
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
			return 0, 0, nil, false
		}
	default:
		return 0, 0, nil, false
	}
	if e.shndx == uint16(elf.SHN_ABS) {
		return 0, 0, nil, false
	}
	if int(e.shndx) >= len(syms.Sections) {
		return 0, 0, &badSymbol{section: e.shndx, in: syms}, true
	}
	sec := syms.Sections[e.shndx]
	if sec.Flags&elf.SHF_ALLOC == 0 {
		return 0, 0, nil, false
	}
	// A debug file keeps the headers of the sections it strips, as
	// NOBITS: the runtime file has the real ones.
	if sec.Type == elf.SHT_NOBITS {
		if int(e.shndx) >= len(runtime.Sections) {
			return 0, 0, &badSymbol{section: e.shndx, in: runtime}, true
		}
		sec = runtime.Sections[e.shndx]
	}
	if label && !strings.Contains(sec.Name, "text") && !strings.Contains(sec.Name, "data") {
		return 0, 0, nil, false
	}
	start = e.value
	if syms.Machine == elf.EM_ARM && typ == typeFunc {
		start &^= 1 // the Thumb bit
	}
	return start, start + e.size, nil, true
}

// readNames reads the names of the symbols from first on, which stand for
// them by their offsets in st's strings, in the order of the strings, one
// window of them at a time. It fills in what perf looks at in names, and
// returns the symbols perf skips for their names (mapping symbols).
func (b *builder) readNames(syms *elfFile, st symbolTable, first int32, bad map[int32]*badSymbol) (map[int32]bool, error) {
	infos := b.info[first:]
	order := make([]uint64, len(infos))
	for i, info := range infos {
		order[i] = uint64(info.name)<<32 | uint64(i)
	}
	slices.Sort(order)
	if len(infos) > 0 && st.strsStored {
		b.strtabs = append(b.strtabs, extent{st.strs.Offset, st.strs.Offset + st.strs.Size})
	}
	var skip map[int32]bool
	strs := stringReader{r: st.strs.Open(), size: st.strs.Size}
	for _, o := range order {
		id, off := first+int32(uint32(o)), o>>32
		info := &b.info[id]
		name, err := strs.at(off)
		if err != nil {
			return nil, syms.errorf("%s: %v", st.strs.Name, err)
		}
		if isMappingSymbol(syms.Machine, name) {
			if skip == nil {
				skip = make(map[int32]bool)
			}
			skip[id] = true
		}
		ref := inFile | nameRef(st.strs.Offset+off)
		if !st.strsStored {
			ref = b.keep(name)
		}
		*info = describe(name, ref, info.bind, info.typ)
		if bad := bad[id]; bad != nil {
			bad.name = string(name)
		}
	}
	return skip, nil
}

// isMappingSymbol tells whether name marks code or data in ARM or RISC-V
// code, which perf skips.
func isMappingSymbol(m elf.Machine, name []byte) bool {
	switch m {
	case elf.EM_ARM, elf.EM_AARCH64:
		return len(name) >= 2 && name[0] == '$' && strings.IndexByte("adtx", name[1]) >= 0 && (len(name) == 2 || name[2] == '.')
	case elf.EM_RISCV:
		return len(name) >= 2 && name[0] == '$' && (name[1] == 'd' || name[1] == 'x')
	}
	return false
}

// A stringReader reads the strings of a string table at increasing
// offsets, through a window that slides along the table.
type stringReader struct {
	r    io.ReadSeeker
	size uint64
	buf  []byte // the table's bytes [off, off+len(buf))
	off  uint64
}

// at returns the string at off, up to a NUL or the end of the table; off
// is no lower than in the call before.
func (sr *stringReader) at(off uint64) ([]byte, error) {
	for {
		if off >= sr.off && off-sr.off < uint64(len(sr.buf)) {
			s := sr.buf[off-sr.off:]
			if i := bytes.IndexByte(s, 0); i >= 0 {
				return s[:i], nil
			}
			if sr.off+uint64(len(sr.buf)) == sr.size {
				return s, nil
			}
			// The string goes on past the window: move it to off,
			// and make it larger if the string fills it.
			if off == sr.off {
				sr.buf = slices.Grow(sr.buf, len(sr.buf))
			}
			sr.off, sr.buf = off, sr.buf[:copy(sr.buf, s)]
		} else {
			if sr.buf == nil {
				sr.buf = make([]byte, 0, min(256<<10, sr.size))
			}
			if _, err := sr.r.Seek(int64(off), io.SeekStart); err != nil {
				return nil, err
			}
			sr.off, sr.buf = off, sr.buf[:0]
		}
		n := len(sr.buf)
		want := min(uint64(cap(sr.buf)-n), sr.size-(sr.off+uint64(n)))
		m, err := io.ReadFull(sr.r, sr.buf[n:n+int(want)])
		sr.buf = sr.buf[:n+m]
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("ends at %d of its %d bytes", sr.off+uint64(len(sr.buf)), sr.size)
			}
			return nil, err
		}
	}
}

// readString reads the string at off of r, up to a NUL or end.
func readString(r io.ReaderAt, off, end uint64) ([]byte, error) {
	if off >= end {
		return nil, fmt.Errorf("string at %d, past the end of its table at %d", off, end)
	}
	buf := make([]byte, 0, min(end-off, 128))
	for {
		n := len(buf)
		buf = buf[:min(uint64(cap(buf)), end-off)]
		m, err := r.ReadAt(buf[n:], int64(off)+int64(n))
		if i := bytes.IndexByte(buf[n:n+m], 0); i >= 0 {
			return buf[:n+i], nil
		}
		if buf = buf[:n+m]; uint64(len(buf)) == end-off {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		buf = slices.Grow(buf, len(buf))
	}
}

// rawSym is an ELF symbol table entry.
type rawSym struct {
	name        uint32
	info, other uint8
	shndx       uint16
	value, size uint64
}

func readSym(b []byte, class elf.Class, bo binary.ByteOrder) rawSym {
	if class == elf.ELFCLASS32 {
		return rawSym{name: bo.Uint32(b), value: uint64(bo.Uint32(b[4:])), size: uint64(bo.Uint32(b[8:])),
			info: b[12], other: b[13], shndx: bo.Uint16(b[14:])}
	}
	return rawSym{name: bo.Uint32(b), info: b[4], other: b[5], shndx: bo.Uint16(b[6:]),
		value: bo.Uint64(b[8:]), size: bo.Uint64(b[16:])}
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
	relData, err := runtime.Data(rel)
	if err != nil {
		return
	}
	st, err := runtime.symbolTable(dynsym)
	if err != nil || st.strs.Size == 0 {
		return
	}
	entries, err := runtime.readerAt(dynsym)
	if err != nil {
		return
	}
	strs, err := runtime.readerAt(st.strs)
	if err != nil {
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
	sym := make([]byte, st.entSize)
	for i := uint64(0); i < n; i++ {
		var symIdx uint64
		r := relData[i*uint64(relSize):]
		if runtime.Class == elf.ELFCLASS32 {
			symIdx = uint64(runtime.ByteOrder.Uint32(r[4:]) >> 8)
		} else {
			symIdx = runtime.ByteOrder.Uint64(r[8:]) >> 32
		}
		var name []byte
		if symIdx < dynsym.Size/uint64(st.entSize) {
			if _, err := entries.ReadAt(sym, int64(symIdx)*int64(st.entSize)); err == nil {
				e := readSym(sym, runtime.Class, runtime.ByteOrder)
				name, _ = readString(strs, uint64(e.name), st.strs.Size)
			}
		}
		name = append(name, "@plt"...)
		added = b.add(added, describe(name, b.keep(name), bindGlobal, typeFunc), addr, addr+entry)
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
