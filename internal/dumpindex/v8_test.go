package dumpindex

import (
	"reflect"
	"testing"

	"github.com/jitprof/jitprof/jitdump"
)

func TestParseV8Name(t *testing.T) {
	tests := []struct {
		in   string
		want v8Name
		ok   bool
	}{
		{"JS:*integrate /p/x.js:3:19", v8Name{"*", "integrate", "/p/x.js", pos{3, 19}}, true},
		{"JS:~ node:internal/main:1:1", v8Name{"~", "", "node:internal/main", pos{1, 1}}, true},
		{"JS:^get x /p/y.js:10:2", v8Name{"^", "get x", "/p/y.js", pos{10, 2}}, true},
		// A script path with a space: named as perfprof splits it too.
		{"JS:*f /p/a dir/x.js:3:4", v8Name{"*", "f", "/p/a dir/x.js", pos{3, 4}}, true},
		{"JS:* :1:20", v8Name{"*", "", "", pos{1, 20}}, true}, // new Function: no script name
		// V8 12 and later: on-stack replaced, context-specialized.
		{"JS:o*hot file:///w/hotcold.js:2:13", v8Name{"o*", "hot", "file:///w/hotcold.js", pos{2, 13}}, true},
		{"JS:+'cold /w/x.js:3:14", v8Name{"+'", "cold", "/w/x.js", pos{3, 14}}, true},
		{"JS:o~'f /w/x.js:3:14", v8Name{"o~'", "f", "/w/x.js", pos{3, 14}}, true},
		{"JS:open /w/x.js:3:14", v8Name{"", "open", "/w/x.js", pos{3, 14}}, true}, // a name, no tier
		{"JS:o /w/x.js:3:14", v8Name{"", "o", "/w/x.js", pos{3, 14}}, true},
		{"Builtin:ArrayIndexOf", v8Name{}, false},
		{"JS:*f /p/x.js:0:1", v8Name{}, false},
		{"JS:*f /p/x.js:3", v8Name{}, false},
		{"JS:*f", v8Name{}, false},
	}
	for _, tc := range tests {
		got, ok := parseV8Name(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseV8Name(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseV8Name(f *testing.F) {
	f.Add("JS:*integrate /p/x.js:3:19")
	f.Add("JS:~ :1:1")
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := parseV8Name(s); ok && (n.start.line == 0 || n.start.line >= maxPos) {
			t.Errorf("%q: start %v", s, n.start)
		}
	})
}

// A V8-like dump of x.js: outer (lines 1-20) holds inner (5-8) and is
// compiled by TurboFan with inner inlined; other (10-12) has no
// unoptimized code, so its end is unknown. Entries are written as V8 writes
// them, 0x40 high, and the optimized code's record carries an entry past
// its end and one with a file name that is not text.
func TestV8Chain(t *testing.T) {
	const x = "/p/x.js"
	e := func(off uint64, line, col uint32) jitdump.DebugEntry {
		return jitdump.DebugEntry{Addr: 0x1000 + off + jitdump.V8LineBias, Line: line, Discrim: col, File: x}
	}
	base := func(addr uint64, lines ...[2]uint32) []jitdump.DebugEntry {
		var es []jitdump.DebugEntry
		for i, l := range lines {
			es = append(es, jitdump.DebugEntry{Addr: addr + uint64(i) + jitdump.V8LineBias, Line: l[0], Discrim: l[1], File: x})
		}
		return es
	}
	path := writeDump(t, func(w *jitdump.Writer) {
		w.Load(&jitdump.Function{Name: "JS:^outer " + x + ":1:15", Addr: 0x5000, Code: make([]byte, 0x20), Lines: base(0x5000, [2]uint32{2, 3}, [2]uint32{20, 1})})
		w.Load(&jitdump.Function{Name: "JS:^inner " + x + ":5:15", Addr: 0x6000, Code: make([]byte, 0x20), Lines: base(0x6000, [2]uint32{6, 3}, [2]uint32{8, 1})})
		w.Load(&jitdump.Function{Name: "JS:*other " + x + ":10:15", Addr: 0x7000, Code: make([]byte, 0x20)})
		lines := []jitdump.DebugEntry{e(0, 2, 3), e(0x10, 6, 5), e(0x20, 9, 1), e(0x30, 11, 3), e(0x40, 19, 1),
			{Addr: 0xd963139ca000000, Line: 7, File: x}, {Addr: 0x1050 + jitdump.V8LineBias, Line: 6, File: "\xfd\x15"}}
		w.Load(&jitdump.Function{Name: "JS:*outer " + x + ":1:15", Addr: 0x1000, Code: make([]byte, 0x60), Lines: lines})
	})
	d, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	outer := d.Functions[3]
	inner := []InlineFrame{{Name: "JS:*inner " + x + ":5:15", File: x, Line: 6, Inferred: true}}
	tests := []struct {
		addr uint64
		want []InlineFrame
	}{
		{0x1000, nil},   // outer's own
		{0x1010, inner}, // 6:5 is inner's
		{0x101f, inner},
		{0x1020, nil}, // 9:1: outer's again, after inner's end
		{0x1030, nil}, // 11:3 may be other's, whose end is unknown
		{0x1040, nil},
		// The entry whose name is not text gives a position of outer's
		// own script (what node 20 garbles)...
		{0x1050, inner},
	}
	for _, tc := range tests {
		if got := outer.InlineChain(tc.addr); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("InlineChain(%#x) = %+v, want %+v", tc.addr, got, tc.want)
		}
	}
	// ...but it is no line, nor is the one past the end.
	want := Lines{e(0, 2, 3), e(0x10, 6, 5), e(0x20, 9, 1), e(0x30, 11, 3), e(0x40, 19, 1)}
	for i := range want {
		want[i].Addr -= jitdump.V8LineBias
	}
	if got := outer.Lines(); !reflect.DeepEqual(got, want) {
		t.Errorf("Lines() = %+v, want %+v", got, want)
	}
}
