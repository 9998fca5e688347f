package stages

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/jitprof/jitprof/internal/jitsources"
)

// Marks are the stage marks of the dumps of a recording, by the recorded pid
// of the process that marked each dump (not its header's, which is the
// runtime's own in a container's pid namespace): what a program said about
// its own phases with jitdump's Writer.Stage and Writer.Accounting.
type Marks struct {
	byPid map[uint32][]mark
	names map[string]bool
}

// mark is a StageMark in perf's clock.
type mark struct {
	time       uint64
	name       string
	accounting bool
}

// NewMarks collects the marks of dumps, in perf's clock. It returns nil
// when no dump has marks, so that callers pay nothing for programs that
// mark nothing.
func NewMarks(dumps []*jitsources.Dump) *Marks {
	var s *Marks
	for _, d := range dumps {
		if len(d.Marks) == 0 {
			continue
		}
		if s == nil {
			s = &Marks{byPid: make(map[uint32][]mark), names: make(map[string]bool)}
		}
		ms := s.byPid[d.Pid]
		for _, m := range d.Marks {
			// The name aliases the dump, which the caller may close
			// before it is done with the stages.
			name := strings.Clone(m.Name)
			ms = append(ms, mark{time: d.PerfTime(m.Timestamp), name: name, accounting: m.Accounting})
			s.names[name] = true
		}
		// Stable: marks of equal time keep their file order, the last
		// one stating the state from then on.
		slices.SortStableFunc(ms, func(x, y mark) int { return cmp.Compare(x.time, y.time) })
		s.byPid[d.Pid] = ms
	}
	return s
}

// Names returns the stage names the marks use, sorted; "" (before the first
// named stage) is not among them.
func (s *Marks) Names() []string {
	if s == nil {
		return nil
	}
	names := slices.Sorted(maps.Keys(s.names))
	return slices.DeleteFunc(names, func(n string) bool { return n == "" })
}

// Has tells whether a mark names stage name.
func (s *Marks) Has(name string) bool { return s != nil && s.names[name] }

// At returns the stage process pid was in at time t and whether its
// accounting was on. A process without marks, and any before its first
// mark, is in stage "" with accounting on.
func (s *Marks) At(pid uint32, t uint64) (stage string, accounting bool) {
	if s == nil {
		return "", true
	}
	ms := s.byPid[pid]
	i := sort.Search(len(ms), func(i int) bool { return ms[i].time > t })
	if i == 0 {
		return "", true
	}
	return ms[i-1].name, ms[i-1].accounting
}
