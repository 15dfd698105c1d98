//! The wake-pull probe and the affinity changes it is made of: a task that
//! shuts itself out of its CPU is moved before its call returns, on policies
//! that model the move; the upstream placements put a sync wakee on its idle
//! previous CPU, as read from their code.

mod common;

use schedlab_core::cpuset::CpuSet;
use schedlab_core::engine::MARK_START;
use schedlab_core::program::{Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::pull::{WOKE_EVEN, WOKE_ODD};
use schedlab_workloads::PullProbe;

/// Marks the window, notes its CPU (metric 1, the CPU plus one), pins itself to
/// the other CPU (or, with `stay`, to the one it is on), and notes its CPU again
/// (metric 2).
struct PinAndLook {
    stay: bool,
    start: Option<usize>,
    step: u32,
}

impl Program for PinAndLook {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        self.step += 1;
        let cpu_of = |last: OpResult| match last {
            OpResult::Count(cpu) => cpu as usize,
            other => panic!("sched_getcpu() gives a CPU, got {other:?}"),
        };
        match self.step {
            1 => Op::Mark { label: MARK_START },
            2 | 5 => Op::GetCpu,
            3 => {
                let start = cpu_of(last);
                self.start = Some(start);
                Op::Record { metric: 1, value: start as u64 + 1 }
            }
            4 => {
                let start = self.start.expect("noted");
                let mut cpus = CpuSet::new(2);
                cpus.set(if self.stay { start } else { 1 - start });
                Op::SetAffinity { cpus }
            }
            6 => Op::Record { metric: 2, value: cpu_of(last) as u64 + 1 },
            _ => Op::Exit,
        }
    }
}

fn pin_and_look(policy: &str, stay: bool) -> RunResult {
    let topo = Topology::parse("kvm-2").unwrap();
    let policy = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 1, check: true, ..RunConfig::default() };
    let program = Box::new(PinAndLook { stay, start: None, step: 0 });
    Engine::new(topo, common::unit_profile(), policy, cfg, "pin", program).run()
}

/// The CPU (plus one) recorded under `metric`.
fn noted(r: &RunResult, metric: u32) -> u64 {
    let h = &r.metrics[&metric];
    assert_eq!(h.len(), 1);
    (1..=2).find(|&v| h.count_at(v) == 1).expect("CPU 0 or 1")
}

/// Pinned to the other CPU, the stopper moves the task there and
/// `sched_getcpu()` after the call says so, one migration; pinned to the CPU it
/// is on, it stays.
#[test]
fn a_task_that_shuts_itself_out_of_its_cpu_runs_elsewhere_when_the_call_returns() {
    for policy in ["cfs@4.19", "cfs@5.15", "eevdf@6.12", "eevdf@6.18"] {
        let r = pin_and_look(policy, false);
        assert!(r.violations.is_empty(), "{policy}: {:#?}", r.violations);
        assert_eq!(noted(&r, 2), 3 - noted(&r, 1), "{policy}: on the other CPU after the call");
        assert_eq!(r.tasks[0].migrations, 1, "{policy}");
        let r = pin_and_look(policy, true);
        assert!(r.violations.is_empty(), "{policy}: {:#?}", r.violations);
        assert_eq!(noted(&r, 2), noted(&r, 1), "{policy}: stays");
        assert_eq!(r.tasks[0].migrations, 0, "{policy}");
    }
}

/// A policy that does not model the stopper's move cannot leave the task where
/// it may not run: the engine reports it instead of running on.
#[test]
fn a_policy_that_cannot_move_a_running_task_reports_it() {
    let r = pin_and_look("ule@post", false);
    assert!(r.violations.iter().any(|v| v.contains("sched_setaffinity")), "{:#?}", r.violations);
}

