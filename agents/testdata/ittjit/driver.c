/*
 * Drives libjitprof-ittjit.so the way a runtime does, for ittjit_test.go,
 * which reads the dump back and compares it with what this program sent.
 * Like Intel's stub, it dlopens $INTEL_JIT_PROFILER64 and looks the entry
 * points up with dlsym.
 *
 *   driver all          every event type, split functions, a load over an
 *                       old range, updates, inline trees, bad input
 *   driver threads T K  T threads each load K methods, with ids from
 *                       iJIT_GetNewMethodID
 *   driver full BYTES   the dump may not grow past BYTES (RLIMIT_FSIZE)
 *   driver bench N L    times N loads of 64-byte methods with L lines each
 *   driver inline MS    (x86-64) a busy loop in code it wrote itself, loaded
 *                       with a line table and two nested inline records
 *                       around the loop, run for MS ms of CPU
 *
 * It prints "base ADDR" (the code buffer; addresses in the test are offsets
 * from it), "rc NAME VALUE" for return values and "ns_per_event NS".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

#include "jitprofiling.h"

static unsigned int (*initialize)(void);
static unsigned int (*notify)(unsigned int, void *);
static unsigned int (*new_id)(void);
static iJIT_IsProfilingActiveFlags (*is_active)(void);

static unsigned char *base;
enum { BUFFER = 1 << 20 }; /* for all but bench */

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "driver: no %s in the collector\n", name);
		exit(2);
	}
	return p;
}

static void load_collector(void)
{
	const char *path = getenv("INTEL_JIT_PROFILER64");
	void *lib = path ? dlopen(path, RTLD_NOW) : NULL;
	if (!lib) {
		fprintf(stderr, "driver: dlopen %s: %s\n", path ? path : "(unset)", dlerror());
		exit(2);
	}
	initialize = (unsigned int (*)(void))sym(lib, "Initialize");
	notify = (unsigned int (*)(unsigned int, void *))sym(lib, "NotifyEvent");
	new_id = (unsigned int (*)(void))sym(lib, "iJIT_GetNewMethodID");
	is_active = (iJIT_IsProfilingActiveFlags(*)(void))sym(lib, "iJIT_IsProfilingActive");
	sym(lib, "iJIT_NotifyEvent");
}

/* Code bytes the test predicts: byte at offset o of the buffer is o*7+1. */
static void map_code(size_t size)
{
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		perror("driver: mmap");
		exit(2);
	}
	for (size_t o = 0; o < size; o++)
		base[o] = (unsigned char)(o * 7 + 1);
	printf("base %p\n", (void *)base);
}

static void rc(const char *what, unsigned int v)
{
	printf("rc %s %u\n", what, v);
}

static iJIT_Method_Load v1(unsigned int id, const char *name, const char *cls, const char *src, size_t off, unsigned int size, LineNumberInfo *lines, unsigned int n)
{
	return (iJIT_Method_Load){.method_id = id, .method_name = (char *)name, .class_file_name = (char *)cls, .source_file_name = (char *)src,
				  .method_load_address = base + off, .method_size = size, .line_number_table = lines, .line_number_size = n};
}

static iJIT_Method_Inline_Load inl(unsigned int id, unsigned int parent, const char *name, const char *src, size_t off, unsigned int size, LineNumberInfo *lines, unsigned int n)
{
	return (iJIT_Method_Inline_Load){.method_id = id, .parent_method_id = parent, .method_name = (char *)name, .source_file_name = (char *)src,
					 .method_load_address = base + off, .method_size = size, .line_number_table = lines, .line_number_size = n};
}

