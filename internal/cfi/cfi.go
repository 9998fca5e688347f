// Package cfi reads and writes DWARF call frame information: the
// .eh_frame and .debug_frame sections of ELF files and the .eh_frame of a
// jitdump's UNWINDING_INFO. It walks a section's entries, parses CIEs and
// FDEs and their pointer encodings, runs CFA programs into rows, and
// appends the entries and instructions a JIT's tables are made of. What
// differs between architectures (register numbers, the registers a perf
// sample carries) is an Arch.
//
// It is written by hand. The one Go module that reads call frame
// information, github.com/go-delve/delve/pkg/dwarf/frame (v1.27.2), was
// judged and does not fit: its Parse gives up on the whole section at the
// first entry it cannot read (a bad CIE or pointer encoding loses every
// FDE), it panics on a truncated DW_CFA_advance_loc and on a
// DW_CFA_restore_state without a remembered state (both reachable from file
// bytes), it reads lengths past the section's end without saying so, and it
// runs a CFA program only up to one pc, keeping registers in a map per call,
// so compiling every row of a 76,000-FDE .eh_frame (node's) would mean
// re-running each FDE's program once per row. Go's standard library only
// reads DWARF's debug_info, and no maintained Go library writes CFI.
package cfi

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jitprof/jitprof/internal/leb128"
)

// Section is one CFI section: .eh_frame (CIE id 0, CIE pointers counting
// back, pc-relative pointers) or .debug_frame (CIE id all ones, CIE
// pointers as section offsets, absolute addresses).
type Section struct {
	File, Name string
	Data       []byte
	Addr       uint64           // where Data[0] is in the address space pc-relative pointers count in
	EH         bool             // .eh_frame's rules, not .debug_frame's
	Order      binary.ByteOrder // of the fields: the target's
	AddrSize   int              // of absptr pointers in .eh_frame CIEs and of version 1 and 3 .debug_frame ones: 8 or 4

	cies map[int]*CIE
}

// Errorf returns an error about the entry (or the field) at off.
func (s *Section) Errorf(off int, format string, args ...any) error {
	return &Error{File: s.File, Section: s.Name, Offset: uint64(off), Msg: fmt.Sprintf(format, args...)}
}

// Error is an entry of a CFI section that could not be used. Entries
// around it are kept.
type Error struct {
	File    string
	Section string // ".eh_frame", ".debug_frame"
	Offset  uint64 // of the entry (or the field) in the section
	Msg     string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s+%#x: %s", e.File, e.Section, e.Offset, e.Msg)
}

// Entry is a CIE, an FDE or a zero length (a terminator in .eh_frame, or
// padding) of a section.
type Entry struct {
	Off    int    // of the entry in the section
	Data   []byte // the whole entry, its length field included
	IDOff  int    // of the CIE id or CIE pointer in Data, 4 bytes even in 64-bit DWARF in .eh_frame (LSB)
	idSize int
	CIE    bool
	// CIEOff is, for an FDE, where its CIE pointer leads in the section.
	CIEOff uint64
}

// Terminator tells a zero length, which ends an .eh_frame's entries.
func (e *Entry) Terminator() bool { return len(e.Data) == 4 && e.IDOff == 0 }

// Body is what follows the CIE id or pointer.
func (e *Entry) Body() []byte { return e.Data[e.IDOff+e.idSize:] }

