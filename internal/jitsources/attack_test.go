package jitsources

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
)

// TestAttacks plants, as an ordinary user whose process runs, what would
// make a root report read a file that is not the process's own: the perf map
// and dump of its process as symlinks to a root-only file, a FIFO, a file of
// another user's.
func TestAttacks(t *testing.T) {
	bad := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	sleep := bad.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sleep.Process.Kill()
		sleep.Wait()
	}()
	pid := uint32(sleep.Process.Pid)
	gone := uint32(1<<23 + os.Getpid()) // beyond any pid_max
	seen := now()
	tmp := func(name string) string {
		path := filepath.Join("/tmp", name)
		t.Cleanup(func() { os.Remove(path) })
		os.Remove(path)
		return path
	}
	plant := func(path string, make func(string) error, uid int) {
		if err := make(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	link := func(path string) error { return os.Symlink(canary.Path, path) }
	fifo := func(path string) error { return syscall.Mkfifo(path, 0o644) }
	perfMapLine := func(path string) error { return os.WriteFile(path, []byte("1000 10 f\n"), 0o644) }

	t.Run("perf maps", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			pid   uint32
			make  func(string) error
			owner int
			force bool
			want  error
		}{
			{"symlink, process runs", pid, link, int(bad.Uid), false, os.ErrPermission},
			{"symlink, process gone", gone, link, int(bad.Uid), false, syscall.ELOOP},
			{"FIFO, process runs", pid, fifo, int(bad.Uid), false, foreign.ErrNotRegular},
			{"FIFO, process gone", gone, fifo, int(bad.Uid), false, foreign.ErrNotRegular},
			{"another user's map", pid, perfMapLine, 4242, false, foreign.ErrOwner},
			{"another user's map, forced", pid, perfMapLine, 4242, true, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := tmp(fmt.Sprintf("perf-%d.map", tc.pid))
				plant(path, tc.make, tc.owner)
				var warned strings.Builder
				var errs []error
				read := make(chan *PerfMap)
				go func() {
					var m *PerfMap
					for _, src := range PerfMapPaths(Host{Force: tc.force}, tc.pid, seen, nil) {
						pm, err := ReadPerfMap(src, func(err error) { fmt.Fprintln(&warned, err) })
						if err == nil {
							m = pm
							break
						}
						errs = append(errs, err)
					}
					read <- m
				}()
				var m *PerfMap
				select {
				case m = <-read:
				case <-time.After(10 * time.Second):
					t.Fatal("reading the perf map blocked")
				}
				canary.Absent(t, []byte(warned.String()+fmt.Sprint(errs)))
				if tc.want == nil {
					if m == nil || len(m.Entries) != 1 {
						t.Fatalf("read %+v, %v; want its one entry", m, errs)
					}
					return
				}
				if m != nil {
					t.Fatalf("read %s: %+v", m.Path, m.Entries)
				}
				if !errors.Is(errors.Join(errs...), tc.want) {
					t.Errorf("refused for %v, want %v", errs, tc.want)
				}
			})
		}
	})

	t.Run("dumps", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			pid  uint32
			make func(string) error
		}{
			{"symlink, process runs", pid, link},
			{"symlink, process gone", gone, link},
			{"FIFO, process runs", pid, fifo},
		} {
			t.Run(tc.name, func(t *testing.T) {
				path := tmp(fmt.Sprintf("jit-%d.dump", tc.pid))
				plant(path, tc.make, int(bad.Uid))
				rec := &Recording{Markers: []Marker{{Path: path, Pid: tc.pid, Time: seen}}}
				var warned strings.Builder
				done := make(chan struct{})
				go func() {
					rec.Load(nil, func(err error) { fmt.Fprintln(&warned, err) })
					close(done)
				}()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("loading the dump blocked")
				}
				defer rec.Close()
				canary.Absent(t, []byte(warned.String()))
				if len(rec.Dumps) != 0 {
					t.Fatalf("loaded %s", rec.Dumps[0].Path)
				}
				if !strings.Contains(warned.String(), "refused") {
					t.Errorf("no word of the refusal: %q", warned.String())
				}
			})
		}
	})
}

