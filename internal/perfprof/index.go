package perfprof

import "math/bits"

// An index finds records kept in a slice by their keys: a hash table of
// their ids alone (open addressing, linear probing), 4 bytes a slot, whose
// keys are the records themselves. A Go map of the keys costs a copy of
// each key and its value, and tens of bytes more an entry: at a million
// functions or millions of locations, hundreds of megabytes, and pointers
// the GC must visit.
//
// The caller hashes (with a seeded hash: the keys come from hostile
// recordings) and compares, walking the slots from first on with next
// until it finds its record or an empty slot, where add puts a new one.
type index struct {
	slots []uint32 // ids, 0 for an empty slot; a power of two of them
	shift uint     // a hash's slot is its top bits
	n     int
}

// newIndex returns an index with room for n records.
func newIndex(n int) index {
	size := 1 << max(bits.Len(uint(n+n/3)), 8) // at most three quarters full
	return index{slots: make([]uint32, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

// first returns the slot where the walk for a hash starts.
func (ix *index) first(h uint64) int { return int(h >> ix.shift) }

// next returns the slot after slot i.
func (ix *index) next(i int) int { return (i + 1) & (len(ix.slots) - 1) }

// add puts id in slot i, the empty slot that ended a walk, and grows the
// index when it gets three quarters full, hashing each id again.
func (ix *index) add(i int, id uint32, hash func(id uint32) uint64) {
	ix.slots[i] = id
	ix.n++
	if 4*ix.n <= 3*len(ix.slots) {
		return
	}
	old := ix.slots
	*ix = index{slots: make([]uint32, 2*len(old)), shift: ix.shift - 1, n: ix.n}
	for _, id := range old {
		if id == 0 {
			continue
		}
		j := ix.first(hash(id))
		for ix.slots[j] != 0 {
			j = ix.next(j)
		}
		ix.slots[j] = id
	}
}
