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
// DWARF: internal/elfwrite writes the ELF structures, and the DWARF and
// eh_frame writers here are written by hand.
package jitelf

import (
	"crypto/sha1"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"iter"
	"runtime"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/elfwrite"
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
	img := appender{b.out[:0]}
	lay, err := b.build(&img, opts, len(fns), slice(fns))
	b.out = img.b[:0]
	if err != nil {
		return lay, err
	}
	_, err = w.Write(img.b)
	return lay, err
}

// Append appends an image of fns to dst, as Write writes it, and returns the
// extended slice.
func Append(dst []byte, opts Options, fns []Function) ([]byte, Layout, error) {
	b := builders.Get().(*builder)
	defer builders.Put(b)
	img := appender{dst}
	lay, err := b.build(&img, opts, len(fns), slice(fns))
	if err != nil {
		return dst, lay, err
	}
	return img.b, lay, nil
}

// WriterAt is where WriteFunc writes: a file, front to back, then its
// build ID at its place.
type WriterAt interface {
	io.Writer
	io.WriterAt
}

// WriteFunc writes an image of n functions, which fn gives by index, to w, as
// Write writes fns, and holds neither the image nor its tables in memory:
// for a caller that holds its functions otherwise (an image of a million
// jitted functions would double them as Functions, and hold as much again
// as the image). fn is asked for each function several times, in order.
func WriteFunc(w WriterAt, opts Options, n int, fn func(int) Function) (Layout, error) {
	b := builders.Get().(*builder)
	defer builders.Put(b)
	return b.build(w, opts, n, fn)
}

func slice(fns []Function) func(int) Function {
	return func(i int) Function { return fns[i] }
}

// appender is a WriterAt that appends to a slice, writing at an offset
// into what it holds.
type appender struct{ b []byte }

func (a *appender) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func (a *appender) WriteAt(p []byte, off int64) (int, error) {
	return copy(a.b[off:], p), nil
}

// hasher hashes what it writes to w, but for the bytes at skip: the
// build-id, which is the hash of the rest.
type hasher struct {
	w    io.Writer
	h    hash.Hash
	n    uint64
	skip uint64
}

func (h *hasher) Write(p []byte) (int, error) {
	from, to := h.n, h.n+uint64(len(p))
	if to <= h.skip || from >= h.skip+BuildIDSize {
		h.h.Write(p)
	} else {
		h.h.Write(p[:h.skip-min(h.skip, from)])
		h.h.Write(p[min(h.skip+BuildIDSize-from, uint64(len(p))):])
	}
	h.n = to
	return h.w.Write(p)
}

// builders keep the scratch space of earlier images, so that writing one
// image per function allocates little.
var builders = sync.Pool{New: func() any { return &builder{files: make(map[string]uint32)} }}

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

// format resolves the options' zero fields.
func (o Options) format() (elfwrite.Format, elf.Machine, error) {
	var f elfwrite.Format
	mach, class, big := o.Machine, o.Class, false
	if hm, hc := hostelf.Machine(); mach == elf.EM_NONE || mach == hm {
		if mach == elf.EM_NONE && hm == elf.EM_NONE {
			return f, mach, fmt.Errorf("jitelf: no ELF machine known for GOARCH %s; set Options.Machine", runtime.GOARCH)
		}
		mach = hm
		if class == elf.ELFCLASSNONE {
			class = hc
		}
		big = hostBigEndian()
	} else if mi, ok := machines[mach]; ok {
		if class == elf.ELFCLASSNONE {
			class = mi.class
		}
		big = mi.big
	}
	switch class {
	case elf.ELFCLASS64, elf.ELFCLASS32:
		f.Class = class
	case elf.ELFCLASSNONE:
		return f, mach, fmt.Errorf("jitelf: no usual ELF class known for machine %v; set Options.Class", mach)
	default:
		return f, mach, fmt.Errorf("jitelf: unknown ELF class %v", class)
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
		return f, mach, fmt.Errorf("jitelf: byte order %v is neither binary.LittleEndian nor BigEndian", o.ByteOrder)
	}
	f.Order = binary.LittleEndian
	if big {
		f.Order = binary.BigEndian
	}
	return f, mach, nil
}

