package runtimes

// Bun is Bun (JavaScriptCore), which takes JSC's options from BUN_JSC_*
// variables. JSC names its dump jit-<tid>-<pid>.dump in jitDumpDirectory;
// without one, a temporary file in /tmp (jit-<tid>-<pid>-XXXXXX) that it
// never renames. perf inject recognises neither name. The npm package's
// executable is bun.exe, on Linux too.
var Bun = register(&Runtime{
	Name:        "bun",
	Executables: []string{"bun", "bun.exe"},
	Env: []Var{
		{Name: "BUN_JSC_useJITDump", Value: Constant("1")},
		{Name: "BUN_JSC_jitDumpDirectory", Value: func(c Context) ([]string, error) { return []string{c.DumpDir}, nil }},
	},
	Flag: "BUN_JSC_useJITDump=1 BUN_JSC_jitDumpDirectory=/tmp bun",
})
