package perfprof

import (
	"hash/maphash"
	"slices"
	"unsafe"
)

// A stackTable interns the distinct stacks of a profile: each one's
// locations once, leaf first, in one array shared by all. A stack costs
// 4 bytes a frame and an index entry, so however deep and however
// distinct the call chains (thousands of addresses no other sample has,
// as in a recursive JIT's stacks), the table stays within half of the
// call chains the recording holds (8 bytes a frame). A calling context
// tree, which it replaces, cost 8 bytes and a map entry (about 40 bytes)
// a frame of distinct stacks.
type stackTable struct {
	frames []uint32 // every stack's locations, leaf first
	ends   []int    // stack i is frames[ends[i-1]:ends[i]]; stack 0, the empty one, ends at 0
	byHash map[uint64]uint32
	// more holds the stacks whose hash another stack in byHash has.
	more map[uint64][]uint32
	hash func(locs []uint32) uint64
}

func newStackTable() *stackTable {
	seed := maphash.MakeSeed()
	return &stackTable{ends: []int{0}, byHash: make(map[uint64]uint32), hash: func(locs []uint32) uint64 {
		return maphash.Bytes(seed, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(locs))), 4*len(locs)))
	}}
}

// intern returns the id of the stack of locs (leaf first), a new one the
// first time. locs is not kept.
func (t *stackTable) intern(locs []uint32) uint32 {
	if len(locs) == 0 {
		return 0
	}
	h := t.hash(locs)
	id, ok := t.byHash[h]
	if ok {
		if slices.Equal(t.stack(id), locs) {
			return id
		}
		for _, id := range t.more[h] {
			if slices.Equal(t.stack(id), locs) {
				return id
			}
		}
	}
	id = uint32(len(t.ends))
	t.frames = append(t.frames, locs...)
	t.ends = append(t.ends, len(t.frames))
	if !ok {
		t.byHash[h] = id
	} else {
		if t.more == nil {
			t.more = make(map[uint64][]uint32)
		}
		t.more[h] = append(t.more[h], id)
	}
	return id
}

// stack returns the locations of stack id, leaf first: the table's own,
// not to be changed.
func (t *stackTable) stack(id uint32) []uint32 {
	if id == 0 {
		return nil
	}
	return t.frames[t.ends[id-1]:t.ends[id]:t.ends[id]]
}

// leaf returns the location of stack id's leaf.
func (t *stackTable) leaf(id uint32) uint32 {
	return t.frames[t.ends[id-1]]
}

// called returns the id of the stack of loc called from stack id.
func (t *stackTable) called(loc, id uint32, buf []uint32) (uint32, []uint32) {
	buf = append(append(buf[:0], loc), t.stack(id)...)
	return t.intern(buf), buf
}
