//! `schedlab bench`: the simulator's speed on fixed scenarios. Events, simulated
//! messages and simulated seconds per wall second, and peak memory, for a small, a
//! two-socket and a 1024-CPU machine and for 10 000 tasks. Speed targets live
//! here, never in timed unit tests.

use std::time::Instant;

use serde_json::json;

use schedlab_core::RunConfig;
use schedlab_spec::run::{check_result, parse_topology};
use schedlab_spec::{Failure, RunSpec};
use schedlab_workloads::Workload;

/// One fixed scenario.
struct Scenario {
    name: &'static str,
    topology: &'static str,
    machine: &'static str,
    workload: &'static str,
    /// The same at about a tenth of the work, for `--quick`.
    quick_workload: &'static str,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "x6-2-20 hackbench g1",
        topology: "x6-2-20",
        machine: "broadwell-ep",
        workload: "hackbench groups=1 loops=10000",
        quick_workload: "hackbench groups=1 loops=1000",
    },
    Scenario {
        name: "2x1x22x2 hackbench g8",
        topology: "2x1x22x2",
        machine: "broadwell-ep",
        workload: "hackbench groups=8 loops=2000",
        quick_workload: "hackbench groups=8 loops=200",
    },
    Scenario {
        name: "8x2x32x2 hackbench g64",
        topology: "8x2x32x2",
        machine: "broadwell-ep",
        workload: "hackbench groups=64 loops=500",
        quick_workload: "hackbench groups=64 loops=50",
    },
    // 250 groups of 20 senders and 20 receivers: 10 000 tasks on 112 CPUs.
    Scenario {
        name: "cascadelake-2s 10k tasks",
        topology: "cascadelake-2s",
        machine: "cascadelake",
        workload: "hackbench groups=250 loops=20 ipc=pipe",
        quick_workload: "hackbench groups=250 loops=2 ipc=pipe",
    },
];

/// Policies measured: the reference queue, CFS of the seeds' kernels, and EEVDF
/// beside CFS 5.15 (whose placement and balancer it shares).
const POLICIES: &[&str] = &["fifo", "cfs@4.19", "cfs@5.15", "eevdf@6.6", "eevdf@6.12", "eevdf@6.18"];

/// Peak resident memory of this process so far (VmHWM), in KiB, if Linux says.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs every scenario in a child process of its own, so each row's peak memory
/// is that scenario's alone, `repeat` times: each round runs every policy and
/// scenario once, so a machine that speeds up or slows down during the benchmark
/// moves every row alike. Prints a table of the median round per row, or with
/// `json` one JSON document.
pub fn run(quick: bool, json: bool, repeat: usize) -> Result<(), Failure> {
    if !(1..=100).contains(&repeat) {
        return Err(Failure::Input(schedlab_core::SpecError::new("repeat", repeat.to_string(), "an integer from 1 to 100")));
    }
    let exe = std::env::current_exe().map_err(|e| Failure::Run(format!("bench: cannot find own executable: {e}")))?;
    // rounds[k][(policy, scenario)]: round k's row for each cell, in table order.
    let mut rounds: Vec<Vec<serde_json::Value>> = Vec::new();
    for round in 0..repeat {
        if !json {
            eprintln!("schedlab bench: round {} of {repeat}", round + 1);
        }
        let mut rows = Vec::new();
        for policy in POLICIES {
            for i in 0..SCENARIOS.len() {
                rows.push(run_child(&exe, i, policy, quick)?);
            }
        }
        rounds.push(rows);
    }
    let rows: Vec<serde_json::Value> = (0..rounds[0].len()).map(|c| median_row(&rounds, c)).collect::<Result<_, _>>()?;
    if json {
        let doc = json!({ "seed": 1, "quick": quick, "repeat": repeat, "rows": rows, "eevdf_ratios": eevdf_ratios(&rounds) });
        println!("{}", serde_json::to_string_pretty(&doc).expect("a json! value serialises"));
        return Ok(());
    }
    println!("schedlab bench: seed 1, {repeat} round(s), the median shown (each row in its own process; peak_MiB = its VmHWM)");
    println!(
        "{:<26} {:<10} {:<12} {:>6} {:>6} {:>10} {:>7} {:>7} {:>9} {:>8} {:>7} {:>12} {:>9}",
        "scenario",
        "policy",
        "machine",
        "cpus",
        "tasks",
        "events",
        "wall_s",
        "spread",
        "Mevents/s",
        "Mmsg/s",
        "sim_s",
        "sim_s/wall_s",
        "peak_MiB"
    );
    for row in &rows {
        println!("{}", text_row(row));
    }
    println!("messages/s relative to cfs@5.15 on the same scenario, the median of the rounds' ratios [min-max]:");
    for r in eevdf_ratios(&rounds) {
        let cells: Vec<String> = r["ratios"]
            .as_array()
            .expect("built as an array")
            .iter()
            .map(|c| {
                let f = |k: &str| c[k].as_f64().unwrap_or(0.0);
                format!("{} {:.2} [{:.2}-{:.2}]", c["policy"].as_str().unwrap_or(""), f("median"), f("min"), f("max"))
            })
            .collect();
        println!("  {:<26} {}", r["scenario"].as_str().unwrap_or(""), cells.join("  "));
    }
    Ok(())
}

