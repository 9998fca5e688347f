package report

import (
	"bytes"
	"io"
	"maps"
	"runtime"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/contract"
)

// scaleProfile is a profile as perfprof makes of a JIT with n functions
// each sampled once, called by the interpreter's main: a mapping,
// function and location per jitted function, one sample per stack.
func scaleProfile(n int) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "samples", Unit: "count"},
			{Type: "cpu-clock", Unit: "nanoseconds"},
		},
		DefaultSampleType: "samples",
	}
	exe := &profile.Mapping{ID: 1, File: "/usr/bin/vm", Start: 0x400000, Limit: 0x500000}
	main := &profile.Function{ID: 1, Name: "main", SystemName: "main"}
	mainLoc := &profile.Location{ID: 1, Mapping: exe, Address: 0x401000, Line: []profile.Line{{Function: main}}}
	p.Mapping = append(make([]*profile.Mapping, 0, n+1), exe)
	p.Function = append(make([]*profile.Function, 0, n+1), main)
	p.Location = append(make([]*profile.Location, 0, n+1), mainLoc)
	p.Sample = make([]*profile.Sample, 0, n)
	labels := map[string][]string{"comm": {"vm"}}
	pids := map[string][]int64{"pid": {100}, "tid": {100}}
	for i := range n {
		start := uint64(0x7f0000000000 + 0x100*i)
		m := &profile.Mapping{ID: uint64(len(p.Mapping) + 1), File: "/tmp/jit-100.dump", Start: start, Limit: start + 0x100, BuildID: "jitdump"}
		name := "f" + strconv.Itoa(i)
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
		loc := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m, Address: start + 0x10, Line: []profile.Line{{Function: fn}}}
		p.Mapping = append(p.Mapping, m)
		p.Function = append(p.Function, fn)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{
			Value: []int64{1, 1_000_000}, Label: labels, NumLabel: pids,
			Location: []*profile.Location{loc, mainLoc},
		})
	}
	return p
}

const scaleFunctions = 1_000_000

func benchmarkScale(b *testing.B, f func(*contract.Profile) error) {
	if testing.Short() {
		b.Skip("a profile of a million functions")
	}
	p := contract.FromPProf(scaleProfile(scaleFunctions))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := f(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScaleModel and BenchmarkScaleAggregate measure the report's own
// cost on top of a profile of a million functions.
func BenchmarkScaleModel(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { _, err := newModel(p, 0); return err })
}

func BenchmarkScaleAggregate(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { _, err := aggregate(p, Options{}); return err })
}

func BenchmarkScaleText(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return Text(io.Discard, p, Options{}) })
}

func BenchmarkScaleJSON(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return JSON(io.Discard, p, Options{}) })
}

func BenchmarkScaleFolded(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return Folded(io.Discard, p, Options{CommRoot: true}) })
}

func BenchmarkScaleHTML(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return HTML(io.Discard, p, Options{CommRoot: true}) })
}

// renumberings change the IDs of a profile's locations, functions and
// mappings, which contract.FromPProf numbers by their places instead.
var renumberings = []struct {
	name string
	do   func(p *profile.Profile)
}{
	{"as built", func(p *profile.Profile) {}},
	{"reversed", func(p *profile.Profile) {
		for i, l := range p.Location {
			l.ID = uint64(len(p.Location) - i)
		}
		for i, f := range p.Function {
			f.ID = uint64(len(p.Function) - i)
		}
		for i, m := range p.Mapping {
			m.ID = uint64(len(p.Mapping) - i)
		}
	}},
	{"zero", func(p *profile.Profile) {
		for _, l := range p.Location {
			l.ID = 0
		}
		for _, f := range p.Function {
			f.ID = 0
		}
		for _, m := range p.Mapping {
			m.ID = 0
		}
	}},
	{"shifted", func(p *profile.Profile) {
		for _, l := range p.Location {
			l.ID += 1000
		}
		for _, f := range p.Function {
			f.ID++
		}
	}},
	{"unlisted", func(p *profile.Profile) {
		// Samples may refer to what the lists lack, by IDs the listed
		// have.
		half := len(p.Location) / 2
		for _, l := range p.Location[half:] {
			l.ID = 1
		}
		p.Location = p.Location[:half]
		p.Function[0].ID = 2
		p.Function = p.Function[1:]
		p.Mapping = nil
	}},
}

