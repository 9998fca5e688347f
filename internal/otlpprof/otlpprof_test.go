package otlpprof

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// testProfile is a profile as perfprof builds it: two processes, a jitted
// function with an inlined one, a native one, the kernel.
func testProfile() *profile.Profile {
	exe := &profile.Mapping{ID: 1, File: "/usr/bin/node", Start: 0x400000, Limit: 0x500000, BuildID: "abcd"}
	jit := &profile.Mapping{ID: 2, File: "/tmp/jit-10.dump", Start: 0x7f00, Limit: 0x7f80, Offset: 3, BuildID: "jitdump"}
	kern := &profile.Mapping{ID: 3, File: "[kernel.kallsyms]"}
	hot := &profile.Function{ID: 1, Name: "JS:*hot app.js:1", SystemName: "JS:*hot app.js:1", Filename: "app.js"}
	inl := &profile.Function{ID: 2, Name: "JS:*inner app.js:5", Filename: "app.js"}
	main := &profile.Function{ID: 3, Name: "main"}
	sys := &profile.Function{ID: 4, Name: "do_syscall_64"}
	hotLoc := &profile.Location{ID: 1, Mapping: jit, Address: 0x7f10, Line: []profile.Line{{Function: inl, Line: 5}, {Function: hot, Line: 2}}}
	mainLoc := &profile.Location{ID: 2, Mapping: exe, Address: 0x401000, Line: []profile.Line{{Function: main}}}
	sysLoc := &profile.Location{ID: 3, Mapping: kern, Address: 0xffffffff81000000, Line: []profile.Line{{Function: sys}}}
	unnamed := &profile.Location{ID: 4, Address: 0x1234}
	lbl := func(pid, tid int64, comm string) (map[string][]string, map[string][]int64) {
		return map[string][]string{"comm": {comm}}, map[string][]int64{"pid": {pid}, "tid": {tid}}
	}
	s := func(n int64, pid, tid int64, comm string, locs ...*profile.Location) *profile.Sample {
		l, nl := lbl(pid, tid, comm)
		return &profile.Sample{Value: []int64{n, n * 1000}, Label: l, NumLabel: nl, Location: locs}
	}
	return &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu-clock", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"},
		DurationNanos: 10e9,
		Mapping:       []*profile.Mapping{exe, jit, kern},
		Location:      []*profile.Location{hotLoc, mainLoc, sysLoc, unnamed},
		Function:      []*profile.Function{hot, inl, main, sys},
		Sample: []*profile.Sample{
			s(7, 10, 10, "node", hotLoc, mainLoc),
			s(2, 10, 11, "V8 Worker", sysLoc, mainLoc),
			s(3, 20, 20, "sh", unnamed),
			s(1, 10, 10, "node", hotLoc, mainLoc),
		},
	}
}

