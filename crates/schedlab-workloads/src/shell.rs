//! UnixBench's "Shell Scripts (N concurrent)" (the `shell1` and `shell8` tests of
//! byte-unixbench's `Run`: `looper 60 multi.sh N`). Each copy is a `looper`
//! (UnixBench/src/looper.c) that forks and execs `multi.sh N` (a `/bin/sh`
//! script, UnixBench/pgms/multi.sh) over and over until its alarm fires, and
//! counts the runs that finished. `multi.sh N` starts N background `/bin/sh
//! tst.sh sort.src` and waits for them; `tst.sh` (UnixBench/pgms/tst.sh) runs,
//! one after another,
//!
//! ```text
//! sort > sort.$$ < sort.src
//! od sort.$$ | sort -n -k 1 > od.$$
//! grep the sort.$$ | tee grep.$$ | wc > wc.$$
//! rm sort.$$ grep.$$ od.$$ wc.$$
//! ```
//!
//! so one loop is 1 + 8 N processes (multi.sh, and per script the shell and its
//! seven commands), each a fork, an exec and an exit, and 2 N pipelines. UnixBench's `Run` starts `copies` loopers at once and reports the
//! copies' loops summed, per minute ("lpm").
//!
//! What each process does comes from a trace of the real thing on this project's
//! host (2-vCPU KVM guest, AMD EPYC, Linux 6.18.44, dash 0.5.12 as /bin/sh, GNU
//! coreutils 9.1, grep 3.8; 2026-11-27), made and summarised by
//! tools/unixbench-shell/ (`record.sh`, `summarise.py`): 100 runs of `multi.sh 1`
//! and 33 of `multi.sh 8` pinned to one vCPU (so that every switch is traced),
//! recording sched_switch and sched_process_fork/exec/exit, and 50 more runs of
//! `multi.sh 1` with the read and write system calls. The CPU times are means
//! over the runs (so that they add up to the loop's), each process's split at
//! its own events:
//!
//! - from its fork to the exec tracepoint (`pre_exec_us`: the forked shell's
//!   redirections and most of execve()), modelled as one execve() (`Op::Exec`:
//!   on Linux it starts with `sched_exec()`'s balancing);
//! - in the new image, between its own forks (the shells: `MULTI_*`,
//!   `TST_PHASE_US`), or, for a command, from the exec to its first read of
//!   standard input or write of standard output (dynamic loading, locale,
//!   opening files: about 0.5 ms for every program), its work on the data and
//!   the rest up to exit_group() (these three medians of the system-call runs);
//! - after the exit tracepoint (`exit_us`: exit_mm() and the rest of do_exit(),
//!   80-95 µs for these dynamically linked programs).
//!
//! The fork and exit inside those figures are this host's (`fork_ns` 54.6 µs
//! and `exit_ns` 34.4 µs, measured by `schedlab calibrate` the same day as the
//! traces, then in machines/epyc-kvm.toml); the model takes them out and charges the simulated machine's
//! own `fork_ns` and `exit_ns` through `Op::Fork` and `Op::Exit`. The rest is
//! taken as it ran here: there is no trace of the Broadwell machines that
//! published the seed's figures, so the per-process times are this host's
//! (one EPYC vCPU at about 4.4 GHz), not theirs.
//!
//! Pipes: `od` writes its 34 137 bytes of output in 4 KiB stdio buffers, one per
//! 1/9 of its data work; `grep` writes its 924 bytes of matches once; `tee`
//! and `wc` read until they have them all. The real readers then read end of
//! file when the writer exits; here a reader stops once it has every byte (the
//! model's pipes have no end of file), a difference of one wakeup per pipe.
//!
//! A pipe is freed when its pipeline has been reaped (the shell closed its own
//! ends when it forked the last member; the members' close at exit); the model
//! has the shell free it then, at no cost.
//!
//! Files (sort.src, the temporary files) are in the page cache; their reads and
//! writes are part of the measured CPU time.
//!
//! At the alarm the real looper prints its count and exits, leaving the loop it
//! was in to finish on its own; here the looper starts no loop after the alarm,
//! waits for the one in flight, and only loops finished inside the window count.

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;
use crate::timed::TimedInstances;

/// `Op::Record` metric: one sample per finished loop of a looper.
pub const LOOPS: u32 = 1;

