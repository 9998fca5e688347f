package objtool

import (
	"cmp"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/runtimes"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/google/pprof/driver"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/perfmap"
)

// Tool reads the code, symbols and source lines of a profile's mappings:
// jitted code from the jitdump files its JIT mappings name, native code from
// ELF files (and the vDSO), symbols of the kernel from /proc/kallsyms and of
// perf maps from the map. It is pprof's driver.ObjTool, for the web UI, and
// what annotate and the gprof output read functions with, so that all three see the
// same code at the same addresses.
//
// Files are read on first use and kept until Close, since the driver opens
// them again for every report.
type Tool struct {
	mu       sync.Mutex
	dumps    map[string]*dumpindex.Dump // by path; nil until read
	owned    []*dumpindex.Dump          // read here: Close closes them
	jit      map[string]*jitFile
	elfs     map[elfKey]*elfFile
	perfMaps map[string]*perfmap.Table
	kernel   *elfsym.Table
	files    *contract.Files // copies of the recording's files, or nil
	// buildIDs are, for pprof's driver (New), the build-ids of the
	// profiles' mappings of each file, and of each mapping: the driver
	// names a file by its path and placement alone.
	buildIDs   map[string][]string
	mappingIDs map[driverMapping]string
}

// driverMapping is a mapping as pprof's driver names it to Open.
type driverMapping struct {
	file                 string
	start, limit, offset uint64
}

// New returns the tool for the mappings of profiles perfprof made: those
// whose BuildID is contract.JITBuildID are jitdump files, at the path of
// their File. files, when not nil, holds copies of the recording's files
// (contract.Files), read before the files themselves.
func New(files *contract.Files, ps ...*profile.Profile) *Tool {
	t := newTool(files)
	for _, p := range ps {
		for _, m := range p.Mapping {
			t.add(m.File, m.BuildID, m.Start, m.Limit, m.Offset)
		}
	}
	return t
}

// add notes a mapping of the profiles: a dump's, to read when first
// needed, or an ELF file's, whose build-id the driver does not give.
func (t *Tool) add(file, buildID string, start, limit, offset uint64) {
	if buildID == contract.JITBuildID {
		t.dumps[file] = nil
		return
	}
	t.mappingIDs[driverMapping{file, start, limit, offset}] = buildID
	if !slices.Contains(t.buildIDs[file], buildID) {
		t.buildIDs[file] = append(t.buildIDs[file], buildID)
	}
}

// ForProfiles is New for profiles in columns, as perfprof hands them over
// (New serves pprof's web UI, which reads pprof's objects).
func ForProfiles(files *contract.Files, ps ...*contract.Profile) *Tool {
	t := newTool(files)
	for _, p := range ps {
		for i := range p.Mappings {
			m := &p.Mappings[i]
			t.add(p.String(m.File), p.String(m.BuildID), m.Start, m.Limit, m.Offset)
		}
	}
	return t
}

func newTool(files *contract.Files) *Tool {
	return &Tool{dumps: make(map[string]*dumpindex.Dump), jit: make(map[string]*jitFile), elfs: make(map[elfKey]*elfFile),
		perfMaps: make(map[string]*perfmap.Table), files: files, buildIDs: make(map[string][]string), mappingIDs: make(map[driverMapping]string)}
}

// Open returns the file of a mapping, for pprof's driver, whose last
// argument is a kernel relocation symbol, not a build-id: the mapping's
// build-id is the profile's. A dump's addresses are the runtime addresses
// of its code, so it is the same file wherever it is mapped. An ELF file is
// read with the mapping's placement (start, limit, offset).
func (t *Tool) Open(file string, start, limit, offset uint64, _ string) (driver.ObjFile, error) {
	jf, err := t.jitFile(file)
	if err != nil {
		return nil, err
	}
	if jf != nil {
		return jf, nil
	}
	buildID, ok := t.mappingIDs[driverMapping{file, start, limit, offset}]
	if !ok {
		if buildID, err = t.buildIDOf(file); err != nil {
			return nil, err
		}
	}
	ef, err := t.elfFile(file, buildID)
	if err != nil {
		return nil, err
	}
	return ef.mapped(start, limit, offset)
}

// Disasm returns the instructions of file that start in [start, end]: end
// is the last byte, as in driver.Sym.End.
func (t *Tool) Disasm(file string, start, end uint64, intelSyntax bool) ([]driver.Inst, error) {
	syntax := disasm.GNU
	if intelSyntax {
		syntax = disasm.Intel
	}
	jf, err := t.jitFile(file)
	if err != nil {
		return nil, err
	}
	if jf != nil {
		return jf.disasm(start, end, syntax)
	}
	// pprof's driver names the file alone here: its build-id is that of
	// the profiles' mappings of it.
	buildID, err := t.buildIDOf(file)
	if err != nil {
		return nil, err
	}
	ef, err := t.elfFile(file, buildID)
	if err != nil {
		return nil, err
	}
	return ef.disasm(start, end, syntax)
}

