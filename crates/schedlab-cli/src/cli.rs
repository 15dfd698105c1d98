//! Command-line structure and dispatch.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use schedlab_core::error::SpecError;
use schedlab_core::sched::{PreemptModel, SchedClass};
use schedlab_core::{Engine, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

use crate::Failure;

/// Default main job: the steal seed's machine and benchmark, at a tenth of its loops.
pub const DEFAULT_TOPOLOGY: &str = "x6-2-20";
pub const DEFAULT_POLICY: &str = "cfs@4.19";
pub const DEFAULT_WORKLOAD: &str = "hackbench groups=1 loops=10000 ipc=socket mode=process";

#[derive(Parser, Debug)]
#[command(
    name = "schedlab",
    version,
    about = "A laboratory for multiprocessor CPU scheduling: simulate kernel schedulers on any topology, reproducibly."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Simulate one workload under one policy and print what happened.
    Run(RunArgs),
    /// Print a topology: CPUs, cores, LLCs, nodes and distances.
    Topology {
        /// NxLxCxT, a preset (x6-2-20, x6-2-56, cascadelake-2s, ryzen-1700, kvm-4, kvm-2, rpi5) or host.
        spec: String,
    },
    /// Measure this Linux host with real processes and write a machine profile.
    Calibrate {
        /// Profile name.
        #[arg(long, default_value = "host")]
        name: String,
        /// Where to write the TOML (default: standard output).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A fast, rougher measurement (a few seconds).
        #[arg(long)]
        quick: bool,
    },
    /// Run a real command on this Linux host in its own session and record its
    /// scheduler events (sched_switch, sched_waking, sched_wakeup, sched_wakeup_new,
    /// sched_migrate_task, sched_process_fork, sched_process_exit) through a private
    /// tracefs instance, removed afterwards. Needs root.
    Record {
        /// Where to write the ftrace text.
        #[arg(long)]
        out: PathBuf,
        /// Trace buffer per CPU, in KiB.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u32>, default_value_t = 16384)]
        buffer_kb: u32,
        /// Kill the command's whole session after this many seconds.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 60)]
        timeout_s: u64,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Run a workload for real on this Linux host (hackbench, pipe, schbench), each
    /// run in its own session, measured with the kernel's counters for the whole
    /// task tree (context switches, CPU migrations, task-clock).
    Real {
        /// Workload spec, the same as for `run`.
        #[arg(long, default_value = "hackbench groups=1 loops=2000 ipc=pipe")]
        workload: String,
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 1)]
        runs: u64,
        /// Run on these CPUs only (sched_setaffinity), e.g. 0 or 0-1.
        #[arg(long)]
        cpus: Option<String>,
        /// Kill a run's whole session after this many seconds.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 120)]
        timeout_s: u64,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Run once in this process and print the result as JSON (used by real itself).
        #[arg(long, hide = true)]
        in_process: bool,
    },
    /// Run a suite for real on this host and simulated on the host's topology with
    /// its calibrated profile and its kernel's policy, preemption model and
    /// autogroup; print both side by side with the error per row.
    Validate(ValidateArgs),
    /// Compare a base and a new policy on one workload over several seeds.
    Compare(CompareArgs),
    /// Reproduce a seed's published experiment, printed beside the published table.
    Reproduce {
        /// Experiment name (see --list), `all`, or a path to an experiment .toml.
        name: Option<String>,
        /// List the shipped experiments.
        #[arg(long)]
        list: bool,
        /// Runs per side (default: the experiment's).
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
        runs: Option<u64>,
        /// A smaller run for a quick look: the value of the experiment's scale key
        /// (loops= for hackbench, mb= for pft, scale= for make) instead of the
        /// published one.
        #[arg(long, alias = "loops")]
        scale: Option<String>,
        /// Only these rows, e.g. 1,2.
        #[arg(long, alias = "groups", value_delimiter = ',')]
        rows: Option<Vec<String>>,
        /// With `all`: run each experiment at this fraction of its published scale
        /// (its scale key times the fraction, at least 1).
        #[arg(long, allow_negative_numbers = true, value_parser = number, default_value_t = 1.0)]
        fraction: f64,
        /// Draw published vs simulated per row into this .svg or .png file.
        #[arg(long)]
        plot: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Simulations run at once (default: every core); results do not depend on it.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
        jobs: Option<usize>,
    },
    /// Run random scenarios (topology, machine, policy and switches, preemption
    /// model, HZ, autogroup, workload, seed) with every invariant checked; each is
    /// drawn from the swarm seed and its index, and a failure prints the command
    /// that reproduces it. Exit status 1 if any failed.
    Swarm {
        /// The swarm's seed: the same seed draws the same scenarios.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 1)]
        seed: u64,
        /// How many scenarios.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 1000)]
        scenarios: u64,
        /// Scenarios run at once (default: every core).
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
        jobs: Option<usize>,
    },
    /// Summarise one ftrace recording (real or simulated), or compare two side by
    /// side: switches, wakeups, migrations, run lengths and wakeup latencies of the
    /// tasks. Traces are streamed: any size is read in bounded memory.
    TraceSummary {
        /// One trace, or two to compare (`-` reads standard input).
        #[arg(num_args = 1..=2, required = true)]
        traces: Vec<PathBuf>,
        /// Only the tasks whose comm starts with this (e.g. hackbench).
        #[arg(long)]
        comm: Option<String>,
    },
    /// Measure the simulator's speed on fixed scenarios.
    Bench {
        /// Smaller scenarios (for a smoke test).
        #[arg(long)]
        quick: bool,
        /// Run only scenario N in this process (used by bench itself).
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>, hide = true)]
        one: Option<usize>,
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        #[arg(long, hide = true, default_value = "cfs@4.19")]
        policy: String,
    },
}

