package record

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

// StreamOptions say what a Stream samples: the events are Run's, opened
// the same way, but the records go to the caller instead of a file.
type StreamOptions struct {
	Freq      int
	Event     *Event // nil picks DefaultEvent
	CallGraph CallGraph
	StackSize uint32 // as Options.StackSize
	// Pids are the processes to sample, with their threads and children;
	// none samples every process on every CPU.
	Pids  []int
	Pages int          // each CPU's ring buffer; 0 picks the call graph's default
	Note  func(string) // as Options.Note
	// OffCPU and OffCPUMin are Options': the switch event too, its
	// samples of intervals shown shorter than OffCPUMin left out.
	OffCPU    bool
	OffCPUMin time.Duration
}

// Stream samples until closed and hands the kernel's records, raw, to
// whoever drains it: a long-running consumer (jitprof agent) that cuts them
// into pieces of its own. Drain and Wait are called from one goroutine.
type Stream struct {
	s session
	// Attr is the sampled event, its ids set; Attrs are the events
	// every record belongs to, Attr then with OffCPU the switch event: a
	// perf.data file of the records is written with them.
	Attr    *perfdata.Attr
	Attrs   []*perfdata.Attr
	Event   string
	pfds    []unix.PollFd
	cpus    []int
	blocked *blockedThreads // with OffCPU
}

// OpenStream opens the events and starts sampling.
func OpenStream(o StreamOptions) (*Stream, error) {
	ro := Options{Freq: o.Freq, Event: o.Event, CallGraph: o.CallGraph, StackSize: o.StackSize, Pids: o.Pids, AllCPUs: len(o.Pids) == 0, Pages: o.Pages, Note: o.Note,
		OffCPU: o.OffCPU, OffCPUMin: o.OffCPUMin}
	ev, ac, cpus, err := ro.prepare()
	if err != nil {
		return nil, err
	}
	st := &Stream{s: session{o: ro, wake: -1}, Event: ev.Name, cpus: cpus}
	tids := []int{-1}
	if len(o.Pids) > 0 {
		if tids, err = threadsOf(ro.proc(), o.Pids); err != nil {
			return nil, err
		}
	}
	if err := st.s.openAll(ev, ac, cpus, tids); err != nil {
		st.Close()
		return nil, err
	}
	st.Attr, st.Attrs = st.s.attr, st.s.attrs()
	st.s.prepareOffCPU()
	if st.s.switchIDs != nil {
		st.blocked = newBlockedThreads(st.s.switchIDs)
	}
	for _, fd := range st.s.fds {
		st.pfds = append(st.pfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	return st, nil
}

// Features are the header features of a perf.data file of the stream's
// records, as Run writes them.
func (st *Stream) Features() []perfdata.Feature {
	st.s.res.Event = st.Event
	return st.s.features(st.cpus)
}

// Synthesize describes the kernel and the processes running now (all of
// them, or the stream's) as records for emit, as Run writes them at the
// start of a recording. Processes that exit meanwhile, or that may not be
// read, are left out.
func (st *Stream) Synthesize(emit func(perfdata.Record) error) error {
	sy := synthesizer{proc: st.s.o.proc(), attr: st.Attr, emit: emit}
	return st.s.synthesize(&sy)
}

// Process describes one process as Synthesize does; an error matching
// ErrGone tells it exited.
func (st *Stream) Process(pid int, emit func(perfdata.Record) error) error {
	sy := synthesizer{proc: st.s.o.proc(), attr: st.Attr, emit: emit}
	return sy.process(pid)
}

// Wait returns when a ring buffer is half full, or after timeout.
func (st *Stream) Wait(timeout time.Duration) error {
	if _, err := unix.Poll(st.pfds, int(timeout.Milliseconds())); err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll: %w", err)
	}
	for i := range st.pfds {
		if st.pfds[i].Revents&(unix.POLLHUP|unix.POLLERR) != 0 {
			st.pfds[i].Fd = -1 // a -p process's event whose threads all exited
		}
	}
	return nil
}

// Drain hands emit every record written since the last Drain, valid only
// until emit returns; with OffCPUMin, the switch-out samples not yet shown
// long enough are held until the next Drain or Cut.
func (st *Stream) Drain(emit func([]byte) error) error {
	kept := st.followed(emit)
	take := kept
	if f := st.s.filter; f != nil {
		take = func(rec []byte) error {
			if !f.take(rec) {
				return nil
			}
			return kept(rec)
		}
	}
	if err := st.s.drainRings(take); err != nil {
		return err
	}
	if st.s.filter == nil {
		return nil
	}
	return st.s.filter.flush(kept, false)
}

// followed returns emit, after the records are followed for Cut.
func (st *Stream) followed(emit func([]byte) error) func([]byte) error {
	if st.blocked == nil {
		return emit
	}
	return func(rec []byte) error { return emit(st.blocked.observe(rec)) }
}

// Cut ends a window of the records, after a Drain: emit gets the
// switch-out samples still held, then, for each thread off its CPU, a
// switch-in at edge (CLOCK_MONOTONIC ns, after every record drained), so
// that the window counts the interval up to there. Resume, once the next
// window is begun, begins those intervals again at edge. Without OffCPU,
// nothing.
func (st *Stream) Cut(edge uint64, emit func([]byte) error) error {
	if st.blocked == nil {
		return nil
	}
	if f := st.s.filter; f != nil {
		if err := f.flush(st.followed(emit), true); err != nil {
			return err
		}
	}
	return st.blocked.cut(edge, emit)
}

// Resume gives emit, for each thread Cut found off its CPU, the sample
// and the switch-out that began its interval, both moved to the cut's
// edge.
func (st *Stream) Resume(emit func([]byte) error) error {
	if st.blocked == nil {
		return nil
	}
	return st.blocked.resume(emit)
}

// IsSwitch tells whether rec is a switch-out sample of OffCPU.
func (st *Stream) IsSwitch(rec []byte) bool {
	return st.s.switchIDs != nil && len(rec) >= sampleIDOff+8 && perfdata.RecordType(le.Uint32(rec)) == perfdata.TypeSample &&
		st.s.switchIDs[le.Uint64(rec[sampleIDOff:])]
}

// OffCPUStats are the switch-out samples left out as shorter than
// OffCPUMin, and the intervals under way at a Cut that Resume could not
// carry on (beyond its bounds on the threads followed).
func (st *Stream) OffCPUStats() (short, uncut uint64) {
	if st.blocked == nil {
		return 0, 0
	}
	return st.s.filter.shortCount(), st.blocked.uncut
}

// Close stops sampling and releases the events.
func (st *Stream) Close() {
	for _, fd := range st.s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	st.s.release()
}
