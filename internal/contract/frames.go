package contract

// Frames holds stacks of locations side by side in chunks, each stack
// whole in one. A stack's place (Sample.Stack) says its chunk and where in
// it: found at once, where a search of the chunks for a place among all
// their frames cost every renderer a binary search per sample. One array
// grown by doubling held room for up to twice the frames (a profile of
// 1,000 samples of 8,000 distinct frames: 48 MB for 32), left each smaller
// array behind, and a profile made from it copied it once more.
type Frames struct {
	chunks [][]uint32 // the last has room for more
	n      uint32     // frames held
}

// A place is a chunk's number above chunkBits and a frame's place in the
// chunk below. Chunks start small (most profiles are) and double up to
// 1<<chunkBits frames (1 MB); a longer stack gets an array of its own,
// which takes as many chunks' numbers as its length needs, each chunk's
// slice running to the array's end. 4 billion places hold a little less
// than 4 billion frames (16 GB of them).
const (
	chunkBits     = 18
	minFrameChunk = 1 << 10
	maxFrameChunk = 1 << chunkBits
)

// Add appends stack and returns its place, the Sample.Stack it is at.
func (f *Frames) Add(stack []uint32) uint32 {
	if len(stack) == 0 {
		return 0
	}
	f.n += uint32(len(stack))
	if len(stack) > maxFrameChunk {
		own := append([]uint32(nil), stack...)
		first := len(f.chunks)
		for k := 0; k < len(own); k += maxFrameChunk {
			f.chunks = append(f.chunks, own[k:len(own):len(own)])
		}
		return uint32(first) << chunkBits
	}
	last := len(f.chunks) - 1
	if last < 0 || cap(f.chunks[last])-len(f.chunks[last]) < len(stack) {
		size := minFrameChunk
		if last >= 0 {
			size = min(2*cap(f.chunks[last]), maxFrameChunk)
		}
		f.chunks = append(f.chunks, make([]uint32, 0, max(size, len(stack))))
		last++
	}
	c := &f.chunks[last]
	place := uint32(last)<<chunkBits | uint32(len(*c))
	*c = append(*c, stack...)
	return place
}

// At returns the n frames of the stack at place, as Add was given them:
// f's own, not to be changed.
func (f *Frames) At(place, n uint32) []uint32 {
	if n == 0 {
		return nil
	}
	start := place & (maxFrameChunk - 1)
	return f.chunks[place>>chunkBits][start : start+n : start+n]
}

// Len returns how many frames f holds.
func (f *Frames) Len() uint32 { return f.n }
