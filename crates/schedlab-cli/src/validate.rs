//! `schedlab real` and `schedlab validate`: the same workload description run on
//! this host's kernel and in the simulator of that kernel, side by side.
//!
//! A real run is `schedlab real --in-process` started as a session of its own
//! by a launcher with no wake history (schedlab-host's `real::run_launched`,
//! `launcher`); its counters are the kernel's
//! (perf software events, inherited over the whole task tree). The simulated
//! side runs on the host's topology (from sysfs), with a machine profile measured
//! by `calibrate` (fresh unless `--machine` names one), the policy modelling the
//! running kernel's release, its preemption model and its autogroup setting.
//! Real runs come first, one at a time, on a machine otherwise quiet; the
//! simulated runs follow on all cores.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use schedlab_core::error::SpecError;
use schedlab_core::sched::{Launcher, PreemptModel};
use schedlab_core::{MachineProfile, RunConfig, RunResult, Topology};
use schedlab_host::calibrate::{HostSignature, HOST_STATE_FACTOR};
use schedlab_host::counters::{CounterMethod, TreeCounters};
use schedlab_host::launcher::{QuietLauncher, HALVINGS};
use schedlab_host::real::{self, RealResult};
use schedlab_trace::summary;
use schedlab_workloads::schbench::{REQUEST_LATENCY, WAKEUP_LATENCY};
use schedlab_workloads::Workload;

use crate::cli::{ValidateArgs, ValidateFormat};
use schedlab_spec::run::check_result;
use schedlab_spec::suite::{load_suite, SuiteRow, Tolerance};
use schedlab_spec::{Failure, RunSpec};

/// `--cpus`: a CPU list (`0`, `0-3`, `0,2`) of CPUs that are online here.
pub fn parse_cpus(s: &str) -> Result<Vec<usize>, SpecError> {
    let accepted = "a list of online CPUs such as 0, 0-1 or 0,2";
    let mut cpus = schedlab_core::topology::parse_cpu_list(s)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| SpecError::new("cpus", s, accepted))?;
    cpus.sort_unstable();
    cpus.dedup();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|o| schedlab_core::topology::parse_cpu_list(o.trim()))
        .unwrap_or_default();
    if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
        return Err(SpecError::new("cpus", s, format!("{accepted} (CPU {c} is not online)")));
    }
    Ok(cpus)
}

/// The host's topology, or the part of it on `cpus` (renumbered from 0 in
/// order), read from sysfs.
pub fn host_topology(cpus: Option<&[usize]>) -> Result<Topology, SpecError> {
    let raw = |p: &str| std::fs::read_to_string(format!("/sys/devices/system/{p}")).ok();
    let Some(sel) = cpus else { return Topology::from_sysfs(&raw) };
    let map_list = |text: String| -> String {
        let old = schedlab_core::topology::parse_cpu_list(text.trim()).unwrap_or_default();
        let new: Vec<String> = old.iter().filter_map(|c| sel.iter().position(|s| s == c)).map(|i| i.to_string()).collect();
        new.join(",")
    };
    let read = |p: &str| -> Option<String> {
        if p == "cpu/online" {
            return Some(format!("0-{}", sel.len() - 1));
        }
        if let Some(rest) = p.strip_prefix("cpu/cpu") {
            let (idx, tail) = rest.split_once('/')?;
            let old = *sel.get(idx.parse::<usize>().ok()?)?;
            let text = raw(&format!("cpu/cpu{old}/{tail}"))?;
            return Some(if tail.ends_with("_list") { map_list(text) } else { text });
        }
        let text = raw(p)?;
        Some(if p.starts_with("node/node") && p.ends_with("/cpulist") { map_list(text) } else { text })
    };
    Topology::from_sysfs(&read)
}

/// One real run, as a supervised `schedlab real --in-process`.
fn real_argv(spec: &str, cpus: Option<&[usize]>, counters: CounterMethod) -> Result<Vec<String>, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Host(format!("finding the schedlab binary: {e}")))?;
    let mut argv = vec![exe.display().to_string(), "real".into(), "--in-process".into(), "--workload".into(), spec.into()];
    argv.extend(["--counters".into(), counters.name().into()]);
    if let Some(c) = cpus {
        argv.push("--cpus".into());
        argv.push(c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","));
    }
    Ok(argv)
}

/// The launcher of real runs: `schedlab real --launcher-halvings N` (the
/// host crate's `launcher`), brought to a zero wake_wide() history before the
/// first run.
fn quiet_launcher() -> Result<QuietLauncher, Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure::Host(format!("finding the schedlab binary: {e}")))?;
    progress(&format!(
        "starting the real runs' launcher ({} halvings of its wake_wide() history, about {} s) ...",
        HALVINGS,
        1 + HALVINGS * 11 / 10
    ));
    let argv = vec![exe.display().to_string(), "real".into(), "--launcher-halvings".into(), HALVINGS.to_string()];
    let l = QuietLauncher::start(&argv).map_err(|e| Failure::Host(e.to_string()))?;
    progress_done();
    Ok(l)
}

fn check_linux() -> Result<(), Failure> {
    if std::env::consts::OS != "linux" {
        return Err(Failure::Host(format!("real runs need Linux; this is {}", std::env::consts::OS)));
    }
    Ok(())
}

/// This host's state now ([`HostSignature`], with the two CPUs it was read
/// on; None with one CPU), for `command`'s error.
fn probe_host(command: &str) -> Result<Option<(usize, usize, HostSignature)>, Failure> {
    schedlab_host::calibrate::probe_host_state().map_err(|e| Failure::Host(format!("{command}: reading the host's state: {e:#}")))
}

/// How `schedlab real` reports.
pub struct RealOptions {
    pub json_out: bool,
    /// Read the host's state ([`HostSignature`]) before and after every run.
    pub host_state: bool,
    /// Run once in this process (the launcher's child does).
    pub in_process: bool,
    /// How the runs' tasks are counted.
    pub counters: CounterMethod,
}

/// `schedlab real`: the workload on this host, `runs` times, with its counters.
pub fn real_cmd(spec: &str, runs: u64, cpus: Option<&str>, timeout_s: u64, opts: RealOptions) -> Result<(), Failure> {
    let RealOptions { json_out, host_state, in_process, counters } = opts;
    check_linux()?;
    let w = Workload::parse(spec)?;
    real::check_runnable(&w).map_err(|e| SpecError::new("workload", spec, format!("a workload with a real run ({e})")))?;
    let cpus = cpus.map(parse_cpus).transpose()?;
    if in_process {
        let name = std::ffi::CString::new(w.main_comm()).expect("no NUL in a comm");
        // SAFETY: PR_SET_NAME with a NUL-terminated string: the workers inherit
        // the workload's comm, as the simulated tasks carry it.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        let r = real::run_here(spec, &w, cpus.as_deref(), counters).map_err(|e| Failure::Run(format!("real run: {e}")))?;
        println!("{}", serde_json::to_string(&r).expect("plain data"));
        return Ok(());
    }
    if !(1..=1000).contains(&runs) {
        return Err(SpecError::new("runs", runs.to_string(), "an integer from 1 to 1000").into());
    }
    if !(1..=3600).contains(&timeout_s) {
        return Err(SpecError::new("timeout-s", timeout_s.to_string(), "an integer from 1 to 3600").into());
    }
    schedlab_host::signals::install();
    let argv = real_argv(spec, cpus.as_deref(), counters)?;
    let mut launcher = quiet_launcher()?;
    let state = || -> Result<Option<HostSignature>, Failure> {
        if !host_state {
            return Ok(None);
        }
        Ok(probe_host("real")?.map(|(_, _, sig)| sig))
    };
    let mut results = Vec::new();
    let mut json_runs = Vec::new();
    for _ in 0..runs {
        let before = state()?;
        let r =
            real::run_launched(&mut launcher, &argv, Duration::from_secs(timeout_s)).map_err(|e| Failure::Run(e.to_string()))?;
        let after = state()?;
        if json_out {
            let mut v = serde_json::to_value(&r).expect("plain data");
            if host_state {
                v["host_state_before"] = before.as_ref().map_or(serde_json::Value::Null, signature_json);
                v["host_state_after"] = after.as_ref().map_or(serde_json::Value::Null, signature_json);
            }
            json_runs.push(v);
        } else {
            println!("{}", real_line(&r));
            if host_state {
                let text = |s: &Option<HostSignature>| s.as_ref().map_or_else(|| "- (one CPU)".to_string(), signature_text);
                println!("  host state (cross-CPU cache line / idle-CPU wake): {} before, {} after", text(&before), text(&after));
            }
        }
        results.push(r);
    }
    if json_out {
        println!("{}", serde_json::to_string_pretty(&json_runs).expect("plain data"));
    } else if runs > 1 {
        let med = |f: &dyn Fn(&RealResult) -> f64| median(&results.iter().map(f).collect::<Vec<_>>());
        println!(
            "median of {runs}: {:.3} s, {:.0} context switches, {:.0} CPU migrations",
            med(&|r| r.elapsed_ns as f64 / 1e9),
            med(&|r| r.context_switches as f64),
            med(&|r| r.cpu_migrations.unwrap_or(0) as f64)
        );
    }
    Ok(())
}

