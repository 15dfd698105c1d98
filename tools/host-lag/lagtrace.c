// lagtrace: record EEVDF's per-entity numbers at every context switch and
// wakeup of this machine while COMMAND runs, through BPF programs on the
// sched_switch and sched_wakeup raw tracepoints that copy fields of the tasks'
// sched_entity and of their cfs_rq with bpf_probe_read_kernel() (allowed under
// the hosts' integrity lockdown). Offsets come from the kernel's BTF (btf.py).
//
//   cc -O2 -o /tmp/lagtrace lagtrace.c
//   /tmp/lagtrace OFFSETS OUT -- COMMAND...
//
// OFFSETS: "pid se comm vruntime deadline vlag cfs_rq sum_w sum_weight zero" in
// bytes (task_struct.pid, task_struct.se, task_struct.comm, then sched_entity's
// and cfs_rq's fields). OUT gets one text line a record:
//   kind ts_ns cpu prev_state preempt pidA pidB A.vruntime A.deadline A.vlag_or_vprot
//   B.vruntime B.deadline B.vlag_or_vprot cfs_rq.sum_w_vruntime cfs_rq.sum_weight
//   cfs_rq.zero_vruntime commB
// kind S: a switch, A the task switched out, B the one switched in (B's cfs_rq);
// kind W: a wakeup, A = B = the wakee, after its enqueue.
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

#define NREC (1 << 19)
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

static int build(int wakeup, int ctr, int recs, const long *o) {
    long pid = o[0], se = o[1], comm = o[2], vr = o[3], dl = o[4], vlag = o[5], cfsrq = o[6], sumw = o[7], sumwt = o[8], zero = o[9];
    n = 0;
    emit(MOVX(6, 1));
    if (wakeup) {
        emit(LDX(7, 6, 0)); emit(MOVX(8, 7));
        emit(MOVK(1, 0xfe)); emit(STX(10, 1, -16)); emit(MOVK(1, 0)); emit(STX(10, 1, -24));
    } else {
        emit(LDX(7, 6, 8)); emit(LDX(8, 6, 16));
        emit(LDX(1, 6, 24)); emit(STX(10, 1, -16)); emit(LDX(1, 6, 0)); emit(STX(10, 1, -24));
    }
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
    emit(CALL(BPF_FUNC_get_smp_processor_id));
    emit(INS(BPF_ALU64 | BPF_LSH | BPF_K, 0, 0, 0, 48));
    emit(LDX(1, 10, -16)); emit(INS(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, 0xff)); emit(INS(BPF_ALU64 | BPF_OR | BPF_X, 0, 1, 0, 0));
    emit(LDX(1, 10, -24)); emit(INS(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, 1));
    emit(INS(BPF_ALU64 | BPF_LSH | BPF_K, 1, 0, 0, 40)); emit(INS(BPF_ALU64 | BPF_OR | BPF_X, 0, 1, 0, 0));
    if (wakeup) { emit(MOVK(1, 1)); emit(INS(BPF_ALU64 | BPF_LSH | BPF_K, 1, 0, 0, 32)); emit(INS(BPF_ALU64 | BPF_OR | BPF_X, 0, 1, 0, 0)); }
    emit(STX(9, 0, 8));
    kcopy(16, 7, pid, 4); kcopy(20, 8, pid, 4);
    kcopy(24, 7, se + vr, 8); kcopy(32, 7, se + dl, 8); kcopy(40, 7, se + vlag, 8);
    kcopy(48, 8, se + vr, 8); kcopy(56, 8, se + dl, 8); kcopy(64, 8, se + vlag, 8);
    kcopy(96, 8, comm, 16);
    // cfs_rq of B onto the stack, then its sums.
    emit(MOVX(1, 10)); emit(ADDK(1, -40)); emit(MOVK(2, 8)); emit(MOVX(3, 8)); emit(ADDK(3, se + cfsrq));
    emit(CALL(BPF_FUNC_probe_read_kernel));
    emit(LDX(6, 10, -40));
    int j3 = n; emit(INS(BPF_JMP | BPF_JEQ | BPF_K, 6, 0, 0, 0));
    kcopy(72, 6, sumw, 8); kcopy(80, 6, sumwt, 8); kcopy(88, 6, zero, 8);
    int out = n;
    emit(MOVK(0, 0)); emit(INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    prog[j1].off = out - j1 - 1; prog[j2].off = out - j2 - 1; prog[j3].off = out - j3 - 1;
    static char log[1 << 20];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)prog; a.insn_cnt = n;
    a.license = (uint64_t)(uintptr_t) "GPL";
    a.log_buf = (uint64_t)(uintptr_t)log; a.log_size = sizeof log; a.log_level = 1;
    int fd = bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) fprintf(stderr, "lagtrace: program refused: %s\n%s\n", strerror(errno), log);
    return fd;
}

