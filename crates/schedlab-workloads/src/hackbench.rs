//! hackbench, as rt-tests `hackbench` and `perf bench sched messaging` run it
//! (rt-tests src/hackbench/hackbench.c; tools/perf/bench/sched-messaging.c):
//! G groups of F senders and F receivers; each sender writes L rounds of one
//! D-byte message to each of its group's F receivers, each receiver reads F·L
//! messages. A ready/wake barrier starts every worker at once; the time runs from
//! just before the wake write until the last worker is reaped.

use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::task::TaskId;
use schedlab_core::RunResult;

use crate::params::Params;

/// What hackbench prints its time in: milliseconds, truncated (rt-tests
/// hackbench.c `Time: %lu.%03lu` of `tv_usec / 1000`; perf bench sched
/// messaging `%lu.%03lu [sec]` of `tv_usec / USEC_PER_MSEC`).
pub const TIME_STEP_NS: u64 = 1_000_000;

/// Channel type (`-p/--pipe`, or the default socketpair).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipc {
    Pipe,
    Socket,
}

/// hackbench parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hackbench {
    pub groups: u64,
    /// Senders = receivers per group (`-f`, 20).
    pub fds: u64,
    pub loops: u64,
    /// Message size in bytes (`-s`, 100).
    pub datasize: u64,
    pub ipc: Ipc,
    pub mode: ForkKind,
}

impl Hackbench {
    /// Reads `groups=`, `loops=`, `fds=`, `datasize=`, `ipc=pipe|socket`,
    /// `mode=process|thread`. Defaults are the tools' own.
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let h = Hackbench {
            groups: p.u64_in("groups", 10, 1, 100_000)?,
            fds: p.u64_in("fds", 20, 1, 1000)?,
            loops: p.u64_in("loops", 100, 1, 1_000_000_000)?,
            datasize: p.u64_in("datasize", 100, 1, 1 << 20)?,
            ipc: match p.choice("ipc", "socket", &["socket", "pipe"])?.as_str() {
                "pipe" => Ipc::Pipe,
                _ => Ipc::Socket,
            },
            mode: match p.choice("mode", "process", &["process", "thread"])?.as_str() {
                "thread" => ForkKind::Thread,
                _ => ForkKind::Process,
            },
        };
        Ok(h)
    }

    pub fn workers(&self) -> u64 {
        2 * self.fds * self.groups
    }

    /// rt-tests' banner.
    pub fn banner(&self) -> String {
        let mode = if self.mode == ForkKind::Thread { "threads" } else { "process" };
        format!(
            "Running in {mode} mode with {} groups using {} file descriptors each (== {} tasks)\nEach sender will pass {} messages of {} bytes",
            self.groups,
            2 * self.fds,
            self.workers(),
            self.loops,
            self.datasize
        )
    }

    /// `Time: S.mmm`, milliseconds truncated as the tool prints them.
    pub fn time_line(res: &RunResult) -> String {
        let ms = res.elapsed_ns() / TIME_STEP_NS;
        format!("Time: {}.{:03}", ms / 1000, ms % 1000)
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Main {
            h: self.clone(),
            expect: Expect::Nothing,
            ready: None,
            wake: None,
            group: 0,
            group_chans: Vec::new(),
            sender_chans: None,
            receivers_forked: 0,
            senders_forked: 0,
            workers: Vec::new(),
            ready_read: 0,
            started: false,
            woke: false,
            reaped: 0,
            ended: false,
        })
    }
}

/// Where the result of the main task's previous operation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Nothing,
    ReadyChan,
    WakeChan,
    GroupChan,
    Worker,
    ReadyByte,
}

/// The main task: builds the groups (per group: F receivers, each after its
/// channel, then F senders), drains the ready channel, marks the start, writes the
/// wake byte, reaps every worker (wait() in process mode, join in creation order in
/// thread mode) and marks the end.
struct Main {
    h: Hackbench,
    expect: Expect,
    ready: Option<ChanId>,
    wake: Option<ChanId>,
    group: u64,
    group_chans: Vec<ChanId>,
    sender_chans: Option<Rc<[ChanId]>>,
    receivers_forked: usize,
    senders_forked: u64,
    workers: Vec<TaskId>,
    ready_read: u64,
    started: bool,
    woke: bool,
    reaped: u64,
    ended: bool,
}

impl Main {
    fn make_chan(&mut self, expect: Expect) -> Op {
        self.expect = expect;
        match self.h.ipc {
            Ipc::Pipe => Op::Pipe,
            Ipc::Socket => Op::SocketPair,
        }
    }

