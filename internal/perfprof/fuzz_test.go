package perfprof_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
)

// The fuzzed recording's process, files and places. The process lies
// beyond pid_max, so no live process's files answer for it; the dump's
// marker names a directory that is nowhere, so the dump is found beside
// the recording, by its name; the ELF file is found in Files.Root, so the
// recording names it by the same path in every fuzzing process.
const (
	fuzzPid     = 1<<22 + 99
	fuzzMarker  = "/nonexistent-jitprof-fuzz/jit-4194403.dump" // fuzzPid's
	fuzzELF     = "/lib/libfuzz.so"
	fuzzELFAt   = 0x5000_0000 // where the ELF file's first byte is
	fuzzELFSize = 0x1000      // its mapping's length
	fuzzJIT     = 0x7f00_0000_0000
	fuzzMapped  = 0x6000_0000 // what the perf map names
	fuzzStack   = 512         // the DWARF seed's stack copy
	fuzzStackAt = 0x7ffc_0000_0000
)

// fuzzFiles are the files of one fuzzed run: perf.data, the dump and the
// perf map beside it, and the ELF file in the copies' root.
type fuzzFiles struct {
	dir, data, dump, perfMap, elf string
	files                         *contract.Files
	proc                          procfs.FS
	open                          []*os.File // of data, dump, perfMap and elf
}

