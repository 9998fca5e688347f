// Package jitwatch copies, while a recording runs, the files the recorded
// processes' runtimes write that the recording alone cannot give later: perf
// maps as they grow, with the times their lines appeared, and the dumps of
// processes in other mount namespaces. record and the agent run it.
package jitwatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/jitdump"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/procfs"
)

// While a recording runs, it keeps what the recorded processes'
// runtimes write that the recording alone cannot give later:
//
//   - each perf map as it grows, copied to perf-<recorded pid>.map beside
//     the recording with its times file (jitsources.TimesSuffix): a runtime
//     that reuses an address appends a line for the new function, and only
//     the time the line appeared tells which function samples before it
//     ran. The map is named by the runtime's own pid, the one it has in its
//     pid namespace (a container's), and is read in the process's own root
//     (/proc/PID/root), which is where the runtime sees /tmp.
//   - the dumps of processes in another mount namespace, copied to
//     jit-<recorded pid>.dump: a container's /tmp goes with the container.
//
// The runtime's files are only read, and they are hostile input: the
// watcher runs as root, and any process, a container's included, can put
// anything at /tmp/perf-PID.map. Each is opened through procfs (inside the
// process's root, as its owner, perf's owner rule, a symlink at a perf
// map's fixed name refused, never blocking on a FIFO), a sparse file is
// refused, and the copies' disk use is bounded as they are made
// (Options.MaxBytes): a copy cut at the bound is said, with its name.
// The copies are mode 0600, created where no file was: they hold other
// processes' data. Files are read from the offset read so far every
// WatchInterval, in a goroutine of their own, so the recorder never waits
// for them; memory is a buffer and a few numbers per process.
//
// For record the copies are put in place when their process exits or the
// recording stops (whole or not at all). The agent reads them while they
// grow (WatchLive): they are written in place, a perf map's times row
// before the lines it covers and only whole lines until the process exits,
// so a reader never takes a line for earlier than it appeared; their disk
// use is bounded, the files of the oldest exited processes removed first.

// WatchInterval is how often the watcher looks at the processes and their
// files: a new line's time is known to that much, unless the file's
// modification time narrows it (see stamp).
const WatchInterval = 50 * time.Millisecond

// LiveWatchInterval is WatchLive's WatchInterval: the agent runs for
// days, and a look costs about 0.15 ms (BenchmarkWatchLookLive), 0.3% of a
// core every 50 ms; a line's time still comes from the map's modification
// time, and a window waits for a look after its end (Looked).
const LiveWatchInterval = 200 * time.Millisecond

// markerRecheck is how long passes between two looks for the dumps a process
// in another mount namespace maps: it opens them once, early.
const markerRecheck = time.Second

// Options say how a Watcher reads the processes' files and how
// much it may copy.
type Options struct {
	// Proc is the /proc read; "" is the host's.
	Proc procfs.FS
	// MaxBytes bounds the disk the copies use, counted as they are made;
	// 0: unbounded. A live watcher removes exited processes' copies to
	// stay within it, oldest first; any watcher cuts a copy that would
	// pass it, and says so.
	MaxBytes int64
	// Force copies perf maps and dumps that their process's owner or root
	// does not own, as perf's -f.
	Force bool
	// Note receives what the user should know.
	Note func(string)
}

// DefaultCopyMaxBytes is record's bound on its copies of perf maps and
// dumps: 1 GiB, over all of them. A bound on the total, not on each file,
// is what keeps a host-wide recording's disk from filling with many
// processes' files; the largest real files are a long-running JVM's or
// node's dump, some hundreds of MB, so a recording that meets the bound is
// one that something tried to fill.
const DefaultCopyMaxBytes = 1 << 30

