// Package perfprof turns a perf.data recording into a profile
// (github.com/google/pprof/profile), naming every sample's frames with
// internal/symbolize at the moment the sample was taken: no perf inject
// step, and code that moved or was replaced at one address is attributed
// to whoever owned it then.
//
// Samples are streamed and merged as they are read: memory grows with the
// distinct stacks, not with the samples.
package perfprof

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/demangle"
	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/foreign"
	"github.com/jitprof/jitprof/internal/idindex"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/internal/stages"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/internal/unwind"
	"github.com/jitprof/jitprof/perfdata"
)

// Options says what to read and which samples to keep.
type Options struct {
	Input string // the perf.data file
	symbolize.Options
	Filter Filter
	// Event names the event whose samples are analysed, as perf evlist
	// lists them; empty means the first.
	Event string
	// PerFunction makes one profile Location per function (and one per
	// module for the addresses no symbol covers) instead of one per
	// address: all that reports by function need, and far fewer distinct
	// stacks to hold. Locations then carry no line numbers; a jitted
	// function's location is one per chain of methods inlined where it was
	// sampled, so inlined methods stay frames.
	PerFunction bool
	// LeafAddresses, with PerFunction, keeps each sample's leaf frame by
	// its address, with its line numbers: what annotate needs (the
	// samples of each instruction), while callers go by function, so that
	// deep distinct stacks cost their functions, not their millions of
	// addresses.
	LeafAddresses bool
	// NoInline folds the methods the dumps say were inlined into the
	// function that holds their code, as perf report --no-inline does:
	// their samples count to it, at its own line.
	NoInline bool
	// View says what the profile measures: the event, or time off the
	// CPU, or both in time (see offcpu.go).
	View View
	// Timeline splits each thread's samples by time slot, labelled as
	// contract.SlotLabel says, for the HTML page's timeline (timeline.go).
	Timeline bool
}

// Filter selects samples; zero values select all.
type Filter struct {
	Pids, Tids []uint32
	Comms      []string
	// Start and End bound the sample times (perf's clock, ns): samples
	// in [Start, End) are kept; End 0 means no bound.
	Start, End uint64
	// Symbol keeps the samples with a frame whose name (demangled)
	// matches.
	Symbol *regexp.Regexp
	// Stage keeps the samples taken while the program was in the stage
	// of that name, as it marked them in its dump (jitdump Writer.Stage).
	// Samples taken while the program had accounting off are dropped
	// whatever the filter.
	Stage string
}

// Result is the profile and what went into it.
//
// The profile is all that passes from the analysis to the renderers (text,
// JSON, folded, pprof, gmon, annotate, the web UI). Its mappings say what
// holds each location's code: an ELF file placed at [Start, Limit) from file
// offset Offset, with its build-id when the recording gave one; a jitted
// function's code (BuildID contract.JITBuildID, File the dump's path, [Start, Limit)
// the function's place, Offset its code_index); the kernel (contract.KernelFile), the
// vDSO (contract.VDSOFile), a perf map (File its path). internal/objtool reads their
// code and symbols.
type Result struct {
	Profile *contract.Profile
	Event   string
	// Dumps are the paths of the jitdump files read, as found.
	Dumps []string
	// Samples counts the event's samples read, Kept those the filter
	// kept, Jitted the kept ones whose leaf is in jitted code.
	Samples, Kept, Jitted int
	// Lost is how many samples the kernel dropped (LOST records).
	Lost uint64
	// Malformed counts the samples skipped because their fields do not
	// fit them (a stack size that lies, say), counted among Samples when
	// they can be told to be the event's; each Run reports them to Warn.
	Malformed int
	// Cut, when the recording ends short of what its header declares (a
	// copy taken while perf record ran, a full disk), says where and what
	// is missing (a *perfdata.TruncatedError); the samples before it are
	// in the profile. Each Run reports it to Warn.
	Cut error
	// Unwound counts the kept samples whose user stacks were unwound
	// from the registers and stack copy they hold (--call-graph dwarf),
	// CutShort those whose unwinding ran past the copy's end: their
	// outermost callers are missing.
	Unwound, CutShort int
	// Stripped are the stripped ELF files (elfsym.Table.Stripped) on
	// which kept samples landed without a name, the most first.
	Stripped []Stripped
	// PerfMapped counts the kept samples whose leaf a perf map names.
	PerfMapped int
	// Unnamed are the processes most of whose kept samples landed in
	// anonymous memory that no dump or perf map describes (a JIT runtime
	// that was not asked to describe its code), the most first.
	Unnamed []Unnamed
	// Waiting are the processes with a dump a tenth of whose kept samples
	// landed in code it does not describe: a runtime that buffers its dump
	// (V8: up to 2 MB) writes the rest later, at the latest when it exits.
	Waiting []Unnamed
	// Last is the time of the last sample kept, in perf's clock.
	Last uint64
}

