// Package jitdump reads, writes and checks jitdump files, the format in which
// just-in-time compilers describe the code they generate (address, size,
// name, machine code, source lines, unwinding data) for profilers such as
// Linux perf and jitprof.
//
// The format is specified in tools/perf/Documentation/jitdump-specification.txt
// of the Linux sources (revision 2). This package accepts what real runtimes
// write where it differs from that text: header version 1 with revision-2
// records, headers larger than 40 bytes, records padded to 8 bytes, DEBUG_INFO
// entries outside their function, and a last record cut short because the
// runtime is still writing.
//
// The codec is written by hand: no library reads or writes jitdump.
package jitdump

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Magic is the header's first field, "JiTD" when read in the writer's byte order.
const Magic = 0x4A695444

// Sizes of the fixed parts of the format, in bytes.
const (
	HeaderSize       = 40 // the file header as the spec defines it; total_size may be larger
	RecordHeaderSize = 16 // id, total_size, timestamp

	codeLoadFixed   = RecordHeaderSize + 40 // pid, tid, vma, code_addr, code_size, code_index
	codeMoveSize    = RecordHeaderSize + 48 // pid, tid, vma, old, new, code_size, code_index
	debugInfoFixed  = RecordHeaderSize + 16 // code_addr, nr_entry
	debugEntryFixed = 16                    // addr, line, discrim; then the NUL-terminated file name
	unwindingFixed  = RecordHeaderSize + 24 // unwind_data_size, eh_frame_hdr_size, mapped_size
)

// FlagArchTimestamp is header flag bit 0: timestamps come from an
// architecture clock (such as the TSC) rather than CLOCK_MONOTONIC.
const FlagArchTimestamp = 1 << 0

// KnownFlags holds every header flag bit the spec defines; others are reserved.
const KnownFlags = FlagArchTimestamp

// RecordType is a record's id.
type RecordType uint32

const (
	TypeCodeLoad      RecordType = 0
	TypeCodeMove      RecordType = 1
	TypeDebugInfo     RecordType = 2
	TypeCodeClose     RecordType = 3
	TypeUnwindingInfo RecordType = 4
)

var typeNames = [...]string{"CODE_LOAD", "CODE_MOVE", "DEBUG_INFO", "CODE_CLOSE", "UNWINDING_INFO"}

func (t RecordType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	if t == TypeStageMark {
		return "JITPROF_STAGE"
	}
	if t == TypeInlineInfo {
		return "JITPROF_INLINE"
	}
	if t == TypeMethodNames {
		return "JITPROF_METHODS"
	}
	return fmt.Sprintf("UNKNOWN(%d)", uint32(t))
}

// Header is the file header.
type Header struct {
	ByteOrder binary.ByteOrder // the writer's, told by the magic
	Version   uint32
	Size      uint32 // total_size: the header's length, at least HeaderSize
	ElfMach   uint32 // ELF e_machine of the code; 0 means the recording host's
	Pad1      uint32
	Pid       uint32
	Timestamp uint64
	Flags     uint64
}

// RecordHeader is what every record starts with, plus where it was found.
type RecordHeader struct {
	Offset    int64 // of the record in the file
	Type      RecordType
	Size      uint32 // total_size, header included
	Timestamp uint64
}

// Header returns the record's common header.
func (h *RecordHeader) Header() *RecordHeader { return h }

// Record is one of *CodeLoad, *CodeMove, *DebugInfo, *CodeClose,
// *UnwindingInfo, *StageMark, *InlineInfo and *MethodNames (jitprof's extensions),
// *Unknown (an id this package does not know) or *Invalid (a known id whose
// fields do not fit the record).
type Record interface {
	Header() *RecordHeader
}

// CodeLoad describes one function's machine code.
type CodeLoad struct {
	RecordHeader
	Pid, Tid  uint32
	VMA       uint64 // runtime address; LLVM writes 0 here, use CodeAddr
	CodeAddr  uint64
	CodeSize  uint64
	CodeIndex uint64 // unique per load; CODE_MOVE refers to it
	Name      string
	Code      []byte // CodeSize bytes; may be empty
}

