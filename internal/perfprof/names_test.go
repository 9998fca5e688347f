package perfprof

import (
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

var splitCases = []struct {
	raw  string
	want sourceName // zero: not split
}{
	// V8, as node 20 names its code (tiers: ~ Ignition, ^ Sparkplug, + Maglev, * TurboFan).
	{"JS:^flatMap /app/node_modules/typescript/lib/_tsc.js:237:17", sourceName{"JS:^flatMap", "/app/node_modules/typescript/lib/_tsc.js", 237, 17}},
	{"JS:~resolve node:path:1217:10", sourceName{"JS:~resolve", "node:path", 1217, 10}},
	{"JS:~Module._extensions..js node:internal/modules/cjs/loader:1604:37", sourceName{"JS:~Module._extensions..js", "node:internal/modules/cjs/loader", 1604, 37}},
	{"JS:+square file:///srv/app.mjs:7:16", sourceName{"JS:+square", "file:///srv/app.mjs", 7, 16}},
	{"JS:*get total /app/my dir/a.js:11:12", sourceName{"JS:*get total", "/app/my dir/a.js", 11, 12}},
	{"JS:*get total node:path:11:12", sourceName{"JS:*get total", "node:path", 11, 12}},
	{"JS:~<instance_members_initializer> node:diagnostics_channel:38:1", sourceName{"JS:~<instance_members_initializer>", "node:diagnostics_channel", 38, 1}},
	{"JS:~f [eval]:1:1", sourceName{"JS:~f", "[eval]", 1, 1}},
	{"JS:~get x evalmachine.<anonymous>:2:3", sourceName{"JS:~get x", "evalmachine.<anonymous>", 2, 3}},
	// Eval'd code has no script.
	{"JS:*evaldSum :1:19", sourceName{"JS:*evaldSum", "", 1, 19}},
	{"JS:*get x :1:5", sourceName{"JS:*get x", "", 1, 5}},
	// Without a function name, named as DevTools names it, with its place.
	{"JS:* /app/main.js:1:1", sourceName{"JS:*(anonymous) main.js:1:1", "/app/main.js", 1, 1}},
	{"JS:o*' file:///app/m.mjs:3:9", sourceName{"JS:o*'(anonymous) m.mjs:3:9", "file:///app/m.mjs", 3, 9}},
	{"Eval:~ node:internal/main/run_main_module:1:1", sourceName{"Eval:~(anonymous) run_main_module:1:1", "node:internal/main/run_main_module", 1, 1}},
	{"Eval:~ :1:1", sourceName{"Eval:~(anonymous) :1:1", "", 1, 1}},
	{"LazyCompile:~ /x.js:2", sourceName{"LazyCompile:~(anonymous) x.js:2", "/x.js", 2, 0}},
	// Older V8s.
	{"LazyCompile:*fib /x.js:2", sourceName{"LazyCompile:*fib", "/x.js", 2, 0}},
	{"LazyCompile:~fib /x.js:2:13", sourceName{"LazyCompile:~fib", "/x.js", 2, 13}},
	// V8 code that has no place, and malformed names.
	{"Builtin:ArrayMap", sourceName{}},
	{"BytecodeHandler:DebugBreak1.Wide", sourceName{}},
	{"RegExp:^\\d+\\.\\d+$", sourceName{}},
	{"JS:*fib", sourceName{}},
	{"JS:*fib /x.js", sourceName{}},
	{"JS:*fib /x.js:+2", sourceName{}},
	{"JS:/x.js:2:3", sourceName{}},
	// CPython 3.12 and later.
	{"py::Outer.run:/app/x.py", sourceName{"py::Outer.run", "/app/x.py", 0, 0}},
	{"py::<module>:<frozen importlib._bootstrap>", sourceName{"py::<module>", "<frozen importlib._bootstrap>", 0, 0}},
	{"py::f:C:/app/x.py", sourceName{"py::f", "C:/app/x.py", 0, 0}},
	{"py::", sourceName{}},
	{"py::run::x:/a.py", sourceName{}},
	{"JS:*fib /x.js:1:0", sourceName{}}, // V8 counts from 1
	// Names that embed no path.
	{"w:fib/1", sourceName{}},
	{"erl_lint:'-vtunsafe/3-lc$^0/1-0-'/3", sourceName{}},
	{"java.util.HashMap.get(java.lang.Object)", sourceName{}},
	{"TRACE-1$fib$2", sourceName{}},
	{"", sourceName{}},
}

func TestSplitName(t *testing.T) {
	for _, tc := range splitCases {
		got, ok := splitName(tc.raw)
		if ok != (tc.want != sourceName{}) || got != tc.want {
			t.Errorf("splitName(%q) = %+v, %v; want %+v", tc.raw, got, ok, tc.want)
		}
	}
}

// TestPerfName: perf report's name of a split function is its raw name,
// that of any other function its Name, even when its raw name would split.
func TestPerfName(t *testing.T) {
	for _, tc := range splitCases {
		fn := &profile.Function{Name: tc.raw, SystemName: tc.raw}
		if sn, ok := splitName(tc.raw); ok {
			fn.Name = sn.name
		}
		if got := PerfName(fn); got != tc.raw {
			t.Errorf("PerfName(%+v) = %q, want %q", fn, got, tc.raw)
		}
	}
	for _, fn := range []*profile.Function{
		{Name: "fib", SystemName: "_Z3fibi"},
		{Name: "JS:*f", SystemName: "JS:*g /x.js:1:1"},   // not the name it splits to
		{Name: "", SystemName: "JS:* /x.js:1:1"},         // nameless: the raw name
		{Name: "py::run", SystemName: "py::other:/a.py"}, // not the name it splits to
	} {
		want := fn.Name
		if want == "" {
			want = fn.SystemName
		}
		if got := PerfName(fn); got != want {
			t.Errorf("PerfName(%+v) = %q, want %q", fn, got, want)
		}
	}
}

// FuzzSplitName: a split name is a prefix of the raw name, and a V8 name
// is its name, script and place put back together; a nameless V8 function's
// name is DevTools' "(anonymous)" and its place.
func FuzzSplitName(f *testing.F) {
	for _, tc := range splitCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		sn, ok := splitName(raw)
		if !ok {
			return
		}
		if !strings.Contains(raw, sn.file) || sn.line < 0 || sn.column < 0 {
			t.Fatalf("splitName(%q) = %+v", raw, sn)
		}
		if head, place, ok := strings.Cut(sn.name, "(anonymous) "); ok {
			at := ":" + strconv.FormatInt(sn.line, 10)
			if sn.column != 0 {
				at += ":" + strconv.FormatInt(sn.column, 10)
			}
			if sn.file != "" {
				at = path.Base(sn.file) + at
			}
			if !strings.HasPrefix(raw, head) || place != at {
				t.Fatalf("splitName(%q) = %+v", raw, sn)
			}
			return
		}
		if !strings.HasPrefix(raw, sn.name) {
			t.Fatalf("splitName(%q) = %+v", raw, sn)
		}
		if strings.HasPrefix(raw, "py::") {
			if raw != sn.name+":"+sn.file {
				t.Fatalf("splitName(%q) = %+v", raw, sn)
			}
			return
		}
		back := sn.name + " " + sn.file + ":" + strconv.FormatInt(sn.line, 10)
		if sn.column != 0 {
			back += ":" + strconv.FormatInt(sn.column, 10)
		}
		if back != raw {
			t.Fatalf("splitName(%q) = %+v, which gives back %q", raw, sn, back)
		}
	})
}

func BenchmarkPerfName(b *testing.B) {
	fns := make([]*profile.Function, len(splitCases))
	for i, tc := range splitCases {
		fns[i] = &profile.Function{Name: tc.raw, SystemName: tc.raw}
		if sn, ok := splitName(tc.raw); ok {
			fns[i].Name = sn.name
		}
	}
	for b.Loop() {
		for _, fn := range fns {
			PerfName(fn)
		}
	}
}
