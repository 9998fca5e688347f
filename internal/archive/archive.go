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
package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/internal/symbolize"
)

// Names in an archive.
const (
	recordingName = "perf.data"
	filesDir      = "files"
	kallsymsName  = "kallsyms"
	vdsoName      = "vdso.so"
)

// Write packs the recording at input into the archive out, written whole or
// not at all, and returns the names it holds. opts says where the dumps and
// perf maps are (as for the report); what cannot be found is left out and
// reported to opts.Warn.
func Write(out, input string, opts symbolize.Options) ([]string, error) {
	if opts.Warn == nil {
		opts.Warn = func(error) {}
	}
	// The files the samples hit are those the profile's mappings name.
	res, err := perfprof.Run(perfprof.Options{Input: input, Options: opts, PerFunction: true})
	if err != nil {
		return nil, err
	}
	// Files copied as they are, and files made here: the recorded
	// kernel's symbols and vDSO, when the profile names them (only then
	// were the running kernel's the recorded one's).
	type entry struct {
		name, from string
		make       func() ([]byte, error)
	}
	entries := []entry{{name: recordingName, from: input}}
	taken := map[string]string{recordingName: input} // name: where it comes from
	add := func(e entry) {
		if from, ok := taken[e.name]; ok {
			if from != e.from { // not a file mapped in several pieces
				opts.Warn(fmt.Errorf("%s is left out of the archive: it already holds a file named %s", e.from, e.name))
			}
			return
		}
		taken[e.name] = e.from
		entries = append(entries, e)
	}
	for _, d := range res.Dumps {
		add(entry{name: filepath.Base(d), from: d})
	}
	for _, m := range res.Profile.Mapping {
		switch {
		case m.BuildID == perfprof.JITBuildID: // its dump is in already
		case m.File == perfprof.KernelFile && named(res, m.ID):
			add(entry{name: kallsymsName, make: func() ([]byte, error) { return os.ReadFile("/proc/kallsyms") }})
		case m.File == perfprof.VDSOFile && named(res, m.ID):
			add(entry{name: vdsoName, make: elfsym.VDSOImage})
		case perfprof.IsPerfMap(m.File):
			add(entry{name: filepath.Base(m.File), from: m.File})
			if times := m.File + jitsources.TimesSuffix; regular(times) {
				add(entry{name: filepath.Base(times), from: times})
			}
		case filepath.IsAbs(m.File) && regular(m.File):
			add(entry{name: filepath.Join(filesDir, m.File), from: m.File})
		}
	}
	err = atomicfile.Write(out, func(w io.Writer) error {
		gz := gzip.NewWriter(w)
		tw := tar.NewWriter(gz)
		for _, e := range entries {
			var err error
			if e.make == nil {
				err = addFile(tw, e.name, e.from)
			} else {
				var b []byte
				if b, err = e.make(); err == nil {
					err = addBytes(tw, e.name, b)
				}
			}
			if err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		return gz.Close()
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.name
	}
	return names, nil
}

// named tells whether a location of mapping id has a name: only then were
// the running kernel's symbols the recorded kernel's.
func named(res *perfprof.Result, id uint64) bool {
	for _, l := range res.Profile.Location {
		if l.Mapping != nil && l.Mapping.ID == id && len(l.Line) > 0 {
			return true
		}
	}
	return false
}

func regular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func addFile(tw *tar.Writer, name, from string) error {
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	// The header said fi.Size(): a file still growing (a dump being
	// written) is archived as it was then.
	_, err = io.CopyN(tw, f, fi.Size())
	return err
}

func addBytes(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

// Is tells whether the file at path is an archive: gzip data rather than a
// perf.data.
func Is(path string) bool {
	f, err := os.Open(path)
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
	Input string           // the recording
	Files *symbolize.Files // the copies of the recording's files
}

// Extract unpacks the archive at path into a new directory under tmp ("" for
// the system's), which Close removes. Names that would leave the directory
// are refused.
func Extract(path, tmp string) (*Extracted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir, err := os.MkdirTemp(tmp, "jitprof-archive-")
	if err != nil {
		return nil, err
	}
	x := &Extracted{Dir: dir, Input: filepath.Join(dir, recordingName), Files: &symbolize.Files{Root: filepath.Join(dir, filesDir)}}
	fail := func(err error) (*Extracted, error) {
		x.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
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
		to := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fail(err)
		}
		out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fail(err)
		}
		_, err = io.Copy(out, tr) // tar bounds it by the header's size
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(err)
		}
		switch h.Name {
		case kallsymsName:
			x.Files.Kallsyms = to
		case vdsoName:
			x.Files.VDSO = to
		}
	}
	if !regular(x.Input) {
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