// TestGoneProcessOwner plants, once the recorded process is gone and its pid
// free, the perf map and dump at the paths the recording names, and in a
// directory searched for copies that others may write (the recording's, in
// /tmp), as another user would: with no owner left to open them as, root
// reads only root's, its own and those of the user sudo ran it for, as perf
// does, and says which file it refused and whose it is.
func TestGoneProcessOwner(t *testing.T) {
	bad := fixtures.NewAttacker(t)
	gone := uint32(1<<23 + os.Getpid()) // beyond any pid_max
	other := gone + 1                   // the pid a container's runtime named its dump by
	const stranger = 4242
	shared, err := os.MkdirTemp("", "jitprof-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, place := range []struct {
		name string
		dir  string   // where the files are planted
		dirs []string // searched for copies
		at   string   // the directory the recording saw the dumps in
	}{
		{"at the recorded path", "/tmp", nil, "/tmp"},
		{"in a shared directory", shared, []string{shared}, "/nonexistent"},
	} {
		for _, tc := range []struct {
			name  string
			owner uint32
			sudo  string // SUDO_UID
			force bool
			read  bool
		}{
			{"root's", 0, "", false, true},
			{"another user's", bad.Uid, "", false, false},
			{"another user's, forced", bad.Uid, "", true, true},
			{"the sudoer's", bad.Uid, fmt.Sprint(bad.Uid), false, true},
			{"another than the sudoer's", bad.Uid, fmt.Sprint(stranger), false, false},
		} {
			t.Run(place.name+"/"+tc.name, func(t *testing.T) {
				t.Setenv("SUDO_UID", tc.sudo)
				plant := func(name string, data []byte) string {
					path := filepath.Join(place.dir, name)
					os.Remove(path)
					t.Cleanup(func() { os.Remove(path) })
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(path, int(tc.owner), int(tc.owner)); err != nil {
						t.Fatal(err)
					}
					return path
				}
				refusal := func(t *testing.T, warned, path string) {
					t.Helper()
					if !strings.Contains(warned, path) || !strings.Contains(warned, fmt.Sprintf("uid %d", tc.owner)) {
						t.Errorf("the refusal names neither %s nor its owner: %q", path, warned)
					}
				}

				t.Run("perf map", func(t *testing.T) {
					path := plant(fmt.Sprintf("perf-%d.map", gone), []byte("0 7fffffffffff PWNED\n"))
					m, _, ok, refused := PickPerfMap(PerfMapPaths(Host{Force: tc.force}, gone, now(), place.dirs))
					if ok != tc.read || ok && m.String() != path {
						t.Fatalf("picked %v, %v (refused %v); want it read: %v", m, ok, refused, tc.read)
					}
					if tc.read {
						return
					}
					if !errors.Is(errors.Join(refused...), foreign.ErrOwner) {
						t.Errorf("refused for %v, want %v", refused, foreign.ErrOwner)
					}
					refusal(t, fmt.Sprint(refused), path)
				})

				for _, d := range []struct {
					name     string
					namedPid uint32
				}{{"dump", gone}, {"container's dump", other}} {
					t.Run(d.name, func(t *testing.T) {
						name := fmt.Sprintf("jit-%d.dump", d.namedPid)
						path := plant(name, dumpBytes(t, 1))
						rec := &Recording{Markers: []Marker{{Path: filepath.Join(place.at, name), Pid: gone, Time: now()}}, Host: Host{Force: tc.force}}
						var warned strings.Builder
						rec.Load(place.dirs, func(err error) { fmt.Fprintln(&warned, err) })
						defer rec.Close()
						if read := len(rec.Dumps) == 1; read != tc.read {
							t.Fatalf("loaded %d dumps (warned %q); want it read: %v", len(rec.Dumps), warned.String(), tc.read)
						}
						if !tc.read {
							refusal(t, warned.String(), path)
						}
					})
				}
			})
		}
	}
}

// sleeping starts a process of user's that runs until the test ends, and
// returns its pid.
func sleeping(t *testing.T, user fixtures.Attacker) uint32 {
	t.Helper()
	sleep := user.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleep.Process.Kill()
		sleep.Wait()
	})
	return uint32(sleep.Process.Pid)
}

// TestSharedDirLive: while the process runs, a directory searched for copies
// that others may write holds its owner's files too, as its own /tmp does,
// and still no one else's.
func TestSharedDirLive(t *testing.T) {
	bad := fixtures.NewAttacker(t)
	pid := sleeping(t, bad)
	shared := bad.Dir(t)
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		owner int
		read  bool
	}{
		{"its owner's", int(bad.Uid), true},
		{"root's", 0, true},
		{"another user's", 4242, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(shared, fmt.Sprintf("perf-%d.map", pid))
			if err := os.WriteFile(path, []byte("1000 10 f\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			if err := os.Chown(path, tc.owner, tc.owner); err != nil {
				t.Fatal(err)
			}
			m, _, ok, refused := PickPerfMap(PerfMapPaths(Host{}, pid, now(), []string{shared}))
			if got := ok && m.String() == path; got != tc.read {
				t.Errorf("read %s: %v (refused %v), want %v", path, got, refused, tc.read)
			}
		})
	}
}
