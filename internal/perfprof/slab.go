package perfprof

import (
	"slices"
)

// grown returns s with room for n more elements, doubling its capacity
// when it must grow: append grows a large slice by a quarter, allocating
// on the way about five times the size it ends at, where doubling
// allocates twice.
func grown[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	return slices.Grow(s, max(n, len(s), 256))
}

// A slab hands out a profile's objects from arrays of many rather than one
// allocation each: a profile of a million functions holds millions of
// Locations, Lines and Functions, whose separate allocations cost a header
// and a GC visit each. An array stays whole while any of its elements is
// in use, which the objects of one profile all are. Arrays hold at most
// slabMax elements: one array of millions would need fresh memory of its
// own, where arrays of a few megabytes reuse what the heap freed.
type slab[T any] struct {
	free  []T
	chunk int // the size of the arrays after the first
}

// slabMax is the most elements in one of a slab's arrays.
const slabMax = 1 << 16

// newSlab returns a slab for about n elements, in arrays of equal size and
// at most slabMax: n of them fill every array.
func newSlab[T any](n int) *slab[T] {
	arrays := max((n+slabMax-1)/slabMax, 1)
	size := (n + arrays - 1) / arrays
	return &slab[T]{free: make([]T, size), chunk: max(size, 256)}
}

// take returns n zero elements, side by side.
func (s *slab[T]) take(n int) []T {
	if len(s.free) < n {
		s.free = make([]T, max(s.chunk, n))
	}
	x := s.free[:n:n]
	s.free = s.free[n:]
	return x
}

// next returns a zero element.
func (s *slab[T]) next() *T { return &s.take(1)[0] }
