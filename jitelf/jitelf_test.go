package jitelf

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/jitdump"
)

// Code that disassembles cleanly, per machine.
var sampleCode = map[elf.Machine][]byte{
	// push %rbp; mov %rsp,%rbp; mov $42,%eax; add %edi,%eax; nop; pop %rbp; ret
	elf.EM_X86_64: {0x55, 0x48, 0x89, 0xe5, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x01, 0xf8, 0x90, 0x5d, 0xc3},
	// push %ebp; mov %esp,%ebp; mov $42,%eax; nop; pop %ebp; ret
	elf.EM_386: {0x55, 0x89, 0xe5, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x90, 0x5d, 0xc3},
	// mov w0, #42; add w0, w0, w1; nop; ret (little-endian words)
	elf.EM_AARCH64: {0x40, 0x05, 0x80, 0x52, 0x00, 0x00, 0x01, 0x0b, 0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6},
	// mov r0, #42; add r0, r0, r1; bx lr
	elf.EM_ARM: {0x2a, 0x00, 0xa0, 0xe3, 0x01, 0x00, 0x80, 0xe0, 0x1e, 0xff, 0x2f, 0xe1},
}

// testFunc is the i-th function of a test image: code of varied sizes, a
// name with spaces and non-ASCII letters, and, when asked for, lines and
// unwinding data as a runtime would write them, for code at a runtime
// address of its own.
func testFunc(i int, mach elf.Machine, o binary.ByteOrder, lines, unwind bool) Function {
	base := sampleCode[mach]
	code := bytes.Repeat(base, 1+i%3)
	fn := Function{
		Name:     fmt.Sprintf("JS:*fn %d ünïcødé λ %s", i, strings.Repeat("x", i%5)),
		Code:     code,
		CodeAddr: 0x7f0000100000 + uint64(i)*0x1000 + uint64(i%7)*4,
	}
	if lines {
		fn.Lines = slices.Values(testLines(fn.CodeAddr, len(code), i))
	}
	if unwind {
		fn.Unwind = &jitdump.UnwindingInfo{EHFrame: testEHFrame(o, len(code), 1)}
	}
	return fn
}

// testLines are the DEBUG_INFO entries of a function of size bytes at
// addr: some inside, out of order, one repeating an address, and the three
// kinds outside that runtimes write.
func testLines(addr uint64, size, i int) []jitdump.DebugEntry {
	file := fmt.Sprintf("/src/mod%d.js", i%3)
	return []jitdump.DebugEntry{
		{Addr: addr - 80, Line: 1, File: file},                                      // dropped: superseded
		{Addr: addr + uint64(size)/2, Line: uint32(40 + i), Discrim: 7, File: file}, // out of order
		{Addr: addr - 50, Line: uint32(20 + i), File: file},                         // moved to the start
		{Addr: addr + 3, Line: uint32(30 + i), Discrim: 2, File: "node:internal/util"},
		{Addr: addr + 3, Line: uint32(31 + i), File: "node:internal/util"},
		{Addr: addr + uint64(size) - 1, Line: uint32(1000 + i), File: ""}, // no file
		{Addr: addr + uint64(size), Line: 0, File: ""},                    // dropped: the end
	}
}

// wantRow is a line-table row a test expects: an offset in the function.
type wantRow struct {
	off        uint64
	line, col  int
	file       string
	superseded bool // a row at the same address follows
}

func testRows(size, i int) []wantRow {
	file := fmt.Sprintf("/src/mod%d.js", i%3)
	return []wantRow{
		{0, 20 + i, 0, file, false},
		{3, 30 + i, 2, "node:internal/util", true},
		{3, 31 + i, 0, "node:internal/util", false},
		{uint64(size) / 2, 40 + i, 7, file, false},
		{uint64(size) - 1, 1000 + i, 0, unknownFile, false},
	}
}

const droppedPerTestFunc = 2

