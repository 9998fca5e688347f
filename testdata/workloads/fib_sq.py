# jitprof's CPython workload (-X perf_jit): recursion and a small hot function.
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
def sq(x): return x * x
print(fib(24), sum(sq(i) % 7 for i in range(200000)))
