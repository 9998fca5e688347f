package report

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"io"
	"maps"
	"slices"

	"github.com/google/pprof/profile"
)

// writePProf writes p as profile.Write does, byte for byte, one message at
// a time. profile.Write encodes the whole profile into one buffer before
// compressing it, a buffer copied over and over as it grows: 240 MB for
// 1,000 distinct stacks 8,000 deep, several times that allocated, on top
// of the profile. TestPProfLikeWrite holds the two to the same bytes.
//
// profile.proto puts the string table after the messages that refer to it,
// so the strings are numbered first, in the order profile.Write numbers
// them, and written last.
func writePProf(w io.Writer, p *profile.Profile) error {
	e := pprofEncoder{index: map[string]int64{"": 0}, table: []string{""}}
	e.number(p)

	zw := gzip.NewWriter(w)
	e.w = bufio.NewWriterSize(zw, 64<<10)
	for _, st := range p.SampleType {
		e.valueType(1, st)
	}
	for _, s := range p.Sample {
		e.sample(s)
	}
	for _, m := range p.Mapping {
		e.mapping(m)
	}
	for _, l := range p.Location {
		e.location(l)
	}
	for _, f := range p.Function {
		e.function(f)
	}
	for _, s := range e.table {
		e.top = appendTag(e.top[:0], 6, 2)
		e.top = binary.AppendUvarint(e.top, uint64(len(s)))
		e.w.Write(e.top)
		e.w.WriteString(s)
	}
	b := e.top[:0]
	b = appendInt64Opt(b, 7, e.index[p.DropFrames])
	b = appendInt64Opt(b, 8, e.index[p.KeepFrames])
	b = appendInt64Opt(b, 9, p.TimeNanos)
	b = appendInt64Opt(b, 10, p.DurationNanos)
	e.w.Write(b)
	if pt := p.PeriodType; pt != nil && (e.index[pt.Type] != 0 || e.index[pt.Unit] != 0) {
		e.valueType(11, pt)
	}
	b = appendInt64Opt(e.top[:0], 12, p.Period)
	comments := make([]int64, len(p.Comments))
	for i, c := range p.Comments {
		comments[i] = e.index[c]
	}
	b = appendInt64s(b, 13, comments)
	b = appendTag(b, 14, 0)
	b = binary.AppendUvarint(b, uint64(e.index[p.DefaultSampleType]))
	b = appendInt64Opt(b, 15, e.index[p.DocURL])
	e.w.Write(b)
	if err := e.w.Flush(); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

// A pprofEncoder writes a profile's messages to w, each encoded in msg.
type pprofEncoder struct {
	w     *bufio.Writer
	index map[string]int64 // of the string table
	table []string
	msg   []byte // the message being encoded
	sub   []byte // a message within it
	top   []byte // fields of the profile itself
	keys  []string
}

// number numbers p's strings in profile.Write's order.
func (e *pprofEncoder) number(p *profile.Profile) {
	for _, st := range p.SampleType {
		e.add(st.Type)
		e.add(st.Unit)
	}
	for _, s := range p.Sample {
		for _, k := range e.sorted(s.Label) {
			for _, v := range s.Label[k] {
				e.add(k)
				e.add(v)
			}
		}
		for _, k := range e.sortedNum(s.NumLabel) {
			e.add(k)
			if units := s.NumUnit[k]; len(units) != 0 {
				for i := range s.NumLabel[k] {
					e.add(unitOf(units, i))
				}
			}
		}
	}
	for _, m := range p.Mapping {
		e.add(m.File)
		e.add(m.BuildID)
	}
	for _, f := range p.Function {
		e.add(f.Name)
		e.add(f.SystemName)
		e.add(f.Filename)
	}
	e.add(p.DropFrames)
	e.add(p.KeepFrames)
	if pt := p.PeriodType; pt != nil {
		e.add(pt.Type)
		e.add(pt.Unit)
	}
	for _, c := range p.Comments {
		e.add(c)
	}
	e.add(p.DefaultSampleType)
	e.add(p.DocURL)
}

func (e *pprofEncoder) add(s string) {
	if _, ok := e.index[s]; !ok {
		e.index[s] = int64(len(e.table))
		e.table = append(e.table, s)
	}
}

// sorted returns the keys of m in order, in e.keys.
func (e *pprofEncoder) sorted(m map[string][]string) []string {
	e.keys = slices.AppendSeq(e.keys[:0], maps.Keys(m))
	slices.Sort(e.keys)
	return e.keys
}

// sortedNum returns the keys of m in order, in e.keys.
func (e *pprofEncoder) sortedNum(m map[string][]int64) []string {
	e.keys = slices.AppendSeq(e.keys[:0], maps.Keys(m))
	slices.Sort(e.keys)
	return e.keys
}

// unitOf returns the unit of a sample's numeric label i, or "" where
// profile.Write would fail on a list of units shorter than the values.
func unitOf(units []string, i int) string {
	if i < len(units) {
		return units[i]
	}
	return ""
}

// label appends a sample's label to b: keyX, strX, numX and unitX as
// profile.Write sets them.
func (e *pprofEncoder) label(b []byte, key, str, num, unit int64) []byte {
	e.sub = appendInt64Opt(e.sub[:0], 1, key)
	e.sub = appendInt64Opt(e.sub, 2, str)
	e.sub = appendInt64Opt(e.sub, 3, num)
	e.sub = appendInt64Opt(e.sub, 4, unit)
	b = appendTag(b, 3, 2)
	b = binary.AppendUvarint(b, uint64(len(e.sub)))
	return append(b, e.sub...)
}

// flush writes the message in msg as field tag of the profile.
func (e *pprofEncoder) flush(tag int) {
	e.top = appendTag(e.top[:0], tag, 2)
	e.top = binary.AppendUvarint(e.top, uint64(len(e.msg)))
	e.w.Write(e.top)
	e.w.Write(e.msg)
}

func (e *pprofEncoder) valueType(tag int, vt *profile.ValueType) {
	e.msg = appendInt64Opt(e.msg[:0], 1, e.index[vt.Type])
	e.msg = appendInt64Opt(e.msg, 2, e.index[vt.Unit])
	e.flush(tag)
}

func (e *pprofEncoder) sample(s *profile.Sample) {
	b := e.msg[:0]
	if len(s.Location) > 2 {
		n := 0
		for _, l := range s.Location {
			n += varintLen(l.ID)
		}
		b = appendTag(b, 1, 2)
		b = binary.AppendUvarint(b, uint64(n))
		for _, l := range s.Location {
			b = binary.AppendUvarint(b, l.ID)
		}
	} else {
		for _, l := range s.Location {
			b = appendTag(b, 1, 0)
			b = binary.AppendUvarint(b, l.ID)
		}
	}
	b = appendInt64s(b, 2, s.Value)
	for _, k := range e.sorted(s.Label) {
		for _, v := range s.Label[k] {
			b = e.label(b, e.index[k], e.index[v], 0, 0)
		}
	}
	for _, k := range e.sortedNum(s.NumLabel) {
		units := s.NumUnit[k]
		for i, v := range s.NumLabel[k] {
			var unit int64
			if len(units) != 0 {
				unit = e.index[unitOf(units, i)]
			}
			b = e.label(b, e.index[k], 0, v, unit)
		}
	}
	e.msg = b
	e.flush(2)
}

func (e *pprofEncoder) mapping(m *profile.Mapping) {
	b := appendUint64Opt(e.msg[:0], 1, m.ID)
	b = appendUint64Opt(b, 2, m.Start)
	b = appendUint64Opt(b, 3, m.Limit)
	b = appendUint64Opt(b, 4, m.Offset)
	b = appendInt64Opt(b, 5, e.index[m.File])
	b = appendInt64Opt(b, 6, e.index[m.BuildID])
	b = appendBoolOpt(b, 7, m.HasFunctions)
	b = appendBoolOpt(b, 8, m.HasFilenames)
	b = appendBoolOpt(b, 9, m.HasLineNumbers)
	b = appendBoolOpt(b, 10, m.HasInlineFrames)
	e.msg = b
	e.flush(3)
}

func (e *pprofEncoder) location(l *profile.Location) {
	b := appendUint64Opt(e.msg[:0], 1, l.ID)
	if l.Mapping != nil {
		b = appendUint64Opt(b, 2, l.Mapping.ID)
	}
	b = appendUint64Opt(b, 3, l.Address)
	for _, ln := range l.Line {
		e.sub = e.sub[:0]
		if ln.Function != nil {
			e.sub = appendUint64Opt(e.sub, 1, ln.Function.ID)
		}
		e.sub = appendInt64Opt(e.sub, 2, ln.Line)
		e.sub = appendInt64Opt(e.sub, 3, ln.Column)
		b = appendTag(b, 4, 2)
		b = binary.AppendUvarint(b, uint64(len(e.sub)))
		b = append(b, e.sub...)
	}
	b = appendBoolOpt(b, 5, l.IsFolded)
	e.msg = b
	e.flush(4)
}

func (e *pprofEncoder) function(f *profile.Function) {
	b := appendUint64Opt(e.msg[:0], 1, f.ID)
	b = appendInt64Opt(b, 2, e.index[f.Name])
	b = appendInt64Opt(b, 3, e.index[f.SystemName])
	b = appendInt64Opt(b, 4, e.index[f.Filename])
	b = appendInt64Opt(b, 5, f.StartLine)
	e.msg = b
	e.flush(5)
}

// The protobuf encoding (varints are encoding/binary's), as profile.Write's:
// fields that are zero are left out, and lists of more than two numbers
// packed.

func varintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

func appendTag(b []byte, tag, wireType int) []byte {
	return binary.AppendUvarint(b, uint64(tag)<<3|uint64(wireType))
}

func appendUint64Opt(b []byte, tag int, x uint64) []byte {
	if x == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, tag, 0), x)
}

func appendInt64Opt(b []byte, tag int, x int64) []byte {
	return appendUint64Opt(b, tag, uint64(x))
}

func appendBoolOpt(b []byte, tag int, x bool) []byte {
	if !x {
		return b
	}
	return binary.AppendUvarint(appendTag(b, tag, 0), 1)
}

func appendInt64s(b []byte, tag int, x []int64) []byte {
	if len(x) <= 2 {
		for _, v := range x {
			b = binary.AppendUvarint(appendTag(b, tag, 0), uint64(v))
		}
		return b
	}
	n := 0
	for _, v := range x {
		n += varintLen(uint64(v))
	}
	b = binary.AppendUvarint(appendTag(b, tag, 2), uint64(n))
	for _, v := range x {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return b
}
