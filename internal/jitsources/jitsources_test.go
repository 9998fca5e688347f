package jitsources

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

func TestIsAnonymous(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"//anon", true},
		{"[anon:v8 code space]", true},
		{"/memfd:jit-code (deleted)", true},
		{"/dev/zero (deleted)", true},
		{"/anon_hugepage (deleted)", true},
		{"[heap]", false},
		{"[stack]", false},
		{"[vdso]", false},
		{"/usr/lib/libc.so.6", false},
		{"/tmp/jit-1.dump", false},
		{"/tmp//anon", false},
		{"", false},
	} {
		if got := IsAnonymous(tc.name); got != tc.want {
			t.Errorf("IsAnonymous(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsMarker(t *testing.T) {
	for _, tc := range []struct {
		name string
		pid  uint32 // 0: not a marker
	}{
		{"/tmp/jit-1234.dump", 1234},
		{"/home/u/.debug/jit/java-jit-20240101.abc/jit-7.dump", 7},
		{"jit-7.dump", 7},
		{"/tmp/bun/jit-12504-12474.dump", 12474},
		{"/tmp/jit-14596-14594-3UxcUx", 14594},
		{"/tmp/jit-14596-14594", 0},
		{"/tmp/jit-14596-14594-3UxcU", 0},
		{"/tmp/jit-14596-14594-3UxcUx.dump", 0},
		{"/tmp/jit-1-2-3.dump", 0},
		{"/tmp/jit-99999999999.dump", 0},
		{"/tmp/jit-.dump", 0},
		{"/tmp/jit-12a.dump", 0},
		{"/tmp/jit-12.dump.old", 0},
		{"/tmp/jit-12.dump (deleted)", 0},
		{"/tmp/myjit-12.dump", 0},
		{"/tmp/jit-12.dump/lib.so", 0},
		{"/tmp/perf-12.map", 0},
	} {
		pid, ok := MarkerPid(tc.name)
		if ok != (tc.pid != 0) || pid != tc.pid || IsMarker(tc.name) != ok {
			t.Errorf("MarkerPid(%q) = %d, %v; IsMarker %v; want pid %d", tc.name, pid, ok, IsMarker(tc.name), tc.pid)
		}
	}
}

func TestCheckClock(t *testing.T) {
	mono := &perfdata.Attr{Flags: perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC}
	for _, tc := range []struct {
		name  string
		attrs []*perfdata.Attr
		ok    bool
	}{
		{"monotonic", []*perfdata.Attr{mono, mono}, true},
		{"no clock chosen", []*perfdata.Attr{mono, {ClockID: unix.CLOCK_MONOTONIC}}, false},
		{"another clock", []*perfdata.Attr{{Flags: perfdata.AttrUseClockID, ClockID: unix.CLOCK_REALTIME}}, false},
	} {
		if err := CheckClock(tc.attrs); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrNoClock)) {
			t.Errorf("%s: CheckClock = %v", tc.name, err)
		}
	}
}

var testAttr = &perfdata.Attr{
	Type: 1, SamplePeriod: 1,
	SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime,
	Flags:      perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrTask | perfdata.AttrSampleIDAll | perfdata.AttrUseClockID,
	ClockID:    unix.CLOCK_MONOTONIC,
	IDs:        []uint64{1},
}

func header(typ perfdata.RecordType, misc uint16) perfdata.RecordHeader {
	return perfdata.RecordHeader{Type: typ, Attr: testAttr, Misc: misc}
}

func mmap2(pid uint32, t uint64, file string, misc uint16) *perfdata.Mmap2 {
	return &perfdata.Mmap2{RecordHeader: header(perfdata.TypeMmap2, misc), Pid: pid, Tid: pid, Addr: 0x7f0000000000, Len: 0x1000,
		Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: file, Trailer: perfdata.Trailer{Pid: pid, Tid: pid, Time: t}}
}

