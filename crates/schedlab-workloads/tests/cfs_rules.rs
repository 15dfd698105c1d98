//! cfs@4.19 and its STEAL feature in small scenarios, and the steal seed's
//! experiment at reduced scale on the real machine profile.

mod common;

use schedlab_core::program::{FnProgram, ForkKind, Op, OpResult};
use schedlab_core::sched::Launcher;
use schedlab_core::{Engine, MachineProfile, RunConfig, RunResult, Topology, MARK_END, MARK_START};
use schedlab_workloads::Workload;

fn broadwell() -> MachineProfile {
    MachineProfile::from_toml(include_str!("../../../machines/broadwell-ep.toml"), "broadwell-ep").unwrap()
}

/// Three tasks on two CPUs, each computing 3 ms then sleeping 100 µs, 40 times.
/// The short sleeps keep `avg_idle` under `sched_migration_cost` (0.5 ms), so
/// `idle_balance()` declines to search and only STEAL (gated at 10 µs) pulls.
fn three_on_two(policy: &str) -> RunResult {
    let worker = || {
        FnProgram::new(|step, _last: OpResult, _rng: &mut _| match step {
            s if s >= 80 => Op::Exit,
            s if s % 2 == 0 => Op::Compute { ns: 3_000_000 },
            _ => Op::Sleep { ns: 100_000 },
        })
    };
    let mut forked = 0;
    let mut reaped = 0;
    let main = FnProgram::new(move |step, _last, _rng: &mut _| {
        if step == 0 {
            return Op::Mark { label: MARK_START };
        }
        if forked < 3 {
            forked += 1;
            return Op::Fork { kind: ForkKind::Process, comm: Some("worker".into()), program: Box::new(worker()) };
        }
        if reaped < 3 {
            reaped += 1;
            return Op::WaitChild;
        }
        if reaped == 3 {
            reaped += 1;
            return Op::Mark { label: MARK_END };
        }
        Op::Exit
    });
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 5, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("1x1x2x1").unwrap(), broadwell(), policy, cfg, "main", Box::new(main)).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r
}

#[test]
fn steal_pulls_from_the_overloaded_cpu_when_going_idle() {
    let base = three_on_two("cfs@4.19");
    let steal = three_on_two("cfs@4.19+STEAL");
    assert_eq!(base.total().steals, 0, "no stealing without the feature");
    assert!(steal.total().steals > 0, "an idle CPU with an overloaded sibling queue steals");
    // 3 tasks × 40 × 3 ms = 360 ms of work on 2 CPUs: at least 180 ms either way.
    assert!(base.elapsed_ns() >= 180_000_000 && steal.elapsed_ns() >= 180_000_000);
    assert!(steal.busy_pct() >= base.busy_pct() - 1.0, "stealing does not idle CPUs more");
}

fn hackbench(policy: &str, groups: u64, loops: u64, seed: u64) -> RunResult {
    let w = Workload::parse(&format!("hackbench groups={groups} loops={loops}")).unwrap();
    let sysctls = vec![("sched_wakeup_granularity_ns".to_string(), "15000000".to_string())];
    let policy = schedlab_policies::policy_by_name(policy, &sysctls).unwrap();
    let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("x6-2-20").unwrap(), broadwell(), policy, cfg, w.main_comm(), w.main_program()).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r
}

/// The seed's 1-group row at 1/50 scale: STEAL is faster because CPUs stop idling
/// while queues hold work (published at full scale: 36.1% faster, %busy 75 → 97).
#[test]
fn steal_seed_direction_at_reduced_scale() {
    let base = hackbench("cfs@4.19", 1, 2000, 1);
    let steal = hackbench("cfs@4.19+STEAL", 1, 2000, 1);
    let speedup = 100.0 * (base.elapsed_ns() as f64 - steal.elapsed_ns() as f64) / base.elapsed_ns() as f64;
    assert!(speedup > 8.0, "STEAL speedup {speedup:.1}%");
    assert!(base.busy_pct() < 90.0, "base %busy {:.1}", base.busy_pct());
    assert!(steal.busy_pct() > base.busy_pct() + 10.0, "busy {:.1} → {:.1}", base.busy_pct(), steal.busy_pct());
    let n = steal.ncpus as u64;
    assert!(steal.total().steals / n > 50, "steals per CPU {}", steal.total().steals / n);
    for r in [&base, &steal] {
        let t = r.total();
        let find_pct = 100.0 * t.find_ns as f64 / (r.elapsed_ns() * n) as f64;
        assert!(find_pct < 1.0, "%find {find_pct:.2}");
    }
    // Fewer idle entries and switches with stealing, as the seed's schedstat shows.
    assert!(steal.total().sched_goidle * 2 < base.total().sched_goidle);
}

