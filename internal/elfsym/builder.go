package elfsym

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A builder collects symbols as perf loads them: it inserts them in
// perf's order, applies perf's fix-ups, and has a copy of perf's tree
// built alongside (by another goroutine, as that is the slowest part).
type builder struct {
	info  []symInfo // by id, the order of insertion
	order []rec     // live symbols by address, then id

	tree      *rbTree
	ops       []treeOp // not yet sent to the tree
	opsc      chan []treeOp
	treeDone  chan *rbTree
	treeLater bool // drop tree operations: the caller fills the tree itself

	arena   []byte   // copies of names that have no string table
	modules []string // kallsyms modules; 0 is the kernel
}

// A rec is a live symbol's place in the address order.
type rec struct {
	start, end uint64
	id         int32
}

// symInfo is what perf's duplicate removal looks at, besides the range.
// What it would read of the name is worked out when the name is read,
// as the name will be out of the cache by then.
type symInfo struct {
	name        []byte // in a string table, or in the arena
	bind, typ   uint8
	module      uint16 // index in builder.modules
	underscores uint8  // leading, up to 255
	sysAlias    bool   // SyS..., compat_SyS...
}

// A treeOp inserts symbol id, starting at start, into the tree, or, if
// id is negative, erases symbol ^id.
type treeOp struct {
	start uint64
	id    int32
}

// Symbol bindings and types, as in ELF.
const (
	bindLocal  = 0
	bindGlobal = 1
	bindWeak   = 2

	typeNoType = 0
	typeObject = 1
	typeFunc   = 2
	typeIFunc  = 10
)

// newBuilder returns a builder expecting about n symbols.
func newBuilder(n int) *builder {
	b := &builder{
		info:     make([]symInfo, 0, n),
		ops:      make([]treeOp, 0, opsBatch),
		opsc:     make(chan []treeOp, 16),
		treeDone: make(chan *rbTree, 1),
		modules:  []string{""},
	}
	go func() {
		t := newRBTree(n)
		for ops := range b.opsc {
			for _, op := range ops {
				if op.id >= 0 {
					t.insert(op.id, op.start)
				} else {
					t.erase(^op.id)
				}
			}
		}
		b.treeDone <- t
	}()
	return b
}

// op queues a tree operation, sending them on in batches.
func (b *builder) op(o treeOp) {
	if b.treeLater {
		return
	}
	b.ops = append(b.ops, o)
	if len(b.ops) == opsBatch {
		b.flushOps()
	}
}

const opsBatch = 4096

func (b *builder) flushOps() {
	if len(b.ops) > 0 {
		b.opsc <- b.ops
		b.ops = make([]treeOp, 0, opsBatch)
	}
}

// finishTree waits for the tree to be built. It must be called once the
// builder is done with, to end the goroutine building it.
func (b *builder) finishTree() *rbTree {
	if b.tree == nil {
		b.flushOps()
		close(b.opsc)
		b.tree = <-b.treeDone
	}
	return b.tree
}

// keep copies name and suffix, joined, into the arena. A full arena is
// left to the names already in it, not grown.
func (b *builder) keep(name []byte, suffix string) []byte {
	n := len(name) + len(suffix)
	if cap(b.arena)-len(b.arena) < n {
		b.arena = make([]byte, 0, max(n, 4<<10))
	}
	start := len(b.arena)
	b.arena = append(append(b.arena, name...), suffix...)
	return b.arena[start:len(b.arena):len(b.arena)]
}

// add records a new symbol and queues its insertion into the tree. The
// symbols added are then put in the address order by insert.
func (b *builder) add(added []rec, name []byte, start, end uint64, bind, typ uint8) []rec {
	id := int32(len(b.info))
	b.info = append(b.info, symInfo{
		name: name, bind: bind, typ: typ,
		underscores: leadingUnderscores(name),
		sysAlias:    bytes.HasPrefix(name, []byte("SyS")) || bytes.HasPrefix(name, []byte("compat_SyS")),
	})
	b.op(treeOp{start, id})
	return append(added, rec{start, end, id})
}

// insert puts the symbols added, in the order they were added, into the
// address order, each after the symbols already at its address, as perf
// inserts symbols into its tree.
func (b *builder) insert(added []rec) {
	sortRecs(added)
	if len(b.order) == 0 {
		b.order = added
		return
	}
	old := b.order
	b.order = make([]rec, 0, len(old)+len(added))
	for len(old) > 0 && len(added) > 0 {
		if added[0].start < old[0].start {
			b.order, added = append(b.order, added[0]), added[1:]
		} else {
			b.order, old = append(b.order, old[0]), old[1:]
		}
	}
	b.order = append(append(b.order, old...), added...)
}

// fixupEnd gives each empty symbol the extent up to the next symbol, as
// symbols__fixup_end does; the last one gets the rest of its page and
// the next. In kallsyms the gap between the kernel and a module, or
// between two modules, is not filled: the empty symbol before it gets
// its page.
func (b *builder) fixupEnd(kallsyms bool) {
	o := b.order
	for k := 1; k < len(o); k++ {
		prev := &o[k-1]
		if prev.end != prev.start {
			continue
		}
		if kallsyms && b.info[prev.id].module != b.info[o[k].id].module {
			prev.end = roundUp(prev.end+4096, 4096)
		} else {
			prev.end = o[k].start
		}
	}
	if n := len(o); n > 0 && o[n-1].end == o[n-1].start {
		o[n-1].end = roundUp(o[n-1].start, 4096) + 4096
	}
}

func roundUp(x, to uint64) uint64 { return (x + to - 1) / to * to }

