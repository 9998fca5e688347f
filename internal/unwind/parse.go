package unwind

import (
	"errors"
	"slices"

	"github.com/jitprof/jitprof/internal/cfi"
)

// Supported says whether stacks of architecture a are unwound, and if not,
// why. Rules are of x86-64's shape: the return address always on the
// stack, which an arm64 leaf keeps in x30.
func Supported(a *cfi.Arch) error {
	if a == cfi.ARM64 {
		return errors.New("arm64 stacks are not unwound yet")
	}
	if a != cfi.X86_64 {
		return errors.New("only x86-64 stacks are unwound")
	}
	return nil
}

// fde is an FDE to compile into a table.
type fde struct {
	cfi.FDE
	sec  *cfi.Section
	prio int // lower wins where FDEs of several sections overlap
}

// parseSection collects the FDEs of s, running their CIEs' initial
// instructions with m. Problems with single entries are passed to bad,
// and reading goes on with the next entry; only a length that runs past
// the section's end stops it.
func parseSection(s *cfi.Section, m *cfi.Machine, fdes []fde, prio int, bad func(error)) []fde {
	fdes = slices.Grow(fdes, len(s.Data)/32) // an FDE takes 20 bytes or more: a guess, not a bound
	for off := 0; off < len(s.Data); {
		e, err := s.Next(off)
		if err != nil {
			bad(err)
			break
		}
		off += len(e.Data)
		if e.CIE || e.Terminator() {
			continue // a CIE is parsed when an FDE names it
		}
		c, err := s.CIE(e.CIEOff)
		if err == nil {
			err = m.Init(c)
		}
		if err != nil {
			bad(s.Errorf(e.Off, "FDE's CIE at %#x: %v", e.CIEOff, err))
			continue
		}
		f, err := s.FDE(&e, c)
		if err != nil {
			bad(s.Errorf(e.Off, "FDE: %v", err))
			continue
		}
		if f.End > f.Start {
			fdes = append(fdes, fde{f, s, prio})
		}
	}
	return fdes
}