/// A whole-number flag, refused in the same words as every other field.
fn whole<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| "expected a whole number (0, 1, 2, ...)".to_string())
}

/// A decimal-number flag.
fn number(s: &str) -> Result<f64, String> {
    s.parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| "expected a number such as 0.5".to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Output of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// The steal seed's schedstat tables.
    Text,
    Json,
    /// mmtests compare-kernels.sh layout of the elapsed times.
    Mmtests,
    /// FreeBSD ministat of the elapsed times, one block per row.
    Ministat,
    /// row,kernel,run,value of the elapsed times.
    Csv,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// NxLxCxT, a preset name or host.
    #[arg(long, default_value = DEFAULT_TOPOLOGY)]
    pub topology: String,
    /// Machine cost profile: a shipped name (broadwell-ep, cascadelake, zen1,
    /// kvm-haswell, rpi5) or a .toml path. Default: a preset's own machine
    /// (x6-2-20 and x6-2-56: broadwell-ep, cascadelake-2s: cascadelake, ryzen-1700:
    /// zen1, kvm-4 and kvm-2: kvm-haswell, rpi5: rpi5), else broadwell-ep.
    #[arg(long)]
    pub machine: Option<String>,
    /// Scheduling policy, e.g. fifo.
    #[arg(long, default_value = DEFAULT_POLICY)]
    pub policy: String,
    /// Workload spec, e.g. 'hackbench groups=1 loops=100000 ipc=socket mode=process'.
    #[arg(long, default_value = DEFAULT_WORKLOAD)]
    pub workload: String,
    /// Run seed.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 1)]
    pub seed: u64,
    /// A policy tunable by its kernel name, name=value (repeatable).
    #[arg(long = "sysctl", value_name = "NAME=VALUE")]
    pub sysctls: Vec<String>,
    /// CONFIG_HZ of the simulated kernel.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 250)]
    pub hz: u64,
    /// Preemption model of the simulated kernel (the kernel's preempt= names):
    /// none, voluntary, full, or lazy (6.13+). Default: none (the Kconfig default),
    /// or with --topology host the host kernel's own mode.
    #[arg(long)]
    pub preempt: Option<String>,
    /// Run the workload in a session of its own with autogroup on (on) or in the
    /// root task group (off). Default: off, or with --topology host the host's
    /// sched_autogroup_enabled (a benchmark started with setsid runs in its own
    /// autogroup there).
    #[arg(long)]
    pub autogroup: Option<String>,
    /// Check invariants while running (slower).
    #[arg(long)]
    pub check: bool,
    /// Write the timeline as Linux ftrace text to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Draw per-CPU utilisation over time into this .svg or .png file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The base policy, e.g. cfs@4.19.
    #[arg(long)]
    pub base: String,
    /// The new policy, e.g. cfs@4.19+STEAL.
    #[arg(long)]
    pub new: String,
    #[arg(long, default_value = DEFAULT_TOPOLOGY)]
    pub topology: String,
    /// Machine cost profile (default: as for `run`).
    #[arg(long)]
    pub machine: Option<String>,
    /// Workload spec; the varied key is added per row.
    #[arg(long, default_value = "hackbench loops=10000")]
    pub workload: String,
    /// KEY=V1,V2,...: one row per value of a workload parameter.
    #[arg(long)]
    pub vary: Option<String>,
    /// Runs (seeds) per side and row.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 5)]
    pub runs: u64,
    #[arg(long = "sysctl", value_name = "NAME=VALUE")]
    pub sysctls: Vec<String>,
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 250)]
    pub hz: u64,
    /// Preemption model: none, voluntary, full or lazy (default: none, or the
    /// host's with --topology host).
    #[arg(long)]
    pub preempt: Option<String>,
    /// on or off (default: off, or the host's with --topology host).
    #[arg(long)]
    pub autogroup: Option<String>,
    /// First seed; runs use seed, seed+1, ...
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
    /// Draw base vs new per row (mean ± stddev) into this .svg or .png file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Simulations run at once (default: every core); results do not depend on it.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub jobs: Option<usize>,
}

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A shipped suite (host-default, host-quick) or a suite .toml.
    #[arg(long, default_value = "host-default")]
    pub suite: String,
    /// Real and simulated runs per row (default: the suite's).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub runs: Option<u64>,
    /// Only these rows (names or their file-name forms, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub rows: Option<Vec<String>>,
    /// Machine profile for the simulated side (default: a fresh `schedlab calibrate`).
    #[arg(long)]
    pub machine: Option<String>,
    /// With no --machine: calibrate in quick mode.
    #[arg(long)]
    pub quick_calibrate: bool,
    /// Simulated policy (default: the model of the host kernel's release, with
    /// +HOST_VCPU_PACK on a 6.18 host booted with sched_vcpu_pack=).
    #[arg(long)]
    pub policy: Option<String>,
    /// Simulated preemption model (default: the host kernel's).
    #[arg(long)]
    pub preempt: Option<String>,
    /// Simulated autogroup on|off (default: the host's).
    #[arg(long)]
    pub autogroup: Option<String>,
    /// CONFIG_HZ of the simulated kernel (this project's hosts run HZ=250).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 250)]
    pub hz: u64,
    /// Run the real side on these CPUs only, and simulate the host topology's part on them.
    #[arg(long)]
    pub cpus: Option<String>,
    /// Record each row's first real run (tracefs) and its simulated run into this
    /// directory and print where the traces differ most.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Draw simulated / real per row into this .svg or .png file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Write the report here instead of standard output (atomically).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Simulations run at once (default: every core; the real runs are always one
    /// at a time); results do not depend on it.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub jobs: Option<usize>,
    #[arg(long, value_enum, default_value_t = ValidateFormat::Text)]
    pub format: ValidateFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    Text,
    Json,
    /// row,workload,metric,side,run,value
    Csv,
}

