package foreign_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
)

// TestAttacks plants, as an unprivileged user, what a tenant would plant
// where root looks for a runtime's files, and opens it as the user's
// process's files are opened.
func TestAttacks(t *testing.T) {
	bad := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	dir := bad.Dir(t)
	as := &foreign.Cred{Uid: bad.Uid, Gid: bad.Gid}
	canaryInfo, _ := os.Stat(canary.Path)
	asAttacker := foreign.Rules{As: as, Owners: []uint32{bad.Uid, 0}}
	plant := func(t *testing.T, name string, make func(path string) error) string {
		path := filepath.Join(dir, name)
		if err := make(path); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Lstat(path); !os.SameFile(fi, canaryInfo) {
			bad.Chown(t, path)
		}
		return path
	}
	// A root-owned file the attacker may read (mode 0644) behind a
	// symlink: it passes perf's owner rule, so only NoSymlinks stops it.
	public := filepath.Join(t.TempDir(), "public")
	os.WriteFile(public, []byte("root's public file"), 0o644)
	os.Chmod(filepath.Dir(public), 0o755)

	for _, tc := range []struct {
		name  string
		make  func(path string) error
		rules foreign.Rules
		want  error // nil: opens; else errors.Is
	}{
		{"own map", func(p string) error { return os.WriteFile(p, []byte("1 2 f\n"), 0o644) }, asAttacker, nil},
		{"symlink to a root-only file", func(p string) error { return os.Symlink(canary.Path, p) }, asAttacker, os.ErrPermission},
		// Root's own hard link: it passes the owner rule, and only the
		// attacker's credentials keep it shut.
		{"hard link to a root-only file", func(p string) error { return os.Link(canary.Path, p) }, asAttacker, os.ErrPermission},
		{"symlink to a public file, no symlinks", func(p string) error { return os.Symlink(public, p) }, foreign.Rules{As: as, NoSymlinks: true}, syscall.ELOOP},
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o644) }, asAttacker, foreign.ErrNotRegular},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, asAttacker, foreign.ErrNotRegular},
		{"symlink to a device", func(p string) error { return os.Symlink("/dev/zero", p) }, asAttacker, foreign.ErrNotRegular},
		{"magic link", func(p string) error { return os.Symlink("/proc/self/root"+canary.Path, p) }, foreign.Rules{}, syscall.ELOOP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := plant(t, strings.ReplaceAll(tc.name, " ", "-"), tc.make)
			done := make(chan struct{})
			var f *os.File
			var err error
			go func() {
				f, err = foreign.Open(path, tc.rules)
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("open blocked")
			}
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				f.Close()
				return
			}
			if err == nil {
				b, _ := foreign.ReadAll(f, 1<<20)
				f.Close()
				canary.Absent(t, b)
				t.Fatalf("opened, want %v", tc.want)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("%v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%v does not name %s", err, path)
			}
		})
	}

	t.Run("someone else's map", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "perf-1.map")
		os.WriteFile(path, []byte("1 2 f\n"), 0o644)
		os.Chown(path, 4242, 4242)
		if _, err := foreign.Open(path, foreign.Rules{Owners: []uint32{bad.Uid, 0}}); !errors.Is(err, foreign.ErrOwner) {
			t.Errorf("%v, want %v", err, foreign.ErrOwner)
		}
		f, err := foreign.Open(path, foreign.Rules{Owners: []uint32{bad.Uid, 0}, Force: true})
		if err != nil {
			t.Fatalf("forced: %v", err)
		}
		f.Close()
	})
}

// TestInRoot resolves paths inside a root as a process in it would: an
// absolute symlink and ".." land inside it, never on the host.
func TestInRoot(t *testing.T) {
	canary := fixtures.NewCanary(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "tmp"), 0o755)
	os.WriteFile(filepath.Join(root, "tmp", "inside"), []byte("inside"), 0o644)
	os.Symlink(canary.Path, filepath.Join(root, "tmp", "abs"))
	os.Symlink("../../../../../../.."+canary.Path, filepath.Join(root, "tmp", "dotdot"))
	os.Symlink("/tmp/inside", filepath.Join(root, "tmp", "rooted"))
	for _, tc := range []struct {
		path string
		want string // "" fails
	}{
		{"/tmp/inside", "inside"},
		{"/tmp/rooted", "inside"},
		{"/tmp/abs", ""},
		{"/tmp/dotdot", ""},
		{"/../../../.." + canary.Path, ""},
	} {
		f, err := foreign.Open(tc.path, foreign.Rules{Root: root})
		if tc.want == "" {
			if err == nil {
				b, _ := foreign.ReadAll(f, 1<<20)
				canary.Absent(t, b)
				f.Close()
				t.Errorf("%s opened", tc.path)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		b, err := foreign.ReadAll(f, 1<<20)
		f.Close()
		if err != nil || string(b) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.path, b, err, tc.want)
		}
	}
}

func TestBounds(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse")
	f, _ := os.Create(sparse)
	f.Truncate(1 << 30)
	f.Close()
	small := filepath.Join(dir, "small")
	os.WriteFile(small, bytes.Repeat([]byte("x"), 1000), 0o644)

	for _, tc := range []struct {
		path    string
		limit   int64
		wantErr bool
	}{
		{sparse, 2 << 30, true},
		{small, 1000, false},
		{small, 999, true},
	} {
		f, err := foreign.Open(tc.path, foreign.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := foreign.ReadAll(f, tc.limit)
		f.Close()
		if (err != nil) != tc.wantErr || !errors.Is(err, foreign.ErrTooBig) && tc.wantErr {
			t.Errorf("ReadAll(%s, %d): %d bytes, %v", filepath.Base(tc.path), tc.limit, len(b), err)
		}
	}

	// A copy stops at its limit even when the file is past it.
	f, _ = foreign.Open(small, foreign.Rules{})
	defer f.Close()
	var out bytes.Buffer
	n, err := foreign.Copy(&out, f, 100, 500)
	if n != 500 || out.Len() != 500 || !errors.Is(err, foreign.ErrTooBig) {
		t.Errorf("Copy from 100, limit 500: %d bytes, %v", n, err)
	}
	out.Reset()
	if n, err := foreign.Copy(&out, f, 100, 900); n != 900 || err != nil {
		t.Errorf("Copy from 100, limit 900: %d bytes, %v", n, err)
	}
}

// Yours trusts root, the user jitprof runs as and, as root, a user that
// sudo names: never a SUDO_UID that a user not root sets for itself.
func TestYours(t *testing.T) {
	euid := uint32(os.Geteuid())
	for _, tc := range []struct {
		sudo string
		want []uint32 // as root
	}{
		{"", []uint32{0}},
		{"1000", []uint32{0, 1000}},
		{"0", []uint32{0}},
		{"-1", []uint32{0}},
		{"4294967296", []uint32{0}},
		{"1000x", []uint32{0}},
	} {
		t.Setenv("SUDO_UID", tc.sudo)
		want := tc.want
		if euid != 0 {
			want = []uint32{0, euid}
		}
		if got := foreign.Yours(); !slices.Equal(got, want) {
			t.Errorf("SUDO_UID=%q: Yours() = %v, want %v", tc.sudo, got, want)
		}
	}
}
