/*
 * Drives every call of agents/jitdump/jitdump_writer for writer_test.go,
 * which reads the dump back with the Go reader and checker. Each mode prints
 * what the test needs to know on stdout; the writer's own log goes to stderr.
 *
 *   writer_driver all DIR THREADS LOADS   every record type, from THREADS threads
 *   writer_driver open DIR                open and close only ("" = the default directory)
 *   writer_driver planted DIR             a symbolic link already where the dump goes
 *   writer_driver full DIR BYTES          the file may not grow past BYTES (RLIMIT_FSIZE)
 *   writer_driver absurd DIR              absurd input after one good load
 *   writer_driver fork DIR                a forked child tries to write
 *   writer_driver bench DIR LOADS         times LOADS loads of a typical compiled method
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jitdump_writer.h"

static jd_writer *w;
static int loads_per_thread;

/* Code bytes the test can predict from the address: byte i is (addr + i) & 0xff. */
static void fill(unsigned char *code, uint64_t addr, size_t n)
{
	for (size_t i = 0; i < n; i++)
		code[i] = (unsigned char)(addr + i);
}

/* Function t/i lives at 0x100000 * (t + 1) + 0x100 * i, 64 bytes long, and
 * has 3 lines: addr+0 -> line i+1, addr+16 -> i+2, addr+32 -> i+3 in
 * thread-t.src. Its name is "t<t>_f<i>", and an extension record 0x10001
 * holding the code index follows it. */
static void *loader(void *arg)
{
	int t = (int)(intptr_t)arg;
	char name[64], file[64];
	unsigned char code[64];
	snprintf(file, sizeof file, "thread-%d.src", t);
	for (int i = 0; i < loads_per_thread; i++) {
		uint64_t addr = 0x100000ull * (uint64_t)(t + 1) + 0x100ull * (uint64_t)i;
		snprintf(name, sizeof name, "t%d_f%d", t, i);
		fill(code, addr, sizeof code);
		jd_debug_entry lines[3];
		for (int l = 0; l < 3; l++)
			lines[l] = (jd_debug_entry){.addr = addr + 16u * (uint64_t)l, .line = (uint32_t)(i + 1 + l), .discrim = (uint32_t)l, .file = file};
		uint64_t index = jd_reserve_index(w);
		jd_raw_record extra = {.id = 0x10001, .payload = &index, .size = sizeof index};
		jd_function fn = {.name = name, .code_addr = addr, .code_size = sizeof code, .code = code,
				  .lines = lines, .n_lines = 3, .extra = &extra, .n_extra = 1, .code_index = index};
		if (jd_code_load(w, &fn) != index) {
			fprintf(stderr, "driver: load %s failed\n", name);
			exit(3);
		}
	}
	return NULL;
}

