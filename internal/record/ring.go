package record

import (
	"encoding/binary"
	"fmt"

	"github.com/jitprof/jitprof/perfdata"
)

// readRing hands each record the kernel wrote to a ring buffer's data
// area, from tail up to head (both running byte counts, as the kernel keeps
// them), to emit, and returns the new tail. A record that wraps around the
// end of the area is copied into *scratch; the others are handed over in
// place, valid only until emit returns.
//
// The kernel only writes whole records, each 8-byte aligned, so sizes that
// break that are corruption: reading stops there with an error, returning
// the tail of the records emitted so far, and never reads outside data.
func readRing(data []byte, tail, head uint64, scratch *[]byte, emit func([]byte) error) (uint64, error) {
	size := uint64(len(data))
	if size == 0 || size&(size-1) != 0 {
		return tail, fmt.Errorf("ring buffer of %d bytes: not a power of two", size)
	}
	if head-tail > size {
		return tail, fmt.Errorf("ring buffer head %d is %d bytes ahead of tail %d, more than the buffer's %d", head, head-tail, tail, size)
	}
	mask := size - 1
	for tail != head {
		off := tail & mask
		left := head - tail
		if left < perfdata.RecordHeaderSize {
			return tail, fmt.Errorf("ring buffer offset %d: %d bytes left, too few for a record header", tail, left)
		}
		// Records are 8-byte aligned and the area's size a multiple of 8,
		// so a header never wraps.
		if off > size-perfdata.RecordHeaderSize {
			return tail, fmt.Errorf("ring buffer offset %d: record header not 8-byte aligned", tail)
		}
		n := uint64(binary.LittleEndian.Uint16(data[off+6:]))
		if n < perfdata.RecordHeaderSize || n%8 != 0 || n > left {
			return tail, fmt.Errorf("ring buffer offset %d: record size %d (type %d) is not a multiple of 8 between 8 and the %d bytes written", tail, n, binary.LittleEndian.Uint32(data[off:]), left)
		}
		var rec []byte
		if off+n <= size {
			rec = data[off : off+n]
		} else {
			*scratch = append((*scratch)[:0], data[off:]...)
			*scratch = append(*scratch, data[:n-(size-off)]...)
			rec = *scratch
		}
		if err := emit(rec); err != nil {
			return tail, err
		}
		tail += n
	}
	return tail, nil
}
