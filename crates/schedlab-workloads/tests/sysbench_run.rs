//! sysbench's mutex and threads tests: their time, by hand from the model's
//! cycle counts, and their locking.

mod common;

use schedlab_core::{Engine, MachineProfile, RunConfig, RunResult, Topology};
use schedlab_workloads::{Sysbench, Workload};

fn broadwell() -> MachineProfile {
    MachineProfile::from_toml(include_str!("../../../machines/broadwell-ep.toml"), "broadwell-ep").unwrap()
}

fn run(topo: &str, policy: &str, spec: &str) -> RunResult {
    let w = Workload::parse(spec).unwrap();
    let p = schedlab_policies::policy_by_name(policy, &[]).unwrap();
    let cfg = RunConfig { seed: 1, check: true, ..RunConfig::default() };
    let r = Engine::new(Topology::parse(topo).unwrap(), broadwell(), p, cfg, w.main_comm(), w.main_program()).run();
    assert!(r.violations.is_empty(), "{policy} {topo} {spec}: {:#?}", r.violations);
    r
}

/// One thread of the mutex test does 50 000 times: a random draw (20 cycles),
/// 10 000 empty loop iterations (1.16 cycles each), an uncontended lock (20),
/// the increment (1) and the unlock (20): 11 661 cycles, 0.243 s at 2400 MHz.
/// Two threads on two CPUs take as long; on one CPU, twice as long.
#[test]
fn the_mutex_test_takes_its_loops_time() {
    let expected = 50_000.0 * 11_661.0 / 2.4e9;
    for policy in ["cfs@4.19", "eevdf@6.18", "ule@post"] {
        let one = run("1x1x1x1", policy, "sysbench test=mutex threads=1");
        let t1 = one.elapsed_ns() as f64 / 1e9;
        assert!((t1 / expected - 1.0).abs() < 0.01, "{policy}: {t1} s, expected {expected}");
        assert_eq!(Sysbench::events(&one), 1);
        let two = run("1x1x2x1", policy, "sysbench test=mutex threads=2");
        let t2 = two.elapsed_ns() as f64 / 1e9;
        assert!((t2 / t1 - 1.0).abs() < 0.02, "{policy}: two threads on two CPUs {t2} s, one {t1} s");
        let shared = run("1x1x1x1", policy, "sysbench test=mutex threads=2");
        let ts = shared.elapsed_ns() as f64 / 1e9;
        assert!((ts / t1 - 2.0).abs() < 0.04, "{policy}: two threads on one CPU {ts} s, one {t1} s");
    }
}

/// The threads test: events until the time limit. With one lock for four
/// threads, a thread that yields while holding it makes the others sleep on the
/// futex; with four locks (an event takes lock `events so far % 4`, so two
/// threads still meet on one now and then) they sleep far less. One CPU per
/// thread, so that the locks alone differ: with two threads on a CPU their
/// yields to each other decide the count, and where fork puts the threads
/// (which moves with the new tasks' PELT start) decides that.
#[test]
fn the_threads_test_contends_on_its_locks() {
    let spec = |locks: u64| format!("sysbench test=threads threads=4 time_ms=50 thread_yields=100 thread_locks={locks}");
    let shared = run("1x1x4x1", "cfs@5.15", &spec(1));
    let own = run("1x1x4x1", "cfs@5.15", &spec(4));
    for r in [&shared, &own] {
        let window = r.elapsed_ns() as f64 / 1e9;
        assert!((0.05..0.06).contains(&window), "the run lasts its time limit: {window} s");
        assert!(Sysbench::events(r) > 0);
    }
    let waits = |r: &RunResult| r.tasks.iter().map(|t| t.switches - t.involuntary).sum::<u64>();
    assert!(waits(&shared) > 2 * waits(&own), "one lock: {} voluntary switches, a lock each: {}", waits(&shared), waits(&own));
    assert!(Sysbench::events(&shared) < Sysbench::events(&own));
}
