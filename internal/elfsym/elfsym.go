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
// are the raw name plus "@plt"): symname.Demangle turns them into what
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
// A Table is immutable and safe for concurrent use.
package elfsym

import "iter"

// A Symbol is a named address range [Start, End).
type Symbol struct {
	Name       string // raw, as in the symbol table
	Start, End uint64
	// Module is the kernel module a kallsyms symbol belongs to, as perf
	// shows it ("[ext4]"), and empty for the kernel itself and ELF files.
	Module string
}

// A Table is a symbol table sorted by address.
type Table struct {
	// The symbols, compactly: a large program has hundreds of thousands.
	syms    []entry
	names   string   // back to back, in the symbols' order
	modules []string // kallsyms modules; 0 is the kernel
	// Disjoint, sorted ranges [starts[i], spans[i].end) in which Lookup
	// finds syms[spans[i].sym]. The starts are a slice of their own for a
	// search with few cache misses.
	starts []uint64
	spans  []span

	path     string
	buildID  []byte
	segments []segment
}

// An entry is a Symbol of a Table: its name ends at nameEnd in the names,
// where the previous symbol's ends.
type entry struct {
	start, end uint64
	nameEnd    uint32
	module     uint16
}

// symbol returns the k-th symbol.
func (t *Table) symbol(k int) Symbol {
	var nameStart uint32
	if k > 0 {
		nameStart = t.syms[k-1].nameEnd
	}
	e := &t.syms[k]
	return Symbol{Name: t.names[nameStart:e.nameEnd], Start: e.start, End: e.end, Module: t.modules[e.module]}
}

// A segment maps file offsets [off, off+size) to addresses [addr, ...).
type segment struct {
	off, addr, size uint64
}

// Lookup returns the symbol perf finds at addr.
func (t *Table) Lookup(addr uint64) (Symbol, bool) {
	i := lastAtOrBelow(t.starts, addr)
	if i < 0 || addr >= t.spans[i].end {
		return Symbol{}, false
	}
	return t.symbol(int(t.spans[i].sym)), true
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

// add appends a range to t, merging it with the previous one when both
// lead to the same symbol.
func (t *Table) add(start, end uint64, sym int32) {
	if n := len(t.starts); n > 0 && t.spans[n-1] == (span{start, sym}) {
		t.spans[n-1].end = end
		return
	}
	t.starts = append(t.starts, start)
	t.spans = append(t.spans, span{end, sym})
}

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.syms) }

// Symbols returns the symbols in address order.
func (t *Table) Symbols() iter.Seq[Symbol] {
	return func(yield func(Symbol) bool) {
		for k := range t.syms {
			if !yield(t.symbol(k)) {
				return
			}
		}
	}
}

// Path returns the file the symbols were read from: for Open, the debug
// file when one was used.
func (t *Table) Path() string { return t.path }

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
