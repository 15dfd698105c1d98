//! Printing one run: text for people, JSON for programs. The text starts with
//! `seed=` and ends with `digest=`, so two runs can be compared by their last line.

use std::fmt::Write;
use std::time::Duration;

use serde_json::json;

use schedlab_core::sched::IrqOffStats;
use schedlab_core::stats::CpuStats;
use schedlab_core::RunResult;

use crate::run::RunSpec;

/// Per-CPU tables are printed in full up to this many CPUs; beyond, as a summary.
const MAX_CPU_ROWS: usize = 64;

const PERCENTILES: [f64; 5] = [50.0, 90.0, 99.0, 99.9, 100.0];

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn cpu_row(out: &mut String, label: &str, s: &CpuStats, elapsed_ns: u64, div: f64) {
    let f = |v: u64| v as f64 / div;
    let _ = writeln!(
        out,
        "{label:>5} {:>6.2} {:>6.0} {:>9.0} {:>8.0} {:>9.0} {:>9.0} {:>10.3} {:>10.3} {:>8.0} {:>7.0} {:>7.0} {:>6.2} {:>6.2}",
        pct(s.busy_ns, elapsed_ns * div as u64),
        f(s.yld_count),
        f(s.sched_count),
        f(s.sched_goidle),
        f(s.ttwu_count),
        f(s.ttwu_local),
        f(s.run_ns) / 1e6,
        f(s.wait_ns) / 1e6,
        f(s.timeslices),
        f(s.idle_entries),
        f(s.migrations_in),
        pct(s.sched_ns, elapsed_ns * div as u64),
        pct(s.find_ns, elapsed_ns * div as u64),
    );
}

pub fn text(spec: &RunSpec, r: &RunResult, wall: Duration) -> String {
    let mut out = String::new();
    let el = r.elapsed_ns();
    let n = r.ncpus;
    let _ = writeln!(out, "seed={}", r.seed);
    let _ = writeln!(
        out,
        "schedlab run: policy={} topology={} ({} CPUs) machine={} hz={} preempt={}{}{}{}",
        r.policy,
        spec.topo.name,
        n,
        spec.machine.name,
        spec.cfg.hz,
        spec.cfg.preempt.name(),
        if spec.cfg.preempt_dynamic { " (PREEMPT_DYNAMIC build)" } else { "" },
        if spec.cfg.autogroup { " autogroup" } else { "" },
        match spec.cfg.launcher.wakee_flips {
            0 => String::new(),
            n => format!(" launcher-wakee-flips={n}"),
        }
    );
    let _ = writeln!(out, "{}", spec.workload.banner());
    let _ = writeln!(out, "{}", spec.workload.result_line(r));
    let total = r.total();
    let _ = writeln!(
        out,
        "elapsed {:.6} s  busy {:.2}%  wasted core-time {:.3} ms ({:.2}% of capacity)",
        el as f64 / 1e9,
        r.busy_pct(),
        r.wasted_ns as f64 / 1e6,
        pct(r.wasted_ns, el * n as u64)
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "per-CPU counters over the timed window (schedstat v15 meaning; time in ms):");
    let _ = writeln!(
        out,
        "{:>5} {:>6} {:>6} {:>9} {:>8} {:>9} {:>9} {:>10} {:>10} {:>8} {:>7} {:>7} {:>6} {:>6}",
        "cpu",
        "busy%",
        "yld",
        "sched",
        "goidle",
        "ttwu",
        "ttwu_loc",
        "run_ms",
        "wait_ms",
        "slices",
        "idle",
        "migr",
        "sch%",
        "find%"
    );
    if n <= MAX_CPU_ROWS {
        for (cpu, s) in r.cpu_stats.iter().enumerate() {
            cpu_row(&mut out, &cpu.to_string(), s, el, 1.0);
        }
    }
    cpu_row(&mut out, "avg", &total, el, n as f64);
    let slice_ms = if total.timeslices == 0 { 0.0 } else { total.run_ns as f64 / total.timeslices as f64 / 1e6 };
    let _ = writeln!(out, "mean timeslice {slice_ms:.3} ms");
    let _ = writeln!(out);
    let h = &r.latency;
    let _ = write!(out, "wakeup-to-run latency (us): n={}", h.len());
    for p in PERCENTILES {
        let label = if p == 100.0 { "max".to_string() } else { format!("p{p}") };
        let _ = write!(out, "  {label}={:.1}", h.value_at_percentile(p) as f64 / 1e3);
    }
    let _ = writeln!(out);
    out.push_str(&irq_off_text(&r.irq_off));
    let tasks = r.task_count();
    let sum = |f: fn(&schedlab_core::engine::TaskSummary) -> u64| r.tasks.iter().map(f).sum::<u64>();
    let _ = writeln!(
        out,
        "tasks {}: run {:.3} s  wait {:.3} s  sleep {:.3} s  switches {}  migrations {}",
        tasks,
        sum(|t| t.run_ns) as f64 / 1e9,
        sum(|t| t.wait_ns) as f64 / 1e9,
        sum(|t| t.sleep_ns) as f64 / 1e9,
        sum(|t| t.switches),
        sum(|t| t.migrations)
    );
    let secs = wall.as_secs_f64().max(1e-9);
    let _ = writeln!(
        out,
        "simulated {:.3} s in {:.3} s wall: {} events, {:.2} M events/s, {:.2} simulated s per wall s",
        r.end_ns as f64 / 1e9,
        secs,
        r.events,
        r.events as f64 / secs / 1e6,
        r.end_ns as f64 / 1e9 / secs
    );
    if spec.cfg.check {
        let _ = writeln!(out, "invariants: checked, none violated");
    }
    let _ = writeln!(out, "digest={:016x}", r.digest);
    out
}

