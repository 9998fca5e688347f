package record

import (
	"fmt"
	"strings"

	"github.com/jitprof/jitprof/agents"
)

// runtimeVar is an environment variable that makes a JIT runtime describe
// its code (a jitdump, or a perf map where that is all it writes).
type runtimeVar struct {
	name string
	// sep joins the value to one the user already set (a list of
	// options); empty when the variable holds a single value, which is
	// then left as the user set it.
	sep string
	// value returns the value: for a list, its options, each added unless
	// the user's list already has that option's flag (its first word, so
	// that the user's +JPperf map stays; for HotSpot's -XX:±Name, Name).
	// A variable may be listed twice, its options then joining.
	value func(envContext) ([]string, error)
	// optional variables are left out, with a note, when value fails: a
	// jitprof built without its agents still records everything else.
	optional bool
}

// envContext is what the variables' values depend on.
type envContext struct {
	dumpDir   string // where runtimes that take a directory should write
	callGraph bool   // call chains are recorded
}

func constant(v ...string) func(envContext) ([]string, error) {
	return func(envContext) ([]string, error) { return v, nil }
}

// agentPath returns the path of one of jitprof's agents, prefixed.
func agentPath(k agents.Kind, prefix string) func(envContext) ([]string, error) {
	return func(envContext) ([]string, error) {
		path, err := agents.Library(k)
		if err != nil {
			return nil, err
		}
		return []string{prefix + path}, nil
	}
}

// runtimeVars are set for a recorded command.
var runtimeVars = []runtimeVar{
	// V8 takes these flags from NODE_OPTIONS too; the dump goes to the
	// working directory. Interpreted functions otherwise all run in one
	// builtin, InterpreterEntryTrampoline; with a copy of it each, they
	// are named in samples and call chains.
	{name: "NODE_OPTIONS", sep: " ", value: constant("--perf-prof", "--interpreted-frames-native-stack")},
	// BEAM: the dump goes to /tmp.
	{name: "ERL_FLAGS", sep: " ", value: constant("+JPperf true")},
	// CPython 3.13 and later (-X perf_jit): the dump goes to /tmp.
	{name: "PYTHON_PERF_JIT_SUPPORT", value: constant("1")},
	// .NET: 1 writes both a jitdump and a perf map, in /tmp.
	{name: "DOTNET_PerfMapEnabled", value: constant("1")},
	// LLVM's and perf's JVMTI agent's dumps go under
	// $JITDUMPDIR/.debug/jit/.
	{name: "JITDUMPDIR", value: func(c envContext) ([]string, error) { return []string{c.dumpDir}, nil }},
	// Java: jitprof's JVMTI agent, writing to $JITDUMPDIR.
	{name: "JAVA_TOOL_OPTIONS", sep: " ", value: agentPath(agents.JVMTI, "-agentpath:"), optional: true},
	// HotSpot's compiled code uses rbp as a general register, and gives
	// no unwind tables for it: call chains through it need frame
	// pointers, whatever the call graph's mode.
	{name: "JAVA_TOOL_OPTIONS", sep: " ", value: func(c envContext) ([]string, error) {
		if !c.callGraph {
			return nil, nil
		}
		return []string{"-XX:+PreserveFramePointer"}, nil
	}},
	// Runtimes that call Intel's JIT Profiling API (PHP's opcache with
	// opcache.jit_debug=128, LLVM, wasmtime) load this collector, which
	// writes to $JITDUMPDIR.
	{name: "INTEL_JIT_PROFILER64", value: agentPath(agents.IttJIT, ""), optional: true},
}

// runtimeEnv returns env with the runtime variables added: a list the user
// set is extended, a single value the user set is kept.
func runtimeEnv(env []string, c envContext, note func(string)) ([]string, error) {
	env = append([]string(nil), env...)
	for _, v := range runtimeVars {
		vals, err := v.value(c)
		if err != nil && v.optional {
			note(fmt.Sprintf("%s not set: %v", v.name, err))
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(vals) == 0 {
			continue
		}
		i := lookupEnv(env, v.name)
		switch {
		case i < 0:
			env = append(env, v.name+"="+strings.Join(vals, v.sep))
		case v.sep != "":
			list := strings.TrimPrefix(env[i], v.name+"=")
			for _, opt := range vals {
				flag, _, _ := strings.Cut(opt, v.sep)
				if hasWord(list, flag, v.sep) || hasXXFlag(list, flag, v.sep) {
					continue
				}
				if list != "" {
					list += v.sep
				}
				list += opt
			}
			env[i] = v.name + "=" + list
		}
	}
	return env, nil
}

// lookupEnv returns the index of name's last entry in env (the one that
// counts), or -1.
func lookupEnv(env []string, name string) int {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], name+"=") {
			return i
		}
	}
	return -1
}

// hasWord tells whether list, separated by sep, already holds word.
func hasWord(list, word, sep string) bool {
	return strings.Contains(sep+list+sep, sep+word+sep)
}

// hasXXFlag tells whether list, separated by sep, already sets the HotSpot
// boolean option that flag (-XX:+Name or -XX:-Name) sets, either way: the
// user's choice stands.
func hasXXFlag(list, flag, sep string) bool {
	name, ok := strings.CutPrefix(flag, "-XX:")
	if !ok || name == "" || name[0] != '+' && name[0] != '-' {
		return false
	}
	return hasWord(list, "-XX:+"+name[1:], sep) || hasWord(list, "-XX:-"+name[1:], sep)
}
