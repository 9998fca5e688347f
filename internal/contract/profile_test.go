package contract

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/pprof/profile"
)

// samplePProf is a profile with what jitprof's carry: mappings of every
// kind, inlined lines, samples sharing a stack, labels of several values
// and units, a function without a file, and a location without a mapping.
func samplePProf() *profile.Profile {
	exe := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, Offset: 0x1000, File: "/bin/node", BuildID: "abcd", HasFunctions: true, HasFilenames: true}
	jit := &profile.Mapping{ID: 2, Start: 0x7000, Limit: 0x7100, Offset: 42, File: "/tmp/jit-1.dump", BuildID: JITBuildID, HasFunctions: true, HasInlineFrames: true}
	kern := &profile.Mapping{ID: 3, File: KernelFile, HasLineNumbers: true}
	main := &profile.Function{ID: 1, Name: "main", SystemName: "main", Filename: "main.c", StartLine: 3}
	js := &profile.Function{ID: 2, Name: "JS:*f", SystemName: "JS:*f /a.js:1:2", Filename: "/a.js", StartLine: 1}
	inl := &profile.Function{ID: 3, Name: "g [inferred]", SystemName: "g [inferred]"}
	sys := &profile.Function{ID: 4, Name: "do_syscall_64", SystemName: "do_syscall_64"}
	lMain := &profile.Location{ID: 1, Mapping: exe, Address: 0x401000, Line: []profile.Line{{Function: main, Line: 7}}}
	lJIT := &profile.Location{ID: 2, Mapping: jit, Address: 0x7010, Line: []profile.Line{{Function: inl, Line: 9, Column: 4}, {Function: js, Line: 2, Column: 5}}}
	lKern := &profile.Location{ID: 3, Mapping: kern, Address: 0xffffffff81000000, Line: []profile.Line{{Function: sys}}}
	lNone := &profile.Location{ID: 4, Address: 0x1234}
	thread := map[string][]string{"comm": {"node"}}
	return &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cycles", Unit: "count"}},
		DefaultSampleType: "samples",
		PeriodType:        &profile.ValueType{Type: "cycles", Unit: "count"},
		Period:            1000,
		DurationNanos:     5e9,
		Mapping:           []*profile.Mapping{exe, jit, kern},
		Function:          []*profile.Function{main, js, inl, sys},
		Location:          []*profile.Location{lMain, lJIT, lKern, lNone},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{lKern, lJIT, lMain}, Value: []int64{5, 5000}, Label: thread, NumLabel: map[string][]int64{"pid": {7}, "tid": {8}}},
			{Location: []*profile.Location{lKern, lJIT, lMain}, Value: []int64{3, 3000}, Label: thread, NumLabel: map[string][]int64{"pid": {7}, "tid": {9}}},
			{Location: []*profile.Location{lNone}, Value: []int64{1, 1000},
				Label: map[string][]string{"comm": {"a", "b"}, "zz": {"c"}}, NumLabel: map[string][]int64{"bytes": {1, 2}, "pid": {7}}, NumUnit: map[string][]string{"bytes": {"bytes", ""}}},
			{Location: []*profile.Location{lMain}, Value: []int64{1, 1000}},
		},
	}
}

func encoded(t *testing.T, p *profile.Profile) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPProfRoundTrip: a pprof profile numbered by places, in columns and
// back, is the same profile, byte for byte as pprof writes it; and its
// strings are each held once.
func TestPProfRoundTrip(t *testing.T) {
	pp := samplePProf()
	c := FromPProf(pp)
	if got, want := encoded(t, c.PProf()), encoded(t, pp); !bytes.Equal(got, want) {
		t.Errorf("round trip differs:\n%v\nwant\n%v", c.PProf(), pp)
	}
	seen := map[string]bool{}
	for _, s := range c.Strings {
		if seen[s] {
			t.Errorf("string %q held twice", s)
		}
		seen[s] = true
	}
	if c.Strings[0] != "" {
		t.Errorf("string 0 is %q", c.Strings[0])
	}
}

