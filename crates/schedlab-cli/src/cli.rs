//! The command line's structure: clap's structs and their flags (`commands` runs them).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use schedlab_spec::compare::CompareRequest;
use schedlab_spec::run::{DEFAULT_POLICY, DEFAULT_TOPOLOGY, DEFAULT_WORKLOAD};
use schedlab_spec::RunRequest;

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
        /// Also record sched_stat_runtime (the runtime the kernel charges each task
        /// at every update_curr()); trace-summary then reports the runtime charged
        /// per run. A heavier trace: the command runs slower.
        #[arg(long)]
        runtime: bool,
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
        /// Read the host's state before and after every run, as validate does:
        /// the cross-CPU cache-line transfer and what waking a sleeper on an idle
        /// CPU costs the waker (these guests move between a few such states
        /// minutes apart, and their runs' times move with them).
        #[arg(long)]
        host_state: bool,
        #[arg(long, value_enum, default_value_t = Counters::Quiet, help = COUNTERS_HELP)]
        counters: Counters,
        /// Run once in this process and print the result as JSON (used by real itself).
        #[arg(long, hide = true)]
        in_process: bool,
        /// Serve as the launcher of real runs (used by real and validate
        /// themselves): bring this process's wake_wide() history to zero with
        /// this many halvings, then run each requested command.
        #[arg(long, hide = true, value_parser = clap::value_parser!(u32).range(0..=32))]
        launcher_halvings: Option<u32>,
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
    /// Run a grid of parameters (a TOML file: see docs/sweeps.md), every
    /// combination `runs` times, and print one row per run with every parameter a
    /// column. Rows are cached by content (request, machine, simulator source):
    /// a rerun computes only what is missing.
    Sweep(SweepArgs),
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
        /// Rounds: each runs every scenario once (interleaved, so the machine's
        /// drift touches every row alike); the median round is shown.
        #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>, default_value_t = 3)]
        repeat: usize,
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
    /// Scheduling policy, e.g. fifo, cfs@4.19+STEAL, eevdf@6.18; `host`: the model
    /// of this machine's own kernel, as `validate` takes it. Default: cfs@4.19, or
    /// with --topology host, `host`.
    #[arg(long)]
    pub policy: Option<String>,
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
    /// or with --topology host the host kernel's own mode and build (a
    /// PREEMPT_DYNAMIC kernel is built preemptible whatever mode it booted with).
    /// A model given here is a kernel built with it statically.
    #[arg(long)]
    pub preempt: Option<String>,
    /// Run the workload in a session of its own with autogroup on (on) or in the
    /// root task group (off). Default: off, or with --topology host the host's
    /// sched_autogroup_enabled (a benchmark started with setsid runs in its own
    /// autogroup there).
    #[arg(long)]
    pub autogroup: Option<String>,
    /// The wake_wide() history (Linux wakee_flips) of the process that starts
    /// the workload, which its first task inherits at fork as every child
    /// does: how many times that process switched the task it woke in the
    /// last second or so. 0: a launcher that woke nobody, as a shell that only
    /// forks and waits; `schedlab real` and `validate` start their real runs
    /// from such a launcher (docs/validate.md).
    #[arg(long, value_parser = whole::<u64>, default_value_t = 0)]
    pub launcher_wakee_flips: u64,
    /// Check invariants while running (slower).
    #[arg(long)]
    pub check: bool,
    /// Write the timeline as Linux ftrace text to this file.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write EEVDF's entity numbers (vruntime, deadline, vlag/vprot, the
    /// cfs_rq's sums) at every switch to a task and every wakeup to this file,
    /// in the format tools/host-lag records a real host in (EEVDF policies only).
    #[arg(long)]
    pub lag_trace: Option<PathBuf>,
    /// Draw per-CPU utilisation over time into this .svg or .png file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

impl RunArgs {
    pub fn request(&self) -> RunRequest {
        RunRequest {
            topology: self.topology.clone(),
            machine: self.machine.clone(),
            policy: self
                .policy
                .clone()
                .unwrap_or_else(|| if self.topology == "host" { "host" } else { DEFAULT_POLICY }.to_string()),
            workload: self.workload.clone(),
            seed: self.seed,
            sysctls: self.sysctls.clone(),
            hz: self.hz,
            preempt: self.preempt.clone(),
            autogroup: self.autogroup.clone(),
            launcher_wakee_flips: self.launcher_wakee_flips,
            check: self.check,
        }
    }
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
pub struct SweepArgs {
    /// The grid file (.toml).
    pub grid: PathBuf,
    /// Write the table here (.csv, .json or .parquet, as --format) instead of
    /// standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = SweepFormat::Csv)]
    pub format: SweepFormat,
    /// The result cache (default: $XDG_CACHE_HOME/schedlab or ~/.cache/schedlab).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Compute every run again and cache nothing.
    #[arg(long, conflicts_with = "cache")]
    pub no_cache: bool,
    /// I/N: run only the jobs whose index is I modulo N (0 <= I < N), e.g. one
    /// Slurm array task each with --shard $SLURM_ARRAY_TASK_ID/N; a last run
    /// without --shard then gathers every row from the shared cache.
    #[arg(long)]
    pub shard: Option<String>,
    /// Simulations run at once (default: every core); results do not depend on it.
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<usize>)]
    pub jobs: Option<usize>,
    /// Run on a Dask cluster: the scheduler's address (tcp://HOST:PORT or
    /// tls://HOST:PORT), or `local` for a loopback-only cluster started here.
    /// Needs the Python package (pip install ./python).
    #[arg(long)]
    pub dask: Option<String>,
    /// With a tls:// scheduler: the CA, certificate and key files (Dask's
    /// distributed.Security).
    #[arg(long, requires = "dask")]
    pub tls_ca_file: Option<PathBuf>,
    #[arg(long, requires = "dask")]
    pub tls_cert: Option<PathBuf>,
    #[arg(long, requires = "dask")]
    pub tls_key: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SweepFormat {
    Csv,
    Json,
    /// Uncompressed, typed columns (needs --out FILE.parquet).
    Parquet,
}

