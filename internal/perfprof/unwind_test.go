package perfprof_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// A synthetic --call-graph dwarf recording, written with the project's own
// writers: one process whose stacks alternate between functions of an ELF
// file that keep a frame pointer (push rbp; mov rbp,rsp: their .eh_frame
// says CFA = rbp+16 past the prologue) and jitted functions without one
// (sub rsp,32: CFA = rsp+40, rbp left alone), whose only description is
// their UNWINDING_INFO. A frame-pointer walk loses every jitted frame's
// caller; only the CFI gets through.
const (
	dwarfPid = 1<<22 + 7 // beyond any pid_max: no live process's perf map answers
	elfStart = 0x5600_0000_0000
	jitStart = 0x7f00_0000_0000
	fnSize   = 64
	// Where samples' pcs lie in a function: the leaf past its prologue,
	// callers at a return address in the body.
	leafAt, retAt = 8, 20
	stackBase     = 0x7ffc_0000_0000
	// perf record --call-graph dwarf's registers (all but the segment
	// ones) and stack copy.
	regsMask  = 0xff0fff
	stackCopy = 8192
)

// The DWARF register numbers and perf's (perf_regs.h) of x86-64.
const (
	dwRBP, dwRSP, dwRA  = 6, 7, 16
	regBP, regSP, regIP = 6, 7, 8
)

// The recording's features: x86-64, made on a kernel that is not this one
// (no kallsyms to read, so the figures are the unwinding's).
var dwarfFeatures = []perfdata.Feature{
	perfdata.StringFeatureOf(perfdata.FeatureArch, "x86_64"),
	perfdata.StringFeatureOf(perfdata.FeatureOSRelease, "0.0.0"),
}

// frame is one function of a synthetic stack.
type frame struct {
	jitted bool
	fn     int
}

func (f frame) name() string {
	if f.jitted {
		return fmt.Sprintf("jit_%d", f.fn)
	}
	return fmt.Sprintf("elf_%d", f.fn)
}

// pc is an address in f: the ELF file's code starts at elfCode.
func (f frame) pc(elfCode uint64, leaf bool) uint64 {
	base := elfCode
	if f.jitted {
		base = jitStart
	}
	off := uint64(retAt)
	if leaf {
		off = leafAt
	}
	return base + uint64(f.fn)*fnSize + off
}

// dwarfStack is the stack of sample s: depth frames, leaf first. Samples
// share their outer frames, as a program's do, and differ in the inner
// four, which take one of 64 paths, leaves of both kinds.
func dwarfStack(s, depth, nfn int) []frame {
	fr := make([]frame, depth)
	for i := range fr {
		kind, fn := i, i*13
		if i < 4 {
			kind, fn = kind+s, fn+s%64*7
		}
		fr[i] = frame{jitted: kind%2 == 1, fn: fn % nfn}
	}
	return fr
}

// layStack writes the stack fr describes, leaf first, as a stack copy from
// stackBase up, and returns the registers at the leaf. The ELF file's code
// starts at elfCode. ELF frames hold 16
// bytes of locals, then the caller's rbp and the return address, with rbp
// pointing at the saved rbp; jitted frames 32 bytes of locals, then the
// return address. The outermost frame returns to 0.
func layStack(fr []frame, elfCode uint64, mem []byte) (ip, sp, bp uint64) {
	clear(mem)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(mem[addr-stackBase:], v) }
	at := uint64(stackBase)
	fps := make([]uint64, len(fr)) // each ELF frame's rbp; 0 for jitted ones
	for i, f := range fr {
		var ra uint64
		if i+1 < len(fr) {
			ra = fr[i+1].pc(elfCode, false)
		}
		if f.jitted {
			put(at+32, ra)
			at += 40
			continue
		}
		fps[i] = at + 16
		put(at+24, ra)
		at += 32
	}
	// An ELF frame saved the rbp of the next ELF frame out; rbp at the
	// sample is the innermost ELF frame's.
	var outer uint64
	for i := len(fr) - 1; i >= 0; i-- {
		if fps[i] != 0 {
			put(fps[i], outer)
			outer = fps[i]
		}
	}
	return fr[0].pc(elfCode, true), stackBase, outer
}

