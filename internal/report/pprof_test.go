package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/jitprof/jitprof/internal/contract"
)

// everyField is a profile with every field profile.proto has set, some of
// them in ways perfprof never sets them.
func everyField() *profile.Profile {
	p := processes()
	p.DropFrames, p.KeepFrames, p.DocURL = "drop.*", "keep.*", "https://example.com/doc"
	p.TimeNanos, p.DurationNanos, p.Period = 1_700_000_000_000_000_000, 5_000_000_000, 1_000_000
	p.PeriodType = &profile.ValueType{Type: "cpu-clock", Unit: "nanoseconds"}
	p.Comments = []string{"one", "two", "three", "one"}
	p.Mapping[0].HasFunctions, p.Mapping[0].HasInlineFrames = true, true
	p.Mapping[1].HasFilenames, p.Mapping[1].HasLineNumbers = true, true
	p.Mapping[1].BuildID = "abcdef"
	p.Location[0].IsFolded = true
	p.Location[1].Line[0].Column = 12
	p.Location[2].Line = append(p.Location[2].Line, profile.Line{Function: nil, Line: 3})
	p.Location[3].Mapping = nil
	p.Function[0].StartLine = 40
	p.Function[1].Filename = "evaltree.c"
	p.Sample[0].Label = map[string][]string{"comm": {"sh"}, "b": {"x", "y", ""}, "a": {"z"}, "empty": {}}
	p.Sample[0].NumLabel = map[string][]int64{"pid": {100}, "bytes": {1, 2, -3}, "none": {}, "zero": {0}}
	p.Sample[0].NumUnit = map[string][]string{"bytes": {"bytes", "kilobytes", "bytes"}, "zero": {"count"}}
	p.Sample[2].Value = []int64{0, -1}
	p.Sample[3].Location = nil
	return p
}

// TestPProfLikeWrite: writePProf writes what profile.Write does.
func TestPProfLikeWrite(t *testing.T) {
	profiles := map[string]func() *profile.Profile{
		"processes": processes, "recursion": recursion, "shared": sharedFunction, "empty": empty,
		"every field":    everyField,
		"deep stacks":    func() *profile.Profile { return benchProfile(500, 200) },
		"many functions": func() *profile.Profile { return scaleProfile(50_000) },
		"no period type": func() *profile.Profile {
			p := processes()
			p.PeriodType = &profile.ValueType{}
			return p
		},
	}
	columns := map[string]*contract.Profile{}
	for name, mk := range profiles {
		columns[name] = contract.FromPProf(mk())
	}
	// A string of the profile's own numbered after them, and one of its
	// strings no record uses.
	late := contract.FromPProf(processes())
	late.PeriodType.Unit = late.String(late.Functions[0].Name)
	late.Strings = append(late.Strings, "unused")
	columns["late and unused strings"] = late
	for name, p := range columns {
		var want, got bytes.Buffer
		if err := p.PProf().Write(&want); err != nil {
			t.Fatal(err)
		}
		if err := writePProf(&got, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: %d bytes differ from profile.Write's %d", name, got.Len(), want.Len())
		}
	}
	// Where profile.Write would fail, indexing units past their end, the
	// units that are there are kept.
	pp := processes()
	pp.Sample[1].NumLabel = map[string][]int64{"short": {1, 2}}
	pp.Sample[1].NumUnit = map[string][]string{"short": {"s"}}
	var b bytes.Buffer
	if err := writePProf(&b, contract.FromPProf(pp)); err != nil {
		t.Fatal(err)
	}
	pp, err := profile.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := pp.Sample[1].NumUnit["short"]; len(got) != 2 || got[0] != "s" || got[1] != "" {
		t.Errorf("units %q, want [s \"\"]", got)
	}
}

func BenchmarkScalePProf(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return writePProf(io.Discard, p) })
}

// BenchmarkScalePProfWrite is what writePProf replaced: pprof's objects
// made of the profile, then profile.Write.
func BenchmarkScalePProfWrite(b *testing.B) {
	benchmarkScale(b, func(p *contract.Profile) error { return p.PProf().Write(io.Discard) })
}

// TestHTMLDataLikeMarshal: the page's data are written as json.Marshal
// encodes them.
func TestHTMLDataLikeMarshal(t *testing.T) {
	var all []*htmlData
	for _, ps := range [][]*profile.Profile{
		{processes()}, {recursion()}, {empty()}, {timelineProfile(3)}, {benchProfile(200, 50)},
		{processes(), timelineProfile(0)},
	} {
		names := make([]string, len(ps))
		for i := range names {
			names[i] = "stage<" + strconv.Itoa(i) + ">&\u2028"
		}
		cols := make([]*contract.Profile, len(ps))
		for i, p := range ps {
			cols[i] = contract.FromPProf(p)
		}
		d, err := flameData(names, cols, Options{CommRoot: true})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, d)
	}
	all = append(all, &htmlData{}, &htmlData{Event: "</script>", Stages: []htmlStage{{}}})
	for i, d := range all {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		if err := d.write(w); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("data %d:\n%.300s\nwant\n%.300s", i, got.Bytes(), want)
		}
	}
}