fn real_line(r: &RealResult) -> String {
    let mig = r.cpu_migrations.map_or_else(|| "-".to_string(), |m| m.to_string());
    let mut s = format!(
        "{:.3} s  {} context switches  {mig} CPU migrations  {:.3} s task-clock  [{}]",
        r.elapsed_ns as f64 / 1e9,
        r.context_switches,
        r.task_clock_ns as f64 / 1e9,
        r.counters
    );
    for l in &r.latencies {
        s.push_str(&format!(
            "\n  {} latency (us): p50 {} p90 {} p99 {} p99.9 {} max {} ({} samples)",
            l.name,
            l.p50_ns / 1000,
            l.p90_ns / 1000,
            l.p99_ns / 1000,
            l.p999_ns / 1000,
            l.max_ns / 1000,
            l.samples
        ));
    }
    s
}

pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The metrics a row compares, with how each is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    ElapsedS,
    Switches,
    /// The part of the switches where the task was still runnable (preempted):
    /// shown beside them, not judged, to say which kind differs.
    Involuntary,
    Migrations,
    WakeupP50Us,
    WakeupP99Us,
    RequestP99Us,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::ElapsedS => "elapsed_s",
            Metric::Switches => "context_switches",
            Metric::Involuntary => "involuntary_switches",
            Metric::Migrations => "cpu_migrations",
            Metric::WakeupP50Us => "wakeup_p50_us",
            Metric::WakeupP99Us => "wakeup_p99_us",
            Metric::RequestP99Us => "request_p99_us",
        }
    }

    /// What a workload is compared on. schbench runs for a fixed window, so its
    /// elapsed time says nothing: its latencies do.
    pub fn for_workload(w: &Workload) -> &'static [Metric] {
        match w {
            Workload::Schbench(_) => &[
                Metric::Switches,
                Metric::Involuntary,
                Metric::Migrations,
                Metric::WakeupP50Us,
                Metric::WakeupP99Us,
                Metric::RequestP99Us,
            ],
            _ => &[Metric::ElapsedS, Metric::Switches, Metric::Involuntary, Metric::Migrations],
        }
    }

    fn of_real(self, r: &RealResult) -> Option<f64> {
        let lat = |name: &str, f: fn(&real::LatencySummary) -> u64| {
            r.latencies.iter().find(|l| l.name == name).map(|l| f(l) as f64 / 1000.0)
        };
        match self {
            Metric::ElapsedS => Some(r.elapsed_ns as f64 / 1e9),
            Metric::Switches => Some(r.context_switches as f64),
            Metric::Involuntary => r.involuntary_switches.map(|n| n as f64),
            Metric::Migrations => r.cpu_migrations.map(|m| m as f64),
            Metric::WakeupP50Us => lat("wakeup", |l| l.p50_ns),
            Metric::WakeupP99Us => lat("wakeup", |l| l.p99_ns),
            Metric::RequestP99Us => lat("request", |l| l.p99_ns),
        }
    }

    fn of_sim(self, r: &RunResult) -> Option<f64> {
        let q = |metric: u32, q: f64| r.metrics.get(&metric).map(|h| h.value_at_quantile(q) as f64 / 1000.0);
        match self {
            Metric::ElapsedS => Some(r.elapsed_ns() as f64 / 1e9),
            // perf's context-switches counts switches out while a task's counters
            // are attached, so not the last one at exit (perf_event_exit_task()
            // comes first in do_exit()): switches in, less one per task (every
            // task of a validated workload has exited by the end).
            Metric::Switches => Some(r.tasks.iter().map(|t| t.switches).sum::<u64>().saturating_sub(r.task_count()) as f64),
            Metric::Involuntary => Some(r.tasks.iter().map(|t| t.involuntary).sum::<u64>() as f64),
            Metric::Migrations => Some(r.tasks.iter().map(|t| t.migrations).sum::<u64>() as f64),
            Metric::WakeupP50Us => q(WAKEUP_LATENCY, 0.5),
            Metric::WakeupP99Us => q(WAKEUP_LATENCY, 0.99),
            Metric::RequestP99Us => q(REQUEST_LATENCY, 0.99),
        }
    }
}

