package elfsym

import (
	"bytes"
	"cmp"
	"io"
	"math"
	"slices"
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

	arena    []byte   // names that are not in the file, NUL-terminated
	strtabs  []extent // the file's string tables that names refer to
	modules  []string // kallsyms modules; 0 is the kernel
	moduleOf []uint16 // by id, index in modules; nil for ELF files
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
	name        nameRef
	nameLen     uint32
	bind, typ   uint8
	underscores uint8 // leading, up to 255
	sysAlias    bool  // SyS..., compat_SyS...
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

// keep copies name into the arena.
func (b *builder) keep(name []byte) nameRef {
	ref := nameRef(len(b.arena))
	b.arena = append(append(b.arena, name...), 0)
	return ref
}

// describe tells what perf looks at in a symbol's name, which is at ref.
func describe(name []byte, ref nameRef, bind, typ uint8) symInfo {
	return symInfo{
		name: ref, nameLen: uint32(min(len(name), math.MaxUint32)), bind: bind, typ: typ,
		underscores: leadingUnderscores(name),
		sysAlias:    bytes.HasPrefix(name, []byte("SyS")) || bytes.HasPrefix(name, []byte("compat_SyS")),
	}
}

// add records a new symbol. The symbols added are then inserted by
// insert.
func (b *builder) add(added []rec, info symInfo, start, end uint64) []rec {
	id := int32(len(b.info))
	b.info = append(b.info, info)
	return append(added, rec{start, end, id})
}

// insert puts the symbols added, in the order they were added, into the
// address order, each after the symbols already at its address, as perf
// inserts symbols into its tree.
func (b *builder) insert(added []rec) {
	for _, r := range added {
		b.op(treeOp{r.start, r.id})
	}
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
		if kallsyms && b.module(prev.id) != b.module(o[k].id) {
			prev.end = roundUp(prev.end+4096, 4096)
		} else {
			prev.end = o[k].start
		}
	}
	if n := len(o); n > 0 && o[n-1].end == o[n-1].start {
		o[n-1].end = roundUp(o[n-1].start, 4096) + 4096
	}
}

// module returns the index of symbol id's kallsyms module.
func (b *builder) module(id int32) uint16 {
	if int(id) < len(b.moduleOf) {
		return b.moduleOf[id]
	}
	return 0
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
	if ix.nameLen != iy.nameLen {
		return ix.nameLen > iy.nameLen
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
// overlap are answered now, by the tree; elsewhere a binary search over
// the symbols finds what perf finds.
func (b *builder) table(path string, names io.ReaderAt) *Table {
	o := b.order
	t := &Table{
		path:   path,
		starts: make([]uint64, len(o)),
		syms:   make([]entry, len(o)),
		names:  nameStore{arena: string(b.arena), file: names, strtabs: b.strtabs},
	}
	if len(b.modules) > 1 {
		t.modules = make([]uint16, len(o))
		t.moduleNames = b.modules
	}
	for k, r := range o {
		info := &b.info[r.id]
		t.starts[k], t.syms[k] = r.start, entry{end: r.end, name: info.name}
		if t.modules != nil {
			t.modules[k] = b.module(r.id)
		}
	}
	b.flattenRuns(t)
	return t
}

// flattenRuns works out perf's answers where symbols overlap. A run of
// overlapping symbols is cut at every start and end, and each piece gets
// what perf's tree walk gives.
func (b *builder) flattenRuns(t *Table) {
	o := b.order
	var ends []uint64       // by id, for the tree walk
	var pos map[int32]int32 // id -> index in t.syms
	for k := 0; k < len(o); {
		// The run of symbols from k that overlap one another.
		end, n := reach(o[k].start, o[k].end), 1
		for k+n < len(o) && o[k+n].start < end {
			end = max(end, reach(o[k+n].start, o[k+n].end))
			n++
		}
		if n == 1 {
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
			t.inRun = make([]uint64, (len(o)+63)/64)
		}
		var cuts []uint64
		for m := k; m < k+n; m++ {
			t.inRun[m/64] |= 1 << (m % 64)
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
				t.addRun(cuts[c], cuts[c+1], pos[id])
			}
		}
		k += n
	}
	b.finishTree()
}

// reach returns the end of the addresses perf's tree walk can find a
// symbol at:
// an empty symbol still holds its own address, and one whose end wrapped
// around holds none.
func reach(start, end uint64) uint64 {
	switch {
	case end > start:
		return end
	case end == start && start+1 > start:
		return start + 1
	}
	return start
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