func newFuzzFiles(tb testing.TB) *fuzzFiles {
	dir := tb.TempDir()
	ff := &fuzzFiles{
		dir:     dir,
		data:    filepath.Join(dir, "perf.data"),
		dump:    filepath.Join(dir, filepath.Base(fuzzMarker)),
		perfMap: filepath.Join(dir, fmt.Sprintf("perf-%d.map", fuzzPid)),
		elf:     filepath.Join(dir, "root", fuzzELF),
		files:   &contract.Files{Root: filepath.Join(dir, "root"), Kallsyms: filepath.Join(dir, "kallsyms")},
		proc:    procfs.FS(filepath.Join(dir, "proc")), // no process runs there
	}
	if fmt.Sprintf("jit-%d.dump", fuzzPid) != filepath.Base(fuzzMarker) {
		tb.Fatalf("the marker %s does not name process %d's dump", fuzzMarker, fuzzPid)
	}
	for _, d := range []string{filepath.Dir(ff.elf), string(ff.proc)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	// The recorded kernel's symbols: a copy, so that no run reads the
	// running kernel's.
	if err := os.WriteFile(ff.files.Kallsyms, []byte("ffffffff81000000 T _stext\nffffffff81000100 T do_syscall_64\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	for _, path := range []string{ff.data, ff.dump, ff.perfMap, ff.elf} {
		f, err := os.Create(path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { f.Close() })
		ff.open = append(ff.open, f)
	}
	return ff
}

// write puts the bytes of a run in the files, overwritten in place: a file
// truncated to nothing and written again is flushed to disk when closed
// (ext4's auto_da_alloc), a hundred times slower.
func (ff *fuzzFiles) write(tb testing.TB, data, dump, perfMap, elf []byte) {
	for i, b := range [][]byte{data, dump, perfMap, elf} {
		if _, err := ff.open[i].WriteAt(b, 0); err != nil {
			tb.Fatal(err)
		}
		if err := ff.open[i].Truncate(int64(len(b))); err != nil {
			tb.Fatal(err)
		}
	}
}

// recordingBytes is what perfdata's writer writes of recs.
func recordingBytes(tb testing.TB, attrs []*perfdata.Attr, features []perfdata.Feature, recs []perfdata.Record) []byte {
	path := filepath.Join(tb.TempDir(), "perf.data")
	w, err := perfdata.Create(path, perfdata.Options{Attrs: attrs, Features: features})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzSeedFiles writes, with the project's writers, the dump, the perf map
// and the ELF file both seeds sample: jitted code with lines, inlined
// methods, CFI, a move, method names and stage marks; an ELF file whose
// functions have CFI; a perf map of two functions.
// The ELF file's functions, of fnSize bytes, are at elfCode in it.
func fuzzSeedFiles(tb testing.TB) (dump, perfMap, elf []byte, elfCode, ts uint64) {
	var err error
	unwinding := func(fi jitdump.FrameInfo) *jitdump.UnwindingInfo { return unwindingOf(tb, fi) }

	elf, lay, err := jitelf.Append(nil, jitelf.Options{}, []jitelf.Function{
		{Name: "elf_0", Code: make([]byte, fnSize), Unwind: unwinding(framed)},
		{Name: "_ZN4elf14mangledEv", Code: make([]byte, fnSize), Unwind: unwinding(framed)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if elfCode = lay.Offsets[0]; lay.Offsets[1] != elfCode+fnSize || lay.Size > fuzzELFSize {
		tb.Fatalf("the ELF file's functions are at %#x of %d bytes, not back to back in at most %d", lay.Offsets, lay.Size, fuzzELFSize)
	}

	dumpPath := filepath.Join(tb.TempDir(), "jit.dump")
	err = synth.WriteDump(dumpPath, fuzzPid, func(w *jitdump.Writer) error {
		if err := w.Stage("warmup"); err != nil {
			return err
		}
		index, err := w.Load(&jitdump.Function{Name: "LWork;fib(I)J", Addr: fuzzJIT, Code: make([]byte, fnSize),
			Lines:  []jitdump.DebugEntry{{Addr: fuzzJIT, Line: 10, File: "Work.java"}, {Addr: fuzzJIT + 0x10, Line: 11, File: "Work.java"}},
			Unwind: unwinding(frameless)})
		if err != nil {
			return err
		}
		in := &jitdump.InlineInfo{CodeIndex: index, CodeAddr: fuzzJIT + 0x10, CodeSize: 0x10, MethodID: 2, ParentID: 1, RootID: 1,
			Name: "LWork;add(II)I", File: "Work.java", Lines: []jitdump.InlineLine{{Addr: fuzzJIT + 0x10, Line: 20}}}
		in.Timestamp = jitdump.Now()
		if err := w.WriteRecord(in); err != nil {
			return err
		}
		if _, err := w.Load(&jitdump.Function{Name: "JS:*hot /app/x.js:3:14", Addr: fuzzJIT + fnSize, Code: make([]byte, fnSize),
			Unwind: unwinding(framed)}); err != nil {
			return err
		}
		moved, err := w.Load(&jitdump.Function{Name: "Interpreter", Addr: fuzzJIT + 2*fnSize, Code: make([]byte, fnSize)})
		if err != nil {
			return err
		}
		if err := w.Move(moved, fuzzJIT+2*fnSize, fuzzJIT+3*fnSize, fnSize); err != nil {
			return err
		}
		names := &jitdump.MethodNames{Class: "LWork;", Methods: []uint64{0x1234}, Names: []string{"run()V"}}
		names.Timestamp = jitdump.Now()
		if err := w.WriteRecord(names); err != nil {
			return err
		}
		if err := w.Stage("steady"); err != nil {
			return err
		}
		return w.Accounting(true)
	})
	if err != nil {
		tb.Fatal(err)
	}
	if dump, err = os.ReadFile(dumpPath); err != nil {
		tb.Fatal(err)
	}
	perfMap = fmt.Appendf(nil, "%x 40 mapped_one\n%x 40 mapped two\n", fuzzMapped, fuzzMapped+0x40)
	return dump, perfMap, elf, elfCode, jitdump.Now()
}

// fuzzCallchainSeed is a recording of call chains through jitted code, the
// ELF file, the perf map and the kernel.
func fuzzCallchainSeed(tb testing.TB, elfCode uint64) []byte {
	rec := synth.NewRecording()
	rec.Comm(fuzzPid, fuzzPid, "vm")
	rec.Marker(fuzzPid, fuzzMarker)
	rec.Map(fuzzPid, fuzzELFAt, fuzzELFSize, fuzzELF)
	rec.Map(fuzzPid, fuzzJIT, 0x1000, "//anon")
	rec.Map(fuzzPid, fuzzMapped, 0x1000, "//anon")
	rec.Now = jitdump.Now() + 1e6 // after the dump's loads
	for _, s := range [][]uint64{
		{fuzzJIT + 0x14, fuzzJIT + fnSize + 8, fuzzELFAt + elfCode + 0x20},
		{fuzzJIT + 3*fnSize + 4, fuzzJIT + 8},
		{fuzzMapped + 0x44, fuzzMapped + 8, fuzzELFAt + elfCode + fnSize + 4},
		{0xffffffff81000104, fuzzJIT + 4},
	} {
		rec.Sample(fuzzPid, s[0], s[1:]...)
	}
	path := filepath.Join(tb.TempDir(), "perf.data")
	if err := rec.Write(path); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fuzzDWARFSeed is a --call-graph dwarf recording: a jitted leaf without a
// frame pointer called by an ELF function that keeps one, called by the
// interpreter, whose frame holds a Method* the dump names.
func fuzzDWARFSeed(tb testing.TB, elfCode, ts uint64) []byte {
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod |
			perfdata.SampleRegsUser | perfdata.SampleStackUser,
		Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask |
			perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
		ClockID: unix.CLOCK_MONOTONIC, SampleRegsUser: regsMask, SampleStackUser: fuzzStack, IDs: []uint64{1}}
	hdr := func(typ perfdata.RecordType, misc uint16) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: attr, Misc: misc}
	}
	tr := perfdata.Trailer{Pid: fuzzPid, Tid: fuzzPid, Time: ts - 1e6, ID: 1}
	mmap := func(addr, size uint64, file string) *perfdata.Mmap2 {
		return &perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2, perfdata.MiscUser), Pid: fuzzPid, Tid: fuzzPid,
			Addr: addr, Len: size, Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Filename: file, Trailer: tr}
	}
	recs := []perfdata.Record{
		&perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm, perfdata.MiscCommExec), Pid: fuzzPid, Tid: fuzzPid, Comm: "java", Trailer: tr},
		mmap(fuzzELFAt, fuzzELFSize, fuzzELF),
		mmap(fuzzJIT, 0x1000, "//anon"),
		mmap(synth.MarkerAddr, 0x1000, fuzzMarker),
	}
	// The stack from fuzzStackAt up: the jitted leaf's 32 bytes of
	// locals and its return address into elf_0; elf_0's 16 bytes of
	// locals, the interpreter's rbp and the return address into it; the
	// interpreter's frame, its Method* 24 bytes below its rbp.
	mem := make([]byte, fuzzStack)
	put := func(at, v uint64) { binary.LittleEndian.PutUint64(mem[at:], v) }
	put(32, fuzzELFAt+elfCode+retAt)
	put(40+16, fuzzStackAt+0x100) // elf_0's saved rbp: the interpreter's
	put(40+24, fuzzJIT+3*fnSize+retAt)
	put(0x100-24, 0x1234)
	regs := make([]uint64, 20) // the bits of regsMask
	regs[regBP], regs[regSP], regs[regIP] = fuzzStackAt+40+16, fuzzStackAt, fuzzJIT+leafAt
	for i := range 3 {
		recs = append(recs, &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample, perfdata.MiscUser), IP: regs[regIP], Pid: fuzzPid, Tid: fuzzPid,
			Time: ts + uint64(i)*1000, Period: 1, RegsABI: perfdata.RegsABI64, RegsUser: regs, StackUserSize: fuzzStack, StackUser: mem})
	}
	return recordingBytes(tb, []*perfdata.Attr{attr}, dwarfFeatures, recs)
}

