package perfdata

import "github.com/jitprof/jitprof/internal/mapfile"

// File is a perf.data file mapped into memory and read in place.
type File struct {
	*Reader
	mapping *mapfile.Mapping
}

// Open maps the named file and returns a File reading it without copying.
// Records, and the strings and slices in them, are valid until Close. A file
// that cannot be mapped (a pipe, say) is read into memory instead.
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
	r.readTo = m.ReadTo
	return &File{Reader: r, mapping: m}, nil
}

// Close releases the mapping; records read from the File must not be used
// after it.
func (f *File) Close() error {
	f.Reader.data = nil
	return f.mapping.Close()
}
