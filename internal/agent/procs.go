package agent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/otlpprof"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/internal/runtimes"
	"github.com/jitprof/jitprof/perfdata"
)

// A window's perf.data holds only the records of its own seconds, so each
// process's state from before (its threads' names and the code it has
// mapped, jitdump markers included) is kept here and written at the head
// of every window. A process is kept until it exits: its last window is
// the one its EXIT record falls in, and the state goes at that cut.

// proc is what is kept of a live process.
type proc struct {
	comms  map[uint32]*perfdata.Comm // by tid
	maps   []*perfdata.Mmap2         // its code now, no two overlapping
	info   otlpprof.Process
	cgroup string // /proc/PID/cgroup, as last read
	exited bool
}

// tracker keeps every live process's state from the stream's records.
type tracker struct {
	procs  map[uint32]*proc
	kernel []perfdata.Record // the kernel's text, described once
	// proc is the /proc read for what a process's resource says.
	procFS procfs.FS
}

func newTracker() *tracker {
	return &tracker{procs: make(map[uint32]*proc), procFS: procfs.Host}
}

func (t *tracker) proc(pid uint32) *proc {
	p := t.procs[pid]
	if p == nil {
		p = &proc{comms: make(map[uint32]*perfdata.Comm), info: otlpprof.Process{Pid: pid}}
		t.procs[pid] = p
	}
	return p
}

// own returns a copy of a decoded record that outlives the decoder's
// buffers, and its time; nil for a record the state does not use.
func own(rec perfdata.Record) (perfdata.Record, uint64) {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		c := *r
		c.Raw, c.Filename = nil, strings.Clone(r.Filename)
		return &c, c.Trailer.Time
	case *perfdata.Mmap2:
		c := *r
		c.Raw, c.Filename, c.BuildID = nil, strings.Clone(r.Filename), bytes.Clone(r.BuildID)
		return &c, c.Trailer.Time
	case *perfdata.Comm:
		c := *r
		c.Raw, c.Comm = nil, strings.Clone(r.Comm)
		return &c, c.Trailer.Time
	case *perfdata.Task:
		c := *r
		c.Raw = nil
		return &c, c.Time
	}
	return nil, 0
}

// apply changes the state as a record that own returned says. Records
// must come in time order: each CPU's ring buffer is in order, but a
// drain reads them one after the other, so the caller sorts (a child's
// exec read before its fork would lose the exec).
func (t *tracker) apply(rec perfdata.Record) {
	switch r := rec.(type) {
	case *perfdata.Mmap:
		if r.Pid == math.MaxUint32 {
			t.kernel = append(t.kernel[:0], r)
		}
	case *perfdata.Mmap2:
		if r.Pid == math.MaxUint32 {
			return
		}
		p := t.proc(r.Pid)
		p.maps = place(p.maps, r)
	case *perfdata.Comm:
		p := t.proc(r.Pid)
		if r.Misc&perfdata.MiscCommExec != 0 && r.Pid == r.Tid {
			// exec replaced the image and ended the other threads.
			p.maps = nil
			clear(p.comms)
		}
		p.comms[r.Tid] = r
		if r.Pid == r.Tid {
			t.describe(p, r.Pid, r.Comm)
		}
	case *perfdata.Task:
		t.task(r)
	}
}

// task applies a FORK or EXIT.
func (t *tracker) task(r *perfdata.Task) {
	if r.Type == perfdata.TypeExit {
		p := t.procs[r.Pid]
		switch {
		case p == nil:
		case r.Pid == r.Tid:
			p.exited = true
		default:
			delete(p.comms, r.Tid)
		}
		return
	}
	parent := t.procs[r.PPid]
	if r.Pid != r.PPid { // a new process: a copy of its parent
		delete(t.procs, r.Pid) // an older process of that pid is gone
		child := t.proc(r.Pid)
		if parent != nil {
			for _, m := range parent.maps {
				c := *m
				c.Pid, c.Tid = r.Pid, r.Tid
				child.maps = append(child.maps, &c)
			}
			child.info = parent.info
			child.info.Pid = r.Pid
		}
		if pc := parentComm(parent, r.PTid); pc != nil {
			c := *pc
			c.Pid, c.Tid, c.Misc, c.Trailer.Pid, c.Trailer.Tid, c.Trailer.Time = r.Pid, r.Tid, 0, r.Pid, r.Tid, r.Time
			child.comms[r.Tid] = &c
		}
		return
	}
	if parent == nil {
		return
	}
	if pc := parentComm(parent, r.PTid); pc != nil { // a new thread starts with the name of the one that made it
		c := *pc
		c.Tid, c.Misc, c.Trailer.Tid, c.Trailer.Time = r.Tid, 0, r.Tid, r.Time
		parent.comms[r.Tid] = &c
	}
}

func parentComm(p *proc, tid uint32) *perfdata.Comm {
	if p == nil {
		return nil
	}
	if c := p.comms[tid]; c != nil {
		return c
	}
	for _, c := range p.comms {
		if c.Pid == c.Tid {
			return c
		}
	}
	return nil
}

// place adds m to maps, cutting what it overlaps out of the older
// mappings, as the kernel replaces them.
func place(maps []*perfdata.Mmap2, m *perfdata.Mmap2) []*perfdata.Mmap2 {
	start, end := m.Addr, m.Addr+m.Len
	out := maps[:0]
	var tail []*perfdata.Mmap2
	for _, o := range maps {
		os, oe := o.Addr, o.Addr+o.Len
		if oe <= start || os >= end {
			out = append(out, o)
			continue
		}
		if os < start {
			left := *o
			left.Len = start - os
			tail = append(tail, &left)
		}
		if oe > end {
			right := *o
			right.Addr, right.Len = end, oe-end
			if !isAnon(o.Filename) {
				right.Pgoff += end - os
			}
			tail = append(tail, &right)
		}
	}
	out = append(out, tail...)
	return append(out, m)
}