// Watcher copies the recorded processes' perf maps and, for those in
// another mount namespace, their dumps, as they grow.
type Watcher struct {
	dir   string
	roots map[uint32]bool // nil: every process
	note  func(string)
	procs procfs.FS
	force bool
	// live: copies written in place, read while they grow (the agent's).
	live bool
	// maxBytes bounds the copies' disk use; 0: unbounded.
	maxBytes int64
	// used is the disk the copies use now; cut counts the copies the
	// bound cut short.
	used     int64
	cut      int
	interval time.Duration
	looked   atomic.Uint64 // CLOCK_MONOTONIC of the last look's start

	dropMu  sync.Mutex
	dropped []uint32 // processes whose copies are no longer needed
	// bytes and evicted are what Usage reports.
	bytes, evicted atomic.Int64

	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	// Owned by the watching goroutine until done is closed.
	watched map[uint32]*watchedProc
	tmps    map[string]*tmpDir // by mount namespace
	inotify int                // the /tmp directories' watches; -1 without
	byWd    map[int][]*tmpDir  // one directory may be several namespaces' /tmp
	proc    *os.File           // /proc, listed at each look
	pids    []uint32
	ownMnt  string
	buf     []byte
	lastMon uint64 // CLOCK_MONOTONIC of the last look
	files   []string
	errs    []error
	failed  int
	// exited are the live copies of exited processes, oldest first, kept
	// until Drop or the size bound removes them.
	exited []exitedProc
	full   bool // over maxBytes: live copies wait for room
}

// exitedProc is what a live watcher keeps of an exited process's copies.
type exitedProc struct {
	pid   uint32
	files []string
	bytes int64
}

type watchedProc struct {
	pid, nspid uint32
	ppid       uint32
	seen       uint64 // CLOCK_MONOTONIC of the look that found it
	picked     bool   // recorded: one of the roots or a descendant
	mnt        string // its mount namespace
	foreign    bool   // another mount namespace than the watcher's
	perfMap    *tail
	dumps      map[string]*tail // by the path the process sees
	refused    map[string]bool  // dumps not opened: not tried again
	looks      int              // looks since its markers were last searched
	uncopied   bool             // its perf map could not be copied
}

// tmpDir is a mount namespace's /tmp: listed once, then told of new files by
// inotify, so that a look costs nothing for it.
type tmpDir struct {
	wd    int             // its inotify watch
	names map[string]bool // its perf maps; nil to list it again
	live  bool            // a recorded process of the namespace was in this look
}

// tail copies a growing file: src read from off on, into a temporary file
// renamed to dst when done (and a times file beside it, for a perf map).
type tail struct {
	src      *os.File
	dst      string
	out      *os.File // nil when src is dst itself: the times file only
	off      int64
	times    *os.File // for a perf map
	timesDst string
	lines    int
	read     bool // once copy has looked at it
	dump     bool // copied a whole record at a time
	next     int64
	written  int64 // bytes of the copy and its times file
	// done: no more is copied (refused, or cut at the bound).
	done bool
}

// Watch starts watching the processes roots and their descendants (every
// process when roots is empty), copying into dir. Stop ends it.
func Watch(dir string, roots []int, o Options) *Watcher {
	w := newWatcher(dir, roots, o)
	w.look()
	go w.run()
	return w
}

// WatchLive starts a watcher whose copies are read while they grow, the
// agent's: they are in dir from the start, and stay after their process
// exits until Drop names it, or until they are the oldest exited ones when
// the copies pass o.MaxBytes. Stop ends it.
func WatchLive(dir string, roots []int, o Options) *Watcher {
	w := newWatcher(dir, roots, o)
	w.live, w.interval = true, LiveWatchInterval
	w.look()
	go w.run()
	return w
}

// Drop says that the copies of processes pids are no longer needed: those
// of exited ones are removed at the next look, those still running once they
// exit.
func (w *Watcher) Drop(pids []uint32) {
	w.dropMu.Lock()
	w.dropped = append(w.dropped, pids...)
	w.dropMu.Unlock()
}

