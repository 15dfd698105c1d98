//! The newly idle probe (tools/host-newidle): a CPU that goes idle while the
//! other holds a waiting task pulls it at once (`sched_balance_newidle()`), if
//! the CPU expects to idle long enough: v4.19 asks for `sched_migration_cost`
//! (500 us) of average idle, v5.16+ (every EEVDF release) only the domain's
//! measured balancing cost.

mod common;

use schedlab_workloads::NewidleProbe;

/// Every round ends (an arrival or the 200 ms timeout) and is counted once;
/// S and the hog are killed and reaped.
fn checked(policy: &str, w: &str) -> schedlab_core::RunResult {
    let r = common::run("kvm-2", policy, w, 1);
    assert!(r.violations.is_empty(), "{policy} {w}: {:#?}", r.violations);
    assert!(!r.timed_out, "{policy} {w}: the children were killed and reaped");
    let rounds: u64 = NewidleProbe::arrivals(&r).iter().sum();
    assert_eq!(rounds, 40, "{policy} {w}: every round counted");
    r
}

/// With S sleeping 300 us at a time, CPU 1's avg_idle stays below
/// sched_migration_cost (500 us): v4.19 and v5.15 skip the newly idle pass and H
/// reaches CPU 1 through an idle CPU's balance at a tick, anywhere in a sleep
/// (the 50 us window holds a sixth of it); v6.6 and v6.18.3+ gate on the
/// domain's measured cost (a few microseconds here) and pull H at the start of
/// a sleep in every round; v6.18.0's NEWIDLE_COST_BUMP books 1.5 times the cost
/// for every pass that pulls nothing, until the gate shuts as in v5.15.
#[test]
fn the_newly_idle_gate_is_sched_migration_cost_before_v5_16_and_the_domains_cost_after() {
    let w = "newidle rounds=40 sleep_us=300 settle_ms=10";
    for (policy, open) in [
        ("cfs@4.19", false),
        ("cfs@5.15", false),
        ("eevdf@6.6", true),
        ("eevdf@6.18+NO_NEWIDLE_COST_BUMP", true),
        ("eevdf@6.18", false),
    ] {
        let r = checked(policy, w);
        let [at_sleep, later, ..] = NewidleProbe::arrivals(&r);
        if open {
            assert!(at_sleep >= 36, "{policy}: {at_sleep} of 40 at a sleep's start");
        } else {
            assert!(at_sleep <= 12 && later >= 28, "{policy}: {at_sleep} at a sleep's start, {later} later in one");
        }
    }
}

/// Sleeping 2 ms, S gives CPU 1 an avg_idle above sched_migration_cost (it is
/// capped at twice the CPU's max_idle_balance_cost, 1 ms): v5.15's newly idle
/// pass runs too, and pulls H at the start of a sleep in most rounds.
#[test]
fn long_idles_open_the_sched_migration_cost_gate() {
    let r = checked("cfs@5.15", "newidle rounds=40 sleep_us=2000 settle_ms=10");
    let [at_sleep, ..] = NewidleProbe::arrivals(&r);
    assert!(at_sleep >= 36, "cfs@5.15: {at_sleep} of 40 at a sleep's start");
    assert!(NewidleProbe::sleep_mean_us(&r) >= 2000.0);
}
