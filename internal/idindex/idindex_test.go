package idindex

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// TestIndex: every record added is found again by its key, through the
// index's growth and whatever its keys' hashes share, and a key never added
// is not found.
func TestIndex(t *testing.T) {
	seed := maphash.MakeSeed()
	for _, tc := range []struct {
		name string
		hash func(key uint64) uint64
	}{
		{"maphash", func(key uint64) uint64 { return maphash.Comparable(seed, key) }},
		{"every hash the same", func(uint64) uint64 { return 7 }},
		{"sixteen hashes", func(key uint64) uint64 { return (key % 16) << 60 }},
		{"hashes at the last slot", func(uint64) uint64 { return ^uint64(0) }},
		{"one first slot, tags differing", func(key uint64) uint64 { return key << 32 & 0xff_0000_0000 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3000 // grows the index from 256 slots to 4096
			var keys []uint64
			ix := New(0)
			find := func(key uint64) (uint32, int) {
				return ix.Find(tc.hash(key), func(id uint32) bool { return keys[id-1] == key })
			}
			for k := range uint64(n) {
				key := k * 0x10001
				for _, again := range []bool{false, true} {
					id, i := find(key)
					switch {
					case id == 0 && !again:
						keys = append(keys, key)
						ix.Add(i, uint32(len(keys)), tc.hash(key), func(id uint32) uint64 { return tc.hash(keys[id-1]) })
					case id == 0:
						t.Fatalf("key %#x, added, is not found", key)
					case !again:
						t.Fatalf("key %#x found as %d before it was added", key, id)
					}
				}
			}
			for want, key := range keys {
				if id, _ := find(key); id != uint32(want+1) {
					t.Fatalf("key %#x found as %d, want %d", key, id, want+1)
				}
			}
			if id, _ := find(1); id != 0 {
				t.Errorf("key 1, never added, found as %d", id)
			}
			if ix.n != n || 4*ix.n > 3*len(ix.slots) || len(ix.slots) > 2*4096 {
				t.Errorf("%d records in %d slots", ix.n, len(ix.slots))
			}
		})
	}
}

// BenchmarkIndex: a million records whose keys are strings elsewhere in
// memory, as a JIT's function names are, each added and then found again;
// beside it the Go map of the same keys the index replaces.
func BenchmarkIndex(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("LazyCompile:*f%d /app/bundle.js:%d", i, i%5000)
	}
	seed := maphash.MakeSeed()
	hash := func(id uint32) uint64 { return maphash.String(seed, keys[id-1]) }
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			ix := New(0)
			for i, k := range keys {
				h := maphash.String(seed, k)
				_, slot := ix.Find(h, func(id uint32) bool { return keys[id-1] == k })
				ix.Add(slot, uint32(i+1), h, hash)
			}
			for _, k := range keys {
				if id, _ := ix.Find(maphash.String(seed, k), func(id uint32) bool { return keys[id-1] == k }); id == 0 {
					b.Fatalf("%s not found", k)
				}
			}
		}
	})
	b.Run("map", func(b *testing.B) {
		for b.Loop() {
			m := make(map[string]uint32)
			for i, k := range keys {
				m[k] = uint32(i + 1)
			}
			for _, k := range keys {
				if m[k] == 0 {
					b.Fatalf("%s not found", k)
				}
			}
		}
	})
}
