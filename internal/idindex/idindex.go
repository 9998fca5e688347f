// Package idindex finds records kept in a slice by their keys: a hash
// table of their ids alone. Hand-written: Go's maps copy every key and
// value, and no library indexes records it does not hold.
package idindex

import "math/bits"

// An Index finds records kept in a slice by their keys: a hash table of
// their ids alone (open addressing, linear probing), whose keys are the
// records themselves. A Go map of the keys costs a copy of each key and
// its value, and tens of bytes more an entry: at a million functions or
// millions of locations, hundreds of megabytes, and pointers the GC must
// visit.
//
// Each slot has a tag beside its id, a byte of its record's hash: a walk
// compares keys only where the tags agree. A key is a record elsewhere in
// memory, often behind another (a function's name in its dump), so at
// millions of records each comparison is several cache misses, and a walk
// past full slots to add a record made one for each; the tags, 64 slots
// to a cache line, make it one miss for the walk and one for the match.
//
// The caller hashes (with a seeded hash: the keys come from hostile
// recordings) and tells Find how to compare.
type Index struct {
	slots []uint32 // ids; a power of two of them
	tags  []uint8  // tagOf the hash of the id in the same slot; 0 for an empty slot
	shift uint     // a hash's first slot is its top bits
	n     int
}

// tagOf is a hash's tag: bits below the 32 a slot is taken from (an
// index may be given back only a hash's top half when it grows), never 0.
func tagOf(h uint64) uint8 { return uint8(h>>32) | 0x80 }

// New returns an index with room for n records.
func New(n int) Index {
	size := 1 << max(bits.Len(uint(n+n/3)), 8) // at most three quarters full
	return Index{slots: make([]uint32, size), tags: make([]uint8, size), shift: uint(64 - bits.TrailingZeros(uint(size)))}
}

// Find walks the slots from hash h's first: it returns the id of the
// record for which is returns true, or, when there is none, 0 and the empty
// slot where Add puts it.
func (ix *Index) Find(h uint64, is func(id uint32) bool) (uint32, int) {
	tag, mask := tagOf(h), len(ix.slots)-1
	for i := int(h >> ix.shift); ; i = (i + 1) & mask {
		switch ix.tags[i] {
		case 0:
			return 0, i
		case tag:
			if id := ix.slots[i]; is(id) {
				return id, i
			}
		}
	}
}

// Add puts id, of hash h, in slot i, the empty slot Find gave, and grows
// the index when it gets three quarters full, hashing each id again.
func (ix *Index) Add(i int, id uint32, h uint64, hash func(id uint32) uint64) {
	ix.slots[i], ix.tags[i] = id, tagOf(h)
	ix.n++
	if 4*ix.n <= 3*len(ix.slots) {
		return
	}
	old := *ix
	*ix = Index{slots: make([]uint32, 2*len(old.slots)), tags: make([]uint8, 2*len(old.slots)), shift: ix.shift - 1, n: ix.n}
	mask := len(ix.slots) - 1
	for k, id := range old.slots {
		if old.tags[k] == 0 {
			continue
		}
		h := hash(id)
		j := int(h >> ix.shift)
		for ix.tags[j] != 0 {
			j = (j + 1) & mask
		}
		ix.slots[j], ix.tags[j] = id, tagOf(h)
	}
}
