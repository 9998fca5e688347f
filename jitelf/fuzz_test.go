package jitelf

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/jitdump"
)

// fuzzFlavours are the image flavours a fuzzed input picks from: the
// host's, derived ones, and the others runtimes write.
var fuzzFlavours = []Options{
	hostOpts,
	{},
	{elf.EM_386, elf.ELFCLASS32, binary.LittleEndian},
	{elf.EM_AARCH64, elf.ELFCLASS64, binary.BigEndian},
	{elf.EM_ARM, elf.ELFCLASS32, binary.BigEndian},
	{elf.EM_X86_64, elf.ELFCLASS32, binary.LittleEndian},
}

// fuzzFunctions are the two functions of a fuzzed image: the unwinding
// data and code size of each, the second at addr; lines, 8 bytes an entry,
// place entries around either (see below).
func fuzzFunctions(eh0, eh1 []byte, size0, size1 uint16, addr uint64, lines []byte, name string) []Function {
	fns := []Function{
		{Name: strings.ReplaceAll(name, "\x00", ""), Code: bytes.Repeat([]byte{0x90}, int(size0)), CodeAddr: 0x7f0000100000},
		{Name: "second", Code: bytes.Repeat([]byte{0xc3}, int(size1)), CodeAddr: addr},
	}
	for i, eh := range [][]byte{eh0, eh1} {
		if eh != nil {
			fns[i].Unwind = &jitdump.UnwindingInfo{EHFrame: eh}
		}
	}
	// An entry: the function, a signed offset from its code, the line,
	// the column and one of three files.
	files := []string{"/src/a.js", "", "node:internal/util"}
	var entries [2][]jitdump.DebugEntry
	for ; len(lines) >= 8; lines = lines[8:] {
		i := lines[0] & 1
		entries[i] = append(entries[i], jitdump.DebugEntry{
			Addr:    fns[i].CodeAddr + uint64(int64(int16(binary.LittleEndian.Uint16(lines[1:])))),
			Line:    uint32(binary.LittleEndian.Uint16(lines[3:])),
			Discrim: uint32(lines[5]),
			File:    files[int(lines[6])%len(files)],
		})
	}
	for i := range fns {
		if entries[i] != nil {
			fns[i].Lines = slices.Values(entries[i])
		}
	}
	return fns
}

// FuzzWrite: the unwinding data and lines of a dump are the runtime's, any
// bytes; an image of them is written or refused, never a panic, and one
// written is what Layout says: the same bytes each time, readable by
// debug/elf and debug/dwarf, each function's code and symbol where Layout
// puts it, and every FDE the search table lists starting where it says,
// inside a function.
func FuzzWrite(f *testing.F) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		lines := []byte{0, 0xb0, 0xff, 1, 0, 0, 0, 0, 0, 3, 0, 30, 0, 2, 2, 0, 1, 5, 0, 40, 0, 7, 1, 0}
		f.Add(testEHFrame(o, 14, 1), testEHFrame(o, 33, 3), uint16(14), uint16(33), uint64(0x7f0000200004), lines, "JS:*fn ünïcødé", uint8(0))
		f.Add(testEHFrame(o, 14, 2), []byte(nil), uint16(14), uint16(0), uint64(0x1000), []byte(nil), "f", uint8(3))
	}
	e := ehBuf{o: binary.LittleEndian}
	cie := e.cie(false, "zR", cfi.PEPCRel|cfi.PESdata4)
	e.fde(false, cie, pcrel(binary.LittleEndian, 64, 8, 16))
	wide := e.cie(true, "zPLR", cfi.PEAbs|cfi.PEUdata8, 0, 0, 0, 0, 0, 0, 0, 0, cfi.PEAbs, cfi.PEAbs)
	e.fde(true, wide, absolute(binary.LittleEndian, true, 0x7f0000100000+16, 8))
	f.Add(e.b, e.b, uint16(64), uint16(64), uint64(0x7f0000100000+64), []byte(nil), "g", uint8(0))
	f.Fuzz(func(t *testing.T, eh0, eh1 []byte, size0, size1 uint16, addr uint64, lines []byte, name string, flavour uint8) {
		opts := fuzzFlavours[int(flavour)%len(fuzzFlavours)]
		fns := fuzzFunctions(eh0, eh1, size0, size1, addr, lines, name)
		data, lay, err := Append(nil, opts, fns)
		if err != nil {
			return
		}
		again, _, err := Append(nil, opts, fns)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("the same functions written again: %d bytes, %v; first %d bytes", len(again), err, len(data))
		}
		if int64(len(data)) != lay.Size {
			t.Fatalf("%d bytes written, Layout.Size says %d", len(data), lay.Size)
		}
		// The image holds the code, the names, the unwinding data and
		// the lines given (10 bytes a row at most), and headers.
		in := len(fns[0].Code) + len(fns[1].Code) + len(name) + len(eh0) + len(eh1) + 2*len(lines)
		if len(data) > 4096+2*in {
			t.Fatalf("an image of %d bytes from %d bytes of functions", len(data), in)
		}
		img := &image{data: data, lay: lay, fns: fns, opts: opts}
		ef, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("debug/elf: %v", err)
		}
		if opts.Class != elf.ELFCLASSNONE {
			checkHeaders(t, ef, img)
		}
		checkSymbols(t, ef, img)
		checkBuildID(t, ef, img)
		if ef.Section(".eh_frame_hdr") != nil {
			checkSearchTable(t, ef, img)
		} else if lay.DroppedFDEs == 0 && (eh0 != nil && size0 > 0 || eh1 != nil && size1 > 0) && ef.Section(".eh_frame") != nil {
			t.Fatalf("an .eh_frame without .eh_frame_hdr")
		}
		if ef.Section(".debug_line") != nil {
			checkFuzzedLines(t, ef, img)
		}
	})
}

