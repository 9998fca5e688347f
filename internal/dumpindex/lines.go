package dumpindex

import (
	"cmp"
	"slices"

	"github.com/jitprof/jitprof/jitdump"
)

// Lines is a function's source line table: its DEBUG_INFO entries by
// address, at the addresses of its load (CodeAddr) whatever moves
// followed.
type Lines []jitdump.DebugEntry

// Lines returns fn's line table, with the bias LLVM's listener adds to
// every address removed (jitdump.CodeLoad.LineBias). It is built on each
// call, from the dump's DEBUG_INFO read again from the file: the dump's
// pages, dropped once it was indexed, stay out of memory.
func (fn *Code) Lines() Lines {
	if fn.Debug == nil {
		return nil
	}
	debug := fn.Debug
	if fn.file != nil {
		if rec, err := fn.file.RecordAt(debug.Offset); err == nil {
			if d, ok := rec.(*jitdump.DebugInfo); ok {
				debug = d
			}
		}
	}
	bias := fn.LineBias()
	var l Lines
	for e := range debug.Entries() {
		e.Addr -= bias
		l = append(l, e)
	}
	slices.SortStableFunc(l, func(a, b jitdump.DebugEntry) int { return cmp.Compare(a.Addr, b.Addr) })
	return l
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
