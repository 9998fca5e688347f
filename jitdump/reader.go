package jitdump

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/bits"
	"unsafe"
)

// Reader streams the records of one jitdump file.
//
// A Reader made by NewBytesReader (or Open) decodes in place: names, code and
// unwinding data alias the input, which must stay unchanged while they are in
// use. A Reader made by NewReader gives each record bytes of its own.
//
// Every length in the input is checked against the record's total_size and
// against the bytes present before anything is read or allocated, so no input
// makes a Reader allocate more than the input's size or panic.
//
// A record whose total_size cannot be right (smaller than its header, or
// past the end of the input) is the runtime's last write, unfinished, when
// nothing that reads as records follows it. When records do follow, its
// size is corrupt: a Reader made by NewBytesReader (or Open) skips to them
// (see resync) and reading goes on; one made by NewReader cannot look ahead,
// and stops there.
type Reader struct {
	// ReuseRecord lets Next return the record it returned before, overwritten,
	// when the type is the same: no allocation per record, for a pass that
	// does not keep records (as encoding/csv's field of the same name).
	ReuseRecord bool

	hdr  Header
	ord  order // hdr.ByteOrder, for the record loop
	name string

	data []byte        // the whole input, in bytes mode
	src  *bufio.Reader // the input, in stream mode
	off  int64         // of the next record
	err  error         // sticky: the condition that ended reading
	last uint64        // the timestamp of the record read last, for resync
	// tried counts the bytes of the records resync has decoded to test
	// them, which resyncBudget bounds.
	tried int64

	touched int  // bytes mode: the input before it has been loaded by touchAhead
	sink    byte // keeps touchAhead's loads from being optimised away
	// readTo, when set (a File's), is told how far reading has gone, so
	// that the input behind leaves resident memory (mapfile's ReadTo).
	readTo func(off int)

	loads   slab[CodeLoad]
	debugs  slab[DebugInfo]
	unwinds slab[UnwindingInfo]
}

// slab hands out records from arrays of slabSize, one allocation for many
// records instead of one each: at a few hundred bytes a record, allocation
// otherwise dominates reading. A record handed out stays valid as long as it
// is referenced, like any other.
type slab[T any] struct{ free []T }

const slabSize = 64

func (s *slab[T]) new(reuse bool) *T {
	if len(s.free) == 0 {
		s.free = make([]T, slabSize)
	}
	p := &s.free[0]
	if !reuse {
		s.free = s.free[1:]
	}
	return p
}

// NewReader reads the header from r and returns a Reader for the records
// that follow.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{src: bufio.NewReaderSize(r, 256<<10)}
	var b [HeaderSize]byte
	n, err := io.ReadFull(rd.src, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && err != io.EOF {
		return nil, err
	}
	if err := rd.parseHeader(b[:n]); err != nil {
		return nil, err
	}
	extra := int64(rd.hdr.Size) - HeaderSize
	if skipped, err := io.CopyN(io.Discard, rd.src, extra); err != nil {
		if err == io.EOF {
			return nil, &TruncatedError{Off: 0, Want: uint64(rd.hdr.Size), Have: HeaderSize + skipped}
		}
		return nil, err
	}
	rd.off = int64(rd.hdr.Size)
	return rd, nil
}

// NewBytesReader returns a Reader over a dump held in memory, decoding it in
// place without copying.
func NewBytesReader(data []byte) (*Reader, error) {
	rd := &Reader{data: data}
	if err := rd.parseHeader(data[:min(len(data), HeaderSize)]); err != nil {
		return nil, err
	}
	if uint64(len(data)) < uint64(rd.hdr.Size) {
		return nil, &TruncatedError{Want: uint64(rd.hdr.Size), Have: int64(len(data))}
	}
	rd.off = int64(rd.hdr.Size)
	return rd, nil
}

// SetName names the input in the errors the Reader returns from now on.
func (r *Reader) SetName(name string) { r.name = name }

// Header returns the file header.
func (r *Reader) Header() Header { return r.hdr }

// Offset returns the offset of the next record.
func (r *Reader) Offset() int64 { return r.off }

