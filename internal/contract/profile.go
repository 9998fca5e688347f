package contract

import (
	"maps"
	"math"
	"slices"

	"github.com/google/pprof/profile"

	"github.com/jitprof/jitprof/internal/arena"
)

// A Profile is what the analysis hands the renderers: a pprof profile's
// content in columns of small records that refer to each other by number
// and to strings by their place in one table. A *profile.Profile of a
// million jitted functions costs about 470 bytes a function in objects,
// pointers and label maps (a Mapping, Function, Location, Line and Sample
// each); this about 150, in a few large arrays the GC need not walk.
// Renderers that stream (text, JSON, folded, HTML, pprof, gprof, annotate)
// read it as it is; what wants pprof's objects (its web UI, the agent's
// export) converts it with PProf.
//
// Records are numbered as pprof numbers them: a record's place in its
// column + 1, 0 for none. Mappings, Functions and Locations are pprof's
// Mapping, Function and Location; a Location's Lines are pprof's Line,
// the innermost first.
type Profile struct {
	SampleType        []ValueType
	DefaultSampleType string
	PeriodType        ValueType
	Period            int64
	DurationNanos     int64

	// Strings holds every string the records refer to, each once
	// (renderers rely on it: one string, one number), "" first.
	Strings   []string
	Mappings  []Mapping
	Functions []Function
	// Locations are in chunks: a profile of deep distinct stacks has
	// millions, made as the aggregator's records of them go.
	Locations arena.List[Location]
	Lines     []Line
	Samples   []Sample
	// Stacks holds the samples' locations, each stack leaf first; samples
	// with the same stack may share it.
	Stacks Frames
	// Values holds the samples' values, len(SampleType) for each sample
	// side by side, in the order of Samples.
	Values    []int64
	LabelSets []LabelSet
}

// ValueType is pprof's: what a sample value counts, and its unit.
type ValueType struct{ Type, Unit string }

// A Mapping is pprof's Mapping; what it holds is its Kind (contract.go).
type Mapping struct {
	Start, Limit, Offset                                        uint64
	File, BuildID                                               uint32 // in Strings
	HasFunctions, HasFilenames, HasLineNumbers, HasInlineFrames bool
}

// A Function is pprof's Function.
type Function struct {
	Name, SystemName, Filename uint32 // in Strings
	StartLine                  int64
}

// A Location is pprof's Location: its lines are Lines[Line:Line+NLines],
// which other locations may share (read them, never change them).
type Location struct {
	Address      uint64
	Mapping      uint32 // number; 0 for none
	Line, NLines uint32
	IsFolded     bool
}

// A Line is pprof's Line. Its column is 32 bits, as jitdump's
// discriminators are (16 bytes a line, not 24: a profile of deep stacks
// has millions): a larger one, which only a name could give, is unknown.
type Line struct {
	Function uint32 // number; 0 for none
	Column   int32
	Line     int64
}

// ColumnOf is column as a Line holds it: 0, unknown, when it does not fit.
func ColumnOf(column int64) int32 {
	if column < 0 || column > math.MaxInt32 {
		return 0
	}
	return int32(column)
}

// A Sample is pprof's Sample: its locations are Stacks[Stack:Stack+Depth],
// leaf first; its values Values[i*len(SampleType):], i its place in
// Samples.
type Sample struct {
	Stack, Depth uint32
	Labels       uint32 // number in LabelSets; 0 for none
}

// A LabelSet is the labels of samples (a thread's, mostly, which its
// samples share), each list sorted by key as pprof writes them, a key's
// values in their order.
type LabelSet struct {
	Str []Label
	Num []NumLabel
}

// A Label is one of a sample's string labels.
type Label struct{ Key, Value string }

// A NumLabel is one of a sample's numeric labels, with its unit ("" for
// none).
type NumLabel struct {
	Key   string
	Value int64
	Unit  string
}

// String returns string number id.
func (p *Profile) String(id uint32) string { return p.Strings[id] }

// Mapping returns mapping number id, nil for 0.
func (p *Profile) Mapping(id uint32) *Mapping {
	if id == 0 {
		return nil
	}
	return &p.Mappings[id-1]
}

// Function returns function number id, nil for 0.
func (p *Profile) Function(id uint32) *Function {
	if id == 0 {
		return nil
	}
	return &p.Functions[id-1]
}

// Location returns location number id.
func (p *Profile) Location(id uint32) *Location { return p.Locations.At(int(id - 1)) }

// LinesOf returns l's lines, innermost first.
func (p *Profile) LinesOf(l *Location) []Line {
	end := l.Line + l.NLines
	return p.Lines[l.Line:end:end]
}

// Stack returns s's locations, leaf first.
func (p *Profile) Stack(s *Sample) []uint32 {
	return p.Stacks.At(s.Stack, s.Depth)
}

