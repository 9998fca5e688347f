package mapfile

import (
	"io"
	"math"
	"os"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/foreign"
)

// A Mirror is jitprof's own copy of a file that others may change: a
// dump that its runtime, or any process of its user, can truncate. A
// mapping of their file would then fault (SIGBUS) where it was read, a
// crash no Go code can recover from; a mapping of the copy cannot, since
// nobody else can reach it. It grows as the file grows (Grow), each part
// copied once, so a dump read again as its runtime appends is not copied
// whole each time.
//
// The copy is an unnamed file in the temporary directory (O_TMPFILE),
// private to jitprof and gone when it closes, however it ends. It takes
// the file's size in that directory (memory, where it is a tmpfs), no
// more: it is bounded as foreign.Copy bounds it, by the blocks the file
// has on disk.
type Mirror struct {
	f    *os.File
	size int64
}

// NewMirror makes an empty mirror.
func NewMirror() (*Mirror, error) {
	dir := os.TempDir()
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return &Mirror{f: os.NewFile(uintptr(fd), dir+"/(jitprof's copy)")}, nil
	}
	// A file system without O_TMPFILE: a file of a random name, made
	// O_EXCL (never another's), removed at once.
	f, err := os.CreateTemp(dir, ".jitprof-copy-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return &Mirror{f: f}, nil
}

// Grow copies what src holds past the mirror's end, and returns the
// mirror opened anew, for the caller to map and close: a reader maps it
// whole, as it would have mapped src.
func (m *Mirror) Grow(src *os.File) (*os.File, error) {
	n, err := foreign.Copy(io.NewOffsetWriter(m.f, m.size), src, m.size, math.MaxInt64)
	m.size += n
	if err != nil {
		return nil, err
	}
	fd, err := unix.FcntlInt(m.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "dup", Path: m.f.Name(), Err: err}
	}
	dup := os.NewFile(uintptr(fd), src.Name())
	if _, err := dup.Seek(0, io.SeekStart); err != nil {
		dup.Close()
		return nil, err
	}
	return dup, nil
}

// Close removes the copy, once every file Grow returned is closed too.
func (m *Mirror) Close() error {
	if m == nil {
		return nil
	}
	return m.f.Close()
}

// yoursAlone tells whether only you can change the file st describes: it
// is yours (foreign.Yours), and neither its group nor others may write it.
func yoursAlone(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && slices.Contains(foreign.Yours(), sys.Uid) && st.Mode().Perm()&0o022 == 0
}

// copyOf returns a copy of f, bounded as a Mirror's, that nobody else can
// reach, removed once closed.
func copyOf(f *os.File) (*os.File, error) {
	m, err := NewMirror()
	if err != nil {
		return nil, err
	}
	defer m.Close() // what Grow returns keeps the copy
	return m.Grow(f)
}
