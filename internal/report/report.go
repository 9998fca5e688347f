// Package report renders a profile built from a perf recording the way
// jitprof report prints it: a perf-report-like table ([Text]), the same
// table as JSON for scripts ([JSON]), folded stacks for flame graphs
// ([Folded]), and a page with an interactive flame graph ([HTML]).
//
// The profile follows jitprof's conventions: sample value 0 counts samples
// and value 1, when present, is the event's period; locations are leaf first;
// a location's lines are frames, innermost first, as pprof models inlining
// (the methods a JIT inlined, then the function that holds the code); a
// location without a line is an unresolved address; Mapping.File names the module; each sample carries the labels
// "comm" (string) and "pid" (numeric). A sample without locations counts as
// one unresolved frame in an unknown module, a sample without labels as
// command "[unknown]" and pid -1.
//
// # Entries
//
// Text and JSON group samples into entries by the tuple of the sort keys in
// [Options.Sort]: "comm" (command name), "pid" (process id, shown with the
// command name as perf does), "module" (base name of the mapping's file, like
// perf's "Shared Object" column) and "symbol" (demangled name). perf's names
// "dso" and "sym" are accepted too. Unresolved addresses are grouped per module
// under the symbol "[unknown]", where perf would list each address. An entry
// of a pid shows the first command seen for it.
//
// An entry's self value sums the samples whose leaf belongs to it. With
// [Options.Children], as with perf report --children, an entry's children
// value sums the samples with a frame anywhere in their stack that belongs to
// the entry, counted once per sample however often recursion repeats it.
//
// # Call graphs
//
// With [Options.CallGraph], each entry is followed by a tree of the stacks
// that contributed to it, like perf report -g graph,0.5: percentages are of
// the whole profile, and branches below [Options.MinPercent] are hidden.
// [Options.Order] chooses the direction, in perf report's words; the default
// is perf's without -g. In self mode, callee order starts the tree at the
// sampled function and descends into its callers (the default, perf
// --no-children); caller order starts it at the stacks' outermost callers
// and descends to the sampled function (perf -g caller). In children mode,
// caller order starts the tree at the entry's outermost frame in each stack
// and descends into its callees, so it sums to the children value (the
// default; perf would also print the chains of callers that reach the entry,
// which this leaves to self mode); callee order starts it at the entry's
// innermost frame and descends into its callers.
//
// In text, an unresolved frame in a call graph reads "[unknown] (module)",
// after perf script's "symbol (module)".
//
// # JSON schema
//
// JSON writes one object:
//
//	{
//	  "event":   string,   // recorded event, e.g. "cpu-clock" (sample type 1)
//	  "type":    string,   // sample type the report weighs by ([Options.Value])
//	  "unit":    string,   // its unit, e.g. "count" or "nanoseconds"
//	  "samples": int,      // number of samples in the profile
//	  "total":   int,      // sum of the weighing value over all samples
//	  "sort":    [string], // sort keys, canonical names ("comm", "pid", "module", "symbol")
//	  "mode":    string,   // "self", or "children" with Options.Children
//	  "entries": [entry]   // sorted as in text, after the percent limit; never null
//	}
//
// where an entry is
//
//	{
//	  "comm":     string,  // present when sorting by comm or pid; "[unknown]" when unknown
//	  "pid":      int,     // present when sorting by pid; -1 when unknown
//	  "module":   string,  // present when sorting by module
//	  "symbol":   string,  // present when sorting by symbol; "[unknown]" when unresolved
//	  "file":     string,  // source file of the symbol, when sorting by symbol and known
//	  "samples":  int,     // samples whose leaf is in the entry
//	  "self":     int,     // their weighing value
//	  "children": int,     // children mode only: value of samples through the entry
//	  "callers":  [node],  // with Options.CallGraph, callee order: who called the entry
//	  "callees":  [node]   // with Options.CallGraph, caller order: what the entry called
//	                       // (children mode), or the stacks' outermost callers (self mode)
//	}
//
// and a node of a call graph is
//
//	{
//	  "symbol":  string,   // "[unknown]" when unresolved
//	  "module":  string,
//	  "file":    string,   // when known
//	  "value":   int,      // weighing value of the stacks through this node
//	  "callers": [node],   // next frames outward (callee order)
//	  "callees": [node]    // next frames inward (caller order)
//	}
//
// Nodes are sorted by decreasing value; hidden branches and empty lists are
// omitted. Field order is as shown, and fields are only ever added.
//
// # Folded stacks
//
// Folded writes one line per distinct stack, root first, frames separated by
// ";" and followed by a space and the stack's value, sorted bytewise: the
// input of flamegraph.pl and speedscope. Like stackcollapse-perf.pl, it names
// an unresolved frame after its module in brackets ("[libc.so.6]"; modules
// already in brackets such as "[vdso]" stay as they are), replaces ";" in
// names with ":", and with [Options.CommRoot] starts each stack with the
// command name, spaces replaced by "_". Line breaks in names become spaces.
//
//	sh;main;[libc.so.6];entry_SYSCALL_64;do_syscall_64 6
//	sh;main;evaltree;strlen 30
package report

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/jitprof/jitprof/internal/contract"
)

