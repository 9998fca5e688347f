package perfprof

import (
	"runtime"
	"slices"
	"testing"
)

// TestStackTable: equal stacks get one id, distinct ones their own, each
// given back as interned, whether or not their hashes collide.
func TestStackTable(t *testing.T) {
	stacks := [][]uint32{{1}, {1, 2}, {2, 1}, {1, 2, 3}, {3}, {1, 2}, {4, 1, 2}, {1}, {2, 1}}
	for _, tc := range []struct {
		name string
		hash func([]uint32) uint64
	}{
		{"maphash", nil},
		{"every hash the same", func([]uint32) uint64 { return 7 }},
		{"hash by length", func(locs []uint32) uint64 { return uint64(len(locs)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newStackTable()
			if tc.hash != nil {
				tab.hash = tc.hash
			}
			ids := map[string]uint32{}
			for _, s := range stacks {
				buf := slices.Clone(s)
				id := tab.intern(buf)
				buf[0] = 99 // the table keeps a copy
				key := string(slices.Collect(func(yield func(rune) bool) {
					for _, l := range s {
						yield(rune(l))
					}
				}))
				if old, ok := ids[key]; ok && old != id {
					t.Errorf("%v: id %d, before %d", s, id, old)
				}
				ids[key] = id
				if got := tab.stack(id); !slices.Equal(got, s) || tab.leaf(id) != s[0] {
					t.Errorf("stack %d is %v (leaf %d), want %v", id, got, tab.leaf(id), s)
				}
			}
			seen := map[uint32]bool{}
			for _, id := range ids {
				if seen[id] || id == 0 {
					t.Errorf("id %d given twice or empty: %v", id, ids)
				}
				seen[id] = true
			}
			if got, want := len(tab.places)-1, len(ids); got != want {
				t.Errorf("%d stacks kept, want %d", got, want)
			}
			id, _ := tab.called(4, tab.intern([]uint32{1, 2}), nil)
			if want := tab.intern([]uint32{4, 1, 2}); id != want {
				t.Errorf("4 called from [1 2]: stack %d, want %d", id, want)
			}
		})
	}
}

// TestStackTableMemory: distinct deep stacks cost their frames, 4 bytes
// each, and little more: no array grown by doubling (up to twice the frames,
// and every smaller array left behind).
func TestStackTableMemory(t *testing.T) {
	const stacks, depth = 1000, 1000
	locs := make([]uint32, depth)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab := newStackTable()
	for i := range stacks {
		for d := range locs {
			locs[d] = uint32(i*depth + d)
		}
		tab.intern(locs)
	}
	runtime.ReadMemStats(&after)
	frames := uint64(4 * stacks * depth)
	if alloc := after.TotalAlloc - before.TotalAlloc; float64(alloc) > 1.1*float64(frames) {
		t.Errorf("%d stacks of %d frames allocated %d bytes, %.2f times their frames: want at most 1.1", stacks, depth, alloc, float64(alloc)/float64(frames))
	}
	runtime.KeepAlive(tab)
}
