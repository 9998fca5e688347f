package agent

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
)

// testAttr is an attr as the agent's stream has: sample_id_all, callchains,
// CLOCK_MONOTONIC.
func testAttr() *perfdata.Attr {
	st := perfdata.SampleIdentifier | perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
		perfdata.SampleCPU | perfdata.SamplePeriod | perfdata.SampleCallchain
	return &perfdata.Attr{Type: 1, SampleType: st, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask,
		SamplePeriod: 49, IDs: []uint64{7}}
}

func hdr(t perfdata.RecordType, misc uint16, a *perfdata.Attr) perfdata.RecordHeader {
	return perfdata.RecordHeader{Type: t, Misc: misc, Attr: a}
}

func mmap2(a *perfdata.Attr, pid uint32, addr, size, pgoff uint64, name string, time uint64) *perfdata.Mmap2 {
	return &perfdata.Mmap2{RecordHeader: hdr(perfdata.TypeMmap2, perfdata.MiscUser, a), Pid: pid, Tid: pid, Addr: addr, Len: size, Pgoff: pgoff,
		Prot: 5, Filename: name, Trailer: perfdata.Trailer{Pid: pid, Tid: pid, Time: time, ID: 7}}
}

func comm(a *perfdata.Attr, pid, tid uint32, name string, exec bool, time uint64) *perfdata.Comm {
	var misc uint16
	if exec {
		misc = perfdata.MiscCommExec
	}
	return &perfdata.Comm{RecordHeader: hdr(perfdata.TypeComm, misc, a), Pid: pid, Tid: tid, Comm: name,
		Trailer: perfdata.Trailer{Pid: pid, Tid: tid, Time: time, ID: 7}}
}

func task(a *perfdata.Attr, typ perfdata.RecordType, pid, ppid, tid, ptid uint32, time uint64) *perfdata.Task {
	return &perfdata.Task{RecordHeader: hdr(typ, 0, a), Pid: pid, PPid: ppid, Tid: tid, PTid: ptid, Time: time,
		Trailer: perfdata.Trailer{Pid: pid, Tid: tid, Time: time, ID: 7}}
}