/// (min, max) of some runs.
/// (min, max); NaN for no values (a row whose real runs were all set aside).
fn range(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// One metric of one row: both sides' runs and the verdict.
#[derive(Clone, Debug)]
pub struct Cell {
    pub metric: Metric,
    pub real: Vec<f64>,
    pub sim: Vec<f64>,
}

impl Cell {
    pub fn real_median(&self) -> f64 {
        median(&self.real)
    }
    pub fn sim_median(&self) -> f64 {
        median(&self.sim)
    }
    pub fn real_range(&self) -> (f64, f64) {
        range(&self.real)
    }
    /// The simulated runs' spread (seeds, and the machine's background threads
    /// where its profile has them), to set beside the real one.
    pub fn sim_range(&self) -> (f64, f64) {
        range(&self.sim)
    }
    /// (sim − real) / real in %, None when the real median is 0 or missing.
    pub fn error_pct(&self) -> Option<f64> {
        let (r, s) = (self.real_median(), self.sim_median());
        (r > 0.0 && s.is_finite()).then(|| 100.0 * (s - r) / r)
    }
    pub fn inside_real_range(&self) -> bool {
        let (lo, hi) = self.real_range();
        let s = self.sim_median();
        s >= lo && s <= hi
    }
    /// Some(true/false) where the metric is judged, None where it is not (a
    /// latency, or migrations where the real count is below the minimum).
    pub fn within(&self, t: &Tolerance) -> Option<bool> {
        let (r, s) = (self.real_median(), self.sim_median());
        if r.is_nan() || s.is_nan() {
            return None;
        }
        match self.metric {
            Metric::ElapsedS => self.error_pct().map(|e| e.abs() <= t.elapsed_pct),
            Metric::Switches => self.error_pct().map(|e| e.abs() <= t.switches_pct),
            Metric::Migrations if r >= t.migrations_min as f64 => {
                Some(s >= r / t.migrations_factor && s <= r * t.migrations_factor)
            }
            _ => None,
        }
    }
}

pub struct RowResult {
    pub name: String,
    pub spec: String,
    pub cells: Vec<Cell>,
}

/// What the simulated side runs as.
#[derive(Clone)]
pub struct SimSide {
    pub topo: Topology,
    /// The machine profile of each state the host was seen in (see [`HostState`]);
    /// the first is the one given or calibrated at the start.
    pub machines: Vec<MachineProfile>,
    pub machine_origin: String,
    pub policy: String,
    pub preempt: PreemptModel,
    pub preempt_origin: String,
    /// CONFIG_PREEMPT_DYNAMIC of the host kernel (so CONFIG_PREEMPTION), and
    /// where that was read.
    pub preempt_dynamic: (bool, String),
    pub autogroup: bool,
    pub hz: u64,
    /// The wake_wide() history the workload's first task inherits.
    pub launcher: Launcher,
}

impl SimSide {
    /// The run of `w` with `seed` on the profile of host state `state`.
    fn spec(&self, w: &Workload, seed: u64, state: usize) -> RunSpec {
        RunSpec {
            topo: self.topo.clone(),
            machine: self.machines[state].clone(),
            policy: self.policy.clone(),
            sysctls: Vec::new(),
            workload: w.clone(),
            cfg: RunConfig {
                seed,
                hz: self.hz,
                preempt: self.preempt,
                preempt_dynamic: self.preempt_dynamic.0,
                autogroup: self.autogroup,
                launcher: self.launcher,
                ..RunConfig::default()
            },
        }
    }
}

/// One progress line, rewritten in place; only on a terminal.
fn progress(msg: &str) {
    use std::io::IsTerminal;
    let mut e = std::io::stderr().lock();
    if e.is_terminal() {
        let _ = write!(e, "\r\x1b[K{msg}");
        let _ = e.flush();
    }
}

/// Ends a progress line, if one was drawn.
fn progress_done() {
    use std::io::IsTerminal;
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

/// A file-name form of a row name.
fn slug(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    s.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-")
}

pub fn validate_cmd(a: &ValidateArgs) -> Result<(), Failure> {
    check_linux()?;
    // Everything is checked before anything runs.
    let suite = load_suite(&a.suite)?;
    let runs = a.runs.unwrap_or(suite.runs);
    if !(1..=100).contains(&runs) {
        return Err(SpecError::new("runs", runs.to_string(), "an integer from 1 to 100").into());
    }
    let sim_seeds = a.sim_seeds.unwrap_or(suite.sim_seeds);
    if !(1..=100).contains(&sim_seeds) {
        return Err(SpecError::new("sim-seeds", sim_seeds.to_string(), "an integer from 1 to 100").into());
    }
    let threads = schedlab_spec::parallel::threads(a.jobs)?;
    let only: Vec<&SuiteRow> = match &a.rows {
        None => suite.rows.iter().collect(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                let r = suite.rows.iter().find(|r| &r.name == n || slug(&r.name) == *n).ok_or_else(|| {
                    let known: Vec<String> = suite.rows.iter().map(|r| slug(&r.name)).collect();
                    SpecError::new("rows", n, format!("row names of the suite: {}", known.join(", ")))
                })?;
                v.push(r);
            }
            v
        }
    };
    let cpus = a.cpus.as_deref().map(parse_cpus).transpose()?;
    let topo = host_topology(cpus.as_deref())?;
    // The host must be able to do what was asked before anything runs: migrations
    // are judged, so they must be countable (`schedlab real` alone falls back to
    // getrusage), and a trace needs a tracefs instance.
    let method = a.counters.method();
    let refused = |e: schedlab_host::HostError| {
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
        Failure::Host(format!(
            "validate: {e} (perf_event_paranoid = {}); run as root or allow perf events for this user",
            paranoid.trim()
        ))
    };
    match TreeCounters::open_exactly(method, "schedlab-check") {
        Ok(_) => {}
        // The real runs fall back as `TreeCounters::open` does: say so.
        Err(quiet) if method == CounterMethod::Quiet => {
            TreeCounters::open_exactly(CounterMethod::Inherited, "schedlab-check").map_err(refused)?;
            eprintln!(
                "validate: counting the real runs with inherited perf counters, which cost their tasks at every switch ({quiet})"
            );
        }
        Err(e) => return Err(refused(e)),
    }
    let release = schedlab_host::kernel::release();
    let policy = match &a.policy {
        Some(p) if p != "host" => p.clone(),
        // The host's own kernel, with its vendor placement option and the
        // delayed-task wakeup its experiments show (docs/validate.md).
        _ => schedlab_spec::run::host_policy()?,
    };
    let policy_class = schedlab_policies::policy_by_name(&policy, &[])?;
    let preempt = schedlab_spec::run::parse_preempt(a.preempt.as_deref(), "host")?;
    schedlab_spec::run::check_preempt_for(preempt, &policy, policy_class.as_ref())?;
    let mut also_policies = Vec::new();
    for p in &a.also_policy {
        let p = if p == "host" { schedlab_spec::run::host_policy()? } else { p.clone() };
        let class = schedlab_policies::policy_by_name(&p, &[]).map_err(|e| SpecError::new("also-policy", &p, e.expected))?;
        schedlab_spec::run::check_preempt_for(preempt, &p, class.as_ref())?;
        also_policies.push(p);
    }
    let preempt_origin = match (&a.preempt, schedlab_host::kernel::preempt_mode()) {
        (Some(_), _) => "--preempt".to_string(),
        (None, Some(h)) => h.source,
        (None, None) => "default (unreadable on this host)".to_string(),
    };
    let autogroup = schedlab_spec::run::parse_autogroup(a.autogroup.as_deref(), "host")?;
    if !(10..=10_000).contains(&a.hz) {
        return Err(SpecError::new("hz", a.hz.to_string(), "an integer from 10 to 10000 (CONFIG_HZ)").into());
    }
    if let Some(dir) = &a.trace {
        if !dir.is_dir() {
            return Err(SpecError::new("trace", dir.display().to_string(), "an existing directory").into());
        }
    }
    let out = a.out.as_deref().map(|p| crate::outputs::check("out", p)).transpose()?;
    let plot_file = a.plot.as_deref().map(crate::plotfile::PlotFile::new).transpose()?;
    if let (Some(o), Some(p)) = (&a.out, &a.plot) {
        crate::outputs::distinct(&[("out", o), ("plot", p)])?;
    }
    if a.trace.is_some() {
        drop(schedlab_host::tracefs::Instance::open(64).map_err(|e| Failure::Host(format!("validate --trace: {e}")))?);
    }
    let (machine, machine_origin) = match &a.machine {
        Some(m) => (schedlab_spec::machines::load(m)?, m.clone()),
        None => {
            progress("calibrating this host (schedlab calibrate) ...");
            let opts = schedlab_host::calibrate::CalibrateOptions { name: "host".into(), quick: a.quick_calibrate };
            let p = schedlab_host::calibrate::calibrate(&opts).map_err(|e| Failure::Run(format!("calibrate: {e:#}")))?;
            progress_done();
            (p, format!("schedlab calibrate{} (fresh)", if a.quick_calibrate { " --quick" } else { "" }))
        }
    };
    // A --preempt of the user's is a model for a kernel built with that one
    // statically; the host's own is of its build.
    let preempt_dynamic = match (&a.preempt, schedlab_host::kernel::preempt_dynamic()) {
        (Some(_), _) => (false, "--preempt (a static build)".to_string()),
        (None, Some(found)) => found,
        (None, None) => (false, "unreadable on this host".to_string()),
    };
    let mut sim = SimSide {
        topo,
        machines: vec![machine],
        machine_origin,
        policy,
        preempt,
        preempt_origin,
        preempt_dynamic,
        autogroup,
        hz: a.hz,
        launcher: Launcher { wakee_flips: a.launcher_wakee_flips },
    };

    // Real runs, one at a time.
    schedlab_host::signals::install();
    // Round-robin over the rows, one run of each per round: the host's own drift
    // (these guests share their machines) then spreads over every row instead of
    // landing on the rows that happen to run during a slow stretch.
    let argvs: Vec<Vec<String>> =
        only.iter().map(|row| real_argv(&row.spec, cpus.as_deref(), method)).collect::<Result<_, _>>()?;
    let mut launcher = quiet_launcher()?;
    // Each kept real run with the host state it ran in.
    let mut real_results: Vec<Vec<(RealResult, usize)>> = only.iter().map(|_| Vec::new()).collect();
    let mut real_traces: Vec<Option<String>> = only.iter().map(|_| None).collect();
    let limit = Duration::from_secs(suite.timeout_s);
    // The host's state is read before every real run and after it (the reading
    // after one run is the one before the next). With a profile calibrated on
    // this host and no --any-state, a run is simulated with the profile of the
    // state it ran in: a state first seen is calibrated then; a run during which
    // the state changed is set aside, and a row short of runs after the rounds
    // gets up to `runs` more attempts.
    let probe_host = || probe_host("validate");
    let mut last_probe = probe_host()?;
    let matched = !a.any_state && schedlab_host::calibrate::is_profile_of_this_host(&sim.machines[0]);
    let mut state = last_probe.map(|(cpu_a, cpu_b, _)| HostState {
        cpus: (cpu_a, cpu_b),
        states: vec![HostSignature::of_profile(&sim.machines[0])],
        matched,
        runs: Vec::new(),
        extra: ExtraWork::default(),
    });
    let mut counters_used: Option<String> = None;
    let mut plan = RealRunPlan::new(only.len(), runs, Duration::from_secs(suite.extra_budget_s));
    // A calibrate read a state already profiled: no more are tried.
    let mut moved_back = false;
    // The reading before the last real run.
    let mut prev_before: Option<HostSignature> = None;
    loop {
        let kept: Vec<usize> = real_results.iter().map(Vec::len).collect();
        let Some((i, k)) = plan.next_row(&kept, matched) else { break };
        let row = only[i];
        let started = Instant::now();
        if let (true, Some(st), Some((_, _, before))) = (matched, &mut state, last_probe) {
            // A state is calibrated once it has lasted a whole run: the reading
            // before the last run and this one both in it. A single reading
            // outside every profiled state is as often a blip of the idle-wake
            // figure (its readings spread 6-14 us within minutes on some days),
            // and a calibrate costs about 25 s.
            // And once a calibrate has read a state already profiled (the host
            // moved back within its 25 s), states here are shorter than a
            // calibrate: no more are tried, and the budget goes to retries.
            let lasted = prev_before.is_some_and(|p: HostSignature| p.same_state(&before));
            if lasted
                && !moved_back
                && st.state_of(&before).is_none()
                && st.states.len() < MAX_HOST_STATES
                && plan.calibrates < MAX_HOST_STATES as u64
            {
                if plan.over_budget() {
                    plan.cut = true;
                } else {
                    progress(&format!("the host reads {}, another state: calibrating it ...", signature_text(&before)));
                    let opts = schedlab_host::calibrate::CalibrateOptions { name: "host".into(), quick: a.quick_calibrate };
                    let p = schedlab_host::calibrate::calibrate(&opts).map_err(|e| Failure::Run(format!("calibrate: {e:#}")))?;
                    // The host may have moved back meanwhile: a profile of a state
                    // already profiled is not another one.
                    let sig = HostSignature::of_profile(&p);
                    if st.state_of(&sig).is_none() {
                        st.states.push(sig);
                        sim.machines.push(p);
                    } else {
                        moved_back = true;
                    }
                    last_probe = probe_host()?;
                    plan.calibrated(started.elapsed());
                }
            }
        }
        let run_started = Instant::now();
        progress(&format!("real {}/{}: {} (run {k})", plan.next, plan.queue.len(), row.name));
        let r = if k == 1 && a.trace.is_some() {
            let (r, text) = traced_real_run(&mut launcher, &argvs[i], limit)?;
            real_traces[i] = Some(text);
            r
        } else {
            real::run_launched(&mut launcher, &argvs[i], limit).map_err(|e| Failure::Run(format!("{}: {e}", row.name)))?
        };
        counters_used.get_or_insert_with(|| r.counters.clone());
        let ran_in = match (&mut state, last_probe) {
            (Some(st), Some((_, _, before))) => {
                prev_before = Some(before);
                last_probe = probe_host()?;
                let mut run = StateRun {
                    row: row.name.clone(),
                    run: k,
                    before,
                    after: last_probe.map(|p| p.2),
                    elapsed_s: r.elapsed_ns as f64 / 1e9,
                    state: None,
                };
                run.state = st.state_of_run(&run);
                let ran_in = run.state;
                st.runs.push(run);
                if matched {
                    ran_in
                } else {
                    Some(0)
                }
            }
            _ => Some(0),
        };
        plan.ran(i, r.elapsed_ns as f64 / 1e9, run_started.elapsed());
        if let Some(s) = ran_in {
            real_results[i].push((r, s));
        }
    }
    progress_done();
    if let Some(st) = &mut state {
        st.extra = ExtraWork {
            retries: plan.retries,
            calibrates: plan.calibrates,
            spent_s: plan.spent.as_secs_f64(),
            budget_s: suite.extra_budget_s,
            cut: plan.cut,
            moved_back,
            short: (0..only.len())
                .filter(|&i| (real_results[i].len() as u64) < runs)
                .map(|i| (only[i].name.clone(), real_results[i].len()))
                .collect(),
        };
    }

    // Simulated runs, all cores.
    // Each kept real run of a row is simulated `sim_seeds` times, on the profile
    // of the state it ran in (seeds 1, 2, ... in that order); a row with no real
    // run kept, on the first profile.
    let plans: Vec<Vec<usize>> = real_results
        .iter()
        .map(|reals| match reals.is_empty() {
            true => vec![0; (runs * sim_seeds) as usize],
            false => reals.iter().flat_map(|&(_, s)| std::iter::repeat_n(s, sim_seeds as usize)).collect(),
        })
        .collect();
    let sims = simulate(&sim, &only, &plans, threads)?;
    let rows = row_results(&only, &real_results, &sims);
    // The same real runs against each --also-policy.
    let mut also = Vec::new();
    for p in also_policies {
        let side = SimSide { policy: p, ..sim.clone() };
        let sims = simulate(&side, &only, &plans, threads)?;
        let rows = row_results(&only, &real_results, &sims);
        also.push((side.policy, rows));
    }
    let counters = counters_used.unwrap_or_else(|| "-".to_string());
    let header = Header {
        suite: suite.name.clone(),
        runs,
        sim_runs: runs * sim_seeds,
        release,
        counters,
        tolerance: suite.tolerance.clone(),
        host_state: state,
    };
    let text = match a.format {
        ValidateFormat::Text => {
            let mut t = text_report(&header, &sim, &rows);
            for (policy, rows) in &also {
                t.push_str(&text_also_report(&header.tolerance, policy, rows));
            }
            t
        }
        ValidateFormat::Json => json_report(&header, &sim, &rows, &also),
        ValidateFormat::Csv => csv_report(&rows, &also),
    };
    if let Some(dir) = &a.trace {
        let mut t = String::new();
        for ((row, real_text), _) in only.iter().zip(&real_traces).zip(&sims) {
            let Some(real_text) = real_text else { continue };
            t.push_str(&trace_comparison(dir, row, real_text, &sim)?);
        }
        eprint!("{t}");
    }
    if let Some(p) = plot_file {
        p.write(&plot(&header, &rows))?;
    }
    match &out {
        Some(p) => crate::outputs::write_atomically("out", p, text.as_bytes()).map_err(Failure::Run)?,
        None => print!("{text}"),
    }
    Ok(())
}

/// The first real run of a row with the scheduler tracepoints on, in a private
/// tracefs instance removed afterwards whatever happens.
fn traced_real_run(launcher: &mut QuietLauncher, argv: &[String], limit: Duration) -> Result<(RealResult, String), Failure> {
    let inst = schedlab_host::tracefs::Instance::open(16384).map_err(|e| Failure::Host(format!("validate --trace: {e}")))?;
    inst.set_on(true).map_err(|e| Failure::Host(format!("validate --trace: {e}")))?;
    let r = real::run_launched(launcher, argv, limit);
    inst.set_on(false).map_err(|e| Failure::Host(format!("validate --trace: {e}")))?;
    let r = r.map_err(|e| Failure::Run(e.to_string()))?;
    let text = inst.read_trace().map_err(|e| Failure::Host(format!("validate --trace: {e}")))?;
    Ok((r, text))
}

/// Each row's cells: its metrics over the kept real runs and the simulated ones.
fn row_results(rows: &[&SuiteRow], reals: &[Vec<(RealResult, usize)>], sims: &[Vec<RunResult>]) -> Vec<RowResult> {
    rows.iter()
        .zip(reals)
        .zip(sims)
        .map(|((row, reals), sims)| {
            let cells = Metric::for_workload(&row.workload)
                .iter()
                .map(|&m| Cell {
                    metric: m,
                    real: reals.iter().filter_map(|(r, _)| m.of_real(r)).collect(),
                    sim: sims.iter().filter_map(|r| m.of_sim(r)).collect(),
                })
                .collect();
            RowResult { name: row.name.clone(), spec: row.spec.clone(), cells }
        })
        .collect()
}

/// Every row's simulated runs, on `threads` threads: run j of row r with seed
/// j + 1 on the profile of host state `plans[r][j]`.
fn simulate(sim: &SimSide, rows: &[&SuiteRow], plans: &[Vec<usize>], threads: usize) -> Result<Vec<Vec<RunResult>>, Failure> {
    let jobs: Vec<(usize, u64, usize)> = plans
        .iter()
        .enumerate()
        .flat_map(|(r, states)| states.iter().enumerate().map(move |(j, &st)| (r, j as u64 + 1, st)))
        .collect();
    let results = schedlab_spec::parallel::map(&jobs, threads, "simulated side", |&(ri, seed, st)| {
        let r = sim.spec(&rows[ri].workload, seed, st).engine().run();
        check_result(&r, false).map(|_| r)
    });
    let mut per: Vec<Vec<RunResult>> = (0..rows.len()).map(|_| Vec::new()).collect();
    for (&(ri, seed, st), r) in jobs.iter().zip(results) {
        per[ri].push(r.map_err(|e| sim_failure(e, &rows[ri].name, seed, st, &sim.machines[st]))?);
    }
    Ok(per)
}

/// A simulated run that failed, named by its row, seed and host state, with the
/// state's machine profile kept in the temporary directory so that the run can
/// be repeated (`schedlab run --topology host --machine FILE --seed N`): a fresh
/// calibrate's profile exists nowhere else.
fn sim_failure(e: Failure, row: &str, seed: u64, state: usize, machine: &MachineProfile) -> Failure {
    let path = std::env::temp_dir().join(format!("schedlab-validate-state-{}-{}.toml", state + 1, std::process::id()));
    let kept = match crate::outputs::write_atomically("machine profile", &path, machine.to_toml().as_bytes()) {
        Ok(()) => format!("its machine profile: {}", path.display()),
        Err(w) => format!("its machine profile could not be kept ({w})"),
    };
    let what = match e {
        Failure::Run(m) | Failure::Host(m) => m,
        Failure::Input(i) => i.to_string(),
    };
    Failure::Run(format!("simulated side of row '{row}', seed {seed}, host state {}: {what}; {kept}", state + 1))
}

/// Writes both traces of a row into `dir` and prints where they differ most.
fn trace_comparison(dir: &Path, row: &SuiteRow, real_text: &str, sim: &SimSide) -> Result<String, Failure> {
    let base = dir.join(slug(&row.name));
    let real_path = PathBuf::from(format!("{}.real.txt", base.display()));
    let sim_path = PathBuf::from(format!("{}.sim.txt", base.display()));
    crate::outputs::write_atomically("trace", &real_path, real_text.as_bytes()).map_err(Failure::Run)?;
    let tf = crate::tracefile::TraceFile::create(&sim_path, sim.topo.ncpus())?;
    let mut eng = sim.spec(&row.workload, 1, 0).engine();
    eng.set_trace(Box::new(tf.sink()));
    let r = eng.run();
    check_result(&r, false)?;
    tf.finish().map_err(Failure::Run)?;
    let comm = row.workload.main_comm();
    let parse = |p: &Path| crate::trace_summary::summarise(p, &|c: &str| c.starts_with(comm));
    let (rs, ss) = (parse(&real_path)?, parse(&sim_path)?);
    let mut out = format!(
        "\n{} — traces: {} (real, first run) and {} (simulated, seed 1)\n{:<34} {:>12} {:>12} {:>9}\n",
        row.name,
        real_path.display(),
        sim_path.display(),
        "figure (workload tasks)",
        "real",
        "simulated",
        "sim/real"
    );
    for d in summary::compare(&rs, &ss) {
        let ratio = if d.real == 0.0 { "-".to_string() } else { format!("{:.2}", d.sim / d.real) };
        out.push_str(&format!("{:<34} {:>12.1} {:>12.1} {:>9}\n", d.figure, d.real, d.sim, ratio));
    }
    for note in [rs.untraced_note("real"), ss.untraced_note("simulated")].into_iter().flatten() {
        out.push_str(&format!("{note}\n"));
    }
    Ok(out)
}

pub struct Header {
    pub suite: String,
    /// Real runs per row.
    pub runs: u64,
    /// Simulated runs per row (`sim_seeds` per real run).
    pub sim_runs: u64,
    pub release: String,
    pub counters: String,
    pub tolerance: Tolerance,
    /// The host's cross-CPU state around the real runs, against the profile's.
    pub host_state: Option<HostState>,
}

/// The order of the real runs: `runs` rounds over the rows, then, where runs
/// are matched to host states, retries of the rows left short of kept runs
/// (the shortest rows first, each row at most 2 x `runs` attempts) while the
/// budget for work beyond the rounds lasts. That budget pays for the retries
/// and for calibrates of new states ([`Self::calibrated`]).
struct RealRunPlan {
    runs: u64,
    /// Row indexes in the order they run; retries are appended as needed.
    queue: Vec<usize>,
    /// The first `first_rounds` entries of `queue` are the suite's own rounds.
    first_rounds: usize,
    /// How many entries of `queue` have been handed out.
    next: usize,
    /// Runs started per row.
    attempts: Vec<u64>,
    /// Each row's last real run, seconds: short rows are retried shortest first.
    last_elapsed_s: Vec<f64>,
    budget: Duration,
    spent: Duration,
    retries: u64,
    /// Calibrates of states first seen (at most MAX_HOST_STATES).
    calibrates: u64,
    /// The budget ran out with work left.
    cut: bool,
}

impl RealRunPlan {
    fn new(rows: usize, runs: u64, budget: Duration) -> RealRunPlan {
        let queue: Vec<usize> = (0..runs).flat_map(|_| 0..rows).collect();
        RealRunPlan {
            runs,
            first_rounds: queue.len(),
            queue,
            next: 0,
            attempts: vec![0; rows],
            last_elapsed_s: vec![0.0; rows],
            budget,
            spent: Duration::ZERO,
            retries: 0,
            calibrates: 0,
            cut: false,
        }
    }

    /// The next row to run and its attempt number (from 1), given the runs
    /// each row has kept so far; None when the plan is done. Retries only
    /// with `retry` (runs matched to host states).
    fn next_row(&mut self, kept: &[usize], retry: bool) -> Option<(usize, u64)> {
        if self.next == self.queue.len() {
            let runs = self.runs;
            let mut short: Vec<usize> =
                (0..self.attempts.len()).filter(|&i| (kept[i] as u64) < runs && self.attempts[i] < 2 * runs).collect();
            if !retry || short.is_empty() {
                return None;
            }
            short.sort_by(|&a, &b| self.last_elapsed_s[a].total_cmp(&self.last_elapsed_s[b]));
            self.queue.extend(short);
        }
        if self.next >= self.first_rounds && self.over_budget() {
            self.cut = true;
            return None;
        }
        let i = self.queue[self.next];
        self.next += 1;
        self.attempts[i] += 1;
        Some((i, self.attempts[i]))
    }

    fn over_budget(&self) -> bool {
        self.spent >= self.budget
    }

    /// A calibrate of a new state took `took`, from the budget.
    fn calibrated(&mut self, took: Duration) {
        self.calibrates += 1;
        self.spent += took;
    }

    /// Row `i`'s run just handed out ran `elapsed_s` (its own clock) and took
    /// `took` of wall time with its readings; a retry's is spent from the budget.
    fn ran(&mut self, i: usize, elapsed_s: f64, took: Duration) {
        self.last_elapsed_s[i] = elapsed_s;
        if self.next > self.first_rounds {
            self.retries += 1;
            self.spent += took;
        }
    }
}

/// The most host states validate keeps a profile for, and the most calibrates it
/// makes for states first seen during the real runs.
const MAX_HOST_STATES: usize = 3;

/// One real run and the host's state around it.
pub struct StateRun {
    pub row: String,
    /// The row's attempt number, from 1.
    pub run: u64,
    pub before: HostSignature,
    /// None where the reading after the run failed to come.
    pub after: Option<HostSignature>,
    pub elapsed_s: f64,
    /// The host state both readings belong to; None when they differ (the host
    /// moved during the run) or belong to no profiled state.
    pub state: Option<usize>,
}

/// A signature as the reports print it: "36 ns / 1750 ns".
fn signature_text(s: &HostSignature) -> String {
    match s.idle_wake_ns {
        Some(idle) => format!("{:.0} ns / {idle:.0} ns", s.cache_line_ns),
        None => format!("{:.0} ns / -", s.cache_line_ns),
    }
}

fn signature_json(s: &HostSignature) -> serde_json::Value {
    json!({ "cache_line_ns": s.cache_line_ns, "idle_wake_ns": s.idle_wake_ns })
}

/// The host's state around the real runs ([`HostSignature`]: the cross-CPU
/// cache-line transfer and what waking a sleeper on an idle CPU costs the waker,
/// as `calibrate` measures them), read before and after every real run. These
/// guests' readings sit in one of a few states minutes apart, and the real runs'
/// times move with them, so each state is a machine of its own with a profile of
/// its own.
pub struct HostState {
    pub cpus: (usize, usize),
    /// Each profiled state's signature, in the order of `SimSide::machines`.
    pub states: Vec<HostSignature>,
    /// Whether runs are matched to states (a calibrate of this host, no --any-state).
    pub matched: bool,
    /// Every real run, in the order they ran.
    pub runs: Vec<StateRun>,
    /// The work beyond the suite's own runs and what its budget cut.
    pub extra: ExtraWork,
}

/// What the real side did beyond the suite's `runs` rounds (the suite's
/// `extra_budget_s`): retries of runs set aside, calibrates of states first seen.
#[derive(Clone, Debug, Default)]
pub struct ExtraWork {
    pub retries: u64,
    pub calibrates: u64,
    pub spent_s: f64,
    pub budget_s: u64,
    /// The budget was spent with work left (a retry or a calibrate not done).
    pub cut: bool,
    /// A calibrate read a state already profiled: the host moved back within
    /// it, and no further calibrates were tried.
    pub moved_back: bool,
    /// Rows left with fewer kept runs than the suite asks, and how many they kept.
    pub short: Vec<(String, usize)>,
}

impl HostState {
    /// The profiled state a reading belongs to.
    pub fn state_of(&self, reading: &HostSignature) -> Option<usize> {
        self.states.iter().position(|s| s.same_state(reading))
    }

    /// The state of a run: the first profiled state both readings belong to.
    /// (Not the first state of each reading compared: profiles of neighbouring
    /// idle-wake readings overlap, and a run read at 6.4 us before and 9.2 us
    /// after with states profiled at 10.2 and 6.5 us lies wholly in the second;
    /// compared reading by reading it was set aside as a change of state.)
    pub fn state_of_run(&self, run: &StateRun) -> Option<usize> {
        let after = run.after?;
        self.states.iter().position(|s| s.same_state(&run.before) && s.same_state(&after))
    }

    fn text(&self) -> String {
        let mut out = format!(
            "host state: cross-CPU cache line / idle-CPU wake beyond a FUTEX_WAKE of nobody (CPUs {} and {}), read \
             before and after every real run\n",
            self.cpus.0, self.cpus.1
        );
        if !self.matched {
            out.push_str(&format!(
                "           every run kept and simulated with the profile ({}): --any-state, or the profile is not a \
                 calibrate of this host\n",
                signature_text(&self.states[0])
            ));
            return out;
        }
        let per_state: Vec<String> = self
            .states
            .iter()
            .enumerate()
            .map(|(i, sig)| {
                let n = self.runs.iter().filter(|r| r.state == Some(i)).count();
                let origin = if i == 0 { "the first profile" } else { "calibrated when first read" };
                format!("state {} at {} ({origin}): {n} runs", i + 1, signature_text(sig))
            })
            .collect();
        out.push_str(&format!(
            "           each run simulated with its state's profile (readings within {HOST_STATE_FACTOR}x): {}\n",
            per_state.join("; ")
        ));
        let off: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.state.is_none())
            .map(|r| {
                let after = r.after.as_ref().map_or_else(|| "-".to_string(), signature_text);
                format!("{} run {} ({} before, {after} after, {:.3} s)", r.row, r.run, signature_text(&r.before), r.elapsed_s)
            })
            .collect();
        if !off.is_empty() {
            out.push_str(&format!(
                "           set aside and retried (the state changed during the run, or a state beyond {MAX_HOST_STATES}): {}\n",
                off.join("; ")
            ));
        }
        let x = &self.extra;
        out.push_str(&format!(
            "           beyond the suite's runs: {} retries and {} calibrates of new states in {:.0} s (budget {} s{})\n",
            x.retries,
            x.calibrates,
            x.spent_s,
            x.budget_s,
            if x.cut { ", spent with work left" } else { "" }
        ));
        if x.moved_back {
            out.push_str(
                "           a calibrate read a state already profiled (the host moved back within it): no further calibrates\n",
            );
        }
        if !x.short.is_empty() {
            let short: Vec<String> = x.short.iter().map(|(row, kept)| format!("{row} ({kept})")).collect();
            out.push_str(&format!("           rows judged on fewer runs than the suite's (kept): {}\n", short.join(", ")));
        }
        out
    }
}

