package report

import (
	"bufio"
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"hash/maphash"
	"html"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/idindex"
)

// HTML writes p to w as one self-contained page holding an interactive
// flame graph: no network, no files beside it, so that it opens from disk
// and can be mailed. Of o, it uses Value and CommRoot, and checks the rest
// as CheckOptions does.
//
// The stacks, their frames' names and command roots are those [Folded]
// writes with the same options, merged into a tree: frames of one name
// under the same parent are one node, children ordered bytewise by name.
// The page embeds the tree as JSON (see htmlData) and draws it on a
// canvas, only the boxes wide enough to see in the rows scrolled into
// view, so that profiles of deep stacks and tens of thousands of frames
// stay responsive.
//
// A profile whose samples carry time slots (contract.SlotLabel) and time
// off the CPU gets a timeline above the flame graph too (timeline.go): a
// row per thread, and the stacks it ran and blocked in under the pointer.
// Other pages have none of its data, styles or script.
func HTML(w io.Writer, p *contract.Profile, o Options) error {
	return writeHTML(w, []string{""}, []*contract.Profile{p}, o)
}

// writeHTML writes one page for the profiles of several stages, named,
// which it offers to choose from.
func writeHTML(w io.Writer, names []string, ps []*contract.Profile, o Options) error {
	if err := CheckOptions(o); err != nil {
		return err
	}
	d, err := flameData(names, ps, o)
	if err != nil {
		return err
	}
	// The page is made around a marker where the data go, and the data
	// written there as they are encoded: a page of deep stacks holds
	// tens of megabytes of them.
	var page bytes.Buffer
	timeline := slices.ContainsFunc(d.Stages, func(s htmlStage) bool { return s.Timeline != nil })
	err = flameTemplate.Execute(&page, struct {
		Title          string
		Data           string
		Script         string
		Timeline       bool
		TimelineScript string
	}{html.EscapeString(d.title()), dataMarker, flameJS, timeline, timelineJS})
	if err != nil {
		return err
	}
	// The last marker: the title before it is the recording's.
	at := bytes.LastIndex(page.Bytes(), []byte(dataMarker))
	bw := bufio.NewWriter(w)
	bw.Write(page.Bytes()[:at])
	if err := d.write(bw); err != nil {
		return err
	}
	bw.Write(page.Bytes()[at+len(dataMarker):])
	return bw.Flush()
}

// flameData makes the page's data of the profiles of stages, named.
func flameData(names []string, ps []*contract.Profile, o Options) (*htmlData, error) {
	b := newFlameBuilder()
	for i, p := range ps {
		m, err := newModel(p, o.Value)
		if err != nil {
			return nil, err
		}
		frames := b.add(names[i], m, o.CommRoot)
		if b.d.Stages[i].Timeline, err = b.timeline(p, m, frames); err != nil {
			return nil, err
		}
	}
	return &b.d, nil
}

const dataMarker = "\x00jitprof data\x00"

