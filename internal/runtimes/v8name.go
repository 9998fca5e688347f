package runtimes

import (
	"strconv"
	"strings"
)

// V8Name is what a V8 code name says of a JavaScript function:
// "TAG:<tier>NAME SCRIPT:LINE:COLUMN", the column absent in older V8s.
type V8Name struct {
	Tag string // one of V8Tags
	// Tier is the code's tier: '~' interpreted, '^' baseline (Sparkplug),
	// '+' Maglev, '*' Turbofan; V8 12 and later mark on-stack-replaced
	// code with an 'o' before it, and context-specialized code with a "'"
	// after it. Empty when the name has none.
	Tier   string
	Name   string // empty for anonymous functions and a script's top level
	Script string // empty for code of no script (new Function)
	// Line and Column are where the function starts, from 1; Column is 0
	// when the name gives none.
	Line, Column int64
}

// V8Tags are the prefixes of V8's names for JavaScript functions
// (CodeEventLogger's tags; "LazyCompile" and "Function" before V8 10).
// Builtins, bytecode handlers, stubs and RegExp code carry no place.
var V8Tags = []string{"JS:", "Eval:", "LazyCompile:", "Function:", "Script:"}

// Function is the name without its place: "TAG:<tier>NAME".
func (n V8Name) Function() string {
	return n.Tag + n.Tier + n.Name
}

// ParseV8Name parses a V8 code name that gives its function's place. NAME
// may hold spaces (getters are "get x") and so may SCRIPT (a path), so the
// space that ends NAME is the first one followed by what starts a script:
// "/", a URL scheme ("node:", "file:"), or the ":LINE" of code that has no
// script (eval); failing that, the last space ("[eval]",
// "evalmachine.<anonymous>").
func ParseV8Name(raw string) (V8Name, bool) {
	var n V8Name
	for _, t := range V8Tags {
		if strings.HasPrefix(raw, t) {
			n.Tag = t
			break
		}
	}
	if n.Tag == "" {
		return V8Name{}, false
	}
	head, n1, ok := cutNumber(raw)
	if !ok {
		return V8Name{}, false
	}
	n.Line = n1
	if h, n2, ok := cutNumber(head); ok {
		head, n.Line, n.Column = h, n2, n1
	}
	sep := -1
	for i := len(n.Tag); i < len(head); i++ {
		if head[i] == ' ' && looksLikeScript(head[i+1:]) {
			sep = i
			break
		}
	}
	if sep < 0 {
		sep = strings.LastIndexByte(head, ' ')
	}
	if sep < len(n.Tag) {
		return V8Name{}, false
	}
	n.Name, n.Script = head[len(n.Tag):sep], head[sep+1:]
	n.Tier, n.Name = cutTier(n.Name)
	return n, true
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

// cutTier cuts the tier V8 marks a function's name with off it. A name
// cannot start with a marker: JavaScript's names hold no '*', '+', '^' or
// '~', so an 'o' is a marker only before one.
func cutTier(name string) (tier, rest string) {
	i := 0
	if len(name) > 1 && name[0] == 'o' && strings.IndexByte("*+^~", name[1]) >= 0 {
		i = 1
	}
	if i == len(name) || strings.IndexByte("*+^~", name[i]) < 0 {
		return "", name
	}
	i++
	if i < len(name) && name[i] == '\'' {
		i++
	}
	return name[:i], name[i:]
}
