//! `schedlab reproduce NAME`: a seed's published experiment, simulated, printed
//! side by side with the published table and checked against the targets.

use crate::cli::parse_topology;
use crate::compare::{self, Comparison, Row};
use crate::Failure;
use schedlab_core::error::SpecError;

/// One published row of the steal seed (Sistare, "[v3,08/10] sched/fair: Steal work
/// from an overloaded CPU when CPU goes idle", LKML, 9 Nov 2018): X6-2, 1 socket ×
/// 10 cores × 2 threads, Xeon E5-2630 v4, `hackbench <grps> process 100000`,
/// sched_wakeup_granularity_ns=15000000; per-CPU averages of schedstat deltas.
pub struct StealRow {
    pub groups: u64,
    pub base_time_s: f64,
    pub base_busy: f64,
    pub base_sched: f64,
    pub base_idle: f64,
    pub base_wake: f64,
    pub base_find: f64,
    pub new_time_s: f64,
    pub new_busy: f64,
    pub new_sched: f64,
    pub new_idle: f64,
    pub new_wake: f64,
    pub new_find: f64,
    pub new_steal: f64,
    pub speedup: f64,
}

#[rustfmt::skip]
pub const STEAL_PUBLISHED: [StealRow; 5] = [
    StealRow { groups: 1, base_time_s: 8.084, base_busy: 75.02, base_sched: 105476.0, base_idle: 46291.0, base_wake: 59183.0, base_find: 0.31,
               new_time_s: 5.938, new_busy: 96.80, new_sched: 31255.0, new_idle: 7190.0, new_wake: 24061.0, new_find: 0.63, new_steal: 7433.0, speedup: 36.1 },
    StealRow { groups: 2, base_time_s: 13.892, base_busy: 85.33, base_sched: 190225.0, base_idle: 70958.0, base_wake: 119264.0, base_find: 0.45,
               new_time_s: 11.491, new_busy: 99.23, new_sched: 74097.0, new_idle: 4578.0, new_wake: 69512.0, new_find: 0.84, new_steal: 19463.0, speedup: 20.9 },
    StealRow { groups: 3, base_time_s: 19.668, base_busy: 89.04, base_sched: 263896.0, base_idle: 87047.0, base_wake: 176850.0, base_find: 0.49,
               new_time_s: 16.987, new_busy: 99.66, new_sched: 115824.0, new_idle: 1985.0, new_wake: 113826.0, new_find: 0.77, new_steal: 24707.0, speedup: 15.8 },
    StealRow { groups: 4, base_time_s: 25.279, base_busy: 91.28, base_sched: 322171.0, base_idle: 94691.0, base_wake: 227474.0, base_find: 0.51,
               new_time_s: 22.504, new_busy: 99.80, new_sched: 167188.0, new_idle: 2385.0, new_wake: 164786.0, new_find: 0.75, new_steal: 29353.0, speedup: 12.3 },
    StealRow { groups: 8, base_time_s: 47.832, base_busy: 94.86, base_sched: 630636.0, base_idle: 144141.0, base_wake: 486322.0, base_find: 0.56,
               new_time_s: 44.441, new_busy: 99.86, new_sched: 389153.0, new_idle: 1616.0, new_wake: 387401.0, new_find: 0.67, new_steal: 38190.0, speedup: 7.6 },
];

/// Experiments `reproduce` knows.
pub const EXPERIMENTS: &[(&str, &str)] =
    &[("steal", "Sistare 2018: hackbench process 100000, groups 1-8, on the 20-CPU X6-2, cfs@4.19 vs cfs@4.19+STEAL")];

/// The steal seed's experiment at a chosen scale.
pub fn steal_comparison(runs: u64, loops: u64, groups: &[u64]) -> Result<Comparison, SpecError> {
    Ok(Comparison {
        topo: parse_topology("x6-2-20")?,
        machine: crate::machines::load("broadwell-ep")?,
        base: "cfs@4.19".into(),
        new: "cfs@4.19+STEAL".into(),
        sysctls: vec![("sched_wakeup_granularity_ns".into(), "15000000".into())],
        workload: format!("hackbench loops={loops} ipc=socket mode=process"),
        vary: Some(("groups".into(), groups.iter().map(|g| g.to_string()).collect())),
        runs,
        hz: 250,
        first_seed: 1,
    })
}

/// Whether each target of the steal issue holds for a row (full scale).
pub fn steal_targets(p: &StealRow, r: &Row) -> Vec<(&'static str, bool)> {
    vec![
        ("STEAL faster", r.pct_speedup() > 0.0),
        ("%speedup within ±8", (r.pct_speedup() - p.speedup).abs() <= 8.0),
        ("base %busy within ±8", (r.base.mean.busy_pct - p.base_busy).abs() <= 8.0),
        ("STEAL %busy ≥ 95", r.new.mean.busy_pct >= 95.0),
        ("%find ≤ 1", r.base.mean.find_pct <= 1.0 && r.new.mean.find_pct <= 1.0),
    ]
}

