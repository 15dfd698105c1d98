//! pft, the page fault test (gormanm/pft, as mmtests runs it in thread mode): a
//! launcher maps one anonymous region without touching it, starts `threads − 1`
//! worker threads and waits, spinning, until all are ready; then it raises a "go"
//! flag the workers spin on and faults slice 0 itself. Every worker writes one
//! cache line of every page of its slice: one zero-fill fault per page, each
//! costing CPU time and memory traffic on the node where the page is allocated,
//! which is the node of the faulting CPU (first touch). The result is the wall
//! time from the first worker start to the last worker end.
//!
//! Cost of one fault (defaults, derived for a 2.x-3.x GHz Xeon, not fitted):
//! `fault_ns` = 1000: exception entry and exit, the page allocation from the
//! per-CPU lists, the memcg charge, LRU insertion and PTE update (~0.6 µs of
//! kernel paths) plus `clear_page_erms` of 4 KiB at the ~10 GB/s one core
//! writes to DRAM (~0.4 µs). `fault_bytes` = 8192: the 4 KiB zeroed is read for
//! ownership and later written back.

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, MemAt, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::RunResult;

use crate::params::Params;

/// What pft prints its wall time in: centiseconds, truncated (`%ld.%02lds` of
/// `tv_nsec / 10000000`).
pub const WALL_STEP_NS: u64 = 10_000_000;

/// Bytes per page.
const PAGE_BYTES: u64 = 4096;

/// How long a spinning thread computes between looks at the flag it waits on.
const SPIN_NS: u64 = 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pft {
    pub threads: u64,
    /// Region size, MiB.
    pub mb: u64,
    pub fault_ns: u64,
    pub fault_bytes: u64,
    /// Pages per simulated step (a step is one uninterrupted stretch of faults).
    pub chunk_pages: u64,
}

impl Pft {
    /// Reads `threads=` (1), `mb=` (1024), `fault_ns=` (1000), `fault_bytes=` (8192)
    /// and `chunk_pages=` (1024).
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        Ok(Pft {
            threads: p.u64_in("threads", 1, 1, 4096)?,
            mb: p.u64_in("mb", 1024, 1, 1 << 24)?,
            fault_ns: p.u64_in("fault_ns", 1000, 1, 1_000_000_000)?,
            fault_bytes: p.u64_in("fault_bytes", 8192, 0, 1 << 30)?,
            chunk_pages: p.u64_in("chunk_pages", 1024, 1, 1 << 30)?,
        })
    }

    pub fn pages(&self) -> u64 {
        self.mb * (1 << 20) / PAGE_BYTES
    }

    pub fn banner(&self) -> String {
        format!("pft: {} threads faulting {} MiB, {} pages", self.threads, self.mb, self.pages())
    }

    /// pft's `-T` header and result line (Gb Thr CLine User System Wall flt/cpu/s fault/wsec).
    pub fn result_lines(&self, res: &RunResult) -> String {
        let wall = res.elapsed_ns() as f64 / 1e9;
        let wall_cs = res.elapsed_ns() / WALL_STEP_NS;
        let cpu: f64 = res.tasks.iter().map(|t| t.run_ns as f64).sum::<f64>() / 1e9;
        let pages = self.pages() as f64;
        format!(
            "  Gb  Thr CLine   User     System     Wall    flt/cpu/s fault/wsec\n{:3} {:4} {:3} {:8.2}s {:8.2}s {:5}.{:02}s  {:10.3} {:10.3}",
            self.mb / 1024,
            self.threads,
            1,
            0.0,
            cpu,
            wall_cs / 100,
            wall_cs % 100,
            pages / cpu.max(1e-9),
            pages / wall.max(1e-9)
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        let shared = Rc::new(Shared::default());
        Box::new(Launcher { b: self.clone(), shared, spawned: Vec::new(), step: 0, slice: None })
    }

    /// The pages of worker `i`'s slice (the last one takes the remainder).
    fn slice_pages(&self, i: u64) -> u64 {
        let per = self.pages() / self.threads;
        if i + 1 == self.threads {
            self.pages() - per * (self.threads - 1)
        } else {
            per
        }
    }
}

/// What the threads share through memory: the ready count, the go flag, and the
/// bookkeeping of the timed window.
#[derive(Default)]
struct Shared {
    ready: Cell<u64>,
    go: Cell<bool>,
    started: Cell<bool>,
    finished: Cell<u64>,
}

/// One worker's faulting of its slice.
struct Slice {
    pages_left: u64,
    fault_ns: u64,
    fault_bytes: u64,
    chunk_pages: u64,
    threads: u64,
    started: bool,
    done: bool,
}

impl Slice {
    /// The next step of faulting, or None once the slice is done (after marking
    /// the end if this was the last worker to finish).
    fn next(&mut self, shared: &Shared) -> Option<Op> {
        if !self.started {
            self.started = true;
            if !shared.started.replace(true) {
                return Some(Op::Mark { label: MARK_START });
            }
        }
        if self.pages_left > 0 {
            let n = self.pages_left.min(self.chunk_pages);
            self.pages_left -= n;
            return Some(Op::Stream { ns: n * self.fault_ns, bytes: n * self.fault_bytes, at: MemAt::Local });
        }
        if !self.done {
            self.done = true;
            shared.finished.set(shared.finished.get() + 1);
            if shared.finished.get() == self.threads {
                return Some(Op::Mark { label: MARK_END });
            }
        }
        None
    }
}

struct Worker {
    shared: Rc<Shared>,
    slice: Slice,
    announced: bool,
}

impl Program for Worker {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        if !self.announced {
            self.announced = true;
            self.shared.ready.set(self.shared.ready.get() + 1);
        }
        if !self.shared.go.get() {
            return Op::Compute { ns: SPIN_NS };
        }
        self.slice.next(&self.shared).unwrap_or(Op::Exit)
    }
}

struct Launcher {
    b: Pft,
    shared: Rc<Shared>,
    spawned: Vec<usize>,
    step: u64,
    slice: Option<Slice>,
}

impl Launcher {
    fn slice(&self, i: u64) -> Slice {
        Slice {
            pages_left: self.b.slice_pages(i),
            fault_ns: self.b.fault_ns,
            fault_bytes: self.b.fault_bytes,
            chunk_pages: self.b.chunk_pages,
            threads: self.b.threads,
            started: false,
            done: false,
        }
    }
}

impl Program for Launcher {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        if let OpResult::Task(t) = last {
            self.spawned.push(t);
        }
        // Start the workers 1..threads; slice 0 is the launcher's own.
        if self.step + 1 < self.b.threads {
            self.step += 1;
            let w = Worker { shared: self.shared.clone(), slice: self.slice(self.step), announced: false };
            return Op::Fork { kind: ForkKind::Thread, comm: Some("pft".to_string()), program: Box::new(w) };
        }
        // Spin until every worker has run, then let them go.
        if !self.shared.go.get() {
            if self.shared.ready.get() + 1 < self.b.threads {
                return Op::Compute { ns: SPIN_NS };
            }
            self.shared.go.set(true);
            self.slice = Some(self.slice(0));
        }
        if let Some(op) = self.slice.as_mut().and_then(|s| s.next(&self.shared)) {
            return op;
        }
        match self.spawned.pop() {
            Some(t) => Op::Join { task: t },
            None => Op::Exit,
        }
    }
}