// Next returns the entry at off, where the one before ended. An error
// says that the entry's length cannot be read or runs past the section's
// end: the entries after it cannot be found.
func (s *Section) Next(off int) (Entry, error) {
	data, o := s.Data, s.Order
	if len(data)-off < 4 {
		return Entry{}, s.Errorf(off, "%d trailing bytes cannot hold an entry", len(data)-off)
	}
	length, hdr := uint64(o.Uint32(data[off:])), 4
	if length == 0 {
		return Entry{Off: off, Data: data[off : off+4]}, nil
	}
	idSize := 4
	if length == 0xffffffff {
		if len(data)-off < 12 {
			return Entry{}, s.Errorf(off, "64-bit entry length truncated")
		}
		length, hdr = o.Uint64(data[off+4:]), 12
		if !s.EH {
			idSize = 8 // .eh_frame keeps a 4-byte CIE pointer even in 64-bit DWARF (LSB)
		}
	}
	if length > uint64(len(data)-off-hdr) || length < uint64(idSize) {
		return Entry{}, s.Errorf(off, "entry length %d does not fit the %d bytes left", length, len(data)-off-hdr)
	}
	e := Entry{Off: off, Data: data[off : off+hdr+int(length)], IDOff: hdr, idSize: idSize}
	var id uint64
	if idSize == 4 {
		id = uint64(o.Uint32(e.Data[hdr:]))
	} else {
		id = o.Uint64(e.Data[hdr:])
	}
	if s.EH {
		e.CIE = id == 0
		e.CIEOff = uint64(off+hdr) - id // counts back from the pointer itself
	} else {
		e.CIE = id == 0xffffffff || idSize == 8 && id == ^uint64(0)
		e.CIEOff = id
	}
	return e, nil
}

// CIE is a parsed Common Information Entry.
type CIE struct {
	Off       int // of the entry in its section
	CodeAlign uint64
	DataAlign int64
	RA        uint64 // the return address column
	Enc       byte   // of the FDEs' pc_begin and pc_range
	Aug       bool   // 'z': FDEs carry augmentation data
	AddrSize  int
	Initial   []byte // the initial instructions
	big       bool   // big-endian fields
	err       error  // the CIE is unusable, and its FDEs with it

	// The rules after the initial instructions, for the Arch of archOf,
	// computed by the first Machine to start an FDE of this CIE.
	start   State
	archOf  *Arch
	initErr error
}

// CIE returns the CIE at off, parsing it the first time.
func (s *Section) CIE(off uint64) (*CIE, error) {
	if off >= uint64(len(s.Data)) {
		return nil, errors.New("outside the section")
	}
	if c, ok := s.cies[int(off)]; ok {
		return c, c.err
	}
	if s.cies == nil {
		s.cies = map[int]*CIE{}
	}
	c := new(CIE)
	s.parseCIE(int(off), c)
	s.cies[int(off)] = c
	return c, c.err
}

// ParseCIE parses the CIE at off into c, keeping nothing: for a reader
// that keeps the CIEs it needs itself.
func (s *Section) ParseCIE(off uint64, c *CIE) error {
	if off >= uint64(len(s.Data)) {
		*c = CIE{}
		return errors.New("outside the section")
	}
	s.parseCIE(int(off), c)
	return c.err
}

func (s *Section) addrSize() int {
	if s.AddrSize == 0 {
		return 8
	}
	return s.AddrSize
}

// bigEndianProbe reads 1 in big-endian order; a package variable, so that
// reading it through an interface allocates nothing.
var bigEndianProbe = [2]byte{0, 1}

