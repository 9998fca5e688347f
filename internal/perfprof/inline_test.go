package perfprof_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/dumpindex/synth"
	"github.com/jitprof/jitprof/internal/perfprof"
	"github.com/jitprof/jitprof/jitdump"
)

// inlineRecording writes a recording of one process whose dump has root at
// code with two instances inlined into it, mid over [0x10, 0x40) and, in
// it, leaf over [0x20, 0x30), and a sample at each of the given offsets.
// The pid lies beyond pid_max, so no live process's perf map answers.
func inlineRecording(t *testing.T, offsets ...uint64) string {
	t.Helper()
	const pid, code = 1<<22 + 1, 0x10001000
	dir := t.TempDir()
	rec := synth.NewRecording() // the runtime maps the dump's marker before it loads code
	dump := filepath.Join(dir, fmt.Sprintf("jit-%d.dump", pid))
	rec.Comm(pid, pid, "vm")
	rec.Marker(pid, dump)
	err := synth.WriteDump(dump, pid, func(w *jitdump.Writer) error {
		index, err := w.Load(&jitdump.Function{Name: "root", Addr: code, Code: make([]byte, 0x100),
			Lines: []jitdump.DebugEntry{{Addr: code, Line: 10, File: "root.src"}, {Addr: code + 0x10, Line: 11, File: "root.src"}, {Addr: code + 0x40, Line: 12, File: "root.src"}}})
		if err != nil {
			return err
		}
		for _, in := range []*jitdump.InlineInfo{
			{CodeIndex: index, CodeAddr: code + 0x10, CodeSize: 0x30, MethodID: 2, ParentID: 1, RootID: 1, Name: "mid", File: "mid.src",
				Lines: []jitdump.InlineLine{{Addr: code + 0x10, Line: 20}, {Addr: code + 0x20, Line: 21}, {Addr: code + 0x30, Line: 22}}},
			{CodeIndex: index, CodeAddr: code + 0x20, CodeSize: 0x10, MethodID: 3, ParentID: 2, RootID: 1, Name: "leaf", File: "leaf.src",
				Lines: []jitdump.InlineLine{{Addr: code + 0x20, Line: 30}}},
		} {
			in.Timestamp = jitdump.Now()
			if err := w.WriteRecord(in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec.Now = jitdump.Now() // the samples after the code's load
	for _, off := range offsets {
		rec.Sample(pid, code+off)
	}
	data := filepath.Join(dir, "perf.data")
	if err := rec.Write(data); err != nil {
		t.Fatal(err)
	}
	return data
}

// frames is a location's lines, innermost first, as "name file:line".
func frames(l *profile.Location) string {
	var s []string
	for _, line := range l.Line {
		s = append(s, fmt.Sprintf("%s %s:%d", line.Function.Name, line.Function.Filename, line.Line))
	}
	return strings.Join(s, ", ")
}

// TestInlineFrames: the methods inlined at a sampled address are lines of
// its location, innermost first, with their own lines, each level naming
// the line of the call below; per function the location is one per chain,
// without lines; NoInline folds them into the function at its own line.
func TestInlineFrames(t *testing.T) {
	offsets := []uint64{0x05, 0x18, 0x24, 0x28, 0x34, 0x50}
	data := inlineRecording(t, offsets...)
	for _, tc := range []struct {
		name string
		opts perfprof.Options
		want []string // by offset
	}{
		{"by address", perfprof.Options{}, []string{
			"root root.src:10",
			"mid mid.src:20, root root.src:11",
			"leaf leaf.src:30, mid mid.src:21, root root.src:11",
			"leaf leaf.src:30, mid mid.src:21, root root.src:11",
			"mid mid.src:22, root root.src:11",
			"root root.src:12",
		}},
		{"per function", perfprof.Options{PerFunction: true}, []string{
			"root root.src:0",
			"mid mid.src:0, root root.src:0",
			"leaf leaf.src:0, mid mid.src:0, root root.src:0",
			"leaf leaf.src:0, mid mid.src:0, root root.src:0",
			"mid mid.src:0, root root.src:0",
			"root root.src:0",
		}},
		{"no inline", perfprof.Options{NoInline: true}, []string{
			"root root.src:10", "root root.src:11", "root root.src:11", "root root.src:11", "root root.src:11", "root root.src:12",
		}},
		{"no inline per function", perfprof.Options{PerFunction: true, NoInline: true}, []string{
			"root root.src:0", "root root.src:0", "root root.src:0", "root root.src:0", "root root.src:0", "root root.src:0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Input = data
			tc.opts.Warn = func(err error) { t.Logf("warning: %v", err) }
			res, err := perfprof.Run(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Jitted != len(offsets) {
				t.Fatalf("%d of %d samples in jitted code", res.Jitted, len(offsets))
			}
			got := map[string]int64{}
			for _, s := range res.Profile.PProf().Sample {
				got[frames(s.Location[0])] += s.Value[0]
			}
			want := map[string]int64{}
			for _, w := range tc.want {
				want[w]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("samples by frames:\n got %v\nwant %v", got, want)
			}
			// However many chains are inlined into it, the function
			// that holds them is one function of the profile.
			roots := 0
			for _, f := range res.Profile.Functions {
				if res.Profile.String(f.Name) == "root" {
					roots++
				}
			}
			if roots != 1 {
				t.Errorf("%d functions named root, want 1", roots)
			}
			if tc.opts.PerFunction {
				locs := map[string]bool{}
				for _, l := range res.Profile.PProf().Location {
					locs[frames(l)] = true
				}
				if len(locs) != len(want) {
					t.Errorf("%d locations, want one per chain (%d): %v", len(locs), len(want), locs)
				}
			}
		})
	}
}
