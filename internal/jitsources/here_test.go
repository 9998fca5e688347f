package jitsources

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/fixtures"
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
			f := withFeatures(t, tc.features)
			if why := Elsewhere(f.Reader); (why == "") != tc.here {
				t.Errorf("Elsewhere = %q, want here %v", why, tc.here)
			}
		})
	}
}

// withFeatures returns a recording of no samples whose header holds
// features.
func withFeatures(t *testing.T, features []perfdata.Feature) *perfdata.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perf.data")
	attr := &perfdata.Attr{Type: 1, SampleType: perfdata.SampleIP | perfdata.SampleTID, IDs: []uint64{1}}
	w, err := perfdata.Create(path, perfdata.Options{Attrs: []*perfdata.Attr{attr}, Features: features})
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
	t.Cleanup(func() { f.Close() })
	return f
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

// TestBegan: the time a recording's untimed records stand for is its first
// sample's, else its clock data's, for a recording on CLOCK_MONOTONIC by its
// clock data; else unknown, even with a first sample's time, since without
// clock data the recording may be of another boot.
func TestBegan(t *testing.T) {
	sampleTime := perfdata.Feature{ID: perfdata.FeatureSampleTime, Data: binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 5000), 9000)}
	for _, tc := range []struct {
		name     string
		features []perfdata.Feature
		want     uint64
	}{
		{"says nothing", nil, 0},
		{"sample time without clock data", []perfdata.Feature{sampleTime}, 0},
		{"sample time on another clock", []perfdata.Feature{sampleTime, perfdata.ClockDataFeature(perfdata.ClockData{ClockID: unix.CLOCK_REALTIME, WallNs: 1, ClockNs: 4000})}, 0},
		{"sample time", []perfdata.Feature{sampleTime, perfdata.ClockDataFeature(perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNs: 1, ClockNs: 4000})}, 5000},
		{"clock data", []perfdata.Feature{perfdata.ClockDataFeature(perfdata.ClockData{ClockID: unix.CLOCK_MONOTONIC, WallNs: 1, ClockNs: 4000})}, 4000},
		{"clock data of another clock", []perfdata.Feature{perfdata.ClockDataFeature(perfdata.ClockData{ClockID: unix.CLOCK_REALTIME, WallNs: 1, ClockNs: 4000})}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := withFeatures(t, tc.features)
			if got := Began(f.Reader); got != tc.want {
				t.Errorf("Began = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRunningBeforeTheRecording: a process that ran before the recording
// began is described without a time (the marker perf and jitprof record
// write of its dump has time 0). While it runs, its dump is its owner's to
// have, looked up as a running process's by the time the recording began
// (Recording.Began), not refused as a gone process's file that root does
// not own.
func TestRunningBeforeTheRecording(t *testing.T) {
	user := fixtures.NewAttacker(t)
	pid := sleeping(t, user)
	path := filepath.Join(user.Dir(t), fmt.Sprintf("jit-%d.dump", pid))
	writeDump(t, path)
	user.Chown(t, path)
	for _, tc := range []struct {
		name  string
		began uint64
		read  bool
	}{
		{"the recording says when it began", now(), true},
		{"it does not", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Recording{Markers: []Marker{{Path: path, Pid: pid}}, Began: tc.began}
			var warned strings.Builder
			rec.Load(nil, func(err error) { fmt.Fprintln(&warned, err) })
			defer rec.Close()
			if read := len(rec.Dumps) == 1; read != tc.read {
				t.Errorf("read %s: %v, want %v (warned %q)", path, read, tc.read, warned.String())
			}
		})
	}
}