impl SweepFormat {
    /// The format's name, which is also its file extension.
    pub fn name(self) -> &'static str {
        match self {
            SweepFormat::Csv => "csv",
            SweepFormat::Json => "json",
            SweepFormat::Parquet => "parquet",
        }
    }
}

impl CompareArgs {
    pub fn request(&self) -> CompareRequest {
        CompareRequest {
            base: self.base.clone(),
            new: self.new.clone(),
            others: Vec::new(),
            topology: self.topology.clone(),
            machine: self.machine.clone(),
            workload: self.workload.clone(),
            vary: self.vary.clone(),
            runs: self.runs,
            sysctls: self.sysctls.clone(),
            hz: self.hz,
            preempt: self.preempt.clone(),
            autogroup: self.autogroup.clone(),
            first_seed: self.seed,
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A shipped suite (host-default, host-quick) or a suite .toml.
    #[arg(long, default_value = "host-default")]
    pub suite: String,
    /// Real runs per row (default: the suite's).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub runs: Option<u64>,
    /// Simulated runs per kept real run, each its own seed, on the profile of the
    /// state that real run ran in (default: the suite's; host-default 3).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>)]
    pub sim_seeds: Option<u64>,
    /// Only these rows (names or their file-name forms, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub rows: Option<Vec<String>>,
    /// Machine profile for the simulated side (default: a fresh `schedlab calibrate`).
    #[arg(long)]
    pub machine: Option<String>,
    /// With no --machine: calibrate in quick mode.
    #[arg(long)]
    pub quick_calibrate: bool,
    /// Keep every real run, also those the host ran in another state than the
    /// profile's (its cross-CPU cache-line transfer more than 1.5x off); by
    /// default, with a profile calibrated on this host, they are set aside,
    /// listed, and retried.
    #[arg(long)]
    pub any_state: bool,
    /// Simulated policy (default: the model of the host kernel's release, with
    /// +HOST_VCPU_PACK+HOST_DEQUEUE_DELAYED_BUSY on a 6.18 host booted with
    /// sched_vcpu_pack=15).
    #[arg(long)]
    pub policy: Option<String>,
    /// Simulate this policy too, against the same real runs (repeatable): a
    /// second table and summary per policy, so two models are compared on one
    /// set of real runs instead of two validates minutes apart.
    #[arg(long = "also-policy")]
    pub also_policy: Vec<String>,
    /// Simulated preemption model (default: the host kernel's).
    #[arg(long)]
    pub preempt: Option<String>,
    /// Simulated autogroup on|off (default: the host's).
    #[arg(long)]
    pub autogroup: Option<String>,
    /// CONFIG_HZ of the simulated kernel (this project's hosts run HZ=250).
    #[arg(long, allow_negative_numbers = true, value_parser = whole::<u64>, default_value_t = 250)]
    pub hz: u64,
    /// The simulated launcher's wakee_flips (see `schedlab run --help`).
    /// Default 0: the real runs start from a launcher process whose count is
    /// first halved to zero (docs/validate.md).
    #[arg(long, value_parser = whole::<u64>, default_value_t = 0)]
    pub launcher_wakee_flips: u64,
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
    #[arg(long, value_enum, default_value_t = Counters::Quiet, help = COUNTERS_HELP)]
    pub counters: Counters,
}

/// `--counters`' help, the same for real and validate.
const COUNTERS_HELP: &str = "How the real runs' tasks are counted: quiet (getrusage for switches and CPU time, \
per-CPU tracepoint counts for migrations: nothing on the tasks' switches; needs root or CAP_PERFMON, else falls \
back to inherited) or inherited (perf stat's per-task counters, which cost 0.45-0.7 us at every switch on this \
project's hosts; docs/validate.md)";

/// `--counters` of real and validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Counters {
    Quiet,
    Inherited,
}

impl Counters {
    pub fn method(self) -> schedlab_host::counters::CounterMethod {
        match self {
            Counters::Quiet => schedlab_host::counters::CounterMethod::Quiet,
            Counters::Inherited => schedlab_host::counters::CounterMethod::Inherited,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ValidateFormat {
    Text,
    Json,
    /// row,workload,metric,side,run,value
    Csv,
}
