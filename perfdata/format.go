// Package perfdata reads and writes perf.data, the file in which Linux perf
// record stores what the kernel reported (samples, memory maps, thread
// lifetimes) and what perf inject rewrites, so that jitprof can read
// recordings and write the records it injects for jitted code.
//
// It handles the little-endian format perf 6.x writes: the file header with
// its event attributes and 256-bit feature bitmap, the feature sections after
// the data, and pipe mode (perf record -o -), where attributes and features
// arrive as records in the stream. Records are decoded according to the
// attribute they belong to, found by event id as perf finds it; records it
// does not decode are kept as bytes, and every record keeps its bytes, so a
// file is copied exactly.
//
// The format is described in tools/perf/Documentation/perf.data-file-format.txt
// and include/uapi/linux/perf_event.h of the Linux sources; where those are
// silent, this package follows what perf's util/header.c and util/session.c
// do.
//
// The codec is written by hand: no Go library writes perf.data.
package perfdata

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

var le = binary.LittleEndian

// Magic is the first field of every perf.data header, "PERFILE2" read as a
// little-endian integer.
const Magic = 0x32454c4946524550

// Sizes of the fixed parts of the format, in bytes.
const (
	FileHeaderSize   = 104 // magic, size, attr_size, three sections, the feature bitmap
	PipeHeaderSize   = 16  // magic, size
	RecordHeaderSize = 8   // type, misc, size

	attrSizeVer0 = 64  // the first perf_event_attr; every later one extends it
	attrSizeVer7 = 128 // with sig_data: what perf 6.1 writes
	sectionSize  = 16  // offset, size
	buildIDFixed = 36  // record header, pid, 24 bytes of build-id and its size
	buildIDMax   = 20  // bytes of build-id a record holds
	nameAlign    = 64  // perf pads build-id table file names to this
)

// RecordType is a record's type: below 64 the kernel's, from 64 perf's own.
type RecordType uint32

// The record types perf 6.x knows.
const (
	TypeMmap            RecordType = 1
	TypeLost            RecordType = 2
	TypeComm            RecordType = 3
	TypeExit            RecordType = 4
	TypeThrottle        RecordType = 5
	TypeUnthrottle      RecordType = 6
	TypeFork            RecordType = 7
	TypeRead            RecordType = 8
	TypeSample          RecordType = 9
	TypeMmap2           RecordType = 10
	TypeAux             RecordType = 11
	TypeItraceStart     RecordType = 12
	TypeLostSamples     RecordType = 13
	TypeSwitch          RecordType = 14
	TypeSwitchCPUWide   RecordType = 15
	TypeNamespaces      RecordType = 16
	TypeKsymbol         RecordType = 17
	TypeBPFEvent        RecordType = 18
	TypeCgroup          RecordType = 19
	TypeTextPoke        RecordType = 20
	TypeAuxOutputHWID   RecordType = 21
	TypeHeaderAttr      RecordType = 64
	TypeHeaderEventType RecordType = 65
	TypeTracingData     RecordType = 66 // followed by the tracing data, outside its size
	TypeHeaderBuildID   RecordType = 67
	TypeFinishedRound   RecordType = 68
	TypeIDIndex         RecordType = 69
	TypeAuxtraceInfo    RecordType = 70
	TypeAuxtrace        RecordType = 71 // followed by the trace data, outside its size
	TypeAuxtraceError   RecordType = 72
	TypeThreadMap       RecordType = 73
	TypeCPUMap          RecordType = 74
	TypeStatConfig      RecordType = 75
	TypeStat            RecordType = 76
	TypeStatRound       RecordType = 77
	TypeEventUpdate     RecordType = 78
	TypeTimeConv        RecordType = 79
	TypeHeaderFeature   RecordType = 80
	TypeCompressed      RecordType = 81
	TypeFinishedInit    RecordType = 82

	// TypeUserStart is the first type perf itself writes. Such records
	// belong to no event and carry no sample_id.
	TypeUserStart RecordType = 64
)

