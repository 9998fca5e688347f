%% jitprof agent's Erlang workload: recursion under the BEAM JIT for the
%% given number of milliseconds, then halt.
-module(busy).
-export([main/1, fib/1]).
fib(N) when N < 2 -> N;
fib(N) -> fib(N - 1) + fib(N - 2).
main([Ms]) ->
    End = erlang:monotonic_time(millisecond) + list_to_integer(atom_to_list(Ms)),
    loop(End).
loop(End) ->
    fib(20),
    case erlang:monotonic_time(millisecond) < End of
        true -> loop(End);
        false -> halt()
    end.
