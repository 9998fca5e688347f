package unwind

import (
	"bytes"
	"debug/elf"
	"fmt"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
)

// Priorities of CFI sections where their FDEs overlap: the file's own
// .eh_frame is what the program runs with, so it wins.
const (
	prioEHFrame = iota
	prioDebugFrame
	prioDebugFile
)

// OpenELF builds the table of the ELF file recorded at path, from its
// .eh_frame and .debug_frame and from the .debug_frame of a separate debug
// file, looked for where perf looks (elfsym.DebugFiles: .gnu_debuglink's
// name in the file's directory, its .debug/ and /usr/lib/debug/<dir>/, then
// /usr/lib/debug/<path>[.debug] and /usr/lib/debug/.build-id/xx/rest.debug);
// a debug file of another build is skipped. Where sections describe the
// same code, the file's .eh_frame wins. at maps each path (the file's and
// the debug files') to where it is read from: an archive's copy, or the
// path in a container's root; nil reads them where they are. Every file is opened and read
// as elfsym opens a recording's files (elfsym.OpenFile): any user may have
// put a FIFO, a device or a sparse file there since.
//
// The file must be the one recorded (elfsym.File.Is): an error wrapping
// elfsym.ErrOtherFile refuses another. Addresses are the file's virtual
// addresses: Table.AddrOf maps file offsets to them. CFI entries that
// cannot be used are skipped and reported by Table.Err; OpenELF fails only
// when the file cannot be read or holds no usable CFI.
func OpenELF(path string, want elfsym.Recorded, at func(string) foreign.Path) (*Table, error) {
	if at == nil {
		at = foreign.Plain
	}
	f, err := elfsym.OpenFile(at(path))
	if err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	defer f.Close()
	if err := f.Is(want); err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	return fromELF(f, path, at)
}

// FromELFImage builds the table of an ELF image in memory, such as the
// vDSO's, named name in errors. It has no separate debug file.
func FromELFImage(img []byte, name string) (*Table, error) {
	f, err := elfsym.NewFile(bytes.NewReader(img), name, int64(len(img)))
	if err != nil {
		return nil, fmt.Errorf("unwind: %w", err)
	}
	return fromELF(f, name, nil)
}

// fromELF builds the table of f, recorded at path; at, when not nil,
// finds its separate debug files.
func fromELF(f *elfsym.File, path string, at func(string) foreign.Path) (*Table, error) {
	arch, err := cfi.ArchOf(f.Machine)
	if err == nil && f.Class != elf.ELFCLASS64 {
		err = fmt.Errorf("%v %v is not supported", f.Class, f.Machine)
	}
	if err == nil {
		err = Supported(arch)
	}
	if err != nil {
		return nil, fmt.Errorf("unwind: %s: %v", path, err)
	}
	id := f.BuildID()

	t := &Table{}
	m := &cfi.Machine{Arch: arch}
	var fdes []fde
	add := func(f *elfsym.File, file, name string, prio int) {
		s := f.Section(name)
		if s == nil || s.Type != elf.SHT_PROGBITS {
			return // NOBITS in debug files: the data is in the runtime file
		}
		data, err := f.Data(s)
		if err != nil {
			t.problem(fmt.Errorf("unwind: %w", err))
			return
		}
		sec := &cfi.Section{File: file, Name: name, Data: data, Addr: s.Addr, EH: name == ".eh_frame", Order: f.ByteOrder}
		fdes = parseSection(sec, m, fdes, prio, t.problem)
	}
	add(f, path, ".eh_frame", prioEHFrame)
	add(f, path, ".debug_frame", prioDebugFrame)
	if at != nil { // an image in memory has no debug file
		for _, name := range elfsym.DebugFiles(path, f) {
			df, err := elfsym.OpenFile(at(name))
			if err != nil {
				continue
			}
			if did := df.BuildID(); id == nil || bytes.Equal(did, id) {
				add(df, name, ".debug_frame", prioDebugFile)
				df.Close()
				break
			}
			df.Close()
		}
	}

	var code []load // executable segments, where FDEs must lie
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD {
			continue
		}
		t.loads = append(t.loads, load{off: p.Off, size: p.Filesz, vaddr: p.Vaddr})
		if p.Flags&elf.PF_X != 0 {
			code = append(code, load{off: p.Off, size: p.Memsz, vaddr: p.Vaddr})
		}
	}
	var keep func(start, end uint64) bool
	if len(code) > 0 {
		keep = func(start, end uint64) bool {
			for _, c := range code {
				if start >= c.vaddr && end-c.vaddr <= c.size {
					return true
				}
			}
			return false
		}
	}
	if err := t.build(m, fdes, keep); err != nil {
		return nil, fmt.Errorf("unwind: %s: %v", path, err)
	}
	if t.Len() == 0 {
		if err := t.Err(); err != nil {
			return nil, fmt.Errorf("unwind: %s: no usable CFI: %w", path, err)
		}
		return nil, fmt.Errorf("unwind: %s: %w (.eh_frame, .debug_frame)", path, ErrNoCFI)
	}
	return t, nil
}
