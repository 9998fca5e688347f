// Package jitsources owns the JIT side of a perf.data recording: which
// jitdump files its processes marked (the marker mappings perf and jitprof
// record), the recording's TIME_CONV for dumps timed by the TSC, the dumps
// themselves once read, each process's perf map, and the one rule for the
// anonymous mappings a dump replaces.
//
// Everything that reads a recording's jitted code goes through it: the
// report's symbolizer, inject, annotate, gmon and record. Data flows one
// way: Scan the recording's records, Load the dumps they mark, then ask.
package jitsources

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
	"github.com/jitprof/jitprof/perfmap"
	"golang.org/x/sys/unix"
)

// ErrNoClock is returned for a recording whose timestamps cannot be matched
// with the dumps'.
var ErrNoClock = errors.New("the recording's timestamps are not CLOCK_MONOTONIC, so jitted code cannot be placed in time: record with `perf record -k mono` (or `jitprof record`)")

// CheckClock tells whether every event of a recording is timed with
// CLOCK_MONOTONIC, the clock of jitdump timestamps.
func CheckClock(attrs []*perfdata.Attr) error {
	for _, a := range attrs {
		if a.Flags&perfdata.AttrUseClockID == 0 || a.ClockID != unix.CLOCK_MONOTONIC {
			return ErrNoClock
		}
	}
	return nil
}

var markerName = regexp.MustCompile(`^jit-[0-9]+\.dump$`)

// IsMarker tells a dump's marker mapping by the mapped file's name,
// jit-<pid>.dump, as perf does. The pid in the name is the runtime's own,
// which differs from the recorded one when the runtime ran in a container's
// pid namespace, so it is not required to match.
func IsMarker(filename string) bool {
	return markerName.MatchString(filepath.Base(filename))
}

// IsAnonymous tells the mappings of anonymous memory, where JITs put their
// code. The kernel re-announces such regions when it merges them, so once a
// process's dump is in use they would hide its functions; perf drops
// "//anon", "[anon:" and "/memfd:" ones.
//
// Shared anonymous memory is anonymous too, though perf keeps it:
// "/dev/zero (deleted)" is where PHP's opcache keeps its JIT buffer, which it
// re-protects after every compilation (the kernel announces a new mapping of
// the whole buffer each time, and perf loses PHP's functions to them);
// "/anon_hugepage (deleted)" is the same for memory in huge pages. A JIT that
// puts code there describes it in its dump like any other.
func IsAnonymous(filename string) bool {
	for _, prefix := range []string{"//anon", "[anon:", "/memfd:", "/dev/zero", "/anon_hugepage"} {
		if strings.HasPrefix(filename, prefix) {
			return true
		}
	}
	return false
}

// Marker is a dump's marker mapping as recorded.
type Marker struct {
	Path   string // the dump's path, as the recording saw it
	Pid    uint32 // the recorded pid of the process that mapped it
	Time   uint64 // of the mapping, in perf's clock
	Offset int64  // of its record in the recording
}

// Recording is the JIT side of one recording.
type Recording struct {
	// Markers are the recording's marker mappings, in file order.
	Markers []Marker
	// Conv is the recording's TIME_CONV, nil when it has none.
	Conv *perfdata.TimeConv
	// Dumps are the dumps in use, once Load has read them, sorted by the
	// path the recording saw.
	Dumps []*Dump

	// hideFrom is, by pid, the time from which the process's anonymous
	// mappings are hidden: that of the first marker of a usable dump.
	hideFrom map[uint32]uint64
}

// Dump is a dump in use and the markers that point to it.
type Dump struct {
	*dumpindex.Dump
	// Markers are the marker mappings of the dump, in file order.
	Markers []Marker
	// Pid is the recorded pid of the process that marked it first: its
	// functions are in that process's address space.
	Pid uint32

	conv *perfdata.TimeConv
}

// Visit receives the records Scan decodes beyond markers and TIME_CONV, for
// a caller that builds more from the same pass.
type Visit func(rec perfdata.Record, offset int64)