/// The seed's 4-group row at 1/25 scale. A wakeup that lands while a newly idle
/// CPU browses the domains with its runqueue unlocked counts that pass as idle time
/// (`idle_stamp` is cleared only after it), so under this load `avg_idle` falls
/// under `sched_migration_cost`, `idle_balance()` declines, and CPUs that run out
/// of work steal instead: the published run stole 29 353 times per CPU at 4 groups
/// and 38 190 at 8. Without those short samples the CPUs stay in the state where
/// `idle_balance()` always runs, pulls several tasks, and stealing is rare.
#[test]
fn busy_cpus_steal_because_newidle_passes_count_as_idle_time() {
    let r = hackbench("cfs@4.19+STEAL", 4, 4000, 1);
    let t = r.total();
    let n = r.ncpus as u64;
    assert!(t.newidle_skipped / n > 800, "idle_balance() declined {} times per CPU", t.newidle_skipped / n);
    assert!(t.steals * 2 > t.lb_gained, "steals {} against tasks pulled by balancing {}", t.steals, t.lb_gained);
}

fn cascadelake() -> MachineProfile {
    MachineProfile::from_toml(include_str!("../../../machines/cascadelake.toml"), "cascadelake").unwrap()
}

/// Records the CPU each task first runs on.
struct FirstCpu(std::rc::Rc<std::cell::RefCell<std::collections::BTreeMap<usize, usize>>>);

impl schedlab_core::trace::TraceSink for FirstCpu {
    fn record(&mut self, rec: &schedlab_core::trace::TraceRecord, _tasks: &[schedlab_core::task::Task]) {
        if let schedlab_core::trace::TraceKind::Switch { next: Some(n), .. } = rec.kind {
            self.0.borrow_mut().entry(n).or_insert(rec.cpu);
        }
    }
}

/// On the 80-CPU two-node Cascade Lake, the main task starts `spinners` CPU-bound
/// threads and then one more; returns the node that last thread starts on. At that
/// fork `spinners + 1` tasks run on the machine.
fn node_of_fork_after(policy: &str, spinners: u64) -> u32 {
    let mut forked = 0;
    let mut threads: Vec<usize> = Vec::new();
    let main = FnProgram::new(move |_step, last, _rng: &mut _| {
        if let OpResult::Task(t) = last {
            threads.push(t);
        }
        if forked <= spinners {
            forked += 1;
            let ns = if forked <= spinners { 20_000_000 } else { 1_000_000 };
            let work =
                FnProgram::new(move |step, _last: OpResult, _rng: &mut _| if step == 0 { Op::Compute { ns } } else { Op::Exit });
            return Op::Fork { kind: ForkKind::Thread, comm: Some("t".into()), program: Box::new(work) };
        }
        match threads.pop() {
            Some(t) => Op::Join { task: t },
            None => Op::Exit,
        }
    });
    let topo = Topology::parse("cascadelake-2s").unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 3, check: true, ..RunConfig::default() };
    let mut e = Engine::new(topo.clone(), cascadelake(), policy, cfg, "main", Box::new(main));
    let first = std::rc::Rc::new(std::cell::RefCell::new(std::collections::BTreeMap::new()));
    e.set_trace(Box::new(FirstCpu(first.clone())));
    let r = e.run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    // Task ids: main is 0, the spinners 1..=spinners, the probe spinners + 1.
    let cpu = first.borrow()[&(spinners as usize + 1)];
    topo.cpus[cpu].node
}

