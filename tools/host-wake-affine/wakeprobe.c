// wakeprobe: record what the hosts' select_task_rq_fair() reads for a wakeup
// (the wakee's and the waker's wakee_flips, load averages and hierarchical
// loads, both runqueues' load and runnable counts) at every sched_waking and
// sched_wakeup, and every fork's parent wakee_flips at sched_process_fork,
// while COMMAND runs in a session of its own. Raw-tracepoint BPF programs
// copy kernel memory with bpf_probe_read_kernel() (allowed under the hosts'
// integrity lockdown; see tools/host-kernel-text/). README.md has the layout.
//
//   cc -O2 -o /tmp/wakeprobe tools/host-wake-affine/wakeprobe.c
//   /tmp/wakeprobe [--forks|--eevdf] OUT -- COMMAND...      (root)
//
// --forks records forks only. One BPF map (64 MiB) and up to three programs,
// all released at exit; no tracefs setting is changed. OUT gets one line per
// record, 32 hex words (README.md); at most the last 262144 are kept.
#include <errno.h>
#include <linux/bpf.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NREC (1 << 18)
#define NSLOT 32

static long bpf(int cmd, union bpf_attr *a) { return syscall(SYS_bpf, cmd, a, sizeof(*a)); }
#define INS(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

static struct bpf_insn P[1024];
static int n;
static void e(struct bpf_insn i) { P[n++] = i; }
static void mov_reg(int d, int s) { e(INS(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)); }
static void mov_imm(int d, int imm) { e(INS(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, imm)); }
static void add_imm(int d, int imm) { e(INS(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, imm)); }
static void ld64(int d, uint64_t v) {
    e(INS(BPF_LD | BPF_DW | BPF_IMM, d, 0, 0, (int32_t)(uint32_t)v));
    e(INS(0, 0, 0, 0, (int32_t)(uint32_t)(v >> 32)));
}
static void call(int f) { e(INS(BPF_JMP | BPF_CALL, 0, 0, 0, f)); }
// slot byte offset <- SIZE bytes at (reg + off)
static void rd(int byte, int size, int reg, int off) {
    mov_reg(BPF_REG_3, reg);
    if (off) add_imm(BPF_REG_3, off);
    mov_reg(BPF_REG_1, BPF_REG_6);
    add_imm(BPF_REG_1, byte);
    mov_imm(BPF_REG_2, size);
    call(BPF_FUNC_probe_read_kernel);
}
static void rd_abs(int byte, int size, uint64_t addr) {
    ld64(BPF_REG_3, addr);
    mov_reg(BPF_REG_1, BPF_REG_6);
    add_imm(BPF_REG_1, byte);
    mov_imm(BPF_REG_2, size);
    call(BPF_FUNC_probe_read_kernel);
}
static void ldslot(int reg, int slot) { e(INS(BPF_LDX | BPF_MEM | BPF_DW, reg, BPF_REG_6, slot * 8, 0)); }
static void zero(int slot) { e(INS(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_6, 0, slot * 8, 0)); }

// The hosts' kernel 6.18.44-fc-v657 (README.md: how each was found). The
// runqueues are runqueues + __per_cpu_offset[cpu]; check with rq->cpu (0xba8).
static const uint64_t RQ[2] = {0xffff888627c2ba40ULL, 0xffff888627d2ba40ULL};
static const uint64_t JIFFIES = 0xffffffff83009980ULL;

// The hosts' struct sched_entity (inside task_struct at 0x80) and struct
// cfs_rq, from their update_deadline() and vruntime_eligible() (README.md).
enum {
    TASK_SE_DEADLINE = 0xa8,
    TASK_SE_ON_RQ = 0xd8,
    TASK_SE_VRUNTIME = 0xf8,
    TASK_SE_VLAG = 0x100,
    TASK_SE_SLICE = 0x108,
    TASK_SE_CFS_RQ = 0x128,
    CFS_RQ_AVG_VRUNTIME = 0x20,
    CFS_RQ_AVG_LOAD = 0x28,
    CFS_RQ_ZERO_VRUNTIME = 0x30,
    CFS_RQ_CURR = 0x48,
};