// Value returns the values of sample i.
func (p *Profile) Value(i int) []int64 {
	n := len(p.SampleType)
	return p.Values[i*n : (i+1)*n : (i+1)*n]
}

// noLabels are the labels of a sample without any.
var noLabels LabelSet

// LabelsOf returns s's labels, not to be changed; none for a sample
// without.
func (p *Profile) LabelsOf(s *Sample) *LabelSet {
	if s.Labels == 0 {
		return &noLabels
	}
	return &p.LabelSets[s.Labels-1]
}

// StrLabel returns the first value of key, "" if it has none.
func (ls *LabelSet) StrLabel(key string) string {
	for _, l := range ls.Str {
		if l.Key == key {
			return l.Value
		}
	}
	return ""
}

// NumLabel returns the first value of key and whether it has one.
func (ls *LabelSet) NumLabel(key string) (int64, bool) {
	for _, l := range ls.Num {
		if l.Key == key {
			return l.Value, true
		}
	}
	return 0, false
}

// MappingKind tells what m holds; File for none.
func (p *Profile) MappingKind(m *Mapping) Kind {
	if m == nil {
		return File
	}
	return kindOf(p.Strings[m.File], p.Strings[m.BuildID])
}

// PProf returns the profile as pprof's objects, numbered as here.
func (p *Profile) PProf() *profile.Profile {
	pp := &profile.Profile{
		DefaultSampleType: p.DefaultSampleType,
		Period:            p.Period,
		DurationNanos:     p.DurationNanos,
		Mapping:           make([]*profile.Mapping, len(p.Mappings)),
		Function:          make([]*profile.Function, len(p.Functions)),
		Location:          make([]*profile.Location, p.Locations.Len()),
		Sample:            make([]*profile.Sample, len(p.Samples)),
	}
	for _, st := range p.SampleType {
		pp.SampleType = append(pp.SampleType, &profile.ValueType{Type: st.Type, Unit: st.Unit})
	}
	if p.PeriodType != (ValueType{}) {
		pp.PeriodType = &profile.ValueType{Type: p.PeriodType.Type, Unit: p.PeriodType.Unit}
	}
	for i, m := range p.Mappings {
		pp.Mapping[i] = &profile.Mapping{
			ID: uint64(i + 1), Start: m.Start, Limit: m.Limit, Offset: m.Offset, File: p.Strings[m.File], BuildID: p.Strings[m.BuildID],
			HasFunctions: m.HasFunctions, HasFilenames: m.HasFilenames, HasLineNumbers: m.HasLineNumbers, HasInlineFrames: m.HasInlineFrames,
		}
	}
	for i, f := range p.Functions {
		pp.Function[i] = &profile.Function{
			ID: uint64(i + 1), Name: p.Strings[f.Name], SystemName: p.Strings[f.SystemName], Filename: p.Strings[f.Filename], StartLine: f.StartLine,
		}
	}
	for i := range p.Locations.Len() {
		l := p.Locations.At(i)
		loc := &profile.Location{ID: uint64(i + 1), Address: l.Address, IsFolded: l.IsFolded}
		if l.Mapping != 0 {
			loc.Mapping = pp.Mapping[l.Mapping-1]
		}
		for _, ln := range p.LinesOf(l) {
			line := profile.Line{Line: ln.Line, Column: int64(ln.Column)}
			if ln.Function != 0 {
				line.Function = pp.Function[ln.Function-1]
			}
			loc.Line = append(loc.Line, line)
		}
		pp.Location[i] = loc
	}
	// Samples with the same labels share their maps, as pprof's own
	// profiles' do: pprof only reads them.
	type labelMaps struct {
		str, unit map[string][]string
		num       map[string][]int64
	}
	maps := make([]labelMaps, len(p.LabelSets))
	for i, ls := range p.LabelSets {
		var m labelMaps
		for _, l := range ls.Str {
			if m.str == nil {
				m.str = make(map[string][]string)
			}
			m.str[l.Key] = append(m.str[l.Key], l.Value)
		}
		// A key any of whose values has a unit has a unit for each, ""
		// where it has none.
		withUnits := make(map[string]bool)
		for _, l := range ls.Num {
			withUnits[l.Key] = withUnits[l.Key] || l.Unit != ""
		}
		for _, l := range ls.Num {
			if m.num == nil {
				m.num = make(map[string][]int64)
			}
			m.num[l.Key] = append(m.num[l.Key], l.Value)
			if withUnits[l.Key] {
				if m.unit == nil {
					m.unit = make(map[string][]string)
				}
				m.unit[l.Key] = append(m.unit[l.Key], l.Unit)
			}
		}
		maps[i] = m
	}
	for i := range p.Samples {
		s := &p.Samples[i]
		ps := &profile.Sample{Value: slices.Clone(p.Value(i))}
		for _, id := range p.Stack(s) {
			ps.Location = append(ps.Location, pp.Location[id-1])
		}
		if s.Labels != 0 {
			m := maps[s.Labels-1]
			ps.Label, ps.NumLabel, ps.NumUnit = m.str, m.num, m.unit
		}
		pp.Sample[i] = ps
	}
	return pp
}

