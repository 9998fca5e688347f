package perfprof_test

import (
	"bytes"
	"github.com/jitprof/jitprof/internal/contract"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
)

// synthPid lies beyond the largest pid_max (1<<22), so that no perf map of
// a live process answers for it.
const synthPid = 1<<22 + 7

var synthAttr = &perfdata.Attr{
	Type: 1, SamplePeriod: 1,
	SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod | perfdata.SampleCallchain,
	Flags: perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask |
		perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
	ClockID: unix.CLOCK_MONOTONIC,
	IDs:     []uint64{1},
}

// The jitted functions of the synthetic recording, at jitBase + 0x100*i.
const jitBase = 0x10000

var synthFunctions = []jitdump.Function{
	{Name: "JS:*flatMap /app/node_modules/ts.lib/_tsc.js:237:17", Lines: []jitdump.DebugEntry{
		{Addr: jitBase, Line: 238, File: "/app/node_modules/ts.lib/_tsc.js"},
		{Addr: jitBase + 0x80, Line: 5, File: "/app/inlined.js"}, // inlined from elsewhere
	}},
	{Name: "JS:* /app/main.js:1:1"},
	{Name: "JS:*evaldSum :1:19"},
	{Name: "JS:*get total /app/my dir/a.js:11:12"},
	{Name: "JS:~Module._compile node:internal/modules/cjs/loader:1483:37"},
	{Name: "py::Outer.run:/app/x.py"},
	{Name: "w:fib/1"},
	{Name: "Builtin:ArrayMap"},
	{Name: "_Z3fibi"}, // LLVM's: demangled, never split
}

