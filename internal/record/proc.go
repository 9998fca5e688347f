package record

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
)

// This file describes what already exists when recording starts (threads,
// their names, executable mappings, the kernel) as records, from /proc, as
// perf record synthesizes them for -p and -a. The records have time 0, so
// readers place them before everything the kernel reports.

// synthesizer writes the records it makes with emit, attributed to attr.
type synthesizer struct {
	proc procfs.FS
	attr *perfdata.Attr
	emit func(perfdata.Record) error
}

// process describes process pid: a COMM for each thread, a FORK tying each
// thread but the first to it, and an MMAP2 for each executable mapping,
// jitdump markers included (and each readable one, for an attr with
// AttrMmapData). A process gone before it could be read gives
// an error matching ErrGone.
func (s *synthesizer) process(pid int) error {
	p := uint32(pid)
	tasks, err := os.ReadDir(s.proc.Path(p, "task"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("process %d: %w", pid, ErrGone)
		}
		return fmt.Errorf("process %d: %w", pid, err)
	}
	for _, task := range tasks {
		tid, err := strconv.ParseUint(task.Name(), 10, 32)
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(s.proc.Path(p, "task", task.Name(), "comm"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		t := uint32(tid)
		if err := s.emit(&perfdata.Comm{RecordHeader: s.header(perfdata.TypeComm, 0), Pid: p, Tid: t,
			Comm: strings.TrimSuffix(string(comm), "\n"), Trailer: perfdata.Trailer{Pid: p, Tid: t}}); err != nil {
			return err
		}
		if t == p {
			continue
		}
		if err := s.emit(&perfdata.Task{RecordHeader: s.header(perfdata.TypeFork, 0), Pid: p, PPid: p, Tid: t, PTid: p,
			Trailer: perfdata.Trailer{Pid: p, Tid: t}}); err != nil {
			return err
		}
	}
	ms, err := s.proc.Maps(p)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	for _, m := range ms {
		misc := uint16(perfdata.MiscUser)
		if m.Prot&unix.PROT_EXEC == 0 {
			// Samples land in code only; readable data only matters to
			// an event that records data mappings (a DWARF call
			// graph's unwind tables), as in perf's synthesis.
			if s.attr.Flags&perfdata.AttrMmapData == 0 || m.Prot&unix.PROT_READ == 0 {
				continue
			}
			misc |= perfdata.MiscMmapData
		}
		if err := s.emit(mmap2Of(s.attr, p, m, misc, 0)); err != nil {
			return err
		}
	}
	return nil
}

// mmap2Of is an MMAP2 record of process p's mapping m, at time t.
func mmap2Of(attr *perfdata.Attr, p uint32, m procfs.Mapping, misc uint16, t uint64) *perfdata.Mmap2 {
	return &perfdata.Mmap2{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeMmap2, Misc: misc, Attr: attr}, Pid: p, Tid: p,
		Addr: m.Start, Len: m.End - m.Start, Pgoff: m.Pgoff, Maj: m.Maj, Min: m.Min, Ino: m.Ino,
		Prot: m.Prot, Flags: m.Flags, Filename: m.Name, Trailer: perfdata.Trailer{Pid: p, Tid: p, Time: t}}
}

// Markers returns an MMAP2 of each jitdump marker process pid maps now,
// at time t, attributed to attr: for a JVM the agent was loaded into whose
// marker the kernel lost (JavaAttacher.TakeLoaded). A process gone gives
// an error matching ErrGone.
func Markers(proc procfs.FS, attr *perfdata.Attr, pid uint32, t uint64) ([]*perfdata.Mmap2, error) {
	if proc == "" {
		proc = procfs.Host
	}
	ms, err := proc.Maps(pid)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	if err != nil {
		return nil, err
	}
	var out []*perfdata.Mmap2
	for _, m := range ms {
		if jitsources.IsMarker(m.Name) {
			out = append(out, mmap2Of(attr, pid, m, perfdata.MiscUser, t))
		}
	}
	return out, nil
}

func (s *synthesizer) header(t perfdata.RecordType, misc uint16) perfdata.RecordHeader {
	return perfdata.RecordHeader{Type: t, Misc: misc, Attr: s.attr}
}

// processes lists the pids /proc has.
func (s *synthesizer) processes() ([]int, error) {
	return numbered(string(s.proc))
}

// threads lists the threads of process pid.
func (s *synthesizer) threads(pid int) ([]int, error) {
	tids, err := numbered(s.proc.Path(uint32(pid), "task"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrGone)
	}
	return tids, err
}

// numbered lists the entries of dir named by a number: pids in /proc, tids
// in a task directory.
func numbered(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var ns []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			ns = append(ns, n)
		}
	}
	return ns, nil
}

// kernel describes the kernel's text as perf does, an MMAP of
// [kernel.kallsyms]_text for pid -1, so that perf report names kernel
// samples. Without addresses in /proc/kallsyms (kptr_restrict) it writes
// nothing: kernel samples then stay unnamed, as in perf.
func (s *synthesizer) kernel() error {
	f, err := os.Open(filepath.Join(string(s.proc), "kallsyms"))
	if err != nil {
		return nil
	}
	defer f.Close()
	text, etext := kernelText(f)
	if text == 0 {
		return nil
	}
	size := etext - text
	if etext <= text {
		size = math.MaxUint64 - text
	}
	return s.emit(&perfdata.Mmap{RecordHeader: s.header(perfdata.TypeMmap, perfdata.MiscKernel), Pid: math.MaxUint32,
		Addr: text, Len: size, Pgoff: text, Filename: "[kernel.kallsyms]_text"})
}

// kernelText finds the addresses of _text and _etext in a kallsyms list.
func kernelText(f *os.File) (text, etext uint64) {
	sc := bufio.NewScanner(f)
	for sc.Scan() && (text == 0 || etext == 0) {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 3 {
			continue
		}
		var p *uint64
		switch string(fields[2]) {
		case "_text":
			p = &text
		case "_etext":
			p = &etext
		default:
			continue
		}
		*p, _ = strconv.ParseUint(string(fields[0]), 16, 64)
	}
	return text, etext
}
