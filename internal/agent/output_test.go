package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/perfmap"
)

// logLines collects what the agent logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) log(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// randomProfile returns a profile whose encoding, gzipped, is about size
// bytes: its functions' names are random, so they do not compress.
func randomProfile(t *testing.T, size int) *profile.Profile {
	t.Helper()
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}}}
	for i := 0; i < size/32; i++ {
		b := make([]byte, 32)
		rand.Read(b)
		fn := &profile.Function{ID: uint64(i + 1), Name: hex.EncodeToString(b)}
		loc := &profile.Location{ID: uint64(i + 1), Line: []profile.Line{{Function: fn}}}
		p.Function = append(p.Function, fn)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{1}})
	}
	return p
}

func encodedSize(t *testing.T, p *profile.Profile) int {
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Len()
}

// pprofNames lists the agent's profiles in dir, oldest first.
func pprofNames(t *testing.T, dir string) []string {
	t.Helper()
	ps := &pprofSink{dir: dir}
	files, err := ps.profiles()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.name)
	}
	return names
}

// TestPprofDiskFull: on a full disk the pprof directory drops its oldest
// profiles to make room for the new one, and says how many and how many
// bytes; when dropping them all would not make room, none is dropped in
// vain.
func TestPprofDiskFull(t *testing.T) {
	old := randomProfile(t, 40<<10)
	oldSize := encodedSize(t, old)
	for _, tc := range []struct {
		name string
		big  int // raw size of the new profile, against the old
		room bool
	}{
		{"the oldest make room", 100 << 10, true},
		{"too big to make room for", 500 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			big := randomProfile(t, tc.big)
			// Room for the five old profiles and 80 KiB: not for the new
			// one, which holds about 145 KiB, or 725.
			dir := fixtures.SmallFS(t, (5*oldSize+4095)/4096*4096+80<<10)
			var logs logLines
			ps := &pprofSink{dir: dir, c: new(counters), log: logs.log}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for seq := range int64(5) {
				ps.put(&window{seq: seq, start: start.Add(time.Duration(seq) * time.Second)}, old, "")
			}
			before := pprofNames(t, dir)
			if len(before) != 5 {
				t.Fatalf("%d profiles before the disk fills, want 5; log:\n%s", len(before), &logs)
			}
			logs.lines = nil
			ps.put(&window{seq: 99, start: start.Add(time.Hour)}, big, "")

			left := pprofNames(t, dir)
			newest := slices.Contains(left, fmt.Sprintf("%s%s-%06d.pb.gz", pprofPrefix, start.Add(time.Hour).Format("20060102T150405Z"), 99))
			if newest != tc.room {
				t.Fatalf("the new profile written: %v, want %v; log:\n%s", newest, tc.room, &logs)
			}
			if files, _ := os.ReadDir(dir); len(files) != len(left) {
				t.Errorf("files other than profiles left: %v", files)
			}
			if !tc.room {
				if !slices.Equal(left, before) {
					t.Errorf("profiles dropped in vain: %v left of %v", left, before)
				}
				if !strings.Contains(logs.String(), "none removed") {
					t.Errorf("the log does not say why no room was made:\n%s", &logs)
				}
				return
			}
			kept := left[:len(left)-1]
			removed := len(before) - len(kept)
			if removed == 0 || !slices.Equal(kept, before[removed:]) {
				t.Errorf("kept %v of %v, want the newest of them", kept, before)
			}
			m := regexp.MustCompile(`removed the (\d+) oldest profiles \((\d+) bytes\)`).FindStringSubmatch(logs.String())
			if m == nil {
				t.Fatalf("no line says what was removed:\n%s", &logs)
			}
			if n, _ := strconv.Atoi(m[1]); n != removed {
				t.Errorf("the log says %s removed, %d were", m[1], removed)
			}
			if b, _ := strconv.Atoi(m[2]); b != removed*oldSize {
				t.Errorf("the log says %s bytes freed by %d profiles of %d bytes", m[2], removed, oldSize)
			}
			got := fixtures.ReadProfile(t, filepath.Join(dir, left[len(left)-1]))
			if len(got.Sample) != len(big.Sample) {
				t.Errorf("the new profile holds %d samples, want %d", len(got.Sample), len(big.Sample))
			}
		})
	}
}

