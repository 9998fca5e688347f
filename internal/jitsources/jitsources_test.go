package jitsources

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
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
		want bool
	}{
		{"/tmp/jit-1234.dump", true},
		{"/home/u/.debug/jit/java-jit-20240101.abc/jit-7.dump", true},
		{"jit-7.dump", true},
		{"/tmp/jit-.dump", false},
		{"/tmp/jit-12a.dump", false},
		{"/tmp/jit-12.dump.old", false},
		{"/tmp/jit-12.dump (deleted)", false},
		{"/tmp/myjit-12.dump", false},
		{"/tmp/jit-12.dump/lib.so", false},
		{"/tmp/perf-12.map", false},
	} {
		if got := IsMarker(tc.name); got != tc.want {
			t.Errorf("IsMarker(%q) = %v, want %v", tc.name, got, tc.want)
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

	// A record cut short ends the scan with an error.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Clone(data[:offsets[5]+8])
	r, err := perfdata.NewBytesReader(cut)
	if err == nil {
		_, err = Scan(r, nil)
	}
	if err == nil {
		t.Error("a recording cut inside a record scanned without error")
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

func TestPerfMap(t *testing.T) {
	// Beyond any pid_max, so that no process's /proc/PID/root answers, and
	// this test process's own, so that no other run shares its /tmp map.
	pid := uint32(1<<23 + os.Getpid())
	name := fmt.Sprintf("perf-%d.map", pid)
	tmp := filepath.Join("/tmp", name)
	for _, tc := range []struct {
		name  string
		in    []string // where maps are: "/tmp", or a directory given
		dirs  []string
		want  string
		warns int
	}{
		{"none", nil, []string{"a"}, "", 0},
		{"in the second directory", []string{"b"}, []string{"a", "b"}, "b", 0},
		{"directories in order", []string{"a", "b"}, []string{"a", "b"}, "a", 0},
		{"/tmp first", []string{"/tmp", "a"}, []string{"a"}, "/tmp", 0},
		{"with a bad line", []string{"bad"}, []string{"bad"}, "bad", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, in := range tc.in {
				path, content := filepath.Join(dir, in, name), "1000 10 f\n"
				if in == "/tmp" {
					path = tmp
					t.Cleanup(func() { os.Remove(tmp) })
				}
				if in == "bad" {
					content += "no map line\n"
				}
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var dirs []string
			for _, d := range tc.dirs {
				dirs = append(dirs, filepath.Join(dir, d))
			}
			warns := 0
			table, path := PerfMap(pid, dirs, func(error) { warns++ })
			want := ""
			switch tc.want {
			case "":
			case "/tmp":
				want = tmp
			default:
				want = filepath.Join(dir, tc.want, name)
			}
			if path != want || (table == nil) != (want == "") || warns != tc.warns {
				t.Fatalf("PerfMap = %v, %q with %d warnings, want %q with %d", table, path, warns, want, tc.warns)
			}
			if table == nil {
				return
			}
			if e, ok := table.Lookup(0x1008); !ok || e.Name != "f" {
				t.Errorf("0x1008 is %+v, %v in the map", e, ok)
			}
		})
	}
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
