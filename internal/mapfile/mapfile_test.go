package mapfile_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/internal/mapfile"
)

// TestOthersFileTruncated: a file another user can truncate (theirs, or
// one others may write) is read from jitprof's copy, so their truncating
// it under the mapping changes nothing read (mapped in place, the pages
// past the new end fault: SIGBUS, a crash of the test binary). Yours alone
// is mapped in place, as before.
func TestOthersFileTruncated(t *testing.T) {
	attacker := fixtures.NewAttacker(t)
	t.Setenv("SUDO_UID", "")
	want := bytes.Repeat([]byte("jitprof "), 64<<10) // 512 KiB: many pages
	for _, tc := range []struct {
		name string
		make func(path string)
	}{
		{"another user's", func(path string) { attacker.Chown(t, path) }},
		{"yours, writable by others", func(path string) { os.Chmod(path, 0o666) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jit-1.dump")
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			tc.make(path)
			m, err := mapfile.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
			m.Evict() // what was read is read again from the file
			if !bytes.Equal(m.Data, want) {
				t.Error("what was read changed when the file was truncated")
			}
		})
	}
}
