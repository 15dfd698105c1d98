//! schedlab-workloads: the benchmarks kernel developers run, as lazily generated
//! task programs.

pub mod context1;
pub mod groupmix;
pub mod hackbench;
pub mod make;
pub mod newidle;
pub mod params;
pub mod pft;
pub mod pipe;
pub mod pull;
pub mod schbench;
pub mod shell;
pub mod stressng;
pub mod sysbench;
pub mod tbench;
mod timed;

use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Program};
use schedlab_core::RunResult;

pub use context1::Context1;
pub use groupmix::GroupMix;
pub use hackbench::Hackbench;
pub use make::Make;
pub use newidle::NewidleProbe;
pub use pft::Pft;
pub use pipe::PipeBench;
pub use pull::PullProbe;
pub use schbench::Schbench;
pub use shell::ShellScripts;
pub use stressng::StressNgPipe;
pub use sysbench::Sysbench;
pub use tbench::Tbench;

/// Workloads this build knows, for help and errors.
pub const WORKLOADS: &[(&str, &str)] = &[
    ("hackbench", "hackbench groups=G loops=L ipc=socket|pipe mode=process|thread [fds=20] [datasize=100]"),
    ("pipe", "pipe loops=L mode=process|thread (perf bench sched pipe)"),
    (
        "pull",
        "pull [rounds=600] [fresh=0|1] [settle_spin=0|1] [hog_prev=0|1] [hog_waker=0|1] [spin_us=0] [sleep_us=0] [sleep_odd_us=sleep_us] (tools/host-wake-pull's probe: where a sync wakeup puts a wakee whose previous CPU is idle; Linux policies, 2 CPUs or more)",
    ),
    (
        "newidle",
        "newidle [rounds=200] [sleep_us=20] [run_us=100] [settle_ms=20] (tools/host-newidle's probe: does a CPU going idle pull a waiting task at once; Linux policies, 2 CPUs or more)",
    ),
    ("pft", "pft threads=N mb=M [fault_ns=1000] [fault_bytes=8192] [chunk_pages=1024] (page fault test)"),
    ("schbench", "schbench threads=1 workers=16 [runtime_ms=30000] [warmup_ms=0] [sleep_us=100] [work_us=100] [slice_us=0]"),
    ("tbench", "tbench clients=N [runtime_ms=10000] [warmup_ms=2000] (dbench's network mode over loopback TCP)"),
    ("context1", "context1 copies=N [duration_ms=10000] (UnixBench's pipe-based context switching: lps)"),
    ("shell", "shell copies=N [concurrent=1] [duration_ms=60000] (UnixBench's shell scripts, looper multi.sh N: lpm)"),
    (
        "sysbench",
        "sysbench test=mutex|threads threads=N [time_ms=10000] [mutex_num=4096] [mutex_locks=50000] [mutex_loops=10000] [thread_yields=1000] [thread_locks=8] (sysbench 1.0.14: total time, events/s)",
    ),
    ("stress-ng", "stress-ng pipe=N [timeout_ms=20000] [pipe_data_size=512] [fill_ns=0] (the pipe stressor: bogo ops/s)"),
    (
        "make",
        "make [jobs=16] [dirs=640] [files=18000] [scale=1] [tree=1] [dir_parallel=2] [files_sigma_pct=120] [cc_ms=64] [cc_sigma_pct=100] [link_ms=150] [link_sigma_pct=100] [dir_ms=40] [exec_us=1600] [io_pct=10] (make -jN buildworld)",
    ),
    (
        "groupmix",
        "groupmix tasks=50 shares=2 [busy_ms=100] [sleep_ms=100] [spread_pct=50] [warmup_ms=2000] [window_ms=10000] (low-weight cgroup mix)",
    ),
];

/// A parsed workload spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    Hackbench(Hackbench),
    Pipe(PipeBench),
    Pull(PullProbe),
    Newidle(NewidleProbe),
    Pft(Pft),
    GroupMix(GroupMix),
    Schbench(Schbench),
    Tbench(Tbench),
    Make(Make),
    StressNgPipe(StressNgPipe),
    Context1(Context1),
    Shell(ShellScripts),
    Sysbench(Sysbench),
}

