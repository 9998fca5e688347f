// Package jitelf writes ELF images of just-in-time compiled code, for perf
// report, perf annotate and the standard ELF and DWARF tools (readelf,
// objdump, addr2line, llvm-dwarfdump) to read.
//
// An image holds one function, as perf inject writes per CODE_LOAD, or many:
// a packed image holds every function of a jitdump in one file. Either way
// each function's code sits at its own file offset, equal to its address in
// the image, inside one read+execute PT_LOAD that starts at offset 0. A
// profiler ties a function's runtime address to the image with an MMAP2 event
// of start = the runtime address, len = the code size and pgoff =
// Layout.Offsets[i]: perf turns a sample's ip into ip - start + pgoff and
// looks that up among the symbols, whose st_value it first lowers by the
// PT_LOAD's p_vaddr - p_offset (0 here). perf never maps the file, so pgoff
// needs no page alignment; functions are only 16-byte aligned, to keep
// instruction alignment. With offset == address everywhere, an unwinder that
// places the image at start - pgoff finds every function, and its unwinding
// tables, where they belong; recent perf's libdw unwinder does, for every
// image but those named /tmp/jitted-*, which it places at start.
//
// Each image has a symbol table with one STT_FUNC per function (its name,
// code address and size), a .note.gnu.build-id (SHA-1 of the whole image but
// the id itself, so any change to code, names, lines or unwinding tables
// changes it, and identical input gives identical bytes), and, when the dump
// has them:
//
//   - .eh_frame and .eh_frame_hdr from UNWINDING_INFO. Runtimes compute the
//     pc-relative pointers in their eh_frame for perf's layout, the eh_frame
//     8-aligned right after the code; perf copies the eh_frame and the
//     runtime's eh_frame_hdr as they are. This package instead parses each
//     eh_frame, moves every FDE's pc_begin to where its function is in this
//     image, and writes its own .eh_frame_hdr with a sorted search table over
//     all functions, so packed images carry unwinding tables too. In a single
//     image the layout is perf's, so the bytes come out as the runtime wrote
//     them. FDEs that do not land inside their function under that layout,
//     or whose pointer encoding cannot be moved (indirect, text- or
//     data-relative, LEB128), are left out and counted in
//     Layout.DroppedFDEs. Personality and LSDA pointers are copied unchanged:
//     they point into the runtime's memory, and unwinding does not use them.
//   - DWARF 4 .debug_line, .debug_info and .debug_abbrev from DEBUG_INFO: one
//     compile unit over all the code (name, low_pc, high_pc, stmt_list), a
//     DW_TAG_subprogram per function (name, low_pc, high_pc), and one
//     line-table sequence per function, its files in the header's file
//     table. Where perf writes a unit with only DW_AT_stmt_list, which GNU
//     addr2line reads but llvm-addr2line and llvm-dwarfdump do not, this
//     unit serves both. Runtimes write entries outside their function
//     (Erlang: one before the start that gives the line in effect there, one
//     at the end with line 0): within a function, the last entry before its
//     start is moved to the start, unless an entry is there already, and
//     the others before it are dropped, as are entries at or past its end;
//     drops are counted in Layout.DroppedLines. LLVM's entries are 0x40 too
//     high (see jitdump.CodeLoad.LineBias). The entry's discriminator, which V8 fills with
//     the column, becomes the row's column.
//
// Go's debug/elf and debug/dwarf only read, and no library writes ELF or
// DWARF, so the ELF, DWARF and eh_frame writers here are written by hand,
// with debug/elf's constants.
package jitelf

import (
	"crypto/sha1"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/jitdump"
)

// Function is one function to put in an image.
type Function struct {
	Name string // the symbol's name; any bytes but NUL
	Code []byte // may be empty
	// CodeAddr is the runtime address of Code, to which Lines' addresses
	// refer. It is not in the image: the MMAP2 event ties the two.
	CodeAddr uint64
	// Lines are the DEBUG_INFO entries, with the runtime's absolute
	// addresses: a *jitdump.DebugInfo's Entries, or slices.Values of a
	// slice. nil for none.
	Lines iter.Seq[jitdump.DebugEntry]
	// LineBias is subtracted from every line address first; LineBias
	// tells which runtimes need it.
	LineBias uint64
	Unwind   *jitdump.UnwindingInfo // nil for none
}