// TestDecoder: records encoded as the kernel lays them out come back from
// the decoder as they were, one at a time.
func TestDecoder(t *testing.T) {
	a := testAttr()
	d, err := newDecoder(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []perfdata.Record{
		mmap2(a, 10, 0x1000, 0x2000, 0x400, "/usr/bin/node", 5),
		comm(a, 10, 11, "worker", false, 6),
		task(a, perfdata.TypeFork, 12, 10, 12, 10, 7),
		task(a, perfdata.TypeExit, 12, 12, 12, 12, 8),
		mmap2(a, 10, 0x7000, 0x100, 0, "/tmp/jit-10.dump", 9),
	} {
		t.Run(rec.Header().Type.String(), func(t *testing.T) {
			raw, err := perfdata.AppendRecord(nil, rec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := d.decode(raw)
			if err != nil {
				t.Fatal(err)
			}
			gotOwn, _ := own(got)
			want, _ := own(rec)
			clearHeader(gotOwn)
			clearHeader(want)
			if !reflect.DeepEqual(gotOwn, want) {
				t.Errorf("decoded %+v, want %+v", gotOwn, want)
			}
		})
	}
}

// clearHeader leaves the fields a decoder adds (offset, attr, raw bytes).
func clearHeader(r perfdata.Record) {
	h := r.Header()
	h.Offset, h.Attr, h.Raw = 0, nil, nil
}

// TestTracker: what is kept of each process as records come, and what a
// window's perf.data starts with.
func TestTracker(t *testing.T) {
	a := testAttr()
	node := mmap2(a, 10, 0x400000, 0x100000, 0, "/usr/bin/node", 1)
	marker := mmap2(a, 10, 0x7f0000, 0x1000, 0, "/tmp/jit-10.dump", 2)
	for _, tc := range []struct {
		name    string
		records []perfdata.Record
		// want: by pid, the mappings' names and the threads' names.
		maps    map[uint32][]string
		comms   map[uint32][]string
		markers map[uint32][]string // of the processes sampled
		dropped []uint32            // exited, gone after the cut
	}{
		{
			name:    "a process and its dump",
			records: []perfdata.Record{comm(a, 10, 10, "node", true, 0), node, marker},
			maps:    map[uint32][]string{10: {"/usr/bin/node", "/tmp/jit-10.dump"}},
			comms:   map[uint32][]string{10: {"node"}},
			markers: map[uint32][]string{10: {"/tmp/jit-10.dump"}},
		},
		{
			name: "a child inherits, then execs",
			records: []perfdata.Record{comm(a, 10, 10, "node", true, 0), node, marker,
				task(a, perfdata.TypeFork, 11, 10, 11, 10, 3)},
			maps:    map[uint32][]string{10: {"/usr/bin/node", "/tmp/jit-10.dump"}, 11: {"/usr/bin/node", "/tmp/jit-10.dump"}},
			comms:   map[uint32][]string{10: {"node"}, 11: {"node"}},
			markers: map[uint32][]string{10: {"/tmp/jit-10.dump"}, 11: {"/tmp/jit-10.dump"}},
		},
		{
			name: "exec replaces the image and the threads",
			records: []perfdata.Record{comm(a, 10, 10, "sh", true, 0), comm(a, 10, 12, "t", false, 1), node,
				comm(a, 10, 10, "java", true, 3), mmap2(a, 10, 0x500000, 0x1000, 0, "/usr/bin/java", 4)},
			maps:  map[uint32][]string{10: {"/usr/bin/java"}},
			comms: map[uint32][]string{10: {"java"}},
		},
		{
			name: "threads named after their maker, gone at their exit",
			records: []perfdata.Record{comm(a, 10, 10, "node", true, 0), task(a, perfdata.TypeFork, 10, 10, 13, 10, 1),
				task(a, perfdata.TypeFork, 10, 10, 14, 10, 2), comm(a, 10, 14, "V8 Worker", false, 3), task(a, perfdata.TypeExit, 10, 10, 13, 13, 4)},
			maps:  map[uint32][]string{10: nil},
			comms: map[uint32][]string{10: {"node", "V8 Worker"}},
		},
		{
			name: "an exited process is dropped at the cut",
			records: []perfdata.Record{comm(a, 10, 10, "node", true, 0), node, comm(a, 20, 20, "short", true, 1),
				task(a, perfdata.TypeExit, 20, 20, 20, 20, 2)},
			maps:    map[uint32][]string{10: {"/usr/bin/node"}},
			comms:   map[uint32][]string{10: {"node"}},
			dropped: []uint32{20},
		},
		{
			name:    "a mapping over another cuts it",
			records: []perfdata.Record{node, mmap2(a, 10, 0x440000, 0x10000, 0, "//anon", 5)},
			maps:    map[uint32][]string{10: {"/usr/bin/node", "/usr/bin/node", "//anon"}},
			comms:   map[uint32][]string{10: nil},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.procFS = procfs.FS(t.TempDir()) // nothing to describe
			for _, r := range tc.records {
				o, _ := own(r)
				tr.apply(o)
			}
			sampled := map[uint32]bool{10: true, 11: true, 20: true}
			infos, waits, _, exited := tr.cut(sampled, "")
			if slices.Sort(exited); !slices.Equal(exited, tc.dropped) {
				t.Errorf("exited %v, want %v", exited, tc.dropped)
			}
			for _, pid := range tc.dropped {
				if _, ok := infos[pid]; !ok {
					t.Errorf("pid %d: not in the window's resources", pid)
				}
				if tr.procs[pid] != nil {
					t.Errorf("pid %d exited but is kept", pid)
				}
			}
			gotMaps, gotComms := make(map[uint32][]string), make(map[uint32][]string)
			err := tr.records(func(r perfdata.Record) error {
				switch r := r.(type) {
				case *perfdata.Mmap2:
					gotMaps[r.Pid] = append(gotMaps[r.Pid], r.Filename)
				case *perfdata.Comm:
					gotComms[r.Pid] = append(gotComms[r.Pid], r.Comm)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for pid := range tr.procs {
				if _, ok := tc.maps[pid]; !ok {
					t.Errorf("pid %d kept, want only %v", pid, slices.Sorted(maps.Keys(tc.maps)))
				}
				if !slices.Equal(gotMaps[pid], tc.maps[pid]) || !slices.Equal(gotComms[pid], tc.comms[pid]) {
					t.Errorf("pid %d: mappings %q threads %q, want %q and %q", pid, gotMaps[pid], gotComms[pid], tc.maps[pid], tc.comms[pid])
				}
			}
			gotWaits := make(map[uint32][]string)
			for _, w := range waits {
				gotWaits[w.pid] = append(gotWaits[w.pid], w.path)
			}
			if !reflect.DeepEqual(gotWaits, nonNil(tc.markers)) {
				t.Errorf("dumps waited for %v, want %v", gotWaits, tc.markers)
			}
		})
	}
}

func nonNil(m map[uint32][]string) map[uint32][]string {
	if m == nil {
		return map[uint32][]string{}
	}
	return m
}

// TestPlace: a new mapping cuts what it overlaps out of the older ones,
// file offsets kept right.
func TestPlace(t *testing.T) {
	a := testAttr()
	type m struct{ addr, size, pgoff uint64 }
	for _, tc := range []struct {
		name string
		old  []m
		new  m
		want []m
	}{
		{"apart", []m{{0x1000, 0x1000, 0}}, m{0x3000, 0x1000, 0}, []m{{0x1000, 0x1000, 0}, {0x3000, 0x1000, 0}}},
		{"adjacent", []m{{0x1000, 0x1000, 0}}, m{0x2000, 0x1000, 0}, []m{{0x1000, 0x1000, 0}, {0x2000, 0x1000, 0}}},
		{"covers", []m{{0x1000, 0x1000, 0}}, m{0x800, 0x2000, 0}, []m{{0x800, 0x2000, 0}}},
		{"inside", []m{{0x1000, 0x4000, 0x10000}}, m{0x2000, 0x1000, 0}, []m{{0x1000, 0x1000, 0x10000}, {0x3000, 0x2000, 0x12000}, {0x2000, 0x1000, 0}}},
		{"over the end", []m{{0x1000, 0x2000, 0}}, m{0x2000, 0x2000, 0}, []m{{0x1000, 0x1000, 0}, {0x2000, 0x2000, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var maps []*perfdata.Mmap2
			for _, o := range tc.old {
				maps = append(maps, mmap2(a, 1, o.addr, o.size, o.pgoff, "/lib/x.so", 1))
			}
			maps = place(maps, mmap2(a, 1, tc.new.addr, tc.new.size, tc.new.pgoff, "/lib/y.so", 2))
			var got []m
			for _, x := range maps {
				got = append(got, m{x.Addr, x.Len, x.Pgoff})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %x, want %x", got, tc.want)
			}
		})
	}
}

func TestContainerID(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct{ cgroup, want string }{
		{"0::/init.scope\n", ""},
		{"0::/system.slice/docker-" + id + ".scope\n", id},
		{"12:pids:/docker/" + id + "\n0::/\n", id},
		{"0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + id + ".scope\n", id},
		{"0::/user.slice/user-1000.slice\n", ""},
	} {
		if got := containerID([]byte(tc.cgroup)); got != tc.want {
			t.Errorf("containerID(%q) = %q, want %q", tc.cgroup, got, tc.want)
		}
	}
}

func TestUnderCgroup(t *testing.T) {
	v1 := "9:name=systemd:/\n8:pids:/jobs/web\n4:memory:/process_api/0065\n0::/\n"
	v2 := "0::/system.slice/docker-abc.scope\n"
	for _, tc := range []struct {
		cgroup, path string
		want         bool
	}{
		{v1, "/jobs/web", true},
		{v1, "/jobs", true},
		{v1, "/jobs/", true},
		{v1, "/jobs/we", false},
		{v1, "/process_api", true},
		{v2, "/system.slice", true},
		{v2, "/system.slice/docker-abc.scope", true},
		{v2, "/user.slice", false},
		{"", "/", false},
	} {
		if got := underCgroup(tc.cgroup, tc.path); got != tc.want {
			t.Errorf("underCgroup(%q, %q) = %v, want %v", tc.cgroup, tc.path, got, tc.want)
		}
	}
}

func FuzzContainerID(f *testing.F) {
	f.Add([]byte("0::/system.slice/docker-" + strings.Repeat("ab", 32) + ".scope\n"))
	f.Add([]byte("0::/\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id := containerID(b)
		if id != "" && (len(id) != 64 || !strings.Contains(string(b), id)) {
			t.Errorf("containerID gave %q", id)
		}
	})
}

// TestPprofTrim: the directory is kept within its bound, oldest first,
// the newest profile always kept, other files left alone.
func TestPprofTrim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		max   int64
		sizes []int // of jitprof-<i>.pb.gz, oldest first
		kept  int   // the newest kept
	}{
		{"within", 1000, []int{100, 100, 100}, 3},
		{"over by one", 250, []int{100, 100, 100}, 2},
		{"only the newest fits", 100, []int{100, 100, 100}, 1},
		{"the newest alone is too big", 10, []int{100, 100, 100}, 1},
		{"no bound", 0, []int{100, 100, 100}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, n := range tc.sizes {
				name := filepath.Join(dir, fmt.Sprintf("%s20261124T0000%02dZ-%06d.pb.gz", pprofPrefix, i, i))
				if err := os.WriteFile(name, make([]byte, n), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			other := filepath.Join(dir, "notes.txt")
			os.WriteFile(other, make([]byte, 10000), 0o644)
			ps := &pprofSink{dir: dir, max: tc.max, log: func(string) {}}
			if err := ps.trim(); err != nil {
				t.Fatal(err)
			}
			left, _ := filepath.Glob(filepath.Join(dir, pprofPrefix+"*"))
			if len(left) != tc.kept {
				t.Fatalf("%d profiles left, want %d: %v", len(left), tc.kept, left)
			}
			if want := fmt.Sprintf("-%06d.pb.gz", len(tc.sizes)-1); !strings.HasSuffix(left[len(left)-1], want) {
				t.Errorf("the newest is gone: %v", left)
			}
			if _, err := os.Stat(other); err != nil {
				t.Errorf("a file not the agent's was removed: %v", err)
			}
		})
	}
}

// BenchmarkSamplerAdd is the sampler's work per record from the ring
// buffers: a sample (written, its pid noted) and, less often, a mapping.
func BenchmarkSamplerAdd(b *testing.B) {
	a := testAttr()
	dec, err := newDecoder(a)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	w, err := perfdata.Create(filepath.Join(dir, "w.data"), perfdata.Options{Attrs: []*perfdata.Attr{a}})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Abort()
	s := &sampler{o: Options{Log: func(string) {}}, attr: a, tr: newTracker(), dec: dec, w: w, sampled: make(map[uint32]bool)}
	s.tr.procFS = procfs.FS(dir)
	sample, err := perfdata.AppendRecord(nil, &perfdata.Sample{RecordHeader: hdr(perfdata.TypeSample, perfdata.MiscUser, a),
		ID: 7, IP: 0x401000, Pid: 10, Tid: 10, Time: 100, Period: 1, Callchain: []uint64{perfdata.ContextUser, 0x401000, 0x402000, 0x403000}})
	if err != nil {
		b.Fatal(err)
	}
	mapping, err := perfdata.AppendRecord(nil, mmap2(a, 10, 0x7f0000, 0x1000, 0, "//anon", 100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rec := sample
		if i%64 == 0 {
			rec = mapping
		}
		if err := s.add(rec); err != nil {
			b.Fatal(err)
		}
		if i%1024 == 0 {
			s.applyPending()
		}
	}
}

// TestRestoreMarkers: a JVM the agent was loaded into a second or more ago
// whose marker the stream lacks gets it from its maps, in the state and the
// window, once; one whose marker came, one that exited, and one loaded
// less than a second ago (its marker may still be in a ring) get nothing,
// the last until it is older.
func TestRestoreMarkers(t *testing.T) {
	a := testAttr()
	dir := t.TempDir()
	const lost, held, gone, recent = 4242, 4343, 4444, 4545
	marker := func(pid int) string {
		return fmt.Sprintf("/home/u/.debug/jit/jitprof-jvmti-jit-20261127.x/jit-%d.dump", pid)
	}
	lines := map[uint32]string{}
	for _, pid := range []int{lost, held, recent} {
		lines[uint32(pid)] = fmt.Sprintf("7fad97a1e000-7fad97a1f000 r-xp 00000000 fe:00 10428402                   %s\n", marker(pid))
	}
	w, err := perfdata.Create(filepath.Join(dir, "w.data"), perfdata.Options{Attrs: []*perfdata.Attr{a}})
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	s := &sampler{o: Options{Log: func(l string) { logs = append(logs, l) }}, attr: a, tr: newTracker(), w: w, jvms: make(map[uint32]uint64)}
	s.tr.procFS = fixtures.ProcWithMaps(t, lines)
	for _, pid := range []uint32{lost, held, gone, recent} {
		s.tr.apply(comm(a, pid, pid, "java", false, 1))
	}
	s.tr.apply(mmap2(a, held, 0x7fad97a1e000, 0x1000, 0, marker(held), 2))
	now := uint64(10 * time.Second)
	for pid, at := range map[uint32]uint64{lost: 1000, held: 1000, gone: 1000, recent: now - 1000} {
		s.jvms[pid] = at
	}
	if err := s.restoreMarkers(now); err != nil {
		t.Fatal(err)
	}
	for pid, want := range map[uint32][]string{lost: {marker(lost)}, held: {marker(held)}, gone: nil, recent: nil} {
		if got := s.tr.procs[pid].markers(); !slices.Equal(got, want) {
			t.Errorf("JVM %d's markers %q, want %q", pid, got, want)
		}
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "JVM 4242") {
		t.Errorf("logs %q", logs)
	}
	if _, ok := s.jvms[recent]; !ok || len(s.jvms) != 1 {
		t.Errorf("left to look at: %v, want JVM %d alone", s.jvms, recent)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var written []string
	for _, rec := range fixtures.Records(t, filepath.Join(dir, "w.data")) {
		if m, ok := rec.(*perfdata.Mmap2); ok {
			written = append(written, fmt.Sprintf("%d %s at %d", m.Pid, m.Filename, m.Trailer.Time))
		}
	}
	if want := []string{fmt.Sprintf("%d %s at 1000", lost, marker(lost))}; !slices.Equal(written, want) {
		t.Errorf("the window holds %q, want %q", written, want)
	}
}
