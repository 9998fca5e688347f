package perfdata

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"
)

// Reader reads one perf.data file: its header, attrs and feature sections
// when it is made, then its records in file order (Next, NextRaw) or in time
// order (TimeOrder).
//
// A Reader made by NewBytesReader (or Open) decodes in place: records, and
// the strings and slices in them, alias the input, which must stay
// unchanged while they are in use. One made by NewReader or NewPipeReader
// gives records bytes of their own.
//
// Every size and count in the input is checked against the bytes present
// before anything is read or allocated, so no input makes a Reader allocate
// much more than the input's size, or panic.
//
// A file cut short (copied while perf record ran, written to a full disk)
// is read as far as it goes: when its header and attrs are whole, its
// whole records are delivered, and reading then ends with a
// *TruncatedError saying where the file ends and what is missing.
type Reader struct {
	// ReuseRecord lets Next and Decode return the record they returned
	// before, overwritten, when the type is the same: no allocation per
	// record, for a pass that does not keep records (as encoding/csv's
	// field of the same name).
	ReuseRecord bool
	// ReuseSampleBytes lets a Reader made by NewReader or NewPipeReader
	// hand out a SAMPLE record's bytes in place, from its read buffer:
	// they, and the slices of the Sample decoded from them, then hold only
	// until the next record is read. For a pass over samples that keeps
	// nothing of them: a DWARF recording's samples carry 8 KiB of stack
	// each, and copying them out made reading cost twice as much, most
	// of it in the garbage collector.
	ReuseSampleBytes bool

	name     string
	hdr      FileHeader
	attrs    []*Attr
	byID     map[uint64]*Attr
	idPos    int // where records hold their event id, from the first attr, as perf's evlist id_pos
	isPos    int // and, counted from the end, is_pos; both -1 when there is no id
	features []Feature

	data  []byte        // the whole input, in bytes mode
	src   *bufio.Reader // the data section or the pipe, in stream mode
	off   int64         // of the next record
	end   int64         // of the data section; math.MaxInt64 for a pipe read as a stream
	err   error         // sticky: the condition that ended reading
	cut   int64         // bytes of the data section present, when the file ends inside it; else -1
	after error         // what the end of the data reports instead of io.EOF: feature sections cut short
	chunk []byte        // stream mode: records' bytes are cut from it
	grown int           // the size of the last chunk: chunks double up to streamBuffer
	lent  int           // stream mode: bytes of the last record, handed out in place, to discard
	// readTo, when set (a File's), is told how far reading has gone, so
	// that the input behind leaves resident memory (mapfile's ReadTo).
	readTo func(off int)

	samples  slab[Sample]
	mmap2s   slab[Mmap2]
	mmaps    slab[Mmap]
	comms    slab[Comm]
	tasks    slab[Task]
	switches slab[Switch] // at every context switch of an off-CPU recording
	unknowns slab[Unknown]
	u64s     slab[uint64] // callchains
	regs     slab[uint64] // apart: with ReuseRecord, one sample holds both
	reads    slab[ReadValue]
	branches slab[Branch]
}

// slab hands out values from arrays of many, one allocation for many
// records instead of one each: at tens of bytes a sample, allocation
// otherwise dominates reading. A value handed out stays valid as long as it
// is referenced, like any other.
type slab[T any] struct{ free []T }

const slabBytes = 16 << 10

func (s *slab[T]) many(n int, reuse bool) []T {
	if n > len(s.free) {
		var zero T
		s.free = make([]T, max(n, slabBytes/int(unsafe.Sizeof(zero))))
	}
	p := s.free[:n:n]
	if !reuse {
		s.free = s.free[n:]
	}
	return p
}

func (s *slab[T]) new(reuse bool) *T { return &s.many(1, reuse)[0] }

// RawRecord is one record as it is in the file: what copying needs, with
// no decoding.
type RawRecord struct {
	Offset int64  // in the file
	Bytes  []byte // header included, and the data after TRACING_DATA and AUXTRACE
}

// Type returns the record's type.
func (r RawRecord) Type() RecordType { return RecordType(le.Uint32(r.Bytes)) }

