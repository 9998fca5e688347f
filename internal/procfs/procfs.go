// Package procfs reads what jitprof needs of /proc: a process's ids, its
// start, and the files it sees, opened as it would open them. The /proc read
// is a value (FS), the host's in the product and a directory a test made in
// the synthetic tier, so that no test depends on which pids the machine
// happens to have.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jitprof/jitprof/internal/foreign"
	"golang.org/x/sys/unix"
)

// FS is a /proc: Host, or a directory laid out as /proc is.
type FS string

// Host is the host's /proc.
const Host FS = "/proc"

// Path is /proc/PID/elem...
func (p FS) Path(pid uint32, elem ...string) string {
	return filepath.Join(append([]string{string(p), strconv.FormatUint(uint64(pid), 10)}, elem...)...)
}

// Status is what jitprof reads of /proc/PID/status.
type Status struct {
	// NSpid is the process's pid in its own pid namespace, the innermost:
	// a runtime in a container names its perf map and dump by it.
	NSpid uint32
	// Cred is who its files are opened as: its filesystem uid and gid, and
	// its groups, as this pid namespace's user namespace sees them.
	Cred foreign.Cred
}

// Status reads /proc/PID/status.
func (p FS) Status(pid uint32) (Status, error) {
	b, err := os.ReadFile(p.Path(pid, "status"))
	if err != nil {
		return Status{}, err
	}
	return ParseStatus(b)
}

// ParseStatus reads a /proc/PID/status.
func ParseStatus(status []byte) (Status, error) {
	var s Status
	var have int
	for line := range bytes.Lines(status) {
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if k := string(key); !ok || k != "NSpid" && k != "Uid" && k != "Gid" && k != "Groups" {
			continue
		}
		fields := bytes.Fields(rest)
		nums := make([]uint32, 0, len(fields))
		for _, f := range fields {
			n, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return s, fmt.Errorf("%s %q: %w", key, bytes.TrimSpace(rest), err)
			}
			nums = append(nums, uint32(n))
		}
		switch string(key) {
		case "NSpid":
			if len(nums) == 0 {
				return s, errors.New("an empty NSpid in the process's status")
			}
			s.NSpid = nums[len(nums)-1]
			have |= 1
		case "Uid", "Gid":
			// real, effective, saved, filesystem: the last opens files.
			if len(nums) != 4 {
				return s, fmt.Errorf("%s %q: not 4 ids", key, bytes.TrimSpace(rest))
			}
			if key[0] == 'U' {
				s.Cred.Uid, have = nums[3], have|2
			} else {
				s.Cred.Gid, have = nums[3], have|4
			}
		case "Groups":
			s.Cred.Groups = nums
		}
	}
	if have != 7 {
		return s, errors.New("no NSpid, Uid or Gid in the process's status")
	}
	return s, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// architecture jitprof runs on (Go has no sysconf to ask).
const clockTicks = 100

// Started returns when process pid started, in CLOCK_MONOTONIC nanoseconds
// (the clock of jitprof's recordings), to the 10 ms of /proc's clock ticks.
func (p FS) Started(pid uint32) (uint64, error) {
	ticks, err := p.startTicks(pid)
	if err != nil {
		return 0, err
	}
	return monotonic(ticks), nil
}

// monotonic is a start in /proc's clock ticks since boot in
// CLOCK_MONOTONIC nanoseconds.
func monotonic(ticks uint64) uint64 {
	// The start is in CLOCK_BOOTTIME, which also counts time suspended.
	var boot, mono unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono)
	suspended := uint64(max(0, boot.Nano()-mono.Nano()))
	return max(ticks*(1e9/clockTicks), suspended) - suspended
}

// startTicks returns when process pid started, in /proc's clock ticks
// since boot: with its pid, what tells one process from another.
func (p FS) startTicks(pid uint32) (uint64, error) {
	const startField = 22 // starttime
	f, err := p.stat(pid, startField)
	if err != nil {
		return 0, err
	}
	return f[0], nil
}

// CPUTime returns the CPU time process pid has used, user and system, to
// the 10 ms of /proc's clock ticks.
func (p FS) CPUTime(pid uint32) (time.Duration, error) {
	const utimeField = 14 // utime, then stime
	f, err := p.stat(pid, utimeField, utimeField+1)
	if err != nil {
		return 0, err
	}
	return time.Duration(f[0]+f[1]) * time.Second / clockTicks, nil
}