// Options choose the image's ELF flavour. Zero fields are derived: the
// machine is the host's, the class and byte order the machine's own (the
// host's for the host's machine).
type Options struct {
	Machine   elf.Machine
	Class     elf.Class
	ByteOrder binary.ByteOrder // binary.LittleEndian, BigEndian or NativeEndian
}

// OptionsFor returns the options for the code of a dump with header h: its
// elf_mach (0 meaning the recording host's, taken to be this one) and the
// byte order it was written in, which is the runtime's.
func OptionsFor(h jitdump.Header) Options {
	return Options{Machine: elf.Machine(h.ElfMach), ByteOrder: h.ByteOrder}
}

// Layout tells where Write put things.
type Layout struct {
	// Offsets holds each function's file offset, which is also its address
	// in the image: the pgoff of an MMAP2 event that maps the function.
	Offsets []uint64
	BuildID [BuildIDSize]byte // as in the image's .note.gnu.build-id
	Size    int64             // of the image, in bytes
	// DroppedLines counts line entries outside their function that were
	// left out; DroppedFDEs, FDEs that were (see the package doc).
	DroppedLines int
	DroppedFDEs  int
}

// BuildIDSize is the length of the build-id, a SHA-1 hash.
const BuildIDSize = sha1.Size

// FuncAlign is the alignment of each function's code in an image.
const FuncAlign = 16

// Write writes an image of fns to w: for one function, an image like the
// one perf inject writes for it; for more, a packed image, the functions in
// the order given.
func Write(w io.Writer, opts Options, fns []Function) (Layout, error) {
	b := builders.Get().(*builder)
	defer builders.Put(b)
	out, lay, err := b.build(b.out[:0], opts, fns)
	b.out = out[:0]
	if err != nil {
		return lay, err
	}
	_, err = w.Write(out)
	return lay, err
}

// Append appends an image of fns to dst, as Write writes it, and returns the
// extended slice.
func Append(dst []byte, opts Options, fns []Function) ([]byte, Layout, error) {
	b := builders.Get().(*builder)
	defer builders.Put(b)
	return b.build(dst, opts, fns)
}

// builders keep the scratch space of earlier images, so that writing one
// image per function allocates little.
var builders = sync.Pool{New: func() any { return &builder{files: make(map[string]uint32)} }}

// target is the resolved ELF flavour.
type target struct {
	mach  elf.Machine
	is64  bool
	data  elf.Data
	order byteOrder
}

func (t *target) addrSize() int { return int(pick(t.is64, 8, 4)) }

// ehdrSize and the other sizes are those of the ELF structures of the class.
func (t *target) ehdrSize() uint64 { return pick(t.is64, 64, 52) }
func (t *target) phdrSize() uint64 { return pick(t.is64, 56, 32) }
func (t *target) shdrSize() uint64 { return pick(t.is64, 64, 40) }
func (t *target) symSize() uint64  { return pick(t.is64, 24, 16) }

func pick(is64 bool, a, b uint64) uint64 {
	if is64 {
		return a
	}
	return b
}

// machineInfo is a machine's usual class and byte order.
type machineInfo struct {
	class elf.Class
	big   bool
}

var machines = map[elf.Machine]machineInfo{
	elf.EM_X86_64:    {elf.ELFCLASS64, false},
	elf.EM_386:       {elf.ELFCLASS32, false},
	elf.EM_AARCH64:   {elf.ELFCLASS64, false},
	elf.EM_ARM:       {elf.ELFCLASS32, false},
	elf.EM_RISCV:     {elf.ELFCLASS64, false},
	elf.EM_LOONGARCH: {elf.ELFCLASS64, false},
	elf.EM_PPC64:     {elf.ELFCLASS64, true},
	elf.EM_PPC:       {elf.ELFCLASS32, true},
	elf.EM_S390:      {elf.ELFCLASS64, true},
	elf.EM_MIPS:      {elf.ELFCLASS32, true},
	elf.EM_SPARCV9:   {elf.ELFCLASS64, true},
}

