// loadtrace: the PELT loads wake_affine_weight() compares, read at every
// sched_waking (before the wakee is placed) of this machine while COMMAND runs,
// through a BPF program on that raw tracepoint that follows the wakee's and the
// waker's sched_entity to their cfs_rq and its rq with bpf_probe_read_kernel().
// Offsets come from the kernel's BTF (btf.py).
//
//   cc -O2 -o /tmp/loadtrace loadtrace.c
//   /tmp/loadtrace OFFSETS OUT -- COMMAND...
//
// OFFSETS: "pid se se.cfs_rq se.avg sched_avg.load_avg cfs_rq.rq cfs_rq.avg
// cfs_rq.h_load rq.cfs rq.cpu" in bytes. OUT gets one text line a wakeup:
//   ts_ns cpu wakee_pid waker_pid
//   wakee: rq.cpu root_load se.load_avg cfs_rq.load_avg cfs_rq.h_load
//   waker: rq.cpu root_load se.load_avg cfs_rq.load_avg cfs_rq.h_load
// (root_load = rq->cfs.avg.load_avg, what cpu_load() returns; the cfs_rq is
// the task's own, its task group's under autogroup).
// The programs and maps are released when it exits; the command runs in a
// session of its own, killed whole after 60 s or when this is interrupted; no
// tracefs setting is touched.
#include <errno.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NREC (1 << 18)
#define RECSZ 112

static long bpf(int cmd, union bpf_attr *a) { return syscall(SYS_bpf, cmd, a, sizeof(*a)); }
#define INS(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOVX(d, s) INS(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOVK(d, k) INS(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, k)
#define ADDK(d, k) INS(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, k)
#define CALL(f) INS(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define LDX(d, s, o) INS(BPF_LDX | BPF_MEM | BPF_DW, d, s, o, 0)
#define STX(d, s, o) INS(BPF_STX | BPF_MEM | BPF_DW, d, s, o, 0)

static struct bpf_insn prog[256];
static int n;
static void emit(struct bpf_insn i) { prog[n++] = i; }
static void ldmap(int reg, int fd) {
    emit(INS(BPF_LD | BPF_DW | BPF_IMM, reg, BPF_PSEUDO_MAP_FD, 0, fd));
    emit(INS(0, 0, 0, 0, 0));
}
// record[dst] <- *(size bytes at base_reg + src)
static void kcopy(int dst, int base_reg, int src, int size) {
    emit(MOVX(1, 9)); emit(ADDK(1, dst)); emit(MOVK(2, size)); emit(MOVX(3, base_reg)); emit(ADDK(3, src));
    emit(CALL(BPF_FUNC_probe_read_kernel));
}

// Follows task (in register treg) to its cfs_rq and rq and copies, at record
// offset dst: rq.cpu (4 bytes at dst), rq->cfs.avg.load_avg (dst + 8),
// se.avg.load_avg (dst + 16), cfs_rq.avg.load_avg (dst + 24), cfs_rq.h_load
// (dst + 32). Uses stack slots -48 and -56 and registers 1-3, 6.
static void loads(int dst, int treg, const long *o) {
    long se = o[1], secfs = o[2], seavg = o[3], lavg = o[4], cfsrq_rq = o[5], cfsavg = o[6], hload = o[7], rqcfs = o[8], rqcpu = o[9];
    kcopy(dst + 16, treg, se + seavg + lavg, 8);
    // the cfs_rq pointer onto the stack, then into r6
    emit(MOVX(1, 10)); emit(ADDK(1, -48)); emit(MOVK(2, 8)); emit(MOVX(3, treg)); emit(ADDK(3, se + secfs));
    emit(CALL(BPF_FUNC_probe_read_kernel));
    emit(LDX(6, 10, -48));
    kcopy(dst + 24, 6, cfsavg + lavg, 8);
    kcopy(dst + 32, 6, hload, 8);
    // the rq pointer
    emit(MOVX(1, 10)); emit(ADDK(1, -56)); emit(MOVK(2, 8)); emit(MOVX(3, 6)); emit(ADDK(3, cfsrq_rq));
    emit(CALL(BPF_FUNC_probe_read_kernel));
    emit(LDX(6, 10, -56));
    kcopy(dst, 6, rqcpu, 4);
    kcopy(dst + 8, 6, rqcfs + cfsavg + lavg, 8);
}