// Misc returns the record header's misc field.
func (r RawRecord) Misc() uint16 { return le.Uint16(r.Bytes[4:]) }

// source gives parts of the input: in place from memory, or read into
// buffers of their own.
type source interface {
	// at returns the n bytes at off, or a *TruncatedError when the input
	// has fewer.
	at(off, n uint64) ([]byte, error)
	size() int64
}

type memSource []byte

func (m memSource) size() int64 { return int64(len(m)) }

func (m memSource) at(off, n uint64) ([]byte, error) {
	if err := bounds(off, n, m.size()); err != nil {
		return nil, err
	}
	return m[off : off+n : off+n], nil
}

type atSource struct {
	r io.ReaderAt
	n int64
}

func (s atSource) size() int64 { return s.n }

func (s atSource) at(off, n uint64) ([]byte, error) {
	if err := bounds(off, n, s.n); err != nil {
		return nil, err
	}
	b := make([]byte, n)
	if got, err := s.r.ReadAt(b, int64(off)); got < len(b) {
		if err == io.EOF {
			return nil, &TruncatedError{Off: int64(off), Want: n, Have: int64(got)}
		}
		return nil, err
	}
	return b, nil
}

func bounds(off, n uint64, size int64) error {
	if off > uint64(size) {
		return &TruncatedError{Off: int64(min(off, math.MaxInt64)), Want: n}
	}
	if have := uint64(size) - off; n > have {
		return &TruncatedError{Off: int64(off), Want: n, Have: int64(have)}
	}
	return nil
}

// NewBytesReader returns a Reader over a perf.data file (or a pipe-mode
// stream saved to a file) held in memory, decoding it in place.
func NewBytesReader(data []byte) (*Reader, error) {
	r := &Reader{data: data, cut: -1}
	if err := r.parseHeader(memSource(data)); err != nil {
		return nil, err
	}
	return r, nil
}

// NewReader returns a Reader over the size bytes of a perf.data file (or a
// pipe-mode stream saved to a file) in ra. It reads the header, attrs and
// feature sections into memory, and the data section as a stream.
func NewReader(ra io.ReaderAt, size int64) (*Reader, error) {
	r := &Reader{cut: -1}
	if err := r.parseHeader(atSource{ra, size}); err != nil {
		return nil, err
	}
	// Peek needs room for the longest fixed part a record's extent depends on.
	buf := max(auxtraceFixed, min(streamBuffer, r.end-r.off))
	r.src = bufio.NewReaderSize(io.NewSectionReader(ra, r.off, r.end-r.off), int(buf))
	return r, nil
}

// NewPipeReader returns a Reader over a pipe-mode stream, as perf record -o -
// writes it: a 16-byte header, then records, attrs and features among them.
func NewPipeReader(in io.Reader) (*Reader, error) {
	r := &Reader{src: bufio.NewReaderSize(in, pipeBuffer), end: math.MaxInt64, cut: -1}
	head, err := r.src.Peek(PipeHeaderSize)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := r.parseMagic(head); err != nil {
		return nil, err
	}
	if len(head) < PipeHeaderSize {
		return nil, &TruncatedError{Want: PipeHeaderSize, Have: int64(len(head))}
	}
	if r.hdr.Size = le.Uint64(head[8:]); r.hdr.Size != PipeHeaderSize {
		return nil, &FormatError{Off: 8, Msg: fmt.Sprintf("header size %d: not a pipe-mode file (read a file with NewReader)", r.hdr.Size)}
	}
	r.src.Discard(PipeHeaderSize)
	r.off = PipeHeaderSize
	return r, nil
}

// Buffer sizes: reading a file's data, and a pipe, whose writer's own
// buffers are smaller.
const (
	streamBuffer = 256 << 10
	pipeBuffer   = 64 << 10
)

// SetName names the input in the errors the Reader returns from now on.
func (r *Reader) SetName(name string) { r.name = name }

// Header returns the file header.
func (r *Reader) Header() FileHeader { return r.hdr }

