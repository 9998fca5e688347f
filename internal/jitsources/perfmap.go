package jitsources

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/google/btree"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfmap"
)

// A perf map has no times: a runtime that reuses an address appends a line
// for the new function and leaves the old one. jitprof record reads each
// process's map while it grows and keeps a copy beside the recording,
// perf-<recorded pid>.map, with a times file, the copy's name and
// TimesSuffix: one line "LINES TIME" (decimal) each time it found the map
// grown, saying that the map's first LINES lines were there at TIME,
// CLOCK_MONOTONIC nanoseconds, the clock of the recording. Each entry then
// holds from the time it appeared. A times file rather than a jitdump made
// of the map: a dump's functions carry their code, which a map does not
// give (read from the process later it may already be the code of the
// function that took the address), and they would name code in the
// process's files that a perf map never overrides.

// TimesSuffix ends the name of a perf map's times file: perf-1234.map.times.
const TimesSuffix = ".times"

// AppendTimes writes a line of a times file: the map's first lines lines
// were there at t.
func AppendTimes(w io.Writer, lines int, t uint64) error {
	_, err := fmt.Fprintf(w, "%d %d\n", lines, t)
	return err
}

// timesRow is a line of a times file.
type timesRow struct {
	lines int
	time  uint64
}

// maxTimesLine bounds a good line of a times file: two decimal numbers.
const maxTimesLine = 2*20 + 2

// parseTimes reads a times file. The rows before a bad line are kept; the
// error names the file and the bad line's offset.
func parseTimes(data []byte, file string) ([]timesRow, error) {
	var rows []timesRow
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			// The recorder stopped mid-line: what it wrote whole holds.
			return rows, nil
		}
		line := data[off : off+end]
		bad := func(msg string) ([]timesRow, error) {
			return rows, fmt.Errorf("%s: offset %d: %s: %q; the map's later lines are taken to appear at the last time before", file, off, msg, line[:min(len(line), maxTimesLine)])
		}
		l, t, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(line) > maxTimesLine {
			return bad("not LINES TIME")
		}
		n, err1 := strconv.Atoi(string(l))
		ts, err2 := strconv.ParseUint(string(t), 10, 64)
		if err1 != nil || err2 != nil || n < 0 {
			return bad("not LINES TIME")
		}
		if k := len(rows); k > 0 && (n < rows[k-1].lines || ts < rows[k-1].time) {
			return bad("before the line above")
		}
		rows = append(rows, timesRow{n, ts})
		off += end + 1
	}
	return rows, nil
}

// PerfMap is a process's perf map, each entry with the time from which it
// holds.
type PerfMap struct {
	Path    string
	Entries []perfmap.Entry // in map order
	// Times are, one per entry, when it holds from, in perf's clock. As
	// perf has it, an entry holds from the process's start (0, before any
	// sample): a runtime that writes its map through a buffer (Mono's 4
	// KiB stdio buffer) makes most lines reach the file long after their
	// code ran. But an entry for an address that an earlier line of the map
	// named was written after that function's code was replaced, so it
	// holds from when it appeared (the times file's), or the earlier one
	// would be wrong before it. Where entries overlap, of those that hold
	// at a time the later one holds.
	Times []uint64
}

// PerfMapPaths lists, in order, where the perf map of process pid may be
// (its readers take the first that can be read): perf-<pid>.map in dirs
// (where jitprof record puts its copies, with their times), in the
// process's own root while it runs (a container's /tmp, where the runtime
// names it by its pid in its own pid namespace), and in /tmp. The process
// is the one seen at time seen (perf's clock): a live process that started
// later has the pid of another and is not looked into.
//
// A perf map is another process's file: while it runs, opened as it would
// open it, under perf's rule of ownership (procfs.Process.Open); once it is
// gone, /tmp's is opened with no symlink in its path, since a runtime
// writes its map itself and a link can only have been planted, and only if
// root or you own it (foreign.Yours), since anyone can make /tmp's once the
// pid is free. A directory of dirs that others may write is no better than
// /tmp (inDir).
func PerfMapPaths(host Host, pid uint32, seen uint64, dirs []string) []foreign.Path {
	name := fmt.Sprintf("perf-%d.map", pid)
	inTmp := foreign.Path{Name: filepath.Join("/tmp", name), Rules: gone(host.Force)}
	var inRoot []foreign.Path
	var live *procfs.Process
	if p, err := host.process(pid, seen); err == nil {
		inRoot = append(inRoot, foreign.Path{Name: fmt.Sprintf("/tmp/perf-%d.map", p.NSpid), Rules: p.Rules(host.Force)})
		inTmp.Rules = atHost(p, host.Force)
		live = &p
	}
	trusted := owners(live)
	var paths []foreign.Path
	for _, d := range dirs {
		paths = append(paths, inDir(d, name, trusted, host.Force))
	}
	return append(append(paths, inRoot...), inTmp)
}

