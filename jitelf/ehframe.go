package jitelf

import (
	"cmp"
	"slices"

	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/internal/leb128"
)

// DW_EH_PE pointer encodings (LSB 3.0, "DWARF Exception Header Encoding").
const (
	pePtr     = 0x00 // absptr: address-sized
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
	peAligned = 0x50
	peInd     = 0x80
)

// ehEntry is a CIE or FDE of a function's eh_frame, to be copied into the
// image's .eh_frame.
type ehEntry struct {
	src    []byte // the whole entry, its length field included
	fn     int    // index of the function
	srcOff int    // of the entry in the function's eh_frame
	cie    int    // for an FDE, the index in builder.eh of its CIE; -1 for a CIE
	idOff  int    // of the CIE id or CIE pointer in src, 4 bytes even in 64-bit DWARF (LSB)
	pcOff  int    // FDE: of pc_begin in src
	enc    byte   // CIE: its FDEs' pointer encoding; FDE: pc_begin's
	target uint64 // FDE: where pc_begin points, as an offset in the function's code
	newOff uint64 // in the image's .eh_frame, or dropped
	val    uint64 // FDE: pc_begin's new value
}

const dropped = ^uint64(0)

// ehTableEntry is a row of the .eh_frame_hdr search table.
type ehTableEntry struct{ loc, fde uint64 }

// parseEH collects the CIEs and the FDEs that land inside function i, as
// the runtime laid them out for perf: the eh_frame right after the code,
// 8-aligned, so that a pc-relative pc_begin at offset f holding v points at
// code offset align8(size) + f + v.
func (b *builder) parseEH(i int) {
	fn := &b.fns[i]
	if fn.Unwind == nil {
		return
	}
	data, o := fn.Unwind.EHFrame, b.f.Order
	first, fdes := len(b.eh), 0
	cies := b.ehCIEs[:0]
	defer func() { b.ehCIEs = cies[:0] }()
	for off := 0; off < len(data); {
		if len(data)-off < 4 {
			b.fdesLost++ // trailing bytes that cannot be an entry
			break
		}
		length, hdr := uint64(o.Uint32(data[off:])), 4
		if length == 0 {
			break // the terminator
		}
		if length == 0xffffffff {
			if len(data)-off < 12 {
				b.fdesLost++
				break
			}
			length, hdr = o.Uint64(data[off+4:]), 12
		}
		const idSize = 4
		if length > uint64(len(data)-off-hdr) || length < idSize {
			b.fdesLost++ // a length that runs past the data: the rest cannot be walked
			break
		}
		end := off + hdr + int(length)
		e := ehEntry{src: data[off:end], fn: i, srcOff: off, idOff: hdr, cie: -1}
		off = end
		id := uint64(o.Uint32(e.src[hdr:]))
		if id == 0 {
			if enc, ok := cieEncoding(e.src[hdr+idSize:], b.f.AddrSize()); ok {
				e.enc = enc
				cies = append(cies, len(b.eh))
				b.eh = append(b.eh, e)
			}
			continue
		}
		ciePos := uint64(e.srcOff+hdr) - id // the pointer counts back from itself
		e.cie = slices.IndexFunc(cies, func(c int) bool { return uint64(b.eh[c].srcOff) == ciePos })
		if e.cie < 0 {
			b.fdesLost++ // its CIE is not in this function's data, or was not understood
			continue
		}
		e.cie = cies[e.cie]
		e.enc = b.eh[e.cie].enc
		e.pcOff = hdr + idSize
		var ok bool
		if e.target, ok = b.fdeTarget(&e, uint64(len(fn.Code)), fn.CodeAddr); !ok {
			b.fdesLost++
			continue
		}
		b.eh = append(b.eh, e)
		fdes++
	}
	if fdes == 0 {
		b.eh = b.eh[:first] // CIEs alone describe no code
	}
}

// readUint reads an n-byte unsigned value in the target's byte order.
func (b *builder) readUint(p []byte, n int) uint64 {
	switch n {
	case 2:
		return uint64(b.f.Order.Uint16(p))
	case 4:
		return uint64(b.f.Order.Uint32(p))
	}
	return b.f.Order.Uint64(p)
}

// encSize is the size of a pointer of encoding enc, 0 when variable or
// not understood.
func encSize(enc byte, addrSize int) int {
	switch enc & 0x0f {
	case pePtr:
		return addrSize
	case peUdata2, peSdata2:
		return 2
	case peUdata4, peSdata4:
		return 4
	case peUdata8, peSdata8:
		return 8
	}
	return 0
}

func encSigned(enc byte) bool { return enc&0x08 != 0 }

// fdeTarget decodes e's pc_begin and pc_range and tells where its range
// starts in the function, when all of it lies within the function's size
// bytes of code at codeAddr.
func (b *builder) fdeTarget(e *ehEntry, size, codeAddr uint64) (uint64, bool) {
	app, n := e.enc&0x70, encSize(e.enc, b.f.AddrSize())
	if e.enc&peInd != 0 || (app != pePtr && app != pePCRel) || n == 0 || e.pcOff+2*n > len(e.src) {
		return 0, false
	}
	v := b.readUint(e.src[e.pcOff:], n)
	if encSigned(e.enc) && n < 8 {
		v = uint64(int64(v<<(64-8*n)) >> (64 - 8*n))
	}
	pcRange := b.readUint(e.src[e.pcOff+n:], n)
	var target uint64
	if app == pePCRel {
		target = elfwrite.AlignUp(size, 8) + uint64(e.srcOff+e.pcOff) + v
	} else {
		target = v - codeAddr
	}
	if n == 4 && b.f.AddrSize() == 4 {
		target = uint64(uint32(target)) // 32-bit address arithmetic wraps
	}
	return target, target < size && pcRange <= size-target
}

