// bpfrec.h: what lagtrace.c and loadtrace.c share. A hand-assembled BPF
// program on a raw tracepoint writes fixed-size records into a BPF array used
// as a ring (a counter map gives each record its slot), while a command runs
// in a session of its own; then the records are read back. Offsets into
// kernel structures come from the kernel's BTF (btf.py). Nothing in tracefs
// is touched; programs and maps go when the tool exits.
#include <errno.h>
#include <linux/bpf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
// record[dst] <- *(size bytes at base_reg + src); the record is in r9.
static void kcopy(int dst, int base_reg, int src, int size) {
    emit(MOVX(1, 9)); emit(ADDK(1, dst)); emit(MOVK(2, size)); emit(MOVX(3, base_reg)); emit(ADDK(3, src));
    emit(CALL(BPF_FUNC_probe_read_kernel));
}

// The program's next record into r9: slot = fetch_add(counter) & (nrec - 1)
// (nrec a power of two), looked up in the record map. Uses stack slots -4 and
// -28. The two returned jumps (*j1, *j2: map lookups that failed) go to the
// program's exit, patched by load_prog().
static void record_slot(int ctr, int recs, int nrec, int *j1, int *j2) {
    emit(INS(BPF_ST | BPF_MEM | BPF_W, 10, 0, -4, 0));
    emit(MOVX(2, 10)); emit(ADDK(2, -4)); ldmap(1, ctr); emit(CALL(BPF_FUNC_map_lookup_elem));
    *j1 = n; emit(INS(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0, 0));
    emit(MOVK(1, 1));
    emit(INS(BPF_STX | BPF_ATOMIC | BPF_DW, 0, 1, 0, BPF_ADD | BPF_FETCH));
    emit(INS(BPF_ALU64 | BPF_AND | BPF_K, 1, 0, 0, nrec - 1));
    emit(INS(BPF_STX | BPF_MEM | BPF_W, 10, 1, -28, 0));
    emit(MOVX(2, 10)); emit(ADDK(2, -28)); ldmap(1, recs); emit(CALL(BPF_FUNC_map_lookup_elem));
    *j2 = n; emit(INS(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0, 0));
    emit(MOVX(9, 0));
}

// Ends the program (return 0), points the jumps in exits[] at that end, and
// loads it as a raw-tracepoint program; the descriptor, or -1 with the
// verifier's log on stderr.
static int load_prog(const char *tool, const int *exits, int nexits) {
    int out = n;
    emit(MOVK(0, 0)); emit(INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    for (int i = 0; i < nexits; i++) prog[exits[i]].off = out - exits[i] - 1;
    static char log[1 << 20];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)prog; a.insn_cnt = n;
    a.license = (uint64_t)(uintptr_t) "GPL";
    a.log_buf = (uint64_t)(uintptr_t)log; a.log_size = sizeof log; a.log_level = 1;
    int fd = bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) fprintf(stderr, "%s: program refused: %s\n%s\n", tool, strerror(errno), log);
    return fd;
}

// The counter map (one u64) and the record map (nrec records of recsz bytes,
// at most 512).
static int make_maps(int nrec, int recsz, int *ctr, int *recs) {
    if (recsz > 512) return -1;
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY; a.key_size = 4; a.value_size = 8; a.max_entries = 1;
    *ctr = bpf(BPF_MAP_CREATE, &a);
    a.value_size = recsz; a.max_entries = nrec;
    *recs = bpf(BPF_MAP_CREATE, &a);
    return *ctr < 0 || *recs < 0 ? -1 : 0;
}

static int attach(const char *tool, const char *tp, int prog_fd) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.name = (uint64_t)(uintptr_t)tp;
    a.raw_tracepoint.prog_fd = prog_fd;
    int fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
    if (fd < 0) fprintf(stderr, "%s: attaching to %s: %s\n", tool, tp, strerror(errno));
    return fd;
}

