package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jitprof/jitprof/internal/atomicfile"
)

// An oldRecording is the recording an output file held before record
// replaced it, kept as FILE.old as perf record keeps perf.data.old. perf
// renames it before recording; here it stays in place until the new one is
// written, so a command that fails to start loses nothing: it is linked
// under a hidden name first, then that name is renamed to FILE.old, never
// copied.
type oldRecording struct {
	path, link string
	was        fs.FileInfo
}

// keepOld links the regular file at path, if there is one, under a hidden
// name beside it; anything else at path is left for the new recording's
// rename to replace, as before. nil: nothing to keep.
func keepOld(path string) (*oldRecording, error) {
	was, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !was.Mode().IsRegular()) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// As root, only in a directory no other user can turn into a link
	// elsewhere: the one the recording will be written to.
	dir := filepath.Dir(path)
	if err := atomicfile.CheckDir(dir); err != nil {
		return nil, err
	}
	link := filepath.Join(dir, "."+filepath.Base(path)+".old."+strconv.FormatUint(rand.Uint64(), 36))
	// link(2) neither follows a symbolic link put at path since, nor
	// replaces anything at the new name.
	if err := os.Link(path, link); err != nil {
		return nil, fmt.Errorf("keeping %s as %s.old: %w", path, path, err)
	}
	if now, err := os.Lstat(link); err != nil || !os.SameFile(now, was) {
		os.Remove(link)
		return nil, nil // path was replaced since: not a recording of ours to keep
	}
	return &oldRecording{path: path, link: link, was: was}, nil
}

// settle renames the old recording to FILE.old if a new one replaced it at
// path, and drops the hidden link if not (the recording failed before it
// wrote anything). It returns FILE.old, or "" when nothing was renamed.
func (o *oldRecording) settle() (string, error) {
	if o == nil {
		return "", nil
	}
	if now, err := os.Lstat(o.path); err == nil && os.SameFile(now, o.was) {
		return "", os.Remove(o.link)
	}
	old := o.path + ".old"
	if err := os.Rename(o.link, old); err != nil {
		return "", fmt.Errorf("the previous recording of %s is kept as %s: %w", o.path, o.link, err)
	}
	return old, nil
}
