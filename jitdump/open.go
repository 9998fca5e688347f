package jitdump

import "github.com/jitprof/jitprof/internal/mapfile"

// File is a jitdump file mapped into memory and read in place.
type File struct {
	*Reader
	mapping *mapfile.Mapping
}

// Open maps the named file and returns a File reading it without copying.
// Records, and the strings and slices in them, are valid until Close.
// A file that cannot be mapped (a pipe, say) is read into memory instead.
// A runtime may still be appending: Open sees the bytes present when called.
func Open(name string) (*File, error) {
	m, err := mapfile.Open(name)
	if err != nil {
		return nil, err
	}
	r, err := NewBytesReader(m.Data)
	if err != nil {
		m.Close()
		r := Reader{name: name}
		return nil, r.named(err)
	}
	r.SetName(name)
	return &File{Reader: r, mapping: m}, nil
}

// Evict drops the file's pages read so far from the process's resident
// memory; records stay valid, and the pages they touch are read back from
// the kernel's cache. It suits a reader that indexes a large dump and then
// uses few of its functions.
func (f *File) Evict() { f.mapping.Evict() }

// Close releases the mapping; records read from the File must not be used after it.
func (f *File) Close() error {
	f.Reader.data = nil
	return f.mapping.Close()
}
