//! The wake-pull probe (`tools/host-wake-pull/pull.c`, its steady and fresh modes): where
//! does a sync wakeup put a wakee whose previous CPU is idle? A waker pinned to
//! CPU 0 wakes, through a pipe, a wakee allowed on CPUs 0 and 1 whose previous
//! CPU is 1: each round the wakee moves itself back to CPU 1
//! (`sched_setaffinity()` to CPU 1, then to both), sleeps in read(), notes the
//! CPU it woke on (`sched_getcpu()`) and answers; before each wakeup the waker
//! spins `spin_us` (its CPU busy), then sleeps `sleep_us` (`sleep_odd_us` in odd
//! rounds; its CPU idle meanwhile), as pull.c's `--spin` and `--sleep`. With
//! `fresh=1` a new wakee is forked every round (pull.c's `--fresh`, and
//! `settle_spin=1` its `--settle-spin`); `hog_prev=1` and `hog_waker=1` add its
//! CPU-bound hogs on CPU 1 and CPU 0, killed once the rounds are done.
//! The result is the share of rounds the wakee woke on the waker's CPU 0, even
//! and odd rounds apart, beside what the probe prints on a real machine.

use std::collections::VecDeque;

use schedlab_core::cpuset::CpuSet;
use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::task::TaskId;
use schedlab_core::RunResult;

use crate::params::Params;

/// The CPU the wakee woke on, plus one, in even rounds (`Op::Record`).
pub const WOKE_EVEN: u32 = 1;
/// The same in odd rounds.
pub const WOKE_ODD: u32 = 2;

/// The probe's messages: one byte.
const MSG_BYTES: u64 = 1;

/// The waker's pause between starting the wakee and the first round
/// (`usleep(20000)` in pull.c).
const SETTLE_NS: u64 = 20_000_000;

/// Fresh mode: the waker's wait for a new wakee to block (`usleep(100)`).
const FRESH_SETTLE_NS: u64 = 100_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullProbe {
    pub rounds: u64,
    /// A new wakee every round (pull.c's `--fresh`).
    pub fresh: bool,
    /// Fresh mode: the 100 us wait for the wakee to block is spun, not slept.
    pub settle_spin: bool,
    /// A CPU-bound task pinned to the wakee's previous CPU 1 (`--hog-prev`).
    pub hog_prev: bool,
    /// A CPU-bound task pinned to the waker's CPU 0 (`--hog-waker`).
    pub hog_waker: bool,
    pub spin_us: u64,
    pub sleep_us: u64,
    pub sleep_odd_us: u64,
}

/// A mask of the given CPUs (the probes run on CPUs 0 and 1; `newidle` uses it
/// too).
pub(crate) fn cpus(list: &[usize]) -> CpuSet {
    let mut s = CpuSet::new(2);
    for &c in list {
        s.set(c);
    }
    s
}