// Usage returns the disk the copies use now, and how many exited
// processes' copies the size bound removed before Drop named them.
func (w *Watcher) Usage() (bytes, evicted int64) { return w.bytes.Load(), w.evicted.Load() }

// newWatcher makes a watcher that has not looked yet.
func newWatcher(dir string, roots []int, o Options) *Watcher {
	if o.Proc == "" {
		o.Proc = procfs.Host
	}
	if o.Note == nil {
		o.Note = func(string) {}
	}
	w := &Watcher{dir: dir, note: o.Note, procs: o.Proc, force: o.Force, maxBytes: o.MaxBytes, interval: WatchInterval,
		stop: make(chan struct{}), done: make(chan struct{}),
		watched: make(map[uint32]*watchedProc), tmps: make(map[string]*tmpDir), byWd: make(map[int][]*tmpDir),
		buf: make([]byte, 64<<10)}
	var err error
	if w.inotify, err = unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC); err != nil {
		w.inotify = -1 // each /tmp is then listed at every look
	}
	if len(roots) > 0 {
		w.roots = make(map[uint32]bool)
		for _, r := range roots {
			w.roots[uint32(r)] = true
		}
	}
	w.ownMnt, _ = procfs.Host.OwnMountNamespace()
	return w
}

func (w *Watcher) run() {
	defer close(w.done)
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			w.look()
			for pid, p := range w.watched {
				w.finish(p)
				delete(w.watched, pid)
			}
			if w.cut > 0 {
				w.note(fmt.Sprintf("%d copies of perf maps and dumps in %s were cut short or left out: the copies reached their bound of %d bytes (--jit-copy-max-mb)", w.cut, w.dir, w.maxBytes))
			}
			w.close()
			return
		case <-tick.C:
			w.look()
		}
	}
}

// close releases what the watcher looks with.
func (w *Watcher) close() {
	if w.inotify >= 0 {
		unix.Close(w.inotify)
	}
	if w.proc != nil {
		w.proc.Close()
	}
}

// Stop reads what the files grew by since the last look, puts the copies in
// place and returns their paths. Calls after the first return the same.
func (w *Watcher) Stop() ([]string, error) {
	w.stopOnce.Do(func() { close(w.stop) })
	<-w.done
	return w.files, errors.Join(w.errs...)
}

// look finds the processes that came and went since the last look, and
// copies what their files grew by.
func (w *Watcher) look() {
	mono, real := clockNow(unix.CLOCK_MONOTONIC), clockNow(unix.CLOCK_REALTIME)
	pids, err := w.listPids()
	if err != nil {
		w.fail(err)
		return
	}
	live := make(map[uint32]bool, len(pids))
	for _, pid := range pids {
		live[pid] = true
	}
	// Exited processes: their files are read to the end (they are still
	// open) and put in place.
	for pid, p := range w.watched {
		if !live[pid] {
			w.finish(p)
			delete(w.watched, pid)
		}
	}
	var fresh []*watchedProc
	for _, pid := range pids {
		if _, ok := w.watched[pid]; !ok {
			p := w.learn(pid, mono)
			w.watched[p.pid] = p
			fresh = append(fresh, p)
		}
	}
	// A child's pid can be below its parent's: its parent may be new too.
	for _, p := range fresh {
		if w.isPicked(p, 0) {
			w.pick(p)
		}
	}
	w.readEvents()
	for _, t := range w.tmps {
		t.live = false
	}
	for _, p := range w.watched {
		if !p.picked {
			continue
		}
		if p.perfMap == nil && !p.uncopied {
			w.findPerfMap(p)
		}
		if t := w.tmps[p.mnt]; t != nil {
			t.live = true
		}
		if p.foreign && p.looks%max(int(markerRecheck/w.interval), 1) == 0 {
			w.findDumps(p)
		}
		p.looks++
	}
	for mnt, t := range w.tmps {
		if !t.live { // no process of that namespace is left to look for
			w.unwatch(t)
			delete(w.tmps, mnt)
		}
	}
	for _, p := range w.watched {
		if p.perfMap != nil {
			w.copy(p.perfMap, mono, real, false)
		}
		for _, d := range p.dumps {
			w.copy(d, mono, real, false)
		}
	}
	w.lastMon = mono
	if w.live {
		w.removeDropped()
		w.bound()
	}
	w.looked.Store(mono)
}

