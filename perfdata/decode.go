package perfdata

import (
	"bytes"
	"fmt"
	"math/bits"
	"unsafe"
)

// Sizes of the fixed parts of records: header, then the fields before any
// string or trailer.
const (
	mmapFixed     = RecordHeaderSize + 32 // pid, tid, addr, len, pgoff
	mmap2Fixed    = RecordHeaderSize + 64 // ... maj, min, ino, ino_generation (or build-id), prot, flags
	commFixed     = RecordHeaderSize + 8  // pid, tid
	taskFixed     = RecordHeaderSize + 24 // pid, ppid, tid, ptid, time
	lostFixed     = RecordHeaderSize + 16 // id, lost
	throttleFixed = RecordHeaderSize + 24 // time, id, stream_id
	cpuWideFixed  = RecordHeaderSize + 8  // next_prev_pid, next_prev_tid
	timeConvFixed = RecordHeaderSize + 24 // time_shift, time_mult, time_zero
	timeConvExt   = timeConvFixed + 24    // time_cycles, time_mask, two flags, padding
)

// Decode decodes a record NextRaw returned, as Next would have.
func (r *Reader) Decode(rec RawRecord) Record {
	b := rec.Bytes
	h := RecordHeader{Offset: rec.Offset, Type: rec.Type(), Misc: rec.Misc(), Raw: b}
	if h.Type < TypeUserStart {
		h.Attr = r.attrOf(b)
	}
	reuse := r.ReuseRecord
	needs := func(n int) Record {
		return r.invalid(&h, "%d bytes cannot hold its fixed fields and sample_id (%d bytes)", len(b), n)
	}

	switch h.Type {
	case TypeSample:
		if h.Attr == nil {
			return r.invalid(&h, "no attr has the sample's event id")
		}
		s := r.samples.new(reuse)
		s.reset(h)
		if msg := r.decodeSample(s, b); msg != "" {
			return r.invalid(&h, "%s", msg)
		}
		return s

	case TypeMmap:
		body, id, ok := split(b, h.Attr, mmapFixed)
		if !ok {
			return needs(mmapFixed)
		}
		name, ok := cstring(body[mmapFixed:])
		if !ok {
			return r.invalid(&h, "file name has no terminating NUL")
		}
		m := r.mmaps.new(reuse)
		*m = Mmap{RecordHeader: h, Pid: le.Uint32(b[8:]), Tid: le.Uint32(b[12:]),
			Addr: le.Uint64(b[16:]), Len: le.Uint64(b[24:]), Pgoff: le.Uint64(b[32:]), Filename: name, Trailer: id}
		return m

	case TypeMmap2:
		body, id, ok := split(b, h.Attr, mmap2Fixed)
		if !ok {
			return needs(mmap2Fixed)
		}
		name, ok := cstring(body[mmap2Fixed:])
		if !ok {
			return r.invalid(&h, "file name has no terminating NUL")
		}
		m := r.mmap2s.new(reuse)
		*m = Mmap2{RecordHeader: h, Pid: le.Uint32(b[8:]), Tid: le.Uint32(b[12:]),
			Addr: le.Uint64(b[16:]), Len: le.Uint64(b[24:]), Pgoff: le.Uint64(b[32:]),
			Prot: le.Uint32(b[64:]), Flags: le.Uint32(b[68:]), Filename: name, Trailer: id}
		if h.Misc&MiscMmapBuildID != 0 {
			n := int(b[40])
			if n > buildIDMax {
				return r.invalid(&h, "build-id size %d exceeds %d", n, buildIDMax)
			}
			m.BuildID = b[44 : 44+n : 44+n]
		} else {
			m.Maj, m.Min, m.Ino, m.InoGeneration = le.Uint32(b[40:]), le.Uint32(b[44:]), le.Uint64(b[48:]), le.Uint64(b[56:])
		}
		return m

	case TypeComm:
		body, id, ok := split(b, h.Attr, commFixed)
		if !ok {
			return needs(commFixed)
		}
		name, ok := cstring(body[commFixed:])
		if !ok {
			return r.invalid(&h, "comm has no terminating NUL")
		}
		c := r.comms.new(reuse)
		*c = Comm{RecordHeader: h, Pid: le.Uint32(b[8:]), Tid: le.Uint32(b[12:]), Comm: name, Trailer: id}
		return c

	case TypeFork, TypeExit:
		_, id, ok := split(b, h.Attr, taskFixed)
		if !ok {
			return needs(taskFixed)
		}
		t := r.tasks.new(reuse)
		*t = Task{RecordHeader: h, Pid: le.Uint32(b[8:]), PPid: le.Uint32(b[12:]), Tid: le.Uint32(b[16:]), PTid: le.Uint32(b[20:]),
			Time: le.Uint64(b[24:]), Trailer: id}
		return t

	case TypeLost:
		_, id, ok := split(b, h.Attr, lostFixed)
		if !ok {
			return needs(lostFixed)
		}
		return &Lost{RecordHeader: h, ID: le.Uint64(b[8:]), Lost: le.Uint64(b[16:]), Trailer: id}

	case TypeThrottle, TypeUnthrottle:
		_, id, ok := split(b, h.Attr, throttleFixed)
		if !ok {
			return needs(throttleFixed)
		}
		return &Throttle{RecordHeader: h, Time: le.Uint64(b[8:]), ID: le.Uint64(b[16:]), StreamID: le.Uint64(b[24:]), Trailer: id}

	case TypeSwitch:
		_, id, ok := split(b, h.Attr, RecordHeaderSize)
		if !ok {
			return needs(RecordHeaderSize)
		}
		sw := r.switches.new(reuse)
		*sw = Switch{RecordHeader: h, Trailer: id}
		return sw

	case TypeSwitchCPUWide:
		_, id, ok := split(b, h.Attr, cpuWideFixed)
		if !ok {
			return needs(cpuWideFixed)
		}
		sw := r.switches.new(reuse)
		*sw = Switch{RecordHeader: h, NextPrevPid: le.Uint32(b[8:]), NextPrevTid: le.Uint32(b[12:]), Trailer: id}
		return sw

	case TypeFinishedRound:
		return &FinishedRound{RecordHeader: h}

	case TypeTimeConv:
		if len(b) < timeConvFixed {
			return needs(timeConvFixed)
		}
		t := &TimeConv{RecordHeader: h, TimeShift: le.Uint64(b[8:]), TimeMult: le.Uint64(b[16:]), TimeZero: le.Uint64(b[24:])}
		if len(b) >= timeConvExt {
			t.Extended = true
			t.TimeCycles, t.TimeMask = le.Uint64(b[32:]), le.Uint64(b[40:])
			t.CapUserTimeZero, t.CapUserTimeShort = b[48] != 0, b[49] != 0
		}
		return t

	case TypeHeaderAttr:
		for _, a := range r.attrs {
			if a.offset == h.Offset {
				return &AttrRecord{RecordHeader: h, Attr: a}
			}
		}
		a, msg := decodeAttrRecord(b)
		if msg == "" {
			msg = r.checkAttr(a)
		}
		if msg != "" {
			return r.invalid(&h, "%s", msg)
		}
		return &AttrRecord{RecordHeader: h, Attr: a}

	case TypeHeaderBuildID:
		e, msg := decodeBuildID(b)
		if msg != "" {
			return r.invalid(&h, "%s", msg)
		}
		return &BuildIDRecord{RecordHeader: h, BuildID: e}

	case TypeHeaderFeature:
		if len(b) < featureFixed {
			return needs(featureFixed)
		}
		return &FeatureRecord{RecordHeader: h, Feature: Feature{ID: FeatureID(le.Uint64(b[8:])), Offset: h.Offset + featureFixed, Data: b[featureFixed:]}}
	}
	u := r.unknowns.new(reuse)
	*u = Unknown{RecordHeader: h}
	return u
}

