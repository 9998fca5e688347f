// Package symbolize names the code at an address of a recorded process as
// it was at any moment of the recording.
//
// A Space is built from one pass over a perf.data recording: the mappings
// of files (MMAP, MMAP2), forks and execs, and the functions that JIT
// runtimes described in the jitdump files the recording's marker mappings
// point to, loaded and moved at their own times. Each process gets a
// timeline of regions: a function loaded over an old one's place retires
// it, a moved function leaves its old place. Lookup then answers for any
// (pid, address, time): a jitted function with its source lines, a symbol
// of an ELF file (perf's rules, build-ids checked, separate debug files
// found), a perf map's entry (perf-<pid>.map: each line holds from when
// jitprof record saw it appear, or, when that is not known, the latest line
// wins), the vDSO or a kernel symbol (/proc/kallsyms).
//
// A built Space is not changed again except for symbol tables loaded on
// first use, behind sync.Once, so Lookup may be called from many
// goroutines.
package symbolize

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/unwind"
	"github.com/jitprof/jitprof/perfdata"
	"github.com/jitprof/jitprof/perfmap"
	"golang.org/x/sys/unix"
)

// Kind says what a Module is.
type Kind uint8

const (
	ELF     Kind = iota // a file mapped from disk
	JIT                 // the functions of a jitdump file
	PerfMap             // a perf map, perf-<pid>.map
	Kernel              // the kernel, named by /proc/kallsyms
	VDSO                // the kernel's vDSO
	Anon                // memory that no file, dump or map describes
)

// The names of the modules that are not files, as perf names them.
const (
	KernelName = contract.KernelFile
	VDSOName   = contract.VDSOFile
)

// Module is what holds code: a file, a dump, a perf map, the kernel.
type Module struct {
	// Name is the recorded path, the dump's or perf map's path, or one
	// of perf's names: [kernel.kallsyms], [vdso], //anon, [heap]...
	Name    string
	Kind    Kind
	BuildID []byte           // as the recording gives it; nil when it does not
	Dump    *jitsources.Dump // for JIT
	// File is, for an ELF file without a build-id, the device and inode
	// the kernel recorded it by (MMAP2): the file at Name must be that
	// one to be read (elfsym.File.Is).
	File elfsym.FileID

	// ns is, for an ELF file mapped by a running process in a mount
	// namespace of its own (a container), that namespace
	// (jitsources.Host.MountNamespace): the file is its root's, read
	// there while pid, which mapped it first at time seen, runs; each
	// namespace's file is a module of its own, so that no container's
	// root (its file or its debug files) names another's samples.
	ns        string
	pid       uint32
	seen      uint64
	whereOnce sync.Once
	at        func(string) foreign.Path // where the file and its debug files are read: Space.where

	otherOnce sync.Once // warns of a file at Name that is another

	id      uint32 // in Space.byID, for the modules a timeline places
	load    sync.Once
	table   *elfsym.Table   // nil when there is none, or it could not be used
	perfMap timeline        // for PerfMap: its entries, placed at their times
	entries []perfmap.Entry // for PerfMap: the map's lines

	unwindOnce sync.Once
	unwind     *unwind.Table // nil when the file has none, or it could not be used
}

// FileBuildID is the build-id m's file is known by: the recorded one,
// else, once a lookup has read its symbols, that of the file read, which
// was the one the recording saw (by its device and inode); nil when
// neither says. A profile's mapping carries it, so that whatever reads the
// file later (objtool) can tell another file at its path.
func (m *Module) FileBuildID() []byte {
	if m.BuildID == nil && m.Kind == ELF && m.table != nil {
		return m.table.BuildID()
	}
	return m.BuildID
}

// Stripped tells whether m is an ELF file whose symbols, as read for
// lookups, are only its dynamic ones (see elfsym.Table.Stripped).
func (m *Module) Stripped() bool {
	return m.Kind == ELF && m.table != nil && m.table.Stripped()
}

