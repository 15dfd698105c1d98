//! make, as `make -jN buildworld` on FreeBSD: one `make` process owns the job
//! server's `jobs` tokens and walks a list of directories in order, at most
//! `dir_parallel` of them in flight. Each directory has a number of compiles and one
//! link that may start only once every compile of its directory has finished.
//! Whenever a token is free and a job is ready, make checks the target's
//! dependencies (a little user time and a few stat()s) and forks `sh -c 'cc …'`;
//! otherwise it blocks in wait(), and each reaped job returns its token. Entering a
//! directory costs make one exec (buildworld's `cd dir && make all` sub-make) and
//! `dir_ms` of user time (parsing the Makefiles and `.depend`); make does it
//! before starting more jobs, so it is a serial stretch.
//!
//! A job is `sh` (one exec) forking `cc` or `ld` and waiting for it. The compiler
//! pays `CC_EXECS` execs (the driver, cc1 and as), then alternates page-cache reads
//! (system time, `io_pct` of the compute that follows) with compute bursts of at
//! most `BURST_NS`; `DISK_READ_PER_MILLE` reads in a thousand, drawn from the
//! tool's own seeded stream, first wait for the disk. It ends by writing its
//! output. A link is the same with one exec.
//!
//! The build (the DAG) is drawn once, by make at its first step, from the tree's
//! own seeded stream (`tree`, so every run builds the same): `dirs` directories sharing `files` compiles with
//! lognormal weights of sigma `files_sigma_pct / 100` (most directories get a
//! handful, a few get hundreds, like libc or the compiler's libraries), normalised so that the
//! build's size does not depend on the seed, only how it spreads; each compile's
//! user time is lognormal (median `cc_ms`, sigma `cc_sigma_pct / 100`), each link's
//! likewise (`link_ms`, `link_sigma_pct`). `scale` builds that fraction of the
//! directories and of the compiles, for quick runs.
//!
//! Calibration. The reference is FreeBSD 8.4 `make -j16 buildworld` on a Ryzen 7
//! 1700 (16 threads): 385 s real, 2973 s user, 492 s sys, so 3465 CPU-s in 385 s
//! is 9.0 CPUs busy on average. Each default comes from those numbers as follows
//! (the seed's draws move the totals by about ±1%):
//! - Judgements, not fitted: `files` = 18000, an estimate of buildworld's object
//!   files (world, the toolchain built twice, lib32, libraries' .o/.So/.po);
//!   `files_sigma_pct` = 120 (a median directory of ~15 compiles, the largest of
//!   several hundred, as libc or the compiler's back end); `link_ms` = 150 with
//!   sigma 1 (mostly small programs, a few big libraries); `dir_ms` = 40 (make
//!   parsing `sys.mk`, `bsd.prog.mk` and `.depend`); `MAKE_JOB_*`.
//! - The three fitted numbers. Compile times (`cc_ms`), read time (`io_pct`) and
//!   the number of compiling directories (`dirs`) are set together so that
//!   `ule@pre` (as FreeBSD 8.4 ran) on the zen1 profile, whose two hardware
//!   threads per core slow each other (`smt_throughput_pct`), lands on the three
//!   totals. Times here are alone times: the SMT slowdown is the machine model's.
//!   User time, 2973 s, is mostly compiles: `cc_ms` = 64 (mean 64 × e^(1/2) =
//!   106 ms alone). System time, 492 s: `exec_us` = 1600 is a judgement of one
//!   exec's average (a static sh ~0.3 ms, the cc driver ~1 ms, cc1 ~4 ms of page
//!   faults, as ~1 ms) for ~75 k execs; outputs (`WRITE_NS`), make's stat()s
//!   (`MAKE_JOB_SYS_NS`), fork, exit and the scheduler add a little; the rest is
//!   reading sources and headers, `io_pct` = 10 of the compute. Real time, 385 s,
//!   is the work over 16 CPUs plus a serial part per directory (the sub-make's
//!   entry, the longest compile and the link, two directories overlapping):
//!   `dirs` = 640. In simulation (tree 1, seeds 1-2) that gives 386 s real,
//!   2995 s user, 493 s sys. A real tree has more Makefile directories, but many
//!   build nothing (includes, manual pages, scripts); `dirs` counts the ones that
//!   compile.