var typeNames = map[RecordType]string{
	TypeMmap: "MMAP", TypeLost: "LOST", TypeComm: "COMM", TypeExit: "EXIT", TypeThrottle: "THROTTLE",
	TypeUnthrottle: "UNTHROTTLE", TypeFork: "FORK", TypeRead: "READ", TypeSample: "SAMPLE", TypeMmap2: "MMAP2",
	TypeAux: "AUX", TypeItraceStart: "ITRACE_START", TypeLostSamples: "LOST_SAMPLES", TypeSwitch: "SWITCH",
	TypeSwitchCPUWide: "SWITCH_CPU_WIDE", TypeNamespaces: "NAMESPACES", TypeKsymbol: "KSYMBOL",
	TypeBPFEvent: "BPF_EVENT", TypeCgroup: "CGROUP", TypeTextPoke: "TEXT_POKE", TypeAuxOutputHWID: "AUX_OUTPUT_HW_ID",
	TypeHeaderAttr: "ATTR", TypeHeaderEventType: "EVENT_TYPE", TypeTracingData: "TRACING_DATA",
	TypeHeaderBuildID: "BUILD_ID", TypeFinishedRound: "FINISHED_ROUND", TypeIDIndex: "ID_INDEX",
	TypeAuxtraceInfo: "AUXTRACE_INFO", TypeAuxtrace: "AUXTRACE", TypeAuxtraceError: "AUXTRACE_ERROR",
	TypeThreadMap: "THREAD_MAP", TypeCPUMap: "CPU_MAP", TypeStatConfig: "STAT_CONFIG", TypeStat: "STAT",
	TypeStatRound: "STAT_ROUND", TypeEventUpdate: "EVENT_UPDATE", TypeTimeConv: "TIME_CONV",
	TypeHeaderFeature: "FEATURE", TypeCompressed: "COMPRESSED", TypeFinishedInit: "FINISHED_INIT",
}

// String returns the name perf gives the type, without its PERF_RECORD_ prefix.
func (t RecordType) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("UNKNOWN(%d)", uint32(t))
}

// Bits of a record header's misc field.
const (
	MiscCPUModeMask = 0x7
	MiscKernel      = 1
	MiscUser        = 2
	MiscHypervisor  = 3
	MiscGuestKernel = 4
	MiscGuestUser   = 5
	MiscMmapData    = 1 << 13 // MMAP, MMAP2: a data (not executable) mapping
	MiscCommExec    = 1 << 13 // COMM: the name changed by exec
	MiscMmapBuildID = 1 << 14 // MMAP2: a build-id instead of maj/min/ino
	MiscExactIP     = 1 << 14 // SAMPLE: the ip is the exact instruction
	MiscSwitchOut   = 1 << 13 // SWITCH, SWITCH_CPU_WIDE: the thread left the CPU (else it came onto it)
	// MiscSwitchOutPreempt marks a switch out of a thread still runnable
	// (preempted), not one that blocked.
	MiscSwitchOutPreempt = 1 << 14
	MiscBuildIDSize      = 1 << 15 // build-id entries: the size byte is valid
)

// SampleType is perf_event_attr.sample_type: which fields a SAMPLE record
// holds, and which a sample_id trailer holds.
type SampleType uint64

// The sample_type bits, in the order of perf_event.h.
const (
	SampleIP SampleType = 1 << iota
	SampleTID
	SampleTime
	SampleAddr
	SampleRead
	SampleCallchain
	SampleID
	SampleCPU
	SamplePeriod
	SampleStreamID
	SampleRaw
	SampleBranchStack
	SampleRegsUser
	SampleStackUser
	SampleWeight
	SampleDataSrc
	SampleIdentifier
	SampleTransaction
	SampleRegsIntr
	SamplePhysAddr
	SampleAux
	SampleCgroup
	SampleDataPageSize
	SampleCodePageSize
	SampleWeightStruct
)

// sampleIDBits are the sample_type bits a sample_id trailer holds.
const sampleIDBits = SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier

// ReadFormat is perf_event_attr.read_format: what a READ value holds.
type ReadFormat uint64