func (r *Reader) invalid(h *RecordHeader, format string, args ...any) Record {
	return &Invalid{RecordHeader: *h, Err: &FormatError{File: r.name, Off: h.Offset, Msg: h.Type.String() + ": " + fmt.Sprintf(format, args...)}}
}

// split returns a kernel record without its sample_id trailer, and the
// trailer decoded, when the record's attr says it has one; ok is false
// when the record cannot hold fixed bytes of fields and the trailer. Like
// perf, it takes the trailer from the record's end.
func split(b []byte, a *Attr, fixed int) (body []byte, id Trailer, ok bool) {
	n := 0
	if a != nil && a.SampleIDAll() {
		n = 8 * bits.OnesCount64(uint64(a.SampleType&sampleIDBits))
	}
	if len(b) < fixed+n {
		return nil, id, false
	}
	if n > 0 {
		st := a.SampleType
		c := cursor{b: b[len(b)-n:]}
		if st&SampleTID != 0 {
			id.Pid, id.Tid = c.u32(), c.u32()
		}
		if st&SampleTime != 0 {
			id.Time = c.u64()
		}
		if st&SampleID != 0 {
			id.ID = c.u64()
		}
		if st&SampleStreamID != 0 {
			id.StreamID = c.u64()
		}
		if st&SampleCPU != 0 {
			id.CPU, _ = c.u32(), c.u32()
		}
		if st&SampleIdentifier != 0 {
			id.ID = c.u64()
		}
	}
	return b[:len(b)-n], id, true
}

