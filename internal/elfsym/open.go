package elfsym

import (
	"bytes"
	"encoding/hex"
	"path/filepath"

	"github.com/jitprof/jitprof/internal/foreign"
)

// Open reads the symbols of the ELF file at path, from a separate debug
// file where perf would take them from one (see the package comment). The
// Table keeps that file open for its names until Close.
func Open(path string) (*Table, error) { return OpenRecorded(foreign.Plain(path), Recorded{}) }

// OpenRecorded is Open for the file a recording saw at p: one that is not
// (File.Is) is refused with an error wrapping ErrOtherFile. Its debug files
// are looked for under p's rules too: in a container, the container's.
func OpenRecorded(p foreign.Path, want Recorded) (*Table, error) {
	rf, err := OpenFile(p)
	if err != nil {
		return nil, err
	}
	runtime := newELF(rf)
	defer runtime.Close()
	if err := rf.Is(want); err != nil {
		return nil, err
	}

	// dso__load goes through the candidates in order and takes the first
	// with a .symtab for the symbols and the first with a .dynsym for
	// the runtime file; the file itself comes after the debug files.
	syms := runtime
	for _, name := range debugFiles(runtime.name, runtime.File, runtime.buildID) {
		df, err := OpenFile(foreign.Path{Name: name, Rules: p.Rules})
		if err != nil {
			continue
		}
		f := newELF(df)
		// perf rejects a debug file of another build.
		if f.symtab != nil && (runtime.buildID == nil || bytes.Equal(f.buildID, runtime.buildID)) {
			syms = f
			defer f.Close()
			break
		}
		f.Close()
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

// DebugFiles lists where perf looks for a separate debug file of the ELF
// file f, whose path was path, in perf's order; other packages (unwind, for
// .debug_frame) look where elfsym does.
func DebugFiles(path string, f *File) []string { return debugFiles(path, f, f.BuildID()) }

// debugFiles lists where perf looks for a debug file of f, in its order
// (binary_type_symtab in symbol.c, file names from
// dso__read_binary_type_filename).
func debugFiles(path string, f *File, buildID []byte) []string {
	dir := filepath.Dir(path)
	var names []string
	if link := f.debugLinkName(); link != "" {
		names = append(names,
			filepath.Join(dir, link),
			filepath.Join(dir, ".debug", link),
			filepath.Join("/usr/lib/debug", dir, link))
	}
	names = append(names,
		"/usr/lib/debug"+path+".debug",
		"/usr/lib/debug"+path)
	if len(buildID) > 0 {
		id := hex.EncodeToString(buildID)
		names = append(names, "/usr/lib/debug/.build-id/"+id[:2]+"/"+id[2:]+".debug")
	}
	return names
}
