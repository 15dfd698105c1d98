//! The machine's background threads (`MachineProfile::background`): they make runs
//! with different seeds differ, stay out of the workload's own counts, run only
//! where they are bound, and sleep once the workload has ended.

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use schedlab_core::cost::{BackgroundThreads, MachineProfile};
use schedlab_core::task::Task;
use schedlab_core::trace::{TraceKind, TraceRecord, TraceSink};
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

fn with_background() -> MachineProfile {
    let mut p = common::unit_profile();
    p.background = vec![
        BackgroundThreads { comm: "kworker".into(), per_cpu: true, mean_interval_ns: 200_000, run_ns: 20_000, nice: 0 },
        BackgroundThreads { comm: "kdamond".into(), per_cpu: false, mean_interval_ns: 1_000_000, run_ns: 100_000, nice: 0 },
    ];
    p
}

/// (comm, cpu) of every task switched in, by the records' own task table.
#[derive(Clone, Default)]
struct Runs(Rc<RefCell<Vec<(String, usize)>>>);

impl TraceSink for Runs {
    fn record(&mut self, rec: &TraceRecord, tasks: &[Task]) {
        if let TraceKind::Switch { next: Some(n), .. } = rec.kind {
            self.0.borrow_mut().push((tasks[n].comm.clone(), rec.cpu));
        }
    }
}

fn run(profile: MachineProfile, policy: &str, workload: &str, seed: u64, runs: Option<Runs>) -> RunResult {
    let w = Workload::parse(workload).unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
    let mut e = Engine::new(Topology::parse("1x1x2x1").unwrap(), profile, policy, cfg, w.main_comm(), w.main_program());
    if let Some(r) = runs {
        e.set_trace(Box::new(r));
    }
    let r = e.run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r
}

#[test]
fn background_threads_make_seeds_differ() {
    for policy in ["cfs@5.15", "eevdf@6.18", "ule@post", "4bsd", "fifo"] {
        let workload = "pipe loops=2000";
        // Without background the tick's phase alone differs between seeds, and a
        // ping-pong on two CPUs does not feel it.
        let quiet: Vec<u64> = (1..=3).map(|s| run(common::unit_profile(), policy, workload, s, None).elapsed_ns()).collect();
        assert!(quiet.iter().all(|&e| e == quiet[0]), "{policy}: {quiet:?}");
        let noisy: Vec<u64> = (1..=3).map(|s| run(with_background(), policy, workload, s, None).elapsed_ns()).collect();
        assert!(noisy.iter().any(|&e| e != noisy[0]), "{policy}: {noisy:?}");
        // They take CPU time from the workload: never faster than without them
        // by more than the ping-pong's own placement luck, and never free.
        assert!(noisy.iter().all(|&e| e != quiet[0]), "{policy}: {noisy:?} vs {quiet:?}");
    }
}

#[test]
fn background_threads_are_not_workload_tasks_and_run_where_bound() {
    let runs = Runs::default();
    let r = run(with_background(), "eevdf@6.18", "pipe loops=2000", 1, Some(runs.clone()));
    // The main task and its child only.
    assert_eq!(r.tasks.len(), 2, "{:?}", r.tasks.iter().map(|t| &t.comm).collect::<Vec<_>>());
    assert!(r.tasks.iter().all(|t| t.comm == "perf"), "{:?}", r.tasks);
    let runs = runs.0.borrow();
    let on = |comm: &str| runs.iter().filter(|(c, _)| c == comm).map(|&(_, cpu)| cpu).collect::<Vec<_>>();
    let (k0, k1, kd) = (on("kworker/0"), on("kworker/1"), on("kdamond"));
    // About elapsed / 200 us wakeups each; at least some.
    assert!(k0.len() > 3 && k1.len() > 3 && !kd.is_empty(), "{} {} {}", k0.len(), k1.len(), kd.len());
    assert!(k0.iter().all(|&c| c == 0) && k1.iter().all(|&c| c == 1), "bound threads ran elsewhere: {k0:?} {k1:?}");
    // Their CPU time is the CPUs' (schedstat counts them) but not the workload's.
    let workload_run: u64 = r.tasks.iter().map(|t| t.run_ns).sum();
    let cpu_run: u64 = r.cpu_stats.iter().map(|s| s.run_ns).sum();
    assert!(cpu_run > workload_run, "{cpu_run} vs {workload_run}");
}

#[test]
fn the_run_ends_with_the_workload() {
    // A background thread runs 100 us per wakeup; the run's end is the
    // workload's, whatever the background threads were doing then.
    let a = run(with_background(), "cfs@5.15", "pipe loops=500", 2, None);
    let quiet = run(common::unit_profile(), "cfs@5.15", "pipe loops=500", 2, None);
    assert!(a.end_ns >= a.window_ns.1, "{} {:?}", a.end_ns, a.window_ns);
    // Not inflated by a background thread's last run after the workload ended.
    assert!(a.end_ns < quiet.end_ns * 3, "{} vs {}", a.end_ns, quiet.end_ns);
}