/// A fully validated run.
pub struct RunSpec {
    pub topo: Topology,
    pub machine: schedlab_core::MachineProfile,
    pub policy: String,
    pub sysctls: Vec<(String, String)>,
    pub workload: Workload,
    pub cfg: RunConfig,
}

impl RunSpec {
    /// Validates every input before anything runs or is written.
    pub fn from_args(a: &RunArgs) -> Result<RunSpec, SpecError> {
        let topo = parse_topology(&a.topology)?;
        let machine = crate::machines::load_for(a.machine.as_deref(), &a.topology)?;
        let sysctls = parse_sysctls(&a.sysctls)?;
        // Build once to validate the name and sysctls.
        let policy = schedlab_policies::policy_by_name(&a.policy, &sysctls)?;
        let workload = Workload::parse(&a.workload)?;
        if !(10..=10_000).contains(&a.hz) {
            return Err(SpecError::new("hz", a.hz.to_string(), "an integer from 10 to 10000 (CONFIG_HZ, e.g. 100, 250, 1000)"));
        }
        let preempt = parse_preempt(a.preempt.as_deref(), &a.topology)?;
        check_preempt_for(preempt, &a.policy, policy.as_ref())?;
        let autogroup = parse_autogroup(a.autogroup.as_deref(), &a.topology)?;
        let cfg = RunConfig { seed: a.seed, hz: a.hz, check: a.check, preempt, autogroup, ..RunConfig::default() };
        Ok(RunSpec { topo, machine, policy: a.policy.clone(), sysctls, workload, cfg })
    }

