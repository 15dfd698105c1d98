//! UnixBench's shell-script loop (`shell`): the processes each loop makes, and
//! what counts as a loop.

mod common;

use schedlab_core::{Engine, MachineProfile, RunConfig, Topology};
use schedlab_workloads::{ShellScripts, Workload};

/// Every loop forks `multi.sh` and, per concurrent `tst.sh`, the script and its
/// seven commands; only loops that finished inside the window count, and the
/// loopers start no loop after it, so at most one loop per copy is left over.
#[test]
fn each_loop_makes_its_processes_and_only_finished_loops_count() {
    for (copies, concurrent) in [(1u64, 1u64), (3, 1), (2, 8)] {
        for policy in ["cfs@4.19", "eevdf@6.18"] {
            let spec = format!("shell copies={copies} concurrent={concurrent} duration_ms=200");
            let r = common::run("x6-2-20", policy, &spec, 3);
            assert!(r.violations.is_empty(), "{spec} {policy}: {:#?}", r.violations);
            let loops = ShellScripts::loops(&r);
            assert!(loops > 0, "{spec} {policy}: no loop finished");
            // Run, the loopers, then 1 + 8 N processes per loop started.
            let per_loop = 1 + 8 * concurrent;
            let forked = r.task_count() - 1 - copies;
            assert_eq!(forked % per_loop, 0, "{spec} {policy}: {forked} processes");
            let started = forked / per_loop;
            assert!(started >= loops && started <= loops + copies, "{spec} {policy}: {started} started, {loops} counted");
            let w = Workload::parse(&spec).unwrap();
            let (lpm, unit) = w.throughput(&r).unwrap();
            assert_eq!(unit, "lpm");
            // Per minute of the window (the alarm's 200 ms and the main task's
            // wakeup after them, which waits for a CPU: with 2 x 8 pipelines on
            // 20 CPUs eevdf@6.18 takes 1.6 ms since its balancer leaves
            // ineligible tasks alone, v6.18's can_migrate_task()).
            let window_s = r.elapsed_ns() as f64 / 1e9;
            assert!((0.2..0.205).contains(&window_s), "{spec}: window {window_s} s");
            assert!((lpm - loops as f64 * 60.0 / window_s).abs() < 1e-6 * lpm, "{spec}: {lpm}");
        }
    }
}

/// On an idle machine one loop of `multi.sh 1` takes at least the CPU time of
/// its nine processes one after another (their pipelines overlap only where a
/// reader waits for its writer), and more processes at once make the loop
/// longer, not shorter.
#[test]
fn a_loop_takes_its_processes_time() {
    let r = common::run("1x1x1x1", "cfs@5.15", "shell copies=1 concurrent=1 duration_ms=500", 1);
    let loops = ShellScripts::loops(&r);
    let cpu_per_loop_ns = r.tasks.iter().map(|t| t.run_ns).sum::<u64>() / loops.max(1);
    // The traced processes' CPU, less the forks and exits the profile charges
    // (unit profile: none), is about 7.9 ms a loop.
    assert!((7_000_000..9_000_000).contains(&cpu_per_loop_ns), "{cpu_per_loop_ns} ns a loop");
    let r8 = common::run("1x1x1x1", "cfs@5.15", "shell copies=1 concurrent=8 duration_ms=500", 1);
    assert!(ShellScripts::loops(&r8) * 6 < loops, "8 scripts a loop: {} loops, 1: {loops}", ShellScripts::loops(&r8));
}

/// Regression: a task pushed away by `sched_exec()`'s stopper stayed the CPU's
/// current task through the pick that followed, so a task the newly idle
/// balancer pulled there "preempted" it and made it the queue's last buddy: the
/// exited task was later picked from that stale buddy ("live task has a
/// program"). The stopper, not a fair task, is what such a pick preempts.
#[test]
fn a_task_pushed_at_exec_is_not_a_buddy_where_it_left() {
    for policy in ["cfs@3.0", "cfs@4.19", "cfs@4.19+STEAL", "cfs@5.15", "eevdf@6.18"] {
        for seed in 1..=3 {
            let topo = Topology::parse("1x1x4x1").unwrap();
            let w = Workload::parse("shell copies=8 concurrent=8 duration_ms=500").unwrap();
            let p = schedlab_policies::policy_by_name(policy, &[]).unwrap();
            let profile = MachineProfile::from_toml(include_str!("../../../machines/broadwell-ep.toml"), "broadwell-ep").unwrap();
            let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
            let r = Engine::new(topo, profile, p, cfg, w.main_comm(), w.main_program()).run();
            assert!(r.violations.is_empty(), "{policy} seed {seed}: {:#?}", r.violations);
            assert!(r.total().exec_pushes > 0, "{policy} seed {seed}: no exec was pushed");
        }
    }
}
