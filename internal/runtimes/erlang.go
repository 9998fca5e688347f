package runtimes

// Erlang is Erlang/OTP's BEAM, whose JIT writes its dump to /tmp.
var Erlang = register(&Runtime{
	Name:        "erlang",
	Executables: []string{"beam*"},
	Env:         []Var{{Name: "ERL_FLAGS", Sep: " ", Value: Constant("+JPperf true")}},
	Flag:        "erl +JPperf true",
})