/// Upstream v5.15 and v6.18 take the waker's CPU in wake_affine() (a sync
/// wakeup from a CPU running only the waker), then select_idle_sibling() finds
/// the wakee's previous CPU idle and returns it: the wakee wakes on CPU 1 in
/// every round, whatever the waker slept. (The project's hosts put it on the
/// waker's CPU in most rounds when the waker slept 200 us:
/// tools/host-wake-pull/README.md.) So does a fresh wakee each round. Every round
/// is counted, even and odd apart.
#[test]
fn upstream_wakes_the_wakee_on_its_idle_previous_cpu() {
    for policy in ["cfs@5.15", "eevdf@6.18"] {
        for w in [
            "pull rounds=200 sleep_us=200",
            "pull rounds=200 sleep_us=200 sleep_odd_us=5",
            "pull rounds=200",
            "pull rounds=200 fresh=1 sleep_us=100",
        ] {
            let r = common::run("kvm-2", policy, w, 1);
            assert!(r.violations.is_empty(), "{policy} {w}: {:#?}", r.violations);
            let [(pe, ne), (po, no)] = PullProbe::pulled(&r);
            assert_eq!((ne, no), (100, 100), "{policy} {w}: every round counted");
            assert!(pe + po <= 2, "{policy} {w}: {pe} + {po} of 200 woke on the waker's CPU");
            assert!(r.metrics.contains_key(&WOKE_EVEN) && r.metrics.contains_key(&WOKE_ODD));
        }
    }
}

/// HOST_VCPU_PACK (the hosts' `sched_vcpu_pack=15`, read from their kernel
/// text) against the probe's cases on the hosts (tools/host-wake-pull/README.md):
/// a waker that sleeps between rounds leaves its CPU room (one runnable task,
/// utilisation under 70%), so the sync wakeup packs the wakee onto it, where
/// upstream wakes the idle previous CPU (hosts: 90-100%); the same with a hog on
/// the previous CPU (hosts 97-98%); a hog on the waker's CPU leaves no room and
/// upstream keeps the idle previous CPU (hosts 0%); a waker that spins 300 us
/// between rounds keeps its CPU's utilisation over the bound (hosts 1-9%).
#[test]
fn host_vcpu_pack_places_as_the_hosts_do_in_the_probes_cases() {
    let policy = "eevdf@6.18+HOST_VCPU_PACK";
    for (w, lo, hi) in [
        ("pull rounds=200 sleep_us=200", 190, 200),
        ("pull rounds=200 spin_us=40 sleep_us=200", 190, 200),
        ("pull rounds=200 sleep_us=200 hog_prev=1", 190, 200),
        ("pull rounds=200 sleep_us=200 hog_waker=1", 0, 2),
        ("pull rounds=200 spin_us=300", 0, 30),
    ] {
        let r = common::run("kvm-2", policy, w, 1);
        assert!(r.violations.is_empty(), "{w}: {:#?}", r.violations);
        let [(pe, ne), (po, no)] = PullProbe::pulled(&r);
        assert_eq!(ne + no, 200, "{w}: every round counted");
        assert!((lo..=hi).contains(&(pe + po)), "{w}: {} of 200 on the waker's CPU, want {lo}..={hi}", pe + po);
    }
}

/// The probe's hogs (pull.c's `--hog-prev`, `--hog-waker`), killed at the end:
/// with the wakee's previous CPU busy, upstream's sync wakeup from a CPU running
/// only the waker keeps the waker's CPU (select_idle_sibling() finds nothing
/// idle), every round; with the waker's CPU busy, wake_affine_weight() keeps the
/// idle previous CPU. (The hosts: 97-98% and 0%.)
#[test]
fn with_a_hog_on_one_side_upstream_places_as_its_code_says() {
    for (w, packed) in [("pull rounds=100 sleep_us=200 hog_prev=1", 100), ("pull rounds=100 sleep_us=200 hog_waker=1", 0)] {
        let r = common::run("kvm-2", "eevdf@6.18", w, 1);
        assert!(r.violations.is_empty(), "{w}: {:#?}", r.violations);
        assert!(!r.timed_out, "{w}: the hogs were killed and reaped");
        let [(pe, ne), (po, no)] = PullProbe::pulled(&r);
        assert_eq!((ne + no), 100, "{w}");
        assert!((pe + po).abs_diff(packed) <= 2, "{w}: {} of 100 on the waker's CPU", pe + po);
    }
}
