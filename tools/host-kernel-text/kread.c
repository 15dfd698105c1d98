// kread: copy LEN bytes of this machine's kernel memory at ADDR (hex) to
// standard output, through a BPF program on the sched_switch tracepoint that
// calls bpf_probe_read_kernel() (allowed under the hosts' integrity lockdown,
// which blocks /proc/kcore, debugfs and kprobes). Used to read the vendor
// kernel's select_task_rq_fair() and vcpu_pack_room() (README.md).
//
//   cc -O2 -o /tmp/kread tools/host-kernel-text/kread.c
//   /tmp/kread ffffffff813aaee0 224 > room.bin     (addresses: /proc/kallsyms)
//
// Root only. It creates a BPF map and program and one perf event on CPU 0,
// all released when it exits; no tracefs setting is changed and no process is
// left behind. The read is done in 4 KiB pages: one page is refreshed by the
// next context switch on CPU 0 (waited for with a short sleep).
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096

static long bpf(int cmd, union bpf_attr *a) { return syscall(SYS_bpf, cmd, a, sizeof(*a)); }

#define INS(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

// The id of tracepoint sched/sched_switch, from tracefs.
static int switch_tracepoint_id(void) {
    const char *paths[] = {"/sys/kernel/tracing/events/sched/sched_switch/id",
                           "/sys/kernel/debug/tracing/events/sched/sched_switch/id"};
    for (unsigned i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        FILE *f = fopen(paths[i], "r");
        int id;
        if (f && fscanf(f, "%d", &id) == 1) {
            fclose(f);
            return id;
        }
        if (f) fclose(f);
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: kread ADDR LEN   (ADDR in hex, LEN in bytes)\n");
        return 2;
    }
    char *end;
    uint64_t addr = strtoull(argv[1], &end, 16);
    long len = strtol(argv[2], NULL, 10);
    if (*end || len <= 0 || len > (64L << 20)) {
        fprintf(stderr, "kread: ADDR must be hex and LEN 1 to 67108864 bytes\n");
        return 2;
    }
    int tp = switch_tracepoint_id();
    if (tp < 0) {
        fprintf(stderr, "kread: tracefs is not mounted (no sched_switch id)\n");
        return 1;
    }
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    // Entry 0: the page read; entry 1: its address (first 8 bytes).
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = PAGE;
    a.max_entries = 2;
    int map = bpf(BPF_MAP_CREATE, &a);
    if (map < 0) {
        perror("kread: BPF map");
        return 1;
    }
    // r7 = *lookup(1); r0 = lookup(0); probe_read_kernel(r0, PAGE, r7).
    struct bpf_insn prog[] = {
        INS(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -4, 1),
        INS(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
        INS(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -4),
        INS(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map),
        INS(0, 0, 0, 0, 0),
        INS(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
        INS(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 13, 0),
        INS(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_7, BPF_REG_0, 0, 0),
        INS(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, -8, 0),
        INS(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_2, BPF_REG_10, 0, 0),
        INS(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_2, 0, 0, -8),
        INS(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, map),
        INS(0, 0, 0, 0, 0),
        INS(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_map_lookup_elem),
        INS(BPF_JMP | BPF_JEQ | BPF_K, BPF_REG_0, 0, 4, 0),
        INS(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_0, 0, 0),
        INS(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, PAGE),
        INS(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_3, BPF_REG_7, 0, 0),
        INS(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_probe_read_kernel),
        INS(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0),
        INS(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    static char log[1 << 16];
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = (uint64_t)(uintptr_t) "GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    int pfd = bpf(BPF_PROG_LOAD, &a);
    if (pfd < 0) {
        fprintf(stderr, "kread: BPF program refused: %s\n%s\n", strerror(errno), log);
        return 1;
    }
    struct perf_event_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.type = PERF_TYPE_TRACEPOINT;
    pa.size = sizeof pa;
    pa.config = tp;
    pa.sample_period = 1;
    int ev = syscall(SYS_perf_event_open, &pa, -1, 0, -1, 0);
    if (ev < 0 || ioctl(ev, PERF_EVENT_IOC_SET_BPF, pfd) < 0 || ioctl(ev, PERF_EVENT_IOC_ENABLE, 0) < 0) {
        perror("kread: attaching to sched_switch");
        return 1;
    }
    static unsigned char page[PAGE], slot[PAGE];
    for (long done = 0; done < len; done += PAGE) {
        uint64_t at = addr + done;
        uint32_t key = 1;
        memset(slot, 0, sizeof slot);
        memcpy(slot, &at, sizeof at);
        memset(&a, 0, sizeof a);
        a.map_fd = map;
        a.key = (uint64_t)(uintptr_t)&key;
        a.value = (uint64_t)(uintptr_t)slot;
        if (bpf(BPF_MAP_UPDATE_ELEM, &a) < 0) {
            perror("kread: map update");
            return 1;
        }
        // Long enough for CPU 0 to switch at least once (HZ=250: a tick is 4 ms).
        usleep(10000);
        key = 0;
        a.value = (uint64_t)(uintptr_t)page;
        if (bpf(BPF_MAP_LOOKUP_ELEM, &a) < 0) {
            perror("kread: map lookup");
            return 1;
        }
        fwrite(page, 1, (size_t)(len - done < PAGE ? len - done : PAGE), stdout);
    }
    ioctl(ev, PERF_EVENT_IOC_DISABLE, 0);
    return 0;
}
