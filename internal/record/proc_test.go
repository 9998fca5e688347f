package record

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/jitprof/jitprof/internal/procfs"
	"github.com/jitprof/jitprof/perfdata"
)

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"0", []int{0}, true},
		{"0-3", []int{0, 1, 2, 3}, true},
		{"0-1,4,6-7", []int{0, 1, 4, 6, 7}, true},
		{"", nil, false},
		{"3-1", nil, false},
		{"0-", nil, false},
		{"-1", nil, false},
		{"0-100000", nil, false},
	} {
		got, err := parseCPUList(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,5,7-8", "0", "", "3-1", "0-99999999999", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := parseCPUList(s)
		if err != nil {
			return
		}
		if len(cpus) > maxCPUs || slices.ContainsFunc(cpus, func(c int) bool { return c < 0 || c >= maxCPUs }) {
			t.Fatalf("%q: accepted %d CPUs, %v", s, len(cpus), cpus)
		}
	})
}

// TestSynthesizeSelf describes this test's own process and holds the
// records against /proc: every thread named, every executable mapping
// there, this test binary's among them, and for a DWARF call graph the
// readable ones too, marked as data.
func TestSynthesizeSelf(t *testing.T) {
	for _, cg := range []CallGraph{NoCallGraph, DWARF} {
		t.Run(fmt.Sprint("call graph ", cg), func(t *testing.T) { synthesizeSelf(t, cg) })
	}
}

func synthesizeSelf(t *testing.T, cg CallGraph) {
	attr := newAttr(Event{Name: "cpu-clock"}, attrConfig{freq: 1, callGraph: cg, regs: 0xff0fff, stackSize: 8192})
	var recs []perfdata.Record
	sy := synthesizer{proc: procfs.Host, attr: attr, emit: func(r perfdata.Record) error {
		// The encoding must hold: the writer would refuse it otherwise.
		if _, err := perfdata.AppendRecord(nil, r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
		return nil
	}}
	pid := os.Getpid()
	if err := sy.process(pid); err != nil {
		t.Fatal(err)
	}
	tids, err := sy.threads(pid)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	comms, forks, mmaps, data := map[uint32]bool{}, 0, 0, 0
	sawExe := false
	for _, r := range recs {
		switch r := r.(type) {
		case *perfdata.Comm:
			if r.Pid != uint32(pid) || r.Comm == "" {
				t.Errorf("COMM %+v", r)
			}
			comms[r.Tid] = true
		case *perfdata.Task:
			if r.Pid != uint32(pid) || r.PPid != uint32(pid) || r.Tid == uint32(pid) {
				t.Errorf("FORK %+v: want a thread of the process", r)
			}
			forks++
		case *perfdata.Mmap2:
			if r.Prot&unix.PROT_EXEC != 0 {
				mmaps++
				sawExe = sawExe || r.Filename == exe
			}
			if isData := r.Misc&perfdata.MiscMmapData != 0; isData != (r.Prot&unix.PROT_EXEC == 0) || isData && (cg != DWARF || r.Prot&unix.PROT_READ == 0) {
				t.Errorf("mapping %s, prot %#x, misc %#x synthesized for call graph %d", r.Filename, r.Prot, r.Misc, cg)
			}
			if r.Misc&perfdata.MiscMmapData != 0 {
				data++
			}
		}
	}
	// Threads may come and go meanwhile; the main one stays.
	if !comms[uint32(pid)] || len(comms) < len(tids)/2 || forks != len(comms)-1 {
		t.Errorf("%d COMMs, %d FORKs for %d threads", len(comms), forks, len(tids))
	}
	if !sawExe || mmaps < 3 {
		t.Errorf("%d executable mappings, the test binary %s among them: %v", mmaps, exe, sawExe)
	}
	// The test binary's read-only data, at least, and its heap.
	if cg == DWARF && data < 2 {
		t.Errorf("%d readable data mappings synthesized", data)
	}

	if err := sy.process(1 << 30); err == nil || !strings.Contains(err.Error(), ErrGone.Error()) {
		t.Errorf("a pid that does not exist: %v", err)
	}
}