    pub fn engine(&self) -> Engine {
        let policy = schedlab_policies::policy_by_name(&self.policy, &self.sysctls).expect("validated in from_args");
        Engine::new(
            self.topo.clone(),
            self.machine.clone(),
            policy,
            self.cfg.clone(),
            self.workload.main_comm(),
            self.workload.main_program(),
        )
    }
}

/// `NxLxCxT`, a preset, or `host` (read from this machine's sysfs).
pub fn parse_topology(spec: &str) -> Result<Topology, SpecError> {
    let topo = if spec == "host" {
        let read = |p: &str| std::fs::read_to_string(format!("/sys/devices/system/{p}")).ok();
        Topology::from_sysfs(&read)?
    } else {
        Topology::parse(spec)?
    };
    // The host is read, not parsed: its estimate is checked here.
    schedlab_core::topology::check_state_bytes(spec, topo.state_bytes_estimate())?;
    Ok(topo)
}

/// `--preempt`: a model by name; unset, the host kernel's own model for
/// `--topology host` (from what the host lets us read) and `none` otherwise.
pub fn parse_preempt(flag: Option<&str>, topology: &str) -> Result<PreemptModel, SpecError> {
    match flag {
        Some(name) => PreemptModel::parse(name).ok_or_else(|| SpecError::new("preempt", name, PreemptModel::NAMES)),
        None if topology == "host" => match schedlab_host::kernel::preempt_mode() {
            Some(h) => Ok(PreemptModel::parse(&h.mode).expect("host modes are the four names")),
            None => {
                eprintln!("schedlab: warning: the host's preemption model could not be read; using none (set --preempt)");
                Ok(PreemptModel::None)
            }
        },
        None => Ok(PreemptModel::None),
    }
}

/// `--autogroup on|off`; unset, the host's setting for `--topology host`, else off.
pub fn parse_autogroup(flag: Option<&str>, topology: &str) -> Result<bool, SpecError> {
    match flag {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(SpecError::new("autogroup", other, "on or off")),
        None if topology == "host" => Ok(schedlab_host::kernel::autogroup_enabled().unwrap_or(false)),
        None => Ok(false),
    }
}

/// `preempt=lazy` exists from Linux 6.13: refused for a policy modelling an older
/// (or a non-Linux) kernel rather than silently run as `full`.
pub fn check_preempt_for(preempt: PreemptModel, name: &str, policy: &dyn SchedClass) -> Result<(), SpecError> {
    if preempt == PreemptModel::Lazy && policy.linux_release().is_none_or(|v| v < (6, 13)) {
        return Err(SpecError::new(
            "preempt",
            format!("lazy (with {name})"),
            "none, voluntary or full: preempt=lazy exists from Linux 6.13 (eevdf@6.18)",
        ));
    }
    Ok(())
}

pub fn parse_sysctls(raw: &[String]) -> Result<Vec<(String, String)>, SpecError> {
    raw.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(SpecError::new("sysctl", s, "NAME=VALUE, e.g. sched_wakeup_granularity_ns=15000000")),
        })
        .collect()
}

