package jitsources

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

// bootSlack is how far the boot times a recording and this machine give
// may differ for one boot: the two clock readings of each are a few
// microseconds apart, and NTP's slewing moves the wall clock against the
// monotonic one by milliseconds a day. A wall clock stepped by more, or a
// suspend (the monotonic clock stops), makes a recording of this boot look
// like one of another: its processes are then not looked for among the
// live ones, the safe side.
const bootSlack = 30 * time.Second

// Elsewhere tells why the recording r was not made on this boot of this
// machine, or "" when, as far as it tells, it was. Its pids then name
// other processes here, or none: nothing of theirs may be read for it (a
// pid reused since a reboot passes the start-time check, which compares
// times of two boots). A recording that says neither its host nor its
// clock is taken as this machine's, as before either was recorded.
func Elsewhere(r *perfdata.Reader) string {
	if host, ok, err := r.StringFeature(perfdata.FeatureHostname); err == nil && ok {
		if here, err := os.Hostname(); err == nil && host != here {
			return fmt.Sprintf("it was recorded on %q, not here (%q)", host, here)
		}
	}
	cd, ok, err := r.ClockData()
	if err != nil || !ok || cd.ClockID != unix.CLOCK_MONOTONIC {
		return ""
	}
	var mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return ""
	}
	then := time.Unix(0, int64(cd.WallNs-cd.ClockNs))
	now := time.Now().Add(-time.Duration(mono.Nano()))
	if d := then.Sub(now).Abs(); d > bootSlack {
		return fmt.Sprintf("it was recorded on a boot that began at %s, not this one (%s)", then.Format(time.DateTime), now.Format(time.DateTime))
	}
	return ""
}

// Began is a time by which every process that the recording describes
// without a time was running: the records perf and jitprof record make of
// the processes that ran before the recording began have none. It is the
// first sample's time, else when the recording's clock data was taken (at
// its start), for a recording whose clock data says its clock is
// CLOCK_MONOTONIC, the clock a live process's start is compared on; 0 for
// any other. Without clock data a recording's boot is unknown (Elsewhere
// cannot tell it from this one), and a first sample days into an earlier
// boot would pass every process started since this one.
func Began(r *perfdata.Reader) uint64 {
	cd, ok, err := r.ClockData()
	if !ok || err != nil || cd.ClockID != unix.CLOCK_MONOTONIC {
		return 0
	}
	if first, _, ok, err := r.SampleTime(); ok && err == nil {
		return first
	}
	return cd.ClockNs
}
