package jitsources

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/perfdata"
)

// TestElsewhere: a recording of another machine, or of this one before
// its last boot, is told apart from one of this boot, by its host name and
// by when its monotonic clock began.
func TestElsewhere(t *testing.T) {
	here, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		t.Fatal(err)
	}
	now := perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNs: uint64(time.Now().UnixNano()), ClockNs: uint64(mono.Nano())}
	earlierBoot := now
	earlierBoot.WallNs -= uint64(time.Hour) // the same monotonic time, an hour before
	for _, tc := range []struct {
		name     string
		features []perfdata.Feature
		here     bool
	}{
		{"says nothing", nil, true},
		{"this host, this boot", []perfdata.Feature{perfdata.StringFeatureOf(perfdata.FeatureHostname, here), perfdata.ClockDataFeature(now)}, true},
		{"this boot, no host", []perfdata.Feature{perfdata.ClockDataFeature(now)}, true},
		{"another host", []perfdata.Feature{perfdata.StringFeatureOf(perfdata.FeatureHostname, here+"-elsewhere"), perfdata.ClockDataFeature(now)}, false},
		{"an earlier boot", []perfdata.Feature{perfdata.StringFeatureOf(perfdata.FeatureHostname, here), perfdata.ClockDataFeature(earlierBoot)}, false},
		{"another clock", []perfdata.Feature{perfdata.ClockDataFeature(perfdata.ClockData{ClockID: unix.CLOCK_REALTIME, WallNs: 1, ClockNs: 1})}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			attr := &perfdata.Attr{Type: 1, SampleType: perfdata.SampleIP | perfdata.SampleTID, IDs: []uint64{1}}
			w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: tc.features})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := perfdata.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if why := Elsewhere(f.Reader); (why == "") != tc.here {
				t.Errorf("Elsewhere = %q, want here %v", why, tc.here)
			}
		})
	}
}

// TestElsewhereLooksIntoNoProcess: for a recording of another machine or
// boot, the live process that has a recorded pid here (this test's own)
// is not looked into: it is not the recorded one.
func TestElsewhereLooksIntoNoProcess(t *testing.T) {
	pid := uint32(os.Getpid())
	var mono unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		t.Fatal(err)
	}
	seen := uint64(mono.Nano())
	live := func(host Host) bool {
		for _, p := range PerfMapPaths(host, pid, seen, nil) {
			if p.Rules.As != nil { // opened as the live process's owner
				return true
			}
		}
		return false
	}
	if !live(Host{}) {
		t.Fatal("this running process is not looked into for a recording of this boot")
	}
	if live(Host{Elsewhere: "recorded on another boot"}) {
		t.Error("a process of this boot was looked into for a recording of another")
	}
}
