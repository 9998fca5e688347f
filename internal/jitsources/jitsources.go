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
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/perfdata"
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

var markerName = regexp.MustCompile(`^jit-([0-9]+)(\.dump|-([0-9]+)\.dump|-([0-9]+)-[A-Za-z0-9]{6})$`)

// IsMarker tells a dump's marker mapping by the mapped file's name:
// jit-<pid>.dump, as perf has it, and JavaScriptCore's (Bun's)
// jit-<tid>-<pid>.dump, or jit-<tid>-<pid>-XXXXXX, a temporary file in /tmp
// when it is given no directory, which perf passes over. The pid in the
// name is the runtime's own, which differs from the recorded one when the
// runtime ran in a container's pid namespace, so it is not required to
// match.
func IsMarker(filename string) bool {
	_, ok := MarkerPid(filename)
	return ok
}

// MarkerPid returns the pid a marker's name gives: the runtime's own, as it
// sees itself, which is the recorded one unless it ran in another pid
// namespace.
func MarkerPid(filename string) (uint32, bool) {
	m := markerName.FindStringSubmatch(filepath.Base(filename))
	if m == nil {
		return 0, false
	}
	pid, err := strconv.ParseUint(cmp.Or(m[3], m[4], m[1]), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(pid), true
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
	// Cache, when set before Load, keeps the dumps for later Recordings,
	// extended rather than read again; Close then leaves them open.
	Cache *DumpCache
	// Host, set before Load, says where the recorded processes that still
	// run are, and how their dumps are trusted.
	Host
	// RecordedElsewhere says why the recording was not made on this boot
	// of this machine (Elsewhere), "" when it was: Load then looks for no
	// recorded process among the live ones.
	RecordedElsewhere string
	// Began is when the processes the recording describes without a time
	// ran by (Began): their markers and mappings have time 0.
	Began uint64

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
	reuse, reuseSamples := r.ReuseRecord, r.ReuseSampleBytes
	r.ReuseRecord, r.ReuseSampleBytes = true, true // samples are skipped
	defer func() { r.ReuseRecord, r.ReuseSampleBytes = reuse, reuseSamples }()
	rec := &Recording{RecordedElsewhere: Elsewhere(r), Began: Began(r)}
	for {
		raw, err := r.NextRaw()
		// A recording cut short is read as far as it is whole; the pass
		// over its samples says what is missing.
		if err == io.EOF || errors.Is(err, perfdata.ErrTruncated) {
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
	// Maj, Min and Ino are the file's device and inode, for an MMAP2
	// that carries no build-id; Ino 0 for none.
	Maj, Min uint32
	Ino      uint64
	Trailer  perfdata.Trailer
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
		} else {
			m.Maj, m.Min, m.Ino = r.Maj, r.Min, r.Ino
		}
		return m
	}
	return MappingInfo{}
}

// Load reads the dumps the markers point to, a few at a time, each found
// where the marker's process saw it (see locate). A dump that cannot be
// found or read, and the problems of those read, go to warn, one call at a
// time, in the order of the paths the recording saw; such a dump's
// functions stay unnamed.
func (rec *Recording) Load(dirs []string, warn func(error)) {
	// Markers are grouped by the file they lead to: processes in two
	// containers can both have mapped a /tmp/jit-1.dump of their own.
	byFile := make(map[string][]Marker) // by the path the dump is at
	source := make(map[string]foreign.Path)
	var missing []Marker
	refused := make(map[string][]error)
	host := rec.Host
	host.Elsewhere = cmp.Or(host.Elsewhere, rec.RecordedElsewhere)
	for _, m := range rec.Markers {
		at, ok, why := locate(m, cmp.Or(m.Time, rec.Began), dirs, host)
		if !ok {
			missing = append(missing, m)
			refused[m.Path] = append(refused[m.Path], why...)
			continue
		}
		byFile[at.String()] = append(byFile[at.String()], m)
		source[at.String()] = at
	}
	files := slices.SortedFunc(maps.Keys(byFile), func(x, y string) int {
		return cmp.Or(cmp.Compare(byFile[x][0].Path, byFile[y][0].Path), cmp.Compare(x, y))
	})
	sources := make([]foreign.Path, len(files))
	for i, f := range files {
		sources[i] = source[f]
	}
	rec.hideFrom = make(map[uint32]uint64)
	read := dumpindex.ReadFrom
	if rec.Cache != nil {
		read = rec.Cache.get
	}
	dumps, problems := readAll(sources, read)
	// Warnings in the order of the paths the recording saw: not found
	// ones among those read.
	type warning struct {
		path string
		pids []uint32
		errs []error
	}
	var warnings []warning
	byPath := make(map[string][]Marker)
	for _, m := range missing {
		byPath[m.Path] = append(byPath[m.Path], m)
	}
	for _, path := range slices.Sorted(maps.Keys(byPath)) {
		warnings = append(warnings, warning{path, markerPids(byPath[path]), []error{notFound(path, dirs, refused[path])}})
	}
	for i, f := range files {
		warnings = append(warnings, warning{byFile[f][0].Path, markerPids(byFile[f]), problems[i]})
	}
	slices.SortStableFunc(warnings, func(x, y warning) int { return cmp.Compare(x.path, y.path) })
	for _, w := range warnings {
		for _, err := range w.errs {
			warn(&DescribedError{Pids: w.pids, Err: err})
		}
	}
	for i, d := range dumps {
		if d == nil {
			continue
		}
		ms := byFile[files[i]]
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
	if rec.Cache != nil {
		return nil
	}
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

// inDir is the file name in dir, one of SearchDirs. Such a directory holds
// the user's own files, unless others may write it: the recording's, when
// it is /tmp, holds anyone's perf-PID.map. There the file must have one of
// owners, as at its process's own path, and its name is no symlink; it is
// opened as the caller, since jitprof's own copies are private to it.
func inDir(dir, name string, owners []uint32, force bool) foreign.Path {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil || st.Mode&0o022 == 0 {
		return foreign.Plain(filepath.Join(dir, name))
	}
	return foreign.Path{Name: name, Rules: foreign.Rules{Root: filepath.Clean(dir), NoSymlinks: true, Owners: owners, Force: force}}
}

// owners are who may own a process's file in a directory others may
// write: root, you and, while it runs (live), its owner.
func owners(live *procfs.Process) []uint32 {
	o := foreign.Yours()
	if live != nil {
		o = append(o, live.Cred.Uid)
	}
	return o
}

// locate finds the dump marker m points to. The path the recording saw is
// the one its process saw: in a container (another mount namespace), it
// leads elsewhere on this side, or nowhere. So a dump is looked for, in
// order:
//   - for a process in another pid namespace (its dump's name gives its own
//     pid, not the recorded one: MarkerPid), the copy jitprof record made while
//     the process lived, jit-<recorded pid>.dump in dirs;
//   - where the path leads in the process's own root (/proc/PID/root), while
//     it runs (the pid's process must have started by the marker's time, or
//     it is another process that has the pid now);
//   - at the path, then by its name in dirs.
//
// For a process of this pid namespace, the path comes first, since its copy
// and its name are the same.
//
// A dump is another process's file: it is opened as that process would
// open it and under perf's rule of ownership (procfs.Process.Open). Once the
// process is gone, the path the recording saw is opened with no symlink in
// it (the kernel records a mapping's path with every link resolved, so a
// link there now was planted) and only if root or you own it, as perf
// would: another user can have put a file there since. The copies and dirs
// are the user's own, but for a directory others may write (inDir). The
// reasons candidates were refused for (not "not there") come back with
// the failure.
func locate(m Marker, seen uint64, dirs []string, host Host) (foreign.Path, bool, []error) {
	var candidates []foreign.Path
	own := fmt.Sprintf("jit-%d.dump", m.Pid)
	base := filepath.Base(m.Path)
	namePid, _ := MarkerPid(base)
	atPath := foreign.Path{Name: m.Path, Rules: gone(host.Force)}
	var inRoot []foreign.Path
	var live *procfs.Process
	if p, err := host.process(m.Pid, seen); err == nil {
		inRoot = append(inRoot, foreign.Path{Name: m.Path, Rules: p.Rules(host.Force)})
		atPath.Rules = atHost(p, host.Force)
		live = &p
	}
	trusted := owners(live)
	if namePid != m.Pid {
		for _, d := range dirs {
			candidates = append(candidates, inDir(d, own, trusted, host.Force))
		}
		candidates = append(append(candidates, inRoot...), atPath)
	} else {
		candidates = append([]foreign.Path{atPath}, inRoot...)
	}
	for _, d := range dirs {
		candidates = append(candidates, inDir(d, base, trusted, host.Force))
	}
	var refused []error
	for _, c := range candidates {
		f, err := c.Open()
		if err == nil {
			f.Close()
			return c, true, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			refused = append(refused, err)
		}
	}
	return foreign.Path{}, false, refused
}

// DescribedError is a problem with a file in which processes described
// their jitted code: a dump they marked (not found, refused, unreadable or
// read with problems), or a perf map refused. Their runtimes did describe
// their code, so their code unnamed is the file's doing: telling the user
// to start the runtime with its flag would mislead.
type DescribedError struct {
	Pids []uint32 // recorded pids of the processes, ascending
	Err  error
}

func (e *DescribedError) Error() string { return e.Err.Error() }
func (e *DescribedError) Unwrap() error { return e.Err }

// markerPids returns the distinct pids of ms, ascending.
func markerPids(ms []Marker) []uint32 {
	var pids []uint32
	for _, m := range ms {
		pids = append(pids, m.Pid)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// notFound says that the dump at path was found nowhere locate looked, or
// only where it was refused.
func notFound(path string, dirs []string, refused []error) error {
	var err error
	if len(dirs) == 0 {
		err = fmt.Errorf("dump %s not found (did it move? --jitdump-dir DIR searches DIR for it); its functions stay unnamed", path)
	} else {
		err = fmt.Errorf("dump %s not found there nor in %s (--jitdump-dir DIR searches DIR too); its functions stay unnamed", path, strings.Join(dirs, ", "))
	}
	if len(refused) > 0 {
		err = fmt.Errorf("%w; refused: %w", err, errors.Join(refused...))
	}
	return err
}

// readAll reads the dumps at paths with read, a few at a time. The result
// is in the order of paths, nil where a dump could not be read, with each
// one's problems.
func readAll(paths []foreign.Path, read func(foreign.Path) (*dumpindex.Dump, error)) ([]*dumpindex.Dump, [][]error) {
	dumps := make([]*dumpindex.Dump, len(paths))
	problems := make([][]error, len(paths))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, path := range paths {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			d, err := read(path)
			if err != nil {
				problems[i] = []error{fmt.Errorf("dump %s not used: %w", path, err)}
				return
			}
			dumps[i], problems[i] = d, d.Problems
		})
	}
	wg.Wait()
	return dumps, problems
}
