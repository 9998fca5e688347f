package unwind

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/jitprof/jitprof/internal/leb128"
)

// The CFI parser is written by hand. The one Go module that reads call
// frame information, github.com/go-delve/delve/pkg/dwarf/frame (v1.27.2),
// was judged and does not fit: its Parse gives up on the whole section at
// the first entry it cannot read (a bad CIE or pointer encoding loses every
// FDE), it panics on a truncated DW_CFA_advance_loc and on a
// DW_CFA_restore_state without a remembered state (both reachable from file
// bytes), it reads lengths past the section's end without saying so, and it
// runs a CFA program only up to one pc, keeping registers in a map per call,
// so compiling every row of a 76,000-FDE .eh_frame (node's) would mean
// re-running each FDE's program once per row.

// DW_EH_PE pointer encodings (LSB 3.0, "DWARF Exception Header Encoding").
const (
	peAbs     = 0x00
	peUleb    = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSleb    = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c
	pePCRel   = 0x10
	peDataRel = 0x30
	peOmit    = 0xff
)

// x86-64 DWARF register numbers (System V psABI, figure 3.36).
const (
	dwRBP = 6
	dwRSP = 7
	dwRIP = 16 // the return address column
)

// section is one CFI section: .eh_frame (CIE id 0, CIE pointers counting
// back, pc-relative pointers) or .debug_frame (CIE id all ones, CIE
// pointers as section offsets, absolute addresses).
type section struct {
	file, name string
	data       []byte
	addr       uint64 // where data[0] is in the address space pc-relative pointers count in
	eh         bool
}

func (s *section) errorf(off int, format string, args ...any) error {
	return &CFIError{File: s.file, Section: s.name, Offset: uint64(off), Msg: fmt.Sprintf(format, args...)}
}

// CFIError is an entry of a CFI section that could not be used. Entries
// around it are kept.
type CFIError struct {
	File    string
	Section string // ".eh_frame", ".debug_frame"
	Offset  uint64 // of the entry (or the field) in the section
	Msg     string
}

func (e *CFIError) Error() string {
	return fmt.Sprintf("%s: %s+%#x: %s", e.File, e.Section, e.Offset, e.Msg)
}

// cie is a parsed Common Information Entry.
type cie struct {
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	enc       byte // of the FDEs' pc_begin and pc_range
	aug       bool // 'z': FDEs carry augmentation data
	addrSize  int
	start     state // the rules after the initial instructions
	err       error // the CIE is unusable, and its FDEs with it
}

// fde is a parsed Frame Description Entry, its program not yet run.
type fde struct {
	start, end uint64
	cie        *cie
	sec        *section
	off        int    // of the entry in its section, for errors
	prog       []byte // its call frame instructions
	prio       int    // lower wins where FDEs of several sections overlap
}

// parseSection collects the FDEs of s. Problems with single entries are
// passed to bad, and reading goes on with the next entry; only a length
// that runs past the section's end stops it.
func parseSection(s *section, fdes []fde, prio int, bad func(error)) []fde {
	cies := map[int]*cie{}
	data, o := s.data, binary.LittleEndian
	fdes = slices.Grow(fdes, len(data)/32) // an FDE takes 20 bytes or more: a guess, not a bound
	for off := 0; off < len(data); {
		if len(data)-off < 4 {
			bad(s.errorf(off, "%d trailing bytes cannot hold an entry", len(data)-off))
			break
		}
		length, hdr := uint64(o.Uint32(data[off:])), 4
		if length == 0 { // a terminator (.eh_frame) or padding
			off += 4
			continue
		}
		idSize := 4
		if length == 0xffffffff {
			if len(data)-off < 12 {
				bad(s.errorf(off, "64-bit entry length truncated"))
				break
			}
			length, hdr = o.Uint64(data[off+4:]), 12
			if !s.eh {
				idSize = 8 // .eh_frame keeps a 4-byte CIE pointer even in 64-bit DWARF (LSB)
			}
		}
		if length > uint64(len(data)-off-hdr) || length < uint64(idSize) {
			bad(s.errorf(off, "entry length %d does not fit the %d bytes left", length, len(data)-off-hdr))
			break
		}
		entry := data[off : off+hdr+int(length)]
		start := off
		off += len(entry)

		var id uint64
		if idSize == 4 {
			id = uint64(o.Uint32(entry[hdr:]))
		} else {
			id = o.Uint64(entry[hdr:])
		}
		isCIE := id == 0
		if !s.eh {
			isCIE = id == 0xffffffff || idSize == 8 && id == ^uint64(0)
		}
		if isCIE {
			continue // parsed when an FDE names it
		}
		ciePos := id
		if s.eh {
			ciePos = uint64(start+hdr) - id // counts back from the pointer itself
		}
		c := parseCIEAt(s, cies, ciePos)
		if c.err != nil {
			bad(s.errorf(start, "FDE's CIE at %#x: %v", ciePos, c.err))
			continue
		}
		f, err := parseFDE(s, c, entry[hdr+idSize:], start+hdr+idSize)
		if err != nil {
			bad(s.errorf(start, "FDE: %v", err))
			continue
		}
		if f.end > f.start {
			f.off, f.prio = start, prio
			fdes = append(fdes, f)
		}
	}
	return fdes
}

