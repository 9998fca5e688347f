package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out")
	if err := Write(name, func(w io.Writer) error { _, err := io.WriteString(w, "whole"); return err }); err != nil {
		t.Fatal(err)
	}
	failure := errors.New("half way")
	err := Write(name, func(w io.Writer) error { io.WriteString(w, "par"); return failure })
	if !errors.Is(err, failure) {
		t.Fatalf("err = %v, want the writer's", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "whole" {
		t.Errorf("after a failed write the file holds %q, want the old contents", b)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("temporary files left: %v", left)
	}
	if fi, _ := os.Stat(name); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", fi.Mode())
	}
}
