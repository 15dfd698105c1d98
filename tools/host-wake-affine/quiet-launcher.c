// quiet-launcher N COMMAND...: start COMMAND (setsid, then exec in this very
// task) from a launcher whose wake_wide() history has been brought down, so
// that COMMAND's first task, and every task it forks, starts from a
// wakee_flips of (about) zero instead of what the calling process carried.
//
//   cc -O2 -o /tmp/quiet-launcher tools/host-wake-affine/quiet-launcher.c
//   /tmp/quiet-launcher 4 schedlab real --in-process --workload '...'
//   /tmp/quiet-launcher 0 ...     (the same steps without the halving)
//
// How: record_wakee() halves current->wakee_flips at a wakeup more than a
// second (HZ jiffies) after its last halving, and counts a flip only when the
// wakee differs from the last one. So the launcher wakes one helper, then the
// same helper again every 1.1 s, N times: each of those wakeups halves the
// count and adds nothing. On the hosts the vendor placement (sched_vcpu_pack)
// returns before record_wakee() whenever a CPU has room, so two spinners keep
// both vCPUs busy meanwhile and each wakeup takes upstream's path. Spinners
// and helper are killed and reaped before the exec; the child dies with us.
// Costs about 0.3 + 1.1 N seconds of both CPUs.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t spawn_spinner(void) {
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;) {
        }
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: quiet-launcher N COMMAND...   (N halvings, 1.1 s each)\n");
        return 2;
    }
    int n = atoi(argv[1]), wake[2];
    if (n < 0 || n > 32 || pipe(wake)) {
        fprintf(stderr, "quiet-launcher: N must be 0 to 32\n");
        return 2;
    }
    pid_t spin[2] = {spawn_spinner(), spawn_spinner()};
    pid_t helper = fork();
    if (helper == 0) {
        char c;
        close(wake[1]);
        while (read(wake[0], &c, 1) == 1) {
        }
        _exit(0);
    }
    close(wake[0]);
    int failed = 0;
    for (int i = 0; i <= n && !failed; i++) {
        usleep(i ? 1100000 : 300000);
        failed = write(wake[1], "w", 1) != 1;
    }
    for (int i = 0; i < 2; i++) kill(spin[i], SIGKILL);
    close(wake[1]);
    waitpid(helper, 0, 0);
    for (int i = 0; i < 2; i++) waitpid(spin[i], 0, 0);
    if (failed) {
        perror("quiet-launcher: waking the helper");
        return 1;
    }
    setsid();
    execvp(argv[2], argv + 2);
    perror("quiet-launcher: exec");
    return 127;
}