// Attrs returns the events, in file order. In pipe mode they arrive as
// records: Attrs returns those read so far.
func (r *Reader) Attrs() []*Attr { return r.attrs }

// Features returns the feature sections, in the order of their bits. In
// pipe mode they arrive as records: Features returns those read so far.
func (r *Reader) Features() []Feature { return r.features }

// Options returns what a Writer needs to write a file with r's header: its
// attrs and feature sections, or pipe mode.
func (r *Reader) Options() Options {
	if r.hdr.Pipe() {
		return Options{Pipe: true}
	}
	return Options{Attrs: r.attrs, Features: r.features}
}

func (r *Reader) parseMagic(b []byte) error {
	if len(b) < 8 {
		return nil
	}
	switch m := le.Uint64(b); m {
	case Magic:
		return nil
	case bits.ReverseBytes64(Magic):
		return &FormatError{Off: 0, Msg: "big-endian perf.data is not supported"}
	default:
		// The two files of a JIT profile sit side by side, and one is
		// easily named for the other: "JiTD", jitdump's magic, in
		// either byte order.
		if j := string(b[:4]); j == "DTiJ" || j == "JiTD" {
			return &FormatError{Off: 0, Msg: fmt.Sprintf("not a perf.data file but a jitdump (magic %q): jitprof dump or check reads it", b[:4])}
		}
		return &FormatError{Off: 0, Msg: fmt.Sprintf("not a perf.data file: magic %q", b[:8])}
	}
}

func (r *Reader) parseHeader(src source) error {
	head, err := src.at(0, uint64(min(src.size(), FileHeaderSize)))
	if err != nil {
		return err
	}
	if err := r.parseMagic(head); err != nil {
		return err
	}
	if len(head) < PipeHeaderSize {
		return &TruncatedError{Want: PipeHeaderSize, Have: int64(len(head)), What: "the file header"}
	}
	h := &r.hdr
	switch h.Size = le.Uint64(head[8:]); h.Size {
	case PipeHeaderSize:
		r.off, r.end = PipeHeaderSize, src.size()
		return nil
	case FileHeaderSize:
	default:
		return &FormatError{Off: 8, Msg: fmt.Sprintf("header size %d is neither %d (a file) nor %d (a pipe)", h.Size, FileHeaderSize, PipeHeaderSize)}
	}
	if len(head) < FileHeaderSize {
		return &TruncatedError{Want: FileHeaderSize, Have: int64(len(head)), What: "the file header"}
	}
	h.AttrSize = le.Uint64(head[16:])
	h.Attrs = Section{le.Uint64(head[24:]), le.Uint64(head[32:])}
	h.Data = Section{le.Uint64(head[40:]), le.Uint64(head[48:])}
	h.EventTypes = Section{le.Uint64(head[56:]), le.Uint64(head[64:])}
	for i := range h.Features {
		h.Features[i] = le.Uint64(head[72+8*i:])
	}

	if err := r.parseAttrs(src); err != nil {
		return err
	}
	dataEnd, carry := bits.Add64(h.Data.Offset, h.Data.Size, 0)
	if carry != 0 || dataEnd > math.MaxInt64 {
		return &FormatError{Off: 40, Msg: fmt.Sprintf("data section %#x+%#x ends beyond any file", h.Data.Offset, h.Data.Size)}
	}
	if h.Data.Offset < FileHeaderSize {
		return &FormatError{Off: 40, Msg: fmt.Sprintf("data section at %#x overlaps the header", h.Data.Offset)}
	}
	if err := bounds(h.Data.Offset, 0, src.size()); err != nil {
		return err
	}
	r.off, r.end = int64(h.Data.Offset), int64(dataEnd)
	if dataEnd > uint64(src.size()) {
		// Cut short, the file still holds whole records worth a partial
		// report; reading them ends with a *TruncatedError saying what is
		// missing. The feature sections came after the data.
		r.cut = src.size() - int64(h.Data.Offset)
		return nil
	}
	if err := r.parseFeatures(src, dataEnd); err != nil {
		if !errors.Is(err, ErrTruncated) {
			return err
		}
		// The data is whole: its records are read, then this is reported.
		r.features, r.after = nil, within(err, "the feature sections")
	}
	return nil
}

