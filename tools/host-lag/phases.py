#!/usr/bin/env python3
"""Hackbench messaging runs taken apart by vCPU, by phase and by role, from
lagtrace recordings (real: `lagtrace ... -- schedlab real --workload
'hackbench ...' --runs 1`; model: `schedlab run ... --lag-trace FILE`).

    phases.py align  FILE... [--width MS] [--windows N]
    phases.py roles  FILE...
    phases.py place  FILE...

Each run is aligned at its start barrier: the first millisecond in which at
least --barrier wakeups (default 200) of hackbench tasks happen (use about
half the worker count for small runs). The workers are the last --workers
(default: 40 x groups, from the count of hackbench pids less the main task)
hackbench pids in fork order; each group forks its 20 receivers, then its 20
senders (schedlab's built-in hackbench, both sides).

  align  per window and vCPU: workers' switch-ins, how many followed a
         preemption, and the median of the entities queued beside each pick
  roles  per role: runs ended by a sleep or a preemption, their lengths, the
         lag at the pick that began them and the entities queued beside it;
         then each role's sleeps, and a woken task's wait until it runs
  place  per role: wakeups from the wakee's own CPU or another, and whether
         the wakee stayed on its previous CPU or was pulled to the waker's (a
         wakeup record fires on the waker's CPU when the waker enqueues; on an
         idle target's own CPU when it goes through the wake list)

Weights as nice 0. Standard library only. docs/results/validate-host.txt,
steps 43 and 44, show what these found."""
import argparse
import collections


def records(path):
    return [x for x in (line.split() for line in open(path)) if len(x) >= 17]


def barrier_ns(recs, need):
    per_ms = collections.Counter(int(x[1]) // 1_000_000 for x in recs if x[0] == "W" and x[16].startswith("hackbench"))
    for ms in sorted(per_ms):
        if per_ms[ms] + per_ms.get(ms + 1, 0) >= need:
            return ms * 1_000_000
    raise SystemExit("no start barrier (no millisecond with %d wakeups of hackbench tasks)" % need)


def roles_of(recs, workers):
    pids = sorted(set(int(x[6]) for x in recs if x[0] == "S" and x[16].startswith("hackbench")))
    n = workers or (len(pids) - 1) // 40 * 40
    return {str(p): ("R" if i % 40 < 20 else "S") for i, p in enumerate(pids[-n:])}


def pct(values, fs=(0.1, 0.25, 0.5, 0.75, 0.9)):
    v = sorted(values)
    return [round(v[min(len(v) - 1, int(len(v) * f))], 1) for f in fs] if v else []


def lag_and_queue(x):
    """The switched-in task's lag (us) and the entities queued beside it."""
    vb = int(x[10])
    s_w, s_wt, zero = int(x[13]), int(x[14]), int(x[15])
    v = zero + (s_w + (vb - zero) * 1024) / (s_wt + 1024)
    return (v - vb) / 1000, s_wt // 1024


def align(path, recs, tb, role, width_ms, windows):
    sw, pre, queued = collections.Counter(), collections.Counter(), collections.defaultdict(list)
    for x in recs:
        if x[0] != "S" or x[6] not in role:
            continue
        w = (int(x[1]) - tb) // int(width_ms * 1e6)
        if 0 <= w < windows:
            sw[(w, x[2])] += 1
            queued[(w, x[2])].append(int(x[14]) // 1024)
            pre[(w, x[2])] += x[3] == "0" and x[5] != "0"
    print(path)
    cpus = sorted(set(c for _, c in sw))
    for w in range(windows):
        cells = []
        for c in cpus:
            q = pct(queued[(w, c)], (0.5,))
            cells.append("cpu%s sw %5d pre %4d queue %4s" % (c, sw[(w, c)], pre[(w, c)], q[0] if q else "-"))
        print("%6.0f ms  %s" % (w * width_ms, "   ".join(cells)))


def roles(path, recs, tb, role):
    picked, runs = {}, collections.defaultdict(list)
    slept, woke = {}, {}
    sleep_us, wait_us = collections.defaultdict(list), collections.defaultdict(list)
    for x in recs:
        t = int(x[1])
        if t < tb:
            continue
        if x[0] == "W":
            p = x[6]
            if p in slept:
                sleep_us[role[p]].append((t - slept.pop(p)) / 1000)
                woke[p] = t
            continue
        a, b = x[5], x[6]
        if a in role:
            if a in picked:
                t0, lag, q = picked.pop(a)
                runs[role[a] + (" preempted" if x[3] == "0" else " slept")].append(((t - t0) / 1000, lag, q))
            if x[3] != "0":
                slept[a] = t
        if b in role:
            picked[b] = (t,) + lag_and_queue(x)
            if b in woke:
                wait_us[role[b]].append((t - woke.pop(b)) / 1000)
    print(path)
    for k in sorted(runs):
        r = runs[k]
        print("  %-11s %6d runs  length us %s  lag at the pick %s  queued beside %s"
              % (k, len(r), pct([x[0] for x in r]), pct([x[1] for x in r]), pct([x[2] for x in r])))
    for k in sorted(sleep_us):
        print("  %s sleeps %6d: asleep us %s (%.0f ms in all)  woken to running us %s"
              % (k, len(sleep_us[k]), pct(sleep_us[k]), sum(sleep_us[k]) / 1000, pct(wait_us[k])))


def place(path, recs, tb, role):
    last_cpu, woke_on = {}, {}
    kinds = collections.Counter()
    for x in recs:
        before = int(x[1]) < tb
        if x[0] == "W":
            if x[6] in role and not before:
                woke_on[x[6]] = x[2]
            continue
        p = x[6]
        if p not in role:
            continue
        if p in woke_on and p in last_cpu:
            waker_cpu, prev, now = woke_on.pop(p), last_cpu[p], x[2]
            if waker_cpu == prev:
                kind = "woken from its own CPU, stayed" if now == prev else "woken from its own CPU, moved away"
            else:
                kind = "woken from the other CPU, stayed" if now == prev else "woken from the other CPU, pulled to the waker"
            kinds[(role[p], kind)] += 1
        last_cpu[p] = x[2]
    print(path)
    for (r, kind), n in sorted(kinds.items()):
        print("  %s %-46s %7d" % (r, kind, n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=["align", "roles", "place"])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--width", type=float, default=20.0, help="align: window, ms")
    ap.add_argument("--windows", type=int, default=25, help="align: windows shown")
    ap.add_argument("--barrier", type=int, default=200, help="wakeups in a millisecond that mark the start")
    ap.add_argument("--workers", type=int, default=0, help="worker count (default: 40 x groups)")
    a = ap.parse_args()
    for path in a.files:
        recs = records(path)
        tb = barrier_ns(recs, a.barrier)
        role = roles_of(recs, a.workers)
        if a.what == "align":
            align(path, recs, tb, role, a.width, a.windows)
        elif a.what == "roles":
            roles(path, recs, tb, role)
        else:
            place(path, recs, tb, role)


if __name__ == "__main__":
    main()
