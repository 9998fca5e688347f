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
}

// Stream samples until closed and hands the kernel's records, raw, to
// whoever drains it: a long-running consumer (jitprof agent) that cuts them
// into pieces of its own. Drain and Wait are called from one goroutine.
type Stream struct {
	s session
	// Attr is the event every record belongs to, its ids set: a perf.data
	// file of the records is written with it.
	Attr  *perfdata.Attr
	Event string
	pfds  []unix.PollFd
	cpus  []int
}

// OpenStream opens the events and starts sampling.
func OpenStream(o StreamOptions) (*Stream, error) {
	ro := Options{Freq: o.Freq, Event: o.Event, CallGraph: o.CallGraph, StackSize: o.StackSize, Pids: o.Pids, AllCPUs: len(o.Pids) == 0, Pages: o.Pages, Note: o.Note}
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
	st.Attr = st.s.attr
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
// until emit returns.
func (st *Stream) Drain(emit func([]byte) error) error {
	for _, r := range st.s.rings {
		if err := r.drain(&st.s.scratch, emit); err != nil {
			return err
		}
	}
	return nil
}

// Close stops sampling and releases the events.
func (st *Stream) Close() {
	for _, fd := range st.s.fds {
		unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
	}
	st.s.release()
}
