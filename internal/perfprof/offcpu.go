package perfprof

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/symbolize"
	"github.com/jitprof/jitprof/perfdata"
)

// View says what a profile measures.
type View int

const (
	// CPUView is the sampled event's profile.
	CPUView View = iota
	// OffCPUView is the time threads spent off their CPU, blocked or
	// waiting to run, by the stack they left it in: each switch-out
	// sample weighted by the time until its thread's next switch-in.
	OffCPUView
	// WallView is both, in time: each thread's CPU samples (their time)
	// and its blocked intervals, which add up to its elapsed time.
	WallView
)

// The sample types of the off-CPU and wall-clock views. A wall-clock
// profile holds cpu and off-cpu apart, pprof -sample_index picks either,
// and wall, their sum, is the default.
const (
	OffCPUType = contract.OffCPUType
	CPUType    = contract.CPUType
	WallType   = "wall"
)

// ShortFrame names the time of the blocked intervals whose stacks the
// recording left out (record --off-cpu=MIN): shorter than MIN.
const ShortFrame = "[off-cpu: blocks too short to keep their stacks]"

// PreemptedFrame ends the stacks of intervals a thread spent runnable,
// preempted, waiting for a CPU rather than for something to happen.
const PreemptedFrame = contract.PreemptedFrame

// isSwitchEvent tells whether at is the event record --off-cpu adds (perf
// record -e context-switches -c 1 too): a sample at every switch-out.
func isSwitchEvent(at *perfdata.Attr) bool {
	const typeSoftware, contextSwitches = 1, 3
	return at.Type == typeSoftware && at.Config == contextSwitches && at.Flags&perfdata.AttrFreq == 0 && at.SamplePeriod == 1
}

// offCPU pairs switch-out samples with their threads' switch-ins. The
// records of one thread arrive out of time order (from several CPUs'
// buffers, and a recording's samples written a round late), so they are
// kept and paired per thread, sorted, once all are read.
type offCPU struct {
	attrs   map[*perfdata.Attr]bool // the switch event's
	threads map[uint32]*switches
	end     uint64 // the newest time in the recording
	short   uint32 // the stack of ShortFrame, made when needed
	// preempted are the stacks of PreemptedFrame called from each stack.
	preempted map[uint32]uint32
	// Unended counts the intervals of threads still off their CPU when
	// the recording ended, weighted to its end; Unpaired the switch-outs
	// without a switch record (a recording without context_switch), which
	// weigh nothing.
	unended, unpaired int
}

// switches are one thread's switch records and samples.
type switches struct {
	pid     uint32
	outs    []switchOut
	ins     []uint64 // times of the switch-ins
	samples []switchSample
	exit    uint64 // of its EXIT record, 0 without one
}

type switchOut struct {
	time    uint64
	preempt bool // the thread was still runnable
}

type switchSample struct {
	time uint64
	key  stackKey
	kept bool // by the filter: the interval of one dropped is not counted
}

// setView makes a collect what view measures: the switch event's samples
// for the off-CPU view, the chosen event's and those for the wall view.
func (a *aggregator) setView(attrs []*perfdata.Attr, view View, input string) error {
	if view == CPUView {
		return nil
	}
	a.off = &offCPU{attrs: map[*perfdata.Attr]bool{}, threads: map[uint32]*switches{}}
	for _, at := range attrs {
		if isSwitchEvent(at) {
			a.off.attrs[at] = true
		}
	}
	if len(a.off.attrs) == 0 {
		return fmt.Errorf("%s has no switch-out samples: record with jitprof record --off-cpu", input)
	}
	if view == OffCPUView {
		clear(a.attrs)
		a.event, a.unit, a.period = OffCPUType, "nanoseconds", 0
	} else {
		for at := range a.attrs {
			if a.off.attrs[at] {
				return fmt.Errorf("%s: the wall-clock view adds the switch samples to another event's: choose that one with --event", input)
			}
		}
		if a.unit != "nanoseconds" {
			// cycles and the like: each sample stands for a period
			// of the frequency asked for, while the thread ran.
			for at := range a.attrs {
				if at.Flags&perfdata.AttrFreq != 0 && at.SamplePeriod > 0 {
					a.period, a.unit = uint64(time.Second)/at.SamplePeriod, "nanoseconds"
				}
			}
			if a.unit != "nanoseconds" {
				return fmt.Errorf("%s: the wall-clock view needs CPU samples in time: a cpu-clock or frequency-sampled event, not %s", input, a.event)
			}
		}
		a.event = WallType
	}
	for at := range a.off.attrs {
		a.attrs[at] = true
	}
	return nil
}