// The read_format bits.
const (
	FormatTotalTimeEnabled ReadFormat = 1 << iota
	FormatTotalTimeRunning
	FormatID
	FormatGroup
	FormatLost
)

// AttrFlags are the single-bit fields of perf_event_attr, in one word as
// the kernel lays them out.
type AttrFlags uint64

// The perf_event_attr flag bits. Bits 15 and 16 are precise_ip (see
// PreciseIP).
const (
	AttrDisabled AttrFlags = 1 << iota
	AttrInherit
	AttrPinned
	AttrExclusive
	AttrExcludeUser
	AttrExcludeKernel
	AttrExcludeHV
	AttrExcludeIdle
	AttrMmap
	AttrComm
	AttrFreq
	AttrInheritStat
	AttrEnableOnExec
	AttrTask
	AttrWatermark
	attrPreciseIP0
	attrPreciseIP1
	AttrMmapData
	AttrSampleIDAll
	AttrExcludeHost
	AttrExcludeGuest
	AttrExcludeCallchainKernel
	AttrExcludeCallchainUser
	AttrMmap2
	AttrCommExec
	AttrUseClockID
	AttrContextSwitch
	AttrWriteBackward
	AttrNamespaces
	AttrKsymbol
	AttrBPFEvent
	AttrAuxOutput
	AttrCgroup
	AttrTextPoke
	AttrBuildID
	AttrInheritThread
	AttrRemoveOnExec
	AttrSigtrap
)

// PreciseIP returns the precise_ip field: 0 (arbitrary skid) to 3 (none).
func (f AttrFlags) PreciseIP() int { return int(f>>15) & 3 }

// Callchain context markers: an entry at or above ContextMax in a callchain
// says where the entries after it come from, rather than being an address.
const (
	ContextHV          = ^uint64(32) + 1
	ContextKernel      = ^uint64(128) + 1
	ContextUser        = ^uint64(512) + 1
	ContextGuest       = ^uint64(2048) + 1
	ContextGuestKernel = ^uint64(2176) + 1
	ContextGuestUser   = ^uint64(2560) + 1
	ContextMax         = ^uint64(4095) + 1
)

// FeatureID names a feature section: a bit of the header's feature bitmap.
type FeatureID uint32

// The features perf 6.x writes. Only FeatureBuildID is decoded here; the
// others are kept as bytes.
const (
	FeatureTracingData    FeatureID = 1
	FeatureBuildID        FeatureID = 2
	FeatureHostname       FeatureID = 3
	FeatureOSRelease      FeatureID = 4
	FeatureVersion        FeatureID = 5
	FeatureArch           FeatureID = 6
	FeatureNrCPUs         FeatureID = 7
	FeatureCPUDesc        FeatureID = 8
	FeatureCPUID          FeatureID = 9
	FeatureTotalMem       FeatureID = 10
	FeatureCmdline        FeatureID = 11
	FeatureEventDesc      FeatureID = 12
	FeatureCPUTopology    FeatureID = 13
	FeatureNUMATopology   FeatureID = 14
	FeatureBranchStack    FeatureID = 15
	FeaturePMUMappings    FeatureID = 16
	FeatureGroupDesc      FeatureID = 17
	FeatureAuxtrace       FeatureID = 18
	FeatureStat           FeatureID = 19
	FeatureCache          FeatureID = 20
	FeatureSampleTime     FeatureID = 21
	FeatureMemTopology    FeatureID = 22
	FeatureClockID        FeatureID = 23
	FeatureDirFormat      FeatureID = 24
	FeatureBPFProgInfo    FeatureID = 25
	FeatureBPFBTF         FeatureID = 26
	FeatureCompressed     FeatureID = 27
	FeatureCPUPMUCaps     FeatureID = 28
	FeatureClockData      FeatureID = 29
	FeatureHybridTopology FeatureID = 30
	FeaturePMUCaps        FeatureID = 31

	featureBits = 256
)

// Section locates a part of the file.
type Section struct {
	Offset, Size uint64
}

