package record

import (
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

// This file is the kernel interface: perf_event_attr, perf_event_open and
// the mmapped ring buffers. Nothing here knows about /proc or the command
// line.

// Event is a countable event, named as perf names it.
type Event struct {
	Name   string
	Type   uint32
	Config uint64
	// ExcludeKernel samples user space only (perf's ":u").
	ExcludeKernel bool
}

// events are the names -e takes: perf's generic hardware and software
// events.
var events = map[string]Event{
	"cycles":           {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
	"cpu-cycles":       {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES},
	"instructions":     {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS},
	"cache-misses":     {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_MISSES},
	"branch-misses":    {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_BRANCH_MISSES},
	"ref-cycles":       {Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_REF_CPU_CYCLES},
	"cpu-clock":        {Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK},
	"task-clock":       {Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK},
	"page-faults":      {Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS},
	"context-switches": {Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES},
}

// ParseEvent reads an event name, with perf's ":u" (user space only) or
// ":k" (kernel only is not offered: jitted code runs in user space) suffix.
func ParseEvent(s string) (Event, error) {
	name, mod, _ := strings.Cut(s, ":")
	ev, ok := events[name]
	if !ok {
		return Event{}, fmt.Errorf("event %q: not one of %s", s, strings.Join(slices.Sorted(maps.Keys(events)), ", "))
	}
	switch mod {
	case "":
	case "u":
		ev.ExcludeKernel = true
	default:
		return Event{}, fmt.Errorf("event %q: modifier %q: only u (user space) is supported", s, mod)
	}
	ev.Name = s
	return ev, nil
}

// DefaultEvent returns cycles when the hardware counts them here, else
// cpu-clock (virtual machines often have no counters). The summary names
// the event, so the choice needs no note unless the user might expect
// otherwise: none is given (""), but for why a counter the machine has
// could not be used.
func DefaultEvent() (Event, string) {
	cycles, _ := ParseEvent("cycles")
	attr := unix.PerfEventAttr{Type: cycles.Type, Config: cycles.Config, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits: unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	clock, _ := ParseEvent("cpu-clock")
	switch {
	case err == nil:
		unix.Close(fd)
		return cycles, ""
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENODEV):
		return clock, "" // no counter at all, as in most virtual machines
	}
	return clock, fmt.Sprintf("sampling cpu-clock: the cycle counter could not be used (%v)", err)
}

// CallGraph says how the call chain of each sample is recorded.
type CallGraph int

const (
	// NoCallGraph records each sample's address only.
	NoCallGraph CallGraph = iota
	// FramePointers has the kernel walk the frame pointers (perf's fp).
	FramePointers
	// DWARF records each sample's user registers and a copy of the top of
	// its user stack, to unwind afterwards by the code's unwind tables
	// (perf's dwarf); the kernel walks only kernel frames.
	DWARF
)

// Sizes of a sample's copy of the user stack, in bytes, as perf has them:
// its default, and the most a record's 16-bit size leaves room for,
// rounded down to 8 bytes.
const (
	DefaultStackSize = 8192
	MaxStackSize     = 65528
)

// ParseCallGraph reads --call-graph's value as perf spells it: fp, or
// dwarf[,SIZE] with SIZE in bytes (decimal, or 0x hexadecimal), rounded up
// to 8 bytes as perf rounds it. The size is 0 for fp.
func ParseCallGraph(s string) (CallGraph, uint32, error) {
	mode, size, sized := strings.Cut(s, ",")
	switch mode {
	case "fp":
		if sized {
			return 0, 0, fmt.Errorf("--call-graph %q: fp takes no size", s)
		}
		return FramePointers, 0, nil
	case "dwarf":
		if !sized {
			return DWARF, DefaultStackSize, nil
		}
		n, err := strconv.ParseUint(size, 0, 32)
		n = (n + 7) &^ 7
		if err != nil || n == 0 || n > MaxStackSize {
			return 0, 0, fmt.Errorf("--call-graph %q: the stack size must be between 1 and %d bytes", s, MaxStackSize)
		}
		return DWARF, uint32(n), nil
	}
	return 0, 0, fmt.Errorf("--call-graph %q: fp or dwarf[,SIZE]", s)
}

// dwarfRegs returns the user registers a DWARF call graph records on
// machine, perf's masks (its arch's PERF_REGS_MASK): on x86-64 every
// general register but the segment ones, on arm64 all of them.
func dwarfRegs(machine elf.Machine) (uint64, error) {
	switch machine {
	case elf.EM_X86_64:
		return 0xff0fff, nil
	case elf.EM_AARCH64:
		return 1<<33 - 1, nil
	}
	return 0, fmt.Errorf("--call-graph dwarf: the user registers of %v are not known here; use --call-graph fp", machine)
}

// attrConfig is what an attr is made of besides the event.
type attrConfig struct {
	freq      int
	callGraph CallGraph
	regs      uint64 // DWARF: the user registers
	stackSize uint32 // DWARF: the bytes of user stack
	inherit   bool   // follow new threads and child processes
	onExec    bool   // start disabled, enable at the command's exec
	wakeup    uint32
}

// newAttr returns the attr every event of a recording gets. CLOCK_MONOTONIC
// is jitdump's clock, so samples can be placed among the dumps' loads;
// sample_id_all and IDENTIFIER time and attribute the side-band records
// (maps, comms, forks) as perf's readers expect.
func newAttr(ev Event, c attrConfig) *perfdata.Attr {
	st := perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
		perfdata.SampleCPU | perfdata.SamplePeriod
	flags := perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrCommExec |
		perfdata.AttrTask | perfdata.AttrFreq | perfdata.AttrSampleIDAll | perfdata.AttrUseClockID |
		perfdata.AttrExcludeGuest | perfdata.AttrWatermark
	var regs uint64
	var stack uint32
	switch c.callGraph {
	case FramePointers:
		st |= perfdata.SampleCallchain
	case DWARF:
		// The kernel's callchain keeps the kernel frames; the user ones
		// come from the registers and the stack copy. Unwinders read
		// .eh_frame_hdr from the files' read-only segments, which perf
		// finds through their mappings: those are recorded too, as
		// perf's dwarf mode does.
		st |= perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
		flags |= perfdata.AttrExcludeCallchainUser | perfdata.AttrMmapData
		regs, stack = c.regs, c.stackSize
	}
	if ev.ExcludeKernel {
		flags |= perfdata.AttrExcludeKernel | perfdata.AttrExcludeHV
	}
	if c.inherit {
		flags |= perfdata.AttrInherit
	}
	if c.onExec {
		flags |= perfdata.AttrDisabled | perfdata.AttrEnableOnExec
	}
	return &perfdata.Attr{Type: ev.Type, Config: ev.Config, SamplePeriod: uint64(c.freq), SampleType: st,
		Flags: flags, WakeupEvents: c.wakeup, ClockID: unix.CLOCK_MONOTONIC, SampleRegsUser: regs, SampleStackUser: stack}
}

// kernelAttr lays a out as perf_event_open takes it.
func kernelAttr(a *perfdata.Attr) unix.PerfEventAttr {
	return unix.PerfEventAttr{
		Type: a.Type, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Config: a.Config,
		Sample: a.SamplePeriod, Sample_type: uint64(a.SampleType), Read_format: uint64(a.ReadFormat),
		Bits: uint64(a.Flags), Wakeup: a.WakeupEvents, Clockid: a.ClockID, Sample_max_stack: a.SampleMaxStack,
		Sample_regs_user: a.SampleRegsUser, Sample_stack_user: a.SampleStackUser,
	}
}

// openEvent opens a's event for pid (-1: every process) on cpu (-1: every
// CPU) and returns its fd and id.
func openEvent(a *perfdata.Attr, pid, cpu int) (fd int, id uint64, err error) {
	ka := kernelAttr(a)
	fd, err = unix.PerfEventOpen(&ka, pid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, 0, openError(a, pid, cpu, err)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.PERF_EVENT_IOC_ID, uintptr(unsafe.Pointer(&id))); e != 0 {
		unix.Close(fd)
		return -1, 0, fmt.Errorf("perf_event_open: reading the event's id: %w", e)
	}
	return fd, id, nil
}

// ErrGone is matched by the error for a process that exited before it could
// be recorded.
var ErrGone = errors.New("no such process")

// openError says what the user can do about a failed perf_event_open.
func openError(a *perfdata.Attr, pid, cpu int, err error) error {
	what := "every process"
	if pid >= 0 {
		what = "thread " + strconv.Itoa(pid)
	}
	if cpu >= 0 {
		what += " on CPU " + strconv.Itoa(cpu)
	}
	switch {
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("perf_event_open for %s: %w: it exited", what, ErrGone)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return paranoidError(err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENODEV):
		return fmt.Errorf("perf_event_open for %s: this machine does not count event type %d config %d (%w; virtual machines often have no hardware counters): try -e cpu-clock", what, a.Type, a.Config, err)
	case errors.Is(err, unix.EMFILE):
		return fmt.Errorf("perf_event_open for %s: %w: raise the limit (ulimit -n) or record fewer threads", what, err)
	}
	return fmt.Errorf("perf_event_open for %s: %w", what, err)
}

const paranoidFile = "/proc/sys/kernel/perf_event_paranoid"

// paranoidError explains a refused perf_event_open by the paranoia level.
func paranoidError(err error) error {
	level := "unknown"
	if b, rerr := os.ReadFile(paranoidFile); rerr == nil {
		level = strings.TrimSpace(string(b))
	}
	return fmt.Errorf("perf_event_open: %w: kernel.perf_event_paranoid is %s; "+
		"recording your own processes needs 2 or lower, user space only (-e cycles:u); the kernel too, 1; -a, 0. "+
		"Lower it as root with `sysctl kernel.perf_event_paranoid=1`, or record as root or with CAP_PERFMON", err, level)
}

// checkFreq refuses a frequency the kernel would refuse, with the limit.
func checkFreq(hz int) error {
	if hz <= 0 {
		return fmt.Errorf("-F %d: the frequency must be positive", hz)
	}
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_max_sample_rate")
	if err != nil {
		return nil // the kernel will say
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil && hz > limit {
		return fmt.Errorf("-F %d exceeds the kernel's limit of %d Hz (kernel.perf_event_max_sample_rate; the kernel lowers it when sampling takes too long)", hz, limit)
	}
	return nil
}

// errRingLimit is matched by the error of a ring buffer the locked-memory
// limit refuses.
var errRingLimit = errors.New("over the locked-memory limit")

// ring is an event's mmapped ring buffer: a metadata page, then the data
// area the kernel writes records into.
type ring struct {
	mem  []byte
	meta *unix.PerfEventMmapPage
	data []byte
}

// mapRing maps a ring buffer of pages data pages (a power of two) for fd.
func mapRing(fd, pages int) (*ring, error) {
	page := os.Getpagesize()
	mem, err := unix.Mmap(fd, 0, (1+pages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("mapping a %d KiB ring buffer: %w (%w): it exceeds kernel.perf_event_mlock_kb; record as root or raise that limit", pages*page/1024, errRingLimit, err)
		}
		return nil, fmt.Errorf("mapping a %d KiB ring buffer: %w", pages*page/1024, err)
	}
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	off, size := meta.Data_offset, meta.Data_size
	if off == 0 { // kernels before 4.1 leave them 0: the data follows the page
		off, size = uint64(page), uint64(pages*page)
	}
	if off+size > uint64(len(mem)) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("ring buffer: the kernel places %d data bytes at %d in a %d-byte mapping", size, off, len(mem))
	}
	return &ring{mem: mem, meta: meta, data: mem[off : off+size]}, nil
}

// head is where the kernel has written up to. Its acquire load orders the
// reads of the records before it after it, as perf_event.h asks.
func (r *ring) head() uint64 {
	return atomic.LoadUint64(&r.meta.Data_head)
}

// drain hands emit every record the kernel has written since the last
// drain, then gives their space back to the kernel.
func (r *ring) drain(scratch *[]byte, emit func([]byte) error) error {
	return r.readTo(r.head(), scratch, emit, true)
}

// readTo hands emit the records from the last drain up to head, and with
// free gives their space back: the release store of tail lets the kernel
// reuse it only after they are read.
func (r *ring) readTo(head uint64, scratch *[]byte, emit func([]byte) error, free bool) error {
	tail, err := readRing(r.data, atomic.LoadUint64(&r.meta.Data_tail), head, scratch, emit)
	if free {
		atomic.StoreUint64(&r.meta.Data_tail, tail)
	}
	return err
}

func (r *ring) close() error {
	return unix.Munmap(r.mem)
}
