//! Every shipped workload on every preset topology under the three EEVDF releases,
//! with `--check`'s invariants on: the engine's (busy time, no runnable task lost)
//! and EEVDF's own after every pick (avg_vruntime recomputed from the queue, the
//! pick equal to a brute-force earliest eligible deadline).

mod common;

use schedlab_core::topology::PRESETS;

const WORKLOADS: &[&str] = &[
    "hackbench groups=2 loops=10 ipc=pipe mode=process",
    "hackbench groups=2 loops=10 ipc=socket mode=thread",
    "pipe loops=200",
    "pipe loops=200 mode=thread",
    "schbench threads=2 workers=4 runtime_ms=30 warmup_ms=5",
    "groupmix tasks=12 shares=2 warmup_ms=20 window_ms=40",
    "tbench clients=3 runtime_ms=20 warmup_ms=5",
    "pft threads=4 mb=20",
    "make jobs=4 scale=0.005",
    "stress-ng pipe=4 timeout_ms=20",
    "context1 copies=2 duration_ms=5",
    "shell copies=2 concurrent=2 duration_ms=20",
    "sysbench test=mutex threads=3 mutex_locks=200",
    "sysbench test=threads threads=3 time_ms=10 thread_locks=2",
];

#[test]
fn every_workload_on_every_preset_runs_clean_under_eevdf() {
    for version in ["eevdf@6.6", "eevdf@6.12", "eevdf@6.18"] {
        for &(preset, ..) in PRESETS {
            for w in WORKLOADS {
                let r = common::run(preset, version, w, 7);
                assert!(r.violations.is_empty(), "{version} {preset} {w}: {:#?}", r.violations);
                assert!(!r.timed_out, "{version} {preset} {w}");
                assert!(r.tasks.len() >= 2 && r.events > 100, "{version} {preset} {w}: ran nothing");
            }
        }
    }
}

#[test]
fn switches_off_run_clean_too() {
    for policy in [
        "eevdf@6.12+NO_DELAY_DEQUEUE",
        "eevdf@6.12+NO_DELAY_ZERO+NO_PLACE_REL_DEADLINE",
        "eevdf@6.6+NO_RUN_TO_PARITY+NO_PLACE_LAG",
        "eevdf@6.18+NO_RUN_TO_PARITY+NO_PICK_BUDDY+NEXT_BUDDY",
    ] {
        for w in WORKLOADS {
            let r = common::run("2x1x4x2", policy, w, 3);
            assert!(r.violations.is_empty(), "{policy} {w}: {:#?}", r.violations);
            assert!(!r.timed_out, "{policy} {w}");
        }
    }
}

#[test]
fn eevdf_runs_are_deterministic() {
    let a = common::run("x6-2-20", "eevdf@6.12", "hackbench groups=2 loops=20 ipc=pipe", 5);
    let b = common::run("x6-2-20", "eevdf@6.12", "hackbench groups=2 loops=20 ipc=pipe", 5);
    assert_eq!((a.digest, a.events), (b.digest, b.events));
}

/// Regression: stress-ng's reader could read the writer's last packet before the
/// writer (preempted at that write's end by the reader it woke, under
/// preempt=full) had said it was the last, then sleep on the empty pipe for ever
/// ("live tasks but no pending event"). The reader now stops after the packet
/// the writer announced before writing it.
#[test]
fn stress_ng_shutdown_never_strands_a_reader_under_full_preemption() {
    use schedlab_core::sched::PreemptModel;
    use schedlab_core::{Engine, RunConfig, Topology};
    for policy in ["eevdf@6.6", "eevdf@6.12", "eevdf@6.18"] {
        for seed in 1..=4 {
            let w = schedlab_workloads::Workload::parse("stress-ng pipe=4 timeout_ms=50").unwrap();
            let cfg = RunConfig { seed, check: true, preempt: PreemptModel::Full, ..RunConfig::default() };
            let r = Engine::new(
                Topology::parse("1x1x4x1").unwrap(),
                common::unit_profile(),
                schedlab_policies::policy_by_name(policy, &[]).unwrap(),
                cfg,
                w.main_comm(),
                w.main_program(),
            )
            .run();
            assert!(r.violations.is_empty(), "{policy} seed {seed}: {:#?}", r.violations);
            assert!(schedlab_workloads::StressNgPipe::bogo_ops(&r) > 0);
        }
    }
}

/// With autogroup the workload runs one level down, in its session's task group:
/// every decision then goes through the group entity (its share, its lag), so the
/// same run takes a different course, and stays clean.
#[test]
fn an_autogrouped_run_goes_through_its_group_entity() {
    use schedlab_core::{Engine, RunConfig, Topology};
    let run = |autogroup: bool| {
        let w = schedlab_workloads::Workload::parse("hackbench groups=2 loops=50 ipc=pipe").unwrap();
        let cfg = RunConfig { seed: 3, check: true, autogroup, ..RunConfig::default() };
        Engine::new(
            Topology::parse("kvm-2").unwrap(),
            common::unit_profile(),
            schedlab_policies::policy_by_name("eevdf@6.18", &[]).unwrap(),
            cfg,
            w.main_comm(),
            w.main_program(),
        )
        .run()
    };
    let (flat, grouped) = (run(false), run(true));
    for r in [&flat, &grouped] {
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
    }
    assert_ne!(flat.digest, grouped.digest);
    // The main task's JoinGroup is one more system call, outside the timed window.
    assert_eq!(flat.tasks.len(), grouped.tasks.len());
}

/// sched_setattr()'s sched_runtime reaches the class: v6.12 gives schbench's
/// workers their 0.1 ms slice (the run takes another course), v6.6 ignores it
/// (the same run, but for the system call's cost).
#[test]
fn a_custom_slice_counts_from_v612_only() {
    let run = |policy: &str, slice: u64| {
        let r = common::run("kvm-2", policy, &format!("schbench threads=1 workers=4 runtime_ms=50 slice_us={slice}"), 2);
        assert!(r.violations.is_empty(), "{policy}: {:#?}", r.violations);
        let switches: u64 = r.tasks.iter().map(|t| t.switches).sum();
        (r.latency.len(), switches)
    };
    assert_ne!(run("eevdf@6.12", 0), run("eevdf@6.12", 100));
    let (old, new) = (run("eevdf@6.6", 0), run("eevdf@6.6", 100));
    assert_eq!(old.1, new.1, "v6.6 has no custom slices");
}