// cursor reads fields in order; reading past the end yields zeros and
// marks it short, so a decoder checks once at the end.
type cursor struct {
	b     []byte
	short bool
}

func (c *cursor) u64() uint64 {
	if len(c.b) < 8 {
		c.b, c.short = nil, true
		return 0
	}
	v := le.Uint64(c.b)
	c.b = c.b[8:]
	return v
}

func (c *cursor) u32() uint32 {
	if len(c.b) < 4 {
		c.b, c.short = nil, true
		return 0
	}
	v := le.Uint32(c.b)
	c.b = c.b[4:]
	return v
}

// decodeSample decodes the fields of s's attr's sample_type in the order
// perf_event.h gives, through the user stack; it says why they do not fit,
// or returns "".
func (r *Reader) decodeSample(s *Sample, b []byte) string {
	st := s.Attr.SampleType
	c := cursor{b: b[RecordHeaderSize:]}
	if st&SampleIdentifier != 0 {
		s.ID = c.u64()
	}
	if st&SampleIP != 0 {
		s.IP = c.u64()
	}
	if st&SampleTID != 0 {
		s.Pid, s.Tid = c.u32(), c.u32()
	}
	if st&SampleTime != 0 {
		s.Time = c.u64()
	}
	if st&SampleAddr != 0 {
		s.Addr = c.u64()
	}
	if st&SampleID != 0 {
		s.ID = c.u64()
	}
	if st&SampleStreamID != 0 {
		s.StreamID = c.u64()
	}
	if st&SampleCPU != 0 {
		s.CPU, _ = c.u32(), c.u32()
	}
	if st&SamplePeriod != 0 {
		s.Period = c.u64()
	}
	if st&SampleRead != 0 && !r.decodeRead(&s.Read, &c, s.Attr.ReadFormat) {
		return r.shortSample(s, b)
	}
	if st&SampleCallchain != 0 {
		nr := c.u64()
		if c.short || nr > uint64(len(c.b)/8) {
			return r.shortSample(s, b)
		}
		s.Callchain = r.u64s.many(int(nr), r.ReuseRecord)
		for i := range s.Callchain {
			s.Callchain[i] = le.Uint64(c.b[8*i:])
		}
		c.b = c.b[8*nr:]
	}
	// Samples without these fields pay one test for them.
	if st&(SampleRaw|SampleBranchStack|SampleRegsUser|SampleStackUser) != 0 {
		if msg := r.decodeSampleTail(s, &c); msg != "" {
			return msg
		}
	}
	if c.short {
		return r.shortSample(s, b)
	}
	s.Rest = c.b
	return ""
}

