package atomicfile

import "time"

// SetFIFOWait sets how long a FIFO may take to have a reader, for the
// tests of one that never has.
func SetFIFOWait(d time.Duration) (restore func()) {
	old := fifoWait
	fifoWait = d
	return func() { fifoWait = old }
}