// Looked returns when the last look began, in CLOCK_MONOTONIC ns: the
// copies hold what the files held then, and a process that had exited by
// then has its copies whole.
func (w *Watcher) Looked() uint64 { return w.looked.Load() }

// removeDropped removes the copies of the exited processes Drop named;
// those of running ones stay named until they exit.
func (w *Watcher) removeDropped() {
	w.dropMu.Lock()
	defer w.dropMu.Unlock()
	w.dropped = slices.DeleteFunc(w.dropped, func(pid uint32) bool {
		if w.watched[pid] != nil {
			return false
		}
		w.removeExited(func(e exitedProc) bool { return e.pid == pid })
		return true
	})
}

// removeExited removes the copies of the exited processes del picks.
func (w *Watcher) removeExited(del func(exitedProc) bool) {
	w.exited = slices.DeleteFunc(w.exited, func(e exitedProc) bool {
		if !del(e) {
			return false
		}
		for _, f := range e.files {
			os.Remove(f)
		}
		w.used -= e.bytes
		return true
	})
}

// bound publishes the copies' disk use, and says when live copies stop
// growing for want of room.
func (w *Watcher) bound() {
	w.bytes.Store(w.used)
	full := w.maxBytes > 0 && w.used >= w.maxBytes
	if full && !w.full {
		w.note(fmt.Sprintf("the copies of perf maps and dumps in %s reached %d bytes: they stop growing until processes exit", w.dir, w.maxBytes))
	}
	w.full = full
}

// room returns how many of want bytes the copies may still take; a live
// watcher first removes the oldest exited processes' copies to make room.
func (w *Watcher) room(want int64) int64 {
	if w.maxBytes <= 0 {
		return want
	}
	n := 0
	for ; w.live && w.used+want > w.maxBytes && n < len(w.exited); n++ {
		w.used -= w.exited[n].bytes
		for _, f := range w.exited[n].files {
			os.Remove(f)
		}
	}
	w.exited = w.exited[n:]
	w.evicted.Add(int64(n))
	return max(0, min(want, w.maxBytes-w.used))
}

// learn reads what the watcher needs first of a process it has not seen
// at look mono: its parent, and its pid in its own namespace.
func (w *Watcher) learn(pid uint32, mono uint64) *watchedProc {
	p := &watchedProc{pid: pid, nspid: pid, seen: mono}
	// A pid used again: the exited process's copies would name the new
	// one's code.
	w.removeExited(func(e exitedProc) bool { return e.pid == pid })
	status, err := os.ReadFile(w.procs.Path(pid, "status"))
	if err != nil {
		return p // gone already
	}
	p.ppid = uint32(statusField(status, "PPid:"))
	if st, err := procfs.ParseStatus(status); err == nil {
		p.nspid = st.NSpid
	}
	return p
}

// isPicked tells whether p is recorded: every process is, or it is one of
// the roots or their descendants (as far as the watcher saw them).
func (w *Watcher) isPicked(p *watchedProc, depth int) bool {
	if w.roots == nil || w.roots[p.pid] || p.picked {
		return true
	}
	parent := w.watched[p.ppid]
	return parent != nil && parent != p && depth < 64 && w.isPicked(parent, depth+1)
}

// pick marks p recorded, reading its mount namespace.
func (w *Watcher) pick(p *watchedProc) {
	p.picked = true
	p.mnt, _ = w.procs.MountNamespace(p.pid)
	p.foreign = p.mnt != w.ownMnt
}

