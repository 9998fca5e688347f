// Package elfsym reads the symbol tables of ELF files and of the kernel
// and looks addresses up in them the way perf 6.1 does for perf report,
// so that a profile symbolized here names the same functions perf would.
//
// An ELF Table holds the symbols perf keeps (functions, GNU indirect
// functions, data objects, and untyped labels in text or data sections;
// tools/perf/util/symbol-elf.c), from .symtab and then .dynsym, each pass
// followed by perf's fix-ups: a symbol without a size ends where the next
// one starts (symbols__fixup_end) and of several symbols at one address
// only the best is kept (symbols__fixup_duplicate: one with a size over
// one without, a typed one over an untyped one, global over weak over
// local, fewer leading underscores, the longer name, the first seen).
// PLT stubs get the names perf gives them, name@plt, and the PLT header
// ".plt". Addresses are virtual addresses of the file; Vaddr turns the
// file offsets that samples give into them. Names are raw: symname
// demangles them.
//
// Open looks for the symbols where perf does, first in separate debug
// files (the .gnu_debuglink name next to the file, in its .debug
// directory and under /usr/lib/debug, then /usr/lib/debug/PATH.debug,
// /usr/lib/debug/PATH and /usr/lib/debug/.build-id/xx/rest.debug), then
// in the file itself; a debug file whose build-id differs is skipped.
// It does not read perf's build-id cache (~/.debug), which holds copies
// of the same files, nor the MiniDebugInfo in .gnu_debugdata, which is
// xz-compressed (the standard library has no xz).
//
// ReadKallsyms and ParseKallsyms read /proc/kallsyms, and VDSO reads the
// vDSO of the running kernel from this process's memory.
//
// Every input is untrusted: malformed files give errors, never panics.
// A Table is immutable and safe for concurrent use.
package elfsym

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
	syms []Symbol
	// Disjoint, sorted ranges [starts[i], ends[i]) in which Lookup
	// finds syms[index[i]]. The starts are a slice of their own for a
	// cache-friendly search.
	starts, ends []uint64
	index        []int32

	path     string
	buildID  []byte
	segments []segment
}

// A segment maps file offsets [off, off+size) to addresses [addr, ...).
type segment struct {
	off, addr, size uint64
}

// Lookup returns the symbol that contains addr.
func (t *Table) Lookup(addr uint64) (Symbol, bool) {
	// Find the last range starting at or below addr, with a search
	// whose steps do not depend on the comparisons, so the compiler can
	// make them branch-free: mispredicted branches would cost more than
	// the comparisons.
	starts := t.starts
	if len(starts) == 0 {
		return Symbol{}, false
	}
	base, n := 0, len(starts)
	for n > 1 {
		half := n / 2
		if starts[base+half] <= addr {
			base += half
		}
		n -= half
	}
	if starts[base] > addr || addr >= t.ends[base] {
		return Symbol{}, false
	}
	return t.syms[t.index[base]], true
}

// add appends a range to t, merging it with the previous one when both
// lead to the same symbol.
func (t *Table) add(start, end uint64, i int32) {
	if n := len(t.starts); n > 0 && t.index[n-1] == i && t.ends[n-1] == start {
		t.ends[n-1] = end
		return
	}
	t.starts = append(t.starts, start)
	t.ends = append(t.ends, end)
	t.index = append(t.index, i)
}

// Len returns the number of symbols.
func (t *Table) Len() int { return len(t.syms) }

// Symbols returns the symbols in address order. The slice must not be
// modified.
func (t *Table) Symbols() []Symbol { return t.syms }

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
