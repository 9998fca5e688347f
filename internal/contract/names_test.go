package contract

import (
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

var splitCases = []struct {
	raw  string
	want SourceName // zero: not split
}{
	// V8, as node 20 names its code (tiers: ~ Ignition, ^ Sparkplug, + Maglev, * TurboFan).
	{"JS:^flatMap /app/node_modules/typescript/lib/_tsc.js:237:17", SourceName{"JS:^flatMap", "/app/node_modules/typescript/lib/_tsc.js", 237, 17}},
	{"JS:~resolve node:path:1217:10", SourceName{"JS:~resolve", "node:path", 1217, 10}},
	{"JS:~Module._extensions..js node:internal/modules/cjs/loader:1604:37", SourceName{"JS:~Module._extensions..js", "node:internal/modules/cjs/loader", 1604, 37}},
	{"JS:+square file:///srv/app.mjs:7:16", SourceName{"JS:+square", "file:///srv/app.mjs", 7, 16}},
	{"JS:*get total /app/my dir/a.js:11:12", SourceName{"JS:*get total", "/app/my dir/a.js", 11, 12}},
	{"JS:*get total node:path:11:12", SourceName{"JS:*get total", "node:path", 11, 12}},
	{"JS:~<instance_members_initializer> node:diagnostics_channel:38:1", SourceName{"JS:~<instance_members_initializer>", "node:diagnostics_channel", 38, 1}},
	{"JS:~f [eval]:1:1", SourceName{"JS:~f", "[eval]", 1, 1}},
	{"JS:~get x evalmachine.<anonymous>:2:3", SourceName{"JS:~get x", "evalmachine.<anonymous>", 2, 3}},
	// Eval'd code has no script.
	{"JS:*evaldSum :1:19", SourceName{"JS:*evaldSum", "", 1, 19}},
	{"JS:*get x :1:5", SourceName{"JS:*get x", "", 1, 5}},
	// Without a function name, named as DevTools names it, with its place.
	{"JS:* /app/main.js:1:1", SourceName{"JS:*(anonymous) main.js:1:1", "/app/main.js", 1, 1}},
	{"JS:o*' file:///app/m.mjs:3:9", SourceName{"JS:o*'(anonymous) m.mjs:3:9", "file:///app/m.mjs", 3, 9}},
	{"Eval:~ node:internal/main/run_main_module:1:1", SourceName{"Eval:~(anonymous) run_main_module:1:1", "node:internal/main/run_main_module", 1, 1}},
	{"Eval:~ :1:1", SourceName{"Eval:~(anonymous) :1:1", "", 1, 1}},
	{"LazyCompile:~ /x.js:2", SourceName{"LazyCompile:~(anonymous) x.js:2", "/x.js", 2, 0}},
	// Older V8s.
	{"LazyCompile:*fib /x.js:2", SourceName{"LazyCompile:*fib", "/x.js", 2, 0}},
	{"LazyCompile:~fib /x.js:2:13", SourceName{"LazyCompile:~fib", "/x.js", 2, 13}},
	// V8 code that has no place, and malformed names.
	{"Builtin:ArrayMap", SourceName{}},
	{"BytecodeHandler:DebugBreak1.Wide", SourceName{}},
	{"RegExp:^\\d+\\.\\d+$", SourceName{}},
	{"JS:*fib", SourceName{}},
	{"JS:*fib /x.js", SourceName{}},
	{"JS:*fib /x.js:+2", SourceName{}},
	{"JS:/x.js:2:3", SourceName{}},
	// CPython 3.12 and later.
	{"py::Outer.run:/app/x.py", SourceName{"py::Outer.run", "/app/x.py", 0, 0}},
	{"py::<module>:<frozen importlib._bootstrap>", SourceName{"py::<module>", "<frozen importlib._bootstrap>", 0, 0}},
	{"py::f:C:/app/x.py", SourceName{"py::f", "C:/app/x.py", 0, 0}},
	{"py::", SourceName{}},
	{"py::run::x:/a.py", SourceName{}},
	{"JS:*fib /x.js:1:0", SourceName{}}, // V8 counts from 1
	// Names that embed no path.
	{"w:fib/1", SourceName{}},
	{"erl_lint:'-vtunsafe/3-lc$^0/1-0-'/3", SourceName{}},
	{"java.util.HashMap.get(java.lang.Object)", SourceName{}},
	{"TRACE-1$fib$2", SourceName{}},
	{"", SourceName{}},
}

func TestSplitName(t *testing.T) {
	for _, tc := range splitCases {
		got, ok := SplitName(tc.raw)
		if ok != (tc.want != SourceName{}) || got != tc.want {
			t.Errorf("SplitName(%q) = %+v, %v; want %+v", tc.raw, got, ok, tc.want)
		}
	}
}

// TestPerfName: perf report's name of a split function is its raw name,
// that of any other function its Name, even when its raw name would split.
func TestPerfName(t *testing.T) {
	for _, tc := range splitCases {
		fn := &profile.Function{Name: tc.raw, SystemName: tc.raw}
		if sn, ok := SplitName(tc.raw); ok {
			fn.Name = sn.Name
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
		sn, ok := SplitName(raw)
		if !ok {
			return
		}
		if !strings.Contains(raw, sn.File) || sn.Line < 0 || sn.Column < 0 {
			t.Fatalf("SplitName(%q) = %+v", raw, sn)
		}
		if head, place, ok := strings.Cut(sn.Name, "(anonymous) "); ok {
			at := ":" + strconv.FormatInt(sn.Line, 10)
			if sn.Column != 0 {
				at += ":" + strconv.FormatInt(sn.Column, 10)
			}
			if sn.File != "" {
				at = path.Base(sn.File) + at
			}
			if !strings.HasPrefix(raw, head) || place != at {
				t.Fatalf("SplitName(%q) = %+v", raw, sn)
			}
			return
		}
		if !strings.HasPrefix(raw, sn.Name) {
			t.Fatalf("SplitName(%q) = %+v", raw, sn)
		}
		if strings.HasPrefix(raw, "py::") {
			if raw != sn.Name+":"+sn.File {
				t.Fatalf("SplitName(%q) = %+v", raw, sn)
			}
			return
		}
		back := sn.Name + " " + sn.File + ":" + strconv.FormatInt(sn.Line, 10)
		if sn.Column != 0 {
			back += ":" + strconv.FormatInt(sn.Column, 10)
		}
		if back != raw {
			t.Fatalf("SplitName(%q) = %+v, which gives back %q", raw, sn, back)
		}
	})
}

func BenchmarkPerfName(b *testing.B) {
	fns := make([]*profile.Function, len(splitCases))
	for i, tc := range splitCases {
		fns[i] = &profile.Function{Name: tc.raw, SystemName: tc.raw}
		if sn, ok := SplitName(tc.raw); ok {
			fns[i].Name = sn.Name
		}
	}
	for b.Loop() {
		for _, fn := range fns {
			PerfName(fn)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		m    *profile.Mapping
		want Kind
	}{
		{nil, File},
		{&profile.Mapping{File: "/usr/bin/node"}, File},
		{&profile.Mapping{File: "/tmp/jit-7.dump", BuildID: JITBuildID}, JIT},
		{&profile.Mapping{File: "/tmp/perf-7.map"}, PerfMap},
		{&profile.Mapping{File: KernelFile}, Kernel},
		{&profile.Mapping{File: VDSOFile}, VDSO},
		{&profile.Mapping{File: OffCPUFile}, OffCPU},
	} {
		if got := KindOf(tc.m); got != tc.want {
			t.Errorf("KindOf(%+v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}