// statusField returns the first number of a line of /proc/PID/status.
func statusField(status []byte, key string) uint64 {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(key)); ok {
			if f := bytes.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseUint(string(f[0]), 10, 32)
				return n
			}
		}
	}
	return 0
}

// open opens path as process p sees it, as its owner, under perf's owner
// rule; fixedName refuses a symlink on the way.
func (w *Watcher) open(p *watchedProc, path string, fixedName bool) (*os.File, error) {
	pr, err := w.procs.Process(p.pid, p.seen)
	if err != nil {
		return nil, err
	}
	rules := pr.Rules(w.force)
	rules.NoSymlinks = fixedName
	return foreign.Open(path, rules)
}

// refuse says why a file of p's is not copied: its path and the reason,
// never what it holds.
func (w *Watcher) refuse(p *watchedProc, err error) {
	w.note(fmt.Sprintf("process %d: not copied: %v", p.pid, err))
}

// skipDump says that p's dump at name is not copied, nor tried again.
func (p *watchedProc) skipDump(name string) {
	if p.refused == nil {
		p.refused = make(map[string]bool)
	}
	p.refused[name] = true
}

// findPerfMap starts copying p's perf map when its /tmp has one.
func (w *Watcher) findPerfMap(p *watchedProc) {
	name := fmt.Sprintf("perf-%d.map", p.nspid)
	t := w.tmps[p.mnt]
	if t != nil && t.names != nil && t.wd >= 0 && !t.names[name] {
		return // what most looks find
	}
	// Only the names of /tmp are read through the magic link: the file
	// itself is opened inside the process's root.
	root := w.procs.Path(p.pid, "root")
	if t == nil {
		t = &tmpDir{wd: -1}
		w.tmps[p.mnt] = t
		if w.inotify >= 0 {
			// Watched before it is listed: no file falls between.
			if wd, err := unix.InotifyAddWatch(w.inotify, filepath.Join(root, "tmp"), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR); err == nil {
				t.wd = wd
				w.byWd[wd] = append(w.byWd[wd], t)
			}
		}
	}
	if t.names == nil || t.wd < 0 {
		entries, err := os.ReadDir(filepath.Join(root, "tmp"))
		if err != nil {
			return
		}
		t.names = make(map[string]bool)
		for _, e := range entries {
			if isPerfMapName(e.Name()) {
				t.names[e.Name()] = true
			}
		}
	}
	if !t.names[name] {
		return
	}
	// The runtime creates its map at this fixed name: a symlink there
	// was planted.
	src, err := w.open(p, "/tmp/"+name, true)
	if errors.Is(err, fs.ErrNotExist) {
		delete(t.names, name) // gone meanwhile
		return
	}
	if err != nil {
		w.refuse(p, err)
		p.uncopied = true // not tried again at every look
		return
	}
	dst := filepath.Join(w.dir, fmt.Sprintf("perf-%d.map", p.pid))
	tl, err := w.newTail(src, dst, true)
	if err != nil {
		src.Close()
		if !errors.Is(err, errFull) {
			w.fail(err)
		}
		p.uncopied = true // not tried again at every look
		return
	}
	p.perfMap = tl
}

func isPerfMapName(name string) bool {
	return strings.HasPrefix(name, "perf-") && strings.HasSuffix(name, ".map")
}

// readEvents takes the names of the perf maps created in the /tmp
// directories watched since the last look.
func (w *Watcher) readEvents() {
	if w.inotify < 0 {
		return
	}
	for {
		n, err := unix.Read(w.inotify, w.buf)
		if n <= 0 || err != nil {
			return
		}
		for b := w.buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
			end := unix.SizeofInotifyEvent + int(ev.Len)
			if end > len(b) {
				break
			}
			name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:end], "\x00"))
			b = b[end:]
			if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
				for _, t := range w.tmps {
					t.names = nil // lost events: listed again
				}
				continue
			}
			if ev.Mask&unix.IN_IGNORED != 0 {
				for _, t := range w.byWd[int(ev.Wd)] {
					t.wd, t.names = -1, nil
				}
				delete(w.byWd, int(ev.Wd))
				continue
			}
			if !isPerfMapName(name) {
				continue
			}
			for _, t := range w.byWd[int(ev.Wd)] {
				if t.names != nil {
					t.names[name] = true
				}
			}
		}
	}
}