func (s *Section) parseCIE(off int, c *CIE) {
	*c = CIE{Off: off, big: s.Order.Uint16(bigEndianProbe[:]) == 1}
	data, o := s.Data[off:], s.Order
	if len(data) < 4 {
		c.err = errors.New("truncated")
		return
	}
	length, hdr, idSize := uint64(o.Uint32(data)), 4, 4
	if length == 0xffffffff {
		if len(data) < 12 {
			c.err = errors.New("truncated")
			return
		}
		length, hdr = o.Uint64(data[4:]), 12
		if !s.EH {
			idSize = 8
		}
	}
	if length > uint64(len(data)-hdr) || length < uint64(idSize) {
		c.err = errors.New("its length runs past the section")
		return
	}
	r := reader{p: data[hdr+idSize : hdr+int(length)], big: c.big}
	if id := data[hdr : hdr+idSize]; s.EH && o.Uint32(id) != 0 || !s.EH && id[0] != 0xff {
		c.err = errors.New("not a CIE")
		return
	}
	version := r.u8()
	aug := r.cstring()
	c.AddrSize = s.addrSize()
	switch {
	case version == 1 || version == 3:
	case version == 4 && !s.EH:
		c.AddrSize = int(r.u8())
		if seg := r.u8(); seg != 0 {
			c.err = fmt.Errorf("segment selectors (%d bytes) are not supported", seg)
			return
		}
		if c.AddrSize != 4 && c.AddrSize != 8 {
			c.err = fmt.Errorf("address size %d", c.AddrSize)
			return
		}
	default:
		c.err = fmt.Errorf("version %d", version)
		return
	}
	c.CodeAlign = r.uleb()
	c.DataAlign = r.sleb()
	if version == 1 {
		c.RA = uint64(r.u8())
	} else {
		c.RA = r.uleb()
	}
	c.Enc = PEAbs
	if len(aug) > 0 {
		if aug[0] != 'z' {
			c.err = fmt.Errorf("augmentation %q", aug)
			return
		}
		c.Aug = true
		n := r.uleb()
		if n > uint64(len(r.p)) {
			c.err = errors.New("augmentation data runs past the entry")
			return
		}
		ad := reader{p: r.p[:n], big: c.big}
		r.p = r.p[n:]
		for _, ch := range aug[1:] {
			switch ch {
			case 'R':
				c.Enc = ad.u8()
			case 'L':
				ad.u8() // the LSDA's encoding; the pointer is in each FDE's augmentation data
			case 'P':
				if err := ad.skipPtr(ad.u8(), c.AddrSize); err != nil {
					c.err = fmt.Errorf("personality: %v", err)
					return
				}
			case 'S', 'B', 'G':
				// a signal frame, BTI, MTE: no data
			default:
				c.err = fmt.Errorf("augmentation %q: unknown %q", aug, ch)
				return
			}
		}
		if ad.bad {
			c.err = errors.New("augmentation data truncated")
			return
		}
	}
	if r.bad {
		c.err = errors.New("truncated")
		return
	}
	c.Initial = r.p
}

// FDE is a parsed Frame Description Entry.
type FDE struct {
	Start, End uint64
	CIE        *CIE
	Off        int    // of the entry in its section
	PCOff      int    // of pc_begin in the entry
	Program    []byte // its call frame instructions
}

// FDE parses the fields of FDE e, whose CIE is c.
func (s *Section) FDE(e *Entry, c *CIE) (FDE, error) {
	pos := e.Off + e.IDOff + e.idSize // of pc_begin in the section
	r := reader{p: e.Body(), big: c.big}
	start, err := r.ptr(c.Enc, s.Addr+uint64(pos), c.AddrSize)
	if err != nil {
		return FDE{}, fmt.Errorf("pc_begin: %v", err)
	}
	size, err := r.ptr(c.Enc&0x0f, 0, c.AddrSize)
	if err != nil {
		return FDE{}, fmt.Errorf("pc_range: %v", err)
	}
	if c.Aug {
		n := r.uleb()
		if r.bad || n > uint64(len(r.p)) {
			return FDE{}, errors.New("augmentation data runs past the entry")
		}
		r.p = r.p[n:]
	}
	if r.bad {
		return FDE{}, errors.New("truncated")
	}
	if start+size < start {
		return FDE{}, fmt.Errorf("range %#x+%#x wraps", start, size)
	}
	return FDE{Start: start, End: start + size, CIE: c, Off: e.Off, PCOff: pos - e.Off, Program: r.p}, nil
}

// reader reads the fields of an entry; bad tells that it ran out of bytes,
// after which every read gives 0.
type reader struct {
	p   []byte
	bad bool
	big bool // fixed-size fields are big-endian
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
	if r.big {
		for _, b := range r.p[:n] {
			v = v<<8 | uint64(b)
		}
	} else {
		for i := n - 1; i >= 0; i-- {
			v = v<<8 | uint64(r.p[i])
		}
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
