package objtool

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/google/pprof/driver"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
)

// elfFile is an executable or shared library: pprof reads them with
// binutils (nm, objdump, addr2line), but that code is internal to its
// module. Symbols come from elfsym, with perf's rules and names, so they
// are the profile's; the code from the file itself. Source lines would need
// DWARF, and the profile already has the lines jitprof found.
type elfFile struct {
	path string
	f    *elfsym.File // the code's: sections read no further than it holds
	syms *elfsym.Table
}

func openELF(p foreign.Path) (*elfFile, error) {
	syms, err := elfsym.OpenRecorded(p, elfsym.Recorded{})
	if err != nil {
		return nil, err
	}
	f, err := elfsym.OpenFile(p)
	if err == nil {
		if id := f.BuildID(); !bytes.Equal(id, syms.BuildID()) {
			// Replaced between the two opens: the code would not be
			// the file whose build-id the caller checks.
			f.Close()
			err = fmt.Errorf("%s: replaced while it was read: build-id %x, then %x: %w", p, syms.BuildID(), id, elfsym.ErrOtherFile)
		}
	}
	if err != nil {
		syms.Close()
		return nil, err
	}
	return &elfFile{path: p.String(), f: f, syms: syms}, nil
}

// openVDSO reads the recorded kernel's vDSO: its copy in files, else the
// running kernel's, as perfprof named it.
func openVDSO(files *contract.Files) (*elfFile, error) {
	var image []byte
	var err error
	if files != nil && files.VDSO != "" {
		image, err = readFile(files.VDSO)
	} else {
		image, err = elfsym.VDSOImage()
	}
	if err != nil {
		return nil, err
	}
	syms, err := elfsym.NewTable(bytes.NewReader(image), contract.VDSOFile)
	if err != nil {
		return nil, err
	}
	f, err := elfsym.NewFile(bytes.NewReader(image), contract.VDSOFile, int64(len(image)))
	if err != nil {
		syms.Close()
		return nil, err
	}
	return &elfFile{path: contract.VDSOFile, f: f, syms: syms}, nil
}

func (ef *elfFile) close() error {
	return errors.Join(ef.f.Close(), ef.syms.Close())
}

// mapped returns the file placed at a mapping's addresses, [start, limit)
// from file offset offset.
func (ef *elfFile) mapped(start, limit, offset uint64) (*mappedELF, error) {
	base, err := ef.base(start, limit, offset)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = ^uint64(0)
	}
	return &mappedELF{elfFile: ef, base: base, start: start, limit: limit}, nil
}

// names are the names a symbol is known by: as perf and jitprof show it,
// which the views ask for, and its own.
func names(s elfsym.Symbol) []string {
	if d := demangle.Name(s.Name); d != s.Name {
		return []string{d, s.Name}
	}
	return []string{s.Name}
}

// base returns what to subtract from the addresses of a mapping of the file
// at [start, limit) from file offset offset to get the file's own addresses.
func (ef *elfFile) base(start, limit, offset uint64) (uint64, error) {
	if start == 0 && offset == 0 && (limit == 0 || limit == ^uint64(0)) {
		return 0, nil // not placed anywhere: the file's addresses
	}
	vaddr, ok := ef.syms.Vaddr(offset)
	if !ok {
		return 0, fmt.Errorf("%s: no segment is loaded from offset %#x", ef.path, offset)
	}
	return start - vaddr, nil
}

// symbol names the targets of branches and PC-relative operands.
func (ef *elfFile) symbol(addr uint64) (string, uint64) {
	if s, ok := ef.syms.Lookup(addr); ok {
		return demangle.Name(s.Name), s.Start
	}
	return "", 0
}

