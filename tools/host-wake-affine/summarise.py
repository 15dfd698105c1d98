#!/usr/bin/env python3
"""Summarise a wakeprobe recording (README.md has the slot layout).

    python3 tools/host-wake-affine/summarise.py OUT            # default or --forks
    python3 tools/host-wake-affine/summarise.py --eevdf OUT    # --eevdf
    python3 tools/host-wake-affine/summarise.py --eevdf --roles OUT

Prints the parents' wakee_flips at every fork (run length encoded, in order),
then for the wakeups whose waker and wakee are both in a task group (the
workload's autogroup): how many stayed on the waker's CPU, how many
cross-CPU ones wake_wide() called wide (from the flips read at sched_waking,
before record_wakee() counts this wakeup) and how many of those moved, and
the wakees' flips by kind of waker (a waker with more than 100 flips is a
hackbench sender).
"""
import collections
import sys

TAG_WAKING, TAG_WAKEUP, TAG_FORK, TAG_SWITCH = 1, 2, 3, 4
TIF_NEED_RESCHED = 4  # the generic TIF bits x86 uses from 6.17
NICE_0_WEIGHT = 1024  # scale_load_down(se->load.weight) of a nice-0 task
# The hosts' root cfs_rqs (rq + 0x80, wakeprobe.c's RQ): tasks outside them
# are the workload's (its autogroup).
ROOT_CFS_RQS = {0xFFFF888627C2BA40 + 0x80, 0xFFFF888627D2BA40 + 0x80}
U64 = 1 << 64


def s64(x):
    return x - U64 if x >= 1 << 63 else x
LLC_SIZE = 2  # sd_llc_size of both vCPUs, read from the hosts' per-CPU data


def quantiles(values, qs=(0.02, 0.05, 0.25, 0.5, 0.75, 0.95)):
    v = sorted(values)
    return [v[int(len(v) * q)] for q in qs] if v else []


def main(path):
    forks = []
    pending = {}
    count = collections.Counter()
    flips_by_waker = collections.defaultdict(list)
    for line in open(path):
        r = [int(x, 16) for x in line.split()]
        tag, cpu, p, task_cpu = r[0], r[2], r[3], r[4]
        if tag == TAG_FORK:
            parent_flips = r[30] & 0xFFFFFFFF
            if forks and forks[-1][0] == (p, parent_flips):
                forks[-1][1] += 1
            else:
                forks.append([(p, parent_flips), 1])
            continue
        if tag == TAG_WAKING:
            pending[p] = r
            continue
        w = pending.pop(p, None)
        if w is None:
            continue
        wakee_parent, waker, waker_parent = w[10], w[16], w[22]
        if not (wakee_parent and waker and waker_parent):
            count["waker or wakee outside a task group"] += 1
            continue
        wakee_flips, waker_flips = w[30] & 0xFFFFFFFF, w[30] >> 32
        flips_by_waker["sender" if waker_flips > 100 else "other"].append(wakee_flips)
        if w[2] == w[4]:
            count["on the waker's CPU already"] += 1
            continue
        master, slave = max(wakee_flips, waker_flips), min(wakee_flips, waker_flips)
        kind = "wide" if not (slave < LLC_SIZE or master < slave * LLC_SIZE) else "affine"
        moved = task_cpu != w[4]
        count[f"cross-CPU, {kind}"] += 1
        count[f"cross-CPU, {kind}, moved"] += moved
    print("forks (parent, its wakee_flips, how many in a row):")
    for (parent, flips), n in forks:
        print(f"  {parent:x} {flips} x{n}")
    print("wakeups:")
    for k, v in sorted(count.items()):
        print(f"  {k}: {v}")
    for k, v in sorted(flips_by_waker.items()):
        print(f"wakee_flips of wakees of {k} wakers ({len(v)}): quantiles 2,5,25,50,75,95% {quantiles(v)}")


def eevdf(path, roles=False):
    """Each wakeup of a workload task onto a CPU running another workload task:
    the running task's eligibility (vruntime_eligible() from the cfs_rq's sums)
    and protection (vprot > vruntime), the wakee's eligibility and deadline
    against it, and whether TIF_NEED_RESCHED was set by it (clear at
    sched_waking, set at sched_wakeup); then how each such request ended: the
    next sched_switch on that CPU, its prev and prev_state. With `roles`, each
    category is split by the running task's and the wakee's role in hackbench:
    a sender (S) is a task that woke others more than 300 times, a receiver (R)
    any other workload task."""
    recs = [[int(x, 16) for x in line.split()] for line in open(path)]
    workload = {r[3] for r in recs if r[0] in (TAG_WAKING, TAG_WAKEUP) and r[10] and r[10] not in ROOT_CFS_RQS}
    woke = collections.Counter(r[16] for r in recs if r[0] == TAG_WAKING)

    def role(task):
        return "S" if woke[task] > 300 else "R"
    waking, pending = {}, {}
    checks, ends = collections.Counter(), collections.Counter()
    for r in recs:
        if r[0] == TAG_SWITCH:
            if r[2] in pending:
                curr, local = pending.pop(r[2])
                state = {0: "R", 1: "S"}.get(r[6], str(r[6]))
                ends[f"{'local ' if local else 'remote'} {'same task' if r[3] == curr else 'other task'} {state}"] += 1
            continue
        if r[0] == TAG_WAKING:
            waking[r[3]] = r
            continue
        if r[0] != TAG_WAKEUP or r[3] not in workload:
            continue
        w, curr = waking.pop(r[3], None), r[26]
        if curr not in workload or r[14] != curr + 0x80:
            continue  # not the same cfs_rq's running entity
        if w and w[26] == curr and (w[30] >> TIF_NEED_RESCHED) & 1:
            continue  # already asked
        zero, cv = r[13], r[28]
        avg = s64(r[11]) + s64((cv - zero) % U64) * NICE_0_WEIGHT
        load = r[12] + NICE_0_WEIGHT
        curr_elig = s64((cv - zero) % U64) * load <= avg
        wakee_elig = s64((r[6] - zero) % U64) * load <= avg
        protected = s64((r[29] - cv) % U64) > 0
        earlier = s64((r[5] - r[27]) % U64) < 0
        local = r[4] == r[2] and r[16] == curr
        pair = f" {role(curr)}<-{role(r[3])}" if roles else ""
        key = (
            f"{'local ' if local else 'remote'}{pair} running {'eligible' if curr_elig else 'ineligible'}"
            f"{' protected' if protected else ''}, wakee {'eligible' if wakee_elig else 'ineligible'}"
            f" {'earlier' if earlier else 'later'} deadline"
        )
        asked = (r[30] >> TIF_NEED_RESCHED) & 1
        checks[(key, asked)] += 1
        if asked and r[4] not in pending:
            pending[r[4]] = (curr, local)
    print("wakeups onto a running workload task: n, preemption asked")
    for key in sorted({k for k, _ in checks}):
        n0, n1 = checks[(key, 0)], checks[(key, 1)]
        print(f"  {key:70s} {n0 + n1:7d} {n1:7d} ({100 * n1 / (n0 + n1):.0f}%)")
    print("how the requests ended (next switch on that CPU):")
    for k, v in sorted(ends.items()):
        print(f"  {k}: {v}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--eevdf":
        eevdf(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1:3] == ["--eevdf", "--roles"]:
        eevdf(sys.argv[3], roles=True)
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit("usage: summarise.py [--eevdf [--roles]] OUT")
