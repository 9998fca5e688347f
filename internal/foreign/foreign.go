// Package foreign opens the files that other users, processes and
// containers control: perf maps, jitdumps, the ELF files samples hit,
// anything under /proc/PID/root. jitprof often runs as root, and such a file
// is hostile input to it: a symlink to a root-only file, a FIFO that blocks
// open for ever, a sparse file of a terabyte, a path that leaves a
// container's root. Every such open in jitprof goes through Open, which
//
//   - resolves the path with openat2, inside Rules.Root when it is set (a
//     process's /proc/PID/root: its absolute symlinks and ".." stay in it),
//     and never through /proc's magic links;
//   - opens it with the filesystem credentials of the file's rightful
//     reader (Rules.As, the process's owner), so that root reads no more than
//     that user could: the kernel's own permission checks, path and file;
//   - opens O_NONBLOCK, so a FIFO cannot block, then fstat's what it opened
//     (never a stat before the open) and keeps regular files only;
//   - applies perf's rule for perf maps and dumps (Rules.Owners): a file
//     not owned by its process's owner or root (by Yours once the process is
//     gone) is skipped, unless forced (perf's -f).
//
// Reads and copies are bounded by what the file has on disk and by a limit
// (ReadAll, Copy), so a sparse or endless file cannot exhaust memory or disk.
//
// Hand-written: no library does the credential switch and the openat2
// resolution together.
package foreign

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Cred is whose file it is: a file opened on their behalf is opened with
// their filesystem credentials.
type Cred struct {
	Uid, Gid uint32
	Groups   []uint32
}

// Rules say how a file is opened.
type Rules struct {
	// Root, when set, is a directory (a process's /proc/PID/root) that the
	// path is resolved inside, as that process would resolve it: no symlink
	// or ".." leaves it.
	Root string
	// As, when set, opens the file with these filesystem credentials rather
	// than the caller's. A root caller thereby reads only what As may read.
	As *Cred
	// Owners, when set, lists who may own the file; others' files are
	// refused with ErrOwner.
	Owners []uint32
	// NoSymlinks refuses a symlink anywhere in the path: for files that a
	// runtime creates at a fixed name (/tmp/perf-PID.map), where a symlink
	// can only be planted.
	NoSymlinks bool
	// Force drops the Owners check, as perf's -f does.
	Force bool
	// Same, when set, tells once Root is opened whether it is still the
	// root of the process the rules were made for (procfs.Process.Rules):
	// a pid reused since, even between a check and this open, names
	// another process's. What is opened through the open root stays the
	// checked process's, whatever the pid names after.
	Same func() error
}

var (
	// ErrNotRegular is a FIFO, device, socket or directory where a file was
	// expected.
	ErrNotRegular = errors.New("not a regular file")
	// ErrOwner is a file its process's owner did not make (perf's rule).
	ErrOwner = errors.New("not owned by its process's owner or root, nor by you once the process is gone (--force reads it anyway)")
	// ErrTooBig is a file larger than its limit, or than what it has on disk.
	ErrTooBig = errors.New("too big")
)

// Open opens path for reading under rules. Errors name the path.
func Open(path string, rules Rules) (*os.File, error) {
	f, err := open(path, rules)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: shown(path, rules), Err: err}
	}
	return f, nil
}

// shown is path as a message gives it: within its root, where it has one.
func shown(path string, rules Rules) string {
	if rules.Root == "" {
		return path
	}
	return rules.Root + "/" + strings.TrimLeft(path, "/")
}

