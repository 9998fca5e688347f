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