// stat returns the numeric fields of process pid's stat file, numbered
// from 1 as proc(5) numbers them.
func (p FS) stat(pid uint32, fields ...int) ([]uint64, error) {
	name := p.Path(pid, "stat")
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	// The command name, in parentheses, may hold anything, parentheses
	// and spaces included: the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: no ')' after the command", name)
	}
	after := bytes.Fields(b[i+1:]) // field 3 on
	values := make([]uint64, len(fields))
	for k, n := range fields {
		if n-3 >= len(after) {
			return nil, fmt.Errorf("%s: %d fields, no field %d", name, len(after)+2, n)
		}
		if values[k], err = strconv.ParseUint(string(after[n-3]), 10, 64); err != nil {
			return nil, fmt.Errorf("%s: field %d: %w", name, n, err)
		}
	}
	return values, nil
}

// tickSlack is how much later than the recording saw it a process may seem
// to have started: a clock tick, rounded up.
const tickSlack = 2e9 / clockTicks

// MountNamespace names the mount namespace of process pid, as its
// /proc/PID/ns/mnt link does (mnt:[4026531841]): two processes see the same
// files at the same paths when their names are the same.
func (p FS) MountNamespace(pid uint32) (string, error) {
	return os.Readlink(p.Path(pid, "ns", "mnt"))
}

// OwnMountNamespace is MountNamespace of the process reading p: jitprof's.
func (p FS) OwnMountNamespace() (string, error) {
	return os.Readlink(filepath.Join(string(p), "self", "ns", "mnt"))
}

// Process returns the live process pid if it is the one a recording saw at
// time seen (CLOCK_MONOTONIC): it must have started by then. Otherwise the
// pid was reused, or the process is gone, and nothing of it may be read:
// another process's root is not the recorded one's.
func (p FS) Process(pid uint32, seen uint64) (Process, error) {
	// The start checked is the one the Process keeps (Rules.Same): read
	// twice, a pid reused between the reads would pass as the first.
	ticks, err := p.startTicks(pid)
	if err != nil {
		return Process{}, err
	}
	if start := monotonic(ticks); start > seen+tickSlack {
		return Process{}, fmt.Errorf("pid %d is a process started after the recording saw it (%.3f s > %.3f s): its pid was reused", pid, float64(start)/1e9, float64(seen)/1e9)
	}
	return p.live(pid, ticks)
}

// Live returns process pid as it is now, for a caller that watches live
// processes rather than reading a recording.
func (p FS) Live(pid uint32) (Process, error) {
	ticks, err := p.startTicks(pid)
	if err != nil {
		return Process{}, err
	}
	return p.live(pid, ticks)
}

// live is process pid, which started at ticks.
func (p FS) live(pid uint32, ticks uint64) (Process, error) {
	st, err := p.Status(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{fs: p, Pid: pid, Status: st, ticks: ticks}, nil
}

// Process is a live process.
type Process struct {
	fs  FS
	Pid uint32
	Status
	ticks uint64 // when it started (startTicks): which process pid is
}

// same tells whether pid is still the process p is: one that ended may
// have left its pid to another, whose root is not p's, and whose files
// are not to be read as p's owner's.
func (p Process) same() error {
	ticks, err := p.fs.startTicks(p.Pid)
	if err == nil && ticks != p.ticks {
		err = fmt.Errorf("pid %d is another process now: the one seen has ended", p.Pid)
	}
	return err
}

// Root is the process's root directory, as this side sees it.
func (p Process) Root() string { return p.fs.Path(p.Pid, "root") }

// Open opens path as the process sees it (inside its root) and with its
// owner's credentials, under perf's rule for perf maps and dumps: the file
// must be owned by the process's owner or root, unless force.
func (p Process) Open(path string, force bool) (*os.File, error) {
	return foreign.Open(path, p.Rules(force))
}

// Rules are the rules by which a file of the process's is opened.
func (p Process) Rules(force bool) foreign.Rules {
	r := foreign.Rules{
		Root:   p.Root(),
		As:     &p.Cred,
		Owners: []uint32{p.Cred.Uid, 0},
		Force:  force,
	}
	if p.fs != "" { // made by FS.Process or FS.Live, not a test's literal
		r.Same = p.same
	}
	return r
}
