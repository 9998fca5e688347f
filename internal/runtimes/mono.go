package runtimes

// Mono is the Mono runtime, which writes a perf map of its JIT's code to
// /tmp with --jitmap, taken from MONO_ENV_OPTIONS too. It writes the map
// through stdio's buffer, so most lines reach the file late: a perf map's
// line holds from the process's start (jitsources).
var Mono = register(&Runtime{
	Name:        "mono",
	Executables: []string{"mono", "mono-sgen"},
	Env:         []Var{{Name: "MONO_ENV_OPTIONS", Sep: " ", Value: Constant("--jitmap")}},
	Flag:        "mono --jitmap",
})