// buildIDOf returns the build-id of the profiles' mappings of file, for
// the driver, which names a file by its path: "" for none known; an error
// when they give it two (two containers' files at one path), which the
// path cannot tell apart.
func (t *Tool) buildIDOf(file string) (string, error) {
	switch ids := t.buildIDs[file]; len(ids) {
	case 0:
		return "", nil
	case 1:
		return ids[0], nil
	default:
		return "", fmt.Errorf("%s: the profile maps %d files of that path (build-ids %q): which one the disassembly is of cannot be told", file, len(ids), ids)
	}
}

// Func is a function of a mapping, at the mapping's runtime addresses.
type Func struct {
	Name       string // as its file names it, mangled or not
	Start, End uint64
	// CodeIndex is a jitted function's code_index in its dump, 0 for the
	// rest.
	CodeIndex uint64

	jit *placed // for jitted code, of jf
	jf  *jitFile
	elf *elfFile
	// base is what to subtract from a runtime address to get the ELF
	// file's own.
	base uint64
	// noCode says why a function of no dump or ELF file has no code.
	noCode string
}

// ErrNoCode is Code's error for a function whose code the recording does
// not hold: the kernel's, a perf map's.
var ErrNoCode = errors.New("no code to show")

// FuncIn returns the function that holds addr in the mapping m of p, a
// profile perfprof made, as perfprof named it: a jitted function by the
// code_index its mapping gives (Offset), an ELF or vDSO symbol by the
// file's symbol table, a kernel symbol by /proc/kallsyms, a perf map's
// entry by the map. It returns false when nothing there names addr, or m
// is nil (a location of no mapping).
func (t *Tool) FuncIn(p *contract.Profile, m *contract.Mapping, addr uint64) (Func, bool, error) {
	if m == nil {
		return Func{}, false, nil
	}
	file := p.String(m.File)
	switch p.MappingKind(m) {
	case contract.OffCPU:
		return Func{}, false, nil
	case contract.JIT:
		jf, err := t.jitFile(file)
		if err != nil || jf == nil {
			return Func{}, false, err
		}
		pl := jf.placedAt(m.Offset, m.Start)
		if pl == nil || addr < pl.addr || addr >= pl.end() {
			return Func{}, false, nil
		}
		return Func{Name: pl.fn.Name, Start: pl.addr, End: pl.end(), CodeIndex: pl.fn.CodeIndex, jit: pl, jf: jf}, true, nil
	case contract.Kernel:
		kt, err := t.kernelTable()
		if err != nil {
			return Func{}, false, err
		}
		s, ok := kt.Lookup(addr)
		return Func{Name: s.Name, Start: s.Start, End: s.End, noCode: "kernel code, which a recording does not hold"}, ok, nil
	case contract.PerfMap:
		pt, err := t.perfMap(file)
		if err != nil {
			return Func{}, false, err
		}
		e, ok := pt.Lookup(addr)
		return Func{Name: e.Name, Start: e.Start, End: e.Start + e.Size, noCode: "named by a perf map, which holds no code"}, ok, nil
	}
	ef, err := t.elfFile(file, p.String(m.BuildID))
	if err != nil {
		return Func{}, false, err
	}
	mf, err := ef.mapped(m.Start, m.Limit, m.Offset)
	if err != nil {
		return Func{}, false, err
	}
	s, ok := ef.syms.Lookup(addr - mf.base)
	if !ok {
		return Func{}, false, nil
	}
	return Func{Name: s.Name, Start: s.Start + mf.base, End: s.End + mf.base, elf: ef, base: mf.base}, true, nil
}

// Code returns f's machine code and the machine it is for; kernel and perf
// map functions have none to give.
func (f Func) Code() ([]byte, elf.Machine, error) {
	switch {
	case f.jit != nil:
		return f.jit.fn.Code(), f.jf.mach, nil
	case f.elf != nil:
		code, err := f.elf.code(f.Start-f.base, f.End-f.base)
		return code, f.elf.f.Machine, err
	}
	return nil, 0, fmt.Errorf("%s: %w: %s", f.Name, ErrNoCode, cmp.Or(f.noCode, "it is not in a dump or an ELF file"))
}

