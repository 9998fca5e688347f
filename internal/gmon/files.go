package gmon

import (
	"io"
	"path/filepath"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/atomicfile"
)

// WriteFiles writes profiles, one per stage, into dir for gprof: a
// histogram file per stage (gmon.out, or gmon.out.NAME for stage NAME) and
// the symbol file they share, an ELF file or, with kaffe, Kaffe's
// assembler file (with Kaffe's file names, xgmon.out and
// kaffe-jit-symbols.s). Each file is written whole or not at all. It
// returns the paths written.
func WriteFiles(dir string, kaffe bool, names []string, ps []*profile.Profile) ([]string, error) {
	prog, profiles, err := FromProfiles(ps...)
	if err != nil {
		return nil, err
	}
	machine, order, err := HostMachine()
	if err != nil {
		return nil, err
	}
	layout := prog.Layout(profiles...)
	histName, symName := "gmon.out", "jitprof-symbols"
	writeSyms := func(w io.Writer) error { return prog.WriteELF(w, machine, order, layout) }
	if kaffe {
		histName, symName = "xgmon.out", "kaffe-jit-symbols.s"
		writeSyms = func(w io.Writer) error { return prog.WriteAssembler(w, layout) }
	}
	var written []string
	path := filepath.Join(dir, symName)
	if err := atomicfile.Write(path, writeSyms); err != nil {
		return nil, err
	}
	written = append(written, path)
	for i, prof := range profiles {
		path := filepath.Join(dir, histName)
		if names[i] != "" {
			path += "." + names[i]
		}
		if err := atomicfile.Write(path, func(w io.Writer) error { return WriteGmon(w, order, layout, prof) }); err != nil {
			return nil, err
		}
		written = append(written, path)
	}
	return written, nil
}
