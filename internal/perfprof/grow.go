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
