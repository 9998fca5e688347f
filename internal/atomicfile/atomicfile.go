// Package atomicfile writes files whole or not at all: into a temporary
// file next to the destination, renamed over it only once complete, so a
// reader never sees a partial file and a failure leaves the old one.
//
// It is also the one place that decides how jitprof creates files, since
// jitprof often runs as root and writes where other users can reach:
//
//   - the temporary file has a random name and is created O_EXCL|O_NOFOLLOW,
//     so a file or symbolic link planted in the directory is never opened;
//     the rename then replaces whatever is at the destination, a planted
//     symbolic link included, without following it;
//   - as root, the directory must be one no other user can change (see
//     CheckDir), since who can change a directory on the path can turn it
//     into a symbolic link and have root's rename land anywhere;
//   - what holds other processes' data is created Private (0600), as
//     perf.data is; the few files others must read are Shared.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/foreign"
)

// Mode is the permission a file is created with.
type Mode os.FileMode

const (
	// Private is for what holds other processes' data, whatever the
	// umask: recordings, copies of perf maps and dumps, archives,
	// profiles, reports (a flame graph names the functions of the
	// processes it sampled).
	Private Mode = 0o600
	// Shared is for the files other users must read (an agent library a
	// profiled program of another user loads) or that hold only
	// jitprof's own data: 0666 less the umask, as any tool creates
	// files.
	Shared Mode = 0o666
)

// Write creates name, Private, with what write writes.
func Write(name string, write func(io.Writer) error) error {
	return Private.Write(name, write)
}

// CreateTemp is Private.CreateTemp.
func CreateTemp(name string) (*os.File, error) {
	return Private.CreateTemp(name)
}

// Write creates name, mode m, with what write writes.
func (m Mode) Write(name string, write func(io.Writer) error) error {
	tmp, err := m.CreateTemp(name)
	if err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		Discard(tmp, name)
		return err
	}
	return Commit(tmp, name)
}

// CreateTemp creates, mode m, the temporary file that is to be renamed over
// name, for a writer that needs more than an io.Writer (seeks, writes at
// offsets): in name's directory, since a rename cannot cross file systems,
// and hidden, so a listing of the directory does not show it. The
// directory must pass CheckDir.
//
// A name that is a character device or a FIFO already (-o /dev/null, a
// pipe) is written in place instead: renaming over it would put a file
// where the device was (root's /dev/null made a regular file). Commit then
// only closes it. See inPlace for whose such a file must be.
func (m Mode) CreateTemp(name string) (*os.File, error) {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	if f, err := inPlace(name); f != nil || err != nil {
		return f, err
	}
	for range 100 {
		tmp := filepath.Join(dir, "."+base+"."+strconv.FormatUint(rand.Uint64(), 36)+".tmp")
		// With O_CREAT, O_EXCL alone refuses a symbolic link; O_NOFOLLOW
		// says so to the reader too.
		f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, os.FileMode(m))
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("%s: no free temporary name after 100 tries", name)
}

// fifoWait is how long a FIFO at the destination may take to have a
// reader (a `cat` started just after jitprof) before the write is refused.
var fifoWait = 5 * time.Second

// inPlace opens name for writing where it is when it is a character device,
// or a FIFO of yours (foreign.Yours: root, you, the user sudo ran jitprof
// for), and returns nil for anything to be replaced by the rename
// (nothing there, a regular file, a symbolic link planted by another user).
//
// Such a file in a sticky directory (/tmp) may be another user's: written
// in place, a FIFO of theirs would hand them root's report, and an open
// that waits for a reader that never comes would hang jitprof past Ctrl-C.
// So what name is, and whose, is asked of the file itself through an
// O_PATH descriptor (no stat before an open that could meet another file),
// and only then is it opened for writing, through that descriptor, without
// blocking.
func inPlace(name string) (*os.File, error) {
	path, err := unix.Open(name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil // nothing there, or nothing jitprof could open: the rename says
	}
	// The descriptor path holds at the end: a link's is replaced by its
	// target's below.
	defer func() { unix.Close(path) }()
	var st unix.Stat_t
	if err := unix.Fstat(path, &st); err != nil {
		return nil, nil
	}
	trust := foreign.Yours()
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if !slices.Contains(trust, st.Uid) {
			return nil, nil // planted: replaced, never followed
		}
		// A link of a trusted owner (-o /dev/stdout) is followed; who
		// could swap it is kept out by CheckDir, or by the sticky bit.
		unix.Close(path)
		if path, err = unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
			return nil, nil
		}
		if err := unix.Fstat(path, &st); err != nil {
			return nil, nil
		}
	}
	kind := st.Mode & unix.S_IFMT
	if kind != unix.S_IFCHR && kind != unix.S_IFIFO {
		return nil, nil
	}
	// Anyone can make a FIFO where others write; a device node only root
	// can (a user namespace's are not the host's), so one is written as
	// named (the terminal of the user su ran jitprof for: -o /dev/stdout).
	if kind == unix.S_IFIFO && !slices.Contains(trust, st.Uid) {
		return nil, fmt.Errorf("refusing to write to %s: a FIFO of uid %d, who would read what jitprof writes", name, st.Uid)
	}
	reopen := "/proc/self/fd/" + strconv.Itoa(path)
	deadline := time.Now().Add(fifoWait)
	for {
		fd, err := unix.Open(reopen, unix.O_WRONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err == unix.ENXIO && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond) // a FIFO no process reads yet
			continue
		}
		if err == unix.ENXIO {
			return nil, fmt.Errorf("%s: a FIFO no process read for %v", name, fifoWait)
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		// Writes wait for a slow reader, as any writer's do.
		if err := unix.SetNonblock(fd, false); err != nil {
			unix.Close(fd)
			return nil, err
		}
		return os.NewFile(uintptr(fd), name), nil
	}
}

