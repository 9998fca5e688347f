package jitelf

import (
	"cmp"
	"slices"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfwrite"
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
	fn := b.fn(i)
	if fn.Unwind == nil {
		return
	}
	size, addrSize := uint64(len(fn.Code)), b.f.AddrSize()
	sec := cfi.Section{Data: fn.Unwind.EHFrame, Addr: fn.CodeAddr + elfwrite.AlignUp(size, 8), EH: true, Order: b.f.Order, AddrSize: addrSize}
	first, fdes := len(b.eh), 0
	cies := b.ehCIEs[:0]
	defer func() { b.ehCIEs = cies[:0] }()
	var c cfi.CIE // the last CIE parsed: a function's FDEs follow their CIE
	for off := 0; off < len(sec.Data); {
		e, err := sec.Next(off)
		if err != nil {
			b.fdesLost++ // a length that cannot be read or runs past the data: the rest cannot be walked
			break
		}
		if e.Terminator() {
			break
		}
		off += len(e.Data)
		ent := ehEntry{src: e.Data, fn: i, srcOff: e.Off, idOff: e.IDOff, cie: -1}
		if e.CIE {
			if sec.ParseCIE(uint64(e.Off), &c) == nil {
				ent.enc = c.Enc
				cies = append(cies, len(b.eh))
				b.eh = append(b.eh, ent)
			}
			continue
		}
		// The CIE is copied with its FDEs: it must be one met before.
		ent.cie = slices.IndexFunc(cies, func(c int) bool { return uint64(b.eh[c].srcOff) == e.CIEOff })
		if ent.cie < 0 {
			b.fdesLost++ // its CIE is not in this function's data, or was not understood
			continue
		}
		ent.cie = cies[ent.cie]
		if uint64(c.Off) != e.CIEOff {
			sec.ParseCIE(e.CIEOff, &c) // understood above
		}
		f, err := sec.FDE(&e, &c)
		n := cfi.PtrSize(c.Enc, addrSize)
		if err != nil || n == 0 { // a LEB128 pc_begin cannot be rewritten in place
			b.fdesLost++
			continue
		}
		target := f.Start - fn.CodeAddr
		if n == 4 && addrSize == 4 {
			target = uint64(uint32(target)) // 32-bit address arithmetic wraps
		}
		if target >= size || f.End-f.Start > size-target {
			b.fdesLost++ // not within the function
			continue
		}
		ent.enc, ent.pcOff, ent.target = c.Enc, f.PCOff, target
		b.eh = append(b.eh, ent)
		fdes++
	}
	if fdes == 0 {
		b.eh = b.eh[:first] // CIEs alone describe no code
	}
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
		if e.enc&0x70 == cfi.PEPCRel {
			e.val = target - (ehStart + cur + uint64(e.pcOff))
		}
		if !cfi.Fits(e.val, e.enc, addrSize) {
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
		cfi.PutPtr(ent[e.pcOff:], o, e.val, e.enc, addrSize)
	}
	less := func(x, y ehTableEntry) int { return cmp.Compare(x.loc, y.loc) }
	if !slices.IsSortedFunc(b.ehTable, less) {
		slices.SortStableFunc(b.ehTable, less)
	}
}

// writeEHHdr writes the .eh_frame_hdr at hdrStart for the .eh_frame at
// ehStart: the eh_frame pointer pc-relative, the search table's entries
// relative to the header, all 4 bytes, as every linker writes them.
func (b *builder) writeEHHdr(ehStart, hdrStart uint64) {
	o := b.f.Order
	h := cfi.AppendEHFrameHdr(b.ehHdr[:0], o, uint32(ehStart-(hdrStart+4)), uint32(len(b.ehTable)))
	for _, e := range b.ehTable {
		h = o.AppendUint32(h, uint32(e.loc-hdrStart))
		h = o.AppendUint32(h, uint32(e.fde-hdrStart))
	}
	b.ehHdr = h
}
