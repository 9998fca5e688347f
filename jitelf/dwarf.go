package jitelf

import (
	"cmp"
	"debug/dwarf"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/leb128"
	"github.com/jitprof/jitprof/jitdump"
)

// Line program constants (DWARF 4, section 6.2). The line base and range
// are what perf and most compilers use.
const (
	lineBase   = -5
	lineRange  = 14
	opcodeBase = 13

	lnsCopy       = 1
	lnsAdvancePC  = 2
	lnsAdvanceLn  = 3
	lnsSetFile    = 4
	lnsSetColumn  = 5
	lneEndSeq     = 1
	lneSetAddress = 2
)

// DWARF forms, which debug/dwarf does not export.
const (
	formAddr      = 0x01
	formString    = 0x08
	formSecOffset = 0x17
)

// unknownFile names the file of entries that give none: the file table
// cannot hold an empty name, which ends it.
const unknownFile = "??"

// producer is the compile unit's DW_AT_producer.
const producer = "jitprof jitelf"

// row is a line entry, its address made an offset in its function's code.
type row struct {
	off  int64
	line uint32
	col  uint32
	file string
}

// buildDWARF makes .debug_line, .debug_info and .debug_abbrev for the
// functions' lines, and tells whether there were any. The text is at
// textStart, textSize bytes, the functions at their offsets.
func (b *builder) buildDWARF(textStart, textSize uint64) bool {
	// One yield function for all, rather than a range loop's, which would
	// be allocated per function.
	var fn Function
	add := func(e jitdump.DebugEntry) bool {
		b.rows = append(b.rows, row{off: int64(e.Addr - fn.LineBias - fn.CodeAddr), line: e.Line, col: e.Discrim, file: e.File})
		return true
	}
	for i := range b.n {
		fn = b.fn(i)
		if fn.Lines == nil {
			continue
		}
		b.rows = b.rows[:0]
		fn.Lines(add)
		if rows := b.inside(b.rows, int64(len(fn.Code))); len(rows) > 0 {
			b.appendSequence(rows, b.offs[i], uint64(len(fn.Code)))
		}
		clear(b.rows) // the pool must not keep the caller's strings
	}
	if len(b.prog) == 0 {
		return false
	}
	b.appendLineHeader()
	b.appendInfo(textStart, textSize)
	b.appendAbbrev()
	return true
}

// inside sorts rows by address and keeps those of a function of size
// bytes: the last one before its start is moved there, for it tells the line
// in effect at the start; those before it, and those at or past the end,
// are dropped.
func (b *builder) inside(rows []row, size int64) []row {
	byOff := func(x, y row) int { return cmp.Compare(x.off, y.off) }
	if !slices.IsSortedFunc(rows, byOff) {
		slices.SortStableFunc(rows, byOff)
	}
	start, _ := slices.BinarySearchFunc(rows, int64(0), func(r row, off int64) int { return cmp.Compare(r.off, off) })
	if start > 0 && (start == len(rows) || rows[start].off > 0) {
		start--
		rows[start].off = 0
	}
	end, _ := slices.BinarySearchFunc(rows, size, func(r row, off int64) int { return cmp.Compare(r.off, off) })
	end = max(end, start)
	b.linesLost += start + len(rows) - end
	return rows[start:end]
}

// appendSequence appends the line program of one function at addr: its
// rows, then the end of the sequence at the end of its code.
func (b *builder) appendSequence(rows []row, addr, size uint64) {
	p := append(b.prog, 0)
	p = leb128.AppendUnsigned(p, uint64(1+b.f.AddrSize()))
	p = append(p, lneSetAddress)
	cur := addr + uint64(rows[0].off)
	p = b.f.AppendAddr(p, cur)
	file, line, col := uint32(1), int64(1), uint32(0) // the state a sequence starts in
	for _, r := range rows {
		if f := b.fileIndex(r.file); f != file {
			p = leb128.AppendUnsigned(append(p, lnsSetFile), uint64(f))
			file = f
		}
		if r.col != col {
			p = leb128.AppendUnsigned(append(p, lnsSetColumn), uint64(r.col))
			col = r.col
		}
		a := addr + uint64(r.off)
		dAddr, dLine := a-cur, int64(r.line)-line
		if adj := dLine - lineBase; adj >= 0 && adj < lineRange && dAddr <= (255-opcodeBase-uint64(adj))/lineRange {
			p = append(p, byte(uint64(adj)+lineRange*dAddr+opcodeBase))
		} else {
			if dLine != 0 {
				p = leb128.AppendSigned(append(p, lnsAdvanceLn), dLine)
			}
			if dAddr != 0 {
				p = leb128.AppendUnsigned(append(p, lnsAdvancePC), dAddr)
			}
			p = append(p, lnsCopy)
		}
		cur, line = a, int64(r.line)
	}
	if end := addr + size; end > cur {
		p = leb128.AppendUnsigned(append(p, lnsAdvancePC), end-cur)
	}
	b.prog = append(p, 0, 1, lneEndSeq)
}