func (r *Reader) parseHeader(b []byte) error {
	if len(b) >= 4 {
		switch binary.LittleEndian.Uint32(b) {
		case Magic:
			r.hdr.ByteOrder = binary.LittleEndian
		case bits.ReverseBytes32(Magic):
			r.hdr.ByteOrder, r.ord.big = binary.BigEndian, true
		default:
			// The two files of a JIT profile sit side by side, and
			// one is easily named for the other.
			if bytes.HasPrefix(b, []byte("PERFILE2")) {
				return &FormatError{Off: 0, Msg: "not a jitdump file but a perf.data recording (magic \"PERFILE2\"): jitprof report or inject reads it"}
			}
			return &FormatError{Off: 0, Msg: fmt.Sprintf("not a jitdump file: magic %#08x", binary.LittleEndian.Uint32(b))}
		}
	}
	if len(b) < HeaderSize {
		return &TruncatedError{Off: 0, Want: HeaderSize, Have: int64(len(b))}
	}
	o := r.hdr.ByteOrder
	r.hdr.Version = o.Uint32(b[4:])
	r.hdr.Size = o.Uint32(b[8:])
	r.hdr.ElfMach = o.Uint32(b[12:])
	r.hdr.Pad1 = o.Uint32(b[16:])
	r.hdr.Pid = o.Uint32(b[20:])
	r.hdr.Timestamp = o.Uint64(b[24:])
	r.hdr.Flags = o.Uint64(b[32:])
	if r.hdr.Size < HeaderSize {
		return &FormatError{Off: 8, Msg: fmt.Sprintf("header total_size %d is smaller than the %d-byte header", r.hdr.Size, HeaderSize)}
	}
	return nil
}

// Next returns the next record. At the end of a complete file it returns
// io.EOF; when the file stops inside a record, an error matching
// ErrTruncated; when a record's size cannot be right and no record follows
// it, a *FormatError. After any of these it keeps returning the same error.
// A record whose fields do not fit, and the bytes skipped after a corrupt
// total_size up to the record after it, are returned as *Invalid and
// reading goes on.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	off := r.off
	b, err := r.nextBytes()
	if err != nil {
		if skipped := r.resync(); skipped != nil {
			return skipped, nil
		}
		r.err = r.named(err)
		return nil, r.err
	}
	r.last = r.ord.u64(b[8:])
	return r.decode(off, b, r.ReuseRecord), nil
}

// LastTime is the timestamp of the record read last (0 before any).
func (r *Reader) LastTime() uint64 { return r.last }

// resyncSlack is how much earlier than the record before it a record found
// by resync may be timed: runtimes that write from several threads take
// the time before the lock that orders their writes, so their records are
// not quite in time order.
const resyncSlack = 10_000_000_000 // 10 s in ns; more in an arch clock's ticks

// resync skips a corrupt record: the record at r.off, whose total_size
// cannot be right (nextBytes failed on it), when it is followed by records.
// It looks, from the end of that record's header on, for the first place
// where a record of a known id starts whose size fits the bytes present,
// timed no earlier than the record before minus resyncSlack, whose fields
// fit, and after which comes the end of the input or another such record
// (that one may run past the end: the runtime may still be writing it).
// It returns the bytes up to there as an *Invalid, moving past them, or nil
// when there is no such place: then the record is the last, unfinished or
// corrupt, and nextBytes's error stands.
func (r *Reader) resync() Record {
	if r.src != nil || int64(len(r.data)) < r.off+RecordHeaderSize {
		return nil
	}
	head := r.data[r.off:]
	size := r.ord.u32(head[4:])
	// Not how many bytes are present: a dump read again as it grows must
	// say the same of the same skip as one read whole.
	why := "runs past the end of the file"
	switch {
	case size < RecordHeaderSize:
		why = "is smaller than the record header"
	case uint64(size) <= uint64(len(head)):
		return nil // a whole record: nothing to skip
	}
	for p := RecordHeaderSize; p+RecordHeaderSize <= len(head); p++ {
		end, whole := r.recordAt(head, p, r.last)
		if !whole {
			continue
		}
		if end < len(head) {
			if next, whole := r.recordAt(head, end, r.ord.u64(head[p+8:])); !whole && next != len(head) {
				continue
			}
		}
		h := RecordHeader{Offset: r.off, Type: RecordType(r.ord.u32(head)), Size: uint32(p), Timestamp: r.ord.u64(head[8:])}
		skipped := &Invalid{RecordHeader: h, Body: head[RecordHeaderSize:p:p], Skipped: true,
			Err: &FormatError{File: r.name, Off: r.off, Msg: fmt.Sprintf("%s total_size %d %s, but a record follows at %#x: the %d bytes before it are skipped",
				h.Type, size, why, r.off+int64(p), p)}}
		r.off += int64(p)
		return skipped
	}
	return nil
}

