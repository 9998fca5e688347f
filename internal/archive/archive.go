// Package archive packs a recording with what its report needs into one
// file, so that it can be reported on another machine: the perf.data, the
// dumps and perf maps of its processes, copies of the ELF files its samples
// hit, and, when it was made on the running kernel, that kernel's symbols
// and vDSO. perf archive does part of this (ELF files by build-id, for perf
// report to find in its cache); jitted code's files come along here too.
//
// The archive is a gzip-compressed tar file: perf.data, the dumps and maps
// at the top (a report looks for them beside the recording), files/PATH
// for a file recorded at PATH, kallsyms and vdso.so.
//
// Both ends treat the other's files as hostile. Write copies files that the
// recorded processes, or whoever owns their directories, could have replaced
// since the recording: each is opened without blocking, regular files only,
// never through a symbolic link where the recording saw none, bounded, and
// checked against the identity the recording gives it. Extract unpacks a
// file that may come from anyone: only plain files at plain names, bounded
// in all and against the archive's own size.
package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/contract"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// Names in an archive.
const (
	recordingName = "perf.data"
	filesDir      = "files"
	kallsymsName  = "kallsyms"
	vdsoName      = "vdso.so"
)

// limits bound what an archive holds and unpacks to.
type limits struct {
	// member bounds one file.
	member int64
	// total bounds what an archive unpacks to, whatever its size.
	total int64
	// ratio and floor bound what an archive unpacks to against its own
	// size: at most ratio times it, plus floor.
	ratio, floor int64
}

// archiveLimits are Extract's limits, which Write keeps to so that what it
// writes Extract reads. The recording of a long run with DWARF stacks is
// the largest member. A recording, ELF files and dumps compress 2 to 10
// times, perf maps' text about 20, a gzip bomb about 1000; the floor lets
// a small archive of well-compressing text through.
var archiveLimits = limits{member: 16 << 30, total: 64 << 30, ratio: 100, floor: 256 << 20}

// memberCost is what a member counts for beyond its bytes: an empty file
// still takes an inode and a block, and a million of them are a bomb too.
const memberCost = 4 << 10

// unpackBound is how many bytes an archive of size bytes may unpack to.
func (l limits) unpackBound(size int64) int64 {
	if size >= (l.total-l.floor)/l.ratio {
		return l.total
	}
	return l.ratio*size + l.floor
}

// Write packs the recording at input into the archive out, mode 0600 (it
// holds the processes' stack copies and the kernel's addresses), written
// whole or not at all, and returns the names it holds. opts says where the
// dumps and perf maps are (as for the report); what cannot be found, or is
// no longer the file the recording saw, is left out and reported to
// opts.Warn. Once ctx is done Write stops, leaving nothing behind.
func Write(ctx context.Context, out, input string, opts symbolize.Options) ([]string, error) {
	p, err := newPlan(ctx, input, opts)
	if err != nil {
		return nil, err
	}
	return p.write(ctx, out)
}

// entry is a member of the archive: a copy of the file at from, opened as
// at under rules, or bytes made here.
type entry struct {
	name, from, at string
	rules          foreign.Rules
	make           func() ([]byte, error)
}

// plan is what an archive of a recording is to hold.
type plan struct {
	entries []entry
	ids     *identities
	warn    func(error)
}

// newPlan lists the files the recording's report reads. The analysis that
// finds them cannot be interrupted: once ctx is done newPlan returns and
// leaves it to finish unheard, having nothing of its own to clean up.
func newPlan(ctx context.Context, input string, opts symbolize.Options) (*plan, error) {
	if opts.Warn == nil {
		opts.Warn = func(error) {}
	}
	type found struct {
		p   *plan
		err error
	}
	done := make(chan found, 1)
	go func() {
		p, err := listFiles(input, opts)
		done <- found{p, err}
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case f := <-done:
		return f.p, f.err
	}
}