// thread returns tid's switches.
func (o *offCPU) thread(pid, tid uint32) *switches {
	th := o.threads[tid]
	if th == nil {
		th = &switches{pid: pid}
		o.threads[tid] = th
	}
	return th
}

// record takes a switch or EXIT record.
func (o *offCPU) record(rec perfdata.Record) {
	switch rec := rec.(type) {
	case *perfdata.Switch:
		th := o.thread(rec.Trailer.Pid, rec.Trailer.Tid)
		t := rec.Trailer.Time
		o.end = max(o.end, t)
		if rec.Out() {
			th.outs = append(th.outs, switchOut{t, rec.Misc&perfdata.MiscSwitchOutPreempt != 0})
		} else {
			th.ins = append(th.ins, t)
		}
	case *perfdata.Task:
		if rec.Type == perfdata.TypeExit {
			o.thread(rec.Pid, rec.Tid).exit = rec.Time
		}
		o.end = max(o.end, rec.Time)
	}
}

// sample notes a switch-out sample, before the filter sees it: an
// interval whose sample the filter drops is not counted, and one whose
// stack was not recorded at all is told from it.
func (o *offCPU) sample(s *perfdata.Sample, t uint64) {
	th := o.thread(s.Pid, s.Tid)
	th.samples = append(th.samples, switchSample{time: t})
}

// keep marks the sample noted last for key's thread as kept, with its
// stack, to weigh once its thread's switch-in is known.
func (o *offCPU) keep(key stackKey) {
	th := o.threads[key.tid]
	last := &th.samples[len(th.samples)-1]
	last.key, last.kept = key, true
}

// settle weighs every blocked interval: from a switch-out to the thread's
// next switch-in, to the stack of the sample taken at that switch-out (the
// sample comes just before its switch record), or, when the recording
// left the stack out as too short, to ShortFrame. A thread that never
// came back is weighed until it exited or, still alive, until the end of
// the recording.
func (a *aggregator) settle() {
	o := a.off
	// In order of thread: names and locations made here get stable ids.
	for _, tid := range slices.Sorted(maps.Keys(o.threads)) {
		th := o.threads[tid]
		slices.SortFunc(th.outs, func(x, y switchOut) int { return cmp.Compare(x.time, y.time) })
		slices.Sort(th.ins)
		slices.SortFunc(th.samples, func(x, y switchSample) int { return cmp.Compare(x.time, y.time) })
		next := 0 // the first sample not yet weighed
		for _, sw := range th.outs {
			out := sw.time
			// The sample of this switch: the last one at or before it.
			var s *switchSample
			for next < len(th.samples) && th.samples[next].time <= out {
				s = &th.samples[next]
				next++
			}
			from := out
			if s != nil {
				from = s.time
			}
			// The switch-in after it; none after the clock's last
			// instant, whose next one wraps to 0.
			i := len(th.ins)
			if out < math.MaxUint64 {
				i, _ = slices.BinarySearch(th.ins, out+1)
			}
			var until uint64
			switch {
			case i < len(th.ins):
				until = th.ins[i]
			case th.exit != 0:
				continue // its last switch, dying
			default:
				until = o.end
				o.unended++
			}
			key := stackKey{pid: th.pid, tid: tid}
			switch {
			case s != nil && !s.kept:
				continue
			case s != nil:
				key = s.key
			default:
				comm, ok := a.keepsStackless(th.pid, tid, out)
				if !ok {
					continue
				}
				key.comm, key.stack = comm, a.shortStack()
			}
			if sw.preempt {
				key.stack = a.preemptedStack(key.stack)
			}
			a.addBlocked(key, from, until)
		}
		o.unpaired += len(th.samples) - next
	}
	if o.unended > 0 {
		a.warn(fmt.Errorf("%d threads were still off their CPU when the recording ended: their last interval is counted until that end", o.unended))
	}
	if o.unpaired > 0 {
		a.warn(fmt.Errorf("%d switch-out samples have no switch record after them (a recording without PERF_RECORD_SWITCH: record with jitprof record --off-cpu, or perf record --switch-events): they weigh nothing", o.unpaired))
	}
}

