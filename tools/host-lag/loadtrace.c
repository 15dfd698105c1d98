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
// the task's own, its task group's under autogroup). The command runs as
// lagtrace's does (bpfrec.h).
// The programs and maps are released when it exits; the command runs in a
// session of its own, killed whole after 60 s or when this is interrupted; no
// tracefs setting is touched.
#include "bpfrec.h"

#define NREC (1 << 18)
#define RECSZ 112

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
    int j1, j2;
    record_slot(ctr, recs, NREC, &j1, &j2);
    emit(CALL(BPF_FUNC_ktime_get_ns)); emit(STX(9, 0, 0));
    emit(CALL(BPF_FUNC_get_smp_processor_id)); emit(STX(9, 0, 8));
    kcopy(16, 7, pid, 4); kcopy(20, 8, pid, 4);
    loads(24, 7, o);
    loads(64, 8, o);
    int exits[] = {j1, j2};
    return load_prog("loadtrace", exits, 2);
}

static void print_record(FILE *out, const unsigned char *r) {
    const uint64_t *q = (const uint64_t *)r;
    const uint32_t *u = (const uint32_t *)r;
    fprintf(out, "%llu %llu %u %u  %u %lld %lld %lld %lld  %u %lld %lld %lld %lld\n",
            (unsigned long long)q[0], (unsigned long long)q[1], u[4], u[5],
            u[6], (long long)q[4], (long long)q[5], (long long)q[6], (long long)q[7],
            u[16], (long long)q[9], (long long)q[10], (long long)q[11], (long long)q[12]);
}

int main(int argc, char **argv) {
    long o[10];
    FILE *out = tool_args("loadtrace", argc, argv, o);
    if (!out) return 2;
    int ctr, recs;
    if (make_maps(NREC, RECSZ, &ctr, &recs) < 0) { perror("loadtrace: maps"); return 1; }
    int progs[] = {build(ctr, recs, o)};
    for (int i = 0; i < 1; i++) if (progs[i] < 0) return 1;
    const char *tps[] = {"sched_waking"};
    return trace_and_dump("loadtrace", argv + 4, tps, progs, 1, ctr, recs, NREC, out, print_record);
}
