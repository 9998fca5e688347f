package report

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/contract"
	"golang.org/x/sys/unix"
)

// TestOutputModes: a report names the functions of the processes recorded,
// other users' when root recorded them, so every output file is 0600
// whatever the umask, as the recording is; a directory format's directory
// is made 0700.
func TestOutputModes(t *testing.T) {
	for _, umask := range []int{0o022, 0o077, 0o000} {
		for _, f := range []Format{FormatText, FormatJSON, FormatPProf, FormatFolded, FormatHTML, FormatGmon, FormatKaffeAs} {
			out := filepath.Join(t.TempDir(), "out")
			old := unix.Umask(umask) // the process's: no test of this package runs in parallel
			written, err := Write(f, out, io.Discard, []string{""}, []*contract.Profile{contract.FromPProf(recursion())}, Options{})
			unix.Umask(old)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(written) == 0 {
				t.Fatalf("%s: nothing written", f)
			}
			for _, name := range written {
				if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s under umask %04o: %s is %v, %v; want 0600", f, umask, name, fi.Mode(), err)
				}
			}
			if f.Directory() {
				if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700&^fs.FileMode(umask) {
					t.Errorf("%s under umask %04o: the directory is %v, %v", f, umask, fi.Mode(), err)
				}
			}
		}
	}
}