// Host is the machine a recording is read on: where the recorded processes
// that still run are looked for, and how their files are trusted.
type Host struct {
	// Proc is the /proc of the recorded processes: procfs.Host when
	// empty, a test's own elsewhere.
	Proc procfs.FS
	// Force reads dumps and perf maps whatever their owner, as perf's -f.
	Force bool
	// Elsewhere, when set, says why the recorded processes are not this
	// machine's (Elsewhere): none is looked for among the live ones, whose
	// pids name unrelated processes.
	Elsewhere string
}

// process returns the recorded process pid, seen at time seen (perf's
// clock), if it runs here still.
func (h Host) process(pid uint32, seen uint64) (procfs.Process, error) {
	if h.Elsewhere != "" {
		return procfs.Process{}, errors.New(h.Elsewhere)
	}
	return cmp.Or(h.Proc, procfs.Host).Process(pid, seen)
}

// InProcess is name in the root of the recorded process pid, seen at time
// seen (perf's clock), while it runs here: resolved as the process resolves
// it, opened as its owner. It is for the files the process mapped, which a
// container has in its own root: their reader checks that each is the file
// the recording saw (its build-id, device and inode), whoever owns it, so
// no owner rule applies.
func (h Host) InProcess(pid uint32, seen uint64, name string) (foreign.Path, error) {
	p, err := h.process(pid, seen)
	if err != nil {
		return foreign.Path{}, err
	}
	r := p.Rules(h.Force)
	r.Owners = nil
	return foreign.Path{Name: name, Rules: r}, nil
}

// MountNamespace is the mount namespace of the recorded process pid, seen
// at time seen, while it runs here in one other than jitprof's own (a
// container's), as /proc names it (mnt:[4026532291]); "" for a process
// that shares jitprof's, that runs no more, or that may not be looked at.
// The files such a process maps are its root's, which this side sees
// elsewhere or not at all.
func (h Host) MountNamespace(pid uint32, seen uint64) string {
	if _, err := h.process(pid, seen); err != nil {
		return ""
	}
	fs := cmp.Or(h.Proc, procfs.Host)
	theirs, err := fs.MountNamespace(pid)
	if err != nil {
		return ""
	}
	if ours, err := fs.OwnMountNamespace(); err != nil || ours == theirs {
		return ""
	}
	return theirs
}

const maxPerfMap = perfmap.MaxFileSize

// PickPerfMap chooses, among paths (as PerfMapPaths gives them, in order),
// the perf map to read and the times file to read with it: the first that
// can be read, with the times file beside it; but when a later one holds
// all of its lines and more, that one, with the first's times. A copy
// record made of a runtime that writes its map through a buffer (Mono)
// can lack the lines the runtime wrote after the recording, which its own
// map then has: the copy's times still say when its lines were seen.
// refused are the reasons paths that are there were not read.
func PickPerfMap(paths []foreign.Path) (m, times foreign.Path, ok bool, refused []error) {
	var size int64
	var data []byte // m's, read only once a later map is longer
	for _, p := range paths {
		n, err := sizeOf(p)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				refused = append(refused, err)
			}
			continue
		}
		if !ok {
			m, times, ok, size = p, timesOf(p), true, n
			continue
		}
		if n <= size {
			continue
		}
		if data == nil {
			if data, err = readHead(m, size); err != nil {
				refused = append(refused, err)
				continue
			}
		}
		if head, err := readHead(p, size); err == nil && bytes.Equal(head, data) {
			m, size, data = p, n, nil
		}
	}
	return m, times, ok, refused
}

// sizeOf is the size of the perf map at p, within the bounds it is read in.
func sizeOf(p foreign.Path) (int64, error) {
	f, err := p.Open()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return foreign.Size(f, maxPerfMap)
}

