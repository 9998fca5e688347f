package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jitprof/jitprof/internal/record"
)

// durationFlag is a duration given as Go writes one (1m30s, 250ms) or, as
// perf and timeout(1) take it, in plain seconds (1.5).
type durationFlag struct{ d *time.Duration }

// String gives a zero duration as "0", which pflag takes for a zero
// default and leaves out of the help; "0s" it printed, as "(default 0s)",
// which read as a value given: --off-cpu keeping every block, when
// recording no switch is the default.
func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0"
	}
	return f.d.String()
}

func (f durationFlag) Set(s string) error {
	if sec, err := strconv.ParseFloat(s, 64); err == nil {
		if sec < 0 || sec > float64(1<<63-1)/1e9 {
			return fmt.Errorf("%q: not a duration we can wait", s)
		}
		*f.d = time.Duration(sec * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return fmt.Errorf("%q: want seconds (1.5) or a duration (90s, 2m)", s)
	}
	*f.d = d
	return nil
}

func (durationFlag) Type() string { return "duration" }

// count writes n things: "1 dump", "2 dumps".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// callGraphFlags turns -g and --call-graph into a call graph and a stack
// copy size: as in perf, -g is --call-graph fp, and --call-graph wins.
func callGraphFlags(fp bool, graph string) (record.CallGraph, uint32, error) {
	if graph != "" {
		cg, size, err := record.ParseCallGraph(graph)
		if err != nil {
			return 0, 0, &exitError{code: 2, err: err}
		}
		return cg, size, nil
	}
	if fp {
		return record.FramePointers, 0, nil
	}
	return 0, 0, nil
}

// samplingFlags turns -e and -p's values into record's: the event, nil for
// the default, and the pids. A bad event is a usage error.
func samplingFlags(event string, pids []uint) (*record.Event, []int, error) {
	var ev *record.Event
	if event != "" {
		e, err := record.ParseEvent(event)
		if err != nil {
			return nil, nil, &exitError{code: 2, err: err}
		}
		ev = &e
	}
	var ps []int
	for _, p := range pids {
		ps = append(ps, int(p))
	}
	return ev, ps, nil
}

// recordError is the exit of a recording that failed: status 2, as for any
// usage error, when an option's value was refused before recording began
// (-F over the kernel's limit, -m not a power of two), else 1.
func recordError(err error) error {
	if oe := (*record.OptionError)(nil); errors.As(err, &oe) {
		return &exitError{code: 2, err: err}
	}
	return &exitError{code: 1, err: err}
}