static void all(void)
{
	rc("initialize", initialize());
	rc("active", is_active());
	map_code(BUFFER);

	/* V1 with a class: the seed's example table. */
	LineNumberInfo alpha_lines[] = {{1, 2}, {12, 4}, {15, 2}};
	unsigned int alpha = new_id();
	iJIT_Method_Load a = v1(alpha, "alpha", "Klass", "alpha.src", 0x000, 0x40, alpha_lines, 3);
	rc("alpha", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &a));

	/* V2: a table out of order, two lines for one range, one past the end. */
	LineNumberInfo beta_lines[] = {{0x20, 7}, {0x10, 5}, {0x10, 6}, {0x80, 9}};
	iJIT_Method_Load_V2 b = {.method_id = new_id(), .method_name = "beta", .source_file_name = "beta.src", .module_name = "module.so",
				 .method_load_address = base + 0x100, .method_size = 0x40, .line_number_table = beta_lines, .line_number_size = 4};
	rc("beta", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V2, &b));

	/* V3, no lines. */
	unsigned int gamma = new_id();
	iJIT_Method_Load_V3 c = {.method_id = gamma, .method_name = "gamma", .module_name = "module.so", .module_arch = iJIT_CA_64,
				 .method_load_address = base + 0x200, .method_size = 0x40};
	rc("gamma", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED_V3, &c));

	/* A split function: the second region keeps the first's name and file. */
	unsigned int delta = new_id();
	LineNumberInfo delta1_lines[] = {{0x20, 10}}, delta2_lines[] = {{0x30, 11}};
	iJIT_Method_Load d1 = v1(delta, "delta", NULL, "delta.src", 0x300, 0x20, delta1_lines, 1);
	iJIT_Method_Load d2 = v1(delta, "not-delta", NULL, NULL, 0x400, 0x30, delta2_lines, 1);
	rc("delta1", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &d1));
	rc("delta2", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &d2));

	/* The seed's inline tree: c in b, b and d in epsilon; c before b. */
	unsigned int eps = new_id(), ib = new_id(), ic = new_id(), id = new_id();
	iJIT_Method_Load e = v1(eps, "epsilon", NULL, "eps.src", 0x500, 0x100, NULL, 0);
	rc("epsilon", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &e));
	LineNumberInfo b_lines[] = {{0x10, 20}, {0x30, 21}};
	iJIT_Method_Inline_Load in_c = inl(ic, ib, "inl_c", "c.src", 0x520, 0x10, NULL, 0);
	iJIT_Method_Inline_Load in_b = inl(ib, eps, "inl_b", "b.src", 0x510, 0x30, b_lines, 2);
	iJIT_Method_Inline_Load in_d = inl(id, eps, "inl_d", NULL, 0x540, 0x20, NULL, 0);
	rc("inline_c", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_c));
	rc("inline_b", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_b));
	rc("inline_d", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_d));
	iJIT_Method_Inline_Load orphan = inl(new_id(), eps, "orphan", NULL, 0x9000, 0x10, NULL, 0);
	rc("inline_orphan", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &orphan));

	/* New code in epsilon: written again, with its inline records. Data
	 * written into it changes nothing. */
	memset(base + 0x510, 0xcc, 0x10);
	iJIT_Method_Update up = {.load_address = base + 0x510, .size = 0x10, .type = iJIT_CT_CODE, .data_format = "%p"};
	rc("update_v2", notify(iJVM_EVENT_TYPE_METHOD_UPDATE_V2, &up));
	iJIT_Method_Update data = {.load_address = base + 0x5f0, .size = 0x10, .type = iJIT_CT_DATA};
	rc("update_data", notify(iJVM_EVENT_TYPE_METHOD_UPDATE_V2, &data));

	/* METHOD_UPDATE of beta: written again with its lines. */
	memset(base + 0x100, 0x90, 4);
	iJIT_Method_Load ub = {.method_id = b.method_id, .method_load_address = base + 0x100, .method_size = 4};
	rc("update", notify(iJVM_EVENT_TYPE_METHOD_UPDATE, &ub));

	/* A load over alpha's range makes alpha invalid: its id then starts a
	 * new method. */
	iJIT_Method_Load z = v1(new_id(), "zeta", NULL, NULL, 0x000, 0x40, NULL, 0);
	rc("zeta", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &z));
	iJIT_Method_Load a2 = v1(alpha, "alpha2", NULL, NULL, 0x600, 0x10, NULL, 0);
	rc("alpha2", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &a2));

	/* Unloading gamma (the id passed bare): an inline into its old range
	 * finds no method, and its id starts a new one. */
	rc("unload", notify(iJVM_EVENT_TYPE_METHOD_UNLOAD_START, &gamma));
	iJIT_Method_Inline_Load in_gone = inl(new_id(), gamma, "in_gone", NULL, 0x200, 0x10, NULL, 0);
	rc("inline_gone", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_gone));
	iJIT_Method_Load g2 = v1(gamma, "gamma2", NULL, NULL, 0x700, 0x10, NULL, 0);
	rc("gamma2", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &g2));

	/* Bad input: dropped or cut to size, never a crash. */
	static const unsigned int types[] = {13, 14, 15, 16, 17, 21, 22};
	for (size_t i = 0; i < sizeof types / sizeof *types; i++)
		rc("null_data", notify(types[i], NULL));
	rc("unknown_type", notify(99, &a));
	iJIT_Method_Load bad = v1(0, "no_id", NULL, NULL, 0x800, 0x10, NULL, 0);
	rc("no_id", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), "empty", NULL, NULL, 0x800, 0, NULL, 0);
	rc("empty", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), "null_addr", NULL, NULL, 0, 0x10, NULL, 0);
	bad.method_load_address = NULL;
	rc("null_addr", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), NULL, NULL, "nameless.src", 0x800, 0x10, NULL, 5); /* NULL table, 5 lines */
	rc("nameless", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	LineNumberInfo one_line[] = {{4, 1}};
	bad = v1(new_id(), "huge_table", NULL, "huge.src", 0x900, 0x10, one_line, 0xffffffffu);
	rc("huge_table", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), "bad\xff\xfe-name\xe2\x82", "cl\xc3\x28", "src\x80.c", 0xa00, 0x10, one_line, 1);
	rc("non_utf8", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), "unreadable_code", NULL, NULL, 0, 0x10, NULL, 0);
	bad.method_load_address = (void *)0x10;
	rc("unreadable_code", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	bad = v1(new_id(), "wraps", NULL, NULL, 0, 0x100, NULL, 0);
	bad.method_load_address = (void *)(uintptr_t)-0x10;
	rc("wraps", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	size_t long_len = 200000;
	char *long_name = malloc(long_len + 1);
	memset(long_name, 'x', long_len);
	long_name[long_len] = 0;
	bad = v1(new_id(), long_name, NULL, NULL, 0xb00, 0x10, NULL, 0);
	rc("long_name", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
	free(long_name);

	rc("shutdown", notify(iJVM_EVENT_TYPE_SHUTDOWN, NULL));
	bad = v1(new_id(), "after_shutdown", NULL, NULL, 0xc00, 0x10, NULL, 0);
	rc("after_shutdown", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &bad));
}

static int per_thread;

/* Thread t loads method k at base + (t * per_thread + k) * 64, 64 bytes,
 * named "t<t>_<id>", with two lines. */
static void *loader(void *arg)
{
	size_t t = (size_t)(uintptr_t)arg;
	for (int k = 0; k < per_thread; k++) {
		unsigned int id = new_id();
		char name[64];
		snprintf(name, sizeof name, "t%zu_%u", t, id);
		LineNumberInfo lines[] = {{16, (unsigned int)k + 1}, {64, (unsigned int)k + 2}};
		iJIT_Method_Load m = v1(id, name, NULL, "threads.src", (t * (size_t)per_thread + (size_t)k) * 64, 64, lines, 2);
		if (notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &m) != 1)
			fprintf(stderr, "driver: %s failed\n", name);
	}
	return NULL;
}

