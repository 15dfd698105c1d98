#!/bin/sh
# Records the scheduler events of UnixBench's shell-script loop on this machine,
# for the `shell` workload's durations (crates/schedlab-workloads/src/shell.rs).
#
#   record.sh UNIXBENCH_DIR OUT_DIR [LOOPS]
#
# UNIXBENCH_DIR holds byte-unixbench's pgms/multi.sh, pgms/tst.sh and
# testdir/sort.src. Runs LOOPS (100) of `multi.sh 1` and LOOPS/3 of `multi.sh 8`
# pinned to CPU 0 (so that every switch is traced: on these guests switches out
# of idle on the other vCPU are not), each under tracefs with sched_switch and
# the process fork/exec/exit events, into OUT_DIR/multi1.txt and multi8.txt,
# then LOOPS/2 of `multi.sh 1` with the read and write system calls too (where
# each command's work on its pipe or output starts and ends), into
# OUT_DIR/syscalls1.txt.
# Needs root. Restores every tracing setting it changes, and leaves no process.
set -eu
UB=$1; OUT=$2; LOOPS=${3:-100}
T=/sys/kernel/tracing
[ -w $T/tracing_on ] || { echo "record.sh: $T is not writable (root, tracefs mounted?)" >&2; exit 2; }
WORK=$(mktemp -d)
cp "$UB/pgms/multi.sh" "$UB/pgms/tst.sh" "$UB/testdir/sort.src" "$WORK/"
mkdir -p "$OUT"
EVENTS="sched/sched_switch sched/sched_process_fork sched/sched_process_exec sched/sched_process_exit"
SYSCALLS="syscalls/sys_enter_read syscalls/sys_exit_read syscalls/sys_enter_write syscalls/sys_exit_write syscalls/sys_enter_exit_group"
old_buf=$(cut -d' ' -f1 $T/buffer_size_kb)
old_on=$(cat $T/tracing_on)
restore() {
    echo 0 > $T/tracing_on
    for e in $EVENTS $SYSCALLS; do echo 0 > $T/events/$e/enable; done
    echo "$old_buf" > $T/buffer_size_kb
    echo "$old_on" > $T/tracing_on
    rm -rf "$WORK"
}
trap restore EXIT INT TERM
echo 0 > $T/tracing_on
echo 40000 > $T/buffer_size_kb
for e in $EVENTS; do echo 1 > $T/events/$e/enable; done
cd "$WORK"
export UB_BINDIR="$WORK"
run() { # NAME N LOOPS
    echo > $T/trace
    echo 1 > $T/tracing_on
    taskset -c 0 sh -c "i=0; while [ \$i -lt $3 ]; do sh ./multi.sh $2; i=\$((i+1)); done"
    echo 0 > $T/tracing_on
    cat $T/trace > "$OUT/$1.txt"
}
run multi1 1 "$LOOPS"
run multi8 8 $((LOOPS / 3))
for e in $SYSCALLS; do echo 1 > $T/events/$e/enable; done
run syscalls1 1 $((LOOPS / 2))