// fuzzOffCPUSeed is a recording of record --off-cpu's events, for the
// off-CPU and wall-clock views.
func fuzzOffCPUSeed(tb testing.TB) []byte {
	ev := newOffCPUEvents(250_000)
	const in, out = 0, perfdata.MiscSwitchOut
	const s = 1_000_000_000
	return recordingBytes(tb, []*perfdata.Attr{ev.cpu, ev.sw}, nil, []perfdata.Record{
		&perfdata.Comm{RecordHeader: perfdata.RecordHeader{Attr: ev.cpu}, Pid: 7, Tid: 7, Comm: "main", Trailer: perfdata.Trailer{Pid: 7, Tid: 7, Time: 1, ID: 1}},
		ev.sample(ev.cpu, 7, s, 0x1000), ev.sample(ev.cpu, 7, s+250_000, 0x1000),
		ev.switchRec(7, 2*s+5_000_000, in), ev.sample(ev.sw, 7, 2*s, 0x2000), ev.switchRec(7, 2*s+100, out),
		ev.sample(ev.sw, 7, 3*s+100_000, 0x1000), ev.switchRec(7, 3*s+100_010, out|perfdata.MiscSwitchOutPreempt), ev.switchRec(7, 3*s+120_000, in),
		ev.sample(ev.cpu, 7, 6*s, 0x1000),
	})
}