// Symbol is a function, at its runtime addresses.
type Symbol struct {
	Name       string // as its source gives it, mangled or not
	Start, End uint64
	JIT        *dumpindex.Code // for a jitted function: its code and lines
	// Function is a jitted function's place in its dump's Functions: a
	// small dense number to key the function by.
	Function uint32
}

// Frame is what Lookup found at an address.
type Frame struct {
	Addr   uint64
	Module *Module // nil when no mapping held the address
	Symbol Symbol  // Name is empty when nothing named the address
	// Map is the mapping that held the address, for the modules placed
	// in a process's timeline (ELF files, the vDSO, jitted functions): its
	// runtime range and the offset of its start in the module.
	Map struct{ Start, End, Pgoff uint64 }
	// From and Until bound the times for which this answer holds, for
	// callers that cache it: [From, Until).
	From, Until uint64
}

// LoadAddr returns where addr, an address of the jitted function s, was
// when the function was loaded: the addresses of its line table, whatever
// moves followed.
func (s Symbol) LoadAddr(addr uint64) uint64 { return addr - s.Start + s.JIT.CodeAddr }

// Options says where to look for what a recording refers to.
type Options struct {
	// DumpDirs and PerfMapDirs are searched for dumps and perf maps not
	// found where the recording saw them.
	DumpDirs, PerfMapDirs []string
	// Warn receives what is wrong but does not stop the build: a dump
	// not found, a dump cut short, a file whose build-id differs.
	Warn func(error)
	// Files, when set, holds copies of the files the recording's samples
	// hit, as an archive brings them to another machine.
	Files *contract.Files
	// Tables, when set, keeps symbol tables for the Spaces built after
	// this one: Close leaves them open.
	Tables *TableCache
	// Dumps, when set, keeps the dumps for the Spaces built after this
	// one, extended with what their runtimes appended rather than read
	// again: Close leaves them open.
	Dumps *jitsources.DumpCache
	// Host says where the recorded processes that still run are, and how
	// far their dumps and perf maps are trusted.
	Host jitsources.Host
	// Pids, when set, are the processes whose jitted code is wanted: the
	// dumps others marked are not read (a profile of some processes of a
	// machine that runs many JITs need not hold them all in memory).
	Pids []uint32
}

// Space is the address spaces of the recorded processes over time.
type Space struct {
	procs  map[uint32]*process
	comms  map[uint32][]comm // by tid, in time order
	kernel *Module
	vdso   *Module
	anon   *Module
	opts   Options
	dumps  []*Module
	// byID are the modules the processes' timelines place.
	byID []*Module
	jit  *jitsources.Recording
	// tables are the symbol tables loaded, for Close.
	tables   []*elfsym.Table
	tablesMu sync.Mutex
	// sameKernel tells that the recording was made on the running
	// kernel, whose kallsyms and vDSO are then the recorded ones.
	sameKernel bool
	unwind     unwindTables
}

// moduleKey tells modules apart: one path may have been different files
// in different processes (containers, mount namespaces), each the one its
// mappings name. A build-id says which alone; without one the device and
// inode do.
type moduleKey struct {
	name    string
	buildID string
	file    elfsym.FileID
	ns      string // Module.ns
}

type process struct {
	timeline
	pid     uint32
	perfMap *Module // loaded on first use
	mapOnce sync.Once
}

type comm struct {
	time uint64
	name string
}

// event is a change of an address space, applied in time order.
type event struct {
	time  uint64
	order int64 // for ties: the record's offset in the recording, or after them in the dump's order
	pid   uint32
	kind  eventKind
	r     region // for mmap and JIT events
	ppid  uint32 // for fork
}

type eventKind uint8

// miscForkExec marks, in a FORK record, the ones perf synthesizes for the
// processes running when it starts (PERF_RECORD_MISC_FORK_EXEC).
const miscForkExec = 1 << 13

const (
	evMap eventKind = iota
	evLoad
	evMove
	evFork
	evExec
)

