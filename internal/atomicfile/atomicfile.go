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
func Write(name string, write func(io.Writer) error) error {
	tmp, err := CreateTemp(name)
	if err != nil {
		return err
	}
	if err := write(tmp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	return Commit(tmp, name)
}

// CreateTemp creates, mode 0600, the temporary file that is to be renamed
// over name, for a writer that needs more than an io.Writer (seeks, writes
// at offsets): in name's directory, since a rename cannot cross file
// systems, and hidden, so a listing of the directory does not show it.
func CreateTemp(name string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*.tmp")
}

// Commit closes tmp, a file CreateTemp made for name, and renames it over
// name, mode 0644; if any of that fails, tmp is removed.
func Commit(tmp *os.File, name string) error {
	err := tmp.Chmod(0o644)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