fn fmt_value(m: Metric, v: f64) -> String {
    if v.is_nan() {
        return "-".into();
    }
    match m {
        Metric::ElapsedS => format!("{v:.3}"),
        _ => format!("{v:.0}"),
    }
}

fn verdict(c: &Cell, t: &Tolerance) -> &'static str {
    match c.within(t) {
        Some(true) => "ok",
        Some(false) => "MISS",
        None => "-",
    }
}

/// Per metric: rows judged, rows within tolerance, mean |error| %.
pub fn summary_lines(rows: &[RowResult], t: &Tolerance) -> Vec<(Metric, usize, usize, Option<f64>)> {
    let mut metrics: Vec<Metric> = Vec::new();
    for r in rows {
        for c in &r.cells {
            if !metrics.contains(&c.metric) {
                metrics.push(c.metric);
            }
        }
    }
    metrics
        .into_iter()
        .map(|m| {
            let cells: Vec<&Cell> = rows.iter().flat_map(|r| r.cells.iter()).filter(|c| c.metric == m).collect();
            let judged: Vec<bool> = cells.iter().filter_map(|c| c.within(t)).collect();
            let errs: Vec<f64> = cells.iter().filter_map(|c| c.error_pct()).map(f64::abs).collect();
            let mae = (!errs.is_empty()).then(|| errs.iter().sum::<f64>() / errs.len() as f64);
            (m, judged.len(), judged.iter().filter(|&&ok| ok).count(), mae)
        })
        .collect()
}

