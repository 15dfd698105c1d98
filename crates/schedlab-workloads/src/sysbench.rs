//! sysbench 1.0.14's `mutex` and `threads` tests (akopytov/sysbench, tag 1.0.14:
//! src/sysbench.c `run_test()`, `worker_thread()`, `thread_run()`;
//! src/tests/mutex/sb_mutex.c; src/tests/threads/sb_threads.c; src/sb_barrier.c).
//!
//! One process: the main thread initializes the test, creates `threads` worker
//! threads and waits with them on a start barrier; the last to arrive starts the
//! run's timer (`threads_started_callback()`) and releases the others. Each
//! worker then runs events until `sb_more_events()` says stop: the run's time
//! limit (`--time`, `time_ms`) read from the timer before each event, or the
//! test's own end. The main thread joins the workers and stops the timer.
//!
//! - `test=mutex`: one event per thread (`mutex_next_event()` gives one, then
//!   none). The event takes a lock `mutex_locks` times, each time drawing one of
//!   `mutex_num` mutexes at random (the thread's xoroshiro128+ stream), spinning
//!   `mutex_loops` empty iterations (`ck_pr_barrier()`, a compiler barrier: one
//!   loop iteration a cycle, measured below), then locking the mutex,
//!   incrementing a global and unlocking. sysbench reports the total time.
//! - `test=threads`: events until the time limit. An event takes lock number
//!   `events so far % thread_locks` (`ck_pr_faa_uint(&req_performed, 1)`) and,
//!   `thread_yields` times, locks it, calls sched_yield() and unlocks it.
//!   sysbench reports the events per second.
//!
//! A mutex is glibc's default (`PTHREAD_MUTEX_NORMAL`, no spinning): a futex word,
//! 0 free, 1 locked, 2 locked with waiters. Locking takes it 0 → 1 with one
//! atomic instruction, or else exchanges 2 in until it finds it free, sleeping in
//! FUTEX_WAIT on 2 between tries (`__lll_lock_wait()`); unlocking exchanges 0 in
//! and, if the word was 2, wakes one waiter with FUTEX_WAKE (`__lll_unlock()`).
//! The futex system calls are the engine's; the atomic instructions cost
//! `ATOMIC_CYCLES` each. The barrier is a pthread condition variable; its waiters
//! sleep in one FUTEX_WAIT and the last arrival wakes them all.
//!
//! Not modelled: the cache-line transfers of the global counter and the mutex
//! lines between CPUs (a few hundred ns per lock against ~4 µs of loop in the
//! mutex test), sysbench's per-event latency statistics (a clock read per
//! event), and its option parsing and reports.

use std::cell::RefCell;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::error::SpecError;
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;
use schedlab_core::task::TaskId;
use schedlab_core::RunResult;

use crate::params::Params;

/// `Op::Record` metric: one sample per event finished inside the window.
pub const EVENTS: u32 = 1;

/// Cycles of one LOCK-prefixed read-modify-write (cmpxchg, xchg) on a line in
/// the local cache: Agner Fog, "Instruction tables" (Haswell: LOCK CMPXCHG m,
/// XCHG m,r latencies 18-20 clock cycles).
const ATOMIC_CYCLES: u64 = 20;
/// Cycles of one iteration of the mutex test's empty loop, hundredths: the loop
/// (`for (i = 0; i < mutex_req->nloops; i++) ck_pr_barrier();`, gcc -O2) timed on
/// this project's host, 5·10^8 iterations in 0.130 s at 4462 MHz: 1.16 cycles.
const LOOP_CENTICYCLES: u64 = 116;
/// Cycles of `sb_rand_uniform()` (xoroshiro128+ and a double scaling): an
/// estimate, not measured (against 11 600 cycles of loop per lock, 0.2%).
const RAND_CYCLES: u64 = 20;
/// Cycles of `global_var++` under the lock (one add).
const INCREMENT_CYCLES: u64 = 1;
/// The main thread's work before it creates the workers (the test's init:
/// allocating and initializing the mutex array), per mutex, cycles: an
/// estimate, not measured (40 µs for 4096 mutexes, before the timer starts).
const INIT_CYCLES_PER_MUTEX: u64 = 40;
/// A worker's start (`sb_rand_thread_init()`, the test's `thread_init`),
/// cycles: an estimate, not measured (before the timer starts).
const THREAD_INIT_CYCLES: u64 = 2000;