// FileHeader is the file header as found. In pipe mode only Size is set.
type FileHeader struct {
	Size       uint64 // FileHeaderSize, or PipeHeaderSize in pipe mode
	AttrSize   uint64 // of one entry of the attrs section: the attr and its ids Section
	Attrs      Section
	Data       Section
	EventTypes Section   // perf writes zeros here and ignores it
	Features   [4]uint64 // 256-bit bitmap: bit n set when feature n has a section
}

// Pipe reports whether the file is in pipe mode.
func (h FileHeader) Pipe() bool { return h.Size == PipeHeaderSize }

// Feature is one feature section (or, in pipe mode, one FEATURE record's
// contents), kept as bytes.
type Feature struct {
	ID     FeatureID
	Offset int64 // where Data was found in the file
	Data   []byte
}

// Attr is one event's perf_event_attr and the ids of its instances (one
// per CPU or thread it was opened on).
//
// Raw keeps the attr as read, so fields this package does not know (and
// reserved bytes) are written back unchanged; the named fields are written
// over it, so a change to them is written too. A new Attr may leave Raw nil:
// it is then written in the 128-byte layout of perf 6.1, which refuses
// longer attrs, so its Config3 must be zero.
type Attr struct {
	Type             uint32
	Config           uint64
	SamplePeriod     uint64 // the frequency, when Flags has AttrFreq
	SampleType       SampleType
	ReadFormat       ReadFormat
	Flags            AttrFlags
	WakeupEvents     uint32 // or wakeup_watermark
	BPType           uint32
	Config1          uint64 // or bp_addr
	Config2          uint64 // or bp_len
	BranchSampleType uint64
	SampleRegsUser   uint64
	SampleStackUser  uint32
	ClockID          int32 // meaningful when Flags has AttrUseClockID
	SampleRegsIntr   uint64
	AuxWatermark     uint32
	SampleMaxStack   uint16
	AuxSampleSize    uint32
	SigData          uint64
	Config3          uint64

	IDs []uint64
	Raw []byte // the attr's bytes as read; its size field says how many

	offset int64 // of the attr in the file, or of its ATTR record in pipe mode
}

// SampleIDAll reports whether the event's non-sample records end in a
// sample_id trailer.
func (a *Attr) SampleIDAll() bool { return a.Flags&AttrSampleIDAll != 0 }

// RecordHeader is what every record has: its place, its type, and the event
// it belongs to.
type RecordHeader struct {
	Offset int64 // of the record in the file
	Type   RecordType
	Misc   uint16
	// Attr is the event the record belongs to: for a SAMPLE, the one
	// whose id it carries; for other kernel records, the one whose id
	// their sample_id carries. Nil for perf's own records, and for a
	// record whose id no attr has.
	Attr *Attr
	// Raw is the whole record as read, header included (and, for
	// TRACING_DATA and AUXTRACE, the data after it). Nil in a record
	// built by the caller.
	Raw []byte
}

// Header returns the record's common header.
func (h *RecordHeader) Header() *RecordHeader { return h }

// Record is one of *Mmap, *Mmap2, *Comm, *Task (FORK, EXIT), *Sample,
// *Lost, *Throttle (THROTTLE, UNTHROTTLE), *Switch (SWITCH,
// SWITCH_CPU_WIDE), *FinishedRound, *TimeConv,
// *AttrRecord, *BuildIDRecord, *FeatureRecord, *Unknown (a type this package
// does not decode) or *Invalid (a type it decodes whose fields do not fit).
type Record interface {
	Header() *RecordHeader
}

// Trailer is the sample_id that ends a non-sample kernel record when its
// attr has sample_id_all: the fields of the attr's sample_type among TID,
// TIME, ID, STREAM_ID, CPU and IDENTIFIER.
type Trailer struct {
	Pid, Tid uint32
	Time     uint64
	ID       uint64 // written both as ID and as IDENTIFIER, as the kernel does
	StreamID uint64
	CPU      uint32
}

// Mmap is a PERF_RECORD_MMAP: a mapping of a file into a process.
type Mmap struct {
	RecordHeader
	Pid, Tid  uint32
	Addr, Len uint64
	Pgoff     uint64
	Filename  string
	Trailer   Trailer
}

