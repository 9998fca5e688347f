package runtimes

// Python is CPython 3.13 and later, whose trampolines (-X perf_jit) go to
// a dump in /tmp.
var Python = register(&Runtime{
	Name:        "python",
	Executables: []string{"python*"},
	Env:         []Var{{Name: "PYTHON_PERF_JIT_SUPPORT", Value: Constant("1")}},
	Flag:        "python3 -X perf_jit (CPython 3.13 or later)",
})