// builder holds what Build gathers before it places anything.
type builder struct {
	*Space
	idOf    map[string][]byte // build-ids of the recording's build-id table
	modules map[moduleKey]*Module
	events  []event
	began   uint64            // jitsources.Began
	ns      map[uint32]string // each pid's mount namespace, as Module.ns
}

// Build reads the records of r (from where it is to the end) and returns
// the address spaces they describe. A record that cannot be read ends the
// build with an error; a dump that cannot be used is reported to
// opts.Warn and its functions stay unnamed.
func Build(r *perfdata.Reader, opts Options) (*Space, error) {
	if opts.Warn == nil {
		opts.Warn = func(error) {}
	}
	b := builder{Space: &Space{
		procs:  make(map[uint32]*process),
		comms:  make(map[uint32][]comm),
		kernel: &Module{Name: KernelName, Kind: Kernel},
		vdso:   &Module{Name: VDSOName, Kind: VDSO},
		anon:   &Module{Name: "//anon", Kind: Anon},
		opts:   opts,
	}}
	b.add(b.vdso)
	b.add(b.anon)
	b.sameKernel = recordedOnThisKernel(r)
	b.began, b.ns = jitsources.Began(r), make(map[uint32]string)
	// Perf maps and the files of containers are looked for, in live
	// processes, under the same rule as dumps (Recording.RecordedElsewhere).
	b.opts.Host.Elsewhere = cmp.Or(opts.Host.Elsewhere, jitsources.Elsewhere(r))
	buildIDs, err := r.BuildIDs()
	if err != nil {
		return nil, err
	}
	b.modules = make(map[moduleKey]*Module)
	b.idOf = make(map[string][]byte, len(buildIDs))
	for _, id := range buildIDs {
		b.idOf[strings.Clone(id.Filename)] = bytes.Clone(id.ID)
	}
	if b.jit, err = jitsources.Scan(r, b.record); err != nil {
		return nil, err
	}
	if len(opts.Pids) > 0 {
		b.jit.Markers = slices.DeleteFunc(b.jit.Markers, func(m jitsources.Marker) bool { return !slices.Contains(opts.Pids, m.Pid) })
	}
	b.jit.Cache = opts.Dumps
	b.jit.Host = opts.Host
	b.jit.Load(opts.DumpDirs, opts.Warn)
	slices.SortStableFunc(b.events, func(x, y event) int {
		if c := cmp.Compare(x.time, y.time); c != 0 {
			return c
		}
		return cmp.Compare(x.order, y.order)
	})
	b.applyAll()
	for _, p := range b.procs {
		p.index()
	}
	for _, c := range b.comms {
		slices.SortStableFunc(c, func(x, y comm) int { return cmp.Compare(x.time, y.time) })
	}
	return b.Space, nil
}

// record gathers an event of the recording: a mapping, fork or exec, or
// the name of a thread.
func (b *builder) record(rec perfdata.Record, offset int64) {
	switch rec := rec.(type) {
	case *perfdata.Mmap, *perfdata.Mmap2:
		b.mapping(offset, jitsources.Mapping(rec))
	case *perfdata.Comm:
		b.comms[rec.Tid] = append(b.comms[rec.Tid], comm{rec.Trailer.Time, strings.Clone(rec.Comm)})
		if rec.Misc&perfdata.MiscCommExec != 0 && rec.Pid == rec.Tid {
			b.events = append(b.events, event{time: rec.Trailer.Time, order: offset, pid: rec.Pid, kind: evExec})
		}
	case *perfdata.Task:
		// A new thread or process starts with its parent's name.
		if c := b.comms[rec.PTid]; len(c) > 0 && len(b.comms[rec.Tid]) == 0 {
			b.comms[rec.Tid] = []comm{{rec.Time, c[len(c)-1].name}}
		}
		if rec.Pid != rec.PPid { // a thread shares its process's address space
			ev := event{time: rec.Time, order: offset, pid: rec.Pid, ppid: rec.PPid, kind: evFork}
			if rec.Misc&miscForkExec != 0 {
				// perf's own description of a process that ran before it
				// started: its mappings follow, and perf copies none of
				// the parent's.
				ev.kind = evExec
			}
			b.events = append(b.events, ev)
		}
	}
}

