package perfmap

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestWrite(t *testing.T) {
	entries := []Entry{
		{0x7fa554ec7640, 0x130, "long Work.fib(int)", 0},
		{0x7fa384019000, 0x68, "$global::apply_fun_shared", 0},
		{0, 0, " leading space", 0},
		{1<<64 - 2, 1, "top", 0},
	}
	var buf bytes.Buffer
	if err := Write(&buf, entries); err != nil {
		t.Fatal(err)
	}
	want := "7fa554ec7640 130 long Work.fib(int)\n7fa384019000 68 $global::apply_fun_shared\n0 0  leading space\nfffffffffffffffe 1 top\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestWriteRefuses(t *testing.T) {
	for _, e := range []Entry{
		{1, 2, "", 0},
		{1, 2, "a\nb", 0},
		{1, 2, "a ", 0},
		{1, 2, "a\r", 0},
		{1, 2, "a\t", 0},
		{1<<64 - 1, 2, "a", 0},
	} {
		var buf bytes.Buffer
		err := Write(&buf, []Entry{{1, 2, "good", 0}, e})
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Entry != e || buf.Len() != 0 {
			t.Errorf("Write(%+v): %v, wrote %q", e, err, buf.String())
		}
		if err := NewWriter(&buf).WriteEntry(e); !errors.As(err, &ee) {
			t.Errorf("WriteEntry(%+v): %v", e, err)
		}
	}
}

// callRecorder keeps each Write call apart.
type callRecorder struct{ calls []string }

func (r *callRecorder) Write(p []byte) (int, error) {
	r.calls = append(r.calls, string(p))
	return len(p), nil
}

func TestWriterWritesWholeLines(t *testing.T) {
	var rec callRecorder
	w := NewWriter(&rec)
	var want strings.Builder
	for i := range 5000 {
		name := "f" + strconv.Itoa(i)
		if i%1000 == 999 {
			name = strings.Repeat("long", bufferSize/2) // more than a buffer
		}
		if err := w.WriteEntry(Entry{Start: uint64(i) << 8, Size: 0x10, Name: name}); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "%x 10 %s\n", i<<8, name)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.calls) < 10 {
		t.Errorf("only %d writes: not buffered as expected", len(rec.calls))
	}
	for i, c := range rec.calls {
		if !strings.HasSuffix(c, "\n") {
			t.Fatalf("write %d ends inside a line", i)
		}
	}
	if got := strings.Join(rec.calls, ""); got != want.String() {
		t.Error("written text differs")
	}
	if err := w.WriteEntry(Entry{1, 2, "late", 0}); err != errClosed {
		t.Errorf("WriteEntry after Close: %v", err)
	}
	if err := w.Close(); err != errClosed {
		t.Errorf("second Close: %v", err)
	}
}

type failWriter struct{}

var errDiskFull = errors.New("disk full")

func (failWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriterErrorSticks(t *testing.T) {
	w := NewWriter(failWriter{})
	if err := w.WriteEntry(Entry{1, 2, "a", 0}); err != nil {
		t.Fatal(err) // still buffered
	}
	if err := w.Flush(); err != errDiskFull {
		t.Fatalf("Flush: %v", err)
	}
	if err := w.WriteEntry(Entry{1, 2, "a", 0}); err != errDiskFull {
		t.Errorf("WriteEntry after failure: %v", err)
	}
	if err := w.Close(); err != errDiskFull {
		t.Errorf("Close after failure: %v", err)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 8, 2000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				start := uint64(g*each+i) << 6
				if err := w.WriteEntry(Entry{start, 0x40, fmt.Sprintf("go %d fn %d", g, i), 0}); err != nil {
					t.Error(err)
					return
				}
				if i%500 == 0 {
					if err := w.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	name := filepath.Join(dir, "perf-"+strconv.Itoa(os.Getpid())+".map")
	if fi, err := os.Stat(name); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("map mode %v: open to others", fi.Mode())
	}
	got, errs, err := ParseFile(name)
	if err != nil || len(errs) != 0 || len(got) != goroutines*each {
		t.Fatalf("read back %d entries, %v %v", len(got), errs, err)
	}
	slices.SortFunc(got, func(a, b Entry) int { return int(a.Start>>6) - int(b.Start>>6) })
	for k, e := range got {
		if g, i := k/each, k%each; e.Start != uint64(k)<<6 || e.Name != fmt.Sprintf("go %d fn %d", g, i) {
			t.Fatalf("entry %d: %+v", k, e)
		}
	}

	if _, err := Create(dir); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing map: %v", err)
	}
}

func TestCreateRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "perf-"+strconv.Itoa(os.Getpid())+".map")
	if err := os.Symlink(target, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	if w, err := Create(dir); err == nil {
		w.Close()
		t.Fatal("Create followed a symbolic link")
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the link's target was created: %v", err)
	}
}
