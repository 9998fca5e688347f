package jitdump

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// TypeInlineInfo is jitprof's extension record for inlined code, outside the
// spec: one instance of a method inlined into a function that a CODE_LOAD
// earlier in the file describes. jitprof's Intel JIT API collector writes it
// for the API's METHOD_INLINE_LOAD_FINISHED events; perf skips it, with a
// warning, as any id it does not know. The id has the ASCII of "JP" in its
// high half, far from the spec's ids.
//
// Layout after the record header:
//
//	u64 code_index   the CODE_LOAD whose code holds the inlined code
//	u64 code_addr    start of the inlined code, at the load's address
//	u64 code_size
//	u32 method_id    the runtime's id of this inline instance
//	u32 parent_id    its parent: another instance's method_id, or root_id
//	u32 root_id      the runtime's id of the function of code_index
//	u32 nr_entry
//	nr_entry × { u64 addr; u32 line; u32 reserved }
//	                 each entry's line covers the code up to the next entry,
//	                 as in DEBUG_INFO
//	char name[]      NUL-terminated
//	char file[]      the source file of the lines, NUL-terminated; "" if unknown
//
// The instances of one function form a tree by parent_id; the code of
// siblings does not overlap, so an address has one chain of instances.
const TypeInlineInfo RecordType = 0x4A500001

const (
	inlineInfoFixed = RecordHeaderSize + 40
	inlineEntrySize = 16
)

// InlineInfo is one inlined method instance (see TypeInlineInfo).
type InlineInfo struct {
	RecordHeader
	CodeIndex          uint64
	CodeAddr, CodeSize uint64
	MethodID           uint32
	ParentID           uint32 // RootID when inlined straight into the function
	RootID             uint32
	Lines              []InlineLine // in file order
	Name               string
	File               string
}

// InlineLine maps the code from Addr on to a line of the instance's File.
type InlineLine struct {
	Addr uint64
	Line uint32
}

// Contains tells whether addr lies in the instance's code.
func (r *InlineInfo) Contains(addr uint64) bool {
	return addr >= r.CodeAddr && addr-r.CodeAddr < r.CodeSize
}

// LineAt returns the line of the instance's code at addr: that of the entry
// with the greatest address at or below it. ok is false when no entry is.
func (r *InlineInfo) LineAt(addr uint64) (line uint32, ok bool) {
	var best uint64
	for _, e := range r.Lines {
		if e.Addr <= addr && (!ok || e.Addr >= best) {
			best, line, ok = e.Addr, e.Line, true
		}
	}
	return line, ok
}

// decodeInlineInfo decodes a record that decode has checked holds its fixed fields.
func decodeInlineInfo(h RecordHeader, b []byte, o binary.ByteOrder, invalid func(string, ...any) Record) Record {
	rec := &InlineInfo{RecordHeader: h,
		CodeIndex: o.Uint64(b[16:]), CodeAddr: o.Uint64(b[24:]), CodeSize: o.Uint64(b[32:]),
		MethodID: o.Uint32(b[40:]), ParentID: o.Uint32(b[44:]), RootID: o.Uint32(b[48:]),
	}
	n := uint64(o.Uint32(b[52:]))
	rest := b[inlineInfoFixed:]
	if n > uint64(len(rest)/inlineEntrySize) {
		return invalid("nr_entry %d cannot fit in %d bytes", n, len(rest))
	}
	if n > 0 {
		rec.Lines = make([]InlineLine, n)
		for i := range rec.Lines {
			e := rest[i*inlineEntrySize:]
			rec.Lines[i] = InlineLine{Addr: o.Uint64(e), Line: o.Uint32(e[8:])}
		}
		rest = rest[n*inlineEntrySize:]
	}
	nul := bytes.IndexByte(rest, 0)
	if nul < 0 {
		return invalid("name has no terminating NUL within the record")
	}
	rec.Name = aliasString(rest[:nul])
	rest = rest[nul+1:]
	if nul = bytes.IndexByte(rest, 0); nul < 0 {
		return invalid("file name has no terminating NUL within the record")
	}
	rec.File = aliasString(rest[:nul])
	return rec
}

func appendInlineInfo(b []byte, o binary.ByteOrder, r *InlineInfo) ([]byte, error) {
	if uint64(len(r.Lines)) > 1<<32-1 {
		return b, fmt.Errorf("jitdump: %s %q: %d line entries do not fit nr_entry", TypeInlineInfo, r.Name, len(r.Lines))
	}
	b, p := beginRecord(b, o, &r.RecordHeader, TypeInlineInfo, inlineInfoFixed+inlineEntrySize*len(r.Lines)+len(r.Name)+1+len(r.File)+1)
	o.PutUint64(p[16:], r.CodeIndex)
	o.PutUint64(p[24:], r.CodeAddr)
	o.PutUint64(p[32:], r.CodeSize)
	o.PutUint32(p[40:], r.MethodID)
	o.PutUint32(p[44:], r.ParentID)
	o.PutUint32(p[48:], r.RootID)
	o.PutUint32(p[52:], uint32(len(r.Lines)))
	q := p[inlineInfoFixed:]
	for _, e := range r.Lines {
		o.PutUint64(q, e.Addr)
		o.PutUint32(q[8:], e.Line)
		q = q[inlineEntrySize:]
	}
	n := copy(q, r.Name)
	copy(q[n+1:], r.File)
	return b, nil
}
