package record

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jitprof/jitprof/agents"
	"github.com/jitprof/jitprof/internal/hotspot"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
	"golang.org/x/sys/unix"
)

// This file loads jitprof's JVMTI agent into the HotSpot JVMs a recording
// (record -p, -a) or the agent comes across, so that a JVM started with no
// flag has its compiled methods named: it writes a jitdump from then on,
// replaying what it compiled before, and maps its marker, which the
// recording sees as it sees any runtime's (the kernel reports the mapping;
// the JIT watcher copies a container's dump).
//
// A JVM is known by its mapping of libjvm.so, which the kernel reports to
// the recording (an MMAP2 record, or the description of the processes
// already running): no process is looked at for it, and only recorded
// processes are. Each is attached once (hotspot.Attacher), in a goroutine
// of its own, never holding up the recording: a JVM still starting is
// tried again for a while, the recording's end cancels what is under way.
//
// The agent is given no options: it writes where the JVM's JITDUMPDIR
// says, else into a new directory of its user's ~/.debug/jit (0700), perf's
// place for its own JVMTI agent's dumps. The dump is the JVM user's, private
// to it, in its own mount namespace, and there for the report after the
// recording; the agent cannot be unloaded, so the JVM goes on writing it
// until it exits. A JVM with neither (a service account's HOME is often
// /nonexistent, a container's root file system read-only) is left alone
// and counted refused: the agent would be loaded for nothing, and /tmp
// would make the dump readable by every user.

// AttachStats count the JVMs met, by what came of loading the agent.
type AttachStats struct {
	Attached int // the agent was loaded
	Already  int // they wrote a jitdump already
	// Refused counts those that did not take it: attach disabled, not
	// HotSpot, never ready, the load failed.
	Refused int
	// Unfinished counts those still being attached when the watch ended.
	Unfinished int
}

// JavaOptions say how a JavaAttacher attaches.
type JavaOptions struct {
	// Timeout bounds each wait of an attach (hotspot.DefaultTimeout if 0).
	Timeout time.Duration
	// Proc is the /proc read; "" is the host's.
	Proc procfs.FS
	// Note receives a line for each JVM refused, saying why.
	Note func(string)
}

// JavaAttacher attaches the JVMs it is told of (Saw, SawMapping) until Stop.
type JavaAttacher struct {
	o      JavaOptions
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // attaches under way at once
	lib    sync.Once
	libErr error
	a      hotspot.Attacher

	mu sync.Mutex
	// busy are the pids whose attach is under way, so that a JVM's
	// mapping reported twice starts one.
	busy map[uint32]bool
	// loaded are the JVMs that run the agent, each with the time
	// (CLOCK_MONOTONIC, the recording's clock) its load was done.
	loaded map[uint32]uint64
	// Counted here rather than by the Attacher: never ready, no
	// directory for the dump (and one writing a dump all the same), cut
	// short.
	notReady, noPlace, already, cancelled int
	wg                                    sync.WaitGroup
}

// maxAttaching is how many JVMs are attached at once: each waits on its
// JVM most of the time, but a host starting many at once must not get as
// many goroutines signalling and copying the library.
const maxAttaching = 4

// notReadyFor is how long a JVM that does not catch SIGQUIT yet is tried
// again: HotSpot installs its handler within a second of starting, even on
// a loaded machine; one run with -Xrs never does.
const notReadyFor = 10 * time.Second

// AttachJava starts attaching JVMs; ctx's end cancels the attaches under
// way, as Stop does.
func AttachJava(ctx context.Context, o JavaOptions) *JavaAttacher {
	if o.Note == nil {
		o.Note = func(string) {}
	}
	j := &JavaAttacher{o: o, slots: make(chan struct{}, maxAttaching), busy: make(map[uint32]bool), loaded: make(map[uint32]uint64)}
	j.ctx, j.cancel = context.WithCancel(ctx)
	j.a.Options = hotspot.Options{Timeout: o.Timeout, Proc: o.Proc}
	j.a.Log = func(err error) {
		// A JVM still starting is tried again: said only if it never
		// gets ready.
		if !errors.Is(err, hotspot.ErrNotReady) {
			o.Note(fmt.Sprintf("jitprof's JVMTI agent not loaded: %v", err))
		}
	}
	return j
}

