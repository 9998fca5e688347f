package report

import (
	"cmp"
	"iter"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/contract"
)

// A key identifies an entry: its high half numbers the command and pid of
// a sample, its low half the symbol and module of a frame, each as far as
// sorted by, so that entries differing in what is not sorted by merge.
type key uint64

type entry struct {
	frame    int32 // first frame seen in the entry: names its symbol, module and file
	comm     int32 // first command seen, shown next to the pid
	pid      int64
	samples  int64 // samples whose leaf is in the entry
	self     int64
	children int64
	seen     int32 // 1 + index of the last sample counted in children
	root     int32 // root node of the entry's call graph, or -1
	listed   int32 // while building call graphs, 1 + its index in table.entries; 0 below the percent limit
}

// A table is the aggregation that Text and JSON print.
type table struct {
	*model
	keys      []sortKey
	by        [len(sortKeyNames)]bool
	children  bool
	outward   bool     // call graphs go from the entry to its callers (callee order)
	min       float64  // Options.MinPercent
	graphMin  float64  // Options.GraphMinPercent
	sampleKey []uint32 // by sample: the high half of its keys
	frameKey  []int32  // by frame: the low half of its keys
	// Entries are made in blocks, which spares a large slice copied as it
	// grows, and looked up by key, or by the low half alone when all
	// samples share the high half, as one process's do: 1 + their number.
	blocks  [][]entry
	made    int32
	index   map[key]int32
	byFrame []int32
	entries []*entry // sorted, without those below min
	graph   graph
}

func aggregate(p *contract.Profile, o Options) (*table, error) {
	keys, err := o.check()
	if err != nil {
		return nil, err
	}
	m, err := newModel(p, o.Value)
	if err != nil {
		return nil, err
	}
	t := &table{model: m, keys: keys, children: o.Children, outward: o.outward(), min: o.MinPercent, graphMin: o.GraphMinPercent}
	for _, k := range keys {
		t.by[k] = true
	}

	// Numbering the parts of keys once per sample and once per frame
	// leaves a lookup of an integer per frame of a stack.
	type process struct {
		comm int32
		pid  int64
	}
	processes := make(map[process]int32)
	t.sampleKey = make([]uint32, len(m.samples))
	for i := range m.samples {
		var k process
		if t.by[byComm] {
			k.comm = m.samples[i].comm
		}
		if t.by[byPID] {
			k.pid = m.samples[i].pid
		}
		t.sampleKey[i] = uint32(intern(processes, k))
	}
	// Frames are distinct by symbol and module; sym and mod number
	// either alone.
	t.frameKey = make([]int32, len(m.frames))
	for i := range m.frames {
		switch f := &m.frames[i]; {
		case t.by[bySymbol] && t.by[byModule]:
			t.frameKey[i] = int32(i)
		case t.by[bySymbol]:
			t.frameKey[i] = f.sym
		case t.by[byModule]:
			t.frameKey[i] = f.mod
		}
	}
	if len(processes) <= 1 {
		t.byFrame = make([]int32, len(m.frames))
	} else {
		t.index = make(map[key]int32)
	}

	for i := range m.samples {
		s := &m.samples[i]
		stack := m.stack(s)
		e := t.entry(i, stack.at(0))
		e.samples += s.count
		e.self += s.value
		if !o.Children {
			continue
		}
		for k := range stack.len() {
			if e := t.entry(i, stack.at(k)); e.seen != int32(i+1) {
				e.seen = int32(i + 1)
				e.children += s.value
			}
		}
	}

	listed := 0
	for e := range t.all() {
		if !t.hidden(t.weight(e)) {
			listed++
		}
	}
	t.entries = make([]*entry, 0, listed)
	for e := range t.all() {
		if !t.hidden(t.weight(e)) {
			t.entries = append(t.entries, e)
		}
	}
	t.sort()

	if o.CallGraph {
		t.callGraphs()
	}
	return t, nil
}

// entry returns the entry that frame f of sample i belongs to, making it
// if it is new.
func (t *table) entry(i int, f int32) *entry {
	if t.byFrame != nil {
		slot := &t.byFrame[t.frameKey[f]]
		if *slot == 0 {
			*slot = t.newEntry(i, f)
		}
		return t.at(*slot)
	}
	k := key(t.sampleKey[i])<<32 | key(uint32(t.frameKey[f]))
	n, ok := t.index[k]
	if !ok {
		n = t.newEntry(i, f)
		t.index[k] = n
	}
	return t.at(n)
}