// testEHFrame is an eh_frame as CPython writes it for a function of size
// bytes: a CIE ("zR", pc-relative sdata4 pointers) and nfde FDEs that
// split the function between them, pc_begin computed for perf's layout,
// the eh_frame 8-aligned after the code.
func testEHFrame(bo binary.ByteOrder, size, nfde int) []byte {
	o := bo.(binary.AppendByteOrder)
	var b []byte
	b = o.AppendUint32(b, 20)
	b = o.AppendUint32(b, 0)                                  // CIE id
	b = append(b, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b)       // version, augmentation, code and data alignment, RA, aug data: the FDE encoding
	b = append(b, 0x0c, 7, 8, 0x90, 1, 0, 0, 0, 0, 0, 0)[:24] // def_cfa r7+8; r16 at cfa-8; padding
	for k := range nfde {
		start, end := size*k/nfde, size*(k+1)/nfde
		fde := len(b)
		b = o.AppendUint32(b, 20)
		b = o.AppendUint32(b, uint32(fde+4)) // back to the CIE at 0
		pc := len(b)
		b = o.AppendUint32(b, uint32(int32(start-(int(elfwrite.AlignUp(uint64(size), 8))+pc))))
		b = o.AppendUint32(b, uint32(end-start))
		b = append(b, 0, 0x44, 0x0e, 0x10, 0x46, 0x0e, 0x08, 0) // aug data length 0; advance 4, cfa+16; advance 6, cfa+8
	}
	return b
}

// image is a written image and what went into it.
type image struct {
	data []byte
	lay  Layout
	fns  []Function
	opts Options
}

func writeImage(t testing.TB, opts Options, fns []Function) *image {
	t.Helper()
	var buf bytes.Buffer
	lay, err := Write(&buf, opts, fns)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if int64(buf.Len()) != lay.Size {
		t.Fatalf("Write wrote %d bytes, Layout.Size says %d", buf.Len(), lay.Size)
	}
	return &image{data: buf.Bytes(), lay: lay, fns: fns, opts: opts}
}

// hostOpts are the options of the images the tools test runs tools on.
var hostOpts = Options{elf.EM_X86_64, elf.ELFCLASS64, binary.LittleEndian}

var machineNames = map[elf.Machine]string{elf.EM_X86_64: "x86-64", elf.EM_386: "i386", elf.EM_AARCH64: "arm64", elf.EM_ARM: "arm"}

// TestCombinations writes images of every flavour with and without lines
// and unwinding data, one function and several, and reads them back with
// debug/elf and debug/dwarf. The tools test runs the real tools on them.
func TestCombinations(t *testing.T) {
	for _, c := range combinations() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			img := c.write(t)
			checkImage(t, img, c.lines, c.unwind)
		})
	}
}

type combination struct {
	name                  string
	opts                  Options
	lines, unwind, packed bool
}

func combinations() []combination {
	var cs []combination
	for _, mach := range []elf.Machine{elf.EM_X86_64, elf.EM_386, elf.EM_AARCH64, elf.EM_ARM} {
		for _, class := range []elf.Class{elf.ELFCLASS64, elf.ELFCLASS32} {
			for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
				for _, lines := range []bool{false, true} {
					for _, unwind := range []bool{false, true} {
						for _, packed := range []bool{false, true} {
							name := fmt.Sprintf("%s/%s/%s/lines=%v/unwind=%v/packed=%v", machineNames[mach], class, o, lines, unwind, packed)
							cs = append(cs, combination{name, Options{mach, class, o}, lines, unwind, packed})
						}
					}
				}
			}
		}
	}
	return cs
}

func (c *combination) write(t testing.TB) *image {
	n := 1
	if c.packed {
		n = 7
	}
	fns := make([]Function, n)
	for i := range fns {
		fns[i] = testFunc(i, c.opts.Machine, c.opts.ByteOrder, c.lines, c.unwind)
	}
	return writeImage(t, c.opts, fns)
}