#[test]
fn numa_fork_spread_leaves_the_node_at_a_quarter_of_the_domain() {
    // Busy CPUs at the probe's fork: 8, 19 and 21 of the NUMA domain's 80, i.e. 10%,
    // 24% and 26%. v5.10 keeps forks on the local node while it has an idle CPU;
    // NUMA_FORK_SPREAD only while fewer than 80 / 4 = 20 tasks run there.
    for (busy, spread_node) in [(8u64, 0u32), (19, 0), (21, 1)] {
        let spinners = busy - 1;
        assert_eq!(node_of_fork_after("cfs@5.10", spinners), 0, "v5.10 at {busy} busy CPUs");
        assert_eq!(node_of_fork_after("cfs@5.10+NUMA_FORK_SPREAD", spinners), spread_node, "NUMA_FORK_SPREAD at {busy} busy");
    }
}

/// Two LLCs of three CPUs ({0,1,2} and {3,4,5}): hogs pinned to CPUs 4 and 5,
/// the main task on CPU 0 pinned to {0, 3}, forking a child (which inherits the
/// mask). Returns the CPU the child first runs on. Counted over every CPU of
/// each group, the main task's LLC has two idle CPUs against one, so the fork
/// stays there, on CPU 0, the only one the child may use; counted over the
/// allowed CPUs only, that LLC has none idle and the other has CPU 3.
fn cpu_of_pinned_fork(policy: &str) -> usize {
    use schedlab_core::cpuset::CpuSet;
    let only = |cpus: &[usize]| {
        let mut s = CpuSet::new(6);
        for &c in cpus {
            s.set(c);
        }
        s
    };
    let hog = move |cpu: usize| {
        FnProgram::new(move |step, _last: OpResult, _rng: &mut _| match step {
            0 => Op::SetAffinity { cpus: only(&[cpu]) },
            1 => Op::Compute { ns: 20_000_000 },
            _ => Op::Exit,
        })
    };
    let probe =
        FnProgram::new(|step, _last: OpResult, _rng: &mut _| if step == 0 { Op::Compute { ns: 100_000 } } else { Op::Exit });
    let mut probe = Some(probe);
    let main = FnProgram::new(move |step, _last, _rng: &mut _| match step {
        0 => Op::Fork { kind: ForkKind::Process, comm: Some("hog".into()), program: Box::new(hog(4)) },
        1 => Op::Fork { kind: ForkKind::Process, comm: Some("hog".into()), program: Box::new(hog(5)) },
        // Let the hogs reach their CPUs.
        2 => Op::Sleep { ns: 2_000_000 },
        3 => Op::SetAffinity { cpus: only(&[0, 3]) },
        4 => Op::Fork { kind: ForkKind::Process, comm: Some("probe".into()), program: Box::new(probe.take().unwrap()) },
        5..=7 => Op::WaitChild,
        _ => Op::Exit,
    });
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 3, check: true, ..RunConfig::default() };
    let mut e = Engine::new(Topology::parse("1x2x3x1").unwrap(), broadwell(), policy, cfg, "main", Box::new(main));
    let first = std::rc::Rc::new(std::cell::RefCell::new(std::collections::BTreeMap::new()));
    e.set_trace(Box::new(FirstCpu(first.clone())));
    let r = e.run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    // Task ids: main 0, the hogs 1 and 2, the probe 3.
    let cpu = first.borrow()[&3];
    cpu
}

#[test]
fn the_fork_path_counts_every_cpu_of_a_group_until_6_18_39() {
    // `find_idlest_group()` (v4.19) and `update_sg_wakeup_stats()` (v5.10 to
    // v6.18.38) walk the group's whole span; 6.18.39's backport of 82d6e01a0699
    // only the CPUs the task may use.
    for policy in ["cfs@4.19", "cfs@5.15", "eevdf@6.18"] {
        assert_eq!(cpu_of_pinned_fork(policy), 0, "{policy}");
    }
    assert_eq!(cpu_of_pinned_fork("eevdf@6.18+SG_WAKEUP_ALLOWED"), 3);
}

/// pft on the 80-CPU Cascade Lake at a quarter of the seed's region (the 1-thread
/// run takes ~11.6 s instead of 46 s): elapsed seconds of cfs@5.10 and
/// cfs@5.10+NUMA_FORK_SPREAD.
fn pft_pair(threads: u64) -> (f64, f64) {
    let run = |policy: &str| {
        let w = Workload::parse(&format!("pft threads={threads} mb=45283")).unwrap();
        let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
        let cfg = RunConfig { seed: 1, check: true, ..RunConfig::default() };
        let topo = Topology::parse("cascadelake-2s").unwrap();
        let r = Engine::new(topo, cascadelake(), policy, cfg, w.main_comm(), w.main_program()).run();
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        r.elapsed_ns() as f64 / 1e9
    };
    (run("cfs@5.10"), run("cfs@5.10+NUMA_FORK_SPREAD"))
}

