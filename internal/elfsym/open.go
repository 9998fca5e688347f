package elfsym

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"path/filepath"

	"github.com/jitprof/jitprof/internal/foreign"
)

// Open reads the symbols of the ELF file at path, from a separate debug
// file where perf would take them from one (see the package comment). The
// Table keeps that file open for its names until Close.
func Open(path string) (*Table, error) {
	runtime, err := openELF(path)
	if err != nil {
		return nil, err
	}
	defer runtime.close()

	// dso__load goes through the candidates in order and takes the first
	// with a .symtab for the symbols and the first with a .dynsym for
	// the runtime file; the file itself comes after the debug files.
	syms := runtime
	for _, name := range debugFiles(runtime) {
		f, err := openELF(name)
		if err != nil {
			continue
		}
		// perf rejects a debug file of another build.
		if f.symtab != nil && (runtime.buildID == nil || bytes.Equal(f.buildID, runtime.buildID)) {
			syms = f
			defer f.close()
			break
		}
		f.close()
	}
	if runtime.dynsym == nil && syms != runtime {
		// Without a .dynsym the file is not a runtime candidate: perf
		// then uses the symbol file for both.
		runtime = syms
	}
	t, err := load(syms, runtime)
	if err != nil {
		return nil, err
	}
	t.names.closer, syms.file = syms.file, nil // the Table's now
	return t, nil
}

// openELF opens path as an ELF file. The path is the recording's, of a
// file any user may have replaced since: a FIFO there must not block the
// open, nor a device be read (foreign.Open).
func openELF(path string) (*elfFile, error) {
	f, err := foreign.Open(path, foreign.Rules{})
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	var ef *elfFile
	if err == nil {
		ef, err = newELF(f, path, fi.Size())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	ef.file = f
	return ef, nil
}

// close closes the file, unless a Table took it over.
func (f *elfFile) close() {
	if f.file != nil {
		f.file.Close()
	}
}

// DebugFiles lists where perf looks for a separate debug file of the ELF
// file f, whose path was path, in perf's order; other packages (unwind, for
// .debug_frame) look where elfsym does.
func DebugFiles(path string, f *elf.File) []string {
	return debugFiles(&elfFile{File: f, path: path, buildID: readBuildID(f)})
}

// BuildID returns the GNU build-id of f, or nil.
func BuildID(f *elf.File) []byte { return readBuildID(f) }

// debugFiles lists where perf looks for a debug file of f, in its order
// (binary_type_symtab in symbol.c, file names from
// dso__read_binary_type_filename).
func debugFiles(f *elfFile) []string {
	dir := filepath.Dir(f.path)
	var names []string
	if link := debugLink(f); link != "" {
		names = append(names,
			filepath.Join(dir, link),
			filepath.Join(dir, ".debug", link),
			filepath.Join("/usr/lib/debug", dir, link))
	}
	names = append(names,
		"/usr/lib/debug"+f.path+".debug",
		"/usr/lib/debug"+f.path)
	if len(f.buildID) > 0 {
		id := hex.EncodeToString(f.buildID)
		names = append(names, "/usr/lib/debug/.build-id/"+id[:2]+"/"+id[2:]+".debug")
	}
	return names
}

// debugLink returns the file name in the .gnu_debuglink section.
func debugLink(f *elfFile) string {
	s := f.Section(".gnu_debuglink")
	if s == nil {
		return ""
	}
	data, err := s.Data()
	if err != nil {
		return ""
	}
	link, _, _ := bytes.Cut(data, []byte{0})
	return string(link)
}
