package symbolize

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// The recorded pids lie beyond the largest pid_max (1<<22), so that no perf
// map of a live process, in /tmp or under /proc/PID/root, answers for them.
const (
	p1 = 1<<22 + 1 + iota
	p2
	th1 // a thread of p1
)

// kernelStart is where the samples the tests write are kernel samples.
const kernelStart = 0xffffffff80000000

// testAttr is the one event of the recordings, timed as jitprof records.
var testAttr = &perfdata.Attr{
	Type: 1, SamplePeriod: 1,
	SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod,
	Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask |
		perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
	ClockID: unix.CLOCK_MONOTONIC,
	IDs:     []uint64{1},
}

func header(typ perfdata.RecordType, misc uint16) perfdata.RecordHeader {
	return perfdata.RecordHeader{Type: typ, Attr: testAttr, Misc: misc}
}

func trailer(pid, tid uint32, t uint64) perfdata.Trailer {
	return perfdata.Trailer{Pid: pid, Tid: tid, Time: t}
}

// mmap is an executable mapping of file by process pid at time t.
func mmap(pid uint32, t, addr, size uint64, file string) *perfdata.Mmap2 {
	return &perfdata.Mmap2{RecordHeader: header(perfdata.TypeMmap2, perfdata.MiscUser), Pid: pid, Tid: pid,
		Addr: addr, Len: size, Maj: 8, Min: 1, Ino: madeUpIno, Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE,
		Filename: file, Trailer: trailer(pid, pid, t)}
}

// marker is the mapping of a dump's first page by which a runtime marks it.
func marker(pid uint32, t uint64, path string) *perfdata.Mmap2 {
	return mmap(pid, t, 0x7fff00000000, 0x1000, path)
}

func byThread(tid uint32, m *perfdata.Mmap2) *perfdata.Mmap2 {
	m.Tid, m.Trailer.Tid = tid, tid
	return m
}

func withPgoff(pgoff uint64, m *perfdata.Mmap2) *perfdata.Mmap2 {
	m.Pgoff = pgoff
	return m
}

func withBuildID(id []byte, m *perfdata.Mmap2) *perfdata.Mmap2 {
	m.Misc |= perfdata.MiscMmapBuildID
	m.BuildID = id
	return m
}

// dataMap is a mapping perf records for data addresses (perf record -d).
func dataMap(m *perfdata.Mmap2) *perfdata.Mmap2 {
	m.Misc |= perfdata.MiscMmapData
	m.Prot = unix.PROT_READ
	return m
}

// mmap1 is a PERF_RECORD_MMAP, as older kernels and perf's own synthesized
// records have.
func mmap1(pid uint32, t, addr, size uint64, file string) *perfdata.Mmap {
	return &perfdata.Mmap{RecordHeader: header(perfdata.TypeMmap, perfdata.MiscUser), Pid: pid, Tid: pid,
		Addr: addr, Len: size, Filename: file, Trailer: trailer(pid, pid, t)}
}

func kernelMap() *perfdata.Mmap {
	return &perfdata.Mmap{RecordHeader: header(perfdata.TypeMmap, perfdata.MiscKernel), Pid: math.MaxUint32,
		Addr: 0xffffffff81000000, Len: 0x1000000, Pgoff: 0xffffffff81000000, Filename: "[kernel.kallsyms]_text"}
}

func commRec(pid, tid uint32, t uint64, name string, exec bool) *perfdata.Comm {
	var misc uint16
	if exec {
		misc = perfdata.MiscCommExec
	}
	return &perfdata.Comm{RecordHeader: header(perfdata.TypeComm, misc), Pid: pid, Tid: tid, Comm: name, Trailer: trailer(pid, tid, t)}
}

// task is a FORK or EXIT of thread tid of process pid, made by (or the
// child of) thread ptid of process ppid.
func task(typ perfdata.RecordType, pid, ppid, tid, ptid uint32, t uint64) *perfdata.Task {
	return &perfdata.Task{RecordHeader: header(typ, 0), Pid: pid, PPid: ppid, Tid: tid, PTid: ptid, Time: t, Trailer: trailer(pid, tid, t)}
}

// synthesized marks a FORK as perf's description of a running process.
func synthesized(t *perfdata.Task) *perfdata.Task {
	t.Misc |= miscForkExec
	return t
}

func timeConv(shift, mult, zero uint64) *perfdata.TimeConv {
	return &perfdata.TimeConv{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeTimeConv}, TimeShift: shift, TimeMult: mult, TimeZero: zero}
}

// load is a CODE_LOAD at time t (in the dump's clock); its pid is the
// dump header's.
func load(t, index, addr, size uint64, name string) *jitdump.CodeLoad {
	return &jitdump.CodeLoad{RecordHeader: jitdump.RecordHeader{Timestamp: t}, VMA: addr, CodeAddr: addr,
		CodeSize: size, CodeIndex: index, Name: name, Code: bytes.Repeat([]byte{0x90}, int(size))}
}

