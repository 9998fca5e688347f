package dumpindex

import (
	"cmp"
	"github.com/jitprof/jitprof/internal/runtimes"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jitprof/jitprof/jitdump"
)

// V8 writes no inline records. Its DEBUG_INFO for optimized code gives, for
// each pc, the source position (script, line, column) of the function the
// instruction came from, inlined ones included (V8's SourcePosition
// FirstInfo: the innermost only), and every CODE_LOAD names a function with
// its script and the position where it starts:
//
//	JS:*integrate /path/x.js:3:19     (* TurboFan, + Maglev, ^ Sparkplug, ~ interpreted)
//
// The function a pc came from is the innermost one whose source range holds
// the pc's position. A range starts where the name says; it ends at the
// greatest position the function's own unoptimized code (Sparkplug or
// interpreted: no inlining there) has in its DEBUG_INFO. Nothing in the dump
// gives the inlined frames between the compiled function and the innermost
// one, so a chain is at most one frame deep.

// pos is a source position, 1-based as V8 writes them.
type pos struct{ line, col uint32 }

func (p pos) cmp(q pos) int { return cmp.Or(cmp.Compare(p.line, q.line), cmp.Compare(p.col, q.col)) }

// maxPos bounds the positions taken from entries: a garbled entry (see
// jitdump.CodeLoad.BadEntry) can hold any number.
const maxPos = 1 << 24

// v8Name is a CODE_LOAD name of V8's parsed.
type v8Name struct {
	tier   string // runtimes.V8Name.Tier
	name   string // empty for anonymous functions and a script's top level
	script string
	start  pos
}

// parseV8Name parses the name of a JavaScript function's code ("JS:"),
// with its line and column, as the recovery of inlined functions needs it.
func parseV8Name(s string) (v8Name, bool) {
	n, ok := runtimes.ParseV8Name(s)
	if !ok || n.Tag != "JS:" || n.Column == 0 || n.Line >= maxPos || n.Column >= maxPos {
		return v8Name{}, false
	}
	return v8Name{tier: n.Tier, name: n.Name, script: n.Script, start: pos{uint32(n.Line), uint32(n.Column)}}, true
}

// optimized tells whether code of this tier can hold inlined functions.
func (n v8Name) optimized() bool { return strings.ContainsAny(n.tier, "*+") }

// v8Func is a JavaScript function of a script: where its source starts and,
// when its own code told, where it ends.
type v8Func struct {
	name  string
	start pos
	end   pos // zero when unknown
}

// v8Index holds a dump's JavaScript functions by script, built the first
// time a sampled optimized function asks, with the positions of the
// optimized code asked about.
type v8Index struct {
	once    sync.Once
	dump    *Dump
	scripts map[string][]*v8Func // by start

	mu        sync.Mutex
	positions map[*Code][]v8Pos
}

// v8Pos is the source position of the code from addr (at the load's
// address, bias removed) on.
type v8Pos struct {
	addr   uint64
	script string
	pos
}

func newV8Index(d *Dump) *v8Index {
	return &v8Index{dump: d, positions: make(map[*Code][]v8Pos)}
}

func (x *v8Index) build() {
	x.scripts = make(map[string][]*v8Func)
	type key struct {
		script string
		start  pos
	}
	byStart := make(map[key]*v8Func)
	for _, fn := range x.dump.Functions {
		n, ok := parseV8Name(fn.Name)
		if !ok {
			continue
		}
		k := key{n.script, n.start}
		f := byStart[k]
		if f == nil {
			f = &v8Func{name: n.name, start: n.start}
			byStart[k] = f
			x.scripts[n.script] = append(x.scripts[n.script], f)
		}
		if n.optimized() {
			continue
		}
		// Unoptimized code holds only the function's own positions. node
		// 20 garbles the file names of many (see jitdump.CodeLoad.BadEntry)
		// but not the addresses and positions of its real entries, those
		// inside the code, so the names are not looked at here.
		for _, p := range fn.positions() {
			if p.pos.cmp(f.start) >= 0 && p.pos.cmp(f.end) > 0 {
				f.end = p.pos
			}
		}
	}
	for _, fs := range x.scripts {
		slices.SortFunc(fs, func(a, b *v8Func) int { return a.start.cmp(b.start) })
	}
}