// unwatch ends the inotify watch of t, unless another namespace shares it.
func (w *Watcher) unwatch(t *tmpDir) {
	if t.wd < 0 {
		return
	}
	rest := slices.DeleteFunc(w.byWd[t.wd], func(x *tmpDir) bool { return x == t })
	if len(rest) > 0 {
		w.byWd[t.wd] = rest
		return
	}
	delete(w.byWd, t.wd)
	unix.InotifyRmWatch(w.inotify, uint32(t.wd))
}

// listPids lists the processes in /proc, reading its entries in place:
// the look that costs most when nothing changes.
func (w *Watcher) listPids() ([]uint32, error) {
	if w.proc == nil {
		var err error
		if w.proc, err = os.Open(string(w.procs)); err != nil {
			return nil, err
		}
	}
	if _, err := w.proc.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	w.pids = w.pids[:0]
	fd := int(w.proc.Fd())
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", w.procs, err)
		}
		if n <= 0 {
			return w.pids, nil
		}
		// struct linux_dirent64: ino, off (8 bytes each), reclen (2), type
		// (1), the name ending in NUL.
		for b := w.buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				break
			}
			pid, ok := uint32(0), true
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			for _, c := range name {
				if c < '0' || c > '9' || pid > 1<<28 {
					ok = false
					break
				}
				pid = pid*10 + uint32(c-'0')
			}
			if ok && len(name) > 0 {
				w.pids = append(w.pids, pid)
			}
			b = b[reclen:]
		}
	}
}

// findDumps starts copying the dumps p maps that it is not copying yet.
func (w *Watcher) findDumps(p *watchedProc) {
	ms, err := w.procs.Maps(p.pid)
	if err != nil {
		return
	}
	for _, m := range ms {
		if m.Prot&unix.PROT_EXEC == 0 || !jitsources.IsMarker(m.Name) || p.dumps[m.Name] != nil || p.refused[m.Name] {
			continue
		}
		if len(p.dumps) > 0 {
			w.note(fmt.Sprintf("process %d maps a second dump, %s: only its first is copied", p.pid, m.Name))
			continue
		}
		src, err := w.open(p, m.Name, false)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			w.refuse(p, err)
			p.skipDump(m.Name)
			continue
		}
		tl, err := w.newTail(src, filepath.Join(w.dir, fmt.Sprintf("jit-%d.dump", p.pid)), false)
		if err != nil {
			src.Close()
			if !errors.Is(err, errFull) {
				w.fail(err)
			}
			p.skipDump(m.Name)
			continue
		}
		tl.dump = true
		if p.dumps == nil {
			p.dumps = make(map[string]*tail)
		}
		p.dumps[m.Name] = tl
	}
}

// newTail starts copying src to dst; a perf map gets a times file.
func (w *Watcher) newTail(src *os.File, dst string, perfMap bool) (*tail, error) {
	if !w.live && w.room(1) == 0 {
		// An empty copy would hide the file it stands for from the
		// report.
		w.cut++
		return nil, errFull
	}
	t := &tail{src: src, dst: dst}
	si, err := src.Stat()
	if err != nil {
		return nil, err
	}
	// Private, and never through what is at dst: made under a new name.
	create := atomicfile.Private.CreateTemp
	if w.live {
		create = atomicfile.Private.Create
	}
	// Where the recording is where the runtime writes (-o /tmp/...), the
	// runtime's own file stays as it is.
	if di, err := os.Stat(dst); err != nil || !os.SameFile(si, di) {
		if t.out, err = create(dst); err != nil {
			return nil, err
		}
	}
	if perfMap {
		t.timesDst = dst + jitsources.TimesSuffix
		if t.times, err = create(t.timesDst); err != nil {
			if t.out != nil {
				t.out.Close()
				os.Remove(t.out.Name())
			}
			return nil, err
		}
	}
	return t, nil
}

