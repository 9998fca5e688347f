package record

import (
	"debug/elf"
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/hostelf"
	"github.com/jitprof/jitprof/perfdata"
)

func TestOpenError(t *testing.T) {
	a := &perfdata.Attr{Type: unix.PERF_TYPE_HARDWARE}
	for _, tc := range []struct {
		err  error
		pid  int
		want []string
		is   error
	}{
		{unix.EACCES, 42, []string{"kernel.perf_event_paranoid is", "sysctl kernel.perf_event_paranoid=1", "CAP_PERFMON"}, unix.EACCES},
		{unix.EPERM, -1, []string{"kernel.perf_event_paranoid is", "-a, 0"}, unix.EPERM},
		{unix.ESRCH, 42, []string{"thread 42 on CPU 1", "exited"}, ErrGone},
		{unix.ENOENT, 42, []string{"this machine does not count", "-e cpu-clock"}, unix.ENOENT},
		{unix.EMFILE, -1, []string{"every process on CPU 1", "ulimit -n"}, unix.EMFILE},
		{unix.EINVAL, 42, []string{"perf_event_open for thread 42"}, unix.EINVAL},
	} {
		err := openError(a, tc.pid, 1, tc.err)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not say %q", tc.err, err, w)
			}
		}
		if !errors.Is(err, tc.is) {
			t.Errorf("%v: %q does not match %v", tc.err, err, tc.is)
		}
	}
}

func TestParseEvent(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Event
		err  string
	}{
		{in: "cycles", want: Event{Name: "cycles", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES}},
		{in: "cpu-clock:u", want: Event{Name: "cpu-clock:u", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, ExcludeKernel: true}},
		{in: "cpu-clock:k", err: "only u"},
		{in: "cycle", err: "not one of"},
	} {
		got, err := ParseEvent(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseCallGraph(t *testing.T) {
	for _, tc := range []struct {
		in    string
		mode  CallGraph
		size  uint32
		wrong string // in the error; "" for none
	}{
		{in: "fp", mode: FramePointers},
		{in: "dwarf", mode: DWARF, size: DefaultStackSize},
		{in: "dwarf,16384", mode: DWARF, size: 16384},
		{in: "dwarf,0x1000", mode: DWARF, size: 4096},
		{in: "dwarf,1", mode: DWARF, size: 8},         // rounded up, as perf does
		{in: "dwarf,65528", mode: DWARF, size: 65528}, // the most a record holds
		{in: "dwarf,65521", mode: DWARF, size: 65528}, // rounds up to it
		{in: "dwarf,65529", wrong: "between 1 and 65528"},
		{in: "dwarf,0", wrong: "between 1 and 65528"},
		{in: "dwarf,", wrong: "between 1 and 65528"},
		{in: "dwarf,8k", wrong: "between 1 and 65528"},
		{in: "dwarf,-8", wrong: "between 1 and 65528"},
		{in: "fp,8", wrong: "fp takes no size"},
		{in: "lbr", wrong: "fp or dwarf[,SIZE]"},
		{in: "", wrong: "fp or dwarf[,SIZE]"},
	} {
		mode, size, err := ParseCallGraph(tc.in)
		if tc.wrong != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wrong) || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.in)) {
				t.Errorf("%q: %v, want an error naming it and saying %q", tc.in, err, tc.wrong)
			}
			continue
		}
		if err != nil || mode != tc.mode || size != tc.size {
			t.Errorf("%q: %v, %d, %v; want %v, %d", tc.in, mode, size, err, tc.mode, tc.size)
		}
	}
}