// The CFI of the test's functions of fnSize bytes: framed sets up a frame
// pointer (push rbp; mov rbp,rsp), frameless only moves the stack pointer
// (sub rsp,32).
var (
	framed = jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: dwRA,
		Initial:      jitdump.CFAProgram{}.DefCFA(dwRSP, 8).Offset(dwRA, 1),
		Instructions: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(dwRBP, 2).AdvanceLoc(3).DefCFARegister(dwRBP)}
	frameless = jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: dwRA,
		Initial:      jitdump.CFAProgram{}.DefCFA(dwRSP, 8).Offset(dwRA, 1),
		Instructions: jitdump.CFAProgram{}.AdvanceLoc(4).DefCFAOffset(40)}
)

// unwindingOf is fi as the UNWINDING_INFO of a function of fnSize bytes.
func unwindingOf(tb testing.TB, fi jitdump.FrameInfo) *jitdump.UnwindingInfo {
	tb.Helper()
	u, err := fi.UnwindingInfo(fnSize)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// writeDWARFRecording writes, in dir, the ELF file (nfn functions), the
// dump (nfn jitted functions) and perf.data with samples, sample s of
// depth(s) frames, and returns perf.data's path.
func writeDWARFRecording(t testing.TB, dir string, samples, nfn int, depth func(s int) int) string {
	t.Helper()
	unwinding := func(fi jitdump.FrameInfo) *jitdump.UnwindingInfo { return unwindingOf(t, fi) }

	fns := make([]jitelf.Function, nfn)
	for i := range fns {
		fns[i] = jitelf.Function{Name: frame{fn: i}.name(), Code: make([]byte, fnSize), Unwind: unwinding(framed)}
	}
	img, lay, err := jitelf.Append(nil, jitelf.Options{}, fns)
	if err != nil {
		t.Fatal(err)
	}
	for i, off := range lay.Offsets {
		if off != uint64(i)*fnSize+lay.Offsets[0] {
			t.Fatalf("function %d at %#x in the image: not packed %d bytes apart", i, off, fnSize)
		}
	}
	elfPath := filepath.Join(dir, "libsynth.so")
	if err := os.WriteFile(elfPath, img, 0o644); err != nil {
		t.Fatal(err)
	}

	dumpPath := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", dwarfPid))
	df, err := os.Create(dumpPath)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	start := jitdump.Now()
	jw, err := jitdump.NewWriter(df, jitdump.Header{Pid: dwarfPid})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nfn {
		fn := &jitdump.Function{Name: frame{jitted: true, fn: i}.name(), Addr: jitStart + uint64(i)*fnSize,
			Code: make([]byte, fnSize), Unwind: unwinding(frameless)}
		if _, err := jw.Load(fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := jw.Close(); err != nil {
		t.Fatal(err)
	}

	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod |
			perfdata.SampleRegsUser | perfdata.SampleStackUser,
		Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask |
			perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
		ClockID: unix.CLOCK_MONOTONIC, SampleRegsUser: regsMask, SampleStackUser: stackCopy, IDs: []uint64{1}}
	data := filepath.Join(dir, "perf.data")
	w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: dwarfFeatures})
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(typ perfdata.RecordType, misc uint16) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: attr, Misc: misc}
	}
	tr := perfdata.Trailer{Pid: dwarfPid, Tid: dwarfPid, Time: start - 1}
	mmap := func(addr, size uint64, file string, id []byte) *perfdata.Mmap2 {
		m := &perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2, perfdata.MiscUser), Pid: dwarfPid, Tid: dwarfPid,
			Addr: addr, Len: size, Maj: 8, Min: 1, Ino: 42, Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE,
			Filename: file, Trailer: tr}
		if id != nil {
			m.Misc |= perfdata.MiscMmapBuildID
			m.BuildID = id
		}
		return m
	}
	for _, rec := range []perfdata.Record{
		&perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm, perfdata.MiscCommExec), Pid: dwarfPid, Tid: dwarfPid, Comm: "synth", Trailer: tr},
		mmap(elfStart, uint64(len(img)), elfPath, lay.BuildID[:]),
		mmap(jitStart, uint64(nfn)*fnSize, "//anon", nil),
		mmap(0x7fff_0000_0000, 0x1000, dumpPath, nil),
	} {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	mem := make([]byte, stackCopy)
	regs := make([]uint64, 20) // the bits of regsMask
	end := jitdump.Now()
	for s := range samples {
		ip, sp, bp := layStack(dwarfStack(s, depth(s), nfn), elfStart+lay.Offsets[0], mem)
		// REGS_USER holds the registers in bit order: bp, sp and ip are
		// bits 6 to 8, all set below them.
		regs[regBP], regs[regSP], regs[regIP] = bp, sp, ip
		smp := &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample, perfdata.MiscUser), IP: ip, Pid: dwarfPid, Tid: dwarfPid,
			Time: end + uint64(s)*1000, Period: 1, RegsABI: perfdata.RegsABI64, RegsUser: regs,
			StackUserSize: stackCopy, StackUser: mem}
		if err := w.WriteRecord(smp); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// stackNames is a sample's function names, leaf first.