func move(t, index, from, to, size uint64) *jitdump.CodeMove {
	return &jitdump.CodeMove{RecordHeader: jitdump.RecordHeader{Timestamp: t}, VMA: to,
		OldCodeAddr: from, NewCodeAddr: to, CodeSize: size, CodeIndex: index}
}

// testDump is a jitdump to write, at path under the test's directory.
type testDump struct {
	path  string
	pid   uint32 // the header's, and the records'
	flags uint64
	recs  []jitdump.Record
}

// sample is a sample of the recording and what Lookup must find for it:
// "name@module", module relative to the test's directory, "@module" for
// unnamed code in a module, "" for none.
type sample struct {
	pid      uint32
	ip, time uint64
	want     string
}

// ruleQuery asks UnwindRule for the frame Lookup finds at ip of pid at
// time; want is the rule's String, "" for none.
type ruleQuery struct {
	pid      uint32
	ip, time uint64
	want     string
}

type commQuery struct {
	tid  uint32
	time uint64
	want string
}

type buildCase struct {
	name string
	// records are written in order, then the samples; "$DIR" in a file
	// name, in a build-id's and in opts' directories is the test's
	// directory.
	records  []perfdata.Record
	buildIDs []perfdata.BuildID
	dumps    []testDump
	files    map[string]string // other files under the directory: perf maps, ELF files
	opts     Options
	samples  []sample
	comms    []commQuery
	rules    []ruleQuery
	warns    []string // what each warning holds, in order
}