// Create creates name empty, mode m, open for writing, for a file written
// where it is read while it grows (the agent's live copies of perf maps):
// made under a temporary name and renamed into place at once, so that what
// was at name before, a planted symbolic link say, is replaced and never
// written through.
func (m Mode) Create(name string) (*os.File, error) {
	f, err := m.CreateTemp(name)
	if err != nil || f.Name() == name {
		return f, err
	}
	if err := os.Rename(f.Name(), name); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// Commit closes tmp, a file CreateTemp made for name, and renames it over
// name, with the mode it was created with; if any of that fails, tmp is
// removed.
func Commit(tmp *os.File, name string) error {
	err := tmp.Close()
	if tmp.Name() == name {
		return err // a device or FIFO, written in place
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Discard closes tmp, a file CreateTemp made for name, and removes it,
// unless it is name itself, a device or FIFO written in place.
func Discard(tmp *os.File, name string) {
	tmp.Close()
	if tmp.Name() != name {
		os.Remove(tmp.Name())
	}
}

// ErrUnsafeDir is what CheckDir's errors match: root was to write where
// another user could redirect the write.
var ErrUnsafeDir = errors.New("another user can change it")

// CheckDir checks, when running as root, that no user but root, and the user
// sudo ran jitprof for, can change dir or any directory or symbolic link on
// its path: each is owned by one of them and, unless sticky, writable by
// their groups alone. Who can change a directory on the path can swap it for
// a symbolic link between the check and the write, and have root write
// anywhere; a sticky directory (/tmp) lets others add entries but not
// touch root's, so it may be on the path, or be dir itself. As an ordinary
// user no check is made: a redirected write could only reach the user's own
// files, and the temporary file and the rename are safe as they are.
func CheckDir(dir string) error {
	return walk(dir, 0)
}

// MkdirAll creates dir and its missing parents, mode perm (less the umask),
// checking each directory on the way as CheckDir does before anything is
// created in it.
func MkdirAll(dir string, perm os.FileMode) error {
	return walk(dir, perm)
}

// maxHops bounds the symbolic links followed, as the kernel does (40).
const maxHops = 40

// walk resolves dir from "/", one name at a time, checking each directory
// and symbolic link met; with perm, it creates what is missing.
func walk(dir string, perm os.FileMode) error {
	// Not filepath.Abs, which would clean away a "..", which the kernel
	// takes after the link before it.
	path := dir
	if !filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		path = wd + "/" + dir
	}
	var trust *trusted
	if os.Geteuid() == 0 {
		trust = sudoer()
	}
	cur := "/"
	todo := strings.Split(path, "/")
	for hops := 0; ; {
		var st unix.Stat_t
		err := unix.Lstat(cur, &st)
		if err == unix.ENOENT && perm != 0 {
			if err = unix.Mkdir(cur, uint32(perm)); err == nil || err == unix.EEXIST {
				err = unix.Lstat(cur, &st)
			}
		}
		if err != nil {
			return &fs.PathError{Op: "lstat", Path: cur, Err: err}
		}
		if err := trust.check(dir, cur, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if hops++; hops > maxHops {
				return &fs.PathError{Op: "open", Path: dir, Err: unix.ELOOP}
			}
			target, err := os.Readlink(cur)
			if err != nil {
				return err
			}
			todo = append(strings.Split(target, "/"), todo...)
			if filepath.IsAbs(target) {
				cur = "/"
			} else {
				cur = filepath.Dir(cur)
			}
		case unix.S_IFDIR:
		default:
			return &fs.PathError{Op: "open", Path: cur, Err: unix.ENOTDIR}
		}
		for len(todo) > 0 && (todo[0] == "" || todo[0] == "." || todo[0] == ".." && cur == "/") {
			todo = todo[1:]
		}
		if len(todo) == 0 {
			return nil
		}
		name := todo[0]
		todo = todo[1:]
		if name == ".." {
			cur = filepath.Dir(cur) // cur holds no link: its parent was checked on the way
			continue
		}
		cur = filepath.Join(cur, name)
	}
}

// trusted are the owners a directory root writes into may have; nil
// trusts everyone (not running as root).
type trusted struct {
	uids, gids []uint32
}

// sudoer trusts root and the user sudo ran jitprof for, who could have
// had root write anywhere anyway.
func sudoer() *trusted {
	t := &trusted{uids: foreign.Yours(), gids: []uint32{0}}
	if n, err := strconv.ParseUint(os.Getenv("SUDO_GID"), 10, 32); err == nil {
		t.gids = append(t.gids, uint32(n))
	}
	return t
}

// check checks st, of the directory or symbolic link at path, on dir's way.
func (t *trusted) check(dir, path string, st *unix.Stat_t) error {
	if t == nil {
		return nil
	}
	unsafe := func(format string, args ...any) error {
		return fmt.Errorf("refusing to write into %s as root: %s %s: %w", dir, path, fmt.Sprintf(format, args...), ErrUnsafeDir)
	}
	if !slices.Contains(t.uids, st.Uid) {
		return unsafe("is owned by uid %d", st.Uid)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK || st.Mode&unix.S_ISVTX != 0 {
		return nil
	}
	if st.Mode&0o002 != 0 {
		return unsafe("is writable by every user (mode %04o)", st.Mode&0o7777)
	}
	if st.Mode&0o020 != 0 && !slices.Contains(t.gids, st.Gid) {
		return unsafe("is writable by group %d (mode %04o)", st.Gid, st.Mode&0o7777)
	}
	return nil
}