static int attach(const char *tp, int prog_fd) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.name = (uint64_t)(uintptr_t)tp;
    a.raw_tracepoint.prog_fd = prog_fd;
    int fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
    if (fd < 0) fprintf(stderr, "lagtrace: attaching to %s: %s\n", tp, strerror(errno));
    return fd;
}

static pid_t child;

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: lagtrace \"OFFSETS\" OUT -- COMMAND...\n");
        return 2;
    }
    long o[10];
    if (sscanf(argv[1], "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]) != 10) {
        fprintf(stderr, "lagtrace: OFFSETS must be 10 numbers\n");
        return 2;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) { perror("lagtrace: OUT"); return 2; }
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY; a.key_size = 4; a.value_size = 8; a.max_entries = 1;
    int ctr = bpf(BPF_MAP_CREATE, &a);
    a.value_size = RECSZ; a.max_entries = NREC;
    int recs = bpf(BPF_MAP_CREATE, &a);
    if (ctr < 0 || recs < 0) { perror("lagtrace: maps"); return 1; }
    int ps = build(0, ctr, recs, o), pw = build(1, ctr, recs, o);
    if (ps < 0 || pw < 0) return 1;
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
    int as = attach("sched_switch", ps), aw = attach("sched_wakeup", pw);
    int status = 0;
    if (as < 0 || aw < 0) { kill(-child, SIGKILL); waitpid(child, &status, 0); return 1; }
    struct timespec limit = {.tv_sec = 60};
    for (;;) {
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &limit);
        if (sig == SIGCHLD && waitpid(child, &status, WNOHANG) == 0) continue;
        if (sig != SIGCHLD) {
            kill(-child, SIGKILL);
            waitpid(child, &status, 0);
            fprintf(stderr, "lagtrace: %s: the command's session killed\n", sig < 0 ? "60 s passed" : "interrupted");
        }
        break;
    }
    kill(-child, SIGKILL); // the command's stray children, if any
    close(as); close(aw);
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
        uint32_t *pids = (uint32_t *)(r + 16);
        char commb[17]; memcpy(commb, r + 96, 16); commb[16] = 0;
        for (char *c = commb; *c; c++) if (*c == ' ') *c = '_';
        fprintf(out, "%c %llu %llu %llu %llu %u %u %lld %lld %lld %lld %lld %lld %lld %llu %lld %s\n",
                (q[1] >> 32) & 1 ? 'W' : 'S', (unsigned long long)q[0], (unsigned long long)(q[1] >> 48),
                (unsigned long long)(q[1] & 0xff), (unsigned long long)((q[1] >> 40) & 1), pids[0], pids[1],
                (long long)q[3], (long long)q[4], (long long)q[5], (long long)q[6], (long long)q[7], (long long)q[8],
                (long long)q[9], (unsigned long long)q[10], (long long)q[11], commb);
    }
    fclose(out);
    fprintf(stderr, "lagtrace: %llu records (%llu kept), command status %d\n", (unsigned long long)count,
            (unsigned long long)(count - first), WEXITSTATUS(status));
    return 0;
}