/// The scheduler's interrupts-disabled sections, overall and by the kernel function
/// holding them, and the interrupts they delayed (µs). Empty when the policy
/// reports none.
pub fn irq_off_text(irq: &IrqOffStats) -> String {
    let mut out = String::new();
    if irq.sections.is_empty() {
        return out;
    }
    let us = |ns: u64| ns as f64 / 1e3;
    let dist = |h: &hdrhistogram::Histogram<u64>| {
        format!(
            "n={:<9} p50={:.3}  p99={:.3}  p99.9={:.3}  max={:.3}",
            h.len(),
            us(h.value_at_quantile(0.5)),
            us(h.value_at_quantile(0.99)),
            us(h.value_at_quantile(0.999)),
            us(h.max())
        )
    };
    let _ = writeln!(out, "interrupts-off scheduler sections (us), {:.3} ms in all:", irq.total_ns as f64 / 1e6);
    let _ = writeln!(out, "  {:<14} {}", "all", dist(&irq.sections));
    for (site, h) in &irq.by_site {
        let _ = writeln!(out, "  {:<14} {}", site, dist(h));
    }
    let delayed = irq.delays.len();
    let pct = if irq.interrupts == 0 { 0.0 } else { delayed as f64 * 100.0 / irq.interrupts as f64 };
    let _ = write!(out, "interrupts (IPIs, idle wakeups) delayed by them: {delayed} of {} ({pct:.2}%)", irq.interrupts);
    if delayed > 0 {
        let _ = write!(out, ", delay (us) {}", dist(&irq.delays));
    }
    let _ = writeln!(out);
    out
}

fn irq_off_json(irq: &IrqOffStats) -> serde_json::Value {
    let dist = |h: &hdrhistogram::Histogram<u64>| {
        json!({"count": h.len(), "p50": h.value_at_quantile(0.5), "p99": h.value_at_quantile(0.99),
               "p999": h.value_at_quantile(0.999), "max": h.max()})
    };
    json!({
        "total_ns": irq.total_ns,
        "sections_ns": dist(&irq.sections),
        "by_site_ns": irq.by_site.iter().map(|(k, h)| (k.to_string(), dist(h))).collect::<serde_json::Map<_, _>>(),
        "interrupts": irq.interrupts,
        "delays_ns": dist(&irq.delays),
    })
}