// describe lists p's samples as what they say, whatever the numbering.
func describe(p *profile.Profile) string {
	var b strings.Builder
	for _, s := range p.Sample {
		fmt.Fprintf(&b, "%v %v %v %v:", s.Value, s.Label, s.NumLabel, s.NumUnit)
		for _, l := range s.Location {
			fmt.Fprintf(&b, " %#x", l.Address)
			if m := l.Mapping; m != nil {
				fmt.Fprintf(&b, "@%s/%s[%#x,%#x)+%#x", m.File, m.BuildID, m.Start, m.Limit, m.Offset)
			}
			for _, ln := range l.Line {
				fmt.Fprintf(&b, " %s|%s|%s:%d:%d(%d)", ln.Function.Name, ln.Function.SystemName, ln.Function.Filename, ln.Line, ln.Column, ln.Function.StartLine)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// TestFromPProfNumbering: a profile whose IDs are not places, and whose
// samples refer to objects its lists lack, reads as the same samples.
func TestFromPProfNumbering(t *testing.T) {
	pp := samplePProf()
	want := describe(pp)
	for i, m := range pp.Mapping {
		m.ID = uint64(100 - i)
	}
	for _, f := range pp.Function {
		f.ID += 50
	}
	for _, l := range pp.Location {
		l.ID *= 3
	}
	pp.Mapping = pp.Mapping[1:]   // the executable's mapping unlisted
	pp.Location = pp.Location[:2] // and two locations
	pp.Function = slices.Clone(pp.Function[2:])
	slices.Reverse(pp.Function)
	c := FromPProf(pp)
	if got := describe(c.PProf()); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if len(c.Mappings) != 3 || c.Locations.Len() != 4 || len(c.Functions) != 4 {
		t.Errorf("%d mappings, %d locations, %d functions; want 3, 4, 4", len(c.Mappings), c.Locations.Len(), len(c.Functions))
	}
}

// TestProfileAccessors: the columns read as the pprof profile they hold.
func TestProfileAccessors(t *testing.T) {
	c := FromPProf(samplePProf())
	s := &c.Samples[0]
	stack := c.Stack(s)
	if len(stack) != 3 {
		t.Fatalf("stack %v", stack)
	}
	jit := c.Location(stack[1])
	lines := c.LinesOf(jit)
	if len(lines) != 2 || c.String(c.Function(lines[1].Function).Name) != "JS:*f" || lines[0].Column != 4 {
		t.Errorf("the jitted location's lines: %+v", lines)
	}
	for id, want := range map[uint32]Kind{stack[0]: Kernel, stack[1]: JIT, stack[2]: File} {
		if got := c.MappingKind(c.Mapping(c.Location(id).Mapping)); got != want {
			t.Errorf("location %d: kind %v, want %v", id, got, want)
		}
	}
	if c.Mapping(0) != nil || c.Function(0) != nil || c.MappingKind(nil) != File {
		t.Error("number 0 is not none")
	}
	if v := c.Value(2); !slices.Equal(v, []int64{1, 1000}) {
		t.Errorf("values of sample 2: %v", v)
	}
	ls := c.LabelsOf(&c.Samples[2])
	if ls.StrLabel("comm") != "a" || ls.StrLabel("none") != "" {
		t.Errorf("labels %+v", ls)
	}
	if pid, ok := ls.NumLabel("pid"); !ok || pid != 7 {
		t.Errorf("pid %d %v", pid, ok)
	}
	if _, ok := c.LabelsOf(&c.Samples[3]).NumLabel("pid"); ok {
		t.Error("a sample without labels has a pid")
	}
	if c.Stacks.Len() != 3+3+1+1 {
		t.Errorf("%d stack entries", c.Stacks.Len())
	}
}

// TestColumnOf: a column is kept when 32 bits hold it, else unknown.
func TestColumnOf(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want int32
	}{{0, 0}, {13, 13}, {math.MaxInt32, math.MaxInt32}, {math.MaxInt32 + 1, 0}, {-1, 0}, {math.MinInt64, 0}} {
		if got := ColumnOf(tc.in); got != tc.want {
			t.Errorf("ColumnOf(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if size := unsafe.Sizeof(Line{}); size != 16 {
		t.Errorf("a Line is %d bytes, want 16", size)
	}
}

// TestFrames: stacks of every size, across chunks and longer than one,
// are given back as added, at the places Add said, each its own frames.
func TestFrames(t *testing.T) {
	var f Frames
	type added struct {
		place uint32
		stack []uint32
	}
	var all []added
	next, total := uint32(0), uint32(0)
	for _, depth := range []int{3, 0, 1, minFrameChunk - 4, 5, 2 * minFrameChunk, 7, maxFrameChunk + 3, 1, 2*maxFrameChunk + 1, maxFrameChunk - 1, 2, 9} {
		stack := make([]uint32, depth)
		for i := range stack {
			next++
			stack[i] = next
		}
		total += uint32(depth)
		all = append(all, added{f.Add(stack), stack})
	}
	for _, a := range all {
		got := f.At(a.place, uint32(len(a.stack)))
		if !slices.Equal(got, a.stack) {
			t.Errorf("the stack of %d at %#x: got %d frames, first %v", len(a.stack), a.place, len(got), got[:min(len(got), 3)])
		}
		if cap(got) != len(got) {
			t.Errorf("the stack of %d at %#x has room for %d: appending to it would write over the next", len(a.stack), a.place, cap(got))
		}
	}
	if f.Len() != total {
		t.Errorf("Len %d, want %d", f.Len(), total)
	}
	if len(f.chunks) < 3 {
		t.Errorf("%d chunks: the test meant to cross chunks", len(f.chunks))
	}
}
