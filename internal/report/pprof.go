package report

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"io"

	"github.com/jitprof/jitprof/internal/contract"
)

// writePProf writes p as profile.Write writes p.PProf(), byte for byte, one
// message at a time, without pprof's objects (about 470 bytes a function
// at a million functions). profile.Write also encodes the whole profile
// into one buffer before compressing it, a buffer copied over and over as
// it grows: 240 MB for 1,000 distinct stacks 8,000 deep. TestPProfLikeWrite
// holds the two to the same bytes.
//
// profile.proto puts the string table after the messages that refer to it,
// so the strings are numbered first, in the order profile.Write numbers
// them, and written last.
func writePProf(w io.Writer, p *contract.Profile) error {
	e := pprofEncoder{p: p, index: map[string]int64{"": 0}, table: []string{""}, numbered: make([]int32, len(p.Strings))}
	e.number()

	zw := gzip.NewWriter(w)
	e.w = bufio.NewWriterSize(zw, 64<<10)
	for _, st := range p.SampleType {
		e.valueType(1, st)
	}
	for i := range p.Samples {
		e.sample(i)
	}
	for i := range p.Mappings {
		e.mapping(i)
	}
	for i := range p.Locations.Len() {
		e.location(i)
	}
	for i := range p.Functions {
		e.function(i)
	}
	for _, s := range e.table {
		e.top = appendTag(e.top[:0], 6, 2)
		e.top = binary.AppendUvarint(e.top, uint64(len(s)))
		e.w.Write(e.top)
		e.w.WriteString(s)
	}
	// No drop or keep frames (7, 8), no time (9).
	b := appendInt64Opt(e.top[:0], 10, p.DurationNanos)
	e.w.Write(b)
	if pt := p.PeriodType; e.index[pt.Type] != 0 || e.index[pt.Unit] != 0 {
		e.valueType(11, pt)
	}
	b = appendInt64Opt(e.top[:0], 12, p.Period)
	b = appendTag(b, 14, 0)
	b = binary.AppendUvarint(b, uint64(e.index[p.DefaultSampleType]))
	e.w.Write(b)
	if err := e.w.Flush(); err != nil {
		zw.Close()
		return err
	}
	return zw.Close()
}

// A pprofEncoder writes a profile's messages to w, each encoded in msg.
type pprofEncoder struct {
	p *contract.Profile
	w *bufio.Writer
	// The string table written: the strings outside p.Strings (sample
	// types, labels, ...) by index, and p's by number, in numbered
	// (index + 1; 0 until numbered). p.Strings holds a string once, so
	// no map of a million function names is needed to tell them apart.
	index    map[string]int64
	numbered []int32
	table    []string
	msg      []byte // the message being encoded
	sub      []byte // a message within it
	top      []byte // fields of the profile itself
}

// number numbers p's strings in profile.Write's order.
func (e *pprofEncoder) number() {
	p := e.p
	for _, st := range p.SampleType {
		e.add(st.Type)
		e.add(st.Unit)
	}
	// A label set's strings are numbered where a sample first has it.
	seen := make([]bool, len(p.LabelSets))
	for _, s := range p.Samples {
		if s.Labels == 0 || seen[s.Labels-1] {
			continue
		}
		seen[s.Labels-1] = true
		ls := &p.LabelSets[s.Labels-1]
		for _, l := range ls.Str {
			e.add(l.Key)
			e.add(l.Value)
		}
		// pprof writes the units of a key any of whose values has one,
		// "" for those without: the empty string, numbered 0 already.
		for _, l := range ls.Num {
			e.add(l.Key)
			e.add(l.Unit)
		}
	}
	for _, m := range p.Mappings {
		e.addID(m.File)
		e.addID(m.BuildID)
	}
	for _, f := range p.Functions {
		e.addID(f.Name)
		e.addID(f.SystemName)
		e.addID(f.Filename)
	}
	e.addLate(p.PeriodType.Type)
	e.addLate(p.PeriodType.Unit)
	e.addLate(p.DefaultSampleType)
}

// add numbers s, a string other than p's, before p's strings are numbered.
func (e *pprofEncoder) add(s string) {
	if _, ok := e.index[s]; !ok {
		e.index[s] = int64(len(e.table))
		e.table = append(e.table, s)
	}
}