static int all(int threads)
{
	/* One function with unwinding data and no code bytes (NULL code). */
	static const unsigned char unwind[24] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
	jd_function u = {.name = "unwound", .code_addr = 0x5000, .code_size = 32, .unwind = unwind,
			 .unwind_size = 20, .eh_frame_hdr_size = 8, .mapped_size = 20};
	uint64_t ui = jd_code_load(w, &u);
	/* Empty name, no lines, zero-length code. */
	jd_function empty = {.name = NULL, .code_addr = 0x6000, .code_size = 0};
	uint64_t ei = jd_code_load(w, &empty);
	if (!ui || !ei || jd_code_move(w, ui, 0x5000, 0x7000, 32) != 0)
		return 3;
	const char raw[] = "extension payload";
	jd_raw_record r = {.id = JD_FIRST_EXTENSION_ID, .payload = raw, .size = sizeof raw};
	if (jd_raw(w, &r) != 0)
		return 3;

	pthread_t tids[64];
	if (threads > 64)
		threads = 64;
	for (int t = 0; t < threads; t++)
		pthread_create(&tids[t], NULL, loader, (void *)(intptr_t)t);
	for (int t = 0; t < threads; t++)
		pthread_join(tids[t], NULL);

	/* The marker: an executable private mapping of the dump, while open. */
	FILE *maps = fopen("/proc/self/maps", "r");
	char line[4096];
	while (maps && fgets(line, sizeof line, maps))
		if (strstr(line, jd_path(w)))
			printf("map %s", line);
	if (maps)
		fclose(maps);
	printf("active %d\n", jd_active(w));
	jd_close(w);
	printf("after-close %d %d\n", jd_active(w), jd_code_load(w, &u) != 0);
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A compiled method as the JVMTI agent writes one: a 60-byte Java
 * signature, 1 KiB of code, 20 line entries. */
static int bench(int loads)
{
	static unsigned char code[1024];
	jd_debug_entry lines[20];
	for (int l = 0; l < 20; l++)
		lines[l] = (jd_debug_entry){.line = (uint32_t)(100 + l), .file = "org/example/shapes/Polygon.java"};
	double begin = now();
	for (int i = 0; i < loads; i++) {
		uint64_t addr = 0x10000000ull + 0x1000ull * (uint64_t)i;
		for (int l = 0; l < 20; l++)
			lines[l].addr = addr + 48u * (uint64_t)l;
		jd_function fn = {.name = "Lorg/example/shapes/Polygon;area(Lorg/example/shapes/Point;I)D",
				  .code_addr = addr, .code_size = sizeof code, .code = code, .lines = lines, .n_lines = 20};
		if (!jd_code_load(w, &fn))
			return 3;
	}
	printf("ns/load %.1f\n", (now() - begin) / loads);
	jd_close(w);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	const char *mode = argv[1], *dir = argv[2];
	if (strcmp(mode, "planted") == 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s/jit-%d.dump", dir, (int)getpid());
		if (symlink("target", path) != 0)
			return 3;
	}
	if (strcmp(mode, "full") == 0 && argc > 3) {
		/* EFBIG instead of the signal, as a host that ignores it. */
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = {.rlim_cur = strtoull(argv[3], NULL, 10), .rlim_max = RLIM_INFINITY};
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			return 3;
	}

	w = jd_open(dir, "driver");
	printf("pid %d\npath %s\n", (int)getpid(), jd_path(w));
	fflush(stdout);

	if (strcmp(mode, "all") == 0 && argc > 4) {
		loads_per_thread = atoi(argv[4]);
		return all(atoi(argv[3]));
	}
	if (strcmp(mode, "bench") == 0 && argc > 3)
		return bench(atoi(argv[3]));
	if (strcmp(mode, "open") == 0 || strcmp(mode, "planted") == 0) {
		jd_close(w);
		return 0;
	}

	unsigned char code[4096];
	fill(code, 0x1000, sizeof code);
	jd_function good = {.name = "good", .code_addr = 0x1000, .code_size = sizeof code, .code = code};
	int ok = 0;
	if (strcmp(mode, "full") == 0) {
		/* Loads until the limit is hit; the writer must then stop. */
		int i = 0;
		for (; i < 1000; i++)
			if (!jd_code_load(w, &good))
				break;
		ok = i < 1000 && !jd_active(w) && jd_code_move(w, 1, 1, 2, 3) == -1;
		printf("loaded %d\n", i);
	} else if (strcmp(mode, "absurd") == 0) {
		ok = jd_code_load(w, &good) != 0;
		jd_function huge = {.name = "huge", .code_addr = 0x2000, .code_size = 1ull << 40};
		jd_function no_table = {.name = "no-table", .code_addr = 0x3000, .code_size = 16, .n_lines = 5};
		jd_raw_record bad = {.id = JD_FIRST_EXTENSION_ID, .payload = NULL, .size = 100};
		ok = ok && jd_code_load(w, &huge) == 0 && jd_code_load(w, &no_table) == 0 && jd_code_load(w, NULL) == 0 &&
		     jd_raw(w, &bad) == -1 && jd_raw(w, NULL) == -1 && !jd_active(w) && jd_code_load(w, &good) == 0;
		/* Every call takes a NULL writer. */
		ok = ok && jd_code_load(NULL, &good) == 0 && jd_code_move(NULL, 1, 1, 2, 3) == -1 && jd_raw(NULL, &bad) == -1 &&
		     !jd_active(NULL) && jd_reserve_index(NULL) == 0 && strcmp(jd_path(NULL), "") == 0;
		jd_disable(NULL, "nothing");
		jd_close(NULL);
	} else if (strcmp(mode, "fork") == 0) {
		pid_t child = fork();
		if (child == 0) {
			/* Nothing may reach the parent's dump, and the child may
			 * not close the parent's marker. */
			int wrote = jd_code_load(w, &good) != 0 || jd_active(w);
			jd_close(w);
			_exit(wrote ? 1 : 0);
		}
		int status = 0;
		waitpid(child, &status, 0);
		ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && jd_code_load(w, &good) != 0;
		jd_close(w);
	}
	printf("ok %d\n", ok);
	return ok ? 0 : 1;
}