// sharedFunction has a function that two modules hold, and unresolved
// addresses in both.
func sharedFunction() *profile.Profile {
	return newProfBuilder().
		add("sh", 1, 3, 3, dash+":main", dash+":shared", dash+":?").
		add("sh", 1, 2, 2, dash+":main", libc+":shared", libc+":?").
		add("sh", 1, 1, 1, dash+":main", dash+":shared").
		p
}

// TestIDs: reports of a pprof profile (contract.FromPProf) do not depend
// on how it numbers its objects.
func TestIDs(t *testing.T) {
	profiles := map[string]func() *profile.Profile{"processes": processes, "recursion": recursion, "shared": sharedFunction}
	opts := []Options{{}, {Children: true, CallGraph: true}, {Sort: []string{"sym"}}, {Sort: []string{"pid", "dso"}}}
	for name, mk := range profiles {
		for _, o := range opts {
			var want bytes.Buffer
			if err := Text(&want, contract.FromPProf(mk()), o); err != nil {
				t.Fatal(err)
			}
			var wantFolded bytes.Buffer
			if err := Folded(&wantFolded, contract.FromPProf(mk()), Options{CommRoot: true}); err != nil {
				t.Fatal(err)
			}
			for _, r := range renumberings {
				p := mk()
				r.do(p)
				var got bytes.Buffer
				if err := Text(&got, contract.FromPProf(p), o); err != nil {
					t.Fatal(err)
				}
				if got.String() != want.String() {
					t.Errorf("%s %+v, IDs %s:\n%s\nwant\n%s", name, o, r.name, got.String(), want.String())
				}
				p = mk()
				r.do(p)
				got.Reset()
				if err := Folded(&got, contract.FromPProf(p), Options{CommRoot: true}); err != nil {
					t.Fatal(err)
				}
				if got.String() != wantFolded.String() {
					t.Errorf("%s folded, IDs %s:\n%s\nwant\n%s", name, r.name, got.String(), wantFolded.String())
				}
			}
		}
	}
}

// TestSharedFunction: a function is a frame per module that holds it.
func TestSharedFunction(t *testing.T) {
	got := make(map[string]int64)
	for _, e := range decode(t, sharedFunction(), Options{Sort: []string{"dso", "sym"}, Children: true}).Entries {
		got[e.Module+" "+e.Symbol] = *e.Children
	}
	want := map[string]int64{"dash main": 6, "dash shared": 4, "libc.so.6 shared": 2, "dash [unknown]": 3, "libc.so.6 [unknown]": 2}
	if !maps.Equal(got, want) {
		t.Errorf("children %v, want %v", got, want)
	}
}

// TestHTMLDeepStacksMemory: the page's tree is written as it is walked,
// not made first: on stacks of thousands of frames that share little,
// rendering the page allocates less than half of the three 8-byte numbers
// a node takes in it (an array of them was 24 bytes a node: 192 MB for
// 1,000 samples of 8,000 distinct frames).
func TestHTMLDeepStacksMemory(t *testing.T) {
	p := contract.FromPProf(benchProfile(200, 2000))
	var page bytes.Buffer
	if err := HTML(&page, p, Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	d := pageData(t, page.Bytes())
	nodes := uint64(len(d.Stages[0].Nodes) / 3)
	if nodes < 300_000 {
		t.Fatalf("%d nodes: the test wants stacks that share little", nodes)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := HTML(io.Discard, p, Options{CommRoot: true}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 12*nodes {
		t.Errorf("the page of %d nodes allocated %d bytes (%.1f a node): want at most 12 a node", nodes, alloc, float64(alloc)/float64(nodes))
	}
}