impl PullProbe {
    /// Reads `rounds=` (600), `fresh=`, `settle_spin=`, `hog_prev=` and
    /// `hog_waker=` (0 or 1, 0), `spin_us=`
    /// (0), `sleep_us=` (0) and `sleep_odd_us=` (as `sleep_us`).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let rounds = p.u64_in("rounds", 600, 1, 1_000_000)?;
        let fresh = p.u64_in("fresh", 0, 0, 1)? == 1;
        let settle_spin = p.u64_in("settle_spin", 0, 0, 1)? == 1;
        let hog_prev = p.u64_in("hog_prev", 0, 0, 1)? == 1;
        let hog_waker = p.u64_in("hog_waker", 0, 0, 1)? == 1;
        let spin_us = p.u64_in("spin_us", 0, 0, 1_000_000)?;
        let sleep_us = p.u64_in("sleep_us", 0, 0, 1_000_000)?;
        let sleep_odd_us = p.u64_in("sleep_odd_us", sleep_us, 0, 1_000_000)?;
        Ok(PullProbe { rounds, fresh, settle_spin, hog_prev, hog_waker, spin_us, sleep_us, sleep_odd_us })
    }

    pub fn banner(&self) -> String {
        format!(
            "# wake-pull probe ({}): {} rounds, the waker spinning {} us and then sleeping {} us before even rounds' wakeups, {} us before odd ones'",
            if self.fresh { "fresh" } else { "steady" },
            self.rounds,
            self.spin_us,
            self.sleep_us,
            self.sleep_odd_us
        )
    }

    /// Rounds in which the wakee woke on CPU 0, and rounds counted, for `metric`.
    fn counts(res: &RunResult, metric: u32) -> (u64, u64) {
        res.metrics.get(&metric).map_or((0, 0), |h| (h.count_at(1), h.len()))
    }

    /// Woken on the waker's CPU, even rounds, odd rounds: (pulled, rounds) each.
    pub fn pulled(res: &RunResult) -> [(u64, u64); 2] {
        [Self::counts(res, WOKE_EVEN), Self::counts(res, WOKE_ODD)]
    }

    /// Percentages pulled: all rounds, even, odd.
    pub fn pulled_pct(res: &RunResult) -> [f64; 3] {
        let [(pe, ne), (po, no)] = Self::pulled(res);
        let pct = |a: u64, n: u64| if n == 0 { 0.0 } else { 100.0 * a as f64 / n as f64 };
        [pct(pe + po, ne + no), pct(pe, ne), pct(po, no)]
    }

    /// The probe's own result lines.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let [(pe, ne), (po, no)] = Self::pulled(res);
        let (pulled, n) = (pe + po, ne + no);
        format!(
            "even rounds (sleep {} us) {pe} of {ne} on CPU 0, odd rounds (sleep {} us) {po} of {no}\n\
             {n} rounds: woke on the waker's CPU 0 {pulled} times ({:.0}%), on its previous CPU 1 {}",
            self.sleep_us,
            self.sleep_odd_us,
            Self::pulled_pct(res)[0],
            n - pulled
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Waker {
            b: self.clone(),
            pipes: Vec::new(),
            hogs: Vec::new(),
            round: 0,
            ops: VecDeque::new(),
            stage: Stage::Setup,
        })
    }

    /// The waker's gap before a wakeup: spin, then sleep (the odd rounds' sleep in
    /// odd rounds).
    fn gap(&self, round: u64, ops: &mut VecDeque<Op>) {
        if self.spin_us > 0 {
            ops.push_back(Op::Compute { ns: self.spin_us * 1000 });
        }
        let us = if round % 2 == 1 { self.sleep_odd_us } else { self.sleep_us };
        if us > 0 {
            ops.push_back(Op::Sleep { ns: us * 1000 });
        }
    }
}

/// Where the waker is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Setup,
    Rounds,
    Done,
}

/// The waker: pins itself to CPU 0 and makes the pipes; steady, it starts the
/// one wakee and then each round spins and sleeps, writes, and reads the
/// answer; fresh, each round starts a new wakee, waits for it to be ready,
/// waits 100 us for it to block (slept, or spun with `settle_spin`), spins and
/// sleeps, writes, reads the answer and reaps it.
struct Waker {
    b: PullProbe,
    pipes: Vec<ChanId>,
    /// The hogs started before the pipes, killed at the end (pull.c's SIGKILL).
    hogs: Vec<TaskId>,
    round: u64,
    ops: VecDeque<Op>,
    stage: Stage,
}

impl Waker {
    fn wakee(&self, round: u64) -> Box<dyn Program> {
        let rounds = if self.b.fresh { 1 } else { self.b.rounds };
        let (to_wakee, to_waker) = (self.pipes[0], self.pipes[1]);
        let ready = self.b.fresh.then(|| self.pipes[2]);
        Box::new(Wakee { to_wakee, to_waker, ready, rounds, round, ops: VecDeque::new() })
    }
}