/// Most copies a spec may ask for.
const MAX_COPIES: u64 = 4096;
/// Most concurrent `tst.sh` per loop (UnixBench runs 1, 8 and 16).
const MAX_CONCURRENT: u64 = 64;

const US: u64 = 1000;

/// This host's fork() and exit(), inside the traced durations (`schedlab
/// calibrate` the day of the traces): taken out, the simulated machine's are
/// charged.
const TRACED_FORK_NS: u64 = 54_571;
const TRACED_EXIT_NS: u64 = 34_385;

/// The looper's child, from its fork to the exec of `/bin/sh multi.sh`, µs.
const MULTI_PRE_EXEC_US: u64 = 80;
/// `multi.sh`: from the exec to its first fork (dash starting, reading and
/// parsing the script; the fork included), µs.
const MULTI_START_US: u64 = 458;
/// `multi.sh`: each further turn of its `while` loop, a fork included
/// (`multi.sh 8`: 60-80 µs each, mean 68).
const MULTI_LOOP_US: u64 = 68;
/// `multi.sh`: after its last fork up to its exit, with one child to reap
/// (`multi.sh 1`).
const MULTI_END_US: u64 = 63;
/// `multi.sh`: each further child reaped by `wait` (`multi.sh 8` ends in
/// 159 µs: (159 - 63) / 7).
const MULTI_REAP_US: u64 = 14;
/// `multi.sh`'s exit, after the exit tracepoint (exit_mm() and the rest).
const MULTI_EXIT_US: u64 = 68;

/// `multi.sh`'s child, from its fork to the exec of `/bin/sh tst.sh`, µs.
const TST_PRE_EXEC_US: u64 = 149;
/// `tst.sh` (dash), from its exec: the work before each of its seven forks and
/// after the last (`sort`, `od`, `sort -n`, `grep`, `tee`, `wc`, `rm`, then up to
/// the exit), forks and waits included, µs.
const TST_PHASE_US: [u64; 8] = [445, 83, 52, 96, 73, 68, 76, 21];
/// `tst.sh`'s exit, after the exit tracepoint.
const TST_EXIT_US: u64 = 69;

/// One command's process: what the forked shell does before exec, the image
/// up to the exit tracepoint, the data work within it (from its first read of
/// standard input or write of standard output to its last) and what follows up
/// to exit_group(), and the exit after the tracepoint, µs.
struct Command {
    comm: &'static str,
    pre_exec_us: u64,
    image_us: u64,
    data_us: u64,
    tail_us: u64,
    exit_us: u64,
}

const SORT: Command = Command { comm: "sort", pre_exec_us: 68, image_us: 615, data_us: 94, tail_us: 11, exit_us: 82 };
const OD: Command = Command { comm: "od", pre_exec_us: 164, image_us: 872, data_us: 308, tail_us: 3, exit_us: 80 };
const SORT_N: Command = Command { comm: "sort", pre_exec_us: 203, image_us: 659, data_us: 113, tail_us: 15, exit_us: 81 };
const GREP: Command = Command { comm: "grep", pre_exec_us: 169, image_us: 760, data_us: 2, tail_us: 7, exit_us: 95 };
const TEE: Command = Command { comm: "tee", pre_exec_us: 173, image_us: 535, data_us: 14, tail_us: 11, exit_us: 74 };
const WC: Command = Command { comm: "wc", pre_exec_us: 185, image_us: 535, data_us: 33, tail_us: 8, exit_us: 81 };
const RM: Command = Command { comm: "rm", pre_exec_us: 74, image_us: 575, data_us: 0, tail_us: 0, exit_us: 80 };

/// `od sort.$$`'s output (od of the 8 546-byte sort.src), and its stdio buffer.
const OD_BYTES: u64 = 34_137;
const STDIO_BUF: u64 = 4096;
/// `grep the sort.$$`'s output.
const GREP_BYTES: u64 = 924;
/// The most a reader asks for at once (sort reads with a large buffer, tee and
/// wc with stdio's).
const READ_ASK: u64 = 65_536;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShellScripts {
    /// Loopers run at once (`Run -c N`).
    pub copies: u64,
    /// `multi.sh`'s argument: `tst.sh` run at once in each loop.
    pub concurrent: u64,
    /// The alarm, ms (UnixBench runs `looper 60`).
    pub duration_ms: u64,
}