// Slots base..base+7 of the task in treg: se.avg.load_avg, se.cfs_rq, that
// cfs_rq's avg.load_avg, h_load and last_h_load_update, se.parent (the group
// entity), its avg.load_avg and its cfs_rq (the parent queue).
static void task_reads(int treg, int base) {
    rd(base * 8, 8, treg, 0x160);
    rd((base + 1) * 8, 8, treg, TASK_SE_CFS_RQ);
    ldslot(BPF_REG_8, base + 1);
    rd((base + 2) * 8, 8, BPF_REG_8, 0xa0);
    rd((base + 3) * 8, 8, BPF_REG_8, 0x120);
    rd((base + 4) * 8, 8, BPF_REG_8, 0x128);
    rd((base + 5) * 8, 8, treg, 0x120);
    ldslot(BPF_REG_8, base + 5);
    rd((base + 6) * 8, 8, BPF_REG_8, 0xe0);
    rd((base + 7) * 8, 8, BPF_REG_8, 0xa8);
}

// --eevdf: what check_preempt_wakeup_fair() compares instead (offsets of the
// hosts' struct sched_entity from update_deadline() and vruntime_eligible()):
// 5-9 the task's se.deadline, vruntime, vlag (vprot while it runs), slice, and
// the 8 bytes from on_rq (on_rq, sched_delayed, rel_deadline, custom_slice);
// 10 its cfs_rq, 11-14 that cfs_rq's avg_vruntime, avg_load, zero_vruntime and
// curr; 16 current, 17-20 current's deadline, vruntime, vprot, slice, 21 its
// thread_info flags (TIF_NEED_RESCHED is bit 3), 22 its se.cfs_rq, 23 its
// se.load.weight, 24 the task's se.load.weight, 25 jiffies, 26 the curr of
// the task's runqueue, 27-30 its deadline, vruntime, vprot and flags.
static int eevdf_mode;
static int load_prog(void);

// Slots slot..slot+2: the avg_vruntime, avg_load and zero_vruntime of the
// cfs_rq in reg, what vruntime_eligible() compares with.
static void cfs_rq_sums(int reg, int slot) {
    rd(slot * 8, 8, reg, CFS_RQ_AVG_VRUNTIME);
    rd((slot + 1) * 8, 8, reg, CFS_RQ_AVG_LOAD);
    rd((slot + 2) * 8, 8, reg, CFS_RQ_ZERO_VRUNTIME);
}

static void eevdf_reads(void) {
    rd(5 * 8, 8, BPF_REG_9, TASK_SE_DEADLINE);
    rd(6 * 8, 8, BPF_REG_9, TASK_SE_VRUNTIME);
    rd(7 * 8, 8, BPF_REG_9, TASK_SE_VLAG);
    rd(8 * 8, 8, BPF_REG_9, TASK_SE_SLICE);
    rd(9 * 8, 8, BPF_REG_9, TASK_SE_ON_RQ);
    rd(10 * 8, 8, BPF_REG_9, TASK_SE_CFS_RQ);
    ldslot(BPF_REG_8, 10);
    cfs_rq_sums(BPF_REG_8, 11);
    rd(14 * 8, 8, BPF_REG_8, CFS_RQ_CURR);
    call(BPF_FUNC_get_current_task);
    mov_reg(BPF_REG_7, BPF_REG_0);
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_7, 16 * 8, 0));
    rd(17 * 8, 8, BPF_REG_7, TASK_SE_DEADLINE);
    rd(18 * 8, 8, BPF_REG_7, TASK_SE_VRUNTIME);
    rd(19 * 8, 8, BPF_REG_7, TASK_SE_VLAG);
    rd(20 * 8, 8, BPF_REG_7, TASK_SE_SLICE);
    rd(21 * 8, 8, BPF_REG_7, 0x0);
    rd(22 * 8, 8, BPF_REG_7, TASK_SE_CFS_RQ);
    rd(23 * 8, 8, BPF_REG_7, 0x80);
    rd(24 * 8, 8, BPF_REG_9, 0x80);
    rd_abs(25 * 8, 8, JIFFIES);
    // 26 the curr of the task's runqueue (rq->curr of RQ[task_cpu]), 27-30
    // its deadline, vruntime, vprot and thread_info flags.
    ldslot(BPF_REG_8, 4);
    ld64(BPF_REG_3, RQ[0] + 0xaa0);
    e(INS(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_8, 0, 2, 0));
    ld64(BPF_REG_3, RQ[1] + 0xaa0);
    mov_reg(BPF_REG_1, BPF_REG_6);
    add_imm(BPF_REG_1, 26 * 8);
    mov_imm(BPF_REG_2, 8);
    call(BPF_FUNC_probe_read_kernel);
    ldslot(BPF_REG_8, 26);
    rd(27 * 8, 8, BPF_REG_8, TASK_SE_DEADLINE);
    rd(28 * 8, 8, BPF_REG_8, TASK_SE_VRUNTIME);
    rd(29 * 8, 8, BPF_REG_8, TASK_SE_VLAG);
    rd(30 * 8, 8, BPF_REG_8, 0x0);
}

