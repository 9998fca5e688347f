// Package agent is jitprof's continuous profiler: it samples the host (or
// some processes) without end and, every window, turns the window's samples
// into a profile named as jitprof report names them, for an OpenTelemetry
// Collector (OTLP profiles over gRPC) and/or rolling pprof files.
//
// Three goroutines, joined by bounded queues that drop rather than wait, so
// that nothing downstream can slow sampling:
//
//   - the sampler drains the kernel's ring buffers into the current
//     window's perf.data, keeping each live process's state (its threads'
//     names, the code it has mapped, its jitdump markers) from the
//     records, and at each cut starts the next window's file with that
//     state, so that every window reads alone;
//   - the symbolizer runs perfprof, the one naming path of jitprof report,
//     on each finished window: jitted functions named from the dumps and
//     perf maps as they were at each sample's time, native and kernel frames
//     as report names them;
//   - the exporters send each window's profile to the collector, retrying
//     with backoff while it is down, and write it into the pprof directory.
package agent

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/jitprof/jitprof/internal/jitwatch"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jitprof/jitprof/internal/atomicfile"
	"github.com/jitprof/jitprof/internal/otlpprof"
	"github.com/jitprof/jitprof/internal/record"
	"github.com/jitprof/jitprof/perfdata"
)

// DefaultFreq is the agent's sampling rate. 49 Hz: a busy core gives ~490
// samples a 10 s window, enough to place a function with a 5% share within
// about a point, at a cost far below 1% of a core; not a divisor of the
// common 100 Hz and 1000 Hz timers, so sampling does not lock step with
// periodic work (perf's 99 Hz and OpenTelemetry's 19/20 Hz reason the same
// way).
const DefaultFreq = 49

// Options say what the agent samples and where profiles go.
type Options struct {
	Freq      int
	Event     *record.Event
	CallGraph record.CallGraph
	StackSize uint32 // of a DWARF call graph's stack copies, as record's
	Pids      []int  // none: every process
	// OffCPU records every switch of the threads off and onto a CPU, with
	// the stack at each switch-out, as record --off-cpu, the stacks of
	// blocks shorter than OffCPUMin left out (their time kept): each
	// window's profile is then perfprof's wall-clock view, cpu and
	// off-cpu time. An interval under way at a window's cut is cut there:
	// each window counts the time within it (record.Stream.Cut).
	OffCPU    bool
	OffCPUMin time.Duration
	// Cgroup keeps, of every process sampled, those in this cgroup or
	// below it (a path as /proc/PID/cgroup gives it, in any hierarchy).
	Cgroup string
	// Window is how much time each profile covers.
	Window   time.Duration
	Duration time.Duration // 0: until ctx is done

	// OTLP is the collector's OTLP/gRPC address, HOST:PORT; "" sends none.
	OTLP string
	// Buffer is how many windows wait for the collector at most; older
	// ones are dropped beyond it.
	Buffer int
	// PprofDir receives a pprof file per window, the oldest removed to
	// keep PprofMaxBytes, or to make room when the disk is full.
	PprofDir      string
	PprofMaxBytes int64
	// KeepWindows keeps each window's perf.data in this directory, for
	// jitprof report to read (tests, debugging); when the disk fills, a
	// window is cut short and the oldest kept make room.
	KeepWindows string
	// Status, if set, is a file rewritten after every window with the
	// agent's counters (Status), as JSON.
	Status string
	// JITWait is how long a window waits for the dumps of its processes
	// to catch up with it, at most (see dumpwatch.go).
	JITWait time.Duration
	// JITCopyMaxBytes bounds the disk the copies of perf maps and
	// containers' dumps use (jitwatch.WatchLive); 0: no bound.
	JITCopyMaxBytes int64
	// Force reads perf maps and dumps their process's owner or root does
	// not own, as perf's -f.
	Force bool
	// AttachJava loads jitprof's JVMTI agent into the HotSpot JVMs sampled
	// (record.JavaAttacher), each once.
	AttachJava bool
	Log        func(string)
}