// reset makes s an empty sample of header h, as *s = Sample{RecordHeader:
// h} would, field by field: clearing the whole struct, most of it fields
// that few samples have, made decoding a recording with ReuseRecord 5%
// slower. TestSampleReset checks that no field is left out.
func (s *Sample) reset(h RecordHeader) {
	s.RecordHeader = h
	s.IP, s.Pid, s.Tid, s.Time, s.Addr, s.ID, s.StreamID, s.CPU, s.Period = 0, 0, 0, 0, 0, 0, 0, 0, 0
	s.Read, s.Callchain, s.Rest = ReadValues{}, nil, nil
	if s.RawData != nil || s.Branches != nil || s.RegsUser != nil || s.StackUser != nil || s.BranchHWIndex|s.RegsABI|s.StackUserSize != 0 {
		s.RawData, s.BranchHWIndex, s.Branches, s.RegsABI, s.RegsUser, s.StackUserSize, s.StackUser = nil, 0, nil, 0, nil, 0, nil
	}
}

func (r *Reader) shortSample(s *Sample, b []byte) string {
	return fmt.Sprintf("the fields of sample_type %#x and read_format %#x need more than its %d bytes", uint64(s.Attr.SampleType), uint64(s.Attr.ReadFormat), len(b))
}

// decodeSampleTail decodes RAW, BRANCH_STACK, REGS_USER and STACK_USER,
// each size and count bounded by the bytes left.
func (r *Reader) decodeSampleTail(s *Sample, c *cursor) string {
	a := s.Attr
	st := a.SampleType
	if st&SampleRaw != 0 {
		n := c.u32()
		if c.short || uint64(n) > uint64(len(c.b)) {
			return fmt.Sprintf("RAW of %d bytes overflows the %d left in the sample", n, len(c.b))
		}
		s.RawData, c.b = c.b[:n:n], c.b[n:]
	}
	if st&SampleBranchStack != 0 {
		nr := c.u64()
		if a.BranchSampleType&BranchHWIndex != 0 {
			s.BranchHWIndex = c.u64()
		}
		if c.short || nr > uint64(len(c.b)/24) {
			return fmt.Sprintf("BRANCH_STACK of %d entries overflows the %d bytes left in the sample", nr, len(c.b))
		}
		s.Branches = r.branches.many(int(nr), r.ReuseRecord)
		for i := range s.Branches {
			e := c.b[24*i:]
			s.Branches[i] = Branch{From: le.Uint64(e), To: le.Uint64(e[8:]), Flags: le.Uint64(e[16:])}
		}
		c.b = c.b[24*nr:]
	}
	if st&SampleRegsUser != 0 {
		// The kernel writes no registers after an ABI of none.
		if s.RegsABI = c.u64(); s.RegsABI != RegsABINone {
			n := bits.OnesCount64(a.SampleRegsUser)
			if c.short || n > len(c.b)/8 {
				return fmt.Sprintf("REGS_USER: %d registers (mask %#x) overflow the %d bytes left in the sample", n, a.SampleRegsUser, len(c.b))
			}
			s.RegsUser = r.regs.many(n, r.ReuseRecord)
			for i := range s.RegsUser {
				s.RegsUser[i] = le.Uint64(c.b[8*i:])
			}
			c.b = c.b[8*n:]
		}
	}
	if st&SampleStackUser != 0 {
		// A size of 0 (no user stack) has no data and no dyn_size.
		if s.StackUserSize = c.u64(); s.StackUserSize != 0 {
			size := s.StackUserSize
			if c.short || size > uint64(len(c.b)) || uint64(len(c.b))-size < 8 {
				return fmt.Sprintf("STACK_USER: a copy of %d bytes and its dyn_size overflow the %d bytes left in the sample", size, len(c.b))
			}
			dyn := le.Uint64(c.b[size:])
			if dyn > size {
				return fmt.Sprintf("STACK_USER: dyn_size %d exceeds the copy's %d bytes", dyn, size)
			}
			s.StackUser, c.b = c.b[:dyn:size], c.b[size+8:]
		}
	}
	return ""
}