// fileIndex returns the line table's index of the named file, adding it.
// A name with a NUL is cut there, as a jitdump reader would see it; an
// empty one becomes unknownFile. Consecutive rows mostly share their file,
// whose index is then at hand without hashing its name.
func (b *builder) fileIndex(name string) uint32 {
	if name == b.lastFile && b.lastFileIndex != 0 {
		return b.lastFileIndex
	}
	b.lastFile = name
	if nul := strings.IndexByte(name, 0); nul >= 0 {
		name = name[:nul] // all a jitdump could hold
	}
	if name == "" {
		name = unknownFile
	}
	i, ok := b.files[name]
	if !ok {
		b.fileNames = append(b.fileNames, name)
		i = uint32(len(b.fileNames))
		b.files[name] = i
	}
	b.lastFileIndex = i
	return i
}

// appendLineHeader makes .debug_line: the header, with the file table,
// then the program.
func (b *builder) appendLineHeader() {
	o := b.f.Order
	l := o.AppendUint32(b.line[:0], 0) // unit_length, set below
	l = o.AppendUint16(l, 4)
	lenAt := len(l)
	l = o.AppendUint32(l, 0)                                     // header_length, set below
	l = append(l, 1, 1, 1, lineBase&0xff, lineRange, opcodeBase) // min_inst_length, max_ops, default_is_stmt
	l = append(l, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1)            // operands of the standard opcodes
	l = append(l, 0)                                             // no include directories
	for _, name := range b.fileNames {
		l = append(append(l, name...), 0, 0, 0, 0) // directory 0, no time, no size
	}
	l = append(l, 0)
	o.PutUint32(l[lenAt:], uint32(len(l)-lenAt-4))
	l = append(l, b.prog...)
	o.PutUint32(l, uint32(len(l)-4))
	b.line = l
}

// appendInfo makes .debug_info: one compile unit over the text, its lines
// the whole .debug_line, and a subprogram per function that has code.
func (b *builder) appendInfo(textStart, textSize uint64) {
	f := &b.f.Format
	o := f.Order
	d := o.AppendUint32(b.info[:0], 0) // unit_length, set below
	d = o.AppendUint16(d, 4)
	d = o.AppendUint32(d, 0) // abbreviations at 0
	d = append(d, byte(f.AddrSize()))
	d = leb128.AppendUnsigned(d, abbrevCU)
	d = append(append(d, producer...), 0)
	d = append(append(d, b.fileNames[0]...), 0)
	d = f.AppendAddr(d, textStart)
	d = f.AppendAddr(d, textStart+textSize)
	d = o.AppendUint32(d, 0) // stmt_list
	for i := range b.n {
		if fn := b.fn(i); len(fn.Code) > 0 {
			size := uint64(len(fn.Code))
			d = leb128.AppendUnsigned(d, abbrevSubprogram)
			d = append(append(d, fn.Name...), 0)
			d = f.AppendAddr(d, b.offs[i])
			d = f.AppendAddr(d, b.offs[i]+size)
		}
	}
	d = append(d, 0) // end of the unit's children
	o.PutUint32(d, uint32(len(d)-4))
	b.info = d
}

const (
	abbrevCU = 1 + iota
	abbrevSubprogram
)

// appendAbbrev makes .debug_abbrev. high_pc is an address, not a length,
// which every DWARF version and reader takes.
func (b *builder) appendAbbrev() {
	a := b.abbrev[:0]
	a = leb128.AppendUnsigned(a, abbrevCU)
	a = leb128.AppendUnsigned(a, uint64(dwarf.TagCompileUnit))
	a = append(a, 1) // DW_CHILDREN_yes
	for _, af := range [...][2]uint64{
		{uint64(dwarf.AttrProducer), formString},
		{uint64(dwarf.AttrName), formString},
		{uint64(dwarf.AttrLowpc), formAddr},
		{uint64(dwarf.AttrHighpc), formAddr},
		{uint64(dwarf.AttrStmtList), formSecOffset},
		{0, 0},
	} {
		a = leb128.AppendUnsigned(leb128.AppendUnsigned(a, af[0]), af[1])
	}
	a = leb128.AppendUnsigned(a, abbrevSubprogram)
	a = leb128.AppendUnsigned(a, uint64(dwarf.TagSubprogram))
	a = append(a, 0) // DW_CHILDREN_no
	for _, af := range [...][2]uint64{
		{uint64(dwarf.AttrName), formString},
		{uint64(dwarf.AttrLowpc), formAddr},
		{uint64(dwarf.AttrHighpc), formAddr},
		{0, 0},
	} {
		a = leb128.AppendUnsigned(leb128.AppendUnsigned(a, af[0]), af[1])
	}
	b.abbrev = append(a, 0)
}
