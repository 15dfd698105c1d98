/*
 * Does a delayed task's wakeup move it? Two processes ping-pong one byte through
 * two pipes. Both are first pinned to CPU 0 for `held` round trips: on an EEVDF
 * kernel with DELAY_DEQUEUE each sleeps ineligible in turn, so every wakeup is of
 * a delayed task. Then both are allowed on CPUs 0 and 1 and `free` more round
 * trips are timed. Upstream v6.18 requeues a delayed wakee where it sleeps
 * (ttwu_runnable()), so the pair stays on CPU 0 (a few us a round trip); a kernel
 * that places the wakee anew finds the idle CPU 1 and the pair splits (a
 * cross-CPU round trip, tens of us on a guest). Prints both mean round-trip
 * times and each of the first 16 free round trips.
 *
 * Build and run (about 5 s, leaves nothing behind: the child exits after its
 * round trips, or on SIGPIPE if the parent is killed):
 *   cc -O2 -o /tmp/pair tools/host-delayed-wake/pair.c && /tmp/pair 20000 100000
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void allow(int ncpus)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int i = 0; i < ncpus; i++)
		CPU_SET(i, &s);
	if (sched_setaffinity(0, sizeof(s), &s)) {
		perror("sched_setaffinity");
		exit(2);
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s HELD_ROUNDS FREE_ROUNDS\n", argv[0]);
		return 2;
	}
	int held = atoi(argv[1]), free_rounds = atoi(argv[2]);
	if (held < 1 || free_rounds < 16) {
		fprintf(stderr, "HELD_ROUNDS must be >= 1 and FREE_ROUNDS >= 16\n");
		return 2;
	}
	int ping[2], pong[2];
	char byte = 0;
	if (pipe(ping) || pipe(pong)) {
		perror("pipe");
		return 2;
	}
	allow(1);
	pid_t child = fork();
	if (child < 0) {
		perror("fork");
		return 2;
	}
	if (child == 0) {
		for (int i = 0; i < held + free_rounds; i++) {
			if (i == held)
				allow(2);
			if (read(ping[0], &byte, 1) != 1 || write(pong[1], &byte, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	double t0 = now_s();
	for (int i = 0; i < held; i++)
		if (write(ping[1], &byte, 1) != 1 || read(pong[0], &byte, 1) != 1)
			return 1;
	double t1 = now_s();
	allow(2);
	double first[17];
	first[0] = t1;
	for (int i = 0; i < free_rounds; i++) {
		if (write(ping[1], &byte, 1) != 1 || read(pong[0], &byte, 1) != 1)
			return 1;
		if (i < 16)
			first[i + 1] = now_s();
	}
	double t2 = now_s();
	waitpid(child, NULL, 0);
	printf("held on CPU 0: %.2f us a round trip; let go: %.2f us a round trip\n",
	       (t1 - t0) / held * 1e6, (t2 - t1) / free_rounds * 1e6);
	printf("the first 16 free round trips, us:");
	for (int i = 0; i < 16; i++)
		printf(" %.1f", (first[i + 1] - first[i]) * 1e6);
	printf("\n");
	return 0;
}
