package stages

import (
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		specs []string
		want  string // the stages, or the error's text
	}{
		{[]string{"a=1,2.5", "b"}, "[{a false 1000000000 2500000000} {b true 0 0}]"},
		{[]string{"open=,3", "rest=3,"}, "[{open false 0 3000000000} {rest false 3000000000 0}]"},
		{[]string{"=1,2"}, "can end a file name"},
		{[]string{"a/b=1,2"}, "can end a file name"},
		{[]string{".."}, "can end a file name"},
		{[]string{"a=2,1"}, "not after the start"},
		{[]string{"a=x,1"}, "not a time"},
		{[]string{"a=1"}, "want START,END"},
		{[]string{"a", "a=1,2"}, "given twice"},
	}
	for _, tc := range tests {
		got, err := Parse(tc.specs)
		s := fmtStages(got)
		if err != nil {
			s = err.Error()
		}
		if !strings.Contains(s, tc.want) {
			t.Errorf("Parse(%q) = %s, want %s", tc.specs, s, tc.want)
		}
	}
}

func fmtStages(ss []Spec) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, "{"+s.Name+" "+strconv.FormatBool(s.Marked)+" "+strconv.FormatUint(s.Start, 10)+" "+strconv.FormatUint(s.End, 10)+"}")
	}
	return "[" + strings.Join(parts, " ") + "]"
}
