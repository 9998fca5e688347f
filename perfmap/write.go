package perfmap

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Write writes entries to w as a map in the bare-hex dialect, the one every
// reader of perf maps accepts. If an entry cannot be written so that
// Parse reads it back unchanged (see Writer.WriteEntry), Write writes nothing
// and says which.
func Write(w io.Writer, entries []Entry) error {
	for i, e := range entries {
		if err := check(e); err != nil {
			return fmt.Errorf("perfmap: entry %d: %w", i, err)
		}
	}
	mw := NewWriter(w)
	for _, e := range entries {
		if err := mw.add(e); err != nil {
			return err
		}
	}
	return mw.Flush()
}

// Writer appends entries to a map, for a JIT compiler that publishes the
// code it generates. It is safe for concurrent use.
//
// Lines are buffered, and each write to the underlying writer holds whole
// lines only, so a profiler reading the map while it grows, or after the
// program dies, finds no half line: at worst, lines not yet flushed are
// missing. Flush makes the lines written so far visible to a profiler that
// reads the map while the program runs; Close, before the program exits,
// makes sure none is lost.
type Writer struct {
	mu   sync.Mutex
	w    io.Writer
	file *os.File // when the Writer created it
	buf  []byte
	err  error // sticky: the first write that failed, or errClosed
}

// bufferSize bounds what a program that dies without Close loses, while a
// write still carries a hundred lines or more.
const bufferSize = 16 << 10

var errClosed = errors.New("perfmap: Writer is closed")

// NewWriter returns a Writer appending to w.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, 0, bufferSize)}
}

// Create creates the map of the calling process, perf-<pid>.map, in dir, or
// in /tmp, where perf looks for it, if dir is "". The file must not exist:
// in a shared directory, a file or symbolic link already there may have been
// put there by another user to have the process write through it. If it
// exists, the error matches fs.ErrExist: a stale map left by an earlier
// process with the same pid must be removed first.
func Create(dir string) (*Writer, error) {
	if dir == "" {
		dir = "/tmp"
	}
	name := filepath.Join(dir, "perf-"+strconv.Itoa(os.Getpid())+".map")
	// With O_CREATE, O_EXCL also refuses a symbolic link, even a dangling
	// one, so O_NOFOLLOW would add nothing. Only the owner and root may
	// profile the process, so only they need to read its map.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	w := NewWriter(f)
	w.file = f
	return w, nil
}

// WriteEntry appends the line for e, ignoring e.Line. It refuses, with an
// *EntryError, an entry that would not read back unchanged: an empty name,
// a name holding a newline or ending in whitespace, or a START+SIZE that
// overflows 64 bits. After a write to the underlying writer fails, every
// call returns that error.
func (w *Writer) WriteEntry(e Entry) error {
	if err := check(e); err != nil {
		return fmt.Errorf("perfmap: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.add(e)
}

// add appends e's line, sending the buffer first if the line may not fit.
func (w *Writer) add(e Entry) error {
	if w.err != nil {
		return w.err
	}
	const maxNumbers = 2*16 + 3 // two numbers, two spaces, a newline
	if len(w.buf) > 0 && len(w.buf)+maxNumbers+len(e.Name) > bufferSize {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.buf = strconv.AppendUint(w.buf, e.Start, 16)
	w.buf = append(w.buf, ' ')
	w.buf = strconv.AppendUint(w.buf, e.Size, 16)
	w.buf = append(w.buf, ' ')
	w.buf = append(w.buf, e.Name...)
	w.buf = append(w.buf, '\n')
	return nil
}

// Flush sends the buffered lines to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *Writer) flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.buf) > 0 {
		if _, err := w.w.Write(w.buf); err != nil {
			w.err = err
			return err
		}
		w.buf = w.buf[:0]
	}
	return nil
}

// Close flushes the Writer and, if Create opened the file, closes it.
// The Writer cannot be used afterwards.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == errClosed {
		return errClosed
	}
	err := w.flush()
	if w.file != nil {
		err = errors.Join(err, w.file.Close())
	}
	w.err = errClosed
	return err
}

// EntryError reports an entry that Write or WriteEntry refuses because
// Parse would not read it back unchanged.
type EntryError struct {
	Entry Entry
	Msg   string // what is wrong with it
}

func (e *EntryError) Error() string {
	return fmt.Sprintf("%s: %#x %#x %q", e.Msg, e.Entry.Start, e.Entry.Size, e.Entry.Name)
}

// check returns an *EntryError if Parse would not read e back unchanged.
func check(e Entry) error {
	var msg string
	switch {
	case e.Name == "":
		msg = "empty name"
	case strings.IndexByte(e.Name, '\n') >= 0:
		msg = "newline in name"
	case strings.TrimRight(e.Name, " \t\r") != e.Name:
		msg = "whitespace at end of name"
	case e.Start+e.Size < e.Start:
		msg = "start+size overflows 64 bits"
	default:
		return nil
	}
	return &EntryError{Entry: e, Msg: msg}
}