func hostBigEndian() bool { return binary.NativeEndian.Uint16([]byte{0, 1}) == 1 }

func (o Options) target() (target, error) {
	t := target{mach: o.Machine}
	class, big := o.Class, false
	if hm, hc := hostelf.Machine(); t.mach == elf.EM_NONE || t.mach == hm {
		if t.mach == elf.EM_NONE && hm == elf.EM_NONE {
			return t, fmt.Errorf("jitelf: no ELF machine known for GOARCH %s; set Options.Machine", runtime.GOARCH)
		}
		t.mach = hm
		if class == elf.ELFCLASSNONE {
			class = hc
		}
		big = hostBigEndian()
	} else if mi, ok := machines[t.mach]; ok {
		if class == elf.ELFCLASSNONE {
			class = mi.class
		}
		big = mi.big
	}
	switch class {
	case elf.ELFCLASS64:
		t.is64 = true
	case elf.ELFCLASS32:
	case elf.ELFCLASSNONE:
		return t, fmt.Errorf("jitelf: no usual ELF class known for machine %v; set Options.Class", t.mach)
	default:
		return t, fmt.Errorf("jitelf: unknown ELF class %v", class)
	}
	switch o.ByteOrder {
	case nil:
	case binary.LittleEndian:
		big = false
	case binary.BigEndian:
		big = true
	case binary.NativeEndian:
		big = hostBigEndian()
	default:
		return t, fmt.Errorf("jitelf: byte order %v is neither binary.LittleEndian nor BigEndian", o.ByteOrder)
	}
	if big {
		t.data, t.order = elf.ELFDATA2MSB, binary.BigEndian
	} else {
		t.data, t.order = elf.ELFDATA2LSB, binary.LittleEndian
	}
	return t, nil
}

// Section slots, in file order. An absent optional section gets no header
// but keeps its name in shstrtab (a few bytes, for fixed name offsets).
// .text, always present, is always section 1, which the symbols name.
const (
	secNull = iota
	secText
	secEHFrame
	secEHFrameHdr
	secNote
	secDebugAbbrev
	secDebugInfo
	secDebugLine
	secSymtab
	secStrtab
	secShstrtab
	numSections
)

var sectionNames = [numSections]string{"", ".text", ".eh_frame", ".eh_frame_hdr", ".note.gnu.build-id",
	".debug_abbrev", ".debug_info", ".debug_line", ".symtab", ".strtab", ".shstrtab"}

var shstrtab, shName = func() ([]byte, [numSections]uint32) {
	var tab []byte
	var off [numSections]uint32
	for i, n := range sectionNames {
		off[i] = uint32(len(tab))
		if i == secNull {
			tab = append(tab, 0)
			continue
		}
		tab = append(append(tab, n...), 0)
	}
	return tab, off
}()

// ntGNUBuildID is NT_GNU_BUILD_ID, which debug/elf does not name.
const ntGNUBuildID = 3

// noteSize is the build-id note: namesz, descsz, type, "GNU\0", the id.
const noteSize = 12 + 4 + BuildIDSize

// section is a section header's fields, and what to write at its offset.
type section struct {
	typ            elf.SectionType
	flags          elf.SectionFlag
	off, size      uint64 // the address is off for allocated sections, else 0
	link, info     uint32
	align, entsize uint64
	present        bool
	data           []byte // the contents, but for .text and the note
}

// builder holds one image in the making and scratch space kept across images.
type builder struct {
	t     target
	fns   []Function
	offs  []uint64
	secs  [numSections]section
	phnum int

	// unwinding
	eh       []ehEntry
	ehTable  []ehTableEntry
	ehCIEs   []int
	ehFrame  []byte
	ehHdr    []byte
	fdesLost int

	// lines
	rows          []row
	files         map[string]uint32
	fileNames     []string
	lastFile      string
	lastFileIndex uint32
	prog          []byte
	line          []byte
	info          []byte
	abbrev        []byte
	linesLost     int

	symtab []byte
	strtab []byte
	out    []byte
}