// Options selects what a report shows.
type Options struct {
	// Sort lists the keys that group samples into entries, in the order the
	// columns appear and ties are broken: "comm", "pid", "module" ("dso") and
	// "symbol" ("sym"). Empty means comm, module, symbol.
	Sort []string

	// Children adds perf's Children column and sorts by it.
	Children bool

	// CallGraph prints each entry's call graph.
	CallGraph bool

	// Order is the order of a call graph's frames: OrderCallee walks
	// stacks from the entry out to its callers, OrderCaller from the
	// outermost caller in. Empty means perf report's order without -g:
	// callee without Children, caller with it.
	Order CallOrder

	// MinPercent hides entries whose share of the total is below it, like
	// perf report --percent-limit. Zero shows all.
	MinPercent float64

	// GraphMinPercent hides call graph branches whose share of the total
	// is below it; perf's default is DefaultMinPercent. Zero shows all.
	GraphMinPercent float64

	// Value is the index of the sample value that weighs entries and stacks
	// and that percentages are of: 0 counts samples, 1 sums the event's
	// period. Text's Samples column counts samples either way.
	Value int

	// CommRoot makes Folded start each stack with the command name, as
	// stackcollapse-perf.pl does by default.
	CommRoot bool

	// Files holds copies of the recording's files (an archive's), or nil:
	// gprof's symbol file reads the functions' extents from them.
	Files *contract.Files
}

// CheckOptions reports the errors in o that do not depend on the profile,
// so that a command can reject them before reading one.
func CheckOptions(o Options) error {
	_, err := o.check()
	return err
}

// check returns the sort keys of o, or the error CheckOptions reports.
func (o Options) check() ([]sortKey, error) {
	keys, err := parseSort(o.Sort)
	if err != nil {
		return nil, err
	}
	if o.MinPercent < 0 || o.GraphMinPercent < 0 {
		return nil, fmt.Errorf("report: negative percent limit %g", min(o.MinPercent, o.GraphMinPercent))
	}
	if o.Value < 0 {
		return nil, fmt.Errorf("report: negative value index %d", o.Value)
	}
	if _, err := ParseCallOrder(string(o.Order)); err != nil && o.Order != "" {
		return nil, err
	}
	return keys, nil
}

// CallOrder is the order of a call graph's frames, in perf report's words.
type CallOrder string

const (
	OrderCaller CallOrder = "caller" // from the outermost caller in
	OrderCallee CallOrder = "callee" // from the entry out to its callers
)

// ParseCallOrder returns the order named s.
func ParseCallOrder(s string) (CallOrder, error) {
	switch o := CallOrder(s); o {
	case OrderCaller, OrderCallee:
		return o, nil
	}
	return "", fmt.Errorf("--call-graph %q: want caller or callee", s)
}

// outward tells whether call graphs go from entries out to their callers.
func (o Options) outward() bool {
	return o.Order == OrderCallee || (o.Order == "" && !o.Children)
}

// DefaultMinPercent is the threshold below which perf report hides call
// graph branches when --percent-limit is not given.
const DefaultMinPercent = 0.5

// unknown stands for a symbol, module or command that the profile lacks.
const unknown = "[unknown]"

type sortKey int

const (
	byComm sortKey = iota
	byPID
	byModule
	bySymbol
)

var sortKeyNames = [...]string{byComm: "comm", byPID: "pid", byModule: "module", bySymbol: "symbol"}

