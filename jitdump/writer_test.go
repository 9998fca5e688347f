package jitdump_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
	"golang.org/x/sys/unix"
)

func mapsMention(t *testing.T, path string) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if strings.HasSuffix(line, " "+path) {
			return line
		}
	}
	return ""
}

func TestCreateInJITDUMPDIR(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("JITDUMPDIR", dir)
	w, err := jitdump.Create(jitdump.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", os.Getpid()))
	if w.Path() != want {
		t.Fatalf("path %s, want %s", w.Path(), want)
	}
	// perf record notices the dump by an executable, private mapping of it.
	if m := mapsMention(t, want); !strings.Contains(m, " r-xp 00000000 ") {
		t.Fatalf("marker mapping: %q", m)
	}
	if _, err := w.Load(&jitdump.Function{Name: "f", Addr: 0x1000, Code: []byte{0xc3}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if m := mapsMention(t, want); m != "" {
		t.Fatalf("marker still mapped after Close: %q", m)
	}
	if _, err := w.Load(&jitdump.Function{Name: "g"}); err == nil {
		t.Fatal("Load after Close succeeded")
	}

	f, err := jitdump.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if h := f.Header(); h.Pid != uint32(os.Getpid()) || h.Version != 1 || h.ElfMach == 0 {
		t.Errorf("header %+v", h)
	}
	recs, err := readAll(t, f.Reader)
	if err != nil || len(recs) != 2 || !strings.Contains(recs[0], `name="f" code=c3`) || !strings.Contains(recs[1], "CODE_CLOSE") {
		t.Fatalf("records %q, err %v", recs, err)
	}
}

func TestCreateDefaultDirIsFreshEachTime(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("JITDUMPDIR", "")
	var paths []string
	for range 2 {
		w, err := jitdump.Create(jitdump.Options{})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, w.Path())
		w.Close()
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, filepath.Join(home, ".debug", "jit")+"/") {
			t.Errorf("dump %s is not under ~/.debug/jit", p)
		}
	}
	if filepath.Dir(paths[0]) == filepath.Dir(paths[1]) {
		t.Errorf("two writers share directory %s", filepath.Dir(paths[0]))
	}
}

func TestCreateRefusesExistingFileAndSymlink(t *testing.T) {
	name := fmt.Sprintf("jit-%d.dump", os.Getpid())
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []func(path string) error{
		func(path string) error { return os.WriteFile(path, nil, 0o644) },
		func(path string) error { return os.Symlink(victim, path) },
	} {
		dir := t.TempDir()
		if err := plant(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if w, err := jitdump.Create(jitdump.Options{Dir: dir}); err == nil {
			w.Close()
			t.Fatalf("Create over a planted %s succeeded", name)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious" {
		t.Fatalf("symlink target changed: %q", b)
	}
}

func TestNowIsClockMonotonic(t *testing.T) {
	var before, after unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
	now := jitdump.Now()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
	if now < uint64(before.Nano()) || now > uint64(after.Nano()) {
		t.Fatalf("Now() = %d, not within CLOCK_MONOTONIC %d..%d", now, before.Nano(), after.Nano())
	}
}

// chunkRecorder keeps each Write apart, to see where writes end.
type chunkRecorder struct {
	mu     sync.Mutex
	data   []byte
	writes []int // end offset of each write
}

func (c *chunkRecorder) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.data = append(c.data, p...)
	c.writes = append(c.writes, len(c.data))
	return len(p), nil
}

func TestConcurrentLoadsAreWholeAndGrouped(t *testing.T) {
	var sink chunkRecorder
	w, err := jitdump.NewWriter(&sink, jitdump.Header{ByteOrder: binary.LittleEndian})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				addr := uint64(g)<<32 | uint64(i)<<12
				name := fmt.Sprintf("g%d.f%d", g, i)
				code := bytes.Repeat([]byte{byte(i)}, 1+i%700) // some loads overflow the buffer
				fn := &jitdump.Function{Name: name, Addr: addr, Code: code,
					Lines:  []jitdump.DebugEntry{{Addr: addr, Line: uint32(i + 1), File: name + ".src"}},
					Unwind: &jitdump.UnwindingInfo{EHFrame: []byte(name), EHFrameHdr: []byte{1, 0x1b, 3, 0x3b}}}
				if _, err := w.Load(fn); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}

	// A crash after any write leaves whole records only.
	for _, end := range sink.writes {
		if _, err := readEveryWay(t, sink.data[:end]); err != nil {
			t.Fatalf("the file as it stood after a write ending at %d: %v", end, err)
		}
	}

	r, err := jitdump.NewBytesReader(sink.data)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint64]bool)
	var debug *jitdump.DebugInfo
	var unwind *jitdump.UnwindingInfo
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec := rec.(type) {
		case *jitdump.DebugInfo:
			debug = rec
		case *jitdump.UnwindingInfo:
			unwind = rec
		case *jitdump.CodeLoad:
			if debug == nil || debug.CodeAddr != rec.CodeAddr || unwind == nil || string(unwind.EHFrame) != rec.Name {
				t.Fatalf("CODE_LOAD %s at %#x is not right after its own DEBUG_INFO and UNWINDING_INFO", rec.Name, rec.CodeAddr)
			}
			for e := range debug.Entries() {
				if e.File != rec.Name+".src" {
					t.Fatalf("%s has the lines of %s", rec.Name, e.File)
				}
			}
			if seen[rec.CodeIndex] {
				t.Fatalf("code index %d given twice", rec.CodeIndex)
			}
			seen[rec.CodeIndex] = true
			debug, unwind = nil, nil
		default:
			t.Fatalf("unexpected %s", describe(rec))
		}
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d loads read back, want %d", len(seen), goroutines*each)
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("no space left on device")
	}
	f.after--
	return len(p), nil
}

func TestWriteErrorIsSticky(t *testing.T) {
	w, err := jitdump.NewWriter(&failingWriter{after: 1}, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Load(&jitdump.Function{Name: "f", Code: []byte{1}}); err != nil {
		t.Fatal(err) // buffered: nothing written yet
	}
	if err := w.Flush(); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("Flush: %v", err)
	}
	if _, err := w.Load(&jitdump.Function{Name: "g"}); err == nil {
		t.Fatal("Load after a failed write succeeded")
	}
}