const blockSize = 1024

// newEntry makes the entry of frame f of sample i and returns its number.
func (t *table) newEntry(i int, f int32) int32 {
	if t.made%blockSize == 0 {
		t.blocks = append(t.blocks, make([]entry, 0, blockSize))
	}
	b := &t.blocks[len(t.blocks)-1]
	s := &t.samples[i]
	*b = append(*b, entry{frame: f, comm: s.comm, pid: s.pid, root: -1})
	t.made++
	return t.made
}

// at returns entry number n.
func (t *table) at(n int32) *entry {
	return &t.blocks[(n-1)/blockSize][(n-1)%blockSize]
}

// all yields every entry.
func (t *table) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, b := range t.blocks {
			for i := range b {
				if !yield(&b[i]) {
					return
				}
			}
		}
	}
}

// weight returns the value entries are sorted and limited by.
func (t *table) weight(e *entry) int64 {
	if t.children {
		return e.children
	}
	return e.self
}

func (t *table) hidden(v int64) bool {
	return percent(v, t.total) < t.min
}

func (t *table) hiddenBranch(v int64) bool {
	return percent(v, t.total) < t.graphMin
}

// sort orders entries by decreasing weight, then by their keys in the
// order given, so that output is stable. Commands and modules are few:
// ranking them first leaves a comparison of strings only for symbols.
func (t *table) sort() {
	commRank := ranks(t.comms)
	modRank := ranks(t.modules)
	slices.SortFunc(t.entries, func(a, b *entry) int {
		if c := cmp.Compare(t.weight(b), t.weight(a)); c != 0 {
			return c
		}
		for _, k := range t.keys {
			var c int
			switch k {
			case byComm:
				c = cmp.Compare(commRank[a.comm], commRank[b.comm])
			case byPID:
				c = cmp.Compare(a.pid, b.pid)
			case byModule:
				c = cmp.Compare(modRank[t.frames[a.frame].mod], modRank[t.frames[b.frame].mod])
			case bySymbol:
				if a.frame != b.frame {
					c = strings.Compare(t.name(&t.frames[a.frame]), t.name(&t.frames[b.frame]))
				}
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
}

// ranks returns the rank of each of names in their bytewise order; equal
// names rank the same.
func ranks(names []string) []int32 {
	order := make([]int32, len(names))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(names[a], names[b]) })
	rank := make([]int32, len(names))
	for i, n := range order {
		rank[n] = int32(i)
		if i > 0 && names[n] == names[order[i-1]] {
			rank[n] = rank[order[i-1]]
		}
	}
	return rank
}

// callGraphs builds the call graph of each listed entry. It takes a second
// pass over the samples so that entries cut by the percent limit cost
// nothing.
func (t *table) callGraphs() {
	for i, e := range t.entries {
		e.listed = int32(i + 1)
	}
	for e := range t.all() {
		e.seen = 0
	}
	refs := make([][]ref, len(t.entries)) // by listed entry, its samples
	for i := range t.samples {
		stack := t.stack(&t.samples[i])
		if !t.children {
			// A stack walked from its leaf out, or from its root in.
			pos := 0
			if !t.outward {
				pos = stack.len() - 1
			}
			if e := t.entry(i, stack.at(0)); e.listed > 0 {
				refs[e.listed-1] = append(refs[e.listed-1], ref{int32(i), int32(pos)})
			}
			continue
		}
		// The first frame of an entry met going root first is its
		// outermost, whose callees include those of any recursive call;
		// going leaf first, its innermost, whose callers include the
		// recursion's.
		for k := range stack.len() {
			j := k
			if !t.outward {
				j = stack.len() - 1 - k
			}
			if e := t.entry(i, stack.at(j)); e.seen != int32(i+1) {
				e.seen = int32(i + 1)
				if e.listed > 0 {
					refs[e.listed-1] = append(refs[e.listed-1], ref{int32(i), int32(j)})
				}
			}
		}
	}
	b := treeBuilder{t: t, step: 1, slots: make([]int, len(t.frames))}
	if !t.outward {
		b.step = -1
	}
	for i, e := range t.entries {
		e.root = int32(len(t.graph.nodes))
		t.graph.nodes = append(t.graph.nodes, node{frame: -1, value: t.weight(e)})
		b.expand(e.root, refs[i])
		refs[i] = nil
	}
}

// A ref is a sample on its way down a call graph: pos indexes the frame
// of its stack that comes next.
type ref struct {
	sample int32
	pos    int32
}

// A treeBuilder grows trees from the stacks of an entry's samples. Callers
// trees walk stacks from the leaf (step 1), callees trees toward it (-1).
type treeBuilder struct {
	t       *table
	step    int32
	slots   []int // by frame, at the node being expanded; 0 elsewhere
	scratch []ref
}

// A group is the samples through a node's child.
type group struct {
	frame int32
	value int64
	refs  int
}

// expand adds to node n the children for the refs' next frames that are
// above the percent limit, and their subtrees. Splitting refs by frame
// level by level stops at the first hidden node, so that large profiles
// cost what their visible trees do.
func (b *treeBuilder) expand(n int32, refs []ref) {
	var groups []group
	for _, r := range refs {
		f, ok := b.next(r)
		if !ok {
			continue
		}
		k := b.slots[f]
		if k == 0 {
			groups = append(groups, group{frame: f})
			k = len(groups)
			b.slots[f] = k
		}
		groups[k-1].value += b.t.samples[r.sample].value
		groups[k-1].refs++
	}
	for _, gr := range groups {
		b.slots[gr.frame] = 0
	}
	groups = slices.DeleteFunc(groups, func(gr group) bool { return b.t.hiddenBranch(gr.value) })
	if len(groups) == 0 {
		return
	}
	slices.SortFunc(groups, func(x, y group) int {
		if c := cmp.Compare(y.value, x.value); c != 0 {
			return c
		}
		fx, fy := &b.t.frames[x.frame], &b.t.frames[y.frame]
		return cmp.Or(cmp.Compare(b.t.name(fx), b.t.name(fy)), cmp.Compare(b.t.module(fx), b.t.module(fy)))
	})

	// Order the refs of visible children by child, moving each on to its
	// next frame, and drop the others. A slot holds 1 + where the next
	// ref of its frame goes.
	end := 0
	for _, gr := range groups {
		b.slots[gr.frame] = end + 1
		end += gr.refs
	}
	b.scratch = slices.Grow(b.scratch[:0], end)[:end]
	for _, r := range refs {
		if f, ok := b.next(r); ok && b.slots[f] > 0 {
			b.scratch[b.slots[f]-1] = ref{r.sample, r.pos + b.step}
			b.slots[f]++
		}
	}
	refs = refs[:copy(refs, b.scratch)]
	for _, gr := range groups {
		b.slots[gr.frame] = 0
	}

	// Children are adjacent, which spares a list of them per node.
	g := &b.t.graph
	first := int32(len(g.nodes))
	for _, gr := range groups {
		g.nodes = append(g.nodes, node{frame: gr.frame, value: gr.value})
	}
	g.nodes[n].first = first
	g.nodes[n].kids = int32(len(groups))
	for i, gr := range groups {
		b.expand(first+int32(i), refs[:gr.refs])
		refs = refs[gr.refs:]
	}
}

// next returns the frame that r comes to next, unless its stack ends.
func (b *treeBuilder) next(r ref) (int32, bool) {
	stack := b.t.stack(&b.t.samples[r.sample])
	if r.pos < 0 || int(r.pos) >= stack.len() {
		return 0, false
	}
	return stack.at(int(r.pos)), true
}

// A graph holds the call graphs of all entries as trees of frames. The root
// of a tree stands for its entry and has no frame.
type graph struct {
	nodes []node
}

type node struct {
	frame int32
	first int32 // children, above the percent limit and by decreasing
	kids  int32 // value, are nodes[first:first+kids]
	value int64
}

// children returns the bounds of the children of node n.
func (g *graph) children(n int32) (first, end int32) {
	return g.nodes[n].first, g.nodes[n].first + g.nodes[n].kids
}
