package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/fixtures"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out")
	if err := atomicfile.Write(name, writeString("whole")); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("half way")
	err := atomicfile.Write(name, func(w io.Writer) error { io.WriteString(w, "par"); return failure })
	if !errors.Is(err, failure) {
		t.Fatalf("err = %v, want the writer's", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "whole" {
		t.Errorf("after a failed write the file holds %q, want the old contents", b)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("temporary files left: %v", left)
	}
}

// withUmask runs f under umask mask. The umask is the process's: no test of
// this package runs in parallel.
func withUmask(mask int, f func()) {
	old := unix.Umask(mask)
	defer unix.Umask(old)
	f()
}

func TestModes(t *testing.T) {
	for _, c := range []struct {
		mode  atomicfile.Mode
		umask int
		want  os.FileMode
	}{
		{atomicfile.Private, 0o022, 0o600},
		{atomicfile.Private, 0o077, 0o600},
		{atomicfile.Private, 0o000, 0o600},
		{atomicfile.Shared, 0o022, 0o644},
		{atomicfile.Shared, 0o077, 0o600},
		{atomicfile.Shared, 0o002, 0o664},
	} {
		dir := t.TempDir()
		for _, create := range []struct {
			how  string
			make func(name string) error
		}{
			{"Write", func(name string) error { return c.mode.Write(name, writeString("x")) }},
			{"CreateTemp+atomicfile.Commit", func(name string) error {
				f, err := c.mode.CreateTemp(name)
				if err != nil {
					return err
				}
				return atomicfile.Commit(f, name)
			}},
			{"Create", func(name string) error {
				f, err := c.mode.Create(name)
				if err != nil {
					return err
				}
				return f.Close()
			}},
		} {
			name := filepath.Join(dir, create.how)
			// An older file's mode is not kept: the file is new.
			if err := os.WriteFile(name, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			withUmask(c.umask, func() {
				if err := create.make(name); err != nil {
					t.Fatal(err)
				}
			})
			if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != c.want {
				t.Errorf("%s mode %04o under umask %04o: %v, %v; want %v", create.how, c.mode, c.umask, fi.Mode(), err, c.want)
			}
		}
	}
}

// TestPlantedLink: a symbolic link planted at the destination, pointing at a
// root-only file, is replaced, not written through, by every way of
// creating a file.
func TestPlantedLink(t *testing.T) {
	canary := fixtures.NewCanary(t)
	before, err := os.ReadFile(canary.Path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		how    string
		create func(name string) error
	}{
		{"Write", func(name string) error { return atomicfile.Write(name, writeString("mine")) }},
		{"Create", func(name string) error {
			f, err := atomicfile.Private.Create(name)
			if err != nil {
				return err
			}
			io.WriteString(f, "mine")
			return f.Close()
		}},
	} {
		name := filepath.Join(dir, c.how)
		if err := os.Symlink(canary.Path, name); err != nil {
			t.Fatal(err)
		}
		if err := c.create(name); err != nil {
			t.Fatalf("%s: %v", c.how, err)
		}
		if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %s is %v, %v; want the new regular file", c.how, name, fi.Mode(), err)
		}
		if b, _ := os.ReadFile(name); string(b) != "mine" {
			t.Errorf("%s: %s holds %q", c.how, name, b)
		}
	}
	if after, err := os.ReadFile(canary.Path); err != nil || string(after) != string(before) {
		t.Errorf("the canary, behind the planted links, changed: %q, %v", after, err)
	}
}

// TestUnsafeDirs: as root, a directory another user can change, or one on
// its path, is refused, and nothing is written or made in it.
func TestUnsafeDirs(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	t.Setenv("SUDO_UID", "")
	t.Setenv("SUDO_GID", "")
	mine := t.TempDir()
	owned := attacker.Dir(t)
	under := filepath.Join(owned, "roots")
	mkdir(t, under, 0o755)
	sticky := filepath.Join(mine, "sticky")
	mkdir(t, sticky, 0o777|os.ModeSticky)
	open := filepath.Join(mine, "open")
	mkdir(t, open, 0o777)
	group := filepath.Join(mine, "group")
	mkdir(t, group, 0o775)
	if err := os.Chown(group, 0, int(attacker.Gid)); err != nil {
		t.Fatal(err)
	}
	rootGroup := filepath.Join(mine, "rootgroup")
	mkdir(t, rootGroup, 0o775)
	rootLink := filepath.Join(mine, "rootlink")
	if err := os.Symlink(owned, rootLink); err != nil {
		t.Fatal(err)
	}
	// A link the attacker put in a sticky directory, to a directory of
	// root's.
	theirLink := filepath.Join(sticky, "theirs")
	if err := os.Symlink(mine, theirLink); err != nil {
		t.Fatal(err)
	}
	attacker.Chown(t, theirLink)
	goodLink := filepath.Join(mine, "good")
	if err := os.Symlink("sticky/../rootgroup", goodLink); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		sudo string // SUDO_UID
		ok   bool
	}{
		{mine, "", true},
		{sticky, "", true},
		{rootGroup, "", true},
		{goodLink, "", true},
		{owned, "", false},
		{under, "", false},
		{open, "", false},
		{group, "", false},
		{rootLink, "", false},
		{theirLink, "", false},
		// The kernel takes ".." after the link, in the attacker's /tmp.
		{rootLink + "/../" + filepath.Base(owned), "", false},
		{filepath.Join(theirLink, "sticky"), "", false},
		// The user sudo ran jitprof for could have had it write anywhere.
		{owned, "61234", true},
		{under, "61234", true},
	} {
		t.Setenv("SUDO_UID", c.sudo)
		name := c.dir + "/out" // not Join, which would clean a ".." away
		err := atomicfile.Write(name, writeString("x"))
		if c.ok {
			if err != nil {
				t.Errorf("%s, SUDO_UID %q: %v", c.dir, c.sudo, err)
			}
			os.Remove(name)
			continue
		}
		if !errors.Is(err, atomicfile.ErrUnsafeDir) {
			t.Errorf("%s: err = %v, want atomicfile.ErrUnsafeDir", c.dir, err)
		}
		if _, err := os.Lstat(name); err == nil {
			t.Errorf("%s written though refused", name)
		}
		sub := c.dir + "/sub/dir"
		if err := atomicfile.MkdirAll(sub, 0o700); !errors.Is(err, atomicfile.ErrUnsafeDir) {
			t.Errorf("atomicfile.MkdirAll %s: err = %v, want atomicfile.ErrUnsafeDir", sub, err)
		}
		if _, err := os.Lstat(c.dir + "/sub"); err == nil {
			t.Errorf("atomicfile.MkdirAll made %s/sub though refused", c.dir)
		}
	}
	t.Setenv("SUDO_UID", "")

	// Relative names are checked from the working directory's path.
	t.Chdir(owned)
	if err := atomicfile.Write("out", writeString("x")); !errors.Is(err, atomicfile.ErrUnsafeDir) {
		t.Errorf("relative name in %s: err = %v, want atomicfile.ErrUnsafeDir", owned, err)
	}
	t.Chdir(mine)
	if err := atomicfile.MkdirAll("a/b", 0o700); err != nil {
		t.Errorf("atomicfile.MkdirAll a/b in %s: %v", mine, err)
	}
	if fi, err := os.Stat(filepath.Join(mine, "a", "b")); err != nil || !fi.IsDir() {
		t.Errorf("atomicfile.MkdirAll made %v, %v", fi, err)
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// TestLinkLoop: a loop of links is an error, not a hang.
func TestLinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink(b, a)
	os.Symlink(a, b)
	if err := atomicfile.CheckDir(a); !errors.Is(err, unix.ELOOP) {
		t.Errorf("err = %v, want ELOOP", err)
	}
}

// TestDevice: output to a device or a FIFO (-o /dev/null, -o a pipe) is
// written in place; renaming over it would leave a regular file where the
// device was (root's /dev/null, made a file by a report to it).
func TestDevice(t *testing.T) {
	if err := atomicfile.Write(os.DevNull, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(os.DevNull, func(io.Writer) error { return errors.New("failed") }); err == nil {
		t.Error("a failed write to /dev/null succeeded")
	}
	fi, err := os.Stat(os.DevNull)
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/null is %v (%v) after writes to it", fi.Mode(), err)
	}
	fifo := filepath.Join(t.TempDir(), "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	if err := atomicfile.Write(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "through the pipe"); return err }); err != nil {
		t.Fatal(err)
	}
	if b := <-got; string(b) != "through the pipe" {
		t.Errorf("the FIFO's reader got %q", b)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO is %v (%v) after a write to it", fi.Mode(), err)
	}
}

// TestOthersSpecialFiles: a FIFO another user put at the destination, in a
// sticky directory as /tmp is, is not written: written in place, it would
// hand them root's report. A link they put there to root's own FIFO is
// replaced, never followed.
func TestOthersSpecialFiles(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	t.Setenv("SUDO_UID", "")
	sticky := filepath.Join(t.TempDir(), "sticky")
	mkdir(t, sticky, 0o777|os.ModeSticky)

	fifo := filepath.Join(sticky, "fifo")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	attacker.Chown(t, fifo)
	got := readFIFO(t, fifo)
	if err := atomicfile.Write(fifo, writeString("root's report")); err == nil {
		t.Error("wrote to another user's FIFO")
	}
	unblock(t, fifo)
	if b := <-got; len(b) != 0 {
		t.Errorf("another user's FIFO got %q", b)
	}

	// A device node only root can make: one of another user's (their
	// terminal, -o /dev/stdout under su) is written as named, in place.
	device := filepath.Join(sticky, "null")
	if err := unix.Mknod(device, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	attacker.Chown(t, device)
	if err := atomicfile.Write(device, writeString("root's report")); err != nil {
		t.Errorf("another user's device: %v", err)
	}
	if fi, err := os.Lstat(device); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("the device is %v, %v after a write to it", fi.Mode(), err)
	}

	mine := filepath.Join(t.TempDir(), "mine")
	if err := unix.Mkfifo(mine, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(sticky, "link")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, int(attacker.Uid), int(attacker.Gid)); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(link, writeString("root's report")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the planted link is %v, %v; want root's new file", fi.Mode(), err)
	}
	if fi, err := os.Lstat(mine); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("root's FIFO behind the link is %v, %v", fi.Mode(), err)
	}
}

// TestFIFOWithoutReader: a FIFO no process reads is refused after a
// while, rather than waited on for ever (past Ctrl-C); one whose reader
// comes late is written.
func TestFIFOWithoutReader(t *testing.T) {
	defer atomicfile.SetFIFOWait(300 * time.Millisecond)()
	fifo := filepath.Join(t.TempDir(), "out")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- atomicfile.Write(fifo, writeString("nobody")) }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a write to a FIFO nobody reads succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the write to a FIFO nobody reads still waits after 30 s")
	}
	go func() { done <- atomicfile.Write(fifo, writeString("late")) }()
	time.Sleep(50 * time.Millisecond)
	if b := <-readFIFO(t, fifo); string(b) != "late" {
		t.Errorf("the late reader got %q", b)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// readFIFO reads fifo whole in the background.
func readFIFO(t *testing.T, fifo string) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	return got
}

// unblock ends a reader of fifo still waiting for a writer.
func unblock(t *testing.T, fifo string) {
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
