package symbolize

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/perfmap"
)

// forever is the end of time: a region still in place when the recording
// ended.
const forever = math.MaxUint64

// region is a range of a process's addresses and what it held from one
// moment (from) until another (until, exclusive).
type region struct {
	start, end  uint64
	from, until uint64
	// pgoff is the offset of start in what the region holds: the file
	// offset of a mapped file, or the offset in a jitted function's code.
	pgoff  uint64
	module *Module
	fn     *dumpindex.Code // for JIT regions
	entry  *perfmap.Entry  // for a perf map's regions
}

// timeline is every region a process had during the recording.
//
// It is built by placing regions in time order, as the kernel and the JIT
// made them: a new region retires whatever it overlaps (keeping the parts
// of it on either side, as the kernel does when a mapping is partly
// replaced). After the build it answers which region held an address at a
// moment, whatever order the questions come in, and is not changed again,
// so lookups need no lock.
type timeline struct {
	regions []region
	maxEnd  []uint64 // maxEnd[i] is the largest end among regions[:i+1]
	live    []int32  // while building: the regions in place now, by start
}

// place puts r in place from r.from on, retiring what it overlaps.
func (tl *timeline) place(r region) {
	// Live regions do not overlap, so sorted by start they are sorted by
	// end too: the overlapped ones are live[i:j].
	i := sort.Search(len(tl.live), func(k int) bool { return tl.regions[tl.live[k]].end > r.start })
	j := i
	for j < len(tl.live) && tl.regions[tl.live[j]].start < r.end {
		tl.regions[tl.live[j]].until = r.from
		j++
	}
	parts := make([]int32, 0, 3)
	// Only the first can start before r, and only the last end after it.
	if j > i {
		if first := tl.regions[tl.live[i]]; first.start < r.start {
			first.end, first.from, first.until = r.start, r.from, forever
			parts = append(parts, tl.add(first))
		}
	}
	parts = append(parts, tl.add(r))
	if j > i {
		if last := tl.regions[tl.live[j-1]]; last.end > r.end {
			last.pgoff += r.end - last.start
			last.start, last.from, last.until = r.end, r.from, forever
			parts = append(parts, tl.add(last))
		}
	}
	tl.live = slices.Replace(tl.live, i, j, parts...)
}

func (tl *timeline) add(r region) int32 {
	tl.regions = append(tl.regions, r)
	return int32(len(tl.regions) - 1)
}

// retire ends, at time t, every live region for which gone says so.
func (tl *timeline) retire(t uint64, gone func(*region) bool) {
	tl.live = slices.DeleteFunc(tl.live, func(k int32) bool {
		r := &tl.regions[k]
		if !gone(r) {
			return false
		}
		r.until = t
		return true
	})
}

// inherit gives tl, at time t, copies of the live regions of parent: a
// forked process starts with its parent's address space.
func (tl *timeline) inherit(parent *timeline, t uint64) {
	for _, k := range parent.live {
		r := parent.regions[k]
		r.from, r.until = t, forever
		tl.place(r)
	}
}

// index ends the build: regions sorted by start, with the running maximum
// of their ends that lets find stop early.
func (tl *timeline) index() {
	tl.live = nil
	tl.regions = slices.DeleteFunc(tl.regions, func(r region) bool { return r.from >= r.until })
	slices.SortStableFunc(tl.regions, func(a, b region) int { return cmp.Compare(a.start, b.start) })
	tl.maxEnd = make([]uint64, len(tl.regions))
	var m uint64
	for i, r := range tl.regions {
		m = max(m, r.end)
		tl.maxEnd[i] = m
	}
}

// find returns the region that held addr at time t, or nil.
//
// At any one time regions do not overlap, so at most one matches. The
// candidates are the regions starting at or below addr; walking them down
// from the highest start, once no region so far reaches past addr none can
// hold it.
func (tl *timeline) find(addr, t uint64) *region {
	i := sort.Search(len(tl.regions), func(k int) bool { return tl.regions[k].start > addr }) - 1
	for ; i >= 0 && tl.maxEnd[i] > addr; i-- {
		r := &tl.regions[i]
		if addr < r.end && r.from <= t && t < r.until {
			return r
		}
	}
	return nil
}

// gap returns the times around t, [from, until), in which no region held
// addr, when none holds it at t.
func (tl *timeline) gap(addr, t uint64) (from, until uint64) {
	until = forever
	i := sort.Search(len(tl.regions), func(k int) bool { return tl.regions[k].start > addr }) - 1
	for ; i >= 0 && tl.maxEnd[i] > addr; i-- {
		r := &tl.regions[i]
		switch {
		case addr >= r.end:
		case r.until <= t:
			from = max(from, r.until)
		case r.from > t:
			until = min(until, r.from)
		}
	}
	return from, until
}