func TestBuild(t *testing.T) {
	const (
		elfBase   = 0x560000000000
		injected  = 0x7f0000000000 // one function of the ELF file, mapped as perf inject maps it
		elfAgain  = 0x580000000000
		elfOther  = 0x570000000000
		elfBeyond = 0x590000000000 // a mapping from past the file's code
		codeA     = 0x10001000
		codeB     = 0x10003000
		vdso      = 0x7ffff7fc1000
		farAway   = 0xfffff00000000000
		kernelAdr = 0xffffffff81000010
	)
	img, lay, err := jitelf.Append(nil, jitelf.Options{}, []jitelf.Function{
		{Name: "elf_a", Code: make([]byte, 0x20)}, {Name: "elf_b", Code: make([]byte, 0x20)},
	})
	if err != nil {
		t.Fatal(err)
	}
	elfA, elfB := lay.Offsets[0], lay.Offsets[1]
	// A function that builds a frame (push rbp; mov rbp, rsp), and one that
	// builds none, as x86-64 call frame information says.
	framed := unwindingInfo(t, 0x20, jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(6, 2).AdvanceLoc(3).DefCFARegister(6))
	frameless := unwindingInfo(t, 0x20, nil)
	cfiImg, cfiLay, err := jitelf.Append(nil, jitelf.Options{}, []jitelf.Function{{Name: "elf_framed", Code: make([]byte, 0x20), Unwind: framed}})
	if err != nil {
		t.Fatal(err)
	}
	elfFramed := elfBase + cfiLay.Offsets[0]
	otherID := bytes.Repeat([]byte{0xee}, jitelf.BuildIDSize)

	tests := []buildCase{{
		name: "a JIT load",
		records: []perfdata.Record{
			commRec(p1, p1, 5, "node", true),
			mmap(p1, 10, 0x400000, 0x1000, "$DIR/bin/node"),
			mmap(p1, 15, 0x10000000, 0x100000, "//anon"),
			marker(p1, 20, "$DIR/jit-1.dump"),
			mmap(p1, 100, 0x10008000, 0x1000, "$DIR/lib/libtie.so"),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			load(100, 1, codeA, 0x100, "fnA"), load(100, 2, 0x10008000, 0x100, "fnT"),
		}}},
		samples: []sample{
			{p1, 0x400010, 50, "@bin/node"},
			// At equal times the dump's events come after the recording's.
			{p1, 0x10008010, 100, "fnT@jit-1.dump"},
			{p1, 0x10008200, 100, "@lib/libtie.so"},
			{p1, codeA + 0x10, 10, ""},
			{p1, codeA + 0x10, 99, "@//anon"},
			{p1, codeA + 0x10, 100, "fnA@jit-1.dump"},
			{p1, codeA + 0xff, 500, "fnA@jit-1.dump"},
			{p1, codeA + 0x100, 500, "@//anon"},
			{p2, codeA + 0x10, 500, ""},
			{p1, kernelAdr, 500, "@[kernel.kallsyms]"},
		},
	}, {
		// Were jit-2.dump, which is not there, looked for, a warning
		// would say so.
		name: "only the processes asked for have their dumps read",
		records: []perfdata.Record{
			marker(p1, 10, "$DIR/jit-1.dump"),
			marker(p2, 10, "$DIR/jit-2.dump"),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{load(100, 1, codeA, 0x100, "fnA")}}},
		opts:  Options{Pids: []uint32{p1}},
		samples: []sample{
			{p1, codeA + 0x10, 200, "fnA@jit-1.dump"},
			{p2, codeA + 0x10, 200, ""},
		},
	}, {
		name:    "a move leaves its old place empty",
		records: []perfdata.Record{marker(p1, 10, "$DIR/jit-1.dump")},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			load(100, 1, codeA, 0x80, "f"),
			load(100, 2, 0x10002000, 0x80, "g"),
			load(100, 3, 0x10004000, 0, "empty"),
			move(200, 1, codeA, codeB, 0x80),
			move(250, 99, 0x10005000, 0x10006000, 0x10),
			move(300, 1, codeB, codeA, 0x80),
		}}},
		samples: []sample{
			{p1, codeA + 0x10, 150, "f@jit-1.dump"},
			{p1, codeB + 0x10, 150, ""},
			{p1, codeA + 0x10, 200, ""},
			{p1, codeB + 0x10, 200, "f@jit-1.dump"},
			{p1, codeB + 0x7f, 299, "f@jit-1.dump"},
			{p1, codeB + 0x10, 300, ""},
			{p1, codeA + 0x10, 300, "f@jit-1.dump"},
			{p1, 0x10002010, 300, "g@jit-1.dump"},
			{p1, 0x10004000, 300, ""},
			{p1, 0x10006000, 300, ""},
		},
		warns: []string{"CODE_MOVE of a code_index no CODE_LOAD has"},
	}, {
		name:    "one address, three functions in turn",
		records: []perfdata.Record{marker(p1, 10, "$DIR/jit-1.dump")},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			load(100, 1, codeA, 0x100, "f1"), load(200, 2, codeA, 0x100, "f2"), load(300, 3, codeA, 0x100, "f3"),
		}}},
		samples: []sample{
			{p1, codeA + 0x10, 99, ""},
			{p1, codeA + 0x10, 100, "f1@jit-1.dump"},
			{p1, codeA + 0x10, 199, "f1@jit-1.dump"},
			{p1, codeA + 0x10, 200, "f2@jit-1.dump"},
			{p1, codeA + 0xff, 250, "f2@jit-1.dump"},
			{p1, codeA + 0x10, 299, "f2@jit-1.dump"},
			{p1, codeA + 0x10, 300, "f3@jit-1.dump"},
			{p1, codeA + 0x10, 1000, "f3@jit-1.dump"},
		},
	}, {
		name: "exec drops the old image",
		records: []perfdata.Record{
			commRec(p1, p1, 5, "sh", true),
			mmap(p1, 5, 0x400000, 0x1000, "$DIR/bin/sh"),
			marker(p1, 20, "$DIR/jit-1.dump"),
			commRec(p1, p1, 60, "sh-renamed", false),
			commRec(p1, p1, 100, "node", true),
			mmap(p1, 101, 0x400000, 0x1000, "$DIR/bin/node"),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{load(30, 1, codeA, 0x100, "f")}}},
		samples: []sample{
			{p1, 0x400010, 50, "@bin/sh"},
			{p1, 0x400010, 70, "@bin/sh"},
			{p1, 0x400010, 100, ""},
			{p1, 0x400010, 101, "@bin/node"},
			{p1, codeA + 0x10, 50, "f@jit-1.dump"},
			{p1, codeA + 0x10, 100, ""},
		},
		comms: []commQuery{{p1, 50, "sh"}, {p1, 70, "sh-renamed"}, {p1, 150, "node"}, {p2, 50, ""}},
	}, {
		name: "a fork inherits, the parent keeps",
		records: []perfdata.Record{
			commRec(p1, p1, 5, "node", true),
			mmap(p1, 10, 0x400000, 0x1000, "$DIR/bin/node"),
			mmap(p1, 15, 0x10000000, 0x100000, "//anon"),
			marker(p1, 20, "$DIR/jit-1.dump"),
			task(perfdata.TypeFork, p2, p1, p2, p1, 100),
			mmap(p2, 110, 0x700000, 0x1000, "$DIR/lib/child.so"),
			mmap(p2, 120, 0x20000000, 0x1000, "//anon"),
			mmap(p1, 120, 0x20000000, 0x1000, "//anon"),
			mmap(p1, 150, 0x600000, 0x1000, "$DIR/lib/late.so"),
			task(perfdata.TypeExit, p2, p1, p2, p1, 500),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			load(30, 1, codeA, 0x100, "f"), load(300, 2, 0x10002000, 0x100, "g"),
		}}},
		samples: []sample{
			{p2, 0x400010, 50, ""},
			{p2, 0x400010, 200, "@bin/node"},
			{p2, codeA + 0x10, 200, "f@jit-1.dump"},
			{p2, 0x10005000, 200, "@//anon"},
			{p2, 0x600010, 200, ""},
			{p2, 0x700010, 200, "@lib/child.so"},
			{p2, 0x20000010, 200, "@//anon"}, // the child marked no dump
			{p1, 0x400010, 200, "@bin/node"},
			{p1, codeA + 0x10, 200, "f@jit-1.dump"},
			{p1, 0x600010, 200, "@lib/late.so"},
			{p1, 0x700010, 200, ""},
			{p1, 0x20000010, 200, ""}, // made after the parent's marker
			{p1, 0x10002010, 400, "g@jit-1.dump"},
			{p2, 0x10002010, 400, "@//anon"},
			{p2, 0x600010, 600, ""}, // an exit is no second fork
		},
		comms: []commQuery{{p2, 200, "node"}},
	}, {
		name: "a fork into a pid an exited process had",
		records: []perfdata.Record{
			mmap(p2, 10, 0x800000, 0x1000, "$DIR/bin/old"),
			task(perfdata.TypeExit, p2, 1, p2, 1, 50),
			mmap(p1, 10, 0x400000, 0x1000, "$DIR/bin/node"),
			task(perfdata.TypeFork, p2, p1, p2, p1, 100),
		},
		samples: []sample{
			{p2, 0x800010, 20, "@bin/old"},
			{p2, 0x800010, 200, ""},
			{p2, 0x400010, 200, "@bin/node"},
		},
	}, {
		// perf describes the processes running when it starts with a FORK
		// from their parent, then their own mappings.
		name: "perf's synthesized fork clones nothing",
		records: []perfdata.Record{
			mmap(p1, 0, 0x400000, 0x1000, "$DIR/bin/bash"),
			synthesized(task(perfdata.TypeFork, p2, p1, p2, p1, 0)),
			mmap(p2, 0, 0x500000, 0x1000, "$DIR/bin/node"),
		},
		samples: []sample{
			{p2, 0x400010, 10, ""},
			{p2, 0x500010, 10, "@bin/node"},
			{p1, 0x400010, 10, "@bin/bash"},
		},
	}, {
		name: "threads share their process's space",
		records: []perfdata.Record{
			commRec(p1, p1, 5, "node", true),
			mmap(p1, 10, 0x400000, 0x1000, "$DIR/bin/node"),
			task(perfdata.TypeFork, p1, p1, th1, p1, 50),
			byThread(th1, mmap(p1, 60, 0x500000, 0x1000, "$DIR/lib/libworker.so")),
			commRec(p1, th1, 80, "worker", false),
		},
		samples: []sample{
			{p1, 0x500010, 70, "@lib/libworker.so"},
			{p1, 0x400010, 70, "@bin/node"},
			{th1, 0x400010, 70, ""},
		},
		comms: []commQuery{{th1, 55, "node"}, {th1, 90, "worker"}, {p1, 90, "node"}},
	}, {
		name: "anonymous mappings after the marker hide no function",
		records: []perfdata.Record{
			mmap(p1, 50, 0x10000000, 0x100000, "//anon"),
			marker(p1, 100, "$DIR/jit-1.dump"),
			mmap(p1, 200, 0x10000000, 0x100000, "//anon"),
			mmap(p1, 200, 0x20000000, 0x1000, "//anon"),
			mmap(p1, 200, 0x21000000, 0x1000, "[anon:v8 code]"),
			mmap(p1, 200, 0x22000000, 0x1000, "/memfd:jit-code (deleted)"),
			mmap(p1, 200, 0x23000000, 0x1000, "/dev/zero (deleted)"),
			mmap(p1, 200, 0x24000000, 0x1000, "/anon_hugepage (deleted)"),
			mmap(p1, 250, 0x25000000, 0x1000, "$DIR/lib/libfoo.so"),
			mmap(p2, 200, 0x20000000, 0x1000, "//anon"),
			mmap(p2, 200, 0x23000000, 0x1000, "/dev/zero (deleted)"),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			load(150, 1, codeA, 0x100, "fa"),
			load(150, 2, 0x20000000, 0x100, "f1"),
			load(150, 3, 0x21000000, 0x100, "f2"),
			load(150, 4, 0x22000000, 0x100, "f3"),
			load(150, 5, 0x23000000, 0x100, "f4"),
			load(150, 6, 0x24000000, 0x100, "f5"),
			load(150, 7, 0x25000000, 0x100, "f6"),
		}}},
		files: map[string]string{"perf-4194305.map": "10005000 100 stub\n10001000 100 shadow\n"},
		opts:  Options{PerfMapDirs: []string{"$DIR"}},
		samples: []sample{
			{p1, codeA + 0x10, 120, "shadow@perf-4194305.map"},
			{p1, codeA + 0x10, 300, "fa@jit-1.dump"},
			{p1, 0x20000010, 300, "f1@jit-1.dump"},
			{p1, 0x21000010, 300, "f2@jit-1.dump"},
			{p1, 0x22000010, 300, "f3@jit-1.dump"},
			{p1, 0x23000010, 300, "f4@jit-1.dump"},
			{p1, 0x24000010, 300, "f5@jit-1.dump"},
			{p1, 0x25000010, 300, "@lib/libfoo.so"},
			{p1, 0x10005010, 300, "stub@perf-4194305.map"},
			{p1, 0x10006000, 300, "@//anon"},
			{p1, 0x20000200, 300, ""},
			{p2, 0x20000010, 300, "@//anon"},
			{p2, 0x23000010, 300, "@//anon"},
		},
	}, {
		name: "a marker whose dump is missing",
		records: []perfdata.Record{
			marker(p1, 100, "$DIR/gone/jit-1.dump"),
			mmap(p1, 200, 0x20000000, 0x1000, "//anon"),
		},
		samples: []sample{{p1, 0x20000010, 300, "@//anon"}},
		warns:   []string{"jit-1.dump not found (did it move?"},
	}, {
		name: "a dump found in DumpDirs",
		records: []perfdata.Record{
			marker(p1, 100, "/nonexistent/jit-1.dump"),
			marker(p2, 100, "/nonexistent/jit-2.dump"),
			mmap(p1, 200, 0x20000000, 0x1000, "//anon"),
		},
		dumps:   []testDump{{path: "dumps/jit-1.dump", pid: p1, recs: []jitdump.Record{load(150, 1, 0x20000000, 0x100, "f")}}},
		opts:    Options{DumpDirs: []string{"$DIR/none", "$DIR/dumps"}},
		samples: []sample{{p1, 0x20000010, 200, "f@dumps/jit-1.dump"}, {p1, 0x20000200, 200, ""}},
		warns:   []string{"jit-2.dump not found there nor in"},
	}, {
		name: "a perf map names anonymous memory without a dump",
		records: []perfdata.Record{
			mmap(p1, 10, 0x30000000, 0x10000, "//anon"),
			mmap(p2, 10, 0x30000000, 0x10000, "//anon"),
		},
		files: map[string]string{"maps/perf-4194305.map": "30001000 40 lua_a\n30002000 40 lua_b\n40000000 10 outside\nnot a perf map line\n"},
		opts:  Options{PerfMapDirs: []string{"$DIR/maps"}},
		samples: []sample{
			{p1, 0x30001010, 20, "lua_a@maps/perf-4194305.map"},
			{p1, 0x30002000, 20, "lua_b@maps/perf-4194305.map"},
			{p1, 0x30003000, 20, "@//anon"},
			{p1, 0x40000008, 20, "outside@maps/perf-4194305.map"},
			{p1, 0x50000000, 20, ""},
			{p2, 0x30001010, 20, "@//anon"},
		},
		warns: []string{"1 lines of"},
	}, {
		// A runtime reused 0x30001000 at 100 and 200: each line for it
		// after the first holds from when jitprof record saw it appear,
		// parts of a larger one outside a later one included. A line for
		// an address no earlier line named holds from the start, as perf
		// has it: a runtime that buffers its map writes it late.
		name: "a perf map's lines hold from when they appeared",
		records: []perfdata.Record{
			mmap(p1, 10, 0x30000000, 0x10000, "//anon"),
		},
		files: map[string]string{
			"perf-4194305.map":       "30001000 100 a\n30003000 10 early\n30001000 40 b\n30001000 20 c\n",
			"perf-4194305.map.times": "1 0\n2 50\n3 100\n4 200\n",
		},
		opts: Options{PerfMapDirs: []string{"$DIR"}},
		samples: []sample{
			{p1, 0x30001010, 20, "a@perf-4194305.map"},
			{p1, 0x30001010, 99, "a@perf-4194305.map"},
			{p1, 0x30001010, 100, "b@perf-4194305.map"},
			{p1, 0x30001030, 150, "b@perf-4194305.map"},
			{p1, 0x30001050, 150, "a@perf-4194305.map"},
			{p1, 0x30001010, 200, "c@perf-4194305.map"},
			{p1, 0x30001030, 250, "b@perf-4194305.map"},
			{p1, 0x30003000, 49, "early@perf-4194305.map"},
			{p1, 0x30003000, 50, "early@perf-4194305.map"},
		},
	}, {
		name: "a runtime in another pid namespace",
		records: []perfdata.Record{
			marker(p1, 100, "$DIR/jit-7.dump"),
			mmap(p1, 200, 0x20000000, 0x1000, "//anon"),
		},
		dumps: []testDump{{path: "jit-7.dump", pid: 7, recs: []jitdump.Record{load(150, 1, 0x20000000, 0x100, "f")}}},
		samples: []sample{
			{p1, 0x20000010, 300, "f@jit-7.dump"},
			{p1, 0x20000200, 300, ""},
			{7, 0x20000010, 300, ""},
		},
	}, {
		// 1000 cycles are 3000 ns, 2000 cycles 5000 ns.
		name: "TSC timestamps converted with TIME_CONV",
		records: []perfdata.Record{
			timeConv(10, 2048, 1000),
			marker(p1, 100, "$DIR/jit-1.dump"),
			marker(p2, 100, "$DIR/jit-2.dump"),
		},
		dumps: []testDump{
			{path: "jit-1.dump", pid: p1, flags: jitdump.FlagArchTimestamp, recs: []jitdump.Record{
				load(1000, 1, codeA, 0x100, "f"), move(2000, 1, codeA, codeB, 0x100),
			}},
			{path: "jit-2.dump", pid: p2, recs: []jitdump.Record{load(1000, 1, codeA, 0x100, "g")}},
		},
		samples: []sample{
			{p1, codeA + 0x10, 1500, ""},
			{p1, codeA + 0x10, 2999, ""},
			{p1, codeA + 0x10, 3000, "f@jit-1.dump"},
			{p1, codeA + 0x10, 4999, "f@jit-1.dump"},
			{p1, codeA + 0x10, 5000, ""},
			{p1, codeB + 0x10, 4999, ""},
			{p1, codeB + 0x10, 5000, "f@jit-1.dump"},
			{p2, codeA + 0x10, 999, ""},
			{p2, codeA + 0x10, 1500, "g@jit-2.dump"},
		},
	}, {
		name: "ELF files named by their symbols",
		records: []perfdata.Record{
			kernelMap(),
			withBuildID(lay.BuildID[:], mmap(p1, 10, elfBase, 0x1000, "$DIR/lib.so")),
			withPgoff(elfB, mmap(p1, 10, injected, 0x20, "$DIR/lib.so")),
			mmap1(p1, 10, elfAgain, 0x1000, "$DIR/lib.so"),
			mmap(p1, 10, elfOther, 0x1000, "$DIR/lib-changed.so"),
			withPgoff(0x100000, mmap(p1, 10, elfBeyond, 0x1000, "$DIR/lib.so")),
			mmap(p1, 10, vdso, 0x2000, "[vdso]"),
			mmap(p1, 10, farAway, math.MaxUint64-farAway+2, "/wraps/around"),
			dataMap(mmap(p1, 20, elfBase, 0x1000, "/var/data.bin")),
		},
		buildIDs: []perfdata.BuildID{{Misc: perfdata.MiscUser, Pid: p1, ID: otherID, Filename: "$DIR/lib-changed.so"}},
		files:    map[string]string{"lib.so": string(img), "lib-changed.so": string(img)},
		samples: []sample{
			{p1, elfBase + elfA + 4, 30, "elf_a@lib.so"},
			{p1, elfBase + elfB, 30, "elf_b@lib.so"},
			{p1, elfBase + 8, 30, "@lib.so"},
			{p1, injected + 4, 30, "elf_b@lib.so"},
			{p1, elfAgain + elfA, 30, "elf_a@lib.so"},
			{p1, elfOther + elfA, 30, "@lib-changed.so"},
			{p1, elfOther + elfB, 40, "@lib-changed.so"},
			{p1, elfBeyond + elfA, 30, "@lib.so"},
			{p1, vdso + 0x10, 30, "@[vdso]"},
			{p1, farAway + 0x10, 30, ""},
			{p1, kernelAdr, 30, "@[kernel.kallsyms]"},
		},
		warns: []string{"lib-changed.so: build-id " + hex.EncodeToString(lay.BuildID[:]) + " differs from the recorded eeee"},
	}, {
		// A jitted function's rules follow it where it moves, and leave
		// its old place to the function loaded there next.
		name: "call frame information as held at the time",
		records: []perfdata.Record{
			withBuildID(cfiLay.BuildID[:], mmap(p1, 5, elfBase, 0x1000, "$DIR/cfi.so")),
			mmap(p1, 5, 0x10000000, 0x100000, "//anon"),
			marker(p1, 6, "$DIR/jit-1.dump"),
		},
		dumps: []testDump{{path: "jit-1.dump", pid: p1, recs: []jitdump.Record{
			framed, load(10, 1, codeA, 0x20, "framed"),
			move(30, 1, codeA, codeB, 0x20),
			frameless, load(40, 2, codeA, 0x20, "frameless"),
		}}},
		files: map[string]string{"cfi.so": string(cfiImg)},
		rules: []ruleQuery{
			{p1, codeA, 20, "rsp+8 ra=c-8"},
			{p1, codeA + 1, 20, "rsp+16 ra=c-8 rbp=c-16"},
			{p1, codeA + 8, 20, "rbp+16 ra=c-8 rbp=c-16"},
			{p1, codeB + 8, 20, ""},
			{p1, codeB + 8, 35, "rbp+16 ra=c-8 rbp=c-16"},
			{p1, codeA + 8, 35, ""},
			{p1, codeA + 8, 50, "rsp+8 ra=c-8"},
			{p1, codeA + 0x20, 50, ""},
			{p1, elfFramed + 8, 50, "rbp+16 ra=c-8 rbp=c-16"},
			{p1, elfFramed + 0x20, 50, ""},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runBuildCase(t, tc)
		})
	}
}

