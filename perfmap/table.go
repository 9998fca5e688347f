package perfmap

import "slices"

// Table finds the function at an address as of the end of a map: of the
// entries covering the address, the one that comes last.
// The zero Table is empty. A Table is safe for concurrent lookups.
type Table struct {
	// Ranges of addresses, ascending and disjoint, each with the entry that
	// holds in it.
	starts  []uint64
	ends    []uint64 // exclusive
	which   []int
	entries []Entry
}

// NewTable makes a Table of entries, given in map order. Entries with a Size
// of 0, or whose end does not fit in 64 bits, are left out.
func NewTable(entries []Entry) *Table {
	// The boundaries of all entries cut the address space into segments that
	// each entry covers either entirely or not at all.
	bounds := make([]uint64, 0, 2*len(entries))
	for _, e := range entries {
		if valid(e) {
			bounds = append(bounds, e.Start, e.Start+e.Size)
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	// Entries claim segments latest first, each taking the ones no later
	// entry took. free[s] leads to the first unclaimed segment at or after
	// s, so a segment is visited once whatever the overlaps; the last
	// bound, which starts no segment, is never claimed.
	owner := make([]int, max(len(bounds)-1, 0))
	free := make([]int, len(bounds))
	for s := range free {
		free[s] = s
	}
	find := func(s int) int {
		for free[s] != s {
			free[s] = free[free[s]]
			s = free[s]
		}
		return s
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !valid(e) {
			continue
		}
		lo, _ := slices.BinarySearch(bounds, e.Start)
		hi, _ := slices.BinarySearch(bounds, e.Start+e.Size)
		for s := find(lo); s < hi; s = find(s) {
			owner[s] = i
			free[s] = s + 1
		}
	}

	t := &Table{entries: slices.Clone(entries)}
	for s, i := range owner {
		switch {
		case free[s] == s: // unclaimed: a gap between entries
		case len(t.which) > 0 && t.which[len(t.which)-1] == i && t.ends[len(t.ends)-1] == bounds[s]:
			t.ends[len(t.ends)-1] = bounds[s+1]
		default:
			t.starts = append(t.starts, bounds[s])
			t.ends = append(t.ends, bounds[s+1])
			t.which = append(t.which, i)
		}
	}
	return t
}

func valid(e Entry) bool { return e.Size != 0 && e.Start+e.Size > e.Start }

// Lookup returns the entry that holds at addr, in O(log n). The entry is the
// one given to NewTable: a later entry may hide part of its range.
func (t *Table) Lookup(addr uint64) (Entry, bool) {
	i, found := slices.BinarySearch(t.starts, addr)
	if !found {
		i-- // the range starting below addr
	}
	if i < 0 || addr >= t.ends[i] {
		return Entry{}, false
	}
	return t.entries[t.which[i]], true
}