// write writes d as json.Marshal encodes it, which escapes <, > and &:
// safe inside a script element. Its large lists are written a number or a
// name at a time.
func (d *htmlData) write(w *bufio.Writer) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	var err error
	value := func(v any) {
		buf.Reset()
		if err == nil {
			err = enc.Encode(v)
		}
		w.Write(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	}
	var num []byte
	list := func(n int, item func(i int)) {
		w.WriteByte('[')
		for i := range n {
			if i > 0 {
				w.WriteByte(',')
			}
			item(i)
		}
		w.WriteByte(']')
	}
	strs := func(s []string) {
		if s == nil {
			w.WriteString("null")
			return
		}
		list(len(s), func(i int) { value(s[i]) })
	}
	ints := func(n int, at func(i int) int64, null bool) {
		if null {
			w.WriteString("null")
			return
		}
		list(n, func(i int) { num = strconv.AppendInt(num[:0], at(i), 10); w.Write(num) })
	}
	w.WriteString(`{"event":`)
	value(d.Event)
	w.WriteString(`,"type":`)
	value(d.Type)
	w.WriteString(`,"unit":`)
	value(d.Unit)
	w.WriteString(`,"names":`)
	strs(d.Names)
	w.WriteString(`,"module":`)
	ints(len(d.Module), func(i int) int64 { return int64(d.Module[i]) }, d.Module == nil)
	w.WriteString(`,"kind":`)
	value(d.Kind)
	w.WriteString(`,"modules":`)
	strs(d.Modules)
	w.WriteString(`,"stages":`)
	if d.Stages == nil {
		w.WriteString("null")
	} else {
		list(len(d.Stages), func(i int) {
			st := &d.Stages[i]
			w.WriteString(`{"name":`)
			value(st.Name)
			w.WriteString(`,"samples":`)
			num = strconv.AppendInt(num[:0], st.Samples, 10)
			w.Write(num)
			w.WriteString(`,"nodes":`)
			if st.Nodes == nil {
				w.WriteString("null")
			} else {
				st.Nodes.writeNodes(w)
			}
			if st.Timeline != nil {
				w.WriteString(`,"timeline":`)
				value(st.Timeline)
			}
			w.WriteByte('}')
		})
	}
	w.WriteByte('}')
	return err
}

// htmlData is the page's profile: a table of frames and a tree of nodes
// per stage. Frames are parallel arrays: Names[i] is frame i's name (as
// in folded stacks), Modules[Module[i]] its module (-1: none), and
// Kind[i] one letter: 'j' jitted code, 'n' native, 'k' the kernel (named
// or not), 'u' an unresolved address in user space (named after its
// module), 'c' a command (with CommRoot) and 'r' the root, "all". A node is three numbers in Nodes,
// in preorder: its frame, its value (its stacks' weight, itself and
// below) and its number of children.
type htmlData struct {
	Event   string      `json:"event"` // recorded event, e.g. "cpu-clock"
	Type    string      `json:"type"`  // what values weigh: "samples" or the event
	Unit    string      `json:"unit"`  // their unit: "count", "nanoseconds"…
	Names   []string    `json:"names"`
	Module  []int32     `json:"module"`
	Kind    string      `json:"kind"`
	Modules []string    `json:"modules"`
	Stages  []htmlStage `json:"stages"`
}

type htmlStage struct {
	Name    string     `json:"name"`    // "" without stages
	Samples int64      `json:"samples"` // number of samples
	Nodes   *flameTree `json:"nodes"`   // the root's value is the total
	// Timeline is there when the profile's samples have time slots.
	Timeline *htmlTimeline `json:"timeline,omitempty"`
}

func (d *htmlData) title() string {
	if d.Event == "" {
		return "jitprof flame graph"
	}
	return "jitprof flame graph: " + d.Event
}

// A flameBuilder merges the stacks of models into trees, numbering the
// frames and modules of all of them in one table. A frame is what the page
// shows of it: its name, module and kind (frames of one name in different
// modules are distinct, though a node may merge them), found again through
// an index of their numbers in the table: a Go map of them cost about 50
// bytes a frame, 25 MB of a profile of 500,000 functions.
type flameBuilder struct {
	d       htmlData
	frames  idindex.Index // of the page's frames, their number + 1
	seed    maphash.Seed
	modules map[string]int32
	mixed   map[[2]int32]int32 // by the frames merge merged: what it made of them
	kinds   []byte
}

func newFlameBuilder() *flameBuilder {
	return &flameBuilder{
		seed:    maphash.MakeSeed(),
		modules: make(map[string]int32),
		mixed:   make(map[[2]int32]int32),
	}
}

// hash returns the hash of a frame's name, module and kind.
func (b *flameBuilder) hash(name string, module int32, kind byte) uint64 {
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(name)
	h.Write([]byte{byte(module), byte(module >> 8), byte(module >> 16), byte(module >> 24), kind})
	return h.Sum64()
}