// TestKeepWindowsMakeRoom: on a full disk, the windows kept go oldest first,
// those the symbolizer is done with only, until the room wanted is free.
func TestKeepWindowsMakeRoom(t *testing.T) {
	for _, tc := range []struct {
		name    string
		read    int64 // the last window read
		need    int64
		removed []int64
	}{
		{"one is enough", 4, 100, []int64{1}},
		{"two", 4, 150, []int64{1, 2}},
		{"not past the windows read", 2, 1000, []int64{1, 2}},
		{"none read", 0, 1000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs logLines
			s := &sampler{o: Options{KeepWindows: dir, Log: logs.log}, dir: dir}
			s.c.read.Store(tc.read)
			for seq := range int64(5) {
				name := filepath.Join(dir, fmt.Sprintf(windowName, seq+1, 1000+seq))
				if err := os.WriteFile(name, make([]byte, 100), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			os.WriteFile(filepath.Join(dir, "perf-1.map"), make([]byte, 1000), 0o600)
			s.makeRoom(tc.need)
			var gone []int64
			for seq := range int64(5) {
				if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf(windowName, seq+1, 1000+seq))); err != nil {
					gone = append(gone, seq+1)
				}
			}
			if !slices.Equal(gone, tc.removed) {
				t.Errorf("windows removed: %v, want %v", gone, tc.removed)
			}
			if _, err := os.Stat(filepath.Join(dir, "perf-1.map")); err != nil {
				t.Errorf("a copy, not a window, was removed: %v", err)
			}
			if want := fmt.Sprintf("removed the %d oldest windows kept (%d bytes)", len(tc.removed), 100*len(tc.removed)); !strings.Contains(logs.String(), want) {
				t.Errorf("log %q, want %q", &logs, want)
			}
		})
	}
}

// TestUnsafeOutputDirs: as root, the agent refuses a pprof directory, a
// windows directory or a status file where another user could redirect its
// writes, before it samples anything.
func TestUnsafeOutputDirs(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	t.Setenv("SUDO_UID", "")
	theirs := attacker.Dir(t)
	for _, o := range []Options{
		{PprofDir: theirs},
		{PprofDir: filepath.Join(theirs, "made")},
		{KeepWindows: theirs},
		{PprofDir: t.TempDir(), Status: filepath.Join(theirs, "status.json")},
	} {
		o.Window = time.Second
		if _, err := Run(context.Background(), o); !errors.Is(err, atomicfile.ErrUnsafeDir) {
			t.Errorf("%+v: err = %v, want ErrUnsafeDir", o, err)
		}
	}
	if _, err := os.Stat(filepath.Join(theirs, "made")); err == nil {
		t.Errorf("a directory was made in the attacker's")
	}
}

// plantLinks has the attacker plant, in dir (a sticky directory, where
// the attacker may), a link to target at each of names.
func plantLinks(t *testing.T, attacker fixtures.Attacker, dir, target string, names ...string) {
	t.Helper()
	for _, name := range names {
		if out, err := attacker.Command("ln", "-s", target, filepath.Join(dir, name)).CombinedOutput(); err != nil {
			t.Fatalf("the attacker's ln: %v\n%s", err, out)
		}
	}
}

// stickyDir is a root-owned directory every user may add to, as /tmp.
func stickyDir(t *testing.T) string {
	t.Helper()
	// Not in t.TempDir, which only root may enter.
	dir, err := os.MkdirTemp("", "jitprof-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir
}

// canaryIntact fails the test if the canary's file changed, or moved.
func canaryIntact(t *testing.T, c fixtures.Canary, before []byte) {
	t.Helper()
	if after, err := os.ReadFile(c.Path); err != nil || string(after) != string(before) {
		t.Errorf("the root-only file behind the planted links changed: %q, %v", after, err)
	}
}

// TestPprofPlantedLinks: links the attacker plants at the names the pprof
// sink and the status file will be written under are replaced, never
// written through.
func TestPprofPlantedLinks(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	before, _ := os.ReadFile(canary.Path)
	dir := stickyDir(t)
	start := time.Now()
	var names []string
	for seq := range int64(3) {
		names = append(names, fmt.Sprintf("%s%s-%06d.pb.gz", pprofPrefix, start.UTC().Format("20060102T150405Z"), seq))
	}
	plantLinks(t, attacker, dir, canary.Path, append(names, "status.json")...)
	var logs logLines
	ps := &pprofSink{dir: dir, c: new(counters), log: logs.log}
	for seq := range int64(3) {
		ps.put(&window{seq: seq, start: start}, randomProfile(t, 1000), "")
	}
	ps.c.writeStatus(filepath.Join(dir, "status.json"))
	canaryIntact(t, canary, before)
	for _, name := range append(names, "status.json") {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want root's regular file, 0600 (log: %s)", name, fi.Mode(), err, &logs)
		}
	}
}