use std::collections::{BTreeMap, VecDeque};

use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::task::TaskId;
use schedlab_core::RunResult;

use crate::params::Params;

/// Every key `make` accepts, for the unknown-key error.
pub const KEYS: &str =
    "jobs, dirs, files, scale, tree, dir_parallel, files_sigma_pct, cc_ms, cc_sigma_pct, link_ms, link_sigma_pct, dir_ms, exec_us, io_pct";

/// `scale` is stored in parts per million so that the spec stays exact and `Eq`.
const PPM: u64 = 1_000_000;

/// Index of the tree's random stream (see `Make::tree`).
const TREE_STREAM: u64 = 0x7472_6565;

/// Execs of one compile: the cc driver, cc1 and as.
const CC_EXECS: u64 = 3;
/// Execs of one link: ld (or ar) run by the driver.
const LD_EXECS: u64 = 1;
/// The longest stretch of compute between two reads: cc1 reads a header, or the
/// next part of one, every few ms of parsing.
const BURST_NS: u64 = 2_000_000;
/// Reads that miss the page cache and wait for the disk, per thousand.
const DISK_READ_PER_MILLE: u64 = 15;
/// A disk read's wait, uniform: an SSD's few hundred µs up to a seek of a few ms.
const DISK_MIN_NS: u64 = 200_000;
const DISK_MAX_NS: u64 = 3_000_000;
/// Writing the object file or binary into the page cache, and closing it.
const WRITE_NS: u64 = 500_000;
/// make's dependency check of one target: walking its prerequisites (user) and
/// stat()ing the source and the headers `.depend` lists (system).
const MAKE_JOB_USER_NS: u64 = 1_000_000;
const MAKE_JOB_SYS_NS: u64 = 200_000;
/// No draw is more than this many medians (keeps a freak sample from being a
/// build of its own).
const MAX_MEDIANS: f64 = 1000.0;

/// The `make` workload's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Make {
    /// Job server tokens (`-j`).
    pub jobs: u64,
    /// Directories of the full build.
    pub dirs: u64,
    /// Compiles of the full build (at least one per directory).
    pub files: u64,
    /// The fraction of the build to run, in parts per million.
    pub scale_ppm: u64,
    /// Which source tree: the seed its DAG and job times are drawn from. Every run
    /// of one tree builds the same thing, as repeated buildworlds of one checkout
    /// do; the run seed varies only the disk waits and the scheduling.
    pub tree: u64,
    /// Directories in flight at once.
    pub dir_parallel: u64,
    /// Sigma of the lognormal spread of compiles over directories, × 100.
    pub files_sigma_pct: u64,
    /// Median user time of one compile.
    pub cc_ms: u64,
    pub cc_sigma_pct: u64,
    /// Median user time of one link.
    pub link_ms: u64,
    pub link_sigma_pct: u64,
    /// make's user time entering one directory.
    pub dir_ms: u64,
    /// System time of one exec.
    pub exec_us: u64,
    /// System time of reads, as a percentage of the compute they feed.
    pub io_pct: u64,
}

impl Make {
    /// Parses a whole `make key=value ...` spec. `scale` is a decimal fraction,
    /// which `Params` does not read, so it is taken out here first; every other key
    /// goes through `Params`.
    pub fn from_spec(spec: &str) -> Result<Make, SpecError> {
        let mut scale = None;
        let mut rest = Vec::new();
        for word in spec.split_whitespace() {
            match word.strip_prefix("scale=") {
                Some(v) if scale.is_some() => {
                    return Err(SpecError::new("workload make parameter", format!("scale={v}"), "each key at most once"));
                }
                Some(v) => scale = Some(parse_scale_ppm(v)?),
                None => rest.push(word),
            }
        }
        let (_, mut p) = Params::parse(&rest.join(" "))?;
        let m = Make::from_params(&mut p, scale.unwrap_or(PPM))?;
        p.finish(KEYS)?;
        Ok(m)
    }

