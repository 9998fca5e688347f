package perfdata

import (
	"os"

	"golang.org/x/sys/unix"
)

// File is a perf.data file mapped into memory and read in place.
type File struct {
	*Reader
	mapped []byte
}

// Open maps the named file and returns a File reading it without copying.
// Records, and the strings and slices in them, are valid until Close. A file
// that cannot be mapped (a pipe, say) is read into memory instead.
func Open(name string) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}

	var data, mapped []byte
	if size := st.Size(); st.Mode().IsRegular() && size > 0 && int64(int(size)) == size {
		mapped, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err == nil {
			_ = unix.Madvise(mapped, unix.MADV_SEQUENTIAL)
			data = mapped
		}
	}
	if data == nil {
		if data, err = os.ReadFile(name); err != nil {
			return nil, err
		}
	}

	r, err := NewBytesReader(data)
	if err != nil {
		if mapped != nil {
			_ = unix.Munmap(mapped)
		}
		r := Reader{name: name}
		return nil, r.named(err)
	}
	r.SetName(name)
	return &File{Reader: r, mapped: mapped}, nil
}

// Close releases the mapping; records read from the File must not be used
// after it.
func (f *File) Close() error {
	if f.mapped == nil {
		return nil
	}
	m := f.mapped
	f.mapped = nil
	f.Reader.data = nil
	return unix.Munmap(m)
}