// parseCIEAt returns the CIE at off, parsing it the first time.
func parseCIEAt(s *section, cies map[int]*cie, off uint64) *cie {
	if off >= uint64(len(s.data)) {
		return &cie{err: errors.New("outside the section")}
	}
	if c, ok := cies[int(off)]; ok {
		return c
	}
	c := parseCIE(s, int(off))
	cies[int(off)] = c
	return c
}

func parseCIE(s *section, off int) *cie {
	c := &cie{}
	data, o := s.data[off:], binary.LittleEndian
	if len(data) < 4 {
		c.err = errors.New("truncated")
		return c
	}
	length, hdr, idSize := uint64(o.Uint32(data)), 4, 4
	if length == 0xffffffff {
		if len(data) < 12 {
			c.err = errors.New("truncated")
			return c
		}
		length, hdr = o.Uint64(data[4:]), 12
		if !s.eh {
			idSize = 8
		}
	}
	if length > uint64(len(data)-hdr) || length < uint64(idSize) {
		c.err = errors.New("its length runs past the section")
		return c
	}
	r := reader{p: data[hdr+idSize : hdr+int(length)]}
	if id := data[hdr : hdr+idSize]; s.eh && o.Uint32(id) != 0 || !s.eh && id[0] != 0xff {
		c.err = errors.New("not a CIE")
		return c
	}
	version := r.u8()
	aug := r.cstring()
	c.addrSize = 8
	switch {
	case version == 1 || version == 3:
	case version == 4 && !s.eh:
		c.addrSize = int(r.u8())
		if seg := r.u8(); seg != 0 {
			c.err = fmt.Errorf("segment selectors (%d bytes) are not supported", seg)
			return c
		}
		if c.addrSize != 4 && c.addrSize != 8 {
			c.err = fmt.Errorf("address size %d", c.addrSize)
			return c
		}
	default:
		c.err = fmt.Errorf("version %d", version)
		return c
	}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		c.raReg = uint64(r.u8())
	} else {
		c.raReg = r.uleb()
	}
	c.enc = peAbs
	if len(aug) > 0 {
		if aug[0] != 'z' {
			c.err = fmt.Errorf("augmentation %q", aug)
			return c
		}
		c.aug = true
		n := r.uleb()
		if n > uint64(len(r.p)) {
			c.err = errors.New("augmentation data runs past the entry")
			return c
		}
		ad := reader{p: r.p[:n]}
		r.p = r.p[n:]
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.enc = ad.u8()
			case 'L':
				ad.u8() // the LSDA's encoding; the pointer is in each FDE's augmentation data
			case 'P':
				enc := ad.u8()
				if _, err := ad.ptr(enc&^0x80, 0, c.addrSize); err != nil {
					c.err = fmt.Errorf("personality: %v", err)
					return c
				}
			case 'S', 'B', 'G':
				// a signal frame, BTI, MTE: no data
			default:
				c.err = fmt.Errorf("augmentation %q: unknown %q", aug, ch)
				return c
			}
		}
		if ad.bad {
			c.err = errors.New("augmentation data truncated")
			return c
		}
	}
	if r.bad {
		c.err = errors.New("truncated")
		return c
	}
	if c.codeAlign == 0 {
		c.err = errors.New("code alignment factor 0")
		return c
	}
	m := machine{c: c}
	if err := m.run(r.p); err != nil {
		c.err = fmt.Errorf("initial instructions: %v", err)
	}
	c.start = m.st
	return c
}