// mapping records a mapping of a file into a process.
func (b *builder) mapping(offset int64, mi jitsources.MappingInfo) {
	if mi.Pid == math.MaxUint32 || mi.Misc&perfdata.MiscMmapData != 0 || mi.Addr+mi.Len < mi.Addr {
		return // the kernel's (kallsyms names it), or data samples never land in
	}
	buildID := mi.BuildID
	if buildID == nil {
		buildID = b.idOf[mi.Filename]
	}
	var m *Module
	switch {
	case jitsources.IsAnonymous(mi.Filename):
		m = b.anon
	case mi.Filename == "[vdso]":
		m = b.vdso
	default:
		var file elfsym.FileID
		if buildID == nil {
			file = elfsym.FileID{Major: mi.Maj, Minor: mi.Min, Ino: mi.Ino}
		}
		seen := cmp.Or(mi.Trailer.Time, b.began)
		ns, ok := b.ns[mi.Pid]
		if !ok {
			ns = b.opts.Host.MountNamespace(mi.Pid, seen)
			b.ns[mi.Pid] = ns
		}
		key := moduleKey{mi.Filename, string(buildID), file, ns}
		if m = b.modules[key]; m == nil {
			key.name = strings.Clone(mi.Filename) // outlives the recording's mapping
			m = &Module{Name: key.name, Kind: ELF, BuildID: bytes.Clone(buildID), File: file, ns: ns, pid: mi.Pid, seen: seen}
			b.modules[key] = m
			b.add(m)
		}
	}
	b.events = append(b.events, event{time: mi.Trailer.Time, order: offset, pid: mi.Pid, kind: evMap,
		r: region{start: mi.Addr, end: mi.Addr + mi.Len, pgoff: mi.Pgoff, module: m.id}})
}

