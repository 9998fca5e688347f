package perfdata

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// AppendRecord appends rec's encoding to b, laid out as the kernel or perf
// writes that record: strings NUL-terminated and padded to 8 bytes, and, for
// a kernel record whose Attr has sample_id_all, the sample_id trailer built
// from its Trailer as Attr's sample_type says. A record with a nil Attr
// gets no trailer; a Sample needs its Attr. The type comes from rec's Go
// type, except for *Task, *Throttle and *Switch, whose Type must say which
// of two.
// *Unknown and *Invalid records are appended as their Raw bytes.
//
// A record decoded from perf's output encodes to its Raw bytes.
func AppendRecord(b []byte, rec Record) ([]byte, error) {
	h := rec.Header()
	start := len(b)
	header := func(t RecordType) {
		b = le.AppendUint32(b, uint32(t))
		b = le.AppendUint16(b, h.Misc)
		b = le.AppendUint16(b, 0) // the size, once known
	}
	fail := func(format string, args ...any) ([]byte, error) {
		return b[:start], fmt.Errorf("perfdata: encoding %s record: %s", h.Type, fmt.Sprintf(format, args...))
	}

	switch r := rec.(type) {
	case *Unknown, *Invalid:
		return append(b, h.Raw...), nil

	case *Mmap:
		header(TypeMmap)
		b = appendU32s(b, r.Pid, r.Tid)
		b = appendU64s(b, r.Addr, r.Len, r.Pgoff)
		b = appendString(b, r.Filename)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Mmap2:
		header(TypeMmap2)
		b = appendU32s(b, r.Pid, r.Tid)
		b = appendU64s(b, r.Addr, r.Len, r.Pgoff)
		if r.Misc&MiscMmapBuildID != 0 {
			if len(r.BuildID) > buildIDMax {
				return fail("build-id of %d bytes exceeds %d", len(r.BuildID), buildIDMax)
			}
			b = append(b, byte(len(r.BuildID)), 0, 0, 0)
			b = append(b, r.BuildID...)
			b = append(b, make([]byte, buildIDMax-len(r.BuildID))...)
		} else {
			b = appendU32s(b, r.Maj, r.Min)
			b = appendU64s(b, r.Ino, r.InoGeneration)
		}
		b = appendU32s(b, r.Prot, r.Flags)
		b = appendString(b, r.Filename)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Comm:
		header(TypeComm)
		b = appendU32s(b, r.Pid, r.Tid)
		b = appendString(b, r.Comm)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Task:
		if r.Type != TypeFork && r.Type != TypeExit {
			return fail("a Task is a FORK or an EXIT")
		}
		header(r.Type)
		b = appendU32s(b, r.Pid, r.PPid, r.Tid, r.PTid)
		b = le.AppendUint64(b, r.Time)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Lost:
		header(TypeLost)
		b = appendU64s(b, r.ID, r.Lost)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Throttle:
		if r.Type != TypeThrottle && r.Type != TypeUnthrottle {
			return fail("a Throttle is a THROTTLE or an UNTHROTTLE")
		}
		header(r.Type)
		b = appendU64s(b, r.Time, r.ID, r.StreamID)
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Switch:
		switch r.Type {
		case TypeSwitch:
			header(TypeSwitch)
		case TypeSwitchCPUWide:
			header(TypeSwitchCPUWide)
			b = appendU32s(b, r.NextPrevPid, r.NextPrevTid)
		default:
			return fail("a Switch is a SWITCH or a SWITCH_CPU_WIDE")
		}
		b = appendTrailer(b, r.Attr, &r.Trailer)

	case *Sample:
		if r.Attr == nil {
			return fail("a sample needs its Attr, whose sample_type lays it out")
		}
		header(TypeSample)
		var err error
		if b, err = appendSample(b, r); err != nil {
			return fail("%v", err)
		}

	case *FinishedRound:
		header(TypeFinishedRound)

	case *TimeConv:
		header(TypeTimeConv)
		b = appendU64s(b, r.TimeShift, r.TimeMult, r.TimeZero)
		if r.Extended {
			b = appendU64s(b, r.TimeCycles, r.TimeMask)
			b = append(b, boolByte(r.CapUserTimeZero), boolByte(r.CapUserTimeShort), 0, 0, 0, 0, 0, 0)
		}

	case *AttrRecord:
		header(TypeHeaderAttr)
		var err error
		if b, err = appendAttr(b, r.Attr, r.Attr.encodedLen()); err != nil {
			return fail("%v", err)
		}
		b = appendU64s(b, r.Attr.IDs...)

	case *BuildIDRecord:
		var err error
		if b, err = appendBuildID(b, TypeHeaderBuildID, &r.BuildID); err != nil {
			return fail("%v", err)
		}
		return b, nil

	case *FeatureRecord:
		header(TypeHeaderFeature)
		b = le.AppendUint64(b, uint64(r.Feature.ID))
		b = append(b, r.Feature.Data...)

	default:
		return fail("cannot encode a %T", rec)
	}

	size := len(b) - start
	if size > math.MaxUint16 {
		return fail("%d bytes exceed a record's 65535", size)
	}
	le.PutUint16(b[start+6:], uint16(size))
	return b, nil
}

