/*
 * Where does a sync wakeup put the wakee? A waker pinned to CPU 0 wakes, through
 * a pipe (WF_SYNC), a wakee whose previous CPU is 1 and which may run on both;
 * the wakee notes the CPU it woke on. ROUNDS rounds, three ways:
 *
 *   steady  (default) one wakee for the whole run: it answers each round, moves
 *           itself back to CPU 1 (sched_setaffinity) and sleeps again;
 *   --fresh a new wakee each round (no history: no recent_used_cpu, no wakee
 *           flips, never moved back); the waker sleeps 100 us once it has
 *           blocked, then does the gap below;
 *   --woken-by-third / --woken-by-wakee  a fresh wakee; the waker waits blocked
 *           until a third task on CPU 1, or the wakee itself just before it
 *           blocks, wakes it, and wakes the wakee at once.
 *
 * Before each wakeup the waker spins --spin US, then sleeps --sleep US (timer
 * slack 1 ns with --exact-sleep, else the default 50 us); with --sleep-odd US
 * it sleeps that instead in odd rounds, and the steady mode counts odd and even
 * rounds apart (whether the last idle stretch or an average over several
 * decides). With --settle-spin the fresh modes' 100 us wait for the wakee to
 * block is spun instead of slept, so that the waker's vCPU idles only in the
 * gap. CPU-bound hogs can
 * hold the wakee's previous CPU 1 (--hog-prev) or the waker's CPU 0
 * (--hog-waker).
 *
 *   cc -O2 -o /tmp/pull tools/host-wake-pull/pull.c
 *   /tmp/pull ROUNDS [--sleep US] [--sleep-odd US] [--spin US] [--exact-sleep] [--settle-spin] [--hog-prev]
 *             [--hog-waker] [--fresh | --woken-by-third | --woken-by-wakee]
 *
 * Seconds at most; hogs are killed and every child reaped before it exits (run it
 * under setsid so that a killed run takes its children with its session).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

enum mode { STEADY, FRESH, WOKEN_BY_THIRD, WOKEN_BY_WAKEE };

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static void allow(int cpu_mask)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	for (int i = 0; i < 2; i++)
		if (cpu_mask & (1 << i))
			CPU_SET(i, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		die("sched_setaffinity");
}

static void spin_us(int us)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < us * 1000L);
}

static void put(int fd)
{
	char c = 0;
	if (write(fd, &c, 1) != 1)
		die("write");
}

static char get(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		die("read");
	return c;
}

static void pipes(int n, int (*p)[2])
{
	for (int i = 0; i < n; i++)
		if (pipe(p[i]))
			die("pipe");
}

static void closes(int n, int (*p)[2])
{
	for (int i = 0; i < n; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
}

static pid_t hog(int cpu_mask)
{
	pid_t h = fork();
	if (h < 0)
		die("fork");
	if (h == 0) {
		allow(cpu_mask);
		for (;;)
			__asm__ volatile("");
	}
	return h;
}

static void gap(int spin, int sleep)
{
	if (spin)
		spin_us(spin);
	if (sleep)
		usleep(sleep);
}

/* One round with a new wakee: 1 if it woke on CPU 0. */
static int settle_spin;

static void settle(void)
{
	if (settle_spin)
		spin_us(100);
	else
		usleep(100);
}

