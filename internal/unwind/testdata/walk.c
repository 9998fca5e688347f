// walk.c prints its own truth for the stack walker's test: deep inside
// qsort (libc's CFI) and functions of its own, it takes what perf's
// --call-graph dwarf takes (the registers and a copy of the stack from rsp
// up) and what glibc's backtrace(), libgcc's DWARF unwinder, makes of the
// same stack.
//
// Usage: walk STACKFILE. Writes STACKFILE (the raw stack copy) and prints:
//   regs IP SP BP
//   bt PC PC ...            (backtrace's return addresses, innermost first)
//   then /proc/self/maps.
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *stackFile;
static volatile int depth;

static uintptr_t stackEnd(uintptr_t sp) {
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	uintptr_t lo, hi, end = 0;
	while (m && fgets(line, sizeof line, m))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi)
			end = hi;
	fclose(m);
	return end;
}

__attribute__((noinline)) static void capture(void) {
	uintptr_t ip, sp, bp;
	// One block, so that rsp is the same at the label as where it is read.
	__asm__ volatile("lea 0f(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2\n0:"
	                 : "=r"(ip), "=r"(sp), "=r"(bp));
	size_t n = stackEnd(sp) - sp;
	if (n > 65536)
		n = 65536;
	FILE *f = fopen(stackFile, "wb");
	fwrite((void *)sp, 1, n, f); // the frames above sp do not change while capture runs
	fclose(f);
	void *bt[128];
	int k = backtrace(bt, 128);
	printf("regs %lx %lx %lx\nbt", ip, sp, bp);
	for (int i = 0; i < k; i++)
		printf(" %lx", (uintptr_t)bt[i]);
	printf("\n");
	fflush(stdout);
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	while (fgets(line, sizeof line, m))
		fputs(line, stdout);
	fclose(m);
}

// framed keeps a frame pointer, recursed keeps none (the build's
// -fomit-frame-pointer): the walker follows CFI through both.
__attribute__((noinline, optimize("no-omit-frame-pointer"))) static int framed(int n) {
	volatile char pad[48];
	pad[n & 31] = (char)n;
	capture();
	return pad[n & 31] + 1;
}

__attribute__((noinline)) static int recursed(int n) {
	if (n > 0)
		return recursed(n - 1) * 3 + 1;
	return framed(n) + 2;
}

static int cmp(const void *a, const void *b) {
	int x = *(const int *)a, y = *(const int *)b;
	if (x == 7 && y != 7 && depth++ == 0)
		return recursed(5) > 0 ? (x > y) - (x < y) : 0;
	return (x > y) - (x < y);
}

int main(int argc, char **argv) {
	if (argc != 2)
		return 2;
	stackFile = argv[1];
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof v[0], cmp);
	return v[0];
}