// Saw tells of a mapping a process made (or had when the watch started):
// a HotSpot JVM's libjvm.so starts its attach.
func (j *JavaAttacher) Saw(rec perfdata.Record) {
	if m, ok := rec.(*perfdata.Mmap2); ok {
		j.SawMapping(m.Pid, m.Filename)
	}
}

// SawMapping is Saw of a mapping of file name by process pid.
func (j *JavaAttacher) SawMapping(pid uint32, name string) {
	if isLibJVM(name) {
		j.attach(pid)
	}
}

// mmap2Name returns the pid and file name of rec when it is an MMAP2
// record. It runs for every record of a recording: only the file name is
// looked at, in place.
func mmap2Name(rec []byte) (uint32, []byte, bool) {
	// The header (8 bytes), pid, tid, addr, len, pgoff, the device and
	// inode or build id (24 bytes), prot, flags, then the name, NUL-ended.
	const nameAt = 8 + 8 + 3*8 + 24 + 8
	if len(rec) <= nameAt || perfdata.RecordType(le.Uint32(rec)) != perfdata.TypeMmap2 {
		return 0, nil, false
	}
	name := rec[nameAt:]
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	return le.Uint32(rec[8:]), name, true
}

// isLibJVM tells HotSpot's library (and OpenJ9's shim of that name, which
// the attach refuses) by its mapped path.
func isLibJVM(name string) bool {
	return path.Base(strings.TrimSuffix(name, " (deleted)")) == "libjvm.so"
}

// attach starts attaching JVM pid unless that is under way.
func (j *JavaAttacher) attach(pid uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.busy[pid] || j.ctx.Err() != nil {
		return
	}
	j.busy[pid] = true
	j.wg.Go(func() {
		defer func() {
			j.mu.Lock()
			delete(j.busy, pid)
			j.mu.Unlock()
		}()
		j.run(pid)
	})
}

// run attaches JVM pid, trying again while it is not ready, for
// notReadyFor at most.
func (j *JavaAttacher) run(pid uint32) {
	j.lib.Do(func() {
		j.a.Options.Library, j.libErr = agents.Library(agents.JVMTI)
		if j.libErr != nil {
			j.o.Note(fmt.Sprintf("JVMs are not attached: %v", j.libErr))
		}
	})
	if j.libErr != nil {
		return
	}
	if err := dumpPlace(j.a.Options.Proc, pid); err != nil {
		if writesDump(j.a.Options.Proc, pid) {
			j.count(&j.already)
			return
		}
		j.count(&j.noPlace)
		j.o.Note(fmt.Sprintf("jitprof's JVMTI agent not loaded: JVM %d: %v", pid, err))
		return
	}
	giveUp := time.Now().Add(notReadyFor)
	// A JVM is seen as it maps libjvm.so, some 100 ms before it catches
	// SIGQUIT: it is tried again after 50 ms, then less and less often.
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		select {
		case j.slots <- struct{}{}:
		case <-j.ctx.Done():
			j.count(&j.cancelled)
			return
		}
		err := j.a.Attach(j.ctx, pid)
		<-j.slots
		switch {
		case j.ctx.Err() != nil:
			j.count(&j.cancelled)
			return
		case err == nil:
			j.mu.Lock()
			j.loaded[pid] = Now()
			j.mu.Unlock()
			return
		case !errors.Is(err, hotspot.ErrNotReady):
			return // attached, gone, or refused: counted and said by the Attacher
		case time.Now().After(giveUp):
			j.count(&j.notReady)
			j.o.Note(fmt.Sprintf("jitprof's JVMTI agent not loaded: %v (still so after %v)", err, notReadyFor))
			return
		}
		select {
		case <-j.ctx.Done():
			j.count(&j.cancelled)
			return
		case <-time.After(delay):
		}
	}
}

func (j *JavaAttacher) count(n *int) {
	j.mu.Lock()
	*n++
	j.mu.Unlock()
}