// Status is the agent's counters, as the status file gives them.
type Status struct {
	Windows int64 `json:"windows"` // cut
	Samples int64 `json:"samples"` // written into windows
	Lost    int64 `json:"lost"`    // dropped by the kernel
	// Profiled counts the windows symbolized; SkippedWindows those dropped
	// because symbolizing fell behind; Early those symbolized before
	// every dump they needed had caught up (JITWait ran out).
	Profiled       int64 `json:"profiled"`
	SkippedWindows int64 `json:"skipped_windows"`
	Early          int64 `json:"early"`
	// Sent counts the windows the collector accepted; Dropped those
	// dropped while it could not be reached; SendErrors the failed tries.
	Sent       int64 `json:"sent"`
	Dropped    int64 `json:"dropped"`
	SendErrors int64 `json:"send_errors"`
	PprofFiles int64 `json:"pprof_files"`
	Processes  int64 `json:"processes"` // whose state is kept now
	// KeptPids are those processes: a process's state goes once the last
	// window it was in is read.
	KeptPids []uint32 `json:"kept_pids"`
	// JITCopyBytes is the disk the copies of perf maps and containers'
	// dumps use; JITCopiesEvicted counts the exited processes whose
	// copies the size bound removed before their last window was read.
	JITCopyBytes     int64 `json:"jit_copy_bytes"`
	JITCopiesEvicted int64 `json:"jit_copies_evicted"`
	// With AttachJava, the JVMs the agent was loaded into, those that
	// wrote a jitdump already, and those that refused it.
	JavaAttached int64 `json:"java_attached"`
	JavaAlready  int64 `json:"java_already"`
	JavaRefused  int64 `json:"java_refused"`
	// With OffCPU: the switch-out samples written, those left out as
	// shorter than OffCPUMin, and the intervals under way at a cut whose
	// rest the next window could not count (beyond the agent's bounds on
	// the threads it follows; see record.Stream.Cut).
	Switches      int64 `json:"switches,omitempty"`
	ShortSwitches int64 `json:"short_switches,omitempty"`
	Uncut         int64 `json:"uncut_intervals,omitempty"`
}

type counters struct {
	windows, samples, lost, profiled, skipped, early, sent, dropped, sendErrors, pprofFiles atomic.Int64
	switches, shortSwitches, uncut                                                          atomic.Int64
	// read is the last window the symbolizer is done with.
	read     atomic.Int64
	statusMu sync.Mutex
	jit      *jitwatch.Watcher
	java     *record.JavaAttacher // nil without AttachJava
	kept     atomic.Pointer[[]uint32]
}

func (c *counters) snapshot() Status {
	s := Status{Windows: c.windows.Load(), Samples: c.samples.Load(), Lost: c.lost.Load(), Profiled: c.profiled.Load(),
		SkippedWindows: c.skipped.Load(), Early: c.early.Load(), Sent: c.sent.Load(), Dropped: c.dropped.Load(), SendErrors: c.sendErrors.Load(),
		PprofFiles: c.pprofFiles.Load(), Switches: c.switches.Load(), ShortSwitches: c.shortSwitches.Load(), Uncut: c.uncut.Load()}
	if kept := c.kept.Load(); kept != nil {
		s.KeptPids, s.Processes = *kept, int64(len(*kept))
	}
	if c.jit != nil {
		s.JITCopyBytes, s.JITCopiesEvicted = c.jit.Usage()
	}
	if c.java != nil {
		j := c.java.Stats()
		s.JavaAttached, s.JavaAlready, s.JavaRefused = int64(j.Attached), int64(j.Already), int64(j.Refused)
	}
	return s
}

// window is a finished window's perf.data and what its profile's
// resources say.
type window struct {
	seq        int64
	path       string
	start, end time.Time
	endMono    uint64 // end, in CLOCK_MONOTONIC ns, the clock of samples and dumps
	procs      map[uint32]otlpprof.Process
	// waits are the dumps the window's samples need, of processes still
	// running at its end (see dumpwatch.go).
	waits []dumpWait
	// pids, with Options.Cgroup, are the sampled processes in the cgroup:
	// the profile keeps their samples only.
	pids []uint32
	// exited are the processes this window is the last to carry: once
	// it is read, their copies go.
	exited []uint32
}

// dumpWait is a dump a window waits for.
type dumpWait struct {
	pid  uint32
	path string
}