// FuzzRun: a recording, a dump, a perf map and an ELF file of any bytes,
// analysed end to end with the options flags' bits choose, give a valid
// profile or an error that names one of the files, never a panic nor a
// hang; the profile's counts agree with one another and are bounded by the
// recording's size, as is what the analysis allocates.
func FuzzRun(f *testing.F) {
	ff := newFuzzFiles(f)
	dump, perfMap, elf, elfCode, ts := fuzzSeedFiles(f)
	callchains, dwarf, offCPU := fuzzCallchainSeed(f, elfCode), fuzzDWARFSeed(f, elfCode, ts), fuzzOffCPUSeed(f)
	for _, seed := range []struct {
		data  []byte
		flags uint8
	}{
		{callchains, 0}, {callchains, 0x0f}, {callchains, 0x41},
		{dwarf, 0}, {dwarf, 0x07},
		{offCPU, 0x10}, {offCPU, 0x29},
	} {
		f.Add(seed.data, dump, perfMap, elf, seed.flags)
	}
	f.Add(callchains, dump[:len(dump)-7], perfMap[:len(perfMap)-3], elf[:len(elf)/2], uint8(0))
	f.Cleanup(perfprof.SkipCollections())
	f.Fuzz(func(t *testing.T, data, dump, perfMap, elf []byte, flags uint8) {
		ff.write(t, data, dump, perfMap, elf)
		opts := perfprof.Options{Input: ff.data, PerFunction: flags&1 != 0, LeafAddresses: flags&2 != 0,
			NoInline: flags&4 != 0, Timeline: flags&8 != 0, View: perfprof.View(flags>>4&3) % 3}
		opts.Files = ff.files
		opts.Host = jitsources.Host{Proc: ff.proc}
		if flags&0x40 != 0 {
			opts.Filter.Stage = "steady"
		}
		opts.Warn = func(error) {}

		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		res, err := perfprof.Run(opts)
		runtime.ReadMemStats(&ms)
		size := len(data) + len(dump) + len(perfMap) + len(elf)
		// Buffers cost a fixed amount; beyond that, allocation must
		// follow the input, not the sizes it claims.
		if got, limit := ms.TotalAlloc-before, uint64(16<<20+256*size); got > limit {
			t.Errorf("analysing %d bytes allocated %d bytes", size, got)
		}
		if err != nil {
			if !strings.Contains(err.Error(), ff.dir) {
				t.Fatalf("the error names no file: %v", err)
			}
			return
		}
		// A malformed sample that cannot be told to be the event's
		// is not among Samples.
		if res.Kept > res.Samples || res.Jitted > res.Kept || res.Samples > len(data)/8 || res.Malformed > len(data)/8 {
			t.Fatalf("%d samples read of %d bytes, %d kept, %d jitted, %d malformed", res.Samples, len(data), res.Kept, res.Jitted, res.Malformed)
		}
		p := res.Profile.PProf()
		if err := p.CheckValid(); err != nil {
			t.Fatalf("invalid profile: %v", err)
		}
		var n int64
		for _, s := range p.Sample {
			n += s.Value[0]
		}
		// The other views count blocked intervals, some without a
		// sample (too short to keep their stacks), and leave out the
		// samples of none.
		if opts.View == perfprof.CPUView && n != int64(res.Kept) {
			t.Fatalf("the profile counts %d samples, %d were kept", n, res.Kept)
		}
		// Each location is a frame of a kept sample: its ip, a word of
		// its call chain, or one of its stack copy.
		if len(p.Location) > len(data)/8 {
			t.Fatalf("%d locations from a %d-byte recording", len(p.Location), len(data))
		}
	})
}
