/* jitprof's LLVM workload (compiled to IR with clang, run by lli's MCJIT): recursion and a small hot function. */
#include <stdio.h>

static long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

long sq(long x) { return x * x; }

int main(void) {
	long sum = 0;
	for (int i = 0; i < 1000000; i++)
		sum += sq(i) % 7;
	printf("%ld %ld\n", fib(32), sum);
	return 0;
}
