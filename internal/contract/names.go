package contract

import (
	"github.com/jitprof/jitprof/internal/runtimes"
	"path"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// Some runtimes name a jitted function after where its source is: V8
// "JS:*flatMap /app/lib/_tsc.js:237:17", CPython "py::Outer.run:/app/x.py".
// pprof reads a Function's Name as a symbol and shortens it as one (its
// flame graph cuts names at every "." and "::", so the V8 name above shows
// as "js:237:17"), while it has fields for the rest: Filename, StartLine,
// and a Line's Line and Column. A profile therefore carries such a function
// split: Name "JS:*flatMap", Filename the script, StartLine 237, and the
// name as the runtime gave it in SystemName, which is what perf report
// shows (PerfName).
//
// A V8 function without a name (a script's top level, an anonymous
// function, eval'd code) is named as V8's and Chrome's DevTools name it,
// with its place so that two of them are not merged into one:
// "JS:*(anonymous) main.js:1:1" (pprof's flame graph would show the V8 name
// "JS:* /app/main.js:1:1" as "js:1:1").
//
// Erlang ("w:fib/1"), Java ("java.util.HashMap.get(java.lang.Object)"),
// PHP ("TRACE-1$fib$2") and LLVM names embed no path and are left alone:
// pprof shortens Java names to Class.method on purpose.

// SourceName is a jitted function's name split for pprof.
type SourceName struct {
	Name         string // Function.Name
	File         string // Function.Filename; "" when the name gives none
	Line, Column int64  // where the function starts; 0 when not given
}

// SplitName splits a jitted function's name that embeds its source file,
// and tells whether it did.
func SplitName(raw string) (SourceName, bool) {
	if sn, ok := splitV8(raw); ok {
		return sn, true
	}
	return splitCPython(raw)
}

// splitV8 splits a V8 name that gives its function's place
// (runtimes.ParseV8Name).
func splitV8(raw string) (SourceName, bool) {
	n, ok := runtimes.ParseV8Name(raw)
	if !ok {
		return SourceName{}, false
	}
	sn := SourceName{Name: n.Function(), File: n.Script, Line: n.Line, Column: n.Column}
	if n.Name == "" {
		place := ":" + strconv.FormatInt(n.Line, 10)
		if n.Column > 0 {
			place += ":" + strconv.FormatInt(n.Column, 10)
		}
		if n.Script != "" {
			place = path.Base(n.Script) + place
		}
		sn.Name = n.Tag + n.Tier + "(anonymous) " + place
	}
	return sn, true
}

// splitCPython splits CPython's "py::QUALNAME:FILE" (perf trampolines, 3.12
// and later). A qualified name holds no ':'; a file name may.
func splitCPython(raw string) (SourceName, bool) {
	const prefix = "py::"
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok {
		return SourceName{}, false
	}
	qual, file, ok := strings.Cut(rest, ":")
	if !ok || qual == "" || strings.HasPrefix(file, ":") { // a C++ name, py::a::b

		return SourceName{}, false
	}
	return SourceName{Name: raw[:len(prefix)+len(qual)], File: file}, true
}

// PerfName is the name perf report gives fn, as jitprof's perf-style
// outputs (text, JSON, folded stacks, the HTML flame graph, gprof's files,
// annotate) show it: the runtime's own name for a function whose profile
// Function was split for pprof, the demangled Name otherwise.
func PerfName(fn *profile.Function) string {
	if perfNameIsSystem(fn.Name, fn.SystemName) {
		return fn.SystemName
	}
	return fn.Name
}

// PerfName is PerfName of function fn of p, as the number of the string:
// fn's Name or its SystemName.
func (p *Profile) PerfName(fn *Function) uint32 {
	if perfNameIsSystem(p.String(fn.Name), p.String(fn.SystemName)) {
		return fn.SystemName
	}
	return fn.Name
}

// perfNameIsSystem tells whether perf report's name of a function is its
// SystemName rather than its Name.
func perfNameIsSystem(name, systemName string) bool {
	system, _ := strings.CutSuffix(systemName, InferredSuffix)
	bare, _ := strings.CutSuffix(name, InferredSuffix)
	sn, split := SplitName(system)
	return split && sn.Name == bare || name == ""
}
