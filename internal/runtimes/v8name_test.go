package runtimes

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseV8Name(t *testing.T) {
	tests := []struct {
		in   string
		want V8Name
		ok   bool
	}{
		{"JS:*integrate /p/x.js:3:19", V8Name{"JS:", "*", "integrate", "/p/x.js", 3, 19}, true},
		{"LazyCompile:~f file:///w/a b.js:2", V8Name{"LazyCompile:", "~", "f", "file:///w/a b.js", 2, 0}, true},
		{"JS:^get x /p/y.js:10:2", V8Name{"JS:", "^", "get x", "/p/y.js", 10, 2}, true},
		{"JS:o*'hot node:internal/main:1:1", V8Name{"JS:", "o*'", "hot", "node:internal/main", 1, 1}, true},
		{"Eval:* :1:20", V8Name{"Eval:", "*", "", "", 1, 20}, true},
		{"JS:~ evalmachine.<anonymous>:1:1", V8Name{"JS:", "~", "", "evalmachine.<anonymous>", 1, 1}, true},
		// Line 0 is no line: ":0" is the script's, as a column-less V8 would write it.
		{"JS:*f /p/x.js:0:1", V8Name{"JS:", "*", "f", "/p/x.js:0", 1, 0}, true},
		{"JS:*f /p/x.js:0", V8Name{}, false},
		{"JS:*f /p/x.js:99999999999999999999", V8Name{}, false},
		{"JS:*f:3", V8Name{}, false},
		{"Builtin:ArrayIndexOf", V8Name{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseV8Name(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseV8Name(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseV8Name: a name from a dump or a perf map, any string, parses
// into parts that make it up again, in order, with the line and column
// numbers V8 writes (from 1), or does not parse.
func FuzzParseV8Name(f *testing.F) {
	for _, s := range []string{"JS:*integrate /p/x.js:3:19", "LazyCompile:~f file:///w/a b.js:2", "JS:o*'hot node:internal/main:1:1",
		"Eval:* :1:20", "JS:~ evalmachine.<anonymous>:1:1", "Function:^get x /p/y.js:10:2", "Script:~ /a:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ParseV8Name(s)
		if !ok {
			return
		}
		place := ":" + strconv.FormatInt(n.Line, 10)
		if n.Column != 0 {
			place += ":" + strconv.FormatInt(n.Column, 10)
		}
		if again := n.Function() + " " + n.Script + place; again != s {
			t.Fatalf("%q parses into %+v, which make %q", s, n, again)
		}
		if n.Line < 1 || n.Column < 0 || !strings.HasPrefix(n.Function(), n.Tag+n.Tier) || strings.Contains(n.Tier, " ") {
			t.Fatalf("%q parses into %+v", s, n)
		}
	})
}