// disasm returns the instructions that start in [start, end], decoded from
// the start of the function holding start, so that they start where they
// do when the code runs.
func (ef *elfFile) disasm(start, end uint64, syntax disasm.Syntax) ([]driver.Inst, error) {
	if end < start {
		return nil, nil
	}
	from := start
	if s, ok := ef.syms.Lookup(start); ok {
		from = s.Start
	}
	code, err := ef.code(from, end+1)
	if err != nil {
		return nil, err
	}
	decoded, err := disasm.Decode(ef.f.Machine, from, code, syntax, ef.symbol)
	if err != nil {
		return nil, err
	}
	var insts []driver.Inst
	for _, in := range decoded {
		if in.Addr < start {
			continue
		}
		name, _ := ef.symbol(in.Addr)
		insts = append(insts, driver.Inst{Addr: in.Addr, Text: in.Text, Function: name})
	}
	return insts, nil
}

// code returns the bytes of the code at the file's addresses [from, to),
// cut at the end of the executable section that holds from.
func (ef *elfFile) code(from, to uint64) ([]byte, error) {
	var text *elf.Section
	for _, s := range ef.f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type == elf.SHT_PROGBITS && s.Addr <= from && from-s.Addr < s.Size {
			text = s
			break
		}
	}
	if text == nil || to <= from {
		return nil, fmt.Errorf("%s: no code at %#x", ef.path, from)
	}
	// Code is never compressed: debug/elf gives a section that says it is
	// no bytes to read in place (a nil ReaderAt).
	if text.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, fmt.Errorf("%s: %s, which holds the code at %#x, says it is compressed", ef.path, text.Name, from)
	}
	// The section's size is its header's claim, which the bytes present
	// must back before any is read into memory of that size.
	off, n := from-text.Addr, min(to, text.Addr+text.Size)-from
	if size := uint64(ef.f.Size()); text.Offset > size || off > size-text.Offset || n > size-text.Offset-off {
		return nil, fmt.Errorf("%s: %s claims code at %#x to %#x, past the file's %d bytes", ef.path, text.Name, from, from+n, size)
	}
	code := make([]byte, n)
	if _, err := text.ReadAt(code, int64(off)); err != nil {
		return nil, fmt.Errorf("%s: %v", ef.path, err)
	}
	return code, nil
}

// mappedELF is an elfFile as pprof's ObjFile, placed at a mapping's
// addresses, [start, limit).
type mappedELF struct {
	*elfFile
	base         uint64
	start, limit uint64
}

func (m *mappedELF) Name() string                        { return m.path }
func (m *mappedELF) ObjAddr(addr uint64) (uint64, error) { return addr - m.base, nil }
func (m *mappedELF) BuildID() string                     { return "" }

// Close leaves the file open for the next report; objTool closes it.
func (m *mappedELF) Close() error { return nil }

func (m *mappedELF) SourceLine(uint64) ([]driver.Frame, error) {
	return nil, errors.New("no source lines in ELF files")
}

// Symbols returns the functions that have a name r matches and cover addr,
// in the file's addresses; a nil r or a zero addr restricts nothing. Only
// functions the mapping holds are listed: a file is mapped in several
// pieces, and pprof asks each for symbols.
func (m *mappedELF) Symbols(r *regexp.Regexp, addr uint64) ([]*driver.Sym, error) {
	var syms []*driver.Sym
	for s := range m.syms.Symbols() {
		if addr != 0 && (addr < s.Start || addr >= s.End) {
			continue
		}
		if s.Start+m.base >= m.limit || s.End+m.base <= m.start {
			continue
		}
		if ns := names(s); r == nil || slices.ContainsFunc(ns, r.MatchString) {
			syms = append(syms, &driver.Sym{Name: ns, File: m.path, Start: s.Start, End: s.End - 1})
		}
	}
	return syms, nil
}

// maxVDSO bounds the vDSO copy read: the kernel's is two pages.
const maxVDSO = 1 << 20

// readFile reads a copy an archive brought, bounded.
func readFile(path string) ([]byte, error) {
	f, err := foreign.Open(path, foreign.Rules{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return foreign.ReadAll(f, maxVDSO)
}
