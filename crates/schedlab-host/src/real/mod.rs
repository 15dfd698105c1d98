//! Real workloads on the host, each the same description the simulator runs
//! (the spec is parsed by schedlab-workloads, so `hackbench groups=2 ipc=pipe`
//! means the same thing on both sides), measured with the kernel's own counters
//! for the whole task tree ([`crate::counters`]).
//!
//! A real run happens in a process of its own: [`run_launched`] has the
//! launcher with no wake history ([`crate::launcher`]) start `schedlab real
//! --in-process` as a new session (setsid: its own process group and, with
//! autogroup, its own scheduling group, like a command typed in a new
//! terminal), which calls [`run_here`] and prints one JSON line. The owner keeps
//! the time limit and Ctrl-C, and kills the whole session on any way out.

pub mod hackbench;
pub mod pipe;
pub mod schbench;
mod sys;

use std::time::Duration;

use schedlab_workloads::Workload;
use serde::{Deserialize, Serialize};

use crate::counters::{CounterMethod, TreeCounters};
use crate::launcher::QuietLauncher;
use crate::run::Outcome;
use crate::HostError;

/// Percentiles of a workload's own latency, ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub name: String,
    pub samples: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    /// Nearest-rank percentiles of `samples` (sorted here).
    pub fn of(name: &str, mut samples: Vec<u64>) -> LatencySummary {
        samples.sort_unstable();
        let at = |q: f64| -> u64 {
            if samples.is_empty() {
                return 0;
            }
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1]
        };
        LatencySummary {
            name: name.to_string(),
            samples: samples.len() as u64,
            p50_ns: at(0.50),
            p90_ns: at(0.90),
            p99_ns: at(0.99),
            p999_ns: at(0.999),
            max_ns: samples.last().copied().unwrap_or(0),
        }
    }
}

/// One real run's measurements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RealResult {
    pub workload: String,
    /// The workload's own measured time (perf bench's "Total time"; schbench's window).
    pub elapsed_ns: u64,
    pub context_switches: u64,
    /// Of them, the switches out of a task still runnable (preempted or
    /// yielding): getrusage()'s ru_nivcsw of this process and its waited-for
    /// children. None where getrusage() failed.
    #[serde(default)]
    pub involuntary_switches: Option<u64>,
    /// None where the migration counter was not available.
    pub cpu_migrations: Option<u64>,
    pub task_clock_ns: u64,
    /// How the counts were obtained.
    pub counters: String,
    pub latencies: Vec<LatencySummary>,
}

/// The workloads that have a real implementation.
pub const REAL_WORKLOADS: &str = "hackbench, pipe, schbench";

/// Refuses a workload that has no real implementation, naming the ones that do.
pub fn check_runnable(w: &Workload) -> Result<(), HostError> {
    match w {
        Workload::Hackbench(_) | Workload::Pipe(_) | Workload::Schbench(_) => Ok(()),
        other => Err(HostError::new(
            format!("workload '{}'", other.main_comm()),
            format!("has no real implementation; real runs exist for: {REAL_WORKLOADS}"),
        )),
    }
}

/// ru_nivcsw of this process (all its threads) and of its waited-for children.
fn involuntary_switches() -> Option<u64> {
    let get = |who| {
        // SAFETY: getrusage fills the struct it is given; both `who` values are valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        (unsafe { libc::getrusage(who, &mut u) } == 0).then_some(u.ru_nivcsw as u64)
    };
    Some(get(libc::RUSAGE_SELF)? + get(libc::RUSAGE_CHILDREN)?)
}

/// Restricts the calling thread (and so everything it creates) to `cpus`.
pub fn set_cpus(cpus: &[usize]) -> Result<(), HostError> {
    let set = crate::sys::cpu_set_of(cpus).map_err(|e| HostError::new(format!("CPUs {cpus:?}"), e))?;
    crate::sys::set_affinity(&set).map_err(|e| HostError::new(format!("CPUs {cpus:?}"), e))
}

/// Runs `w` in this process, counting the whole tree it creates by `method`
/// (its tasks carry the workload's comm, which the caller has given this
/// thread). In process mode the caller must be single-threaded (workers are
/// forked).
pub fn run_here(spec: &str, w: &Workload, cpus: Option<&[usize]>, method: CounterMethod) -> Result<RealResult, HostError> {
    check_runnable(w)?;
    if let Some(cpus) = cpus {
        set_cpus(cpus)?;
    }
    let counters = TreeCounters::open(method, w.main_comm());
    let involuntary_before = involuntary_switches();
    let mut latencies = Vec::new();
    let elapsed_ns = match w {
        Workload::Hackbench(h) => hackbench::run(h)?,
        Workload::Pipe(p) => pipe::run(p)?,
        Workload::Schbench(b) => {
            let s = schbench::run(b)?;
            latencies.push(LatencySummary::of("wakeup", s.wakeup_ns));
            latencies.push(LatencySummary::of("request", s.request_ns));
            s.window_ns
        }
        _ => unreachable!("checked above"),
    };
    let c = counters.read()?;
    let involuntary = involuntary_switches().zip(involuntary_before).map(|(after, before)| after.saturating_sub(before));
    Ok(RealResult {
        workload: spec.to_string(),
        elapsed_ns,
        context_switches: c.context_switches,
        involuntary_switches: involuntary,
        cpu_migrations: c.cpu_migrations,
        task_clock_ns: c.task_clock_ns,
        counters: c.source.name().to_string(),
        latencies,
    })
}

/// Runs `argv` (a `schedlab real --in-process ...` command line) as a session
/// started by `launcher`, so from a launcher with no wake_wide() history, and
/// reads the [`RealResult`] it prints, within `limit`.
pub fn run_launched(launcher: &mut QuietLauncher, argv: &[String], limit: Duration) -> Result<RealResult, HostError> {
    let (outcome, out) = launcher.run(argv, limit)?;
    read_result(outcome, &out, limit)
}

/// The result line a finished `schedlab real --in-process` printed.
fn read_result(outcome: Outcome, out: &str, limit: Duration) -> Result<RealResult, HostError> {
    match outcome {
        Outcome::Exited(s) if s.success() => {}
        Outcome::Exited(s) => return Err(HostError::new("the real run", format!("failed ({s})"))),
        Outcome::Interrupted => return Err(HostError::new("the real run", "interrupted")),
        Outcome::TimedOut => return Err(HostError::new("the real run", format!("exceeded {} s", limit.as_secs()))),
    }
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or("");
    serde_json::from_str(line).map_err(|e| HostError::new("reading the real run's result", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s = LatencySummary::of("x", (1..=1000).rev().collect());
        assert_eq!((s.samples, s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns, s.max_ns), (1000, 500, 900, 990, 999, 1000));
        let e = LatencySummary::of("x", Vec::new());
        assert_eq!((e.samples, e.p50_ns, e.max_ns), (0, 0, 0));
    }

    #[test]
    fn only_the_real_workloads_run() {
        let w = Workload::parse("tbench clients=1").unwrap();
        let e = check_runnable(&w).unwrap_err().to_string();
        assert!(e.contains("hackbench, pipe, schbench"), "{e}");
    }
}
