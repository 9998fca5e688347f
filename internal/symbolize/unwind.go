package symbolize

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/unwind"
)

// unwindTables are the call frame information tables read so far: one per
// ELF file (on its Module) and one per jitted function, whatever its
// places, since its rules are relative to its code.
type unwindTables struct {
	mu  sync.Mutex
	jit map[*dumpindex.Code]*unwind.Table // nil for a function whose tables are unusable
	// bad counts, by dump, the functions whose UNWINDING_INFO could not be
	// used, with the first one's problem: one warning a dump, at Close,
	// rather than one a function (V8 runs have hundreds).
	bad map[*Module]*badUnwind
	// hotspot are the rules read from HotSpot's compiled methods' code,
	// which comes without CFI (hotspot.go).
	hotspot hotspotFrames
}

type badUnwind struct {
	first error
	n     int
}

// UnwindRule returns the rule that steps from the frame at f (what Lookup
// found at the address to look up: the leaf's pc, a caller's return address
// less one) to its caller's, from the call frame information of what held
// the address at the time: the ELF file's (.eh_frame, .debug_frame, a
// separate debug file's), or the jitted function's UNWINDING_INFO. ok is
// false where none covers the address; the walker then follows the frame
// pointer.
func (s *Space) UnwindRule(f Frame) (r unwind.Rule, ok bool) {
	m := f.Module
	switch {
	case m == nil:
		return r, false
	case f.Symbol.JIT != nil:
		t := s.jitUnwind(m, f.Symbol.JIT)
		if t == nil {
			return s.unwind.hotspot.rule(f.Symbol.JIT, f.Addr-f.Symbol.Start)
		}
		return t.Lookup(f.Symbol.LoadAddr(f.Addr))
	case m.Kind == ELF || m.Kind == VDSO:
		m.unwindOnce.Do(func() { m.unwind = s.opts.Tables.unwindTable(s, m) })
		if m.unwind == nil {
			return r, false
		}
		addr, ok := m.unwind.AddrOf(f.Addr - f.Map.Start + f.Map.Pgoff)
		if !ok {
			return r, false
		}
		return m.unwind.Lookup(addr)
	}
	return r, false
}

// loadUnwind reads the tables of an ELF file, the recorded one only
// (checked as its symbols' are), or of the recorded kernel's vDSO
// (the copy's, else the running one's if it is the recorded kernel). A file
// without call frame information is not worth a warning: the frame pointer
// is followed there, as perf does. Broken entries are.
func (s *Space) loadUnwind(m *Module) *unwind.Table {
	var (
		t   *unwind.Table
		err error
	)
	switch f := s.opts.Files; {
	case m.Kind == ELF:
		at, want := s.recorded(m)
		if t, err = unwind.OpenELF(m.Name, want, at); err != nil {
			s.otherFile(m, err)
		}
	case f != nil && f.VDSO != "":
		t, err = unwind.OpenELF(f.VDSO, elfsym.Recorded{}, nil)
	case s.sameKernel:
		var img []byte
		if img, err = elfsym.VDSOImage(); err == nil {
			t, err = unwind.FromELFImage(img, VDSOName)
		}
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	if err := t.Err(); err != nil {
		s.opts.Warn(fmt.Errorf("%s: call frame information partly unusable: %w", m.Name, err))
	}
	return t
}

// jitUnwind returns the table of jitted function fn of dump module m.
func (s *Space) jitUnwind(m *Module, fn *dumpindex.Code) *unwind.Table {
	if fn.Unwind() == nil {
		return nil
	}
	s.unwind.mu.Lock()
	defer s.unwind.mu.Unlock()
	t, seen := s.unwind.jit[fn]
	if seen {
		return t
	}
	t, err := unwind.FromUnwindingInfo(fn.Unwind(), fn.CodeAddr, fn.CodeSize)
	// An UNWINDING_INFO with no FDE is V8's record for code it has no
	// tables for (builtins, stubs): normal, and stepped by the frame
	// pointer.
	if err != nil && !errors.Is(err, unwind.ErrNoCFI) {
		if s.unwind.bad == nil {
			s.unwind.bad = make(map[*Module]*badUnwind)
		}
		b := s.unwind.bad[m]
		if b == nil {
			b = &badUnwind{first: fmt.Errorf("%s: %w", fn.Name, err)}
			s.unwind.bad[m] = b
		}
		b.n++
	}
	if s.unwind.jit == nil {
		s.unwind.jit = make(map[*dumpindex.Code]*unwind.Table)
	}
	s.unwind.jit[fn] = t
	return t
}

// warnBadUnwind says, one line a dump, how many of its functions'
// UNWINDING_INFO could not be used.
func (s *Space) warnBadUnwind() {
	s.unwind.mu.Lock()
	defer s.unwind.mu.Unlock()
	mods := slices.SortedFunc(maps.Keys(s.unwind.bad), func(a, b *Module) int { return cmp.Compare(a.Name, b.Name) })
	for _, m := range mods {
		b := s.unwind.bad[m]
		s.opts.Warn(fmt.Errorf("%s: the UNWINDING_INFO of %d functions unwound through is unusable (their callers are found by the frame pointer); the first: %w", m.Name, b.n, b.first))
	}
	s.unwind.bad = nil
}
