package archive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// member is a crafted archive member: its header, and its bytes, which may
// be fewer than the header says (an archive cut short after a header that
// must be refused).
type member struct {
	hdr  tar.Header
	body io.Reader
}

// file is a plain member holding text.
func file(name, text string) member {
	return member{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(text))}, strings.NewReader(text)}
}

// filled is a plain member of size bytes from r.
func filled(name string, size int64, r io.Reader) member {
	return member{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: size}, io.LimitReader(r, size)}
}

// zeros reads as endless zeros: what compresses best.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// random reads as incompressible bytes.
type random struct{ r *rand.ChaCha8 }

func (r random) Read(b []byte) (int, error) { return r.r.Read(b) }

func newRandom() random { return random{rand.NewChaCha8([32]byte{1})} }

// writeTar writes a gzip-compressed tar of members, stopping after a member
// whose body is shorter than its header says.
func writeTar(t *testing.T, members []member) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.tar.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	gz, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	complete := true
	for _, m := range members {
		if err := tw.WriteHeader(&m.hdr); err != nil {
			t.Fatal(err)
		}
		if m.body == nil {
			continue
		}
		n, err := io.Copy(tw, m.body)
		if err != nil {
			t.Fatal(err)
		}
		if n < m.hdr.Size {
			complete = false
			break
		}
	}
	if complete {
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Extract unpacks what a jitprof archive holds, private to root, and
// refuses anything else, and any archive that unpacks to more than its
// bounds, with an error naming the archive and the member, leaving nothing
// behind.
func TestExtract(t *testing.T) {
	small := limits{member: 1 << 20, total: 4 << 20, ratio: 100, floor: 256 << 10}
	noRatio := limits{member: 1 << 20, total: 2 << 20, ratio: 1 << 20, floor: 1 << 30}
	link := func(name string, typ byte, to string) member {
		return member{hdr: tar.Header{Name: name, Typeflag: typ, Linkname: to, Mode: 0o600}}
	}
	many := func(n int, size int64, r io.Reader) []member {
		ms := []member{file("perf.data", "P")}
		for i := range n {
			ms = append(ms, filled(fmt.Sprintf("files/bomb%d", i), size, r))
		}
		return ms
	}
	for _, tc := range []struct {
		name    string
		members []member
		lim     limits
		err     string // "" for success
	}{
		{"whole", []member{file("perf.data", "P"), file("jit-1.dump", "D"), file("files/usr/bin/node", "E"), file("kallsyms", "K"), file("vdso.so", "V")}, archiveLimits, ""},
		{"outside its directory", []member{file("perf.data", "P"), file("../escape", "x")}, archiveLimits, `"../escape" is not a file`},
		{"absolute", []member{file("/etc/passwd", "x")}, archiveLimits, `"/etc/passwd" is not a file`},
		{"twice", []member{file("perf.data", "P"), file("perf.data", "Q")}, archiveLimits, "exists"},
		{"twice, by another name", []member{file("perf.data", "P"), file("files/a", "Q"), file("files/./a", "R")}, archiveLimits, "exists"},
		{"no recording", []member{file("jit-1.dump", "D")}, archiveLimits, "no perf.data"},
		{"symbolic link", []member{file("perf.data", "P"), link("files/x", tar.TypeSymlink, "/etc/shadow")}, archiveLimits, `"files/x" is not a file`},
		{"hard link", []member{file("perf.data", "P"), link("files/x", tar.TypeLink, "perf.data")}, archiveLimits, `"files/x" is not a file`},
		{"FIFO", []member{file("perf.data", "P"), {hdr: tar.Header{Name: "perf-1.map", Typeflag: tar.TypeFifo, Mode: 0o600}}}, archiveLimits, `"perf-1.map" is not a file`},
		{"device", []member{file("perf.data", "P"), {hdr: tar.Header{Name: "kallsyms", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 5, Mode: 0o600}}}, archiveLimits, `"kallsyms" is not a file`},
		{"directory", []member{file("perf.data", "P"), {hdr: tar.Header{Name: "files", Typeflag: tar.TypeDir, Mode: 0o777}}}, archiveLimits, `"files" is not a file`},
		// 2 GiB of zeros would gzip to 2 MiB; the header alone must
		// stop it, so the archive needs no more than its first bytes.
		{"bomb by ratio, one member", []member{file("perf.data", "P"), filled("files/usr/lib/libbomb.so", 2<<30, io.LimitReader(zeros{}, 64<<10))}, archiveLimits,
			"files/usr/lib/libbomb.so: unpacking it would pass"},
		{"bomb by ratio, many members", many(40, 200<<10, zeros{}), small, "files/bomb"},
		{"bomb by member", []member{file("perf.data", "P"), filled("files/big", 2<<20, newRandom())}, noRatio, "files/big: 2097152 bytes, more than a member may hold (1048576)"},
		{"bomb by total", many(6, 600<<10, newRandom()), noRatio, "files/bomb3: unpacking it would pass 2097152 bytes"},
		{"within every bound", many(3, 200<<10, newRandom()), small, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ar := writeTar(t, tc.members)
			if !Is(ar) {
				t.Fatal("Is says it is not an archive")
			}
			tmp := t.TempDir()
			x, err := extract(t.Context(), ar, tmp, tc.lim)
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
			defer x.Close()
			if fi, err := os.Stat(x.Dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v, %v; want mode 0700", x.Dir, fi.Mode(), err)
			}
			for _, m := range tc.members {
				fi, err := os.Lstat(filepath.Join(x.Dir, m.hdr.Name))
				if err != nil || fi.Size() != m.hdr.Size || fi.Mode() != 0o600 {
					t.Errorf("%s: %v, %v; want %d bytes, mode 0600", m.hdr.Name, fi, err, m.hdr.Size)
				}
			}
			if tc.name != "whole" {
				return
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
}

// Extract is not fooled into blocking or reading what is not an archive
// file, and stops, leaving nothing, once its context is done.
func TestExtractInput(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { done <- Is(fifo) }()
	select {
	case is := <-done:
		if is {
			t.Error("Is says a FIFO is an archive")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Is blocks on a FIFO")
	}
	if Is(filepath.Join(dir, "none")) {
		t.Error("a missing file is an archive")
	}
	if _, err := Extract(t.Context(), fifo, dir); !errors.Is(err, foreign.ErrNotRegular) {
		t.Errorf("Extract of a FIFO: %v", err)
	}

	ar := writeTar(t, []member{file("perf.data", "P"), filled("files/a", 1<<20, newRandom())})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tmp := t.TempDir()
	if _, err := Extract(ctx, ar, tmp); !errors.Is(err, context.Canceled) {
		t.Errorf("Extract once cancelled: %v, want %v", err, context.Canceled)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// recording is a synthetic perf.data whose samples hit an ELF file and,
// through a perf map, jitted code.
type recording struct {
	elf     string // the ELF file's path
	buildID []byte // when set, the MMAP2 record gives it instead of device and inode
	perfMap bool   // a sample in an anonymous mapping of pid, which a perf map names
}

const pid = 1 << 23 // a pid no process on the machine has

// write writes the recording to a fresh directory and returns its path.
func (rec recording) write(t *testing.T) string {
	t.Helper()
	attr := &perfdata.Attr{Type: 1, SamplePeriod: 1,
		SampleType: perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime | perfdata.SamplePeriod,
		Flags:      perfdata.AttrMmap2 | perfdata.AttrSampleIDAll | perfdata.AttrUseClockID, ClockID: unix.CLOCK_MONOTONIC, IDs: []uint64{1}}
	data := filepath.Join(t.TempDir(), "perf.data")
	w, err := perfdata.Create(data, perfdata.Options{Attrs: []*perfdata.Attr{attr}})
	if err != nil {
		t.Fatal(err)
	}
	header := func(typ perfdata.RecordType) perfdata.RecordHeader {
		return perfdata.RecordHeader{Type: typ, Attr: attr, Misc: perfdata.MiscUser}
	}
	trailer := perfdata.Trailer{Pid: pid, Tid: pid, Time: 1}
	var recs []perfdata.Record
	if rec.elf != "" {
		m := &perfdata.Mmap2{RecordHeader: header(perfdata.TypeMmap2), Pid: pid, Tid: pid, Addr: 0x400000, Len: 0x1000,
			Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: rec.elf, Trailer: trailer}
		if rec.buildID != nil {
			m.Misc |= perfdata.MiscMmapBuildID
			m.BuildID = rec.buildID
		} else {
			var st unix.Stat_t
			if err := unix.Stat(rec.elf, &st); err != nil {
				t.Fatal(err)
			}
			m.Maj, m.Min, m.Ino = unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino
		}
		recs = append(recs, m, &perfdata.Sample{RecordHeader: header(perfdata.TypeSample), IP: 0x400010, Pid: pid, Tid: pid, Time: 2, Period: 1})
	}
	if rec.perfMap {
		recs = append(recs,
			&perfdata.Mmap2{RecordHeader: header(perfdata.TypeMmap2), Pid: pid, Tid: pid, Addr: 0x7000000, Len: 0x1000,
				Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: "//anon", Trailer: trailer},
			&perfdata.Sample{RecordHeader: header(perfdata.TypeSample), IP: 0x7000010, Pid: pid, Tid: pid, Time: 2, Period: 1})
	}
	for _, r := range recs {
		if err := w.WriteRecord(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// elfImage returns an ELF file with one function and a build-id of its
// own, made from name.
func elfImage(t *testing.T, name string) ([]byte, []byte) {
	t.Helper()
	img, lay, err := jitelf.Append(nil, jitelf.Options{}, []jitelf.Function{{Name: name, Code: make([]byte, 0x40)}})
	if err != nil {
		t.Fatal(err)
	}
	return img, lay.BuildID[:]
}

// unpacked returns the archive at path decompressed, and its members'
// names.
func unpacked(t *testing.T, path string) ([]byte, []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(gz)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for tr := tar.NewReader(bytes.NewReader(data)); ; {
		h, err := tr.Next()
		if err == io.EOF {
			return data, names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// Write copies the files the recording's samples hit as the recording saw
// them, or not at all: an attacker who owns their directories and swaps a
// file, or a directory on its path, for a symbolic link to a root-only
// file, for a FIFO or for another file between the analysis and the copy
// gets a warning naming the path, never the root-only file's bytes in the
// archive, and never a Write that hangs.
func TestWriteHostileFiles(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	canary := fixtures.NewCanary(t)
	// The ELF file has the canary's name, so that a directory on its
	// path swapped for a link to the canary's directory leads to it.
	elfName := filepath.Base(canary.Path)
	mapName := fmt.Sprintf("perf-%d.map", pid)
	for _, tc := range []struct {
		name    string
		byID    bool   // the recording identifies the ELF file by build-id
		swap    string // shell run as the attacker in its directory after the analysis: $CANARY is the root-only file
		missing string // the member left out, "" for none
		warn    string // what the warning says
	}{
		{name: "unchanged"},
		{name: "unchanged, by build-id", byID: true},
		{name: "ELF file copied over, same build-id", byID: true, swap: "cp lib/$ELF copy && mv copy lib/$ELF"},
		{name: "ELF file a link to a root-only file", swap: "ln -sfn $CANARY lib/$ELF", missing: "files/$DIR/lib/$ELF", warn: "too many levels of symbolic links"},
		{name: "directory a link to a root-only file's", swap: "mv lib old && ln -s $(dirname $CANARY) lib", missing: "files/$DIR/lib/$ELF", warn: "too many levels of symbolic links"},
		{name: "ELF file a FIFO", swap: "rm lib/$ELF && mkfifo lib/$ELF", missing: "files/$DIR/lib/$ELF", warn: "not a regular file"},
		{name: "ELF file replaced", swap: "echo other > new && mv new lib/$ELF", missing: "files/$DIR/lib/$ELF", warn: "not the file the recording saw (device"},
		{name: "ELF file replaced, by build-id", byID: true, swap: "echo other > new && mv new lib/$ELF", missing: "files/$DIR/lib/$ELF", warn: "not the file the recording saw (it recorded build-id"},
		{name: "perf map a link to a root-only file", swap: "ln -sf $CANARY maps/$MAP", missing: "$MAP", warn: "too many levels of symbolic links"},
		{name: "perf map a FIFO", swap: "rm maps/$MAP && mkfifo maps/$MAP", missing: "$MAP", warn: "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := attacker.Dir(t)
			img, id := elfImage(t, "leaf")
			elfPath := filepath.Join(dir, "lib", elfName)
			for path, data := range map[string][]byte{elfPath: img, filepath.Join(dir, "maps", mapName): []byte("7000000 100 jitted\n")} {
				os.Mkdir(filepath.Dir(path), 0o755)
				attacker.Chown(t, filepath.Dir(path))
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				attacker.Chown(t, path)
			}
			rec := recording{elf: elfPath, perfMap: true}
			if tc.byID {
				rec.buildID = id
			}
			data := rec.write(t)
			var warns []string
			opts := symbolize.Options{PerfMapDirs: []string{filepath.Join(dir, "maps")}, Warn: func(err error) { warns = append(warns, err.Error()) }}
			p, err := newPlan(t.Context(), data, opts)
			if err != nil {
				t.Fatal(err)
			}
			expand := strings.NewReplacer("$DIR", strings.TrimPrefix(dir, "/"), "$ELF", elfName, "$MAP", mapName).Replace
			want := []string{recordingName, expand("files/$DIR/lib/$ELF"), mapName}
			if got := entryNames(p); !slices.Equal(got, want) || len(warns) > 0 {
				t.Fatalf("the analysis found %q, warnings %q; want %q and none", got, warns, want)
			}
			if tc.swap != "" {
				swap := attacker.Command("sh", "-c", tc.swap)
				swap.Dir = dir
				swap.Env = append(swap.Env, "CANARY="+canary.Path, "ELF="+elfName, "MAP="+mapName)
				if out, err := swap.CombinedOutput(); err != nil {
					t.Fatalf("%s: %v\n%s", tc.swap, err, out)
				}
			}
			out := filepath.Join(t.TempDir(), "a.tar.gz")
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			names, err := p.write(ctx, out)
			if err != nil {
				t.Fatal(err)
			}
			contents, packed := unpacked(t, out)
			canary.Absent(t, append(contents, strings.Join(warns, "\n")...))
			if tc.missing != "" {
				want = slices.DeleteFunc(want, func(n string) bool { return n == expand(tc.missing) })
			}
			if !slices.Equal(names, want) || !slices.Equal(packed, want) {
				t.Errorf("packed %q (says %q), want %q", packed, names, want)
			}
			switch {
			case tc.warn == "" && len(warns) > 0:
				t.Errorf("warnings: %q", warns)
			case tc.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tc.warn) || !strings.Contains(warns[0], "/"+expand(strings.TrimPrefix(tc.missing, "files/")))):
				t.Errorf("warnings %q, want one naming %s and saying %q", warns, tc.missing, tc.warn)
			}
		})
	}
}

func entryNames(p *plan) []string {
	var names []string
	for _, e := range p.entries {
		names = append(names, e.name)
	}
	return names
}

// The archive holds every process's stack copies and the kernel's
// addresses: it is written 0600, whatever the umask.
func TestWriteMode(t *testing.T) {
	data := recording{perfMap: true}.write(t)
	for _, umask := range []int{0o077, 0o022, 0} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "a.tar.gz") // 0700 whatever the umask, as root must write into
			old := unix.Umask(umask)
			defer unix.Umask(old)
			if _, err := Write(t.Context(), out, data, symbolize.Options{}); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(out); err != nil || fi.Mode() != 0o600 {
				t.Errorf("%s: mode %v, %v; want 0600", out, fi.Mode(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*")); len(left) > 0 {
				t.Errorf("left behind: %q", left)
			}
		})
	}
}

// Write stops once its context is done, leaving no archive and no
// temporary file.
func TestWriteCancelled(t *testing.T) {
	data := recording{perfMap: true}.write(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	dir := t.TempDir()
	if _, err := Write(ctx, filepath.Join(dir, "a.tar.gz"), data, symbolize.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Write once cancelled: %v, want %v", err, context.Canceled)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
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
	var st unix.Stat_t
	if err := unix.Stat(self, &st); err != nil {
		t.Fatal(err)
	}
	var recs []perfdata.Record
	for i, off := range twoFunctions(t, self) {
		addr, page := uint64(0x400000*(i+1)), off&^0xfff
		recs = append(recs,
			&perfdata.Mmap2{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Attr: attr, Misc: perfdata.MiscUser},
				Pid: pid, Tid: pid, Addr: addr, Len: 0x1000, Pgoff: page, Maj: unix.Major(st.Dev), Min: unix.Minor(st.Dev), Ino: st.Ino,
				Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: self, Trailer: perfdata.Trailer{Pid: pid, Tid: pid, Time: 1}},
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
	names, err := Write(t.Context(), out, data, symbolize.Options{Warn: func(err error) { warns = append(warns, err) }})
	if err != nil {
		t.Fatal(err)
	}
	copyName := filepath.Join(filesDir, self)
	if !slices.Equal(names, []string{recordingName, copyName}) || len(warns) > 0 {
		t.Errorf("packed %q, warnings %v; want %q once and no warning", names, warns, copyName)
	}
	x, err := Extract(t.Context(), out, t.TempDir())
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

// Write never waits on a FIFO: not at the recording's path, which it
// refuses, nor at a path the recording names, which it leaves out.
func TestWriteFIFOs(t *testing.T) {
	mapName := fmt.Sprintf("perf-%d.map", pid)
	for _, tc := range []struct {
		fifo    string // relative to the directory of the files
		err     string // Write's, "" for none
		missing string // the member left out
		warned  bool   // by the archive: the analysis does not find a FIFO perf map
	}{
		{fifo: "perf.data", err: "not a regular file"},
		{fifo: "lib.so", missing: "lib.so", warned: true},
		{fifo: mapName, missing: mapName},
	} {
		t.Run(tc.fifo, func(t *testing.T) {
			dir := t.TempDir()
			img, _ := elfImage(t, "leaf")
			lib := filepath.Join(dir, "lib.so")
			for path, data := range map[string][]byte{lib: img, filepath.Join(dir, mapName): []byte("7000000 100 jitted\n")} {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data := recording{elf: lib, perfMap: true}.write(t)
			if err := os.Rename(data, filepath.Join(dir, "perf.data")); err != nil {
				t.Fatal(err)
			}
			data = filepath.Join(dir, "perf.data")
			fifo := filepath.Join(dir, tc.fifo)
			if err := os.Remove(fifo); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			type result struct {
				names []string
				err   error
			}
			done := make(chan result, 1)
			var warns []string
			out := filepath.Join(t.TempDir(), "a.tar.gz")
			go func() {
				names, err := Write(t.Context(), out, data, symbolize.Options{PerfMapDirs: []string{dir}, Warn: func(err error) { warns = append(warns, err.Error()) }})
				done <- result{names, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("Write waits on the FIFO at %s", fifo)
			}
			if tc.err != "" {
				if r.err == nil || !strings.Contains(r.err.Error(), tc.err) || !strings.Contains(r.err.Error(), fifo) {
					t.Errorf("error %v, want one naming %s and saying %q", r.err, fifo, tc.err)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if slices.ContainsFunc(r.names, func(n string) bool { return strings.HasSuffix(n, tc.missing) }) || len(r.names) != 2 {
				t.Errorf("packed %q, want the recording and one of its files, not %s", r.names, tc.missing)
			}
			if tc.warned && !slices.ContainsFunc(warns, func(w string) bool { return strings.Contains(w, fifo) }) {
				t.Errorf("no warning names %s: %q", fifo, warns)
			}
		})
	}
}

// A dump or perf map is opened with no symbolic link for its name, and one
// found in a process's root with none inside that root.
func TestRuntimeFile(t *testing.T) {
	for _, tc := range []struct{ path, root, at string }{
		{"/tmp/perf-12.map", "/tmp", "perf-12.map"},
		{"/home/u/dumps/jit-12.dump", "/home/u/dumps", "jit-12.dump"},
		{"/proc/12/root/tmp/perf-3.map", "/proc/12/root", "tmp/perf-3.map"},
		{"/proc/12/root/perf-3.map", "/proc/12/root", "perf-3.map"},
		{"/proc/x12/root/tmp/perf-3.map", "/proc/x12/root/tmp", "perf-3.map"},
	} {
		e := runtimeFile(tc.path)
		if e.from != tc.path || e.name != filepath.Base(tc.path) || e.at != tc.at || e.rules.Root != tc.root || !e.rules.NoSymlinks {
			t.Errorf("%s: %+v, want it opened as %s in %s, no symbolic links", tc.path, e, tc.at, tc.root)
		}
	}
}
