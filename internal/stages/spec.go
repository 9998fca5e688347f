package stages

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Spec is one part of a run to report on its own (report's --stage).
type Spec struct {
	Name string
	// Marked: the program's own stage, from its dump's marks; else the
	// times Start and End, from the first sample (End 0: no bound).
	Marked     bool
	Start, End uint64
}

// Parse reads --stage values: NAME=START,END (seconds from the first
// sample, either may be empty) or NAME, a stage the program marked. Each
// name must be able to end a file name, and be given once.
func Parse(specs []string) ([]Spec, error) {
	var out []Spec
	seen := make(map[string]bool)
	for _, spec := range specs {
		name, times, timed := strings.Cut(spec, "=")
		if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return nil, fmt.Errorf("--stage %q: a stage needs a name that can end a file name", spec)
		}
		if seen[name] {
			return nil, fmt.Errorf("--stage %q: stage %s is given twice", spec, name)
		}
		seen[name] = true
		st := Spec{Name: name, Marked: !timed}
		if timed {
			var err error
			if st.Start, st.End, err = ParseRange(times); err != nil {
				return nil, fmt.Errorf("--stage %q: %w", spec, err)
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// ParseRange reads perf's --time START,END, in seconds, into nanoseconds;
// either may be empty (0: no bound).
func ParseRange(s string) (start, end uint64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("--time %q: want START,END", s)
	}
	parse := func(v string) (uint64, error) {
		if v == "" {
			return 0, nil
		}
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil || sec < 0 || sec > math.MaxUint64/1e9 {
			return 0, fmt.Errorf("--time %q: %q is not a time in seconds", s, v)
		}
		return uint64(math.Round(sec * 1e9)), nil
	}
	if start, err = parse(a); err != nil {
		return 0, 0, err
	}
	if end, err = parse(b); err != nil {
		return 0, 0, err
	}
	if end != 0 && end <= start {
		return 0, 0, fmt.Errorf("--time %q: the end is not after the start", s)
	}
	return start, end, nil
}

// Window narrows the sample times [start, end) (end 0: no bound) to a timed
// stage that begins at first, the recording's first sample. It fails when
// nothing is left.
func (s Spec) Window(first, start, end uint64) (uint64, uint64, error) {
	from := max(first+s.Start, start)
	if s.End != 0 && (end == 0 || first+s.End < end) {
		end = first + s.End
	}
	if end != 0 && end <= from {
		return 0, 0, fmt.Errorf("--stage %s: no time is left once --time applies", s.Name)
	}
	return from, end, nil
}
