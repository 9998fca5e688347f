package jitsources

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

// dumpBytes returns a dump of n functions, each moved once.
func dumpBytes(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := jitdump.NewWriter(&buf, jitdump.Header{Pid: 1, Timestamp: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		addr := uint64(0x10000 + 0x100*i)
		idx, err := w.Load(&jitdump.Function{Name: fmt.Sprintf("f%d", i), Addr: addr, Code: make([]byte, 64),
			Lines: []jitdump.DebugEntry{{Addr: addr, Line: uint32(i + 1), File: "x.src"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Move(idx, addr, addr+0x1000000, 64); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// loadEvents loads the dumps of markers (through cache, when not nil) and
// returns each dump's events, named, and the warnings.
func loadEvents(markers []Marker, cache *DumpCache) ([]string, []string) {
	rec := &Recording{Markers: markers, Cache: cache}
	var warns []string
	rec.Load(nil, func(err error) { warns = append(warns, err.Error()) })
	defer rec.Close()
	var evs []string
	for _, d := range rec.Dumps {
		for _, e := range d.Events() {
			evs = append(evs, fmt.Sprintf("%s %d %s %#x %v", d.Path, d.Pid, e.Code.Name, e.Addr, e.Move))
		}
	}
	return evs, warns
}

// TestDumpCache: dumps loaded through a cache, while they grow (cut inside
// records too), replaced, and swept, give what loading them anew gives.
func TestDumpCache(t *testing.T) {
	dir := t.TempDir()
	data := dumpBytes(t, 50)
	other := dumpBytes(t, 3)
	a, b := filepath.Join(dir, "jit-1.dump"), filepath.Join(dir, "jit-2.dump")
	markers := []Marker{{Path: a, Pid: 1}, {Path: b, Pid: 2}}
	cache := NewDumpCache()
	defer cache.Close()
	for _, step := range []struct {
		name    string
		a       []byte // the file's bytes; nil: as it was
		b       []byte
		replace bool // b is another file now
		cached  int  // after the step's sweep
	}{
		{"first", data[:jitdump.HeaderSize+10], other, false, 2},
		{"grown inside a record", data[:len(data)/3+7], nil, false, 2},
		{"grown", data[:len(data)/2], nil, false, 2},
		{"replaced", nil, other[:len(other)-5], true, 2},
		{"whole", data, nil, false, 2},
	} {
		if step.a != nil {
			if err := os.WriteFile(a, step.a, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if step.b != nil {
			if step.replace {
				os.Remove(b)
			}
			if err := os.WriteFile(b, step.b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, gotWarns := loadEvents(markers, cache)
		want, wantWarns := loadEvents(markers, nil)
		if !slices.Equal(got, want) || !slices.Equal(gotWarns, wantWarns) {
			t.Fatalf("%s: through the cache:\n%q %q\nloaded anew:\n%q %q", step.name, got, gotWarns, want, wantWarns)
		}
		cache.Sweep(1)
		if n := cache.Len(); n != step.cached {
			t.Errorf("%s: %d dumps cached, want %d", step.name, n, step.cached)
		}
	}
	// A dump extended maxMappings times is read anew, its older mappings
	// released.
	for i := range maxMappings + 1 {
		if err := os.WriteFile(a, data[:len(data)/2+i*8], 0o644); err != nil {
			t.Fatal(err)
		}
		got, _ := loadEvents(markers, cache)
		want, _ := loadEvents(markers, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("extension %d: through the cache:\n%q\nloaded anew:\n%q", i, got, want)
		}
		cache.Sweep(1)
	}
	if n := cache.entries[a].d.Mappings(); n >= maxMappings {
		t.Errorf("the dump has %d mappings, want fewer than %d", n, maxMappings)
	}

	// A dump no Load needs is closed after keep sweeps.
	for range 2 {
		loadEvents(markers[:1], cache)
		cache.Sweep(1)
	}
	if n := cache.Len(); n != 1 {
		t.Errorf("after b was not used for two sweeps: %d dumps cached, want 1", n)
	}
}

// BenchmarkWindowLoad is the dumps' part of the agent's work each window:
// a dump of 20,000 functions gains 100 between windows and is loaded, read
// anew or extended through a DumpCache.
func BenchmarkWindowLoad(b *testing.B) {
	const total, perWindow = 20000, 100
	data := dumpBytes(b, total+perWindow*1000)
	// Function k's records end at ends[k].
	var ends []int
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		b.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if _, ok := rec.(*jitdump.CodeMove); ok {
			ends = append(ends, int(r.Offset()))
		}
	}
	for _, cached := range []bool{false, true} {
		b.Run(map[bool]string{false: "read", true: "extend"}[cached], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "jit-1.dump")
			if err := os.WriteFile(path, data[:ends[total-1]], 0o644); err != nil {
				b.Fatal(err)
			}
			var cache *DumpCache
			if cached {
				cache = NewDumpCache()
				defer cache.Close()
			}
			markers := []Marker{{Path: path, Pid: 1}}
			n := total
			for b.Loop() {
				b.StopTimer()
				if n+perWindow <= len(ends) {
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						b.Fatal(err)
					}
					f.Write(data[ends[n-1]:ends[n+perWindow-1]])
					f.Close()
					n += perWindow
				}
				b.StartTimer()
				rec := &Recording{Markers: markers, Cache: cache}
				rec.Load(nil, func(error) {})
				if len(rec.Dumps) != 1 || len(rec.Dumps[0].Functions) != n {
					b.Fatalf("%d dumps", len(rec.Dumps))
				}
				rec.Close()
				if cache != nil {
					cache.Sweep(1)
				}
			}
		})
	}
}