func (b *flameBuilder) frame(name, module string, kind byte) int32 {
	mod := int32(-1)
	if module != "" {
		if mod = intern(b.modules, module); int(mod) == len(b.d.Modules) {
			b.d.Modules = append(b.d.Modules, module)
		}
	}
	h := b.hash(name, mod, kind)
	id, slot := b.frames.Find(h, func(id uint32) bool {
		i := id - 1
		return b.d.Module[i] == mod && b.kinds[i] == kind && b.d.Names[i] == name
	})
	if id != 0 {
		return int32(id - 1)
	}
	i := int32(len(b.d.Names))
	b.d.Names = append(b.d.Names, name)
	b.d.Module = append(b.d.Module, mod)
	b.kinds = append(b.kinds, kind)
	b.frames.Add(slot, uint32(i+1), h, func(id uint32) uint64 {
		return b.hash(b.d.Names[id-1], b.d.Module[id-1], b.kinds[id-1])
	})
	return i
}

// merge returns the frame a node shows that merges frames a and f, of one
// name: a's, with the modules of both, so that hovering over a function
// that two processes' dumps both hold names both files.
func (b *flameBuilder) merge(a, f int32) int32 {
	k := [2]int32{a, f}
	if m, ok := b.mixed[k]; ok {
		return m
	}
	mods := strings.Split(b.d.Modules[b.d.Module[a]], ", ")
	if mf := b.d.Modules[b.d.Module[f]]; !slices.Contains(mods, mf) {
		mods = append(mods, mf)
		slices.Sort(mods)
	}
	m := b.frame(b.d.Names[a], strings.Join(mods, ", "), b.kinds[a])
	b.mixed[k] = m
	return m
}