// Runs cmd (argv-style) as a session (and process group) of its own while
// the programs progs[0..nprogs) are attached to the tracepoints tps[]; the
// whole group is killed if it outlives 60 s or if this process is
// interrupted, so no process is left behind. Returns the command's wait
// status, or -1 if an attachment failed (the command killed).
static int run_traced(const char *tool, char **cmd, const char **tps, const int *progs, int nprogs) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT); sigaddset(&set, SIGTERM); sigaddset(&set, SIGHUP); sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    pid_t child = fork();
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    int att[8], ok = 1;
    for (int i = 0; i < nprogs; i++) ok &= (att[i] = attach(tool, tps[i], progs[i])) >= 0;
    int status = 0;
    if (!ok) { kill(-child, SIGKILL); waitpid(child, &status, 0); return -1; }
    struct timespec limit = {.tv_sec = 60};
    for (;;) {
        siginfo_t info;
        int sig = sigtimedwait(&set, &info, &limit);
        if (sig == SIGCHLD && waitpid(child, &status, WNOHANG) == 0) continue;
        if (sig != SIGCHLD) {
            kill(-child, SIGKILL);
            waitpid(child, &status, 0);
            fprintf(stderr, "%s: %s: the command's session killed\n", tool, sig < 0 ? "60 s passed" : "interrupted");
        }
        break;
    }
    kill(-child, SIGKILL); // the command's stray children, if any
    for (int i = 0; i < nprogs; i++) close(att[i]);
    return status;
}

// How many records the programs wrote (the ring keeps the last nrec).
static uint64_t record_count(int ctr) {
    union bpf_attr a;
    uint32_t key = 0; uint64_t count = 0;
    memset(&a, 0, sizeof a);
    a.map_fd = ctr; a.key = (uint64_t)(uintptr_t)&key; a.value = (uint64_t)(uintptr_t)&count;
    bpf(BPF_MAP_LOOKUP_ELEM, &a);
    return count;
}

// Record i (of all written) into r; 0 if it is still in the ring.
static int record_read(int recs, int nrec, uint64_t i, unsigned char *r) {
    union bpf_attr a;
    uint32_t key = (uint32_t)(i & (uint64_t)(nrec - 1));
    memset(&a, 0, sizeof a);
    a.map_fd = recs; a.key = (uint64_t)(uintptr_t)&key; a.value = (uint64_t)(uintptr_t)r;
    return bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0 ? -1 : 0;
}

// The tools' command line: "OFFSETS" OUT -- COMMAND..., ten offsets in bytes.
// The output file, or NULL after a message (the caller exits with 2).
static FILE *tool_args(const char *tool, int argc, char **argv, long *o) {
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: %s \"OFFSETS\" OUT -- COMMAND...\n", tool);
        return NULL;
    }
    if (sscanf(argv[1], "%ld %ld %ld %ld %ld %ld %ld %ld %ld %ld", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8], &o[9]) != 10) {
        fprintf(stderr, "%s: OFFSETS must be 10 numbers\n", tool);
        return NULL;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) fprintf(stderr, "%s: OUT %s: %s\n", tool, argv[2], strerror(errno));
    return out;
}

// Runs cmd with progs attached (run_traced), then writes the records the ring
// kept to out, one print() call each, and says how many there were. The
// tool's exit status: 0, or 1 if an attachment failed.
static int trace_and_dump(const char *tool, char **cmd, const char **tps, const int *progs, int nprogs, int ctr,
                          int recs, int nrec, FILE *out, void (*print)(FILE *, const unsigned char *)) {
    int status = run_traced(tool, cmd, tps, progs, nprogs);
    if (status < 0) return 1;
    uint64_t count = record_count(ctr);
    uint64_t first = count > (uint64_t)nrec ? count - nrec : 0;
    unsigned char r[512]; // records are at most this long (make_maps' recsz)
    for (uint64_t i = first; i < count; i++)
        if (record_read(recs, nrec, i, r) == 0) print(out, r);
    fclose(out);
    fprintf(stderr, "%s: %llu records (%llu kept), command status %d\n", tool, (unsigned long long)count,
            (unsigned long long)(count - first), WEXITSTATUS(status));
    return 0;
}
