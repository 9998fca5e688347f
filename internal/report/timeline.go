package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jitprof/jitprof/internal/contract"
)

// The timeline's bounds, which keep the page's size bounded whatever the
// recording: the threads with the most time get a row each (the rest are
// counted, not drawn), and a slot names its heaviest stack of each kind of
// time, no more.
const (
	timelineThreads = 32
	// timelineSlots is more slots than a timeline profile has (200):
	// a profile that numbers its slots past it is not one.
	timelineSlots = 4096
)

// The kinds of a thread's time in the timeline.
const (
	onCPU    = iota
	blocked  // off the CPU, waiting for something to happen
	runnable // off the CPU, preempted, waiting for a CPU
	timeKinds
)

// htmlTimeline is a stage's timeline in the page: when each thread was
// on its CPU, blocked, or waiting for a CPU, by time slot, from a profile
// whose samples carry contract.SlotLabel.
type htmlTimeline struct {
	Width int64 `json:"width"` // of a slot, in nanoseconds
	Slots int   `json:"slots"`
	// CPU tells whether the profile has time on the CPU (a wall-clock
	// profile) besides the time off it.
	CPU     bool         `json:"cpu"`
	Threads []htmlThread `json:"threads"` // the most time first
	// Hidden counts the threads left out for room, HiddenTime their time.
	Hidden     int   `json:"hidden"`
	HiddenTime int64 `json:"hiddenTime"`
	// Stacks are the stacks the slots name, root first, as frames of
	// the page's table.
	Stacks [][]int32 `json:"stacks"`
}

// htmlThread is a thread's row. Its arrays are by kind of time (on the
// CPU, blocked, runnable), then by slot: the time, in nanoseconds; the
// heaviest stack (in htmlTimeline.Stacks, -1 for none) and its time.
type htmlThread struct {
	Comm  string             `json:"comm"` // the name it had for most of its time
	Pid   int64              `json:"pid"`
	Tid   int64              `json:"tid"`
	Time  [timeKinds][]int64 `json:"time"`
	Stack [timeKinds][]int32 `json:"stack"`
	Top   [timeKinds][]int64 `json:"top"`
}