impl Workload {
    /// Parses e.g. `hackbench groups=1 loops=100000 ipc=socket mode=process`.
    pub fn parse(spec: &str) -> Result<Workload, SpecError> {
        let (name, mut p) = params::Params::parse(spec)?;
        match name.as_str() {
            "hackbench" => {
                let h = Hackbench::from_params(&mut p)?;
                p.finish("groups, loops, ipc, mode, fds, datasize")?;
                Ok(Workload::Hackbench(h))
            }
            "pipe" => {
                let b = PipeBench::from_params(&mut p)?;
                p.finish("loops, mode")?;
                Ok(Workload::Pipe(b))
            }
            "pull" => {
                let b = PullProbe::from_params(&mut p)?;
                p.finish("rounds, fresh, settle_spin, hog_prev, hog_waker, spin_us, sleep_us, sleep_odd_us")?;
                Ok(Workload::Pull(b))
            }
            "newidle" => {
                let b = NewidleProbe::from_params(&mut p)?;
                p.finish("rounds, sleep_us, run_us, settle_ms")?;
                Ok(Workload::Newidle(b))
            }
            "pft" => {
                let b = Pft::from_params(&mut p)?;
                p.finish("threads, mb, fault_ns, fault_bytes, chunk_pages")?;
                Ok(Workload::Pft(b))
            }
            "groupmix" => {
                let m = GroupMix::from_params(&mut p)?;
                p.finish("tasks, shares, busy_ms, sleep_ms, spread_pct, warmup_ms, window_ms")?;
                Ok(Workload::GroupMix(m))
            }
            "schbench" => {
                let b = Schbench::from_params(&mut p)?;
                p.finish("threads, workers, runtime_ms, warmup_ms, sleep_us, work_us, slice_us")?;
                Ok(Workload::Schbench(b))
            }
            "tbench" => {
                let b = Tbench::from_params(&mut p)?;
                p.finish("clients, runtime_ms, warmup_ms")?;
                Ok(Workload::Tbench(b))
            }
            "stress-ng" => {
                let b = StressNgPipe::from_params(&mut p)?;
                p.finish("pipe, timeout_ms, pipe_data_size, fill_cycles")?;
                Ok(Workload::StressNgPipe(b))
            }
            "context1" => {
                let b = Context1::from_params(&mut p)?;
                p.finish("copies, duration_ms")?;
                Ok(Workload::Context1(b))
            }
            "shell" => {
                let b = ShellScripts::from_params(&mut p)?;
                p.finish("copies, concurrent, duration_ms")?;
                Ok(Workload::Shell(b))
            }
            "sysbench" => {
                let b = Sysbench::from_params(&mut p)?;
                p.finish("test, threads, time_ms, mutex_num, mutex_locks, mutex_loops, thread_yields, thread_locks")?;
                Ok(Workload::Sysbench(b))
            }
            // `scale` is a decimal fraction, which Params does not read: Make parses
            // its whole spec itself (the other keys through Params, then finish()).
            "make" => Ok(Workload::Make(Make::from_spec(spec)?)),
            _ => {
                let known: Vec<&str> = WORKLOADS.iter().map(|w| w.0).collect();
                Err(SpecError::new("workload", name, format!("one of: {}", known.join(", "))))
            }
        }
    }

