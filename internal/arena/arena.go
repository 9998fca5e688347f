// Package arena keeps many small objects in few allocations: the names of a
// million jitted functions, kept after the dumps and symbol tables they
// alias are unmapped, would otherwise cost an allocation and a GC header
// each.
package arena

import (
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