// Stats returns the counts so far.
func (j *JavaAttacher) Stats() AttachStats {
	s := j.a.Stats()
	j.mu.Lock()
	defer j.mu.Unlock()
	return AttachStats{Attached: s.Attached, Already: s.Already + j.already, Refused: s.Refused + j.notReady + j.noPlace, Unfinished: j.cancelled}
}

// TakeLoaded returns the JVMs found running the agent since the last call
// (loaded now, or before), each with the time (CLOCK_MONOTONIC ns) the load
// was done, and forgets them: a caller that runs for months keeps only
// those it has yet to look at.
func (j *JavaAttacher) TakeLoaded() map[uint32]uint64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	loaded := j.loaded
	j.loaded = make(map[uint32]uint64)
	return loaded
}

// Stop cancels the attaches under way, waits for them to end and returns
// the counts. Calls after the first return the same.
func (j *JavaAttacher) Stop() AttachStats {
	j.cancel()
	j.wg.Wait()
	return j.Stats()
}

// String says what the counts are, for a summary line.
func (s AttachStats) String() string {
	text := fmt.Sprintf("JVMs: jitprof's JVMTI agent loaded into %d, %d wrote a jitdump already, %d refused", s.Attached, s.Already, s.Refused)
	if s.Unfinished > 0 {
		text += fmt.Sprintf(", %d still being attached at the end", s.Unfinished)
	}
	return text
}

// maxEnviron bounds what is read of a JVM's environment.
const maxEnviron = 1 << 20

// dumpPlace returns why the agent, given no directory, would have none for
// JVM pid's dump, or nil: its environment names one (JITDUMPDIR: the JVM's
// user chose it), or its HOME is a directory of its user, as the JVM sees
// it, on a file system it may write.
func dumpPlace(proc procfs.FS, pid uint32) error {
	if proc == "" {
		proc = procfs.Host
	}
	f, err := os.Open(proc.Path(pid, "environ"))
	if err != nil {
		return err
	}
	env, err := io.ReadAll(io.LimitReader(f, maxEnviron))
	f.Close()
	if err != nil {
		return err
	}
	home := ""
	for v := range bytes.SplitSeq(env, []byte{0}) {
		if dir, ok := bytes.CutPrefix(v, []byte("JITDUMPDIR=")); ok && len(dir) > 0 {
			return nil
		}
		if dir, ok := bytes.CutPrefix(v, []byte("HOME=")); ok {
			home = string(dir)
		}
	}
	if !filepath.IsAbs(home) {
		return fmt.Errorf("its environment has neither a HOME for its dump (~/.debug/jit) nor a JITDUMPDIR")
	}
	st, err := proc.Status(pid)
	if err != nil {
		return err
	}
	root, err := unix.Open(proc.Path(pid, "root"), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	// Resolved as the JVM resolves it, in its own root.
	fd, err := unix.Openat2(root, home, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return fmt.Errorf("its HOME, %s, where its dump would go (~/.debug/jit): %w; JITDUMPDIR in its environment names another directory", home, err)
	}
	defer unix.Close(fd)
	var fi unix.Stat_t
	var fs unix.Statfs_t
	if err := unix.Fstat(fd, &fi); err != nil {
		return err
	}
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return err
	}
	switch {
	case fi.Uid != st.Cred.Uid:
		return fmt.Errorf("its HOME, %s, where its dump would go (~/.debug/jit), is uid %d's, not its user's (%d); JITDUMPDIR in its environment names another directory", home, fi.Uid, st.Cred.Uid)
	case fs.Flags&unix.ST_RDONLY != 0:
		return fmt.Errorf("its HOME, %s, where its dump would go (~/.debug/jit), is on a read-only file system; JITDUMPDIR in its environment names another directory", home)
	}
	return nil
}

// writesDump tells whether process pid maps a jitdump marker: it writes a
// dump already, wherever it was told to.
func writesDump(proc procfs.FS, pid uint32) bool {
	if proc == "" {
		proc = procfs.Host
	}
	ms, err := proc.Maps(pid)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if jitsources.IsMarker(m.Name) {
			return true
		}
	}
	return false
}