    /// Reads every key but `scale`, with their defaults: `jobs=16 dirs=640
    /// files=18000 tree=1 dir_parallel=2 files_sigma_pct=120 cc_ms=64
    /// cc_sigma_pct=100 link_ms=150 link_sigma_pct=100 dir_ms=40 exec_us=1600
    /// io_pct=10`.
    fn from_params(p: &mut Params, scale_ppm: u64) -> Result<Make, SpecError> {
        Ok(Make {
            jobs: p.u64_in("jobs", 16, 1, 4096)?,
            dirs: p.u64_in("dirs", 640, 1, 1_000_000)?,
            files: p.u64_in("files", 18_000, 1, 10_000_000)?,
            scale_ppm,
            tree: p.u64_in("tree", 1, 0, u64::MAX)?,
            dir_parallel: p.u64_in("dir_parallel", 2, 1, 1_000_000)?,
            files_sigma_pct: p.u64_in("files_sigma_pct", 120, 0, 400)?,
            cc_ms: p.u64_in("cc_ms", 64, 1, 1_000_000)?,
            cc_sigma_pct: p.u64_in("cc_sigma_pct", 100, 0, 400)?,
            link_ms: p.u64_in("link_ms", 150, 1, 1_000_000)?,
            link_sigma_pct: p.u64_in("link_sigma_pct", 100, 0, 400)?,
            dir_ms: p.u64_in("dir_ms", 40, 0, 1_000_000)?,
            exec_us: p.u64_in("exec_us", 1600, 0, 1_000_000)?,
            io_pct: p.u64_in("io_pct", 10, 0, 1000)?,
        })
    }

    /// Directories this run builds: `dirs × scale`, at least one.
    pub fn dirs_built(&self) -> u64 {
        (self.dirs * self.scale_ppm).div_ceil(PPM).max(1)
    }

    /// Compiles this run builds: `files × scale`, at least one per directory.
    pub fn files_built(&self) -> u64 {
        (self.files * self.scale_ppm).div_ceil(PPM).max(self.dirs_built())
    }

    pub fn banner(&self) -> String {
        format!(
            "make -j{} buildworld: {} of {} directories and ~{} of {} compiles (scale={}, tree={}), dir_parallel={}, \
             files_sigma_pct={}, compile median cc_ms={} cc_sigma_pct={}, link median link_ms={} link_sigma_pct={}, \
             dir_ms={}, exec_us={}, io_pct={}",
            self.jobs,
            self.dirs_built(),
            self.dirs,
            self.files_built(),
            self.files,
            format_ppm(self.scale_ppm),
            self.tree,
            self.dir_parallel,
            self.files_sigma_pct,
            self.cc_ms,
            self.cc_sigma_pct,
            self.link_ms,
            self.link_sigma_pct,
            self.dir_ms,
            self.exec_us,
            self.io_pct
        )
    }

    /// BSD time(1)'s line for the whole build, and what make started.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let secs = |ns: u64| ns as f64 / 1e9;
        let user_ns: u64 = res.tasks.iter().map(|t| t.user_ns).sum();
        let sys_ns: u64 = res.tasks.iter().map(|t| t.sys_ns).sum();
        let count = |comm: &str| res.tasks.iter().filter(|t| t.comm == comm).map(|t| t.count).sum::<u64>();
        let (compiles, links) = (count(CC_COMM), count(LD_COMM));
        // Every task but make itself was forked.
        let forked = res.task_count().saturating_sub(1);
        format!(
            "{:10.2} real {:10.2} user {:10.2} sys\n{} jobs run ({compiles} compiles, {links} links), {forked} processes forked",
            secs(res.elapsed_ns()),
            secs(user_ns),
            secs(sys_ns),
            compiles + links
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(MakeProgram::new(self.clone()))
    }
}

/// `scale`: a decimal fraction in (0, 1] with at most 6 decimals, in ppm.
fn parse_scale_ppm(v: &str) -> Result<u64, SpecError> {
    let bad = || SpecError::new("workload make scale", v, "a decimal fraction from 0.000001 to 1, e.g. 0.01");
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() && frac.is_empty() || !digits(int) || !digits(frac) || frac.len() > 6 || int.len() > 7 {
        return Err(bad());
    }
    let int_ppm = if int.is_empty() { 0 } else { int.parse::<u64>().map_err(|_| bad())? * PPM };
    let frac_ppm = if frac.is_empty() { 0 } else { format!("{frac:0<6}").parse::<u64>().map_err(|_| bad())? };
    let ppm = int_ppm + frac_ppm;
    if ppm == 0 || ppm > PPM {
        return Err(bad());
    }
    Ok(ppm)
}