/// Futex keys: mutex `m` at `MUTEX_KEY + m`, the start barrier at `BARRIER_KEY`.
const MUTEX_KEY: u64 = 0x5342_0000_0000;
const BARRIER_KEY: u64 = 0x5342_FFFF_FFFF;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Mutex,
    Threads,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysbench {
    pub test: Test,
    /// Worker threads (`--threads`).
    pub threads: u64,
    /// The run's time limit (`--time`), ms.
    pub time_ms: u64,
    pub mutex_num: u64,
    pub mutex_locks: u64,
    pub mutex_loops: u64,
    pub thread_yields: u64,
    pub thread_locks: u64,
}

impl Sysbench {
    /// Reads `test=` (mutex or threads), `threads=` (1), `time_ms=` (10000),
    /// `mutex_num=` (4096), `mutex_locks=` (50000), `mutex_loops=` (10000),
    /// `thread_yields=` (1000) and `thread_locks=` (8): sysbench's defaults.
    pub fn from_params(p: &mut Params) -> Result<Self, SpecError> {
        let test = match p.choice("test", "mutex", &["mutex", "threads"])?.as_str() {
            "threads" => Test::Threads,
            _ => Test::Mutex,
        };
        Ok(Sysbench {
            test,
            threads: p.u64_in("threads", 1, 1, 4096)?,
            time_ms: p.u64_in("time_ms", 10_000, 1, 3_600_000)?,
            mutex_num: p.u64_in("mutex_num", 4096, 1, 1 << 20)?,
            mutex_locks: p.u64_in("mutex_locks", 50_000, 1, 1 << 32)?,
            mutex_loops: p.u64_in("mutex_loops", 10_000, 0, 1 << 32)?,
            thread_yields: p.u64_in("thread_yields", 1000, 1, 1 << 32)?,
            thread_locks: p.u64_in("thread_locks", 8, 1, 1 << 20)?,
        })
    }

    pub fn test_name(&self) -> &'static str {
        match self.test {
            Test::Mutex => "mutex",
            Test::Threads => "threads",
        }
    }

    pub fn banner(&self) -> String {
        let what = match self.test {
            Test::Mutex => format!(
                "Doing mutex performance test ({} mutexes, {} locks and {} empty loops per thread)",
                self.mutex_num, self.mutex_locks, self.mutex_loops
            ),
            Test::Threads => format!(
                "Doing thread subsystem performance test (thread yields per test: {} locks used: {})",
                self.thread_yields, self.thread_locks
            ),
        };
        format!("sysbench 1.0.14: {} threads, time limit {} s\n{what}", self.threads, self.time_ms as f64 / 1000.0)
    }

    /// Events finished inside the window.
    pub fn events(res: &RunResult) -> u64 {
        res.metrics.get(&EVENTS).map_or(0, |h| h.len())
    }

    /// The threads test's rate: events per second of the run's time.
    pub fn events_per_s(res: &RunResult) -> f64 {
        Self::events(res) as f64 * 1e9 / res.elapsed_ns().max(1) as f64
    }

    pub fn result_lines(&self, res: &RunResult) -> String {
        let secs = res.elapsed_ns() as f64 / 1e9;
        format!(
            "General statistics:\n    total time:                          {secs:.4}s\n    total number of events:              {}\n    events/s:                            {:.2}",
            Self::events(res),
            Self::events_per_s(res)
        )
    }

    pub fn main_program(&self) -> Box<dyn Program> {
        let shared =
            Rc::new(RefCell::new(Shared { words: vec![0; self.lock_count() as usize], arrived: 0, start_ns: None, events: 0 }));
        Box::new(Main { spec: self.clone(), shared, workers: Vec::new(), step: MainStep::Init, barrier: Barrier::default() })
    }

    fn lock_count(&self) -> u64 {
        match self.test {
            Test::Mutex => self.mutex_num,
            Test::Threads => self.thread_locks,
        }
    }
}

