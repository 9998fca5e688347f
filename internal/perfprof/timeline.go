package perfprof

import (
	"fmt"
	"math"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/perfdata"
)

// maxSlots bounds the time slots of a timeline: the profile then holds at
// most that many samples per distinct stack of a thread, whatever the
// length of the recording.
const maxSlots = 200

// firstSlotShift makes the first slots about a millisecond wide: a short
// recording gets slots it can fill, a long one a few doublings.
const firstSlotShift = 20

// A timeline numbers the time slots of a profile (Options.Timeline). The
// recording's span is known only once it is read, and its records come a
// little out of time order, so the slots are 2^shift ns wide, aligned on
// multiples of their width, and doubled (pairs merged) whenever the times
// seen would need more than maxSlots of them: a recording of any length
// ends with between maxSlots/2 and maxSlots slots, each sample's slot
// computed once, and no time kept per sample.
type timeline struct {
	shift  uint
	lo, hi uint64 // the first and last slots seen, as time>>shift
	seen   bool
}

// checkTimeline refuses a timeline of samples without times.
func (a *aggregator) checkTimeline(input string) error {
	for at := range a.attrs {
		if at.SampleType&perfdata.SampleTime == 0 {
			return fmt.Errorf("%s: the samples of %s have no times: no timeline can be drawn of them", input, a.event)
		}
	}
	return nil
}

// slot returns the slot of time t, a stackKey's, counted from the first;
// 0 without a timeline.
func (a *aggregator) slot(t uint64) uint32 {
	tl := a.timeline
	if tl == nil {
		return 0
	}
	a.reach(t)
	return uint32(t>>tl.shift - tl.lo)
}

// reach makes the slots cover t: when it falls before the first slot or
// after maxSlots of them, the slots widen (and the stacks' slots with
// them) until they cover both.
func (a *aggregator) reach(t uint64) {
	tl := a.timeline
	at := t >> tl.shift
	if !tl.seen {
		tl.lo, tl.hi, tl.seen = at, at, true
		return
	}
	if at >= tl.lo && at <= tl.hi {
		return
	}
	lo, hi := min(tl.lo, at), max(tl.hi, at)
	var d uint
	for hi>>d-lo>>d >= maxSlots {
		d++
	}
	if lo == tl.lo && d == 0 {
		tl.hi = hi
		return
	}
	// Slots are renumbered from the new first: old slot s, at time
	// (tl.lo+s)<<shift, becomes ((tl.lo+s)>>d) - lo>>d.
	stacks := newSampleTable()
	for _, e := range a.stacks.entries.All() {
		k := e.key
		k.slot = uint32((tl.lo+uint64(k.slot))>>d - lo>>d)
		sum := stacks.at(k)
		*sum = total{count: sum.count + e.tot.count, period: sum.period + e.tot.period, off: sum.off + e.tot.off}
	}
	a.stacks = stacks
	tl.shift += d
	tl.lo, tl.hi = lo>>d, hi>>d
}

// addBlocked adds a blocked interval [from, until) to key's stack: with a
// timeline, split across the slots it spans by the time it spent in each,
// counted once, in the slot it began in.
func (a *aggregator) addBlocked(key stackKey, from, until uint64) {
	tl := a.timeline
	if tl == nil || until <= from {
		key.slot = a.slot(from)
		tot := a.stacks.at(key)
		tot.count++
		// A recording's times are any value: no sum of them may wrap
		// negative.
		tot.off = addSaturating(tot.off, until-from)
		return
	}
	a.reach(from)
	a.reach(until - 1)
	for t, first := from, true; t < until; first = false {
		end := (t>>tl.shift + 1) << tl.shift
		if end <= t || end > until {
			// The clock's last slot ends at 2^64, which wraps to 0: a
			// recording's times are its writer's, any value.
			end = until
		}
		key.slot = uint32(t>>tl.shift - tl.lo)
		tot := a.stacks.at(key)
		if first {
			tot.count++
		}
		tot.off += int64(end - t)
		t = end
	}
}

// numLabels are the numeric labels of key's samples, sorted by key: its
// process and thread, and with a timeline its slot.
func (a *aggregator) numLabels(key stackKey) []contract.NumLabel {
	num := []contract.NumLabel{{Key: "pid", Value: int64(key.pid)}, {Key: "tid", Value: int64(key.tid)}}
	if tl := a.timeline; tl != nil {
		num = append(num, contract.NumLabel{Key: contract.SlotLabel, Value: int64(key.slot)}, contract.NumLabel{Key: contract.SlotWidthLabel, Value: 1 << tl.shift})
	}
	return num
}

// addSaturating adds d nanoseconds to sum, stopping at the largest an
// int64 holds.
func addSaturating(sum int64, d uint64) int64 {
	if d > uint64(math.MaxInt64-sum) {
		return math.MaxInt64
	}
	return sum + int64(d)
}