/// `ppm` as the shortest decimal fraction.
fn format_ppm(ppm: u64) -> String {
    let s = format!("{}.{:06}", ppm / PPM, ppm % PPM);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

// ------------------------------------------------------------------ the DAG

/// One directory of the build: its compiles' and its link's user time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dir {
    pub compile_ns: Vec<u64>,
    pub link_ns: u64,
}

/// The build, directories in the order make walks them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dag {
    pub dirs: Vec<Dir>,
}

impl Dag {
    /// The build of `m`'s tree, drawn from the tree's own stream, not the run's:
    /// the same build every run.
    pub fn of_tree(m: &Make) -> Dag {
        Dag::generate(m, &mut SimRng::derive(m.tree, schedlab_core::rng::Stream::Workload, TREE_STREAM))
    }

    /// Draws the build of `m` from `rng`.
    pub fn generate(m: &Make, rng: &mut SimRng) -> Dag {
        let ndirs = m.dirs_built() as usize;
        // Compiles per directory: lognormal weights normalised to the build's size.
        let weights: Vec<f64> = (0..ndirs).map(|_| lognormal(rng, 1.0, m.files_sigma_pct)).collect();
        let total: f64 = weights.iter().sum();
        let files = m.files_built() as f64;
        let counts: Vec<usize> = weights.iter().map(|w| ((w / total * files).round() as usize).max(1)).collect();
        let dirs = counts
            .into_iter()
            .map(|n| {
                let compile_ns = (0..n).map(|_| lognormal_ns(rng, m.cc_ms * 1_000_000, m.cc_sigma_pct)).collect();
                let link_ns = lognormal_ns(rng, m.link_ms * 1_000_000, m.link_sigma_pct);
                Dir { compile_ns, link_ns }
            })
            .collect();
        Dag { dirs }
    }

    pub fn compiles(&self) -> usize {
        self.dirs.iter().map(|d| d.compile_ns.len()).sum()
    }

    /// User time the build asks for: every compile and link, and make's own work.
    pub fn user_ns(&self, m: &Make) -> u64 {
        let jobs: u64 = self.dirs.iter().map(|d| d.compile_ns.iter().sum::<u64>() + d.link_ns).sum();
        let make_jobs = (self.compiles() + self.dirs.len()) as u64 * MAKE_JOB_USER_NS;
        jobs + make_jobs + self.dirs.len() as u64 * m.dir_ms * 1_000_000
    }
}

/// A uniform draw in (0, 1).
fn unit(rng: &mut SimRng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// A lognormal draw: `median × e^(sigma z)`, z standard normal (Box–Muller),
/// sigma given × 100.
fn lognormal(rng: &mut SimRng, median: f64, sigma_pct: u64) -> f64 {
    let (u1, u2) = (unit(rng), unit(rng));
    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
    median * (sigma_pct as f64 / 100.0 * z).exp().min(MAX_MEDIANS)
}

/// A lognormal time, whole ns, at least 1 µs.
fn lognormal_ns(rng: &mut SimRng, median_ns: u64, sigma_pct: u64) -> u64 {
    (lognormal(rng, median_ns as f64, sigma_pct).round() as u64).max(1000)
}

// ------------------------------------------------------------------ the jobs

/// The main task's name.
pub const MAKE_COMM: &str = "make";
const SH_COMM: &str = "sh";
const CC_COMM: &str = "cc";
const LD_COMM: &str = "ld";

/// `sh -c 'cc …'`: exec the shell, fork the tool, wait for it, exit.
struct Shell {
    exec_ns: u64,
    /// The tool, until forked.
    tool: Option<(String, Box<dyn Program>)>,
    step: u8,
}

impl Program for Shell {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Exec { ns: self.exec_ns },
            2 => {
                let (comm, program) = self.tool.take().expect("forked once");
                Op::Fork { kind: ForkKind::Process, comm: Some(comm), program }
            }
            3 => Op::WaitChild,
            _ => Op::Exit,
        }
    }
}