// FromPProf returns pp in columns: for profiles jitprof did not make, as
// tests write them. Objects are numbered by their place in pp's lists,
// whatever their IDs; those a sample or location refers to that the lists
// lack are numbered after the listed ones.
func FromPProf(pp *profile.Profile) *Profile {
	p := &Profile{
		DefaultSampleType: pp.DefaultSampleType,
		Period:            pp.Period,
		DurationNanos:     pp.DurationNanos,
		Strings:           []string{""},
	}
	strs := map[string]uint32{"": 0}
	str := func(s string) uint32 {
		id, ok := strs[s]
		if !ok {
			id = uint32(len(p.Strings))
			strs[s] = id
			p.Strings = append(p.Strings, s)
		}
		return id
	}
	for _, st := range pp.SampleType {
		p.SampleType = append(p.SampleType, ValueType{st.Type, st.Unit})
	}
	if pt := pp.PeriodType; pt != nil {
		p.PeriodType = ValueType{pt.Type, pt.Unit}
	}
	mappings := numbered(pp.Mapping)
	functions := numbered(pp.Function)
	locations := numbered(pp.Location)
	mapping := func(m *profile.Mapping) uint32 {
		if m == nil {
			return 0
		}
		return mappings.of(m, func() {
			p.Mappings = append(p.Mappings, Mapping{
				Start: m.Start, Limit: m.Limit, Offset: m.Offset, File: str(m.File), BuildID: str(m.BuildID),
				HasFunctions: m.HasFunctions, HasFilenames: m.HasFilenames, HasLineNumbers: m.HasLineNumbers, HasInlineFrames: m.HasInlineFrames,
			})
		})
	}
	function := func(f *profile.Function) uint32 {
		if f == nil {
			return 0
		}
		return functions.of(f, func() {
			p.Functions = append(p.Functions, Function{Name: str(f.Name), SystemName: str(f.SystemName), Filename: str(f.Filename), StartLine: f.StartLine})
		})
	}
	location := func(l *profile.Location) uint32 {
		return locations.of(l, func() {
			loc := Location{Address: l.Address, Mapping: mapping(l.Mapping), IsFolded: l.IsFolded}
			lines := make([]Line, len(l.Line))
			for i, ln := range l.Line {
				lines[i] = Line{Function: function(ln.Function), Line: ln.Line, Column: ColumnOf(ln.Column)}
			}
			loc.Line, loc.NLines = uint32(len(p.Lines)), uint32(len(lines))
			p.Lines = append(p.Lines, lines...)
			p.Locations.Add(loc)
		})
	}
	// The listed objects first, in their order, so that numbers are places.
	for _, m := range pp.Mapping {
		mapping(m)
	}
	for _, f := range pp.Function {
		function(f)
	}
	for _, l := range pp.Location {
		location(l)
	}
	for _, s := range pp.Sample {
		stack := make([]uint32, len(s.Location))
		for i, l := range s.Location {
			stack[i] = location(l)
		}
		p.Samples = append(p.Samples, Sample{Stack: p.Stacks.Add(stack), Depth: uint32(len(stack)), Labels: labelSet(p, s)})
		values := make([]int64, len(pp.SampleType))
		copy(values, s.Value)
		p.Values = append(p.Values, values...)
	}
	return p
}

// labelSet adds s's labels to p, returning their number; 0 for none.
func labelSet(p *Profile, s *profile.Sample) uint32 {
	if len(s.Label) == 0 && len(s.NumLabel) == 0 {
		return 0
	}
	var ls LabelSet
	for _, k := range slices.Sorted(maps.Keys(s.Label)) {
		for _, v := range s.Label[k] {
			ls.Str = append(ls.Str, Label{k, v})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.NumLabel)) {
		units := s.NumUnit[k]
		for i, v := range s.NumLabel[k] {
			l := NumLabel{Key: k, Value: v}
			if i < len(units) {
				l.Unit = units[i]
			}
			ls.Num = append(ls.Num, l)
		}
	}
	p.LabelSets = append(p.LabelSets, ls)
	return uint32(len(p.LabelSets))
}

// A numbering numbers a pprof list's objects by their place + 1, and
// objects it lacks after them, as they are met.
type numbering[T any] struct {
	ids  map[*T]uint32
	next uint32
}

func numbered[T any](list []*T) *numbering[T] {
	return &numbering[T]{ids: make(map[*T]uint32, len(list)), next: 1}
}

// of returns x's number, calling add when x is met first (add appends
// it, so numbers are places + 1).
func (n *numbering[T]) of(x *T, add func()) uint32 {
	if id, ok := n.ids[x]; ok {
		return id
	}
	id := n.next
	n.next++
	n.ids[x] = id
	add()
	return id
}
