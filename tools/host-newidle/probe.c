/*
 * Does a CPU that goes idle pull a waiting task at once (the fair class's newly
 * idle balance), and from how long an expected idle on? Two vCPUs:
 *
 *   S    pinned to CPU 1: spins RUN us, then sleeps SLEEP us (timer slack 1 ns),
 *        over and over, so CPU 1's avg_idle settles near SLEEP;
 *   hog  pinned to CPU 0, CPU-bound;
 *   H    CPU-bound, in rounds: it pins itself to CPU 0 (sched_setaffinity(), so
 *        CPU 0 holds two tasks and is overloaded), spins SETTLE ms, allows
 *        itself both CPUs and spins, reading sched_getcpu(), until it finds
 *        itself on CPU 1 (or 200 ms pass).
 *
 * H notes, when it first finds itself on CPU 1, whether S was asleep and how
 * long before S had gone to sleep. An arrival within 50 us of the start of S's
 * sleep is CPU 1's newly idle pass (sched_balance_newidle() in v6.18) pulling
 * H; one later in a sleep is an idle CPU's balance (a nohz kick from CPU 0's
 * tick); one while S runs is a busy CPU's periodic balance. The round also
 * counts S's sleeps from H's unpinning to its arrival: the chances the newly
 * idle pass had. It can pull H only while the hog runs (H waits) and H has
 * not run for sched_migration_cost (task_hot()). S also times its sleeps
 * (clock to clock around nanosleep()): how long CPU 1 idles in one, plus the
 * system call. The parent waits for H and then kills S and the hog.
 *
 *   cc -O2 -o /tmp/newidle tools/host-newidle/probe.c
 *   setsid /tmp/newidle ROUNDS SLEEP_US [RUN_US [SETTLE_MS]]
 *
 * Prints one summary line. Seconds at most; the children are killed and
 * reaped before it exits (run it under setsid so that a killed run takes its
 * children with its session). It uses no tracing.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#define MAX_ROUNDS 10000
#define NEWIDLE_WINDOW_NS 50000L
#define ARRIVAL_TIMEOUT_NS 200000000L

struct shared {
	volatile int stop;
	volatile int s_asleep;
	volatile long s_sleep_start_ns;
	volatile long s_sleeps;
	volatile long s_slept_ns;
	/* H's results, read by the parent once H has exited. */
	int n_newidle, n_later, n_busy, n_timeout;
	long chances;
	long newidle_ns[MAX_ROUNDS];
};

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000L + t.tv_nsec;
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

static void spin_until(long t_ns)
{
	while (now_ns() < t_ns)
		;
}

static void run_s(struct shared *sh, int run_us, int sleep_us)
{
	struct timespec d = { sleep_us / 1000000, (sleep_us % 1000000) * 1000L };
	allow(2);
	prctl(PR_SET_TIMERSLACK, 1UL);
	for (;;) {
		spin_until(now_ns() + run_us * 1000L);
		sh->s_sleep_start_ns = now_ns();
		sh->s_sleeps++;
		sh->s_asleep = 1;
		nanosleep(&d, NULL);
		sh->s_asleep = 0;
		sh->s_slept_ns += now_ns() - sh->s_sleep_start_ns;
	}
}

static void run_hog(void)
{
	allow(1);
	for (;;)
		;
}

static void run_h(struct shared *sh, int rounds, int settle_ms)
{
	for (int r = 0; r < rounds; r++) {
		allow(1);
		spin_until(now_ns() + settle_ms * 1000000L);
		long sleeps_before = sh->s_sleeps;
		allow(3);
		long deadline = now_ns() + ARRIVAL_TIMEOUT_NS;
		int cpu;
		while ((cpu = sched_getcpu()) != 1 && now_ns() < deadline)
			;
		int asleep = sh->s_asleep;
		long after_sleep_ns = now_ns() - sh->s_sleep_start_ns;
		sh->chances += sh->s_sleeps - sleeps_before;
		if (cpu != 1)
			sh->n_timeout++;
		else if (!asleep)
			sh->n_busy++;
		else if (after_sleep_ns <= NEWIDLE_WINDOW_NS)
			sh->newidle_ns[sh->n_newidle++] = after_sleep_ns;
		else
			sh->n_later++;
	}
	_exit(0);
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s ROUNDS SLEEP_US [RUN_US [SETTLE_MS]]\n", argv[0]);
		return 2;
	}
	int rounds = atoi(argv[1]), sleep_us = atoi(argv[2]);
	int run_us = argc > 3 ? atoi(argv[3]) : 100;
	int settle_ms = argc > 4 ? atoi(argv[4]) : 20;
	if (rounds < 1 || rounds > MAX_ROUNDS || sleep_us < 1 || sleep_us > 100000 || run_us < 1 ||
	    run_us > 100000 || settle_ms < 1 || settle_ms > 1000) {
		fprintf(stderr, "ROUNDS 1..%d, SLEEP_US and RUN_US 1..100000, SETTLE_MS 1..1000\n", MAX_ROUNDS);
		return 2;
	}
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	memset(sh, 0, sizeof(*sh));
	pid_t kids[3] = { 0, 0, 0 };
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		if (kids[k] < 0) {
			for (int j = 0; j < k; j++)
				kill(kids[j], SIGKILL);
			die("fork");
		}
		if (kids[k] == 0) {
			if (k == 0)
				run_s(sh, run_us, sleep_us);
			if (k == 1)
				run_hog();
			/* H starts once S has slept a while: CPU 1's avg_idle has settled. */
			spin_until(now_ns() + 20000000L);
			run_h(sh, rounds, settle_ms);
		}
	}
	waitpid(kids[2], NULL, 0);
	kill(kids[0], SIGKILL);
	kill(kids[1], SIGKILL);
	waitpid(kids[0], NULL, 0);
	waitpid(kids[1], NULL, 0);

	qsort(sh->newidle_ns, sh->n_newidle, sizeof(long), cmp_long);
	printf("sleep %d us run %d us settle %d ms: %d rounds, arrivals within %ld us of S's sleep %d "
	       "(p50 %.1f us), later in a sleep %d, while S ran %d, none %d; S's sleeps before an arrival %.1f a round; a sleep took %.1f us\n",
	       sleep_us, run_us, settle_ms, rounds, NEWIDLE_WINDOW_NS / 1000, sh->n_newidle,
	       sh->n_newidle ? sh->newidle_ns[sh->n_newidle / 2] / 1000.0 : 0.0, sh->n_later, sh->n_busy,
	       sh->n_timeout, (double)sh->chances / rounds, sh->s_slept_ns / 1000.0 / (sh->s_sleeps ? sh->s_sleeps : 1));
	return 0;
}
