#!/usr/bin/env python3
"""Where the wakeups of a perf bench sched messaging run put its tasks, by role.

Reads an ftrace text recording (a real one from `schedlab validate --trace` or
`schedlab record`, or the simulated one written beside it) and prints, for the
wakeups by a waker on another CPU than the wakee's last, how many put the wakee
on the waker's CPU, by the wakee's and the waker's role. The roles come from the
fork order: perf bench sched messaging (and the simulator's hackbench) creates,
group by group, its receivers and then its senders, so the n-th child of the
process that forked the most is a receiver when n mod (2 x fds) < fds.

    roles.py TRACE [--fds 20]
"""
import argparse
import collections
import re
import sys

LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+(\S+)\s+([\d.]+):\s+(\w+):\s+(.*)$")
FORK = re.compile(r"pid=(\d+) child_comm=\S+ child_pid=(\d+)")
TASK = re.compile(r"pid=(\d+) .*target_cpu=(\d+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--fds", type=int, default=20, help="senders (and receivers) per group (perf's -f, default 20)")
    args = ap.parse_args()
    if args.fds < 1:
        ap.error(f"--fds {args.fds}: expected a whole number of at least 1")
    forks = []
    waking = {}
    counts = collections.Counter()
    try:
        with open(args.trace, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        print(f"roles.py: trace {args.trace!r}: {e.strerror}; expected a readable ftrace text file", file=sys.stderr)
        sys.exit(2)
    for line in lines:
        m = LINE.match(line)
        if m and m.group(6) == "sched_process_fork":
            fm = FORK.search(m.group(7))
            if fm:
                forks.append((int(fm.group(1)), int(fm.group(2))))
    if not forks:
        print(f"roles.py: trace {args.trace!r}: no sched_process_fork lines; expected a recording with the workload's forks", file=sys.stderr)
        sys.exit(2)
    parent = collections.Counter(p for p, _ in forks).most_common(1)[0][0]
    # Only the parent's own children are ranked: others do not shift the order.
    rank = {child: i for i, child in enumerate(c for p, c in forks if p == parent)}

    def role(pid):
        if pid not in rank:
            return "other"
        return "receiver" if rank[pid] % (2 * args.fds) < args.fds else "sender"

    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        cpu, event, rest = int(m.group(3)), m.group(6), m.group(7)
        if event == "sched_waking":
            tm = TASK.search(rest)
            if tm and int(tm.group(1)) in rank:
                waking[int(tm.group(1))] = (cpu, int(tm.group(2)), int(m.group(2)))
        elif event == "sched_wakeup":
            tm = TASK.search(rest)
            pid = int(tm.group(1)) if tm else None
            if pid in waking:
                waker_cpu, last_cpu, waker = waking.pop(pid)
                if waker_cpu != last_cpu:
                    pulled = int(tm.group(2)) == waker_cpu
                    counts[(role(pid), role(waker), pulled)] += 1
    print(f"{args.trace}: wakeups by a waker on another CPU than the wakee's last")
    print(f"{'wakee':<10} {'woken by':<10} {'wakeups':>9}  onto the waker's CPU")
    for wakee in ("receiver", "sender", "other"):
        for waker in ("receiver", "sender", "other"):
            n = counts[(wakee, waker, True)] + counts[(wakee, waker, False)]
            if n:
                pulled = counts[(wakee, waker, True)]
                print(f"{wakee:<10} {waker:<10} {n:>9}  {pulled} ({100.0 * pulled / n:.2f}%)")


if __name__ == "__main__":
    main()
