//! `perf bench sched pipe`: the ping-pong completes in both modes and costs what its
//! round trip is made of.

mod common;

#[test]
fn pipe_ping_pong_round_trips() {
    for mode in ["process", "thread"] {
        for policy in ["fifo", "cfs@4.19"] {
            let r = common::run("1x1x1x1", policy, &format!("pipe loops=1000 mode={mode}"), 3);
            assert!(r.violations.is_empty(), "{mode} {policy}: {:?}", r.violations);
            // On one CPU every round trip is two writes, two reads and two switches.
            let p = common::unit_profile();
            let per_op_min = 2 * (p.syscall_ns + p.pipe_op_ns + p.copy_ns(4)) * 2 + 2 * p.context_switch_ns;
            let per_op = r.elapsed_ns() / 1000;
            assert!(per_op >= per_op_min, "{mode} {policy}: {per_op} ns/op < {per_op_min}");
            assert!(per_op < 3 * per_op_min, "{mode} {policy}: {per_op} ns/op");
            let t = r.total();
            // fifo never preempts: each side sleeps in read and is woken, twice per round
            // trip (less the first message, sent before the reader slept). Under CFS
            // the woken reader may preempt the writer before it reads, so that writer
            // finds its reply waiting: at least one wakeup per round trip.
            let min = if policy == "fifo" { 1990 } else { 1000 };
            assert!(t.ttwu_count >= min, "{mode} {policy}: {} wakeups", t.ttwu_count);
        }
    }
}

#[test]
fn pipe_on_two_cpus_pays_cross_cpu_wakeups() {
    let one = common::run("1x1x1x1", "cfs@4.19", "pipe loops=500", 1);
    let two = common::run("1x1x2x1", "cfs@4.19", "pipe loops=500", 1);
    assert!(two.violations.is_empty());
    // cfs@4.19 sends the wakee back to its idle previous CPU (select_idle_sibling),
    // so each hop pays the idle exit (2 µs in the unit profile) instead of a switch.
    assert!(two.elapsed_ns() > one.elapsed_ns(), "{} vs {}", two.elapsed_ns(), one.elapsed_ns());
}