// checkImage reads img back and checks everything the package promises.
func checkImage(t *testing.T, img *image, lines, unwind bool) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(img.data))
	if err != nil {
		t.Fatalf("debug/elf: %v", err)
	}
	checkHeaders(t, f, img)
	checkSymbols(t, f, img)
	checkBuildID(t, f, img)
	if unwind {
		checkEHFrame(t, f, img, nil)
	} else if f.Section(".eh_frame") != nil || f.Section(".eh_frame_hdr") != nil {
		t.Errorf("unwinding tables without unwinding data")
	}
	if lines {
		checkDWARF(t, f, img)
		if img.lay.DroppedLines != droppedPerTestFunc*len(img.fns) {
			t.Errorf("DroppedLines = %d, want %d", img.lay.DroppedLines, droppedPerTestFunc*len(img.fns))
		}
	} else if f.Section(".debug_line") != nil || f.Section(".debug_info") != nil {
		t.Errorf("DWARF sections without lines")
	}
}

func checkHeaders(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	o := img.opts
	wantData := elf.ELFDATA2LSB
	if o.ByteOrder == binary.BigEndian {
		wantData = elf.ELFDATA2MSB
	}
	if o.Class != elf.ELFCLASSNONE && f.Class != o.Class || f.Data != wantData || o.Machine != elf.EM_NONE && f.Machine != o.Machine ||
		f.Type != elf.ET_DYN || f.Version != elf.EV_CURRENT {
		t.Errorf("header: class %v data %v machine %v type %v; want %v %v %v ET_DYN", f.Class, f.Data, f.Machine, f.Type, o.Class, wantData, o.Machine)
	}
	if f.Entry != img.lay.Offsets[0] {
		t.Errorf("entry %#x, want the first function's %#x", f.Entry, img.lay.Offsets[0])
	}
	text := f.Section(".text")
	if text == nil || text.Type != elf.SHT_PROGBITS || text.Flags != elf.SHF_ALLOC|elf.SHF_EXECINSTR {
		t.Fatalf(".text: %+v", text)
	}
	var loads []*elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p)
		}
	}
	if len(loads) != 1 {
		t.Fatalf("%d PT_LOADs, want 1", len(loads))
	}
	load := loads[0]
	if load.Flags != elf.PF_R|elf.PF_X || load.Off != load.Vaddr || load.Off > text.Offset || load.Off+load.Filesz < text.Offset+text.Size {
		t.Errorf("PT_LOAD %+v does not cover .text at %#x+%#x read+execute with offset == address", load.ProgHeader, text.Offset, text.Size)
	}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && (s.Addr != s.Offset || s.Offset < load.Off || s.Offset+s.Size > load.Off+load.Filesz) {
			t.Errorf("allocated section %s at %#x, offset %#x, not inside the PT_LOAD at offset == address", s.Name, s.Addr, s.Offset)
		}
	}
	for i, fn := range img.fns {
		off := img.lay.Offsets[i]
		if off%FuncAlign != 0 || off < text.Offset || off+uint64(len(fn.Code)) > text.Offset+text.Size {
			t.Errorf("function %d at %#x: not %d-aligned in .text", i, off, FuncAlign)
			continue
		}
		if i > 0 && off <= img.lay.Offsets[i-1] {
			t.Errorf("function %d at %#x, not after function %d at %#x", i, off, i-1, img.lay.Offsets[i-1])
		}
		if got := img.data[off : off+uint64(len(fn.Code))]; !bytes.Equal(got, fn.Code) {
			t.Errorf("function %d: file offset %#x holds % x, want its code % x", i, off, got, fn.Code)
		}
	}
}

