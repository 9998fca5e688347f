// Package arena keeps many small objects in few allocations: the names of a
// million jitted functions, kept after the dumps and symbol tables they
// alias are unmapped, would otherwise cost an allocation and a GC header
// each; the millions of locations of a profile of deep distinct stacks,
// grown in one slice, would cost twice their size and leave as much
// behind.
package arena

import (
	"iter"
	"slices"
	"strings"
	"unsafe"
)

// Strings copies strings into shared blocks. A block stays whole while any
// string in it is in use, as the names of one dump or one profile all are.
type Strings struct{ block []byte }

// BlockSize is the size of a block; a string of more than an eighth of it
// gets an allocation of its own, so that little of a block is left unused.
const BlockSize = 64 << 10

// Clone returns a copy of s that does not alias s's memory.
func (a *Strings) Clone(s string) string {
	if len(s) == 0 {
		return ""
	}
	if len(s) > BlockSize/8 {
		return strings.Clone(s)
	}
	if len(s) > cap(a.block)-len(a.block) {
		a.block = make([]byte, 0, BlockSize)
	}
	start := len(a.block)
	a.block = append(a.block, s...)
	return unsafe.String(&a.block[start], len(s))
}

// CloneBytes returns a copy of b as a string.
func (a *Strings) CloneBytes(b []byte) string {
	return a.Clone(unsafe.String(unsafe.SliceData(b), len(b))) // Clone copies it
}

// A List holds values side by side in arrays of ListChunk, numbered in the
// order added. A slice grown by appending copies its values at each growth,
// holds room for up to twice as many as it has, and leaves every smaller
// array behind as garbage, which no larger array can reuse: on a profile of
// millions of locations, hundreds of megabytes of resident memory more
// than the values need.
type List[T any] struct {
	chunks [][]T
	n      int
}

// ListChunk is how many values a List's array holds.
const ListChunk = 1 << 12

// Add appends v and returns its number, from 0.
func (l *List[T]) Add(v T) int {
	if l.n%ListChunk == 0 {
		l.chunks = append(l.chunks, make([]T, ListChunk))
	}
	l.chunks[l.n/ListChunk][l.n%ListChunk] = v
	l.n++
	return l.n - 1
}

// At returns value i, to be changed in place if need be.
func (l *List[T]) At(i int) *T { return &l.chunks[i/ListChunk][i%ListChunk] }

// Len returns how many values l holds.
func (l *List[T]) Len() int { return l.n }

// DropBefore lets the arrays that hold only values before i go: those
// values are read no more (At panics for them).
func (l *List[T]) DropBefore(i int) {
	for c := range l.chunks[:min(i/ListChunk, len(l.chunks))] {
		l.chunks[c] = nil
	}
}

// All yields l's values in order, with their numbers, to be changed in
// place if need be.
func (l *List[T]) All() iter.Seq2[int, *T] {
	return func(yield func(int, *T) bool) {
		for i := range l.n {
			if !yield(i, &l.chunks[i/ListChunk][i%ListChunk]) {
				return
			}
		}
	}
}

// Sorted sorts each of l's arrays in place by cmp and yields all of l's
// values in cmp's order, merging the arrays: sorting in place needs no
// copy of millions of values in one slice, and an array at a time stays
// in the cache. Values cmp finds equal come in no set order. The numbers
// of the values (At) are lost. Not for a list whose first arrays were
// dropped.
func (l *List[T]) Sorted(cmp func(x, y T) int) iter.Seq[*T] {
	return func(yield func(*T) bool) {
		// runs is a binary heap of the sorted arrays by their first value,
		// hand-written: container/heap would call through an interface for
		// each of the millions of comparisons.
		var runs [][]T
		for i, c := range l.chunks {
			run := c[:min(ListChunk, l.n-i*ListChunk)]
			slices.SortFunc(run, cmp)
			if len(run) > 0 {
				runs = append(runs, run)
			}
		}
		down := func(i int) {
			for {
				least := i
				for c := 2*i + 1; c <= 2*i+2 && c < len(runs); c++ {
					if cmp(runs[c][0], runs[least][0]) < 0 {
						least = c
					}
				}
				if least == i {
					return
				}
				runs[i], runs[least] = runs[least], runs[i]
				i = least
			}
		}
		for i := len(runs)/2 - 1; i >= 0; i-- {
			down(i)
		}
		for len(runs) > 0 {
			if !yield(&runs[0][0]) {
				return
			}
			if runs[0] = runs[0][1:]; len(runs[0]) == 0 {
				runs[0] = runs[len(runs)-1]
				runs = runs[:len(runs)-1]
			}
			down(0)
		}
	}
}