// Scan reads r's records, from where it is to the end, and returns the
// recording's marker mappings and TIME_CONV. MMAP and MMAP2 records that are
// not markers, and COMM and FORK records, go to visit, if it is not nil; no
// other record is decoded. Records are reused: visit must copy what it keeps.
func Scan(r *perfdata.Reader, visit Visit) (*Recording, error) {
	reuse := r.ReuseRecord
	r.ReuseRecord = true
	defer func() { r.ReuseRecord = reuse }()
	rec := &Recording{}
	for {
		raw, err := r.NextRaw()
		if err == io.EOF {
			return rec, nil
		}
		if err != nil {
			return nil, err
		}
		switch raw.Type() {
		case perfdata.TypeMmap, perfdata.TypeMmap2, perfdata.TypeComm, perfdata.TypeFork, perfdata.TypeTimeConv:
		default:
			continue
		}
		switch d := r.Decode(raw).(type) {
		case *perfdata.TimeConv:
			c := *d
			rec.Conv = &c
			continue
		case *perfdata.Mmap, *perfdata.Mmap2:
			// A marker is the runtime's executable mapping of its dump, in
			// a process (not the kernel).
			if m := Mapping(d); IsMarker(m.Filename) && m.Pid != ^uint32(0) && m.Misc&perfdata.MiscMmapData == 0 {
				rec.Markers = append(rec.Markers, Marker{Path: strings.Clone(m.Filename), Pid: m.Pid, Time: m.Trailer.Time, Offset: raw.Offset})
				continue
			}
		}
		if visit != nil {
			visit(r.Decode(raw), raw.Offset)
		}
	}
}

// MappingInfo is what the JIT side reads of an MMAP or MMAP2 record.
type MappingInfo struct {
	Pid       uint32
	Addr, Len uint64
	Pgoff     uint64
	Filename  string
	Misc      uint16
	BuildID   []byte // for an MMAP2 that carries one
	Trailer   perfdata.Trailer
}

// Mapping returns the fields of an MMAP or MMAP2 record; zeros for any other
// record, an *Invalid one among them.
func Mapping(rec perfdata.Record) MappingInfo {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		return MappingInfo{Pid: r.Pid, Addr: r.Addr, Len: r.Len, Pgoff: r.Pgoff, Filename: r.Filename, Misc: r.Misc, Trailer: r.Trailer}
	case *perfdata.Mmap2:
		m := MappingInfo{Pid: r.Pid, Addr: r.Addr, Len: r.Len, Pgoff: r.Pgoff, Filename: r.Filename, Misc: r.Misc, Trailer: r.Trailer}
		if r.Misc&perfdata.MiscMmapBuildID != 0 {
			m.BuildID = r.BuildID
		}
		return m
	}
	return MappingInfo{}
}

// Load reads the dumps the markers point to, a few at a time, each found at
// the path the recording saw or by its name in dirs. A dump that cannot be
// found or read, and the problems of those read, go to warn, one call at a
// time, in the order of the paths; such a dump's functions stay unnamed.
func (rec *Recording) Load(dirs []string, warn func(error)) {
	byPath := make(map[string][]Marker)
	for _, m := range rec.Markers {
		byPath[m.Path] = append(byPath[m.Path], m)
	}
	paths := slices.Sorted(maps.Keys(byPath))
	rec.hideFrom = make(map[uint32]uint64)
	for i, d := range readAll(paths, dirs, warn) {
		if d == nil {
			continue
		}
		ms := byPath[paths[i]]
		first := slices.MinFunc(ms, func(x, y Marker) int { return cmp.Compare(x.Time, y.Time) })
		rec.Dumps = append(rec.Dumps, &Dump{Dump: d, Markers: ms, Pid: first.Pid, conv: rec.Conv})
		for _, m := range ms {
			if t, ok := rec.hideFrom[m.Pid]; !ok || m.Time < t {
				rec.hideFrom[m.Pid] = m.Time
			}
		}
	}
}