// parseAttrs reads the attrs section and each attr's ids.
func (r *Reader) parseAttrs(src source) error {
	h := &r.hdr
	if h.Attrs.Size == 0 {
		return nil
	}
	if h.AttrSize < attrSizeVer0+sectionSize || h.Attrs.Size%h.AttrSize != 0 {
		return &FormatError{Off: 16, Msg: fmt.Sprintf("attr_size %d cannot divide the %d-byte attrs section into attrs of at least %d bytes", h.AttrSize, h.Attrs.Size, attrSizeVer0+sectionSize)}
	}
	sec, err := src.at(h.Attrs.Offset, h.Attrs.Size)
	if err != nil {
		return within(err, "the attrs section")
	}
	attrLen := int(h.AttrSize - sectionSize)
	for entry := range slices.Chunk(sec, int(h.AttrSize)) {
		off := int64(h.Attrs.Offset) + int64(len(r.attrs))*int64(h.AttrSize)
		a, msg := decodeAttr(entry[:attrLen])
		if msg != "" {
			return &FormatError{Off: off, Msg: msg}
		}
		if size := le.Uint32(entry[4:]); int(size) != attrLen {
			return &FormatError{Off: off + 4, Msg: fmt.Sprintf("attr size %d disagrees with the header's attr_size %d", size, h.AttrSize)}
		}
		a.offset = off
		ids := Section{le.Uint64(entry[attrLen:]), le.Uint64(entry[attrLen+8:])}
		if ids.Size%8 != 0 {
			return &FormatError{Off: off + int64(attrLen), Msg: fmt.Sprintf("ids section size %d is not a whole number of ids", ids.Size)}
		}
		b, err := src.at(ids.Offset, ids.Size)
		if err != nil {
			return within(err, fmt.Sprintf("the ids of the attr at %#x", off))
		}
		a.IDs = make([]uint64, len(b)/8)
		for i := range a.IDs {
			a.IDs[i] = le.Uint64(b[8*i:])
		}
		if msg := r.addAttr(a); msg != "" {
			return &FormatError{Off: off, Msg: msg}
		}
	}
	return nil
}

// parseFeatures reads the table of feature sections after the data, one
// entry per bit of the bitmap, in bit order, and the sections.
func (r *Reader) parseFeatures(src source, tableOff uint64) error {
	n := 0
	for _, w := range r.hdr.Features {
		n += bits.OnesCount64(w)
	}
	if n == 0 {
		return nil
	}
	table, err := src.at(tableOff, uint64(n)*sectionSize)
	if err != nil {
		return err
	}
	r.features = make([]Feature, 0, n)
	for id := range FeatureID(featureBits) {
		if r.hdr.Features[id/64]&(1<<(id%64)) == 0 {
			continue
		}
		e := table[len(r.features)*sectionSize:]
		sec := Section{le.Uint64(e), le.Uint64(e[8:])}
		data, err := src.at(sec.Offset, sec.Size)
		if err != nil {
			return err
		}
		r.features = append(r.features, Feature{ID: id, Offset: int64(sec.Offset), Data: data})
	}
	return nil
}

// addAttr makes a known to the id lookup, or says why it cannot.
func (r *Reader) addAttr(a *Attr) string {
	if msg := r.checkAttr(a); msg != "" {
		return msg
	}
	if len(r.attrs) == 0 {
		r.idPos, r.isPos = idPos(a.SampleType), isPos(a.SampleType)
	}
	if r.byID == nil {
		r.byID = make(map[uint64]*Attr, len(a.IDs))
	}
	for _, id := range a.IDs {
		r.byID[id] = a
	}
	r.attrs = append(r.attrs, a)
	return ""
}

