//! schbench (masoncl/schbench, the 2023+ design): `threads` message threads, each
//! with `workers` worker threads. A worker marks itself blocked, stamps its wake
//! time, posts itself on its message thread's list, wakes the message thread and
//! waits on its own futex; when it runs again it records its **wakeup latency**
//! (now − wake time), then serves a request: `usleep(sleep_us)` (simulated I/O)
//! and `work_us` of computation, recording the **request latency**. A message
//! thread takes every posted worker at once, reads the clock once and gives that
//! time to all of them as their wake time (so queueing behind earlier wakeups
//! counts), and futex-wakes each. Results are printed as schbench prints them:
//! wakeup and request latency percentiles (µs) and the average requests per second
//! over the measured window (`runtime_ms` after `warmup_ms`).
//!
//! Not modelled: schbench's per-CPU lock around the request's matrix work (its
//! `-L` option turns it off, which is what this is), and the matrix work itself:
//! `work_us` stands for `-n` operations on a `-F` KiB footprint, which on a real
//! machine `schbench -C` calibrates.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;

/// `Op::Record` metrics.
pub const WAKEUP_LATENCY: u32 = 1;
pub const REQUEST_LATENCY: u32 = 2;

/// Futex word values.
const BLOCKED: u64 = 1;
const RUNNING: u64 = 0;
/// Futex keys: a message thread's word at `MSG_KEY + m`, a worker's at `WORKER_KEY + w`.
const MSG_KEY: u64 = 1 << 32;
const WORKER_KEY: u64 = 2 << 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schbench {
    pub threads: u64,
    pub workers: u64,
    pub runtime_ms: u64,
    pub warmup_ms: u64,
    pub sleep_us: u64,
    pub work_us: u64,
    /// Workers' own slice (`sched_setattr()` sched_runtime, EEVDF v6.12+), µs;
    /// 0 keeps the default.
    pub slice_us: u64,
}

impl Schbench {
    /// Reads `threads=` (-m, 1), `workers=` (-t, 16), `runtime_ms=` (-r, 30000),
    /// `warmup_ms=` (-w, 0), `sleep_us=` (-s, 100) and `work_us=` (the request's
    /// computation, 100).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(Schbench {
            threads: p.u64_in("threads", 1, 1, 1024)?,
            workers: p.u64_in("workers", 16, 1, 4096)?,
            runtime_ms: p.u64_in("runtime_ms", 30_000, 1, 100_000_000)?,
            warmup_ms: p.u64_in("warmup_ms", 0, 0, 100_000_000)?,
            sleep_us: p.u64_in("sleep_us", 100, 0, 100_000_000)?,
            work_us: p.u64_in("work_us", 100, 1, 100_000_000)?,
            slice_us: p.u64_in("slice_us", 0, 0, 100_000)?,
        })
    }

    pub fn banner(&self) -> String {
        format!(
            "schbench: {} message threads, {} workers each, request = sleep {} us + {} us of work, runtime {} ms after {} ms warmup",
            self.threads, self.workers, self.sleep_us, self.work_us, self.runtime_ms, self.warmup_ms
        )
    }

    /// schbench's end-of-run report.
    pub fn result_lines(&self, res: &RunResult) -> String {
        let secs = self.runtime_ms / 1000;
        let mut out = String::new();
        for (metric, name) in [(WAKEUP_LATENCY, "Wakeup"), (REQUEST_LATENCY, "Request")] {
            let Some(h) = res.metrics.get(&metric) else {
                out.push_str(&format!("{name} Latencies percentiles (usec) runtime {secs} (s) (0 total samples)\n"));
                continue;
            };
            out.push_str(&format!("{name} Latencies percentiles (usec) runtime {secs} (s) ({} total samples)\n", h.len()));
            let mut below = 0u64;
            for (q, star) in [(50.0, false), (90.0, false), (99.0, true), (99.9, false)] {
                let v = h.value_at_quantile(q / 100.0);
                let count = h.count_between(0, v).saturating_sub(below);
                below += count;
                let mark = if star { "* " } else { "  " };
                out.push_str(&format!("\t{mark}{q:2.1}th: {:<10} ({count} samples)\n", v / 1000));
            }
            out.push_str(&format!("\t  min={}, max={}\n", h.min() / 1000, h.max() / 1000));
        }
        out.push_str(&format!("average rps: {:.2}", Self::rps(res)));
        out
    }

    /// Requests per second over the measured window, schbench's "average rps".
    pub fn rps(res: &RunResult) -> f64 {
        let requests = res.metrics.get(&REQUEST_LATENCY).map_or(0, |h| h.len());
        let window_s = res.elapsed_ns() as f64 / 1e9;
        requests as f64 / window_s.max(1e-9)
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        let shared = Rc::new(Shared {
            posted: (0..self.threads).map(|_| RefCell::new(Vec::new())).collect(),
            wake_time: (0..self.threads * self.workers).map(|_| Cell::new(0)).collect(),
            stop: Cell::new(false),
        });
        Box::new(Main { b: self.clone(), shared, step: 0, spawned: Vec::new(), stop_ops: VecDeque::new() })
    }
}

struct Shared {
    /// Per message thread: workers posted since it last looked.
    posted: Vec<RefCell<Vec<u64>>>,
    /// Per worker: the time its wakeup was issued.
    wake_time: Vec<Cell<u64>>,
    stop: Cell<bool>,
}