func checkSymbols(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("symbols: %v", err)
	}
	if len(syms) != len(img.fns) {
		t.Fatalf("%d symbols, want %d", len(syms), len(img.fns))
	}
	text := f.Section(".text")
	for i, s := range syms {
		fn := img.fns[i]
		if s.Name != fn.Name || s.Value != img.lay.Offsets[i] || s.Size != uint64(len(fn.Code)) ||
			elf.ST_TYPE(s.Info) != elf.STT_FUNC || f.Sections[s.Section] != text {
			t.Errorf("symbol %d: %q at %#x size %d type %v in %v; want %q at %#x size %d STT_FUNC in .text",
				i, s.Name, s.Value, s.Size, elf.ST_TYPE(s.Info), s.Section, fn.Name, img.lay.Offsets[i], len(fn.Code))
		}
	}
}

func checkBuildID(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	id, err := buildID(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(id, img.lay.BuildID[:]) {
		t.Errorf("note holds build-id %x, Layout says %x", id, img.lay.BuildID)
	}
	var note *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			note = p
		}
	}
	if s := f.Section(".note.gnu.build-id"); note == nil || note.Off != s.Offset || note.Filesz != s.Size {
		t.Errorf("no PT_NOTE over .note.gnu.build-id")
	}
}

// buildID reads the GNU build-id note.
func buildID(f *elf.File) ([]byte, error) {
	s := f.Section(".note.gnu.build-id")
	if s == nil || s.Type != elf.SHT_NOTE {
		return nil, errors.New("no .note.gnu.build-id")
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	o := f.ByteOrder
	if len(b) < 16 || o.Uint32(b) != 4 || o.Uint32(b[8:]) != 3 || string(b[12:16]) != "GNU\x00" || len(b) != 16+int(o.Uint32(b[4:])) {
		return nil, fmt.Errorf("malformed build-id note % x", b)
	}
	return b[16:], nil
}

// checkEHFrame decodes .eh_frame_hdr and checks that its table holds, in
// order, every function with unwinding data (or those of want, offsets in
// the functions' code, when given), each entry leading to an FDE that
// starts there and ends within the function.
func checkEHFrame(t *testing.T, f *elf.File, img *image, want []uint64) {
	t.Helper()
	frame, hdr := f.Section(".eh_frame"), f.Section(".eh_frame_hdr")
	if frame == nil || hdr == nil {
		t.Fatalf("missing .eh_frame or .eh_frame_hdr")
	}
	var eh *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_GNU_EH_FRAME {
			eh = p
		}
	}
	if eh == nil || eh.Off != hdr.Offset || eh.Filesz != hdr.Size {
		t.Errorf("no PT_GNU_EH_FRAME over .eh_frame_hdr")
	}
	fd, _ := frame.Data()
	hd, _ := hdr.Data()
	o := f.ByteOrder
	if len(hd) < 12 || hd[0] != 1 || hd[1] != 0x1b || hd[2] != 0x03 || hd[3] != 0x3b {
		t.Fatalf(".eh_frame_hdr starts % x", hd[:min(len(hd), 12)])
	}
	if p := hdr.Addr + 4 + uint64(int64(int32(o.Uint32(hd[4:])))); p != frame.Addr {
		t.Errorf(".eh_frame_hdr points at %#x, .eh_frame is at %#x", p, frame.Addr)
	}
	n := int(o.Uint32(hd[8:]))
	if len(hd) != 12+8*n {
		t.Fatalf(".eh_frame_hdr: %d bytes for %d entries", len(hd), n)
	}
	if want == nil {
		for i, fn := range img.fns {
			if fn.Unwind != nil && len(fn.Code) > 0 {
				want = append(want, img.lay.Offsets[i])
			}
		}
	}
	if n != len(want) {
		t.Fatalf(".eh_frame_hdr has %d entries, want %d", n, len(want))
	}
	rel := func(v uint32) uint64 { return hdr.Addr + uint64(int64(int32(v))) }
	for i := range n {
		loc, fde := rel(o.Uint32(hd[12+8*i:])), rel(o.Uint32(hd[16+8*i:]))
		if loc != want[i] {
			t.Errorf("entry %d: location %#x, want %#x", i, loc, want[i])
		}
		begin, size, err := decodeFDE(fd, fde-frame.Addr, frame.Addr, o, f.Class == elf.ELFCLASS64)
		if err != nil {
			t.Errorf("entry %d: FDE at %#x: %v", i, fde, err)
			continue
		}
		if begin != loc {
			t.Errorf("entry %d: FDE at %#x starts at %#x, the table says %#x", i, fde, begin, loc)
		}
		fn := functionAt(img, begin)
		if fn < 0 || begin+size > img.lay.Offsets[fn]+uint64(len(img.fns[fn].Code)) {
			t.Errorf("entry %d: FDE covers %#x+%d, outside any function", i, begin, size)
		}
	}
}