// sectionNames are the names of the sections an image can have, in file
// order. All of them go in .shstrtab, present or not, as images always
// had them: the bytes of an image, and so its build-id, stay those earlier
// versions wrote for the same functions.
var sectionNames = [...]string{".text", ".eh_frame", ".eh_frame_hdr", ".note.gnu.build-id",
	".debug_abbrev", ".debug_info", ".debug_line", ".symtab", ".strtab", ".shstrtab"}

// ntGNUBuildID is NT_GNU_BUILD_ID, which debug/elf does not name.
const ntGNUBuildID = 3

// noteSize is the build-id note: namesz, descsz, type, "GNU\0", the id.
const noteSize = 12 + 4 + BuildIDSize

// builder holds one image in the making and scratch space kept across images.
type builder struct {
	f    elfwrite.File
	n    int                // functions
	fn   func(int) Function // each by index
	offs []uint64
	note []byte

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

	out []byte
}

func (b *builder) build(w WriterAt, opts Options, n int, fn func(int) Function) (Layout, error) {
	format, mach, err := opts.format()
	if err != nil {
		return Layout{}, err
	}
	for i := range n {
		if name := fn(i).Name; strings.IndexByte(name, 0) >= 0 {
			return Layout{}, fmt.Errorf("jitelf: function %d: name %q has a NUL byte", i, name)
		}
	}
	*b = builder{
		f: b.f, n: n, fn: fn, offs: make([]uint64, n), note: b.note[:0],
		eh: b.eh[:0], ehTable: b.ehTable[:0], ehCIEs: b.ehCIEs[:0], ehFrame: b.ehFrame[:0], ehHdr: b.ehHdr[:0],
		rows: b.rows[:0], files: b.files, fileNames: b.fileNames[:0], prog: b.prog[:0],
		line: b.line[:0], info: b.info[:0], abbrev: b.abbrev[:0], out: b.out,
	}
	clear(b.files)
	defer func() {
		// The pool must not keep the caller's functions alive.
		clear(b.fileNames)
		clear(b.eh)
		clear(b.files)
		b.fn, b.offs, b.lastFile = nil, nil, ""
	}()
	f := &b.f
	f.Reset()
	f.Format, f.Type, f.Machine = format, elf.ET_DYN, mach
	for _, name := range sectionNames {
		f.Names.Add(name)
	}

	for i := range n {
		b.parseEH(i)
	}
	hasEH := len(b.eh) > 0
	// PT_LOAD, PT_NOTE and, with unwinding tables, PT_GNU_EH_FRAME, set
	// once their sections are placed.
	f.Progs = append(f.Progs, make([]elf.ProgHeader, 2)...)
	if hasEH {
		f.Progs = append(f.Progs, elf.ProgHeader{})
	}

	textStart := f.Next(FuncAlign)
	cur := textStart
	for i := range n {
		off := elfwrite.AlignUp(cur, FuncAlign)
		b.offs[i] = off
		// An empty function still takes a byte, so that no two functions
		// share an address.
		cur = off + max(uint64(len(fn(i).Code)), 1)
	}
	f.Entry = textStart
	text := b.addAlloc(elf.SectionHeader{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_EXECINSTR,
		Size: cur - textStart, Addralign: FuncAlign}, nil)
	b.f.Sections[text].Contents = func(w io.Writer) error { return b.writeText(w, textStart, cur) }

	if hasEH {
		ehStart := f.Next(8)
		b.layoutEH(ehStart)
		b.addAlloc(elf.SectionHeader{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Addralign: 8}, b.ehFrame)
		hdrStart := f.Next(4)
		if hdrStart+uint64(len(b.ehTable))*8 > 1<<31 {
			return Layout{}, errors.New("jitelf: unwinding tables beyond 2 GiB into the image cannot be written")
		}
		b.writeEHHdr(ehStart, hdrStart)
		hdr := b.addAlloc(elf.SectionHeader{Name: ".eh_frame_hdr", Type: elf.SHT_PROGBITS, Addralign: 4}, b.ehHdr)
		f.Progs[2] = segment(elf.PT_GNU_EH_FRAME, &f.Sections[hdr])
	}
	b.note = b.appendNote(b.note)
	note := b.addAlloc(elf.SectionHeader{Name: ".note.gnu.build-id", Type: elf.SHT_NOTE, Addralign: 4}, b.note)
	f.Progs[1] = segment(elf.PT_NOTE, &f.Sections[note])
	// The PT_LOAD starts at 0 so that offset == address for everything, and
	// an unwinder that loads the image at start - pgoff (perf's libdw
	// unwinder: the first PT_LOAD's p_vaddr, rounded down by p_align, goes
	// at that base) finds every function where the MMAP2 says it is.
	allocEnd := f.Sections[note].Offset + noteSize
	f.Progs[0] = elf.ProgHeader{Type: elf.PT_LOAD, Flags: elf.PF_R | elf.PF_X, Filesz: allocEnd, Memsz: allocEnd, Align: 0x1000}

	if b.buildDWARF(textStart, cur-textStart) {
		for _, s := range [...]struct {
			name string
			data []byte
		}{{".debug_abbrev", b.abbrev}, {".debug_info", b.info}, {".debug_line", b.line}} {
			f.Add(elfwrite.Section{SectionHeader: elf.SectionHeader{Name: s.name, Type: elf.SHT_PROGBITS, Addralign: 1}, Data: s.data})
		}
	}
	b.addSymbols(text)

	// The id is the hash of every other byte of the image.
	desc := f.Sections[note].Offset + noteSize - BuildIDSize
	h := hasher{w: w, h: sha1.New(), skip: desc}
	size, err := f.WriteTo(&h)
	if err != nil {
		return Layout{}, fmt.Errorf("jitelf: %w", err)
	}
	lay := Layout{Offsets: b.offs, Size: size, DroppedLines: b.linesLost, DroppedFDEs: b.fdesLost}
	h.h.Sum(lay.BuildID[:0])
	if _, err := w.WriteAt(lay.BuildID[:], int64(desc)); err != nil {
		return Layout{}, fmt.Errorf("jitelf: %w", err)
	}
	return lay, nil
}

