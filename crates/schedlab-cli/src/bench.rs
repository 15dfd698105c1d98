//! `schedlab bench`: the simulator's speed on fixed scenarios. Events per second,
//! simulated seconds per wall second and peak memory, for a small, a two-socket and
//! a 1024-CPU machine. Speed targets live here, never in timed unit tests.

use std::time::Instant;

use crate::cli::{check_result, parse_topology, RunSpec};
use crate::Failure;
use schedlab_core::RunConfig;
use schedlab_workloads::Workload;

/// (name, topology, workload, quick workload).
const SCENARIOS: &[(&str, &str, &str, &str)] = &[
    ("x6-2-20 hackbench g1", "x6-2-20", "hackbench groups=1 loops=10000", "hackbench groups=1 loops=1000"),
    ("2x1x22x2 hackbench g8", "2x1x22x2", "hackbench groups=8 loops=2000", "hackbench groups=8 loops=200"),
    ("8x2x32x2 hackbench g64", "8x2x32x2", "hackbench groups=64 loops=500", "hackbench groups=64 loops=50"),
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
/// is that scenario's alone.
pub fn run(quick: bool) -> Result<(), Failure> {
    println!("schedlab bench: machine broadwell-ep, seed 1 (each row in its own process; peak_MiB = its VmHWM)");
    println!(
        "{:<24} {:<10} {:>6} {:>7} {:>12} {:>9} {:>10} {:>9} {:>9} {:>12} {:>10}",
        "scenario", "policy", "cpus", "tasks", "events", "wall_s", "Mevents/s", "Mmsg/s", "sim_s", "sim_s/wall_s", "peak_MiB"
    );
    let exe = std::env::current_exe().map_err(|e| Failure::Run(format!("bench: cannot find own executable: {e}")))?;
    for policy in POLICIES {
        let mut rates = Vec::new();
        for i in 0..SCENARIOS.len() {
            let mut cmd = std::process::Command::new(&exe);
            cmd.args(["bench", "--one", &i.to_string(), "--policy", policy]);
            if quick {
                cmd.arg("--quick");
            }
            let out = cmd.output().map_err(|e| Failure::Run(format!("bench: {e}")))?;
            if !out.status.success() {
                return Err(Failure::Run(format!("bench scenario {i} failed: {}", String::from_utf8_lossy(&out.stderr))));
            }
            let line = String::from_utf8_lossy(&out.stdout).into_owned();
            print!("{line}");
            // The Mevents/s column, fifth from the end (scenario names have spaces).
            let cols: Vec<&str> = line.split_whitespace().collect();
            if let Some(rate) = cols.len().checked_sub(5).and_then(|i| cols[i].parse::<f64>().ok()) {
                rates.push(rate);
            }
        }
        if let (Some(first), Some(last)) = (rates.first(), rates.last()) {
            println!("{policy}: events/s of the 1024-CPU scenario relative to the 20-CPU one: {:.2}", last / first);
        }
    }
    Ok(())
}

/// One scenario, one row (the child process of `run`).
pub fn run_one(index: usize, policy: &str, quick: bool) -> Result<(), Failure> {
    let Some(&(name, topo, workload, quick_workload)) = SCENARIOS.get(index) else {
        return Err(Failure::Input(schedlab_core::SpecError::new(
            "bench scenario",
            index.to_string(),
            format!("0..{}", SCENARIOS.len()),
        )));
    };
    let w = if quick { quick_workload } else { workload };
    let workload = Workload::parse(w)?;
    // Every sender writes `loops` messages to each receiver of its group.
    let messages = match &workload {
        Workload::Hackbench(h) => h.groups * h.fds * h.fds * h.loops,
        _ => 0,
    };
    let spec = RunSpec {
        topo: parse_topology(topo)?,
        machine: crate::machines::load("broadwell-ep")?,
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
    println!(
        "{:<24} {:<10} {:>6} {:>7} {:>12} {:>9.3} {:>10.2} {:>9.2} {:>9.3} {:>12.3} {:>10.1}",
        name,
        policy,
        r.ncpus,
        r.tasks.len(),
        r.events,
        wall,
        r.events as f64 / wall / 1e6,
        messages as f64 / wall / 1e6,
        r.end_ns as f64 / 1e9,
        r.end_ns as f64 / 1e9 / wall,
        peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
    Ok(())
}