func open(path string, rules Rules) (*os.File, error) {
	dirfd := unix.AT_FDCWD
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	}
	if rules.NoSymlinks {
		how.Resolve |= unix.RESOLVE_NO_SYMLINKS
	}
	if rules.Root != "" {
		// The root itself is opened as the caller: entering another
		// process's root is ptrace's check, which root passes and the
		// process's owner may not (it lacks no permission on its own
		// files, only on /proc's link).
		root, err := unix.Open(rules.Root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		defer unix.Close(root)
		if rules.Same != nil {
			if err := rules.Same(); err != nil {
				return nil, err
			}
		}
		dirfd = root
		path = strings.TrimLeft(path, "/")
		if path == "" {
			path = "."
		}
		how.Resolve |= unix.RESOLVE_IN_ROOT
	}
	fd, err := openAs(rules.As, func() (int, error) { return unix.Openat2(dirfd, path, &how) })
	if errors.Is(err, unix.ENOSYS) {
		return nil, errors.New("openat2 is missing (Linux before 5.6): files other processes control are not opened")
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, ErrNotRegular
	}
	if len(rules.Owners) > 0 && !rules.Force && !slices.Contains(rules.Owners, st.Uid) {
		unix.Close(fd)
		return nil, fmt.Errorf("owned by uid %d: %w", st.Uid, ErrOwner)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// Yours are who may own a process's file opened once the process is gone,
// when no owner is left to open it as: root and the user running jitprof,
// as perf reads a perf map only of root or its own user, and, as root, the
// user sudo ran jitprof for (SUDO_UID), who could have had root do
// anything: internal/atomicfile trusts the same users with what root
// writes.
func Yours() []uint32 {
	euid := uint32(os.Geteuid())
	owners := []uint32{0}
	if euid != 0 {
		return append(owners, euid)
	}
	if n, err := strconv.ParseUint(os.Getenv("SUDO_UID"), 10, 32); err == nil && n != 0 {
		owners = append(owners, uint32(n))
	}
	return owners
}

// openAs runs open with the filesystem credentials of as, on a thread of its
// own: fsuid, fsgid and the supplementary groups are per thread in Linux,
// and a thread whose own could not be put back is never given back to the
// Go scheduler (it ends with the goroutine).
func openAs(as *Cred, open func() (int, error)) (int, error) {
	if as == nil || (as.Uid == uint32(os.Geteuid()) && as.Gid == uint32(os.Getegid())) {
		return open()
	}
	if os.Geteuid() != 0 {
		// Only root can take another's credentials; anyone else opens as
		// themselves, which is no more than they may read anyway.
		return open()
	}
	runtime.LockOSThread()
	groups, err := unix.Getgroups()
	if err != nil {
		runtime.UnlockOSThread()
		return -1, err
	}
	restored := false
	defer func() {
		if restored {
			runtime.UnlockOSThread()
		}
	}()
	as32 := make([]int, len(as.Groups))
	for i, g := range as.Groups {
		as32[i] = int(g)
	}
	if err := unix.Setgroups(as32); err != nil {
		restored = unix.Setgroups(groups) == nil
		return -1, err
	}
	unix.Setfsgid(int(as.Gid))
	unix.Setfsuid(int(as.Uid))
	fd, err := open()
	unix.Setfsuid(os.Geteuid())
	unix.Setfsgid(os.Getegid())
	uid, _ := unix.SetfsuidRetUid(-1) // -1 changes nothing and reports the current one
	gid, _ := unix.SetfsgidRetGid(-1)
	restored = unix.Setgroups(groups) == nil && uid == os.Geteuid() && gid == os.Getegid()
	return fd, err
}

// ReadAll reads f, opened by Open, whole: at most limit bytes, and no more
// than the blocks it has on disk hold. A file past either bound is not read
// and the error says which bound it passed.
func ReadAll(f *os.File, limit int64) ([]byte, error) {
	n, err := Size(f, limit)
	if err != nil {
		return nil, err
	}
	data := make([]byte, n)
	got, err := io.ReadFull(f, data)
	if err == io.ErrUnexpectedEOF {
		err = nil // it shrank: what is there is what there is
	}
	return data[:got], err
}

// Size is how many bytes of f may be read: its size, unless that passes
// limit or the blocks the file has on disk (a sparse file reads as zeros
// that take no disk and no time to make: a trap for a copy or a parse).
func Size(f *os.File, limit int64) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: f.Name(), Err: err}
	}
	if st.Size > limit {
		return 0, fmt.Errorf("%s: %d bytes, over the limit of %d: %w", f.Name(), st.Size, limit, ErrTooBig)
	}
	if onDisk := st.Blocks * 512; st.Size > onDisk+sparseSlack {
		return 0, fmt.Errorf("%s: %d bytes with only %d on disk (a sparse file): %w", f.Name(), st.Size, onDisk, ErrTooBig)
	}
	return st.Size, nil
}

// sparseSlack allows for file systems that keep a small file's tail, or a
// whole small file, outside its blocks (inline data).
const sparseSlack = 64 << 10

// Copy copies src from offset off to dst: at most limit bytes in all,
// checked as it goes (a file growing during the copy cannot pass it), and
// no more than src has on disk. It returns the bytes copied; past the limit
// it copies up to it and returns ErrTooBig.
func Copy(dst io.Writer, src *os.File, off, limit int64) (int64, error) {
	size, err := Size(src, math.MaxInt64)
	if err != nil {
		return 0, err
	}
	if size <= off {
		return 0, nil
	}
	want := size - off
	over := want > limit
	n, err := io.Copy(dst, io.NewSectionReader(src, off, min(want, limit)))
	if err == nil && over {
		err = fmt.Errorf("%s: %d more bytes, over the limit of %d: %w", src.Name(), want, limit, ErrTooBig)
	}
	return n, err
}

// Path is a file to open under rules, perhaps more than once: a dump or a
// perf map read again as its runtime appends to it.
type Path struct {
	Name  string
	Rules Rules
}

// Plain is a path that a user named, or that jitprof made: opened as the
// caller, but still regular files only and never blocking.
func Plain(name string) Path { return Path{Name: name} }

// Open opens the file.
func (p Path) Open() (*os.File, error) { return Open(p.Name, p.Rules) }

// String is the path as messages give it.
func (p Path) String() string { return shown(p.Name, p.Rules) }
