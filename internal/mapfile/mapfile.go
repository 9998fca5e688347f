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
func Map(f *os.File) (*Mapping, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if size := st.Size(); st.Mode().IsRegular() && size > 0 && int64(int(size)) == size {
		data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
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

// EvictRange drops the pages of Data[lo:hi] from the process's resident
// memory, as Evict does for all of it, for a reader that goes on past them;
// lo is at a page boundary, hi is rounded down to one.
func (m *Mapping) EvictRange(lo, hi int) {
	hi &^= os.Getpagesize() - 1
	if m.mapped && lo < hi {
		_ = unix.Madvise(m.Data[lo:hi], unix.MADV_DONTNEED)
	}
}

// Close releases the bytes; nothing that aliases Data may be used after it.
func (m *Mapping) Close() error {
	data, mapped := m.Data, m.mapped
	m.Data, m.mapped = nil, false
	if !mapped {
		return nil
	}
	return unix.Munmap(data)
}
