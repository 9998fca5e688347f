package elfsym

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenNotRegular: a recorded ELF path that is now a FIFO or a device
// neither blocks Open nor is read.
func TestOpenNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "lib.so")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error)
		go func() {
			_, err := Open(path)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s opened", path)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Open(%s) blocked", path)
		}
	}
}