struct Worker {
    shared: Rc<Shared>,
    id: u64,
    msg: u64,
    sleep_ns: u64,
    work_ns: u64,
    ops: VecDeque<Op>,
    /// What the next Clock result is for.
    clock_for: Clock,
    request_start: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Clock {
    BlockStamp,
    Woken,
    RequestStart,
    RequestEnd,
}

impl Worker {
    fn block_and_post(&mut self) {
        let key = WORKER_KEY + self.id;
        self.ops.extend([Op::Store { key, value: BLOCKED }, Op::Clock]);
        self.clock_for = Clock::BlockStamp;
    }
}

impl Program for Worker {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Time(now) = last {
            match self.clock_for {
                Clock::BlockStamp => {
                    self.shared.wake_time[self.id as usize].set(now);
                    self.shared.posted[self.msg as usize].borrow_mut().push(self.id);
                    let (mk, wk) = (MSG_KEY + self.msg, WORKER_KEY + self.id);
                    self.ops.extend([
                        Op::Store { key: mk, value: RUNNING },
                        Op::FutexWake { key: mk, nr: 1 },
                        Op::FutexWait { key: wk, expected: BLOCKED },
                        Op::Clock,
                    ]);
                    self.clock_for = Clock::Woken;
                }
                Clock::Woken => {
                    let lat = now.saturating_sub(self.shared.wake_time[self.id as usize].get());
                    if self.shared.stop.get() {
                        return Op::Exit;
                    }
                    self.ops.extend([Op::Record { metric: WAKEUP_LATENCY, value: lat }, Op::Clock]);
                    self.clock_for = Clock::RequestStart;
                }
                Clock::RequestStart => {
                    self.request_start = now;
                    self.ops.extend([Op::Sleep { ns: self.sleep_ns.max(1) }, Op::Compute { ns: self.work_ns }, Op::Clock]);
                    self.clock_for = Clock::RequestEnd;
                }
                Clock::RequestEnd => {
                    self.ops.push_back(Op::Record { metric: REQUEST_LATENCY, value: now - self.request_start });
                }
            }
        }
        if let Some(op) = self.ops.pop_front() {
            return op;
        }
        if self.shared.stop.get() {
            return Op::Exit;
        }
        self.block_and_post();
        self.ops.pop_front().expect("queued")
    }
}

struct MessageThread {
    shared: Rc<Shared>,
    id: u64,
    ops: VecDeque<Op>,
    waiting_for_clock: bool,
    batch: Vec<u64>,
}

impl Program for MessageThread {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let (true, OpResult::Time(now)) = (self.waiting_for_clock, last) {
            self.waiting_for_clock = false;
            // One clock read for the whole batch, then a futex wake each.
            for w in std::mem::take(&mut self.batch) {
                self.shared.wake_time[w as usize].set(now);
                let key = WORKER_KEY + w;
                self.ops.extend([Op::Store { key, value: RUNNING }, Op::FutexWake { key, nr: 1 }]);
            }
        }
        if let Some(op) = self.ops.pop_front() {
            return op;
        }
        if self.shared.stop.get() {
            return Op::Exit;
        }
        let key = MSG_KEY + self.id;
        let batch = std::mem::take(&mut *self.shared.posted[self.id as usize].borrow_mut());
        if batch.is_empty() {
            // Mark blocked, then wait unless a worker posted meanwhile.
            self.ops.push_back(Op::FutexWait { key, expected: BLOCKED });
            return Op::Store { key, value: BLOCKED };
        }
        self.batch = batch;
        self.waiting_for_clock = true;
        Op::Clock
    }
}

/// Starts the message threads and workers, times the window, then stops them.
struct Main {
    b: Schbench,
    shared: Rc<Shared>,
    step: u64,
    spawned: Vec<usize>,
    stop_ops: VecDeque<Op>,
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Task(t) = last {
            self.spawned.push(t);
        }
        let (m, t) = (self.b.threads, self.b.workers);
        self.step += 1;
        let s = self.step;
        if s <= m {
            let mt = MessageThread {
                shared: self.shared.clone(),
                id: s - 1,
                ops: VecDeque::new(),
                waiting_for_clock: false,
                batch: Vec::new(),
            };
            return Op::Fork { kind: ForkKind::Thread, comm: Some("schbench-msg".into()), program: Box::new(mt) };
        }
        if s <= m + m * t {
            let id = s - m - 1;
            let w = Worker {
                shared: self.shared.clone(),
                id,
                msg: id / t,
                sleep_ns: self.b.sleep_us * 1000,
                work_ns: self.b.work_us * 1000,
                // A worker sets its slice before its first request.
                ops: (self.b.slice_us > 0).then_some(Op::SetSlice { ns: self.b.slice_us * 1000 }).into_iter().collect(),
                clock_for: Clock::BlockStamp,
                request_start: 0,
            };
            return Op::Fork { kind: ForkKind::Thread, comm: Some("schbench-worker".into()), program: Box::new(w) };
        }
        let after = s - m - m * t;
        match after {
            1 => Op::Sleep { ns: self.b.warmup_ms * 1_000_000 + 1 },
            2 => Op::Mark { label: MARK_START },
            3 => Op::Sleep { ns: self.b.runtime_ms * 1_000_000 },
            4 => Op::Mark { label: MARK_END },
            _ => {
                if !self.shared.stop.replace(true) {
                    // Wake everyone so they see the stop flag.
                    let keys = (0..m).map(|i| MSG_KEY + i).chain((0..m * t).map(|w| WORKER_KEY + w));
                    for key in keys {
                        self.stop_ops.extend([Op::Store { key, value: RUNNING }, Op::FutexWake { key, nr: 1 }]);
                    }
                }
                if let Some(op) = self.stop_ops.pop_front() {
                    return op;
                }
                match self.spawned.pop() {
                    Some(t) => Op::Join { task: t },
                    None => Op::Exit,
                }
            }
        }
    }
}