func stackNames(s *profile.Sample) string {
	var names []string
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			names = append(names, l.Function.Name)
		}
	}
	return strings.Join(names, ";")
}

// TestUnwindSynthetic: every sample of the synthetic recording comes out
// with the whole stack it was written with, through ELF frames (the file's
// .eh_frame) and frameless jitted ones (their UNWINDING_INFO).
func TestUnwindSynthetic(t *testing.T) {
	const samples, nfn = 64, 50
	for _, tc := range []struct {
		name  string
		depth func(s int) int
	}{
		{"1", func(int) int { return 1 }},
		{"2", func(int) int { return 2 }},
		{"100", func(int) int { return 100 }},
		// Stacks that grow and shrink from one sample to the next.
		{"1 to 9", func(s int) int { return 1 + s*5%9 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := perfprof.Run(perfprof.Options{Input: writeDWARFRecording(t, t.TempDir(), samples, nfn, tc.depth), PerFunction: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Kept != samples || res.Unwound != samples || res.CutShort != 0 {
				t.Errorf("%d samples kept, %d unwound, %d cut short; want %d, all unwound, none cut short", res.Kept, res.Unwound, res.CutShort, samples)
			}
			want := map[string]int64{}
			for s := range samples {
				var names []string
				for _, f := range dwarfStack(s, tc.depth(s), nfn) {
					names = append(names, f.name())
				}
				want[strings.Join(names, ";")]++
			}
			got := map[string]int64{}
			for _, s := range res.Profile.PProf().Sample {
				got[stackNames(s)] += s.Value[0]
			}
			for st, n := range want {
				if got[st] != n {
					t.Errorf("%d samples of %s, want %d", got[st], st, n)
				}
			}
			for st, n := range got {
				if want[st] == 0 {
					t.Errorf("%d samples of %s, written with none", n, st)
				}
			}
		})
	}
}

// BenchmarkUnwind runs the analysis of synthetic --call-graph dwarf
// recordings of 2,000 samples (8 KiB stack copies, 16 MB) whose stacks are
// depth frames deep, and reports the cost of an unwound frame, symbolized
// and merged, fixed costs included: the deeper stacks show what a frame
// costs.
func BenchmarkUnwind(b *testing.B) {
	const samples, nfn = 2000, 500
	for _, depth := range []int{8, 64, 200} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			data := writeDWARFRecording(b, b.TempDir(), samples, nfn, func(int) int { return depth })
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			mallocs := ms.Mallocs
			for b.Loop() {
				res, err := perfprof.Run(perfprof.Options{Input: data, PerFunction: true})
				if err != nil {
					b.Fatal(err)
				}
				if res.Unwound != samples || slices.ContainsFunc(res.Profile.PProf().Sample, func(s *profile.Sample) bool { return len(s.Location) != depth }) {
					b.Fatalf("%d of %d samples unwound, or not all %d frames deep", res.Unwound, samples, depth)
				}
			}
			runtime.ReadMemStats(&ms)
			frames := float64(b.N * samples * depth)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/frames, "ns/frame")
			b.ReportMetric(float64(ms.Mallocs-mallocs)/frames, "allocs/frame")
		})
	}
}

// A recording of user stacks from a machine whose frames the walker does
// not know is refused, naming the file, rather than unwound into garbage:
// arm64's with a word of its own, since it is the next to come.
func TestUnwindArchRefused(t *testing.T) {
	for _, tc := range []struct{ arch, want string }{
		{"aarch64", "arm64 stacks are not unwound yet"},
		{"riscv64", `x86_64 recordings only, not for "riscv64"`},
		{"x86_64", ""},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
				SampleType:     perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleRegsUser | perfdata.SampleStackUser,
				SampleRegsUser: regsMask, SampleStackUser: stackCopy, IDs: []uint64{1}}
			data := filepath.Join(t.TempDir(), "perf.data")
			w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr},
				Features: []perfdata.Feature{perfdata.StringFeatureOf(perfdata.FeatureArch, tc.arch)}})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = perfprof.Run(perfprof.Options{Input: data})
			if tc.want == "" {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), data) {
				t.Errorf("err = %v; want %q and the file's name", err, tc.want)
			}
		})
	}
}
