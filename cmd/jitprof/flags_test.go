package main

import (
	"strings"
	"testing"
	"time"
)

func TestDurationFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  bool
	}{
		{"1.5", 1500 * time.Millisecond, false},
		{"2", 2 * time.Second, false},
		{"90s", 90 * time.Second, false},
		{"250ms", 250 * time.Millisecond, false},
		{"-1", 0, true},
		{"-3s", 0, true},
		{"soon", 0, true},
		{"1e300", 0, true},
	} {
		var d time.Duration
		err := durationFlag{&d}.Set(tc.in)
		if (err != nil) != tc.err || d != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, error %v", tc.in, d, err, tc.want, tc.err)
		}
	}
}

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 dumps", 1: "1 dump", 2: "2 dumps"} {
		if got := count(n, "dump"); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

// perf report's common flags mean what they mean there; contradictions are
// refused before any recording is read.
func TestPerfReportFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"report", "--children", "--no-children", "-i", "/nonexistent"}, 2},
		{[]string{"report", "--stdio", "--format", "json", "-i", "/nonexistent"}, 2},
		{[]string{"report", "--stdio", "--no-children", "--sort", "dso,sym", "-i", "/nonexistent"}, 1}, // accepted: fails on the missing file
	} {
		if code, _ := jitprof(t, tc.args...); code != tc.code {
			t.Errorf("jitprof %s: exit %d, want %d", strings.Join(tc.args, " "), code, tc.code)
		}
	}
	if code, out := jitprof(t, "--version"); code != 0 || !strings.HasPrefix(out, "jitprof version ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}
