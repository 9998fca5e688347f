package jitdump

import (
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
)

// AppendHeader appends the file header h, widened with zeros to h.Size
// bytes when that is more than HeaderSize.
func AppendHeader(b []byte, h *Header) []byte {
	size := max(h.Size, HeaderSize)
	b, p := extend(b, int(size))
	o := h.ByteOrder
	o.PutUint32(p, Magic)
	o.PutUint32(p[4:], h.Version)
	o.PutUint32(p[8:], size)
	o.PutUint32(p[12:], h.ElfMach)
	o.PutUint32(p[16:], h.Pad1)
	o.PutUint32(p[20:], h.Pid)
	o.PutUint64(p[24:], h.Timestamp)
	o.PutUint64(p[32:], h.Flags)
	return b
}

// AppendRecord appends rec in byte order o. The record's Size is kept when it
// is at least what the fields need (so padding survives a round trip);
// otherwise the record is sized to its fields, padded to 8 bytes.
// Offset is ignored.
func AppendRecord(b []byte, o binary.ByteOrder, rec Record) ([]byte, error) {
	switch r := rec.(type) {
	case *CodeLoad:
		if uint64(len(r.Code)) != r.CodeSize {
			return b, fmt.Errorf("jitdump: CODE_LOAD %q: code_size %d but %d code bytes", r.Name, r.CodeSize, len(r.Code))
		}
		return appendCodeLoad(b, o, r), nil
	case *CodeMove:
		return appendCodeMove(b, o, r), nil
	case *DebugInfo:
		return appendDebugInfo(b, o, &r.RecordHeader, r.CodeAddr, r.Entries()), nil
	case *CodeClose:
		b, _ = beginRecord(b, o, &r.RecordHeader, TypeCodeClose, RecordHeaderSize)
		return b, nil
	case *UnwindingInfo:
		return appendUnwinding(b, o, r), nil
	case *StageMark:
		return appendStageMark(b, o, r), nil
	case *InlineInfo:
		return appendInlineInfo(b, o, r)
	case *MethodNames:
		return appendMethodNames(b, o, r)
	case *Unknown:
		return appendRaw(b, o, r.RecordHeader, r.Body), nil
	case *Invalid:
		return appendRaw(b, o, r.RecordHeader, r.Body), nil
	}
	return b, fmt.Errorf("jitdump: cannot encode %T", rec)
}

// appendRaw writes a record this package cannot interpret exactly as it
// was, without padding: its length may be its meaning.
func appendRaw(b []byte, o binary.ByteOrder, h RecordHeader, body []byte) []byte {
	h.Size = max(h.Size, uint32(RecordHeaderSize+len(body)))
	b, p := beginRecord(b, o, &h, h.Type, RecordHeaderSize+len(body))
	copy(p[RecordHeaderSize:], body)
	return b
}

func appendCodeLoad(b []byte, o binary.ByteOrder, r *CodeLoad) []byte {
	b, p := beginRecord(b, o, &r.RecordHeader, TypeCodeLoad, codeLoadFixed+len(r.Name)+1+len(r.Code))
	o.PutUint32(p[16:], r.Pid)
	o.PutUint32(p[20:], r.Tid)
	o.PutUint64(p[24:], r.VMA)
	o.PutUint64(p[32:], r.CodeAddr)
	o.PutUint64(p[40:], uint64(len(r.Code)))
	o.PutUint64(p[48:], r.CodeIndex)
	n := copy(p[codeLoadFixed:], r.Name)
	copy(p[codeLoadFixed+n+1:], r.Code)
	return b
}

func appendCodeMove(b []byte, o binary.ByteOrder, r *CodeMove) []byte {
	b, p := beginRecord(b, o, &r.RecordHeader, TypeCodeMove, codeMoveSize)
	o.PutUint32(p[16:], r.Pid)
	o.PutUint32(p[20:], r.Tid)
	o.PutUint64(p[24:], r.VMA)
	o.PutUint64(p[32:], r.OldCodeAddr)
	o.PutUint64(p[40:], r.NewCodeAddr)
	o.PutUint64(p[48:], r.CodeSize)
	o.PutUint64(p[56:], r.CodeIndex)
	return b
}

func appendUnwinding(b []byte, o binary.ByteOrder, r *UnwindingInfo) []byte {
	size := len(r.EHFrame) + len(r.EHFrameHdr)
	b, p := beginRecord(b, o, &r.RecordHeader, TypeUnwindingInfo, unwindingFixed+size)
	o.PutUint64(p[16:], uint64(size))
	o.PutUint64(p[24:], uint64(len(r.EHFrameHdr)))
	o.PutUint64(p[32:], r.MappedSize)
	n := copy(p[unwindingFixed:], r.EHFrame)
	copy(p[unwindingFixed+n:], r.EHFrameHdr)
	return b
}

// appendDebugInfo encodes a DEBUG_INFO record entry by entry, so that
// entries read in one byte order can be written in the other.
func appendDebugInfo(b []byte, o binary.ByteOrder, h *RecordHeader, codeAddr uint64, entries iter.Seq[DebugEntry]) []byte {
	need, n := debugInfoFixed, 0
	for e := range entries {
		need += debugEntryFixed + len(e.File) + 1
		n++
	}
	b, p := beginRecord(b, o, h, TypeDebugInfo, need)
	o.PutUint64(p[16:], codeAddr)
	o.PutUint64(p[24:], uint64(n))
	q := p[debugInfoFixed:]
	for e := range entries {
		o.PutUint64(q, e.Addr)
		o.PutUint32(q[8:], e.Line)
		o.PutUint32(q[12:], e.Discrim)
		n := copy(q[debugEntryFixed:], e.File)
		q = q[debugEntryFixed+n+1:]
	}
	return b
}

// beginRecord extends b by the record's size, zeroed, writes the record
// header and returns the record's bytes for the caller to fill.
func beginRecord(b []byte, o binary.ByteOrder, h *RecordHeader, t RecordType, need int) ([]byte, []byte) {
	size := int(h.Size)
	if size < need {
		size = (need + 7) &^ 7
	}
	b, p := extend(b, size)
	o.PutUint32(p, uint32(t))
	o.PutUint32(p[4:], uint32(size))
	o.PutUint64(p[8:], h.Timestamp)
	return b, p
}

func extend(b []byte, n int) ([]byte, []byte) {
	b = slices.Grow(b, n)
	p := b[len(b) : len(b)+n]
	clear(p)
	return b[:len(b)+n], p
}