/// Published and simulated side by side, row by row, with the target checks.
pub fn steal_text(c: &Comparison, rows: &[Row], loops: u64) -> String {
    let mut out = String::new();
    out.push_str("Reproduction: Sistare 2018, steal work from an overloaded CPU when a CPU goes idle\n");
    out.push_str(&format!(
        "X6-2 (x6-2-20, 1x1x10x2), machine broadwell-ep, hackbench <grps> process {loops}, sockets,\n\
         sched_wakeup_granularity_ns=15000000, {} runs per side. pub = published (100000 loops), sim = simulated.\n",
        c.runs
    ));
    if loops != 100_000 {
        out.push_str("(reduced scale: times are not comparable with the published ones; counters scale with loops)\n");
    }
    out.push_str(&format!(
        "\n{:>4} | {:>15} | {:>15} | {:>13} | {:>13} | {:>13} | {:>11} | {:>15} | {:>13}\n",
        "grps", "base time s", "new time s", "%speedup", "base %busy", "new %busy", "%find b/n", "steal/CPU", "steal ×scale"
    ));
    out.push_str(&format!(
        "{:>4} | {:>7} {:>7} | {:>7} {:>7} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>5} {:>5} | {:>7} {:>7} | {:>6} {:>6}\n",
        "",
        "pub",
        "sim",
        "pub",
        "sim",
        "pub",
        "sim",
        "pub",
        "sim",
        "pub",
        "sim",
        "sim b",
        "sim n",
        "pub",
        "sim",
        "pub b",
        "sim b"
    ));
    for r in rows {
        let Some(p) = STEAL_PUBLISHED.iter().find(|p| p.groups.to_string() == r.vary) else { continue };
        out.push_str(&format!(
            "{:>4} | {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>6.1} {:>6.1} | {:>6.2} {:>6.2} | {:>6.2} {:>6.2} | {:>5.2} {:>5.2} | {:>7.0} {:>7.0} | {:>6.0} {:>6.0}\n",
            r.vary,
            p.base_time_s,
            r.base.mean.time_s,
            p.new_time_s,
            r.new.mean.time_s,
            p.speedup,
            r.pct_speedup(),
            p.base_busy,
            r.base.mean.busy_pct,
            p.new_busy,
            r.new.mean.busy_pct,
            r.base.mean.find_pct,
            r.new.mean.find_pct,
            p.new_steal,
            r.new.mean.steal,
            p.new_steal,
            r.new.mean.steal * 100_000.0 / loops as f64,
        ));
    }
    // Counters grow with the loop count: scale the simulated ones to 100000 loops.
    let scale = 100_000.0 / loops as f64;
    out.push_str(&format!("\nPer-CPU schedstat deltas, published vs simulated (simulated × {scale:.1} for the loop count):\n"));
    out.push_str(&format!(
        "{:>4} | {:>15} | {:>15} | {:>15} | {:>11} | {:>15} | {:>15} | {:>15} | {:>11}\n",
        "grps", "base sched", "base idle", "base wake", "base %find", "new sched", "new idle", "new wake", "new %find"
    ));
    for r in rows {
        let Some(p) = STEAL_PUBLISHED.iter().find(|p| p.groups.to_string() == r.vary) else { continue };
        let (b, n) = (&r.base.mean, &r.new.mean);
        out.push_str(&format!(
            "{:>4} | {:>7.0} {:>7.0} | {:>7.0} {:>7.0} | {:>7.0} {:>7.0} | {:>5.2} {:>5.2} | {:>7.0} {:>7.0} | {:>7.0} {:>7.0} | {:>7.0} {:>7.0} | {:>5.2} {:>5.2}\n",
            r.vary,
            p.base_sched,
            b.sched * scale,
            p.base_idle,
            b.idle * scale,
            p.base_wake,
            b.wake * scale,
            p.base_find,
            b.find_pct,
            p.new_sched,
            n.sched * scale,
            p.new_idle,
            n.idle * scale,
            p.new_wake,
            n.wake * scale,
            p.new_find,
            n.find_pct,
        ));
    }
    out.push_str("\nTargets (full scale): ");
    let mut all = true;
    for r in rows {
        let Some(p) = STEAL_PUBLISHED.iter().find(|p| p.groups.to_string() == r.vary) else { continue };
        let missed: Vec<&str> = steal_targets(p, r).into_iter().filter(|(_, ok)| !ok).map(|(n, _)| n).collect();
        if !missed.is_empty() {
            all = false;
            out.push_str(&format!("\n  groups {}: missed {}", r.vary, missed.join(", ")));
        }
    }
    if all {
        out.push_str("all met");
    }
    out.push_str("\n\nSimulated tables in the seed's layout:\n");
    out.push_str(&compare::text(c, rows));
    out
}

/// `schedlab reproduce NAME`.
pub fn run(name: &str, runs: u64, loops: u64, groups: Option<Vec<u64>>, json: bool) -> Result<(), Failure> {
    match name {
        "steal" => {
            let groups = groups.unwrap_or_else(|| STEAL_PUBLISHED.iter().map(|p| p.groups).collect());
            let c = steal_comparison(runs, loops, &groups)?;
            c.validate()?;
            let rows = c.run(std::io::IsTerminal::is_terminal(&std::io::stderr()))?;
            if json {
                println!("{}", compare::json(&c, &rows));
            } else {
                print!("{}", steal_text(&c, &rows, loops));
            }
            Ok(())
        }
        _ => {
            let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.0).collect();
            Err(Failure::Input(SpecError::new("experiment", name, format!("one of: {}", names.join(", ")))))
        }
    }
}
