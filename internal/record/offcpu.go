package record

import (
	"cmp"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

// Off-CPU recording (--off-cpu): beside the sampled event, the
// context-switch software event sampled at every switch-out (period 1), in
// the thread switching out, so its sample carries the stack the thread
// blocked in; its attr also asks for PERF_RECORD_SWITCH records
// (context_switch), whose switch-ins end each blocked interval. No BPF and
// no tracefs: perf_event_open alone, as for CPU samples. The report
// weights each switch-out sample by the time until its thread's next
// switch-in.

// OffCPUEvent is the name the switch event has in the recording's header,
// perf's.
const OffCPUEvent = "context-switches"

// DefaultOffCPUMin is the shortest blocked interval whose stack a recording
// keeps by default. Shorter ones, at tens of thousands a second in a busy
// server, would be most of the file (a stack each, 8 KiB with DWARF) and
// little of the time; their time is still recorded by the switch records.
const DefaultOffCPUMin = 100_000 // ns

// offCPUAttr returns the switch event's attr for a recording whose sampled
// event has attr main: the same sample type, so that every record's
// sample_id is laid out alike, but a period of 1 and none of the side-band
// records, which main's event already asks for. The kernel is not
// excluded, even when main's is: the switch happens in the kernel, and
// a sample there would be dropped.
func offCPUAttr(main *perfdata.Attr) *perfdata.Attr {
	a := *main
	a.IDs = nil
	a.Type, a.Config, a.SamplePeriod = unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, 1
	a.Flags &^= perfdata.AttrFreq | perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrMmapData | perfdata.AttrComm |
		perfdata.AttrCommExec | perfdata.AttrTask | perfdata.AttrExcludeKernel | perfdata.AttrExcludeHV
	a.Flags |= perfdata.AttrContextSwitch
	return &a
}

// Offsets in records as newAttr lays them out (sample_type IDENTIFIER, IP,
// TID, TIME, CPU, PERIOD, then the call chain...): a sample's identifier,
// tid and time; the tid and time of a non-sample record's sample_id, from
// its end (pid/tid, time, cpu, identifier).
const (
	sampleIDOff    = perfdata.RecordHeaderSize
	sampleTidOff   = perfdata.RecordHeaderSize + 8 + 8 + 4
	sampleTimeOff  = perfdata.RecordHeaderSize + 8 + 8 + 8
	trailerTidEnd  = 28
	trailerTimeEnd = 24
	trailerSize    = 32
)

// switchFilter drops the switch-out samples of intervals shorter than min,
// while recording: one is dropped once a switch-in of its thread is seen
// within min of it, whichever ring buffer brought which first. Samples not
// proven short by the drain after their own are written then: an interval
// the recording cannot prove short is kept (the report applies the bound
// again, exactly). A sample is thus written at most one drain late, and
// FINISHED_ROUND is written every other drain (see markDue), so that what a
// round mark promises stays true.
type switchFilter struct {
	min     uint64
	ids     map[uint64]bool // the switch event's ids
	held    []heldSample    // samples of this drain, undecided
	pending []heldSample    // samples of the drain before, to decide at this one's end
	ins     map[uint32][]switchIn
	drains  uint64 // drains flushed
	odd     bool
	dropped uint64
	// horizon is a time before which every switch-in was in the rings
	// when the drain looked (CLOCK_MONOTONIC ns; 0 before any drain).
	horizon uint64
	buf     []byte // backing store of held samples' bytes, reused
	pendBuf []byte
}

type switchIn struct {
	time  uint64
	drain uint64 // the drain that brought it
}

type heldSample struct {
	tid        uint32
	time       uint64
	start, end int // in the filter's buffer
}

// see looks at a record before the drain hands it to take: it keeps the
// switch-ins, by which take decides the switch-out samples.
func (f *switchFilter) see(rec []byte) error {
	switch perfdata.RecordType(le.Uint32(rec)) {
	case perfdata.TypeSwitch, perfdata.TypeSwitchCPUWide:
		if le.Uint16(rec[4:])&perfdata.MiscSwitchOut == 0 && len(rec) >= perfdata.RecordHeaderSize+trailerSize {
			tid := le.Uint32(rec[len(rec)-trailerTidEnd:])
			f.ins[tid] = append(f.ins[tid], switchIn{le.Uint64(rec[len(rec)-trailerTimeEnd:]), f.drains})
		}
	}
	return nil
}

// take looks at a record as drained; it returns false for a switch-out
// sample it drops as short, or holds, to be written, or not, by flush. A
// sample whose switch-in the drain has seen, or which began min before
// every switch-in the drain could see (its horizon), is decided at once:
// held, a sample is copied, and copying every 8 KiB stack made drains
// 2.6 times longer and lose records under load.
func (f *switchFilter) take(rec []byte) bool {
	if perfdata.RecordType(le.Uint32(rec)) != perfdata.TypeSample || len(rec) < sampleTimeOff+8 || !f.ids[le.Uint64(rec[sampleIDOff:])] {
		return true
	}
	h := heldSample{tid: le.Uint32(rec[sampleTidOff:]), time: le.Uint64(rec[sampleTimeOff:])}
	switch in, seen := f.switchIn(h); {
	case seen && in-h.time < f.min:
		f.dropped++
		return false
	case seen, h.time+f.min <= f.horizon:
		return true
	}
	h.start = len(f.buf)
	f.buf = append(f.buf, rec...)
	h.end = len(f.buf)
	f.held = append(f.held, h)
	return false
}

// switchIn returns the time of the first switch-in of h's thread seen
// after h, found in the switch-ins as sortIns leaves them (a busy thread's
// thousands a drain made a linear search a quadratic one, most of the
// agent's time).
func (f *switchFilter) switchIn(h heldSample) (uint64, bool) {
	ins := f.ins[h.tid]
	i, _ := slices.BinarySearchFunc(ins, h.time+1, func(in switchIn, t uint64) int { return cmp.Compare(in.time, t) })
	if i == len(ins) {
		return 0, false
	}
	return ins[i].time, true
}

// short tells whether a switch-in of h's thread was seen within min after
// h.
func (f *switchFilter) short(h heldSample) bool {
	in, ok := f.switchIn(h)
	return ok && in-h.time < f.min
}

// sortIns sorts each thread's switch-ins by time, which the rings gave
// in the order of their CPUs.
func (f *switchFilter) sortIns() {
	byTime := func(a, b switchIn) int { return cmp.Compare(a.time, b.time) }
	for _, ins := range f.ins {
		if !slices.IsSortedFunc(ins, byTime) {
			slices.SortFunc(ins, byTime)
		}
	}
}

// flush ends a drain: the samples of the drain before are written unless
// proven short; this drain's proven short are dropped, the rest held for
// the next. At the last drain (final), every sample not proven short is
// written.
func (f *switchFilter) flush(write func([]byte) error, final bool) error {
	f.sortIns()
	for _, h := range f.pending {
		if f.short(h) {
			f.dropped++
			continue
		}
		if err := write(f.pendBuf[h.start:h.end]); err != nil {
			return err
		}
	}
	f.pending = f.pending[:0]
	f.pendBuf, f.buf = f.buf, f.pendBuf[:0]
	for _, h := range f.held {
		switch {
		case f.short(h):
			f.dropped++
		case final:
			if err := write(f.pendBuf[h.start:h.end]); err != nil {
				return err
			}
		default:
			f.pending = append(f.pending, h)
		}
	}
	f.held = f.held[:0]
	f.prune()
	return nil
}

// prune keeps the switch-ins a sample still to be decided may need: those
// after the oldest pending sample of their thread, and those of this
// drain, which samples drained next may precede (a ring read earlier in
// the drain holds records newer than the samples a later one is yet to
// be given). Older ones can prove nothing more.
func (f *switchFilter) prune() {
	oldest := map[uint32]uint64{}
	for _, h := range f.pending {
		if t, ok := oldest[h.tid]; !ok || h.time < t {
			oldest[h.tid] = h.time
		}
	}
	for tid, ins := range f.ins {
		keep := ins[:0]
		for _, in := range ins {
			if t, ok := oldest[tid]; (ok && in.time > t) || in.drain == f.drains {
				keep = append(keep, in)
			}
		}
		if len(keep) == 0 {
			delete(f.ins, tid)
			continue
		}
		f.ins[tid] = keep
	}
	f.drains++
}

// markDue tells whether a FINISHED_ROUND may end this drain. A mark
// promises that what follows is newer than what came before the mark
// before it; samples written a drain late are newer than the records of
// two drains before, not always than those of the drain before.
func (f *switchFilter) markDue() bool {
	f.odd = !f.odd
	return !f.odd
}

// attrs are the recording's events: the sampled one, then the switch
// event with OffCPU; none before they are made.
func (s *session) attrs() []*perfdata.Attr {
	switch {
	case s.attr == nil:
		return nil
	case s.offCPU == nil:
		return []*perfdata.Attr{s.attr}
	}
	return []*perfdata.Attr{s.attr, s.offCPU}
}

// eventNames are attrs' names, for the header.
func (s *session) eventNames() []string {
	if s.offCPU == nil {
		return []string{s.res.Event}
	}
	return []string{s.res.Event, OffCPUEvent}
}

// switchAttr returns the switch event's attr with OffCPU, else nil.
func (s *session) switchAttr() *perfdata.Attr {
	if !s.o.OffCPU {
		return nil
	}
	return offCPUAttr(s.attr)
}

// prepareOffCPU, once the events are open, learns the switch event's ids
// and sets up the filter of short intervals when one is asked for.
func (s *session) prepareOffCPU() {
	if s.offCPU == nil {
		return
	}
	s.switchIDs = make(map[uint64]bool, len(s.offCPU.IDs))
	for _, id := range s.offCPU.IDs {
		s.switchIDs[id] = true
	}
	if s.o.OffCPUMin > 0 {
		s.filter = &switchFilter{min: uint64(s.o.OffCPUMin.Nanoseconds()), ids: s.switchIDs, ins: map[uint32][]switchIn{}}
	}
}

// countSwitch counts a switch-out sample written.
func (s *session) countSwitch(rec []byte) {
	if s.switchIDs == nil || len(rec) < sampleIDOff+8 {
		return
	}
	if s.switchIDs[le.Uint64(rec[sampleIDOff:])] {
		s.res.Switches++
	}
}

// shortCount is how many samples f left out; 0 without a filter.
func (f *switchFilter) shortCount() uint64 {
	if f == nil {
		return 0
	}
	return f.dropped
}

// inFlight is how long after its time a record may still be on its way
// into its ring: a switch is written as it happens, microseconds at most.
const inFlight = uint64(time.Millisecond)

// drainRings hands take every record the rings hold. With the filter of
// short blocks, it first goes through every ring for the switch-ins, so
// that take can decide most switch-out samples when it is given them.
func (s *session) drainRings(take func([]byte) error) error {
	f := s.filter
	if f == nil {
		for _, r := range s.rings {
			if err := r.drain(&s.scratch, take); err != nil {
				return err
			}
		}
		return nil
	}
	// The clock before the heads: a switch-in timed before now-inFlight
	// was in its ring when its head was read.
	now := Now()
	s.heads = s.heads[:0]
	for _, r := range s.rings {
		s.heads = append(s.heads, r.head())
	}
	for i, r := range s.rings {
		if err := r.readTo(s.heads[i], &s.scratch, f.see, false); err != nil {
			return err
		}
	}
	f.sortIns()
	f.horizon = max(f.horizon, now-min(now, inFlight))
	for i, r := range s.rings {
		if err := r.readTo(s.heads[i], &s.scratch, take, true); err != nil {
			return err
		}
	}
	return nil
}
