package runtimes

import (
	"slices"
	"strings"
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
		"MONO_ENV_OPTIONS=--jitmap",
		"DENO_V8_FLAGS=--perf-prof,--interpreted-frames-native-stack",
		"BUN_JSC_useJITDump=1",
		"BUN_JSC_jitDumpDirectory=/out",
	}
	for _, tc := range []struct {
		name      string
		callGraph bool
		env, add  []string // add: what must be in the result
		words     []string // NAME=WORD: NAME's value in the result has WORD among its words
		absent    []string // options the result's variables must not have
	}{
		{name: "empty", env: []string{"PATH=/bin"}, add: append([]string{"PATH=/bin"}, defaults...)},
		{name: "lists extended", env: []string{"NODE_OPTIONS=--max-old-space-size=100", "ERL_FLAGS=-noshell"},
			add: []string{"NODE_OPTIONS=--max-old-space-size=100 --perf-prof --interpreted-frames-native-stack", "ERL_FLAGS=-noshell +JPperf true"}},
		{name: "options already there", env: []string{"NODE_OPTIONS=--perf-prof", "ERL_FLAGS=+JPperf map"},
			add: []string{"NODE_OPTIONS=--perf-prof --interpreted-frames-native-stack", "ERL_FLAGS=+JPperf map"}},
		{name: "single values kept", env: []string{"PYTHON_PERF_JIT_SUPPORT=0", "JITDUMPDIR=/mine", "DOTNET_PerfMapEnabled=3"},
			add: []string{"PYTHON_PERF_JIT_SUPPORT=0", "JITDUMPDIR=/mine", "DOTNET_PerfMapEnabled=3"}},
		{name: "Mono's options extended", env: []string{"MONO_ENV_OPTIONS=--debug"}, add: []string{"MONO_ENV_OPTIONS=--debug --jitmap"}},
		{name: "Deno's flags, by commas", env: []string{"DENO_V8_FLAGS=--max-old-space-size=100,--perf-prof"},
			add: []string{"DENO_V8_FLAGS=--max-old-space-size=100,--perf-prof,--interpreted-frames-native-stack"}},
		{name: "empty list", env: []string{"NODE_OPTIONS="}, add: []string{"NODE_OPTIONS=--perf-prof --interpreted-frames-native-stack"}},
		{name: "last entry counts", env: []string{"ERL_FLAGS=a", "ERL_FLAGS=b"}, add: []string{"ERL_FLAGS=a", "ERL_FLAGS=b +JPperf true"}},
		{name: "frame pointers for Java's call chains", callGraph: true, env: []string{"JAVA_TOOL_OPTIONS=-Xmx1g"},
			add: defaults, words: []string{"JAVA_TOOL_OPTIONS=-Xmx1g", "JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"}},
		{name: "frame pointers without a list of the user's", callGraph: true, env: []string{"PATH=/bin"},
			words: []string{"JAVA_TOOL_OPTIONS=-XX:+PreserveFramePointer"}},
		{name: "the user's choice of frame pointers kept", callGraph: true, env: []string{"JAVA_TOOL_OPTIONS=-XX:-PreserveFramePointer"},
			absent: []string{"-XX:+PreserveFramePointer"}},
		{name: "no call chains, no frame pointers", env: []string{"JAVA_TOOL_OPTIONS=-Xmx1g"}, absent: []string{"-XX:+PreserveFramePointer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := slices.Clone(tc.env)
			var notes []string
			got, err := Env(tc.env, Context{DumpDir: dir, CallGraph: tc.callGraph}, func(n string) { notes = append(notes, n) })
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
			for _, w := range tc.words {
				name, word, _ := strings.Cut(w, "=")
				if i := LookupEnv(got, name); i < 0 || !slices.Contains(strings.Fields(strings.TrimPrefix(got[i], name+"=")), word) {
					t.Errorf("%q: %s lacks %q", got, name, word)
				}
			}
			for _, opt := range tc.absent {
				for _, kv := range got {
					if strings.Contains(kv, opt) {
						t.Errorf("%q has %q", kv, opt)
					}
				}
			}
			// Each variable is set once more than the caller had it, or
			// as often: none is added twice. Only agents not built here
			// are left out, each with a note.
			for _, r := range All {
				for _, v := range r.Env {
					had, has := countEntries(tc.env, v.Name), countEntries(got, v.Name)
					noted := slices.ContainsFunc(notes, func(n string) bool { return strings.HasPrefix(n, v.Name+" ") })
					if has > max(had, 1) || has == 0 && !noted {
						t.Errorf("%q: %s set %d times, the caller's environment %d times (notes %q)", got, v.Name, has, had, notes)
					}
				}
			}
		})
	}
}

// countEntries is how many entries of env set name.
func countEntries(env []string, name string) int {
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			n++
		}
	}
	return n
}

func TestOf(t *testing.T) {
	for _, tc := range []struct{ exe, comm, want string }{
		{"/usr/bin/node", "node", "nodejs"},
		{"/usr/lib/jvm/java-17/bin/java", "java", "java"},
		{"/usr/lib/erlang/erts-13/bin/beam.smp", "beam.smp", "erlang"},
		{"/usr/bin/php8.2", "php", "php"},
		{"", "python3.13", "python"},
		{"/usr/bin/mono-sgen", "mono", "mono"},
		{"/root/.npm/deno", "deno", "deno"},
		{"/app/node_modules/bun/bin/bun.exe", "bun.exe", "bun"},
		{"/usr/local/bin/bun", "bun", "bun"},
		{"/usr/lib/llvm-14/bin/lli", "lli", "llvm"},
		{"/usr/bin/bash", "bash", ""},
	} {
		got := ""
		if r := Of(tc.exe, tc.comm); r != nil {
			got = r.Name
		}
		if got != tc.want {
			t.Errorf("Of(%q, %q) = %q, want %q", tc.exe, tc.comm, got, tc.want)
		}
	}
}