func functionAt(img *image, addr uint64) int {
	for i, off := range img.lay.Offsets {
		if addr >= off && addr < off+uint64(len(img.fns[i].Code)) {
			return i
		}
	}
	return -1
}

// decodeFDE decodes the FDE at off in an .eh_frame at addr, of a CIE
// without augmentation or whose augmentation is "z" followed by 'L's and an
// 'R' of pc-relative sdata4 or absptr, and returns the range it covers.
func decodeFDE(fd []byte, off, addr uint64, o binary.ByteOrder, is64 bool) (begin, size uint64, err error) {
	if off+12 > uint64(len(fd)) {
		return 0, 0, errors.New("outside .eh_frame")
	}
	length := uint64(o.Uint32(fd[off:]))
	p := off + 4
	if length == 0xffffffff {
		length, p = o.Uint64(fd[off+4:]), off+12
	}
	const idSize = 4 // in 64-bit DWARF too, in an eh_frame
	ptr := uint64(o.Uint32(fd[p:]))
	if ptr == 0 || ptr > p {
		return 0, 0, fmt.Errorf("CIE pointer %#x", ptr)
	}
	cie := p - ptr
	ch := uint64(4)
	if o.Uint32(fd[cie:]) == 0xffffffff {
		ch = 12
	}
	if id := fd[cie+ch : cie+ch+idSize]; !bytes.Equal(id, make([]byte, idSize)) {
		return 0, 0, fmt.Errorf("CIE at %#x has id % x", cie, id)
	}
	c := fd[cie+ch+idSize:]
	version := c[0]
	aug := c[1 : 1+bytes.IndexByte(c[1:], 0)]
	c = c[2+len(aug):]
	uleb := func() {
		for c[0]&0x80 != 0 {
			c = c[1:]
		}
		c = c[1:]
	}
	uleb() // code alignment
	uleb() // data alignment
	if version == 1 {
		c = c[1:]
	} else {
		uleb()
	}
	var enc byte // absptr without augmentation
	if len(aug) > 0 && aug[0] != 'z' {
		return 0, 0, fmt.Errorf("CIE augmentation %q", aug)
	}
	if len(aug) > 0 {
		uleb() // augmentation length
		aug = aug[1:]
	}
	for _, a := range aug {
		switch a {
		case 'L':
			c = c[1:]
		case 'R':
			enc = c[0]
		default:
			return 0, 0, fmt.Errorf("CIE augmentation %q", aug)
		}
	}
	field := p + idSize
	switch enc {
	case 0x1b:
		begin = addr + field + uint64(int64(int32(o.Uint32(fd[field:]))))
		size = uint64(o.Uint32(fd[field+4:]))
	case 0x00:
		if is64 {
			begin, size = o.Uint64(fd[field:]), o.Uint64(fd[field+8:])
		} else {
			begin, size = uint64(o.Uint32(fd[field:])), uint64(o.Uint32(fd[field+4:]))
		}
	default:
		return 0, 0, fmt.Errorf("FDE encoding %#x", enc)
	}
	if field+2*4 > p+length {
		return 0, 0, errors.New("FDE too short")
	}
	return begin, size, nil
}