pub fn dispatch(cli: Cli) -> Result<(), Failure> {
    // The simulating commands write their outputs through temporary files, which a
    // signal must not leave behind (the commands that run real work handle their
    // signals themselves, through schedlab_host::signals).
    if matches!(cli.command, Command::Run(_) | Command::Compare(_) | Command::Reproduce { .. }) {
        crate::outputs::remove_temporaries_on_signals();
    }
    match cli.command {
        Command::Run(a) => run(&a),
        Command::Topology { spec } => {
            print!("{}", parse_topology(&spec)?.describe());
            Ok(())
        }
        Command::Calibrate { name, out, quick } => crate::calibrate_cmd(name, out, quick),
        Command::Record { out, buffer_kb, timeout_s, command } => crate::record_cmd(&out, buffer_kb, timeout_s, &command),
        Command::TraceSummary { traces, comm } => crate::trace_summary::run(&traces, comm.as_deref()),
        Command::Swarm { seed, scenarios, jobs } => crate::swarm::run(seed, scenarios, crate::parallel::threads(jobs)?),
        Command::Bench { quick, one: None, format, .. } => crate::bench::run(quick, format == Format::Json),
        Command::Bench { quick, one: Some(i), policy, .. } => crate::bench::run_one(i, &policy, quick),
        Command::Real { workload, runs, cpus, timeout_s, format, in_process } => {
            crate::validate::real_cmd(&workload, runs, cpus.as_deref(), timeout_s, format == Format::Json, in_process)
        }
        Command::Validate(a) => crate::validate::validate_cmd(&a),
        Command::Compare(a) => compare(&a),
        Command::Reproduce { name, list, runs, scale, rows, format, fraction, plot, jobs } => {
            let Some(name) = name.filter(|_| !list) else { return crate::reproduce::list() };
            let threads = crate::parallel::threads(jobs)?;
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(SpecError::new("fraction", fraction.to_string(), "a number in (0, 1]").into());
            }
            if let Some(r) = runs.filter(|&r| r == 0 || r > 10_000) {
                return Err(SpecError::new("runs", r.to_string(), "an integer from 1 to 10000").into());
            }
            if let Some(s) = scale.as_deref().filter(|s| s.parse::<f64>().map_or(true, |v| !(v > 0.0 && v.is_finite()))) {
                return Err(SpecError::new("scale", s, "a positive number (an integer for integer keys)").into());
            }
            if name == "all" {
                let ignored = [
                    (scale.is_some(), "--scale"),
                    (rows.is_some(), "--rows"),
                    (plot.is_some(), "--plot"),
                    (format == Format::Json, "--format json"),
                ];
                if let Some((_, flag)) = ignored.iter().find(|(set, _)| *set) {
                    return Err(SpecError::new("reproduce all", *flag, "only --runs, --fraction and --jobs with all").into());
                }
                return crate::reproduce::run_all(runs, fraction, threads);
            }
            if fraction != 1.0 {
                return Err(SpecError::new(
                    "fraction",
                    fraction.to_string(),
                    "--fraction only with `reproduce all`; use --scale",
                )
                .into());
            }
            let plot = plot.map(|p| crate::plotfile::PlotFile::new(&p)).transpose()?;
            crate::reproduce::run(&name, runs, scale.as_deref(), rows, format == Format::Json, plot.as_ref(), threads)
        }
    }
}

fn compare(a: &CompareArgs) -> Result<(), Failure> {
    if !(10..=10_000).contains(&a.hz) {
        return Err(SpecError::new("hz", a.hz.to_string(), "an integer from 10 to 10000").into());
    }
    let c = crate::compare::Comparison {
        topo: parse_topology(&a.topology)?,
        machine: crate::machines::load_for(a.machine.as_deref(), &a.topology)?,
        base: a.base.clone(),
        new: a.new.clone(),
        others: Vec::new(),
        sysctls: parse_sysctls(&a.sysctls)?,
        workload: a.workload.clone(),
        vary: a.vary.as_deref().map(crate::compare::parse_vary).transpose()?,
        runs: a.runs,
        hz: a.hz,
        preempt: parse_preempt(a.preempt.as_deref(), &a.topology)?,
        autogroup: parse_autogroup(a.autogroup.as_deref(), &a.topology)?,
        first_seed: a.seed,
        keep_irq_off: false,
    };
    c.validate()?;
    if a.format == CompareFormat::Ministat && a.runs < 3 {
        return Err(SpecError::new(
            "runs",
            a.runs.to_string(),
            "at least 3 with --format ministat (its test needs 3 runs per side)",
        )
        .into());
    }
    let plot = a.plot.as_deref().map(crate::plotfile::PlotFile::new).transpose()?;
    let rows = c.run(crate::parallel::threads(a.jobs)?)?;
    if let Some(p) = plot {
        p.write(&crate::plotfile::comparison_bars(&c, &rows))?;
    }
    let out = match a.format {
        CompareFormat::Text => crate::compare::text(&c, &rows),
        CompareFormat::Json => crate::compare::json(&c, &rows) + "\n",
        CompareFormat::Mmtests => crate::compare::mmtests(&c, &rows)?,
        CompareFormat::Ministat => crate::compare::ministat(&c, &rows)?,
        CompareFormat::Csv => crate::compare::csv(&c, &rows)?,
    };
    print!("{out}");
    Ok(())
}