static void threads(int n, int k)
{
	if ((size_t)n * (size_t)k * 64 > BUFFER) {
		fprintf(stderr, "driver: too many methods for the buffer\n");
		exit(2);
	}
	per_thread = k;
	map_code(BUFFER);
	pthread_t tids[64];
	for (int t = 0; t < n && t < 64; t++)
		pthread_create(&tids[t], NULL, loader, (void *)(uintptr_t)t);
	for (int t = 0; t < n && t < 64; t++)
		pthread_join(tids[t], NULL);
}

static void full(long bytes)
{
	signal(SIGXFSZ, SIG_IGN);
	struct rlimit lim = {.rlim_cur = (rlim_t)bytes, .rlim_max = (rlim_t)bytes};
	setrlimit(RLIMIT_FSIZE, &lim);
	rc("initialize", initialize());
	map_code(BUFFER);
	unsigned int ok = 1;
	for (int i = 0; i < 200; i++) {
		iJIT_Method_Load m = v1(new_id(), "filler", NULL, NULL, (size_t)i * 64, 64, NULL, 0);
		ok &= notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &m);
	}
	rc("loads", ok);
	rc("active", is_active());
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

#if defined(__x86_64__)
/* spin(n) returns n + (n-1) + ... + 1. Its layout, by offset, with the
 * lines the tables below give (Intel's tables: each entry's line covers the
 * code up to its offset, from the method's or inline's start):
 *
 *   0x00 ..0x10  Spinner::spin, line 10    mov rax, rdi; xor edx, edx
 *   0x10 ..0x20    spin_middle, line 20    nops          (spin line 11)
 *   0x20 ..0x28      spin_inner, line 30   the loop      (middle line 21)
 *   0x28 ..0x30      spin_inner, line 31   nops
 *   0x30 ..0x40    spin_middle, line 22    nops
 *   0x40 ..0x50  Spinner::spin, line 12    mov rax, rdx; ret
 *
 * so nearly all its time is spent three frames deep. */
