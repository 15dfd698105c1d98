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
// tracefs setting is touched (bpfrec.h).
#include "bpfrec.h"

#define NREC (1 << 19)
#define RECSZ 112

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
    int j1, j2;
    record_slot(ctr, recs, NREC, &j1, &j2);
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
    int exits[] = {j1, j2, j3};
    return load_prog("lagtrace", exits, 3);
}

static void print_record(FILE *out, const unsigned char *r) {
    const uint64_t *q = (const uint64_t *)r;
    const uint32_t *pids = (const uint32_t *)(r + 16);
    char commb[17]; memcpy(commb, r + 96, 16); commb[16] = 0;
    for (char *c = commb; *c; c++) if (*c == ' ') *c = '_';
    fprintf(out, "%c %llu %llu %llu %llu %u %u %lld %lld %lld %lld %lld %lld %lld %llu %lld %s\n",
            (q[1] >> 32) & 1 ? 'W' : 'S', (unsigned long long)q[0], (unsigned long long)(q[1] >> 48),
            (unsigned long long)(q[1] & 0xff), (unsigned long long)((q[1] >> 40) & 1), pids[0], pids[1],
            (long long)q[3], (long long)q[4], (long long)q[5], (long long)q[6], (long long)q[7], (long long)q[8],
            (long long)q[9], (unsigned long long)q[10], (long long)q[11], commb);
}

int main(int argc, char **argv) {
    long o[10];
    FILE *out = tool_args("lagtrace", argc, argv, o);
    if (!out) return 2;
    int ctr, recs;
    if (make_maps(NREC, RECSZ, &ctr, &recs) < 0) { perror("lagtrace: maps"); return 1; }
    int progs[] = {build(0, ctr, recs, o), build(1, ctr, recs, o)};
    for (int i = 0; i < 2; i++) if (progs[i] < 0) return 1;
    const char *tps[] = {"sched_switch", "sched_wakeup"};
    return trace_and_dump("lagtrace", argv + 4, tps, progs, 2, ctr, recs, NREC, out, print_record);
}