// parseFDE reads an FDE's fields after its CIE pointer, which start at
// offset pos of the section.
func parseFDE(s *section, c *cie, body []byte, pos int) (fde, error) {
	r := reader{p: body}
	start, err := r.ptr(c.enc, s.addr+uint64(pos), c.addrSize)
	if err != nil {
		return fde{}, fmt.Errorf("pc_begin: %v", err)
	}
	size, err := r.ptr(c.enc&0x0f, 0, c.addrSize)
	if err != nil {
		return fde{}, fmt.Errorf("pc_range: %v", err)
	}
	if c.aug {
		n := r.uleb()
		if r.bad || n > uint64(len(r.p)) {
			return fde{}, errors.New("augmentation data runs past the entry")
		}
		r.p = r.p[n:]
	}
	if r.bad {
		return fde{}, errors.New("truncated")
	}
	if start+size < start {
		return fde{}, fmt.Errorf("range %#x+%#x wraps", start, size)
	}
	return fde{start: start, end: start + size, cie: c, sec: s, prog: r.p}, nil
}

// reader reads the fields of an entry; bad tells that it ran out of bytes,
// after which every read gives 0.
type reader struct {
	p   []byte
	bad bool
}

func (r *reader) u8() byte {
	if len(r.p) == 0 {
		r.bad = true
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

func (r *reader) fixed(n int) uint64 {
	if len(r.p) < n {
		r.bad, r.p = true, nil
		return 0
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(r.p[i])
	}
	r.p = r.p[n:]
	return v
}

func (r *reader) uleb() uint64 {
	v, n := leb128.Unsigned(r.p)
	if n == 0 {
		r.bad, r.p = true, nil
	}
	r.p = r.p[n:]
	return v
}

func (r *reader) sleb() int64 {
	v, n := leb128.Signed(r.p)
	if n == 0 {
		r.bad, r.p = true, nil
	}
	r.p = r.p[n:]
	return v
}

func (r *reader) cstring() []byte {
	for i, c := range r.p {
		if c == 0 {
			s := r.p[:i]
			r.p = r.p[i+1:]
			return s
		}
	}
	r.bad, r.p = true, nil
	return nil
}

func (r *reader) block() []byte {
	n := r.uleb()
	if r.bad || n > uint64(len(r.p)) {
		r.bad, r.p = true, nil
		return nil
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

// ptr reads a pointer of encoding enc; at is the address of the field, for
// pc-relative pointers.
func (r *reader) ptr(enc byte, at uint64, addrSize int) (uint64, error) {
	if enc == peOmit {
		return 0, nil
	}
	var v uint64
	switch enc & 0x0f {
	case peAbs:
		v = r.fixed(addrSize)
	case peUleb:
		v = r.uleb()
	case peUdata2:
		v = r.fixed(2)
	case peUdata4:
		v = r.fixed(4)
	case peUdata8:
		v = r.fixed(8)
	case peSleb:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int16(r.fixed(2)))
	case peSdata4:
		v = uint64(int32(r.fixed(4)))
	case peSdata8:
		v = r.fixed(8)
	default:
		return 0, fmt.Errorf("pointer encoding %#x", enc)
	}
	if r.bad {
		return 0, errors.New("truncated")
	}
	switch enc & 0x70 {
	case peAbs:
	case pePCRel:
		v += at
	default:
		// datarel, textrel, funcrel and aligned need bases that x86-64
		// .eh_frame FDEs never use (datarel is for .eh_frame_hdr).
		return 0, fmt.Errorf("pointer encoding %#x", enc)
	}
	if enc&0x80 != 0 {
		return 0, fmt.Errorf("indirect pointer encoding %#x", enc)
	}
	return v, nil
}
