package hotspot

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"

	"github.com/jitprof/jitprof/internal/procfs"
	"golang.org/x/sys/unix"
)

// libraryName is the copy's name: jitprof's agent's, so that the JVM's
// memory map names it.
const libraryName = "libjitprof-jvmti.so"

// newDirName names the directory a copy of the library is put in. A
// variable, so that a test can make the name one an attacker planted.
var newDirName = func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "jitprof-agent-" + hex.EncodeToString(b)
}

// place copies lib into a new directory of the JVM's /tmp (tmp, shown as
// tmpShown) and returns the copy's path as the JVM sees it, and what
// removes both. Everything is made as the JVM's user (asUser): the
// directory 0700, the file 0400, by mkdirat and openat relative to tmp,
// O_EXCL and O_NOFOLLOW, so that nothing is written through a link the
// tenant planted, nor anywhere its user could not write. Only that user,
// and root, can change the copy before the JVM loads it: that user can
// make its own JVM run what it likes anyway.
//
// The copy is removed once loaded (the JVM keeps its mapping); its path in
// the memory map then ends in " (deleted)".
func place(p procfs.Process, tmp int, tmpShown string, lib []byte) (string, func(), error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(tmp, &st); err != nil {
		return "", nil, &fs.PathError{Op: "statfs", Path: tmpShown, Err: err}
	}
	if st.Flags&unix.ST_NOEXEC != 0 {
		return "", nil, fmt.Errorf("%s is mounted noexec: the JVM could not load a library from there", tmpShown)
	}
	dirName := newDirName()
	dirShown := tmpShown + "/" + dirName
	dir, made := -1, false
	err := asUser(p.Cred, func() error {
		if err := unix.Mkdirat(tmp, dirName, 0o700); err != nil {
			return &fs.PathError{Op: "mkdir", Path: dirShown, Err: err}
		}
		made = true
		var err error
		if dir, err = unix.Openat(tmp, dirName, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return &fs.PathError{Op: "open", Path: dirShown, Err: err}
		}
		fd, err := unix.Openat(dir, libraryName, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
		if err != nil {
			return &fs.PathError{Op: "create", Path: dirShown + "/" + libraryName, Err: err}
		}
		defer unix.Close(fd)
		for rest := lib; len(rest) > 0; {
			n, err := unix.Write(fd, rest)
			if err != nil {
				return &fs.PathError{Op: "write", Path: dirShown + "/" + libraryName, Err: err}
			}
			rest = rest[n:]
		}
		return nil
	})
	// Only what was made here is removed: a name that was there
	// already (mkdirat's EEXIST) is someone else's.
	remove := func() {
		if dir >= 0 {
			unix.Unlinkat(dir, libraryName, 0)
			unix.Close(dir)
		}
		if made {
			unix.Unlinkat(tmp, dirName, unix.AT_REMOVEDIR)
		}
	}
	if err != nil {
		remove()
		return "", nil, err
	}
	return path.Join("/tmp", dirName, libraryName), remove, nil
}
