//! The newly idle probe (`tools/host-newidle/probe.c`): does a CPU that goes idle
//! pull a waiting task at once, and from how long an expected idle on? On two
//! CPUs, S (pinned to CPU 1) spins `run_us` and sleeps `sleep_us` over and over,
//! a hog is pinned to CPU 0, and H, in `rounds` rounds, pins itself to CPU 0
//! (overloading it), spins `settle_ms` of wall time, allows itself both CPUs and
//! spins, reading `sched_getcpu()`, until it finds itself on CPU 1 (or 200 ms
//! pass). When it arrives, H notes whether S was asleep and how long before S
//! had gone to sleep: within 50 us of the sleep's start is CPU 1's newly idle
//! pass pulling it, later in a sleep an idle CPU's balance, while S ran a busy
//! CPU's (for sleeps of 50 us or less the window holds the whole sleep, and an
//! idle balance counts with the newly idle pass). Each round also counts S's
//! sleeps from H's unpinning to its arrival, the chances the newly idle pass
//! had, and S times its sleeps. The main task waits for H, then kills S and the
//! hog.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::task::TaskId;
use schedlab_core::RunResult;

use crate::params::Params;
use crate::pull::{cpus, Hog};

/// Rounds in which H arrived within `NEWIDLE_WINDOW_NS` of the start of S's
/// sleep: the value is how long after it (`Op::Record`).
pub const ARRIVED_AT_SLEEP: u32 = 1;
/// Rounds in which H arrived later in one of S's sleeps (value 1).
pub const ARRIVED_LATER: u32 = 2;
/// Rounds in which H arrived while S ran (value 1).
pub const ARRIVED_BUSY: u32 = 3;
/// Rounds in which H did not arrive within `ARRIVAL_TIMEOUT_NS` (value 1).
pub const NOT_ARRIVED: u32 = 4;
/// Every round: S's sleeps from H's unpinning to its arrival, plus one (a
/// histogram keeps values from 1).
pub const CHANCES_PLUS_ONE: u32 = 5;
/// Every sleep of S: its length, clock to clock around nanosleep() (how long
/// CPU 1 idles in it, plus the system call).
pub const SLEPT_NS: u32 = 6;

/// An arrival this soon after S went to sleep is the newly idle pass's.
const NEWIDLE_WINDOW_NS: u64 = 50_000;
/// How long H waits for CPU 1 in a round.
const ARRIVAL_TIMEOUT_NS: u64 = 200_000_000;
/// H's wait before its first round, S sleeping meanwhile (probe.c's 20 ms).
const START_NS: u64 = 20_000_000;
/// The spin loops' step in simulated time: probe.c reads the clock (and
/// `sched_getcpu()`) continuously; a step bounds how late H sees where it is.
const SPIN_STEP_NS: u64 = 1_000;
/// The settle spin's step (only its end matters).
const SETTLE_STEP_NS: u64 = 50_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewidleProbe {
    pub rounds: u64,
    pub sleep_us: u64,
    pub run_us: u64,
    pub settle_ms: u64,
}

