package webui

import (
	"debug/elf"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"github.com/google/pprof/driver"

	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex"
)

// objTool is the driver's ObjTool: it reads the symbols, source lines and
// instructions of the profile's mappings from the jitdump files that
// describe them, and from ELF files for the rest.
//
// Files are indexed on first use and kept until close, since the driver
// opens them again for every report.
type objTool struct {
	dumps map[string]*dumpindex.Dump

	mu   sync.Mutex
	jit  map[string]*jitFile
	elfs map[string]*elfFile
}

func newObjTool(dumps map[string]*dumpindex.Dump) *objTool {
	return &objTool{dumps: dumps, jit: make(map[string]*jitFile), elfs: make(map[string]*elfFile)}
}

// Open returns the file of a mapping. A dump's addresses are the runtime
// addresses of its code, so it is the same file wherever it is mapped. An
// ELF file is read with the mapping's placement (start, limit, offset).
func (t *objTool) Open(file string, start, limit, offset uint64, _ string) (driver.ObjFile, error) {
	if jf := t.jitFile(file); jf != nil {
		return jf, nil
	}
	ef, err := t.elfFile(file)
	if err != nil {
		return nil, err
	}
	base, err := ef.base(start, limit, offset)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = ^uint64(0)
	}
	return &mappedELF{elfFile: ef, base: base, start: start, limit: limit}, nil
}

// Disasm returns the instructions of file that start in [start, end]: end
// is the last byte, as in driver.Sym.End.
func (t *objTool) Disasm(file string, start, end uint64, intelSyntax bool) ([]driver.Inst, error) {
	syntax := disasm.GNU
	if intelSyntax {
		syntax = disasm.Intel
	}
	if jf := t.jitFile(file); jf != nil {
		return jf.disasm(start, end, syntax)
	}
	ef, err := t.elfFile(file)
	if err != nil {
		return nil, err
	}
	return ef.disasm(start, end, syntax)
}

// jitFile returns the index of the dump named file, or nil when file names
// no dump.
func (t *objTool) jitFile(file string) *jitFile {
	d := t.dumps[file]
	if d == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	jf := t.jit[file]
	if jf == nil {
		jf = newJITFile(file, d)
		t.jit[file] = jf
	}
	return jf
}

func (t *objTool) elfFile(file string) (*elfFile, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ef := t.elfs[file]; ef != nil {
		return ef, nil
	}
	ef, err := openELF(file)
	if err != nil {
		return nil, err
	}
	t.elfs[file] = ef
	return ef, nil
}

func (t *objTool) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ef := range t.elfs {
		ef.f.Close()
		ef.syms.Close()
	}
}

// placed is a function of a dump at one of its addresses: where it was
// loaded, and where each CODE_MOVE put it.
type placed struct {
	fn    *dumpindex.Code
	addr  uint64
	order int // of the load or move in the dump; later ones are greater
	lines dumpindex.Lines
}

func (p *placed) end() uint64 { return p.addr + p.fn.CodeSize }

// line returns the source line of addr.
func (p *placed) line(addr uint64) (file string, line int) {
	f, l, _ := p.lines.At(addr - (p.addr - p.fn.CodeAddr))
	return f, int(l)
}

// jitFile is a jitdump file as pprof's ObjFile, addressed at run time.
//
// A JIT reuses the memory of code it dropped, so an address may have held
// several functions over the recording, and the profile's locations do not
// say when they were sampled. Where the dump places several functions over
// an address, the latest placed is taken to be the one the profile means,
// unless the caller names a function by its exact range (as pprof does with
// the ranges Symbols returns). Symbols lists functions placed over the
// same range as one symbol with several names, the latest first.
type jitFile struct {
	path    string
	mach    elf.Machine
	placed  []*placed // by address, end, then order
	maxSize uint64
}

func newJITFile(path string, d *dumpindex.Dump) *jitFile {
	jf := &jitFile{path: path, mach: d.Machine()}
	lines := make(map[*dumpindex.Code]dumpindex.Lines)
	for i, ev := range d.Events {
		fn := ev.Code
		if fn.CodeSize == 0 || ev.Addr+fn.CodeSize < ev.Addr {
			continue // covers nothing, or wraps around
		}
		if _, ok := lines[fn]; !ok {
			lines[fn] = fn.Lines()
		}
		jf.placed = append(jf.placed, &placed{fn: fn, addr: ev.Addr, order: i, lines: lines[fn]})
		jf.maxSize = max(jf.maxSize, fn.CodeSize)
	}
	sort.Slice(jf.placed, func(i, j int) bool {
		a, b := jf.placed[i], jf.placed[j]
		if a.addr != b.addr {
			return a.addr < b.addr
		}
		if a.end() != b.end() {
			return a.end() < b.end()
		}
		return a.order < b.order
	})
	return jf
}