// add adds the tree of m's stacks as a stage, and returns the page's
// frame of each of m's frames.
//
// Sorted by their names from the root, stacks that share a prefix are
// neighbours, and their tree comes out in preorder, children sorted: each
// stack adds the nodes of what it does not share with the one before.
func (b *flameBuilder) add(stage string, m *model, commRoot bool) []int32 {
	if b.d.Event == "" {
		b.d.Event, b.d.Type, b.d.Unit = m.event, m.typ.Type, m.typ.Unit
	}
	// Sized ahead: large slices and maps grown by adding allocate several
	// times their size.
	n := len(m.frames) + len(m.comms) + 1
	b.d.Names, b.d.Module, b.kinds = slices.Grow(b.d.Names, n), slices.Grow(b.d.Module, n), slices.Grow(b.kinds, n)
	if len(b.d.Names) == 0 {
		b.frames = idindex.New(n)
	}
	frames := make([]int32, len(m.frames))
	for i := range m.frames {
		f := &m.frames[i]
		// The kernel's frames are the kernel's, named or not, as the
		// text report counts them to [kernel.kallsyms]: a recording read
		// on another kernel has none named.
		kind := byte('n')
		switch {
		case f.kernel:
			kind = 'k'
		case !f.resolved():
			kind = 'u'
		case f.jit:
			kind = 'j'
		}
		frames[i] = b.frame(m.foldedName(f), m.module(f), kind)
	}
	comms := make([]int32, len(m.comms))
	for i, c := range m.comms {
		comms[i] = b.frame(foldedComm(c), "", 'c')
	}
	// rank orders the frames by name; frames of one name rank the same,
	// which merges them.
	used := slices.Concat(frames, comms)
	slices.SortFunc(used, func(x, y int32) int { return strings.Compare(b.d.Names[x], b.d.Names[y]) })
	rank := make([]int32, len(b.d.Names))
	for i, f := range used {
		rank[f] = int32(i)
		if i > 0 && b.d.Names[f] == b.d.Names[used[i-1]] {
			rank[f] = rank[used[i-1]]
		}
	}

	t := &flameTree{m: m, frames: frames, rank: rank}
	if commRoot {
		t.comms = comms
	}
	if m.frameOf != nil {
		t.pageOf = make([]int32, len(m.frameOf))
		for l, f := range m.frameOf {
			t.pageOf[l] = frames[f]
		}
	}
	// The paths are sorted by the ranks of their frames from the root, a
	// shorter one first where one is the start of the other. Each is
	// sorted with the ranks of its first frames beside it, which decide
	// most comparisons: looking a path's frames up goes through its
	// sample, its stack and each frame's, several cache misses, which a
	// million samples' sort made 2.3 s of a 7 s report.
	type sortKey struct {
		sample int32
		first  [3]int32 // ranks; -1 past the path's end
	}
	var count int64
	keys := make([]sortKey, 0, len(m.samples))
	for i := range m.samples {
		if s := &m.samples[i]; s.value != 0 {
			count += s.count
			k := sortKey{sample: int32(i)}
			p := t.path(int32(i))
			for d := range k.first {
				k.first[d] = -1
				if d < p.len() {
					k.first[d] = rank[p.at(d)]
				}
			}
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y sortKey) int {
		for d := range x.first {
			if c := cmp.Compare(x.first[d], y.first[d]); c != 0 || x.first[d] < 0 {
				return c
			}
		}
		px, py := t.path(x.sample), t.path(y.sample)
		for d := len(x.first); d < min(px.len(), py.len()); d++ {
			if c := cmp.Compare(rank[px.at(d)], rank[py.at(d)]); c != 0 {
				return c
			}
		}
		return cmp.Compare(px.len(), py.len())
	})
	t.paths = make([]int32, len(keys))
	for k, key := range keys {
		t.paths[k] = key.sample
	}
	t.root = b.frame("all", "", 'r')
	t.shared = make([]int32, len(t.paths))
	// The frames a node merges are named now, before the page's frames
	// are written: the node's frame, as merged so far, at each depth of
	// the path before, and the path and depth that made the node.
	type openNode struct {
		frame      int32
		path, from int32
	}
	var open []openNode
	for k := range t.paths {
		if k > 0 {
			t.shared[k] = t.sharedWith(k)
		}
		open = open[:t.shared[k]]
		path := t.path(t.paths[k])
		for d := range path.len() {
			f := path.at(d)
			if d >= int(t.shared[k]) {
				open = append(open, openNode{f, int32(k), int32(d)})
				continue
			}
			if n := &open[d]; n.frame != f {
				n.frame = b.merge(n.frame, f)
				if t.merged == nil {
					t.merged = make(map[[2]int32]int32)
				}
				t.merged[[2]int32{n.path, n.from}] = n.frame
			}
		}
	}
	b.d.Stages = append(b.d.Stages, htmlStage{Name: stage, Samples: count, Nodes: t})
	b.d.Kind = string(b.kinds)
	return frames
}

// A flameTree is the tree of a stage's stacks, written node by node as the
// page is (writeNodes) rather than made: a node is three numbers, and
// 1,000 samples of 8,000 distinct frames make 8 million of them (192 MB
// as an array of the page's numbers). Its paths are the samples with a
// value, sorted by their frames' names from the root: stacks that share a
// prefix are neighbours, and their tree comes out in preorder, children
// sorted, each path adding the nodes of what it does not share with the
// one before.
type flameTree struct {
	m      *model
	frames []int32 // the page's frame of each of m's frames
	// pageOf is the page's frame of each location, when m sees its
	// stacks through their locations (model.frameOf): one lookup a frame,
	// not two, in the three walks of every frame.
	pageOf []int32
	comms  []int32 // the page's frame of each command, with CommRoot; else nil
	rank   []int32 // of the page's frames, by name: frames of one name rank the same
	root   int32   // the page's frame "all"
	paths  []int32 // in m.samples
	shared []int32 // how many frames from the root path k shares with path k-1
	// merged holds the frame of each node that merged frames of one name
	// but different modules, by the path and depth that made it.
	merged map[[2]int32]int32
}