// The start every program shares: claims the next map entry (an atomic
// counter in entry 0 numbers the records), leaves its address in r6 and fills
// slot 0 with `tag`, 1 with ktime, 2 with the CPU and 3 with the task in r9.
// The two lookups' null checks jump to the exit finish() emits.
static int null_jumps[2];

static void begin_record(int map, int tag) {
    e(INS(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 0));
    mov_reg(BPF_REG_2, BPF_REG_10);
    add_imm(BPF_REG_2, -4);
    e(INS(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map));
    e(INS(0, 0, 0, 0, 0));
    call(BPF_FUNC_map_lookup_elem);
    null_jumps[0] = n;
    e(INS(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, 0));
    mov_imm(BPF_REG_1, 1);
    e(INS(BPF_STX | BPF_ATOMIC | BPF_DW, BPF_REG_0, BPF_REG_1, 0, BPF_ADD | BPF_FETCH));
    e(INS(BPF_ALU64 | BPF_AND | BPF_K, BPF_REG_1, 0, 0, NREC - 1));
    add_imm(BPF_REG_1, 1);
    e(INS(BPF_STX | BPF_MEM | BPF_W, BPF_REG_10, BPF_REG_1, -8, 0));
    mov_reg(BPF_REG_2, BPF_REG_10);
    add_imm(BPF_REG_2, -8);
    e(INS(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map));
    e(INS(0, 0, 0, 0, 0));
    call(BPF_FUNC_map_lookup_elem);
    null_jumps[1] = n;
    e(INS(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 0, 0));
    mov_reg(BPF_REG_6, BPF_REG_0);
    e(INS(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_6, 0, 0, tag));
    call(BPF_FUNC_ktime_get_ns);
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_0, 8, 0));
    call(BPF_FUNC_get_smp_processor_id);
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_0, 16, 0));
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_9, 24, 0));
}

// The exit, the null checks pointed at it, and the program loaded.
static int finish(void) {
    int out = n;
    mov_imm(BPF_REG_0, 0);
    e(INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0));
    for (int i = 0; i < 2; i++) P[null_jumps[i]].off = out - null_jumps[i] - 1;
    return load_prog();
}

// Slots 5-30 of the default mode (README.md).
static void affine_reads(void) {
    task_reads(BPF_REG_9, 5); // 5..12
    ldslot(BPF_REG_8, 12);
    rd(13 * 8, 8, BPF_REG_8, 0xa0);
    rd(14 * 8, 8, BPF_REG_8, 0x120);
    rd(15 * 8, 8, BPF_REG_8, 0x128);
    call(BPF_FUNC_get_current_task);
    mov_reg(BPF_REG_7, BPF_REG_0);
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_7, 16 * 8, 0));
    task_reads(BPF_REG_7, 17); // 17..24
    rd_abs(25 * 8, 8, JIFFIES);
    rd_abs(26 * 8, 8, RQ[0] + 0x120);
    rd_abs(27 * 8, 8, RQ[1] + 0x120);
    zero(28);
    zero(29);
    zero(30);
    rd_abs(28 * 8, 4, RQ[0] + 0x4);
    rd_abs(28 * 8 + 4, 4, RQ[1] + 0x4);
    rd_abs(29 * 8, 4, RQ[0] + 0x98);
    rd_abs(29 * 8 + 4, 4, RQ[1] + 0x98);
    rd(30 * 8, 4, BPF_REG_9, 0x48);
    rd(30 * 8 + 4, 4, BPF_REG_7, 0x48);
}

// The program for sched_waking (tag 1), sched_wakeup (2) and
// sched_process_fork (3): the task is args[0].
static int build(int map, int tag) {
    n = 0;
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_9, BPF_REG_1, 0, 0));
    begin_record(map, tag);
    zero(4);
    rd(4 * 8, 4, BPF_REG_9, 0x14);
    if (eevdf_mode)
        eevdf_reads();
    else
        affine_reads();
    return finish();
}

// Loads the program in P.
static int load_prog(void) {
    static char log[1 << 20];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)P;
    a.insn_cnt = n;
    a.license = (uint64_t)(uintptr_t) "GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    int fd = bpf(BPF_PROG_LOAD, &a);
    if (fd < 0) {
        fprintf(stderr, "wakeprobe: program refused: %s\n%s\n", strerror(errno), log);
        exit(1);
    }
    return fd;
}