// copy copies what t's file grew by and, for a perf map, notes when. What a
// file holds when first read is taken to be there from the start: from
// before the recording, or from the process's first moments. final is the
// last copy, once the process has exited or the watcher stops. The size is
// taken once, so a file growing meanwhile is copied at the next look, and
// cut to the room the bound leaves.
func (w *Watcher) copy(t *tail, mono, real uint64, final bool) {
	first := !t.read
	t.read = true
	if t.done || w.full && !final {
		return
	}
	size, err := foreign.Size(t.src, math.MaxInt64)
	if err != nil { // sparse
		w.stopCopy(t, err)
		return
	}
	if size <= t.off {
		return
	}
	var at uint64
	if !first {
		var st unix.Stat_t
		if unix.Fstat(int(t.src.Fd()), &st) == nil {
			at = stamp(st.Mtim, mono, real, w.lastMon)
		}
	}
	grown := size - t.off
	want, row := grown, int64(0)
	if t.times != nil {
		// The times rows, one a chunk, as long as they can be: one
		// line a byte.
		chunks := (grown + int64(len(w.buf)) - 1) / int64(len(w.buf))
		row = chunks * int64(len(strconv.FormatInt(int64(t.lines)+grown, 10))+len(strconv.FormatUint(at, 10))+2)
		want += row
	}
	room := w.room(want)
	cut := room < want
	if cut {
		size = t.off + max(0, room-row)
	}
	if t.dump {
		size = t.wholeRecords(size)
	}
	for t.off < size {
		ask := min(int64(len(w.buf)), size-t.off)
		n, err := t.src.ReadAt(w.buf[:ask], t.off)
		chunk := w.buf[:n]
		if t.times != nil && (w.live && !final || cut) {
			// Whole lines only: a reader of the live copy, or of one
			// cut at the bound, would take the start of a line for all
			// of it.
			if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
				chunk = chunk[:i+1]
			} else if n < len(w.buf) {
				break
			}
		}
		if len(chunk) > 0 {
			lines := t.lines + bytes.Count(chunk, []byte{'\n'})
			// The row before the lines it times: a reader of the live
			// copy finds every line it sees timed.
			if t.times != nil {
				if err := jitsources.AppendTimes(t.times, lines, at); err != nil {
					w.fail(err)
					return
				}
				w.wrote(t, int64(len(strconv.Itoa(lines))+len(strconv.FormatUint(at, 10))+2))
			}
			if t.out != nil {
				if _, err := t.out.Write(chunk); err != nil {
					w.fail(err)
					return
				}
				w.wrote(t, int64(len(chunk)))
			}
			t.lines = lines
			t.off += int64(len(chunk))
		}
		if err != nil || int64(n) < ask {
			break // cut short meanwhile: the rest at the next look
		}
	}
	if cut && (final || !w.live) {
		t.done = true
		if w.cut++; w.cut <= maxCutNotes {
			w.note(fmt.Sprintf("%s: cut at %d bytes: the copies reached their bound of %d bytes (--jit-copy-max-mb)", t.dst, t.off, w.maxBytes))
		}
	}
}

// maxCutNotes is how many copies cut at the bound are named one by one;
// Stop counts them all.
const maxCutNotes = 3

// errFull is a copy not begun: the copies are at their bound.
var errFull = errors.New("the copies are at their bound")

// wrote counts n more bytes of t's copies.
func (w *Watcher) wrote(t *tail, n int64) {
	t.written += n
	w.used += n
}