// checkSearchTable checks every entry of .eh_frame_hdr's table: sorted,
// each leading to an FDE, parsed by package cfi, that starts where the
// entry says and ends inside the function it starts in.
func checkSearchTable(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	frame, hdr := f.Section(".eh_frame"), f.Section(".eh_frame_hdr")
	if frame == nil {
		t.Fatal(".eh_frame_hdr without .eh_frame")
	}
	fd, err := frame.Data()
	if err != nil {
		t.Fatal(err)
	}
	hd, err := hdr.Data()
	if err != nil {
		t.Fatal(err)
	}
	o := f.ByteOrder
	if len(hd) < 12 || len(hd) != 12+8*int(o.Uint32(hd[8:])) {
		t.Fatalf(".eh_frame_hdr of %d bytes: % x", len(hd), hd[:min(len(hd), 12)])
	}
	addrSize := 8
	if f.Class == elf.ELFCLASS32 {
		addrSize = 4
	}
	sec := &cfi.Section{Data: fd, Addr: frame.Addr, EH: true, Order: o, AddrSize: addrSize}
	rel := func(v uint32) uint64 { return hdr.Addr + uint64(int64(int32(v))) }
	last := uint64(0)
	for i := 12; i < len(hd); i += 8 {
		loc, at := rel(o.Uint32(hd[i:])), rel(o.Uint32(hd[i+4:]))
		if loc < last {
			t.Fatalf("search table entry at %#x, after one at %#x", loc, last)
		}
		last = loc
		e, err := sec.Next(int(at - frame.Addr))
		if err != nil || e.CIE {
			t.Fatalf("search table entry %#x: no FDE at %#x: %v", loc, at, err)
		}
		c, err := sec.CIE(e.CIEOff)
		if err != nil {
			t.Fatalf("FDE at %#x: %v", at, err)
		}
		fde, err := sec.FDE(&e, c)
		if err != nil {
			t.Fatalf("FDE at %#x: %v", at, err)
		}
		start, end := fde.Start, fde.End
		if addrSize == 4 {
			start, end = uint64(uint32(start)), uint64(uint32(start))+(end-fde.Start)
		}
		fn := functionAt(img, start)
		if start != loc || fn < 0 || end < start || end > img.lay.Offsets[fn]+uint64(len(img.fns[fn].Code)) {
			t.Fatalf("search table entry %#x: the FDE at %#x covers %#x to %#x, not inside a function starting there", loc, at, start, end)
		}
	}
}

// checkFuzzedLines checks that every row of the line table lies in a
// function, or ends one.
func checkFuzzedLines(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("debug/dwarf: %v", err)
	}
	cu, err := d.Reader().Next()
	if err != nil || cu == nil {
		t.Fatalf("no compile unit: %v", err)
	}
	lr, err := d.LineReader(cu)
	if err != nil || lr == nil {
		t.Fatalf("line table: %v", err)
	}
	var row dwarf.LineEntry
	for {
		if err := lr.Next(&row); err != nil {
			break
		}
		fn := functionAt(img, row.Address)
		if row.EndSequence && fn < 0 {
			fn = functionAt(img, row.Address-1)
		}
		if fn < 0 {
			t.Fatalf("line row at %#x (line %d) outside every function", row.Address, row.Line)
		}
	}
}