// applyAll applies the recording's events, sorted, and the loads and moves
// of the dumps in use, at the pid that marked each (the recorded one, also
// when the runtime ran in another pid namespace), in time order. At equal
// times a dump's come after the recording's own events and the dumps
// before it, in the dump's order.
//
// The dumps' events are merged in as they are, not copied: a dump may hold
// millions of functions. Each process's regions are sized once for all
// its events.
func (b *builder) applyAll() {
	sources := make([]*eventSource, 0, len(b.jit.Dumps)+1)
	if own := (&eventSource{events: b.events}); own.advance() {
		sources = append(sources, own)
	}
	room := make(map[uint32]int)
	for _, ev := range b.events {
		room[ev.pid]++
	}
	for _, d := range b.jit.Dumps {
		mod := &Module{Name: d.Path, Kind: JIT, Dump: d}
		b.add(mod)
		b.dumps = append(b.dumps, mod)
		room[d.Pid] += d.EventCount()
		if src := newDumpSource(d, mod, len(sources)); src != nil {
			sources = append(sources, src)
		}
	}
	for pid, n := range room {
		p := b.proc(pid)
		p.regions = slices.Grow(p.regions, n)
	}
	h := eventHeap(sources)
	heap.Init(&h)
	for len(h) > 0 {
		src := h[0]
		b.apply(src.head)
		if src.advance() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	b.events = nil
}

// eventSource is a sequence of events in time order: the recording's, or
// a dump's. Its head is the next.
type eventSource struct {
	head event
	// rank orders sources at equal times: the recording's first, then
	// the dumps in order.
	rank   int
	events []event // the recording's
	// A dump's: its events in file order, or, if some are out of time
	// order, all of them sorted (stable).
	next   func() (dumpindex.Event, bool)
	stop   func()
	sorted []dumpindex.Event
	dump   *jitsources.Dump
	mod    *Module
}

// newDumpSource returns the source of d's events with code (an empty
// function cannot be sampled), or nil when it has none.
func newDumpSource(d *jitsources.Dump, mod *Module, rank int) *eventSource {
	src := &eventSource{rank: rank, dump: d, mod: mod}
	last, inOrder := uint64(0), true
	for _, e := range d.Events() {
		t := d.PerfTime(e.Time)
		inOrder = inOrder && t >= last
		last = t
	}
	if inOrder {
		next, stop := iter.Pull2(d.Events())
		src.next = func() (dumpindex.Event, bool) {
			_, e, ok := next()
			return e, ok
		}
		src.stop = stop
	} else {
		src.sorted = make([]dumpindex.Event, 0, d.EventCount())
		for _, e := range d.Events() {
			src.sorted = append(src.sorted, e)
		}
		slices.SortStableFunc(src.sorted, func(x, y dumpindex.Event) int { return cmp.Compare(d.PerfTime(x.Time), d.PerfTime(y.Time)) })
		src.next = func() (dumpindex.Event, bool) {
			if len(src.sorted) == 0 {
				return dumpindex.Event{}, false
			}
			e := src.sorted[0]
			src.sorted = src.sorted[1:]
			return e, true
		}
	}
	if !src.advance() {
		return nil
	}
	return src
}

// advance moves src's head to its next event, and tells whether there was
// one.
func (src *eventSource) advance() bool {
	if src.next == nil {
		if len(src.events) == 0 {
			return false
		}
		src.head, src.events = src.events[0], src.events[1:]
		return true
	}
	for {
		e, ok := src.next()
		if !ok {
			if src.stop != nil {
				src.stop()
			}
			return false
		}
		if e.Code.CodeSize == 0 {
			continue // nothing can be sampled in it
		}
		src.head = event{time: src.dump.PerfTime(e.Time), pid: src.dump.Pid, kind: evLoad,
			r: region{start: e.Addr, end: e.Addr + e.Code.CodeSize, module: src.mod.id, index: uint32(e.Function)}}
		if e.Move {
			src.head.kind = evMove
		}
		return true
	}
}

// eventHeap orders sources by their heads' times, then their ranks.
type eventHeap []*eventSource

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].head.time != h[j].head.time {
		return h[i].head.time < h[j].head.time
	}
	return h[i].rank < h[j].rank
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*eventSource)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// add gives m its id among the modules the timelines place.
func (s *Space) add(m *Module) {
	m.id = uint32(len(s.byID))
	s.byID = append(s.byID, m)
}

func (s *Space) proc(pid uint32) *process {
	p := s.procs[pid]
	if p == nil {
		p = &process{pid: pid}
		s.procs[pid] = p
	}
	return p
}

// apply changes an address space as ev says.
func (b *builder) apply(ev event) {
	p := b.proc(ev.pid)
	r := ev.r
	r.from, r.until = ev.time, forever
	switch ev.kind {
	case evMap:
		if m := b.byID[r.module]; m.Kind == Anon && b.jit.Hides(ev.pid, ev.time, m.Name) {
			return
		}
		p.place(r)
	case evLoad:
		p.place(r)
	case evMove:
		p.retire(ev.time, func(old *region) bool { return old.module == r.module && old.index == r.index })
		p.place(r)
	case evFork:
		// The child is a copy of its parent: nothing stays of an exited
		// process that had its pid, as perf has it.
		p.retire(ev.time, func(*region) bool { return true })
		if parent := b.procs[ev.ppid]; parent != nil {
			p.inherit(&parent.timeline, ev.time)
		}
	case evExec:
		p.retire(ev.time, func(*region) bool { return true })
	}
}

// recordedOnThisKernel tells whether r was recorded on the running kernel,
// by its release.
func recordedOnThisKernel(r *perfdata.Reader) bool {
	release, ok, err := r.StringFeature(perfdata.FeatureOSRelease)
	if err != nil || !ok {
		return false
	}
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return release == unix.ByteSliceToString(u.Release[:])
}

