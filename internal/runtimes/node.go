package runtimes

// Node is node.js (V8).
var Node = register(&Runtime{
	Name:        "nodejs",
	Executables: []string{"node", "nodejs"},
	// V8 takes these flags from NODE_OPTIONS too; the dump goes to the
	// working directory. Interpreted functions otherwise all run in one
	// builtin, InterpreterEntryTrampoline; with a copy of it each, they
	// are named in samples and call chains.
	Env:  []Var{{Name: "NODE_OPTIONS", Sep: " ", Value: Constant("--perf-prof", "--interpreted-frames-native-stack")}},
	Flag: "node --perf-prof --interpreted-frames-native-stack (a jitdump in the working directory) or --perf-basic-prof (a perf map in /tmp)",
})