#[test]
fn numa_fork_seed_direction_at_reduced_scale() {
    // Up to 12 threads both kernels keep everything on one node: the same time.
    let (base, new) = pft_pair(12);
    assert!(((base - new) / base).abs() < 0.05, "12 threads: {base} vs {new}");
    // 30 threads: v5.10 packs them on one node, whose memory saturates; spreading
    // at fork is much faster (published: 37.6% at full scale).
    let (base, new) = pft_pair(30);
    let gain = (base - new) / base;
    assert!(gain > 0.20, "30 threads: {base} vs {new}, gain {gain}");
}

/// On one CPU, each child joins the group its spec names (None: stays in the
/// root) and computes 50 ms. Returns every child's time spent waiting to run, ms.
fn group_waits(policy: &str, children: &[Option<(&'static str, u64)>]) -> Vec<f64> {
    let specs: Vec<Option<(&'static str, u64)>> = children.to_vec();
    let n = specs.len();
    let mut forked = 0;
    let mut reaped = 0;
    let main = FnProgram::new(move |_step, _last: OpResult, _rng: &mut _| {
        if forked < n {
            let spec = specs[forked];
            forked += 1;
            let child = FnProgram::new(move |step, _last: OpResult, _rng: &mut _| match (step, spec) {
                (0, Some((path, shares))) => Op::JoinGroup { path: path.to_string(), shares },
                (0, None) | (1, Some(_)) => Op::Compute { ns: 50_000_000 },
                _ => Op::Exit,
            });
            return Op::Fork { kind: ForkKind::Process, comm: Some("child".into()), program: Box::new(child) };
        }
        if reaped < n {
            reaped += 1;
            return Op::WaitChild;
        }
        Op::Exit
    });
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 2, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("1x1x1x1").unwrap(), broadwell(), policy, cfg, "main", Box::new(main)).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r.tasks.iter().skip(1).map(|t| t.wait_ns as f64 / 1e6).collect()
}

#[test]
fn groups_share_the_cpu_by_shares_not_by_task_count() {
    for policy in ["cfs@4.19", "cfs@5.15"] {
        // Without groups five CPU-bound tasks share alike: each waits ~200 ms.
        let flat = group_waits(policy, &[None, None, None, None, None]);
        assert!(flat.iter().all(|w| (180.0..230.0).contains(w)), "{policy} flat: {flat:?}");
        // One task in /a against four in /b, equal shares: /a's task gets half the
        // CPU (done after ~100 ms, so it waited ~50 ms); each of /b's gets an eighth
        // until then, and they finish at ~250 ms.
        let a = Some(("/a", 1024));
        let b = Some(("/b", 1024));
        let grouped = group_waits(policy, &[a, b, b, b, b]);
        assert!((35.0..70.0).contains(&grouped[0]), "{policy} /a: {grouped:?}");
        assert!(grouped[1..].iter().all(|w| (180.0..230.0).contains(w)), "{policy} /b: {grouped:?}");
        // Shares 2048 against 1024, one task each: 2 : 1 while both run, so /heavy's
        // task finishes at 75 ms (waited 25) and /light's at 100 ms (waited 50).
        let shares = group_waits(policy, &[Some(("/heavy", 2048)), Some(("/light", 1024))]);
        assert!((18.0..32.0).contains(&shares[0]) && (43.0..57.0).contains(&shares[1]), "{policy} shares: {shares:?}");
    }
}

/// %idle over a 2 s window of the load-resolution seed's mix (50 tasks, a
/// cpu.shares=2 group) on the 16-CPU 2x1x4x2 machine.
fn groupmix_idle(policy: &str, seed: u64) -> f64 {
    let w = Workload::parse("groupmix tasks=50 shares=2 warmup_ms=1000 window_ms=2000").unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("2x1x4x2").unwrap(), broadwell(), policy, cfg, w.main_comm(), w.main_program()).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    100.0 - r.busy_pct()
}

#[test]
fn low_weight_group_balance_by_version_and_resolution() {
    // v5.15 balances the group's tasks by count and idle CPUs: the machine stays
    // busy with or without the extra resolution.
    for policy in ["cfs@5.15", "cfs@5.15+NO_LOAD_RESOLUTION"] {
        let idle = groupmix_idle(policy, 1);
        assert!(idle < 1.0, "{policy}: {idle}% idle");
    }
    // v4.19 with the extra resolution: each CPU's group entity weighs 2048 / 16
    // scaled, which its PELT load truncates to 0 (se_weight = weight >> 10), so no
    // CPU shows load, forks stay on the first node and the balancer sees nothing
    // to move: the other node idles.
    let idle = groupmix_idle("cfs@4.19", 1);
    assert!(idle > 30.0, "cfs@4.19: {idle}% idle");
}

#[test]
fn v3_0_balances_a_low_weight_group_only_with_the_extra_resolution() {
    // The seed's kernel. Without the 10 bits every busy CPU's group entity is
    // clamped to MIN_SHARES = 2 whatever its task count, so the balancer sees
    // equal loads where the queues differ and some CPUs idle; with them the
    // entities weigh in proportion and the machine stays busy. Three seeds each,
    // a 2 s window (the experiment: 10 s, 5.42% vs 0.06% published).
    let off: Vec<f64> = (1..=3).map(|s| groupmix_idle("cfs@3.0+NO_LOAD_RESOLUTION", s)).collect();
    let on: Vec<f64> = (1..=3).map(|s| groupmix_idle("cfs@3.0", s)).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(mean(&off) > 2.0, "resolution off: {off:?}");
    assert!(mean(&on) < 0.5, "resolution on: {on:?}");
}

fn cascadelake_hackbench_pipes(topology: &str, policy: &str, groups: u64, fds: u64, loops: u64) -> f64 {
    let w = Workload::parse(&format!("hackbench groups={groups} fds={fds} loops={loops} ipc=pipe mode=process")).unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 1, check: false, ..RunConfig::default() };
    let topo = Topology::parse(topology).unwrap();
    let r = Engine::new(topo, cascadelake(), policy, cfg, w.main_comm(), w.main_program()).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    r.elapsed_ns() as f64 / 1e9
}