// lineRow is a row of a line table as debug/dwarf reads it.
type lineRow struct {
	addr      uint64
	file      string
	line, col int
}

// checkDWARF checks the compile unit, the subprograms and that debug/dwarf
// finds exactly the rows the test functions' entries should give.
func checkDWARF(t *testing.T, f *elf.File, img *image) {
	t.Helper()
	d, err := f.DWARF()
	if err != nil {
		t.Fatalf("debug/dwarf: %v", err)
	}
	text := f.Section(".text")
	r := d.Reader()
	cu, err := r.Next()
	if err != nil || cu == nil || cu.Tag != dwarf.TagCompileUnit {
		t.Fatalf("first entry %v, %v; want the compile unit", cu, err)
	}
	if name, _ := cu.Val(dwarf.AttrName).(string); name == "" {
		t.Errorf("compile unit without a name")
	}
	if lo, hi := cu.Val(dwarf.AttrLowpc), cu.Val(dwarf.AttrHighpc); lo != text.Addr || hi != text.Addr+text.Size {
		t.Errorf("compile unit covers %v..%v, .text is %#x..%#x", lo, hi, text.Addr, text.Addr+text.Size)
	}
	var subs []string
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil || e.Tag == 0 {
			break
		}
		if e.Tag != dwarf.TagSubprogram {
			t.Fatalf("unexpected %v", e.Tag)
		}
		subs = append(subs, fmt.Sprintf("%s@%#x-%#x", e.Val(dwarf.AttrName), e.Val(dwarf.AttrLowpc), e.Val(dwarf.AttrHighpc)))
	}
	var wantSubs []string
	for i, fn := range img.fns {
		if len(fn.Code) > 0 {
			wantSubs = append(wantSubs, fmt.Sprintf("%s@%#x-%#x", fn.Name, img.lay.Offsets[i], img.lay.Offsets[i]+uint64(len(fn.Code))))
		}
	}
	if !slices.Equal(subs, wantSubs) {
		t.Errorf("subprograms\n%q\nwant\n%q", subs, wantSubs)
	}

	rows, ends := readRows(t, d, cu)
	var want []lineRow
	var wantEnds []uint64
	for i, fn := range img.fns {
		for _, w := range testRows(len(fn.Code), i) {
			want = append(want, lineRow{img.lay.Offsets[i] + w.off, w.file, w.line, w.col})
		}
		wantEnds = append(wantEnds, img.lay.Offsets[i]+uint64(len(fn.Code)))
	}
	if !slices.Equal(rows, want) {
		t.Errorf("line rows\n%v\nwant\n%v", rows, want)
	}
	if !slices.Equal(ends, wantEnds) {
		t.Errorf("sequences end at %#x, want %#x", ends, wantEnds)
	}
}

// readRows returns the rows of cu's line table and where its sequences end.
func readRows(t *testing.T, d *dwarf.Data, cu *dwarf.Entry) (rows []lineRow, ends []uint64) {
	t.Helper()
	lr, err := d.LineReader(cu)
	if err != nil || lr == nil {
		t.Fatalf("LineReader: %v", err)
	}
	for {
		var e dwarf.LineEntry
		if err := lr.Next(&e); err == io.EOF {
			return rows, ends
		} else if err != nil {
			t.Fatalf("line table: %v", err)
		}
		if e.EndSequence {
			ends = append(ends, e.Address)
			continue
		}
		rows = append(rows, lineRow{e.Address, e.File.Name, e.Line, e.Column})
	}
}

