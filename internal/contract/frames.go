package contract

import "slices"

// Frames holds stacks of locations side by side in chunks, each stack
// whole in one, numbered by the place of its first frame among all. One
// array grown by doubling held room for up to twice the frames (a profile
// of 1,000 samples of 8,000 distinct frames: 48 MB for 32), left each
// smaller array behind, and a profile made from it copied it once more.
type Frames struct {
	chunks [][]uint32 // the last has room for more
	firsts []uint32   // the place of chunk i's first frame
	n      uint32
}

// Chunks start small (most profiles are) and double up to maxFrameChunk
// frames (1 MB); a stack longer than that gets a chunk of its own size.
const (
	minFrameChunk = 1 << 10
	maxFrameChunk = 1 << 18
)

// Add appends stack and returns its place, the Sample.Stack it is at.
func (f *Frames) Add(stack []uint32) uint32 {
	place := f.n
	if len(stack) == 0 {
		return place
	}
	if n := len(f.chunks); n == 0 || cap(f.chunks[n-1])-len(f.chunks[n-1]) < len(stack) {
		size := minFrameChunk
		if n > 0 {
			size = min(2*cap(f.chunks[n-1]), maxFrameChunk)
		}
		f.chunks = append(f.chunks, make([]uint32, 0, max(size, len(stack))))
		f.firsts = append(f.firsts, place)
	}
	last := &f.chunks[len(f.chunks)-1]
	*last = append(*last, stack...)
	f.n += uint32(len(stack))
	return place
}

// At returns the n frames of the stack at place, as Add was given them:
// f's own, not to be changed.
func (f *Frames) At(place, n uint32) []uint32 {
	if n == 0 {
		return nil
	}
	c, found := slices.BinarySearch(f.firsts, place)
	if !found {
		c--
	}
	start := place - f.firsts[c]
	return f.chunks[c][start : start+n : start+n]
}

// Len returns how many frames f holds.
func (f *Frames) Len() uint32 { return f.n }