impl ShellScripts {
    /// Reads `copies=` (1), `concurrent=` (1) and `duration_ms=` (60000).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(ShellScripts {
            copies: p.u64_in("copies", 1, 1, MAX_COPIES)?,
            concurrent: p.u64_in("concurrent", 1, 1, MAX_CONCURRENT)?,
            duration_ms: p.u64_in("duration_ms", 60_000, 1, 3_600_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "Shell Scripts ({} concurrent): {} parallel cop{} of looper {} s multi.sh {}",
            self.concurrent,
            self.copies,
            if self.copies == 1 { "y" } else { "ies" },
            self.duration_ms as f64 / 1000.0,
            self.concurrent
        )
    }

    /// Loops finished inside the window, all copies.
    pub fn loops(res: &RunResult) -> u64 {
        res.metrics.get(&LOOPS).map_or(0, |h| h.len())
    }

    /// UnixBench's score: loops per minute, summed over the copies ("lpm").
    pub fn lpm(res: &RunResult) -> f64 {
        Self::loops(res) as f64 * 60e9 / res.elapsed_ns().max(1) as f64
    }

    pub fn result_lines(&self, res: &RunResult) -> String {
        let switches: u64 = res.tasks.iter().map(|t| t.switches).sum();
        let loops = Self::loops(res);
        format!(
            "Shell Scripts ({} concurrent) {:>14.1} lpm   ({:.1} s, {} samples)\n\
             loops {loops} ({:.1} lpm per copy), processes {}, context switches {switches} ({:.1} per loop)",
            self.concurrent,
            Self::lpm(res),
            res.elapsed_ns() as f64 / 1e9,
            self.copies,
            Self::lpm(res) / self.copies as f64,
            res.task_count(),
            switches as f64 / loops.max(1) as f64
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        let concurrent = self.concurrent;
        Box::new(TimedInstances::new(
            self.copies,
            self.duration_ms * 1_000_000,
            "looper",
            Box::new(move |stop| Box::new(Looper { stop, concurrent, state: LooperState::Idle })),
        ))
    }
}

fn us(v: u64) -> u64 {
    v * US
}

/// A copy: fork and exec `multi.sh N`, wait for it, count it, until the alarm.
struct Looper {
    stop: Rc<Cell<bool>>,
    concurrent: u64,
    state: LooperState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LooperState {
    Idle,
    Forked,
    Waited,
}

impl Program for Looper {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match self.state {
            LooperState::Forked => {
                self.state = LooperState::Waited;
                return Op::WaitChild;
            }
            LooperState::Waited => {
                self.state = LooperState::Idle;
                if let OpResult::Task(_) = last {
                    // Counted only inside the window (the engine drops samples
                    // recorded after its end).
                    return Op::Record { metric: LOOPS, value: 1 };
                }
            }
            LooperState::Idle => {}
        }
        if self.stop.get() {
            return Op::Exit;
        }
        self.state = LooperState::Forked;
        Op::Fork {
            kind: ForkKind::Process,
            comm: Some("multi.sh".into()),
            program: Box::new(Scripted::new(multi_sh(self.concurrent))),
        }
    }
}

/// One step of a scripted process.
enum Step {
    /// execve(), with the forked shell's work before it.
    Exec(u64),
    Kernel(u64),
    Compute(u64),
    Pipe,
    /// The pipe's last close (its readers and writers have exited).
    Close(usize),
    /// Fork a child (its `comm`) running the steps, with this process's pipes.
    Fork(&'static str, Vec<Step>),
    Wait,
    Write {
        pipe: usize,
        bytes: u64,
    },
    /// Read until `bytes` have come.
    ReadAll {
        pipe: usize,
        bytes: u64,
    },
    Exit,
}

/// A process following its steps in order (core's `program::Script` plays a
/// fixed list of ops; these steps also name pipes made at run time and read
/// until a byte count). Pipe steps refer to the pipes this process and its
/// parent made (a child inherits its parent's), in the order they were made.
struct Scripted {
    steps: std::vec::IntoIter<Step>,
    pipes: Vec<ChanId>,
    /// A read in progress: (pipe, bytes still to come).
    reading: Option<(ChanId, u64)>,
    making_pipe: bool,
}

impl Scripted {
    fn new(steps: Vec<Step>) -> Scripted {
        Scripted { steps: steps.into_iter(), pipes: Vec::new(), reading: None, making_pipe: false }
    }