// decodeRead decodes a READ value as read_format lays it out: one value
// and its times, or (FormatGroup) the times and a value per member.
func (r *Reader) decodeRead(v *ReadValues, c *cursor, rf ReadFormat) bool {
	times := func() {
		if rf&FormatTotalTimeEnabled != 0 {
			v.TimeEnabled = c.u64()
		}
		if rf&FormatTotalTimeRunning != 0 {
			v.TimeRunning = c.u64()
		}
	}
	idLost := func(val *ReadValue) {
		if rf&FormatID != 0 {
			val.ID = c.u64()
		}
		if rf&FormatLost != 0 {
			val.Lost = c.u64()
		}
	}
	if rf&FormatGroup == 0 {
		v.Values = r.reads.many(1, r.ReuseRecord)
		v.Values[0].Value = c.u64()
		times()
		idLost(&v.Values[0])
		return !c.short
	}
	nr := c.u64()
	times()
	per := 1 + bits.OnesCount64(uint64(rf&(FormatID|FormatLost)))
	if c.short || nr > uint64(len(c.b)/(8*per)) {
		return false
	}
	v.Values = r.reads.many(int(nr), r.ReuseRecord)
	for i := range v.Values {
		v.Values[i].Value = c.u64()
		idLost(&v.Values[i])
	}
	return !c.short
}

// attrField is one field of perf_event_attr: where it is, how wide, and
// which field of Attr holds it. The table serves decoding and encoding
// alike, so the two cannot disagree.
type attrField struct {
	off, width int
	get        func(*Attr) uint64
	set        func(*Attr, uint64)
}

var attrFields = [...]attrField{
	{0, 4, func(a *Attr) uint64 { return uint64(a.Type) }, func(a *Attr, v uint64) { a.Type = uint32(v) }},
	{8, 8, func(a *Attr) uint64 { return a.Config }, func(a *Attr, v uint64) { a.Config = v }},
	{16, 8, func(a *Attr) uint64 { return a.SamplePeriod }, func(a *Attr, v uint64) { a.SamplePeriod = v }},
	{24, 8, func(a *Attr) uint64 { return uint64(a.SampleType) }, func(a *Attr, v uint64) { a.SampleType = SampleType(v) }},
	{32, 8, func(a *Attr) uint64 { return uint64(a.ReadFormat) }, func(a *Attr, v uint64) { a.ReadFormat = ReadFormat(v) }},
	{40, 8, func(a *Attr) uint64 { return uint64(a.Flags) }, func(a *Attr, v uint64) { a.Flags = AttrFlags(v) }},
	{48, 4, func(a *Attr) uint64 { return uint64(a.WakeupEvents) }, func(a *Attr, v uint64) { a.WakeupEvents = uint32(v) }},
	{52, 4, func(a *Attr) uint64 { return uint64(a.BPType) }, func(a *Attr, v uint64) { a.BPType = uint32(v) }},
	{56, 8, func(a *Attr) uint64 { return a.Config1 }, func(a *Attr, v uint64) { a.Config1 = v }},
	{64, 8, func(a *Attr) uint64 { return a.Config2 }, func(a *Attr, v uint64) { a.Config2 = v }},
	{72, 8, func(a *Attr) uint64 { return a.BranchSampleType }, func(a *Attr, v uint64) { a.BranchSampleType = v }},
	{80, 8, func(a *Attr) uint64 { return a.SampleRegsUser }, func(a *Attr, v uint64) { a.SampleRegsUser = v }},
	{88, 4, func(a *Attr) uint64 { return uint64(a.SampleStackUser) }, func(a *Attr, v uint64) { a.SampleStackUser = uint32(v) }},
	{92, 4, func(a *Attr) uint64 { return uint64(uint32(a.ClockID)) }, func(a *Attr, v uint64) { a.ClockID = int32(uint32(v)) }},
	{96, 8, func(a *Attr) uint64 { return a.SampleRegsIntr }, func(a *Attr, v uint64) { a.SampleRegsIntr = v }},
	{104, 4, func(a *Attr) uint64 { return uint64(a.AuxWatermark) }, func(a *Attr, v uint64) { a.AuxWatermark = uint32(v) }},
	{108, 2, func(a *Attr) uint64 { return uint64(a.SampleMaxStack) }, func(a *Attr, v uint64) { a.SampleMaxStack = uint16(v) }},
	{112, 4, func(a *Attr) uint64 { return uint64(a.AuxSampleSize) }, func(a *Attr, v uint64) { a.AuxSampleSize = uint32(v) }},
	{120, 8, func(a *Attr) uint64 { return a.SigData }, func(a *Attr, v uint64) { a.SigData = v }},
	{128, 8, func(a *Attr) uint64 { return a.Config3 }, func(a *Attr, v uint64) { a.Config3 = v }},
}

