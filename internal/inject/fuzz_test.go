package inject_test

import (
	"debug/elf"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/inject"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
)

// The fuzzed recording's process lies beyond pid_max, so no live process's
// files answer for it; its marker names a directory that is nowhere, so
// the dump is found beside the recording, by its name.
const (
	fuzzPid    = 1<<22 + 99
	fuzzMarker = "/nonexistent-jitprof-fuzz/jit-4194403.dump" // fuzzPid's
	fuzzCode   = 0x7f00_0000_0000
)

// fuzzSeed is a recording of one process whose dump loads two functions,
// moves one and describes their lines and unwinding, and samples in them.
func fuzzSeed(tb testing.TB) (data, dump []byte) {
	dir := tb.TempDir()
	rec := synth.NewRecording()
	rec.Comm(fuzzPid, fuzzPid, "vm")
	rec.Marker(fuzzPid, fuzzMarker)
	rec.Map(fuzzPid, fuzzCode, 0x1000, "//anon")
	fi := jitdump.FrameInfo{CodeAlign: 1, DataAlign: -8, ReturnAddress: 16,
		Initial:      jitdump.CFAProgram{}.DefCFA(7, 8).Offset(16, 1),
		Instructions: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16)}
	u, err := fi.UnwindingInfo(32)
	if err != nil {
		tb.Fatal(err)
	}
	dumpPath := filepath.Join(dir, "jit.dump")
	err = synth.WriteDump(dumpPath, fuzzPid, func(w *jitdump.Writer) error {
		a, err := w.Load(&jitdump.Function{Name: "a", Addr: fuzzCode, Code: make([]byte, 32),
			Lines: []jitdump.DebugEntry{{Addr: fuzzCode, Line: 1, File: "a.src"}, {Addr: fuzzCode + 8, Line: 2, File: "a.src"}}, Unwind: u})
		if err != nil {
			return err
		}
		if _, err := w.Load(&jitdump.Function{Name: "b", Addr: fuzzCode + 0x40, Code: make([]byte, 16)}); err != nil {
			return err
		}
		return w.Move(a, fuzzCode, fuzzCode+0x80, 32)
	})
	if err != nil {
		tb.Fatal(err)
	}
	rec.Now = jitdump.Now() + 1e6
	rec.Sample(fuzzPid, fuzzCode+0x84, fuzzCode+0x44)
	rec.Sample(fuzzPid, fuzzCode+0x48)
	path := filepath.Join(dir, "perf.data")
	if err := rec.Write(path); err != nil {
		tb.Fatal(err)
	}
	if data, err = os.ReadFile(path); err != nil {
		tb.Fatal(err)
	}
	if dump, err = os.ReadFile(dumpPath); err != nil {
		tb.Fatal(err)
	}
	return data, dump
}

// samples counts the SAMPLE records of the recording at path and the
// MMAP2 records that map a file of dir, reading it to its end.
func samples(path, dir string) (n, mapped int, err error) {
	f, err := perfdata.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	for {
		raw, err := f.NextRaw()
		if err == io.EOF {
			return n, mapped, nil
		}
		if err != nil {
			return n, mapped, err
		}
		switch raw.Type() {
		case perfdata.TypeSample:
			n++
		case perfdata.TypeMmap2:
			if m, ok := f.Decode(raw).(*perfdata.Mmap2); ok && filepath.Dir(m.Filename) == dir {
				mapped++
			}
		}
	}
}

// FuzzRun: a recording and a dump of any bytes are injected, or refused
// with an error that names a file, never a panic; an output is a recording
// that reads to its end, holds every sample of the input, and maps the
// images written, each an ELF file, once for each event the result counts.
func FuzzRun(f *testing.F) {
	dir := f.TempDir()
	input, output, images := filepath.Join(dir, "perf.data"), filepath.Join(dir, "out.data"), filepath.Join(dir, "images")
	files := map[string]*os.File{}
	for _, path := range []string{input, filepath.Join(dir, filepath.Base(fuzzMarker))} {
		file, err := os.Create(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { file.Close() })
		files[path] = file
	}
	proc := procfs.FS(filepath.Join(dir, "proc")) // no process runs there
	data, dump := fuzzSeed(f)
	f.Add(data, dump)
	f.Add(data, dump[:len(dump)-5])
	f.Add(data[:len(data)-9], dump)
	f.Fuzz(func(t *testing.T, data, dump []byte) {
		// The files overwritten in place: one truncated to nothing and
		// written again is flushed to disk when closed (ext4's
		// auto_da_alloc), a hundred times slower.
		for path, b := range map[string][]byte{input: data, filepath.Join(dir, filepath.Base(fuzzMarker)): dump} {
			if _, err := files[path].WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			if err := files[path].Truncate(int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		// The images of the run before, named by their dump's pid.
		old, _ := os.ReadDir(images)
		for _, e := range old {
			os.Remove(filepath.Join(images, e.Name()))
		}
		res, err := inject.Run(inject.Options{Input: input, Output: output, ImageDir: images, Pack: true,
			Host: jitsources.Host{Proc: proc}, Warn: func(error) {}})
		if err != nil {
			if !strings.Contains(err.Error(), dir) {
				t.Fatalf("the error names no file: %v", err)
			}
			return
		}
		in, _, err := samples(input, images)
		if err != nil {
			t.Fatalf("injected a recording that does not read: %v", err)
		}
		out, mapped, err := samples(output, images)
		if err != nil || out != in || mapped != res.Events {
			t.Fatalf("the output reads %d samples (%v) and %d mappings of the images; the input %d samples, and %d events were injected",
				out, err, mapped, in, res.Events)
		}
		written, _ := os.ReadDir(images)
		if len(written) != res.Images || res.Images > res.Dumps || res.Functions > len(dump)/jitdump.RecordHeaderSize {
			t.Fatalf("%d images written, %v, of %d dumps and %d functions in a %d-byte dump", len(written), res.Images, res.Dumps, res.Functions, len(dump))
		}
		for _, e := range written {
			ef, err := elf.Open(filepath.Join(images, e.Name()))
			if err != nil {
				t.Fatalf("image %s: %v", e.Name(), err)
			}
			ef.Close()
		}
	})
}
