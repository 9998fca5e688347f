package jitcode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

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
// process's dump is in use they would hide its functions; perf drops them.
// Shared anonymous memory is "/dev/zero (deleted)": PHP's opcache keeps its
// JIT buffer there and re-protects it after every compilation, which the
// kernel announces as a new mapping of the whole buffer; perf does not drop
// those, and loses PHP's functions to them.
func IsAnonymous(filename string) bool {
	return strings.HasPrefix(filename, "//anon") || strings.HasPrefix(filename, "[anon:") || strings.HasPrefix(filename, "/memfd:") || strings.HasPrefix(filename, "/dev/zero")
}

// Locate finds a dump at the path the recording saw, or by its name in dirs.
func Locate(path string, dirs []string) (string, error) {
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
	return "", fmt.Errorf("dump %s not found there nor in %s; its functions stay unnamed", path, strings.Join(dirs, ", "))
}

// PerfTime returns a timestamp of d in perf's clock: as it is, unless d has
// architecture timestamps (the TSC), which are converted with the
// recording's TIME_CONV parameters as perf does. Without them (conv nil)
// it is returned as it is.
func (d *Dump) PerfTime(t uint64, conv *perfdata.TimeConv) uint64 {
	if d.Header.Flags&jitdump.FlagArchTimestamp == 0 || conv == nil || conv.TimeMult == 0 {
		return t
	}
	if conv.CapUserTimeShort {
		t = conv.TimeCycles + ((t - conv.TimeCycles) & conv.TimeMask)
	}
	quot := t >> conv.TimeShift
	rem := t & (1<<conv.TimeShift - 1)
	return conv.TimeZero + quot*conv.TimeMult + (rem*conv.TimeMult)>>conv.TimeShift
}

// ReadAll reads the dumps a recording saw at paths, a few at a time, each
// found with Locate. The result is in the order of paths, nil where a dump
// could not be found or read; those reasons, and the problems of the dumps
// read, go to warn, one call at a time, in the order of paths.
func ReadAll(paths, dirs []string, warn func(error)) []*Dump {
	dumps := make([]*Dump, len(paths))
	problems := make([][]error, len(paths))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, path := range paths {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			at, err := Locate(path, dirs)
			if err != nil {
				problems[i] = []error{err}
				return
			}
			d, err := Read(at)
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