impl NewidleProbe {
    /// Reads `rounds=` (200), `sleep_us=` (20), `run_us=` (100) and `settle_ms=`
    /// (20), in probe.c's ranges.
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let rounds = p.u64_in("rounds", 200, 1, 10_000)?;
        let sleep_us = p.u64_in("sleep_us", 20, 1, 100_000)?;
        let run_us = p.u64_in("run_us", 100, 1, 100_000)?;
        let settle_ms = p.u64_in("settle_ms", 20, 1, 1_000)?;
        Ok(NewidleProbe { rounds, sleep_us, run_us, settle_ms })
    }

    pub fn banner(&self) -> String {
        format!(
            "# newly idle probe: {} rounds, S spinning {} us and sleeping {} us on CPU 1, H settling {} ms on CPU 0",
            self.rounds, self.run_us, self.sleep_us, self.settle_ms
        )
    }

    fn count(res: &RunResult, metric: u32) -> u64 {
        res.metrics.get(&metric).map_or(0, |h| h.len())
    }

    /// Rounds by where H arrived: at a sleep's start, later in a sleep, while S
    /// ran, not at all.
    pub fn arrivals(res: &RunResult) -> [u64; 4] {
        [ARRIVED_AT_SLEEP, ARRIVED_LATER, ARRIVED_BUSY, NOT_ARRIVED].map(|m| Self::count(res, m))
    }

    /// The median time from the start of S's sleep to H's arrival, in us, over
    /// the rounds that arrived at a sleep's start.
    pub fn at_sleep_p50_us(res: &RunResult) -> f64 {
        res.metrics.get(&ARRIVED_AT_SLEEP).map_or(0.0, |h| h.value_at_quantile(0.5) as f64 / 1000.0)
    }

    /// S's sleeps from H's unpinning to its arrival, a round on average.
    pub fn chances_per_round(res: &RunResult) -> f64 {
        res.metrics.get(&CHANCES_PLUS_ONE).map_or(0.0, |h| if h.is_empty() { 0.0 } else { h.mean() - 1.0 })
    }

    /// S's sleeps' mean length, in us.
    pub fn sleep_mean_us(res: &RunResult) -> f64 {
        res.metrics.get(&SLEPT_NS).map_or(0.0, |h| h.mean() / 1000.0)
    }

    /// The probe's own result line, as probe.c prints it.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let [at_sleep, later, busy, none] = Self::arrivals(res);
        format!(
            "sleep {} us run {} us settle {} ms: {} rounds, arrivals within {} us of S's sleep {at_sleep} \
             (p50 {:.1} us), later in a sleep {later}, while S ran {busy}, none {none}; \
             S's sleeps before an arrival {:.1} a round; a sleep took {:.1} us",
            self.sleep_us,
            self.run_us,
            self.settle_ms,
            at_sleep + later + busy + none,
            NEWIDLE_WINDOW_NS / 1000,
            Self::at_sleep_p50_us(res),
            Self::chances_per_round(res),
            Self::sleep_mean_us(res)
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Parent { b: self.clone(), shared: Rc::default(), kids: Vec::new(), step: 0 })
    }
}

/// What S shows H (probe.c's shared page).
#[derive(Default)]
struct Shared {
    s_asleep: Cell<bool>,
    s_sleep_start_ns: Cell<u64>,
    s_sleeps: Cell<u64>,
}

/// The main task: starts S, the hog and H, waits for H, kills S and the hog.
struct Parent {
    b: NewidleProbe,
    shared: Rc<Shared>,
    kids: Vec<TaskId>,
    step: u32,
}