// positions returns the source positions of fn's code by address: its
// DEBUG_INFO entries inside the code, bias removed. node 20 garbles the file
// names of many records of the user's scripts (jitdump.DebugInfo
// StrideEntries), and the garbage may pass for text: a record with any bad
// entry (jitdump.CodeLoad.BadEntry) is read again with names of the length of
// fn's own script, whose end survives the garbling, and taken when every
// entry then lies inside the code; its positions are taken to be of that
// script, which is wrong only where code of another script was inlined.
func (fn *Code) positions() []v8Pos {
	n, _ := parseV8Name(fn.Name)
	bias := fn.LineBias()
	inside := func(e jitdump.DebugEntry) bool {
		return e.Addr >= bias && e.Addr-bias >= fn.CodeAddr && e.Addr-bias-fn.CodeAddr < fn.CodeSize &&
			e.Line > 0 && e.Line < maxPos && e.Discrim < maxPos
	}
	var ps []v8Pos
	garbled := false
	for e := range fn.allEntries() {
		garbled = garbled || fn.BadEntry(e) != ""
		if !inside(e) {
			continue
		}
		script := e.File
		if !jitdump.IsText(script) {
			script = n.script
		}
		ps = append(ps, v8Pos{addr: e.Addr - bias, script: script, pos: pos{e.Line, e.Discrim}})
	}
	if garbled {
		if debug := fn.debugRecord(); debug != nil {
			if entries, ok := debug.StrideEntries(len(n.script)); ok {
				var repaired []v8Pos
				for e := range entries {
					if !inside(e) {
						repaired = nil
						break
					}
					repaired = append(repaired, v8Pos{addr: e.Addr - bias, script: n.script, pos: pos{e.Line, e.Discrim}})
				}
				if repaired != nil {
					ps = repaired
				}
			}
		}
	}
	slices.SortStableFunc(ps, func(a, b v8Pos) int { return cmp.Compare(a.addr, b.addr) })
	return ps
}

// innermost returns the function of script whose range holds p and starts
// last; nil when none does, or when a function whose end is unknown starts
// between that one's start and p: p may be its code (the compiled function
// itself often has no unoptimized code to tell its end).
func (x *v8Index) innermost(script string, p pos) *v8Func {
	fs := x.scripts[script]
	i, _ := slices.BinarySearchFunc(fs, p, func(f *v8Func, p pos) int {
		if f.start.cmp(p) <= 0 {
			return -1
		}
		return 1
	})
	// Ranges nest, so the innermost holding p is the first holding it
	// going back from the last start at or before p.
	for i--; i >= 0; i-- {
		f := fs[i]
		if f.end == (pos{}) {
			return nil
		}
		if p.cmp(f.end) <= 0 {
			return f
		}
	}
	return nil
}

// v8Chain returns the function inlined at addr into fn, V8 optimized code,
// as an inferred frame; nil when the code at addr is fn's own or cannot be
// placed.
func (fn *Code) v8Chain(addr uint64) []InlineFrame {
	n, ok := parseV8Name(fn.Name)
	if !ok || !n.optimized() || fn.Debug() == nil {
		return nil // no positions to place the code at
	}
	x := fn.extra.dump.v8
	x.once.Do(x.build)
	x.mu.Lock()
	ps, ok := x.positions[fn]
	if !ok {
		ps = fn.positions()
		x.positions[fn] = ps
	}
	x.mu.Unlock()
	i, _ := slices.BinarySearchFunc(ps, addr, func(p v8Pos, a uint64) int {
		if p.addr <= a {
			return -1
		}
		return 1
	})
	if i == 0 {
		return nil
	}
	p := ps[i-1]
	g := x.innermost(p.script, p.pos)
	if g == nil || (p.script == n.script && g.start == n.start) {
		return nil
	}
	// The frame is named as V8 names the function, with the tier of the
	// code it was compiled into.
	name := "JS:" + n.tier + g.name + " " + p.script + ":" + strconv.Itoa(int(g.start.line)) + ":" + strconv.Itoa(int(g.start.col))
	return []InlineFrame{{Name: name, File: p.script, Line: p.line, Inferred: true}}
}
