/*
 * Where does a sync wakeup put the wakee? A waker pinned to CPU 0 wakes, through
 * a pipe (a WF_SYNC wakeup), a wakee that last ran on CPU 1 and may run on both;
 * the wakee notes the CPU it woke on, answers, moves itself back to CPU 1 and
 * sleeps again. Between rounds the waker sleeps (GAP_US > 0), spins (GAP_US < 0)
 * or goes straight on (0). Optional CPU-bound hogs occupy the wakee's previous
 * CPU 1 (--hog-prev) or the waker's CPU 0 (--hog-waker).
 *
 *   cc -O2 -o /tmp/pull tools/host-wake-pull/pull.c
 *   /tmp/pull ROUNDS GAP_US [--hog-prev] [--hog-waker]
 *
 * A few seconds at most; the hogs are killed and every child reaped before it
 * exits (and die with the run's session if it is killed: run it under setsid).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

static void allow(int mask)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int i = 0; i < 2; i++)
		if (mask & (1 << i))
			CPU_SET(i, &s);
	if (sched_setaffinity(0, sizeof(s), &s)) {
		perror("sched_setaffinity");
		exit(2);
	}
}

static void spin_us(int us)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < us * 1000L);
}

static pid_t hog(int cpu_mask)
{
	pid_t h = fork();
	if (h == 0) {
		allow(cpu_mask);
		for (;;)
			__asm__ volatile("");
	}
	return h;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s ROUNDS GAP_US [--hog-prev] [--hog-waker]\n", argv[0]);
		return 2;
	}
	int rounds = atoi(argv[1]), gap = atoi(argv[2]), hog_prev = 0, hog_waker = 0;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--hog-prev"))
			hog_prev = 1;
		else if (!strcmp(argv[i], "--hog-waker"))
			hog_waker = 1;
		else {
			fprintf(stderr, "unknown option %s: --hog-prev or --hog-waker\n", argv[i]);
			return 2;
		}
	}
	if (rounds < 1) {
		fprintf(stderr, "ROUNDS must be >= 1\n");
		return 2;
	}
	int to_wakee[2], to_waker[2];
	char byte = 0;
	if (pipe(to_wakee) || pipe(to_waker)) {
		perror("pipe");
		return 2;
	}
	pid_t h1 = hog_prev ? hog(2) : -1, h0 = hog_waker ? hog(1) : -1;
	pid_t wakee = fork();
	if (wakee == 0) {
		int on_waker = 0, on_prev = 0;
		for (int i = 0; i < rounds; i++) {
			allow(2); /* back to CPU 1: its previous CPU */
			allow(3); /* free to go anywhere */
			if (read(to_wakee[0], &byte, 1) != 1)
				_exit(1);
			if (sched_getcpu() == 0)
				on_waker++;
			else
				on_prev++;
			if (write(to_waker[1], &byte, 1) != 1)
				_exit(1);
		}
		printf("gap %d us%s%s: woke on the waker's CPU 0 %d times, on its previous CPU 1 %d times\n", gap,
		       hog_prev ? ", hog on CPU 1" : "", hog_waker ? ", hog on CPU 0" : "", on_waker, on_prev);
		fflush(stdout);
		_exit(0);
	}
	allow(1);
	usleep(20000);
	for (int i = 0; i < rounds; i++) {
		if (gap > 0)
			usleep(gap);
		else if (gap < 0)
			spin_us(-gap);
		if (write(to_wakee[1], &byte, 1) != 1 || read(to_waker[0], &byte, 1) != 1)
			break;
	}
	waitpid(wakee, NULL, 0);
	if (h1 > 0)
		kill(h1, SIGKILL);
	if (h0 > 0)
		kill(h0, SIGKILL);
	while (wait(NULL) > 0)
		;
	return 0;
}
