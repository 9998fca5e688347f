package perfmap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Entry
	}{
		{"node", "18c4000 300 Builtin:DeoptimizationEntry_Eager\n" +
			"1f78bbacad66 78 JS:~ node:internal/main/run_main_module:1:1\n",
			[]Entry{
				{0x18c4000, 0x300, "Builtin:DeoptimizationEntry_Eager", 1},
				{0x1f78bbacad66, 0x78, "JS:~ node:internal/main/run_main_module:1:1", 2},
			}},
		{"java", "0x00007fa554ec7640 0x0000000000000130 long Work.fib(int)\n" +
			"0x00007fa554ec7aa0 0x0000000000000200 void java.lang.System.arraycopy(java.lang.Object, int, java.lang.Object, int, int)\n",
			[]Entry{
				{0x7fa554ec7640, 0x130, "long Work.fib(int)", 1},
				{0x7fa554ec7aa0, 0x200, "void java.lang.System.arraycopy(java.lang.Object, int, java.lang.Object, int, int)", 2},
			}},
		{"erlang", "0x7fa384019000 68 $global::apply_fun_shared\n0x7fa384019068 90 $global::arith_compare_shared\n",
			[]Entry{
				{0x7fa384019000, 0x68, "$global::apply_fun_shared", 1},
				{0x7fa384019068, 0x90, "$global::arith_compare_shared", 2},
			}},
		{"cpython", "7f3a1c0a1000 b py::fib:/w/fib_sq.py\n",
			[]Entry{{0x7f3a1c0a1000, 0xb, "py::fib:/w/fib_sq.py", 1}}},
		{"php", "41000000 12c TRACE-1$fib$3\n",
			[]Entry{{0x41000000, 0x12c, "TRACE-1$fib$3", 1}}},
		{"upper case hex and 0X", "0X7FA3ABCDEF 0XFF Foo\n7FA3ABCDEF FF Bar\n",
			[]Entry{{0x7fa3abcdef, 0xff, "Foo", 1}, {0x7fa3abcdef, 0xff, "Bar", 2}}},
		{"CRLF, trailing whitespace, blank lines", "\r\n1 2 a b\r\n\n  \t\n3 4 c \t\r\n\n",
			[]Entry{{1, 2, "a b", 2}, {3, 4, "c", 5}}},
		{"no newline at end", "1 2 a", []Entry{{1, 2, "a", 1}}},
		{"name starting with a space", "1 2  a", []Entry{{1, 2, " a", 1}}},
		{"size 0", "1 0 empty\n", []Entry{{1, 0, "empty", 1}}},
		{"largest values", "ffffffffffffffff 0 a\nfffffffffffffffe 1 b\n0x0000000000000000000001 1 c\n",
			[]Entry{{1<<64 - 1, 0, "a", 1}, {1<<64 - 2, 1, "b", 2}, {1, 1, "c", 3}}},
		{"empty input", "", []Entry{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs, err := Parse(strings.NewReader(tt.in))
			if err != nil || len(errs) != 0 {
				t.Fatalf("Parse: %v %v", err, errs)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseBadLines(t *testing.T) {
	type bad struct {
		line   int
		offset int64
		msg    string
	}
	tests := []struct {
		name string
		in   string
		want []Entry
		bad  []bad
	}{
		{"garbage between good lines",
			"1 2 a\nhello world\n3 4 b\n\x00\xff\xfe\n5 6 c\n",
			[]Entry{{1, 2, "a", 1}, {3, 4, "b", 3}, {5, 6, "c", 5}},
			[]bad{{2, 6, "start is not a hex number"}, {4, 24, "start is not a hex number"}}},
		{"each kind of bad line",
			"10\n10 \n10 20\n10 20 \n10 2g x\n1g 20 x\n10  20 x\n10\t20 x\n0x 1 x\n1 0x x\n" +
				"10000000000000000 1 x\n1 10000000000000000 x\nffffffffffffffff 1 x\n" +
				"ok 1 x\n7 8 good\n",
			[]Entry{{7, 8, "good", 15}},
			[]bad{
				{1, 0, "missing size"},
				{2, 3, "missing size"},
				{3, 7, "missing name"},
				{4, 13, "missing name"},
				{5, 20, "size is not a hex number"},
				{6, 28, "start is not a hex number"},
				{7, 36, "size is not a hex number"},
				{8, 45, "start is not a hex number"},
				{9, 53, "start is not a hex number"},
				{10, 60, "size is not a hex number"},
				{11, 67, "start overflows 64 bits"},
				{12, 89, "size overflows 64 bits"},
				{13, 111, "start+size overflows 64 bits"},
				{14, 132, "start is not a hex number"},
			}},
		{"CRLF keeps offsets", "1 2 a\r\nzz\r\n3 4 b\r\n",
			[]Entry{{1, 2, "a", 1}, {3, 4, "b", 3}},
			[]bad{{2, 7, "start is not a hex number"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs, err := Parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("entries: got %+v\nwant %+v", got, tt.want)
			}
			if len(errs) != len(tt.bad) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tt.bad), errs)
			}
			for i, e := range errs {
				if w := tt.bad[i]; e.Line != w.line || e.Offset != w.offset || e.Msg != w.msg {
					t.Errorf("error %d: got line %d offset %d %q, want line %d offset %d %q",
						i, e.Line, e.Offset, e.Msg, w.line, w.offset, w.msg)
				}
				if line := lineAt(tt.in, e.Offset); e.Text != strings.TrimRight(line, " \t\r") {
					t.Errorf("error %d: Text %q, line %q", i, e.Text, line)
				}
			}
		})
	}
}

// lineAt returns the line starting at off.
func lineAt(s string, off int64) string {
	line, _, _ := strings.Cut(s[off:], "\n")
	return line
}

func TestHugeLine(t *testing.T) {
	name := strings.Repeat("x", 8<<20)
	in := "1 2 a\n" + strings.Repeat("z", 8<<20) + "\n3 4 " + name + "\n5 6 c"
	got, errs, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1].Name != name || got[2].Line != 4 {
		t.Errorf("entries lost around a huge line: %d entries", len(got))
	}
	if len(errs) != 1 || errs[0].Line != 2 || len(errs[0].Text) != maxText {
		t.Fatalf("errors: %v", errs)
	}
}

