# jitprof's call-chain workload for CPython 3.13 (-X perf_jit): three levels
# of Python calls under the module, the innermost doing the work, so every
# sample in leaf belongs under <module> -> outer -> middle -> leaf.
# Runs for the CPU seconds its argument gives (default 1).
import sys
import time


def leaf(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def middle(n):
    return leaf(n)


def outer(n):
    return middle(n)


end = time.process_time() + float(sys.argv[1] if len(sys.argv) > 1 else 1)
total = 0
while time.process_time() < end:
    total += outer(20000)
print(total)
