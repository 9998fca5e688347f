// Package mapfile gives readers that decode in place a file's bytes: mapped
// when the file can be mapped, read into memory when it cannot (a pipe, a
// file in /proc).
package mapfile

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Mapping holds a file's bytes until Close.
type Mapping struct {
	Data   []byte
	mapped bool
	// evicted is where ReadTo last dropped the pages behind a reader.
	evicted int
}

// Open maps the named file read-only. A runtime or perf may still be
// appending to it: the mapping holds the bytes present when Open was called.
func Open(name string) (*Mapping, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Map(f)
}

// Map is Open for a file already open, which stays open.
//
// A regular file that another user can truncate (not owned by you, as
// foreign.Yours has it, or writable by its group or others: a tenant's
// dump or recording handed to root's check, dump or inject) is mapped from
// jitprof's own copy of it (a Mirror's): a mapping of their file would
// fault (SIGBUS) where they truncated it, a crash no Go code can catch.
func Map(f *os.File) (*Mapping, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size := st.Size(); st.Mode().IsRegular() && size > 0 && int64(int(size)) == size {
		mapped := f
		if !yoursAlone(st) {
			if mapped, err = copyOf(f); err != nil {
				return nil, err
			}
			defer mapped.Close() // the mapping keeps the copy
			if size, err = mapped.Seek(0, io.SeekEnd); err != nil || size == 0 || int64(int(size)) != size {
				return &Mapping{}, err
			}
		}
		data, err := unix.Mmap(int(mapped.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err == nil {
			_ = unix.Madvise(data, unix.MADV_SEQUENTIAL) // readers go front to back
			return &Mapping{Data: data, mapped: true}, nil
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return &Mapping{Data: data}, nil
}

// Evict drops the pages read so far from the process's resident memory, for
// readers that index a file in one pass and then touch little of it: the
// kernel reads pages back from its cache when they are touched again.
func (m *Mapping) Evict() {
	if m.mapped {
		_ = unix.Madvise(m.Data, unix.MADV_DONTNEED)
		// What is touched later is scattered: read no pages around it.
		_ = unix.Madvise(m.Data, unix.MADV_RANDOM)
	}
}

// ReadTo tells that a reader going front to back has finished with
// Data[:off]: every evictWindow bytes, the pages behind it are dropped from
// the process's resident memory, as Evict drops all of them. A file of
// millions of records read once (an index of a dump, a copy of a
// recording) then holds at most that much of itself in memory, not all of
// it; what was read stays valid, its pages read back when touched. A
// reader that starts again from the front may call it with a smaller off.
func (m *Mapping) ReadTo(off int) {
	if !m.mapped {
		return
	}
	if off < m.evicted {
		m.evicted = off &^ (pageSize - 1)
		return
	}
	if off-m.evicted < evictWindow {
		return
	}
	hi := off &^ (pageSize - 1)
	_ = unix.Madvise(m.Data[m.evicted:hi], unix.MADV_DONTNEED)
	m.evicted = hi
}

// evictWindow is how far ReadTo lets a reader go before the pages behind it
// are dropped.
const evictWindow = 8 << 20

var pageSize = os.Getpagesize()

// Close releases the bytes; nothing that aliases Data may be used after it.
func (m *Mapping) Close() error {
	data, mapped := m.Data, m.mapped
	m.Data, m.mapped = nil, false
	if !mapped {
		return nil
	}
	return unix.Munmap(data)
}
