package jitdump

import (
	"fmt"
	"os"
	"sync"

	"github.com/jitprof/jitprof/internal/mapfile"
)

// File is a jitdump file mapped into memory and read in place.
type File struct {
	*Reader
	mapping  *mapfile.Mapping
	file     *os.File
	regular  bool // file can be read at any offset, by Scan
	partSize int  // of Scan's buffers

	mu     sync.Mutex // guards reread
	reread Reader     // decodes for RecordAt
}

// Open maps the named file and returns a File reading it without copying.
// Records, and the strings and slices in them, are valid until Close.
// A file that cannot be mapped (a pipe, say) is read into memory instead.
// A runtime may still be appending: Open sees the bytes present when called.
func Open(name string) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return OpenFile(f, name)
}

// OpenFile is Open of a file already open, which the File then owns (it is
// closed with the File, or at once if it cannot be read), named name in
// errors.
func OpenFile(f *os.File, name string) (*File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	m, err := mapfile.Map(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r, err := NewBytesReader(m.Data)
	if err != nil {
		m.Close()
		f.Close()
		r := Reader{name: name}
		return nil, r.named(err)
	}
	r.SetName(name)
	r.readTo = m.ReadTo
	return &File{Reader: r, mapping: m, file: f, regular: st.Mode().IsRegular(), partSize: defaultPartSize, reread: Reader{hdr: r.hdr, ord: r.ord, name: name}}, nil
}

// OpenFileAt is OpenFile with reading starting at off, the offset of a
// record (as Offset gave it after an earlier read of the file): a dump that
// grew is read from where an earlier read of it stopped. Records keep their
// file offsets. after is the timestamp of the record before off, as
// LastTime gave it: a record found past a corrupt one is held to it, as
// it would be in a read of the whole file.
func OpenFileAt(file *os.File, name string, off int64, after uint64) (*File, error) {
	f, err := OpenFile(file, name)
	if err != nil {
		return nil, err
	}
	if off < int64(f.hdr.Size) || off > int64(len(f.data)) {
		f.Close()
		return nil, f.named(&FormatError{Off: off, Msg: fmt.Sprintf("no record at offset %d of %d bytes", off, len(f.data))})
	}
	f.last = after
	f.off = off
	return f, nil
}

// Evict drops the file's pages read so far from the process's resident
// memory; records stay valid, and the pages they touch are read back from
// the kernel's cache. It suits a reader that indexes a large dump and then
// uses few of its functions.
func (f *File) Evict() { f.mapping.Evict() }

// RecordAt reads the record at offset off again, from the file rather than
// its mapping: after Evict, it does not bring the file's pages back into
// the process's memory (the kernel maps a fault's neighbours too). The
// record's strings and slices are its own, valid after Close.
func (f *File) RecordAt(off int64) (Record, error) {
	if off < int64(f.hdr.Size) || off > int64(len(f.data))-RecordHeaderSize {
		return nil, f.named(&FormatError{Off: off, Msg: fmt.Sprintf("no record at offset %d of %d bytes", off, len(f.data))})
	}
	var head [RecordHeaderSize]byte
	if _, err := f.file.ReadAt(head[:], off); err != nil {
		return nil, f.named(err)
	}
	size := int64(f.hdr.ByteOrder.Uint32(head[4:]))
	if size < RecordHeaderSize || size > int64(len(f.data))-off {
		return nil, f.named(&FormatError{Off: off, Msg: fmt.Sprintf("record of %d bytes at offset %d of %d bytes", size, off, len(f.data))})
	}
	b := make([]byte, size)
	if _, err := f.file.ReadAt(b, off); err != nil {
		return nil, f.named(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reread.decode(off, b, false), nil
}

// Close releases the mapping; records read from the File must not be used after it.
func (f *File) Close() error {
	f.Reader.data = nil
	f.file.Close()
	return f.mapping.Close()
}