// TestPprofOthersFiles: in a shared directory, files of the profiles' names
// that are not the agent's own (another user's, a hard link to a file of
// root's) are neither counted against the bound nor removed; a sparse
// file counts what it holds on disk, not its length. Each planted file
// sorts where it hurts most: a huge one as the newest, which trim would
// keep while it removed the rest; a small one as the oldest, which trim
// would remove first.
func TestPprofOthersFiles(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	const newest, oldest = pprofPrefix + "99991231T235959Z-999999.pb.gz", pprofPrefix + "00010101T000000Z-000000.pb.gz"
	asAttacker := func(t *testing.T, script string, args ...string) {
		t.Helper()
		if out, err := attacker.Command("sh", append([]string{"-c", script, "sh"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("the attacker's %s: %v\n%s", script, err, out)
		}
	}
	for _, tc := range []struct {
		name  string
		max   int64
		plant func(t *testing.T, dir string) string // returns the planted name
		kept  int                                   // of the agent's three
	}{
		{"another user's sparse file, the newest", 1000, func(t *testing.T, dir string) string {
			asAttacker(t, `truncate -s 64G "$1"`, filepath.Join(dir, newest))
			return newest
		}, 3},
		{"another user's file, the oldest", 250, func(t *testing.T, dir string) string {
			asAttacker(t, `head -c 1000 /dev/zero > "$1"`, filepath.Join(dir, oldest))
			return oldest
		}, 2},
		{"another user's link to a file of root's", 1000, func(t *testing.T, dir string) string {
			shared := filepath.Join(dir, "shared.log")
			if err := os.WriteFile(shared, make([]byte, 100000), 0o600); err != nil {
				t.Fatal(err)
			}
			// What protected_hardlinks lets another user link: a file
			// they may read and write.
			if err := os.Chmod(shared, 0o666); err != nil {
				t.Fatal(err)
			}
			asAttacker(t, `ln "$1" "$2"`, shared, filepath.Join(dir, newest))
			return newest
		}, 3},
		{"a sparse file of the agent's user", 1000, func(t *testing.T, dir string) string {
			f, err := os.Create(filepath.Join(dir, newest))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(64 << 30); err != nil {
				t.Fatal(err)
			}
			return newest
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := stickyDir(t)
			var own []string
			for i := range 3 {
				name := fmt.Sprintf("%s20260101T0000%02dZ-%06d.pb.gz", pprofPrefix, i, i)
				if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 100), 0o600); err != nil {
					t.Fatal(err)
				}
				own = append(own, name)
			}
			planted := tc.plant(t, dir)
			ps := &pprofSink{dir: dir, max: tc.max, log: func(string) {}}
			if err := ps.trim(); err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, name := range own {
				if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
					left = append(left, name)
				}
			}
			if want := own[len(own)-tc.kept:]; !slices.Equal(left, want) {
				t.Errorf("the agent's profiles left: %v, want %v", left, want)
			}
			if _, err := os.Lstat(filepath.Join(dir, planted)); err != nil {
				t.Errorf("%s removed: %v", planted, err)
			}
		})
	}
}

