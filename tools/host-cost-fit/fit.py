#!/usr/bin/env python3
"""What a message and what a context switch cost, real against simulated.

Runs a workload for real (`schedlab real`, each run in its own session, perf
counters over the whole task tree) and simulated (`schedlab run --topology
host` under the host's policy, one run per seed), and fits each side's CPU time
as

    CPU time = a x messages + b x context switches

over its runs. Real runs of a messaging workload differ in how many switches
they make, and their CPU time follows; the seeds of a simulation differ the
same way. `a` is then what a message costs with no switching, `b` what each
switch adds. The runs' spread of switch counts is narrow, so both carry a wide
error (r is printed); compare their direction, not their digits.

These hosts move between a few states minutes apart (the cross-CPU cache line
30-35 or 150-160 ns), and the runs' costs move with them: the real runs are
read with `schedlab real --host-state`, and only those whose state before and
after matches the profile's (its `cache_line_ns`, within 1.5x, the rule
validate uses) are fitted against the simulation; runs in other states are
fitted apart and printed for comparison.

    python3 tools/host-cost-fit/fit.py --machine host.toml [--workload W] [--runs 10] [--seeds 10]

Real CPU time is perf's task-clock; simulated, the CPUs' busy time.
"""
import argparse
import json
import re
import subprocess
import sys


def hackbench_messages(workload):
    """Messages a hackbench run passes: groups x fds senders x fds receivers x loops."""
    if not workload.startswith("hackbench"):
        return None
    kv = dict(re.findall(r"(\w+)=(\S+)", workload))
    groups, loops, fds = int(kv.get("groups", 10)), int(kv.get("loops", 100)), int(kv.get("fds", 20))
    return groups * fds * fds * loops


def fit(points):
    """Least squares of y = a + b x; (a, b, r)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    syy = sum((y - my) ** 2 for _, y in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    if sxx == 0 or syy == 0:
        return None
    b = sxy / sxx
    return my - b * mx, b, sxy / (sxx * syy) ** 0.5


def same_state(a_ns, b_ns):
    """Two readings of the cross-CPU cache line from one host state (validate's rule)."""
    return a_ns <= b_ns * 1.5 and b_ns <= a_ns * 1.5


def schedlab(binary, args):
    out = subprocess.run([binary] + args, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def report(name, runs, messages):
    """runs: (switches, cpu_ns) pairs."""
    if len(runs) < 3:
        print(f"{name}: {len(runs)} runs, too few to fit")
        return
    f = fit(runs)
    switches = sorted(s for s, _ in runs)
    if f is None:
        print(f"{name}: {len(runs)} runs, no spread to fit")
        return
    a, b, r = f
    print(
        f"{name}: {len(runs)} runs, switches {switches[0]}-{switches[-1]}: "
        f"a = {a / messages / 1000:.3f} us a message, b = {b / 1000:.2f} us a switch (r = {r:.2f})"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machine", required=True, help="machine profile for the simulated side (schedlab calibrate --out)")
    p.add_argument("--workload", default="hackbench groups=1 loops=1000 fds=20 datasize=100 ipc=pipe mode=process")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--schedlab", default="schedlab", help="the schedlab binary")
    p.add_argument("--counters", default="quiet", choices=["quiet", "inherited"], help="how the real runs are counted (schedlab real --counters)")
    a = p.parse_args()
    messages = hackbench_messages(a.workload)
    if messages is None:
        sys.exit("fit.py: only hackbench workloads (their message count is known)")
    real = schedlab(a.schedlab, ["real", "--workload", a.workload, "--runs", str(a.runs), "--format", "json", "--host-state", "--counters", a.counters])
    with open(a.machine) as f:
        found = re.search(r"^cache_line_ns = (\d+)", f.read(), re.M)
    if not found:
        sys.exit(f"fit.py: {a.machine} has no cache_line_ns to tell its host state by (a `schedlab calibrate` profile has)")
    line_ns = float(found.group(1))
    same, other = [], []
    for r in real:
        states = [r.get("host_state_before"), r.get("host_state_after")]
        match = all(st and same_state(st["cache_line_ns"], line_ns) for st in states)
        (same if match else other).append((r["context_switches"], r["task_clock_ns"]))
    seen = sorted(round(st["cache_line_ns"]) for r in real for st in (r.get("host_state_before"), r.get("host_state_after")) if st)
    sim_points = []
    for seed in range(1, a.seeds + 1):
        r = schedlab(
            a.schedlab,
            ["run", "--topology", "host", "--machine", a.machine, "--workload", a.workload, "--seed", str(seed), "--format", "json"],
        )
        switches = sum(t["switches"] for t in r["tasks"])
        busy_ns = r["elapsed_ns"] * r["busy_pct"] / 100 * r["ncpus"]
        sim_points.append((switches, busy_ns))
    print(f"{a.workload}: {messages} messages a run; the profile's state: cache line {line_ns:.0f} ns")
    print(f"real runs' cache line readings (before and after each): {', '.join(f'{v} ns' for v in seen)}")
    report("real, the profile's state", same, messages)
    if other:
        report("real, other states", other, messages)
    report("simulated", sim_points, messages)


if __name__ == "__main__":
    main()