pub fn text_report(h: &Header, sim: &SimSide, rows: &[RowResult]) -> String {
    let t = &h.tolerance;
    let mut out = format!(
        "schedlab validate: suite {}, {} real and {} simulated runs per row\n\
         real:      Linux {}, each run its own session (setsid); counters: {}\n\
         simulated: {} on the host topology ({} CPUs), preempt={} ({}){}, autogroup {}, HZ={}, launcher wakee_flips {}, machine: {}\n{}\
         {}agreement: elapsed within +-{}%, context switches within +-{}%, migrations within {}x where the real median >= {}\n\n",
        h.suite,
        h.runs,
        h.sim_runs,
        h.release,
        h.counters,
        sim.policy,
        sim.topo.ncpus(),
        sim.preempt.name(),
        sim.preempt_origin,
        if sim.preempt_dynamic.0 { format!(" of a PREEMPT_DYNAMIC build ({})", sim.preempt_dynamic.1) } else { String::new() },
        if sim.autogroup { "on" } else { "off" },
        sim.hz,
        sim.launcher.wakee_flips,
        sim.machine_origin,
        host_feature_notes(&sim.policy),
        h.host_state.as_ref().map_or_else(String::new, HostState::text),
        t.elapsed_pct,
        t.switches_pct,
        t.migrations_factor,
        t.migrations_min
    );
    out.push_str(&text_table(t, rows));
    out
}

