// Package elfsym reads the symbol tables of ELF files and of the kernel
// and looks addresses up in them as perf 6.1 does for perf report, so
// that a profile symbolized here names the functions perf would.
//
// An ELF Table holds the symbols perf keeps (tools/perf/util/
// symbol-elf.c): functions, GNU indirect functions and data objects, and
// untyped symbols that are visible and in a section whose name has
// "text" or "data" in it; not undefined, absolute or unallocated ones.
// They come from .symtab and then .dynsym, each pass followed by perf's
// fix-ups: a symbol without a size ends where the next one starts
// (symbols__fixup_end), and of the symbols at one address only one is
// kept (symbols__fixup_duplicate: one with a size over one without, a
// typed one over an untyped one, a strong one over a weak one, global
// over local, fewer leading underscores, the longer name, the first).
// PLT entries are then named as perf 6.1 names them: name@plt for each
// .rela.plt relocation, entry by entry after a header entry, each the
// size .plt declares. As in perf, they are added after the fix-ups, so
// a symbol stretched over .plt (usually _init) still covers them, and
// where symbols overlap, Lookup answers what perf's red-black tree walk
// answers, which depends on the shape of the tree: the package builds a
// copy of perf's tree to find out.
//
// Addresses are the file's virtual addresses; Vaddr turns the file
// offsets of samples into them. Names are raw, as in the file (PLT names
// are the raw name plus "@plt"): demangle.Demangle turns them into what
// perf report shows.
//
// Open looks for the symbols where perf does, first in separate debug
// files: the file named by .gnu_debuglink next to the file, in its .debug
// directory and under /usr/lib/debug, then /usr/lib/debug/PATH.debug,
// /usr/lib/debug/PATH and /usr/lib/debug/.build-id/xx/rest.debug; then in
// the file itself. A debug file of another build (build-id) is skipped.
// Open does not read perf's build-id cache (~/.debug), which holds copies
// of the same files, nor a debuglink name relative to the working
// directory, nor the MiniDebugInfo of .gnu_debugdata, which is
// xz-compressed (the standard library has no xz; Debian does not use it).
//
// ReadKallsyms and ParseKallsyms read /proc/kallsyms, and VDSO reads the
// vDSO of the running kernel from this process's memory. Kernel symbols
// are not demangled by perf.
//
// Every input is untrusted: malformed files give errors, never panics.
// A Table is safe for concurrent use; Close releases its file.
package elfsym

import (
	"bytes"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
)

// A Symbol is a named address range [Start, End).
type Symbol struct {
	Name       string // raw, as in the symbol table
	Start, End uint64
	// Module is the kernel module a kallsyms symbol belongs to, as perf
	// shows it ("[ext4]"), and empty for the kernel itself and ELF files.
	Module string
}

// A Table is a symbol table sorted by address.
//
// A large program has hundreds of thousands of symbols, of which a
// profile names a few thousand: the table holds 24 bytes per symbol and
// leaves the names of an ELF file's symbols in the file, reading each the
// first time it is asked for. Close releases the file.
type Table struct {
	// The symbols in address order: their starts apart from the rest,
	// for a binary search with few cache misses.
	starts  []uint64
	syms    []entry
	modules []uint16 // by symbol, with kallsyms modules; else nil
	// A symbol that overlaps no other is what perf finds throughout its
	// range. Where symbols overlap, perf's answer depends on the shape
	// of its tree: the answers there are worked out when the table is
	// made, as disjoint sorted ranges [runStarts[i], runSpans[i].end).
	inRun     []uint64 // bit set of the symbols that overlap others
	runStarts []uint64
	runSpans  []span

	moduleNames []string // kallsyms modules; 0 is the kernel
	names       nameStore

	path     string
	buildID  []byte
	segments []segment
	stripped bool
}

// An entry is the rest of a Symbol of a Table.
type entry struct {
	end  uint64
	name nameRef
}

// symbol returns the k-th symbol, named by nameOf, or false if its name
// cannot be read.
func (t *Table) symbol(k int, nameOf func(nameRef) (string, bool)) (Symbol, bool) {
	name, ok := nameOf(t.syms[k].name)
	if !ok {
		return Symbol{}, false
	}
	s := Symbol{Name: name, Start: t.starts[k], End: t.syms[k].end}
	if t.modules != nil {
		s.Module = t.moduleNames[t.modules[k]]
	}
	return s, true
}

// A segment maps file offsets [off, off+size) to addresses [addr, ...).
type segment struct {
	off, addr, size uint64
}

// Lookup returns the symbol perf finds at addr. A name that can no longer
// be read from the file (it was cut short since Open) is no symbol.
func (t *Table) Lookup(addr uint64) (Symbol, bool) {
	k := lastAtOrBelow(t.starts, addr)
	if k < 0 {
		return Symbol{}, false
	}
	if t.inRun != nil && t.inRun[k/64]&(1<<(k%64)) != 0 {
		i := lastAtOrBelow(t.runStarts, addr)
		if i < 0 || addr >= t.runSpans[i].end {
			return Symbol{}, false
		}
		k = int(t.runSpans[i].sym)
	} else if addr >= reach(t.starts[k], t.syms[k].end) {
		return Symbol{}, false
	}
	return t.symbol(k, t.names.name)
}