// checkAttr says why a cannot join the attrs read so far: perf finds a
// record's attr by the id at one position for all attrs, so all must put
// it at the same place, as perf's evlist__valid_sample_type demands.
func (r *Reader) checkAttr(a *Attr) string {
	if len(r.attrs) == 0 {
		return ""
	}
	first := r.attrs[0]
	if idPos(a.SampleType) != r.idPos || isPos(a.SampleType) != r.isPos || a.SampleIDAll() != first.SampleIDAll() {
		return fmt.Sprintf("sample_type %#x (sample_id_all %t) puts the event id elsewhere than the first attr's %#x (sample_id_all %t)",
			uint64(a.SampleType), a.SampleIDAll(), uint64(first.SampleType), first.SampleIDAll())
	}
	return ""
}

// idPos is where a SAMPLE holds its event id, in 8-byte words after the
// header; -1 when it holds none.
func idPos(st SampleType) int {
	if st&SampleIdentifier != 0 {
		return 0
	}
	if st&SampleID == 0 {
		return -1
	}
	return bits.OnesCount64(uint64(st & (SampleIP | SampleTID | SampleTime | SampleAddr)))
}

// isPos is where other kernel records hold their event id, in 8-byte words
// back from their end; -1 when they hold none.
func isPos(st SampleType) int {
	if st&SampleIdentifier != 0 {
		return 1
	}
	if st&SampleID == 0 {
		return -1
	}
	return 1 + bits.OnesCount64(uint64(st&(SampleCPU|SampleStreamID)))
}

// attrOf finds the attr of a kernel record as perf's evlist__event2evsel
// does: by the event id at the position the first attr's sample_type
// gives, the first attr for an id of 0 (perf's own synthesized records).
func (r *Reader) attrOf(b []byte) *Attr {
	switch len(r.attrs) {
	case 0:
		return nil
	case 1:
		return r.attrs[0]
	}
	first := r.attrs[0]
	words := (len(b) - RecordHeaderSize) / 8
	var pos int
	if RecordType(le.Uint32(b)) == TypeSample {
		if r.idPos < 0 || r.idPos >= words {
			return nil
		}
		pos = r.idPos
	} else {
		if !first.SampleIDAll() {
			return first
		}
		if r.isPos < 0 || r.isPos > words {
			return nil
		}
		pos = words - r.isPos
	}
	id := le.Uint64(b[RecordHeaderSize+8*pos:])
	if id == 0 {
		return first
	}
	return r.byID[id]
}

// Time returns the time perf orders a record by: a sample's TIME, or the
// TIME in a kernel record's sample_id. ok is false for records without one:
// perf's own records, and those whose attr lacks TIME or sample_id_all.
func (r *Reader) Time(rec RawRecord) (t uint64, ok bool) {
	b := rec.Bytes
	typ := rec.Type()
	if typ >= TypeUserStart {
		return 0, false
	}
	a := r.attrOf(b)
	if a == nil || a.SampleType&SampleTime == 0 {
		return 0, false
	}
	words := (len(b) - RecordHeaderSize) / 8
	var pos int
	if typ == TypeSample {
		pos = bits.OnesCount64(uint64(a.SampleType & (SampleIdentifier | SampleIP | SampleTID)))
	} else {
		if !a.SampleIDAll() {
			return 0, false
		}
		pos = words - 1 - bits.OnesCount64(uint64(a.SampleType&(SampleID|SampleStreamID|SampleCPU|SampleIdentifier)))
	}
	if pos < 0 || pos >= words {
		return 0, false
	}
	return le.Uint64(b[RecordHeaderSize+8*pos:]), true
}

// Next returns the next record in file order. At the end of the data it
// returns io.EOF; when the file stops inside a record, the data section or
// the feature sections after it, an error matching ErrTruncated; when a
// record's size cannot be right, a *FormatError. After any of these it
// keeps returning the same error. A record whose fields do not fit is
// returned as *Invalid and reading goes on.
func (r *Reader) Next() (Record, error) {
	rec, err := r.NextRaw()
	if err != nil {
		return nil, err
	}
	return r.Decode(rec), nil
}