/// The same real runs against another policy: its table and summary.
pub fn text_also_report(t: &Tolerance, policy: &str, rows: &[RowResult]) -> String {
    format!(
        "\nalso simulated, against the same real runs: {policy}{}\n\n{}",
        host_feature_notes(policy).trim_end().lines().map(|l| format!("\n{l}")).collect::<String>(),
        text_table(t, rows)
    )
}

/// The per-row table and the summary of a text report.
fn text_table(t: &Tolerance, rows: &[RowResult]) -> String {
    let mut out = format!(
        "{:<30} {:<20} {:>12} {:>25} {:>12} {:>25} {:>8} {:>6} {:>6}\n",
        "row", "metric", "real median", "[real min-max]", "simulated", "[sim min-max]", "error", "range", "agree"
    );
    for r in rows {
        for (i, c) in r.cells.iter().enumerate() {
            let (lo, hi) = c.real_range();
            let (sim_lo, sim_hi) = c.sim_range();
            let err = c.error_pct().map_or_else(|| "-".to_string(), |e| format!("{e:+.0}%"));
            out.push_str(&format!(
                "{:<30} {:<20} {:>12} {:>25} {:>12} {:>25} {:>8} {:>6} {:>6}\n",
                if i == 0 { r.name.as_str() } else { "" },
                c.metric.name(),
                fmt_value(c.metric, c.real_median()),
                format!("[{}-{}]", fmt_value(c.metric, lo), fmt_value(c.metric, hi)),
                fmt_value(c.metric, c.sim_median()),
                format!("[{}-{}]", fmt_value(c.metric, sim_lo), fmt_value(c.metric, sim_hi)),
                err,
                match (c.real.is_empty(), c.inside_real_range()) {
                    (true, _) => "-",
                    (false, true) => "in",
                    (false, false) => "out",
                },
                verdict(c, t)
            ));
        }
    }
    out.push_str(
        "\nsummary (rows judged: migrations only where the real median reaches the minimum; latencies are shown, not judged)\n",
    );
    for (m, judged, ok, mae) in summary_lines(rows, t) {
        let mae = mae.map_or_else(|| "-".to_string(), |e| format!("{e:.0}%"));
        let verdict = if judged == 0 { "not judged".to_string() } else { format!("within tolerance {ok}/{judged}") };
        out.push_str(&format!("  {:<20} mean |error| {:>6}   {verdict}\n", m.name(), mae));
    }
    out
}