// writeRecording writes recs to a recording under dir and returns its path.
func writeRecording(t *testing.T, dir string, recs []perfdata.Record) string {
	t.Helper()
	path := filepath.Join(dir, "perf.data")
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{testAttr}})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestScan(t *testing.T) {
	conv := &perfdata.TimeConv{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeTimeConv},
		TimeShift: 31, TimeMult: 1 << 30, TimeZero: 5, Extended: true, TimeCycles: 77, TimeMask: math.MaxUint64, CapUserTimeZero: true}
	recs := []perfdata.Record{
		conv,
		mmap2(10, 100, "/tmp/x/jit-10.dump", perfdata.MiscUser),
		// The pid in the name is the runtime's, in its own pid namespace.
		&perfdata.Mmap{RecordHeader: header(perfdata.TypeMmap, perfdata.MiscUser), Pid: 11, Tid: 11, Addr: 0x1000, Len: 0x1000,
			Filename: "/x/jit-99.dump", Trailer: perfdata.Trailer{Pid: 11, Tid: 11, Time: 110}},
		mmap2(10, 120, "/tmp/x/jit-10.dump", perfdata.MiscUser|perfdata.MiscMmapData),
		mmap2(math.MaxUint32, 130, "/tmp/x/jit-1.dump", perfdata.MiscKernel),
		mmap2(10, 140, "/usr/lib/libc.so.6", perfdata.MiscUser),
		&perfdata.Comm{RecordHeader: header(perfdata.TypeComm, perfdata.MiscCommExec), Pid: 10, Tid: 10, Comm: "node", Trailer: perfdata.Trailer{Time: 150}},
		&perfdata.Task{RecordHeader: header(perfdata.TypeFork, 0), Pid: 12, PPid: 10, Tid: 12, PTid: 10, Time: 160},
		&perfdata.Task{RecordHeader: header(perfdata.TypeExit, 0), Pid: 12, PPid: 10, Tid: 12, PTid: 10, Time: 170},
		&perfdata.Sample{RecordHeader: header(perfdata.TypeSample, perfdata.MiscUser), IP: 0x7f0000000010, Pid: 10, Tid: 10, Time: 180},
	}
	path := writeRecording(t, t.TempDir(), recs)
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var offsets []int64 // of the records, in file order
	for {
		raw, err := f.NextRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		offsets = append(offsets, raw.Offset)
	}
	if len(offsets) != len(recs) {
		t.Fatalf("%d records read back, %d written", len(offsets), len(recs))
	}

	f.Close()
	if f, err = perfdata.Open(path); err != nil {
		t.Fatal(err)
	}
	var visited []string
	rec, err := Scan(f.Reader, func(r perfdata.Record, offset int64) {
		desc := fmt.Sprintf("%s@%d", r.Header().Type, slices.Index(offsets, offset))
		if m := Mapping(r); m.Filename != "" {
			desc += " " + m.Filename
		}
		visited = append(visited, desc)
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.ReuseRecord {
		t.Error("Scan left the reader reusing records")
	}
	want := []Marker{{"/tmp/x/jit-10.dump", 10, 100, offsets[1]}, {"/x/jit-99.dump", 11, 110, offsets[2]}}
	if !slices.Equal(rec.Markers, want) {
		t.Errorf("markers %+v, want %+v", rec.Markers, want)
	}
	if rec.Conv == nil || rec.Conv.TimeMult != conv.TimeMult || rec.Conv.TimeCycles != conv.TimeCycles || !rec.Conv.CapUserTimeZero {
		t.Errorf("TIME_CONV %+v, want %+v", rec.Conv, conv)
	}
	wantVisited := []string{
		"MMAP2@3 /tmp/x/jit-10.dump", // data: no marker
		"MMAP2@4 /tmp/x/jit-1.dump",  // the kernel's: no marker
		"MMAP2@5 /usr/lib/libc.so.6",
		"COMM@6", "FORK@7",
	}
	if !slices.Equal(visited, wantVisited) {
		t.Errorf("visited %q, want %q", visited, wantVisited)
	}
	f.Close()

	// A recording cut inside a record is scanned as far as it is whole
	// (the pass over its samples says what is missing): the markers before
	// the cut are kept.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Clone(data[:offsets[5]+8])
	r, err := perfdata.NewBytesReader(cut)
	if err != nil {
		t.Fatal(err)
	}
	rec, err = Scan(r, nil)
	if err != nil {
		t.Fatalf("a recording cut inside a record: %v", err)
	}
	if !slices.Equal(rec.Markers, want) {
		t.Errorf("cut short: markers %+v, want %+v", rec.Markers, want)
	}
}

func TestMapping(t *testing.T) {
	id := bytes.Repeat([]byte{0xab}, 20)
	withID := mmap2(7, 5, "/lib.so", perfdata.MiscUser|perfdata.MiscMmapBuildID)
	withID.BuildID, withID.Pgoff = id, 0x2000
	noID := mmap2(7, 5, "/lib.so", perfdata.MiscUser)
	noID.BuildID = id // not said to be there
	for _, tc := range []struct {
		name string
		rec  perfdata.Record
		want MappingInfo
	}{
		{"MMAP", &perfdata.Mmap{Pid: 3, Addr: 0x1000, Len: 0x2000, Pgoff: 0x3000, Filename: "/a"},
			MappingInfo{Pid: 3, Addr: 0x1000, Len: 0x2000, Pgoff: 0x3000, Filename: "/a"}},
		{"MMAP2 with a build-id", withID, MappingInfo{Pid: 7, Addr: 0x7f0000000000, Len: 0x1000, Pgoff: 0x2000, Filename: "/lib.so",
			Misc: perfdata.MiscUser | perfdata.MiscMmapBuildID, BuildID: id, Trailer: withID.Trailer}},
		{"MMAP2 without", noID, MappingInfo{Pid: 7, Addr: 0x7f0000000000, Len: 0x1000, Filename: "/lib.so", Misc: perfdata.MiscUser, Trailer: noID.Trailer}},
		{"COMM", &perfdata.Comm{Pid: 3, Comm: "x"}, MappingInfo{}},
	} {
		if got := Mapping(tc.rec); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// writeDump writes a dump of one function, then recs, at path.
func writeDump(t *testing.T, path string, recs ...jitdump.Record) {
	t.Helper()
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 1, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Load(&jitdump.Function{Name: "f", Addr: 0x1000, Code: []byte{0xc3}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadAndHides(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	writeDump(t, at("jit-1.dump"))
	writeDump(t, at("jit-2.dump"), &jitdump.CodeMove{CodeIndex: 99, CodeSize: 1})
	writeDump(t, at("moved/jit-3.dump"))
	if err := os.WriteFile(at("jit-5.dump"), []byte("not a dump"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &Recording{Markers: []Marker{
		{Path: at("jit-1.dump"), Pid: 10, Time: 300},
		{Path: at("jit-1.dump"), Pid: 11, Time: 100}, // a process the runtime forked maps it again
		{Path: at("jit-2.dump"), Pid: 10, Time: 200},
		{Path: at("gone/jit-3.dump"), Pid: 12, Time: 50},
		{Path: at("gone/jit-4.dump"), Pid: 13, Time: 10},
		{Path: at("jit-5.dump"), Pid: 14, Time: 10},
	}}
	// A /proc of the test's own, empty: none of the recorded pids runs,
	// whatever pids this machine has.
	rec.Proc = procfs.FS(t.TempDir())
	var warns []string
	rec.Load([]string{at("elsewhere"), at("moved")}, func(err error) { warns = append(warns, err.Error()) })
	defer func() {
		if err := rec.Close(); err != nil {
			t.Error(err)
		}
	}()

	// In the order of the paths the recording saw.
	wantWarns := []string{"jit-4.dump not found there nor in", "code_index no CODE_LOAD", "jit-5.dump not used"}
	if len(warns) != len(wantWarns) {
		t.Fatalf("warnings %q, want ones holding %q", warns, wantWarns)
	}
	for i, w := range warns {
		if !strings.Contains(w, wantWarns[i]) {
			t.Errorf("warning %q does not hold %q", w, wantWarns[i])
		}
	}
	type dump struct {
		path    string
		pid     uint32
		markers int
	}
	var dumps []dump
	for _, d := range rec.Dumps {
		dumps = append(dumps, dump{strings.TrimPrefix(d.Path, dir+"/"), d.Pid, len(d.Markers)})
	}
	wantDumps := []dump{{"moved/jit-3.dump", 12, 1}, {"jit-1.dump", 11, 2}, {"jit-2.dump", 10, 1}}
	if !slices.Equal(dumps, wantDumps) {
		t.Errorf("dumps %+v, want %+v", dumps, wantDumps)
	}

	for _, q := range []struct {
		pid  uint32
		time uint64
		file string
		want bool
	}{
		{10, 199, "//anon", false},
		{10, 200, "//anon", true}, // its earliest marker, of another dump
		{10, 200, "/dev/zero (deleted)", true},
		{10, 1000, "/usr/lib/libc.so.6", false},
		{11, 100, "[anon:x]", true},
		{11, 99, "[anon:x]", false},
		{12, 50, "/memfd:code", true},
		{13, 1000, "//anon", false}, // its dump is missing
		{14, 1000, "//anon", false}, // its dump is unreadable
		{15, 1000, "//anon", false},
	} {
		if got := rec.Hides(q.pid, q.time, q.file); got != q.want {
			t.Errorf("Hides(%d, %d, %q) = %v, want %v", q.pid, q.time, q.file, got, q.want)
		}
	}

	// Without directories to search, the warning says how to give one.
	lost := &Recording{Markers: []Marker{{Path: at("gone/jit-4.dump"), Pid: 13}}}
	warns = nil
	lost.Load(nil, func(err error) { warns = append(warns, err.Error()) })
	if len(warns) != 1 || !strings.Contains(warns[0], "--jitdump-dir") || len(lost.Dumps) != 0 || lost.Hides(13, 1, "//anon") {
		t.Errorf("a missing dump, no directories: warnings %q, %d dumps", warns, len(lost.Dumps))
	}
}

func TestPerfTime(t *testing.T) {
	conv := &perfdata.TimeConv{TimeShift: 10, TimeMult: 2048, TimeZero: 1000}
	short := &perfdata.TimeConv{TimeMult: 1, TimeCycles: 0x10000, TimeMask: 0xffff, CapUserTimeShort: true, CapUserTimeZero: true, Extended: true}
	for _, tc := range []struct {
		name  string
		flags uint64
		conv  *perfdata.TimeConv
		t     uint64
		want  uint64
	}{
		{"CLOCK_MONOTONIC dump", 0, conv, 1000, 1000},
		{"TSC, no TIME_CONV", jitdump.FlagArchTimestamp, nil, 1000, 1000},
		{"TSC, TIME_CONV without a multiplier", jitdump.FlagArchTimestamp, &perfdata.TimeConv{TimeShift: 10, TimeZero: 5}, 1000, 1000},
		{"TSC below 1<<shift", jitdump.FlagArchTimestamp, conv, 1000, 3000},
		{"TSC above 1<<shift", jitdump.FlagArchTimestamp, conv, 2000, 5000},
		{"TSC of 40 bits", jitdump.FlagArchTimestamp, conv, 1 << 40, 1000 + 2<<40},
		// The counter wrapped at the mask's width: back next to TimeCycles.
		{"short TSC", jitdump.FlagArchTimestamp, short, 0x20005, 0x10005},
		// perf's convert_timestamp: without time_zero nothing converts.
		{"TSC, time_zero unusable", jitdump.FlagArchTimestamp, &perfdata.TimeConv{TimeShift: 10, TimeMult: 2048, TimeZero: 1000, Extended: true}, 2000, 0},
	} {
		d := &Dump{Dump: &dumpindex.Dump{Header: jitdump.Header{Flags: tc.flags}}, conv: tc.conv}
		if got := d.PerfTime(tc.t); got != tc.want {
			t.Errorf("%s: PerfTime(%d) = %d, want %d", tc.name, tc.t, got, tc.want)
		}
	}
}

// findPerfMap reads the perf map of process pid as symbolize finds it: from
// the first of PerfMapPaths that can be read; nil when there is none.
func findPerfMap(pid uint32, dirs []string, warn func(error)) *PerfMap {
	for _, path := range PerfMapPaths(Host{}, pid, 0, dirs) {
		if m, err := ReadPerfMap(path, warn); err == nil {
			return m
		}
	}
	return nil
}

func TestFindPerfMap(t *testing.T) {
	// Beyond any pid_max, so that no process's /proc/PID/root answers, and
	// this test process's own, so that no other run shares its /tmp map.
	pid := uint32(1<<23 + os.Getpid())
	name := fmt.Sprintf("perf-%d.map", pid)
	tmp := filepath.Join("/tmp", name)
	const twoLines = "1000 10 f\n1000 10 g\n"
	for _, tc := range []struct {
		name  string
		in    []string // where maps are: "/tmp", or a directory given
		dirs  []string
		map_  string // the map's text, twoLines when empty
		times string // its times file's, none when empty
		want  string
		warns int
		// the names at 0x1008 at times 0, 100, 200, 300
		at [4]string
	}{
		{name: "none", dirs: []string{"a"}},
		{name: "in the second directory", in: []string{"b"}, dirs: []string{"a", "b"}, want: "b", at: [4]string{"g", "g", "g", "g"}},
		{name: "directories in order", in: []string{"a", "b"}, dirs: []string{"a", "b"}, want: "a", at: [4]string{"g", "g", "g", "g"}},
		// A copy jitprof record made has the times, and outlives the pid.
		{name: "directories before /tmp", in: []string{"/tmp", "a"}, dirs: []string{"a"}, want: "a", at: [4]string{"g", "g", "g", "g"}},
		{name: "/tmp", in: []string{"/tmp"}, dirs: []string{"a"}, want: "/tmp", at: [4]string{"g", "g", "g", "g"}},
		{name: "with a bad line", in: []string{"bad"}, dirs: []string{"bad"}, map_: twoLines + "no map line\n", want: "bad", warns: 1, at: [4]string{"g", "g", "g", "g"}},
		{name: "timed", in: []string{"a"}, dirs: []string{"a"}, times: "1 0\n2 200\n", want: "a", at: [4]string{"f", "f", "g", "g"}},
		{name: "timed from the start", in: []string{"a"}, dirs: []string{"a"}, times: "0 0\n1 100\n2 200\n", want: "a", at: [4]string{"f", "f", "g", "g"}},
		// Lines after the last row appeared after its time.
		{name: "lines beyond the times", in: []string{"a"}, dirs: []string{"a"}, times: "0 0\n1 100\n", want: "a", at: [4]string{"f", "g", "g", "g"}},
		{name: "bad times", in: []string{"a"}, dirs: []string{"a"}, times: "0 0\n1 100\nx\n2 50\n", want: "a", warns: 1, at: [4]string{"f", "g", "g", "g"}},
		{name: "times out of order", in: []string{"a"}, dirs: []string{"a"}, times: "1 100\n2 50\n", want: "a", warns: 1, at: [4]string{"f", "g", "g", "g"}},
		// Same time: the later line holds. A line holds from the start
		// unless an earlier line named one of its addresses (f, the
		// first, in each timed case), as perf has it.
		{name: "one time", in: []string{"a"}, dirs: []string{"a"}, times: "2 100\n", want: "a", at: [4]string{"f", "g", "g", "g"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, in := range tc.in {
				path, content := filepath.Join(dir, in, name), cmp.Or(tc.map_, twoLines)
				if in == "/tmp" {
					path = tmp
					t.Cleanup(func() { os.Remove(tmp) })
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				if tc.times != "" {
					if err := os.WriteFile(path+TimesSuffix, []byte(tc.times), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			var dirs []string
			for _, d := range tc.dirs {
				dirs = append(dirs, filepath.Join(dir, d))
			}
			warns := 0
			m := findPerfMap(pid, dirs, func(err error) { t.Log(err); warns++ })
			want := ""
			switch tc.want {
			case "":
			case "/tmp":
				want = tmp
			default:
				want = filepath.Join(dir, tc.want, name)
			}
			path := ""
			if m != nil {
				path = m.Path
			}
			if path != want || warns != tc.warns {
				t.Fatalf("findPerfMap found %q with %d warnings, want %q with %d", path, warns, want, tc.warns)
			}
			if m == nil {
				return
			}
			for i, when := range []uint64{0, 100, 200, 300} {
				got := ""
				for j, e := range m.Entries {
					if m.Times[j] <= when && e.Start <= 0x1008 && 0x1008 < e.Start+e.Size {
						got = e.Name // the latest line that appeared by then
					}
				}
				if got != tc.at[i] {
					t.Errorf("at time %d, 0x1008 is %q, want %q (times %v)", when, got, tc.at[i], m.Times)
				}
			}
		})
	}
}

// A dump is looked for where its process saw it; for a process of another
// pid namespace (its dump named by another pid), jitprof record's copy
// under the recorded pid comes first.
func TestLocate(t *testing.T) {
	dir := t.TempDir()
	self := uint32(os.Getpid())
	at := func(name string) string { return filepath.Join(dir, name) }
	jsc := fmt.Sprintf("jit-99-%d.dump", self) // JavaScriptCore's: jit-<tid>-<pid>.dump
	for _, name := range []string{fmt.Sprintf("jit-%d.dump", self), "jit-7.dump", jsc, "jit-99-7.dump", fmt.Sprintf("copies/jit-%d.dump", self), "copies/jit-7.dump", "copies/jit-8.dump"} {
		if err := os.MkdirAll(filepath.Dir(at(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(at(name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copies := []string{at("copies")}
	// A process of ours, that runs and has no copy.
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sleep.Process.Kill()
		sleep.Wait()
	}()
	running := uint32(sleep.Process.Pid)
	for _, tc := range []struct {
		name string
		m    Marker
		want string
	}{
		{"its own, where it was", Marker{Path: at(fmt.Sprintf("jit-%d.dump", self)), Pid: self}, at(fmt.Sprintf("jit-%d.dump", self))},
		{"its own, moved", Marker{Path: at(fmt.Sprintf("gone/jit-%d.dump", self)), Pid: self}, at(fmt.Sprintf("copies/jit-%d.dump", self))},
		{"another namespace's: the copy", Marker{Path: at("jit-7.dump"), Pid: self}, at(fmt.Sprintf("copies/jit-%d.dump", self))},
		{"JavaScriptCore's own, where it was", Marker{Path: at(jsc), Pid: self}, at(jsc)},
		{"JavaScriptCore's of another namespace: the copy", Marker{Path: at("jit-99-7.dump"), Pid: self}, at(fmt.Sprintf("copies/jit-%d.dump", self))},
		// Not running, no copy: where it was, then by its name.
		{"another namespace's, no copy", Marker{Path: at("jit-7.dump"), Pid: 1<<23 + self}, at("jit-7.dump")},
		{"another namespace's, by name", Marker{Path: at("gone/jit-8.dump"), Pid: 1<<23 + self}, at("copies/jit-8.dump")},
		// Running: in its root, which is ours.
		{"in its root", Marker{Path: at("jit-7.dump"), Pid: running, Time: now()}, filepath.Join(fmt.Sprintf("/proc/%d/root", running), at("jit-7.dump"))},
		// The pid is the running process's, but the recording saw it
		// before it started: another process had the pid.
		{"its pid reused", Marker{Path: at("jit-7.dump"), Pid: running, Time: 1}, at("jit-7.dump")},
		{"nowhere", Marker{Path: at("gone/jit-9.dump"), Pid: 1<<23 + self}, ""},
	} {
		got, ok, _ := locate(tc.m, tc.m.Time, copies, Host{})
		if got.String() != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: locate = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// now is CLOCK_MONOTONIC's now, the clock of the recordings.
func now() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

func FuzzParseTimes(f *testing.F) {
	for _, s := range []string{"", "1 0\n2 200\n", "0 0\n1 100\nx\n", "1 100\n2 50\n", "3 18446744073709551615\n", "1 2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseTimes(data, "f")
		for i := 1; i < len(rows); i++ {
			if rows[i].lines < rows[i-1].lines || rows[i].time < rows[i-1].time {
				t.Fatalf("rows out of order: %v", rows)
			}
		}
		if len(rows) > bytes.Count(data, []byte{'\n'}) {
			t.Fatalf("%d rows from %d lines", len(rows), bytes.Count(data, []byte{'\n'}))
		}
		if err != nil && !strings.Contains(err.Error(), "f: offset ") {
			t.Fatalf("error without the file and offset: %v", err)
		}
	})
}

// A recording's own directory is searched after the directories given, and
// the caller's slice is not written to.
func TestSearchDirs(t *testing.T) {
	given := make([]string, 1, 4)
	given[0] = "/elsewhere"
	got := SearchDirs("/rec/perf.data", given)
	if !slices.Equal(got, []string{"/elsewhere", "/rec"}) || len(SearchDirs("perf.data", nil)) != 1 {
		t.Errorf("SearchDirs = %q", got)
	}
	if again := SearchDirs("/other/perf.data", given); again[1] != "/other" || got[1] != "/rec" {
		t.Errorf("SearchDirs shared its result's array with the caller's: %q, %q", got, again)
	}
}