func runBuildCase(t *testing.T, tc buildCase) {
	dir := t.TempDir()
	expand := func(s string) string { return strings.ReplaceAll(s, "$DIR", dir) }
	for name, content := range tc.files {
		writeFile(t, filepath.Join(dir, name), []byte(content))
	}
	for _, d := range tc.dumps {
		writeDump(t, filepath.Join(dir, d.path), d)
	}
	path := filepath.Join(dir, "perf.data")
	writeRecording(t, path, tc, expand)

	var warns []string
	opts := tc.opts
	opts.DumpDirs = expandAll(opts.DumpDirs, expand)
	opts.PerfMapDirs = expandAll(opts.PerfMapDirs, expand)
	opts.Warn = func(err error) { warns = append(warns, err.Error()) }
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	space, err := Build(f.Reader, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := space.Close(); err != nil {
			t.Error(err)
		}
	}()

	describe := func(fr Frame) string {
		if fr.Module == nil {
			return ""
		}
		return fr.Symbol.Name + "@" + strings.TrimPrefix(fr.Module.Name, dir+"/")
	}
	samples := readSamples(t, path)
	if len(samples) != len(tc.samples) {
		t.Fatalf("%d samples read back, %d written", len(samples), len(tc.samples))
	}
	for i, s := range samples {
		want := tc.samples[i]
		fr := space.Lookup(s.pid, s.ip, s.time, s.kernel)
		if got := describe(fr); got != want.want {
			t.Errorf("pid %d ip %#x at %d: %q, want %q", s.pid, s.ip, s.time, got, want.want)
			continue
		}
		checkFrame(t, fr, s.time)
		// Callers cache an answer for [From, Until): it must hold there.
		for _, at := range []uint64{fr.From, fr.Until - 1} {
			if again := describe(space.Lookup(s.pid, s.ip, at, s.kernel)); again != want.want {
				t.Errorf("pid %d ip %#x: %q at %d, which the answer at %d covers with %q", s.pid, s.ip, again, at, s.time, want.want)
			}
		}
	}
	var used, written []string
	for _, m := range space.Dumps() {
		used = append(used, strings.TrimPrefix(m.Name, dir+"/"))
	}
	for _, d := range tc.dumps {
		written = append(written, d.path)
	}
	if slices.Sort(used); !slices.Equal(used, slices.Sorted(slices.Values(written))) {
		t.Errorf("dumps in use %q, want every one written: %q", used, written)
	}
	for _, c := range tc.comms {
		if got := space.Comm(c.tid, c.time); got != c.want {
			t.Errorf("Comm(%d, %d) = %q, want %q", c.tid, c.time, got, c.want)
		}
	}
	for _, q := range tc.rules {
		got := ""
		if r, ok := space.UnwindRule(space.Lookup(q.pid, q.ip, q.time, false)); ok {
			got = r.String()
		}
		if got != q.want {
			t.Errorf("UnwindRule at pid %d ip %#x time %d: %q, want %q", q.pid, q.ip, q.time, got, q.want)
		}
	}
	// Once forgotten, the timelines place nothing anywhere.
	space.Forget()
	for _, s := range samples {
		if fr := space.Lookup(s.pid, s.ip, s.time, s.kernel); !s.kernel && (fr.Map != (Frame{}).Map || fr.Symbol.JIT != nil) {
			t.Errorf("pid %d ip %#x at %d, forgotten: %s in %+v", s.pid, s.ip, s.time, describe(fr), fr.Map)
		}
		if files := space.Files(s.pid, s.time); len(files) > 0 {
			t.Errorf("pid %d at %d, forgotten: files %v", s.pid, s.time, files)
		}
	}
	if len(warns) != len(tc.warns) {
		t.Fatalf("warnings %q, want ones holding %q", warns, tc.warns)
	}
	for i, w := range warns {
		if !strings.Contains(w, tc.warns[i]) {
			t.Errorf("warning %q does not hold %q", w, tc.warns[i])
		}
	}
}