// readHead reads the first n bytes of the perf map at p.
func readHead(p foreign.Path, n int64) ([]byte, error) {
	f, err := p.Open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = io.ReadFull(f, b)
	return b, err
}

// timesOf is the times file of the perf map at p.
func timesOf(p foreign.Path) foreign.Path {
	return foreign.Path{Name: p.Name + TimesSuffix, Rules: p.Rules}
}

// ReadPerfMap reads the perf map at src, with the times of its entries
// from the times file beside it, named with TimesSuffix, where there is
// one.
func ReadPerfMap(src foreign.Path, warn func(error)) (*PerfMap, error) {
	return ReadPerfMapTimed(src, timesOf(src), warn)
}

// ReadPerfMapTimed reads the perf map at src, with the times of its entries
// from the times file at times, where there is one (as PickPerfMap chose
// them). Lines that are not perf map lines, and a times file that cannot be
// used, go to warn.
func ReadPerfMapTimed(src, times foreign.Path, warn func(error)) (*PerfMap, error) {
	path := src.String()
	f, err := src.Open()
	if err != nil {
		return nil, err
	}
	data, err := foreign.ReadAll(f, maxPerfMap)
	f.Close()
	if err != nil {
		return nil, err
	}
	entries, bad := perfmap.ParseData(data, path)
	if len(bad) > 0 {
		warn(fmt.Errorf("%d lines of %s are not perf map lines and are skipped; the first: %w", len(bad), path, bad[0]))
	}
	m := &PerfMap{Path: path, Entries: entries, Times: make([]uint64, len(entries))}
	if f, err = times.Open(); err == nil {
		data, err = foreign.ReadAll(f, maxPerfMap)
		f.Close()
	}
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		warn(fmt.Errorf("%s: %w; its entries are taken in map order, the last one holding", times, err))
		return m, nil
	}
	rows, err := parseTimes(data, times.String())
	if err != nil {
		warn(err)
	}
	if len(rows) == 0 {
		return m, nil
	}
	var named spans
	for i, e := range entries {
		if e.Size == 0 || e.Start+e.Size < e.Start {
			continue // names no address
		}
		if named.overlaps(e.Start, e.Start+e.Size) {
			k, _ := slices.BinarySearchFunc(rows, e.Line, func(r timesRow, line int) int { return r.lines - line })
			m.Times[i] = rows[min(k, len(rows)-1)].time
		}
		named.add(e.Start, e.Start+e.Size)
	}
	return m, nil
}

// spans is a set of addresses, as disjoint ranges by start.
type spans struct{ t *btree.BTreeG[span] }

type span struct{ start, end uint64 }

func (s *spans) overlaps(start, end uint64) bool {
	if s.t == nil {
		return false
	}
	hit := false
	// The last range starting before end is the only one that can reach
	// past start: the ranges are disjoint.
	s.t.DescendLessOrEqual(span{start: end - 1}, func(r span) bool {
		hit = r.end > start
		return false
	})
	return hit
}

// add adds [start, end), merging the ranges it touches.
func (s *spans) add(start, end uint64) {
	if s.t == nil {
		s.t = btree.NewG(32, func(a, b span) bool { return a.start < b.start })
	}
	var merged []span
	s.t.DescendLessOrEqual(span{start: end}, func(r span) bool {
		if r.end < start {
			return false
		}
		merged = append(merged, r)
		return true
	})
	for _, r := range merged {
		s.t.Delete(r)
		start, end = min(start, r.start), max(end, r.end)
	}
	s.t.ReplaceOrInsert(span{start, end})
}

// atHost are the rules for a file of process p at a path of this side,
// which the kernel recorded, or a runtime wrote at a fixed name, with every
// link resolved: as p's owner, with no symlink in the path.
func atHost(p procfs.Process, force bool) foreign.Rules {
	r := p.Rules(force)
	r.Root, r.NoSymlinks = "", true
	return r
}

// gone are the rules for a file at a path of this side once its process is
// gone: there is no owner left to open it as, so perf's own rule (root's or
// yours) and no symlink in the path.
func gone(force bool) foreign.Rules {
	return foreign.Rules{NoSymlinks: true, Owners: foreign.Yours(), Force: force}
}
