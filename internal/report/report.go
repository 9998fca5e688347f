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
	"github.com/jitprof/jitprof/internal/contract"
	"path"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
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
type frame struct {
	name   string // demangled symbol, or unknown
	module string // base name of the mapping's file, or unknown
	kernel bool   // the kernel's code: its mapping is contract.KernelFile
	jit    bool   // jitted code: contract.IsJIT
	file   string // source file, when known
	sym    int32  // name, interned: frames of the same name share it
	mod    int32  // module, interned
}

func (f *frame) resolved() bool { return f.name != unknown }

// A sample is a profile sample reduced to what reports use.
type sample struct {
	stack []int32 // frames, leaf first; never empty
	comm  int32   // index in model.comms
	pid   int64
	count int64 // value 0: the number of samples merged into this one
	value int64 // the value selected by Options.Value
}

// A model is a profile with its locations resolved to frames and its labels
// decoded, so that reports look nothing up in the profile per frame.
type model struct {
	event   string
	typ     *profile.ValueType
	period  bool // whether the profile has an event period (value 1)
	frames  []frame
	comms   []string
	samples []sample
	count   int64 // number of samples
	total   int64 // sum of the selected value
	periods int64 // sum of the periods
}

func newModel(p *profile.Profile, value int) (*model, error) {
	if value >= len(p.SampleType) {
		return nil, fmt.Errorf("report: value index %d out of range: profile has %d sample types", value, len(p.SampleType))
	}
	m := &model{
		event:  p.SampleType[0].Type,
		typ:    p.SampleType[value],
		period: len(p.SampleType) > 1,
	}
	if m.period {
		m.event = p.SampleType[1].Type
	}

	b := builder{
		m:      m,
		byID:   make([]located, len(p.Location)+1),
		locs:   make(map[*profile.Location][]int32),
		frames: make(map[[2]string]int32),
		syms:   make(map[string]int32),
		mods:   make(map[string]int32),
		comms:  make(map[string]int32),
	}
	// One array holds every stack: a slice per sample would be an
	// allocation per sample.
	n := 0
	for _, s := range p.Sample {
		n += max(len(s.Location), 1)
	}
	stacks := make([]int32, 0, n)
	m.samples = make([]sample, 0, len(p.Sample))
	for _, s := range p.Sample {
		if len(s.Value) != len(p.SampleType) {
			return nil, fmt.Errorf("report: sample has %d values, want %d", len(s.Value), len(p.SampleType))
		}
		start := len(stacks)
		for _, l := range s.Location {
			stacks = append(stacks, b.location(l)...)
		}
		if len(s.Location) == 0 {
			stacks = append(stacks, b.frame(unknown, unknown, "", false, false))
		}
		pid := int64(-1)
		if v := s.NumLabel["pid"]; len(v) > 0 {
			pid = v[0]
		}
		comm := unknown
		if v := s.Label["comm"]; len(v) > 0 && v[0] != "" {
			comm = v[0]
		}
		m.samples = append(m.samples, sample{
			stack: stacks[start:len(stacks):len(stacks)],
			comm:  b.comm(comm),
			pid:   pid,
			count: s.Value[0],
			value: s.Value[value],
		})
		m.count += s.Value[0]
		m.total += s.Value[value]
		if m.period {
			m.periods += s.Value[1]
		}
	}
	return m, nil
}

// A builder interns what the model's samples refer to.
type builder struct {
	m      *model
	byID   []located                     // by location ID
	locs   map[*profile.Location][]int32 // for IDs byID does not hold
	frames map[[2]string]int32           // by name and module
	syms   map[string]int32
	mods   map[string]int32
	comms  map[string]int32
}

// A located is a location and its frames.
type located struct {
	loc    *profile.Location
	frames []int32
}

// location returns the frames of l, innermost first. Profiles number their
// locations from 1 up, which makes the ID an index cheaper than a map lookup
// by pointer; the map serves profiles numbered otherwise.
func (b *builder) location(l *profile.Location) []int32 {
	if l.ID < uint64(len(b.byID)) {
		slot := &b.byID[l.ID]
		if slot.loc == l {
			return slot.frames
		}
		if slot.loc == nil {
			*slot = located{l, b.resolve(l)}
			return slot.frames
		}
	}
	f, ok := b.locs[l]
	if !ok {
		f = b.resolve(l)
		b.locs[l] = f
	}
	return f
}

// resolve returns the frames of the function or address at l: with
// inlining, the inlined functions innermost first, then the function the
// address is in.
func (b *builder) resolve(l *profile.Location) []int32 {
	module := unknown
	if l.Mapping != nil && l.Mapping.File != "" {
		module = path.Base(l.Mapping.File)
	}
	kernel := l.Mapping != nil && l.Mapping.File == contract.KernelFile
	jit := contract.IsJIT(l.Mapping)
	var frames []int32
	for _, line := range l.Line {
		if fn := line.Function; fn != nil {
			frames = append(frames, b.frame(cmp.Or(contract.PerfName(fn), unknown), module, fn.Filename, kernel, jit))
		}
	}
	if len(frames) == 0 {
		frames = append(frames, b.frame(unknown, module, "", kernel, jit))
	}
	return frames
}

func (b *builder) frame(name, module, file string, kernel, jit bool) int32 {
	k := [2]string{name, module}
	if i, ok := b.frames[k]; ok {
		if b.m.frames[i].file == "" {
			b.m.frames[i].file = file
		}
		return i
	}
	i := int32(len(b.m.frames))
	b.m.frames = append(b.m.frames, frame{
		name:   name,
		module: module,
		kernel: kernel,
		jit:    jit,
		file:   file,
		sym:    intern(b.syms, name),
		mod:    intern(b.mods, module),
	})
	b.frames[k] = i
	return i
}

func (b *builder) comm(name string) int32 {
	i, ok := b.comms[name]
	if !ok {
		i = int32(len(b.m.comms))
		b.m.comms = append(b.m.comms, name)
		b.comms[name] = i
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
