//! `perf bench sched pipe` (tools/perf/bench/sched-pipe.c): two tasks ping-pong a
//! 4-byte integer over two pipes, `loops` round trips. In process mode the parent
//! is one worker and a forked child the other; with `mode=thread` two threads run
//! and the main thread joins both. The time runs from before the workers are
//! created until they are reaped, as perf measures it.

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;

/// What perf bench sched pipe prints its total time in: milliseconds, truncated
/// (`%lu.%03lu [sec]` of `tv_usec / USEC_PER_MSEC`).
pub const TIME_STEP_NS: u64 = 1_000_000;

/// Bytes per message: one `int`.
const MSG_BYTES: u64 = 4;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipeBench {
    pub loops: u64,
    pub mode: ForkKind,
}

impl PipeBench {
    /// Reads `loops=` (1000000) and `mode=process|thread`.
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(PipeBench {
            loops: p.u64_in("loops", 1_000_000, 1, 1_000_000_000)?,
            mode: match p.choice("mode", "process", &["process", "thread"])?.as_str() {
                "thread" => ForkKind::Thread,
                _ => ForkKind::Process,
            },
        })
    }

    pub fn banner(&self) -> String {
        let who = if self.mode == ForkKind::Thread { "threads" } else { "processes" };
        format!("# Running 'sched/pipe' benchmark:\n# Executed {} pipe operations between two {who}", self.loops)
    }

    /// perf's result lines.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let us = res.elapsed_ns() as f64 / 1000.0;
        let ms = res.elapsed_ns() / TIME_STEP_NS;
        format!(
            "{:>14}: {}.{:03} [sec]\n\n{:14.6} usecs/op\n{:14} ops/sec",
            " Total time",
            ms / 1000,
            ms % 1000,
            us / self.loops as f64,
            (self.loops as f64 * 1e6 / us.max(1e-9)) as u64
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Main { b: self.clone(), step: 0, pipes: Vec::new(), threads: Vec::new(), worker: None })
    }
}

/// One side of the ping-pong: `first_write` writes then reads, the other reads then writes.
struct Worker {
    out: ChanId,
    inp: ChanId,
    first_write: bool,
    loops: u64,
    /// Operations issued so far (two per round trip).
    ops: u64,
    /// The parent-worker of process mode reaps its child and marks the end.
    finish: Vec<Op>,
}

impl Worker {
    fn next_op(&mut self) -> Op {
        if self.ops == 2 * self.loops {
            return if self.finish.is_empty() { Op::Exit } else { self.finish.remove(0) };
        }
        let write = self.ops.is_multiple_of(2) == self.first_write;
        self.ops += 1;
        if write {
            Op::Write { chan: self.out, bytes: MSG_BYTES }
        } else {
            Op::Read { chan: self.inp, bytes: MSG_BYTES }
        }
    }
}

impl Program for Worker {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        self.next_op()
    }
}

struct Main {
    b: PipeBench,
    step: u32,
    pipes: Vec<ChanId>,
    threads: Vec<usize>,
    /// Process mode: after forking, the parent runs the writing side itself.
    worker: Option<Worker>,
}

impl Main {
    fn worker(&self, first_write: bool, finish: Vec<Op>) -> Worker {
        let (out, inp) = if first_write { (self.pipes[0], self.pipes[1]) } else { (self.pipes[1], self.pipes[0]) };
        Worker { out, inp, first_write, loops: self.b.loops, ops: 0, finish }
    }
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let Some(w) = self.worker.as_mut() {
            return w.next_op();
        }
        match last {
            OpResult::Chan(c) => self.pipes.push(c),
            OpResult::Task(t) => self.threads.push(t),
            _ => {}
        }
        self.step += 1;
        let threaded = self.b.mode == ForkKind::Thread;
        match self.step {
            1 | 2 => Op::Pipe,
            3 => Op::Mark { label: MARK_START },
            4 => Op::Fork { kind: self.b.mode, comm: None, program: Box::new(self.worker(false, Vec::new())) },
            5 if threaded => Op::Fork { kind: ForkKind::Thread, comm: None, program: Box::new(self.worker(true, Vec::new())) },
            6 if threaded => Op::Join { task: self.threads[0] },
            7 if threaded => Op::Join { task: self.threads[1] },
            8 if threaded => Op::Mark { label: MARK_END },
            _ if threaded => Op::Exit,
            _ => {
                let mut w = self.worker(true, vec![Op::WaitChild, Op::Mark { label: MARK_END }]);
                let op = w.next_op();
                self.worker = Some(w);
                op
            }
        }
    }
}