static const unsigned char spin_code[0x50] = {
	[0x00] = 0x48, 0x89, 0xf8,	   /* mov rax, rdi */
	[0x03] = 0x31, 0xd2,		   /* xor edx, edx */
	[0x05 ... 0x1f] = 0x90,		   /* nop */
	[0x20] = 0x48, 0x01, 0xc2,	   /* loop: add rdx, rax */
	[0x23] = 0x48, 0xff, 0xc8,	   /* dec rax */
	[0x26] = 0x75, 0xf8,		   /* jnz loop */
	[0x28 ... 0x3f] = 0x90,		   /* nop */
	[0x40] = 0x48, 0x89, 0xd0,	   /* mov rax, rdx */
	[0x43] = 0xc3,			   /* ret */
	[0x44 ... 0x4f] = 0xcc,		   /* int3 */
};

static void inline_spin(long ms)
{
	rc("initialize", initialize());
	size_t page = 4096;
	base = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED) {
		perror("driver: mmap");
		exit(2);
	}
	memcpy(base, spin_code, sizeof spin_code);
	if (mprotect(base, page, PROT_READ | PROT_EXEC)) {
		perror("driver: mprotect");
		exit(2);
	}
	printf("base %p\n", (void *)base);

	unsigned int spin = new_id(), middle = new_id(), inner = new_id();
	LineNumberInfo spin_lines[] = {{0x10, 10}, {0x40, 11}, {0x50, 12}};
	iJIT_Method_Load m = v1(spin, "spin", "Spinner", "spin.src", 0, sizeof spin_code, spin_lines, 3);
	rc("spin", notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &m));
	LineNumberInfo middle_lines[] = {{0x10, 20}, {0x20, 21}, {0x30, 22}};
	iJIT_Method_Inline_Load in_middle = inl(middle, spin, "spin_middle", "middle.src", 0x10, 0x30, middle_lines, 3);
	rc("inline_middle", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_middle));
	LineNumberInfo inner_lines[] = {{0x08, 30}, {0x10, 31}};
	iJIT_Method_Inline_Load in_inner = inl(inner, middle, "spin_inner", "inner.src", 0x20, 0x10, inner_lines, 2);
	rc("inline_inner", notify(iJVM_EVENT_TYPE_METHOD_INLINE_LOAD_FINISHED, &in_inner));

	uint64_t (*fn)(uint64_t) = (uint64_t (*)(uint64_t))(void *)base;
	const uint64_t n = 1000000;
	uint64_t start = clock_ns(CLOCK_PROCESS_CPUTIME_ID), calls = 0;
	unsigned int ok = 1;
	do {
		ok &= fn(n) == n * (n + 1) / 2;
		calls++;
	} while (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - start < (uint64_t)ms * 1000000u);
	rc("spin_result", ok);
	printf("calls %llu\n", (unsigned long long)calls);
	rc("shutdown", notify(iJVM_EVENT_TYPE_SHUTDOWN, NULL));
}
#endif

static void bench(int n, unsigned int n_lines)
{
	initialize();
	map_code((size_t)n * 64);
	LineNumberInfo lines[64];
	for (unsigned int l = 0; l < n_lines && l < 64; l++)
		lines[l] = (LineNumberInfo){.Offset = (l + 1) * 64 / n_lines, .LineNumber = l + 1};
	uint64_t start = now_ns();
	for (int i = 0; i < n; i++) {
		iJIT_Method_Load m = v1(new_id(), "bench_method", NULL, "bench.src", (size_t)i * 64, 64, lines, n_lines);
		notify(iJVM_EVENT_TYPE_METHOD_LOAD_FINISHED, &m);
	}
	printf("ns_per_event %.1f\n", (double)(now_ns() - start) / n);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	load_collector();
	if (argc == 2 && !strcmp(argv[1], "all"))
		all();
	else if (argc == 4 && !strcmp(argv[1], "threads"))
		threads(atoi(argv[2]), atoi(argv[3]));
	else if (argc == 3 && !strcmp(argv[1], "full"))
		full(atol(argv[2]));
	else if (argc == 4 && !strcmp(argv[1], "bench"))
		bench(atoi(argv[2]), (unsigned int)atoi(argv[3]));
#if defined(__x86_64__)
	else if (argc == 3 && !strcmp(argv[1], "inline"))
		inline_spin(atol(argv[2]));
#endif
	else {
		fprintf(stderr, "usage: driver all | threads T K | full BYTES | bench N LINES | inline MS\n");
		return 2;
	}
	return 0;
}
