%% jitprof's Erlang workload: recursion under the BEAM JIT, then halt.
-module(w).
-export([main/0, fib/1]).
fib(N) when N < 2 -> N;
fib(N) -> fib(N - 1) + fib(N - 2).
main() -> io:format("~p~n", [fib(30)]), halt().
