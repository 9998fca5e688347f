package hotspot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/procfs"
)

func TestScanMaps(t *testing.T) {
	const (
		jvm    = "7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /usr/lib/jvm/java-17/lib/server/libjvm.so\n"
		anon   = "7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n"
		heap   = "55d000000000-55d000021000 rw-p 00000000 00:00 0                          [heap]\n"
		marker = "7f0000400000-7f0000401000 r-xp 00000000 08:01 99 /home/a b/jit-42.dump\n"
	)
	tests := []struct {
		name    string
		maps    string
		hotspot bool
		jitdump string
	}{
		{"a HotSpot JVM", anon + jvm + heap, true, ""},
		{"writing a dump, spaces in its path", jvm + marker, true, "/home/a b/jit-42.dump"},
		{"a dump removed since", jvm + strings.Replace(marker, "jit-42.dump", "jit-42.dump (deleted)", 1), true, "/home/a b/jit-42.dump"},
		{"another process's dump", jvm + strings.Replace(marker, "jit-42", "jit-43", 1), true, ""},
		{"OpenJ9", jvm + "7f0000500000-7f0000600000 r-xp 00000000 08:01 5 /opt/j9/lib/default/libj9vm29.so\n", false, ""},
		{"not a JVM", anon + heap + "7f0000000000-7f0000100000 r-xp 00000000 08:01 1 /usr/bin/python3.11\n", false, ""},
		{"a file named like libjvm.so's directory", "7f0000000000-7f0000100000 r-xp 00000000 08:01 1 /libjvm.so/x\n", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := procfs.ParseMaps([]byte(tt.maps))
			m := scanMaps(ms, 42)
			if err != nil || m.hotspot != tt.hotspot || m.jitdump != tt.jitdump {
				t.Errorf("got %+v, %v; want hotspot %v, jitdump %q", m, err, tt.hotspot, tt.jitdump)
			}
		})
	}
}

func TestCatchesQuit(t *testing.T) {
	tests := []struct {
		name, status string
		want         bool
		err          bool
	}{
		{"a JVM", "SigIgn:\t0000000000000000\nSigCgt:\t2000000181005ccf\n", true, false},
		{"starting: not caught yet", "SigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n", false, false},
		{"ignored", "SigIgn:\t0000000000000004\nSigCgt:\t0000000000000004\n", false, false},
		{"no SigIgn", "SigCgt:\t0000000000000004\n", false, true},
		{"not hex", "SigIgn:\tzz\nSigCgt:\t0000000000000004\n", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := catchesQuit([]byte("Name:\tjava\n" + tt.status + "CapInh:\t0\n"))
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("got %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

// fakeProc lays out a /proc holding this test's own process (its pid is
// real, for the pidfd) as maps and signals make it.
func fakeProc(t *testing.T, maps, sigCgt string) procfs.FS {
	t.Helper()
	root := t.TempDir()
	pid := os.Getpid()
	dir := filepath.Join(root, fmt.Sprint(pid))
	files := map[string]string{
		"stat":   fmt.Sprintf("%d (java) S%s 100 0\n", pid, strings.Repeat(" 0", 18)),
		"status": fmt.Sprintf("Name:\tjava\nNSpid:\t%d\nUid:\t%d\t%[2]d\t%[2]d\t%[2]d\nGid:\t%d\t%[3]d\t%[3]d\t%[3]d\nSigIgn:\t0000000000000000\nSigCgt:\t%s\n", pid, os.Geteuid(), os.Getegid(), sigCgt),
		"maps":   maps,
	}
	if err := os.MkdirAll(filepath.Join(dir, "root", "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return procfs.FS(root)
}

// TestAttacherOnce: a JVM is tried once whatever came of it, and a refusal
// logged once; one that already writes a dump is counted and left alone;
// one not catching SIGQUIT yet is tried again, but logged once.
func TestAttacherOnce(t *testing.T) {
	const libjvm = "7f0000000000-7f0000100000 r-xp 00000000 08:01 1 /usr/lib/jvm/lib/server/libjvm.so\n"
	marker := fmt.Sprintf("7f0000400000-7f0000401000 r-xp 00000000 08:01 2 /tmp/jit-%d.dump\n", os.Getpid())
	lib := filepath.Join(t.TempDir(), libraryName)
	if err := os.WriteFile(lib, []byte("lib"), 0o400); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		maps   string
		sigCgt string
		want   []error // what each of two attaches returns
		stats  Stats
		logged int
	}{
		{"not a JVM", "", "0000000000000004", []error{ErrNotHotSpot, nil}, Stats{Refused: 1}, 1},
		{"already writing", libjvm + marker, "0000000000000004", []error{nil, nil}, Stats{Already: 1}, 0},
		{"not catching SIGQUIT", libjvm, "0000000000000000", []error{ErrNotReady, ErrNotReady}, Stats{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged []error
			a := Attacher{
				Options: Options{Library: lib, Proc: fakeProc(t, tt.maps, tt.sigCgt)},
				Log:     func(err error) { logged = append(logged, err) },
			}
			for i, want := range tt.want {
				if err := a.Attach(context.Background(), uint32(os.Getpid())); !errors.Is(err, want) || (want == nil) != (err == nil) {
					t.Errorf("attach %d: got %v, want %v", i+1, err, want)
				}
			}
			if a.Stats() != tt.stats || len(logged) != tt.logged {
				t.Errorf("got %+v and %d log lines %v; want %+v and %d", a.Stats(), len(logged), logged, tt.stats, tt.logged)
			}
		})
	}
}