func isAnon(name string) bool {
	return strings.HasPrefix(name, "//anon") || strings.HasPrefix(name, "[")
}

// markers returns the paths of the dumps a live process marked.
func (p *proc) markers() []string {
	var paths []string
	for _, m := range p.maps {
		if jitsources.IsMarker(m.Filename) {
			paths = append(paths, m.Filename)
		}
	}
	return paths
}

// records writes the state of every live process, the kernel first, as
// the head of a window's perf.data.
func (t *tracker) records(emit func(perfdata.Record) error) error {
	for _, k := range t.kernel {
		if err := emit(k); err != nil {
			return err
		}
	}
	for _, pid := range slices.Sorted(maps.Keys(t.procs)) {
		p := t.procs[pid]
		for _, tid := range slices.Sorted(maps.Keys(p.comms)) {
			if err := emit(p.comms[tid]); err != nil {
				return err
			}
		}
		for _, m := range p.maps {
			if err := emit(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// cut ends a window: it returns what the window's resources say of every
// process it knew, the dumps of the live processes sampled in it, when
// cgroup is set, which sampled processes are in that cgroup, and the
// processes that exited in the window, which it drops.
func (t *tracker) cut(sampled map[uint32]bool, cgroup string) (infos map[uint32]otlpprof.Process, waits []dumpWait, inCgroup, exited []uint32) {
	infos = make(map[uint32]otlpprof.Process, len(t.procs))
	for pid, p := range t.procs {
		if sampled[pid] && cgroup != "" {
			if !p.exited { // moved since its exec, maybe, as container runtimes do
				t.readCgroup(p, pid)
			}
			if underCgroup(p.cgroup, cgroup) {
				inCgroup = append(inCgroup, pid)
			}
		}
		infos[pid] = p.info
		if p.exited {
			delete(t.procs, pid)
			exited = append(exited, pid)
			continue
		}
		if sampled[pid] {
			for _, path := range p.markers() {
				waits = append(waits, dumpWait{pid: pid, path: path})
			}
		}
	}
	slices.Sort(inCgroup)
	return infos, waits, inCgroup, exited
}

// readCgroup reads which cgroups a process is in.
func (t *tracker) readCgroup(p *proc, pid uint32) {
	if b, err := os.ReadFile(t.procFS.Path(pid, "cgroup")); err == nil {
		p.cgroup = string(b)
		p.info.ContainerID = containerID(b)
	}
}

// underCgroup tells whether /proc/PID/cgroup's lines (id:controllers:path)
// put the process in cgroup path or below it, in any hierarchy.
func underCgroup(procCgroup, path string) bool {
	path = strings.TrimSuffix(path, "/")
	for line := range strings.Lines(procCgroup) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) == 3 && (parts[2] == path || strings.HasPrefix(parts[2], path+"/") || path == "") {
			return true
		}
	}
	return false
}

// describe reads what a process's resource says of it, at its exec or
// when first seen: later the process may be gone.
func (t *tracker) describe(p *proc, pid uint32, comm string) {
	p.info.Pid, p.info.Comm = pid, comm
	if exe, err := os.Readlink(t.procFS.Path(pid, "exe")); err == nil {
		p.info.Executable = exe
	}
	if b, err := os.ReadFile(t.procFS.Path(pid, "cmdline")); err == nil && len(b) > 0 {
		p.info.CommandLine = strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
	}
	t.readCgroup(p, pid)
	if r := runtimes.Of(p.info.Executable, comm); r != nil {
		p.info.Runtime = r.Name
	}
}

var containerIDPattern = regexp.MustCompile(`[0-9a-f]{64}`)

// containerID finds a container's id in /proc/PID/cgroup: docker,
// containerd and CRI-O name the cgroup after it (docker-<id>.scope,
// /docker/<id>, cri-containerd-<id>.scope, crio-<id>.scope).
func containerID(cgroup []byte) string {
	for _, line := range bytes.Split(cgroup, []byte("\n")) {
		if id := containerIDPattern.Find(line); id != nil {
			return string(id)
		}
	}
	return ""
}

// decoder decodes single raw records with perfdata's own decoder: each is
// fed to a pipe-mode Reader that knows the stream's event.
type decoder struct {
	feed feed
	r    *perfdata.Reader
}

type feed struct{ b []byte }

func (f *feed) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, errEmpty
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

var errEmpty = fmt.Errorf("no record fed")

func newDecoder(attr *perfdata.Attr) (*decoder, error) {
	d := &decoder{}
	head := binary.LittleEndian.AppendUint64(nil, perfdata.Magic)
	head = binary.LittleEndian.AppendUint64(head, perfdata.PipeHeaderSize)
	head, err := perfdata.AppendRecord(head, &perfdata.AttrRecord{RecordHeader: perfdata.RecordHeader{Type: perfdata.TypeHeaderAttr}, Attr: attr})
	if err != nil {
		return nil, err
	}
	d.feed.b = head
	if d.r, err = perfdata.NewPipeReader(&d.feed); err != nil {
		return nil, err
	}
	if _, err := d.r.NextRaw(); err != nil {
		return nil, err
	}
	// What is kept of a record is copied, strings cloned, so samples,
	// decoded for their pid, cost no allocation.
	d.r.ReuseRecord = true
	return d, nil
}

// decode returns rec decoded; an *perfdata.Invalid for a record that does
// not decode.
func (d *decoder) decode(rec []byte) (perfdata.Record, error) {
	d.feed.b = rec
	raw, err := d.r.NextRaw()
	if err != nil {
		return nil, err
	}
	return d.r.Decode(raw), nil
}