// NextRaw is Next without decoding: the record's bytes, for copying, or
// for decoding later with Decode. Errors are Next's.
func (r *Reader) NextRaw() (RawRecord, error) {
	if r.err != nil {
		return RawRecord{}, r.err
	}
	off := r.off
	b, err := r.nextBytes()
	if err != nil {
		r.err = r.named(err)
		return RawRecord{}, r.err
	}
	rec := RawRecord{Offset: off, Bytes: b}
	// Pipe mode's attrs and features must be known before the records
	// after them are decoded, whatever order the caller decodes in.
	switch rec.Type() {
	case TypeHeaderAttr:
		if a, msg := decodeAttrRecord(b); msg == "" && r.addAttr(a) == "" {
			a.offset = off
		}
	case TypeHeaderFeature:
		if len(b) >= featureFixed {
			r.features = append(r.features, Feature{ID: FeatureID(le.Uint64(b[8:])), Offset: off + featureFixed, Data: b[featureFixed:]})
		}
	}
	return rec, nil
}

const featureFixed = RecordHeaderSize + 8 // header, feat_id

// nextBytes returns the next whole record, header and trailing data
// included, and advances.
func (r *Reader) nextBytes() ([]byte, error) {
	var head []byte
	if r.src == nil {
		head = r.data[r.off:min(r.end, int64(len(r.data)))]
	} else {
		if r.lent > 0 {
			r.src.Discard(r.lent) // peeked whole: cannot fall short
			r.lent = 0
		}
		var err error
		if head, err = r.src.Peek(auxtraceFixed); len(head) < RecordHeaderSize && err != nil && err != io.EOF {
			return nil, err
		}
	}
	if len(head) == 0 {
		switch {
		case r.cut >= 0:
			return nil, r.cutShort(0, 0)
		case r.off < r.end && r.end != math.MaxInt64: // the file shrank since it was opened
			return nil, &TruncatedError{Off: r.off, Want: uint64(r.end - r.off)}
		case r.after != nil:
			return nil, r.after
		}
		return nil, io.EOF
	}
	if len(head) < RecordHeaderSize {
		return nil, r.cutShort(RecordHeaderSize, len(head))
	}
	size := le.Uint16(head[6:])
	if size < RecordHeaderSize {
		return nil, &FormatError{Off: r.off, Msg: fmt.Sprintf("record size %d is smaller than the record header", size)}
	}
	total := extent(head, size)
	// A pipe's data runs to the end of the input, where a record cut short
	// is truncation; a file's data section is followed by its features.
	if !r.hdr.Pipe() && total > uint64(r.end-r.off) {
		return nil, &FormatError{Off: r.off, Msg: fmt.Sprintf("%s record of %d bytes runs past the end of the data section at %#x", RecordType(le.Uint32(head)), total, r.end)}
	}

	var b []byte
	if r.src == nil {
		if total > uint64(len(head)) {
			return nil, r.cutShort(total, len(head))
		}
		b = head[:total:total]
	} else if r.ReuseSampleBytes && RecordType(le.Uint32(head)) == TypeSample && total <= uint64(r.src.Size()) {
		var err error
		if b, err = r.src.Peek(int(total)); err != nil {
			if err == io.EOF {
				return nil, r.cutShort(total, len(b))
			}
			return nil, err
		}
		b = b[:total:total]
		r.lent = int(total)
	} else {
		var err error
		if b, err = r.readRecord(total); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, r.cutShort(total, len(b))
			}
			return nil, err
		}
	}
	r.off += int64(total)
	if r.readTo != nil {
		r.readTo(int(r.off))
	}
	return b, nil
}

// cutShort reports a record of want bytes that the end of the input cuts
// short, have of them present; want 0 when it ends between records.
func (r *Reader) cutShort(want uint64, have int) error {
	e := &TruncatedError{Off: r.off, Want: want, Have: int64(have)}
	if r.cut >= 0 {
		e.Data, e.DataHave = &r.hdr.Data, r.cut
	}
	return e
}

// within names what a *TruncatedError from reading the header's parts cut
// short.
func within(err error, what string) error {
	if e, ok := err.(*TruncatedError); ok {
		e.What = what
	}
	return err
}

const (
	tracingDataFixed = RecordHeaderSize + 4  // header, size of the data after the record
	auxtraceFixed    = RecordHeaderSize + 40 // header, size, offset, reference, idx, tid, cpu, reserved
)

