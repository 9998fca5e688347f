package symbolize

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
)

// testNames name the regions named makes, by their module ids.
var (
	testNames   []string
	testNamesMu sync.Mutex
)

// named makes a region whose module's id, nameOf's name, tells it apart in
// tests.
func named(name string, start, end, from uint64) region {
	testNamesMu.Lock()
	defer testNamesMu.Unlock()
	testNames = append(testNames, name)
	return region{start: start, end: end, from: from, until: forever, module: uint32(len(testNames) - 1)}
}

// nameOf returns the name of a region named made.
func nameOf(r *region) string {
	testNamesMu.Lock()
	defer testNamesMu.Unlock()
	return testNames[r.module]
}

func TestTimeline(t *testing.T) {
	type query struct {
		addr, time uint64
		want       string // "" for nothing
		offset     uint64 // of addr in what the region holds
	}
	tests := []struct {
		name    string
		place   []region
		retire  map[uint64]string // at a time, the region of that name
		queries []query
	}{{
		name:  "one address, three owners",
		place: []region{named("a", 0x1000, 0x1100, 10), named("b", 0x1000, 0x1100, 20), named("c", 0x1000, 0x1080, 30)},
		queries: []query{
			{0x1010, 9, "", 0}, {0x1010, 10, "a", 0x10}, {0x1010, 19, "a", 0x10},
			{0x1010, 20, "b", 0x10}, {0x1010, 29, "b", 0x10}, {0x1010, 30, "c", 0x10}, {0x1010, 1 << 60, "c", 0x10},
			// c took only the first half: the rest of b stays.
			{0x1090, 30, "b", 0x90}, {0x10ff, 40, "b", 0xff}, {0x1100, 40, "", 0},
		},
	}, {
		name:  "a new region inside an old one splits it",
		place: []region{named("lib", 0x1000, 0x5000, 1), named("jit", 0x2000, 0x3000, 5)},
		queries: []query{
			{0x1500, 4, "lib", 0x500}, {0x2500, 4, "lib", 0x1500}, {0x2500, 5, "jit", 0x500},
			{0x1500, 6, "lib", 0x500}, {0x3500, 6, "lib", 0x2500}, {0x4fff, 6, "lib", 0x3fff},
		},
	}, {
		name:  "a region over several",
		place: []region{named("a", 0x1000, 0x2000, 1), named("b", 0x2000, 0x3000, 1), named("c", 0x3000, 0x4000, 1), named("big", 0x1800, 0x3800, 2)},
		queries: []query{
			{0x1700, 3, "a", 0x700}, {0x1800, 3, "big", 0}, {0x2800, 3, "big", 0x1000},
			{0x3800, 3, "c", 0x800}, {0x2800, 1, "b", 0x800},
		},
	}, {
		name:    "retired regions hold nothing after",
		place:   []region{named("a", 0x1000, 0x2000, 1), named("b", 0x3000, 0x4000, 1)},
		retire:  map[uint64]string{7: "a"},
		queries: []query{{0x1000, 6, "a", 0}, {0x1000, 7, "", 0}, {0x3000, 8, "b", 0}},
	}, {
		name:  "a huge early region does not hide later small ones",
		place: []region{named("huge", 0, 1<<40, 1), named("x", 0x5000, 0x5010, 2), named("y", 0x6000, 0x6010, 3)},
		queries: []query{
			{0x5008, 2, "x", 8}, {0x6008, 2, "huge", 0x6008}, {0x6008, 3, "y", 8}, {0x7000, 3, "huge", 0x7000},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tl timeline
			for _, r := range tc.place {
				for at, name := range tc.retire {
					if at <= r.from {
						tl.retire(at, func(o *region) bool { return nameOf(o) == name })
						delete(tc.retire, at)
					}
				}
				tl.place(r)
			}
			for at, name := range tc.retire {
				tl.retire(at, func(o *region) bool { return nameOf(o) == name })
			}
			tl.index()
			for _, q := range tc.queries {
				r := tl.find(q.addr, q.time)
				got := ""
				if r != nil {
					got = nameOf(r)
				}
				if got != q.want || (r != nil && q.addr-r.start+r.pgoff != q.offset) {
					t.Errorf("find(%#x, %d) = %q (%+v), want %q at offset %#x", q.addr, q.time, got, r, q.want, q.offset)
				}
			}
		})
	}
}

// TestTimelineAgainstReplay places random regions and checks every answer
// against a replay of the placements up to the asked time.
func TestTimelineAgainstReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tl timeline
	var placed []region
	for i := range 2000 {
		start := uint64(rng.IntN(1 << 16))
		r := named(strconv.Itoa(i), start, start+1+uint64(rng.IntN(1<<10)), uint64(i))
		placed = append(placed, r)
		tl.place(r)
	}
	tl.index()
	for range 20000 {
		addr, time := uint64(rng.IntN(1<<16+1<<10)), uint64(rng.IntN(2100))
		var want *region
		for i := range placed { // the last placed before time that covers addr
			if placed[i].from <= time && placed[i].start <= addr && addr < placed[i].end {
				want = &placed[i]
			}
		}
		got := tl.find(addr, time)
		switch {
		case want == nil && got == nil:
		case want == nil || got == nil || want.module != got.module:
			t.Fatalf("find(%#x, %d) = %+v, want %+v", addr, time, got, want)
		case addr-got.start+got.pgoff != addr-want.start:
			t.Fatalf("find(%#x, %d): offset %#x, want %#x", addr, time, addr-got.start+got.pgoff, addr-want.start)
		}
	}
}

func BenchmarkFind(b *testing.B) {
	var tl timeline
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 20000 // functions, as many as an Erlang run loads
	for i := range n {
		start := uint64(i) * 0x200
		tl.place(named("f", start, start+0x100+uint64(rng.IntN(0x100)), uint64(i)))
	}
	tl.index()
	addrs := make([]uint64, 1024)
	for i := range addrs {
		addrs[i] = uint64(rng.IntN(n * 0x200))
	}
	b.ResetTimer()
	for i := range b.N {
		tl.find(addrs[i%len(addrs)], n)
	}
}

// BenchmarkPlace builds the timeline of a process whose JIT loads n
// functions in no address order, as V8 and HotSpot fill their code spaces.
func BenchmarkPlace(b *testing.B) {
	for _, n := range []int{20000, 200000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			starts := make([]uint64, n)
			for i, k := range rng.Perm(n) {
				starts[i] = uint64(k) * 0x200
			}
			for b.Loop() {
				var tl timeline
				for i, start := range starts {
					tl.place(region{start: start, end: start + 0x100, from: uint64(i), until: forever})
				}
				tl.index()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/region")
		})
	}
}
