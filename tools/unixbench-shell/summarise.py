#!/usr/bin/env python3
"""Summarises record.sh's traces: for each process of UnixBench's shell-script
loop, its mean CPU time (us) from fork to exec, in the new image between its
own forks, and after the exit tracepoint (exit_mm and the rest of do_exit).

    summarise.py OUT_DIR/multi1.txt OUT_DIR/multi8.txt OUT_DIR/syscalls1.txt

For a recording with the read and write system calls (syscalls1.txt), it
prints instead, per command, the median time from its exec to its first read
of standard input or write of standard output, from there to its last, and
from there to exit_group() (wall time: the commands run alone on the CPU).
"""
import collections
import re
import statistics
import sys

EVENT = re.compile(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)$')


def summarise(path):
    running, since = {}, {}
    phase, cpu = {}, collections.defaultdict(float)
    parent, image, kids, exited, forks = {}, {}, collections.defaultdict(list), set(), collections.Counter()
    for line in open(path):
        m = EVENT.match(line)
        if not m:
            continue
        _, pid, c, ts, name, rest = m.groups()
        pid, c, ts = int(pid), int(c), float(ts)

        def charge():
            if running.get(c):
                p = running[c]
                cpu[(p, phase.get(p, 'pre'))] += ts - since[c]
            since[c] = ts

        if name == 'sched_switch':
            charge()
            running[c] = int(re.search(r'next_pid=(\d+)', rest).group(1)) or None
        elif name == 'sched_process_fork':
            charge()
            child = int(re.search(r'child_pid=(\d+)', rest).group(1))
            parent[child], phase[child] = pid, 'pre'
            kids[pid].append(child)
            if pid in image:
                forks[pid] += 1
                phase[pid] = forks[pid]
        elif name == 'sched_process_exec':
            charge()
            image[pid] = re.search(r'filename=(\S+)', rest).group(1).split('/')[-1]
            phase[pid] = 0
        elif name == 'sched_process_exit':
            charge()
            phase[pid] = 'exit'
            exited.add(pid)

    def is_tst(p):
        return image.get(p) == 'sh' and any(image.get(k) == 'od' for k in kids[p])

    def role(p):
        i = image[p]
        if i == 'sort':
            sorts = sorted(k for k in kids[parent[p]] if image.get(k) == 'sort')
            return 'sort' if sorts.index(p) == 0 else 'sort -n'
        if i == 'sh':
            if is_tst(p):
                return 'tst.sh'
            if kids[p] and all(is_tst(k) for k in kids[p]):
                return 'multi.sh'
            return None
        return i if i in ('od', 'grep', 'tee', 'wc', 'rm') else None

    roles = collections.defaultdict(list)
    for p in image:
        if p in exited and p in parent and role(p):
            roles[role(p)].append(p)
    print(f"# {path}: CPU time, mean of each process (us)")
    for r in ('multi.sh', 'tst.sh', 'sort', 'od', 'sort -n', 'grep', 'tee', 'wc', 'rm'):
        ps = roles.get(r)
        if not ps:
            continue
        mean = lambda key: statistics.mean(cpu[(p, key)] for p in ps) * 1e6
        phases = [mean(i) for i in range(max(forks[p] for p in ps) + 1)]
        total = mean('pre') + sum(phases) + mean('exit')
        print(f"{r:9s} n={len(ps):4d} pre_exec {mean('pre'):5.0f}  image {' '.join(f'{x:.0f}' for x in phases)}"
              f"  after_exit {mean('exit'):4.0f}  total {total:6.0f}")


def data_spans(path):
    exec_at, image, io, exit_group, pending = {}, {}, collections.defaultdict(list), {}, {}
    for line in open(path):
        m = re.match(r'^\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+)(.*)$', line)
        if not m:
            continue
        _, pid, _, ts, name, rest = m.groups()
        pid, ts = int(pid), float(ts) * 1e6
        if name == 'sched_process_exec':
            image[pid] = re.search(r'filename=(\S+)', rest).group(1).split('/')[-1]
            exec_at[pid] = ts
        elif name in ('sys_read', 'sys_write') and rest.startswith('(fd: '):
            pending[pid] = (name, int(rest[5:].split(',')[0], 16), ts)
        elif name in ('sys_read', 'sys_write') and pid in pending:
            call, fd, start = pending.pop(pid)
            io[pid].append((call, fd, start, ts, int(rest.split('->')[1], 16)))
        elif name == 'sys_exit_group':
            exit_group[pid] = ts
    rows = collections.defaultdict(list)
    for p, i in image.items():
        if p not in exit_group or i == 'sh':
            continue
        data = [x for x in io[p] if (x[0], x[1]) in (('sys_read', 0), ('sys_write', 1))]
        if i == 'sort' and any(x[1] == 0 and x[4] > 20000 for x in data):
            i = 'sort -n'
        if not data:
            rows[i].append((exit_group[p] - exec_at[p], 0, 0))
        else:
            rows[i].append((data[0][2] - exec_at[p], data[-1][3] - data[0][2], exit_group[p] - data[-1][3]))
    print(f"# {path}: exec to first data call, data calls, to exit_group (median us)")
    for i, v in sorted(rows.items()):
        a = list(zip(*v))
        print(f"{i:8s} n={len(v):4d} startup {statistics.median(a[0]):5.0f}  data {statistics.median(a[1]):4.0f}"
              f"  tail {statistics.median(a[2]):3.0f}")


for path in sys.argv[1:]:
    if 'syscalls' in path:
        data_spans(path)
    else:
        summarise(path)
