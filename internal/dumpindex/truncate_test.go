package dumpindex

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTruncatedUnderTheReader: a dump its runtime (or any process of its
// user) truncates after jitprof read it, and writes again, changes nothing
// jitprof read: its code, lines and unwinding data stay readable. Mapped
// in place, the truncated pages faulted (SIGBUS) where they were touched,
// a crash of report and of the agent, which no recover catches.
func TestTruncatedUnderTheReader(t *testing.T) {
	data := growingDump(t, 40)
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	if err := os.WriteFile(path, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Grown, so that Extend maps it a second time.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Extend(); err != nil {
		t.Fatal(err)
	}
	before := summary(d)
	code := make([][]byte, len(d.Functions))
	for i, fn := range d.Functions {
		code[i] = bytes.Clone(fn.Code())
	}
	for _, size := range []int64{0, 4096, int64(len(data) / 3)} {
		if err := os.Truncate(path, size); err != nil {
			t.Fatal(err)
		}
		for i, fn := range d.Functions {
			if !bytes.Equal(fn.Code(), code[i]) {
				t.Fatalf("after a truncation to %d bytes, %s's code changed", size, fn.Name)
			}
		}
		if after := summary(d); !slices.Equal(after, before) {
			t.Fatalf("after a truncation to %d bytes:\n%q\nbefore:\n%q", size, after, before)
		}
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xff}, len(data)*2), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Extend(); err != nil {
		t.Logf("extended over garbage: %v", err) // an error is fine; a fault is not
	}
	for i, fn := range d.Functions[:len(code)] {
		if !bytes.Equal(fn.Code(), code[i]) {
			t.Fatalf("after the dump was rewritten, %s's code changed", fn.Name)
		}
	}
}
