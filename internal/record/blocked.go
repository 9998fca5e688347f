package record

import (
	"maps"
	"slices"

	"github.com/jitprof/jitprof/perfdata"
)

// A stream cut into windows (jitprof agent) would leave each interval a
// thread spends off its CPU across a cut half told: its switch-out in one
// window, where it would run on to that window's last record, and its
// switch-in in the next, where alone it weighs nothing. blockedThreads
// follows each thread's last switch-out, with the stack sample taken at it,
// so that Stream.Cut ends such an interval at the cut with a switch-in
// there, and Stream.Resume begins it again at the cut in the next window,
// with its stack: each window holds the time its threads spent off their
// CPUs within it, and the windows add up to the whole.
type blockedThreads struct {
	ids     map[uint64]bool // the switch event's
	threads map[uint32]*threadSwitch
	held    int             // bytes of the samples kept
	carried []*threadSwitch // cut at the last Cut, to resume in the next window
	edge    uint64          // that cut's time
	// uncut counts the intervals under way at a cut that were not carried
	// over to the next window: of threads beyond maxThreads, or whose
	// sample was beyond maxHeld or lost by the kernel.
	uncut uint64
	// The bounds, maxFollowed and maxHeldBytes but in tests.
	maxThreads, maxHeld int
}

// Bounds on what is kept of threads off their CPU, most of them idle for
// long (a host's thread pools). A thread beyond them ends its interval at
// the cut still, but the next window does not count the rest.
const (
	maxFollowed  = 1 << 16
	maxHeldBytes = 64 << 20 // samples of 8 KiB stacks (dwarf) for 8k threads
)

// threadSwitch is what is known of a thread's last switches.
type threadSwitch struct {
	out, in  uint64 // times of the last switch-out and the newest switch-in
	outRec   []byte // the last switch-out record
	sample   []byte // the newest switch-out sample, when within the bounds
	sampleAt uint64
	// edge is the cut this thread's interval was carried over: a
	// switch-in timed before it, drained after the cut (another CPU's
	// buffer was read first), is moved to it.
	edge uint64
}

func newBlockedThreads(ids map[uint64]bool) *blockedThreads {
	return &blockedThreads{ids: ids, threads: map[uint32]*threadSwitch{}, maxThreads: maxFollowed, maxHeld: maxHeldBytes}
}

// thread returns tid's state, nil when beyond the bound.
func (b *blockedThreads) thread(tid uint32) *threadSwitch {
	th := b.threads[tid]
	if th == nil && len(b.threads) < b.maxThreads {
		th = &threadSwitch{}
		b.threads[tid] = th
	}
	return th
}

// observe follows rec, as drained, and returns what to write instead: rec,
// or a copy of a switch-in moved to the edge its interval was carried over.
func (b *blockedThreads) observe(rec []byte) []byte {
	switch perfdata.RecordType(le.Uint32(rec)) {
	case perfdata.TypeSample:
		if len(rec) < sampleTimeOff+8 || !b.ids[le.Uint64(rec[sampleIDOff:])] {
			return rec
		}
		th, t := b.thread(le.Uint32(rec[sampleTidOff:])), le.Uint64(rec[sampleTimeOff:])
		if th == nil || t < th.sampleAt {
			return rec // the filter writes samples a drain late: an older one
		}
		th.sampleAt = t
		b.held -= cap(th.sample)
		if b.held+len(rec) <= b.maxHeld {
			th.sample = append(th.sample[:0], rec...)
		} else {
			th.sample = nil
		}
		b.held += cap(th.sample)
	case perfdata.TypeSwitch, perfdata.TypeSwitchCPUWide:
		if len(rec) < perfdata.RecordHeaderSize+trailerSize {
			return rec
		}
		th, t := b.thread(le.Uint32(rec[len(rec)-trailerTidEnd:])), le.Uint64(rec[len(rec)-trailerTimeEnd:])
		if th == nil {
			return rec
		}
		if le.Uint16(rec[4:])&perfdata.MiscSwitchOut != 0 {
			if t > th.out {
				th.out, th.outRec = t, append(th.outRec[:0], rec...)
			}
			return rec
		}
		if t < th.edge {
			rec = setSwitchTime(slices.Clone(rec), th.edge)
			t = th.edge
		}
		th.in = max(th.in, t)
	case perfdata.TypeExit:
		if len(rec) >= perfdata.RecordHeaderSize+12 {
			b.forget(le.Uint32(rec[perfdata.RecordHeaderSize+8:]))
		}
	}
	return rec
}

func (b *blockedThreads) forget(tid uint32) {
	if th := b.threads[tid]; th != nil {
		b.held -= cap(th.sample)
		delete(b.threads, tid)
	}
}

// cut gives emit, for every thread off its CPU at edge, a switch-in at
// edge, and keeps those whose stack is known to resume. Threads not off
// their CPU are forgotten: all their records to come are newer than those
// the cut decided on, or moved to it.
func (b *blockedThreads) cut(edge uint64, emit func([]byte) error) error {
	b.carried, b.edge = b.carried[:0], edge
	// In order of tid: windows alike for alike streams.
	for _, tid := range slices.Sorted(maps.Keys(b.threads)) {
		th := b.threads[tid]
		if th.out <= th.in || th.outRec == nil || th.out >= edge {
			b.forget(tid)
			continue
		}
		in := slices.Clone(th.outRec)
		le.PutUint16(in[4:], le.Uint16(in[4:])&^(perfdata.MiscSwitchOut|perfdata.MiscSwitchOutPreempt))
		if err := emit(setSwitchTime(in, edge)); err != nil {
			return err
		}
		// The stack of this switch-out: its sample comes at it, after
		// the thread's switch-in before.
		if len(th.sample) == 0 || th.sampleAt > th.out || th.sampleAt <= th.in {
			b.uncut++
			b.forget(tid)
			continue
		}
		th.edge = edge
		b.carried = append(b.carried, th)
	}
	return nil
}

// resume gives emit, for every thread cut off its CPU, its switch-out
// sample and record moved to the edge: its interval goes on from there.
func (b *blockedThreads) resume(emit func([]byte) error) error {
	for _, th := range b.carried {
		le.PutUint64(th.sample[sampleTimeOff:], b.edge)
		th.sampleAt = b.edge
		th.out = b.edge
		if err := emit(th.sample); err != nil {
			return err
		}
		if err := emit(setSwitchTime(th.outRec, b.edge)); err != nil {
			return err
		}
	}
	clear(b.carried)
	b.carried = b.carried[:0]
	return nil
}

// setSwitchTime sets the time of a switch record's sample_id.
func setSwitchTime(rec []byte, t uint64) []byte {
	le.PutUint64(rec[len(rec)-trailerTimeEnd:], t)
	return rec
}
