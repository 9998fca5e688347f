package arena

import (
	"cmp"
	"strings"
	"testing"
	"unsafe"
)

// TestClone: copies equal their strings, share blocks but alias neither
// the original nor each other, and a long string is copied on its own.
func TestClone(t *testing.T) {
	var a Strings
	src := []byte("hello")
	x := a.CloneBytes(src)
	src[0] = 'j'
	y := a.Clone("world")
	if x != "hello" || y != "world" {
		t.Fatalf("copies %q, %q", x, y)
	}
	if unsafe.StringData(y) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(x)), len(x))) {
		t.Error("the two short copies are not side by side in one block")
	}
	long := strings.Repeat("x", BlockSize/8+1)
	before := len(a.block)
	if c := a.Clone(long); c != long || len(a.block) != before {
		t.Errorf("a long string went into the block (%d -> %d bytes)", before, len(a.block))
	}
	if a.Clone("") != "" {
		t.Error("empty")
	}
	for i := 0; i < 2*BlockSize/5; i++ { // past one block
		if c := a.Clone("12345"); c != "12345" {
			t.Fatalf("copy %d: %q", i, c)
		}
	}
	if x != "hello" || y != "world" {
		t.Errorf("earlier copies changed: %q, %q", x, y)
	}
}

// TestList: values added across several arrays are found again by their
// numbers, changed in place, and given back in order, once.
func TestList(t *testing.T) {
	var l List[int64]
	const n = 3*ListChunk + 5
	for i := range n {
		if got := l.Add(int64(i)); got != i {
			t.Fatalf("value %d numbered %d", i, got)
		}
	}
	*l.At(ListChunk + 1) += 1000
	if l.Len() != n || *l.At(n - 1) != n-1 || *l.At(ListChunk + 1) != ListChunk+1001 {
		t.Fatalf("%d values; the last %d, value %d %d", l.Len(), *l.At(n - 1), ListChunk+1, *l.At(ListChunk + 1))
	}
	for i, v := range l.All() {
		if want := *l.At(i); *v != want {
			t.Fatalf("All gave %d as value %d, want %d", *v, i, want)
		}
	}
	if l.Len() != n {
		t.Errorf("%d values, want %d", l.Len(), n)
	}
}

// TestListSorted: values added in no order across several arrays come out
// of Sorted in order, each once, and a stop on the way stops it.
func TestListSorted(t *testing.T) {
	var l List[int64]
	const n = 3*ListChunk + 5
	for i := range n {
		l.Add(int64((i * 7919) % n)) // a permutation of 0..n-1, n being prime to 7919
	}
	next := int64(0)
	for v := range l.Sorted(cmp.Compare[int64]) {
		if *v != next {
			t.Fatalf("value %d of the sorted list is %d", next, *v)
		}
		next++
	}
	if next != n {
		t.Errorf("%d values sorted, want %d", next, n)
	}
	seen := 0
	for range l.Sorted(cmp.Compare[int64]) {
		if seen++; seen == 10 {
			break
		}
	}
	if seen != 10 {
		t.Errorf("%d values after a stop at the tenth", seen)
	}
}

// TestListDropBefore: dropping the values before one lets go of exactly
// the arrays that hold none after it: the rest stay readable.
func TestListDropBefore(t *testing.T) {
	var l List[int64]
	const n = 3*ListChunk + 5
	for i := range n {
		l.Add(int64(i))
	}
	l.DropBefore(2*ListChunk + 1) // the third array holds values after it
	for i := 2 * ListChunk; i < n; i++ {
		if *l.At(i) != int64(i) {
			t.Fatalf("value %d is %d after the drop", i, *l.At(i))
		}
	}
	for i, c := range l.chunks {
		if (c == nil) != (i < 2) {
			t.Errorf("array %d dropped: %v, want %v", i, c == nil, i < 2)
		}
	}
	l.DropBefore(10 * n) // past the end: every array
	if l.chunks[3] != nil {
		t.Error("the last array stays after a drop past the end")
	}
}