func appendU32s(b []byte, vs ...uint32) []byte {
	for _, v := range vs {
		b = le.AppendUint32(b, v)
	}
	return b
}

func appendU64s(b []byte, vs ...uint64) []byte {
	for _, v := range vs {
		b = le.AppendUint64(b, v)
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// appendString appends s NUL-terminated and padded with NULs to 8 bytes, as
// the kernel writes names into records.
func appendString(b []byte, s string) []byte {
	b = append(b, s...)
	return append(b, make([]byte, 8-len(s)%8)...)
}

func appendTrailer(b []byte, a *Attr, id *Trailer) []byte {
	if a == nil || !a.SampleIDAll() {
		return b
	}
	st := a.SampleType
	if st&SampleTID != 0 {
		b = appendU32s(b, id.Pid, id.Tid)
	}
	if st&SampleTime != 0 {
		b = le.AppendUint64(b, id.Time)
	}
	if st&SampleID != 0 {
		b = le.AppendUint64(b, id.ID)
	}
	if st&SampleStreamID != 0 {
		b = le.AppendUint64(b, id.StreamID)
	}
	if st&SampleCPU != 0 {
		b = appendU32s(b, id.CPU, 0)
	}
	if st&SampleIdentifier != 0 {
		b = le.AppendUint64(b, id.ID)
	}
	return b
}

func appendSample(b []byte, s *Sample) ([]byte, error) {
	st := s.Attr.SampleType
	if st&SampleIdentifier != 0 {
		b = le.AppendUint64(b, s.ID)
	}
	if st&SampleIP != 0 {
		b = le.AppendUint64(b, s.IP)
	}
	if st&SampleTID != 0 {
		b = appendU32s(b, s.Pid, s.Tid)
	}
	if st&SampleTime != 0 {
		b = le.AppendUint64(b, s.Time)
	}
	if st&SampleAddr != 0 {
		b = le.AppendUint64(b, s.Addr)
	}
	if st&SampleID != 0 {
		b = le.AppendUint64(b, s.ID)
	}
	if st&SampleStreamID != 0 {
		b = le.AppendUint64(b, s.StreamID)
	}
	if st&SampleCPU != 0 {
		b = appendU32s(b, s.CPU, 0)
	}
	if st&SamplePeriod != 0 {
		b = le.AppendUint64(b, s.Period)
	}
	if st&SampleRead != 0 {
		rf, v := s.Attr.ReadFormat, &s.Read
		group := rf&FormatGroup != 0
		if !group && len(v.Values) != 1 {
			return b, fmt.Errorf("read_format %#x without FormatGroup needs exactly one value, not %d", uint64(rf), len(v.Values))
		}
		if group {
			b = le.AppendUint64(b, uint64(len(v.Values)))
		} else {
			b = le.AppendUint64(b, v.Values[0].Value)
		}
		if rf&FormatTotalTimeEnabled != 0 {
			b = le.AppendUint64(b, v.TimeEnabled)
		}
		if rf&FormatTotalTimeRunning != 0 {
			b = le.AppendUint64(b, v.TimeRunning)
		}
		for _, val := range v.Values {
			if group {
				b = le.AppendUint64(b, val.Value)
			}
			if rf&FormatID != 0 {
				b = le.AppendUint64(b, val.ID)
			}
			if rf&FormatLost != 0 {
				b = le.AppendUint64(b, val.Lost)
			}
		}
	}
	if st&SampleCallchain != 0 {
		b = le.AppendUint64(b, uint64(len(s.Callchain)))
		b = appendU64s(b, s.Callchain...)
	}
	if st&(SampleRaw|SampleBranchStack|SampleRegsUser|SampleStackUser) != 0 {
		var err error
		if b, err = appendSampleTail(b, s); err != nil {
			return b, err
		}
	}
	return append(b, s.Rest...), nil
}

// appendSampleTail appends RAW, BRANCH_STACK, REGS_USER and STACK_USER, as
// the kernel lays them out.
func appendSampleTail(b []byte, s *Sample) ([]byte, error) {
	a := s.Attr
	st := a.SampleType
	if st&SampleRaw != 0 {
		if (4+len(s.RawData))%8 != 0 {
			return b, fmt.Errorf("RAW of %d bytes: with its 4-byte size it must fill whole 8-byte words, as the kernel pads it", len(s.RawData))
		}
		b = le.AppendUint32(b, uint32(len(s.RawData)))
		b = append(b, s.RawData...)
	}
	if st&SampleBranchStack != 0 {
		b = le.AppendUint64(b, uint64(len(s.Branches)))
		if a.BranchSampleType&BranchHWIndex != 0 {
			b = le.AppendUint64(b, s.BranchHWIndex)
		}
		for _, e := range s.Branches {
			b = appendU64s(b, e.From, e.To, e.Flags)
		}
	}
	if st&SampleRegsUser != 0 {
		want := bits.OnesCount64(a.SampleRegsUser)
		if s.RegsABI == RegsABINone {
			want = 0
		}
		if len(s.RegsUser) != want {
			return b, fmt.Errorf("REGS_USER of ABI %d and mask %#x holds %d registers, not %d", s.RegsABI, a.SampleRegsUser, want, len(s.RegsUser))
		}
		b = le.AppendUint64(b, s.RegsABI)
		b = appendU64s(b, s.RegsUser...)
	}
	if st&SampleStackUser != 0 {
		size, dyn := s.StackUserSize, uint64(len(s.StackUser))
		if size%8 != 0 || dyn > size {
			return b, fmt.Errorf("STACK_USER: %d bytes of stack in a copy of %d: the copy is a multiple of 8 bytes that holds them", dyn, size)
		}
		b = le.AppendUint64(b, size)
		if size > 0 {
			if uint64(cap(s.StackUser)) >= size {
				b = append(b, s.StackUser[:size]...)
			} else {
				b = append(b, s.StackUser...)
				b = append(b, make([]byte, size-dyn)...)
			}
			b = le.AppendUint64(b, dyn)
		}
	}
	return b, nil
}

// encodedLen is the size an attr is written with: as read, or, for a new
// one, the layout of perf 6.1, which refuses longer attrs (so Config3 does
// not fit).
func (a *Attr) encodedLen() int {
	if a.Raw != nil {
		return len(a.Raw)
	}
	return attrSizeVer7
}

// appendAttr appends a's perf_event_attr, size bytes long: its Raw bytes,
// padded with zeros, with every field written over them.
func appendAttr(b []byte, a *Attr, size int) ([]byte, error) {
	start := len(b)
	b = append(b, a.Raw...)
	b = append(b, make([]byte, size-len(a.Raw))...)
	f := b[start:]
	le.PutUint32(f[4:], uint32(size))
	for _, fd := range attrFields {
		v := fd.get(a)
		if fd.off+fd.width > size {
			if v != 0 {
				return b[:start], fmt.Errorf("attr field at offset %d does not fit in the attr's %d bytes", fd.off, size)
			}
			continue
		}
		switch fd.width {
		case 2:
			le.PutUint16(f[fd.off:], uint16(v))
		case 4:
			le.PutUint32(f[fd.off:], uint32(v))
		default:
			le.PutUint64(f[fd.off:], v)
		}
	}
	return b, nil
}

// appendBuildID appends a build-id entry as perf's write_buildid lays it
// out: the file name NUL-terminated and padded to 64 bytes.
func appendBuildID(b []byte, t RecordType, e *BuildID) ([]byte, error) {
	if len(e.ID) > buildIDMax {
		return b, fmt.Errorf("build-id of %d bytes exceeds %d", len(e.ID), buildIDMax)
	}
	name := (len(e.Filename) + nameAlign) &^ (nameAlign - 1)
	size := buildIDFixed + name
	if size > math.MaxUint16 {
		return b, fmt.Errorf("build-id entry for a %d-byte file name exceeds 65535 bytes", len(e.Filename))
	}
	b = le.AppendUint32(b, uint32(t))
	b = le.AppendUint16(b, e.Misc)
	b = le.AppendUint16(b, uint16(size))
	b = le.AppendUint32(b, uint32(e.Pid))
	b = append(b, e.ID...)
	b = append(b, make([]byte, buildIDMax-len(e.ID))...)
	var n byte
	if e.Misc&MiscBuildIDSize != 0 {
		n = byte(len(e.ID))
	}
	b = append(b, n, 0, 0, 0)
	b = append(b, e.Filename...)
	return append(b, make([]byte, name-len(e.Filename))...), nil
}

// featureBitmap returns the header bitmap with a bit per feature.
func featureBitmap(fs []Feature) (m [4]uint64) {
	for _, f := range fs {
		m[f.ID/64] |= 1 << (f.ID % 64)
	}
	return m
}

// sortedFeatures returns fs in bit order, as the section table lists them,
// or an error for a bit that does not exist or appears twice.
func sortedFeatures(fs []Feature) ([]Feature, error) {
	fs = slices.SortedStableFunc(slices.Values(fs), func(a, b Feature) int { return int(a.ID) - int(b.ID) })
	for i, f := range fs {
		if f.ID >= featureBits {
			return nil, fmt.Errorf("perfdata: feature %d: the bitmap has %d bits", f.ID, featureBits)
		}
		if i > 0 && fs[i-1].ID == f.ID {
			return nil, fmt.Errorf("perfdata: feature %d given twice", f.ID)
		}
	}
	return fs, nil
}