/// cc or ld: start up, then reads and compute bursts, then write the output.
struct Tool {
    startup_ns: u64,
    user_left_ns: u64,
    io_pct: u64,
    ops: VecDeque<Op>,
    started: bool,
    written: bool,
}

impl Tool {
    fn new(m: &Make, execs: u64, user_ns: u64) -> Tool {
        Tool {
            startup_ns: execs * m.exec_us * 1000,
            user_left_ns: user_ns,
            io_pct: m.io_pct,
            ops: VecDeque::new(),
            started: false,
            written: false,
        }
    }
}

impl Program for Tool {
    fn next(&mut self, _last: OpResult, rng: &mut SimRng) -> Op {
        if let Some(op) = self.ops.pop_front() {
            return op;
        }
        if !self.started {
            self.started = true;
            // The driver's exec (cc1's and as's are lumped into its startup:
            // one sched_exec() on Linux).
            return Op::Exec { ns: self.startup_ns };
        }
        if self.user_left_ns > 0 {
            // Read what the next burst works on (sometimes waiting for the disk
            // first), then compute.
            let burst_ns = self.user_left_ns.min(BURST_NS);
            self.user_left_ns -= burst_ns;
            if rng.range(0, 999) < DISK_READ_PER_MILLE {
                self.ops.push_back(Op::Sleep { ns: rng.range(DISK_MIN_NS, DISK_MAX_NS) });
            }
            self.ops.push_back(Op::Kernel { ns: burst_ns * self.io_pct / 100 });
            self.ops.push_back(Op::Compute { ns: burst_ns });
            return self.ops.pop_front().expect("queued");
        }
        if !self.written {
            self.written = true;
            return Op::Kernel { ns: WRITE_NS };
        }
        Op::Exit
    }
}

// ------------------------------------------------------------------ make

/// A job of the DAG: compile `index` of directory `dir`, or its link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    Compile { dir: usize, index: usize },
    Link { dir: usize },
}

/// A directory make has entered and whose link has not been reaped.
#[derive(Clone, Debug)]
struct InFlight {
    dir: usize,
    compiles_started: usize,
    compiles_done: usize,
    link_started: bool,
}

/// Where the result of make's previous operation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Nothing,
    Forked(Job),
    Reaped,
}

/// The make process.
struct MakeProgram {
    m: Make,
    /// Drawn at the first step.
    dag: Option<Dag>,
    /// The next directory to enter.
    next_dir: usize,
    /// Entered directories, oldest first.
    in_flight: Vec<InFlight>,
    /// Running jobs by their sh's task (each holds a token).
    running: BTreeMap<TaskId, Job>,
    /// The job being started (token taken, dependency check under way).
    starting: Option<Job>,
    ops: VecDeque<Op>,
    expect: Expect,
}

impl MakeProgram {
    fn new(m: Make) -> MakeProgram {
        MakeProgram {
            m,
            dag: None,
            next_dir: 0,
            in_flight: Vec::new(),
            running: BTreeMap::new(),
            starting: None,
            ops: VecDeque::new(),
            expect: Expect::Nothing,
        }
    }

    /// Tokens in use: running jobs and the one being started.
    fn tokens_used(&self) -> u64 {
        self.running.len() as u64 + u64::from(self.starting.is_some())
    }

    /// Books a reaped job: its token comes back, its directory advances.
    fn job_done(&mut self, job: Job) {
        match job {
            Job::Compile { dir, .. } => {
                let d = self.in_flight.iter_mut().find(|d| d.dir == dir).expect("a compile's directory is in flight");
                d.compiles_done += 1;
            }
            Job::Link { dir } => self.in_flight.retain(|d| d.dir != dir),
        }
    }

    /// The first ready job, oldest directory first: its link once all its compiles
    /// are done, else its next compile.
    fn ready_job(&mut self) -> Option<Job> {
        let dag = self.dag.as_ref().expect("drawn");
        for d in &mut self.in_flight {
            let n = dag.dirs[d.dir].compile_ns.len();
            if !d.link_started && d.compiles_done == n {
                d.link_started = true;
                return Some(Job::Link { dir: d.dir });
            }
            if d.compiles_started < n {
                d.compiles_started += 1;
                return Some(Job::Compile { dir: d.dir, index: d.compiles_started - 1 });
            }
        }
        None
    }