/// What the process's threads share.
struct Shared {
    /// The mutexes' futex words (0 free, 1 locked, 2 locked with waiters).
    words: Vec<u8>,
    /// Threads at the start barrier so far.
    arrived: u64,
    /// When the timer started (the barrier's release).
    start_ns: Option<u64>,
    /// `req_performed`: events handed out (threads test).
    events: u64,
}

/// A thread's passage through the start barrier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Barrier {
    #[default]
    Arrive,
    /// The last to arrive: the clock read, start the timer.
    Start,
    /// Open the barrier's word, then wake the waiters.
    Open,
    Wake,
    Through,
}

impl Barrier {
    /// The next op, or None once through. The last to arrive reads the clock,
    /// starts the timer (`threads_started_callback()`) and wakes the others; the
    /// rest wait on the barrier's word until it opens.
    fn next(&mut self, shared: &RefCell<Shared>, parties: u64, last: &OpResult) -> Option<Op> {
        let (op, next) = match *self {
            Barrier::Arrive => {
                let mut s = shared.borrow_mut();
                s.arrived += 1;
                if s.arrived < parties {
                    (Op::FutexWait { key: BARRIER_KEY, expected: 0 }, Barrier::Through)
                } else {
                    (Op::Clock, Barrier::Start)
                }
            }
            Barrier::Start => {
                if let OpResult::Time(t) = *last {
                    shared.borrow_mut().start_ns = Some(t);
                }
                (Op::Mark { label: MARK_START }, Barrier::Open)
            }
            Barrier::Open => (Op::Store { key: BARRIER_KEY, value: 1 }, Barrier::Wake),
            Barrier::Wake => (Op::FutexWake { key: BARRIER_KEY, nr: u32::MAX }, Barrier::Through),
            Barrier::Through => return None,
        };
        *self = next;
        Some(op)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MainStep {
    Init,
    Create,
    Barrier,
    Join,
    Done,
}

/// The main thread: init, create the workers, the barrier, join, stop the timer.
struct Main {
    spec: Sysbench,
    shared: Rc<RefCell<Shared>>,
    workers: Vec<TaskId>,
    step: MainStep,
    barrier: Barrier,
}

impl Program for Main {
    fn next(&mut self, last: OpResult, _rng: &mut SimRng) -> Op {
        loop {
            match self.step {
                MainStep::Init => {
                    self.step = MainStep::Create;
                    return Op::Cycles { n: INIT_CYCLES_PER_MUTEX * self.spec.lock_count() };
                }
                MainStep::Create => {
                    if let OpResult::Task(t) = last {
                        self.workers.push(t);
                    }
                    if (self.workers.len() as u64) < self.spec.threads {
                        return Op::Fork {
                            kind: ForkKind::Thread,
                            comm: Some("sysbench".into()),
                            program: Box::new(Worker::new(self.spec.clone(), self.shared.clone())),
                        };
                    }
                    self.step = MainStep::Barrier;
                }
                MainStep::Barrier => match self.barrier.next(&self.shared, self.spec.threads + 1, &last) {
                    Some(op) => return op,
                    None => self.step = MainStep::Join,
                },
                MainStep::Join => match self.workers.pop() {
                    Some(t) => return Op::Join { task: t },
                    None => {
                        self.step = MainStep::Done;
                        return Op::Mark { label: MARK_END };
                    }
                },
                MainStep::Done => return Op::Exit,
            }
        }
    }
}

/// Where a worker is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WorkerStep {
    Init,
    Barrier,
    /// Before an event: read the timer (`sb_more_events()`).
    CheckTime,
    /// The timer read: stop, or start the next event.
    Decide,
    /// Inside an event, before iteration `i` of it.
    Iteration,
    /// Holding the lock: the work under it (mutex: the increment; threads:
    /// sched_yield()).
    Locked,
    /// Done with the work under the lock: unlock.
    Unlock,
    Exit,
}

/// A lock or unlock in progress, as glibc's lowlevellock takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LockStep {
    /// Try the uncontended 0 → 1.
    Try,
    /// Contended: exchange 2 in; free → ours, else publish 2 and wait.
    Exchange,
    /// The word published as 2 for the futex: wait on it.
    Wait,
    /// The unlock found waiters and published 0: pay the exchange.
    Release,
    /// Then wake one waiter.
    Wake,
}

