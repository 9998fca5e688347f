// Package analyze turns a perf.data recording into a profile
// (github.com/google/pprof/profile), naming every sample's frames with
// internal/symbolize at the moment the sample was taken: no perf inject
// step, and code that moved or was replaced at one address is attributed
// to whoever owned it then.
//
// Samples are streamed and merged as they are read: memory grows with the
// distinct stacks, not with the samples.
package analyze

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/jitcode"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/internal/symname"
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
}

// Result is the profile and what went into it.
type Result struct {
	Profile *profile.Profile
	Space   *symbolize.Space
	Event   string
	// Samples counts the event's samples read, Kept those the filter
	// kept, Jitted the kept ones whose leaf is in jitted code.
	Samples, Kept, Jitted int
	// Lost is how many samples the kernel dropped (LOST records).
	Lost uint64
	// Frames maps each profile Location to the frame it came from, by
	// Location ID - 1. Their strings may alias the dumps: use them before
	// Close.
	Frames []symbolize.Frame
}

// Close releases the dumps the Space holds mapped. The Profile stays valid.
func (r *Result) Close() error { return r.Space.Close() }

// Run reads opts.Input twice: once to build the address spaces, once to
// symbolize and merge the samples.
func Run(opts Options) (*Result, error) {
	f, err := perfdata.Open(opts.Input)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := jitcode.CheckClock(f.Attrs()); err != nil && hasMarkers(opts.Input) {
		return nil, fmt.Errorf("%s: %w", opts.Input, err)
	}
	space, err := symbolize.Build(f.Reader, opts.Options)
	if err != nil {
		return nil, err
	}

	g, err := perfdata.Open(opts.Input)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	a, err := newAggregator(g.Reader, space, opts)
	if err != nil {
		return nil, err
	}
	if err := a.read(g.Reader); err != nil {
		return nil, err
	}
	return a.result(), nil
}

// hasMarkers tells whether the recording maps a jitdump marker: only then
// do its times have to be the dumps' clock.
func hasMarkers(path string) bool {
	f, err := perfdata.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	f.ReuseRecord = true
	for {
		raw, err := f.NextRaw()
		if err != nil {
			return false
		}
		switch raw.Type() {
		case perfdata.TypeMmap, perfdata.TypeMmap2:
			switch rec := f.Decode(raw).(type) {
			case *perfdata.Mmap:
				if jitcode.IsMarker(rec.Filename) {
					return true
				}
			case *perfdata.Mmap2:
				if jitcode.IsMarker(rec.Filename) {
					return true
				}
			}
		}
	}
}

// location is a distinct frame: the same function at the same address.
type location struct {
	module *symbolize.Module
	name   string
	start  uint64
	addr   uint64
}

// stack is a distinct sample: its frames and labels.
type stack struct {
	pid, tid uint32
	comm     string
	locs     []uint32 // location ids, leaf first
	count    int64
	period   int64
}

type aggregator struct {
	space  *symbolize.Space
	filter Filter
	attrs  map[*perfdata.Attr]bool // of the chosen event
	event  string
	unit   string
	period uint64 // the fixed period, 0 when sampled by frequency

	locIDs  map[location]uint32
	frames  []symbolize.Frame
	names   []string // demangled, by location id - 1
	matches []bool   // by location id - 1: the name matches the symbol filter
	stacks  map[string]*stack
	key     []byte
	ids     []uint32

	samples, kept, jitted int
	lost                  uint64
	first, last           uint64
}

func newAggregator(r *perfdata.Reader, space *symbolize.Space, opts Options) (*aggregator, error) {
	a := &aggregator{
		space:  space,
		filter: opts.Filter,
		attrs:  make(map[*perfdata.Attr]bool),
		locIDs: make(map[location]uint32),
		stacks: make(map[string]*stack),
		first:  math.MaxUint64,
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

func (a *aggregator) read(r *perfdata.Reader) error {
	r.ReuseRecord = true
	for {
		raw, err := r.NextRaw()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		switch raw.Type() {
		case perfdata.TypeSample:
			if s, ok := r.Decode(raw).(*perfdata.Sample); ok && a.attrs[s.Attr] {
				a.add(s)
			}
		case perfdata.TypeLost:
			if l, ok := r.Decode(raw).(*perfdata.Lost); ok {
				a.lost += l.Lost
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
	if (len(f.Pids) > 0 && !slices.Contains(f.Pids, s.Pid)) ||
		(len(f.Tids) > 0 && !slices.Contains(f.Tids, s.Tid)) ||
		t < f.Start || (f.End != 0 && t >= f.End) {
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
	kernel := s.Misc&perfdata.MiscCPUModeMask == perfdata.MiscKernel
	if s.Attr.SampleType&perfdata.SampleCallchain == 0 || len(s.Callchain) == 0 {
		a.ids = append(a.ids, a.locate(s.Pid, s.IP, t, kernel))
	} else {
		leaf := true
		for _, pc := range s.Callchain {
			if pc >= perfdata.ContextMax {
				kernel = pc == perfdata.ContextKernel
				continue
			}
			// A caller's address is where its call returns to: the
			// call is the instruction before.
			if !leaf {
				pc--
			}
			leaf = false
			a.ids = append(a.ids, a.locate(s.Pid, pc, t, kernel))
		}
	}
	if len(a.ids) == 0 {
		return
	}
	if f.Symbol != nil && !slices.ContainsFunc(a.ids, func(id uint32) bool { return a.matches[id-1] }) {
		return
	}
	a.kept++
	if a.frames[a.ids[0]-1].Symbol.JIT != nil {
		a.jitted++
	}
	a.first, a.last = min(a.first, t), max(a.last, t)

	a.key = binary.LittleEndian.AppendUint32(a.key[:0], s.Pid)
	a.key = binary.LittleEndian.AppendUint32(a.key, s.Tid)
	a.key = append(a.key, comm...)
	a.key = append(a.key, 0)
	a.key = append(a.key, unsafe.Slice((*byte)(unsafe.Pointer(&a.ids[0])), 4*len(a.ids))...)
	st := a.stacks[string(a.key)]
	if st == nil {
		st = &stack{pid: s.Pid, tid: s.Tid, comm: comm, locs: slices.Clone(a.ids)}
		a.stacks[string(a.key)] = st
	}
	st.count++
	if a.period != 0 {
		st.period += int64(a.period)
	} else {
		st.period += int64(s.Period)
	}
}

// locate returns the id of the location of pc.
func (a *aggregator) locate(pid uint32, pc, t uint64, kernel bool) uint32 {
	fr := a.space.Lookup(pid, pc, t, kernel)
	key := location{module: fr.Module, name: fr.Symbol.Name, start: fr.Symbol.Start, addr: pc}
	if fr.Symbol.Name == "" {
		key.start = 0
	}
	if id, ok := a.locIDs[key]; ok {
		return id
	}
	a.frames = append(a.frames, fr)
	name := ""
	if fr.Symbol.Name != "" {
		name = symname.Demangle(fr.Symbol.Name)
	}
	a.names = append(a.names, name)
	a.matches = append(a.matches, a.filter.Symbol != nil && name != "" && a.filter.Symbol.MatchString(name))
	id := uint32(len(a.frames))
	a.locIDs[key] = id
	return id
}
