/*
 * A sleeper alone on CPU 1: N times, spin 100 us, then nanosleep() US
 * microseconds (timer slack 1 ns); prints how much longer than asked the
 * sleeps took, clock to clock (p10, p50, p90). Run under perf record to see
 * whether a sleep blocks (a sched_switch to idle after the clock_nanosleep
 * entry) or is woken by its own timer before it can (sched_waking of itself,
 * no switch):
 *
 *   cc -O2 -o /tmp/sleeper tools/host-newidle/sleeper.c
 *   perf record -e raw_syscalls:sys_enter --filter 'id == 230' \
 *       -e sched:sched_switch -e sched:sched_waking -a -- /tmp/sleeper 3000 5
 *
 * Under a second; it forks nothing.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/prctl.h>

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = argc > 2 ? atoi(argv[1]) : 0, us = argc > 2 ? atoi(argv[2]) : 0;
	if (n < 1 || n > 1000000 || us < 1 || us > 999999) {
		fprintf(stderr, "usage: %s N US (N 1..1000000, US 1..999999)\n", argv[0]);
		return 2;
	}
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(1, &s);
	if (sched_setaffinity(0, sizeof(s), &s)) {
		perror("sched_setaffinity");
		return 2;
	}
	prctl(PR_SET_TIMERSLACK, 1UL);
	struct timespec d = { 0, us * 1000L };
	long *over = malloc(n * sizeof(long));
	if (!over) {
		perror("malloc");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		long end = now_ns() + 100000;
		while (now_ns() < end)
			;
		long t0 = now_ns();
		nanosleep(&d, NULL);
		over[i] = now_ns() - t0 - us * 1000L;
	}
	qsort(over, n, sizeof(long), cmp_long);
	printf("sleep %d us: %d sleeps took longer than asked by p10 %.1f p50 %.1f p90 %.1f us\n", us, n,
	       over[n / 10] / 1e3, over[n / 2] / 1e3, over[9 * n / 10] / 1e3);
	free(over);
	return 0;
}
