package dumpindex

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func writeDump(t testing.TB, do func(w *jitdump.Writer)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jit-1.dump")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jitdump.NewWriter(f, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	do(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadAttachesAndOrders(t *testing.T) {
	unwind := &jitdump.UnwindingInfo{EHFrame: []byte{1, 2, 3, 4}, EHFrameHdr: []byte{1, 0x1b, 3, 0x3b}}
	path := writeDump(t, func(w *jitdump.Writer) {
		a, _ := w.Load(&jitdump.Function{Name: "a", Addr: 0x1000, Code: []byte{0x90, 0xc3},
			Lines: []jitdump.DebugEntry{{Addr: 0x1000, Line: 7, File: "a.src"}}, Unwind: unwind})
		w.Load(&jitdump.Function{Name: "b", Addr: 0x2000, Code: []byte{0xc3}})
		w.Move(a, 0x1000, 0x3000, 2)
		w.Load(&jitdump.Function{Name: "c", Addr: 0x1000, Code: []byte{0xcc, 0xc3}}) // reuses a's old place
		w.WriteRecord(&jitdump.CodeMove{CodeIndex: 99, CodeSize: 1})
	})
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	if len(d.Functions) != 3 {
		t.Fatalf("%d functions", len(d.Functions))
	}
	a, b, c := d.Functions[0], d.Functions[1], d.Functions[2]
	if a.Debug() == nil || a.Unwind() == nil || string(a.Unwind().EHFrame) != "\x01\x02\x03\x04" {
		t.Errorf("a lost its lines or unwinding data: %+v", a)
	}
	if b.Debug() != nil || b.Unwind() != nil || c.Debug() != nil {
		t.Errorf("lines or unwinding data attached to the wrong function")
	}
	want := []struct {
		name string
		addr uint64
		move bool
	}{{"a", 0x1000, false}, {"b", 0x2000, false}, {"a", 0x3000, true}, {"c", 0x1000, false}}
	events, wrong := eventList(d)
	if len(events) != len(want) || d.EventCount() != len(want) || wrong >= 0 {
		t.Fatalf("%d events (count %d, event %d with a wrong index), want %d", len(events), d.EventCount(), wrong, len(want))
	}
	for i, w := range want {
		e := events[i]
		if e.Code.Name != w.name || e.Addr != w.addr || e.Move != w.move || e.Time == 0 || d.Functions[e.Function] != e.Code {
			t.Errorf("event %d = %s at %#x move=%v t=%d, want %+v", i, e.Code.Name, e.Addr, e.Move, e.Time, w)
		}
	}
	if len(d.Problems) != 1 || d.Truncated() {
		t.Errorf("problems %v: want the move of unknown index 99 only", d.Problems)
	}
}

// eventList returns d's events, and -1 if one came with an index other
// than its place.
func eventList(d *Dump) (events []Event, wrong int) {
	wrong = -1
	for i, e := range d.Events() {
		if i != len(events) && wrong < 0 {
			wrong = len(events)
		}
		events = append(events, e)
	}
	return events, wrong
}

func TestReadKeepsRecordsBeforeTruncation(t *testing.T) {
	path := writeDump(t, func(w *jitdump.Writer) {
		w.Load(&jitdump.Function{Name: "a", Addr: 0x1000, Code: make([]byte, 64)})
		w.Load(&jitdump.Function{Name: "b", Addr: 0x2000, Code: make([]byte, 64)})
	})
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-16-20], 0o644) // into b, past CLOSE
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.Functions) != 1 || !d.Truncated() || !errors.Is(d.Problems[0], jitdump.ErrTruncated) {
		t.Fatalf("functions %d, problems %v", len(d.Functions), d.Problems)
	}
}
