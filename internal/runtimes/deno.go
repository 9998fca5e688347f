package runtimes

// Deno is Deno (V8), which reads V8's flags from DENO_V8_FLAGS, separated
// by commas; V8 writes the dump to the working directory.
var Deno = register(&Runtime{
	Name:        "deno",
	Executables: []string{"deno"},
	Env:         []Var{{Name: "DENO_V8_FLAGS", Sep: ",", Value: Constant("--perf-prof", "--interpreted-frames-native-stack")}},
	Flag:        "deno run --v8-flags=--perf-prof,--interpreted-frames-native-stack",
})