static int fresh_round(enum mode mode, int spin, int sleep)
{
	int p[4][2]; /* ready, wake, result, kick */
	pipes(4, p);
	pid_t wakee = fork();
	if (wakee < 0)
		die("fork");
	if (wakee == 0) {
		allow(2);
		allow(3);
		if (mode == WOKEN_BY_WAKEE) {
			get(p[0][0]); /* the waker is waiting on the kick */
			put(p[3][1]);
		} else {
			put(p[0][1]);
		}
		get(p[1][0]);
		char cpu = (char)sched_getcpu();
		if (write(p[2][1], &cpu, 1) != 1)
			_exit(1);
		_exit(0);
	}
	pid_t third = -1;
	if (mode == WOKEN_BY_WAKEE) {
		usleep(100); /* the wakee has pinned itself and waits for the go */
		put(p[0][1]);
		get(p[3][0]);
	} else {
		get(p[0][0]);
		settle(); /* the wakee blocks */
		if (mode == WOKEN_BY_THIRD) {
			third = fork();
			if (third < 0)
				die("fork");
			if (third == 0) {
				allow(2);
				usleep(50);
				put(p[3][1]);
				_exit(0);
			}
			get(p[3][0]);
		} else {
			gap(spin, sleep);
		}
	}
	put(p[1][1]);
	char cpu = get(p[2][0]);
	waitpid(wakee, NULL, 0);
	if (third > 0)
		waitpid(third, NULL, 0);
	closes(4, p);
	return cpu == 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 0, spin = 0, sleep = 0, sleep_odd = -1, hog_prev = 0, hog_waker = 0;
	enum mode mode = STEADY;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--sleep") && i + 1 < argc)
			sleep = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--sleep-odd") && i + 1 < argc)
			sleep_odd = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--spin") && i + 1 < argc)
			spin = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--settle-spin"))
			settle_spin = 1;
		else if (!strcmp(argv[i], "--exact-sleep"))
			prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		else if (!strcmp(argv[i], "--hog-prev"))
			hog_prev = 1;
		else if (!strcmp(argv[i], "--hog-waker"))
			hog_waker = 1;
		else if (!strcmp(argv[i], "--fresh"))
			mode = FRESH;
		else if (!strcmp(argv[i], "--woken-by-third"))
			mode = WOKEN_BY_THIRD;
		else if (!strcmp(argv[i], "--woken-by-wakee"))
			mode = WOKEN_BY_WAKEE;
		else {
			fprintf(stderr, "unknown option %s (see the comment at the top of pull.c)\n", argv[i]);
			return 2;
		}
	}
	if (sleep_odd < 0)
		sleep_odd = sleep;
	if (rounds < 1 || spin < 0 || sleep < 0) {
		fprintf(stderr, "usage: %s ROUNDS [--sleep US] [--sleep-odd US] [--spin US] [--exact-sleep] [--hog-prev] [--hog-waker]"
				" [--settle-spin] [--fresh | --woken-by-third | --woken-by-wakee]\n", argv[0]);
		return 2;
	}
	pid_t h1 = hog_prev ? hog(2) : -1, h0 = hog_waker ? hog(1) : -1;
	allow(1);
	int on_waker = 0;
	if (mode != STEADY) {
		for (int r = 0; r < rounds; r++)
			on_waker += fresh_round(mode, spin, r % 2 ? sleep_odd : sleep);
	} else {
		int p[3][2]; /* to the wakee, to the waker, result */
		pipes(3, p);
		pid_t wakee = fork();
		if (wakee < 0)
			die("fork");
		if (wakee == 0) {
			int n[2] = {0, 0}; /* even, odd rounds */
			for (int r = 0; r < rounds; r++) {
				allow(2); /* back to CPU 1: its previous CPU */
				allow(3);
				get(p[0][0]);
				n[r % 2] += sched_getcpu() == 0;
				put(p[1][1]);
			}
			if (write(p[2][1], n, sizeof(n)) != sizeof(n))
				_exit(1);
			_exit(0);
		}
		usleep(20000);
		for (int r = 0; r < rounds; r++) {
			gap(spin, r % 2 ? sleep_odd : sleep);
			put(p[0][1]);
			get(p[1][0]);
		}
		int n[2];
		if (read(p[2][0], n, sizeof(n)) != sizeof(n))
			die("read");
		on_waker = n[0] + n[1];
		printf("even rounds (sleep %d us) %d of %d on CPU 0, odd rounds (sleep %d us) %d of %d\n", sleep, n[0],
		       (rounds + 1) / 2, sleep_odd, n[1], rounds / 2);
		waitpid(wakee, NULL, 0);
		closes(3, p);
	}
	if (h1 > 0)
		kill(h1, SIGKILL);
	if (h0 > 0)
		kill(h0, SIGKILL);
	while (wait(NULL) > 0)
		;
	printf("%d rounds: woke on the waker's CPU 0 %d times (%.0f%%), on its previous CPU 1 %d\n", rounds, on_waker,
	       100.0 * on_waker / rounds, rounds - on_waker);
	return 0;
}
