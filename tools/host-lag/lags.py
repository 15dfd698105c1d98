#!/usr/bin/env python3
"""EEVDF lags of perf bench sched messaging's tasks from a lagtrace recording.

    lags.py RECORDING [--comm sched-messaging]

For each switch-in of a task of COMM: its lag (V - vruntime, us; V of its
cfs_rq with it running) split by how it last left its CPU (it slept, or it was
preempted); for each preemption: the preempted task's lag and the protection
it had left (vprot - vruntime); for each sleep: whether it was delayed
(DELAY_DEQUEUE: the task still ineligible, its vlag/vprot union still holding
vprot) and the lag saved at the dequeue (vlag). Weights are taken as nice 0
(1024): the messaging tasks run at nice 0 in one autogroup. Sleeps of tasks
whose vruntime is below 20 ms are skipped (vlag and vprot cannot be told
apart by size there). Standard library only; reads the file and prints."""
import argparse

def quantiles(v):
    v = sorted(v)
    return [round(v[min(len(v) - 1, int(len(v) * f))], 1) for f in (0.1, 0.25, 0.5, 0.75, 0.9)] if v else []

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("recording")
    ap.add_argument("--comm", default="sched-messaging")
    a = ap.parse_args()
    last = {}    # a workload task's pid -> how it last left its CPU
    mine = set() # the pids switched in under COMM
    picked = {"slept": [], "preempted": []}
    pre_lag, pre_prot, vlags = [], [], []
    sleeps = delayed = 0
    for line in open(a.recording):
        x = line.split()
        if x[0] != "S" or len(x) < 17:
            continue
        prev_state, pid_a, pid_b = int(x[3]), x[5], x[6]
        va, _, ua, vb, _, _ = map(int, x[7:13])
        sum_w, sum_weight, zero = int(x[13]), int(x[14]), int(x[15])
        ours = x[16].startswith(a.comm[:15])
        if ours:
            mine.add(pid_b)
            # V of B's cfs_rq with B, the running entity, added back (nice 0).
            v = zero + (sum_w + (vb - zero) * 1024) / (sum_weight + 1024)
            if pid_b in last:
                picked[last[pid_b]].append((v - vb) / 1000)
            if prev_state == 0 and pid_a in mine:
                pre_lag.append((v - va) / 1000)
                pre_prot.append((ua - va) / 1000)
        if pid_a in mine:
            if prev_state == 0:
                last[pid_a] = "preempted"
            else:
                last[pid_a] = "slept"
                if abs(va) >= 2e7:
                    sleeps += 1
                    if abs(ua) <= 6e6:
                        vlags.append(ua / 1000)
                    else:
                        delayed += 1
    print("switch-ins of %s tasks: after a sleep %d, after a preemption %d" % (a.comm, len(picked["slept"]), len(picked["preempted"])))
    print("  lag at switch-in after a sleep (us) p10/25/50/75/90  %s" % quantiles(picked["slept"]))
    print("  lag at switch-in after a preemption                  %s" % quantiles(picked["preempted"]))
    print("preemptions %d: the preempted task's lag               %s" % (len(pre_lag), quantiles(pre_lag)))
    print("  its protection left (vprot - vruntime)               %s" % quantiles(pre_prot))
    print("sleeps %d: delayed %d (%.1f%%), vlag saved at the others' dequeue %s" % (
        sleeps, delayed, 100.0 * delayed / max(sleeps, 1), quantiles(vlags)))

main()
