package dumpindex_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// loadOffsets returns the offsets of the dump's CODE_LOAD records.
func loadOffsets(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var offs []int64
	for rec, err := f.Next(); err == nil; rec, err = f.Next() {
		if _, ok := rec.(*jitdump.CodeLoad); ok {
			offs = append(offs, rec.Header().Offset)
		}
	}
	return offs
}

// corrupted writes a copy of the dump at path with the total_size of the
// record at off set to size.
func corrupted(t *testing.T, path string, off int64, size uint32) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(data[off+4:], size)
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func functionNames(d *dumpindex.Dump) []string {
	var names []string
	for _, fn := range d.Functions {
		names = append(names, fn.Name)
	}
	return names
}

// TestCorruptLoadSkipped: a CODE_LOAD whose total_size is corrupt loses
// that function alone; the lines and unwinding data written for it are
// not given to the next, the skip is a problem naming its offset, and the
// dump is not taken for one still being written.
func TestCorruptLoadSkipped(t *testing.T) {
	unwind := &jitdump.UnwindingInfo{EHFrame: []byte{1, 2, 3, 4}, EHFrameHdr: []byte{1, 0x1b, 3, 0x3b}}
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdump.NewWriter(f, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b", "c", "d"} {
		fn := &jitdump.Function{Name: name, Addr: 0x1000 * uint64(i+1), Code: []byte{0x90, 0xc3}}
		if name != "c" {
			fn.Lines = []jitdump.DebugEntry{{Addr: fn.Addr, Line: uint32(i + 1), File: name + ".src"}}
			fn.Unwind = unwind
		}
		if _, err := w.Load(fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	loads := loadOffsets(t, path)
	for _, size := range []uint32{0, 0xfffffff0} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			d, err := dumpindex.Read(corrupted(t, path, loads[1], size))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if got := functionNames(d); !slices.Equal(got, []string{"a", "c", "d"}) {
				t.Fatalf("functions %q, want all but b's", got)
			}
			if c := d.Functions[1]; c.Debug() != nil || c.Unwind() != nil {
				t.Errorf("c has the lines or unwinding data written for b")
			}
			if d.Functions[2].Debug() == nil {
				t.Errorf("d lost its lines")
			}
			if d.Truncated() || len(d.Problems) != 1 || !strings.Contains(d.Problems[0].Error(), fmt.Sprintf("offset %#x: CODE_LOAD total_size %d", loads[1], size)) {
				t.Errorf("truncated %t, problems %v; want the skip of the load at %#x", d.Truncated(), d.Problems, loads[1])
			}
		})
	}
}

// TestCorruptNodeDump: in a dump node wrote, one corrupt total_size in the
// middle loses that load alone: every other function is named as in the
// dump undamaged.
func TestCorruptNodeDump(t *testing.T) {
	path := fixtures.Dump(t, fixtures.Node)
	whole, err := dumpindex.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	want, problems := functionNames(whole), len(whole.Problems)
	whole.Close()
	loads := loadOffsets(t, path)
	if len(loads) < 100 {
		t.Fatalf("node's dump has %d loads, want at least 100", len(loads))
	}
	i := len(loads) / 2
	for _, size := range []uint32{7, 1104692619} {
		d, err := dumpindex.Read(corrupted(t, path, loads[i], size))
		if err != nil {
			t.Fatal(err)
		}
		got := functionNames(d)
		if w := slices.Delete(slices.Clone(want), i, i+1); !slices.Equal(got, w) {
			t.Errorf("size %d: %d of %d functions named, want all but %q", size, len(got), len(want), want[i])
		}
		if d.Truncated() || len(d.Problems) != problems+1 {
			t.Errorf("size %d: truncated %t, problems %v; want the skip besides the undamaged dump's %d", size, d.Truncated(), d.Problems, problems)
		}
		d.Close()
	}
}