// addLate numbers s after p's strings, which may hold it numbered.
func (e *pprofEncoder) addLate(s string) {
	if _, ok := e.index[s]; ok {
		return
	}
	for id, t := range e.p.Strings {
		if t == s && e.numbered[id] != 0 {
			e.index[s] = int64(e.numbered[id] - 1)
			return
		}
	}
	e.add(s)
}

// addID numbers string id of p.
func (e *pprofEncoder) addID(id uint32) {
	if e.numbered[id] != 0 {
		return
	}
	s := e.p.Strings[id]
	i, ok := e.index[s]
	if !ok {
		i = int64(len(e.table))
		e.table = append(e.table, s)
	}
	e.numbered[id] = int32(i + 1)
}

// of returns the index of string id of p.
func (e *pprofEncoder) of(id uint32) int64 { return int64(e.numbered[id] - 1) }

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

func (e *pprofEncoder) valueType(tag int, vt contract.ValueType) {
	e.msg = appendInt64Opt(e.msg[:0], 1, e.index[vt.Type])
	e.msg = appendInt64Opt(e.msg, 2, e.index[vt.Unit])
	e.flush(tag)
}

func (e *pprofEncoder) sample(i int) {
	s := &e.p.Samples[i]
	stack := e.p.Stack(s)
	b := e.msg[:0]
	if len(stack) > 2 {
		n := 0
		for _, id := range stack {
			n += varintLen(uint64(id))
		}
		b = appendTag(b, 1, 2)
		b = binary.AppendUvarint(b, uint64(n))
		for _, id := range stack {
			b = binary.AppendUvarint(b, uint64(id))
		}
	} else {
		for _, id := range stack {
			b = appendTag(b, 1, 0)
			b = binary.AppendUvarint(b, uint64(id))
		}
	}
	b = appendInt64s(b, 2, e.p.Value(i))
	if s.Labels != 0 {
		ls := &e.p.LabelSets[s.Labels-1]
		for _, l := range ls.Str {
			b = e.label(b, e.index[l.Key], e.index[l.Value], 0, 0)
		}
		for _, l := range ls.Num {
			b = e.label(b, e.index[l.Key], 0, l.Value, e.index[l.Unit])
		}
	}
	e.msg = b
	e.flush(2)
}

func (e *pprofEncoder) mapping(i int) {
	m := &e.p.Mappings[i]
	b := appendUint64Opt(e.msg[:0], 1, uint64(i+1))
	b = appendUint64Opt(b, 2, m.Start)
	b = appendUint64Opt(b, 3, m.Limit)
	b = appendUint64Opt(b, 4, m.Offset)
	b = appendInt64Opt(b, 5, e.of(m.File))
	b = appendInt64Opt(b, 6, e.of(m.BuildID))
	b = appendBoolOpt(b, 7, m.HasFunctions)
	b = appendBoolOpt(b, 8, m.HasFilenames)
	b = appendBoolOpt(b, 9, m.HasLineNumbers)
	b = appendBoolOpt(b, 10, m.HasInlineFrames)
	e.msg = b
	e.flush(3)
}

func (e *pprofEncoder) location(i int) {
	l := e.p.Locations.At(i)
	b := appendUint64Opt(e.msg[:0], 1, uint64(i+1))
	b = appendUint64Opt(b, 2, uint64(l.Mapping))
	b = appendUint64Opt(b, 3, l.Address)
	for _, ln := range e.p.LinesOf(l) {
		e.sub = appendUint64Opt(e.sub[:0], 1, uint64(ln.Function))
		e.sub = appendInt64Opt(e.sub, 2, ln.Line)
		e.sub = appendInt64Opt(e.sub, 3, int64(ln.Column))
		b = appendTag(b, 4, 2)
		b = binary.AppendUvarint(b, uint64(len(e.sub)))
		b = append(b, e.sub...)
	}
	b = appendBoolOpt(b, 5, l.IsFolded)
	e.msg = b
	e.flush(4)
}

func (e *pprofEncoder) function(i int) {
	f := &e.p.Functions[i]
	b := appendUint64Opt(e.msg[:0], 1, uint64(i+1))
	b = appendInt64Opt(b, 2, e.of(f.Name))
	b = appendInt64Opt(b, 3, e.of(f.SystemName))
	b = appendInt64Opt(b, 4, e.of(f.Filename))
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