// stopCopy ends t's copy, saying why (never with what the file holds);
// what was copied stays.
func (w *Watcher) stopCopy(t *tail, why error) {
	t.done = true
	w.note(fmt.Sprintf("%s: %v", t.dst, why))
}

// wholeRecords returns where the last whole record of t's dump ends within
// its first size bytes, so that a copy made while the runtime writes ends
// with a record, as the dump will. A dump whose sizes make no sense is
// copied as it is.
func (t *tail) wholeRecords(size int64) int64 {
	var b [12]byte
	for t.next+int64(len(b)) <= size {
		if _, err := t.src.ReadAt(b[:], t.next); err != nil {
			return t.next
		}
		// The header's size is its third field, a record's its second;
		// the magic says the byte order.
		var order binary.ByteOrder = binary.LittleEndian
		if binary.BigEndian.Uint32(b[:]) == jitdump.Magic {
			order = binary.BigEndian
		}
		n, least := order.Uint32(b[4:]), uint32(16)
		if t.next == 0 {
			n, least = order.Uint32(b[8:]), 12
		}
		if n < least {
			t.dump = false
			return size
		}
		if t.next+int64(n) > size {
			break
		}
		t.next += int64(n)
	}
	return t.next
}

// stamp returns when a file whose modification time is mtime grew, in
// CLOCK_MONOTONIC: its last write, converted from the real-time clock by
// the clocks' difference now (mono, real), and kept between the last look
// (lastMon), when the lines were not there yet, and now. The lines of one
// write are stamped to a clock tick; those of earlier writes since the last
// look, with the last one.
func stamp(mtime unix.Timespec, mono, real, lastMon uint64) uint64 {
	m := uint64(mtime.Nano())
	if m+mono < real { // before the monotonic clock's origin
		return lastMon
	}
	return min(max(m+mono-real, lastMon), mono)
}

// finish copies the rest of p's files and puts the copies in place; a live
// watcher's stay where they are, kept until dropped.
func (w *Watcher) finish(p *watchedProc) {
	var exited exitedProc
	for _, t := range append([]*tail{p.perfMap}, slices.Collect(maps.Values(p.dumps))...) {
		if t == nil {
			continue
		}
		w.copy(t, clockNow(unix.CLOCK_MONOTONIC), clockNow(unix.CLOCK_REALTIME), true)
		t.src.Close()
		// A file refused before anything of it was copied leaves no
		// copy: an empty one would stand for it in the report.
		empty := t.done && t.off == 0
		for _, f := range []struct {
			tmp *os.File
			dst string
		}{{t.out, t.dst}, {t.times, t.timesDst}} {
			if f.tmp == nil {
				continue
			}
			if empty {
				f.tmp.Close()
				if w.live {
					os.Remove(f.dst) // written in place
				} else {
					os.Remove(f.tmp.Name())
				}
				continue
			}
			if w.live {
				if err := f.tmp.Close(); err != nil {
					w.fail(err)
				}
				exited.files = append(exited.files, f.dst)
				continue
			}
			if err := atomicfile.Commit(f.tmp, f.dst); err != nil {
				w.fail(err)
				continue
			}
			w.files = append(w.files, f.dst)
		}
		exited.bytes += t.written
	}
	if w.live && len(exited.files) > 0 {
		exited.pid = p.pid
		w.exited = append(w.exited, exited)
	}
	p.perfMap, p.dumps = nil, nil
}

// fail keeps an error for Stop, the first few of them: the watcher goes on
// with the other files.
func (w *Watcher) fail(err error) {
	if w.failed++; w.failed <= 3 {
		w.errs = append(w.errs, err)
	}
}

// clockNow reads a clock in nanoseconds.
func clockNow(clock int32) uint64 {
	var ts unix.Timespec
	unix.ClockGettime(clock, &ts)
	return uint64(ts.Nano())
}