// Lookup returns what held addr in process pid at time t (perf's clock);
// kernel says addr is a kernel address. A recording without times asks
// with t = math.MaxUint64 - 1: the last state of each process.
func (s *Space) Lookup(pid uint32, addr, t uint64, kernel bool) Frame {
	f := Frame{Addr: addr, From: t, Until: t + 1}
	if kernel {
		f.From, f.Until = 0, forever
		f.Module = s.kernel
		s.resolve(&f, s.kernel, addr)
		return f
	}
	p := s.procs[pid]
	if p == nil {
		return f
	}
	r := p.find(addr, t)
	if r != nil {
		f.From, f.Until = r.from, r.until
	}
	var m *Module
	if r != nil {
		m = s.byID[r.module]
	}
	if r == nil || m.Kind == Anon {
		if pm := s.perfMap(p, t); pm != nil {
			e := pm.perfMap.find(addr, t)
			if e != nil {
				entry := &pm.entries[e.index]
				f.Module, f.Symbol = pm, Symbol{Name: entry.Name, Start: entry.Start, End: entry.Start + entry.Size}
				f.From, f.Until = max(f.From, e.from), min(f.Until, e.until)
				return f
			}
			from, until := pm.perfMap.gap(addr, t)
			f.From, f.Until = max(f.From, from), min(f.Until, until)
		}
		f.Module = m
		return f
	}
	f.Module = m
	f.Map.Start, f.Map.End, f.Map.Pgoff = r.start, r.end, r.pgoff
	if m.Kind == JIT {
		base := r.start - r.pgoff
		fn := m.Dump.Functions[r.index]
		f.Symbol = Symbol{Name: fn.Name, Start: base, End: base + fn.CodeSize, JIT: fn, Function: r.index}
		return f
	}
	s.resolve(&f, m, addr-r.start+r.pgoff)
	return f
}

// resolve names f from m's symbol table; at is a file offset for ELF
// files and the vDSO, an address for the kernel.
func (s *Space) resolve(f *Frame, m *Module, at uint64) {
	m.load.Do(func() { s.loadSymbols(m) })
	if m.table == nil {
		return
	}
	vaddr := at
	if m.Kind != Kernel {
		var ok bool
		if vaddr, ok = m.table.Vaddr(at); !ok {
			return
		}
	}
	sym, ok := m.table.Lookup(vaddr)
	if !ok {
		return
	}
	// Back to runtime addresses: the symbol is where f.Addr is, shifted.
	f.Symbol = Symbol{Name: sym.Name, Start: f.Addr - (vaddr - sym.Start), End: f.Addr + (sym.End - vaddr)}
}

// loadSymbols reads m's symbol table, if it is the recorded one, or takes
// it from Options.Tables.
func (s *Space) loadSymbols(m *Module) {
	if c := s.opts.Tables; c != nil {
		m.table = c.get(s, m)
		return
	}
	if m.table = s.openTable(m); m.table != nil {
		s.tablesMu.Lock()
		s.tables = append(s.tables, m.table)
		s.tablesMu.Unlock()
	}
}

// openTable reads m's symbol table; nil when there is none to use.
func (s *Space) openTable(m *Module) *elfsym.Table {
	var (
		t   *elfsym.Table
		err error
	)
	switch m.Kind {
	case Kernel:
		if t, err = elfsym.Kernel(kallsymsCopy(s.opts.Files), s.sameKernel); t == nil {
			if err != nil {
				s.opts.Warn(fmt.Errorf("kernel symbols: %w", err))
			}
			return nil
		}
	case VDSO:
		if t, _ = vdsoTable(s.opts.Files, s.sameKernel); t == nil {
			return nil
		}
	case ELF:
		at, want := s.recorded(m)
		if t, err = elfsym.OpenRecorded(at(m.Name), want); err != nil {
			s.otherFile(m, err)
			return nil // perf too leaves a file it cannot read unnamed, quietly
		}
	default:
		return nil
	}
	return t
}