// TestOutputModes runs the agent with every output it has, under two
// umasks: every file it writes (windows, copies of perf maps, profiles, the
// status) holds other processes' data, so is 0600 whatever the umask; and
// links the attacker planted in the windows directory at the names of the
// copies are replaced, not written through.
func TestOutputModes(t *testing.T) {
	fixtures.RealTier(t, "sampling with perf_event_open")
	attacker := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	before, _ := os.ReadFile(canary.Path)
	for _, umask := range []int{0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %04o", umask), func(t *testing.T) {
			keep, pprofDir := stickyDir(t), filepath.Join(t.TempDir(), "pprof")
			status := filepath.Join(t.TempDir(), "status.json")
			pid := os.Getpid()
			plantLinks(t, attacker, keep, canary.Path, fmt.Sprintf("perf-%d.map", pid), fmt.Sprintf("perf-%d.map.times", pid))
			// The test process's own perf map, for the agent to copy.
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
			pm, err := perfmap.Create("")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pm.Close(); os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid)) })
			if err := pm.WriteEntry(perfmap.Entry{Start: 0x1000, Size: 0x100, Name: "jitted"}); err != nil {
				t.Fatal(err)
			}
			pm.Flush()

			old := unix.Umask(umask)
			defer unix.Umask(old)
			var logs logLines
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := Run(ctx, Options{Freq: 199, Pids: []int{pid}, Window: 300 * time.Millisecond,
					KeepWindows: keep, PprofDir: pprofDir, Status: status, Log: logs.log})
				done <- err
			}()
			// Busy, to be sampled, until two windows are profiled.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				if b, err := os.ReadFile(status); err == nil && strings.Contains(string(b), `"profiled": 2`) {
					break
				}
				for spin := time.Now(); time.Since(spin) < 50*time.Millisecond; {
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("agent: %v\n%s", err, &logs)
			}
			unix.Umask(old)

			kinds := map[string]int{}
			for _, root := range []string{keep, pprofDir, status} {
				filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					fi, err := os.Lstat(path)
					if err != nil {
						return err
					}
					kind := filepath.Ext(path)
					kinds[kind]++
					if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
						t.Errorf("%s: %v, want a regular file, 0600", path, fi.Mode())
					}
					return nil
				})
			}
			for _, kind := range []string{".data", ".map", ".times", ".gz", ".json"} {
				if kinds[kind] == 0 {
					t.Errorf("no %s file written: %v\nlog:\n%s", kind, kinds, &logs)
				}
			}
			canaryIntact(t, canary, before)
		})
	}
}

// TestKeepWindowsDiskFull: with --keep-windows on a disk that fills, the
// agent goes on: the window the disk filled in is cut at its last whole
// record, the oldest windows kept make room, and later windows are
// profiled.
func TestKeepWindowsDiskFull(t *testing.T) {
	fixtures.RealTier(t, "sampling with perf_event_open")
	keep := fixtures.SmallFS(t, 256<<10)
	var logs logLines
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	status := filepath.Join(t.TempDir(), "status.json")
	go func() {
		_, err := Run(ctx, Options{Freq: 999, Pids: []int{os.Getpid()}, Window: 200 * time.Millisecond,
			KeepWindows: keep, Status: status, Log: logs.log})
		done <- err
	}()
	// Busy, to be sampled, until the disk has filled and been made room
	// in twice, and ten windows more.
	made := regexp.MustCompile(`removed the [1-9]\d* oldest windows kept`)
	var windows, profiled, until, profiledThen int64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && (until == 0 || windows < until); {
		for spin := time.Now(); time.Since(spin) < 50*time.Millisecond; {
		}
		if b, err := os.ReadFile(status); err == nil {
			var st Status
			if json.Unmarshal(b, &st) == nil {
				windows, profiled = st.Windows, st.Profiled
			}
		}
		if until == 0 && len(made.FindAllString(logs.String(), -1)) >= 2 {
			until, profiledThen = windows+10, profiled
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("the agent stopped on a full disk: %v\n%s", err, &logs)
	}
	if n := len(made.FindAllString(logs.String(), -1)); n < 2 {
		t.Fatalf("room made %d times, want 2; log:\n%s", n, &logs)
	}
	// Which of the two a window meets depends on whether the disk filled
	// before or at the flush of its buffer.
	if !regexp.MustCompile(`window \d+ (dropped|cut short at its last whole record)`).MatchString(logs.String()) {
		t.Errorf("no window said to end on the full disk:\n%s", &logs)
	}
	// Of the ten windows at least after room was made twice, some were
	// profiled: not all, since the symbolizer skips windows when it is
	// behind, as on a loaded machine it is.
	if st := readStatus(t, status); st.Profiled-profiledThen < 3 {
		t.Errorf("%d windows profiled of the %d after room was made twice; log:\n%s", st.Profiled-profiledThen, st.Windows-until+10, &logs)
	}
}
