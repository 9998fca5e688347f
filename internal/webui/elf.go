package webui

import (
	"debug/elf"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/google/pprof/driver"
	"github.com/ianlancetaylor/demangle"

	"github.com/jitprof/jitprof/internal/disasm"
)

// elfFile is an executable or shared library, read with debug/elf: pprof
// reads them with binutils (nm, objdump, addr2line), but that code is
// internal to its module. Symbols and instructions are enough for the
// disassembly view; source lines would need DWARF, and the profile already
// has the lines jitprof found.
type elfFile struct {
	path string
	f    *elf.File
	syms []elfSym // by address
}

// elfSym is a function symbol, with the names of all the symbols that
// cover exactly its range.
type elfSym struct {
	names      []string
	addr, size uint64
}

func openELF(path string) (*elfFile, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	// .dynsym repeats part of .symtab, and a stripped file has only it.
	var all []elf.Symbol
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			f.Close()
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		all = append(all, syms...)
	}
	var funcs []elf.Symbol
	for _, s := range all {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && s.Size > 0 {
			funcs = append(funcs, s)
		}
	}
	sort.Slice(funcs, func(i, j int) bool {
		if funcs[i].Value != funcs[j].Value {
			return funcs[i].Value < funcs[j].Value
		}
		return funcs[i].Size < funcs[j].Size
	})
	ef := &elfFile{path: path, f: f}
	for _, s := range funcs {
		if n := len(ef.syms); n == 0 || ef.syms[n-1].addr != s.Value || ef.syms[n-1].size != s.Size {
			ef.syms = append(ef.syms, elfSym{addr: s.Value, size: s.Size})
		}
		last := &ef.syms[len(ef.syms)-1]
		// The demangled name, without parameters, is the one perf and
		// jitprof show, so the one the views ask for; the symbol's own
		// name is kept for those who know it.
		for _, name := range []string{demangle.Filter(s.Name, demangle.NoParams, demangle.NoClones), s.Name} {
			if !slices.Contains(last.names, name) {
				last.names = append(last.names, name)
			}
		}
	}
	return ef, nil
}

// base returns what to subtract from the addresses of a mapping of the file
// at [start, limit) from file offset offset to get the file's own addresses.
func (ef *elfFile) base(start, limit, offset uint64) (uint64, error) {
	if start == 0 && offset == 0 && (limit == 0 || limit == ^uint64(0)) {
		return 0, nil // not placed anywhere: the file's addresses
	}
	for _, p := range ef.f.Progs {
		// The mapping starts at the page of the segment's first byte.
		if p.Type == elf.PT_LOAD && p.Off&^0xfff <= offset && offset < p.Off+p.Filesz {
			return start - offset + p.Off - p.Vaddr, nil
		}
	}
	return 0, fmt.Errorf("%s: no segment is loaded from offset %#x", ef.path, offset)
}

// at returns the symbol covering addr, or nil. Function symbols do not
// overlap, so only the last one starting at or below addr can.
func (ef *elfFile) at(addr uint64) *elfSym {
	i := sort.Search(len(ef.syms), func(i int) bool { return ef.syms[i].addr > addr })
	if i > 0 && addr-ef.syms[i-1].addr < ef.syms[i-1].size {
		return &ef.syms[i-1]
	}
	return nil
}

// symbol names the targets of branches and PC-relative operands.
func (ef *elfFile) symbol(addr uint64) (string, uint64) {
	if s := ef.at(addr); s != nil {
		return s.names[0], s.addr
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
	if s := ef.at(start); s != nil {
		from = s.addr
	}
	var text *elf.Section
	for _, s := range ef.f.Sections {
		if s.Flags&elf.SHF_EXECINSTR != 0 && s.Type == elf.SHT_PROGBITS && s.Addr <= from && from-s.Addr < s.Size {
			text = s
			break
		}
	}
	if text == nil {
		return nil, fmt.Errorf("%s: no code at %#x", ef.path, from)
	}
	code := make([]byte, min(end, text.Addr+text.Size-1)-from+1)
	if _, err := text.ReadAt(code, int64(from-text.Addr)); err != nil {
		return nil, fmt.Errorf("%s: %v", ef.path, err)
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
	for _, s := range m.syms {
		if addr != 0 && (addr < s.addr || addr-s.addr >= s.size) {
			continue
		}
		if s.addr+m.base >= m.limit || s.addr+s.size+m.base <= m.start {
			continue
		}
		if r == nil || slices.ContainsFunc(s.names, r.MatchString) {
			syms = append(syms, &driver.Sym{Name: s.names, File: m.path, Start: s.addr, End: s.addr + s.size - 1})
		}
	}
	return syms, nil
}
