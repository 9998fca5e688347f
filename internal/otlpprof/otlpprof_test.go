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
	ps, err := Convert(testProfile(), Options{Host: "h1", Start: start, Processes: procs})
	if err != nil {
		t.Fatal(err)
	}

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

// wallProfile is testProfile as perfprof's wall-clock view gives it:
// samples, wall, cpu and off-cpu, a sample only on or only off the CPU.
func wallProfile() *profile.Profile {
	p := testProfile()
	p.SampleType = []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "wall", Unit: "nanoseconds"},
		{Type: "cpu", Unit: "nanoseconds"}, {Type: "off-cpu", Unit: "nanoseconds"}}
	p.PeriodType, p.Period = &profile.ValueType{Type: "wall", Unit: "nanoseconds"}, 1e6
	for i, s := range p.Sample {
		cpu, off := int64(0), int64(0)
		if i%2 == 0 {
			cpu = s.Value[0] * 1e6
		} else {
			off = s.Value[0] * 3e6
		}
		s.Value = []int64{s.Value[0], cpu + off, cpu, off}
	}
	return p
}

// TestConvertSampleTypes: each sample type asked for is a profile of its
// own in each process's scope, of its type and unit, holding the samples
// with a value of it; only the first has a period.
func TestConvertSampleTypes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p     *profile.Profile
		types []string
		want  []string // per profile of pid 10: type/unit period: values
		err   string
	}{
		{"default", testProfile(), nil, []string{"samples/count cpu-clock/nanoseconds 0: 7 2 1"}, ""},
		{"one", testProfile(), []string{"cpu-clock"}, []string{"cpu-clock/nanoseconds cpu-clock/nanoseconds 0: 7000 2000 1000"}, ""},
		{"cpu and off-cpu", wallProfile(), []string{"cpu", "off-cpu"},
			[]string{"cpu/nanoseconds cpu/nanoseconds 1000000: 7000000", "off-cpu/nanoseconds / 0: 6000000 3000000"}, ""},
		{"missing", testProfile(), []string{"cpu", "off-cpu"}, nil, `no sample type "cpu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := Convert(tc.p, Options{Host: "h", SampleTypes: tc.types})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			str := func(i int32) string { return ps.Dictionary().StringTable().At(int(i)) }
			var got []string
			for _, rp := range ps.ResourceProfiles().All() {
				if v, _ := rp.Resource().Attributes().Get(attrPid); v.Int() != 10 {
					continue
				}
				for _, pr := range rp.ScopeProfiles().At(0).Profiles().All() {
					line := fmt.Sprintf("%s/%s %s/%s %d:", str(pr.SampleType().TypeStrindex()), str(pr.SampleType().UnitStrindex()),
						str(pr.PeriodType().TypeStrindex()), str(pr.PeriodType().UnitStrindex()), pr.Period())
					for _, s := range pr.Samples().All() {
						line += fmt.Sprintf(" %d", s.Values().At(0))
					}
					got = append(got, line)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("profiles of pid 10:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
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
		if _, err := Convert(p, Options{Host: "h", Start: time.Unix(0, 0)}); err != nil {
			b.Fatal(err)
		}
	}
}