// Run samples until ctx is done or Duration passes, then sends what it
// has and returns.
func Run(ctx context.Context, o Options) (Status, error) {
	if o.Log == nil {
		o.Log = func(string) {}
	}
	if o.Window <= 0 {
		return Status{}, fmt.Errorf("--window %v: must be positive", o.Window)
	}
	if o.OTLP == "" && o.PprofDir == "" && o.KeepWindows == "" {
		return Status{}, errors.New("nowhere to send profiles: give --otlp HOST:PORT and/or --pprof-dir DIR")
	}
	if o.Buffer <= 0 {
		o.Buffer = 1
	}
	if o.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Duration)
		defer cancel()
	}
	// The places written are checked before anything is sampled.
	for _, dir := range []string{o.KeepWindows, o.PprofDir} {
		if dir == "" {
			continue
		}
		if err := atomicfile.MkdirAll(dir, 0o700); err != nil {
			return Status{}, err
		}
	}
	if o.Status != "" {
		if err := atomicfile.CheckDir(filepath.Dir(o.Status)); err != nil {
			return Status{}, err
		}
	}
	st, err := record.OpenStream(record.StreamOptions{Freq: o.Freq, Event: o.Event, CallGraph: o.CallGraph, StackSize: o.StackSize, Pids: o.Pids, Note: o.Log,
		OffCPU: o.OffCPU, OffCPUMin: o.OffCPUMin})
	if err != nil {
		return Status{}, err
	}
	defer st.Close()
	if o.OffCPU && o.CallGraph == record.DWARF {
		o.Log("--off-cpu with --call-graph dwarf: the kernel copies the stack at every switch-out, the short ones too; at tens of thousands of switches a second that is more than the ring buffers take (the status counts what is lost)")
	}

	dir := o.KeepWindows
	if dir == "" {
		if dir, err = os.MkdirTemp("", "jitprof-agent-"); err != nil {
			return Status{}, err
		}
		defer os.RemoveAll(dir)
	}
	// Windows wait for their dumps in the queue: room for as many as
	// JITWait holds, and two more.
	queue := int(o.JITWait/o.Window) + 2
	s := &sampler{o: o, st: st, attr: st.Attr, dir: dir, tr: newTracker(), queue: make(chan *window, queue), sampled: make(map[uint32]bool), jvms: make(map[uint32]uint64)}
	// Perf maps copied as they grow, timed, and containers' dumps copied
	// while their processes live, beside the windows, where perfprof
	// looks first (jitsources.SearchDirs).
	jit := jitwatch.WatchLive(dir, o.Pids, jitwatch.Options{MaxBytes: o.JITCopyMaxBytes, Force: o.Force, Note: o.Log})
	defer jit.Stop()
	s.c.jit = jit
	if o.AttachJava {
		s.c.java = record.AttachJava(ctx, record.JavaOptions{Note: o.Log})
		defer s.c.java.Stop()
	}
	var sinks []sink
	if o.OTLP != "" {
		ex, err := newOTLPSink(o.OTLP, o.Buffer, o.OffCPU, &s.c, o.Log)
		if err != nil {
			return Status{}, err
		}
		sinks = append(sinks, ex)
	}
	if o.PprofDir != "" {
		sinks = append(sinks, &pprofSink{dir: o.PprofDir, max: o.PprofMaxBytes, c: &s.c, log: o.Log})
	}
	if s.dec, err = newDecoder(s.attr); err != nil {
		return Status{}, err
	}
	host, _ := os.Hostname()
	sym := &symbolizer{o: o, c: &s.c, host: host, sinks: sinks, keep: o.KeepWindows != "", dumps: newDumpWatch(dir, o.Force), jit: jit, dir: dir, stopping: make(chan struct{})}
	var wg sync.WaitGroup
	for _, sk := range sinks {
		wg.Go(sk.run)
	}
	var symWG sync.WaitGroup
	symWG.Go(func() { sym.run(s.queue) })

	err = s.run(ctx)
	if s.c.java != nil {
		o.Log(s.c.java.Stop().String())
	}
	close(sym.stopping)
	close(s.queue)
	symWG.Wait()
	for _, sk := range sinks {
		sk.close()
	}
	wg.Wait()
	s.c.writeStatus(o.Status)
	return s.c.snapshot(), err
}