// keepsStackless applies the filter to an interval whose stack was not
// recorded, as add applies it to samples, and returns its thread's name's
// id when it is kept. A symbol filter keeps none: no frame to match.
func (a *aggregator) keepsStackless(pid, tid uint32, t uint64) (uint32, bool) {
	f := &a.filter
	if (len(f.Pids) > 0 && !slices.Contains(f.Pids, pid)) || (len(f.Tids) > 0 && !slices.Contains(f.Tids, tid)) ||
		t < f.Start || (f.End != 0 && t >= f.End) || f.Symbol != nil {
		return 0, false
	}
	if stage, on := a.stages.At(pid, t); !on || (f.Stage != "" && stage != f.Stage) {
		return 0, false
	}
	comm := a.space.Comm(tid, t)
	if comm == "" {
		comm = fmt.Sprintf(":%d", tid)
	}
	if len(f.Comms) > 0 && !slices.Contains(f.Comms, comm) {
		return 0, false
	}
	id, ok := a.commIDs[comm]
	if !ok {
		id = uint32(len(a.comms))
		a.comms = append(a.comms, comm)
		a.commIDs[comm] = id
	}
	return id, true
}

// offCPUModule holds the frames that stand for no code.
var offCPUModule = &symbolize.Module{Name: contract.OffCPUFile, Kind: symbolize.Anon}

// shortStack returns the stack of ShortFrame alone.
func (a *aggregator) shortStack() uint32 {
	if a.off.short == 0 {
		loc := a.intern(symbolize.Frame{Module: offCPUModule, Symbol: symbolize.Symbol{Name: ShortFrame}}, a.whole(0))
		a.off.short = a.stackTab.intern([]uint32{loc})
	}
	return a.off.short
}

// preemptedStack returns the stack of PreemptedFrame called from stack.
func (a *aggregator) preemptedStack(stack uint32) uint32 {
	if id, ok := a.off.preempted[stack]; ok {
		return id
	}
	if a.off.preempted == nil {
		a.off.preempted = map[uint32]uint32{}
	}
	loc := a.intern(symbolize.Frame{Module: offCPUModule, Symbol: symbolize.Symbol{Name: PreemptedFrame}}, a.whole(0))
	id, buf := a.stackTab.called(loc, stack, a.ids[:0])
	a.ids = buf
	a.off.preempted[stack] = id
	return id
}

// sampleTypes are the profile's sample types and its default.
func (a *aggregator) sampleTypes() ([]contract.ValueType, string) {
	count := contract.ValueType{Type: "samples", Unit: "count"}
	switch {
	case a.off == nil:
		return []contract.ValueType{count, {Type: a.event, Unit: a.unit}}, "samples"
	case a.event == OffCPUType:
		return []contract.ValueType{count, {Type: OffCPUType, Unit: "nanoseconds"}}, OffCPUType
	}
	return []contract.ValueType{count, {Type: WallType, Unit: "nanoseconds"}, {Type: CPUType, Unit: "nanoseconds"}, {Type: OffCPUType, Unit: "nanoseconds"}}, WallType
}

// values appends a distinct sample's values to dst, as sampleTypes lays
// them out.
func (a *aggregator) values(dst []int64, tot total) []int64 {
	switch {
	case a.off == nil:
		return append(dst, tot.count, tot.period)
	case a.event == OffCPUType:
		return append(dst, tot.count, tot.off)
	}
	return append(dst, tot.count, tot.period+tot.off, tot.period, tot.off)
}
