package record

import (
	"slices"
	"testing"
)

func TestRuntimeEnv(t *testing.T) {
	const dir = "/out"
	defaults := []string{
		"NODE_OPTIONS=--perf-prof --interpreted-frames-native-stack",
		"ERL_FLAGS=+JPperf true",
		"PYTHON_PERF_JIT_SUPPORT=1",
		"DOTNET_PerfMapEnabled=1",
		"JITDUMPDIR=/out",
	}
	for _, tc := range []struct {
		name     string
		env, add []string // add: what must be in the result
	}{
		{name: "empty", env: []string{"PATH=/bin"}, add: append([]string{"PATH=/bin"}, defaults...)},
		{name: "lists extended", env: []string{"NODE_OPTIONS=--max-old-space-size=100", "ERL_FLAGS=-noshell"},
			add: []string{"NODE_OPTIONS=--max-old-space-size=100 --perf-prof --interpreted-frames-native-stack", "ERL_FLAGS=-noshell +JPperf true"}},
		{name: "options already there", env: []string{"NODE_OPTIONS=--perf-prof", "ERL_FLAGS=+JPperf map"},
			add: []string{"NODE_OPTIONS=--perf-prof --interpreted-frames-native-stack", "ERL_FLAGS=+JPperf map"}},
		{name: "single values kept", env: []string{"PYTHON_PERF_JIT_SUPPORT=0", "JITDUMPDIR=/mine", "DOTNET_PerfMapEnabled=3"},
			add: []string{"PYTHON_PERF_JIT_SUPPORT=0", "JITDUMPDIR=/mine", "DOTNET_PerfMapEnabled=3"}},
		{name: "empty list", env: []string{"NODE_OPTIONS="}, add: []string{"NODE_OPTIONS=--perf-prof --interpreted-frames-native-stack"}},
		{name: "last entry counts", env: []string{"ERL_FLAGS=a", "ERL_FLAGS=b"}, add: []string{"ERL_FLAGS=a", "ERL_FLAGS=b +JPperf true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.env)
			var notes []string
			got, err := runtimeEnv(tc.env, dir, func(n string) { notes = append(notes, n) })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tc.env, orig) {
				t.Errorf("the caller's environment changed: %q", tc.env)
			}
			for _, want := range tc.add {
				if !slices.Contains(got, want) {
					t.Errorf("%q lacks %q", got, want)
				}
			}
			// Agents not built here are left out, each with a note.
			if len(got) != len(tc.env)+len(runtimeVars)-countSet(tc.env)-len(notes) {
				t.Errorf("%q: variables added twice or lost", got)
			}
		})
	}
}

// countSet is how many runtime variables env already sets.
func countSet(env []string) int {
	n := 0
	for _, v := range runtimeVars {
		if lookupEnv(env, v.name) >= 0 {
			n++
		}
	}
	return n
}