// Mmap2 is a PERF_RECORD_MMAP2: a mapping with the identity of its file,
// either device and inode or (when Misc has MiscMmapBuildID) a build-id.
type Mmap2 struct {
	RecordHeader
	Pid, Tid      uint32
	Addr, Len     uint64
	Pgoff         uint64
	Maj, Min      uint32
	Ino           uint64
	InoGeneration uint64
	BuildID       []byte // at most 20 bytes; used instead of the four fields above when Misc has MiscMmapBuildID
	Prot, Flags   uint32
	Filename      string
	Trailer       Trailer
}

// Comm is a PERF_RECORD_COMM: a thread's name. Misc has MiscCommExec when
// exec changed it.
type Comm struct {
	RecordHeader
	Pid, Tid uint32
	Comm     string
	Trailer  Trailer
}

// Task is a PERF_RECORD_FORK or PERF_RECORD_EXIT, as Type says.
type Task struct {
	RecordHeader
	Pid, PPid uint32
	Tid, PTid uint32
	Time      uint64
	Trailer   Trailer
}

// Lost is a PERF_RECORD_LOST: records the kernel dropped.
type Lost struct {
	RecordHeader
	ID      uint64
	Lost    uint64
	Trailer Trailer
}

// Throttle is a PERF_RECORD_THROTTLE or PERF_RECORD_UNTHROTTLE, as Type says.
type Throttle struct {
	RecordHeader
	Time     uint64
	ID       uint64
	StreamID uint64
	Trailer  Trailer
}

// Switch is a PERF_RECORD_SWITCH (a traced thread's switch, of an attr with
// context_switch) or, as Type says, a PERF_RECORD_SWITCH_CPU_WIDE (any
// switch on a CPU an event is opened on), which also names the thread
// switched to or from. The thread switching is the Trailer's: Misc has
// MiscSwitchOut when it leaves the CPU, MiscSwitchOutPreempt too when it
// was still runnable.
type Switch struct {
	RecordHeader
	NextPrevPid, NextPrevTid uint32 // SWITCH_CPU_WIDE only
	Trailer                  Trailer
}

// Out tells whether the switch takes the thread off its CPU.
func (s *Switch) Out() bool { return s.Misc&MiscSwitchOut != 0 }

// Sample is a PERF_RECORD_SAMPLE. Which fields it holds is Attr.SampleType;
// fields it does not hold are zero. Fields after the user stack are kept
// undecoded in Rest.
//
// The slices alias what the Reader read: RawData, StackUser and Rest the
// record's bytes (valid while those are, see Reader), Callchain, Branches,
// RegsUser and the read values the Reader's own arrays, which with
// ReuseRecord the next sample overwrites.
type Sample struct {
	RecordHeader
	IP        uint64
	Pid, Tid  uint32
	Time      uint64
	Addr      uint64
	ID        uint64 // written both as IDENTIFIER and as ID, as the kernel does
	StreamID  uint64
	CPU       uint32
	Period    uint64
	Read      ReadValues
	Callchain []uint64 // context markers (ContextKernel...) included
	// RawData is RAW's data after its 4-byte size; the kernel pads it so
	// that the two end on an 8-byte boundary.
	RawData []byte
	// BranchHWIndex is BRANCH_STACK's hw_idx, present when
	// Attr.BranchSampleType has BranchHWIndex.
	BranchHWIndex uint64
	Branches      []Branch
	// RegsABI is REGS_USER's ABI: RegsABINone when the sample has no user
	// registers (a kernel thread), and RegsUser is then empty; otherwise
	// RegsUser holds one value per bit set in Attr.SampleRegsUser, in bit
	// order (UserRegister finds one by number).
	RegsABI  uint64
	RegsUser []uint64
	// StackUserSize is how many bytes STACK_USER's copy of the user stack
	// takes in the record: Attr.SampleStackUser, less when the record
	// could not hold that much, 0 when there was no user stack.
	// StackUser is the part the kernel could copy (dyn_size bytes), from
	// the user stack pointer up. Decoded, its capacity runs to the end of
	// the copy, so that the sample encodes to the bytes read; the Writer
	// fills the rest of the copy from the capacity, or with zeros.
	StackUserSize uint64
	StackUser     []byte
	Rest          []byte // WEIGHT, DATA_SRC and later fields, as read
}