// Frame is a function whose code is at an address, with its source line
// there.
type Frame struct {
	Name string // as the dump names it
	File string
	Line int // 0 when not known
	// Inferred marks a frame the runtime did not record: see
	// dumpindex.InlineFrame.
	Inferred bool
	// AtStart is set when the dump gives the code no line of its
	// function's own script: Line is then where the function starts, as
	// its name says (V8's).
	AtStart bool
}

// Frames returns the functions whose code is at addr in a jitted function,
// innermost first: those inlined there (dumpindex.Code.InlineChain), then
// f. Each has the line jitprof's profiles give it (perfprof), so that the
// first is the line pprof -lines shows for addr. Native code has none: nil.
func (f Func) Frames(addr uint64) []Frame {
	if f.jit == nil {
		return nil
	}
	return f.jf.frames(f.jit, addr)
}

// jitFile returns the index of the dump named file, read on first use, or
// nil when file names no dump.
func (t *Tool) jitFile(file string) (*jitFile, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d, ok := t.dumps[file]
	if !ok {
		return nil, nil
	}
	if jf := t.jit[file]; jf != nil {
		return jf, nil
	}
	if d == nil {
		var err error
		if d, err = dumpindex.Read(file); err != nil {
			return nil, err
		}
		t.dumps[file] = d
		t.owned = append(t.owned, d)
	}
	jf := newJITFile(file, d)
	t.jit[file] = jf
	return jf, nil
}

// An elfKey is a mapping's file: its path and build-id, since two
// containers can each have their own file at one path.
type elfKey struct{ path, buildID string }

// elfFile returns the ELF file of a mapping, opened once. buildID is the
// mapping's, in hex ("" for none): a file with another is not the one the
// recording saw (replaced since, or another file where a process in its
// own mount namespace had one of its own), and its code is not shown for
// it. A file the analysis found in a container's root is read there
// (contract.Files.Place).
func (t *Tool) elfFile(file, buildID string) (*elfFile, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := elfKey{file, buildID}
	ef := t.elfs[key]
	if ef == nil {
		var err error
		if file == contract.VDSOFile {
			ef, err = openVDSO(t.files)
		} else {
			ef, err = openELF(t.files.Place(file, buildID))
		}
		if err != nil {
			return nil, err
		}
		t.elfs[key] = ef
	}
	if buildID == "" || file == contract.VDSOFile {
		return ef, nil
	}
	if got := hex.EncodeToString(ef.syms.BuildID()); got != buildID {
		return nil, fmt.Errorf("%s: build-id %q, the recording saw %s: %w", ef.path, got, buildID, elfsym.ErrOtherFile)
	}
	return ef, nil
}

func (t *Tool) kernelTable() (*elfsym.Table, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kernel == nil {
		var kallsyms string
		if t.files != nil {
			kallsyms = t.files.Kallsyms
		}
		kt, err := elfsym.Kernel(kallsyms, true) // named frames of the kernel are the recorded one's
		if err == nil && kt == nil {
			err = errors.New("no kernel symbols")
		}
		if err != nil {
			return nil, fmt.Errorf("kernel symbols: %w", err)
		}
		t.kernel = kt
	}
	return t.kernel, nil
}

func (t *Tool) perfMap(path string) (*perfmap.Table, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pt := t.perfMaps[path]; pt != nil {
		return pt, nil
	}
	entries, _, err := perfmap.ParseFile(path)
	if err != nil {
		return nil, err
	}
	pt := perfmap.NewTable(entries)
	t.perfMaps[path] = pt
	return pt, nil
}

// Close closes the files the tool read.
func (t *Tool) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, ef := range t.elfs {
		errs = append(errs, ef.close())
	}
	for _, d := range t.owned {
		errs = append(errs, d.Close())
	}
	if t.kernel != nil {
		errs = append(errs, t.kernel.Close())
	}
	return errors.Join(errs...)
}

// placed is a function of a dump at one of its addresses: where it was
// loaded, and where each CODE_MOVE put it. There is one for each of a
// dump's million functions: 24 bytes.
type placed struct {
	fn   *dumpindex.Code
	addr uint64
	// order is that of the load or move in the dump; later ones are
	// greater. A dump of 2^32 events would take a terabyte to index.
	order uint32
	lines uint32 // the function's line table: its place in jitFile.lines + 1; 0 for none
}

func (p *placed) end() uint64 { return p.addr + p.fn.CodeSize }

