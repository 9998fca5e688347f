package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/foreign"
)

func TestParseStatus(t *testing.T) {
	full := "Name:\tnode\nUid:\t1000\t1001\t1002\t1003\nGid:\t50\t51\t52\t53\nGroups:\t4 27 \nNSpid:\t4242\t1\n"
	for _, tc := range []struct {
		status string
		want   Status
		err    string
	}{
		{full, Status{NSpid: 1, Cred: credOf(1003, 53, 4, 27)}, ""},
		{strings.Replace(full, "Groups:\t4 27 ", "Groups:\t", 1), Status{NSpid: 1, Cred: credOf(1003, 53)}, ""},
		{strings.Replace(full, "NSpid:\t4242\t1", "NSpid:\t", 1), Status{}, "empty NSpid"},
		{strings.Replace(full, "\t1003", "", 1), Status{}, "not 4 ids"},
		{strings.Replace(full, "NSpid", "NSpiX", 1), Status{}, "no NSpid"},
		{strings.Replace(full, "4242", "x", 1), Status{}, "NSpid"},
	} {
		got, err := ParseStatus([]byte(tc.status))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error holding %q", tc.status, err, tc.err)
			}
			continue
		}
		if err != nil || got.NSpid != tc.want.NSpid || got.Cred.Uid != tc.want.Cred.Uid || got.Cred.Gid != tc.want.Cred.Gid || !slices.Equal(got.Cred.Groups, tc.want.Cred.Groups) {
			t.Errorf("%q: %+v, %v; want %+v", tc.status, got, err, tc.want)
		}
	}
}

// TestProcess gives a /proc of the test's own, so it holds whatever pids
// the machine has: a pid whose process started after the recording saw it
// is another process and is not looked into.
func TestProcess(t *testing.T) {
	fs := FS(t.TempDir())
	fake := func(pid uint32, comm string, startTicks uint64) {
		dir := fs.Path(pid)
		os.MkdirAll(dir, 0o755)
		// Fields after the command: state, then 18 more up to the start.
		stat := fmt.Sprintf("%d (%s) S%s %d 0 0\n", pid, comm, strings.Repeat(" 1", 18), startTicks)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
		os.WriteFile(filepath.Join(dir, "status"), []byte("Uid:\t7 7 7 7\nGid:\t8 8 8 8\nNSpid:\t"+fmt.Sprint(pid)+"\n"), 0o644)
	}
	fake(10, "a) (b", 500)  // started at 5 s
	fake(11, "late", 9_000) // at 90 s
	for _, tc := range []struct {
		pid  uint32
		seen uint64
		ok   bool
	}{
		{10, 6e9, true},
		{10, 5e9, true}, // within a tick of its start
		{11, 6e9, false},
		{12, 6e9, false}, // gone
	} {
		p, err := fs.Process(tc.pid, tc.seen)
		if (err == nil) != tc.ok {
			t.Errorf("Process(%d, %d): %v", tc.pid, tc.seen, err)
			continue
		}
		if err == nil && (p.Cred.Uid != 7 || p.Root() != filepath.Join(string(fs), fmt.Sprint(tc.pid), "root")) {
			t.Errorf("Process(%d): %+v, root %s", tc.pid, p, p.Root())
		}
	}
}

func TestHostSelf(t *testing.T) {
	p, err := Host.Live(uint32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if p.NSpid != uint32(os.Getpid()) || p.Cred.Uid != uint32(os.Getuid()) {
		t.Errorf("self: %+v", p.Status)
	}
	if _, err := Host.Process(uint32(os.Getpid()), 1<<62); err != nil {
		t.Errorf("self, seen now: %v", err)
	}
}

func credOf(uid, gid uint32, groups ...uint32) foreign.Cred {
	return foreign.Cred{Uid: uid, Gid: gid, Groups: groups}
}

// FuzzParseStatus: a status parsed whole has the three lines it needs, and
// nothing in it makes the parser panic.
func FuzzParseStatus(f *testing.F) {
	f.Add([]byte("Name:\tnode\nUid:\t1 2 3 4\nGid:\t5 6 7 8\nGroups:\t9\nNSpid:\t42\t1\n"))
	f.Add([]byte("NSpid:\nUid:\t1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseStatus(b)
		if err == nil && (!bytes.Contains(b, []byte("NSpid:")) || !bytes.Contains(b, []byte("Uid:")) || !bytes.Contains(b, []byte("Gid:"))) {
			t.Fatalf("parsed %+v from a status without NSpid, Uid or Gid", s)
		}
	})
}

// TestCPUTime reads utime and stime (fields 14 and 15) after a command
// name holding ") (" and spaces, and names the file when they are missing.
func TestCPUTime(t *testing.T) {
	fs := FS(t.TempDir())
	write := func(pid uint32, stat string) {
		os.MkdirAll(fs.Path(pid), 0o755)
		os.WriteFile(fs.Path(pid, "stat"), []byte(stat), 0o644)
	}
	// state, fields 4-13, utime 250 and stime 130 ticks, fields 16-22.
	write(20, "20 (a) (b c) S"+strings.Repeat(" 9", 10)+" 250 130"+strings.Repeat(" 9", 7)+"\n")
	write(21, "21 (short) S 1 1\n")
	if d, err := fs.CPUTime(20); err != nil || d != 3800*time.Millisecond {
		t.Errorf("CPUTime: %v, %v; want 3.8s", d, err)
	}
	if _, err := fs.CPUTime(21); err == nil || !strings.Contains(err.Error(), fs.Path(21, "stat")) {
		t.Errorf("a stat without utime: %v", err)
	}
}

// TestPidReused: a process's files are opened through its root only while
// its pid is still that process: one that ended and left its pid to
// another, between the check and the open or between two opens of rules
// kept (a dump read again each window), has its root refused, not read
// as the first one's owner.
func TestPidReused(t *testing.T) {
	fs := FS(t.TempDir())
	dir := fs.Path(10)
	os.MkdirAll(filepath.Join(dir, "root", "tmp"), 0o755)
	start := func(ticks int) {
		stat := fmt.Sprintf("10 (node) S%s %d 0 0\n", strings.Repeat(" 1", 18), ticks)
		os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644)
	}
	start(500)
	os.WriteFile(filepath.Join(dir, "status"), []byte(fmt.Sprintf("Uid:\t%d %[1]d %[1]d %[1]d\nGid:\t%d %[2]d %[2]d %[2]d\nNSpid:\t10\n", os.Getuid(), os.Getgid())), 0o644)
	os.WriteFile(filepath.Join(dir, "root", "tmp", "perf-10.map"), []byte("1000 10 f\n"), 0o644)
	p, err := fs.Process(10, 6e9)
	if err != nil {
		t.Fatal(err)
	}
	kept := p.Rules(false)
	if f, err := p.Open("/tmp/perf-10.map", false); err != nil {
		t.Fatalf("the process's own file: %v", err)
	} else {
		f.Close()
	}
	start(9_000) // pid 10 is another process now
	if f, err := p.Open("/tmp/perf-10.map", false); err == nil {
		f.Close()
		t.Error("opened inside the root of pid 10's next process")
	}
	if f, err := foreign.Open("/tmp/perf-10.map", kept); err == nil {
		f.Close()
		t.Error("rules kept from before opened inside the root of pid 10's next process")
	}
}