// recordAt tells whether a record can start at b[p:]: one of a known id,
// at least its header long, timed no earlier than after minus resyncSlack;
// whole tells it fits b and its fields fit it, end is where it ends.
// Records that do not fit b are taken as they start, unchecked further.
func (r *Reader) recordAt(b []byte, p int, after uint64) (end int, whole bool) {
	h := b[p:]
	if len(h) < RecordHeaderSize {
		return 0, false
	}
	switch RecordType(r.ord.u32(h)) {
	case TypeCodeLoad, TypeCodeMove, TypeDebugInfo, TypeCodeClose, TypeUnwindingInfo, TypeStageMark, TypeInlineInfo, TypeMethodNames:
	default:
		return 0, false
	}
	size, ts := r.ord.u32(h[4:]), r.ord.u64(h[8:])
	if size < RecordHeaderSize || ts < after && after-ts > resyncSlack {
		return 0, false
	}
	if uint64(size) > uint64(len(h)) {
		return len(b), false
	}
	if r.tried += int64(size); r.tried > resyncBudget(len(r.data)) {
		return 0, false
	}
	if _, bad := r.decode(0, h[:size], true).(*Invalid); bad {
		return 0, false
	}
	return p + int(size), true
}

// resyncBudget bounds the bytes of the records resync decodes, over all the
// corrupt records of an input of size bytes. Input made for it could make
// resync decode, at each of many places, a record reaching far beyond the
// next: quadratic work. A real dump's resyncs decode the records they find
// and a few places that look like records, far less; past the budget, the
// corrupt record ends reading, as it did before resync.
func resyncBudget(size int) int64 { return 16*int64(size) + 1<<20 }

// nextBytes returns the next whole record, header included, and advances.
func (r *Reader) nextBytes() ([]byte, error) {
	var b []byte
	if r.src == nil {
		head := r.data[r.off:]
		if len(head) == 0 {
			return nil, io.EOF
		}
		r.touchAhead()
		var err error
		if b, err = r.split(head, true); err != nil {
			return nil, err
		}
	} else {
		head, err := r.src.Peek(RecordHeaderSize)
		if len(head) == 0 {
			if err == nil || err == io.EOF {
				return nil, io.EOF
			}
			return nil, err
		}
		if len(head) < RecordHeaderSize {
			return nil, &TruncatedError{Off: r.off, Want: RecordHeaderSize, Have: int64(len(head))}
		}
		size := r.ord.u32(head[4:])
		if size < RecordHeaderSize {
			return nil, r.tooSmall(size)
		}
		if b, err = readRecord(r.src, int(size)); err != nil {
			if err == io.ErrUnexpectedEOF || err == io.EOF {
				return nil, r.cutShort(b)
			}
			return nil, err
		}
	}
	r.off += int64(len(b))
	if r.readTo != nil {
		r.readTo(int(r.off))
	}
	return b, nil
}

// split returns the record at the start of head, the input from the next
// record on: all of what is left when all is set, else the start of it, and
// then a record running past head gives nil and no error (more is needed).
func (r *Reader) split(head []byte, all bool) ([]byte, error) {
	if len(head) < RecordHeaderSize {
		if !all {
			return nil, nil
		}
		return nil, &TruncatedError{Off: r.off, Want: RecordHeaderSize, Have: int64(len(head))}
	}
	size := r.ord.u32(head[4:])
	if size < RecordHeaderSize {
		return nil, r.tooSmall(size)
	}
	if uint64(size) > uint64(len(head)) {
		if !all {
			return nil, nil
		}
		return nil, r.cutShort(head)
	}
	return head[:size:size], nil
}