// decodeAttr decodes a perf_event_attr of len(b) bytes; fields beyond them
// (an attr from an older perf) are zero.
func decodeAttr(b []byte) (*Attr, string) {
	if len(b) < attrSizeVer0 {
		return nil, fmt.Sprintf("attr of %d bytes is shorter than the first perf_event_attr's %d", len(b), attrSizeVer0)
	}
	a := &Attr{Raw: b}
	for _, f := range attrFields {
		if f.off+f.width > len(b) {
			continue
		}
		var v uint64
		switch f.width {
		case 2:
			v = uint64(le.Uint16(b[f.off:]))
		case 4:
			v = uint64(le.Uint32(b[f.off:]))
		default:
			v = le.Uint64(b[f.off:])
		}
		f.set(a, v)
	}
	return a, ""
}

// decodeAttrRecord decodes an ATTR record: the attr, its size field saying
// how long, then its ids.
func decodeAttrRecord(b []byte) (*Attr, string) {
	body := b[RecordHeaderSize:]
	if len(body) < attrSizeVer0 {
		return nil, fmt.Sprintf("%d bytes cannot hold an attr", len(b))
	}
	size := le.Uint32(body[4:])
	if size < attrSizeVer0 || uint64(size) > uint64(len(body)) || (len(body)-int(size))%8 != 0 {
		return nil, fmt.Sprintf("attr size %d does not leave whole ids in the record's %d bytes", size, len(b))
	}
	a, msg := decodeAttr(body[:size:size])
	if msg != "" {
		return nil, msg
	}
	ids := body[size:]
	a.IDs = make([]uint64, len(ids)/8)
	for i := range a.IDs {
		a.IDs[i] = le.Uint64(ids[8*i:])
	}
	return a, ""
}

// decodeBuildID decodes one build-id entry, exactly its size bytes.
func decodeBuildID(b []byte) (BuildID, string) {
	if len(b) <= buildIDFixed {
		return BuildID{}, fmt.Sprintf("build-id entry of %d bytes cannot hold its %d fixed bytes and a file name", len(b), buildIDFixed)
	}
	e := BuildID{Misc: le.Uint16(b[4:]), Pid: int32(le.Uint32(b[8:]))}
	n := buildIDMax
	if e.Misc&MiscBuildIDSize != 0 {
		if n = int(b[32]); n > buildIDMax {
			return BuildID{}, fmt.Sprintf("build-id size %d exceeds %d", n, buildIDMax)
		}
	}
	e.ID = b[12 : 12+n : 12+n]
	name, ok := cstring(b[buildIDFixed:])
	if !ok {
		return BuildID{}, "build-id file name has no terminating NUL"
	}
	e.Filename = name
	return e, ""
}

// cstring returns the NUL-terminated string at the start of b.
func cstring(b []byte) (string, bool) {
	nul := bytes.IndexByte(b, 0)
	if nul < 0 {
		return "", false
	}
	return aliasString(b[:nul]), true
}

// aliasString returns b as a string without copying. Record bytes are
// never written once read (the Reader's contract for in-place input, and
// stream chunks are never reused), so that is safe.
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