// fixupDuplicate keeps one symbol of each address, as
// symbols__fixup_duplicate does.
func (b *builder) fixupDuplicate() {
	out := b.order[:0]
	for _, r := range b.order {
		if n := len(out); n > 0 && out[n-1].start == r.start {
			loser := r
			if !b.better(out[n-1], r) {
				loser, out[n-1] = out[n-1], r
			}
			b.op(treeOp{id: ^loser.id})
			continue
		}
		out = append(out, r)
	}
	b.order = out
}

// better reports whether perf's choose_best_symbol prefers x, inserted
// first, to y.
func (b *builder) better(x, y rec) bool {
	if lx, ly := x.end-x.start, y.end-y.start; (lx == 0) != (ly == 0) {
		return lx > 0
	}
	ix, iy := &b.info[x.id], &b.info[y.id]
	if ix.typ != iy.typ {
		if ix.typ == typeNoType {
			return false
		}
		if iy.typ == typeNoType {
			return true
		}
	}
	if wx, wy := ix.bind == bindWeak, iy.bind == bindWeak; wx != wy {
		return wy
	}
	if gx, gy := ix.bind == bindGlobal, iy.bind == bindGlobal; gx != gy {
		return gx
	}
	if ix.underscores != iy.underscores {
		return ix.underscores < iy.underscores
	}
	if len(ix.name) != len(iy.name) {
		return len(ix.name) > len(iy.name)
	}
	// arch__choose_best_symbol: avoid the kernel's SyS aliases.
	return !ix.sysAlias
}

func leadingUnderscores(s []byte) uint8 {
	n := 0
	for n < len(s) && s[n] == '_' && n < 255 {
		n++
	}
	return uint8(n)
}

// table makes the Table of the live symbols. Lookups where symbols
// overlap are answered now, by the tree; the Table then only needs a
// binary search over disjoint ranges.
func (b *builder) table(path string) (*Table, error) {
	var size int
	for _, r := range b.order {
		size += len(b.info[r.id].name)
	}
	if size > math.MaxUint32 { // names may share bytes of a string table
		return nil, fmt.Errorf("%s: the symbol names add up to %d bytes, more than 4 GiB", path, size)
	}
	t := &Table{path: path, syms: make([]entry, len(b.order)), modules: b.modules}
	var names strings.Builder
	names.Grow(size)
	for k, r := range b.order {
		info := &b.info[r.id]
		names.Write(info.name)
		t.syms[k] = entry{start: r.start, end: r.end, nameEnd: uint32(names.Len()), module: info.module}
	}
	t.names = names.String()
	b.flatten(t)
	return t, nil
}

// flatten fills t's ranges. A symbol that overlaps no other is found by
// perf's tree walk throughout its range (the walk passes the symbol with
// the greatest start at or below the address); a run of overlapping
// symbols is cut at every start and end, and each piece gets what the
// tree walk gives.
func (b *builder) flatten(t *Table) {
	o := b.order
	t.starts = make([]uint64, 0, len(o))
	t.spans = make([]span, 0, len(o))
	var ends []uint64       // by id, for the tree walk
	var pos map[int32]int32 // id -> index in t.syms
	for k := 0; k < len(o); {
		// The run of symbols from k that overlap one another.
		end, n := reach(o[k]), 1
		for k+n < len(o) && o[k+n].start < end {
			end = max(end, reach(o[k+n]))
			n++
		}
		if n == 1 {
			if end > o[k].start {
				t.add(o[k].start, end, int32(k))
			}
			k++
			continue
		}
		if ends == nil {
			tree := b.finishTree()
			ends = make([]uint64, len(tree.n))
			for _, r := range o {
				ends[r.id] = r.end
			}
			pos = make(map[int32]int32)
		}
		var cuts []uint64
		for m := k; m < k+n; m++ {
			pos[o[m].id] = int32(m)
			cuts = append(cuts, o[m].start, o[m].end)
			if o[m].end == o[m].start {
				cuts = append(cuts, o[m].start+1)
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for c := 0; c+1 < len(cuts); c++ {
			if cuts[c] < o[k].start || cuts[c+1] > end {
				continue
			}
			if id := b.tree.find(ends, cuts[c]); id != nilNode {
				t.add(cuts[c], cuts[c+1], pos[id])
			}
		}
		k += n
	}
	b.finishTree()
}

// reach returns the end of the addresses perf's tree walk can find r at:
// an empty symbol still holds its own address, and one whose end wrapped
// around holds none.
func reach(r rec) uint64 {
	switch {
	case r.end > r.start:
		return r.end
	case r.end == r.start && r.start+1 > r.start:
		return r.start + 1
	}
	return r.start
}

// sortRecs sorts recs by start, keeping the order of equal starts: a
// radix sort, as a comparison sort of a large symbol table costs more
// than reading it, skipping the bytes that all starts share.
func sortRecs(recs []rec) {
	if len(recs) < 256 {
		slices.SortStableFunc(recs, func(x, y rec) int { return cmp.Compare(x.start, y.start) })
		return
	}
	tmp := make([]rec, len(recs))
	src, dst := recs, tmp
	for shift := uint(0); shift < 64; shift += 8 {
		var count [257]int
		for _, r := range src {
			count[int(byte(r.start>>shift))+1]++
		}
		if count[int(byte(src[0].start>>shift))+1] == len(src) {
			continue // all alike
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, r := range src {
			d := byte(r.start >> shift)
			dst[count[d]] = r
			count[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &recs[0] {
		copy(recs, src)
	}
}
