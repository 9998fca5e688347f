package runtimes

// LLVM is LLVM's lli, whose MCJIT writes a dump under
// $JITDUMPDIR/.debug/jit/, as perf's own JVMTI agent does.
var LLVM = register(&Runtime{
	Name:        "llvm",
	Executables: []string{"lli*"},
	Env:         []Var{{Name: "JITDUMPDIR", Value: func(c Context) ([]string, error) { return []string{c.DumpDir}, nil }}},
	Flag:        "JITDUMPDIR=DIR lli --jit-kind=mcjit",
})

// PHP is PHP's opcache JIT, which calls Intel's JIT Profiling API with
// opcache.jit_debug=128; so do LLVM and wasmtime when asked. Such
// runtimes load the collector INTEL_JIT_PROFILER64 names, which writes a
// dump to $JITDUMPDIR.
var PHP = register(&Runtime{
	Name:        "php",
	Executables: []string{"php*"},
	Env:         []Var{{Name: "INTEL_JIT_PROFILER64", Value: agentPath(IttJIT, ""), Optional: true}},
	Flag:        "php -d opcache.jit_debug=128 with INTEL_JIT_PROFILER64=<jitprof's libjitprof-ittjit.so>",
})
