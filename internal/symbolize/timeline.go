package symbolize

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/google/btree"
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
	pgoff uint64
	// module is what the region holds, by its place in Space.byID
	// (unused in a perf map's timeline: the map's own), and index, for a
	// JIT region, the function's place in its dump's Functions, for a perf
	// map's, its entry's in the map: numbers, not pointers, for these are
	// a process's millions of regions, which the GC then need not scan.
	module, index uint32
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
	// live, while building, holds the regions in place now, by start. A
	// tree, not a sorted slice: a JIT places its functions in no address
	// order, and inserting each into the middle of a slice of thousands
	// made the build quadratic (a third of an agent window's build).
	live *btree.BTreeG[liveRegion]
}

// liveRegion is a region in place, by its start.
type liveRegion struct {
	start uint64
	index int32 // in regions
}

func byStart(a, b liveRegion) bool { return a.start < b.start }

// liveDegree is the live tree's degree: nodes of up to 63 regions.
const liveDegree = 32

// place puts r in place from r.from on, retiring what it overlaps.
func (tl *timeline) place(r region) {
	if r.end <= r.start {
		return // holds no address
	}
	if tl.live == nil {
		tl.live = btree.NewG(liveDegree, byStart)
	}
	// Live regions do not overlap, so only the one starting last at or
	// before r can reach into it from below; the others it overlaps start
	// inside it.
	var overlapped []liveRegion
	tl.live.DescendLessOrEqual(liveRegion{start: r.start}, func(l liveRegion) bool {
		if tl.regions[l.index].end > r.start {
			overlapped = append(overlapped, l)
		}
		return false
	})
	tl.live.AscendRange(liveRegion{start: r.start + 1}, liveRegion{start: r.end}, func(l liveRegion) bool {
		overlapped = append(overlapped, l)
		return true
	})
	for _, l := range overlapped {
		tl.regions[l.index].until = r.from
		tl.live.Delete(l)
	}
	tl.add(r)
	if len(overlapped) == 0 {
		return
	}
	// Only the first can start before r, and only the last end after it.
	if first := tl.regions[overlapped[0].index]; first.start < r.start {
		first.end, first.from, first.until = r.start, r.from, forever
		tl.add(first)
	}
	if last := tl.regions[overlapped[len(overlapped)-1].index]; last.end > r.end {
		last.pgoff += r.end - last.start
		last.start, last.from, last.until = r.end, r.from, forever
		tl.add(last)
	}
}

// add puts r in regions and in the live tree.
func (tl *timeline) add(r region) {
	tl.regions = append(tl.regions, r)
	tl.live.ReplaceOrInsert(liveRegion{r.start, int32(len(tl.regions) - 1)})
}

// retire ends, at time t, every live region for which gone says so.
func (tl *timeline) retire(t uint64, gone func(*region) bool) {
	if tl.live == nil {
		return
	}
	var retired []liveRegion
	tl.live.Ascend(func(l liveRegion) bool {
		if r := &tl.regions[l.index]; gone(r) {
			r.until = t
			retired = append(retired, l)
		}
		return true
	})
	for _, l := range retired {
		tl.live.Delete(l)
	}
}

// inherit gives tl, at time t, copies of the live regions of parent: a
// forked process starts with its parent's address space.
func (tl *timeline) inherit(parent *timeline, t uint64) {
	if parent.live == nil {
		return
	}
	parent.live.Ascend(func(l liveRegion) bool {
		r := parent.regions[l.index]
		r.from, r.until = t, forever
		tl.place(r)
		return true
	})
}

// index ends the build: regions sorted by start, with the running maximum
// of their ends that lets find stop early.
func (tl *timeline) index() {
	tl.live = nil
	tl.regions = slices.DeleteFunc(tl.regions, func(r region) bool { return r.from >= r.until })
	// Not a stable sort: at any time regions do not overlap, so find and
	// gap look at every region with a start at or below addr and order
	// among equal starts does not matter (a stable sort moved these
	// 80-byte regions so often it took a third of a build).
	slices.SortFunc(tl.regions, func(a, b region) int { return cmp.Compare(a.start, b.start) })
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