// synthRecording writes a recording of process synthPid, named comm: the
// dynamic loader, then exe, then libc and the dump of synthFunctions are
// mapped, in that order. Its samples are, each called from exe, one in
// the loader, one at every function's start and one 0x80 into the first,
// and libcSamples in libc, whose stacks exe is not in.
func synthRecording(t *testing.T, comm, exe string, libcSamples int) string {
	t.Helper()
	dir := t.TempDir()
	dumpPath := filepath.Join(dir, "jit-1.dump")
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: synthPid})
	if err != nil {
		t.Fatal(err)
	}
	for i, fn := range synthFunctions {
		fn.Addr, fn.Code = jitBase+0x100*uint64(i), bytes.Repeat([]byte{0x90}, 0x100)
		if _, err := w.Load(&fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dumpPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	data := filepath.Join(dir, "perf.data")
	pw, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{synthAttr}})
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(typ perfdata.RecordType) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: synthAttr, Misc: perfdata.MiscUser}
	}
	now := jitdump.Now()
	mmap := func(addr uint64, file string) *perfdata.Mmap2 {
		now++
		return &perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2), Pid: synthPid, Tid: synthPid, Addr: addr, Len: 0x10000,
			Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Filename: file,
			Trailer: perfdata.Trailer{Pid: synthPid, Tid: synthPid, Time: now}}
	}
	const loader, program, libc = 0x7f0000000000, 0x400000, 0x7f1000000000
	recs := []perfdata.Record{
		&perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm), Pid: synthPid, Tid: synthPid, Comm: comm,
			Trailer: perfdata.Trailer{Pid: synthPid, Tid: synthPid, Time: now}},
		mmap(loader, "/lib64/ld-linux-x86-64.so.2"),
		mmap(program, exe),
		mmap(libc, "/lib/x86_64-linux-gnu/libc.so.6"),
		mmap(0x7fff00000000, dumpPath), // the dump's marker
	}
	sample := func(chain ...uint64) {
		now++
		recs = append(recs, &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample), IP: chain[0], Pid: synthPid, Tid: synthPid,
			Time: now, Period: 1, Callchain: append([]uint64{perfdata.ContextUser}, chain...)})
	}
	sample(loader + 0x10)
	for i := range synthFunctions {
		sample(jitBase+0x100*uint64(i), program+0x1005)
	}
	sample(jitBase+0x80, program+0x1005)
	for range libcSamples {
		sample(libc + 0x10)
	}
	for _, r := range recs {
		if err := pw.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSplitNames: in the profile, jitted functions whose names embed their
// source are split as pprof expects, keep their raw name in SystemName, and
// contract.PerfName gives back perf report's name; the others are left alone.
func TestSplitNames(t *testing.T) {
	data := synthRecording(t, "node", "/usr/bin/node", 0)
	type want struct {
		name, file string
		startLine  int64
		line, col  int64 // of the location at the function's start, by address
	}
	wants := map[string]want{
		"JS:*flatMap /app/node_modules/ts.lib/_tsc.js:237:17":          {"JS:*flatMap", "/app/node_modules/ts.lib/_tsc.js", 237, 238, 0},
		"JS:* /app/main.js:1:1":                                        {"JS:*(anonymous) main.js:1:1", "/app/main.js", 1, 1, 1},
		"JS:*evaldSum :1:19":                                           {"JS:*evaldSum", "", 1, 1, 19},
		"JS:*get total /app/my dir/a.js:11:12":                         {"JS:*get total", "/app/my dir/a.js", 11, 11, 12},
		"JS:~Module._compile node:internal/modules/cjs/loader:1483:37": {"JS:~Module._compile", "node:internal/modules/cjs/loader", 1483, 1483, 37},
		"py::Outer.run:/app/x.py":                                      {"py::Outer.run", "/app/x.py", 0, 0, 0},
		"w:fib/1":                                                      {"w:fib/1", "", 0, 0, 0},
		"Builtin:ArrayMap":                                             {"Builtin:ArrayMap", "", 0, 0, 0},
		"_Z3fibi":                                                      {"fib", "", 0, 0, 0},
	}
	for _, perFunction := range []bool{false, true} {
		res := run(t, perfprof.Options{Input: data, PerFunction: perFunction})
		seen := 0
		for _, loc := range res.Profile.Location {
			if len(loc.Line) == 0 || loc.Address < jitBase || loc.Address >= jitBase+0x100*uint64(len(synthFunctions)) {
				continue
			}
			ln := loc.Line[len(loc.Line)-1]
			fn := ln.Function
			w, ok := wants[fn.SystemName]
			if !ok {
				t.Errorf("function %q: not one of the dump's", fn.SystemName)
				continue
			}
			seen++
			if fn.Name != w.name || fn.Filename != w.file || fn.StartLine != w.startLine {
				t.Errorf("%q: Name %q, Filename %q, StartLine %d; want %q, %q, %d", fn.SystemName, fn.Name, fn.Filename, fn.StartLine, w.name, w.file, w.startLine)
			}
			wantPerf := fn.SystemName
			if fn.SystemName == "_Z3fibi" {
				wantPerf = "fib"
			}
			if got := contract.PerfName(fn); got != wantPerf {
				t.Errorf("contract.PerfName(%q) = %q, want %q", fn.SystemName, got, wantPerf)
			}
			wantLine, wantCol := w.line, w.col
			switch {
			case perFunction:
				wantLine, wantCol = 0, 0
			case loc.Address == jitBase+0x80:
				// The line table's line there is of another file: the
				// function's start stands for it.
				wantLine, wantCol = 237, 17
			}
			if ln.Line != wantLine || ln.Column != wantCol {
				t.Errorf("%q at %#x (per function %v): line %d column %d, want %d, %d", fn.SystemName, loc.Address, perFunction, ln.Line, ln.Column, wantLine, wantCol)
			}
		}
		if want := len(synthFunctions) + 1; perFunction {
			want--
			if seen != want {
				t.Errorf("per function: %d jitted locations, want %d", seen, want)
			}
		} else if seen != want {
			t.Errorf("by address: %d jitted locations, want %d", seen, want)
		}
	}
}

// TestMainMapping: the profile's first mapping, which pprof shows as the
// profiled program, is the process's executable, found by its name, or,
// when none is named like the process, the ELF file with the most samples
// of its own; never the loader, mapped and sampled first.
func TestMainMapping(t *testing.T) {
	for _, tc := range []struct {
		name, comm, exe string
		libcSamples     int
		want            string
	}{
		{"named", "node", "/usr/bin/node", 3, "/usr/bin/node"},
		{"named, cut to 15 bytes", "long-program-na", "/opt/long-program-name", 3, "/opt/long-program-name"},
		{"not named: most samples of its own", "java", "/usr/lib/jvm/lib/libjli.so", 3, "/lib/x86_64-linux-gnu/libc.so.6"},
		{"not named, no samples of its own: most samples", "java", "/usr/lib/jvm/lib/libjli.so", 0, "/usr/lib/jvm/lib/libjli.so"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, perfprof.Options{Input: synthRecording(t, tc.comm, tc.exe, tc.libcSamples)})
			ms := res.Profile.Mapping
			if got := ms[0].File; got != tc.want {
				t.Errorf("first mapping %s, want %s", got, tc.want)
			}
			for i, m := range ms {
				if m.ID != uint64(i+1) {
					t.Errorf("mapping %d (%s) has ID %d", i, m.File, m.ID)
				}
			}
			// The profile is otherwise what it was: pprof reads it back
			// with every location in its mapping.
			var b bytes.Buffer
			if err := res.Profile.Write(&b); err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&b)
			if err != nil {
				t.Fatal(err)
			}
			if p.Mapping[0].File != tc.want {
				t.Errorf("read back, the first mapping is %s", p.Mapping[0].File)
			}
			for _, loc := range p.Location {
				if loc.Mapping != nil && (loc.Address < loc.Mapping.Start || loc.Address >= loc.Mapping.Limit) {
					t.Errorf("location %#x outside its mapping %s [%#x, %#x)", loc.Address, loc.Mapping.File, loc.Mapping.Start, loc.Mapping.Limit)
				}
			}
		})
	}
}
