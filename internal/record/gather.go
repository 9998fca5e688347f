package record

import (
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// GatherOptions say how Gather treats the files it moves.
type GatherOptions struct {
	// MaxBytes bounds the bytes Gather copies, for files it cannot
	// rename (on another file system); 0 picks jitwatch.DefaultCopyMaxBytes,
	// -1 none. A file past it stays where it is.
	MaxBytes int64
	// Force moves files that neither this user nor root owns, as perf's
	// -f.
	Force bool
	Note  func(string)
}

// Gather moves into dir the files the recorded processes wrote because they
// were recorded: the dumps the recording's markers point to (in the working
// directory, /tmp, or under dir's .debug/jit), each process's perf map in
// /tmp, and the V8 logs node writes with --perf-prof (isolate-*-PID-v8.log
// in workDir). It is for a command jitprof started with its runtime
// environment: those files are its doing, and with them beside it the
// recording at data reads anywhere (the report looks for dumps and maps in
// the recording's directory). A file already in dir stays; one whose name
// dir already has is left where it is, with a note; a perf map the
// recording's jitwatch.Watcher copied whole into dir is removed. It returns the
// paths the files have now.
//
// The names are in directories others may write (/tmp): a file is taken
// only if it is a regular file at that very name, no symlink, owned by this
// user or root (the command's, which runs as this user), and what is moved
// is the file that was checked. Files moved are made mode 0600.
func Gather(data, dir, workDir string, o GatherOptions) ([]string, error) {
	if o.Note == nil {
		o.Note = func(string) {}
	}
	f, err := perfdata.Open(data)
	if err != nil {
		return nil, err
	}
	pids := make(map[uint32]bool)
	rec, err := jitsources.Scan(f.Reader, func(r perfdata.Record, _ int64) {
		if c, ok := r.(*perfdata.Comm); ok {
			pids[c.Pid] = true
		}
	})
	f.Close()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, m := range rec.Markers {
		pids[m.Pid] = true
		files = append(files, m.Path)
	}
	for pid := range pids {
		files = append(files, filepath.Join("/tmp", fmt.Sprintf("perf-%d.map", pid)))
	}
	logs, err := filepath.Glob(filepath.Join(workDir, "isolate-*-v8.log"))
	if err != nil {
		return nil, err
	}
	for _, l := range logs {
		if m := v8Log.FindStringSubmatch(filepath.Base(l)); m != nil {
			if pid, err := strconv.ParseUint(m[1], 10, 32); err == nil && pids[uint32(pid)] {
				files = append(files, l)
			}
		}
	}

	g := gatherer{o: o, room: o.MaxBytes}
	switch {
	case g.room == 0:
		g.room = jitwatch.DefaultCopyMaxBytes
	case g.room < 0:
		g.room = math.MaxInt64
	}
	var moved []string
	taken := make(map[string]bool)
	for _, from := range files {
		to := filepath.Join(dir, filepath.Base(from))
		if same, err := sameFile(from, to); err != nil || same {
			if same {
				moved = append(moved, to)
			}
			continue // not there (a map that was never written), or already in place
		}
		src, err := g.open(from)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			o.Note(fmt.Sprintf("left where it is: %v", err))
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(src.Fd()), &st); err != nil {
			src.Close()
			return moved, err
		}
		switch {
		case copied(&st, from, to):
			// The recording's watcher copied it whole, with its times:
			// the move is done but for the removal.
			removeIfSame(from, &st)
			taken[to] = true
			moved = append(moved, to, to+jitsources.TimesSuffix)
		case taken[to] || nameTaken(to):
			o.Note(fmt.Sprintf("%s stays where it is: %s has a file of that name", from, dir))
		default:
			err = g.move(src, &st, from, to)
			if err == nil {
				taken[to] = true
				moved = append(moved, to)
			}
		}
		src.Close()
		if errors.Is(err, foreign.ErrTooBig) || errors.Is(err, errChanged) {
			o.Note(fmt.Sprintf("left where it is: %v", err))
		} else if err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// gatherer moves files for Gather.
type gatherer struct {
	o    GatherOptions
	room int64 // bytes copies may still take
}

// open opens from, which must be a regular file at that name, no symlink,
// owned by this user or root unless forced.
func (g *gatherer) open(from string) (*os.File, error) {
	return foreign.Open(filepath.Base(from), foreign.Rules{Root: filepath.Dir(from), NoSymlinks: true,
		Owners: []uint32{uint32(os.Geteuid()), 0}, Force: g.o.Force})
}

// errChanged is a name that no longer held the file checked when it was
// to be moved.
var errChanged = errors.New("replaced while it was moved")

// move moves src, opened at from and of status st, to to: renamed when on
// one file system, checked to be the file opened once in dir (where no one
// else can change it); otherwise copied from src, within the room left, and
// from removed if it still holds src.
func (g *gatherer) move(src *os.File, st *unix.Stat_t, from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if err == nil {
		if isFile(to, st) {
			return src.Chmod(0o600)
		}
		// Swapped since the open: back with it, whatever it is.
		if unix.Renameat2(unix.AT_FDCWD, to, unix.AT_FDCWD, from, unix.RENAME_NOREPLACE) != nil {
			os.Remove(to)
		}
		return fmt.Errorf("%s: %w", from, errChanged)
	}
	if !errors.Is(err, unix.EXDEV) {
		return &fs.PathError{Op: "rename", Path: from, Err: err}
	}
	size, err := foreign.Size(src, g.room)
	if err != nil {
		return fmt.Errorf("%w (the bound on copies, --jit-copy-max-mb, has %d bytes left)", err, g.room)
	}
	if err := atomicfile.Write(to, func(w io.Writer) error {
		_, err := foreign.Copy(w, src, 0, size)
		return err
	}); err != nil {
		return err
	}
	g.room -= size
	removeIfSame(from, st)
	return nil
}

// copied tells whether to is the copy of the perf map from, of status st,
// that jitwatch.Watcher made: as long, with a times file.
func copied(st *unix.Stat_t, from, to string) bool {
	ti, err1 := os.Stat(to)
	_, err2 := os.Stat(to + jitsources.TimesSuffix)
	return err1 == nil && err2 == nil && st.Size == ti.Size() && strings.HasSuffix(from, ".map")
}

// isFile tells whether path names the file of status st, itself, not a
// link to it.
func isFile(path string, st *unix.Stat_t) bool {
	var at unix.Stat_t
	return unix.Lstat(path, &at) == nil && at.Dev == st.Dev && at.Ino == st.Ino
}

// removeIfSame removes path if it still names the file of status st: a
// name swapped meanwhile is not jitprof's to remove.
func removeIfSame(path string, st *unix.Stat_t) {
	if isFile(path, st) {
		os.Remove(path)
	}
}

// nameTaken tells whether path names anything, a dangling link included.
func nameTaken(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// v8Log is the name of a V8 log: isolate-<address>-<pid>-v8.log.
var v8Log = regexp.MustCompile(`^isolate-0x[0-9a-f]+-([0-9]+)-v8\.log$`)

// sameFile tells whether from, which must exist, is the file at to; an
// error when from does not exist.
func sameFile(from, to string) (bool, error) {
	fi, err := os.Stat(from)
	if err != nil {
		return false, err
	}
	ti, err := os.Stat(to)
	return err == nil && os.SameFile(fi, ti), nil
}
