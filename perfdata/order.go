package perfdata

import (
	"cmp"
	"math"
	"slices"
)

// TimeOrder delivers a Reader's records in the order perf report and perf
// script process them (perf's ordered_events): records with a time are
// queued; a FINISHED_ROUND releases, sorted by time, those no later than
// the newest time seen before the previous FINISHED_ROUND, since perf record
// guarantees nothing older arrives after that; the end of the file releases
// the rest. Records without a time (perf's own, and those perf synthesized
// with time 0) are delivered at once, FINISHED_ROUND before what it
// releases. Records of equal time keep their file order.
//
// Only the records of about two rounds are held, and of those only their
// place and bytes: the mapped file's, when the Reader reads in place.
type TimeOrder struct {
	r     *Reader
	queue []queued
	ready []RawRecord // to deliver, from next on
	next  int
	limit uint64 // what the next FINISHED_ROUND releases up to
	max   uint64 // the newest time queued so far
	err   error  // what ended reading, delivered once ready is empty
}

type queued struct {
	time uint64
	rec  RawRecord
}

// TimeOrder returns a TimeOrder over the records r has not yet returned.
// r must not be read otherwise while it is in use.
func (r *Reader) TimeOrder() *TimeOrder { return &TimeOrder{r: r} }

// Next returns the next record in time order, decoded. Errors are those of
// Reader.Next, returned once every record read before them is delivered.
func (t *TimeOrder) Next() (Record, error) {
	rec, err := t.NextRaw()
	if err != nil {
		return nil, err
	}
	return t.r.Decode(rec), nil
}

// NextRaw is Next without decoding.
func (t *TimeOrder) NextRaw() (RawRecord, error) {
	for t.next == len(t.ready) {
		if t.err != nil {
			return RawRecord{}, t.err
		}
		t.ready, t.next = t.ready[:0], 0
		rec, err := t.r.NextRaw()
		if err != nil {
			t.err = err
			t.release(math.MaxUint64)
			continue
		}
		if rec.Type() == TypeFinishedRound {
			t.ready = append(t.ready, rec)
			t.release(t.limit)
			t.limit = t.max
			continue
		}
		time, ok := t.r.Time(rec)
		if !ok || time == 0 {
			t.ready = append(t.ready, rec)
			continue
		}
		t.queue = append(t.queue, queued{time, rec})
		t.max = max(t.max, time)
	}
	rec := t.ready[t.next]
	t.next++
	return rec, nil
}

// release moves the queued records no later than limit to ready, in time
// order.
func (t *TimeOrder) release(limit uint64) {
	if limit == 0 || len(t.queue) == 0 {
		return
	}
	slices.SortStableFunc(t.queue, func(a, b queued) int { return cmp.Compare(a.time, b.time) })
	n, _ := slices.BinarySearchFunc(t.queue, limit, func(q queued, limit uint64) int {
		if q.time <= limit {
			return -1
		}
		return 1
	})
	for _, q := range t.queue[:n] {
		t.ready = append(t.ready, q.rec)
	}
	t.queue = append(t.queue[:0], t.queue[n:]...)
}