func TestLineErrorString(t *testing.T) {
	e := &LineError{File: "/tmp/perf-1.map", Line: 3, Text: "zz", Msg: "start is not a hex number"}
	if got, want := e.Error(), `/tmp/perf-1.map:3: start is not a hex number: "zz"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	e.File = ""
	if got, want := e.Error(), `perfmap: line 3: start is not a hex number: "zz"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestParseFile(t *testing.T) {
	name := filepath.Join(t.TempDir(), "perf-1.map")
	if err := os.WriteFile(name, []byte("1 2 a\nbad\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, errs, err := ParseFile(name)
	if err != nil || len(got) != 1 || len(errs) != 1 || errs[0].File != name {
		t.Fatalf("ParseFile: %v %v %v", got, errs, err)
	}
	if _, _, err := ParseFile(name + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader("1 2 a\n"), iotest.ErrReader(io.ErrClosedPipe))
	if got, errs, err := Parse(r); err != io.ErrClosedPipe || got != nil || errs != nil {
		t.Errorf("got %v %v %v", got, errs, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"18c4000 300 Builtin:DeoptimizationEntry_Eager\n1f78bbacad66 78 JS:~ node:internal/main/run_main_module:1:1\n",
		"0x00007fa554ec7aa0 0x0000000000000200 void java.lang.System.arraycopy(java.lang.Object, int)\r\n",
		"0x7fa384019000 68 $global::apply_fun_shared\n\n0x7fa384019068 90 $global::arith_compare_shared",
		"1 10 a\n5 2 b\n1 10 c\nzz\n0 0 d\nffffffffffffffff 1 e\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := string(data) // Parse owns its buffer; keep a copy to check against
		got, errs, err := Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(in, "\n") + 1
		prev := 0
		for _, e := range got {
			if e.Line <= prev || e.Line > lines || e.Name == "" || e.Start+e.Size < e.Start {
				t.Fatalf("bad entry %+v", e)
			}
			prev = e.Line
		}
		for _, e := range errs {
			if e.Offset < 0 || e.Offset > int64(len(in)) ||
				e.Line != strings.Count(in[:e.Offset], "\n")+1 ||
				(e.Offset > 0 && in[e.Offset-1] != '\n') ||
				!strings.HasPrefix(in[e.Offset:], e.Text) {
				t.Fatalf("bad error %+v", e)
			}
		}

		var buf bytes.Buffer
		if err := Write(&buf, got); err != nil {
			t.Fatal(err)
		}
		again, errs, err := Parse(&buf)
		if err != nil || len(errs) != 0 || len(again) != len(got) {
			t.Fatalf("round trip: %d of %d entries, %v %v", len(again), len(got), errs, err)
		}
		for i := range got {
			if a, b := again[i], got[i]; a.Start != b.Start || a.Size != b.Size || a.Name != b.Name {
				t.Fatalf("round trip: %+v became %+v", b, a)
			}
		}

		checkTable(t, got)
	})
}
