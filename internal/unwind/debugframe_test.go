package unwind

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/fixtures"
)

// A compiler's .debug_frame (gcc -fno-asynchronous-unwind-tables -g), moved
// by objcopy into a separate debug file named by .gnu_debuglink as Debian's
// -dbg packages do, gives the rows readelf shows for it.
func TestDebugFrameMatchesReadelf(t *testing.T) {
	fixtures.RealTier(t, "compiling with gcc")
	gcc, objcopy, readelf := fixtures.LookPath(t, "gcc"), fixtures.LookPath(t, "objcopy"), fixtures.LookPath(t, "readelf")
	for _, opt := range []string{"-O0", "-O2"} {
		t.Run(opt, func(t *testing.T) {
			dir := t.TempDir()
			lib, dbg := filepath.Join(dir, "libframes.so"), filepath.Join(dir, "libframes.debug")
			run := func(name string, args ...string) []byte {
				out, err := exec.Command(name, args...).Output()
				if err != nil {
					t.Fatalf("%s %q: %v", name, args, err)
				}
				return out
			}
			run(gcc, opt, "-g", "-fno-asynchronous-unwind-tables", "-fno-exceptions", "-shared", "-fPIC",
				"-Wl,--build-id", "-o", lib, filepath.Join("testdata", "frames.c"))
			// readelf reads the unsplit file: on the debug file it warns of
			// its NOBITS .eh_frame and exits with 1.
			out := run(readelf, "--debug-dump=frames-interp", "--debug-dump=no-follow-links", "-W", lib)
			run(objcopy, "--only-keep-debug", lib, dbg)
			run(objcopy, "--strip-debug", "--add-gnu-debuglink="+dbg, lib)
			tab, err := OpenELF(lib, elfsym.Recorded{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := tab.Err(); err != nil {
				t.Errorf("Err: %v", err)
			}
			fdes := parseReadelf(t, out, nil)
			rows, bad := compareReadelf(tab, fdes, dbg)
			for _, m := range bad {
				t.Error(m)
			}
			if len(fdes) < 5 || rows < 10 {
				t.Errorf("readelf shows %d FDEs, %d rows: the compiler put no .debug_frame there", len(fdes), rows)
			}
			t.Logf("%d FDEs, %d rows equal", len(fdes), rows)
		})
	}
}