/// A run's progress line on stderr, from its third second on: simulated time,
/// events, and for a benchmark that runs for a set simulated time the wall time
/// left at the pace so far. Cleared when the run ends.
fn run_progress(expected_sim_ns: Option<u64>) -> Box<dyn FnMut(u64, u64)> {
    let started = std::time::Instant::now();
    let mut last_drawn = 0.0f64;
    Box::new(move |sim_ns, events| {
        let wall = started.elapsed().as_secs_f64();
        if wall < 2.0 || wall - last_drawn < 0.5 {
            return;
        }
        last_drawn = wall;
        let left = expected_sim_ns
            .filter(|&e| sim_ns > 0 && e > sim_ns)
            .map(|e| format!(", about {:.0} s left", wall * (e - sim_ns) as f64 / sim_ns as f64))
            .unwrap_or_default();
        eprint!("\r\x1b[Ksimulated {:.3} s, {:.1} M events, {wall:.0} s{left}", sim_ns as f64 / 1e9, events as f64 / 1e6);
    })
}

fn run(a: &RunArgs) -> Result<(), Failure> {
    let mut spec = RunSpec::from_args(a)?;
    // Every output is checked before the run: a regular file (or a new one) in a
    // writable directory, and not the same file twice.
    let plot = a.plot.as_deref().map(crate::plotfile::PlotFile::new).transpose()?;
    let trace_path = a.trace.as_deref().map(|p| crate::outputs::check("trace", p)).transpose()?;
    if let (Some(t), Some(p)) = (&a.trace, &a.plot) {
        crate::outputs::distinct(&[("trace", t), ("plot", p)])?;
    }
    if plot.is_some() {
        spec.cfg.util_bucket_ns = Some(crate::plotfile::RUN_BUCKET_NS);
    }
    let mut engine = spec.engine();
    let trace = match &trace_path {
        Some(path) => Some(crate::tracefile::TraceFile::create(path, spec.topo.ncpus())?),
        None => None,
    };
    if let Some(t) = &trace {
        engine.set_trace(Box::new(t.sink()));
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        engine.set_progress(run_progress(spec.workload.expected_sim_ns()));
    }
    let started = std::time::Instant::now();
    let result = engine.run();
    let wall = started.elapsed();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && wall.as_secs_f64() >= 2.0 {
        eprint!("\r\x1b[K");
    }
    // A failed run leaves no trace file behind.
    check_result(&result, spec.cfg.check)?;
    if let Some(t) = trace {
        t.finish().map_err(Failure::Run)?;
    }
    if let Some(p) = plot {
        let title = format!("{} on {}: {}, seed {}", spec.policy, spec.topo.name, a.workload, a.seed);
        p.write(&crate::plotfile::run_heat_map(&title, &result))?;
    }
    match a.format {
        Format::Text => print!("{}", crate::report::text(&spec, &result, wall)),
        Format::Json => println!("{}", crate::report::json(&spec, &result)),
    }
    Ok(())
}

/// A run that broke an invariant or never finished is an error, not a result.
pub fn check_result(r: &RunResult, checked: bool) -> Result<(), Failure> {
    if r.timed_out {
        return Err(Failure::Run(format!("the run did not finish within {} simulated seconds", r.end_ns / 1_000_000_000)));
    }
    if !r.violations.is_empty() {
        let what = if checked { "invariant violations" } else { "engine errors" };
        return Err(Failure::Run(format!("{what}:\n  {}", r.violations.join("\n  "))));
    }
    Ok(())
}
