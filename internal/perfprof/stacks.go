package perfprof

import (
	"hash/maphash"
	"slices"
	"unsafe"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/idindex"
)

// A stackTable interns the distinct stacks of a profile: each one's
// locations once, leaf first, in the frames the profile is given. A stack
// costs 4 bytes a frame and an index slot, so however deep and however
// distinct the call chains (thousands of addresses no other sample has,
// as in a recursive JIT's stacks), the table stays within half of the
// call chains the recording holds (8 bytes a frame). A calling context
// tree, which it replaces, cost 8 bytes and a map entry (about 40 bytes)
// a frame of distinct stacks.
type stackTable struct {
	frames contract.Frames
	places []uint32      // of stack i in frames; stack 0 is the empty one
	depths []uint32      // of stack i
	ids    idindex.Index // of the stacks but the empty one, by their locations
	hash   func(locs []uint32) uint64
}

func newStackTable() *stackTable {
	seed := maphash.MakeSeed()
	return &stackTable{places: []uint32{0}, depths: []uint32{0}, ids: idindex.New(0), hash: func(locs []uint32) uint64 {
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
	id, i := t.ids.Find(h, func(id uint32) bool { return slices.Equal(t.stack(id), locs) })
	if id != 0 {
		return id
	}
	id = uint32(len(t.places))
	t.places = append(grown(t.places, 1), t.frames.Add(locs))
	t.depths = append(grown(t.depths, 1), uint32(len(locs)))
	t.ids.Add(i, id, h, func(id uint32) uint64 { return t.hash(t.stack(id)) })
	return id
}

// place returns where stack id is in the frames, and its depth.
func (t *stackTable) place(id uint32) (uint32, uint32) {
	return t.places[id], t.depths[id]
}

// stack returns the locations of stack id, leaf first: the table's own,
// not to be changed.
func (t *stackTable) stack(id uint32) []uint32 {
	return t.frames.At(t.place(id))
}

// leaf returns the location of stack id's leaf.
func (t *stackTable) leaf(id uint32) uint32 {
	return t.stack(id)[0]
}

// called returns the id of the stack of loc called from stack id.
func (t *stackTable) called(loc, id uint32, buf []uint32) (uint32, []uint32) {
	buf = append(append(buf[:0], loc), t.stack(id)...)
	return t.intern(buf), buf
}

// A sampleTable holds the distinct samples of a profile and what each adds
// up, in the order first seen: 48 bytes and an index slot each, where a
// map of them cost twice that, more while it grew, and a slice grown by
// doubling up to twice as much, copied at each growth.
type sampleTable struct {
	entries arena.List[sampleEntry]
	ids     idindex.Index // of entries (ids + 1), by key
	seed    maphash.Seed
}

type sampleEntry struct {
	key stackKey
	tot total
}

func newSampleTable() *sampleTable {
	return &sampleTable{ids: idindex.New(0), seed: maphash.MakeSeed()}
}

// at returns the total of key's samples, a zero one the first time, to
// be changed in place before the table's next at.
func (t *sampleTable) at(key stackKey) *total {
	h := maphash.Comparable(t.seed, key)
	id, i := t.ids.Find(h, func(id uint32) bool { return t.entries.At(int(id-1)).key == key })
	if id != 0 {
		return &t.entries.At(int(id - 1)).tot
	}
	id = uint32(t.entries.Add(sampleEntry{key: key}) + 1)
	t.ids.Add(i, id, h, func(id uint32) uint64 { return maphash.Comparable(t.seed, t.entries.At(int(id-1)).key) })
	return &t.entries.At(int(id - 1)).tot
}
