#!/usr/bin/env python3
"""EEVDF lags of perf bench sched messaging's tasks by tenth of the run, from
two lagtrace recordings (real, then `schedlab run --lag-trace`).

    by_tenth.py REAL SIM

For each tenth of each run (from the first to the last switch to a workload
task): switch-ins, wakeups, preemptions and sleeps of the workload's tasks,
the share of sleeps delayed (DELAY_DEQUEUE: the vlag/vprot union still holds
vprot), the vlag saved at the other sleeps (p10/50/90, us), the lag at
switch-in and the entities queued beside it. Weights as nice 0; the real
side's comm is sched-messaging, the model's hackbench. Standard library only."""
import sys


def q(v, fs=(0.1, 0.5, 0.9)):
    v = sorted(v)
    return [round(v[min(len(v) - 1, int(len(v) * f))], 1) for f in fs] if v else []


def tenths(path, comm):
    recs = [x for x in (line.split() for line in open(path)) if len(x) >= 17]
    mine = set(x[6] for x in recs if x[0] == "S" and x[16].startswith(comm))
    ts = [int(x[1]) for x in recs if x[0] == "S" and x[16].startswith(comm)]
    t0, t1 = ts[0], ts[-1]
    nb = 10
    rows = [dict(sw=0, wk=0, pre=0, sl=0, dl=0, vlag=[], pick=[], nq=[]) for _ in range(nb)]
    for x in recs:
        b = min(nb - 1, max(0, int((int(x[1]) - t0) * nb / (t1 - t0 + 1))))
        r = rows[b]
        if x[0] == "W":
            r["wk"] += x[6] in mine
            continue
        if x[6] in mine:
            vb = int(x[10])
            s_w, s_wt, zero = int(x[13]), int(x[14]), int(x[15])
            v = zero + (s_w + (vb - zero) * 1024) / (s_wt + 1024)
            r["sw"] += 1
            r["pick"].append((v - vb) / 1000)
            r["nq"].append(s_wt / 1024)
        if x[5] in mine:
            state = int(x[3])
            if state == 0:
                r["pre"] += 1
            elif state == 1 and abs(int(x[7])) >= 2e7:
                r["sl"] += 1
                union = int(x[9])
                if abs(union) <= 6e6:
                    r["vlag"].append(union / 1000)
                else:
                    r["dl"] += 1
    print("%s: %.0f ms" % (path, (t1 - t0) / 1e6))
    for i, r in enumerate(rows):
        print("  %d0%%: switch-ins %5d wakeups %5d preempted %5d sleeps %5d delayed %3.0f%% vlag %s lag at switch-in %s queued p50 %s"
              % (i, r["sw"], r["wk"], r["pre"], r["sl"], 100 * r["dl"] / max(1, r["sl"]), q(r["vlag"]), q(r["pick"]), q(r["nq"], (0.5,))))


if __name__ == "__main__":
    tenths(sys.argv[1], "sched-messag")
    tenths(sys.argv[2], "hackbench")