// flat reads converted profiles back: per pid, each sample's stack as
// "leaf;...;root" of function names (inlined ones as a+b), with its value
// and its thread.
func flat(t *testing.T, ps pprofile.Profiles) map[int64][]string {
	t.Helper()
	d := ps.Dictionary()
	str := func(i int32) string { return d.StringTable().At(int(i)) }
	for _, table := range []int{d.MappingTable().Len(), d.LocationTable().Len(), d.FunctionTable().Len(), d.StackTable().Len(), d.AttributeTable().Len()} {
		if table == 0 {
			t.Fatal("a dictionary table lacks its zero value at index 0")
		}
	}
	if str(0) != "" {
		t.Fatalf("string 0 is %q, want empty", str(0))
	}
	out := make(map[int64][]string)
	for _, rp := range ps.ResourceProfiles().All() {
		pid := int64(-1)
		if v, ok := rp.Resource().Attributes().Get("process.pid"); ok {
			pid = v.Int()
		}
		for _, sp := range rp.ScopeProfiles().All() {
			for _, pr := range sp.Profiles().All() {
				for _, s := range pr.Samples().All() {
					var frames []string
					for _, li := range d.StackTable().At(int(s.StackIndex())).LocationIndices().All() {
						loc := d.LocationTable().At(int(li))
						var names []string
						for _, l := range loc.Lines().All() {
							names = append(names, str(d.FunctionTable().At(int(l.FunctionIndex())).NameStrindex()))
						}
						kind := ""
						for _, ai := range loc.AttributeIndices().All() {
							a := d.AttributeTable().At(int(ai))
							if str(a.KeyStrindex()) == attrFrameType {
								kind = a.Value().Str()
							}
						}
						frames = append(frames, strings.Join(names, "+")+"@"+kind)
					}
					var thread string
					for _, ai := range s.AttributeIndices().All() {
						a := d.AttributeTable().At(int(ai))
						thread += fmt.Sprintf(" %s=%s", str(a.KeyStrindex()), a.Value().AsString())
					}
					out[pid] = append(out[pid], fmt.Sprintf("%d %s%s", s.Values().At(0), strings.Join(frames, ";"), thread))
				}
			}
		}
	}
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

func TestConvert(t *testing.T) {
	start := time.Unix(1795497000, 5)
	procs := map[uint32]Process{10: {Pid: 10, Comm: "node", Executable: "/usr/bin/node", CommandLine: "node app.js", Runtime: "nodejs",
		ContainerID: strings.Repeat("ab", 32)}}
	ps := Convert(testProfile(), Options{Host: "h1", Start: start, Processes: procs})

	// Through the wire format and back, as the collector gets it.
	b, err := (&pprofile.ProtoMarshaler{}).MarshalProfiles(ps)
	if err != nil {
		t.Fatal(err)
	}
	back, err := (&pprofile.ProtoUnmarshaler{}).UnmarshalProfiles(b)
	if err != nil {
		t.Fatal(err)
	}
	got := flat(t, back)
	want := map[int64][]string{
		10: {
			"1 JS:*inner app.js:5+JS:*hot app.js:1@v8js;main@native thread.id=10 thread.name=node",
			"2 do_syscall_64@kernel;main@native thread.id=11 thread.name=V8 Worker",
			"7 JS:*inner app.js:5+JS:*hot app.js:1@v8js;main@native thread.id=10 thread.name=node",
		},
		20: {"3 @ thread.id=20 thread.name=sh"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("samples:\n%v\nwant\n%v", got, want)
	}

	for _, rp := range back.ResourceProfiles().All() {
		attrs := rp.Resource().Attributes().AsRaw()
		switch attrs[attrPid] {
		case int64(10):
			for k, v := range map[string]any{attrHost: "h1", attrExecName: "node", attrExecPath: "/usr/bin/node", attrCommandLine: "node app.js",
				attrRuntime: "nodejs", attrContainerID: strings.Repeat("ab", 32)} {
				if attrs[k] != v {
					t.Errorf("pid 10: %s = %v, want %v", k, attrs[k], v)
				}
			}
		case int64(20):
			if len(attrs) != 2 || attrs[attrHost] != "h1" {
				t.Errorf("pid 20, which nothing describes: %v", attrs)
			}
		}
		pr := rp.ScopeProfiles().At(0).Profiles().At(0)
		if pr.Time().AsTime() != start.UTC() || pr.DurationNano() != 10e9 {
			t.Errorf("profile time %v for %d ns, want %v for 10 s", pr.Time().AsTime(), pr.DurationNano(), start)
		}
	}
}

func BenchmarkConvert(b *testing.B) {
	p := testProfile()
	// A window's worth: many distinct stacks over the same functions.
	base := p.Sample
	for i := range 2000 {
		s := *base[i%len(base)]
		loc := &profile.Location{ID: uint64(len(p.Location) + 1), Address: uint64(0x9000 + i), Mapping: p.Mapping[0], Line: []profile.Line{{Function: p.Function[2]}}}
		p.Location = append(p.Location, loc)
		s.Location = append([]*profile.Location{loc}, s.Location...)
		p.Sample = append(p.Sample, &s)
	}
	b.ReportAllocs()
	for b.Loop() {
		Convert(p, Options{Host: "h", Start: time.Unix(0, 0)})
	}
}
