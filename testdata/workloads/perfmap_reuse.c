/* jitprof's perf map reuse workload: a JIT of two functions that gives B
 * the address A had, as runtimes that free code do. It writes A's code, names
 * it in its perf map (/tmp/perf-<pid>.map), runs it for A_CPU of CPU time,
 * then writes B's code at the same address, appends B's line and runs B for
 * B_CPU. It prints its own truth, the CPU time spent in each, as JSON:
 * {"reused_A": ns, "reused_B": ns} (perf skips a map line whose name is one
 * character long). A perf map has no times, so a profiler that reads it
 * once, at the end, gives every sample at that address to one of them. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
/* loop: dec %rdi; jnz loop; ret -- B with a nop first, so its code differs. */
static const unsigned char codeA[] = {0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
static const unsigned char codeB[] = {0x90, 0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3};
#elif defined(__aarch64__)
/* loop: subs x0, x0, #1; b.ne loop; ret */
static const unsigned char codeA[] = {0x00, 0x04, 0x00, 0xf1, 0xe1, 0xff, 0xff, 0x54, 0xc0, 0x03, 0x5f, 0xd6};
static const unsigned char codeB[] = {0x1f, 0x20, 0x03, 0xd5, 0x00, 0x04, 0x00, 0xf1, 0xe1, 0xff, 0xff, 0x54, 0xc0, 0x03, 0x5f, 0xd6};
#else
#error "perfmap_reuse.c generates code for x86-64 and arm64 only"
#endif

static int64_t cpu_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* place writes code at page and names it in the perf map. */
static void place(unsigned char *page, const unsigned char *code, size_t size, const char *name, FILE *map) {
	if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0) {
		perror("mprotect");
		exit(1);
	}
	memset(page, 0xcc, 4096);
	memcpy(page, code, size);
	__builtin___clear_cache((char *)page, (char *)page + size);
	if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		exit(1);
	}
	fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)page, size, name);
	fflush(map);
}

/* run calls the code at page until it has had budget ns of CPU time, and
 * returns the time it had. */
static int64_t run(unsigned char *page, int64_t budget) {
	void (*f)(long) = (void (*)(long))(uintptr_t)page;
	int64_t start = cpu_ns(), now = start;
	while (now - start < budget) {
		f(2000000);
		now = cpu_ns();
	}
	return now - start;
}

int main(int argc, char **argv) {
	int64_t a_cpu = (argc > 1 ? atof(argv[1]) : 1.0) * 1e9;
	int64_t b_cpu = (argc > 2 ? atof(argv[2]) : 0.5) * 1e9;
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
	FILE *map = fopen(path, "w");
	if (map == NULL) {
		perror(path);
		return 1;
	}
	unsigned char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	place(page, codeA, sizeof codeA, "reused_A", map);
	int64_t a = run(page, a_cpu);
	place(page, codeB, sizeof codeB, "reused_B", map);
	int64_t b = run(page, b_cpu);
	fclose(map);
	printf("{\"reused_A\": %lld, \"reused_B\": %lld}\n", (long long)a, (long long)b);
	return 0;
}