fn stats_json(s: &CpuStats) -> serde_json::Value {
    json!({
        "yld_count": s.yld_count, "sched_count": s.sched_count, "sched_goidle": s.sched_goidle,
        "ttwu_count": s.ttwu_count, "ttwu_local": s.ttwu_local, "run_ns": s.run_ns, "wait_ns": s.wait_ns,
        "timeslices": s.timeslices, "idle_entries": s.idle_entries, "migrations_in": s.migrations_in,
        "sched_ns": s.sched_ns, "find_ns": s.find_ns, "busy_ns": s.busy_ns, "steals": s.steals, "steal_fails": s.steal_fails,
        "switch_steals": s.switch_steals, "steal_restarts": s.steal_restarts,
        "lb_count": s.lb_count, "lb_gained": s.lb_gained, "newidle_skipped": s.newidle_skipped,
        "exec_pushes": s.exec_pushes,
    })
}

/// A workload parameter as JSON: a number when it is one.
fn param_json(v: &str) -> serde_json::Value {
    if let Ok(n) = v.parse::<u64>() {
        json!(n)
    } else if let Ok(x) = v.parse::<f64>() {
        json!(x)
    } else {
        json!(v)
    }
}

pub fn json(spec: &RunSpec, r: &RunResult) -> String {
    let h = &r.latency;
    let v = json!({
        "seed": r.seed,
        "policy": r.policy,
        "topology": spec.topo.name,
        "ncpus": r.ncpus,
        "machine": spec.machine.name,
        "hz": spec.cfg.hz,
        "preempt": spec.cfg.preempt.name(),
        "preempt_dynamic": spec.cfg.preempt_dynamic,
        "autogroup": spec.cfg.autogroup,
        "launcher_wakee_flips": spec.cfg.launcher.wakee_flips,
        "workload": {
            "name": spec.workload.name(),
            "spec": spec.workload.spec(),
            "params": spec.workload.params().into_iter().map(|(k, v)| (k.to_string(), param_json(&v))).collect::<serde_json::Map<_, _>>(),
        },
        "sysctls": spec.sysctls.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "settings": r.settings.iter().map(|(k, v)| (k.clone(), param_json(v))).collect::<serde_json::Map<_, _>>(),
        "rate": spec.workload.throughput(r).map(|(v, unit)| json!({ "value": v, "unit": unit })),
        "results": spec.workload.results(r).into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "elapsed_s": r.elapsed_ns() as f64 / 1e9,
        "elapsed_ns": r.elapsed_ns(),
        "busy_pct": r.busy_pct(),
        "wasted_core_ns": r.wasted_ns,
        "total": stats_json(&r.total()),
        "cpus": r.cpu_stats.iter().map(stats_json).collect::<Vec<_>>(),
        "latency_ns": {
            "count": h.len(),
            "p50": h.value_at_percentile(50.0), "p90": h.value_at_percentile(90.0),
            "p99": h.value_at_percentile(99.0), "p999": h.value_at_percentile(99.9), "max": h.max(),
        },
        "tasks": r.tasks.iter().map(|t| json!({
            "pid": t.pid, "comm": t.comm, "count": t.count, "run_ns": t.run_ns, "user_ns": t.user_ns, "sys_ns": t.sys_ns,
            "wait_ns": t.wait_ns, "sleep_ns": t.sleep_ns,
            "switches": t.switches, "involuntary": t.involuntary, "migrations": t.migrations,
        })).collect::<Vec<_>>(),
        "irq_off": irq_off_json(&r.irq_off),
        "events": r.events,
        "end_ns": r.end_ns,
        "digest": format!("{:016x}", r.digest),
    });
    serde_json::to_string_pretty(&v).expect("a json! value serialises")
}