impl Program for Waker {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        match last {
            OpResult::Chan(c) => self.pipes.push(c),
            // Forked before the pipes: a hog.
            OpResult::Task(t) if self.pipes.is_empty() => self.hogs.push(t),
            _ => {}
        }
        loop {
            if let Some(op) = self.ops.pop_front() {
                return op;
            }
            match self.stage {
                Stage::Setup if self.pipes.is_empty() => {
                    for (on, cpu) in [(self.b.hog_prev, 1), (self.b.hog_waker, 0)] {
                        if on {
                            let program = Box::new(Hog::on(cpu));
                            self.ops.push_back(Op::Fork { kind: ForkKind::Process, comm: Some("pull-hog".into()), program });
                        }
                    }
                    self.ops.push_back(Op::SetAffinity { cpus: cpus(&[0]) });
                    self.ops.extend([Op::Pipe, Op::Pipe, Op::Pipe]);
                }
                Stage::Setup => {
                    self.stage = Stage::Rounds;
                    if !self.b.fresh {
                        let program = self.wakee(0);
                        self.ops.push_back(Op::Fork { kind: ForkKind::Process, comm: Some("pull-wakee".into()), program });
                        self.ops.push_back(Op::Sleep { ns: SETTLE_NS });
                    }
                    self.ops.push_back(Op::Mark { label: MARK_START });
                }
                Stage::Rounds if self.round == self.b.rounds => {
                    self.stage = Stage::Done;
                    self.ops.push_back(Op::Mark { label: MARK_END });
                    self.ops.extend(self.hogs.iter().map(|&task| Op::Kill { task }));
                    let children = self.hogs.len() + usize::from(!self.b.fresh);
                    self.ops.extend((0..children).map(|_| Op::WaitChild));
                    self.ops.push_back(Op::Exit);
                }
                Stage::Rounds => {
                    let r = self.round;
                    self.round += 1;
                    let (to_wakee, to_waker) = (self.pipes[0], self.pipes[1]);
                    if self.b.fresh {
                        let program = self.wakee(r);
                        self.ops.push_back(Op::Fork { kind: ForkKind::Process, comm: Some("pull-wakee".into()), program });
                        self.ops.push_back(Op::Read { chan: self.pipes[2], bytes: MSG_BYTES });
                        self.ops.push_back(if self.b.settle_spin {
                            Op::Compute { ns: FRESH_SETTLE_NS }
                        } else {
                            Op::Sleep { ns: FRESH_SETTLE_NS }
                        });
                    }
                    self.b.gap(r, &mut self.ops);
                    self.ops.push_back(Op::Write { chan: to_wakee, bytes: MSG_BYTES });
                    self.ops.push_back(Op::Read { chan: to_waker, bytes: MSG_BYTES });
                    if self.b.fresh {
                        self.ops.push_back(Op::WaitChild);
                    }
                }
                Stage::Done => return Op::Exit,
            }
        }
    }
}

/// A CPU-bound task pinned to `cpu`, computing a millisecond at a time until
/// it is killed (`newidle` uses it too).
pub(crate) struct Hog {
    cpu: usize,
    pinned: bool,
}

impl Hog {
    pub(crate) fn on(cpu: usize) -> Hog {
        Hog { cpu, pinned: false }
    }
}

impl Program for Hog {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        if !self.pinned {
            self.pinned = true;
            return Op::SetAffinity { cpus: cpus(&[self.cpu]) };
        }
        Op::Compute { ns: 1_000_000 }
    }
}

/// A wakee: each round back to CPU 1, then allowed on both (fresh: says it is
/// ready), waits for the waker, notes where it woke, answers.
struct Wakee {
    to_wakee: ChanId,
    to_waker: ChanId,
    /// Fresh mode: the pipe that says it is ready.
    ready: Option<ChanId>,
    rounds: u64,
    round: u64,
    ops: VecDeque<Op>,
}

impl Program for Wakee {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Count(cpu) = last {
            let metric = if self.round % 2 == 1 { WOKE_ODD } else { WOKE_EVEN };
            self.ops.push_front(Op::Record { metric, value: u64::from(cpu) + 1 });
        }
        loop {
            if let Some(op) = self.ops.pop_front() {
                if matches!(op, Op::Write { chan, .. } if chan == self.to_waker) {
                    self.round += 1;
                }
                return op;
            }
            if self.rounds == 0 {
                return Op::Exit;
            }
            self.rounds -= 1;
            self.ops.extend([Op::SetAffinity { cpus: cpus(&[1]) }, Op::SetAffinity { cpus: cpus(&[0, 1]) }]);
            if let Some(chan) = self.ready {
                self.ops.push_back(Op::Write { chan, bytes: MSG_BYTES });
            }
            self.ops.extend([
                Op::Read { chan: self.to_wakee, bytes: MSG_BYTES },
                Op::GetCpu,
                Op::Write { chan: self.to_waker, bytes: MSG_BYTES },
            ]);
        }
    }
}