// len returns the number of frames of the path of sample i.
func (t *flameTree) len(i int32) int {
	n := int(t.m.samples[i].depth)
	if t.comms != nil {
		n++
	}
	return n
}

// A flamePath is the page's frames of a sample from the root: its
// command's with CommRoot, then its stack's.
type flamePath struct {
	t     *flameTree
	n     int   // frames, t.len's
	comm  int32 // the page's frame of the command; -1 without CommRoot
	stack frameList
}

func (t *flameTree) path(i int32) flamePath {
	s := &t.m.samples[i]
	p := flamePath{t: t, n: t.len(i), comm: -1, stack: t.m.stack(s)}
	if p.stack.frameOf != nil {
		p.stack.frameOf = t.pageOf // its frames are the page's
	}
	if t.comms != nil {
		p.comm = t.comms[s.comm]
	}
	return p
}

func (p *flamePath) len() int { return p.n }

// at returns the page's frame at depth d from the root.
func (p *flamePath) at(d int) int32 {
	if p.comm >= 0 {
		if d == 0 {
			return p.comm
		}
		d--
	}
	f := p.stack.at(p.stack.len() - 1 - d)
	if p.stack.frameOf == nil {
		f = p.t.frames[f]
	}
	return f
}

// sharedWith returns how many frames from the root path k shares with
// path k-1: frames that rank the same.
func (t *flameTree) sharedWith(k int) int32 {
	x, y := t.path(t.paths[k-1]), t.path(t.paths[k])
	n := min(x.len(), y.len())
	d := 0
	for d < n && t.rank[x.at(d)] == t.rank[y.at(d)] {
		d++
	}
	return int32(d)
}

// writeNodes writes the tree's nodes in preorder, three numbers each: its
// frame, its value (its stacks' weight, itself and below) and its number
// of children. A node's paths follow the one that made it while they share
// more than its depth; a path among them that shares exactly one frame
// more than that starts another of its children.
func (t *flameTree) writeNodes(w *bufio.Writer) {
	var num []byte
	node := func(frame int32, value int64, children int) {
		for i, v := range [3]int64{int64(frame), value, int64(children)} {
			if i > 0 {
				w.WriteByte(',')
			}
			num = strconv.AppendInt(num[:0], v, 10)
			w.Write(num)
		}
	}
	var total int64
	roots := 0
	for k, i := range t.paths {
		total += t.m.samples[i].value
		if k == 0 || t.shared[k] == 0 {
			roots++
		}
	}
	w.WriteByte('[')
	node(t.root, total, roots)
	for k, i := range t.paths {
		path := t.path(i)
		n := path.len()
		for d := int(t.shared[k]); d < n; d++ {
			frame, ok := t.merged[[2]int32{int32(k), int32(d)}]
			if !ok {
				frame = path.at(d)
			}
			value, children := t.m.samples[i].value, 0
			if n > d+1 {
				children++
			}
			for j := k + 1; j < len(t.paths) && int(t.shared[j]) > d; j++ {
				value += t.m.samples[t.paths[j]].value
				if int(t.shared[j]) == d+1 && t.len(t.paths[j]) > d+1 {
					children++
				}
			}
			w.WriteByte(',')
			node(frame, value, children)
		}
	}
	w.WriteByte(']')
}

// MarshalJSON encodes the tree's nodes as writeNodes writes them, so that
// htmlData encodes as the page holds it.
func (t *flameTree) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	t.writeNodes(w)
	err := w.Flush()
	return b.Bytes(), err
}

//go:embed flame.html.tmpl
var flameHTML string

//go:embed flame.js
var flameJS string

var flameTemplate = template.Must(template.New("flame").Parse(flameHTML))
