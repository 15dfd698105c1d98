//! schbench end to end on a small machine: the latencies it reports follow from
//! what a request is, and the report has schbench's layout.

mod common;

use schedlab_workloads::schbench::{REQUEST_LATENCY, WAKEUP_LATENCY};
use schedlab_workloads::Workload;

#[test]
fn requests_take_their_sleep_and_work_and_workers_wake_quickly_when_cpus_are_free() {
    // 4 workers on 8 CPUs: nobody waits for a CPU, so a request is its 100 µs
    // sleep + 100 µs of work + system-call and wakeup costs, and every worker
    // finishes one request per cycle of a little over 200 µs.
    let spec = "schbench threads=1 workers=4 runtime_ms=500 warmup_ms=50 sleep_us=100 work_us=100";
    let r = common::run("1x1x8x1", "cfs@4.19", spec, 1);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let req = &r.metrics[&REQUEST_LATENCY];
    let wake = &r.metrics[&WAKEUP_LATENCY];
    assert!(req.min() >= 200_000, "request latency below sleep + work: {} ns", req.min());
    assert!(req.value_at_quantile(0.5) < 260_000, "p50 {}", req.value_at_quantile(0.5));
    assert!(wake.value_at_quantile(0.99) < 50_000, "idle CPUs: wakeups are fast, p99 {}", wake.value_at_quantile(0.99));
    // One wakeup per request.
    assert!(req.len().abs_diff(wake.len()) <= 4, "{} vs {}", req.len(), wake.len());
    let rps = req.len() as f64 / (r.elapsed_ns() as f64 / 1e9);
    assert!((14_000.0..20_000.0).contains(&rps), "rps {rps}");
    let out = Workload::parse(spec).unwrap().result_line(&r);
    assert!(out.starts_with("Wakeup Latencies percentiles (usec) runtime 0 (s) ("), "{out}");
    assert!(out.contains("\t* 99.0th: ") && out.contains("\t  min=") && out.contains("average rps: "), "{out}");
}

#[test]
fn an_overloaded_machine_makes_wakeups_wait() {
    // 16 workers whose requests are all work (no sleep) on 2 CPUs: a woken worker
    // queues behind the others, so wakeup latency grows far past the idle case.
    let spec = "schbench threads=1 workers=16 runtime_ms=300 warmup_ms=50 sleep_us=0 work_us=200";
    let r = common::run("1x1x2x1", "cfs@4.19", spec, 2);
    assert!(r.violations.is_empty(), "{:#?}", r.violations);
    let wake = &r.metrics[&WAKEUP_LATENCY];
    assert!(wake.value_at_quantile(0.5) > 200_000, "p50 wakeup {} ns", wake.value_at_quantile(0.5));
}
