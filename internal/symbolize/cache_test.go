package symbolize

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/elfsym"
	"github.com/jitprof/jitprof/internal/unwind"
	"github.com/jitprof/jitprof/jitdump"
	"github.com/jitprof/jitprof/jitelf"
	"github.com/jitprof/jitprof/perfdata"
)

// TestTableCache: Spaces built with one cache share a file's symbol table,
// read once; a changed file is read again; a Space's Close leaves the
// cached tables open; Sweep closes those no Space has used.
func TestTableCache(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so") // an ELF file with one named function
	f, err := os.Create(lib)
	if err != nil {
		t.Fatal(err)
	}
	const want = "cached_fn"
	framed := unwindingInfo(t, 64, jitdump.CFAProgram{}.AdvanceLoc(1).DefCFAOffset(16).Offset(6, 2))
	layout, err := jitelf.Write(f, jitelf.OptionsFor(jitdump.Header{}), []jitelf.Function{{Name: want, Code: make([]byte, 64), CodeAddr: 0x10000, Unwind: framed}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	off := layout.Offsets[0] + 8
	const base = 0x400000
	rec := filepath.Join(dir, "perf.data")
	writeRecording(t, rec, buildCase{records: []perfdata.Record{mmap(p1, 1, base, 1<<20, lib)}}, func(s string) string { return s })

	cache := NewTableCache()
	defer cache.Close()
	var cfi []*unwind.Table // each Space's
	name := func() (string, *elfsym.Table, *Space) {
		t.Helper()
		sp := buildFrom(t, rec, Options{Tables: cache})
		fr := sp.Lookup(p1, base+off, 2, false)
		if _, ok := sp.UnwindRule(fr); !ok {
			t.Errorf("no call frame information at %#x", base+off)
		}
		cfi = append(cfi, fr.Module.unwind)
		return fr.Symbol.Name, fr.Module.table, sp
	}
	n1, t1, s1 := name()
	n2, t2, s2 := name()
	if n1 != want || n2 != want || t1 != t2 || cfi[0] != cfi[1] || cache.Len() != 1 {
		t.Fatalf("names %q, %q (want %q); one table shared: %v, one CFI table: %v; cache holds %d", n1, n2, want, t1 == t2, cfi[0] == cfi[1], cache.Len())
	}
	s1.Close()
	if fr := s2.Lookup(p1, base+off, 2, false); fr.Symbol.Name != want {
		t.Errorf("after another Space's Close, %q, want %q", fr.Symbol.Name, want)
	}
	s2.Close()

	// The file changes in place: read again.
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(lib, future, future); err != nil {
		t.Fatal(err)
	}
	n3, t3, s3 := name()
	s3.Close()
	if n3 != want || t3 == t1 || cfi[2] == cfi[0] || cache.Len() != 2 {
		t.Errorf("a changed file: name %q, table read again: %v, CFI read again: %v, cache holds %d (want 2)", n3, t3 != t1, cfi[2] != cfi[0], cache.Len())
	}
	// The old table is unused from now on: swept after keep generations.
	cache.Sweep(1)
	name()
	cache.Sweep(1)
	if cache.Len() != 1 {
		t.Errorf("after sweeping, the cache holds %d tables, want the one in use", cache.Len())
	}
}

// buildFrom builds the Space of the recording at path.
func buildFrom(t *testing.T, path string, opts Options) *Space {
	t.Helper()
	f, err := perfdata.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := f.Reader
	sp, err := Build(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestPerfMapCache: Spaces built with one cache share a process's perf
// map, read and placed once; a map that grew is read again, in place of
// the version before; Sweep drops a map no Space has used.
func TestPerfMapCache(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, fmt.Sprintf("perf-%d.map", p1))
	writeFile(t, path, []byte("10000 40 first\n"))
	rec := filepath.Join(dir, "perf.data")
	writeRecording(t, rec, buildCase{records: []perfdata.Record{commRec(p1, p1, 1, "jit", true)}}, func(s string) string { return s })

	cache := NewTableCache()
	defer cache.Close()
	lookup := func(addr uint64) (string, *Module) {
		t.Helper()
		sp := buildFrom(t, rec, Options{Tables: cache, PerfMapDirs: []string{dir}})
		defer sp.Close()
		fr := sp.Lookup(p1, addr, 2, false)
		return fr.Symbol.Name, fr.Module
	}
	n1, m1 := lookup(0x10010)
	n2, m2 := lookup(0x10010)
	if n1 != "first" || n2 != "first" || m1 != m2 {
		t.Fatalf("names %q, %q (want first); one module shared: %v", n1, n2, m1 == m2)
	}

	// The runtime appends a line: the map is read again.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("10040 40 second\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n3, m3 := lookup(0x10050)
	if n3 != "second" || m3 == m1 || len(cache.perfMaps) != 1 {
		t.Errorf("after the map grew: %q (want second), read again: %v, %d maps kept (want 1)", n3, m3 != m1, len(cache.perfMaps))
	}
	cache.Sweep(1)
	cache.Sweep(1)
	if len(cache.perfMaps) != 0 {
		t.Errorf("after sweeping, %d maps kept, want none", len(cache.perfMaps))
	}
}
