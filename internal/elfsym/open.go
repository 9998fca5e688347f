package elfsym

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jitprof/jitprof/internal/mapfile"
)

// Open reads the symbols of the ELF file at path, from a separate debug
// file where perf would take them from one (see the package comment).
func Open(path string) (*Table, error) {
	runtime, closeRuntime, err := openELF(path)
	if err != nil {
		return nil, err
	}
	defer closeRuntime()

	// dso__load goes through the candidates in order and takes the first
	// with a .symtab for the symbols and the first with a .dynsym for
	// the runtime file; the file itself comes after the debug files.
	syms := runtime
	for _, name := range debugFiles(runtime) {
		f, closeF, err := openELF(name)
		if err != nil {
			continue
		}
		// perf rejects a debug file of another build.
		if f.symtab != nil && (runtime.buildID == nil || bytes.Equal(f.buildID, runtime.buildID)) {
			syms = f
			defer closeF()
			break
		}
		closeF()
	}
	if runtime.dynsym == nil && syms != runtime {
		// Without a .dynsym the file is not a runtime candidate: perf
		// then uses the symbol file for both.
		runtime = syms
	}
	return load(syms, runtime)
}

// openELF opens path as an ELF file, returning a function that closes it.
// The file is mapped: its symbol tables, tens of megabytes in large
// programs, are then read in place rather than copied to the heap.
func openELF(path string) (*elfFile, func(), error) {
	if fi, err := os.Stat(path); err != nil {
		return nil, nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("elfsym: %s: not a regular file", path)
	}
	m, err := mapfile.Open(path)
	if err != nil {
		return nil, nil, err
	}
	ef, err := newELF(bytes.NewReader(m.Data), path)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	ef.mapped = m.Data
	return ef, func() { m.Close() }, nil
}

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
	data, err := f.sectionData(s)
	if err != nil {
		return ""
	}
	link, _ := stringAt(data, 0)
	return string(link)
}