// sampler is the goroutine that drains the ring buffers.
type sampler struct {
	o     Options
	st    *record.Stream
	attr  *perfdata.Attr // the stream's
	dir   string
	tr    *tracker
	dec   *decoder
	w     *perfdata.Writer
	cur   *window
	seq   int64
	queue chan *window
	c     counters
	// sampled are the pids with samples in the current window.
	sampled map[uint32]bool
	pending []timed
	// full is the error of the window's write that found the disk full:
	// the window is cut there (salvage).
	full error
	// written counts the bytes of the records written into the window,
	// the room the next is likely to need.
	written int64
	// jvms are those the agent was loaded into whose marker is yet to be
	// looked for, with the time of the load (restoreMarkers).
	jvms map[uint32]uint64
}

// drainEvery bounds how long records wait in the ring buffers: the
// window's cut is on time within it, and a stop is noticed.
const drainEvery = 200 * time.Millisecond

func (s *sampler) run(ctx context.Context) error {
	early, err := s.synthesize()
	if err != nil {
		return err
	}
	if err := s.begin(time.Now()); err != nil {
		return err
	}
	for len(early) > 0 {
		n := int(binary.LittleEndian.Uint16(early[6:]))
		if err := s.add(early[:n]); err != nil {
			return err
		}
		early = early[n:]
	}
	for {
		wait := min(drainEvery, time.Until(s.cur.start.Add(s.o.Window)))
		if err := s.st.Wait(max(wait, 0)); err != nil {
			return err
		}
		if err := s.st.Drain(s.add); err != nil {
			return err
		}
		s.applyPending()
		done := ctx.Err() != nil
		now := time.Now()
		if done || s.full != nil || !now.Before(s.cur.start.Add(s.o.Window)) {
			if err := s.cut(now, !done); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
	}
}

// earlyMaxBytes bounds the records synthesize keeps in memory; beyond it,
// they are counted as lost.
const earlyMaxBytes = 64 << 20

// synthesize applies to the state the description of the processes running
// now, which takes long, reading /proc (a fifth of a second for kallsyms
// alone): meanwhile the stream is drained into memory, lest a busy one (a
// switch event at every context switch) overflow its ring buffers. It
// returns the records drained, for the first window after the state.
func (s *sampler) synthesize() ([]byte, error) {
	var described []perfdata.Record
	done := make(chan error, 1)
	go func() {
		done <- s.st.Synthesize(func(rec perfdata.Record) error {
			described = append(described, rec)
			return nil
		})
	}()
	var early []byte
	var over int64
	keep := func(rec []byte) error {
		if len(early)+len(rec) > earlyMaxBytes {
			over++
			return nil
		}
		early = append(early, rec...)
		return nil
	}
	for {
		select {
		case err := <-done:
			if err != nil {
				return nil, err
			}
			if over > 0 {
				s.c.lost.Add(over)
				s.o.Log(fmt.Sprintf("%d records lost while the running processes were described: more than %d MiB of them", over, earlyMaxBytes>>20))
			}
			for _, rec := range described {
				s.track(rec)
			}
			return early, nil
		default:
		}
		if err := s.st.Wait(synthesizeDrainEvery); err != nil {
			return nil, err
		}
		if err := s.st.Drain(keep); err != nil {
			return nil, err
		}
	}
}

// synthesizeDrainEvery is how often the stream is drained while the
// processes are described, at most.
const synthesizeDrainEvery = 10 * time.Millisecond

// track applies a synthesized record to the state.
func (s *sampler) track(rec perfdata.Record) error {
	s.sawJava(rec)
	if r, _ := own(rec); r != nil {
		s.tr.apply(r)
	}
	return nil
}

// sawJava hands a mapping to the JVMs' attacher, if there is one.
func (s *sampler) sawJava(rec perfdata.Record) {
	if s.c.java != nil {
		s.c.java.Saw(rec)
	}
}

// timed is a record of the state waiting to be applied in time order.
type timed struct {
	t   uint64
	rec perfdata.Record
}

// applyPending applies the drain's records of the state in time order.
func (s *sampler) applyPending() {
	slices.SortStableFunc(s.pending, func(a, b timed) int { return cmp.Compare(a.t, b.t) })
	for _, p := range s.pending {
		s.tr.apply(p.rec)
	}
	clear(s.pending)
	s.pending = s.pending[:0]
}

// windowName is the name of a window's perf.data: its sequence number and
// start time (ns); windowScan reads them back, past six digits too.
const windowName, windowScan = "window-%06d-%d.data", "window-%d-%d.data"

// begin starts a window's perf.data with the state of every live process.
func (s *sampler) begin(now time.Time) error {
	s.seq++
	// The start time in the name lets a window's perf.data be matched
	// with its profile, which carries that time.
	path := filepath.Join(s.dir, fmt.Sprintf(windowName, s.seq, now.UnixNano()))
	w, err := perfdata.Create(path, perfdata.Options{Attrs: s.st.Attrs, Features: s.st.Features()})
	if err != nil {
		return err
	}
	s.w, s.written = w, 0
	s.cur = &window{seq: s.seq, path: path, start: now}
	if err := s.tr.records(w.WriteRecord); err != nil {
		return err
	}
	// The threads off their CPU at the cut go on being so.
	return s.st.Resume(s.add)
}

// add writes a record of the stream into the window, and keeps what it
// says of a process.
func (s *sampler) add(rec []byte) error {
	if err := s.w.WriteRaw(rec); err != nil {
		if !diskFull(err) {
			return err
		}
		// The window is cut at the next look (salvage); until then its
		// records are still read for the processes' state.
		s.full = cmp.Or(s.full, err)
	}
	s.written += int64(len(rec))
	switch t := perfdata.RecordType(binary.LittleEndian.Uint32(rec)); t {
	case perfdata.TypeSample:
		s.c.samples.Add(1)
		if s.st.IsSwitch(rec) {
			s.c.switches.Add(1)
		}
		if r, err := s.dec.decode(rec); err == nil {
			if smp, ok := r.(*perfdata.Sample); ok {
				s.sampled[smp.Pid] = true
			}
		}
	case perfdata.TypeLost:
		if len(rec) >= 24 {
			s.c.lost.Add(int64(binary.LittleEndian.Uint64(rec[16:])))
		}
	case perfdata.TypeMmap, perfdata.TypeMmap2, perfdata.TypeComm, perfdata.TypeFork, perfdata.TypeExit:
		r, err := s.dec.decode(rec)
		if err != nil {
			// The reader stops at its first error: a new one for the
			// records after.
			s.o.Log(fmt.Sprintf("a %s record not understood: %v", t, err))
			if s.dec, err = newDecoder(s.attr); err != nil {
				return err
			}
			return nil
		}
		s.sawJava(r)
		if r, t := own(r); r != nil {
			s.pending = append(s.pending, timed{t, r})
		}
	}
	return nil
}

// restoreMarkers gives each JVM the agent was loaded into a second or more
// before now, whose marker mapping the stream lacks, its marker as
// /proc/PID/maps has it, in the state and in the window. The kernel drops
// the records that do not fit in a full ring buffer, a small one like the
// marker's rarely; but a JVM maps its marker once, so a lost one would
// leave its methods unnamed for as long as it runs.
func (s *sampler) restoreMarkers(now uint64) error {
	for pid, t := range s.jvms {
		if now-t < uint64(time.Second) {
			continue // its marker may still be on its way
		}
		delete(s.jvms, pid)
		if p := s.tr.procs[pid]; p == nil || p.exited || len(p.markers()) > 0 {
			continue
		}
		ms, err := record.Markers(s.tr.procFS, s.attr, pid, t)
		switch {
		case errors.Is(err, record.ErrGone):
			continue // its EXIT ends it
		case err != nil:
			s.o.Log(fmt.Sprintf("JVM %d: the stream lacks the mapping of its jitdump's marker, and its maps could not be read: %v", pid, err))
			continue
		}
		for _, m := range ms {
			s.tr.apply(m)
			if err := s.w.WriteRecord(m); err != nil {
				if !diskFull(err) {
					return err
				}
				s.full = cmp.Or(s.full, err)
			}
		}
		if len(ms) > 0 {
			s.o.Log(fmt.Sprintf("JVM %d: the stream lacked the mapping of its jitdump's marker (the kernel lost records): taken from /proc/%d/maps", pid, pid))
		}
	}
	return nil
}

// cut ends the current window, hands it to the symbolizer (or drops it
// when the symbolizer is behind) and, unless it is the last, begins the
// next.
func (s *sampler) cut(now time.Time, next bool) error {
	w := s.cur
	w.end, w.endMono = now, record.Now()
	if err := s.st.Cut(w.endMono, s.add); err != nil {
		return err
	}
	short, uncut := s.st.OffCPUStats()
	s.c.shortSwitches.Store(int64(short))
	s.c.uncut.Store(int64(uncut))
	if s.c.java != nil {
		maps.Copy(s.jvms, s.c.java.TakeLoaded())
	}
	if err := s.restoreMarkers(w.endMono); err != nil {
		return err
	}
	w.procs, w.waits, w.pids, w.exited = s.tr.cut(s.sampled, s.o.Cgroup)
	clear(s.sampled)
	kept := slices.Sorted(maps.Keys(s.tr.procs))
	s.c.kept.Store(&kept)
	s.c.windows.Add(1)
	s.c.writeStatus(s.o.Status)
	// A full disk shows at a write of the window, or only at Close,
	// which flushes its buffer.
	closed, err := false, s.full
	if err == nil {
		closed, err = true, s.w.Close()
	}
	if diskFull(err) {
		if !s.salvage(err, closed) {
			s.c.skipped.Add(1)
			s.c.jit.Drop(w.exited)
			w = nil
		}
	} else if err != nil {
		return err
	}
	s.w = nil
	if w != nil {
		select {
		case s.queue <- w:
		default:
			s.c.skipped.Add(1)
			s.c.jit.Drop(w.exited)
			s.o.Log(fmt.Sprintf("window %d skipped: symbolizing the previous ones is behind", w.seq))
			if s.o.KeepWindows == "" {
				os.Remove(w.path)
			}
		}
	}
	if !next {
		return nil
	}
	return s.begin(now)
}

// salvage ends the current window on a full disk, cause: unless Close
// already failed (closed), and removed it, what reached the disk whole is
// kept as the window; with --keep-windows the oldest windows kept make room
// for the next. It tells whether anything of the window was kept.
func (s *sampler) salvage(cause error, closed bool) bool {
	s.full = nil
	var kept error
	if closed {
		kept = errors.New("closing it removed it")
	} else {
		kept = s.w.Salvage()
	}
	if kept != nil {
		s.o.Log(fmt.Sprintf("window %d dropped: %v (%v)", s.cur.seq, cause, kept))
	} else {
		s.o.Log(fmt.Sprintf("window %d cut short at its last whole record: %v", s.cur.seq, cause))
	}
	if s.o.KeepWindows != "" {
		s.makeRoom(max(s.written, 1))
	}
	return kept == nil
}

// makeRoom removes the oldest windows kept, of those the symbolizer is done
// with, and says so: a tenth of them, so that the disk does not fill again
// at the next window, or more until need bytes are freed (what the window
// the disk filled in wrote).
func (s *sampler) makeRoom(need int64) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.o.Log(fmt.Sprintf("%s: %v", s.dir, err))
		return
	}
	type kept struct {
		seq  int64
		name string
		size int64
	}
	var old []kept
	read := s.c.read.Load()
	for _, e := range entries {
		var seq, start int64
		if n, _ := fmt.Sscanf(e.Name(), windowScan, &seq, &start); n != 2 || !e.Type().IsRegular() || seq > read {
			continue
		}
		if fi, err := e.Info(); err == nil {
			old = append(old, kept{seq, e.Name(), fi.Size()})
		}
	}
	slices.SortFunc(old, func(a, b kept) int { return cmp.Compare(a.seq, b.seq) })
	var removed int
	var freed int64
	for _, k := range old {
		if freed >= need && removed >= len(old)/10 {
			break
		}
		if os.Remove(filepath.Join(s.dir, k.name)) != nil {
			continue
		}
		removed++
		freed += k.size
	}
	s.o.Log(fmt.Sprintf("%s: disk full: removed the %d oldest windows kept (%d bytes) to make room", s.dir, removed, freed))
}