// Hides tells whether a mapping of filename made by process pid at time t
// is replaced by the process's dumps: anonymous memory, once a usable dump
// of the process was marked.
func (rec *Recording) Hides(pid uint32, t uint64, filename string) bool {
	from, ok := rec.hideFrom[pid]
	return ok && t >= from && IsAnonymous(filename)
}

// Close releases the dumps; their records must not be used after it.
func (rec *Recording) Close() error {
	var errs []error
	for _, d := range rec.Dumps {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// PerfTime returns a timestamp of the dump in perf's clock: as it is, unless
// the dump has architecture timestamps (the TSC), which are converted with
// the recording's TIME_CONV parameters as perf does. Without them it is
// returned as it is.
func (d *Dump) PerfTime(t uint64) uint64 {
	conv := d.conv
	if d.Header.Flags&jitdump.FlagArchTimestamp == 0 || conv == nil || conv.TimeMult == 0 {
		return t
	}
	if conv.Extended && !conv.CapUserTimeZero {
		// The kernel said its time_zero is not to be used: perf then
		// places every record at 0, before any sample, and so do we.
		return 0
	}
	if conv.CapUserTimeShort {
		t = conv.TimeCycles + ((t - conv.TimeCycles) & conv.TimeMask)
	}
	quot := t >> conv.TimeShift
	rem := t & (1<<conv.TimeShift - 1)
	return conv.TimeZero + quot*conv.TimeMult + (rem*conv.TimeMult)>>conv.TimeShift
}

// SearchDirs returns where to look for the dumps and perf maps of the
// recording at path that are not where it saw them: dirs, then the
// recording's own directory, so that a recording kept in one directory with
// its dumps and maps reads anywhere.
func SearchDirs(path string, dirs []string) []string {
	return append(slices.Clip(dirs), filepath.Dir(path))
}

// locate finds a dump at the path the recording saw, or by its name in dirs.
func locate(path string, dirs []string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	for _, d := range dirs {
		p := filepath.Join(d, filepath.Base(path))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if len(dirs) == 0 {
		return "", fmt.Errorf("dump %s not found (did it move? --jitdump-dir DIR searches DIR for it); its functions stay unnamed", path)
	}
	return "", fmt.Errorf("dump %s not found there nor in %s (--jitdump-dir DIR searches DIR too); its functions stay unnamed", path, strings.Join(dirs, ", "))
}

// readAll reads the dumps at paths, a few at a time. The result is in the
// order of paths, nil where a dump could not be found or read.
func readAll(paths, dirs []string, warn func(error)) []*dumpindex.Dump {
	dumps := make([]*dumpindex.Dump, len(paths))
	problems := make([][]error, len(paths))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, path := range paths {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			at, err := locate(path, dirs)
			if err != nil {
				problems[i] = []error{err}
				return
			}
			d, err := dumpindex.Read(at)
			if err != nil {
				problems[i] = []error{fmt.Errorf("dump %s not used: %w", at, err)}
				return
			}
			dumps[i], problems[i] = d, d.Problems
		})
	}
	wg.Wait()
	for _, ps := range problems {
		for _, p := range ps {
			warn(p)
		}
	}
	return dumps
}

// PerfMap reads the perf map of process pid: perf-<pid>.map in /tmp, in
// the process's own root (a container's /tmp, while it runs), or in dirs.
// It returns nil when there is none.
func PerfMap(pid uint32, dirs []string, warn func(error)) (table *perfmap.Table, path string) {
	name := fmt.Sprintf("perf-%d.map", pid)
	candidates := []string{filepath.Join("/tmp", name), filepath.Join(fmt.Sprintf("/proc/%d/root/tmp", pid), name)}
	for _, d := range dirs {
		candidates = append(candidates, filepath.Join(d, name))
	}
	for _, path := range candidates {
		entries, bad, err := perfmap.ParseFile(path)
		if err != nil {
			continue
		}
		if len(bad) > 0 {
			warn(fmt.Errorf("%d lines of %s are not perf map lines and are skipped; the first: %w", len(bad), path, bad[0]))
		}
		return perfmap.NewTable(entries), path
	}
	return nil, ""
}
