//! The wake-pull probe (`tools/host-wake-pull/pull.c`, its steady mode): where
//! does a sync wakeup put a wakee whose previous CPU is idle? A waker pinned to
//! CPU 0 wakes, through a pipe, a wakee allowed on CPUs 0 and 1 whose previous
//! CPU is 1: each round the wakee moves itself back to CPU 1
//! (`sched_setaffinity()` to CPU 1, then to both), sleeps in read(), notes the
//! CPU it woke on (`sched_getcpu()`) and answers; before each wakeup the waker
//! spins `spin_us` (its CPU busy), then sleeps `sleep_us` (`sleep_odd_us` in odd
//! rounds; its CPU idle meanwhile), as pull.c's `--spin` and `--sleep`.
//! The result is the share of rounds the wakee woke on the waker's CPU 0, even
//! and odd rounds apart, beside what the probe prints on a real machine.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ChanId, ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
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

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullProbe {
    pub rounds: u64,
    pub spin_us: u64,
    pub sleep_us: u64,
    pub sleep_odd_us: u64,
}

/// A mask of the given CPUs (the probe runs on CPUs 0 and 1).
fn cpus(list: &[usize]) -> CpuSet {
    let mut s = CpuSet::new(2);
    for &c in list {
        s.set(c);
    }
    s
}

impl PullProbe {
    /// Reads `rounds=` (600), `spin_us=` (0), `sleep_us=` (0) and `sleep_odd_us=`
    /// (as `sleep_us`).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let rounds = p.u64_in("rounds", 600, 1, 1_000_000)?;
        let spin_us = p.u64_in("spin_us", 0, 0, 1_000_000)?;
        let sleep_us = p.u64_in("sleep_us", 0, 0, 1_000_000)?;
        let sleep_odd_us = p.u64_in("sleep_odd_us", sleep_us, 0, 1_000_000)?;
        Ok(PullProbe { rounds, spin_us, sleep_us, sleep_odd_us })
    }

    pub fn banner(&self) -> String {
        format!(
            "# wake-pull probe (steady): {} rounds, the waker spinning {} us and then sleeping {} us before even rounds' wakeups, {} us before odd ones'",
            self.rounds, self.spin_us, self.sleep_us, self.sleep_odd_us
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
        Box::new(Waker { b: self.clone(), step: 0, pipes: Vec::new(), round: 0, phase: 0 })
    }
}

/// The waker: pins itself to CPU 0, makes the pipes and the wakee, then each
/// round sleeps, writes, and reads the answer.
struct Waker {
    b: PullProbe,
    step: u32,
    pipes: Vec<ChanId>,
    round: u64,
    /// Within a round: 0 spin, 1 sleep, 2 write, 3 read.
    phase: u8,
}

impl Program for Waker {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Chan(c) = last {
            self.pipes.push(c);
        }
        if self.step < 6 {
            self.step += 1;
            return match self.step {
                1 => Op::SetAffinity { cpus: cpus(&[0]) },
                2 | 3 => Op::Pipe,
                4 => Op::Fork {
                    kind: ForkKind::Process,
                    comm: Some("pull-wakee".into()),
                    program: Box::new(Wakee {
                        to_wakee: self.pipes[0],
                        to_waker: self.pipes[1],
                        rounds: self.b.rounds,
                        round: 0,
                        phase: 0,
                    }),
                },
                5 => Op::Sleep { ns: SETTLE_NS },
                _ => Op::Mark { label: MARK_START },
            };
        }
        while self.round < self.b.rounds {
            let phase = self.phase;
            self.phase = (self.phase + 1) % 4;
            match phase {
                0 => {
                    if self.b.spin_us > 0 {
                        return Op::Compute { ns: self.b.spin_us * 1000 };
                    }
                }
                1 => {
                    let us = if self.round % 2 == 1 { self.b.sleep_odd_us } else { self.b.sleep_us };
                    if us > 0 {
                        return Op::Sleep { ns: us * 1000 };
                    }
                }
                2 => return Op::Write { chan: self.pipes[0], bytes: MSG_BYTES },
                _ => {
                    self.round += 1;
                    return Op::Read { chan: self.pipes[1], bytes: MSG_BYTES };
                }
            }
        }
        self.step += 1;
        match self.step {
            7 => Op::WaitChild,
            8 => Op::Mark { label: MARK_END },
            _ => Op::Exit,
        }
    }
}

/// The wakee: each round back to CPU 1, then allowed on both, waits for the
/// waker, notes where it woke, answers.
struct Wakee {
    to_wakee: ChanId,
    to_waker: ChanId,
    rounds: u64,
    round: u64,
    /// Within a round: 0 pin to CPU 1, 1 allow both, 2 read, 3 getcpu, 4 record, 5 answer.
    phase: u8,
}

impl Program for Wakee {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if self.round == self.rounds {
            return Op::Exit;
        }
        let phase = self.phase;
        self.phase = (self.phase + 1) % 6;
        match phase {
            0 => Op::SetAffinity { cpus: cpus(&[1]) },
            1 => Op::SetAffinity { cpus: cpus(&[0, 1]) },
            2 => Op::Read { chan: self.to_wakee, bytes: MSG_BYTES },
            3 => Op::GetCpu,
            4 => {
                let cpu = if let OpResult::Count(c) = last { u64::from(c) } else { 0 };
                let metric = if self.round % 2 == 1 { WOKE_ODD } else { WOKE_EVEN };
                Op::Record { metric, value: cpu + 1 }
            }
            _ => {
                self.round += 1;
                Op::Write { chan: self.to_waker, bytes: MSG_BYTES }
            }
        }
    }
}