func (b *builder) build(dst []byte, opts Options, fns []Function) ([]byte, Layout, error) {
	t, err := opts.target()
	if err != nil {
		return dst, Layout{}, err
	}
	for i := range fns {
		if strings.IndexByte(fns[i].Name, 0) >= 0 {
			return dst, Layout{}, fmt.Errorf("jitelf: function %d: name %q has a NUL byte", i, fns[i].Name)
		}
	}
	*b = builder{
		t: t, fns: fns, offs: make([]uint64, len(fns)),
		eh: b.eh[:0], ehTable: b.ehTable[:0], ehCIEs: b.ehCIEs[:0], ehFrame: b.ehFrame[:0], ehHdr: b.ehHdr[:0],
		rows: b.rows[:0], files: b.files, fileNames: b.fileNames[:0], prog: b.prog[:0],
		line: b.line[:0], info: b.info[:0], abbrev: b.abbrev[:0],
		symtab: b.symtab[:0], strtab: b.strtab[:0], out: b.out,
	}
	clear(b.files)
	defer func() {
		// The pool must not keep the caller's functions alive.
		clear(b.fileNames)
		clear(b.eh)
		clear(b.files)
		b.fns, b.offs, b.lastFile = nil, nil, ""
	}()

	for i := range fns {
		b.parseEH(i)
	}
	hasEH := len(b.eh) > 0
	b.phnum = 2 // PT_LOAD, PT_NOTE
	if hasEH {
		b.phnum++ // PT_GNU_EH_FRAME
	}

	textStart := alignUp(t.ehdrSize()+uint64(b.phnum)*t.phdrSize(), FuncAlign)
	cur := textStart
	for i := range fns {
		off := alignUp(cur, FuncAlign)
		b.offs[i] = off
		// An empty function still takes a byte, so that no two functions
		// share an address.
		cur = off + max(uint64(len(fns[i].Code)), 1)
	}
	b.secs[secText] = section{typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR,
		off: textStart, size: cur - textStart, align: FuncAlign, present: true}

	if hasEH {
		ehStart := alignUp(cur, 8)
		b.layoutEH(ehStart)
		b.secs[secEHFrame] = section{typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, off: ehStart, size: uint64(len(b.ehFrame)),
			align: 8, present: true, data: b.ehFrame}
		hdrStart := alignUp(ehStart+uint64(len(b.ehFrame)), 4)
		if hdrStart+uint64(len(b.ehTable))*8 > 1<<31 {
			return dst, Layout{}, errors.New("jitelf: unwinding tables beyond 2 GiB into the image cannot be written")
		}
		b.writeEHHdr(ehStart, hdrStart)
		b.secs[secEHFrameHdr] = section{typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC, off: hdrStart, size: uint64(len(b.ehHdr)),
			align: 4, present: true, data: b.ehHdr}
		cur = hdrStart + uint64(len(b.ehHdr))
	}
	noteStart := alignUp(cur, 4)
	b.secs[secNote] = section{typ: elf.SHT_NOTE, flags: elf.SHF_ALLOC, off: noteStart, size: noteSize, align: 4, present: true}
	cur = noteStart + noteSize
	allocEnd := cur

	if b.buildDWARF(textStart, b.secs[secText].size) {
		for _, s := range []struct {
			idx  int
			data []byte
		}{{secDebugAbbrev, b.abbrev}, {secDebugInfo, b.info}, {secDebugLine, b.line}} {
			b.secs[s.idx] = section{typ: elf.SHT_PROGBITS, off: cur, size: uint64(len(s.data)), align: 1, present: true, data: s.data}
			cur += uint64(len(s.data))
		}
	}

	b.buildSymbols()
	cur = alignUp(cur, uint64(t.addrSize()))
	b.secs[secSymtab] = section{typ: elf.SHT_SYMTAB, off: cur, size: uint64(len(b.symtab)), link: secStrtab,
		info: uint32(len(fns) + 1), align: uint64(t.addrSize()), entsize: t.symSize(), present: true, data: b.symtab}
	cur += uint64(len(b.symtab))
	b.secs[secStrtab] = section{typ: elf.SHT_STRTAB, off: cur, size: uint64(len(b.strtab)), align: 1, present: true, data: b.strtab}
	cur += uint64(len(b.strtab))
	b.secs[secShstrtab] = section{typ: elf.SHT_STRTAB, off: cur, size: uint64(len(shstrtab)), align: 1, present: true, data: shstrtab}
	cur += uint64(len(shstrtab))

	shnum := 0
	var index [numSections]uint32 // section slot to section header index
	for i := range b.secs {
		if i == secNull || b.secs[i].present {
			index[i] = uint32(shnum)
			shnum++
		}
	}
	b.secs[secSymtab].link = index[secStrtab]
	shoff := alignUp(cur, 8)
	size := shoff + uint64(shnum)*t.shdrSize()
	if !t.is64 && size > 1<<32 {
		return dst, Layout{}, fmt.Errorf("jitelf: the image needs %d bytes, more than ELF32 can address", size)
	}
	if uint64(int(size)) != size {
		return dst, Layout{}, errors.New("jitelf: the image is too large for this machine's memory")
	}

	base := len(dst)
	out := slices.Grow(dst, int(size))
	out = b.appendEhdr(out, textStart, shoff, shnum, index[secShstrtab])
	out = b.appendPhdrs(out, allocEnd)
	for i := range b.secs {
		s := &b.secs[i]
		switch {
		case i == secText:
			for j := range fns {
				out = pad(out, base, b.offs[j])
				out = append(out, fns[j].Code...)
			}
			out = pad(out, base, s.off+s.size)
		case i == secNote:
			out = pad(out, base, s.off)
			out = b.appendNote(out)
		case s.present && i != secNull:
			out = pad(out, base, s.off)
			out = append(out, s.data...)
		}
	}
	out = pad(out, base, shoff)
	out = b.appendShdrs(out, &index)

	// The id is the hash of every other byte of the image.
	img := out[base:]
	desc := b.secs[secNote].off + noteSize - BuildIDSize
	h := sha1.New()
	h.Write(img[:desc])
	h.Write(img[desc+BuildIDSize:])
	lay := Layout{Offsets: b.offs, Size: int64(size), DroppedLines: b.linesLost, DroppedFDEs: b.fdesLost}
	h.Sum(lay.BuildID[:0])
	copy(img[desc:], lay.BuildID[:])
	return out, lay, nil
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

// pad appends zeros to b until the image that starts at base reaches off.
func pad(b []byte, base int, off uint64) []byte {
	n := int(off) - (len(b) - base)
	return append(b, make([]byte, n)...)
}

// appendAddr appends an address-sized (class-sized) value.
func (t *target) appendAddr(b []byte, v uint64) []byte {
	if t.is64 {
		return t.order.AppendUint64(b, v)
	}
	return t.order.AppendUint32(b, uint32(v))
}

func (b *builder) appendEhdr(out []byte, entry, shoff uint64, shnum int, shstrndx uint32) []byte {
	t := &b.t
	class := elf.ELFCLASS32
	if t.is64 {
		class = elf.ELFCLASS64
	}
	out = append(out, elf.ELFMAG...)
	out = append(out, byte(class), byte(t.data), byte(elf.EV_CURRENT), byte(elf.ELFOSABI_NONE))
	out = append(out, make([]byte, elf.EI_NIDENT-8)...)
	o := t.order
	out = o.AppendUint16(out, uint16(elf.ET_DYN))
	out = o.AppendUint16(out, uint16(t.mach))
	out = o.AppendUint32(out, uint32(elf.EV_CURRENT))
	out = t.appendAddr(out, entry)
	out = t.appendAddr(out, t.ehdrSize()) // phoff: right after this header
	out = t.appendAddr(out, shoff)
	out = o.AppendUint32(out, 0) // flags
	out = o.AppendUint16(out, uint16(t.ehdrSize()))
	out = o.AppendUint16(out, uint16(t.phdrSize()))
	out = o.AppendUint16(out, uint16(b.phnum))
	out = o.AppendUint16(out, uint16(t.shdrSize()))
	out = o.AppendUint16(out, uint16(shnum))
	return o.AppendUint16(out, uint16(shstrndx))
}

func (b *builder) appendPhdrs(out []byte, allocEnd uint64) []byte {
	// The PT_LOAD starts at 0 so that offset == address for everything, and
	// an unwinder that loads the image at start - pgoff (perf's libdw
	// unwinder: the first PT_LOAD's p_vaddr, rounded down by p_align, goes
	// at that base) finds every function where the MMAP2 says it is.
	out = b.appendPhdr(out, elf.PT_LOAD, elf.PF_R|elf.PF_X, 0, allocEnd, 0x1000)
	note := &b.secs[secNote]
	out = b.appendPhdr(out, elf.PT_NOTE, elf.PF_R, note.off, note.size, note.align)
	if hdr := &b.secs[secEHFrameHdr]; hdr.present {
		out = b.appendPhdr(out, elf.PT_GNU_EH_FRAME, elf.PF_R, hdr.off, hdr.size, hdr.align)
	}
	return out
}

func (b *builder) appendPhdr(out []byte, typ elf.ProgType, flags elf.ProgFlag, off, size, align uint64) []byte {
	t := &b.t
	o := t.order
	out = o.AppendUint32(out, uint32(typ))
	if t.is64 {
		out = o.AppendUint32(out, uint32(flags))
	}
	for _, v := range [...]uint64{off, off, off, size, size} { // offset, vaddr, paddr, filesz, memsz
		out = t.appendAddr(out, v)
	}
	if !t.is64 {
		out = o.AppendUint32(out, uint32(flags))
	}
	return t.appendAddr(out, align)
}

func (b *builder) appendNote(out []byte) []byte {
	o := b.t.order
	out = o.AppendUint32(out, 4) // namesz, "GNU\0"
	out = o.AppendUint32(out, BuildIDSize)
	out = o.AppendUint32(out, ntGNUBuildID)
	out = append(out, "GNU\x00"...)
	return append(out, make([]byte, BuildIDSize)...) // filled in once the rest is hashed
}

func (b *builder) appendShdrs(out []byte, index *[numSections]uint32) []byte {
	t := &b.t
	o := t.order
	for i := range b.secs {
		s := &b.secs[i]
		if i != secNull && !s.present {
			continue
		}
		addr := uint64(0)
		if s.flags&elf.SHF_ALLOC != 0 {
			addr = s.off
		}
		out = o.AppendUint32(out, shName[i])
		out = o.AppendUint32(out, uint32(s.typ))
		out = t.appendAddr(out, uint64(s.flags))
		out = t.appendAddr(out, addr)
		out = t.appendAddr(out, s.off)
		out = t.appendAddr(out, s.size)
		out = o.AppendUint32(out, s.link)
		out = o.AppendUint32(out, s.info)
		out = t.appendAddr(out, s.align)
		out = t.appendAddr(out, s.entsize)
	}
	return out
}

// buildSymbols fills .symtab and .strtab: the null symbol, then one local
// STT_FUNC per function, in order.
func (b *builder) buildSymbols() {
	t := &b.t
	o := t.order
	n := 1
	for i := range b.fns {
		n += len(b.fns[i].Name) + 1
	}
	b.strtab = slices.Grow(b.strtab[:0], n)
	b.strtab = append(b.strtab, 0)
	b.symtab = slices.Grow(b.symtab[:0], (len(b.fns)+1)*int(t.symSize()))
	b.symtab = append(b.symtab, make([]byte, t.symSize())...)
	info := byte(elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC))
	for i := range b.fns {
		fn := &b.fns[i]
		name := uint32(len(b.strtab))
		if fn.Name == "" {
			name = 0 // the empty string that opens the table
		} else {
			b.strtab = append(append(b.strtab, fn.Name...), 0)
		}
		val, size := b.offs[i], uint64(len(fn.Code))
		b.symtab = o.AppendUint32(b.symtab, name)
		if t.is64 {
			b.symtab = append(b.symtab, info, byte(elf.STV_DEFAULT))
			b.symtab = o.AppendUint16(b.symtab, secText)
			b.symtab = o.AppendUint64(b.symtab, val)
			b.symtab = o.AppendUint64(b.symtab, size)
		} else {
			b.symtab = o.AppendUint32(b.symtab, uint32(val))
			b.symtab = o.AppendUint32(b.symtab, uint32(size))
			b.symtab = append(b.symtab, info, byte(elf.STV_DEFAULT))
			b.symtab = o.AppendUint16(b.symtab, secText)
		}
	}
}