// extent is how many bytes a record takes in the file: its size, and for
// the two types followed by data outside their size, that data (as perf's
// session reader skips it).
func extent(head []byte, size uint16) uint64 {
	n := uint64(size)
	switch RecordType(le.Uint32(head)) {
	case TypeTracingData:
		if size >= tracingDataFixed && len(head) >= tracingDataFixed {
			n += uint64(le.Uint32(head[8:]))
		}
	case TypeAuxtrace:
		if size >= auxtraceFixed && len(head) >= RecordHeaderSize+8 {
			n, _ = bits.Add64(n, le.Uint64(head[8:]), 0)
			n = min(n, math.MaxInt64)
		}
	}
	return n
}

// readRecord reads n bytes from the stream into bytes of their own, cut
// from a shared chunk; chunks double in size, so a short input costs
// little. Beyond a size any record but AUXTRACE has, it grows the buffer
// with the data actually read, so a corrupt size cannot make it allocate
// more than the input holds.
func (r *Reader) readRecord(n uint64) ([]byte, error) {
	const eager = 64 << 10
	if n <= eager {
		if uint64(len(r.chunk)) < n {
			r.grown = min(max(2*r.grown, 4<<10, int(n)), streamBuffer)
			r.chunk = make([]byte, r.grown)
		}
		b := r.chunk[:n:n]
		r.chunk = r.chunk[n:]
		got, err := io.ReadFull(r.src, b)
		return b[:got], err
	}
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(r.src, int64(n)))
	if err == nil && uint64(got) < n {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}

func (r *Reader) named(err error) error {
	switch e := err.(type) {
	case *FormatError:
		e.File = r.name
	case *TruncatedError:
		e.File = r.name
	}
	return err
}

// BuildIDs decodes the build-id table (the HEADER_BUILD_ID feature
// section). A file without one has none.
func (r *Reader) BuildIDs() ([]BuildID, error) {
	var out []BuildID
	for _, f := range r.features {
		if f.ID != FeatureBuildID {
			continue
		}
		for b, off := f.Data, f.Offset; len(b) > 0; {
			if len(b) < RecordHeaderSize {
				return nil, r.named(&FormatError{Off: off, Msg: fmt.Sprintf("build-id entry header cut short: %d bytes left in the section", len(b))})
			}
			size := int(le.Uint16(b[6:]))
			if size > len(b) {
				return nil, r.named(&FormatError{Off: off, Msg: fmt.Sprintf("build-id entry of %d bytes overflows the %d left in the section", size, len(b))})
			}
			e, msg := decodeBuildID(b[:size])
			if msg != "" {
				return nil, r.named(&FormatError{Off: off, Msg: msg})
			}
			out = append(out, e)
			b, off = b[size:], off+int64(size)
		}
	}
	return out, nil
}

// EventDesc is an entry of the HEADER_EVENT_DESC feature section: the name
// perf gave an event (such as "cpu-clock" or "cycles:u") and the ids of its
// instances.
type EventDesc struct {
	Name string
	IDs  []uint64
}

// EventDescs decodes the HEADER_EVENT_DESC feature section. A file without
// one has none.
func (r *Reader) EventDescs() ([]EventDesc, error) {
	var out []EventDesc
	for _, f := range r.features {
		if f.ID != FeatureEventDesc {
			continue
		}
		c := featureCursor{b: f.Data, off: f.Offset}
		nr, attrSize := c.u32(), c.u32()
		for i := uint32(0); i < nr && c.err == ""; i++ {
			c.skip(uint64(attrSize))
			nrIDs := c.u32()
			name := c.str()
			if uint64(nrIDs)*8 > uint64(len(c.b)) {
				c.fail(fmt.Sprintf("event %q claims %d ids, more than the section holds", name, nrIDs))
				break
			}
			ids := make([]uint64, nrIDs)
			for j := range ids {
				ids[j] = c.u64()
			}
			out = append(out, EventDesc{Name: name, IDs: ids})
		}
		if c.err != "" {
			return nil, r.named(&FormatError{Off: c.off, Msg: "event description: " + c.err})
		}
	}
	return out, nil
}

