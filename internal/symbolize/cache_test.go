package symbolize

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jitprof/jitprof/internal/elfsym"
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
	layout, err := jitelf.Write(f, jitelf.OptionsFor(jitdump.Header{}), []jitelf.Function{{Name: want, Code: make([]byte, 64), CodeAddr: 0x10000}})
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
	name := func() (string, *elfsym.Table, *Space) {
		t.Helper()
		sp := buildFrom(t, rec, Options{Tables: cache})
		fr := sp.Lookup(p1, base+off, 2, false)
		return fr.Symbol.Name, fr.Module.table, sp
	}
	n1, t1, s1 := name()
	n2, t2, s2 := name()
	if n1 != want || n2 != want || t1 != t2 || cache.Len() != 1 {
		t.Fatalf("names %q, %q (want %q); one table shared: %v; cache holds %d", n1, n2, want, t1 == t2, cache.Len())
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
	if n3 != want || t3 == t1 || cache.Len() != 2 {
		t.Errorf("a changed file: name %q, table read again: %v, cache holds %d (want 2)", n3, t3 != t1, cache.Len())
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
