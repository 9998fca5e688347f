package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/foreign"
)

// File is an ELF file as jitprof reads those a recording names, which any
// user may have replaced since: opened by foreign.Open (a regular file, never
// blocking on a FIFO), and read no further than the bytes it holds
// (foreign.Size, so a sparse file cannot claim more): a section's header is
// a claim, and its contents are read only as far as the file backs it.
type File struct {
	*elf.File
	name string
	size int64       // what may be read: no section is read past it
	file *os.File    // nil for an image in memory
	r    io.ReaderAt // what the File reads
}

// Bounds on what reading a section may cost beyond the file's own bytes.
const (
	// maxNotes is what is read of a note section for its build-id: a GNU
	// build-id note is 36 bytes, the sections perf looks in hold a few.
	maxNotes = 16 << 10
	// A compressed section decompresses to at most compressRatio times
	// its bytes in the file plus decompressSlack: debug sections compress
	// a few times over, a zlib or zstd bomb a thousand and more.
	compressRatio   = 32
	decompressSlack = 64 << 20
)

// OpenFile opens the ELF file at p, a path that a recording names: here,
// or in a process's root (foreign.Path's rules).
func OpenFile(p foreign.Path) (*File, error) {
	f, err := p.Open()
	if err != nil {
		return nil, err
	}
	size, err := foreign.Size(f, math.MaxInt64)
	var ef *File
	if err == nil {
		ef, err = NewFile(f, p.Name, size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	ef.file = f
	return ef, nil
}

// NewFile reads r, an ELF file of size bytes, named name in errors.
func NewFile(r io.ReaderAt, name string, size int64) (*File, error) {
	// The standard library reads the section names whole, decompressing
	// them if they say they are compressed: no real file's are, and a
	// bomb there would be read before any check here.
	if err := namesStored(r, size); err != nil {
		return nil, fmt.Errorf("elfsym: %s: %w", name, err)
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, fmt.Errorf("elfsym: %s: %w", name, err)
	}
	return &File{File: f, name: name, size: size, r: r}, nil
}

// Size is how many bytes of the file may be read: what it holds on disk,
// whatever its sections' headers claim.
func (f *File) Size() int64 { return f.size }

// Close closes the file OpenFile opened.
func (f *File) Close() error {
	if f.file == nil {
		return nil
	}
	err := f.file.Close()
	f.file = nil
	return err
}

// Data returns the contents of s, decompressed: an error naming the file
// and the section when they lie past the bytes the file holds, when s has
// none in the file (NOBITS), or when they decompress to more than
// compressRatio times their size plus decompressSlack.
func (f *File) Data(s *elf.Section) ([]byte, error) {
	if s.Type == elf.SHT_NOBITS {
		return nil, fmt.Errorf("elfsym: %s: section %s has no contents in the file", f.name, s.Name)
	}
	if s.Offset > uint64(f.size) || s.FileSize > uint64(f.size)-s.Offset {
		return nil, fmt.Errorf("elfsym: %s: section %s at %#x, %d bytes, runs past the %d bytes the file holds", f.name, s.Name, s.Offset, s.FileSize, f.size)
	}
	r := s.Open() // for a compressed section, this reads its header: Size is then what it decompresses to
	if limit := s.FileSize*compressRatio + decompressSlack; s.Size > limit {
		return nil, fmt.Errorf("elfsym: %s: section %s claims to decompress to %d bytes from %d, more than the %d read of it", f.name, s.Name, s.Size, s.FileSize, limit)
	}
	data := make([]byte, s.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("elfsym: %s: section %s: %w", f.name, s.Name, err)
	}
	return data, nil
}

// BuildID returns the GNU build-id of the file, or nil.
func (f *File) BuildID() []byte { return readBuildID(f.File) }

// FileID is a file as the kernel identifies it: its device and inode, as
// a recording's MMAP2 records give them. Ino 0 is no identity (perf
// inject's made-up records).
type FileID struct {
	Major, Minor uint32
	Ino          uint64
}

func (id FileID) String() string {
	return fmt.Sprintf("device %d:%d inode %d", id.Major, id.Minor, id.Ino)
}

// Recorded is what a recording says of the file it saw mapped at a path.
type Recorded struct {
	BuildID []byte
	// File is its device and inode, from the MMAP2 records, when BuildID
	// is nil; zero when the recording has neither.
	File FileID
}

// ErrOtherFile is a file at a recorded path that is not the file the
// recording saw there.
var ErrOtherFile = errors.New("not the file the recording saw")

// Is tells whether f is the file the recording saw, and if not, says why,
// naming f and both identities.
//
// A recorded build-id decides alone, and the file must have the same: a
// build-id is the file's contents, so the same file upgraded in place, or
// reported with another st_dev (btrfs subvolumes, overlayfs), is still it,
// while a file that lost its build-id is another. Without one, the device
// and inode the kernel recorded must be f's: a process in a mount namespace
// of its own may have mapped a file of its own at a path that on the host
// names another, say root's own 0700 directory, whose symbols it must not
// see. With neither, nothing is known, and f is taken as perf takes it.
func (f *File) Is(want Recorded) error {
	if len(want.BuildID) > 0 {
		if got := f.BuildID(); !bytes.Equal(got, want.BuildID) {
			return fmt.Errorf("%s: build-id %x differs from the recorded %x: %w", f.name, got, want.BuildID, ErrOtherFile)
		}
		return nil
	}
	if want.File.Ino == 0 {
		return nil
	}
	got, err := f.ID()
	if err != nil {
		return err
	}
	if got != want.File {
		return fmt.Errorf("%s: %v, the recording saw %v: %w", f.name, got, want.File, ErrOtherFile)
	}
	return nil
}

// ID returns the device and inode of the file OpenFile opened, taken from
// the open file itself: what is checked is what is read.
func (f *File) ID() (FileID, error) {
	if f.file == nil {
		return FileID{}, fmt.Errorf("elfsym: %s: an image in memory has no device and inode", f.name)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.file.Fd()), &st); err != nil {
		return FileID{}, fmt.Errorf("elfsym: %s: %w", f.name, err)
	}
	return FileID{unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino}, nil
}

// namesStored checks that the section name table of the ELF file r, of
// size bytes, is not compressed and lies within the file. What the
// standard library rejects (no ELF file, headers past the end) is left to
// it.
func namesStored(r io.ReaderAt, size int64) error {
	ident := make([]byte, elf.EI_NIDENT)
	if _, err := r.ReadAt(ident, 0); err != nil {
		return nil
	}
	var bo binary.ByteOrder = binary.LittleEndian
	if elf.Data(ident[elf.EI_DATA]) == elf.ELFDATA2MSB {
		bo = binary.BigEndian
	}
	var shoff, shentsize, shstrndx uint64
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		var h elf.Header64
		if binary.Read(io.NewSectionReader(r, 0, size), bo, &h) != nil {
			return nil
		}
		shoff, shentsize, shstrndx = h.Shoff, uint64(h.Shentsize), uint64(h.Shstrndx)
	case elf.ELFCLASS32:
		var h elf.Header32
		if binary.Read(io.NewSectionReader(r, 0, size), bo, &h) != nil {
			return nil
		}
		shoff, shentsize, shstrndx = uint64(h.Shoff), uint64(h.Shentsize), uint64(h.Shstrndx)
	default:
		return nil
	}
	header := func(i uint64) (flags, off, n uint64, link uint32, ok bool) {
		at := int64(shoff + i*shentsize)
		if shoff > uint64(size) || i*shentsize > uint64(size)-shoff {
			return 0, 0, 0, 0, false
		}
		sr := io.NewSectionReader(r, at, size-at)
		if elf.Class(ident[elf.EI_CLASS]) == elf.ELFCLASS64 {
			var s elf.Section64
			if binary.Read(sr, bo, &s) != nil {
				return 0, 0, 0, 0, false
			}
			return s.Flags, s.Off, s.Size, s.Link, true
		}
		var s elf.Section32
		if binary.Read(sr, bo, &s) != nil {
			return 0, 0, 0, 0, false
		}
		return uint64(s.Flags), uint64(s.Off), uint64(s.Size), s.Link, true
	}
	if shstrndx == uint64(elf.SHN_XINDEX) {
		_, _, _, link, ok := header(0)
		if !ok {
			return nil
		}
		shstrndx = uint64(link)
	}
	flags, off, n, _, ok := header(shstrndx)
	switch {
	case !ok || shstrndx == 0:
		return nil
	case flags&uint64(elf.SHF_COMPRESSED) != 0:
		return errors.New("its section names are compressed")
	case off > uint64(size) || n > uint64(size)-off:
		return fmt.Errorf("its section names at %#x, %d bytes, run past the %d bytes the file holds", off, n, size)
	}
	return nil
}

// readBuildID returns the GNU build-id note, looked for in the sections
// perf looks in (elf_read_build_id), of which at most maxNotes bytes are
// read: the section's size is only its header's claim.
func readBuildID(f *elf.File) []byte {
	for _, name := range []string{".note.gnu.build-id", ".notes", ".note"} {
		s := f.Section(name)
		if s == nil {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(s.Open(), int64(min(s.Size, maxNotes))))
		if err != nil {
			return nil
		}
		return noteBuildID(data, f.ByteOrder)
	}
	return nil
}

// debugLinkName returns the file name in the .gnu_debuglink section of f,
// "" when there is none or it is more than a file name: the name is looked
// for in the file's directory, and ".." or a "/" in it would lead out.
func (f *File) debugLinkName() string {
	s := f.Section(".gnu_debuglink")
	if s == nil || s.Size > maxNotes {
		return ""
	}
	data, err := f.Data(s)
	if err != nil {
		return ""
	}
	link, _, _ := bytes.Cut(data, []byte{0})
	name := string(link)
	if name == "." || name == ".." || strings.Contains(name, "/") {
		return ""
	}
	return name
}