// LLVMLineBias is what LLVM's MCJIT listener adds to every DEBUG_INFO
// address, for perf versions that put the text 0x40 bytes into the image
// but its line table at 0.
const LLVMLineBias = 0x40

// V8LineBias is what V8 (--perf-prof) adds to every DEBUG_INFO address: the
// size of the ELF header perf inject puts before the code (kElfHeaderSize
// in V8's perf-jit.cc). Its first entry of a function is at code_addr+0x40,
// where the function's first instruction is.
const V8LineBias = 0x40

// LineBias returns what the writer of l added to the addresses of its
// DEBUG_INFO entries: LLVMLineBias for LLVM's listener, recognised by the
// vma of 0 that it alone writes; V8LineBias for V8, recognised by the "JS:"
// it puts before the names of the JavaScript functions it writes lines
// for; else 0.
func (l *CodeLoad) LineBias() uint64 {
	switch {
	case l.VMA == 0 && l.CodeAddr != 0:
		return LLVMLineBias
	case strings.HasPrefix(l.Name, "JS:"):
		return V8LineBias
	}
	return 0
}

// BadEntry tells why e, an entry of the DEBUG_INFO record before l, cannot
// be right, or returns "" when it can: "after-end" for an address past the
// end of l's code (an entry at the end is taken, as perf takes it), "name"
// for a file name that is not text. node 20 writes both, alternating with
// its real entries, for some functions. Readers drop such entries. Entries
// before the start are not bad: the last of them tells the line in effect
// at the start (Erlang writes one there), as perf reads them.
func (l *CodeLoad) BadEntry(e DebugEntry) string {
	return BadEntry(e, l.LineBias(), l.CodeAddr, l.CodeSize)
}

// BadEntry is CodeLoad.BadEntry for a load whose line bias, code address
// and code size are known, for an index that does not keep the record.
func BadEntry(e DebugEntry, bias, codeAddr, codeSize uint64) string {
	switch {
	case e.Addr >= bias && e.Addr-bias > codeAddr && e.Addr-bias-codeAddr > codeSize:
		return "after-end"
	case !IsText(e.File):
		return "name"
	}
	return ""
}

// IsText tells whether s can be a name: valid UTF-8 without control
// characters.
func IsText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// CodeMove says an already loaded function now lives at another address.
type CodeMove struct {
	RecordHeader
	Pid, Tid    uint32
	VMA         uint64
	OldCodeAddr uint64
	NewCodeAddr uint64
	CodeSize    uint64
	CodeIndex   uint64
}

// DebugInfo maps addresses of the function at CodeAddr to source lines.
// It precedes the CODE_LOAD it belongs to. Its entries are decoded on demand
// by Entries.
type DebugInfo struct {
	RecordHeader
	CodeAddr   uint64
	NumEntries uint64
	entries    []byte // the entries as read
	payload    []byte // all the bytes after the fixed part, padding included
	order      binary.ByteOrder
}

// DebugEntry is one address-to-line mapping.
type DebugEntry struct {
	Addr    uint64
	Line    uint32
	Discrim uint32
	File    string
}

// CodeClose marks the end of the runtime's output.
type CodeClose struct {
	RecordHeader
}

// UnwindingInfo carries DWARF unwinding tables for the next CODE_LOAD.
//
// The spec's text puts the eh_frame_hdr first, but perf and every runtime
// that writes this record (V8, CPython) put the .eh_frame first and the
// eh_frame_hdr in the last EHFrameHdrSize bytes; this package follows them.
type UnwindingInfo struct {
	RecordHeader
	MappedSize uint64
	EHFrame    []byte
	EHFrameHdr []byte
}

// Unknown is a record whose id this package does not know, kept whole.
type Unknown struct {
	RecordHeader
	Body []byte // the bytes after the record header
}

// Invalid is a record of a known id whose fields do not fit its total_size.
// Its total_size was plausible, so reading goes on after it.
//
// Or, Skipped, it is the bytes a Reader skipped after a record header whose
// total_size cannot be right, up to the record it found after them: Size is
// then how many bytes were skipped, Err says what the header said.
type Invalid struct {
	RecordHeader
	Body    []byte
	Err     *FormatError
	Skipped bool
}
