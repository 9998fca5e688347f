package perfprof

import (
	"cmp"
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
// function, eval'd code) is named by its place alone: its Name stays the
// V8 name, so that two of them are not merged into one "JS:*".
//
// Erlang ("w:fib/1"), Java ("java.util.HashMap.get(java.lang.Object)"),
// PHP ("TRACE-1$fib$2") and LLVM names embed no path and are left alone:
// pprof shortens Java names to Class.method on purpose.

// sourceName is a jitted function's name split for pprof.
type sourceName struct {
	name         string // Function.Name
	file         string // Function.Filename; "" when the name gives none
	line, column int64  // where the function starts; 0 when not given
}

// v8Tags are the prefixes of V8's names for JavaScript functions
// (CodeEventLogger's tags; "LazyCompile" and "Function" before V8 10).
// Builtins, bytecode handlers, stubs and RegExp code carry no place.
var v8Tags = []string{"JS:", "Eval:", "LazyCompile:", "Function:", "Script:"}

// splitName splits a jitted function's name that embeds its source file,
// and tells whether it did.
func splitName(raw string) (sourceName, bool) {
	if sn, ok := splitV8(raw); ok {
		return sn, true
	}
	return splitCPython(raw)
}

// splitV8 splits "TAG:<tier>NAME SCRIPT:LINE:COLUMN" (the column is absent
// in older V8s). NAME may hold spaces (getters are "get x") and so may
// SCRIPT (a path), so the space that ends NAME is the first one followed
// by what starts a script: "/", a URL scheme ("node:", "file:"), or the
// ":LINE" of code that has no script (eval); failing that, the last space
// ("[eval]", "evalmachine.<anonymous>").
func splitV8(raw string) (sourceName, bool) {
	tag := ""
	for _, t := range v8Tags {
		if strings.HasPrefix(raw, t) {
			tag = t
			break
		}
	}
	if tag == "" {
		return sourceName{}, false
	}
	head, n1, ok := cutNumber(raw)
	if !ok {
		return sourceName{}, false
	}
	line, col := n1, int64(0)
	if h, n2, ok := cutNumber(head); ok {
		head, line, col = h, n2, n1
	}
	sep := -1
	for i := len(tag); i < len(head); i++ {
		if head[i] != ' ' {
			continue
		}
		if looksLikeScript(head[i+1:]) {
			sep = i
			break
		}
	}
	if sep < 0 {
		sep = strings.LastIndexByte(head, ' ')
	}
	if sep < len(tag) {
		return sourceName{}, false
	}
	sn := sourceName{name: head[:sep], file: head[sep+1:], line: line, column: col}
	if strings.TrimLeft(sn.name[len(tag):], "*^~+-") == "" {
		sn.name = raw // no name but its place
	}
	return sn, true
}

// cutNumber cuts ":N" off the end of s, N a line or column number as V8
// writes them: from 1, in decimal digits.
func cutNumber(s string) (string, int64, bool) {
	i := strings.LastIndexByte(s, ':')
	digits := s[i+1:]
	if i < 0 || digits == "" || digits[0] == '0' || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return s[:i], n, true
}

// looksLikeScript tells whether s, what follows a space in a V8 name
// before ":LINE:COLUMN", starts like a script name: empty (eval'd code), a
// path, or a URL ("node:internal/...", "file:///...", "webpack://...").
func looksLikeScript(s string) bool {
	if s == "" || s[0] == '/' {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ':':
			return i > 0
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return false
}

// splitCPython splits CPython's "py::QUALNAME:FILE" (perf trampolines, 3.12
// and later). A qualified name holds no ':'; a file name may.
func splitCPython(raw string) (sourceName, bool) {
	const prefix = "py::"
	rest, ok := strings.CutPrefix(raw, prefix)
	if !ok {
		return sourceName{}, false
	}
	qual, file, ok := strings.Cut(rest, ":")
	if !ok || qual == "" || strings.HasPrefix(file, ":") { // a C++ name, py::a::b

		return sourceName{}, false
	}
	return sourceName{name: raw[:len(prefix)+len(qual)], file: file}, true
}

// PerfName is the name perf report gives fn, as jitprof's perf-style
// outputs (text, JSON, folded stacks, the HTML flame graph, gprof's files,
// annotate) show it: the runtime's own name for a function whose profile
// Function was split for pprof, the demangled Name otherwise.
func PerfName(fn *profile.Function) string {
	system, _ := strings.CutSuffix(fn.SystemName, InferredSuffix)
	name, _ := strings.CutSuffix(fn.Name, InferredSuffix)
	if sn, ok := splitName(system); ok && sn.name == name {
		return fn.SystemName
	}
	return cmp.Or(fn.Name, fn.SystemName)
}