// Branch is one entry of a sample's branch stack.
type Branch struct {
	From, To uint64
	Flags    uint64 // mispred, predicted, in_tx, abort, cycles, type... as perf_event.h packs them
}

// BranchHWIndex is PERF_SAMPLE_BRANCH_HW_INDEX, the bit of
// Attr.BranchSampleType that puts hw_idx in a sample's branch stack.
const BranchHWIndex = 1 << 17

// The ABIs of a sample's user registers (REGS_USER).
const (
	RegsABINone = 0 // no registers: the sample has no user context
	RegsABI32   = 1
	RegsABI64   = 2
)

// Register numbers of Attr.SampleRegsUser's bits, as perf_regs.h of each
// architecture numbers them: those an unwinder starts from.
const (
	RegX86BP = 6
	RegX86SP = 7
	RegX86IP = 8

	RegARM64FP = 29 // x29
	RegARM64LR = 30 // x30
	RegARM64SP = 31
	RegARM64PC = 32
)

// UserRegister returns user register n (perf's number for the recording's
// architecture, such as RegX86SP) of the sample; ok is false when the
// sample has no such register.
func (s *Sample) UserRegister(n int) (v uint64, ok bool) {
	if n < 0 || n > 63 || s.Attr == nil {
		return 0, false
	}
	mask := s.Attr.SampleRegsUser
	if mask&(1<<n) == 0 {
		return 0, false
	}
	i := bits.OnesCount64(mask & (1<<n - 1))
	if i >= len(s.RegsUser) {
		return 0, false
	}
	return s.RegsUser[i], true
}

// ReadValues is the READ part of a sample, as Attr.ReadFormat lays it out.
// Without FormatGroup it holds exactly one value.
type ReadValues struct {
	TimeEnabled, TimeRunning uint64
	Values                   []ReadValue
}

// ReadValue is one counter's value.
type ReadValue struct {
	Value, ID, Lost uint64
}

// FinishedRound is a PERF_RECORD_FINISHED_ROUND: perf record had emptied
// every ring buffer once, so no later record is older than the newest one
// before the previous round.
type FinishedRound struct {
	RecordHeader
}

// TimeConv is a PERF_RECORD_TIME_CONV: how to turn TSC values into perf
// timestamps.
type TimeConv struct {
	RecordHeader
	TimeShift, TimeMult, TimeZero uint64
	// Extended says the record has the fields below (perf 5.12 and later).
	Extended         bool
	TimeCycles       uint64
	TimeMask         uint64
	CapUserTimeZero  bool
	CapUserTimeShort bool
}

// AttrRecord is a PERF_RECORD_HEADER_ATTR: an event of a pipe-mode file.
type AttrRecord struct {
	RecordHeader
	Attr *Attr
}

// BuildID is one entry of the build-id table: the build-id of a file that
// samples hit.
type BuildID struct {
	Misc     uint16 // cpumode (MiscKernel, MiscUser...), and MiscBuildIDSize
	Pid      int32  // -1 for the host kernel's files
	ID       []byte // 20 bytes unless Misc has MiscBuildIDSize
	Filename string
}

// BuildIDRecord is a PERF_RECORD_HEADER_BUILD_ID: a build-id table entry in
// the stream.
type BuildIDRecord struct {
	RecordHeader
	BuildID BuildID
}

// FeatureRecord is a PERF_RECORD_HEADER_FEATURE: a feature section of a
// pipe-mode file.
type FeatureRecord struct {
	RecordHeader
	Feature Feature
}

// Unknown is a record this package does not decode, kept in Raw.
type Unknown struct {
	RecordHeader
}

// Invalid is a record of a type this package decodes whose fields do not
// fit it, or a sample whose event is unknown. It is kept in Raw, and
// reading goes on after it.
type Invalid struct {
	RecordHeader
	Err *FormatError
}
