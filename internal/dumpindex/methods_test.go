package dumpindex

import (
	"os"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func methodRecord(t uint64, class string, methods map[uint64]string) *jitdump.MethodNames {
	r := &jitdump.MethodNames{RecordHeader: jitdump.RecordHeader{Timestamp: t}, Class: class}
	for addr, name := range methods {
		r.Methods = append(r.Methods, addr)
		r.Names = append(r.Names, name)
	}
	return r
}

// TestMethod: a method's name is the latest record's naming its address at
// or before the time asked: a class unloaded frees its methods' memory for
// another's. Records a later Extend reads are found after a first lookup
// built the index.
func TestMethod(t *testing.T) {
	path := writeDump(t, func(w *jitdump.Writer) {
		w.WriteRecord(methodRecord(10, "LA;", map[uint64]string{0x100: "f()V", 0x108: "g(I)I"}))
		w.WriteRecord(methodRecord(20, "LB;", map[uint64]string{0x100: "h()V"}))
	})
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	check := func(addr, at uint64, want string) {
		t.Helper()
		got, ok := d.Method(addr, at, nil)
		if got != want || ok != (want != "") {
			t.Errorf("Method(%#x, %d) = %q, %v; want %q", addr, at, got, ok, want)
		}
	}
	for _, c := range []struct {
		addr, at uint64
		want     string
	}{
		{0x100, 5, ""},
		{0x100, 10, "LA;f()V"},
		{0x100, 19, "LA;f()V"},
		{0x100, 20, "LB;h()V"},
		{0x108, 30, "LA;g(I)I"},
		{0x999, 30, ""},
	} {
		check(c.addr, c.at, c.want)
	}

	more := writeDump(t, func(w *jitdump.Writer) {
		w.WriteRecord(methodRecord(30, "LC;", map[uint64]string{0x108: "k()V"}))
	})
	b, err := os.ReadFile(more)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The second file's records, after its header, appended to the first
	// as a runtime goes on writing; the first's CODE_CLOSE stays before
	// them, which readers pass over.
	f.Write(b[jitdump.HeaderSize:])
	f.Close()
	if grew, err := d.Extend(); err != nil || !grew {
		t.Fatalf("Extend: %v %v", grew, err)
	}
	check(0x108, 29, "LA;g(I)I")
	check(0x108, 30, "LC;k()V")
	// Times converted to another clock, 100 later.
	if got, ok := d.Method(0x108, 129, func(t uint64) uint64 { return t + 100 }); got != "LA;g(I)I" || !ok {
		t.Errorf("Method at 129, converted: %q %v", got, ok)
	}
}
