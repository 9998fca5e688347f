package dumpindex

import (
	"cmp"
	"iter"
	"slices"

	"github.com/jitprof/jitprof/jitdump"
)

// Lines is a function's source line table: its DEBUG_INFO entries by
// address, at the addresses of its load (CodeAddr) whatever moves
// followed.
type Lines []jitdump.DebugEntry

// Lines returns fn's line table, with the bias its runtime adds to every
// address removed (jitdump.CodeLoad.LineBias) and the entries that cannot
// be right dropped (jitdump.CodeLoad.BadEntry). It is built on each call,
// from the dump's DEBUG_INFO read again from the file: the dump's pages,
// dropped once it was indexed, stay out of memory.
func (fn *Code) Lines() Lines {
	if fn.Debug() == nil {
		return nil // most functions of some runtimes: no garbage for them
	}
	bias := fn.LineBias()
	var l Lines
	for e := range fn.Entries() {
		e.Addr -= bias
		l = append(l, e)
	}
	slices.SortStableFunc(l, func(a, b jitdump.DebugEntry) int { return cmp.Compare(a.Addr, b.Addr) })
	return l
}

// Entries returns fn's DEBUG_INFO entries as written (bias included) but
// for those that cannot be right (jitdump.CodeLoad.BadEntry), read again
// from the file as Lines does.
func (fn *Code) Entries() iter.Seq[jitdump.DebugEntry] {
	return func(yield func(jitdump.DebugEntry) bool) {
		for e := range fn.allEntries() {
			if fn.BadEntry(e) == "" && !yield(e) {
				return
			}
		}
	}
}

// allEntries returns all of fn's DEBUG_INFO entries, bad ones included.
func (fn *Code) allEntries() iter.Seq[jitdump.DebugEntry] {
	debug := fn.debugRecord()
	if debug == nil {
		return func(func(jitdump.DebugEntry) bool) {}
	}
	return debug.Entries()
}

// debugRecord returns fn's DEBUG_INFO read again from the file (the one
// read first when that fails), nil when it has none.
func (fn *Code) debugRecord() *jitdump.DebugInfo {
	debug := fn.Debug()
	if debug == nil {
		return nil
	}
	if rec, err := fn.extra.file.RecordAt(debug.Offset); err == nil {
		if d, ok := rec.(*jitdump.DebugInfo); ok {
			return d
		}
	}
	return debug
}

// At returns the line of the instruction at addr: that of the entry with
// the greatest address at or below it, since an entry covers the code up
// to the next one. The code before a function's first entry gets the line
// of the last entry before its start (Erlang writes one there), as perf
// reads the line tables it writes; ok is false when there is none.
func (l Lines) At(addr uint64) (file string, line uint32, ok bool) {
	i, _ := slices.BinarySearchFunc(l, addr, func(e jitdump.DebugEntry, a uint64) int {
		if e.Addr <= a {
			return -1
		}
		return 1
	})
	if i == 0 {
		return "", 0, false
	}
	e := l[i-1]
	return e.File, e.Line, true
}
