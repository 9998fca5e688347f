package agent

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
)

// Runtimes buffer their dumps: V8 writes its jitdump through a 2 MB stdio
// buffer, so the CODE_LOAD of a function that has run for seconds may not be
// in the file yet (measured: node 20 left its hottest functions' loads in
// the buffer until more code was compiled or it exited). A window
// symbolized too early would leave those samples unnamed where jitprof
// report, later, names them. So a window waits until each dump it needs
// has caught up with it: the file holds a record timed after the window's
// end (records are written in time order, so everything before it is
// there), or the process has exited (exit flushes the buffer), or the
// wait has lasted Options.JITWait.

// dumpWatch follows how far dumps have been written, reading only what
// was added since it last looked. A dump is a file its process controls,
// and the agent runs as root: it is opened as the process sees it and as
// its owner (procfs), never blocking, and kept open; the watcher's copies,
// in copies, are jitprof's own.
type dumpWatch struct {
	dumps  map[string]*dumpProgress
	proc   procfs.FS
	copies string // the directory of the jitwatch.Watcher's copies
	force  bool   // perf's -f: a dump its process's owner does not own is read too
}

type dumpProgress struct {
	f      *os.File
	header []byte // the file's header, to read records after it
	off    int64  // the end of the last whole record read
	size   int64  // of the file when last read
	last   uint64 // that record's timestamp
	arch   bool   // timed by the TSC, not comparable with the windows' clock
	seen   int64  // the last window that needed it
	warned bool   // that a window could not wait for it
}

func newDumpWatch(copies string, force bool) *dumpWatch {
	return &dumpWatch{dumps: make(map[string]*dumpProgress), proc: procfs.Host, copies: copies, force: force}
}

// caughtUp tells whether the dump of process pid at path (the watcher's
// copy, or the path the process sees) holds a record timed at or after t
// (CLOCK_MONOTONIC ns), the end of a window the process was in. A dump
// that cannot be read, or whose times cannot be compared, is not waited
// for.
func (dw *dumpWatch) caughtUp(pid uint32, path string, t uint64, window int64) bool {
	p := dw.dumps[path]
	if p == nil {
		p = &dumpProgress{}
		dw.dumps[path] = p
	}
	p.seen = window
	if p.last >= t || p.arch {
		return true
	}
	if p.f == nil {
		f, err := dw.open(pid, path, t)
		if err != nil {
			return true
		}
		p.f = f
	}
	if err := p.advance(); err != nil {
		return true
	}
	return p.last >= t || p.arch
}

// open opens the dump at path of process pid, which ran at seen.
func (dw *dumpWatch) open(pid uint32, path string, seen uint64) (*os.File, error) {
	if filepath.Dir(path) == dw.copies {
		return foreign.Open(path, foreign.Rules{NoSymlinks: true})
	}
	pr, err := dw.proc.Process(pid, seen)
	if err != nil {
		return nil, err
	}
	return pr.Open(path, dw.force)
}

// advance reads the records written since the last call.
func (p *dumpProgress) advance() error {
	f := p.f
	size, err := foreign.Size(f, math.MaxInt64) // a sparse file is not read
	if err != nil || p.header != nil && size == p.size {
		return err // nothing written since: windows poll a lagging dump often
	}
	if p.header == nil {
		r, err := jitdump.NewReader(io.NewSectionReader(f, 0, size))
		if err != nil {
			return err
		}
		h := r.Header()
		p.arch = h.Flags&jitdump.FlagArchTimestamp != 0
		p.header = make([]byte, h.Size)
		if _, err := f.ReadAt(p.header, 0); err != nil {
			return err
		}
		p.off = int64(h.Size)
	}
	p.size = size
	// The records after off, behind the header a Reader needs: a record
	// at stream offset o is at base+o-len(header) in the file.
	base, hl := p.off, int64(len(p.header))
	r, err := jitdump.NewReader(io.MultiReader(bytes.NewReader(p.header), io.NewSectionReader(f, base, max(0, size-base))))
	if err != nil {
		return err
	}
	r.ReuseRecord = true
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, jitdump.ErrTruncated) {
			return nil // the runtime is still writing the rest
		}
		if err != nil {
			return err
		}
		h := rec.Header()
		p.last = max(p.last, h.Timestamp)
		p.off = base + h.Offset - hl + int64(h.Size)
	}
}

// forget drops the dumps no window has needed since window before.
func (dw *dumpWatch) forget(before int64) {
	for path, p := range dw.dumps {
		if p.seen < before {
			if p.f != nil {
				p.f.Close()
			}
			delete(dw.dumps, path)
		}
	}
}

// warnOnce tells whether the dump at path has not been warned about yet,
// and notes that it now is.
func (dw *dumpWatch) warnOnce(path string) bool {
	p := dw.dumps[path]
	if p == nil || p.warned {
		return false
	}
	p.warned = true
	return true
}