// --eevdf also records every sched_switch (tag 4): 2 the CPU, 3 prev, 5 the
// preempt argument, 6 prev_state, 16 next, 21 prev's thread_info flags; and
// what the pick left: 7 next's se.vruntime, 8 its se.cfs_rq, 11-13 that
// cfs_rq's avg_vruntime, avg_load and zero_vruntime (next is its curr by
// now, out of the sums), 9 prev's se.vlag (set by a sleeping prev's dequeue;
// vprot if it stays queued), 10 the 8 bytes from prev's se.on_rq, 14 prev's
// se.vruntime.
static int build_switch(int map) {
    n = 0;
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_1, 0, 0));  // preempt
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_9, BPF_REG_1, 8, 0));  // prev
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_8, BPF_REG_1, 16, 0)); // next
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_7, -16, 0));
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_1, 24, 0)); // prev_state
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_7, -24, 0));
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_8, -32, 0));
    begin_record(map, 4);
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_10, -16, 0));
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_7, 5 * 8, 0));
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_10, -24, 0));
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_7, 6 * 8, 0));
    e(INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_10, -32, 0));
    e(INS(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_7, 16 * 8, 0));
    rd(21 * 8, 8, BPF_REG_9, 0x0);
    rd(7 * 8, 8, BPF_REG_8, TASK_SE_VRUNTIME);
    rd(8 * 8, 8, BPF_REG_8, TASK_SE_CFS_RQ);
    rd(9 * 8, 8, BPF_REG_9, TASK_SE_VLAG);
    rd(10 * 8, 8, BPF_REG_9, TASK_SE_ON_RQ);
    rd(14 * 8, 8, BPF_REG_9, TASK_SE_VRUNTIME);
    ldslot(BPF_REG_7, 8);
    cfs_rq_sums(BPF_REG_7, 11);
    return finish();
}

static int attach(int prog, const char *name) {
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.name = (uint64_t)(uintptr_t)name;
    a.raw_tracepoint.prog_fd = prog;
    int fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
    if (fd < 0) {
        fprintf(stderr, "wakeprobe: attach %s: %s\n", name, strerror(errno));
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    int forks_only = argc > 1 && !strcmp(argv[1], "--forks");
    eevdf_mode = argc > 1 && !strcmp(argv[1], "--eevdf");
    argv += forks_only + eevdf_mode;
    argc -= forks_only + eevdf_mode;
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: wakeprobe [--forks|--eevdf] OUT -- COMMAND...\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "we"); // close-on-exec: the command does not inherit it
    if (!f) {
        perror("wakeprobe: OUT");
        return 1;
    }
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = NSLOT * 8;
    a.max_entries = NREC + 1;
    int map = bpf(BPF_MAP_CREATE, &a);
    if (map < 0) {
        perror("wakeprobe: map");
        return 1;
    }
    int a1 = forks_only ? -1 : attach(build(map, 1), "sched_waking");
    int a2 = forks_only ? -1 : attach(build(map, 2), "sched_wakeup");
    int a3 = attach(build(map, 3), "sched_process_fork");
    int a4 = eevdf_mode ? attach(build_switch(map), "sched_switch") : -1;
    pid_t c = fork();
    if (c == 0) {
        setsid();
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execvp(argv[3], argv + 3);
        _exit(127);
    }
    int st;
    waitpid(c, &st, 0);
    if (a1 >= 0) close(a1);
    if (a2 >= 0) close(a2);
    close(a3);
    if (a4 >= 0) close(a4);
    uint64_t rec[NSLOT];
    uint32_t key = 0;
    memset(&a, 0, sizeof a);
    a.map_fd = map;
    a.key = (uint64_t)(uintptr_t)&key;
    a.value = (uint64_t)(uintptr_t)rec;
    bpf(BPF_MAP_LOOKUP_ELEM, &a);
    uint64_t count = rec[0];
    fprintf(stderr, "wakeprobe: %llu records%s\n", (unsigned long long)count, count > NREC ? " (wrapped)" : "");
    uint64_t lo = count > NREC ? count - NREC : 0;
    for (uint64_t i = lo; i < count; i++) {
        key = (uint32_t)(i & (NREC - 1)) + 1;
        bpf(BPF_MAP_LOOKUP_ELEM, &a);
        for (int s = 0; s < NSLOT; s++) fprintf(f, s ? " %llx" : "%llx", (unsigned long long)rec[s]);
        fputc('\n', f);
    }
    fclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