var sortKeys = map[string]sortKey{
	"comm":   byComm,
	"pid":    byPID,
	"module": byModule,
	"dso":    byModule,
	"symbol": bySymbol,
	"sym":    bySymbol,
}

// parseSort resolves aliases and drops repeated keys, which would only
// repeat a column.
func parseSort(names []string) ([]sortKey, error) {
	if len(names) == 0 {
		return []sortKey{byComm, byModule, bySymbol}, nil
	}
	var keys []sortKey
	for _, name := range names {
		k, ok := sortKeys[strings.TrimSpace(name)]
		if !ok {
			return nil, fmt.Errorf("report: unknown sort key %q (want comm, pid, module or symbol)", name)
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// A frame is a function, or an unresolved address, within a module. The
// profile has a location per address; reports only distinguish frames.
// Names are the profile's string numbers: a frame of a million is 24
// bytes, and frames are found by name in a slice, not a map of strings.
type frame struct {
	name   uint32 // demangled symbol, or unknownName
	file   uint32 // source file; 0, the empty string, when not known
	sym    int32  // the first frame of the name: frames of the same name share it
	mod    int32  // module, index in model.modules
	next   int32  // the next frame of its name, in another module, + 1; 0 for none
	kernel bool   // the kernel's code: its mapping is contract.KernelFile
	jit    bool   // jitted code: contract.IsJIT
}

// unknownName is the name of frames without a symbol, and of those named
// unknown: a number no string of a profile has.
const unknownName = math.MaxUint32

func (f *frame) resolved() bool { return f.name != unknownName }

// A sample is a profile sample reduced to what reports use.
type sample struct {
	start int   // of its stack in model.stacks; with model.frameOf, its place in the profile's samples
	depth int32 // of its stack; never 0
	comm  int32 // index in model.comms
	pid   int64
	count int64 // value 0: the number of samples merged into this one
	value int64 // the value selected by Options.Value
}

// A model is a profile with its locations resolved to frames and its labels
// decoded, so that reports look nothing up in the profile per frame.
type model struct {
	strings []string // the profile's, which frames name by number
	event   string
	typ     contract.ValueType
	period  bool // whether the profile has an event period (value 1)
	frames  []frame
	stacks  []int32 // the samples' stacks, each frames leaf first, one after the other
	// frameOf, when every location is one frame and every sample has one,
	// is the frame of each location, by its number: the samples' stacks
	// are then the profile's, seen through it, rather than a copy (4 bytes
	// a frame: 32 MB of 1,000 samples of 8,000 frames).
	frameOf []int32
	profile *contract.Profile // whose stacks those are
	modules []string          // base names of the mappings' files, or unknown
	comms   []string
	samples []sample
	count   int64 // number of samples
	total   int64 // sum of the selected value
	periods int64 // sum of the periods
}

// stack returns the frames of s, leaf first.
func (m *model) stack(s *sample) frameList {
	if m.frameOf != nil {
		return frameList{locations: m.profile.Stack(&m.profile.Samples[s.start]), frameOf: m.frameOf}
	}
	end := s.start + int(s.depth)
	return frameList{frames: m.stacks[s.start:end:end]}
}

// A frameList is the frames of a stack, leaf first: the model's own, or
// the profile's locations seen through their frames (model.frameOf).
type frameList struct {
	frames    []int32
	locations []uint32
	frameOf   []int32 // nil with frames
}

func (l frameList) len() int {
	if l.frameOf != nil {
		return len(l.locations)
	}
	return len(l.frames)
}

// at returns frame i, from the leaf.
func (l frameList) at(i int) int32 {
	if l.frameOf != nil {
		return l.frameOf[l.locations[i]]
	}
	return l.frames[i]
}

// module returns the module of frame f.
func (m *model) module(f *frame) string { return m.modules[f.mod] }

// name returns the symbol of frame f.
func (m *model) name(f *frame) string {
	if f.name == unknownName {
		return unknown
	}
	return m.strings[f.name]
}

// file returns the source file of frame f, "" when not known.
func (m *model) file(f *frame) string { return m.strings[f.file] }

func newModel(p *contract.Profile, value int) (*model, error) {
	if value >= len(p.SampleType) {
		return nil, fmt.Errorf("report: value index %d out of range: profile has %d sample types", value, len(p.SampleType))
	}
	if len(p.Values) != len(p.Samples)*len(p.SampleType) {
		return nil, fmt.Errorf("report: %d sample values, want %d for %d samples", len(p.Values), len(p.Samples)*len(p.SampleType), len(p.Samples))
	}
	m := &model{
		strings: p.Strings,
		event:   p.SampleType[0].Type,
		typ:     p.SampleType[value],
		period:  len(p.SampleType) > 1,
	}
	if m.period {
		m.event = p.SampleType[1].Type
	}

	b := builder{
		m:     m,
		p:     p,
		named: make([]int32, len(p.Strings)),
		mods:  make(map[string]int32),
		comms: make(map[string]int32),
	}
	// Most functions are a frame; large slices grown by appending would
	// allocate several times their size.
	m.frames = make([]frame, 0, len(p.Functions)+1)
	b.located = make([]span, p.Locations.Len()+1)
	b.byFunction = make([]placed, len(p.Functions)+1)
	b.byMapping = make([]mapped, len(p.Mappings)+1)
	// The locations are resolved first, in the order the stacks are made
	// in, so that frames are numbered as they are met. When a location
	// is more than one frame, or a sample has none, one array holds
	// every stack (a slice per sample would be an allocation per sample),
	// sized for their frames: grown by appending, 8,000-deep stacks would
	// be copied over and over. Else the profile's stacks serve.
	n := 0
	empty := false
	for i := range p.Samples {
		locations := p.Stack(&p.Samples[i])
		for _, l := range locations {
			n += int(b.span(l).n)
		}
		if len(locations) == 0 {
			b.unknownIn(0)
			n++
			empty = true
		}
	}
	var stacks []int32
	if !empty && len(b.locFrames) == 0 && len(p.Samples) > 0 {
		m.frameOf, m.profile = make([]int32, len(b.located)), p
		for l, sp := range b.located {
			m.frameOf[l] = sp.start // unused locations' too: frame 0, never read
		}
	} else {
		stacks = make([]int32, 0, n)
	}
	m.samples = make([]sample, 0, len(p.Samples))
	for i := range p.Samples {
		s := &p.Samples[i]
		start := len(stacks)
		locations := p.Stack(s)
		switch {
		case m.frameOf != nil:
			start = i
		case len(locations) == 0:
			stacks = append(stacks, b.unknownIn(0))
		default:
			for _, l := range locations {
				stacks = b.appendFrames(stacks, l)
			}
		}
		depth := len(stacks) - start
		if m.frameOf != nil {
			depth = len(locations)
		}
		labels := p.LabelsOf(s)
		pid, ok := labels.NumLabel("pid")
		if !ok {
			pid = -1
		}
		comm := cmp.Or(labels.StrLabel("comm"), unknown)
		v := p.Value(i)
		m.samples = append(m.samples, sample{
			start: start,
			depth: int32(depth),
			comm:  listed(b.comms, &b.m.comms, comm),
			pid:   pid,
			count: v[0],
			value: v[value],
		})
		m.count += v[0]
		m.total += v[value]
		if m.period {
			m.periods += v[1]
		}
	}
	m.stacks = stacks
	return m, nil
}

// A builder resolves the profile's locations to frames. It looks each
// location, function and mapping up once, in slices by their numbers, and a
// name once per function: frames are interned by name and module, and most
// names are in one module.
type builder struct {
	m          *model
	p          *contract.Profile
	located    []span   // by location number
	byFunction []placed // by function number
	byMapping  []mapped // by mapping number; 0 for none
	locFrames  []int32  // frames of the locations of several frames
	// named holds the first frame of each name, by its number, + 1; 0
	// for none. unknownNamed is unknownName's.
	named        []int32
	unknownNamed int32
	mods         map[string]int32
	comms        map[string]int32
}

// A span is the frames of a location: the frame itself when it is one,
// else locFrames[start:start+n]. n is 0 until the location is resolved.
type span struct{ start, n int32 }

// A placed is the frame of a function in the module it was last seen in.
type placed struct{ frame, mod int32 } // frame + 1; 0 until seen

// A mapped is what frames take from a mapping.
type mapped struct {
	mod         int32 // + 1; 0 until seen
	unknown     int32 // the frame of its unresolved addresses + 1, or 0
	kernel, jit bool
}

// span returns the frames of location number l, resolving it when first
// asked.
func (b *builder) span(l uint32) span {
	sp := &b.located[l]
	if sp.n == 0 {
		*sp = b.resolve(b.p.Location(l))
	}
	return *sp
}

// appendFrames appends the frames of location number l to stack,
// innermost first: with inlining, the inlined functions innermost first,
// then the function the address is in.
func (b *builder) appendFrames(stack []int32, l uint32) []int32 {
	sp := b.span(l)
	if sp.n == 1 {
		return append(stack, sp.start)
	}
	return append(stack, b.locFrames[sp.start:sp.start+sp.n]...)
}

func (b *builder) resolve(l *contract.Location) span {
	mp := b.mapping(l.Mapping)
	start := len(b.locFrames)
	for _, line := range b.p.LinesOf(l) {
		if line.Function != 0 {
			b.locFrames = append(b.locFrames, b.function(line.Function, mp))
		}
	}
	switch n := len(b.locFrames) - start; n {
	case 0:
		return span{b.unknownIn(l.Mapping), 1}
	case 1:
		f := b.locFrames[start]
		b.locFrames = b.locFrames[:start]
		return span{f, 1}
	default:
		return span{int32(start), int32(n)}
	}
}

// mapping returns what frames in mapping number id take from it; 0 is
// none.
func (b *builder) mapping(id uint32) *mapped {
	mp := &b.byMapping[id]
	if mp.mod == 0 {
		m := b.p.Mapping(id)
		module := unknown
		if m != nil && m.File != 0 {
			module = path.Base(b.p.String(m.File))
		}
		mp.mod = listed(b.mods, &b.m.modules, module) + 1
		kind := b.p.MappingKind(m)
		mp.kernel, mp.jit = kind == contract.Kernel, kind.IsJIT()
	}
	return mp
}

// function returns the frame of function number id in the module of mp.
func (b *builder) function(id uint32, mp *mapped) int32 {
	pl := &b.byFunction[id]
	if pl.frame == 0 || pl.mod != mp.mod {
		fn := b.p.Function(id)
		name := b.p.PerfName(fn)
		if s := b.p.String(name); s == "" || s == unknown {
			name = unknownName
		}
		*pl = placed{b.frame(name, fn.Filename, mp) + 1, mp.mod}
	}
	return pl.frame - 1
}

// unknownIn returns the frame of the unresolved addresses of mapping
// number id, 0 for none.
func (b *builder) unknownIn(id uint32) int32 {
	mp := b.mapping(id)
	if mp.unknown == 0 {
		mp.unknown = b.frame(unknownName, 0, mp) + 1
	}
	return mp.unknown - 1
}

// frame returns the frame of name in the module of mp, making it from mp
// and file if it is new, and giving it file if it has none.
func (b *builder) frame(name, file uint32, mp *mapped) int32 {
	mod := mp.mod - 1
	named := &b.unknownNamed
	if name != unknownName {
		named = &b.named[name]
	}
	first := *named - 1
	if first >= 0 {
		for i := first; i >= 0; i = b.m.frames[i].next - 1 {
			if f := &b.m.frames[i]; f.mod == mod {
				if f.file == 0 {
					f.file = file
				}
				return i
			}
		}
	}
	i := int32(len(b.m.frames))
	f := frame{name: name, file: file, sym: i, mod: mod, kernel: mp.kernel, jit: mp.jit}
	if first >= 0 {
		f.sym = first
		f.next, b.m.frames[first].next = b.m.frames[first].next, i+1
	} else {
		*named = i + 1
	}
	b.m.frames = append(b.m.frames, f)
	return i
}

// listed returns the number of name in list, numbered by ids, adding it to
// both if it is new.
func listed(ids map[string]int32, list *[]string, name string) int32 {
	i := intern(ids, name)
	if int(i) == len(*list) {
		*list = append(*list, name)
	}
	return i
}

// intern returns the number of k in m, numbering it if it is new.
func intern[K comparable](m map[K]int32, k K) int32 {
	i, ok := m[k]
	if !ok {
		i = int32(len(m))
		m[k] = i
	}
	return i
}

// percent returns v as a percentage of total.
func percent(v, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(v) / float64(total)
}