func listFiles(input string, opts symbolize.Options) (*plan, error) {
	// First, as it opens the recording without blocking: the analysis
	// would wait for ever on a FIFO.
	ids, err := readIdentities(input)
	if err != nil {
		return nil, err
	}
	// The files the samples hit are those the profile's mappings name.
	res, err := perfprof.Run(perfprof.Options{Input: input, Options: opts, PerFunction: true})
	if err != nil {
		return nil, err
	}
	p := &plan{entries: []entry{{name: recordingName, from: input, at: input}}, ids: ids, warn: opts.Warn}
	taken := map[string]string{recordingName: input} // name: where it comes from
	add := func(e entry) {
		if from, ok := taken[e.name]; ok {
			if from != e.from { // not a file mapped in several pieces
				opts.Warn(fmt.Errorf("%s is left out of the archive: it already holds a file named %s", e.from, e.name))
			}
			return
		}
		taken[e.name] = e.from
		p.entries = append(p.entries, e)
	}
	for _, d := range res.Dumps {
		add(runtimeFile(d))
	}
	prof := res.Profile
	for i := range prof.Mappings {
		m := &prof.Mappings[i]
		file := prof.String(m.File)
		switch kind := prof.MappingKind(m); {
		case kind == contract.JIT: // its dump is in already
		case kind == contract.Kernel && named(prof, uint32(i+1)):
			// The kernel's own file, which reads as empty to a stat.
			add(entry{name: kallsymsName, make: func() ([]byte, error) { return os.ReadFile("/proc/kallsyms") }})
		case kind == contract.VDSO && named(prof, uint32(i+1)):
			add(entry{name: vdsoName, make: elfsym.VDSOImage})
		case kind == contract.PerfMap:
			add(runtimeFile(file))
			if times := file + jitsources.TimesSuffix; exists(times) {
				add(runtimeFile(times))
			}
		case filepath.IsAbs(file) && !jitsources.IsAnonymous(file):
			// The kernel records the path it resolved, which has no
			// symbolic link in it: one there now was put there since.
			add(entry{name: filepath.Join(filesDir, file), from: file, at: file, rules: foreign.Rules{NoSymlinks: true}})
		}
	}
	return p, nil
}

// runtimeFile is the entry of a dump or perf map. Runtimes create those at
// names of their own, in directories that may be the user's or /tmp: a
// symbolic link there was planted. Their directories may hold links of the
// user's (--jitdump-dir), so only the name itself is refused as one; but
// one found in a running process's root (/proc/PID/root/...) is resolved
// inside that root, with no symbolic link at all, as the path through /proc
// leaves it.
func runtimeFile(path string) entry {
	e := entry{name: filepath.Base(path), from: path, at: filepath.Base(path), rules: foreign.Rules{Root: filepath.Dir(path), NoSymlinks: true}}
	if rest, ok := strings.CutPrefix(path, "/proc/"); ok {
		if pid, inRoot, ok := strings.Cut(rest, "/root/"); ok && pid != "" && strings.Trim(pid, "0123456789") == "" {
			e.at, e.rules.Root = inRoot, "/proc/"+pid+"/root"
		}
	}
	return e
}

