//! The load-resolution seed's mix (Nikhil Rao, "sched: Increase SCHED_LOAD_SCALE
//! resolution", 2011): `tasks` processes in one low-weight cgroup (`/lowweight`,
//! `cpu.shares=shares`), each alternating a busy period and a sleep drawn
//! uniformly from `ms × (1 ± spread_pct/100)` ("random sleep/busy times, biased
//! around 100ms"), while the system's %idle is measured over `window_ms` after
//! `warmup_ms`, as `mpstat` averages it. The uniform draw and the ±50% spread are
//! this model's reading of "biased around 100ms".

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;

/// The cgroup the tasks run in.
pub const GROUP_PATH: &str = "/lowweight";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMix {
    pub tasks: u64,
    pub shares: u64,
    pub busy_ms: u64,
    pub sleep_ms: u64,
    pub spread_pct: u64,
    pub warmup_ms: u64,
    pub window_ms: u64,
}

impl GroupMix {
    /// Reads `tasks=` (50), `shares=` (2), `busy_ms=` (100), `sleep_ms=` (100),
    /// `spread_pct=` (50), `warmup_ms=` (2000) and `window_ms=` (10000).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(GroupMix {
            tasks: p.u64_in("tasks", 50, 1, 100_000)?,
            shares: p.u64_in("shares", 2, 2, 1 << 18)?,
            busy_ms: p.u64_in("busy_ms", 100, 1, 1_000_000)?,
            sleep_ms: p.u64_in("sleep_ms", 100, 0, 1_000_000)?,
            spread_pct: p.u64_in("spread_pct", 50, 0, 100)?,
            warmup_ms: p.u64_in("warmup_ms", 2000, 0, 1_000_000)?,
            window_ms: p.u64_in("window_ms", 10_000, 1, 10_000_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "groupmix: {} tasks in {GROUP_PATH} (cpu.shares={}), busy ~{} ms / sleep ~{} ms (±{}%), %idle over {} ms after {} ms",
            self.tasks, self.shares, self.busy_ms, self.sleep_ms, self.spread_pct, self.window_ms, self.warmup_ms
        )
    }

    /// mpstat's `Average:` line for the window: all time is user time or idle.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let busy = res.busy_pct();
        format!(
            "Average:     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest   %idle\n\
             Average:     all {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2}",
            busy,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            100.0 - busy
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        Box::new(Main { m: self.clone(), step: 0, stop: Rc::new(Cell::new(false)), reaped: 0 })
    }
}

/// One busy/sleep task; stops at the first period boundary after `stop` is set.
struct Worker {
    m: GroupMix,
    stop: Rc<Cell<bool>>,
    busy_next: bool,
}

impl Worker {
    fn draw_ns(&self, ms: u64, rng: &mut SimRng) -> u64 {
        let mean = ms * 1_000_000;
        let half = mean * self.m.spread_pct / 100;
        rng.range(mean - half, mean + half)
    }
}

impl Program for Worker {
    fn next(&mut self, _last: OpResult, rng: &mut SimRng) -> Op {
        if self.stop.get() {
            return Op::Exit;
        }
        self.busy_next = !self.busy_next;
        if !self.busy_next {
            Op::Compute { ns: self.draw_ns(self.m.busy_ms, rng) }
        } else {
            Op::Sleep { ns: self.draw_ns(self.m.sleep_ms, rng).max(1) }
        }
    }
}

/// Joins the group, starts the workers, sleeps through the warm-up and the
/// window (marking both ends), then stops and reaps them.
struct Main {
    m: GroupMix,
    step: u64,
    stop: Rc<Cell<bool>>,
    reaped: u64,
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        self.step += 1;
        let n = self.m.tasks;
        match self.step {
            1 => Op::JoinGroup { path: GROUP_PATH.to_string(), shares: self.m.shares },
            s if s <= 1 + n => {
                let w = Worker { m: self.m.clone(), stop: self.stop.clone(), busy_next: false };
                Op::Fork { kind: ForkKind::Process, comm: Some("busy".into()), program: Box::new(w) }
            }
            s if s == 2 + n => Op::Sleep { ns: self.m.warmup_ms * 1_000_000 + 1 },
            s if s == 3 + n => Op::Mark { label: MARK_START },
            s if s == 4 + n => Op::Sleep { ns: self.m.window_ms * 1_000_000 },
            s if s == 5 + n => Op::Mark { label: MARK_END },
            _ => {
                self.stop.set(true);
                if matches!(last, OpResult::NoChild) || self.reaped == n {
                    return Op::Exit;
                }
                self.reaped += 1;
                Op::WaitChild
            }
        }
    }
}
