//! stress-ng's pipe stressor (`stress-ng --pipe N --timeout T`, stress-pipe.c of
//! 0.15.06, tag V0.15.06): N instances, each a process that opens a pipe in packet
//! mode (`pipe2(O_DIRECT)`, L157) and forks a child (`fork()`, L193); the parent
//! writes 512 bytes per write() in a loop, one bogo op per write (L278), and the
//! child reads 512 bytes per read until the parent stops. In packet mode each
//! write takes a ring slot of its own, so 16 writes (8 KiB) fill the pipe, and a
//! read returns one packet. `--pipe-data-size` is ignored by 0.15.06 (its option
//! key has a stray comma, fixed in 0.15.07), so the size here is a parameter for
//! other versions. stress-ng's main process forks the instances, lets them run
//! for the timeout and reaps them. Reported as stress-ng's metrics line: bogo ops,
//! the real time, and bogo ops/s over real time (stress-ng divides the summed
//! counters by the instances' mean wall time).
//!
//! In the model the instances start together (stress-ng starts them one after
//! another within a few ms) and the measured window is the timeout. At the timeout
//! the writer sends one more packet (stress-ng's "PS!" stop packet, which also
//! wakes a reader asleep on the empty pipe); the reader stops once it has read it
//! (the real writer SIGKILLs it) and the writer reaps it. Bogo ops count only
//! writes completed inside the window.
//!
//! User work, in core cycles (`Op::Cycles`: its time follows the machine's
//! clock): per write the writer fills its buffer (`pipe_memset()`, a byte loop
//! of 5 instructions and one store per byte in the Debian 0.15.06-2 build) and
//! updates its counters and its byte total; per read the reader compares 3
//! bytes. Measured on this project's hosts (AMD EPYC Zen 5 KVM guest, clock
//! 4.48 GHz by `schedlab calibrate`), `stress-ng --pipe 1` pinned to one vCPU,
//! perf cpu-clock sampling at 2 kHz over 6 s: the writer's own code 150 ns a
//! write (670 cycles), of which the fill loop about 125 ns, and a replica of the
//! loop timed against the clock 550 cycles for 512 bytes (1.07 a byte); the
//! reader's own code 13 ns a read (60 cycles). So a write costs
//! `fill_cycles` = 1.07 cycles a byte of `pipe_data_size` + 120 (defaults to 667
//! for 512 bytes), a read `READ_CHECK_CYCLES`. The libc wrappers' share is in
//! the profile's `syscall_ns`. Other cores may run the loop at another number
//! of cycles a byte (not measured).
//!
//! Not modelled: data verification (`--verify`), `--pipe-size`, the reader's
//! FIONREAD every 512 reads, and stress-ng's own timers and metrics collection.

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;
use crate::timed::TimedInstances;

/// `Op::Record` metric: one sample per completed write (a bogo op).
pub const BOGO_OPS: u32 = 1;

/// The writer's user work per write: `pipe_memset()` at 1.07 cycles a byte and
/// 120 cycles of counters (see the module notes).
fn fill_cycles_of(data_size: u64) -> u64 {
    data_size * 107 / 100 + 120
}

/// The reader's user work per read (the stop-packet compare), cycles.
const READ_CHECK_CYCLES: u64 = 60;

/// Most instances a spec may ask for (2 processes each).
const MAX_INSTANCES: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StressNgPipe {
    /// `--pipe N`: instances.
    pub instances: u64,
    /// `--timeout`, ms.
    pub timeout_ms: u64,
    /// `--pipe-data-size`: bytes per write and per read (512; ignored by 0.15.06).
    pub data_size: u64,
    /// The writer's user work per write (buffer fill, counters), core cycles.
    pub fill_cycles: u64,
}

