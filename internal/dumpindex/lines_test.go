package dumpindex

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func TestLines(t *testing.T) {
	type query struct {
		addr uint64
		file string
		line uint32
	}
	entries := []jitdump.DebugEntry{{Addr: 0x1010, Line: 2, File: "f"}, {Addr: 0x0ff0, Line: 1, File: "f"}, {Addr: 0x1020, Line: 3, File: "g"}}
	tests := []struct {
		name string
		vma  uint64 // LLVM's listener writes 0, and biases every entry
		bias uint64
		at   []query
	}{
		{name: "plain", vma: 0x1000, at: []query{{0x0fef, "", 0}, {0x1000, "f", 1}, {0x1010, "f", 2}, {0x101f, "f", 2}, {0x1020, "g", 3}, {0x2000, "g", 3}}},
		{name: "LLVM", vma: 0, bias: jitdump.LLVMLineBias, at: []query{{0x1010, "f", 2}, {0x100f, "f", 1}, {0x1020, "g", 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeDump(t, func(w *jitdump.Writer) {
				var biased []jitdump.DebugEntry
				for _, e := range entries {
					e.Addr += tc.bias
					biased = append(biased, e)
				}
				w.Load(&jitdump.Function{Name: "fn", Addr: 0x1000, Code: make([]byte, 0x40), Lines: biased})
			})
			setVMA(t, path, tc.vma)
			d, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			lines := d.Functions[0].Lines()
			for _, q := range tc.at {
				file, line, ok := lines.At(q.addr)
				if file != q.file || line != q.line || ok != (q.line != 0) {
					t.Errorf("At(%#x) = %q:%d %v, want %q:%d", q.addr, file, line, ok, q.file, q.line)
				}
			}
		})
	}
}

// setVMA sets the vma of the dump's first CODE_LOAD, which the Writer sets
// to the code's address.
func setVMA(t *testing.T, path string, vma uint64) {
	t.Helper()
	f, err := jitdump.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(-1)
	for rec, err := f.Next(); err == nil && off < 0; rec, err = f.Next() {
		if _, ok := rec.(*jitdump.CodeLoad); ok {
			off = rec.Header().Offset
		}
	}
	f.Close()
	if off < 0 {
		t.Fatal("no CODE_LOAD")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint64(data[off+jitdump.RecordHeaderSize+8:], vma)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