    fn with_pipes(steps: Vec<Step>, pipes: Vec<ChanId>) -> Scripted {
        Scripted { pipes, ..Scripted::new(steps) }
    }
}

impl Program for Scripted {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if self.making_pipe {
            self.making_pipe = false;
            if let OpResult::Chan(c) = last {
                self.pipes.push(c);
            }
        }
        if let Some((chan, left)) = self.reading {
            let got = match last {
                OpResult::Bytes(n) => n,
                _ => 0,
            };
            let left = left.saturating_sub(got);
            if left > 0 {
                self.reading = Some((chan, left));
                return Op::Read { chan, bytes: left.min(READ_ASK) };
            }
            self.reading = None;
        }
        match self.steps.next().unwrap_or(Step::Exit) {
            Step::Exec(ns) => Op::Exec { ns },
            Step::Kernel(ns) => Op::Kernel { ns },
            Step::Compute(ns) => Op::Compute { ns },
            Step::Pipe => {
                self.making_pipe = true;
                Op::Pipe
            }
            Step::Fork(comm, steps) => Op::Fork {
                kind: ForkKind::Process,
                comm: Some(comm.into()),
                program: Box::new(Scripted::with_pipes(steps, self.pipes.clone())),
            },
            Step::Wait => Op::WaitChild,
            Step::Close(pipe) => Op::Close { chan: self.pipes[pipe] },
            Step::Write { pipe, bytes } => Op::Write { chan: self.pipes[pipe], bytes },
            Step::ReadAll { pipe, bytes } => {
                let chan = self.pipes[pipe];
                self.reading = Some((chan, bytes));
                Op::Read { chan, bytes: bytes.min(READ_ASK) }
            }
            Step::Exit => Op::Exit,
        }
    }
}

/// A shell's work that contained a fork: the traced time less this host's fork.
fn less_fork(phase_us: u64) -> Step {
    Step::Compute(us(phase_us).saturating_sub(TRACED_FORK_NS))
}

/// The exit beyond the tracepoint, less this host's `exit_ns` (the simulated
/// machine's is charged by `Op::Exit`), then the exit.
fn exit(exit_us: u64) -> [Step; 2] {
    [Step::Kernel(us(exit_us).saturating_sub(TRACED_EXIT_NS)), Step::Exit]
}

/// `multi.sh N` as its looper's child runs it: exec, N background `tst.sh`,
/// `wait`, exit.
fn multi_sh(concurrent: u64) -> Vec<Step> {
    let mut s = vec![Step::Exec(us(MULTI_PRE_EXEC_US)), less_fork(MULTI_START_US)];
    for i in 0..concurrent {
        if i > 0 {
            s.push(less_fork(MULTI_LOOP_US));
        }
        s.push(Step::Fork("sh", tst_sh()));
    }
    for _ in 0..concurrent {
        s.push(Step::Wait);
    }
    s.push(Step::Compute(us(MULTI_END_US + MULTI_REAP_US * (concurrent - 1))));
    s.extend(exit(MULTI_EXIT_US));
    s
}

/// A command's process around its data work: exec, the image's start, `data`,
/// the rest of the image, exit.
fn command(c: &Command, data: Vec<Step>) -> Vec<Step> {
    let start = c.image_us.saturating_sub(c.data_us + c.tail_us);
    let mut s = vec![Step::Exec(us(c.pre_exec_us)), Step::Compute(us(start))];
    s.extend(data);
    s.push(Step::Compute(us(c.tail_us)));
    s.extend(exit(c.exit_us));
    s
}