// at returns the function placed latest over addr, or nil.
func (jf *jitFile) at(addr uint64) *placed {
	var best *placed
	i := sort.Search(len(jf.placed), func(i int) bool { return jf.placed[i].addr > addr })
	for i--; i >= 0 && addr-jf.placed[i].addr < jf.maxSize; i-- {
		if p := jf.placed[i]; addr < p.end() && (best == nil || p.order > best.order) {
			best = p
		}
	}
	return best
}

// exactly returns the function placed latest over exactly [start, end],
// or nil.
func (jf *jitFile) exactly(start, end uint64) *placed {
	var best *placed
	i := sort.Search(len(jf.placed), func(i int) bool { return jf.placed[i].addr >= start })
	for ; i < len(jf.placed) && jf.placed[i].addr == start; i++ {
		if p := jf.placed[i]; p.end()-1 == end && (best == nil || p.order > best.order) {
			best = p
		}
	}
	return best
}

func (jf *jitFile) Name() string                        { return jf.path }
func (jf *jitFile) ObjAddr(addr uint64) (uint64, error) { return addr, nil }
func (jf *jitFile) BuildID() string                     { return "" }
func (jf *jitFile) Close() error                        { return nil }

func (jf *jitFile) SourceLine(addr uint64) ([]driver.Frame, error) {
	p := jf.at(addr)
	if p == nil {
		return nil, fmt.Errorf("%s: no function at %#x", jf.path, addr)
	}
	file, line := p.line(addr)
	return []driver.Frame{{Func: p.fn.Name, File: file, Line: line}}, nil
}

func (jf *jitFile) Symbols(r *regexp.Regexp, addr uint64) ([]*driver.Sym, error) {
	var syms []*driver.Sym
	// Functions placed over the same range are adjacent in jf.placed,
	// earliest first.
	for i := 0; i < len(jf.placed); {
		p := jf.placed[i]
		var names []string
		match := r == nil
		for ; i < len(jf.placed) && jf.placed[i].addr == p.addr && jf.placed[i].end() == p.end(); i++ {
			name := jf.placed[i].fn.Name
			names = append([]string{name}, names...)
			match = match || r.MatchString(name)
		}
		if match && (addr == 0 || p.addr <= addr && addr < p.end()) {
			syms = append(syms, &driver.Sym{Name: names, File: jf.path, Start: p.addr, End: p.end() - 1})
		}
	}
	return syms, nil
}

// disasm returns the instructions that start in [start, end]. Each function
// there is decoded from its first byte, so that instructions start where
// they do when the code runs even when start is inside one.
func (jf *jitFile) disasm(start, end uint64, syntax disasm.Syntax) ([]driver.Inst, error) {
	if p := jf.exactly(start, end); p != nil {
		return jf.decode(p, start, end, syntax)
	}
	var insts []driver.Inst
	for addr := start; addr <= end; {
		p := jf.at(addr)
		if p == nil {
			// Skip to the next function.
			i := sort.Search(len(jf.placed), func(i int) bool { return jf.placed[i].addr > addr })
			if i == len(jf.placed) {
				break
			}
			addr = jf.placed[i].addr
			continue
		}
		in, err := jf.decode(p, addr, end, syntax)
		if err != nil {
			return nil, err
		}
		insts = append(insts, in...)
		addr = p.end()
	}
	return insts, nil
}

// decode returns the instructions of p that start in [start, end].
func (jf *jitFile) decode(p *placed, start, end uint64, syntax disasm.Syntax) ([]driver.Inst, error) {
	code := p.fn.Code[:min(uint64(len(p.fn.Code)), p.fn.CodeSize)]
	decoded, err := disasm.Decode(jf.mach, p.addr, code, syntax, jf.symbol)
	if err != nil {
		return nil, err
	}
	var insts []driver.Inst
	for _, in := range decoded {
		if in.Addr < start || in.Addr > end {
			continue
		}
		file, line := p.line(in.Addr)
		insts = append(insts, driver.Inst{Addr: in.Addr, Text: in.Text, Function: p.fn.Name, File: file, Line: line})
	}
	return insts, nil
}

// symbol names the targets of branches and PC-relative operands.
func (jf *jitFile) symbol(addr uint64) (string, uint64) {
	if p := jf.at(addr); p != nil {
		return p.fn.Name, p.addr
	}
	return "", 0
}
