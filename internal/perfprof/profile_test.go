package perfprof_test

import (
	"bytes"
	"github.com/jitprof/jitprof/internal/contract"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// synthRecording writes a recording of process synthPid, node: the dynamic
// loader, then /usr/bin/node, then libc and the dump of synthFunctions are
// mapped, in that order. Its samples are, each called from node, one in the
// loader, one at every function's start and one 0x80 into the first.
func synthRecording(t *testing.T) string {
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
		&perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm), Pid: synthPid, Tid: synthPid, Comm: "node",
			Trailer: perfdata.Trailer{Pid: synthPid, Tid: synthPid, Time: now}},
		mmap(loader, "/lib64/ld-linux-x86-64.so.2"),
		mmap(program, "/usr/bin/node"),
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
	data := synthRecording(t)
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
		for _, loc := range res.Profile.PProf().Location {
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
// profiled program, is the executable of the process with the most
// samples: the file it mapped first, the loader aside, or the first named
// like the process; sampled or not (java's launcher never is, where
// libjvm.so has most samples); never the loader, mapped and sampled first,
// nor what the process ran before its exec.
func TestMainMapping(t *testing.T) {
	const (
		loader = "/lib64/ld-linux-x86-64.so.2"
		libc   = "/lib/x86_64-linux-gnu/libc.so.6"
		java   = "/usr/lib/jvm/java-21-openjdk-amd64/bin/java"
		libjvm = "/usr/lib/jvm/java-21-openjdk-amd64/lib/server/libjvm.so"
	)
	for _, tc := range []struct {
		name     string
		before   []string // mapped before an exec, and sampled once each
		comm     string
		mapped   []string       // in this order (after the exec)
		samples  map[string]int // leaves in each file; the loader is sampled once
		want     string
		unused   bool // the executable has no sample
		numFiles int  // mappings in the profile
	}{
		{"sampled", nil, "node", []string{loader, "/usr/bin/node", libc}, map[string]int{"/usr/bin/node": 3, libc: 5}, "/usr/bin/node", false, 3},
		{"never sampled: java", nil, "java", []string{loader, java, "/usr/lib/jvm/java-21-openjdk-amd64/lib/libjli.so", libjvm, libc},
			map[string]int{libjvm: 5, libc: 2}, java, true, 4},
		{"named, cut to 15 bytes, mapped after another", nil, "long-program-na", []string{loader, "/usr/lib/libz.so.1", "/opt/long-program-name", libc},
			map[string]int{libc: 3}, "/opt/long-program-name", true, 3},
		{"renamed: the first mapped", nil, "worker", []string{loader, "/usr/bin/prog", libc}, map[string]int{libc: 3}, "/usr/bin/prog", true, 3},
		{"after an exec", []string{"/bin/sh", libc}, "node", []string{"/usr/bin/node", loader, libc}, map[string]int{libc: 3}, "/usr/bin/node", true, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, perfprof.Options{Input: mainRecording(t, tc.before, tc.comm, tc.mapped, tc.samples)})
			prof := res.Profile.PProf()
			ms := prof.Mapping
			if got := ms[0].File; got != tc.want {
				t.Errorf("first mapping %s, want %s", got, tc.want)
			}
			if len(ms) != tc.numFiles {
				t.Errorf("%d mappings, want %d", len(ms), tc.numFiles)
			}
			for i, m := range ms {
				if m.ID != uint64(i+1) {
					t.Errorf("mapping %d (%s) has ID %d", i, m.File, m.ID)
				}
			}
			used := false
			for _, loc := range prof.Location {
				used = used || loc.Mapping == ms[0]
			}
			if used == tc.unused {
				t.Errorf("the executable's mapping is used by a location: %v, want %v", used, !tc.unused)
			}
			// pprof reads the profile back with every location in its
			// mapping, and its merge, which its tools run on every
			// profile, keeps the executable first, used or not.
			var b bytes.Buffer
			if err := prof.Write(&b); err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&b)
			if err != nil {
				t.Fatal(err)
			}
			merged, err := profile.Merge([]*profile.Profile{p})
			if err != nil {
				t.Fatal(err)
			}
			if p.Mapping[0].File != tc.want || merged.Mapping[0].File != tc.want {
				t.Errorf("read back, the first mapping is %s, merged %s", p.Mapping[0].File, merged.Mapping[0].File)
			}
			for _, loc := range p.Location {
				if loc.Mapping != nil && (loc.Address < loc.Mapping.Start || loc.Address >= loc.Mapping.Limit) {
					t.Errorf("location %#x outside its mapping %s [%#x, %#x)", loc.Address, loc.Mapping.File, loc.Mapping.Start, loc.Mapping.Limit)
				}
			}
		})
	}
}

// mainRecording writes a recording of process synthPid that maps the files
// before, each sampled once, then execs comm, which maps the files mapped
// (0x10000 bytes each, 1 GiB apart, from 0x1000000000) and has samples
// leaves in them, after one in the loader.
func mainRecording(t *testing.T, before []string, comm string, mapped []string, samples map[string]int) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "perf.data")
	pw, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{synthAttr}})
	if err != nil {
		t.Fatal(err)
	}
	now := jitdump.Now()
	tr := func() perfdata.Trailer {
		now++
		return perfdata.Trailer{Pid: synthPid, Tid: synthPid, Time: now}
	}
	hdr := func(typ perfdata.RecordType) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: synthAttr, Misc: perfdata.MiscUser}
	}
	var recs []perfdata.Record
	addrOf := make(map[string]uint64)
	mapAll := func(files []string) {
		for _, f := range files {
			addrOf[f] = 0x1000000000 + uint64(len(addrOf))<<30
			recs = append(recs, &perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2), Pid: synthPid, Tid: synthPid, Addr: addrOf[f], Len: 0x10000,
				Prot: unix.PROT_READ | unix.PROT_EXEC, Flags: unix.MAP_PRIVATE, Filename: f, Trailer: tr()})
		}
	}
	sample := func(file string) {
		tr := tr()
		recs = append(recs, &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample), IP: addrOf[file] + 0x10, Pid: synthPid, Tid: synthPid,
			Time: tr.Time, Period: 1, Callchain: []uint64{perfdata.ContextUser, addrOf[file] + 0x10}})
	}
	if len(before) > 0 {
		recs = append(recs, &perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm), Pid: synthPid, Tid: synthPid, Comm: filepath.Base(before[0]), Trailer: tr()})
		mapAll(before)
		for _, f := range before {
			sample(f)
		}
	}
	exec := hdr(perfdata.TypeComm)
	exec.Misc |= perfdata.MiscCommExec
	recs = append(recs, &perfdata.Comm{RecordHeader: exec, Pid: synthPid, Tid: synthPid, Comm: comm, Trailer: tr()})
	clear(addrOf)
	mapAll(mapped)
	sample(mapped[slices.IndexFunc(mapped, func(f string) bool { return strings.Contains(f, "/ld-") })])
	for _, f := range mapped {
		for range samples[f] {
			sample(f)
		}
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
