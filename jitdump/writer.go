package jitdump

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/jitprof/jitprof/internal/hostelf"
	"golang.org/x/sys/unix"
)

// Version is the header version the Writer writes. The spec is at revision 2,
// but perf refuses headers newer than 1 (its JITHEADER_VERSION), so every
// runtime writes 1, revision-2 records included.
const Version = 1

// Function is what a JIT knows about one function it generated.
type Function struct {
	Name  string
	Addr  uint64 // where the code runs
	Code  []byte // the machine code; its length is the function's size
	Lines []DebugEntry
	// Unwind, when set, is written as an UNWINDING_INFO record (its
	// RecordHeader is ignored).
	Unwind *UnwindingInfo
}

// A Writer writes a jitdump file. Records name the process as their thread: a
// goroutine has no thread of its own, and asking the kernel would cost a
// system call per record, a third of Load's time.
//
// It is safe for concurrent use: each call
// writes whole records, and the records of one Load stay together, so a
// crash leaves only whole records plus at most one cut short. Records are
// buffered; Flush hands them to the file.
type Writer struct {
	mu        sync.Mutex
	dst       io.Writer
	order     binary.ByteOrder
	pid       uint32
	buf       []byte
	nextIndex uint64
	err       error // sticky: the first write that failed

	stage         string // of the last StageMark written
	accountingOff bool

	file   *os.File
	marker []byte // the mapped first page perf record notices
}

const bufferSize = 256 << 10

// NewWriter writes header h to dst and returns a Writer for records after it.
// Zero fields of h get defaults: little-endian (the host's order, if that is
// big-endian), Version, this machine's ElfMach, this process's pid, the
// current time.
func NewWriter(dst io.Writer, h Header) (*Writer, error) {
	if h.ByteOrder == nil {
		h.ByteOrder = binary.NativeEndian
	}
	if h.Version == 0 {
		h.Version = Version
	}
	if h.ElfMach == 0 {
		m, _ := hostelf.Machine()
		h.ElfMach = uint32(m)
	}
	if h.Pid == 0 {
		h.Pid = uint32(os.Getpid())
	}
	if h.Timestamp == 0 {
		h.Timestamp = Now()
	}
	w := &Writer{dst: dst, order: h.ByteOrder, pid: h.Pid, buf: make([]byte, 0, bufferSize), nextIndex: 1}
	w.buf = AppendHeader(w.buf, &h)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return w, nil
}

// Options chooses where Create puts the dump.
type Options struct {
	// Dir is the directory for jit-<pid>.dump. Empty means $JITDUMPDIR, or
	// else a new directory of its own under ~/.debug/jit.
	Dir string
}

// Create creates jit-<pid>.dump for this process and maps its first page
// executable, the marker by which perf record and jitprof find the dump.
// The file is created exclusively and a symbolic link in its place is
// refused, so nobody can make the process write elsewhere.
func Create(opts Options) (*Writer, error) {
	dir := opts.Dir
	if dir == "" {
		dir = os.Getenv("JITDUMPDIR")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("jitdump: no directory for the dump: %w", err)
		}
		base := filepath.Join(home, ".debug", "jit")
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, fmt.Errorf("jitdump: %w", err)
		}
		if dir, err = os.MkdirTemp(base, "go-jit-"+time.Now().Format("20060102")+"-"); err != nil {
			return nil, fmt.Errorf("jitdump: %w", err)
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", os.Getpid()))
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("jitdump: create %s: %w", path, err)
	}
	file := os.NewFile(uintptr(fd), path)
	fail := func(err error) (*Writer, error) {
		file.Close()
		os.Remove(path)
		return nil, fmt.Errorf("jitdump: %s: %w", path, err)
	}
	w, err := NewWriter(file, Header{})
	if err != nil {
		return fail(err)
	}
	// perf's marker test is an executable mapping of the file; the page is
	// never touched.
	if w.marker, err = unix.Mmap(fd, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE); err != nil {
		return fail(fmt.Errorf("mapping the marker page: %w", err))
	}
	w.file = file
	return w, nil
}