// TestBuildID checks that the build-id follows every byte of code and
// every character of names, and nothing else.
func TestBuildID(t *testing.T) {
	base := func() []Function {
		fns := make([]Function, 3)
		for i := range fns {
			fns[i] = testFunc(i, elf.EM_X86_64, binary.LittleEndian, true, true)
			fns[i].Code = slices.Clone(fns[i].Code)
		}
		return fns
	}
	opts := Options{Machine: elf.EM_X86_64}
	a, b := writeImage(t, opts, base()), writeImage(t, opts, base())
	if !bytes.Equal(a.data, b.data) {
		t.Fatalf("two images of the same functions differ")
	}
	changes := map[string]func([]Function){
		"one code byte":      func(f []Function) { f[1].Code[3]++ },
		"last code byte":     func(f []Function) { f[2].Code[len(f[2].Code)-1] ^= 1 },
		"one name character": func(f []Function) { f[1].Name = strings.Replace(f[1].Name, "1", "2", 1) },
		"names swapped":      func(f []Function) { f[0].Name, f[1].Name = f[1].Name, f[0].Name },
		"a line": func(f []Function) {
			f[0].Lines = slices.Values([]jitdump.DebugEntry{{Addr: f[0].CodeAddr, Line: 9, File: "x"}})
		},
		"a function more": func(f []Function) {},
	}
	seen := map[[BuildIDSize]byte]string{a.lay.BuildID: "base"}
	for what, change := range changes {
		fns := base()
		change(fns)
		if what == "a function more" {
			fns = append(fns, testFunc(9, elf.EM_X86_64, binary.LittleEndian, false, false))
		}
		id := writeImage(t, opts, fns).lay.BuildID
		if prev, ok := seen[id]; ok {
			t.Errorf("changing %s leaves the build-id of %s, %x", what, prev, id)
		}
		seen[id] = what
	}
}

// TestEdgeFunctions writes functions with empty code, empty names and a
// huge line table.
func TestEdgeFunctions(t *testing.T) {
	code := sampleCode[elf.EM_X86_64]
	var huge []jitdump.DebugEntry
	big := bytes.Repeat(code, 20000)
	for off := range len(big) {
		huge = append(huge, jitdump.DebugEntry{Addr: 0x5000 + uint64(off), Line: uint32(1 + off*7%100000), Discrim: uint32(off % 3), File: fmt.Sprintf("f%d.js", off%50)})
	}
	fns := []Function{
		{Name: "empty code", CodeAddr: 0x1000, Lines: slices.Values([]jitdump.DebugEntry{{Addr: 0x1000, Line: 3, File: "e.js"}})},
		{Name: "", Code: code, CodeAddr: 0x2000},
		{Name: "empty code too", CodeAddr: 0x3000, Unwind: &jitdump.UnwindingInfo{EHFrame: testEHFrame(binary.LittleEndian, 0, 1)}},
		{Name: "huge", Code: big, CodeAddr: 0x5000, Lines: slices.Values(huge)},
		{Name: "with spaces and\ttabs 😀 λ", Code: code, CodeAddr: 0x9000},
		{Name: "last empty"},
	}
	img := writeImage(t, hostOpts, fns)
	f, err := elf.NewFile(bytes.NewReader(img.data))
	if err != nil {
		t.Fatal(err)
	}
	checkHeaders(t, f, img)
	checkSymbols(t, f, img)
	for i := 1; i < len(fns); i++ {
		if img.lay.Offsets[i] == img.lay.Offsets[i-1] {
			t.Errorf("functions %d and %d share offset %#x", i-1, i, img.lay.Offsets[i])
		}
	}
	if f.Section(".eh_frame") != nil {
		t.Errorf("an FDE of an empty function was kept")
	}
	if img.lay.DroppedLines != 1 || img.lay.DroppedFDEs != 1 {
		t.Errorf("dropped %d lines and %d FDEs, want 1 and 1 (those of the empty functions)", img.lay.DroppedLines, img.lay.DroppedFDEs)
	}
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := d.Reader().Next()
	rows, _ := readRows(t, d, cu)
	if len(rows) != len(huge) {
		t.Fatalf("%d rows, want %d", len(rows), len(huge))
	}
	for i, e := range huge {
		want := lineRow{img.lay.Offsets[3] + uint64(i), e.File, int(e.Line), int(e.Discrim)}
		if rows[i] != want {
			t.Fatalf("row %d: %v, want %v", i, rows[i], want)
		}
	}
}