// checkFrame checks what a Frame says beyond its names.
func checkFrame(t *testing.T, fr Frame, time uint64) {
	t.Helper()
	if fr.From > time || time >= fr.Until {
		t.Errorf("%#x at %d: the answer holds for [%d, %d)", fr.Addr, time, fr.From, fr.Until)
	}
	sym := fr.Symbol
	if sym.Name == "" {
		return
	}
	if fr.Addr < sym.Start || fr.Addr >= sym.End {
		t.Errorf("%#x is outside its symbol %s [%#x, %#x)", fr.Addr, sym.Name, sym.Start, sym.End)
	}
	if (sym.JIT != nil) != (fr.Module.Kind == JIT) {
		t.Errorf("%#x: symbol %s of a %v module has JIT code %v", fr.Addr, sym.Name, fr.Module.Kind, sym.JIT)
	}
	if sym.JIT != nil {
		if fns := fr.Module.Dump.Functions; int(sym.Function) >= len(fns) || fns[sym.Function] != sym.JIT {
			t.Errorf("%#x: symbol %s is not function %d of its dump", fr.Addr, sym.Name, sym.Function)
		}
		if at := sym.LoadAddr(fr.Addr); at < sym.JIT.CodeAddr || at >= sym.JIT.CodeAddr+sym.JIT.CodeSize {
			t.Errorf("%#x of %s was at %#x when loaded, outside its code", fr.Addr, sym.Name, at)
		}
	}
}