// cieEncoding returns the FDE pointer encoding of the CIE whose body (after
// the CIE id) is p: absptr unless its augmentation says otherwise through
// 'R'. Augmentations this cannot walk make the CIE, and its FDEs, unusable.
func cieEncoding(p []byte, addrSize int) (byte, bool) {
	r := ehReader{p: p}
	version := r.u8()
	aug := r.cstring()
	if version != 1 && version != 3 {
		return 0, false
	}
	r.uleb() // code alignment
	r.uleb() // data alignment (signed, but only skipped)
	if version == 1 {
		r.u8() // return address register
	} else {
		r.uleb()
	}
	if len(aug) == 0 {
		return pePtr, !r.bad
	}
	if aug[0] != 'z' {
		return 0, false
	}
	r.uleb() // augmentation data length
	for _, c := range aug[1:] {
		switch c {
		case 'R':
			enc := r.u8()
			return enc, !r.bad
		case 'L':
			r.u8()
		case 'P':
			enc := r.u8()
			n := encSize(enc, addrSize)
			if enc&0x70 == peAligned || n == 0 && enc&0x0f != peUleb && enc&0x0f != peSleb {
				return 0, false
			}
			if n == 0 {
				r.uleb()
			} else {
				r.skip(n)
			}
		case 'S', 'B':
		default:
			return 0, false // unknown: where its data ends is not known
		}
	}
	return pePtr, !r.bad
}

// ehReader reads the fields of a CIE; bad tells that it ran out of bytes.
type ehReader struct {
	p   []byte
	bad bool
}

func (r *ehReader) u8() byte {
	if len(r.p) == 0 {
		r.bad = true
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

func (r *ehReader) skip(n int) {
	if len(r.p) < n {
		r.bad = true
		n = len(r.p)
	}
	r.p = r.p[n:]
}

func (r *ehReader) uleb() uint64 {
	v, n := leb128.Unsigned(r.p)
	if n == 0 {
		r.bad = true
		n = len(r.p)
	}
	r.p = r.p[n:]
	return v
}

func (r *ehReader) cstring() []byte {
	for i, c := range r.p {
		if c == 0 {
			s := r.p[:i]
			r.p = r.p[i+1:]
			return s
		}
	}
	r.bad = true
	return nil
}

// layoutEH places the collected entries in an .eh_frame at ehStart and
// fills it, each FDE's pc_begin moved to where its function now is. The
// functions' offsets are known.
func (b *builder) layoutEH(ehStart uint64) {
	addrSize := b.f.AddrSize()
	cur := uint64(0)
	for i := range b.eh {
		e := &b.eh[i]
		if e.cie < 0 {
			e.newOff = cur
			cur += uint64(len(e.src))
			continue
		}
		target := b.offs[e.fn] + e.target
		e.val = target
		if e.enc&0x70 == pePCRel {
			e.val = target - (ehStart + cur + uint64(e.pcOff))
		}
		if !fits(e.val, e.enc, addrSize) {
			e.newOff = dropped
			b.fdesLost++
			continue
		}
		e.newOff = cur
		b.ehTable = append(b.ehTable, ehTableEntry{loc: target, fde: ehStart + cur})
		cur += uint64(len(e.src))
	}

	b.ehFrame = slices.Grow(b.ehFrame[:0], int(cur))
	o := b.f.Order
	for i := range b.eh {
		e := &b.eh[i]
		if e.newOff == dropped {
			continue
		}
		start := len(b.ehFrame)
		b.ehFrame = append(b.ehFrame, e.src...)
		if e.cie < 0 {
			continue
		}
		ent := b.ehFrame[start:]
		o.PutUint32(ent[e.idOff:], uint32(e.newOff+uint64(e.idOff)-b.eh[e.cie].newOff))
		switch encSize(e.enc, addrSize) {
		case 2:
			o.PutUint16(ent[e.pcOff:], uint16(e.val))
		case 4:
			o.PutUint32(ent[e.pcOff:], uint32(e.val))
		case 8:
			o.PutUint64(ent[e.pcOff:], e.val)
		}
	}
	less := func(x, y ehTableEntry) int { return cmp.Compare(x.loc, y.loc) }
	if !slices.IsSortedFunc(b.ehTable, less) {
		slices.SortStableFunc(b.ehTable, less)
	}
}

// fits tells whether v can be stored as a pointer of encoding enc. A
// pointer as wide as an address always can: address arithmetic wraps.
func fits(v uint64, enc byte, addrSize int) bool {
	n := encSize(enc, addrSize)
	if n >= addrSize {
		return true
	}
	bits := 8 * n
	if encSigned(enc) {
		return int64(v)>>(bits-1) == 0 || int64(v)>>(bits-1) == -1
	}
	return v>>bits == 0
}

// writeEHHdr writes the .eh_frame_hdr at hdrStart for the .eh_frame at
// ehStart: the eh_frame pointer pc-relative, the search table's entries
// relative to the header, all 4 bytes, as every linker writes them.
func (b *builder) writeEHHdr(ehStart, hdrStart uint64) {
	o := b.f.Order
	h := append(b.ehHdr[:0], 1, pePCRel|peSdata4, peUdata4, peDataRel|peSdata4)
	h = o.AppendUint32(h, uint32(ehStart-(hdrStart+4)))
	h = o.AppendUint32(h, uint32(len(b.ehTable)))
	for _, e := range b.ehTable {
		h = o.AppendUint32(h, uint32(e.loc-hdrStart))
		h = o.AppendUint32(h, uint32(e.fde-hdrStart))
	}
	b.ehHdr = h
}