#[test]
fn scale_wakeup_gran_direction_at_reduced_scale() {
    // The seed's regime on a two-socket, 16-CPU slice of the Cascade Lake: 10
    // groups are 400 tasks, 25 per CPU, as G=48 on the 80-CPU machine. Fewer
    // wakeup preemptions make the run faster (seed: 14% at G=48, 23-27% from
    // G=110; the model gives 25% over 4 seeds here, so 10% is a wide margin).
    let base = cascadelake_hackbench_pipes("2x1x4x2", "cfs@5.15", 10, 20, 2000);
    let new = cascadelake_hackbench_pipes("2x1x4x2", "cfs@5.15+SCALE_WAKEUP_GRAN", 10, 20, 2000);
    let gain = (base - new) / base;
    assert!(gain > 0.10, "overloaded: {base} vs {new}, gain {gain}");
    // Two tasks per CPU (one group of 8 senders and 8 receivers), as G=4 on the
    // 80-CPU machine: within the seed's noise band. (At G=12 on the full machine
    // the model's gain, 10.7%, is above it: a documented miss, docs/policies/cfs.md.)
    let base = cascadelake_hackbench_pipes("1x1x4x2", "cfs@5.15", 1, 8, 2000);
    let new = cascadelake_hackbench_pipes("1x1x4x2", "cfs@5.15+SCALE_WAKEUP_GRAN", 1, 8, 2000);
    assert!(((base - new) / base).abs() < 0.08, "two per CPU: {base} vs {new}");
}

/// Records the tasks each newly idle CPU pulled in one pass: migrations fired in
/// task context on the CPU they moved to, not of a task being woken then,
/// grouped by instant.
#[derive(Default)]
struct NewidlePulls {
    pulls: std::rc::Rc<std::cell::RefCell<std::collections::BTreeMap<(u64, usize), u64>>>,
    /// When each task was last woken (`sched_waking` comes before a wakeup's move).
    waking_ns: std::collections::BTreeMap<usize, u64>,
}

