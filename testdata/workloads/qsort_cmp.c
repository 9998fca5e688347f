// jitprof's workload for call chains without frame pointers: built with
// -O2 -fomit-frame-pointer, its hot code is qsort's comparison callback,
// called from glibc's qsort (a merge sort in glibc 2.36), called from main.
// It sorts arrays of pseudo-random doubles for a given number of
// milliseconds of CPU time (default 1000) and prints how many sorts and
// comparisons it made.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static unsigned long comparisons;

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	comparisons++;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 1000;
	enum { n = 1 << 15 };
	static double v[n];
	unsigned long long seed = 88172645463325252ull;
	long sorts = 0;
	clock_t end = clock() + ms * (CLOCKS_PER_SEC / 1000);
	while (clock() < end) {
		for (int i = 0; i < n; i++) {
			seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
			v[i] = (double)(seed >> 11);
		}
		qsort(v, n, sizeof v[0], cmp);
		sorts++;
	}
	printf("%ld sorts, %lu comparisons\n", sorts, comparisons);
	return 0;
}