// featureCursor reads a feature section's fields, bounded by the section;
// the first field that does not fit sets err, and reads after it give
// zeros.
type featureCursor struct {
	b   []byte
	off int64
	err string
}

func (c *featureCursor) fail(msg string) {
	if c.err == "" {
		c.err = msg
	}
	c.b = nil
}

func (c *featureCursor) skip(n uint64) []byte {
	if n > uint64(len(c.b)) {
		c.fail(fmt.Sprintf("%d bytes wanted, %d left in the section", n, len(c.b)))
		return nil
	}
	b := c.b[:n]
	c.b, c.off = c.b[n:], c.off+int64(n)
	return b
}

func (c *featureCursor) u32() uint32 {
	if b := c.skip(4); b != nil {
		return le.Uint32(b)
	}
	return 0
}

func (c *featureCursor) u64() uint64 {
	if b := c.skip(8); b != nil {
		return le.Uint64(b)
	}
	return 0
}

// str reads a perf_header_string: a length, then that many bytes holding a
// NUL-terminated string and its padding.
func (c *featureCursor) str() string {
	b := c.skip(uint64(c.u32()))
	s, _ := cstring(b)
	return strings.Clone(s)
}

// feature returns a cursor on the recording's first section of id; ok is
// false when the file has no such section.
func (r *Reader) feature(id FeatureID) (c *featureCursor, ok bool) {
	for _, f := range r.features {
		if f.ID == id {
			return &featureCursor{b: f.Data, off: f.Offset}, true
		}
	}
	return nil, false
}

// failed is the error of c's section of id, what naming it, nil when all
// its fields fit.
func (r *Reader) failed(c *featureCursor, id FeatureID, what string) error {
	if c.err == "" {
		return nil
	}
	return r.named(&FormatError{Off: c.off, Msg: fmt.Sprintf("feature %d%s: %s", id, what, c.err)})
}

// StringFeature decodes a feature section that holds one string, such as
// FeatureHostname, FeatureOSRelease, FeatureVersion, FeatureArch or
// FeatureCPUDesc. ok is false when the file has no such section.
func (r *Reader) StringFeature(id FeatureID) (s string, ok bool, err error) {
	c, ok := r.feature(id)
	if !ok {
		return "", false, nil
	}
	s = c.str()
	if err := r.failed(c, id, ""); err != nil {
		return "", true, err
	}
	return s, true, nil
}

// ClockData is the HEADER_CLOCK_DATA section: the samples' clock, and one
// moment read on it and on the wall clock, which ties the recording's
// times to a boot of a machine.
type ClockData struct {
	ClockID         int32
	WallNs, ClockNs uint64
}

// ClockData returns the recording's HEADER_CLOCK_DATA section, as perf's
// write_clock_data lays it out; ok is false when the recording has none
// (perf writes it when its samples use a clockid, -k).
func (r *Reader) ClockData() (cd ClockData, ok bool, err error) {
	c, ok := r.feature(FeatureClockData)
	if !ok {
		return ClockData{}, false, nil
	}
	version := c.u32()
	cd.ClockID = int32(c.u32())
	cd.WallNs, cd.ClockNs = c.u64(), c.u64()
	if c.err == "" && version != 1 {
		c.err = fmt.Sprintf("version %d, not 1", version)
	}
	if err := r.failed(c, FeatureClockData, " (clock data)"); err != nil {
		return ClockData{}, true, err
	}
	return cd, true, nil
}

// SampleTime returns when the recording's first and last samples were taken,
// from the HEADER_SAMPLE_TIME section perf record writes; ok is false when
// the recording has none.
func (r *Reader) SampleTime() (first, last uint64, ok bool, err error) {
	c, ok := r.feature(FeatureSampleTime)
	if !ok {
		return 0, 0, false, nil
	}
	first, last = c.u64(), c.u64()
	if err := r.failed(c, FeatureSampleTime, " (sample time)"); err != nil {
		return 0, 0, true, err
	}
	return first, last, true, nil
}