pub fn json_report(h: &Header, sim: &SimSide, rows: &[RowResult], also: &[(String, Vec<RowResult>)]) -> String {
    let t = &h.tolerance;
    let v = json!({
        "suite": h.suite, "runs": h.runs, "sim_runs": h.sim_runs,
        "real": { "kernel": h.release, "counters": h.counters },
        "simulated": {
            "policy": sim.policy, "ncpus": sim.topo.ncpus(), "preempt": sim.preempt.name(),
            "preempt_source": sim.preempt_origin,
            "preempt_dynamic": sim.preempt_dynamic.0, "preempt_dynamic_source": sim.preempt_dynamic.1, "autogroup": sim.autogroup, "hz": sim.hz, "launcher_wakee_flips": sim.launcher.wakee_flips, "machine": sim.machine_origin,
            // Every profile the simulated side used (one per host state), as
            // `schedlab calibrate` writes them: what reproduces the simulated side.
            "machine_profiles": sim.machines.iter().map(MachineProfile::to_toml).collect::<Vec<_>>(),
        },
        "tolerance": { "elapsed_pct": t.elapsed_pct, "switches_pct": t.switches_pct,
                       "migrations_factor": t.migrations_factor, "migrations_min": t.migrations_min },
        "host_state": h.host_state.as_ref().map(|hs| json!({
            "cpus": [hs.cpus.0, hs.cpus.1],
            "states": hs.states.iter().map(signature_json).collect::<Vec<_>>(), "matched": hs.matched,
            "real_runs": hs.runs.iter().map(|r| json!({
                "row": r.row, "run": r.run, "before": signature_json(&r.before), "after": r.after.as_ref().map(signature_json),
                "elapsed_s": r.elapsed_s, "state": r.state.map(|s| s + 1),
            })).collect::<Vec<_>>(),
            "beyond_runs": {
                "retries": hs.extra.retries, "calibrates": hs.extra.calibrates, "spent_s": hs.extra.spent_s,
                "budget_s": hs.extra.budget_s, "cut": hs.extra.cut, "calibrate_moved_back": hs.extra.moved_back,
                "short_rows": hs.extra.short.iter().map(|(row, kept)| json!({ "row": row, "kept": kept })).collect::<Vec<_>>(),
            },
        })),
        "rows": rows_json(t, rows),
        "summary": summary_json(t, rows),
        // --also-policy: the same real runs against each further policy.
        "also_simulated": also.iter().map(|(policy, rows)| json!({
            "policy": policy, "rows": rows_json(t, rows), "summary": summary_json(t, rows),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).expect("plain data") + "\n"
}

fn rows_json(t: &Tolerance, rows: &[RowResult]) -> Vec<serde_json::Value> {
    rows.iter()
        .map(|r| {
            let cells: Vec<_> = r
                .cells
                .iter()
                .map(|c| {
                    let (lo, hi) = c.real_range();
                    let (sim_lo, sim_hi) = c.sim_range();
                    json!({
                        "metric": c.metric.name(),
                        "real": c.real, "real_median": c.real_median(), "real_min": lo, "real_max": hi,
                        "sim": c.sim, "sim_median": c.sim_median(), "sim_min": sim_lo, "sim_max": sim_hi,
                        "error_pct": c.error_pct(),
                        "inside_real_range": c.inside_real_range(),
                        "within_tolerance": c.within(t),
                    })
                })
                .collect();
            json!({ "row": r.name, "workload": r.spec, "metrics": cells })
        })
        .collect()
}

fn summary_json(t: &Tolerance, rows: &[RowResult]) -> Vec<serde_json::Value> {
    summary_lines(rows, t)
        .into_iter()
        .map(|(m, judged, ok, mae)| json!({"metric": m.name(), "judged": judged, "within": ok, "mean_abs_error_pct": mae}))
        .collect()
}

/// row,workload,metric,side,run,value; with --also-policy, each further
/// policy's simulated runs follow with the side `sim POLICY`.
pub fn csv_report(rows: &[RowResult], also: &[(String, Vec<RowResult>)]) -> String {
    let mut out = String::from("row,workload,metric,side,run,value\n");
    let mut lines = |r: &RowResult, c: &Cell, side: &str, vals: &[f64]| {
        for (i, v) in vals.iter().enumerate() {
            out.push_str(&format!("\"{}\",\"{}\",{},{side},{},{v}\n", r.name, r.spec, c.metric.name(), i + 1));
        }
    };
    for r in rows {
        for c in &r.cells {
            lines(r, c, "real", &c.real);
            lines(r, c, "sim", &c.sim);
        }
    }
    for (policy, rows) in also {
        let side = format!("\"sim {policy}\"");
        for r in rows {
            for c in &r.cells {
                lines(r, c, &side, &c.sim);
            }
        }
    }
    out
}

/// Bars of simulated / real median per row, for elapsed time and context
/// switches (1.0 = agreement).
fn plot(h: &Header, rows: &[RowResult]) -> String {
    use schedlab_report::plot::{bar_chart_svg, Series};
    let cats: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    let ratio = |m: Metric| -> Vec<Option<f64>> {
        rows.iter()
            .map(|r| r.cells.iter().find(|c| c.metric == m && c.real_median() > 0.0).map(|c| c.sim_median() / c.real_median()))
            .collect()
    };
    let series = [(Metric::ElapsedS, "elapsed"), (Metric::Switches, "context switches")]
        .iter()
        .map(|&(m, name)| Series { name: name.to_string(), values: ratio(m), errors: vec![None; rows.len()], hollow: false })
        .collect::<Vec<_>>();
    let title = format!("schedlab validate, suite {}: simulated / real median", h.suite);
    bar_chart_svg(&title, "row", "simulated / real (1 = agreement)", &cats, &series)
}

/// The header's note on each non-upstream host switch the simulated policy uses.
fn host_feature_notes(policy: &str) -> String {
    let notes = [
        ("HOST_VCPU_PACK", "the host's non-upstream sched_vcpu_pack=15 placement, as its kernel text has it, not upstream"),
        (
            "HOST_DEQUEUE_DELAYED_BUSY",
            "a delayed task woken on a busy runqueue is placed anew, as a pipe pair let go from one vCPU shows on the hosts, not upstream",
        ),
    ];
    notes
        .iter()
        .filter(|(name, _)| policy.split('+').any(|f| f == *name))
        .map(|(name, what)| format!("           (+{name}: {what})\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_simulated_run_names_its_row_seed_and_state_and_keeps_the_profile() {
        let machine = MachineProfile::round_numbers();
        let e = sim_failure(Failure::Run("the run did not finish".into()), "pipe thread", 2, 1, &machine);
        let Failure::Run(m) = e else { panic!("a run failure") };
        assert!(m.starts_with("simulated side of row 'pipe thread', seed 2, host state 2: the run did not finish"), "{m}");
        let path = m.rsplit("its machine profile: ").next().unwrap();
        let kept = std::fs::read_to_string(path).unwrap();
        assert_eq!(MachineProfile::from_toml(&kept, path).unwrap(), machine);
        std::fs::remove_file(path).unwrap();
    }

    fn cell(metric: Metric, real: &[f64], sim: &[f64]) -> Cell {
        Cell { metric, real: real.to_vec(), sim: sim.to_vec() }
    }

    #[test]
    fn error_and_verdicts_follow_the_tolerance() {
        let t = Tolerance::default();
        let e = cell(Metric::ElapsedS, &[1.0, 1.1, 0.9], &[1.3, 1.14, 1.12]);
        assert!((e.error_pct().unwrap() - 14.0).abs() < 1e-9);
        assert_eq!(e.within(&t), Some(true));
        assert!(!e.inside_real_range());
        let s = cell(Metric::Switches, &[1000.0, 1000.0, 1000.0], &[1300.0]);
        assert_eq!(s.within(&t), Some(false), "+30% is outside +-25%");
        let m = cell(Metric::Migrations, &[100.0, 120.0, 110.0], &[230.0]);
        assert_eq!(m.within(&t), Some(false), "230 is more than twice 110");
        let m = cell(Metric::Migrations, &[100.0, 120.0, 110.0], &[56.0]);
        assert_eq!(m.within(&t), Some(true), "56 is within half of 110");
        let few = cell(Metric::Migrations, &[10.0, 20.0, 30.0], &[1000.0]);
        assert_eq!(few.within(&t), None, "not judged below 100 real migrations");
        let lat = cell(Metric::WakeupP99Us, &[10.0], &[100.0]);
        assert_eq!(lat.within(&t), None);
    }

    #[test]
    fn summary_counts_judged_rows_and_mean_error() {
        let t = Tolerance::default();
        let rows = vec![
            RowResult { name: "a".into(), spec: "x".into(), cells: vec![cell(Metric::ElapsedS, &[1.0], &[1.1])] },
            RowResult { name: "b".into(), spec: "x".into(), cells: vec![cell(Metric::ElapsedS, &[1.0], &[1.5])] },
        ];
        let s = summary_lines(&rows, &t);
        assert_eq!(s.len(), 1);
        let (m, judged, ok, mae) = s[0];
        assert_eq!((m, judged, ok), (Metric::ElapsedS, 2, 1));
        assert!((mae.unwrap() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn a_real_run_belongs_to_a_state_only_when_both_readings_do() {
        let sig = |cache_line_ns, idle: Option<f64>| HostSignature { cache_line_ns, idle_wake_ns: idle };
        let mut st = HostState {
            cpus: (0, 1),
            states: vec![sig(36.0, Some(1750.0))],
            matched: true,
            runs: Vec::new(),
            extra: ExtraWork::default(),
        };
        let run = |before: HostSignature, after: Option<HostSignature>| StateRun {
            row: "r".into(),
            run: 1,
            before,
            after,
            elapsed_s: 1.0,
            state: None,
        };
        let fast = sig(36.0, Some(1750.0));
        assert_eq!(st.state_of_run(&run(sig(30.0, Some(1800.0)), Some(sig(54.0, Some(1200.0))))), Some(0));
        assert_eq!(st.state_of_run(&run(fast, Some(sig(232.0, Some(1750.0))))), None, "the vCPUs moved during the run");
        assert_eq!(st.state_of_run(&run(fast, Some(sig(36.0, Some(2800.0))))), None, "the idle wake moved during the run");
        assert_eq!(st.state_of_run(&run(fast, None)), None, "no reading after the run is no evidence");
        assert_eq!(st.state_of_run(&run(sig(36.0, None), Some(fast))), Some(0), "a figure one side lacks is not compared");
        assert_eq!(st.state_of(&sig(36.0, Some(2800.0))), None, "a state not yet profiled");
        // Two profiles whose idle-wake readings overlap (validate of 2026-11-28):
        // a run read at 6.4 us and 9.2 us lies wholly within the second.
        let overlapping = HostState {
            cpus: (0, 1),
            states: vec![sig(35.0, Some(10171.0)), sig(32.0, Some(6541.0))],
            matched: true,
            runs: Vec::new(),
            extra: ExtraWork::default(),
        };
        assert_eq!(overlapping.state_of_run(&run(sig(33.0, Some(6377.0)), Some(sig(33.0, Some(9212.0))))), Some(1));
        assert_eq!(
            overlapping.state_of_run(&run(sig(33.0, Some(9212.0)), Some(sig(33.0, Some(9500.0))))),
            Some(0),
            "the first state both fit"
        );
        st.states.push(sig(232.0, Some(1750.0)));
        assert_eq!(st.state_of_run(&run(sig(240.0, Some(1700.0)), Some(sig(226.0, Some(1760.0))))), Some(1));
        for (b, a) in [(fast, fast), (fast, sig(240.0, Some(1750.0))), (sig(240.0, Some(1750.0)), sig(240.0, Some(1750.0)))] {
            let mut r = run(b, Some(a));
            r.state = st.state_of_run(&r);
            st.runs.push(r);
        }
        let text = st.text();
        assert!(text.contains("state 1 at 36 ns / 1750 ns (the first profile): 1 runs"), "{text}");
        assert!(text.contains("state 2 at 232 ns / 1750 ns (calibrated when first read): 1 runs"), "{text}");
        assert!(
            text.contains("set aside and retried") && text.contains("(36 ns / 1750 ns before, 240 ns / 1750 ns after"),
            "{text}"
        );
    }

    #[test]
    fn a_row_without_real_runs_is_not_judged() {
        let c = cell(Metric::ElapsedS, &[], &[1.0]);
        assert!(c.real_range().0.is_nan() && c.real_median().is_nan());
        assert_eq!((c.error_pct(), c.within(&Tolerance::default())), (None, None));
    }

    #[test]
    fn the_default_suite_has_the_seventeen_rows() {
        let s = load_suite("host-default").unwrap();
        assert_eq!(s.rows.len(), 17);
        assert_eq!((s.runs, s.sim_seeds, s.tolerance.clone()), (3, 3, Tolerance::default()));
        assert_eq!(load_suite("host-quick").unwrap().sim_seeds, 1);
    }

    #[test]
    fn a_bad_suite_is_refused_naming_the_field() {
        let dir = std::env::temp_dir().join(format!("schedlab-suite-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            ("name = \"x\"\nrows = []\n", "suite rows"),
            ("name = \"x\"\nrunz = 3\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n", "runz"),
            ("name = \"x\"\nruns = 0\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n", "suite runs"),
            ("name = \"x\"\nsim_seeds = 0\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n", "suite sim_seeds"),
            ("name = \"x\"\nextra_budget_s = 4000\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n", "suite extra_budget_s"),
            ("name = \"x\"\n[[rows]]\nname = \"a\"\nworkload = \"tbench clients=1\"\n", "suite rows.workload"),
            ("name = \"x\"\n[[rows]]\nname = \"a\"\nworkload = \"pipe loops=-1\"\n", "loops"),
            ("name = \"x\"\n[tolerance]\nelapsed_pct = -1.0\n[[rows]]\nname = \"a\"\nworkload = \"pipe\"\n", "elapsed_pct"),
        ];
        for (i, (text, field)) in cases.iter().enumerate() {
            let p = dir.join(format!("s{i}.toml"));
            std::fs::write(&p, text).unwrap();
            let e = load_suite(p.to_str().unwrap()).err().unwrap_or_else(|| panic!("case {i} accepted")).to_string();
            assert!(e.contains(field), "case {i}: {e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn real_runs_go_round_by_round_then_retry_the_short_rows_shortest_first_within_the_budget() {
        let budget = Duration::from_secs(10);
        let mut plan = RealRunPlan::new(3, 2, budget);
        let mut kept = vec![0usize; 3];
        let mut order = Vec::new();
        // The two rounds: every row twice, in row order; row 1 keeps nothing,
        // row 2 one run of two; row 0 runs longest.
        for _ in 0..6 {
            let (i, k) = plan.next_row(&kept, true).unwrap();
            order.push((i, k));
            let keep = match i {
                0 => true,
                1 => false,
                _ => k == 1,
            };
            kept[i] += usize::from(keep);
            plan.ran(i, [9.0, 2.0, 1.0][i], Duration::from_secs(1));
        }
        assert_eq!(order, vec![(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]);
        assert_eq!((plan.retries, plan.spent), (0, Duration::ZERO), "the rounds cost no budget");
        // Retries: the short rows, the shorter first (row 2 before row 1).
        assert_eq!(plan.next_row(&kept, true), Some((2, 3)));
        plan.ran(2, 1.0, Duration::from_secs(4));
        kept[2] += 1;
        assert_eq!(plan.next_row(&kept, true), Some((1, 3)));
        plan.ran(1, 2.0, Duration::from_secs(4));
        // Row 1 still short: one more round of retries, until 2 x runs attempts.
        assert_eq!(plan.next_row(&kept, true), Some((1, 4)));
        plan.ran(1, 2.0, Duration::from_secs(4));
        assert_eq!((plan.retries, plan.spent, plan.cut), (3, Duration::from_secs(12), false));
        assert_eq!(plan.next_row(&kept, true), None, "row 1 has had its 4 attempts");
        // A spent budget stops the retries with work left; no retries at all
        // when runs are not matched to states.
        let mut plan = RealRunPlan::new(1, 1, budget);
        assert_eq!(plan.next_row(&[0], true), Some((0, 1)));
        plan.ran(0, 1.0, Duration::from_secs(1));
        plan.calibrated(Duration::from_secs(10));
        assert_eq!(plan.next_row(&[0], true), None);
        assert!(plan.cut);
        let mut plan = RealRunPlan::new(1, 1, budget);
        assert_eq!(plan.next_row(&[0], false), Some((0, 1)));
        assert_eq!(plan.next_row(&[0], false), None);
        assert!(!plan.cut);
    }

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(slug("messaging pipe process g=1"), "messaging-pipe-process-g-1");
    }

    #[test]
    fn a_subset_topology_has_the_chosen_cpus() {
        let full = host_topology(None).unwrap();
        let one = host_topology(Some(&[0])).unwrap();
        assert_eq!(one.ncpus(), 1);
        assert!(full.ncpus() >= 1);
    }
}