// writeText writes .text: each function's code at its offset, from start
// to end.
func (b *builder) writeText(w io.Writer, start, end uint64) error {
	var pad [FuncAlign]byte
	at := start
	for i := range b.n {
		if _, err := w.Write(pad[:b.offs[i]-at]); err != nil {
			return err
		}
		code := b.fn(i).Code
		if _, err := w.Write(code); err != nil {
			return err
		}
		at = b.offs[i] + uint64(len(code))
	}
	_, err := w.Write(pad[:end-at])
	return err
}

// addAlloc adds an allocated section, at an address equal to its offset
// (see the package doc). Without data, it is zeros for build to fill.
func (b *builder) addAlloc(h elf.SectionHeader, data []byte) int {
	h.Flags |= elf.SHF_ALLOC
	h.Addr = b.f.Next(h.Addralign)
	return b.f.Add(elfwrite.Section{SectionHeader: h, Data: data})
}

// segment is the program header of one allocated section.
func segment(typ elf.ProgType, s *elfwrite.Section) elf.ProgHeader {
	return elf.ProgHeader{Type: typ, Flags: elf.PF_R, Off: s.Offset, Vaddr: s.Addr, Paddr: s.Addr, Filesz: s.Size, Memsz: s.Size, Align: s.Addralign}
}

func (b *builder) appendNote(out []byte) []byte {
	o := b.f.Order
	out = o.AppendUint32(out, 4) // namesz, "GNU\0"
	out = o.AppendUint32(out, BuildIDSize)
	out = o.AppendUint32(out, ntGNUBuildID)
	out = append(out, "GNU\x00"...)
	return append(out, make([]byte, BuildIDSize)...) // filled in once the rest is hashed
}

// addSymbols gives the file one local STT_FUNC per function, in order, in
// section text.
func (b *builder) addSymbols(text int) {
	info := elf.ST_INFO(elf.STB_LOCAL, elf.STT_FUNC)
	b.f.Symbols = func(yield func(elfwrite.Symbol) bool) {
		for i := range b.n {
			fn := b.fn(i)
			if !yield(elfwrite.Symbol{Name: fn.Name, Info: info, Other: byte(elf.STV_DEFAULT), Section: text, Value: b.offs[i], Size: uint64(len(fn.Code))}) {
				return
			}
		}
	}
}
