//! UnixBench's "Pipe-based Context Switching" (`context1`, UnixBench/src/context1.c
//! of byte-unixbench 5.1.x): each copy is a process that makes two pipes and forks
//! a child; the parent (master) writes its `unsigned long` counter into the first
//! pipe and reads the child's echo from the second, the child (slave) reads the
//! first and writes the value back into the second, and the parent counts one
//! iteration per round trip until its alarm fires after `duration` seconds
//! (`wake_me()`, timeit.c). UnixBench's `Run` starts `copies` of it at once (one
//! per CPU for the multi-copy score) and reports the sum of the copies' counts
//! per second, "lps".
//!
//! In the model the copies start together (Run forks them within a few ms) and
//! the measured window is the duration. At the alarm the master stops after the
//! round trip it is in and its child stops after echoing it (the real master
//! exits from the signal handler and the child reads end of file); iterations
//! count only round trips completed inside the window.
//!
//! User work per iteration is two compares and an increment (nanoseconds) and is
//! not modelled; the time is the system calls' and the scheduler's.

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;
use crate::timed::TimedInstances;

/// `Op::Record` metric: one sample per completed round trip (an iteration).
pub const ITERATIONS: u32 = 1;

/// Bytes per message: one `unsigned long` on LP64.
const MSG_BYTES: u64 = 8;

/// Most copies a spec may ask for (2 processes each).
const MAX_COPIES: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context1 {
    /// Copies run at once (`Run -c N`).
    pub copies: u64,
    /// The alarm, ms (UnixBench runs `context1 10`: 10 s).
    pub duration_ms: u64,
}

impl Context1 {
    /// Reads `copies=` (1) and `duration_ms=` (10000).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(Context1 {
            copies: p.u64_in("copies", 1, 1, MAX_COPIES)?,
            duration_ms: p.u64_in("duration_ms", 10_000, 1, 3_600_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "Pipe-based Context Switching: {} parallel cop{} of context1, {} s",
            self.copies,
            if self.copies == 1 { "y" } else { "ies" },
            self.duration_ms as f64 / 1000.0
        )
    }

    /// Round trips completed inside the window, all copies.
    pub fn iterations(res: &RunResult) -> u64 {
        res.metrics.get(&ITERATIONS).map_or(0, |h| h.len())
    }

    /// UnixBench's score: iterations per second, summed over the copies ("lps").
    pub fn lps(res: &RunResult) -> f64 {
        Self::iterations(res) as f64 * 1e9 / res.elapsed_ns().max(1) as f64
    }

    pub fn result_lines(&self, res: &RunResult) -> String {
        let switches: u64 = res.tasks.iter().map(|t| t.switches).sum();
        format!(
            "Pipe-based Context Switching {:>14.1} lps   ({:.1} s, {} samples)\n\
             iterations {} ({:.1} lps per copy), context switches {switches} ({:.2} per iteration)",
            Self::lps(res),
            res.elapsed_ns() as f64 / 1e9,
            self.copies,
            Self::iterations(res),
            Self::lps(res) / self.copies as f64,
            switches as f64 / Self::iterations(res).max(1) as f64
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        // UnixBench's `Run` for this test; its sleep stands in for each copy's alarm.
        Box::new(TimedInstances::new(
            self.copies,
            self.duration_ms * 1_000_000,
            "context1",
            Box::new(|stop| {
                Box::new(Master {
                    stop,
                    pipes: Vec::new(),
                    written: 0,
                    total: Rc::new(Cell::new(None)),
                    state: MasterState::Setup,
                })
            }),
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MasterState {
    Setup,
    Write,
    Wrote,
    Reading,
    /// After the alarm: the last message sent, standing in for end of file.
    Final,
    Reaping,
    Done,
}

/// A copy's parent: pipes, fork, then write p1 / read p2 until the alarm.
struct Master {
    stop: Rc<Cell<bool>>,
    pipes: Vec<ChanId>,
    /// Messages written into p1 so far.
    written: u64,
    /// Set at the alarm: how many messages the child will have read in all. The
    /// real master exits and its child reads end of file; here the master sends
    /// one last message and the child stops once it has read that many.
    total: Rc<Cell<Option<u64>>>,
    state: MasterState,
}

impl Program for Master {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match self.state {
            MasterState::Setup => {
                if let OpResult::Chan(c) = last {
                    self.pipes.push(c);
                }
                if self.pipes.len() < 2 {
                    return Op::Pipe;
                }
                self.state = MasterState::Write;
                Op::Fork {
                    kind: ForkKind::Process,
                    comm: Some("context1".into()),
                    program: Box::new(Slave {
                        p1: self.pipes[0],
                        p2: self.pipes[1],
                        total: self.total.clone(),
                        read: 0,
                        echo: false,
                    }),
                }
            }
            MasterState::Write => {
                self.written += 1;
                if self.stop.get() {
                    self.total.set(Some(self.written));
                    self.state = MasterState::Final;
                } else {
                    self.state = MasterState::Wrote;
                }
                Op::Write { chan: self.pipes[0], bytes: MSG_BYTES }
            }
            MasterState::Wrote => {
                self.state = MasterState::Reading;
                Op::Read { chan: self.pipes[1], bytes: MSG_BYTES }
            }
            MasterState::Reading => {
                // The echo arrived: one iteration.
                self.state = MasterState::Write;
                Op::Record { metric: ITERATIONS, value: 1 }
            }
            MasterState::Final => {
                self.state = MasterState::Reaping;
                Op::WaitChild
            }
            MasterState::Reaping | MasterState::Done => {
                self.state = MasterState::Done;
                Op::Exit
            }
        }
    }
}

/// A copy's child: read p1, write the value back into p2, until the master stops.
struct Slave {
    p1: ChanId,
    p2: ChanId,
    total: Rc<Cell<Option<u64>>>,
    /// Messages read from p1 so far.
    read: u64,
    /// The last op was a read: the echo is next.
    echo: bool,
}

impl Program for Slave {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        if !self.echo {
            self.echo = true;
            return Op::Read { chan: self.p1, bytes: MSG_BYTES };
        }
        self.echo = false;
        self.read += 1;
        if self.total.get() == Some(self.read) {
            return Op::Exit;
        }
        Op::Write { chan: self.p2, bytes: MSG_BYTES }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_unixbenchs() {
        let (_, mut p) = Params::parse("context1 copies=56").unwrap();
        let c = Context1::from_params(&mut p).unwrap();
        assert_eq!((c.copies, c.duration_ms), (56, 10_000));
        let (_, mut p) = Params::parse("context1 copies=0").unwrap();
        assert!(Context1::from_params(&mut p).is_err());
    }
}