impl schedlab_core::trace::TraceSink for NewidlePulls {
    fn record(&mut self, rec: &schedlab_core::trace::TraceRecord, _tasks: &[schedlab_core::task::Task]) {
        use schedlab_core::trace::{TraceContext, TraceKind};
        match rec.kind {
            TraceKind::Waking { p, .. } => {
                self.waking_ns.insert(p, rec.time_ns);
            }
            TraceKind::Migrate { p, dest_cpu, .. }
                if rec.context == TraceContext::Task && dest_cpu == rec.cpu && self.waking_ns.get(&p) != Some(&rec.time_ns) =>
            {
                *self.pulls.borrow_mut().entry((rec.time_ns, rec.cpu)).or_default() += 1;
            }
            _ => {}
        }
    }
}

/// The most tasks one newidle pass pulled in hackbench (socket, 1 group) on two
/// CPUs under `policy` booted preempt=none, on a static build or a
/// PREEMPT_DYNAMIC one; and how many passes pulled anything.
fn largest_newidle_pull(policy: &str, preempt_dynamic: bool) -> (u64, usize) {
    let w = Workload::parse("hackbench groups=1 loops=200").unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 5, check: true, preempt_dynamic, ..RunConfig::default() };
    let mut e = Engine::new(Topology::parse("1x1x2x1").unwrap(), broadwell(), policy, cfg, w.main_comm(), w.main_program());
    let sink = NewidlePulls::default();
    let pulls = sink.pulls.clone();
    e.set_trace(Box::new(sink));
    let r = e.run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let pulls = pulls.borrow();
    (pulls.values().copied().max().unwrap_or(0), pulls.len())
}

#[test]
fn a_preemptible_build_pulls_one_task_per_newidle_pass() {
    // detach_tasks() stops after the first task when a newly idle CPU balances on
    // a CONFIG_PREEMPTION kernel, which every PREEMPT_DYNAMIC build is.
    // v3.0's balance_tasks() and move_tasks() stop the same way under CONFIG_PREEMPT.
    for policy in ["eevdf@6.18", "cfs@4.19", "cfs@3.0"] {
        let (most, passes) = largest_newidle_pull(policy, true);
        assert!(passes > 10, "{policy}: {passes} newidle pulls");
        assert_eq!(most, 1, "{policy}");
        // A static preempt=none build pulls up to the imbalance at once.
        let (most, _) = largest_newidle_pull(policy, false);
        assert!(most > 1, "{policy}: {most}");
    }
}

/// `sched_exec()`: a task alone on its CPU stays there through its exec from
/// v4.19 on (the spare capacity of v4.12+ and the `*_without()` statistics of
/// v5.5+ leave its own load out), while v3.0's `find_idlest_group()` counts it
/// on its own CPU and sends it to the idle one; on a busy two-CPU machine running
/// UnixBench's shell loop, Linux's stopper pushes some exec'ing tasks to the
/// other CPU, FreeBSD never balances at exec.
#[test]
fn sched_exec_moves_only_what_the_balancer_would() {
    let lone = || {
        FnProgram::new(|step, _last: OpResult, _rng: &mut _| match step {
            0 => Op::Compute { ns: 1_000_000 },
            1 => Op::Exec { ns: 500_000 },
            2 => Op::Compute { ns: 1_000_000 },
            _ => Op::Exit,
        })
    };
    for (policy, moves) in [("cfs@3.0", 1), ("cfs@4.19", 0), ("cfs@5.15", 0), ("eevdf@6.18", 0)] {
        let p = schedlab_policies::policy_by_name(policy, &[]).unwrap();
        let cfg = RunConfig { seed: 1, check: true, ..RunConfig::default() };
        let r = Engine::new(Topology::parse("1x1x2x1").unwrap(), broadwell(), p, cfg, "lone", Box::new(lone())).run();
        assert!(r.violations.is_empty(), "{policy}: {:#?}", r.violations);
        assert_eq!((r.total().exec_pushes, r.tasks[0].migrations), (moves, moves), "{policy}: a lone task's exec");
    }
    for (policy, pushed) in [("cfs@4.19", true), ("eevdf@6.18", true), ("ule@post", false), ("4bsd", false)] {
        let r = common::run("1x1x2x1", policy, "shell copies=3 concurrent=1 duration_ms=300", 2);
        assert!(r.violations.is_empty(), "{policy}: {:#?}", r.violations);
        let pushes = r.total().exec_pushes;
        assert_eq!(pushes > 0, pushed, "{policy}: {pushes} exec pushes");
        if pushed {
            // Each push is a migration of the exec'ing task.
            let migrations: u64 = r.tasks.iter().map(|t| t.migrations).sum();
            assert!(migrations >= pushes, "{policy}: {migrations} migrations, {pushes} pushes");
        }
    }
}

