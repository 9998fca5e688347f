package unwind

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/elfwrite"
	"github.com/jitprof/jitprof/jitdump"
)

// TestOpenELFHostile: the file a recording names, which any user may have
// replaced since, is opened as elfsym opens it: a FIFO there neither
// blocks OpenELF (it did, for ever) nor a device is read, a sparse file
// whose .eh_frame claims hundreds of MiB is refused rather than read into
// memory, and an .eh_frame past the file's end is an error naming both.
func TestOpenELFHostile(t *testing.T) {
	eh, _ := ehFrame(0x2000, []testFDE{{start: 0x1000, size: 0x40, instr: jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16)}})
	withEH := func(t *testing.T, path string, size uint64) {
		writeELF(t, path, []elfwrite.Section{{SectionHeader: elf.SectionHeader{Name: ".eh_frame", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x2000, Addralign: 8}, Data: eh}})
		img, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		o := binary.LittleEndian
		shoff, shentsize := o.Uint64(img[0x28:]), uint64(o.Uint16(img[0x3a:]))
		for i, s := range f.Sections {
			if s.Name == ".eh_frame" {
				o.PutUint64(img[shoff+uint64(i)*shentsize+0x20:], size) // sh_size
			}
		}
		if err := os.WriteFile(path, img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		make func(t *testing.T, path string) // "" when path is there already
		path string
		want string // in the error, besides the path
	}{
		{"a FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "", "not a regular file"},
		{"a device", nil, "/dev/zero", "not a regular file"},
		{"a sparse file claiming 256 MiB of .eh_frame", func(t *testing.T, path string) {
			withEH(t, path, 256<<20)
			if err := os.Truncate(path, 512<<20); err != nil {
				t.Skipf("no sparse file here: %v", err)
			}
		}, "", "sparse"},
		{".eh_frame past the end of the file", func(t *testing.T, path string) {
			withEH(t, path, 1<<40)
		}, "", ".eh_frame"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.path
			if path == "" {
				path = filepath.Join(t.TempDir(), "lib.so")
				c.make(t, path)
			}
			done := make(chan error, 1)
			go func() {
				tab, err := OpenELF(path, elfsym.Recorded{}, nil)
				if err == nil {
					err = tab.Err()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("OpenELF(%s): %v; want an error naming it and %q", path, err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("OpenELF(%s) blocked", path)
			}
		})
	}
}