/// `tst.sh`: exec, then its four lines, the shell's own work between forks.
fn tst_sh() -> Vec<Step> {
    let p = TST_PHASE_US;
    // sort > sort.$$ < sort.src: files only.
    let sort = command(&SORT, vec![Step::Compute(us(SORT.data_us))]);
    // od sort.$$ | sort -n: pipe 0. od's data work is nine stdio buffers
    // written one by one.
    let chunks = OD_BYTES.div_ceil(STDIO_BUF);
    let mut od_data = Vec::new();
    let mut left = OD_BYTES;
    for _ in 0..chunks {
        od_data.push(Step::Compute(us(OD.data_us) / chunks));
        od_data.push(Step::Write { pipe: 0, bytes: left.min(STDIO_BUF) });
        left -= left.min(STDIO_BUF);
    }
    let od = command(&OD, od_data);
    let sort_n = command(&SORT_N, vec![Step::ReadAll { pipe: 0, bytes: OD_BYTES }, Step::Compute(us(SORT_N.data_us))]);
    // grep the sort.$$ | tee grep.$$ | wc: pipes 1 and 2. grep reads and
    // matches its file before its one write.
    let grep = command(&GREP, vec![Step::Compute(us(GREP.data_us)), Step::Write { pipe: 1, bytes: GREP_BYTES }]);
    let tee = command(
        &TEE,
        vec![
            Step::ReadAll { pipe: 1, bytes: GREP_BYTES },
            Step::Compute(us(TEE.data_us)),
            Step::Write { pipe: 2, bytes: GREP_BYTES },
        ],
    );
    let wc = command(&WC, vec![Step::ReadAll { pipe: 2, bytes: GREP_BYTES }, Step::Compute(us(WC.data_us))]);
    let rm = command(&RM, Vec::new());
    let mut s = vec![
        Step::Exec(us(TST_PRE_EXEC_US)),
        less_fork(p[0]),
        Step::Fork(SORT.comm, sort),
        Step::Wait,
        Step::Pipe,
        less_fork(p[1]),
        Step::Fork(OD.comm, od),
        less_fork(p[2]),
        Step::Fork(SORT_N.comm, sort_n),
        Step::Wait,
        Step::Wait,
        Step::Close(0),
        Step::Pipe,
        Step::Pipe,
        less_fork(p[3]),
        Step::Fork(GREP.comm, grep),
        less_fork(p[4]),
        Step::Fork(TEE.comm, tee),
        less_fork(p[5]),
        Step::Fork(WC.comm, wc),
        Step::Wait,
        Step::Wait,
        Step::Wait,
        Step::Close(1),
        Step::Close(2),
        less_fork(p[6]),
        Step::Fork(RM.comm, rm),
        Step::Wait,
        Step::Compute(us(p[7])),
    ];
    s.extend(exit(TST_EXIT_US));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_unixbenchs() {
        let (_, mut p) = Params::parse("shell copies=56").unwrap();
        let c = ShellScripts::from_params(&mut p).unwrap();
        assert_eq!((c.copies, c.concurrent, c.duration_ms), (56, 1, 60_000));
        for bad in ["shell copies=0", "shell concurrent=0", "shell concurrent=65"] {
            let (_, mut p) = Params::parse(bad).unwrap();
            assert!(ShellScripts::from_params(&mut p).is_err(), "{bad}");
        }
    }

    /// tst.sh forks its seven commands and waits for each of them; the od
    /// writes add up to its output, in stdio buffers.
    #[test]
    fn tst_sh_forks_seven_commands_and_reaps_them() {
        let steps = tst_sh();
        let forks = steps.iter().filter(|s| matches!(s, Step::Fork(..))).count();
        let waits = steps.iter().filter(|s| matches!(s, Step::Wait)).count();
        assert_eq!((forks, waits), (7, 7));
        let Some(Step::Fork("od", od)) = steps.iter().find(|s| matches!(s, Step::Fork("od", _))) else { panic!() };
        let written: Vec<u64> =
            od.iter().filter_map(|s| if let Step::Write { bytes, .. } = s { Some(*bytes) } else { None }).collect();
        assert_eq!(written.len(), 9);
        assert_eq!(written.iter().sum::<u64>(), OD_BYTES);
        assert!(written[..8].iter().all(|&b| b == STDIO_BUF));
    }

    /// multi.sh N forks N tst.sh and waits for all of them.
    #[test]
    fn multi_sh_runs_n_scripts() {
        for n in [1, 8] {
            let steps = multi_sh(n);
            let forks = steps.iter().filter(|s| matches!(s, Step::Fork("sh", _))).count();
            let waits = steps.iter().filter(|s| matches!(s, Step::Wait)).count();
            assert_eq!((forks, waits), (n as usize, n as usize));
        }
    }
}