// TestCallGraphAttr: the attr of each call graph mode asks the kernel for
// what perf's does, and the kernel gets every field of it.
func TestCallGraphAttr(t *testing.T) {
	const regs = 0xff0fff
	dwarfBits := perfdata.SampleCallchain | perfdata.SampleRegsUser | perfdata.SampleStackUser
	dwarfFlags := perfdata.AttrExcludeCallchainUser | perfdata.AttrMmapData
	for _, tc := range []struct {
		cg        CallGraph
		st        perfdata.SampleType
		flags     perfdata.AttrFlags
		regs      uint64
		stackSize uint32
	}{
		{cg: NoCallGraph},
		{cg: FramePointers, st: perfdata.SampleCallchain},
		{cg: DWARF, st: dwarfBits, flags: dwarfFlags, regs: regs, stackSize: 16384},
	} {
		a := newAttr(Event{Type: unix.PERF_TYPE_SOFTWARE}, attrConfig{freq: 99, callGraph: tc.cg, regs: regs, stackSize: 16384})
		if a.SampleType&dwarfBits != tc.st || a.Flags&dwarfFlags != tc.flags || a.SampleRegsUser != tc.regs || a.SampleStackUser != tc.stackSize {
			t.Errorf("call graph %d: sample_type %#x, flags %#x, regs %#x, stack %d; want %#x, %#x, %#x, %d", tc.cg,
				uint64(a.SampleType&dwarfBits), uint64(a.Flags&dwarfFlags), a.SampleRegsUser, a.SampleStackUser, uint64(tc.st), uint64(tc.flags), tc.regs, tc.stackSize)
		}
		ka := kernelAttr(a)
		if ka.Sample_type != uint64(a.SampleType) || ka.Bits != uint64(a.Flags) || ka.Sample_regs_user != a.SampleRegsUser || ka.Sample_stack_user != a.SampleStackUser {
			t.Errorf("call graph %d: the kernel's attr %+v differs from %+v", tc.cg, ka, a)
		}
	}
	// perf_event_attr's exclude_callchain_user is bit 22 of its flags word.
	if perfdata.AttrExcludeCallchainUser != 1<<22 || perfdata.AttrMmapData != 1<<17 {
		t.Errorf("exclude_callchain_user %#x, mmap_data %#x: not perf_event.h's bits", uint64(perfdata.AttrExcludeCallchainUser), uint64(perfdata.AttrMmapData))
	}
}

func TestDWARFRegs(t *testing.T) {
	for _, tc := range []struct {
		m     elf.Machine
		mask  uint64
		wrong bool
	}{
		{m: elf.EM_X86_64, mask: 0xff0fff},
		{m: elf.EM_AARCH64, mask: 0x1ffffffff},
		{m: elf.EM_RISCV, wrong: true},
	} {
		mask, err := dwarfRegs(tc.m)
		if (err != nil) != tc.wrong || mask != tc.mask {
			t.Errorf("%v: %#x, %v; want %#x", tc.m, mask, err, tc.mask)
		}
	}
	// The registers an unwinder starts from are among the host's.
	machine, _ := hostelf.Machine()
	mask, err := dwarfRegs(machine)
	if err != nil {
		t.Skipf("host %v: %v", machine, err)
	}
	sp, ip := perfdata.RegX86SP, perfdata.RegX86IP
	if machine == elf.EM_AARCH64 {
		sp, ip = perfdata.RegARM64SP, perfdata.RegARM64PC
	}
	if mask&(1<<sp) == 0 || mask&(1<<ip) == 0 {
		t.Errorf("mask %#x lacks the stack pointer or the pc", mask)
	}
}

// TestFullStack holds fullStack, which walks a sample's fields itself,
// against perfdata's decoding, on samples of the DWARF attr in every shape.
func TestFullStack(t *testing.T) {
	a := newAttr(Event{Type: unix.PERF_TYPE_SOFTWARE}, attrConfig{freq: 99, callGraph: DWARF, regs: 0xff0fff, stackSize: 64})
	a.IDs = []uint64{1}
	regs := make([]uint64, 20)
	stack := make([]byte, 64)
	for _, tc := range []struct {
		name string
		s    perfdata.Sample
		full bool
	}{
		{"full copy", perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: 64, StackUser: stack}, true},
		{"full copy, kernel frames", perfdata.Sample{Callchain: []uint64{perfdata.ContextKernel, 0xffffffff81000000, 0xffffffff81000010},
			RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: 64, StackUser: stack}, true},
		{"part of the copy", perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: 64, StackUser: stack[:56]}, false},
		{"nothing copied", perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: 64}, false},
		{"kernel thread", perfdata.Sample{RegsABI: perfdata.RegsABINone}, false},
		{"copy cut to fit the record", perfdata.Sample{RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: 32, StackUser: stack[:32]}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			s.Attr, s.ID = a, 1
			rec, err := perfdata.AppendRecord(nil, &s)
			if err != nil {
				t.Fatal(err)
			}
			if got := fullStack(rec, a); got != tc.full {
				t.Errorf("fullStack %t, want %t", got, tc.full)
			}
			for n := 8; n < len(rec); n += 8 { // cut short: never a panic
				fullStack(rec[:n], a)
			}
		})
	}
}