func (r *Reader) tooSmall(size uint32) error {
	return &FormatError{Off: r.off, Msg: fmt.Sprintf("record total_size %d is smaller than the record header", size)}
}

// readAhead is how far past the next record touchAhead loads the input.
//
// Where a record starts is known only once the size of the one before it has
// been loaded, so a walk from record to record waits for memory one record
// at a time, and records a few hundred bytes apart do not form a pattern the
// processor's prefetcher follows. Loads of every cache line ahead depend on
// nothing and overlap. Measured on a 388 MiB Erlang dump in the page cache: a
// bare walk of the record headers took 110 ms, 18 ms touching 4 KiB ahead
// (1 KiB: 23 ms; 64 KiB: 25 ms, lines evicted before use); Next through all
// of it, 100 ms against 122.
const readAhead = 4 << 10

// touchAhead loads one byte of each cache line up to readAhead past the
// next record, once.
func (r *Reader) touchAhead() {
	const line = 64
	lim := min(int(r.off)+readAhead, len(r.data))
	i, sink := max(r.touched, int(r.off)), r.sink
	for ; i < lim; i += line {
		sink += r.data[i]
	}
	r.touched, r.sink = i, sink
}

// readRecord reads n bytes into a buffer of their own. Beyond a size any real
// record has, it grows the buffer with the data actually read, so a corrupt
// total_size cannot make it allocate more than the input holds.
func readRecord(src io.Reader, n int) ([]byte, error) {
	const eager = 64 << 10
	if n <= eager {
		b := make([]byte, n)
		got, err := io.ReadFull(src, b)
		return b[:got], err
	}
	var buf bytes.Buffer
	got, err := buf.ReadFrom(io.LimitReader(src, int64(n)))
	if err == nil && got < int64(n) {
		err = io.ErrUnexpectedEOF
	}
	return buf.Bytes(), err
}

// cutShort decides what a record running past the end of the input means:
// the runtime's last, unfinished write (truncation), or a corrupt size in a
// record whose own fields say it must be shorter (corruption).
func (r *Reader) cutShort(present []byte) error {
	o := r.hdr.ByteOrder
	size := uint64(o.Uint32(present[4:]))
	want := expectedSize(RecordType(o.Uint32(present)), present, o)
	if want != 0 && (size < want || size >= want+8) {
		return &FormatError{Off: r.off, Msg: fmt.Sprintf("record total_size %d runs past the end of the file, but its fields need %d bytes", size, want)}
	}
	return &TruncatedError{Off: r.off, Want: size, Have: int64(len(present))}
}

// expectedSize is the size a record's fields imply, before padding to 8
// bytes, when the present bytes tell it; else 0.
func expectedSize(t RecordType, b []byte, o binary.ByteOrder) uint64 {
	switch t {
	case TypeCodeMove:
		return codeMoveSize
	case TypeCodeClose:
		return RecordHeaderSize
	case TypeCodeLoad:
		if len(b) < codeLoadFixed {
			return 0
		}
		nul := bytes.IndexByte(b[codeLoadFixed:], 0)
		if nul < 0 {
			return 0
		}
		return sat(uint64(codeLoadFixed+nul+1), o.Uint64(b[40:]))
	case TypeUnwindingInfo:
		if len(b) < unwindingFixed {
			return 0
		}
		return sat(unwindingFixed, o.Uint64(b[16:]))
	}
	return 0
}

func sat(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return ^uint64(0) - 8
	}
	return s
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

// order reads fields in the writer's byte order. Its methods are inlined,
// unlike calls through the binary.ByteOrder interface, of which decode makes
// a dozen a record: on an Erlang dump in the processor's cache, decode took
// 27 ns a record, 42 through the interface.
type order struct{ big bool }

