#!/usr/bin/env python3
"""Summarise a wakeprobe recording (README.md has the slot layout).

    python3 tools/host-wake-affine/summarise.py OUT

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

TAG_WAKING, TAG_WAKEUP, TAG_FORK = 1, 2, 3
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


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarise.py OUT")
    main(sys.argv[1])