struct Worker {
    spec: Sysbench,
    shared: Rc<RefCell<Shared>>,
    barrier: Barrier,
    step: WorkerStep,
    lock: LockStep,
    /// The event's iterations left, and the mutex of the current one.
    left: u64,
    mutex: usize,
    /// The lock is ours.
    holding: bool,
    /// Events done: the mutex test has one.
    events_done: u64,
}

impl Worker {
    fn new(spec: Sysbench, shared: Rc<RefCell<Shared>>) -> Worker {
        Worker {
            spec,
            shared,
            barrier: Barrier::default(),
            step: WorkerStep::Init,
            lock: LockStep::Try,
            left: 0,
            mutex: 0,
            holding: false,
            events_done: 0,
        }
    }

    fn key(&self) -> u64 {
        MUTEX_KEY + self.mutex as u64
    }

    /// `pthread_mutex_lock()`'s next op. The op that takes the lock (its atomic
    /// instruction) sets `holding`.
    fn lock_op(&mut self) -> Op {
        let key = self.key();
        let mut s = self.shared.borrow_mut();
        let w = &mut s.words[self.mutex];
        match self.lock {
            LockStep::Try => {
                if *w == 0 {
                    *w = 1;
                    self.holding = true;
                    return Op::Cycles { n: ATOMIC_CYCLES };
                }
                // The failed compare-and-exchange, then __lll_lock_wait()'s
                // exchange. (glibc waits at once on a word it reads as 2; the
                // exchange that finds 2 waits too, and re-reads the word after
                // the compare-and-exchange's time, as the kernel's own check of
                // the word in FUTEX_WAIT would: the model's futex word is a
                // mirror written by the exchange, never ahead of it.)
                self.lock = LockStep::Exchange;
                Op::Cycles { n: ATOMIC_CYCLES }
            }
            LockStep::Exchange => {
                if std::mem::replace(w, 2) == 0 {
                    self.holding = true;
                    self.lock = LockStep::Try;
                    return Op::Cycles { n: ATOMIC_CYCLES };
                }
                self.lock = LockStep::Wait;
                Op::Store { key, value: 2 }
            }
            LockStep::Wait => {
                self.lock = LockStep::Exchange;
                Op::FutexWait { key, expected: 2 }
            }
            LockStep::Release | LockStep::Wake => unreachable!("a lock is not an unlock"),
        }
    }
}

