package objtool

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/driver"

	"github.com/jitprof/jitprof/internal/disasm"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
)

// fuzzSpan bounds the addresses a fuzzed disassembly asks for, so that
// each run is quick: what a file holds bounds the work anyway.
const fuzzSpan = 1 << 12

// x86Code is a function's code: push %rbp; mov %rsp,%rbp; call .+0;
// mov $42,%eax; pop %rbp; ret.
var x86Code = []byte{0x55, 0x48, 0x89, 0xe5, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0x5d, 0xc3}

// fuzzFile is a file a fuzz test's runs write their input to.
type fuzzFile struct {
	path string
	f    *os.File
}

func newFuzzFile(f *testing.F, name string) *fuzzFile {
	path := filepath.Join(f.TempDir(), name)
	file, err := os.Create(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { file.Close() })
	return &fuzzFile{path, file}
}

// write makes b the file's bytes, overwritten in place: a file truncated
// to nothing and written again is flushed to disk when closed (ext4's
// auto_da_alloc), a hundred times slower.
func (ff *fuzzFile) write(t *testing.T, b []byte) {
	if _, err := ff.f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if err := ff.f.Truncate(int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// checkInsts checks that insts start in [start, end], in increasing order.
func checkInsts(t *testing.T, insts []driver.Inst, start, end uint64) {
	t.Helper()
	for i, in := range insts {
		if in.Addr < start || in.Addr > end || i > 0 && in.Addr <= insts[i-1].Addr {
			t.Fatalf("instruction %d of %d at %#x, asked for [%#x, %#x]", i, len(insts), in.Addr, start, end)
		}
	}
}

// FuzzELFCode: an ELF file of any bytes (any user can write one and run
// it) gives code, instructions and symbols or an error naming it, never a
// panic: the code no longer than the file, the instructions where they were
// asked for.
func FuzzELFCode(f *testing.F) {
	for _, o := range []jitelf.Options{{}, {Machine: elf.EM_386, Class: elf.ELFCLASS32, ByteOrder: binary.LittleEndian},
		{Machine: elf.EM_AARCH64, Class: elf.ELFCLASS64, ByteOrder: binary.LittleEndian}} {
		img, lay, err := jitelf.Append(nil, o, []jitelf.Function{{Name: "f", Code: x86Code}, {Name: "_ZN1g1hEv", Code: x86Code}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(img, lay.Offsets[0], lay.Offsets[1]+4, uint64(0x400000), false)
		f.Add(img, lay.Offsets[1]+1, lay.Offsets[1]+1, uint64(0), true)
	}
	file := newFuzzFile(f, "lib.so")
	path := file.path
	f.Fuzz(func(t *testing.T, image []byte, start, end, mapped uint64, intel bool) {
		file.write(t, image)
		ef, err := openELF(foreign.Plain(path))
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error names no file: %v", err)
			}
			return
		}
		defer ef.close()
		end = start + min(end-start, fuzzSpan)
		if code, err := ef.code(start, end); err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error names no file: %v", err)
			}
		} else if len(code) == 0 || len(code) > len(image) || uint64(len(code)) > end-start {
			t.Fatalf("code [%#x, %#x): %d bytes of a %d-byte file", start, end, len(code), len(image))
		}
		syntax := disasm.GNU
		if intel {
			syntax = disasm.Intel
		}
		// The instructions decoded from the function's start: bounded
		// by what the file holds.
		insts, err := ef.disasm(start, end, syntax)
		if err == nil {
			checkInsts(t, insts, start, end)
			if len(insts) > len(image) {
				t.Fatalf("%d instructions from a %d-byte file", len(insts), len(image))
			}
		}
		m, err := ef.mapped(mapped, mapped+fuzzSpan, start)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("the error names no file: %v", err)
			}
			return
		}
		syms, _ := m.Symbols(nil, end)
		for _, s := range syms {
			if s.End < s.Start || len(s.Name) == 0 || s.File != path {
				t.Fatalf("symbol %q of %s at [%#x, %#x]", s.Name, s.File, s.Start, s.End)
			}
		}
	})
}

// FuzzJITDisasm: a dump of any bytes gives the instructions, lines and
// symbols of its code, or an error, never a panic: the instructions where
// they were asked for, each function's source lines its own.
func FuzzJITDisasm(f *testing.F) {
	seed := filepath.Join(f.TempDir(), "seed.dump")
	out, err := os.Create(seed)
	if err != nil {
		f.Fatal(err)
	}
	w, err := jitdump.NewWriter(out, jitdump.Header{})
	if err != nil {
		f.Fatal(err)
	}
	a, _ := w.Load(&jitdump.Function{Name: "JS:*a /app/a.js:3:14", Addr: 0x1000, Code: x86Code,
		Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 7, File: "a.src"}, {Addr: 0x1009, Line: 8, File: "a.src"}}})
	in := &jitdump.InlineInfo{CodeIndex: a, CodeAddr: 0x1004, CodeSize: 5, MethodID: 2, ParentID: 1, RootID: 1, Name: "inl", File: "b.src",
		Lines: []jitdump.InlineLine{{Addr: 0x1004, Line: 20}}}
	in.Timestamp = jitdump.Now()
	w.WriteRecord(in)
	w.Move(a, 0x1000, 0x3000, uint64(len(x86Code)))
	w.Load(&jitdump.Function{Name: "b", Addr: 0x1000, Code: x86Code[:9]}) // a's old place
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint64(0x1000), uint64(0x3010), false)
	f.Add(data, uint64(0x3004), uint64(0x3004), true)
	f.Add(data[:len(data)-3], uint64(0x1000), uint64(0x1008), false)

	file := newFuzzFile(f, "jit-1.dump")
	path := file.path
	f.Fuzz(func(t *testing.T, data []byte, start, end uint64, intel bool) {
		file.write(t, data)
		d, err := dumpindex.Read(path)
		if err != nil {
			return
		}
		defer d.Close()
		jf := newJITFile(path, d)
		end = start + min(end-start, fuzzSpan)
		syntax := disasm.GNU
		if intel {
			syntax = disasm.Intel
		}
		insts, err := jf.disasm(start, end, syntax)
		if err == nil {
			checkInsts(t, insts, start, end)
			if len(insts) > len(data) {
				t.Fatalf("%d instructions from a %d-byte dump", len(insts), len(data))
			}
		}
		if frames, err := jf.SourceLine(start); err == nil && len(frames) == 0 {
			t.Fatalf("no frames at %#x", start)
		}
		syms, _ := jf.Symbols(nil, start)
		for _, s := range syms {
			if s.End < s.Start || s.Start > start || start > s.End {
				t.Fatalf("symbol %q at [%#x, %#x] asked for %#x", s.Name, s.Start, s.End, start)
			}
		}
	})
}