impl StressNgPipe {
    /// Reads `pipe=` (instances, 1), `timeout_ms=` (20000), `pipe_data_size=` (512),
    /// `fill_cycles=` (the writer's user work a write; default from the size).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let instances = p.u64_in("pipe", 1, 1, MAX_INSTANCES)?;
        let timeout_ms = p.u64_in("timeout_ms", 20_000, 1, 3_600_000)?;
        // stress-ng accepts 4 bytes up to the pipe's size (4 KiB pages here).
        let data_size = p.u64_in("pipe_data_size", 512, 4, 4096)?;
        Ok(StressNgPipe {
            instances,
            timeout_ms,
            data_size,
            fill_cycles: p.u64_in("fill_cycles", fill_cycles_of(data_size), 0, 100_000_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "stress-ng: info: dispatching hogs: {} pipe\nstress-ng: info: setting to a {} second run per stressor",
            self.instances,
            self.timeout_ms as f64 / 1000.0
        )
    }

    /// Completed writes inside the measured window.
    pub fn bogo_ops(res: &RunResult) -> u64 {
        res.metrics.get(&BOGO_OPS).map_or(0, |h| h.len())
    }

    /// bogo ops/s over the real (simulated wall) time of the window.
    pub fn bogo_ops_per_s(res: &RunResult) -> f64 {
        Self::bogo_ops(res) as f64 * 1e9 / res.elapsed_ns().max(1) as f64
    }

    /// stress-ng's metrics line, and the scheduler counts a perf stat beside it
    /// would show (context switches and migrations of the whole task tree).
    pub fn result_lines(&self, res: &RunResult) -> String {
        let ops = Self::bogo_ops(res);
        let switches: u64 = res.tasks.iter().map(|t| t.switches).sum();
        let migrations: u64 = res.tasks.iter().map(|t| t.migrations).sum();
        format!(
            "stress-ng: info: stressor       bogo ops real time  bogo ops/s\nstress-ng: info: pipe     {:>15} {:>9.2} {:>11.2}\n\
             context switches {switches} ({:.3} per bogo op), migrations {migrations}",
            ops,
            res.elapsed_ns() as f64 / 1e9,
            Self::bogo_ops_per_s(res),
            switches as f64 / ops.max(1) as f64
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        // stress-ng's main process: starts the instances, lets them run for the
        // timeout, stops and reaps them.
        let (size, fill_cycles) = (self.data_size, self.fill_cycles);
        Box::new(TimedInstances::new(
            self.instances,
            self.timeout_ms * 1_000_000,
            "stress-ng-pipe",
            Box::new(move |stop| {
                Box::new(Instance {
                    size,
                    fill_cycles,
                    filled: false,
                    stop,
                    total: Rc::new(Cell::new(None)),
                    written: 0,
                    chan: None,
                    state: WriterState::Setup,
                })
            }),
        ))
    }
}

/// One instance: the pipe's writer, after forking the reader.
struct Instance {
    size: u64,
    fill_cycles: u64,
    /// The buffer for the next write is filled.
    filled: bool,
    stop: Rc<Cell<bool>>,
    /// Set when the last write is issued: how many packets the writer will have
    /// written in all. The reader stops once it has read that many (each write is
    /// one packet and each read takes one), which stands in for the real writer
    /// killing its reader after the stop packet.
    total: Rc<Cell<Option<u64>>>,
    /// Writes completed so far.
    written: u64,
    chan: Option<ChanId>,
    state: WriterState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriterState {
    Setup,
    Writing,
    /// The write after the stop, which wakes a reader asleep on the empty pipe.
    LastWrite,
    Reaping,
    Done,
}

impl Program for Instance {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match self.state {
            WriterState::Setup => match (last, self.chan) {
                (OpResult::Chan(c), None) => {
                    self.chan = Some(c);
                    self.state = WriterState::Writing;
                    Op::Fork {
                        kind: ForkKind::Process,
                        comm: Some("stress-ng-pipe".into()),
                        program: Box::new(Reader { chan: c, size: self.size, total: self.total.clone(), read: 0 }),
                    }
                }
                _ => Op::PipePacket,
            },
            WriterState::Writing => {
                let chan = self.chan.expect("set up");
                if let OpResult::Bytes(_) = last {
                    // The write that just completed is one bogo op.
                    self.written += 1;
                    return Op::Record { metric: BOGO_OPS, value: 1 };
                }
                if self.fill_cycles > 0 && !self.filled {
                    self.filled = true;
                    return Op::Cycles { n: self.fill_cycles };
                }
                self.filled = false;
                if self.stop.get() {
                    // The stop packet: whatever the reader is doing, it reads it last.
                    self.total.set(Some(self.written + 1));
                    self.state = WriterState::LastWrite;
                }
                Op::Write { chan, bytes: self.size }
            }
            WriterState::LastWrite => {
                self.state = WriterState::Reaping;
                Op::WaitChild
            }
            WriterState::Reaping | WriterState::Done => {
                self.state = WriterState::Done;
                Op::Exit
            }
        }
    }
}

/// The instance's child: reads packets until it has read the stop packet.
struct Reader {
    chan: ChanId,
    size: u64,
    total: Rc<Cell<Option<u64>>>,
    read: u64,
}

impl Program for Reader {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Bytes(_) = last {
            self.read += 1;
            // The stop-packet compare on what it read.
            return Op::Cycles { n: READ_CHECK_CYCLES };
        }
        if self.total.get().is_some_and(|t| self.read >= t) {
            return Op::Exit;
        }
        Op::Read { chan: self.chan, bytes: self.size }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_stress_ngs() {
        let (_, mut p) = Params::parse("stress-ng pipe=4").unwrap();
        let s = StressNgPipe::from_params(&mut p).unwrap();
        assert_eq!((s.instances, s.timeout_ms, s.data_size), (4, 20_000, 512));
        // 512 bytes filled at 1.07 cycles a byte, and the counters.
        assert_eq!(s.fill_cycles, 547 + 120);
        let (_, mut p) = Params::parse("stress-ng pipe_data_size=4096").unwrap();
        assert_eq!(StressNgPipe::from_params(&mut p).unwrap().fill_cycles, 4382 + 120);
        let (_, mut p) = Params::parse("stress-ng pipe_data_size=2").unwrap();
        assert!(StressNgPipe::from_params(&mut p).is_err());
    }
}