    /// `sh -c 'cc …'` for `job`.
    fn shell(&self, job: Job) -> Box<dyn Program> {
        let dag = self.dag.as_ref().expect("drawn");
        let (comm, tool) = match job {
            Job::Compile { dir, index } => (CC_COMM, Tool::new(&self.m, CC_EXECS, dag.dirs[dir].compile_ns[index])),
            Job::Link { dir } => (LD_COMM, Tool::new(&self.m, LD_EXECS, dag.dirs[dir].link_ns)),
        };
        let tool: Box<dyn Program> = Box::new(tool);
        Box::new(Shell { exec_ns: self.m.exec_us * 1000, tool: Some((comm.to_string(), tool)), step: 0 })
    }
}

impl Program for MakeProgram {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if self.dag.is_none() {
            self.dag = Some(Dag::of_tree(&self.m));
        }
        match (std::mem::replace(&mut self.expect, Expect::Nothing), last) {
            (Expect::Forked(job), OpResult::Task(t)) => {
                self.starting = None;
                self.running.insert(t, job);
            }
            (Expect::Reaped, OpResult::Task(t)) => {
                let job = self.running.remove(&t).expect("make reaps only its jobs");
                self.job_done(job);
            }
            _ => {}
        }
        if let Some(op) = self.ops.pop_front() {
            if matches!(op, Op::Fork { .. }) {
                self.expect = Expect::Forked(self.starting.expect("a fork starts a job"));
            }
            return op;
        }
        let ndirs = self.dag.as_ref().expect("drawn").dirs.len();
        // Enter the next directory as soon as there is room: the sub-make's exec
        // and its Makefile parsing, before any more jobs start.
        if self.in_flight.len() < self.m.dir_parallel as usize && self.next_dir < ndirs {
            self.in_flight.push(InFlight { dir: self.next_dir, compiles_started: 0, compiles_done: 0, link_started: false });
            self.next_dir += 1;
            self.ops.push_back(Op::Compute { ns: self.m.dir_ms * 1_000_000 });
            return Op::Kernel { ns: self.m.exec_us * 1000 };
        }
        // Start a ready job if a token is free: check its dependencies, then fork.
        if self.tokens_used() < self.m.jobs {
            if let Some(job) = self.ready_job() {
                self.starting = Some(job);
                let sh = self.shell(job);
                self.ops.push_back(Op::Kernel { ns: MAKE_JOB_SYS_NS });
                self.ops.push_back(Op::Fork { kind: ForkKind::Process, comm: Some(SH_COMM.to_string()), program: sh });
                return Op::Compute { ns: MAKE_JOB_USER_NS };
            }
        }
        if !self.running.is_empty() {
            self.expect = Expect::Reaped;
            return Op::WaitChild;
        }
        debug_assert!(self.in_flight.is_empty() && self.next_dir == ndirs, "make stops only when the build is done");
        Op::Exit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Workload;
    use schedlab_core::rng::Stream;

    fn spec(s: &str) -> Make {
        match Workload::parse(s).unwrap() {
            Workload::Make(m) => m,
            w => panic!("{s} parsed as {w:?}"),
        }
    }