// named tells whether a location of mapping id has a name: only then were
// the running kernel's symbols the recorded kernel's.
func named(p *contract.Profile, id uint32) bool {
	for _, l := range p.Locations.All() {
		if l.Mapping == id && l.NLines > 0 {
			return true
		}
	}
	return false
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// write writes the archive. A file that cannot be copied is left out with
// a warning; the recording itself must be copied.
func (p *plan) write(ctx context.Context, out string) ([]string, error) {
	var names []string
	err := atomicfile.Write(out, func(w io.Writer) error {
		packed := &countingWriter{w: w}
		gz := gzip.NewWriter(packed)
		tw := tar.NewWriter(gz)
		var unpacked int64 // as Extract counts it
		for _, e := range p.entries {
			n, err := p.add(ctx, tw, e)
			if err != nil && e.name != recordingName && ctx.Err() == nil && !errors.Is(err, errTarBroken) {
				p.warn(fmt.Errorf("%s is left out of the archive: %w", e.from, err))
				continue
			}
			if err != nil {
				return err
			}
			names = append(names, e.name)
			unpacked += n + memberCost
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		if bound := archiveLimits.unpackBound(packed.n); unpacked > bound {
			return fmt.Errorf("%s would unpack to %d bytes, more than report accepts from an archive of %d bytes (%d): its files compress too well", out, unpacked, packed.n, bound)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// errTarBroken is an error after which the archive cannot be continued:
// a member's header was written, its bytes were not.
var errTarBroken = errors.New("the archive cannot be continued")

// add writes e into tw and returns its size.
func (p *plan) add(ctx context.Context, tw *tar.Writer, e entry) (int64, error) {
	if e.make != nil {
		b, err := e.make()
		if err != nil {
			return 0, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return 0, err
		}
		_, err = tw.Write(b)
		return int64(len(b)), err
	}
	f, err := foreign.Open(e.at, e.rules)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// Sized first: the build-id check reads the file, and must read no
	// more than it holds.
	size, err := foreign.Size(f, archiveLimits.member)
	if err != nil {
		return 0, err
	}
	if err := p.ids.check(e.from, f, size); err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o600, Size: size, ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return 0, err
	}
	// The header said size: a file still growing (a dump being written)
	// is archived as it was then; one that shrank cannot be.
	if _, err := io.Copy(tw, io.NewSectionReader(contextReader{ctx, f}, 0, size)); err != nil {
		return 0, fmt.Errorf("%s: %w: %w", e.from, errTarBroken, err)
	}
	return size, nil
}

// identities is what the recording says its files were: the device and
// inode each path was mapped from, and build-ids, by path.
type identities struct {
	files    map[string][]fileID
	buildIDs map[string][][]byte
}

// fileID is a file as the kernel identified it when it was mapped.
type fileID struct {
	major, minor uint32
	ino          uint64
}

// readIdentities reads the MMAP2 records and build-id table of the
// recording at input.
func readIdentities(input string) (*identities, error) {
	f, err := foreign.Open(input, foreign.Rules{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := foreign.Size(f, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	r, err := perfdata.NewReader(f, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", input, err)
	}
	r.SetName(input)
	r.ReuseRecord, r.ReuseSampleBytes = true, true
	ids := &identities{files: make(map[string][]fileID), buildIDs: make(map[string][][]byte)}
	table, err := r.BuildIDs()
	if err != nil {
		return nil, err
	}
	for _, b := range table {
		ids.addBuildID(b.Filename, b.ID)
	}
	for {
		raw, err := r.NextRaw()
		if err == io.EOF {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		switch raw.Type() {
		case perfdata.TypeMmap2, perfdata.TypeHeaderBuildID:
		default:
			continue
		}
		switch rec := r.Decode(raw).(type) {
		case *perfdata.BuildIDRecord: // a pipe-mode recording's table
			ids.addBuildID(rec.BuildID.Filename, rec.BuildID.ID)
		case *perfdata.Mmap2:
			switch {
			case rec.Misc&perfdata.MiscMmapBuildID != 0:
				ids.addBuildID(rec.Filename, rec.BuildID)
			case rec.Ino != 0: // 0: made up (perf inject's), no identity
				id := fileID{rec.Maj, rec.Min, rec.Ino}
				if !slices.Contains(ids.files[rec.Filename], id) {
					ids.files[strings.Clone(rec.Filename)] = append(ids.files[rec.Filename], id)
				}
			}
		}
	}
}

func (ids *identities) addBuildID(path string, id []byte) {
	if len(id) > 0 && !slices.ContainsFunc(ids.buildIDs[path], func(b []byte) bool { return bytes.Equal(b, id) }) {
		ids.buildIDs[strings.Clone(path)] = append(ids.buildIDs[path], bytes.Clone(id))
	}
}

// check tells whether f, opened at path, of size bytes (foreign.Size), is
// a file the recording saw there: by build-id where the recording has one
// for path (the file's content), else by device and inode where it has
// those. A path the recording gives no identity for (a perf map, which is
// read, not mapped) passes.
func (ids *identities) check(path string, f *os.File, size int64) error {
	if want := ids.buildIDs[path]; len(want) > 0 {
		ef, err := elfsym.NewFile(f, path, size)
		if err != nil {
			return fmt.Errorf("not the file the recording saw (it recorded build-id %x, this is no ELF file: %w)", want[0], err)
		}
		if got := ef.BuildID(); !slices.ContainsFunc(want, func(b []byte) bool { return bytes.Equal(b, got) }) {
			return fmt.Errorf("not the file the recording saw (build-id %x, recorded %x)", got, want[0])
		}
		return nil
	}
	want := ids.files[path]
	if len(want) == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	got := fileID{unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino}
	if !slices.Contains(want, got) {
		return fmt.Errorf("not the file the recording saw (device %d:%d inode %d, recorded %d:%d inode %d)", got.major, got.minor, got.ino, want[0].major, want[0].minor, want[0].ino)
	}
	return nil
}

// Is tells whether the file at path is an archive: gzip data rather than a
// perf.data. A path that is no regular file is not (nor is it opened in a
// way that could block).
func Is(path string) bool {
	f, err := foreign.Open(path, foreign.Rules{})
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 2)
	_, err = io.ReadFull(f, magic)
	return err == nil && bytes.Equal(magic, []byte{0x1f, 0x8b})
}

// Extracted is an archive unpacked into a directory of its own.
type Extracted struct {
	Dir   string
	Input string          // the recording
	Files *contract.Files // the copies of the recording's files
}

// Extract unpacks the archive at path into a new directory under tmp ("" for
// the system's), mode 0700, which Close removes. Names that would leave the
// directory, anything but plain files, and archives that unpack to more than
// their bounds allow (see unpackBound) are refused. Once ctx is done
// Extract stops. When it fails it leaves nothing behind.
//
// All is unpacked at once: the report reads the copies by path, wherever
// and whenever its symbolization needs one, and a gzip stream can only be
// read from its start.
func Extract(ctx context.Context, path, tmp string) (*Extracted, error) {
	return extract(ctx, path, tmp, archiveLimits)
}

func extract(ctx context.Context, path, tmp string, lim limits) (*Extracted, error) {
	f, err := foreign.Open(path, foreign.Rules{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := foreign.Size(f, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	gz, err := gzip.NewReader(bufio.NewReader(contextReader{ctx, f}))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := os.MkdirTemp(tmp, "jitprof-archive-")
	if err != nil {
		return nil, err
	}
	x := &Extracted{Dir: dir, Input: filepath.Join(dir, recordingName), Files: &contract.Files{Root: filepath.Join(dir, filesDir)}}
	fail := func(err error) (*Extracted, error) {
		x.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bound := lim.unpackBound(size)
	var unpacked int64
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(h.Name) {
			return fail(fmt.Errorf("%q is not a file of a jitprof archive", h.Name))
		}
		if h.Size > lim.member {
			return fail(fmt.Errorf("%s: %d bytes, more than a member may hold (%d)", h.Name, h.Size, lim.member))
		}
		if unpacked += h.Size + memberCost; unpacked > bound {
			return fail(fmt.Errorf("%s: unpacking it would pass %d bytes, the most an archive of %d bytes unpacks to (%d times its size plus %d bytes, and at most %d bytes)",
				h.Name, bound, size, lim.ratio, lim.floor, lim.total))
		}
		to := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return fail(err)
		}
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return fail(err)
		}
		_, err = io.Copy(out, tr) // tar bounds it by the header's size
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(fmt.Errorf("%s: %w", h.Name, err))
		}
		switch h.Name {
		case kallsymsName:
			x.Files.Kallsyms = to
		case vdsoName:
			x.Files.VDSO = to
		}
	}
	if fi, err := os.Lstat(x.Input); err != nil || !fi.Mode().IsRegular() {
		return fail(errors.New("no " + recordingName + " in it"))
	}
	return x, nil
}

// Close removes the unpacked files.
func (x *Extracted) Close() error {
	if x == nil || !strings.Contains(filepath.Base(x.Dir), "jitprof-archive-") {
		return nil
	}
	return os.RemoveAll(x.Dir)
}

// contextReader reads f until ctx is done: a long copy stops within one
// read of being cancelled.
type contextReader struct {
	ctx context.Context
	f   *os.File
}

func (c contextReader) ReadAt(b []byte, off int64) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.ReadAt(b, off)
}

func (c contextReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.f.Read(b)
}

// countingWriter counts what goes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
