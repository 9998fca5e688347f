package jitdump_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jitprof/jitprof/internal/fixtures"
	"github.com/jitprof/jitprof/jitdump"
)

// TestStageMarks: each mark the Writer writes carries the whole state, the
// stage set last and the accounting set last, whichever call changed it.
func TestStageMarks(t *testing.T) {
	var b bytes.Buffer
	w, err := jitdump.NewWriter(&b, jitdump.Header{})
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		call func() error
		want string
	}{
		{func() error { return w.Stage("init") }, `"init" true`},
		{func() error { return w.Accounting(false) }, `"init" false`},
		{func() error { return w.Stage("work") }, `"work" false`},
		{func() error { return w.Accounting(true) }, `"work" true`},
		{func() error { return w.Accounting(true) }, `"work" true`},
		{func() error { return w.Stage("") }, `"" true`},
	}
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := jitdump.NewBytesReader(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var last uint64
	for rec, err := r.Next(); err == nil; rec, err = r.Next() {
		m, ok := rec.(*jitdump.StageMark)
		if !ok {
			continue
		}
		if m.Type.String() != "JITPROF_STAGE" || m.Size%8 != 0 {
			t.Errorf("mark at %#x: type %s, size %d", m.Offset, m.Type, m.Size)
		}
		if m.Timestamp < last {
			t.Errorf("mark at %#x goes back in time", m.Offset)
		}
		last = m.Timestamp
		got = append(got, fmt.Sprintf("%q %t", m.Name, m.Accounting))
	}
	if len(got) != len(calls) {
		t.Fatalf("%d marks, want %d: %q", len(got), len(calls), got)
	}
	for i, c := range calls {
		if got[i] != c.want {
			t.Errorf("mark %d = %s, want %s", i, got[i], c.want)
		}
	}
	findings, err := jitdump.Check(mustReader(t, b.Bytes()))
	if err != nil || len(findings) != 0 {
		t.Errorf("Check of a dump with marks: %v, %v", findings, err)
	}
}

func mustReader(t *testing.T, data []byte) *jitdump.Reader {
	t.Helper()
	r, err := jitdump.NewBytesReader(data)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMalformedStageMark: a mark too short for its fixed fields or without
// the name's NUL is an Invalid record naming its offset, and reading goes on.
func TestMalformedStageMark(t *testing.T) {
	le := binary.LittleEndian
	mark := func(body []byte) []byte {
		size := 16 + len(body)
		b := le.AppendUint32(nil, uint32(jitdump.TypeStageMark))
		b = le.AppendUint32(b, uint32(size))
		b = le.AppendUint64(b, 7)
		return append(b, body...)
	}
	tests := []struct {
		name string
		body []byte
		want string // in the Invalid record's error; "" for a valid mark
	}{
		{"valid", []byte{1, 0, 0, 0, 0, 0, 0, 0, 'x', 0}, ""},
		{"no flags", nil, "cannot hold its 24 bytes"},
		{"half the flags", []byte{1, 0, 0, 0}, "cannot hold its 24 bytes"},
		{"no name", []byte{1, 0, 0, 0, 0, 0, 0, 0}, "no terminating NUL"},
		{"name without NUL", []byte{1, 0, 0, 0, 0, 0, 0, 0, 'a', 'b'}, "no terminating NUL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			b.Write(jitdump.AppendHeader(nil, &jitdump.Header{ByteOrder: le, Version: 1}))
			b.Write(mark(tc.body))
			b.Write(mark([]byte{0, 0, 0, 0, 0, 0, 0, 0, 'n', 'e', 'x', 't', 0}))
			r := mustReader(t, b.Bytes())
			r.SetName("test.dump")
			first, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			if inv, ok := first.(*jitdump.Invalid); tc.want == "" {
				if m, ok := first.(*jitdump.StageMark); !ok || m.Name != "x" || !m.Accounting {
					t.Errorf("got %#v", first)
				}
			} else if !ok || !strings.Contains(inv.Err.Error(), tc.want) || !strings.Contains(inv.Err.Error(), "test.dump") || inv.Err.Off != 40 {
				t.Errorf("got %#v, want an Invalid record at offset 40 saying %q", first, tc.want)
			}
			second, err := r.Next()
			if m, ok := second.(*jitdump.StageMark); err != nil || !ok || m.Name != "next" || m.Accounting {
				t.Errorf("the record after: %#v, %v", second, err)
			}
		})
	}
}

// stageChildEnv makes the test binary, run again under perf record, write a
// dump with stage marks between its loads; see TestPerfSkipsStageMarks.
const stageChildEnv = "JITDUMP_STAGE_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(stageChildEnv); dir != "" {
		if err := writeStagedDump(dir); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeStagedDump writes what a JIT using stages would: marks before,
// between and after its loads.
func writeStagedDump(dir string) error {
	w, err := jitdump.Create(jitdump.Options{Dir: dir})
	if err != nil {
		return err
	}
	steps := []func() error{
		func() error { return w.Stage("startup") },
		func() error { return w.Accounting(false) },
		func() error {
			_, err := w.Load(&jitdump.Function{Name: "before_marks", Addr: 0x10000, Code: []byte{0xc3}})
			return err
		},
		func() error { return w.Stage("steady") },
		func() error { return w.Accounting(true) },
		func() error {
			_, err := w.Load(&jitdump.Function{Name: "after_marks", Addr: 0x20000, Code: []byte{0x90, 0xc3}})
			return err
		},
		func() error { return w.Stage("shutdown") },
		w.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// TestPerfSkipsStageMarks: perf inject --jit, meeting the extension record,
// warns and reads on, so the functions loaded after marks still get their
// images.
func TestPerfSkipsStageMarks(t *testing.T) {
	perf := fixtures.LookPath(t, "perf")
	dir := t.TempDir()
	data := filepath.Join(dir, "perf.data")
	record := exec.Command(perf, "record", "-q", "-k", "mono", "-o", data, "--", os.Args[0])
	record.Env = append(os.Environ(), stageChildEnv+"="+dir)
	if out, err := record.CombinedOutput(); err != nil {
		t.Fatalf("perf record: %v\n%s", err, out)
	}
	inject := exec.Command(perf, "--buildid-dir", filepath.Join(dir, "buildid"), "inject", "--jit", "-i", data, "-o", filepath.Join(dir, "perf.jit.data"))
	out, err := inject.CombinedOutput()
	t.Logf("perf inject --jit: %s", out)
	if err != nil {
		t.Fatalf("perf inject --jit: %v\n%s", err, out)
	}
	images, _ := filepath.Glob(filepath.Join(dir, "jitted-*.so"))
	var names []string
	for _, img := range images {
		f, err := elf.Open(img)
		if err != nil {
			t.Fatal(err)
		}
		syms, err := f.Symbols()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
				names = append(names, s.Name)
			}
		}
	}
	if strings.Join(names, " ") != "before_marks after_marks" && strings.Join(names, " ") != "after_marks before_marks" {
		t.Errorf("perf inject made images for %q, want before_marks and after_marks", names)
	}
}