// recorded returns where m's file is read from, and what it must be to be
// used. A copy an archive brought was checked to be the recorded file when
// it was archived, by build-id or else device and inode, which the copy
// has its own of; its build-id is still checked.
func (s *Space) recorded(m *Module) (at func(string) foreign.Path, want elfsym.Recorded) {
	want = elfsym.Recorded{BuildID: m.BuildID, File: m.File}
	if s.opts.Files.Path(m.Name) != m.Name {
		want.File = elfsym.FileID{}
	}
	return s.where(m, want), want
}

// where returns where m's file, and the debug files looked for beside it,
// are read: the archive's copies, or the file at its path here; but when
// that is not the recorded file (or is not there) and the process that
// mapped it still runs, the file at its path in that process's root, as
// perf reads a container's files in its mount namespace. A process in a
// container maps the files of its own root, which this side sees
// elsewhere or not at all (TestContainerNativeFrames).
func (s *Space) where(m *Module, want elfsym.Recorded) func(string) foreign.Path {
	m.whereOnce.Do(func() {
		m.at = func(name string) foreign.Path { return foreign.Plain(s.opts.Files.Path(name)) }
		// Only a container's file has another place to be read; the file
		// here is opened once, by its reader, unless it is one.
		if m.ns == "" || s.opts.Files.Path(m.Name) != m.Name {
			return
		}
		if _, ok := isRecorded(m.at(m.Name), want); ok {
			return
		}
		in, err := s.opts.Host.InProcess(m.pid, m.seen, m.Name)
		if err != nil {
			return
		}
		if id, ok := isRecorded(in, want); ok {
			m.at = func(name string) foreign.Path { return foreign.Path{Name: name, Rules: in.Rules} }
			// objtool, reading its code for annotate, finds it there by
			// its build-id; a file without one it could not tell from
			// the file at the path here, and reads none.
			if s.opts.Files != nil && id != nil {
				s.opts.Files.ReadElsewhere(m.Name, hex.EncodeToString(id), in)
			}
		}
	})
	return m.at
}

// isRecorded tells whether the ELF file at p is the one want describes,
// and its build-id.
func isRecorded(p foreign.Path, want elfsym.Recorded) ([]byte, bool) {
	f, err := elfsym.OpenFile(p)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	return f.BuildID(), f.Is(want) == nil
}

// otherFile warns, once for m, when err says that the file at m's path is
// not the one the recording saw: its samples stay unnamed, as a missing
// file's do, but not in silence, for the file was replaced or another
// was mapped there.
func (s *Space) otherFile(m *Module, err error) {
	if !errors.Is(err, elfsym.ErrOtherFile) {
		return
	}
	m.otherOnce.Do(func() {
		s.opts.Warn(fmt.Errorf("%w: its symbols and call frame information are not used", err))
	})
}

// kallsymsCopy is the copy of the recorded kernel's symbols in f, "" when
// there is none.
func kallsymsCopy(f *contract.Files) string {
	if f == nil {
		return ""
	}
	return f.Kallsyms
}

// vdsoTable reads the recorded kernel's vDSO symbols, as elfsym.Kernel
// reads its symbols.
func vdsoTable(f *contract.Files, running bool) (*elfsym.Table, error) {
	switch {
	case f != nil && f.VDSO != "":
		return elfsym.Open(f.VDSO)
	case running:
		return elfsym.VDSO()
	}
	return nil, nil
}