static int build(int ctr, int recs, const long *o) {
    long pid = o[0];
    n = 0;
    emit(MOVX(6, 1));
    emit(LDX(7, 6, 0));
    emit(MOVK(1, 0)); emit(STX(10, 1, -48)); emit(STX(10, 1, -56));
    emit(CALL(BPF_FUNC_get_current_task)); emit(MOVX(8, 0));
    // idx = fetch_add(counter, 1)
    emit(INS(BPF_ST | BPF_MEM | BPF_W, 10, 0, -4, 0));
    emit(MOVX(2, 10)); emit(ADDK(2, -4)); ldmap(1, ctr); emit(CALL(BPF_FUNC_map_lookup_elem));
    int j1 = n; emit(INS(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0, 0));
    emit(MOVK(1, 1));
    emit(INS(BPF_STX | BPF_ATOMIC | BPF_DW, 0, 1, 0, BPF_ADD | BPF_FETCH));
    emit(INS(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, NREC - 1));
    emit(INS(BPF_STX | BPF_MEM | BPF_W, 10, 1, -28, 0));
    emit(MOVX(2, 10)); emit(ADDK(2, -28)); ldmap(1, recs); emit(CALL(BPF_FUNC_map_lookup_elem));
    int j2 = n; emit(INS(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0, 0));
    emit(MOVX(9, 0));
    emit(CALL(BPF_FUNC_ktime_get_ns)); emit(STX(9, 0, 0));
    emit(CALL(BPF_FUNC_get_smp_processor_id)); emit(STX(9, 0, 8));
    kcopy(16, 7, pid, 4); kcopy(20, 8, pid, 4);
    loads(24, 7, o);
    loads(64, 8, o);
    int out = n;
    emit(MOVK(0, 0)); emit(INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    prog[j1].off = out - j1 - 1; prog[j2].off = out - j2 - 1;
    static char log[1 << 20];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)prog; a.insn_cnt = n;
    a.license = (uint64_t)(uintptr_t) "GPL";
    a.log_buf = (uint64_t)(uintptr_t)log; a.log_size = sizeof log; a.log_level = 1;
    int fd = bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) fprintf(stderr, "loadtrace: program refused: %s\n%s\n", strerror(errno), log);
    return fd;
}

static int attach(const char *tp, int prog_fd) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.name = (uint64_t)(uintptr_t)tp;
    a.raw_tracepoint.prog_fd = prog_fd;
    int fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
    if (fd < 0) fprintf(stderr, "loadtrace: attaching to %s: %s\n", tp, strerror(errno));
    return fd;
}

static pid_t child;

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: loadtrace \"OFFSETS\" OUT -- COMMAND...\n");
        return 2;
    }
    long o[10];
    if (sscanf(argv[1], "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]) != 10) {
        fprintf(stderr, "loadtrace: OFFSETS must be 10 numbers\n");
        return 2;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) { perror("loadtrace: OUT"); return 2; }
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY; a.key_size = 4; a.value_size = 8; a.max_entries = 1;
    int ctr = bpf(BPF_MAP_CREATE, &a);
    a.value_size = RECSZ; a.max_entries = NREC;
    int recs = bpf(BPF_MAP_CREATE, &a);
    if (ctr < 0 || recs < 0) { perror("loadtrace: maps"); return 1; }
    int pw = build(ctr, recs, o);
    if (pw < 0) return 1;
    // The command runs as a session (and process group) of its own; the whole
    // group is killed if it outlives 60 s or if this process is interrupted,
    // so no process is left behind.
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT); sigaddset(&set, SIGTERM); sigaddset(&set, SIGHUP); sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    child = fork();
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[4], argv + 4);
        _exit(127);
    }
    int aw = attach("sched_waking", pw);
    int status = 0;
    if (aw < 0) { kill(-child, SIGKILL); waitpid(child, &status, 0); return 1; }
    struct timespec limit = {.tv_sec = 60};
    for (;;) {
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &limit);
        if (sig == SIGCHLD && waitpid(child, &status, WNOHANG) == 0) continue;
        if (sig != SIGCHLD) {
            kill(-child, SIGKILL);
            waitpid(child, &status, 0);
            fprintf(stderr, "loadtrace: %s: the command's session killed\n", sig < 0 ? "60 s passed" : "interrupted");
        }
        break;
    }
    kill(-child, SIGKILL); // the command's stray children, if any
    close(aw);
    uint32_t key = 0; uint64_t count = 0;
    memset(&a, 0, sizeof a);
    a.map_fd = ctr; a.key = (uint64_t)(uintptr_t)&key; a.value = (uint64_t)(uintptr_t)&count;
    bpf(BPF_MAP_LOOKUP_ELEM, &a);
    uint64_t first = count > NREC ? count - NREC : 0;
    unsigned char r[RECSZ];
    for (uint64_t i = first; i < count; i++) {
        key = (uint32_t)(i & (NREC - 1));
        a.map_fd = recs; a.value = (uint64_t)(uintptr_t)r;
        if (bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0) continue;
        uint64_t *q = (uint64_t *)r;
        uint32_t *u = (uint32_t *)r;
        fprintf(out, "%llu %llu %u %u  %u %lld %lld %lld %lld  %u %lld %lld %lld %lld\n",
                (unsigned long long)q[0], (unsigned long long)q[1], u[4], u[5],
                u[6], (long long)q[4], (long long)q[5], (long long)q[6], (long long)q[7],
                u[16], (long long)q[9], (long long)q[10], (long long)q[11], (long long)q[12]);
    }
    fclose(out);
    fprintf(stderr, "loadtrace: %llu records (%llu kept), command status %d\n", (unsigned long long)count,
            (unsigned long long)(count - first), WEXITSTATUS(status));
    return 0;
}