// TestOptions checks the defaults and the errors.
func TestOptions(t *testing.T) {
	host, hostClass := hostelf.Machine()
	for _, c := range []struct {
		opts  Options
		mach  elf.Machine
		class elf.Class
		data  elf.Data
	}{
		{Options{}, host, hostClass, map[bool]elf.Data{false: elf.ELFDATA2LSB, true: elf.ELFDATA2MSB}[hostBigEndian()]},
		{Options{Machine: elf.EM_386}, elf.EM_386, elf.ELFCLASS32, elf.ELFDATA2LSB},
		{Options{Machine: elf.EM_AARCH64, ByteOrder: binary.BigEndian}, elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2MSB},
		{Options{Machine: elf.EM_S390}, elf.EM_S390, elf.ELFCLASS64, elf.ELFDATA2MSB},
		{Options{Machine: elf.EM_ARM, Class: elf.ELFCLASS64, ByteOrder: binary.NativeEndian}, elf.EM_ARM, elf.ELFCLASS64, map[bool]elf.Data{false: elf.ELFDATA2LSB, true: elf.ELFDATA2MSB}[hostBigEndian()]},
		{OptionsFor(jitdump.Header{ElfMach: 0, ByteOrder: binary.LittleEndian}), host, hostClass, elf.ELFDATA2LSB},
		{OptionsFor(jitdump.Header{ElfMach: uint32(elf.EM_AARCH64), ByteOrder: binary.LittleEndian}), elf.EM_AARCH64, elf.ELFCLASS64, elf.ELFDATA2LSB},
	} {
		img := writeImage(t, c.opts, []Function{{Name: "f", Code: []byte{1, 2, 3}}})
		f, err := elf.NewFile(bytes.NewReader(img.data))
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != c.mach || f.Class != c.class || f.Data != c.data {
			t.Errorf("%+v: %v %v %v, want %v %v %v", c.opts, f.Machine, f.Class, f.Data, c.mach, c.class, c.data)
		}
	}
	for _, c := range []struct {
		opts Options
		fns  []Function
	}{
		{Options{Machine: elf.EM_68K}, nil}, // no known class
		{Options{Class: 7}, nil},
		{Options{ByteOrder: oddOrder{}}, nil},
		{Options{}, []Function{{Name: "nul\x00inside"}}},
	} {
		if _, err := Write(io.Discard, c.opts, c.fns); err == nil {
			t.Errorf("%+v %v: no error", c.opts, c.fns)
		}
	}
}

type oddOrder struct{ binary.ByteOrder }

// TestLineBias checks that an image takes LLVM's 0x40 off its line table.
func TestLineBias(t *testing.T) {
	code := sampleCode[elf.EM_X86_64]
	img := writeImage(t, Options{Machine: elf.EM_X86_64}, []Function{{Name: "sq", Code: code, CodeAddr: 0x1000, LineBias: jitdump.LLVMLineBias,
		Lines: slices.Values([]jitdump.DebugEntry{{Addr: 0x1040, Line: 3, File: "a.c"}, {Addr: 0x1044, Line: 4, File: "a.c"}, {Addr: 0x1040 + uint64(len(code)), Line: 4, File: "a.c"}})}})
	f, _ := elf.NewFile(bytes.NewReader(img.data))
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	cu, _ := d.Reader().Next()
	rows, _ := readRows(t, d, cu)
	want := []lineRow{{img.lay.Offsets[0], "a.c", 3, 0}, {img.lay.Offsets[0] + 4, "a.c", 4, 0}}
	if !slices.Equal(rows, want) || img.lay.DroppedLines != 1 {
		t.Errorf("rows %v (%d dropped), want %v (1 dropped)", rows, img.lay.DroppedLines, want)
	}
}