// A span ends a range and tells its symbol.
type span struct {
	end uint64
	sym int32
}

// lastAtOrBelow returns the index of the last of the sorted values that
// is at or below v, or -1. Its steps do not depend on the comparisons,
// which lets the compiler avoid branches, whose mispredictions would cost
// more than the comparisons.
func lastAtOrBelow(sorted []uint64, v uint64) int {
	if len(sorted) == 0 || sorted[0] > v {
		return -1
	}
	base, n := 0, len(sorted)
	for n > 1 {
		half := n / 2
		if sorted[base+half] <= v {
			base += half
		}
		n -= half
	}
	return base
}

// addRun appends a range where symbols overlap to t, merging it with the
// previous one when both lead to the same symbol.
func (t *Table) addRun(start, end uint64, sym int32) {
	if n := len(t.runStarts); n > 0 && t.runSpans[n-1] == (span{start, sym}) {
		t.runSpans[n-1].end = end
		return
	}
	t.runStarts = append(t.runStarts, start)
	t.runSpans = append(t.runSpans, span{end, sym})
}

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.syms) }

// Symbols returns the symbols in address order. It reads the names from
// the file all at once; a symbol whose name cannot be read is left out.
func (t *Table) Symbols() iter.Seq[Symbol] {
	return func(yield func(Symbol) bool) {
		nameOf := t.names.all()
		for k := range t.syms {
			if s, ok := t.symbol(k, nameOf); ok && !yield(s) {
				return
			}
		}
	}
}

// Close releases the file the names are read from, if the Table opened
// it. Names already returned stay valid.
func (t *Table) Close() error {
	if t.names.closer == nil {
		return nil
	}
	err := t.names.closer.Close()
	t.names.closer = nil
	return err
}

// Path returns the file the symbols were read from: for Open, the debug
// file when one was used.
func (t *Table) Path() string { return t.path }

// Stripped tells whether the table has only the file's dynamic symbols: it
// was stripped of .symtab and no debug file was found, so most of its
// functions have no name.
func (t *Table) Stripped() bool { return t.stripped }

// BuildID returns the GNU build-id of the file, or nil.
func (t *Table) BuildID() []byte { return t.buildID }

// Vaddr converts an offset in the file to a virtual address, through the
// PT_LOAD segment whose file contents hold the offset, or, for a file
// without such segments, through its allocated sections. A sample at
// address A in a mapping of the file at Start with page offset Pgoff is
// at file offset A - Start + Pgoff.
func (t *Table) Vaddr(fileOffset uint64) (uint64, bool) {
	for _, s := range t.segments {
		if fileOffset-s.off < s.size {
			return s.addr + (fileOffset - s.off), true
		}
	}
	return 0, false
}

// A nameRef says where a symbol's name is: with inFile set, at that
// offset of the file, in one of its string tables; else at that offset
// of the arena. Names end at a NUL or at the end of their string table.
type nameRef uint64

const inFile nameRef = 1 << 63

// A nameStore holds the names that are not in a file (kallsyms, PLT
// entries, string tables the file stores compressed), NUL-terminated,
// and reads the others from the file when first asked for.
type nameStore struct {
	arena   string
	file    io.ReaderAt
	closer  io.Closer // the file, when the Table opened it
	strtabs []extent  // where the file's string tables are
	read    sync.Map  // nameRef -> string: the names read from the file
}

// An extent is the bytes [off, end) of a file.
type extent struct{ off, end uint64 }

func (ns *nameStore) name(ref nameRef) (string, bool) {
	if ref&inFile == 0 {
		name, _, _ := strings.Cut(ns.arena[ref:], "\x00")
		return name, true
	}
	if name, ok := ns.read.Load(ref); ok {
		return name.(string), true
	}
	off := uint64(ref &^ inFile)
	i := ns.strtab(off)
	if i < 0 {
		return "", false
	}
	b, err := readString(ns.file, off, ns.strtabs[i].end)
	if err != nil {
		return "", false
	}
	name := string(b)
	ns.read.Store(ref, name)
	return name, true
}

// strtab returns the index of the string table that holds the file's
// offset off, or -1.
func (ns *nameStore) strtab(off uint64) int {
	return slices.IndexFunc(ns.strtabs, func(e extent) bool { return e.off <= off && off < e.end })
}

// all returns a function that names every symbol with at most one read
// of each string table, for going through all of them.
func (ns *nameStore) all() func(nameRef) (string, bool) {
	tabs := make([][]byte, len(ns.strtabs))
	for i, e := range ns.strtabs {
		tabs[i] = make([]byte, e.end-e.off)
		if _, err := ns.file.ReadAt(tabs[i], int64(e.off)); err != nil {
			return ns.name // each name is then read on its own
		}
	}
	return func(ref nameRef) (string, bool) {
		off := uint64(ref &^ inFile)
		i := ns.strtab(off)
		if ref&inFile == 0 || i < 0 {
			return ns.name(ref)
		}
		name, _, _ := bytes.Cut(tabs[i][off-ns.strtabs[i].off:], []byte{0})
		return string(name), true
	}
}
