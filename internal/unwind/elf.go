package unwind

import (
	"bytes"
	"debug/elf"
	"fmt"

	"github.com/jitprof/jitprof/internal/cfi"
	"github.com/jitprof/jitprof/internal/elfsym"
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
// same code, the file's .eh_frame wins. root maps each path (the file's and
// the debug files') to where it is read from, such as an archive's
// directory; nil reads them where they are.
//
// buildID, when not empty, must match the file's build-id. Addresses are
// the file's virtual addresses: Table.AddrOf maps file offsets to them.
// CFI entries that cannot be used are skipped and reported by Table.Err;
// OpenELF fails only when the file cannot be read or holds no usable CFI.
func OpenELF(path string, buildID []byte, root func(string) string) (*Table, error) {
	if root == nil {
		root = func(p string) string { return p }
	}
	f, err := elf.Open(root(path))
	if err != nil {
		return nil, fmt.Errorf("unwind: %v", err)
	}
	defer f.Close()
	return fromELF(f, path, buildID, root)
}

// FromELFImage builds the table of an ELF image in memory, such as the
// vDSO's, named name in errors. It has no separate debug file.
func FromELFImage(img []byte, name string) (*Table, error) {
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return nil, fmt.Errorf("unwind: %s: %v", name, err)
	}
	return fromELF(f, name, nil, nil)
}

// fromELF builds the table of f, recorded at path; root, when not nil,
// finds its separate debug files.
func fromELF(f *elf.File, path string, buildID []byte, root func(string) string) (*Table, error) {
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
	id := elfsym.BuildID(f)
	if len(buildID) > 0 && id != nil && !bytes.Equal(id, buildID) {
		return nil, fmt.Errorf("unwind: %s: build-id %x, not the recorded %x", path, id, buildID)
	}

	t := &Table{}
	m := &cfi.Machine{Arch: arch}
	var fdes []fde
	add := func(f *elf.File, file, name string, prio int) {
		s := f.Section(name)
		if s == nil || s.Type != elf.SHT_PROGBITS {
			return // NOBITS in debug files: the data is in the runtime file
		}
		data, err := s.Data()
		if err != nil {
			t.problem(fmt.Errorf("unwind: %s: %s: %v", file, name, err))
			return
		}
		sec := &cfi.Section{File: file, Name: name, Data: data, Addr: s.Addr, EH: name == ".eh_frame", Order: f.ByteOrder}
		fdes = parseSection(sec, m, fdes, prio, t.problem)
	}
	add(f, path, ".eh_frame", prioEHFrame)
	add(f, path, ".debug_frame", prioDebugFrame)
	if root != nil { // an image in memory has no debug file
		for _, name := range elfsym.DebugFiles(path, f) {
			df, err := elf.Open(root(name))
			if err != nil {
				continue
			}
			if did := elfsym.BuildID(df); id == nil || bytes.Equal(did, id) {
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
