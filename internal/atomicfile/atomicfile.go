// Package atomicfile writes files whole or not at all: into a temporary
// file next to the destination, renamed over it only once complete, so a
// reader never sees a partial file and a failure leaves the old one.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write creates name with what write writes, mode 0644.
func Write(name string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