// perfMap returns the module of p's perf map, or nil when it has none;
// seen is a time the recording saw p at.
func (s *Space) perfMap(p *process, seen uint64) *Module {
	p.mapOnce.Do(func() {
		m, times, ok, refused := jitsources.PickPerfMap(jitsources.PerfMapPaths(s.opts.Host, p.pid, seen, s.opts.PerfMapDirs))
		// A map that is there but refused (another user's, a symlink, a
		// FIFO) is said, not passed over in silence.
		for _, err := range refused {
			s.opts.Warn(&jitsources.DescribedError{Pids: []uint32{p.pid}, Err: fmt.Errorf("perf map of process %d refused: %w", p.pid, err)})
		}
		if ok {
			p.perfMap = s.opts.Tables.perfMap(m, times, s.readPerfMap)
		}
	})
	return p.perfMap
}

// readPerfMap reads the perf map at path, timed by the times file at
// times, into a module, or returns nil when it cannot be read.
func (s *Space) readPerfMap(path, times foreign.Path) *Module {
	pm, err := jitsources.ReadPerfMapTimed(path, times, s.opts.Warn)
	if err != nil {
		return nil
	}
	m := &Module{Name: pm.Path, Kind: PerfMap, entries: pm.Entries}
	// Placed in time order, and in map order at equal times, each entry
	// retires what it overlaps: the later one holds.
	order := make([]int, len(pm.Entries))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(pm.Times[i], pm.Times[j]) })
	for _, i := range order {
		e := &pm.Entries[i]
		if e.Size == 0 || e.Start+e.Size < e.Start {
			continue // names no address
		}
		m.perfMap.place(region{start: e.Start, end: e.Start + e.Size, from: pm.Times[i], until: forever, index: uint32(i)})
	}
	m.perfMap.index()
	return m
}

// Comm returns the name thread tid had at time t, or "" when the recording
// never named it.
func (s *Space) Comm(tid uint32, t uint64) string {
	c := s.comms[tid]
	if len(c) == 0 {
		return ""
	}
	i, _ := slices.BinarySearchFunc(c, t, func(x comm, t uint64) int {
		if x.time <= t {
			return -1
		}
		return 1
	})
	return c[max(i-1, 0)].name
}

// Files returns the ELF files mapped into process pid at time t, in the
// order they were mapped, and by address among those mapped at one time (as
// perf describes a process that ran before it): after an exec, the
// executable first, which the kernel maps before the loader.
func (s *Space) Files(pid uint32, t uint64) []Frame {
	p := s.procs[pid]
	if p == nil {
		return nil
	}
	var files []region
	for _, r := range p.regions {
		if s.byID[r.module].Kind == ELF && r.from <= t && t < r.until {
			files = append(files, r)
		}
	}
	slices.SortFunc(files, func(x, y region) int { return cmp.Or(cmp.Compare(x.from, y.from), cmp.Compare(x.start, y.start)) })
	frames := make([]Frame, len(files))
	for i, r := range files {
		frames[i] = Frame{Addr: r.start, Module: s.byID[r.module], From: r.from, Until: r.until}
		frames[i].Map.Start, frames[i].Map.End, frames[i].Map.Pgoff = r.start, r.end, r.pgoff
	}
	return frames
}

// Close unmaps the dumps and closes the files symbol names are read from.
// Frames found before keep their names only if the caller copied those of
// jitted functions.
func (s *Space) Close() error {
	s.warnBadUnwind()
	var errs []error
	if s.jit != nil {
		errs = append(errs, s.jit.Close())
	}
	s.tablesMu.Lock()
	for _, t := range s.tables {
		errs = append(errs, t.Close())
	}
	s.tables = nil
	s.tablesMu.Unlock()
	return errors.Join(errs...)
}

// Forget drops the processes' timelines (their regions, millions when a
// JIT loads millions of functions), for a caller that has looked up all it
// will: Lookup then finds no mapping (a perf map's lines but), Files no
// file. The dumps and symbol tables,
// which the frames found alias, stay until Close.
func (s *Space) Forget() {
	for _, p := range s.procs {
		p.timeline = timeline{}
	}
}

// Dumps returns the modules of the dumps in use.
func (s *Space) Dumps() []*Module { return s.dumps }
