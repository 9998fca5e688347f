package report

import (
	"bufio"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/jitprof/jitprof/internal/arena"
	"github.com/jitprof/jitprof/internal/contract"
	"github.com/jitprof/jitprof/internal/idindex"
)

// Folded writes p to w as folded stacks, one line per distinct stack with
// its value (o.Value), in the format the package documentation describes.
// Of o, it uses Value and CommRoot, and checks the rest as CheckOptions
// does. Stacks whose value is zero are left
// out: a flame graph would not show them.
func Folded(w io.Writer, p *contract.Profile, o Options) error {
	if err := CheckOptions(o); err != nil {
		return err
	}
	m, err := newModel(p, o.Value)
	if err != nil {
		return err
	}
	names := make([]string, len(m.frames))
	for i := range m.frames {
		names[i] = m.foldedName(&m.frames[i])
	}
	comms := make([]string, len(m.comms))
	for i, c := range m.comms {
		comms[i] = foldedComm(c)
	}

	// Stacks are looked up by their folded text, which merges stacks that
	// differ only in what folding replaced, through an index of their
	// numbers, the lines packed in blocks: a map of a million lines cost
	// 30 bytes a line more, and an allocation each.
	index := idindex.New(len(m.samples))
	seed := maphash.MakeSeed()
	var texts arena.Strings
	stacks := make([]stack, 0, len(m.samples)) // sized ahead: grown, it would be copied over and over
	var line []byte
	for i := range m.samples {
		s := &m.samples[i]
		line = line[:0]
		if o.CommRoot {
			line = append(line, comms[s.comm]...)
			line = append(line, ';')
		}
		frames := m.stack(s)
		for i := frames.len() - 1; i >= 0; i-- {
			line = append(line, names[frames.at(i)]...)
			line = append(line, ';')
		}
		line = line[:len(line)-1]
		h := maphash.Bytes(seed, line)
		id, slot := index.Find(h, func(id uint32) bool { return stacks[id-1].frames == string(line) })
		if id != 0 {
			stacks[id-1].value += s.value
			continue
		}
		stacks = append(stacks, stack{texts.CloneBytes(line), s.value})
		index.Add(slot, uint32(len(stacks)), h, func(id uint32) uint64 { return maphash.String(seed, stacks[id-1].frames) })
	}
	slices.SortFunc(stacks, func(a, b stack) int { return strings.Compare(a.frames, b.frames) })

	bw := bufio.NewWriter(w)
	for _, s := range stacks {
		if s.value == 0 {
			continue
		}
		line = append(line[:0], s.frames...)
		line = append(line, ' ')
		line = strconv.AppendInt(line, s.value, 10)
		line = append(line, '\n')
		bw.Write(line)
	}
	return bw.Flush()
}

// A stack is a line of folded stacks.
type stack struct {
	frames string
	value  int64
}

// foldedName names f in a folded stack as stackcollapse-perf.pl does.
func (m *model) foldedName(f *frame) string {
	switch module := m.module(f); {
	case f.resolved():
		return foldName(m.name(f))
	case strings.HasPrefix(module, "["):
		return foldName(module)
	default:
		return "[" + foldName(module) + "]"
	}
}

// foldedComm names a command at the root of a folded stack, with no
// spaces, as stackcollapse-perf.pl does.
func foldedComm(c string) string { return strings.ReplaceAll(foldName(c), " ", "_") }

var folder = strings.NewReplacer(";", ":", "\n", " ", "\r", " ")

// foldName replaces what would break a line of folded stacks.
func foldName(s string) string { return folder.Replace(s) }
