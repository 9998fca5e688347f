package archive

import (
	"archive/tar"
	"compress/gzip"
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// writeTar writes a gzip-compressed tar of the given names and contents.
func writeTar(t *testing.T, files [][2]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, file := range files {
		if err := addBytes(tw, file[0], []byte(file[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Extract unpacks what a jitprof archive holds and refuses anything else,
// leaving nothing behind when it does.
func TestExtract(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files [][2]string
		err   string // "" for success
	}{
		{"whole", [][2]string{{"perf.data", "P"}, {"jit-1.dump", "D"}, {"files/usr/bin/node", "E"}, {"kallsyms", "K"}, {"vdso.so", "V"}}, ""},
		{"outside its directory", [][2]string{{"perf.data", "P"}, {"../escape", "x"}}, "not a file of a jitprof archive"},
		{"absolute", [][2]string{{"/etc/passwd", "x"}}, "not a file of a jitprof archive"},
		{"twice", [][2]string{{"perf.data", "P"}, {"perf.data", "Q"}}, "exists"},
		{"no recording", [][2]string{{"jit-1.dump", "D"}}, "no perf.data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar := writeTar(t, tc.files)
			if !Is(ar) {
				t.Fatal("Is says it is not an archive")
			}
			tmp := t.TempDir()
			x, err := Extract(ar, tmp)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), ar) {
					t.Errorf("error %v, want one naming %s and saying %q", err, ar, tc.err)
				}
				if left, _ := os.ReadDir(tmp); len(left) > 0 {
					t.Errorf("left behind: %v", left)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range tc.files {
				if b, err := os.ReadFile(filepath.Join(x.Dir, file[0])); err != nil || string(b) != file[1] {
					t.Errorf("%s: %q, %v", file[0], b, err)
				}
			}
			if x.Files.Kallsyms == "" || x.Files.VDSO == "" || x.Files.Path("/usr/bin/node") != filepath.Join(x.Dir, "files/usr/bin/node") || x.Files.Path("/usr/bin/perl") != "/usr/bin/perl" {
				t.Errorf("copies: %+v", x.Files)
			}
			if err := x.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(x.Dir); !os.IsNotExist(err) {
				t.Errorf("Close left %s", x.Dir)
			}
		})
	}
	if Is(filepath.Join(t.TempDir(), "none")) {
		t.Error("a missing file is an archive")
	}
}

// Write packs a file mapped in several pieces once, with no warning, and
// what it packs unpacks into a recording that reads as the original.
func TestWriteFileMappedTwice(t *testing.T) {
	self := fixtures.BuildTestJIT(t) // an ELF file with a symbol table, to map
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod,
		Flags:      perfdata.AttrMmap2 | perfdata.AttrSampleIDAll | perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC, IDs: []uint64{1}}
	data := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		t.Fatal(err)
	}
	const pid = 1 << 23
	var recs []perfdata.Record
	for i, off := range twoFunctions(t, self) {
		addr, page := uint64(0x400000*(i+1)), off&^0xfff
		recs = append(recs,
			&perfdata.Mmap2{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Attr: attr, Misc: perfdata.MiscUser},
				Pid: pid, Tid: pid, Addr: addr, Len: 0x1000, Pgoff: page, Prot: unix.PROT_READ | unix.PROT_EXEC,
				Filename: self, Trailer: perfdata.Trailer{Pid: pid, Tid: pid, Time: 1}},
			&perfdata.Sample{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeSample, Attr: attr, Misc: perfdata.MiscUser},
				IP: addr + off - page, Pid: pid, Tid: pid, Time: 2, Period: 1})
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var warns []error
	out := filepath.Join(t.TempDir(), "a.tar.gz")
	names, err := Write(out, data, symbolize.Options{Warn: func(err error) { warns = append(warns, err) }})
	if err != nil {
		t.Fatal(err)
	}
	copyName := filepath.Join(filesDir, self)
	if !slices.Equal(names, []string{recordingName, copyName}) || len(warns) > 0 {
		t.Errorf("packed %q, warnings %v; want %q once and no warning", names, warns, copyName)
	}
	x, err := Extract(out, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if got := x.Files.Path(self); got != filepath.Join(x.Dir, copyName) {
		t.Errorf("the copy of %s is read from %s", self, got)
	}
}

// twoFunctions returns the file offsets of two functions of the ELF file at
// path that lie in different pages, so that mapping each page on its own
// gives a profile two mappings of the file, each with a named function.
func twoFunctions(t *testing.T, path string) [2]uint64 {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var text *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			text = p
		}
	}
	var offs []uint64
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || text == nil || s.Value < text.Vaddr || s.Value >= text.Vaddr+text.Filesz {
			continue
		}
		off := s.Value - text.Vaddr + text.Off
		if len(offs) == 0 || off&^0xfff != offs[0]&^0xfff {
			offs = append(offs, off)
		}
		if len(offs) == 2 {
			return [2]uint64{offs[0], offs[1]}
		}
	}
	t.Fatalf("%s has no two functions in different pages", path)
	return [2]uint64{}
}