impl Program for Worker {
    fn next(&mut self, last: OpResult, rng: &mut SimRng) -> Op {
        loop {
            match self.step {
                WorkerStep::Init => {
                    self.step = WorkerStep::Barrier;
                    return Op::Cycles { n: THREAD_INIT_CYCLES };
                }
                WorkerStep::Barrier => match self.barrier.next(&self.shared, self.spec.threads + 1, &last) {
                    Some(op) => return op,
                    None => self.step = WorkerStep::CheckTime,
                },
                WorkerStep::CheckTime => {
                    self.step = WorkerStep::Decide;
                    return Op::Clock;
                }
                WorkerStep::Decide => {
                    let now = match last {
                        OpResult::Time(t) => t,
                        _ => 0,
                    };
                    let start = self.shared.borrow().start_ns.unwrap_or(now);
                    let timed_out = now.saturating_sub(start) >= self.spec.time_ms * 1_000_000;
                    let test_over = self.spec.test == Test::Mutex && self.events_done > 0;
                    if timed_out || test_over {
                        self.step = WorkerStep::Exit;
                        continue;
                    }
                    // next_event(): the event's size and, for the threads test, its lock.
                    match self.spec.test {
                        Test::Mutex => self.left = self.spec.mutex_locks,
                        Test::Threads => {
                            let mut s = self.shared.borrow_mut();
                            self.mutex = (s.events % self.spec.thread_locks) as usize;
                            s.events += 1;
                            self.left = self.spec.thread_yields;
                        }
                    }
                    self.step = WorkerStep::Iteration;
                }
                WorkerStep::Iteration => {
                    if self.left == 0 {
                        self.events_done += 1;
                        self.step = WorkerStep::CheckTime;
                        return Op::Record { metric: EVENTS, value: 1 };
                    }
                    self.left -= 1;
                    self.step = WorkerStep::Locked;
                    self.lock = LockStep::Try;
                    if self.spec.test == Test::Mutex {
                        // The mutex drawn and the empty loop, before the lock.
                        self.mutex = rng.range(0, self.spec.mutex_num - 1) as usize;
                        return Op::Cycles { n: RAND_CYCLES + self.spec.mutex_loops * LOOP_CENTICYCLES / 100 };
                    }
                }
                WorkerStep::Locked => {
                    if !self.holding {
                        return self.lock_op();
                    }
                    // Ours: the work under the lock.
                    self.holding = false;
                    self.step = WorkerStep::Unlock;
                    return match self.spec.test {
                        Test::Mutex => Op::Cycles { n: INCREMENT_CYCLES },
                        Test::Threads => Op::Yield,
                    };
                }
                WorkerStep::Unlock => {
                    match self.lock {
                        LockStep::Release => {
                            self.lock = LockStep::Wake;
                            return Op::Cycles { n: ATOMIC_CYCLES };
                        }
                        LockStep::Wake => {
                            self.lock = LockStep::Try;
                            self.step = WorkerStep::Iteration;
                            return Op::FutexWake { key: self.key(), nr: 1 };
                        }
                        _ => {}
                    }
                    let old = std::mem::replace(&mut self.shared.borrow_mut().words[self.mutex], 0);
                    if old == 2 {
                        // Waiters: the word goes back to 0 for the futex too, the
                        // exchange is paid, then one waiter is woken.
                        self.lock = LockStep::Release;
                        return Op::Store { key: self.key(), value: 0 };
                    }
                    self.step = WorkerStep::Iteration;
                    return Op::Cycles { n: ATOMIC_CYCLES };
                }
                WorkerStep::Exit => return Op::Exit,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_sysbenchs() {
        let (_, mut p) = Params::parse("sysbench threads=2").unwrap();
        let s = Sysbench::from_params(&mut p).unwrap();
        assert_eq!(s.test, Test::Mutex);
        assert_eq!((s.threads, s.time_ms, s.mutex_num, s.mutex_locks, s.mutex_loops), (2, 10_000, 4096, 50_000, 10_000));
        assert_eq!((s.thread_yields, s.thread_locks), (1000, 8));
        for bad in ["sysbench test=cpu", "sysbench threads=0", "sysbench mutex_num=0"] {
            let (_, mut p) = Params::parse(bad).unwrap();
            assert!(Sysbench::from_params(&mut p).is_err(), "{bad}");
        }
    }
}
