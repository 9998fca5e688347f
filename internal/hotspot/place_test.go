package hotspot

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/procfs"
	"golang.org/x/sys/unix"
)

// TestPlace: the copy is the library, read-only in a private directory,
// named by its path in the JVM's /tmp; removing it leaves nothing; a name
// planted where the directory goes is refused and not followed.
func TestPlace(t *testing.T) {
	lib := []byte("\x7fELF not really")
	tmp := t.TempDir()
	p := procfs.Process{Status: procfs.Status{Cred: self()}}
	path, remove, err := place(p, pathFD(t, tmp), tmp, lib)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Base(filepath.Dir(path))
	if !strings.HasPrefix(path, "/tmp/jitprof-agent-") || filepath.Base(path) != libraryName {
		t.Errorf("the copy is at %s, not at /tmp/jitprof-agent-*/%s", path, libraryName)
	}
	local := filepath.Join(tmp, dir, libraryName)
	if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, lib) {
		t.Errorf("the copy holds %q, %v", got, err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(local), os.ModeDir | 0o700}, {local, 0o400}} {
		if st, err := os.Lstat(c.path); err != nil || st.Mode() != c.mode {
			t.Errorf("%s: %v, %v; want mode %v", c.path, st.Mode(), err, c.mode)
		}
	}
	remove()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}

	canary := fixtures.NewCanary(t)
	defer func(name func() string) { newDirName = name }(newDirName)
	newDirName = func() string { return "planted" }
	if err := os.Symlink(filepath.Dir(canary.Path), filepath.Join(tmp, "planted")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := place(p, pathFD(t, tmp), tmp, lib); !errors.Is(err, unix.EEXIST) {
		t.Errorf("with the directory's name planted: %v, want EEXIST", err)
	}
	if entries, _ := os.ReadDir(filepath.Dir(canary.Path)); len(entries) != 1 {
		t.Errorf("written through the planted link: %v", entries)
	}
	if _, err := os.Readlink(filepath.Join(tmp, "planted")); err != nil {
		t.Errorf("the planted link was removed: %v", err)
	}
}

// TestPlaceAsUser: the copy and its directory are the JVM's user's.
func TestPlaceAsUser(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	tmp := attacker.Dir(t)
	p := procfs.Process{Status: procfs.Status{Cred: foreign.Cred{Uid: attacker.Uid, Gid: attacker.Gid}}}
	path, remove, err := place(p, pathFD(t, tmp), tmp, []byte("lib"))
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	local := filepath.Join(tmp, filepath.Base(filepath.Dir(path)))
	for _, f := range []string{local, filepath.Join(local, libraryName)} {
		var st unix.Stat_t
		if err := unix.Lstat(f, &st); err != nil || st.Uid != attacker.Uid || st.Gid != attacker.Gid {
			t.Errorf("%s is uid %d gid %d (%v), not the JVM user's", f, st.Uid, st.Gid, err)
		}
	}
}
