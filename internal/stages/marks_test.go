package stages

import (
	"testing"

	"github.com/jitprof/jitprof/internal/dumpindex"
	"github.com/jitprof/jitprof/internal/jitsources"
	"github.com/jitprof/jitprof/jitdump"
)

// TestStagesAt: the state at a time is the last mark's at or before it, per
// process; before any mark, and in a process without marks, stage "" with
// accounting on.
func TestStagesAt(t *testing.T) {
	mark := func(ts uint64, name string, on bool) *jitdump.StageMark {
		return &jitdump.StageMark{RecordHeader: jitdump.RecordHeader{Timestamp: ts}, Name: name, Accounting: on}
	}
	// Pid 7's runtime ran in a pid namespace, where it was pid 1: its marks
	// are the recorded pid's.
	dumps := []*jitsources.Dump{
		{Pid: 7, Dump: &dumpindex.Dump{Header: jitdump.Header{Pid: 1}, Marks: []*jitdump.StageMark{mark(100, "init", true), mark(200, "init", false), mark(300, "work", true), mark(300, "work", false)}}},
		{Pid: 8, Dump: &dumpindex.Dump{Header: jitdump.Header{Pid: 8}}},
	}
	s := NewMarks(dumps)
	tests := []struct {
		pid   uint32
		t     uint64
		stage string
		on    bool
	}{
		{7, 99, "", true},
		{7, 100, "init", true},
		{7, 199, "init", true},
		{7, 200, "init", false},
		{7, 300, "work", false}, // two marks at one time: the later in the file holds
		{7, 1 << 62, "work", false},
		{8, 250, "", true},
		{1, 250, "", true},
		{9, 250, "", true},
	}
	for _, tc := range tests {
		if stage, on := s.At(tc.pid, tc.t); stage != tc.stage || on != tc.on {
			t.Errorf("At(%d, %d) = %q, %t; want %q, %t", tc.pid, tc.t, stage, on, tc.stage, tc.on)
		}
	}
	if names := s.Names(); len(names) != 2 || names[0] != "init" || names[1] != "work" || !s.Has("work") || s.Has("other") {
		t.Errorf("Names() = %q", names)
	}
	if NewMarks(dumps[1:]) != nil {
		t.Error("dumps without marks make Marks")
	}
	var none *Marks
	if stage, on := none.At(7, 1); stage != "" || !on || none.Has("init") {
		t.Error("nil Marks must keep everything")
	}
}