func expandAll(dirs []string, expand func(string) string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, expand(d))
	}
	return out
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeDump writes d's records after a header of its pid and flags; loads
// are the process's own.
func writeDump(t *testing.T, path string, d testDump) {
	t.Helper()
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: d.pid, Timestamp: 1, Flags: d.flags})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range d.recs {
		switch r := rec.(type) {
		case *jitdump.CodeLoad:
			r.Pid, r.Tid = d.pid, d.pid
		case *jitdump.CodeMove:
			r.Pid, r.Tid = d.pid, d.pid
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.Bytes())
}

// otherKernel says a recording was made on a kernel that is not this one,
// whose symbols are then not those of /proc/kallsyms and the vDSO.
var otherKernel = perfdata.Feature{ID: perfdata.FeatureOSRelease, Data: []byte("\x08\x00\x00\x000.0.0\x00\x00\x00")}

// writeRecording writes tc's records, build-ids and samples to path.
func writeRecording(t *testing.T, path string, tc buildCase, expand func(string) string) {
	t.Helper()
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{testAttr}, Features: []perfdata.Feature{otherKernel}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tc.buildIDs {
		id.Filename = expand(id.Filename)
		if err := w.AddBuildID(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range tc.records {
		switch r := rec.(type) {
		case *perfdata.Mmap2:
			c := *r
			c.Filename = expand(c.Filename)
			recordIdentity(&c)
			rec = &c
		case *perfdata.Mmap:
			c := *r
			c.Filename = expand(c.Filename)
			rec = &c
		}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range tc.samples {
		misc := uint16(perfdata.MiscUser)
		if s.ip >= kernelStart {
			misc = perfdata.MiscKernel
		}
		rec := &perfdata.Sample{RecordHeader: header(perfdata.TypeSample, misc), IP: s.ip, Pid: s.pid, Tid: s.pid, Time: s.time, Period: 1}
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// madeUpIno is the inode mmap gives every mapping, which writeRecording
// replaces.
const madeUpIno = 42

// recordIdentity gives m, when it has the identity mmap gives every
// mapping, the device and inode of the file it names if the test made one:
// the kernel records the file it maps, which symbolize holds the file at
// the path to. A file made later keeps mmap's made-up one.
func recordIdentity(m *perfdata.Mmap2) {
	if m.Ino != madeUpIno {
		return
	}
	var st unix.Stat_t
	if unix.Stat(m.Filename, &st) == nil {
		m.Maj, m.Min, m.Ino = unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino
	}
}

// recorded is a sample as read back from a recording.
type recorded struct {
	pid      uint32
	ip, time uint64
	kernel   bool
}

// readSamples returns the samples of the recording at path, in file order.
func readSamples(t *testing.T, path string) []recorded {
	t.Helper()
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []recorded
	for {
		rec, err := f.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := rec.(*perfdata.Sample); ok {
			out = append(out, recorded{s.Pid, s.IP, s.Time, s.Misc&perfdata.MiscCPUModeMask == perfdata.MiscKernel})
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(path string) error
	}{{
		name: "a build-id table cut short",
		write: func(path string) error {
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{testAttr},
				Features: []perfdata.Feature{{ID: perfdata.FeatureBuildID, Data: []byte{1, 2, 3}}}})
			if err != nil {
				return err
			}
			return w.Close()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			if err := tc.write(path); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := perfdata.NewBytesReader(data)
			if err != nil {
				t.Fatal(err)
			}
			if space, err := Build(r, Options{}); err == nil {
				space.Close()
				t.Error("built without error")
			}
		})
	}
}

// unwindingInfo is the UNWINDING_INFO of an x86-64 function of size bytes
// whose rules at entry (the return address just above the stack pointer)
// change as program says.
func unwindingInfo(t *testing.T, size uint64, program jitdump.CFAProgram) *jitdump.UnwindingInfo {
	t.Helper()
	fi := jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: 16,
		Initial: jitdump.CFAProgram{}.DefCFA(7, 8).Offset(16, 1), Instructions: program}
	u, err := fi.UnwindingInfo(size)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
