/* jitprof's container workload: a native program run from a file of its own
 * mount namespace, at a path where the host has another file (built with
 * -DDECOY: other names, another loop bound) or none. It prints "ready",
 * then runs inside_hot three times as long as inside_cold, over and over,
 * until SIGTERM, and prints the CPU time each ran by its own measure, as
 * JSON: the truth a profile of it is checked against. */
#include <signal.h>
#include <stdio.h>
#include <time.h>

#ifdef DECOY
#define inside_hot decoy_one
#define inside_cold decoy_two
#define HOT_ROUNDS 7777777 /* 0x76adf1: the decoy's code differs too */
#else
#define HOT_ROUNDS 3000000 /* 0x2dc6c0 */
#endif

static volatile sig_atomic_t stop;

static void on_term(int sig) {
	(void)sig;
	stop = 1;
}

static long long cpu_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static volatile unsigned long sink;

__attribute__((noinline)) void inside_hot(void) {
	for (unsigned long i = 0; i < HOT_ROUNDS; i++)
		sink += i;
}

__attribute__((noinline)) void inside_cold(void) {
	for (unsigned long i = 0; i < 1000000; i++)
		sink += i;
}

int main(void) {
	signal(SIGTERM, on_term);
	long long hot = 0, cold = 0;
	printf("ready\n");
	fflush(stdout);
	while (!stop) {
		long long t0 = cpu_ns();
		inside_hot();
		long long t1 = cpu_ns();
		inside_cold();
		long long t2 = cpu_ns();
		hot += t1 - t0;
		cold += t2 - t1;
	}
	printf("{\"inside_hot\": %lld, \"inside_cold\": %lld}\n", hot, cold);
	return 0;
}
