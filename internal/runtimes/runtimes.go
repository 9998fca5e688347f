// Package runtimes holds what jitprof knows of each JIT runtime, one file
// per runtime: how its processes are recognised, the environment that makes
// it describe its code under `jitprof record`, and the flag that does it by
// hand, for the hint given when a recording of it names nothing. Adding a
// runtime is adding its file and its rows in the tests.
//
// What the runtimes write is read elsewhere, by format: jitdump and perfmap
// own the files, dumpindex the names V8 gives.
package runtimes

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Runtime is a JIT runtime.
type Runtime struct {
	// Name is its process.runtime.name, as OpenTelemetry names it and the
	// agent's profiles carry it.
	Name string
	// Executables are the base names of its executables; one ending in
	// "*" is a prefix.
	Executables []string
	// Env are the variables `jitprof record` sets for a command, so that
	// the runtime describes its code with no flag of the user's.
	Env []Var
	// Flag is what makes the runtime describe its code when it is started
	// by hand (a process `record -p` or the agent finds running).
	Flag string
}

// Var is an environment variable that makes a runtime describe its code (a
// jitdump, or a perf map where that is all it writes).
type Var struct {
	Name string
	// Sep joins the value to one the user already set (a list of
	// options); empty when the variable holds a single value, which is
	// then left as the user set it.
	Sep string
	// Value returns the value: for a list, its options, each added unless
	// the user's list already has that option's flag (its first word, so
	// that the user's +JPperf map stays; for HotSpot's -XX:±Name, Name).
	// A variable may be listed by two runtimes, their options then joining.
	Value func(Context) ([]string, error)
	// Optional variables are left out, with a note, when Value fails: a
	// jitprof built without its agents still records everything else.
	Optional bool
}

// Context is what the variables' values depend on.
type Context struct {
	DumpDir   string // where runtimes that take a directory should write
	CallGraph bool   // call chains are recorded
	// Agent returns the path of one of jitprof's agents, to be loaded into
	// a runtime (agents.Library): a function, so that this package, which
	// the profile's readers import too, needs none of the agents' code.
	Agent func(Agent) (string, error)
}

// Agent names one of jitprof's agents.
type Agent int

const (
	JVMTI  Agent = iota // for HotSpot
	IttJIT              // Intel's JIT Profiling API
)

// Constant is a Value that is always the same options.
func Constant(v ...string) func(Context) ([]string, error) {
	return func(Context) ([]string, error) { return v, nil }
}

// All are the runtimes jitprof knows, in the order of their files.
var All []*Runtime

func register(r *Runtime) *Runtime {
	All = append(All, r)
	return r
}

// Of returns the runtime of an executable (its path, or "" when unknown,
// then comm, the process's name, is matched): nil when it is none we know.
func Of(exe, comm string) *Runtime {
	base := filepath.Base(exe)
	if exe == "" {
		base = comm
	}
	for _, r := range All {
		for _, e := range r.Executables {
			if prefix, ok := strings.CutSuffix(e, "*"); ok && strings.HasPrefix(base, prefix) || base == e {
				return r
			}
		}
	}
	return nil
}

// Env returns env with every runtime's variables added: a list the user set
// is extended, a single value the user set is kept.
func Env(env []string, c Context, note func(string)) ([]string, error) {
	env = append([]string(nil), env...)
	for _, r := range All {
		for _, v := range r.Env {
			vals, err := v.Value(c)
			if err != nil && v.Optional {
				note(fmt.Sprintf("%s not set: %v", v.Name, err))
				continue
			}
			if err != nil {
				return nil, err
			}
			if len(vals) > 0 {
				env = setVar(env, v, vals)
			}
		}
	}
	return env, nil
}

func setVar(env []string, v Var, vals []string) []string {
	i := LookupEnv(env, v.Name)
	switch {
	case i < 0:
		env = append(env, v.Name+"="+strings.Join(vals, v.Sep))
	case v.Sep != "":
		list := strings.TrimPrefix(env[i], v.Name+"=")
		for _, opt := range vals {
			flag, _, _ := strings.Cut(opt, v.Sep)
			if hasWord(list, flag, v.Sep) || hasXXFlag(list, flag, v.Sep) {
				continue
			}
			if list != "" {
				list += v.Sep
			}
			list += opt
		}
		env[i] = v.Name + "=" + list
	}
	return env
}

// LookupEnv returns the index of name's last entry in env (the one that
// counts), or -1.
func LookupEnv(env []string, name string) int {
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