/// A futex wakeup is not a sync wakeup (`futex_wake()` wakes through
/// `wake_up_process()`, no `WF_SYNC`): a waker alone on its CPU does not pull the
/// wakee off its busy previous CPU, as v4.19's `wake_affine_idle()` would for a
/// pipe's sync wakeup. Main forks the sleeper (placed on the idle CPU 1, where it
/// blocks on a futex) and a spinner (CPU 1 again, idle once the sleeper slept),
/// computes alone on CPU 0, then wakes the sleeper.
#[test]
fn a_futex_wakeup_is_not_sync() {
    const KEY: u64 = 7;
    let mut forked = 0;
    let main = FnProgram::new(move |step, _last: OpResult, _rng: &mut _| {
        if forked < 2 {
            forked += 1;
            let child: Box<dyn schedlab_core::program::Program> = if forked == 1 {
                Box::new(FnProgram::new(|step, _last: OpResult, _rng: &mut _| match step {
                    0 => Op::FutexWait { key: KEY, expected: 0 },
                    1 => Op::Compute { ns: 100_000 },
                    _ => Op::Exit,
                }))
            } else {
                Box::new(FnProgram::new(|step, _last: OpResult, _rng: &mut _| match step {
                    0 => Op::Compute { ns: 20_000_000 },
                    _ => Op::Exit,
                }))
            };
            return Op::Fork { kind: ForkKind::Process, comm: Some(["sleeper", "spinner"][forked - 1].into()), program: child };
        }
        match step {
            2 => Op::Compute { ns: 2_000_000 },
            3 => Op::FutexWake { key: KEY, nr: 1 },
            4 | 5 => Op::WaitChild,
            _ => Op::Exit,
        }
    });
    let policy = schedlab_policies::policy_by_name("cfs@4.19", &[]).unwrap();
    let cfg = RunConfig { seed: 1, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse("1x1x2x1").unwrap(), broadwell(), policy, cfg, "main", Box::new(main)).run();
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let sleeper = r.tasks.iter().find(|t| t.comm == "sleeper").unwrap();
    assert_eq!(sleeper.migrations, 0, "the wakee stays on its previous CPU: {:?}", r.tasks);
}

/// The wake_wide() history goes down the process tree: the launcher's
/// wakee_flips reach the workload's first task and, through every fork, the
/// hackbench workers. Receivers wake senders rarely, so what they inherit is
/// what keeps a sender's wakeup of them out of wake_affine(): with 3 (what
/// validate's own process carries on this project's hosts) nearly every
/// cross-CPU wakeup is wide and stays on the previous CPU; with 0 (a launcher
/// that woke nobody) receivers start below sd_llc_size and are pulled to their
/// sender's CPU. The hosts migrate about 6x more from such a launcher
/// (docs/validate.md); here the gap must be at least 4x.
#[test]
fn the_launchers_wakee_flips_are_inherited_down_to_the_workers() {
    let migrations = |flips: u64| {
        let topo = Topology::parse("kvm-2").unwrap();
        let w = Workload::parse("hackbench groups=1 loops=300 ipc=pipe").unwrap();
        let policy = schedlab_policies::policy_by_name("eevdf@6.18+HOST_VCPU_PACK", &[]).unwrap();
        let launcher = Launcher { wakee_flips: flips };
        let cfg = RunConfig { seed: 1, check: true, autogroup: true, launcher, ..RunConfig::default() };
        let r = Engine::new(topo, common::unit_profile(), policy, cfg, w.main_comm(), w.main_program()).run();
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        r.total().migrations_in
    };
    let (quiet, busy) = (migrations(0), migrations(3));
    assert!(quiet >= 4 * busy.max(1), "launcher with 0 flips: {quiet} migrations; with 3: {busy}");
}