impl Program for Parent {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Task(t) = last {
            if self.kids.len() < 2 {
                self.kids.push(t);
            }
        }
        self.step += 1;
        let fork = |comm: &str, program: Box<dyn Program>| Op::Fork { kind: ForkKind::Process, comm: Some(comm.into()), program };
        match self.step {
            1 => Op::Mark { label: MARK_START },
            2 => fork("newidle-s", Box::new(Sleeper { b: self.b.clone(), shared: self.shared.clone(), state: SState::Pin })),
            3 => fork("newidle-hog", Box::new(Hog::on(0))),
            4 => fork(
                "newidle-h",
                Box::new(Mover {
                    b: self.b.clone(),
                    shared: self.shared.clone(),
                    rounds_left: self.b.rounds,
                    state: HState::Start,
                    deadline_ns: 0,
                    sleeps_before: 0,
                    ops: VecDeque::new(),
                }),
            ),
            5 => Op::WaitChild,
            6 => Op::Mark { label: MARK_END },
            7 => Op::Kill { task: self.kids[0] },
            8 => Op::Kill { task: self.kids[1] },
            9 | 10 => Op::WaitChild,
            _ => Op::Exit,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SState {
    Pin,
    Spin,
    ReadClock,
    Sleep,
    /// Read the clock after a sleep, to time it.
    Woken,
    /// Record the sleep's length.
    Slept,
}

/// S: pinned to CPU 1, spins `run_us`, notes the time, sleeps `sleep_us`.
struct Sleeper {
    b: NewidleProbe,
    shared: Rc<Shared>,
    state: SState,
}

impl Program for Sleeper {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        let sh = &self.shared;
        match self.state {
            SState::Pin => {
                self.state = SState::Spin;
                Op::SetAffinity { cpus: cpus(&[1]) }
            }
            SState::Woken => {
                sh.s_asleep.set(false);
                self.state = SState::Slept;
                Op::Clock
            }
            SState::Slept => {
                self.state = SState::Spin;
                let t = if let OpResult::Time(t) = last { t } else { 0 };
                Op::Record { metric: SLEPT_NS, value: t.saturating_sub(sh.s_sleep_start_ns.get()) }
            }
            SState::Spin => {
                self.state = SState::ReadClock;
                Op::Compute { ns: self.b.run_us * 1000 }
            }
            SState::ReadClock => {
                self.state = SState::Sleep;
                Op::Clock
            }
            SState::Sleep => {
                if let OpResult::Time(t) = last {
                    sh.s_sleep_start_ns.set(t);
                }
                sh.s_sleeps.set(sh.s_sleeps.get() + 1);
                sh.s_asleep.set(true);
                self.state = SState::Woken;
                Op::Sleep { ns: self.b.sleep_us * 1000 }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum HState {
    /// Before the first round: the wait (read the clock first).
    Start,
    /// Spinning until `deadline_ns` (then the round).
    StartSpin,
    /// Pinned to CPU 0: read the clock to set the settle deadline.
    Pinned,
    /// Spinning `settle_ms` of wall time on CPU 0, beside the hog.
    Settle,
    /// Allowed both CPUs: read where it runs.
    Unpinned,
    /// Read the clock after a `GetCpu` that said CPU 0.
    CheckDeadline,
    /// Read the clock after a `GetCpu` that said CPU 1 (arrived).
    Arrived,
    /// The round's records are queued: then the next round.
    NextRound,
}

/// H: the rounds.
struct Mover {
    b: NewidleProbe,
    shared: Rc<Shared>,
    rounds_left: u64,
    state: HState,
    deadline_ns: u64,
    sleeps_before: u64,
    /// The round's records, returned before the next round starts.
    ops: VecDeque<Op>,
}

impl Mover {
    fn start_round(&mut self) -> Op {
        if self.rounds_left == 0 {
            return Op::Exit;
        }
        self.rounds_left -= 1;
        self.state = HState::Pinned;
        Op::SetAffinity { cpus: cpus(&[0]) }
    }

    /// Queues the round's records; the next round follows them.
    fn record(&mut self, metric: u32, value: u64) -> Op {
        let chances = self.shared.s_sleeps.get() - self.sleeps_before;
        self.ops.push_back(Op::Record { metric: CHANCES_PLUS_ONE, value: chances + 1 });
        self.state = HState::NextRound;
        Op::Record { metric, value }
    }
}

impl Program for Mover {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let Some(op) = self.ops.pop_front() {
            return op;
        }
        let time = if let OpResult::Time(t) = last { Some(t) } else { None };
        match (self.state, time) {
            (HState::Start, _) => {
                self.state = HState::StartSpin;
                self.deadline_ns = 0;
                Op::Clock
            }
            // The wall-clock spins: read the clock after each step.
            (HState::StartSpin | HState::Settle, None) => Op::Clock,
            (HState::StartSpin | HState::Settle, Some(t)) => {
                if self.deadline_ns == 0 {
                    let wait_ns = if self.state == HState::StartSpin { START_NS } else { self.b.settle_ms * 1_000_000 };
                    self.deadline_ns = t + wait_ns;
                }
                if t < self.deadline_ns {
                    return Op::Compute { ns: SETTLE_STEP_NS };
                }
                if self.state == HState::StartSpin {
                    return self.start_round();
                }
                self.sleeps_before = self.shared.s_sleeps.get();
                self.deadline_ns = t + ARRIVAL_TIMEOUT_NS;
                self.state = HState::Unpinned;
                Op::SetAffinity { cpus: cpus(&[0, 1]) }
            }
            (HState::Pinned, _) => {
                self.state = HState::Settle;
                self.deadline_ns = 0;
                Op::Clock
            }
            (HState::Unpinned, _) => match last {
                OpResult::Count(cpu) => {
                    self.state = if cpu == 1 { HState::Arrived } else { HState::CheckDeadline };
                    Op::Clock
                }
                _ => Op::GetCpu,
            },
            (HState::CheckDeadline, t) => {
                if t.unwrap_or(0) >= self.deadline_ns {
                    return self.record(NOT_ARRIVED, 1);
                }
                self.state = HState::Unpinned;
                Op::Compute { ns: SPIN_STEP_NS }
            }
            (HState::Arrived, t) => {
                let sh = &self.shared;
                let after_ns = t.unwrap_or(0).saturating_sub(sh.s_sleep_start_ns.get());
                let (metric, value) = if !sh.s_asleep.get() {
                    (ARRIVED_BUSY, 1)
                } else if after_ns <= NEWIDLE_WINDOW_NS {
                    (ARRIVED_AT_SLEEP, after_ns)
                } else {
                    (ARRIVED_LATER, 1)
                };
                self.record(metric, value)
            }
            (HState::NextRound, _) => self.start_round(),
        }
    }
}
