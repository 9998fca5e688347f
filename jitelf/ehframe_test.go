package jitelf

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/jitdump"
)

// ehBuf builds eh_frame data entry by entry.
type ehBuf struct {
	o binary.AppendByteOrder
	b []byte
}

// entry appends an entry of id and body, padded to 4 bytes; wide makes it
// 64-bit DWARF, whose id is 4 bytes all the same in an eh_frame (LSB).
func (e *ehBuf) entry(wide bool, id uint32, body []byte) {
	body = append(body, make([]byte, (4-len(body)%4)%4)...)
	if wide {
		e.b = e.o.AppendUint32(e.b, 0xffffffff)
		e.b = e.o.AppendUint64(e.b, uint64(4+len(body)))
	} else {
		e.b = e.o.AppendUint32(e.b, uint32(4+len(body)))
	}
	e.b = append(e.o.AppendUint32(e.b, id), body...)
}

// cie appends a CIE of augmentation aug and returns its offset.
func (e *ehBuf) cie(wide bool, aug string, augData ...byte) int {
	off := len(e.b)
	body := append([]byte{1}, aug...)
	body = append(body, 0, 1, 0x78, 16) // code and data alignment, return address column
	if aug != "" {
		body = append(append(body, byte(len(augData))), augData...)
	}
	e.entry(wide, 0, append(body, 0x0c, 7, 8, 0x90, 1))
	return off
}

// fde appends an FDE of the CIE at cie; ptr gives pc_begin and pc_range
// for the offset the pc_begin field will have.
func (e *ehBuf) fde(wide bool, cie int, ptr func(field int) []byte) {
	hdr := 4
	if wide {
		hdr = 12
	}
	start := len(e.b)
	body := ptr(start + hdr + 4)
	e.entry(wide, uint32(start+hdr-cie), append(body, 0, 0x41, 0x0e, 0x10))
}

// pcrel is a pc-relative sdata4 pc_begin (perf's layout: the eh_frame
// 8-aligned after size bytes of code) at code offset k, and a 4-byte range.
func pcrel(o binary.AppendByteOrder, size, k, n int) func(int) []byte {
	return func(field int) []byte {
		b := o.AppendUint32(nil, uint32(int32(k-(int(elfwrite.AlignUp(uint64(size), 8))+field))))
		return o.AppendUint32(b, uint32(n))
	}
}

// absolute is an absptr pc_begin and range of the class's address size.
func absolute(o binary.AppendByteOrder, is64 bool, addr uint64, n int) func(int) []byte {
	return func(int) []byte {
		if is64 {
			return o.AppendUint64(o.AppendUint64(nil, addr), uint64(n))
		}
		return o.AppendUint32(o.AppendUint32(nil, uint32(addr)), uint32(n))
	}
}

// TestEHFrameVariants moves FDEs of the encodings and formats runtimes use,
// and leaves out those that cannot be moved or do not land in their
// function, without losing the others.
func TestEHFrameVariants(t *testing.T) {
	for _, opts := range []Options{hostOpts, {elf.EM_ARM, elf.ELFCLASS32, binary.BigEndian}} {
		t.Run(opts.Class.String(), func(t *testing.T) {
			o := opts.ByteOrder.(binary.AppendByteOrder)
			is64 := opts.Class == elf.ELFCLASS64
			code := bytes.Repeat(sampleCode[elf.EM_X86_64], 4) // 56 bytes
			size := len(code)
			addr := func(i int) uint64 { return 0x08001000 + uint64(i)*0x10000 }

			var abs, wide, mixed, cut, term ehBuf
			for _, e := range []*ehBuf{&abs, &wide, &mixed, &cut, &term} {
				e.o = o
			}
			// Absolute pointers, two FDEs.
			c := abs.cie(false, "zR", cfi.PEAbs)
			abs.fde(false, c, absolute(o, is64, addr(0)+8, 16))
			abs.fde(false, c, absolute(o, is64, addr(0), 8))
			// 64-bit DWARF, pc-relative.
			c = wide.cie(true, "zR", cfi.PEPCRel|cfi.PESdata4)
			wide.fde(true, c, pcrel(o, size, 0, size/2))
			wide.fde(true, c, pcrel(o, size, size/2, size-size/2))
			// One good FDE; one outside the function; one of an unknown
			// augmentation; one whose CIE pointer leads nowhere.
			c = mixed.cie(false, "zR", cfi.PEPCRel|cfi.PESdata4)
			mixed.fde(false, c, pcrel(o, size, 4, 10))
			mixed.fde(false, c, pcrel(o, size, size-2, 10))
			bad := mixed.cie(false, "zX", 0)
			mixed.fde(false, bad, pcrel(o, size, 0, 4))
			mixed.fde(false, c+2, pcrel(o, size, 0, 4))
			// A good FDE, then an entry whose length runs past the data.
			c = cut.cie(false, "zLR", 0xff, cfi.PEPCRel|cfi.PESdata4)
			cut.fde(false, c, pcrel(o, size, 0, size))
			cut.b = o.AppendUint32(cut.b, 1000)
			// A terminator, then bytes that are no entry.
			c = term.cie(false, "", nil...)
			term.fde(false, c, absolute(o, is64, addr(4)+1, 3))
			term.b = append(term.b, 0, 0, 0, 0, 0xde, 0xad)

			var fns []Function
			for i, e := range []*ehBuf{&abs, &wide, &mixed, &cut, &term} {
				fns = append(fns, Function{Name: "f", Code: code, CodeAddr: addr(i), Unwind: &jitdump.UnwindingInfo{EHFrame: e.b}})
			}
			img := writeImage(t, opts, fns)
			f, err := elf.NewFile(bytes.NewReader(img.data))
			if err != nil {
				t.Fatal(err)
			}
			off := img.lay.Offsets
			checkEHFrame(t, f, img, []uint64{off[0], off[0] + 8, off[1], off[1] + uint64(size/2), off[2] + 4, off[3], off[4] + 1})
			if img.lay.DroppedFDEs != 4 {
				t.Errorf("DroppedFDEs = %d, want 4", img.lay.DroppedFDEs)
			}
			checkReadelf(t, img.save(t), false, true)
		})
	}
}

// TestEHFrameAsWritten checks that the eh_frame of a single image is the
// runtime's, byte for byte: the layout is the one the runtime computed it
// for.
func TestEHFrameAsWritten(t *testing.T) {
	for _, size := range []int{1, 8, 11, 100} {
		eh := testEHFrame(binary.LittleEndian, size, 2)
		img := writeImage(t, hostOpts, []Function{{Name: "f", Code: make([]byte, size), CodeAddr: 0x1000, Unwind: &jitdump.UnwindingInfo{EHFrame: eh}}})
		f, _ := elf.NewFile(bytes.NewReader(img.data))
		got, _ := f.Section(".eh_frame").Data()
		if !bytes.Equal(got, eh) {
			t.Errorf("size %d: .eh_frame\n% x\nthe runtime's\n% x", size, got, eh)
		}
	}
}

// TestNoFunctions writes an image of nothing.
func TestNoFunctions(t *testing.T) {
	img := writeImage(t, hostOpts, nil)
	f, err := elf.NewFile(bytes.NewReader(img.data))
	if err != nil {
		t.Fatal(err)
	}
	if syms, err := f.Symbols(); err != nil || len(syms) != 0 {
		t.Errorf("symbols %v, %v", syms, err)
	}
	checkReadelf(t, img.save(t), false, false)
}
