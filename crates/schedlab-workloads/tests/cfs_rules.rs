//! cfs@4.19 and its STEAL feature in small scenarios, and the steal seed's
//! experiment at reduced scale on the real machine profile.

mod common;

use schedlab_core::program::{FnProgram, ForkKind, Op, OpResult};
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