/// One scenario of one policy in a child process; its JSON row.
fn run_child(exe: &std::path::Path, index: usize, policy: &str, quick: bool) -> Result<serde_json::Value, Failure> {
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["bench", "--one", &index.to_string(), "--policy", policy]);
    if quick {
        cmd.arg("--quick");
    }
    let out = cmd.output().map_err(|e| Failure::Run(format!("bench: {e}")))?;
    if !out.status.success() {
        return Err(Failure::Run(format!("bench scenario {index} failed: {}", String::from_utf8_lossy(&out.stderr))));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| Failure::Run(format!("bench scenario {index}: unreadable result: {e}")))
}

/// The median of the middle values (the lower middle of an even count).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[(xs.len() - 1) / 2]
}

/// The smallest and the largest of `xs` (positive values).
fn min_max(xs: &[f64]) -> (f64, f64) {
    xs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Cell `c` over the rounds: the round with the median wall time, with every
/// round's wall time beside it (`wall_s_rounds`) and the largest peak memory.
/// The rounds simulate the same run, so their digests must agree: if not, the
/// simulator is not deterministic, and the benchmark says so instead of timing it.
fn median_row(rounds: &[Vec<serde_json::Value>], c: usize) -> Result<serde_json::Value, Failure> {
    let walls: Vec<f64> = rounds.iter().map(|r| r[c]["wall_s"].as_f64().unwrap_or(0.0)).collect();
    let mid = median(walls.clone());
    let k = walls.iter().position(|&w| w == mid).expect("the median is one of the values");
    let mut row = rounds[k][c].clone();
    let peak = rounds.iter().map(|r| r[c]["peak_rss_mib"].as_f64().unwrap_or(0.0)).fold(0.0, f64::max);
    row["peak_rss_mib"] = json!(peak);
    row["wall_s_rounds"] = json!(walls);
    let digests: Vec<&serde_json::Value> = rounds.iter().map(|r| &r[c]["digest"]).collect();
    if digests.windows(2).any(|w| w[0] != w[1]) {
        return Err(Failure::Run(format!(
            "bench: {} {} gave two digests over the rounds: {digests:?}",
            row["scenario"], row["policy"]
        )));
    }
    Ok(row)
}

/// Each EEVDF release's simulated messages per wall second over cfs@5.15's on the
/// same scenario (the EEVDF issue asks for at least 0.85): the ratio is taken
/// within each round, so both sides saw the machine in the same state, and the
/// median and range of the rounds' ratios reported.
fn eevdf_ratios(rounds: &[Vec<serde_json::Value>]) -> Vec<serde_json::Value> {
    let rate = |rows: &[serde_json::Value], policy: &str, scenario: &str| {
        rows.iter().find(|r| r["policy"] == policy && r["scenario"] == scenario).and_then(|r| r["messages_per_s"].as_f64())
    };
    let mut out = Vec::new();
    for sc in SCENARIOS {
        let mut cells = Vec::new();
        for p in ["eevdf@6.6", "eevdf@6.12", "eevdf@6.18"] {
            let ratios: Vec<f64> =
                rounds.iter().filter_map(|rows| Some(rate(rows, p, sc.name)? / rate(rows, "cfs@5.15", sc.name)?)).collect();
            if ratios.is_empty() {
                continue;
            }
            let (lo, hi) = min_max(&ratios);
            cells.push(json!({ "policy": p, "median": median(ratios.clone()), "min": lo, "max": hi, "rounds": ratios }));
        }
        out.push(json!({ "scenario": sc.name, "ratios": cells }));
    }
    out
}

fn text_row(r: &serde_json::Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    // The rounds' wall times around the median, as a percentage of it.
    let walls: Vec<f64> =
        r["wall_s_rounds"].as_array().map(|a| a.iter().filter_map(|w| w.as_f64()).collect()).unwrap_or_default();
    let (lo, hi) = min_max(&walls);
    let spread = if walls.len() > 1 { format!("{:.0}%", (hi - lo) / f("wall_s") * 100.0) } else { "-".to_string() };
    format!(
        "{:<26} {:<10} {:<12} {:>6} {:>6} {:>10} {:>7.3} {:>7} {:>9.2} {:>8.2} {:>7.3} {:>12.3} {:>9.1}",
        s("scenario"),
        s("policy"),
        s("machine"),
        f("cpus"),
        f("tasks"),
        f("events"),
        f("wall_s"),
        spread,
        f("events_per_s") / 1e6,
        f("messages_per_s") / 1e6,
        f("sim_s"),
        f("sim_s_per_wall_s"),
        f("peak_rss_mib")
    )
}

/// One scenario, one JSON row (the child process of `run`).
pub fn run_one(index: usize, policy: &str, quick: bool) -> Result<(), Failure> {
    let Some(sc) = SCENARIOS.get(index) else {
        return Err(Failure::Input(schedlab_core::SpecError::new(
            "bench scenario",
            index.to_string(),
            format!("0..{}", SCENARIOS.len()),
        )));
    };
    let w = if quick { sc.quick_workload } else { sc.workload };
    let workload = Workload::parse(w)?;
    // Every sender writes `loops` messages to each receiver of its group.
    let messages = match &workload {
        Workload::Hackbench(h) => h.groups * h.fds * h.fds * h.loops,
        _ => 0,
    };
    let spec = RunSpec {
        topo: parse_topology(sc.topology)?,
        machine: schedlab_spec::machines::load(sc.machine)?,
        policy: policy.into(),
        sysctls: Vec::new(),
        workload,
        cfg: RunConfig { seed: 1, check: false, ..RunConfig::default() },
    };
    schedlab_policies::policy_by_name(policy, &[])?;
    let engine = spec.engine();
    let t0 = Instant::now();
    let r = engine.run();
    let wall = t0.elapsed().as_secs_f64().max(1e-9);
    check_result(&r, false)?;
    let row = json!({
        "scenario": sc.name,
        "topology": sc.topology,
        "machine": sc.machine,
        "workload": w,
        "policy": policy,
        "cpus": r.ncpus,
        "tasks": r.task_count(),
        "events": r.events,
        "messages": messages,
        "wall_s": wall,
        "events_per_s": r.events as f64 / wall,
        "messages_per_s": messages as f64 / wall,
        "sim_s": r.end_ns as f64 / 1e9,
        "sim_s_per_wall_s": r.end_ns as f64 / 1e9 / wall,
        "peak_rss_mib": peak_rss_kib().unwrap_or(0) as f64 / 1024.0,
        "digest": format!("{:016x}", r.digest),
    });
    println!("{row}");
    Ok(())
}