func (o order) u32(b []byte) uint32 {
	if o.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

func (o order) u64(b []byte) uint64 {
	if o.big {
		return binary.BigEndian.Uint64(b)
	}
	return binary.LittleEndian.Uint64(b)
}

// decode turns a whole record into its typed form. b holds exactly the
// record's total_size bytes. reuse is ReuseRecord's.
func (r *Reader) decode(off int64, b []byte, reuse bool) Record {
	o := r.ord
	h := RecordHeader{Offset: off, Type: RecordType(o.u32(b)), Size: uint32(len(b)), Timestamp: o.u64(b[8:])}
	switch h.Type {
	case TypeCodeLoad:
		if len(b) < codeLoadFixed {
			return r.needs(h, b, codeLoadFixed)
		}
		rest := b[codeLoadFixed:]
		nul := bytes.IndexByte(rest, 0)
		if nul < 0 {
			return r.invalid(h, b, "name has no terminating NUL within the record")
		}
		code := rest[nul+1:]
		size := o.u64(b[40:])
		if size > uint64(len(code)) {
			return r.invalid(h, b, "code_size %d exceeds the %d bytes left in the record", size, len(code))
		}
		// Field by field: a composite literal is built on the stack and
		// copied 16 bytes at a time, loads that straddle its 4-byte stores
		// and so wait for them (store forwarding fails). On an Erlang dump
		// in the cache, decode took 28 ns a record, 36 with the literal.
		rec := r.loads.new(reuse)
		rec.RecordHeader = h
		rec.Pid, rec.Tid = o.u32(b[16:]), o.u32(b[20:])
		rec.VMA, rec.CodeAddr, rec.CodeSize, rec.CodeIndex = o.u64(b[24:]), o.u64(b[32:]), size, o.u64(b[48:])
		rec.Name, rec.Code = aliasString(rest[:nul]), code[:size:size]
		return rec

	case TypeCodeMove:
		if len(b) < codeMoveSize {
			return r.needs(h, b, codeMoveSize)
		}
		return &CodeMove{RecordHeader: h,
			Pid: o.u32(b[16:]), Tid: o.u32(b[20:]),
			VMA: o.u64(b[24:]), OldCodeAddr: o.u64(b[32:]), NewCodeAddr: o.u64(b[40:]),
			CodeSize: o.u64(b[48:]), CodeIndex: o.u64(b[56:]),
		}

	case TypeDebugInfo:
		if len(b) < debugInfoFixed {
			return r.needs(h, b, debugInfoFixed)
		}
		n := o.u64(b[24:])
		entries := b[debugInfoFixed:]
		// Each entry takes at least its fixed part and a NUL.
		if n > uint64(len(entries)/(debugEntryFixed+1)) {
			return r.invalid(h, b, "nr_entry %d cannot fit in %d bytes", n, len(entries))
		}
		end := 0
		for i := range n {
			if len(entries)-end < debugEntryFixed+1 {
				return r.invalid(h, b, "entry %d of %d at offset %#x overflows the record", i, n, off+int64(debugInfoFixed+end))
			}
			nul := bytes.IndexByte(entries[end+debugEntryFixed:], 0)
			if nul < 0 {
				return r.invalid(h, b, "entry %d of %d at offset %#x: file name has no terminating NUL within the record", i, n, off+int64(debugInfoFixed+end))
			}
			end += debugEntryFixed + nul + 1
		}
		rec := r.debugs.new(reuse) // field by field, as CODE_LOAD
		rec.RecordHeader = h
		rec.CodeAddr, rec.NumEntries = o.u64(b[16:]), n
		rec.entries, rec.payload, rec.order = entries[:end:end], entries, r.hdr.ByteOrder
		return rec

	case TypeCodeClose:
		return &CodeClose{RecordHeader: h}

	case TypeUnwindingInfo:
		if len(b) < unwindingFixed {
			return r.needs(h, b, unwindingFixed)
		}
		size, hdrSize, mapped := o.u64(b[16:]), o.u64(b[24:]), o.u64(b[32:])
		data := b[unwindingFixed:]
		if size > uint64(len(data)) {
			return r.invalid(h, b, "unwind_data_size %d exceeds the %d bytes left in the record", size, len(data))
		}
		if hdrSize > size {
			return r.invalid(h, b, "eh_frame_hdr_size %d exceeds unwind_data_size %d", hdrSize, size)
		}
		split := size - hdrSize
		rec := r.unwinds.new(reuse)
		*rec = UnwindingInfo{RecordHeader: h, MappedSize: mapped, EHFrame: data[:split:split], EHFrameHdr: data[split:size:size]}
		return rec

	case TypeStageMark:
		if len(b) < stageMarkFixed {
			return r.needs(h, b, stageMarkFixed)
		}
		return decodeStageMark(h, b, r.hdr.ByteOrder, r.invalidFunc(h, b))

	case TypeInlineInfo:
		if len(b) < inlineInfoFixed {
			return r.needs(h, b, inlineInfoFixed)
		}
		return decodeInlineInfo(h, b, r.hdr.ByteOrder, r.invalidFunc(h, b))

	case TypeMethodNames:
		if len(b) < methodNamesFixed {
			return r.needs(h, b, methodNamesFixed)
		}
		return decodeMethodNames(h, b, r.hdr.ByteOrder, r.invalidFunc(h, b))
	}
	return &Unknown{RecordHeader: h, Body: b[RecordHeaderSize:]}
}

// invalid returns the record as *Invalid, its fields not fitting as format
// says. It is apart from decode, as are needs and invalidFunc, to keep the
// formatting's frame and arguments out of the path every record takes.
func (r *Reader) invalid(h RecordHeader, b []byte, format string, args ...any) Record {
	return &Invalid{RecordHeader: h, Body: b[RecordHeaderSize:], Err: &FormatError{File: r.name, Off: h.Offset, Msg: h.Type.String() + ": " + fmt.Sprintf(format, args...)}}
}

func (r *Reader) needs(h RecordHeader, b []byte, n int) Record {
	return r.invalid(h, b, "total_size %d cannot hold its %d bytes of fixed fields", len(b), n)
}

func (r *Reader) invalidFunc(h RecordHeader, b []byte) func(string, ...any) Record {
	return func(format string, args ...any) Record { return r.invalid(h, b, format, args...) }
}

// aliasString returns b as a string without copying; the Reader's contract
// (input unchanged while records are in use) makes that safe.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// StrideEntries returns the record's entries read as if every file name took
// nameLen bytes and its NUL, without their names; ok is false when
// NumEntries of them do not fit the record. node 20 writes some records so:
// each name, of the script's length, garbled in its first bytes (freed
// memory), sometimes with a NUL inside, which Entries then takes for its
// end, reading half the real entries and garbage between them (see
// CodeLoad.BadEntry).
func (d *DebugInfo) StrideEntries(nameLen int) (entries iter.Seq[DebugEntry], ok bool) {
	stride := uint64(debugEntryFixed + nameLen + 1)
	if nameLen < 0 || d.NumEntries > uint64(len(d.payload))/stride {
		return nil, false
	}
	return func(yield func(DebugEntry) bool) {
		b, o := d.payload, d.order
		for range d.NumEntries {
			if !yield(DebugEntry{Addr: o.Uint64(b), Line: o.Uint32(b[8:]), Discrim: o.Uint32(b[12:])}) {
				return
			}
			b = b[stride:]
		}
	}, true
}

// Entries returns the record's entries in file order. The reader has checked
// that all of them fit.
func (d *DebugInfo) Entries() iter.Seq[DebugEntry] {
	return func(yield func(DebugEntry) bool) {
		b, o := d.entries, d.order
		for len(b) > 0 {
			nul := bytes.IndexByte(b[debugEntryFixed:], 0)
			e := DebugEntry{Addr: o.Uint64(b), Line: o.Uint32(b[8:]), Discrim: o.Uint32(b[12:]), File: aliasString(b[debugEntryFixed : debugEntryFixed+nul])}
			if !yield(e) {
				return
			}
			b = b[debugEntryFixed+nul+1:]
		}
	}
}