// Path returns the name of the file Create made, or "".
func (w *Writer) Path() string {
	if w.file == nil {
		return ""
	}
	return w.file.Name()
}

// Load writes a function: its DEBUG_INFO and UNWINDING_INFO, when it has
// them, then its CODE_LOAD, all at the current time. It returns the
// function's code index, which Move takes.
func (w *Writer) Load(fn *Function) (uint64, error) {
	now := Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	h := RecordHeader{Timestamp: now}
	if len(fn.Lines) > 0 {
		w.buf = appendDebugInfo(w.buf, w.order, &h, fn.Addr, slices.Values(fn.Lines))
	}
	if fn.Unwind != nil {
		u := *fn.Unwind
		u.RecordHeader = h
		w.buf = appendUnwinding(w.buf, w.order, &u)
	}
	index := w.nextIndex
	w.nextIndex++
	load := CodeLoad{RecordHeader: h, Pid: w.pid, Tid: w.pid, VMA: fn.Addr, CodeAddr: fn.Addr, CodeSize: uint64(len(fn.Code)), CodeIndex: index, Name: fn.Name, Code: fn.Code}
	w.buf = appendCodeLoad(w.buf, w.order, &load)
	return index, w.spill()
}

// Move records that the function with code index index, size bytes long,
// moved from oldAddr to newAddr.
func (w *Writer) Move(index, oldAddr, newAddr, size uint64) error {
	m := CodeMove{RecordHeader: RecordHeader{Timestamp: Now()}, Pid: w.pid, Tid: w.pid,
		VMA: newAddr, OldCodeAddr: oldAddr, NewCodeAddr: newAddr, CodeSize: size, CodeIndex: index}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.buf = appendCodeMove(w.buf, w.order, &m)
	return w.spill()
}

// WriteRecord writes rec as it is, timestamp and code index included; for
// tools that rewrite dumps. Code indexes it writes are not tracked by Load.
func (w *Writer) WriteRecord(rec Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	var err error
	if w.buf, err = AppendRecord(w.buf, w.order, rec); err != nil {
		return err
	}
	return w.spill()
}

// spill writes the buffer out once it is full. The buffer holds whole
// records only and goes out in one write, so no write ends inside a record.
func (w *Writer) spill() error {
	if len(w.buf) < bufferSize {
		return nil
	}
	err := w.write(w.buf)
	if cap(w.buf) > 4*bufferSize {
		w.buf = make([]byte, 0, bufferSize)
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

func (w *Writer) write(b []byte) error {
	if _, err := w.dst.Write(b); err != nil {
		w.err = fmt.Errorf("jitdump: write: %w", err)
		return w.err
	}
	return nil
}

// Flush writes all buffered records to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	err := w.write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// Close writes a CODE_CLOSE record, flushes, and for a Writer made by Create
// unmaps the marker and closes the file.
func (w *Writer) Close() error {
	err := w.WriteRecord(&CodeClose{RecordHeader: RecordHeader{Timestamp: Now()}})
	err = errors.Join(err, w.Flush())
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.marker != nil {
		err = errors.Join(err, unix.Munmap(w.marker))
		w.marker = nil
	}
	if w.file != nil {
		err = errors.Join(err, w.file.Close())
		w.file = nil
	}
	if w.err == nil {
		w.err = errors.New("jitdump: writer is closed")
	}
	return err
}

// Now returns the current CLOCK_MONOTONIC time in nanoseconds, the clock
// perf record -k mono samples with.
func Now() uint64 { return uint64(nanotime()) }

// nanotime is the runtime's CLOCK_MONOTONIC reading through the vDSO, several
// times cheaper than a clock_gettime system call; the runtime keeps it
// linkable on purpose.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