    fn err(s: &str) -> String {
        Workload::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn make_spec_defaults_and_values() {
        let m = spec("make");
        assert_eq!((m.jobs, m.dirs, m.files, m.scale_ppm, m.dir_parallel), (16, 640, 18_000, PPM, 2));
        let m = spec("make jobs=4 scale=0.01 dir_parallel=3 cc_ms=50");
        assert_eq!((m.jobs, m.scale_ppm, m.dir_parallel, m.cc_ms), (4, 10_000, 3, 50));
        // 640 × 0.01 = 6.4, rounded up.
        assert_eq!((m.dirs_built(), m.files_built()), (7, 180));
        assert_eq!(spec("make scale=1").scale_ppm, PPM);
        assert_eq!(spec("make scale=.5").scale_ppm, PPM / 2);
        assert_eq!(spec("make scale=0.000001").dirs_built(), 1);
        assert!(spec("make scale=0.25").banner().contains("(scale=0.25, tree=1)"));
    }

    #[test]
    fn make_spec_errors_name_field_value_and_form() {
        assert_eq!(err("make jobs=0"), "invalid workload make jobs '0': expected an integer from 1 to 4096");
        assert_eq!(err("make dirs=many"), "invalid workload make dirs 'many': expected an integer from 1 to 1000000");
        let scale = "expected a decimal fraction from 0.000001 to 1, e.g. 0.01";
        for bad in ["0", "0.0", "1.5", "2", "1e-2", "-0.1", "0.0000001", "abc", ".", "0.5.1"] {
            assert_eq!(err(&format!("make scale={bad}")), format!("invalid workload make scale '{bad}': {scale}"));
        }
        assert_eq!(
            err("make scale=0.1 scale=0.2"),
            "invalid workload make parameter 'scale=0.2': expected each key at most once"
        );
        assert_eq!(
            err("make threads=4"),
            format!("invalid workload make parameter 'threads=4': expected one of the keys {KEYS}")
        );
        assert_eq!(err("make jobs"), "invalid workload make parameter 'jobs': expected key=value");
    }

    #[test]
    fn make_dag_is_reproducible_and_heavy_tailed() {
        let m = spec("make");
        let draw = |seed| Dag::generate(&m, &mut SimRng::derive(seed, Stream::Workload, 0));
        let (a, b, c) = (draw(1), draw(1), draw(2));
        assert_eq!(a, b, "same seed, same build");
        assert_ne!(a, c, "another seed, another build");
        for dag in [&a, &c] {
            assert_eq!(dag.dirs.len(), 640);
            // The size is fixed by the parameters (rounding and the 1-per-directory
            // floor move it a little), only the spread depends on the seed.
            assert!(dag.compiles().abs_diff(18_000) < 200, "{} compiles", dag.compiles());
            // Most directories are small, a few have hundreds of files.
            let mut sizes: Vec<usize> = dag.dirs.iter().map(|d| d.compile_ns.len()).collect();
            sizes.sort_unstable();
            let (median, largest) = (sizes[sizes.len() / 2], sizes[sizes.len() - 1]);
            assert!(median <= 20, "median directory {median} files");
            assert!(largest >= 200 && largest >= 10 * median, "largest directory {largest} files, median {median}");
        }
    }

    /// Drives make by hand as a kernel would, finishing a random running job at
    /// each wait(), and checks the job server's rules at every fork.
    #[test]
    fn make_links_wait_for_their_compiles_and_jobs_never_exceed_tokens() {
        for (jobs, dir_parallel, seed) in [(4, 2, 1), (16, 2, 2), (1, 1, 3), (3, 5, 4)] {
            let m = spec(&format!("make jobs={jobs} dir_parallel={dir_parallel} scale=0.02"));
            let mut make = MakeProgram::new(m.clone());
            let mut rng = SimRng::derive(seed, Stream::Workload, 0);
            let mut kernel_rng = SimRng::derive(seed, Stream::TieBreak, 0);
            let mut running: Vec<(TaskId, Job)> = Vec::new();
            let mut compiles_done: BTreeMap<usize, usize> = BTreeMap::new();
            let mut links_done = 0;
            let mut max_running = 0;
            let mut next_task = 1;
            let mut last = OpResult::None;
            loop {
                let op = make.next(last, &mut rng);
                last = OpResult::None;
                match op {
                    Op::Fork { .. } => {
                        let Expect::Forked(job) = make.expect else { panic!("fork without a job") };
                        let dag = make.dag.as_ref().unwrap();
                        if let Job::Link { dir } = job {
                            let done = compiles_done.get(&dir).copied().unwrap_or(0);
                            assert_eq!(done, dag.dirs[dir].compile_ns.len(), "link of dir {dir} before its compiles finished");
                        }
                        running.push((next_task, job));
                        max_running = max_running.max(running.len());
                        assert!(running.len() as u64 <= jobs, "{} jobs running with {jobs} tokens", running.len());
                        last = OpResult::Task(next_task);
                        next_task += 1;
                    }
                    Op::WaitChild => {
                        assert!(!running.is_empty(), "make waits with no child");
                        let i = kernel_rng.range(0, running.len() as u64 - 1) as usize;
                        let (t, job) = running.swap_remove(i);
                        match job {
                            Job::Compile { dir, .. } => *compiles_done.entry(dir).or_default() += 1,
                            Job::Link { .. } => links_done += 1,
                        }
                        last = OpResult::Task(t);
                    }
                    Op::Exit => break,
                    Op::Compute { .. } | Op::Kernel { .. } | Op::Exec { .. } => {}
                    _ => panic!("make does only compute, kernel work, fork and wait"),
                }
            }
            let dag = make.dag.as_ref().unwrap();
            assert!(running.is_empty());
            assert_eq!(links_done, dag.dirs.len());
            assert_eq!(compiles_done.values().sum::<usize>(), dag.compiles());
            assert_eq!(max_running as u64, jobs, "make used every token");
        }
    }

    /// A 1% build on 4 CPUs: every job runs, and the user time is what was drawn.
    #[test]
    fn make_small_build_runs_and_user_time_is_the_drawn_compute() {
        let spec_text = "make jobs=4 scale=0.01";
        let w = Workload::parse(spec_text).unwrap();
        let Workload::Make(m) = &w else { unreachable!() };
        let seed = 5;
        let topo = schedlab_core::Topology::parse("1x1x4x1").unwrap();
        let policy = schedlab_policies::policy_by_name("fifo", &[]).unwrap();
        let cfg = schedlab_core::RunConfig { seed, check: true, ..Default::default() };
        let cost = schedlab_core::MachineProfile::from_toml(include_str!("../../../machines/zen1.toml"), "zen1").unwrap();
        let r = schedlab_core::Engine::new(topo, cost, policy, cfg, w.main_comm(), w.main_program()).run();
        assert!(r.violations.is_empty(), "{:#?}", r.violations);
        assert!(!r.timed_out);
        let dag = Dag::of_tree(m);
        let jobs = dag.compiles() + dag.dirs.len();
        let user_ns: u64 = r.tasks.iter().map(|t| t.user_ns).sum();
        let drawn_ns = dag.user_ns(m);
        // Above the drawn compute only by cache refills after migrations.
        assert!(user_ns >= drawn_ns && user_ns - drawn_ns < drawn_ns / 100, "user {user_ns} vs drawn {drawn_ns} ns");
        // System time: the execs, reads, writes and make's stat()s the model asks
        // for, plus fork, exit, system-call entries and the scheduler's own work.
        let (compiles, dirs) = (dag.compiles() as u64, dag.dirs.len() as u64);
        let execs = compiles * (1 + CC_EXECS) + dirs * (1 + LD_EXECS) + dirs;
        let tool_ns = drawn_ns - jobs as u64 * MAKE_JOB_USER_NS - dirs * m.dir_ms * 1_000_000;
        let asked_sys_ns = execs * m.exec_us * 1000 + tool_ns * m.io_pct / 100 + jobs as u64 * (WRITE_NS + MAKE_JOB_SYS_NS);
        let sys_ns: u64 = r.tasks.iter().map(|t| t.sys_ns).sum();
        assert!(sys_ns >= asked_sys_ns && sys_ns - asked_sys_ns < asked_sys_ns / 50, "sys {sys_ns} vs asked {asked_sys_ns} ns");
        let out = w.result_line(&r);
        let first = out.lines().next().unwrap();
        assert!(first.ends_with(" sys") && first.contains(" real ") && first.contains(" user "), "{out}");
        assert!(
            out.contains(&format!(
                "\n{jobs} jobs run ({} compiles, {} links), {} processes forked",
                dag.compiles(),
                dag.dirs.len(),
                2 * jobs
            )),
            "{out}"
        );
        // Never more than 4 jobs on 4 CPUs and some waiting for make: less than 4 busy.
        let cpu_s: f64 = r.tasks.iter().map(|t| t.run_ns as f64).sum::<f64>();
        assert!(cpu_s / (r.elapsed_ns() as f64) < 4.0);
    }
}
