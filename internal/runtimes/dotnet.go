package runtimes

// DotNet is .NET's CoreCLR: 1 writes both a jitdump and a perf map, in
// /tmp.
var DotNet = register(&Runtime{
	Name:        "dotnet",
	Executables: []string{"dotnet"},
	Env:         []Var{{Name: "DOTNET_PerfMapEnabled", Value: Constant("1")}},
	Flag:        "DOTNET_PerfMapEnabled=1",
})