    /// The workload's name as a spec gives it (`hackbench`, `stress-ng`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Hackbench(_) => "hackbench",
            Workload::Pipe(_) => "pipe",
            Workload::Pull(_) => "pull",
            Workload::Newidle(_) => "newidle",
            Workload::Pft(_) => "pft",
            Workload::GroupMix(_) => "groupmix",
            Workload::Schbench(_) => "schbench",
            Workload::Tbench(_) => "tbench",
            Workload::Make(_) => "make",
            Workload::StressNgPipe(_) => "stress-ng",
            Workload::Context1(_) => "context1",
            Workload::Shell(_) => "shell",
            Workload::Sysbench(_) => "sysbench",
        }
    }

    /// Every parameter in force, defaults included, under its spec key, as
    /// `NAME key=value ...` would set it: `Workload::parse` of the name and these
    /// pairs gives the same workload.
    pub fn params(&self) -> Vec<(&'static str, String)> {
        let mode = |m: &ForkKind| if *m == ForkKind::Thread { "thread" } else { "process" }.to_string();
        let n = |v: u64| v.to_string();
        match self {
            Workload::Hackbench(h) => vec![
                ("groups", n(h.groups)),
                ("fds", n(h.fds)),
                ("loops", n(h.loops)),
                ("datasize", n(h.datasize)),
                ("ipc", if h.ipc == hackbench::Ipc::Pipe { "pipe" } else { "socket" }.to_string()),
                ("mode", mode(&h.mode)),
            ],
            Workload::Pipe(b) => vec![("loops", n(b.loops)), ("mode", mode(&b.mode))],
            Workload::Pull(b) => {
                vec![
                    ("rounds", n(b.rounds)),
                    ("fresh", n(u64::from(b.fresh))),
                    ("settle_spin", n(u64::from(b.settle_spin))),
                    ("hog_prev", n(u64::from(b.hog_prev))),
                    ("hog_waker", n(u64::from(b.hog_waker))),
                    ("spin_us", n(b.spin_us)),
                    ("sleep_us", n(b.sleep_us)),
                    ("sleep_odd_us", n(b.sleep_odd_us)),
                ]
            }
            Workload::Newidle(b) => {
                vec![("rounds", n(b.rounds)), ("sleep_us", n(b.sleep_us)), ("run_us", n(b.run_us)), ("settle_ms", n(b.settle_ms))]
            }
            Workload::Pft(b) => vec![
                ("threads", n(b.threads)),
                ("mb", n(b.mb)),
                ("fault_ns", n(b.fault_ns)),
                ("fault_bytes", n(b.fault_bytes)),
                ("chunk_pages", n(b.chunk_pages)),
            ],
            Workload::GroupMix(m) => vec![
                ("tasks", n(m.tasks)),
                ("shares", n(m.shares)),
                ("busy_ms", n(m.busy_ms)),
                ("sleep_ms", n(m.sleep_ms)),
                ("spread_pct", n(m.spread_pct)),
                ("warmup_ms", n(m.warmup_ms)),
                ("window_ms", n(m.window_ms)),
            ],
            Workload::Schbench(b) => vec![
                ("threads", n(b.threads)),
                ("workers", n(b.workers)),
                ("runtime_ms", n(b.runtime_ms)),
                ("warmup_ms", n(b.warmup_ms)),
                ("sleep_us", n(b.sleep_us)),
                ("work_us", n(b.work_us)),
                ("slice_us", n(b.slice_us)),
            ],
            Workload::Tbench(b) => {
                vec![("clients", n(b.clients)), ("runtime_ms", n(b.runtime_ms)), ("warmup_ms", n(b.warmup_ms))]
            }
            Workload::Make(b) => vec![
                ("jobs", n(b.jobs)),
                ("dirs", n(b.dirs)),
                ("files", n(b.files)),
                ("scale", format!("{}", b.scale_ppm as f64 / 1e6)),
                ("tree", n(b.tree)),
                ("dir_parallel", n(b.dir_parallel)),
                ("files_sigma_pct", n(b.files_sigma_pct)),
                ("cc_ms", n(b.cc_ms)),
                ("cc_sigma_pct", n(b.cc_sigma_pct)),
                ("link_ms", n(b.link_ms)),
                ("link_sigma_pct", n(b.link_sigma_pct)),
                ("dir_ms", n(b.dir_ms)),
                ("exec_us", n(b.exec_us)),
                ("io_pct", n(b.io_pct)),
            ],
            Workload::StressNgPipe(b) => vec![
                ("pipe", n(b.instances)),
                ("timeout_ms", n(b.timeout_ms)),
                ("pipe_data_size", n(b.data_size)),
                ("fill_cycles", n(b.fill_cycles)),
            ],
            Workload::Context1(b) => vec![("copies", n(b.copies)), ("duration_ms", n(b.duration_ms))],
            Workload::Shell(b) => {
                vec![("copies", n(b.copies)), ("concurrent", n(b.concurrent)), ("duration_ms", n(b.duration_ms))]
            }
            Workload::Sysbench(b) => vec![
                ("test", b.test_name().to_string()),
                ("threads", n(b.threads)),
                ("time_ms", n(b.time_ms)),
                ("mutex_num", n(b.mutex_num)),
                ("mutex_locks", n(b.mutex_locks)),
                ("mutex_loops", n(b.mutex_loops)),
                ("thread_yields", n(b.thread_yields)),
                ("thread_locks", n(b.thread_locks)),
            ],
        }
    }

    /// The spec that gives this workload, every parameter spelled out.
    pub fn spec(&self) -> String {
        let pairs: Vec<String> = self.params().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{} {}", self.name(), pairs.join(" "))
    }

    /// The name of the main task.
    pub fn main_comm(&self) -> &'static str {
        match self {
            Workload::Hackbench(_) => "hackbench",
            Workload::Pipe(_) => "perf",
            Workload::Pull(_) => "pull",
            Workload::Newidle(_) => "newidle",
            Workload::Pft(_) => "pft",
            Workload::GroupMix(_) => "groupmix",
            Workload::Schbench(_) => "schbench",
            Workload::Tbench(_) => "tbench",
            Workload::Make(_) => make::MAKE_COMM,
            Workload::StressNgPipe(_) => "stress-ng",
            Workload::Context1(_) => "Run",
            Workload::Shell(_) => "Run",
            Workload::Sysbench(_) => "sysbench",
        }
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        match self {
            Workload::Hackbench(h) => h.main_program(),
            Workload::Pipe(b) => b.main_program(),
            Workload::Pull(b) => b.main_program(),
            Workload::Newidle(b) => b.main_program(),
            Workload::Pft(b) => b.main_program(),
            Workload::GroupMix(m) => m.main_program(),
            Workload::Schbench(b) => b.main_program(),
            Workload::Tbench(b) => b.main_program(),
            Workload::Make(b) => b.main_program(),
            Workload::StressNgPipe(b) => b.main_program(),
            Workload::Context1(b) => b.main_program(),
            Workload::Shell(b) => b.main_program(),
            Workload::Sysbench(b) => b.main_program(),
        }
    }

    /// Whether the workload changes its tasks' CPU affinity while they run
    /// (`sched_setaffinity()`), which only policies that model the move accept.
    pub fn changes_affinity(&self) -> bool {
        matches!(self, Workload::Pull(_) | Workload::Newidle(_))
    }

    /// The fewest CPUs the workload needs (the probes use CPUs 0 and 1).
    pub fn min_cpus(&self) -> usize {
        if matches!(self, Workload::Pull(_) | Workload::Newidle(_)) {
            2
        } else {
            1
        }
    }

    /// The run's elapsed time as the benchmark prints it, in ns: hackbench and
    /// perf bench sched pipe in milliseconds, pft in centiseconds, truncated (the
    /// steps beside each one's result line); the others are taken as simulated.
    /// A comparison's samples are what the benchmark prints, so runs that differ
    /// by less than its last digit are one sample, as on a real machine, and no
    /// test is made on a difference the benchmark cannot show. A run shorter than
    /// one step (which the benchmark would print as 0) keeps its simulated time,
    /// so that a scaled-down comparison still has something to divide by.
    pub fn printed_elapsed_ns(&self, elapsed_ns: u64) -> u64 {
        let step_ns = match self {
            Workload::Hackbench(_) => hackbench::TIME_STEP_NS,
            Workload::Pipe(_) => pipe::TIME_STEP_NS,
            Workload::Pft(_) => pft::WALL_STEP_NS,
            _ => 1,
        };
        if elapsed_ns < step_ns {
            return elapsed_ns;
        }
        elapsed_ns / step_ns * step_ns
    }

    /// What the tool itself prints before running.
    pub fn banner(&self) -> String {
        match self {
            Workload::Hackbench(h) => h.banner(),
            Workload::Pipe(b) => b.banner(),
            Workload::Pull(b) => b.banner(),
            Workload::Newidle(b) => b.banner(),
            Workload::Pft(b) => b.banner(),
            Workload::GroupMix(m) => m.banner(),
            Workload::Schbench(b) => b.banner(),
            Workload::Tbench(b) => b.banner(),
            Workload::Make(b) => b.banner(),
            Workload::StressNgPipe(b) => b.banner(),
            Workload::Context1(b) => b.banner(),
            Workload::Shell(b) => b.banner(),
            Workload::Sysbench(b) => b.banner(),
        }
    }

    /// The benchmark's own rate, higher is better, with its unit: tbench's MB/sec
    /// and schbench's average rps. None for benchmarks that report a time.
    pub fn throughput(&self, res: &RunResult) -> Option<(f64, &'static str)> {
        let unit = self.rate_unit()?;
        match self {
            Workload::Tbench(_) => Some((Tbench::mb_per_s(res), unit)),
            Workload::Schbench(_) => Some((Schbench::rps(res), unit)),
            Workload::StressNgPipe(_) => Some((StressNgPipe::bogo_ops_per_s(res), unit)),
            Workload::Context1(_) => Some((Context1::lps(res), unit)),
            Workload::Shell(_) => Some((ShellScripts::lpm(res), unit)),
            Workload::Sysbench(_) => Some((Sysbench::events_per_s(res), unit)),
            _ => None,
        }
    }

    /// How long the benchmark runs in simulated time, for those that run for a
    /// set time (warm-up included); None for those that run until their work is
    /// done.
    pub fn expected_sim_ns(&self) -> Option<u64> {
        let ms = match self {
            Workload::Schbench(b) => b.warmup_ms + b.runtime_ms,
            Workload::Tbench(b) => b.warmup_ms + b.runtime_ms,
            Workload::GroupMix(m) => m.warmup_ms + m.window_ms,
            Workload::StressNgPipe(b) => b.timeout_ms,
            Workload::Context1(b) => b.duration_ms,
            Workload::Shell(b) => b.duration_ms,
            Workload::Sysbench(b) if b.test == sysbench::Test::Threads => b.time_ms,
            _ => return None,
        };
        Some(ms * 1_000_000)
    }

    /// The unit of `throughput()`, for benchmarks that report a rate.
    pub fn rate_unit(&self) -> Option<&'static str> {
        match self {
            Workload::Tbench(_) => Some("MB/sec"),
            Workload::Schbench(_) => Some("rps"),
            Workload::StressNgPipe(_) => Some("bogo ops/s"),
            Workload::Context1(_) => Some("lps"),
            Workload::Shell(_) => Some("lpm"),
            Workload::Sysbench(b) if b.test == sysbench::Test::Threads => Some("events/s"),
            _ => None,
        }
    }

    /// The benchmark's own results as named numbers, the figures its report line
    /// prints (hackbench's time, perf bench pipe's usecs/op and ops/sec, pft's
    /// faults per CPU-second and per wall second, schbench's latency percentiles
    /// and rps, tbench's MB/sec, make's real/user/sys, stress-ng's bogo ops,
    /// groupmix's busy share).
    pub fn results(&self, res: &RunResult) -> Vec<(&'static str, f64)> {
        let s = |ns: u64| ns as f64 / 1e9;
        let wall_s = s(res.elapsed_ns());
        match self {
            Workload::Hackbench(_) => vec![("time_s", wall_s)],
            Workload::Pipe(b) => {
                let us = res.elapsed_ns() as f64 / 1000.0;
                vec![
                    ("total_s", wall_s),
                    ("usecs_per_op", us / b.loops as f64),
                    ("ops_per_s", b.loops as f64 * 1e6 / us.max(1e-9)),
                ]
            }
            Workload::Pull(_) => {
                let [all, even, odd] = PullProbe::pulled_pct(res);
                vec![("pulled_pct", all), ("pulled_even_pct", even), ("pulled_odd_pct", odd)]
            }
            Workload::Newidle(_) => {
                let [at_sleep, later, busy, none] = NewidleProbe::arrivals(res).map(|n| n as f64);
                vec![
                    ("arrived_at_sleep", at_sleep),
                    ("arrived_at_sleep_p50_us", NewidleProbe::at_sleep_p50_us(res)),
                    ("arrived_later", later),
                    ("arrived_busy", busy),
                    ("not_arrived", none),
                    ("chances_per_round", NewidleProbe::chances_per_round(res)),
                    ("sleep_mean_us", NewidleProbe::sleep_mean_us(res)),
                ]
            }
            Workload::Pft(b) => {
                let cpu_s: f64 = res.tasks.iter().map(|t| t.run_ns as f64).sum::<f64>() / 1e9;
                let pages = b.pages() as f64;
                vec![
                    ("wall_s", wall_s),
                    ("faults_per_cpu_s", pages / cpu_s.max(1e-9)),
                    ("faults_per_wall_s", pages / wall_s.max(1e-9)),
                ]
            }
            Workload::GroupMix(_) => vec![("busy_pct", res.busy_pct()), ("idle_pct", 100.0 - res.busy_pct())],
            Workload::Schbench(_) => {
                let mut v = vec![("rps", Schbench::rps(res))];
                for (metric, names) in [
                    (schbench::WAKEUP_LATENCY, ["wakeup_p50_us", "wakeup_p90_us", "wakeup_p99_us", "wakeup_p999_us"]),
                    (schbench::REQUEST_LATENCY, ["request_p50_us", "request_p90_us", "request_p99_us", "request_p999_us"]),
                ] {
                    if let Some(h) = res.metrics.get(&metric) {
                        for (q, name) in [0.5, 0.9, 0.99, 0.999].into_iter().zip(names) {
                            v.push((name, (h.value_at_quantile(q) / 1000) as f64));
                        }
                    }
                }
                v
            }
            Workload::Tbench(_) => vec![("mb_per_s", Tbench::mb_per_s(res))],
            Workload::Make(_) => {
                let user: u64 = res.tasks.iter().map(|t| t.user_ns).sum();
                let sys: u64 = res.tasks.iter().map(|t| t.sys_ns).sum();
                vec![("real_s", wall_s), ("user_s", s(user)), ("sys_s", s(sys))]
            }
            Workload::StressNgPipe(_) => vec![
                ("bogo_ops", StressNgPipe::bogo_ops(res) as f64),
                ("bogo_ops_per_s", StressNgPipe::bogo_ops_per_s(res)),
                ("real_time_s", wall_s),
            ],
            Workload::Context1(_) => vec![("iterations", Context1::iterations(res) as f64), ("lps", Context1::lps(res))],
            Workload::Shell(_) => vec![("loops", ShellScripts::loops(res) as f64), ("lpm", ShellScripts::lpm(res))],
            Workload::Sysbench(_) => vec![
                ("total_time_s", wall_s),
                ("events", Sysbench::events(res) as f64),
                ("events_per_s", Sysbench::events_per_s(res)),
            ],
        }
    }

    /// What the tool itself prints after running.
    pub fn result_line(&self, res: &RunResult) -> String {
        match self {
            Workload::Hackbench(_) => Hackbench::time_line(res),
            Workload::Pipe(b) => b.result_lines(res),
            Workload::Pull(b) => b.result_lines(res),
            Workload::Newidle(b) => b.result_lines(res),
            Workload::Pft(b) => b.result_lines(res),
            Workload::GroupMix(m) => m.result_lines(res),
            Workload::Schbench(b) => b.result_lines(res),
            Workload::Tbench(b) => b.result_lines(res),
            Workload::Make(b) => b.result_lines(res),
            Workload::StressNgPipe(b) => b.result_lines(res),
            Workload::Context1(b) => b.result_lines(res),
            Workload::Shell(b) => b.result_lines(res),
            Workload::Sysbench(b) => b.result_lines(res),
        }
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    /// Times are compared as the benchmarks print them: hackbench and perf bench
    /// to the millisecond, pft to the centisecond, truncated; a run shorter than
    /// one step keeps its time; benchmarks that report a rate are untouched.
    #[test]
    fn elapsed_is_truncated_to_what_the_benchmark_prints() {
        let w = |s: &str| Workload::parse(s).unwrap();
        assert_eq!(w("hackbench").printed_elapsed_ns(7_281_999_999), 7_281_000_000);
        assert_eq!(w("pipe loops=10").printed_elapsed_ns(5_446_123_456), 5_446_000_000);
        assert_eq!(w("pft threads=3 mb=5").printed_elapsed_ns(1_904_379_848), 1_900_000_000);
        assert_eq!(w("pft threads=3 mb=5").printed_elapsed_ns(9_999_999), 9_999_999);
        assert_eq!(w("tbench clients=4").printed_elapsed_ns(12_345_678_901), 12_345_678_901);
    }

    /// Every workload's spelled-out spec parses back to the same workload.
    #[test]
    fn spec_round_trips_with_defaults_spelled_out() {
        for spec in [
            "hackbench",
            "hackbench groups=3 fds=4 loops=7 ipc=pipe mode=thread datasize=64",
            "pipe loops=100 mode=thread",
            "pull",
            "pull rounds=10 spin_us=20 sleep_us=200 sleep_odd_us=5",
            "pull rounds=10 fresh=1 settle_spin=1 sleep_us=30",
            "pull rounds=10 hog_prev=1 hog_waker=1",
            "newidle",
            "newidle rounds=5 sleep_us=50 run_us=30 settle_ms=4",
            "pft threads=3 mb=5",
            "groupmix tasks=5 shares=2",
            "schbench threads=2 workers=3 slice_us=500",
            "tbench clients=2",
            "make jobs=4 scale=0.01",
            "stress-ng pipe=2 timeout_ms=50 fill_cycles=10",
            "context1 copies=3 duration_ms=20",
            "shell copies=2 concurrent=8 duration_ms=30",
            "sysbench test=threads threads=4 time_ms=20 thread_locks=2",
            "sysbench threads=2 mutex_locks=100",
        ] {
            let w = Workload::parse(spec).unwrap();
            let again = Workload::parse(&w.spec()).unwrap_or_else(|e| panic!("{}: {e}", w.spec()));
            assert_eq!(again, w, "{spec} -> {}", w.spec());
        }
    }
}