    fn fork(&mut self, program: Box<dyn Program>) -> Op {
        self.expect = Expect::Worker;
        Op::Fork { kind: self.h.mode, comm: None, program }
    }
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match (self.expect, last) {
            (Expect::ReadyChan, OpResult::Chan(c)) => self.ready = Some(c),
            (Expect::WakeChan, OpResult::Chan(c)) => self.wake = Some(c),
            (Expect::GroupChan, OpResult::Chan(c)) => self.group_chans.push(c),
            (Expect::Worker, OpResult::Task(t)) => self.workers.push(t),
            (Expect::ReadyByte, OpResult::Bytes(n)) => self.ready_read += n,
            _ => {}
        }
        self.expect = Expect::Nothing;
        let (Some(ready), Some(wake)) = (self.ready, self.wake) else {
            let expect = if self.ready.is_none() { Expect::ReadyChan } else { Expect::WakeChan };
            return self.make_chan(expect);
        };
        let start = Start { ready, wake, done: 0 };
        let fds = self.h.fds as usize;
        while self.group < self.h.groups {
            if self.receivers_forked == self.group_chans.len() && self.group_chans.len() < fds {
                return self.make_chan(Expect::GroupChan);
            }
            if self.receivers_forked < self.group_chans.len() {
                let chan = self.group_chans[self.receivers_forked];
                self.receivers_forked += 1;
                let r = Receiver { start, chan, left: self.h.fds * self.h.loops, size: self.h.datasize, got: 0 };
                return self.fork(Box::new(r));
            }
            if self.senders_forked < self.h.fds {
                self.senders_forked += 1;
                let chans = self.sender_chans.get_or_insert_with(|| self.group_chans.clone().into()).clone();
                let s = Sender { start, chans, loops: self.h.loops, size: self.h.datasize, l: 0, j: 0 };
                return self.fork(Box::new(s));
            }
            self.group += 1;
            self.group_chans.clear();
            self.sender_chans = None;
            self.receivers_forked = 0;
            self.senders_forked = 0;
        }
        if self.ready_read < self.h.workers() {
            self.expect = Expect::ReadyByte;
            return Op::Read { chan: ready, bytes: 1 };
        }
        if !self.started {
            self.started = true;
            return Op::Mark { label: MARK_START };
        }
        if !self.woke {
            self.woke = true;
            return Op::Write { chan: wake, bytes: 1 };
        }
        if self.reaped < self.h.workers() {
            let op = match self.h.mode {
                ForkKind::Process => Op::WaitChild,
                ForkKind::Thread => Op::Join { task: self.workers[self.reaped as usize] },
            };
            self.reaped += 1;
            return op;
        }
        if !self.ended {
            self.ended = true;
            return Op::Mark { label: MARK_END };
        }
        Op::Exit
    }
}

/// The worker prologue: write one byte to ready, then poll wake.
#[derive(Clone, Copy)]
struct Start {
    ready: ChanId,
    wake: ChanId,
    done: u8,
}

impl Start {
    /// The next prologue op, or None once through the barrier.
    fn next(&mut self) -> Option<Op> {
        if self.done == 2 {
            return None;
        }
        self.done += 1;
        Some(match self.done {
            1 => Op::Write { chan: self.ready, bytes: 1 },
            _ => Op::Poll { chan: self.wake },
        })
    }
}

/// What one run of a hackbench sender or receiver touches that no other hackbench
/// process shares (all of them run the same binary and kernel text), estimated
/// from the x86-64 5.x structures on its path: ~4 KiB of its 16 KiB kernel stack
/// (entry, the pipe or socket write or read, a wakeup, `__schedule()`); ~2 KiB of
/// `task_struct`; ~1 KiB of FPU state restored on the way back to user space
/// (SSE/AVX2 parts: hackbench never dirties AVX-512 state, which XSAVES then
/// skips); ~1 KiB of page-table lines walked again after a switch between
/// address spaces; ~2 KiB of user stack and data; ~3 KiB of `struct file`,
/// fdtable and socket or pipe-inode lines for a sender's 20 descriptors (less
/// for a receiver's one). ~13 KiB in all, taken as 16 KiB for what the estimate
/// leaves out (slab metadata, per-CPU counters it dirties).
const HACKBENCH_WORKING_SET_BYTES: u64 = 16 * 1024;

struct Sender {
    start: Start,
    chans: Rc<[ChanId]>,
    loops: u64,
    size: u64,
    l: u64,
    j: usize,
}

impl Program for Sender {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        if let Some(op) = self.start.next() {
            return op;
        }
        if self.j == self.chans.len() {
            self.j = 0;
            self.l += 1;
        }
        if self.l == self.loops {
            return Op::Exit;
        }
        let chan = self.chans[self.j];
        self.j += 1;
        Op::Write { chan, bytes: self.size }
    }

    fn working_set_bytes(&self) -> u64 {
        HACKBENCH_WORKING_SET_BYTES
    }
}

struct Receiver {
    start: Start,
    chan: ChanId,
    /// Messages still to read.
    left: u64,
    size: u64,
    /// Bytes of the current message so far.
    got: u64,
}

impl Program for Receiver {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let Some(op) = self.start.next() {
            return op;
        }
        // Only message reads return bytes past the prologue (poll returns none).
        if let OpResult::Bytes(n) = last {
            self.got += n;
            if self.got >= self.size {
                self.got = 0;
                self.left -= 1;
            }
        }
        if self.left == 0 {
            return Op::Exit;
        }
        Op::Read { chan: self.chan, bytes: self.size - self.got }
    }

    fn working_set_bytes(&self) -> u64 {
        HACKBENCH_WORKING_SET_BYTES
    }
}