// Unnamed is a process whose samples land in anonymous memory no dump or
// perf map describes: Samples of its Kept.
type Unnamed struct {
	Pid           uint32
	Comm          string
	Samples, Kept int
	// PerfMapped says a perf map of the process named some of its
	// samples: its runtime was describing its code, only not all of it.
	PerfMapped bool
}

// Stripped is a stripped ELF file and how many kept samples landed on it
// unnamed.
type Stripped struct {
	Path    string
	Samples int
}

// Run reads opts.Input twice: once to build the address spaces, once to
// symbolize and merge the samples. Dumps and perf maps not where the
// recording saw them are looked for in opts' directories, then in the
// recording's own (jitsources.SearchDirs).
//
// Both passes stream the file rather than map it: a mapped recording would
// count in the process's resident memory, twice over while both passes
// hold it.
func Run(opts Options) (*Result, error) {
	results, err := run(opts, []Filter{opts.Filter})
	if err != nil {
		return nil, err
	}
	return results[0], nil
}

// run is Run with one profile per filter, all from the same two passes:
// one set of address spaces, one read of the samples.
func run(opts Options, filters []Filter) ([]*Result, error) {
	opts.DumpDirs = jitsources.SearchDirs(opts.Input, opts.DumpDirs)
	opts.PerfMapDirs = jitsources.SearchDirs(opts.Input, opts.PerfMapDirs)
	// Other processes' samples are not kept, nor their dumps read, unless
	// some filter keeps every process.
	opts.Options.Pids = nil
	for _, f := range filters {
		if len(f.Pids) == 0 {
			opts.Options.Pids = nil
			break
		}
		opts.Options.Pids = append(opts.Options.Pids, f.Pids...)
	}
	var space *symbolize.Space
	err := withReader(opts.Input, func(r *perfdata.Reader) error {
		var err error
		if space, err = symbolize.Build(r, opts.Options); err != nil {
			return err
		}
		if len(space.Dumps()) > 0 {
			if err := jitsources.CheckClock(r.Attrs()); err != nil {
				space.Close()
				return fmt.Errorf("%s: %w", opts.Input, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	aggs := make([]*aggregator, len(filters))
	err = withReader(opts.Input, func(r *perfdata.Reader) error {
		for i, f := range filters {
			o := opts
			o.Filter = f
			var err error
			if aggs[i], err = newAggregator(r, space, o); err != nil {
				return err
			}
		}
		return readSamples(r, aggs, opts.Warn)
	})
	if err != nil {
		space.Close()
		return nil, err
	}
	results := make([]*Result, len(aggs))
	for i, a := range aggs {
		if results[i], err = a.result(i == len(aggs)-1); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// passes counts the reads of recordings, for the test that holds a run of
// many stages to the two reads of one.
var passes atomic.Int64

// withReader calls read with a streaming Reader of the recording at path.
// The recording is read twice, so it must be a regular file: a FIFO there
// is refused rather than waited on.
func withReader(path string, read func(*perfdata.Reader) error) error {
	passes.Add(1)
	f, err := foreign.Open(path, foreign.Rules{})
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	r, err := perfdata.NewReader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err) // the header's errors come before SetName
	}
	r.SetName(path)
	return read(r)
}

// A location is a distinct frame: the same function at the same address,
// or per function, the same function with the same methods inlined. It is
// kept as its function and its address (locationList), rather than as a
// whole frame (96 bytes): a profile of deep distinct stacks has millions
// of addresses in few functions.
type location struct {
	fn    uint32 // in aggregator.fns
	whole bool   // one per function (Options.PerFunction)
	addr  uint64 // of the frame seen first; 0 in a key per function
}

// A locationList holds locations in two columns, 12 bytes a location where
// a list of them would take 16 (a uint64 beside a uint32 is padded): the
// address, and the function with whole in its top bit.
type locationList struct {
	addrs arena.List[uint64]
	fns   arena.List[uint32]
}

const wholeBit = 1 << 31

func (l *locationList) add(loc location) int {
	fn := loc.fn
	if loc.whole {
		fn |= wholeBit
	}
	l.fns.Add(fn)
	return l.addrs.Add(loc.addr)
}

// at returns location i.
func (l *locationList) at(i int) location {
	fn := *l.fns.At(i)
	return location{fn: fn &^ wholeBit, whole: fn&wholeBit != 0, addr: *l.addrs.At(i)}
}

func (l *locationList) Len() int { return l.addrs.Len() }

// dropBefore lets the locations before i go (arena.List.DropBefore).
func (l *locationList) dropBefore(i int) {
	l.addrs.DropBefore(i)
	l.fns.DropBefore(i)
}

// locFunc is what a location is but for its address.
type locFunc struct {
	module  *symbolize.Module
	name    string
	start   uint64
	inlined string // per function: the inline chain's names and files
}

// A function is a distinct locFunc, kept without pointers (16 bytes, where
// a whole frame is 104, and none for the GC to visit): a jitted function
// (named, with no chain inlined, placed whole, as almost all of a JIT's
// million are) by its dump and its place there, from which its frame
// follows; any other by its first frame, kept whole among the aggregator's
// few others.
type function struct {
	start uint64 // a jitted function's, where it was seen
	ref   uint32 // a jitted function's place in its dump, or its other's
	dump  uint16 // 1 + its dump's place in aggregator.dumps; 0 for the others
	flags functionFlags
}

type functionFlags uint8

const (
	jittedCode  functionFlags = 1 << iota // in a dump's code
	matches                               // named as the symbol filter asks
	interpreter                           // HotSpot's interpreter
)

// other is a function kept by its first frame.
type other struct {
	frame   symbolize.Frame // without its address
	name    string          // demangled
	inlined string          // as its locFunc has it
}

// stackKey is a distinct sample: a thread and its stack.
type stackKey struct {
	pid, tid, comm uint32
	stack          uint32 // in aggregator.stackTab
	slot           uint32 // of its time, with a timeline
}

// total is what a distinct sample adds up.
type total struct{ count, period, off int64 } // off: nanoseconds off the CPU

// pcKey is where a lookup's answer can be reused: the same address of the
// same process, at another time the answer still holds for.
type pcKey struct {
	pid    uint32
	kernel bool
	whole  bool // a location per function asked for
	pc     uint64
}

type cached struct {
	key         pcKey
	id          uint32
	from, until uint64
}

// lookupSlots is the size of the lookup cache. It is direct-mapped, so its
// memory is fixed (2.5 MB) however many addresses a recording has; a
// collision only costs a symbolizer lookup.
const (
	lookupBits  = 16
	lookupSlots = 1 << lookupBits
)

// slot returns where pk's answer is cached.
func (pk pcKey) slot() int {
	h := pk.pc ^ uint64(pk.pid)<<40
	if pk.kernel {
		h = ^h
	}
	return int((h * 0x9e3779b97f4a7c15) >> (64 - lookupBits))
}

type aggregator struct {
	space         *symbolize.Space
	filter        Filter
	stages        *stages.Marks
	perFunction   bool
	leafAddresses bool
	noInline      bool
	attrs         map[*perfdata.Attr]bool // of the chosen event
	event         string
	unit          string
	period        uint64 // the fixed period, 0 when sampled by frequency

	lookups []cached      // lookupSlots of them
	locs    locationList  // by location id - 1: millions on deep distinct stacks
	locIDs  idindex.Index // of locs, by function and address
	fns     []function    // by function id
	fnIDs   idindex.Index // of fns (ids + 1), by locFunc
	others  []other
	dumps   []*symbolize.Module
	dumpIDs map[*symbolize.Module]uint16 // 1 + the place in dumps
	seed    maphash.Seed
	// oddFrames are the frames of the locations whose first frame differs
	// from their function's but for the address (another mapping of the
	// module, say), by location id - 1.
	oddFrames map[uint32]symbolize.Frame
	comms     []string
	commIDs   map[string]uint32
	stackTab  *stackTable
	stacks    *sampleTable
	ids       []uint32 // the sample's locations, leaf first

	samples, kept, jitted int
	unwound, cutShort     int
	lost                  uint64
	malformed             int
	cut                   error
	warn                  func(error)
	unwinder              *unwinder // nil when the samples hold no user stacks to unwind
	first, last           uint64
	off                   *offCPU // with an off-CPU or wall-clock view
	timeline              *timeline
}

func newAggregator(r *perfdata.Reader, space *symbolize.Space, opts Options) (*aggregator, error) {
	a := &aggregator{
		space:         space,
		filter:        opts.Filter,
		perFunction:   opts.PerFunction,
		leafAddresses: opts.LeafAddresses,
		noInline:      opts.NoInline,
		attrs:         make(map[*perfdata.Attr]bool),
		dumpIDs:       make(map[*symbolize.Module]uint16),
		seed:          maphash.MakeSeed(),
		oddFrames:     make(map[uint32]symbolize.Frame),
		lookups:       make([]cached, lookupSlots),
		commIDs:       make(map[string]uint32),
		stackTab:      newStackTable(),
		stacks:        newSampleTable(),
		first:         math.MaxUint64,
		warn:          opts.Warn,
	}
	if a.warn == nil {
		a.warn = func(error) {}
	}
	// Sized for every function of the dumps, whose functions most
	// profiles of many are.
	var dumps []*jitsources.Dump
	functions := 0
	for _, m := range space.Dumps() {
		dumps = append(dumps, m.Dump)
		functions += len(m.Dump.Functions)
		if len(a.dumps) < math.MaxUint16 {
			a.dumps = append(a.dumps, m)
			a.dumpIDs[m] = uint16(len(a.dumps))
		}
	}
	a.fns = make([]function, 0, functions)
	a.fnIDs = idindex.New(functions)
	a.locIDs = idindex.New(functions)
	if a.stages = stages.NewMarks(dumps); opts.Filter.Stage != "" && !a.stages.Has(opts.Filter.Stage) {
		return nil, fmt.Errorf("%s: no dump marks a stage %q (marked: %q)", opts.Input, opts.Filter.Stage, a.stages.Names())
	}
	descs, err := r.EventDescs()
	if err != nil {
		return nil, err
	}
	attrs := r.Attrs()
	if len(attrs) == 0 {
		return nil, fmt.Errorf("%s: the recording has no events", opts.Input)
	}
	var names []string
	nameOf := func(at *perfdata.Attr) string {
		for _, d := range descs {
			for _, id := range d.IDs {
				if slices.Contains(at.IDs, id) {
					return d.Name
				}
			}
		}
		return fmt.Sprintf("event-%d:%d", at.Type, at.Config)
	}
	for _, at := range attrs {
		name := nameOf(at)
		names = append(names, name)
		if (opts.Event == "" && a.event == "") || opts.Event == name {
			a.event = name
		}
		if name == a.event {
			a.attrs[at] = true
			a.unit = unitOf(at)
			if at.Flags&perfdata.AttrFreq == 0 {
				a.period = at.SamplePeriod
			}
		}
	}
	if len(a.attrs) == 0 {
		return nil, fmt.Errorf("%s has no event %q; it has %s", opts.Input, opts.Event, strings.Join(slices.Compact(names), ", "))
	}
	if err := a.setView(attrs, opts.View, opts.Input); err != nil {
		return nil, err
	}
	if opts.Timeline {
		a.timeline = &timeline{shift: firstSlotShift}
		if err := a.checkTimeline(opts.Input); err != nil {
			return nil, err
		}
	}
	for at := range a.attrs {
		if at.SampleType&perfdata.SampleStackUser != 0 {
			if a.unwinder, err = newUnwinder(r, space); err != nil {
				return nil, fmt.Errorf("%s: %w", opts.Input, err)
			}
			break
		}
	}
	return a, nil
}

// unitOf is the unit of an event's period: the software clocks count
// nanoseconds, the rest count events.
func unitOf(at *perfdata.Attr) string {
	const typeSoftware, cpuClock, taskClock = 1, 0, 1
	if at.Type == typeSoftware && (at.Config == cpuClock || at.Config == taskClock) {
		return "nanoseconds"
	}
	return "count"
}

// readSamples reads the recording's samples from where r stands into each
// aggregator, decoding each once. Problems of the recording (cut short,
// malformed samples) go to warn once, whatever the number of aggregators.
func readSamples(r *perfdata.Reader, aggs []*aggregator, warn func(error)) error {
	if warn == nil {
		warn = func(error) {}
	}
	// add keeps nothing of a sample: its bytes (a DWARF recording's stack
	// copies) need not be copied out of the read buffer.
	r.ReuseRecord, r.ReuseSampleBytes = true, true
	var (
		lost           uint64
		malformed      int
		firstMalformed error
		cut            error
	)
	for {
		raw, err := r.NextRaw()
		if err == io.EOF || errors.Is(err, perfdata.ErrTruncated) {
			if err != io.EOF {
				cut = err
				warn(fmt.Errorf("the recording is cut short; the profile holds the samples before the cut: %w", err))
			}
			if malformed > 0 {
				warn(fmt.Errorf("%d samples skipped, their fields not fitting them; the first: %w", malformed, firstMalformed))
			}
			for _, a := range aggs {
				a.lost, a.cut = lost, cut
			}
			return nil
		}
		if err != nil {
			return err
		}
		switch raw.Type() {
		case perfdata.TypeSample:
			switch s := r.Decode(raw).(type) {
			case *perfdata.Sample:
				for _, a := range aggs {
					if a.off != nil {
						a.off.end = max(a.off.end, s.Time) // the recording's end, for threads still blocked
					}
					if a.attrs[s.Attr] {
						a.add(s)
					}
				}
			case *perfdata.Invalid:
				// One whose event id is unknown may be the event's.
				counted := false
				for _, a := range aggs {
					if s.Attr == nil || a.attrs[s.Attr] {
						counted = true
						a.malformed++
						if s.Attr != nil {
							a.samples++
						}
					}
				}
				if counted {
					malformed++
					if firstMalformed == nil {
						firstMalformed = s.Err
					}
				}
			}
		case perfdata.TypeLost:
			if l, ok := r.Decode(raw).(*perfdata.Lost); ok {
				lost += l.Lost
			}
		case perfdata.TypeSwitch, perfdata.TypeSwitchCPUWide, perfdata.TypeExit:
			rec := r.Decode(raw)
			for _, a := range aggs {
				if a.off != nil {
					a.off.record(rec)
				}
			}
		}
	}
}

// add symbolizes a sample and merges it into its stack.
func (a *aggregator) add(s *perfdata.Sample) {
	a.samples++
	f := &a.filter
	t := s.Time
	if s.Attr.SampleType&perfdata.SampleTime == 0 {
		t = math.MaxUint64 - 1
	}
	if a.off != nil && a.off.attrs[s.Attr] {
		a.off.sample(s, t)
	}
	if (len(f.Pids) > 0 && !slices.Contains(f.Pids, s.Pid)) ||
		(len(f.Tids) > 0 && !slices.Contains(f.Tids, s.Tid)) ||
		t < f.Start || (f.End != 0 && t >= f.End) {
		return
	}
	if stage, on := a.stages.At(s.Pid, t); !on || (f.Stage != "" && stage != f.Stage) {
		return
	}
	comm := a.space.Comm(s.Tid, t)
	if comm == "" {
		comm = fmt.Sprintf(":%d", s.Tid) // as perf names a thread it never saw named
	}
	if len(f.Comms) > 0 && !slices.Contains(f.Comms, comm) {
		return
	}

	a.ids = a.ids[:0]
	if a.unwinder != nil && s.Attr.SampleType&perfdata.SampleStackUser != 0 {
		a.unwind(s, t)
	} else {
		a.callchain(s, t)
	}
	if len(a.ids) == 0 {
		return
	}
	if f.Symbol != nil && !slices.ContainsFunc(a.ids, func(id uint32) bool { return a.flags(id)&matches != 0 }) {
		return
	}
	a.kept++
	if a.flags(a.ids[0])&jittedCode != 0 {
		a.jitted++
	}
	if u := a.unwinder; u != nil && u.walked {
		a.unwound++
		if u.stop == unwind.StopCutShort {
			a.cutShort++
		}
	}
	a.first, a.last = min(a.first, t), max(a.last, t)

	commID, ok := a.commIDs[comm]
	if !ok {
		commID = uint32(len(a.comms))
		a.comms = append(a.comms, strings.Clone(comm))
		a.commIDs[a.comms[commID]] = commID
	}
	key := stackKey{s.Pid, s.Tid, commID, a.stackTab.intern(a.ids), a.slot(t)}
	if a.off != nil && a.off.attrs[s.Attr] {
		a.off.keep(key)
		return
	}
	tot := a.stacks.at(key)
	tot.count++
	if a.period != 0 {
		tot.period += int64(a.period)
	} else {
		tot.period += int64(s.Period)
	}
}

// callchain turns the sample's callchain, as the kernel walked it, into
// locations; without one, its ip.
func (a *aggregator) callchain(s *perfdata.Sample, t uint64) {
	kernel := s.Misc&perfdata.MiscCPUModeMask == perfdata.MiscKernel
	if s.Attr.SampleType&perfdata.SampleCallchain == 0 || len(s.Callchain) == 0 {
		a.ids = append(a.ids, a.locate(s.Pid, s.IP, t, kernel, a.whole(0)))
		return
	}
	for _, pc := range s.Callchain {
		if pc >= perfdata.ContextMax {
			kernel = pc == perfdata.ContextKernel
			continue
		}
		a.addCaller(s.Pid, pc, t, kernel)
	}
}

// addCaller adds the location of a frame at pc, called from the frames
// added before.
func (a *aggregator) addCaller(pid uint32, pc, t uint64, kernel bool) {
	if len(a.ids) == 0 {
		a.ids = append(a.ids, a.locate(pid, pc, t, kernel, a.whole(0)))
		return
	}
	// A caller's address is where its call returns to: the call is the
	// instruction before. But a signal handler returns to the first byte
	// of its restorer (sigreturn), pushed by the kernel, not by a call:
	// the byte before is the padding before that function, in no symbol
	// of a file whose every function has one. (In a stripped file's gaps
	// are its local functions, one of which may end in a call that does
	// not return, right before another: that caller stays unnamed.) The
	// return address itself is looked up only then, and kept as a
	// location only when it is the frame.
	whole := a.whole(len(a.ids))
	id := a.locate(pid, pc-1, t, kernel, whole)
	if f := a.fnFrame(a.loc(id).fn); f.Symbol.Name == "" && f.Module != nil && f.Module.Kind == symbolize.ELF && !f.Module.Stripped() {
		if fr := a.space.Lookup(pid, pc, t, kernel); fr.Symbol.Name != "" && fr.Symbol.Start == pc {
			id = a.intern(fr, whole)
		}
	}
	a.ids = append(a.ids, id)
}

// whole tells whether the frame at depth (0 the leaf) of a sample has a
// location per function.
func (a *aggregator) whole(depth int) bool {
	return a.perFunction && (depth > 0 || !a.leafAddresses)
}

// locate returns the id of the location of pc, one per function if whole.
func (a *aggregator) locate(pid uint32, pc, t uint64, kernel, whole bool) uint32 {
	pk := pcKey{pid, kernel, whole, pc}
	c := &a.lookups[pk.slot()]
	if c.key == pk && c.from <= t && t < c.until {
		return c.id
	}
	fr := a.space.Lookup(pid, pc, t, kernel)
	id := a.intern(fr, whole)
	*c = cached{pk, id, fr.From, fr.Until}
	return id
}

// intern returns the id of fr's location, one per function if whole, a
// new one the first time.
func (a *aggregator) intern(fr symbolize.Frame, whole bool) uint32 {
	fn := a.function(fr, whole)
	key := location{fn: fn, whole: whole, addr: fr.Addr}
	if whole {
		key.addr = 0
	}
	h := maphash.Comparable(a.seed, key)
	id, i := a.locIDs.Find(h, func(id uint32) bool { return a.locKey(id) == key })
	if id != 0 {
		return id
	}
	if f := a.fnFrame(fn); fr.Module != f.Module || fr.Symbol != f.Symbol || fr.Map != f.Map {
		a.oddFrames[uint32(a.locs.Len())] = fr
	}
	id = uint32(a.locs.add(location{fn, whole, fr.Addr}) + 1)
	a.locIDs.Add(i, id, h, func(id uint32) uint64 { return maphash.Comparable(a.seed, a.locKey(id)) })
	return id
}

// locKey returns the key location id is found by.
func (a *aggregator) locKey(id uint32) location {
	l := a.loc(id)
	if l.whole {
		l.addr = 0
	}
	return l
}

// function returns the id of fr's function, a new one the first time;
// whole, one for each chain of methods inlined at fr.
func (a *aggregator) function(fr symbolize.Frame, whole bool) uint32 {
	fk := locFunc{module: fr.Module, name: fr.Symbol.Name, start: fr.Symbol.Start}
	if fr.Symbol.Name == "" {
		fk.start = 0
	}
	if whole {
		for _, in := range a.inlineChain(fr) {
			fk.inlined += in.Name + "\x00" + in.File + "\x00"
		}
	}
	h := maphash.Comparable(a.seed, fk)
	id, i := a.fnIDs.Find(h, func(id uint32) bool { return a.fnKey(id-1) == fk })
	if id != 0 {
		return id - 1
	}
	fn := uint32(len(a.fns))
	name := fr.Symbol.Name
	if name != "" && (fr.Module == nil || fr.Module.Kind != symbolize.Kernel) { // perf shows kernel names as they are
		name = demangle.Name(name)
	}
	f := function{start: fr.Symbol.Start}
	if fr.Symbol.JIT != nil {
		f.flags |= jittedCode
	}
	if a.filter.Symbol != nil && name != "" && a.filter.Symbol.MatchString(name) {
		f.flags |= matches
	}
	if name == interpreterName {
		f.flags |= interpreter
	}
	f.dump = a.dumpIDs[fr.Module]
	// Kept by its place in the dump only when the dump's code at that
	// place gives its key back: placed whole, and named as the code is
	// (an interpreter frame named as the method it runs holds the
	// interpreter's code).
	if whole := fr.Symbol.Start == fr.Map.Start && fr.Symbol.End == fr.Map.End && fr.Map.Pgoff == 0; fr.Symbol.JIT == nil || fr.Symbol.Name == "" || fr.Symbol.Name != fr.Symbol.JIT.Name || fk.inlined != "" || !whole {
		f.dump = 0
	}
	if f.dump != 0 {
		f.ref = fr.Symbol.Function
	} else {
		f.ref = uint32(len(a.others))
		first := fr
		first.Addr = 0
		a.others = append(a.others, other{frame: first, name: name, inlined: fk.inlined})
	}
	a.fns = append(grown(a.fns, 1), f)
	a.fnIDs.Add(i, fn+1, h, func(id uint32) uint64 { return maphash.Comparable(a.seed, a.fnKey(id-1)) })
	return fn
}

// fnKey returns the key function fn is found by.
func (a *aggregator) fnKey(fn uint32) locFunc {
	f := a.fns[fn]
	if f.dump == 0 {
		o := &a.others[f.ref]
		k := locFunc{module: o.frame.Module, name: o.frame.Symbol.Name, start: o.frame.Symbol.Start, inlined: o.inlined}
		if k.name == "" {
			k.start = 0
		}
		return k
	}
	m := a.dumps[f.dump-1]
	return locFunc{module: m, name: m.Dump.Functions[f.ref].Name, start: f.start}
}

// fnFrame returns the first frame seen of function fn, without its
// address (nor its From and Until).
func (a *aggregator) fnFrame(fn uint32) symbolize.Frame {
	f := a.fns[fn]
	if f.dump == 0 {
		return a.others[f.ref].frame
	}
	m := a.dumps[f.dump-1]
	code := m.Dump.Functions[f.ref]
	fr := symbolize.Frame{Module: m, Symbol: symbolize.Symbol{Name: code.Name, Start: f.start, End: f.start + code.CodeSize, JIT: code, Function: f.ref}}
	fr.Map.Start, fr.Map.End = fr.Symbol.Start, fr.Symbol.End
	return fr
}

// name returns function fn's name, demangled.
func (a *aggregator) name(fn uint32) string {
	f := a.fns[fn]
	if f.dump == 0 {
		return a.others[f.ref].name
	}
	return demangle.Name(a.dumps[f.dump-1].Dump.Functions[f.ref].Name)
}

// flags returns the flags of location id's function.
func (a *aggregator) flags(id uint32) functionFlags { return a.fns[a.loc(id).fn].flags }

// loc returns location id.
func (a *aggregator) loc(id uint32) location { return a.locs.at(int(id - 1)) }

// frame returns the first frame seen of location id-1 (but its From and
// Until).
func (a *aggregator) frame(i uint32) symbolize.Frame {
	if fr, ok := a.oddFrames[i]; ok {
		return fr
	}
	l := a.locs.at(int(i))
	fr := a.fnFrame(l.fn)
	fr.Addr = l.addr
	return fr
}

// inlineChain returns the methods inlined at fr, outermost first (see
// dumpindex.Code.InlineChain), or none when they are folded.
func (a *aggregator) inlineChain(fr symbolize.Frame) []dumpindex.InlineFrame {
	if fr.Symbol.JIT == nil || a.noInline {
		return nil
	}
	return fr.Symbol.JIT.InlineChain(fr.Symbol.LoadAddr(fr.Addr))
}

// RunStages gives a profile per stage, in order, each with the filter
// narrowed to the stage: its times, or the stage the program marked. All
// come from one build of the address spaces and one read of the samples.
// Without stages it gives one profile.
func RunStages(opts Options, specs []stages.Spec) ([]*Result, error) {
	if len(specs) == 0 {
		return run(opts, []Filter{opts.Filter})
	}
	start, end := opts.Filter.Start, opts.Filter.End
	var first uint64
	filters := make([]Filter, len(specs))
	for i, st := range specs {
		f := opts.Filter
		f.Start, f.End, f.Stage = start, end, ""
		if st.Marked {
			f.Stage = st.Name
		} else {
			if first == 0 {
				var err error
				if first, err = firstSampleTime(opts.Input); err != nil {
					return nil, err
				}
			}
			var err error
			if f.Start, f.End, err = st.Window(first, start, end); err != nil {
				return nil, err
			}
		}
		filters[i] = f
	}
	return run(opts, filters)
}

// firstSampleTime reads when the recording's first sample was taken.
func firstSampleTime(path string) (uint64, error) {
	f, err := perfdata.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	first, _, ok, err := f.SampleTime()
	if err == nil && !ok {
		err = fmt.Errorf("%s has no sample-time section, so --stage times cannot be placed: give absolute times with --time", path)
	}
	return first, err
}