// timeline builds the timeline of p, whose model is m and whose model
// frames are the page's frames; nil when p's samples have no time slots
// or p holds no time off the CPU.
func (b *flameBuilder) timeline(p *contract.Profile, m *model, frames []int32) (*htmlTimeline, error) {
	on, off := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case contract.CPUType:
			on = i
		case contract.OffCPUType:
			off = i
		}
	}
	if off < 0 || !slices.ContainsFunc(p.Samples, func(s contract.Sample) bool { _, ok := p.LabelsOf(&s).NumLabel(contract.SlotLabel); return ok }) {
		return nil, nil
	}
	tl := &htmlTimeline{CPU: on >= 0}

	type thread struct {
		pid, tid int64
		comms    map[string]int64 // the thread's time by its name
		total    int64
	}
	type slotStack struct {
		thread, slot, stack int32
	}
	var threads []*thread
	byTid := map[[2]int64]int32{}
	stackIDs := map[string]int32{}
	var stacks [][]int32 // all the profile's, root first
	weights := map[slotStack][timeKinds]int64{}
	var key []byte
	var slot, width []int64
	for i := range p.Samples {
		labels := p.LabelsOf(&p.Samples[i])
		slot, width = numLabels(slot[:0], labels, contract.SlotLabel), numLabels(width[:0], labels, contract.SlotWidthLabel)
		if len(slot) != 1 || len(width) != 1 || slot[0] < 0 || slot[0] >= timelineSlots || width[0] <= 0 {
			return nil, fmt.Errorf("report: a sample of the timeline has time slot %v of width %v: want one slot below %d, one width above 0", slot, width, timelineSlots)
		}
		if tl.Width == 0 {
			tl.Width = width[0]
		} else if width[0] != tl.Width {
			return nil, fmt.Errorf("report: the timeline's slots are %d ns and %d ns wide", tl.Width, width[0])
		}
		tl.Slots = max(tl.Slots, int(slot[0])+1)
		smp := &m.samples[i]
		values := p.Value(i)
		var w [timeKinds]int64
		if on >= 0 {
			w[onCPU] = values[on]
		}
		stack := m.stack(smp)
		if m.name(&m.frames[stack.at(0)]) == contract.PreemptedFrame {
			w[runnable] = values[off]
		} else {
			w[blocked] = values[off]
		}
		all := w[onCPU] + w[blocked] + w[runnable]
		if all == 0 {
			continue
		}
		id := [2]int64{smp.pid, -1}
		if tid, ok := labels.NumLabel("tid"); ok {
			id[1] = tid
		}
		ti, ok := byTid[id]
		if !ok {
			ti = int32(len(threads))
			byTid[id] = ti
			threads = append(threads, &thread{pid: id[0], tid: id[1], comms: map[string]int64{}})
		}
		th := threads[ti]
		th.comms[m.comms[smp.comm]] += all
		th.total += all

		key = key[:0]
		for k := range stack.len() {
			key = strconv.AppendInt(key, int64(frames[stack.at(k)]), 10)
			key = append(key, ';')
		}
		si, ok := stackIDs[string(key)]
		if !ok {
			si = int32(len(stacks))
			stackIDs[string(key)] = si
			root := make([]int32, 0, stack.len())
			for k := stack.len() - 1; k >= 0; k-- {
				root = append(root, frames[stack.at(k)])
			}
			stacks = append(stacks, root)
		}
		k := slotStack{ti, int32(slot[0]), si}
		sum := weights[k]
		for kind := range sum {
			sum[kind] += w[kind]
		}
		weights[k] = sum
	}

	order := make([]int32, len(threads))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(x, y int32) int {
		a, b := threads[x], threads[y]
		return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.pid, b.pid), cmp.Compare(a.tid, b.tid))
	})
	row := make([]int32, len(threads)) // by thread: its row, or -1
	for i, ti := range order {
		row[ti] = -1
		if i >= timelineThreads {
			tl.Hidden++
			tl.HiddenTime += threads[ti].total
			continue
		}
		row[ti] = int32(i)
		th := threads[ti]
		ht := htmlThread{Comm: heaviest(th.comms), Pid: th.pid, Tid: th.tid}
		for kind := range timeKinds {
			ht.Time[kind] = make([]int64, tl.Slots)
			ht.Top[kind] = make([]int64, tl.Slots)
			ht.Stack[kind] = slices.Repeat([]int32{-1}, tl.Slots)
		}
		tl.Threads = append(tl.Threads, ht)
	}

	// The heaviest stacks, ties to the stack seen first; the page holds
	// only the stacks they name.
	keys := make([]slotStack, 0, len(weights))
	for k := range weights {
		if row[k.thread] >= 0 {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y slotStack) int {
		return cmp.Or(cmp.Compare(x.thread, y.thread), cmp.Compare(x.slot, y.slot), cmp.Compare(x.stack, y.stack))
	})
	for _, k := range keys {
		ht := &tl.Threads[row[k.thread]]
		for kind, w := range weights[k] {
			ht.Time[kind][k.slot] += w
			if w > ht.Top[kind][k.slot] {
				ht.Stack[kind][k.slot], ht.Top[kind][k.slot] = k.stack, w
			}
		}
	}
	kept := map[int32]int32{}
	for i := range tl.Threads {
		for _, named := range tl.Threads[i].Stack {
			for s, stack := range named {
				if stack < 0 {
					continue
				}
				id, ok := kept[stack]
				if !ok {
					id = int32(len(tl.Stacks))
					kept[stack] = id
					tl.Stacks = append(tl.Stacks, stacks[stack])
				}
				named[s] = id
			}
		}
	}
	return tl, nil
}

// numLabels appends the values of key in labels to values.
func numLabels(values []int64, labels *contract.LabelSet, key string) []int64 {
	for _, l := range labels.Num {
		if l.Key == key {
			values = append(values, l.Value)
		}
	}
	return values
}

// heaviest returns the key of the largest value, the least key of those
// tied.
func heaviest(m map[string]int64) string {
	var best string
	var most int64 = -1
	for k, v := range m {
		if v > most || (v == most && strings.Compare(k, best) < 0) {
			best, most = k, v
		}
	}
	return best
}

//go:embed timeline.js
var timelineJS string