// frames returns the functions whose code is at addr in p, innermost first
// (see Func.Frames).
func (jf *jitFile) frames(p *placed, addr uint64) []Frame {
	load := addr - (p.addr - p.fn.CodeAddr)
	var lines dumpindex.Lines
	if p.lines != 0 {
		lines = jf.lines[p.lines-1]
	}
	file, line, _ := lines.At(load)
	own := Frame{Name: p.fn.Name, File: file, Line: int(line)}
	// As perfprof builds a profile's lines: a function whose name gives its
	// place (V8's) has that place where the dump gives no line of its own
	// script (none: node 20 garbles every file name of a user's script;
	// or code inlined from another script, whose inlined frame, when
	// recovered, comes first).
	if n, ok := runtimes.ParseV8Name(p.fn.Name); ok && n.Line != 0 && (line == 0 || file != n.Script) {
		own = Frame{Name: p.fn.Name, File: n.Script, Line: int(n.Line), AtStart: true}
	}
	chain := p.fn.InlineChain(load)
	frames := make([]Frame, 0, len(chain)+1)
	for _, in := range slices.Backward(chain) {
		frames = append(frames, Frame{Name: in.Name, File: in.File, Line: int(in.Line), Inferred: in.Inferred})
	}
	return append(frames, own)
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
	placed  []placed // by address, end, then order; one array, not a pointer per place
	lines   []dumpindex.Lines
	maxSize uint64
}

func newJITFile(path string, d *dumpindex.Dump) *jitFile {
	jf := &jitFile{path: path, mach: d.Machine(), placed: make([]placed, 0, d.EventCount())}
	// A function's lines serve each of its places; most functions have
	// none.
	lines := make(map[*dumpindex.Code]uint32)
	for i, ev := range d.Events() {
		fn := ev.Code
		if fn.CodeSize == 0 || ev.Addr+fn.CodeSize < ev.Addr {
			continue // covers nothing, or wraps around
		}
		p := placed{fn: fn, addr: ev.Addr, order: uint32(i)}
		if fn.Debug() != nil {
			l, ok := lines[fn]
			if !ok {
				jf.lines = append(jf.lines, fn.Lines())
				l = uint32(len(jf.lines))
				lines[fn] = l
			}
			p.lines = l
		}
		jf.placed = append(jf.placed, p)
		jf.maxSize = max(jf.maxSize, fn.CodeSize)
	}
	slices.SortFunc(jf.placed, func(a, b placed) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(a.end(), b.end()), cmp.Compare(a.order, b.order))
	})
	return jf
}

// placedAt returns the function of code_index codeIndex placed first at
// start, or nil.
func (jf *jitFile) placedAt(codeIndex, start uint64) *placed {
	var first *placed
	i := sort.Search(len(jf.placed), func(i int) bool { return jf.placed[i].addr >= start })
	for ; i < len(jf.placed) && jf.placed[i].addr == start; i++ {
		if p := &jf.placed[i]; p.fn.CodeIndex == codeIndex && (first == nil || p.order < first.order) {
			first = p
		}
	}
	return first
}

// at returns the function placed latest over addr, or nil.
func (jf *jitFile) at(addr uint64) *placed {
	var best *placed
	i := sort.Search(len(jf.placed), func(i int) bool { return jf.placed[i].addr > addr })
	for i--; i >= 0 && addr-jf.placed[i].addr < jf.maxSize; i-- {
		if p := &jf.placed[i]; addr < p.end() && (best == nil || p.order > best.order) {
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
		if p := &jf.placed[i]; p.end()-1 == end && (best == nil || p.order > best.order) {
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
	var frames []driver.Frame
	for _, fr := range jf.frames(p, addr) {
		name := fr.Name
		if fr.Inferred {
			name += contract.InferredSuffix // as the profile names it
		}
		frames = append(frames, driver.Frame{Func: name, File: fr.File, Line: fr.Line})
	}
	return frames, nil
}

func (jf *jitFile) Symbols(r *regexp.Regexp, addr uint64) ([]*driver.Sym, error) {
	var syms []*driver.Sym
	// Functions placed over the same range are adjacent in jf.placed,
	// earliest first.
	for i := 0; i < len(jf.placed); {
		p := &jf.placed[i]
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
	code := p.fn.Code()
	decoded, err := disasm.Decode(jf.mach, p.addr, code, syntax, jf.symbol)
	if err != nil {
		return nil, err
	}
	var insts []driver.Inst
	for _, in := range decoded {
		if in.Addr < start || in.Addr > end {
			continue
		}
		leaf := jf.frames(p, in.Addr)[0]
		insts = append(insts, driver.Inst{Addr: in.Addr, Text: in.Text, Function: p.fn.Name, File: leaf.File, Line: leaf.Line})
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
