//! `4bsd`: FreeBSD's traditional scheduler, sys/kern/sched_4bsd.c as of FreeBSD 11/12
//! (2017-2018), briefly but faithfully. Every function below names the kernel
//! function it mirrors; the code is re-derived from reading the C, not copied.
//!
//! What is modelled:
//! * One global run queue (`runq`) and per-CPU queues (`runq_pcpu`) used only by
//!   threads whose CPU set excludes some CPU (`TSF_AFFINITY`). A queue is 64 FIFO
//!   lists indexed by priority / 4 with an occupancy bitmap (kern_switch.c
//!   `runq_add`, `runq_choose`). `sched_choose()` takes the per-CPU head only if it
//!   is strictly better than the global head.
//! * Priorities in FreeBSD's numbering (lower is better). A time-sharing thread's
//!   user priority is `PUSER + estcpu / INVERSE_ESTCPU_WEIGHT + NICE_WEIGHT * (nice -
//!   PRIO_MIN)` clamped to 120..223 (`resetpriority()`), with INVERSE_ESTCPU_WEIGHT
//!   = 8 * smp_cpus and ESTCPULIM = 37 * INVERSE_ESTCPU_WEIGHT - 1 as in the SMP
//!   kernels of that era.
//! * `sched_clock()` once per stat tick (stathz = 127) on each busy CPU: estcpu += 1
//!   (capped at ESTCPULIM), the priority recomputed when estcpu reaches a multiple of
//!   INVERSE_ESTCPU_WEIGHT, and the slice (`sched_slice` = realstathz / 10 = 12 stat
//!   ticks) counted down; at zero it is refilled and NEEDRESCHED set. Stat ticks are
//!   derived from the engine's hz ticks: the stat work runs on the hz tick where
//!   floor(now * stathz / 1 s) advances. Idle CPUs are tickless: stat ticks that
//!   pass while a CPU idles go to its idle thread, so a CPU leaving idle restarts
//!   its count.
//! * `schedcpu()` once a second: every thread that was awake in the last second has
//!   its estcpu decayed by 2L / (2L + 1), L the 1-minute load average, and its
//!   priority recomputed; threads asleep longer are skipped (`ts_slptime`) and
//!   caught up when they wake (`sched_wakeup()` → `updatepri()`, whose counter
//!   arithmetic — one decay fewer than seconds skipped, and the fixed-point
//!   comparison that makes the reset-to-zero shortcut fire only at load 0 — is kept).
//! * `loadav()` (kern_synch.c): the 1-minute load average of `sched_tdcnt`
//!   (threads queued or running) in fixed point (FSHIFT = 11), sampled every 5 s.
//! * `sched_sleep()`: a sleeping time-sharing thread takes its kernel sleep priority
//!   and keeps it while queued after the wakeup, so woken threads go ahead of every
//!   user-priority thread; `sched_userret()` restores the user priority.
//! * `sched_add()` with `forward_wakeup()`, `maybe_preempt()` and `maybe_resched()`
//!   for the global queue, and `sched_pickcpu()` / `kick_other_cpu()` for per-CPU
//!   queues (see `select_task_rq`). FULL_PREEMPTION is off: a woken thread never
//!   preempts a time-sharing thread at once.
//! * `sched_fork_thread()` (the child inherits estcpu, its first slice is one stat
//!   tick), `sched_exit()` / `sched_exit_thread()` (the parent process's first thread
//!   is charged the exiting thread's estcpu), `sched_nice()`, `sched_relinquish()`.
//! * The global `sched_lock` spin mutex: each acquisition is charged as one
//!   interrupts-disabled section of `per_rq_lock_ns` on the CPU taking it, named by
//!   the kernel function: `sched_add`, `sched_rem`, `sched_switch`, `sched_clock`,
//!   `schedcpu` (one per thread visited, as it takes each thread's lock).
//!
//! Simplified (and why):
//! * The engine does not say what a thread slept on. FreeBSD sleeps at PRIBIO (92)
//!   in pipes, PSOCK (104) in sockets, PWAIT (108) in nanosleep and wait, and keeps
//!   the user priority in umtx and poll waits; every sleep here takes `SLEEP_PRI` =
//!   PSOCK. The user priority returns when the woken thread is picked (not at its
//!   later return to user mode).
//! * `loadav()` runs every 5 s exactly (FreeBSD adds ±1 s of jitter) and starts from
//!   0, as on a machine that was idle before the run. A 5 s sample or schedcpu pass
//!   that falls while every CPU idles (no tick to run it) is done at the next tick,
//!   with the then-true run count of 0 and without charging its cost.
//! * `schedcpu()` runs in the tick of the first busy CPU past each second rather than
//!   in its own kernel thread; a queued thread whose queue index changes is moved to
//!   the tail of its new list without the kicks of a fresh `sched_add()`.
//! * `ts_pctcpu` / `ts_cpticks` (only for ps(1)), `runq_fuzz` (default 1 = off),
//!   priority lending and interrupt / realtime / idle classes are not modelled; every
//!   task is time-sharing.
//! * Contention for the single `sched_lock` is not modelled (each acquisition costs
//!   the uncontended price), which flatters 4BSD on many CPUs.
//!
//! Engine contract: NEEDRESCHED (`maybe_resched()` on the waker, `kick_other_cpu()`
//! to a busy CPU, slice end) becomes the engine's need_resched, which takes effect
//! at the next return to user mode: at once if the CPU runs user code, else at the
//! end of its system call. A pending NEEDRESCHED also takes effect at the next hz
//! tick, as an AST does on return from the clock interrupt. `check_preempt_curr`
//! answers only for per-CPU-queued threads; for the global queue the decision is
//! taken in `select_task_rq`, where FreeBSD's `sched_add()` takes it.

use std::collections::VecDeque;

use schedlab_core::error::SpecError;
use schedlab_core::sched::{Charge, DequeueReason, EnqueueReason, SchedClass, SelectReason, System, WakeFlags};
use schedlab_core::task::{TaskId, TaskState};

// ---- sys/sys/priority.h, sys/sys/resource.h, sys/sys/runq.h, sys/sys/param.h

/// PSOCK: the sleep priority of socket waits (sbwait()).
pub const PSOCK: i32 = 104;
/// PRI_MIN_TIMESHARE / PRI_MAX_TIMESHARE: the time-sharing band.
pub const PRI_MIN_TIMESHARE: i32 = 120;
pub const PRI_MAX_TIMESHARE: i32 = 223;
/// PUSER: the best user priority, PRI_MIN_TIMESHARE.
pub const PUSER: i32 = PRI_MIN_TIMESHARE;
/// PRI_MAX_IDLE: the priority of a CPU's idle thread.
pub const PRI_MAX_IDLE: i32 = 255;
/// PRIO_MIN / PRIO_MAX: the nice range.
pub const PRIO_MIN: i32 = -20;
pub const PRIO_MAX: i32 = 20;
/// RQ_NQS lists per run queue, RQ_PPQ priorities per list.
pub const RQ_NQS: usize = 64;
pub const RQ_PPQ: i32 = 4;
/// FSHIFT / FSCALE: fixed point of load averages and decay factors.
pub const FSHIFT: u32 = 11;
pub const FSCALE: u64 = 1 << FSHIFT;
/// `cexp[0]` of kern_synch.c: exp(-1/12) * FSCALE, truncated as the C initialiser
/// does (0.9200444146293232 * 2048 = 1884.25): the 1-minute average sampled every 5 s.
pub const CEXP_1MIN: u64 = 1884;

// ---- sched_4bsd.c

/// NICE_WEIGHT: priorities per nice level.
pub const NICE_WEIGHT: i32 = 1;
/// `realstathz`: stat ticks per second of an amd64 kernel with hz = 1000.
pub const STATHZ: u64 = 127;
/// `sched_slice` after sched_initticks(): realstathz / 10 stat ticks (~94.5 ms).
pub const DEFAULT_SCHED_SLICE: i32 = (STATHZ / 10) as i32;
/// The sleep priority every sleeping thread takes here (see the module notes).
pub const SLEEP_PRI: i32 = PSOCK;
/// `schedcpu_thread()` runs schedcpu() every second; loadav() every 5 s.
const SCHEDCPU_PERIOD_NS: u64 = 1_000_000_000;
const LOADAV_PERIOD_NS: u64 = 5_000_000_000;

/// INVERSE_ESTCPU_WEIGHT of an SMP kernel: 8 * smp_cpus (8 on one CPU too).
pub fn inverse_estcpu_weight(ncpus: usize) -> u32 {
    8 * ncpus.max(1) as u32
}

/// ESTCPULIM's bound, W * (NICE_WEIGHT * (PRIO_MAX - PRIO_MIN) - RQ_PPQ) + W - 1:
/// CPU use can add at most 36 priority levels (40 nice levels less one list).
pub fn estcpu_limit(weight: u32) -> u32 {
    weight * (NICE_WEIGHT * (PRIO_MAX - PRIO_MIN) - RQ_PPQ) as u32 + weight - 1
}

/// Mirrors sched_4bsd.c:resetpriority(): the user priority of a time-sharing thread.
pub fn user_priority(estcpu: u32, nice: i32, weight: u32) -> i32 {
    let pri = PUSER + (estcpu / weight) as i32 + NICE_WEIGHT * (nice - PRIO_MIN);
    pri.clamp(PRI_MIN_TIMESHARE, PRI_MAX_TIMESHARE)
}

/// `loadfactor()`: 2 * load average, in FSCALE fixed point.
pub fn loadfactor(ldavg: u64) -> u64 {
    2 * ldavg
}

/// Mirrors `decay_cpu()`: estcpu * 2L / (2L + 1), in fixed point, truncated.
pub fn decay_cpu(loadfac: u64, estcpu: u32) -> u32 {
    (loadfac * estcpu as u64 / (loadfac + FSCALE)) as u32
}

/// Mirrors kern_synch.c:loadav() for the 1-minute average: one 5 s sample of `nrun`.
pub fn loadav_update(ldavg: u64, nrun: u64) -> u64 {
    (CEXP_1MIN * ldavg + nrun * FSCALE * (FSCALE - CEXP_1MIN)) >> FSHIFT
}

/// Mirrors sched_4bsd.c:updatepri(): estcpu of a thread waking after `slptime`
/// schedcpu passes skipped it. Note both quirks of the C: `5 * loadfac` compares
/// seconds with a fixed-point number (so the reset fires only at load 0), and the
/// loop decays one time fewer than `slptime - 1`.
pub fn updatepri(estcpu: u32, slptime: u32, ldavg: u64) -> u32 {
    let loadfac = loadfactor(ldavg);
    if slptime as u64 > 5 * loadfac {
        return 0;
    }
    let mut newcpu = estcpu;
    // schedcpu() had already incremented slptime for the current second.
    let mut slp = slptime.saturating_sub(1);
    while newcpu != 0 {
        slp = slp.saturating_sub(1);
        if slp == 0 {
            break;
        }
        newcpu = decay_cpu(loadfac, newcpu);
    }
    newcpu
}

/// Mirrors `sysctl_kern_quantum()`: microseconds to stat ticks, rounded, at least 1.
pub fn quantum_us_to_slice(us: u64) -> i32 {
    let period_us = 1_000_000 / STATHZ;
    ((us + period_us / 2) / period_us).max(1) as i32
}

/// Mirrors sched_4bsd.c:sched_pickcpu(), for threads with a restricted CPU set: the
/// last CPU if allowed, replaced by any allowed CPU whose per-CPU queue is strictly
/// shorter (in CPU order). It looks at queue lengths only, not at whether CPUs idle.
pub fn sched_pickcpu(
    lastcpu: Option<usize>,
    ncpus: usize,
    can_sched: impl Fn(usize) -> bool,
    runq_length: impl Fn(usize) -> usize,
) -> usize {
    let mut best = lastcpu.filter(|&c| c < ncpus && can_sched(c));
    for cpu in (0..ncpus).filter(|&c| can_sched(c)) {
        best = match best {
            None => Some(cpu),
            Some(b) if runq_length(cpu) < runq_length(b) => Some(cpu),
            keep => keep,
        };
    }
    best.unwrap_or(0)
}

/// A run queue (sys/sys/runq.h, kern_switch.c): 64 FIFO lists indexed by
/// priority / RQ_PPQ and a bitmap of the non-empty ones.
#[derive(Clone, Debug)]
pub struct RunQ {
    status: u64,
    queues: Vec<VecDeque<TaskId>>,
    len: usize,
}

impl Default for RunQ {
    fn default() -> Self {
        RunQ { status: 0, queues: vec![VecDeque::new(); RQ_NQS], len: 0 }
    }
}

impl RunQ {
    /// `runq_add()`: at the tail of list pri / 4, or at its head (SRQ_PREEMPTED).
    /// Returns the list index (`td_rqindex`).
    pub fn add(&mut self, p: TaskId, pri: i32, head: bool) -> usize {
        let idx = (pri.clamp(0, PRI_MAX_IDLE) / RQ_PPQ) as usize;
        if head {
            self.queues[idx].push_front(p);
        } else {
            self.queues[idx].push_back(p);
        }
        self.status |= 1 << idx;
        self.len += 1;
        idx
    }

    /// `runq_remove()` of `p` from list `idx`.
    pub fn remove(&mut self, p: TaskId, idx: usize) {
        let q = &mut self.queues[idx];
        if let Some(i) = q.iter().position(|&t| t == p) {
            q.remove(i);
            self.len -= 1;
            if q.is_empty() {
                self.status &= !(1 << idx);
            }
        }
    }

    /// `runq_choose()`: the head of the first non-empty list.
    pub fn choose(&self) -> Option<TaskId> {
        if self.status == 0 {
            return None;
        }
        self.queues[self.status.trailing_zeros() as usize].front().copied()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Which run queue a thread is on (`ts_runq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnRunq {
    Global,
    Pcpu(usize),
}

/// `struct td_sched` plus the `struct thread` fields 4BSD reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TdSched {
    /// `ts_estcpu`: recent CPU use, in stat ticks, decayed once a second.
    pub estcpu: u32,
    /// `ts_slptime`: schedcpu passes the thread has been asleep through.
    pub slptime: u32,
    /// `ts_slice`: stat ticks left in the slice.
    pub slice: i32,
    /// TDF_DIDRUN: ran since the last schedcpu pass.
    pub did_run: bool,
    /// `td_priority`: the priority it is queued and compared at.
    pub pri: i32,
    /// `td_user_pri`: the time-sharing priority from estcpu and nice.
    pub user_pri: i32,
    /// `td_rqindex` while queued.
    rqindex: usize,
    /// The run queue it is on, if queued (TD_ON_RUNQ).
    runq: Option<OnRunq>,
    /// For the global queue: the CPU whose `nr_running` counts it (`task.cpu` when queued).
    counted_cpu: usize,
    /// `td_oncpu` while running, `td_lastcpu` after.
    oncpu: Option<usize>,
    lastcpu: Option<usize>,
    /// FIRST_THREAD_IN_PROC: the thread sched_exit() charges.
    leader: TaskId,
}

impl TdSched {
    fn new(estcpu: u32, user_pri: i32, slice: i32, leader: TaskId) -> TdSched {
        TdSched {
            estcpu,
            slptime: 0,
            slice,
            did_run: false,
            pri: user_pri,
            user_pri,
            rqindex: 0,
            runq: None,
            counted_cpu: 0,
            oncpu: None,
            lastcpu: None,
            leader,
        }
    }

    /// The per-thread part of sched_clock(): one stat tick seen running. Returns
    /// (the priority may have changed, the slice ended).
    pub fn stat_tick(&mut self, nice: i32, weight: u32, slice: i32) -> (bool, bool) {
        self.estcpu = (self.estcpu + 1).min(estcpu_limit(weight));
        let reprio = self.estcpu.is_multiple_of(weight);
        if reprio {
            self.resetpriority(nice, weight);
        }
        self.slice -= 1;
        let end = self.slice <= 0;
        if end {
            self.slice = slice;
        }
        (reprio, end)
    }

    /// `resetpriority()`: the user priority from estcpu and nice.
    pub fn resetpriority(&mut self, nice: i32, weight: u32) {
        self.user_pri = user_priority(self.estcpu, nice, weight);
    }

    /// `resetpriority_thread()`'s priority part: a thread at a time-sharing priority
    /// moves to its new user priority; one at a kernel sleep priority keeps it.
    /// Returns the new `td_priority` if it changed.
    pub fn resetpriority_thread(&mut self) -> Option<i32> {
        if !(PRI_MIN_TIMESHARE..=PRI_MAX_TIMESHARE).contains(&self.pri) || self.pri == self.user_pri {
            return None;
        }
        self.pri = self.user_pri;
        Some(self.pri)
    }

    /// The per-thread part of schedcpu(): `awake` = queued, running or ran during
    /// the last second. Returns false if the thread was skipped (asleep > 1 s).
    pub fn schedcpu_one(&mut self, awake: bool, ldavg: u64, nice: i32, weight: u32) -> bool {
        if awake {
            if self.slptime > 1 {
                self.estcpu = updatepri(self.estcpu, self.slptime, ldavg);
            }
            self.slptime = 0;
        } else {
            self.slptime += 1;
        }
        if self.slptime > 1 {
            return false;
        }
        self.estcpu = decay_cpu(loadfactor(ldavg), self.estcpu);
        self.resetpriority(nice, weight);
        true
    }

    /// The per-thread part of sched_wakeup(): catch up the decay missed while
    /// asleep and start a fresh slice.
    pub fn wakeup(&mut self, ldavg: u64, nice: i32, weight: u32, slice: i32) {
        if self.slptime > 1 {
            self.estcpu = updatepri(self.estcpu, self.slptime, ldavg);
            self.resetpriority(nice, weight);
        }
        self.slptime = 0;
        self.slice = slice;
    }
}

pub struct Bsd4 {
    /// `sched_slice` (`kern.sched.slice`), stat ticks.
    sched_slice: i32,
    /// `kern.sched.ipiwakeup.enabled`: forward_wakeup() wakes idle CPUs.
    forward_wakeup_enabled: bool,
    /// INVERSE_ESTCPU_WEIGHT for this machine, set in init().
    weight: u32,
    runq: RunQ,
    runq_pcpu: Vec<RunQ>,
    /// Per CPU: global-queue threads whose `task.cpu` is this CPU.
    global_counted: Vec<usize>,
    ts: Vec<TdSched>,
    /// Per CPU: the running thread by this policy's books (None = idle thread).
    curthread: Vec<Option<TaskId>>,
    /// Per CPU: the stat tick count last seen, floor(t * stathz / 1 s).
    last_stat: Vec<u64>,
    /// `averunnable.ldavg[0]`, FSCALE fixed point.
    ldavg: u64,
    next_schedcpu_ns: u64,
    next_loadav_ns: u64,
}

impl Bsd4 {
    /// Accepts `kern.sched.quantum` (µs, rounded to stat ticks), `kern.sched.slice`
    /// (stat ticks) and `kern.sched.ipiwakeup.enabled` (0 or 1); later ones win.
    pub fn new(sysctls: &[(String, String)]) -> Result<Bsd4, SpecError> {
        let mut sched_slice = DEFAULT_SCHED_SLICE;
        let mut forward_wakeup_enabled = true;
        for (k, v) in sysctls {
            let field = format!("sysctl {k}");
            let int = |lo: u64, hi: u64| -> Result<u64, SpecError> {
                v.parse::<u64>()
                    .ok()
                    .filter(|x| (lo..=hi).contains(x))
                    .ok_or_else(|| SpecError::new(&field, v, format!("an integer from {lo} to {hi}")))
            };
            match k.as_str() {
                "kern.sched.quantum" => sched_slice = quantum_us_to_slice(int(1, 10_000_000)?),
                "kern.sched.slice" => sched_slice = int(1, 100_000)? as i32,
                "kern.sched.ipiwakeup.enabled" => forward_wakeup_enabled = int(0, 1)? == 1,
                _ => {
                    return Err(SpecError::new(
                        "sysctl",
                        k,
                        "a sysctl 4bsd knows: kern.sched.quantum, kern.sched.slice, kern.sched.ipiwakeup.enabled",
                    ))
                }
            }
        }
        Ok(Bsd4 {
            sched_slice,
            forward_wakeup_enabled,
            weight: inverse_estcpu_weight(1),
            runq: RunQ::default(),
            runq_pcpu: Vec::new(),
            global_counted: Vec::new(),
            ts: Vec::new(),
            curthread: Vec::new(),
            last_stat: Vec::new(),
            ldavg: 0,
            next_schedcpu_ns: SCHEDCPU_PERIOD_NS,
            next_loadav_ns: LOADAV_PERIOD_NS,
        })
    }

    /// The slice in stat ticks (`kern.sched.slice`).
    pub fn sched_slice(&self) -> i32 {
        self.sched_slice
    }

    fn ensure(&mut self, p: TaskId) {
        while self.ts.len() <= p {
            let id = self.ts.len();
            self.ts.push(TdSched::new(0, user_priority(0, 0, self.weight), self.sched_slice, id));
        }
    }

    fn lock_ns(sys: &System) -> u64 {
        sys.cost.sched_ops.per_rq_lock_ns
    }

    fn stat_ticks(now_ns: u64) -> u64 {
        (now_ns as u128 * STATHZ as u128 / 1_000_000_000) as u64
    }

    /// TSF_AFFINITY (`sched_affinity()`): the thread's CPU set excludes some CPU.
    fn has_affinity(sys: &System, p: TaskId) -> bool {
        match &sys.tasks[p].allowed {
            Some(set) => (0..sys.ncpus()).any(|c| !set.contains(c)),
            None => false,
        }
    }

    /// The priority of what `cpu` runs (`pc_curthread->td_priority`).
    fn cpu_pri(&self, sys: &System, cpu: usize) -> i32 {
        sys.curr(cpu).map_or(PRI_MAX_IDLE, |c| self.ts[c].pri)
    }

    fn pickcpu(&self, sys: &System, p: TaskId) -> usize {
        let task = &sys.tasks[p];
        sched_pickcpu(self.ts[p].lastcpu, sys.ncpus(), |c| task.can_run_on(c), |c| self.runq_pcpu[c].len())
    }

    /// The queue part of sched_add(): at the tail of its list (SRQ_BORING); the
    /// global queue for unrestricted threads, `cpu`'s own queue otherwise.
    fn runq_add(&mut self, sys: &System, cpu: usize, p: TaskId) {
        let affinity = Self::has_affinity(sys, p);
        let ts = &mut self.ts[p];
        if affinity {
            ts.rqindex = self.runq_pcpu[cpu].add(p, ts.pri, false);
            ts.runq = Some(OnRunq::Pcpu(cpu));
        } else {
            ts.rqindex = self.runq.add(p, ts.pri, false);
            ts.runq = Some(OnRunq::Global);
            ts.counted_cpu = cpu;
            self.global_counted[cpu] += 1;
        }
    }

    /// The queue part of sched_rem() / sched_choose()'s removal.
    fn runq_remove(&mut self, p: TaskId) {
        let ts = &mut self.ts[p];
        match ts.runq.take() {
            Some(OnRunq::Global) => {
                self.runq.remove(p, ts.rqindex);
                self.global_counted[ts.counted_cpu] -= 1;
            }
            Some(OnRunq::Pcpu(c)) => self.runq_pcpu[c].remove(p, ts.rqindex),
            None => {}
        }
    }

    /// Mirrors the forward_wakeup() call of sched_add(): if `me` runs a thread and
    /// other CPUs run their idle threads, wake every one of them (usemask = 1 wakes
    /// the whole idle mask; the first to take sched_lock finds the thread). `first`
    /// is woken first so that it is the one that picks the thread. Returns whether
    /// there was an idle CPU (the wakeup was forwarded).
    fn forward_wakeup(&mut self, sys: &mut System, me: usize, first: Option<usize>) -> bool {
        if !self.forward_wakeup_enabled || sys.curr(me).is_none() {
            return false;
        }
        let mut forwarded = false;
        if let Some(f) = first {
            forwarded = true;
            if sys.cpu_idle(f) {
                sys.resched_cpu(f, me);
            }
        }
        for cpu in 0..sys.ncpus() {
            // Running its idle thread (state Idle, or already woken).
            if cpu == me || Some(cpu) == first || sys.curr(cpu).is_some() {
                continue;
            }
            forwarded = true;
            if sys.cpu_idle(cpu) {
                sys.resched_cpu(cpu, me);
            }
        }
        forwarded
    }

    /// Mirrors kick_other_cpu(): a per-CPU-queued thread was added to busy `cpu`'s
    /// queue from `me`: NEEDRESCHED and IPI_AST if it is better (IPI_PREEMPT is for
    /// interrupt threads only without FULL_PREEMPTION). An idle `cpu` is woken.
    fn kick_other_cpu(&self, sys: &mut System, pri: i32, cpu: usize, me: usize) {
        if sys.curr(cpu).is_none() || pri < self.cpu_pri(sys, cpu) {
            sys.resched_cpu(cpu, me);
        }
    }

    /// Mirrors sched_4bsd.c:sched_priority() for a priority set by
    /// resetpriority_thread(): a queued thread whose list changes moves to the tail
    /// of its new list.
    fn requeue_if_moved(&mut self, p: TaskId) {
        let ts = self.ts[p];
        let Some(on) = ts.runq else { return };
        if (ts.pri / RQ_PPQ) as usize == ts.rqindex {
            return;
        }
        let q = match on {
            OnRunq::Global => &mut self.runq,
            OnRunq::Pcpu(c) => &mut self.runq_pcpu[c],
        };
        q.remove(p, ts.rqindex);
        self.ts[p].rqindex = q.add(p, ts.pri, false);
    }

    /// Mirrors sched_4bsd.c:sched_clock(): one stat tick of running thread `p`.
    /// Returns true at the end of its slice (TDF_NEEDRESCHED | TDF_SLICEEND).
    fn sched_clock(&mut self, sys: &mut System, cpu: usize, p: TaskId) -> bool {
        // statclock() holds the thread lock, i.e. sched_lock.
        sys.charge_irq_off(cpu, Charge::Sched, "sched_clock", Self::lock_ns(sys));
        let (nice, weight, slice) = (sys.tasks[p].nice, self.weight, self.sched_slice);
        let (reprio, slice_end) = self.ts[p].stat_tick(nice, weight, slice);
        if reprio {
            // resetpriority_thread() of the running thread: only its priority changes.
            self.ts[p].resetpriority_thread();
        }
        slice_end
    }

    /// Mirrors sched_4bsd.c:schedcpu(): the once-a-second pass over every thread.
    fn schedcpu(&mut self, sys: &mut System, cpu: usize, charge: bool) {
        let weight = self.weight;
        for p in 0..sys.tasks.len().min(self.ts.len()) {
            if matches!(sys.tasks[p].state, TaskState::Zombie | TaskState::Dead) {
                continue;
            }
            if charge {
                sys.charge_irq_off(cpu, Charge::Sched, "schedcpu", Self::lock_ns(sys));
            }
            let ts = &mut self.ts[p];
            // Awake: on a run queue (TDF_DIDRUN cleared), running (kept), or asleep
            // now but ran during the last second (cleared).
            let awake = if ts.runq.is_some() {
                ts.did_run = false;
                true
            } else if ts.oncpu.is_some() {
                true
            } else {
                std::mem::take(&mut ts.did_run)
            };
            if ts.schedcpu_one(awake, self.ldavg, sys.tasks[p].nice, weight) && ts.resetpriority_thread().is_some() {
                self.requeue_if_moved(p);
            }
        }
    }

    /// The hardclock-side periodic work due by now: loadav() every 5 s, schedcpu()
    /// every second, in time order (loadav first at a shared instant).
    fn periodic(&mut self, sys: &mut System, cpu: usize) {
        let now = sys.now_ns;
        loop {
            let due = self.next_loadav_ns.min(self.next_schedcpu_ns);
            if due > now {
                return;
            }
            // Run on time by this tick, or missed while every CPU idled.
            let on_time = now - due < sys.tick_ns.max(1);
            if self.next_loadav_ns <= self.next_schedcpu_ns {
                let nrun = if on_time { self.nr_running_total() as u64 } else { 0 };
                self.ldavg = loadav_update(self.ldavg, nrun);
                self.next_loadav_ns += LOADAV_PERIOD_NS;
            } else {
                self.schedcpu(sys, cpu, on_time);
                self.next_schedcpu_ns += SCHEDCPU_PERIOD_NS;
            }
        }
    }

    /// Mirrors sched_4bsd.c:sched_choose(): the better of the global head and this
    /// CPU's queue head (the per-CPU one only if strictly better), removed.
    fn sched_choose(&mut self, cpu: usize) -> Option<TaskId> {
        let global = self.runq.choose();
        let local = self.runq_pcpu[cpu].choose();
        let n = match (global, local) {
            (Some(g), Some(l)) if self.ts[l].pri < self.ts[g].pri => l,
            (Some(g), _) => g,
            (None, l) => l?,
        };
        self.runq_remove(n);
        Some(n)
    }

    /// Current `averunnable.ldavg[0]` (FSCALE fixed point), for tests and reports.
    pub fn ldavg(&self) -> u64 {
        self.ldavg
    }
}

impl SchedClass for Bsd4 {
    fn name(&self) -> String {
        "4bsd".to_string()
    }

    fn init(&mut self, sys: &mut System) {
        let n = sys.ncpus();
        self.weight = inverse_estcpu_weight(n);
        self.runq_pcpu = vec![RunQ::default(); n];
        self.global_counted = vec![0; n];
        self.curthread = vec![None; n];
        self.last_stat = vec![Self::stat_ticks(sys.now_ns); n];
        self.next_schedcpu_ns = (sys.now_ns / SCHEDCPU_PERIOD_NS + 1) * SCHEDCPU_PERIOD_NS;
        self.next_loadav_ns = (sys.now_ns / LOADAV_PERIOD_NS + 1) * LOADAV_PERIOD_NS;
    }

    /// Mirrors sched_fork_thread(): the child inherits estcpu and priority; its
    /// first slice is a single stat tick.
    fn task_fork(&mut self, sys: &mut System, p: TaskId, parent: Option<TaskId>) {
        self.ensure(p);
        self.ts[p] = match parent {
            Some(pp) => {
                self.ensure(pp);
                let parent_ts = self.ts[pp];
                let leader = if sys.tasks[p].is_thread { parent_ts.leader } else { p };
                TdSched::new(parent_ts.estcpu, parent_ts.user_pri, 1, leader)
            }
            None => TdSched::new(0, user_priority(0, sys.tasks[p].nice, self.weight), self.sched_slice, p),
        };
    }

    /// Mirrors sched_wakeup() and the placement part of sched_add(). For a thread
    /// with a restricted CPU set: sched_pickcpu() (kick_other_cpu() follows through
    /// the engine's kick of an idle target or `check_preempt_curr`). For the global
    /// queue, as sched_add() does after queueing:
    /// * the waker's CPU runs a thread and other CPUs idle: forward_wakeup() wakes
    ///   all idle CPUs; the answer is the previous CPU if idle, else the lowest idle
    ///   one, woken first so that it is the one that runs `p`;
    /// * the waker's CPU is idle (a timer on an idle CPU): maybe_preempt() — its idle
    ///   thread switches to `p`;
    /// * no idle CPU: maybe_resched() sets NEEDRESCHED on the waker's thread if `p`
    ///   is better, and `p` waits in the global queue for the next CPU to switch.
    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, waker_cpu: usize, flags: WakeFlags) -> usize {
        self.ensure(p);
        if flags.reason == SelectReason::Wakeup {
            let (ldavg, nice, weight, slice) = (self.ldavg, sys.tasks[p].nice, self.weight, self.sched_slice);
            self.ts[p].wakeup(ldavg, nice, weight, slice);
        }
        if Self::has_affinity(sys, p) {
            return self.pickcpu(sys, p);
        }
        let me = waker_cpu;
        let ncpus = sys.ncpus();
        // forward_wakeup() wakes every idle CPU and the first to take sched_lock runs
        // the thread. That race is decided by idle-exit timing the model does not
        // have (no CPU is favoured: not the last one, not an SMT-idle core), so the
        // winner is drawn uniformly from the policy's stream.
        let idle: Vec<usize> = (0..ncpus).filter(|&c| c != me && sys.curr(c).is_none()).collect();
        let first = (!idle.is_empty()).then(|| idle[sys.rng.range(0, idle.len() as u64 - 1) as usize]);
        if let Some(target) = first {
            if self.forward_wakeup(sys, me, first) {
                return target;
            }
        }
        if sys.curr(me).is_none() {
            // maybe_preempt(): the current thread is the idle thread.
            return me;
        }
        // maybe_resched(): NEEDRESCHED on the waker, effective at its return to user.
        if self.ts[p].pri < self.cpu_pri(sys, me) {
            sys.resched_cpu(me, me);
        }
        // Queued globally; count it on its previous CPU unless that one idles (only
        // with forwarding disabled), where the engine would wake it.
        if sys.curr(prev_cpu).is_some() {
            prev_cpu
        } else {
            me
        }
    }

    /// The queueing part of sched_add(), under sched_lock on the calling CPU.
    fn enqueue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, _reason: EnqueueReason) {
        self.ensure(p);
        sys.charge_irq_off(sys.this_cpu(), Charge::Sched, "sched_add", Self::lock_ns(sys));
        self.runq_add(sys, cpu, p);
    }

    /// A running thread that blocks (sched_sleep(), then sched_switch()) or exits
    /// (sched_throw()); a queued thread leaving its queue (sched_rem()).
    fn dequeue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: DequeueReason) {
        self.ensure(p);
        if let Some(on) = self.ts[p].oncpu {
            self.curthread[on] = None;
            let ts = &mut self.ts[p];
            ts.oncpu = None;
            ts.lastcpu = Some(on);
            if reason == DequeueReason::Sleep {
                // sched_sleep(): the sleep priority, and a fresh sleep-time count.
                ts.slptime = 0;
                ts.pri = SLEEP_PRI;
            }
        } else if self.ts[p].runq.is_some() {
            sys.charge_irq_off(cpu, Charge::Sched, "sched_rem", Self::lock_ns(sys));
            self.runq_remove(p);
        }
    }

    /// For a per-CPU-queued thread on busy `cpu`: maybe_resched() if `cpu` is the
    /// caller's, kick_other_cpu()'s NEEDRESCHED + IPI_AST otherwise — both when `p`
    /// is better than what `cpu` runs. Global-queue threads never interrupt a busy
    /// CPU here: sched_add() decided in select_task_rq.
    fn check_preempt_curr(&mut self, sys: &mut System, cpu: usize, p: TaskId, _flags: WakeFlags) -> bool {
        match self.ts[p].runq {
            Some(OnRunq::Pcpu(_)) => self.ts[p].pri < self.cpu_pri(sys, cpu),
            _ => false,
        }
    }

    /// Mirrors sched_switch() → choosethread() → sched_choose(). A thread that stays
    /// runnable goes back through sched_add() at the tail of its list (SRQ_PREEMPTED,
    /// head insertion, only follows maybe_preempt() preemptions, which need an
    /// interrupt thread here). An idle CPU first checks sched_runnable() without the
    /// lock, as sched_idletd() does.
    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, prev: Option<TaskId>) -> Option<TaskId> {
        let from_idle = sys.curr(cpu).is_none();
        if from_idle && self.runq.is_empty() && self.runq_pcpu[cpu].is_empty() {
            return None;
        }
        sys.charge_irq_off(cpu, Charge::Sched, "sched_switch", Self::lock_ns(sys));
        if let Some(p) = prev {
            self.ensure(p);
            self.curthread[cpu] = None;
            let ts = &mut self.ts[p];
            ts.oncpu = None;
            ts.lastcpu = Some(cpu);
            // userret() has restored the user priority by now.
            ts.pri = ts.user_pri;
            if Self::has_affinity(sys, p) {
                let target = self.pickcpu(sys, p);
                if target != cpu {
                    sys.set_task_cpu(p, target);
                }
                self.runq_add(sys, target, p);
                if target != cpu {
                    self.kick_other_cpu(sys, self.ts[p].pri, target, cpu);
                }
            } else {
                self.runq_add(sys, cpu, p);
                // sched_add() runs forward_wakeup() for this thread too: idle CPUs are
                // woken even though this CPU is about to choose.
                let first = (0..sys.ncpus()).find(|&c| c != cpu && sys.curr(c).is_none());
                self.forward_wakeup(sys, cpu, first);
            }
        }
        let n = self.sched_choose(cpu)?;
        if sys.tasks[n].cpu != cpu {
            sys.set_task_cpu(n, cpu);
        }
        let ts = &mut self.ts[n];
        ts.did_run = true;
        ts.oncpu = Some(cpu);
        // sched_userret() on its way back to user mode.
        ts.pri = ts.user_pri;
        self.curthread[cpu] = Some(n);
        if from_idle {
            // Stat ticks while idle went to the idle thread.
            self.last_stat[cpu] = Self::stat_ticks(sys.now_ns);
        }
        Some(n)
    }

    /// hardclock()'s share (loadav, schedcpu) and statclock() → sched_clock() for
    /// each stat tick since the last one this CPU saw. True at a slice end, or while
    /// a NEEDRESCHED is pending (the AST on return from the clock interrupt).
    fn task_tick(&mut self, sys: &mut System, cpu: usize, curr: TaskId) -> bool {
        self.periodic(sys, cpu);
        let stat = Self::stat_ticks(sys.now_ns);
        let elapsed = stat.saturating_sub(self.last_stat[cpu]);
        self.last_stat[cpu] = stat;
        let mut resched = false;
        for _ in 0..elapsed {
            resched |= self.sched_clock(sys, cpu, curr);
        }
        resched || sys.need_resched(cpu)
    }

    /// sched_relinquish(): 4BSD changes nothing; the switch re-queues at the tail.
    fn yield_task(&mut self, _sys: &mut System, _cpu: usize, _curr: TaskId) {}

    /// sched_exit() (a process: its parent's first thread) or sched_exit_thread() (a
    /// thread: its process's first thread) is charged the exiting thread's estcpu.
    fn task_dead(&mut self, sys: &mut System, p: TaskId) {
        self.ensure(p);
        let charged = if sys.tasks[p].is_thread {
            Some(self.ts[p].leader)
        } else {
            sys.tasks[p].parent.map(|pp| if pp < self.ts.len() { self.ts[pp].leader } else { pp })
        };
        let Some(t) = charged.filter(|&t| t != p && t < self.ts.len()) else { return };
        if matches!(sys.tasks[t].state, TaskState::Zombie | TaskState::Dead) {
            return;
        }
        let lim = estcpu_limit(self.weight);
        self.ts[t].estcpu = (self.ts[t].estcpu + self.ts[p].estcpu).min(lim);
    }

    /// sched_nice(): resetpriority() and resetpriority_thread().
    fn reweight_task(&mut self, sys: &mut System, p: TaskId, _old_weight: u32) {
        self.ensure(p);
        let (nice, weight) = (sys.tasks[p].nice, self.weight);
        self.ts[p].resetpriority(nice, weight);
        if self.ts[p].resetpriority_thread().is_some() {
            self.requeue_if_moved(p);
        }
    }

    fn nr_running(&self, cpu: usize) -> usize {
        self.curthread[cpu].is_some() as usize + self.runq_pcpu[cpu].len() + self.global_counted[cpu]
    }

    fn nr_running_total(&self) -> usize {
        self.runq.len()
            + self.runq_pcpu.iter().map(RunQ::len).sum::<usize>()
            + self.curthread.iter().filter(|c| c.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_of_a_4_cpu_kernel() {
        // INVERSE_ESTCPU_WEIGHT = 8 * 4; ESTCPULIM = 32 * (40 - 4) + 32 - 1.
        assert_eq!(inverse_estcpu_weight(4), 32);
        assert_eq!(estcpu_limit(32), 1183);
        assert_eq!(inverse_estcpu_weight(1), 8);
        assert_eq!(estcpu_limit(8), 295);
        assert_eq!(DEFAULT_SCHED_SLICE, 12);
    }

    #[test]
    fn priority_formula_by_hand() {
        // 120 + estcpu / 32 + (nice + 20) on 4 CPUs.
        assert_eq!(user_priority(0, 0, 32), 140);
        assert_eq!(user_priority(31, 0, 32), 140);
        assert_eq!(user_priority(32, 0, 32), 141);
        assert_eq!(user_priority(100, 0, 32), 143);
        assert_eq!(user_priority(0, -20, 32), 120);
        assert_eq!(user_priority(0, 19, 32), 159);
        // At the estcpu limit: 120 + 1183 / 32 + 39 = 120 + 36 + 39.
        assert_eq!(user_priority(1183, 19, 32), 195);
        // One CPU: 120 + 100 / 8 + 20 = 152.
        assert_eq!(user_priority(100, 0, 8), 152);
    }

    #[test]
    fn decay_factor_at_load_1_and_4() {
        // Load 1: 2L / (2L + 1) = 2/3; 300 → 200, 100 → 66 (66.67 truncated).
        let load1 = FSCALE;
        assert_eq!(decay_cpu(loadfactor(load1), 300), 200);
        assert_eq!(decay_cpu(loadfactor(load1), 100), 66);
        // Load 4: 8/9; 300 → 266 (266.67), 900 → 800.
        let load4 = 4 * FSCALE;
        assert_eq!(decay_cpu(loadfactor(load4), 300), 266);
        assert_eq!(decay_cpu(loadfactor(load4), 900), 800);
        // Load 0 forgets everything.
        assert_eq!(decay_cpu(0, 300), 0);
    }

    #[test]
    fn loadav_by_hand() {
        // From 0 with 4 runnable: 4 * 2048 * (2048 - 1884) >> 11 = 4 * 164 = 656 (0.32).
        assert_eq!(loadav_update(0, 4), 656);
        // Again: (1884 * 656 + 4 * 2048 * 164) >> 11 = 2579392 >> 11 = 1259.
        assert_eq!(loadav_update(656, 4), 1259);
        // A steady load converges on it (within the truncation).
        let mut l = 0;
        for _ in 0..200 {
            l = loadav_update(l, 2);
        }
        assert!((2 * FSCALE - 13..=2 * FSCALE).contains(&l), "{l}");
    }

    #[test]
    fn updatepri_by_hand() {
        // slptime 5 at load 1: 3 decays by 2/3: 300 → 200 → 133 → 88.
        assert_eq!(updatepri(300, 5, FSCALE), 88);
        // slptime 2: no decay at all.
        assert_eq!(updatepri(300, 2, FSCALE), 300);
        // At load 0 the reset shortcut fires for any sleep the catch-up sees.
        assert_eq!(updatepri(300, 2, 0), 0);
    }

    #[test]
    fn quantum_rounds_to_stat_ticks() {
        // period = 1000000 / 127 = 7874 µs; (100000 + 3937) / 7874 = 13.
        assert_eq!(quantum_us_to_slice(100_000), 13);
        assert_eq!(quantum_us_to_slice(94_488), 12);
        assert_eq!(quantum_us_to_slice(1), 1);
    }

    #[test]
    fn sysctls_parse_and_reject() {
        let s = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(Bsd4::new(&[]).unwrap().sched_slice(), 12);
        assert_eq!(Bsd4::new(&s("kern.sched.quantum", "100000")).unwrap().sched_slice(), 13);
        assert_eq!(Bsd4::new(&s("kern.sched.slice", "5")).unwrap().sched_slice(), 5);
        let e = Bsd4::new(&s("kern.sched.slice", "0")).err().unwrap();
        assert_eq!(e.field, "sysctl kern.sched.slice");
        assert!(Bsd4::new(&s("kern.sched.quantum", "-3")).is_err());
        assert!(Bsd4::new(&s("kern.sched.ipiwakeup.enabled", "2")).is_err());
        let e = Bsd4::new(&s("kern.sched.interact", "30")).err().unwrap();
        assert_eq!(e.field, "sysctl");
        assert!(e.expected.contains("kern.sched.quantum"), "{}", e.expected);
    }

    #[test]
    fn runq_is_fifo_per_list_and_bitmap_ordered() {
        let mut q = RunQ::default();
        assert_eq!(q.choose(), None);
        q.add(1, 150, false); // list 37
        q.add(2, 149, false); // list 37 too: 4 priorities share a list, FIFO
        q.add(3, 104, false); // list 26
        assert_eq!(q.choose(), Some(3));
        q.remove(3, 26);
        assert_eq!(q.choose(), Some(1), "FIFO within a list, not sorted by priority");
        q.add(4, 151, true); // SRQ_PREEMPTED: the head
        assert_eq!(q.choose(), Some(4));
        q.remove(4, 37);
        q.remove(1, 37);
        assert_eq!(q.choose(), Some(2));
        q.remove(2, 37);
        assert!(q.is_empty());
        assert_eq!(q.choose(), None);
    }

    #[test]
    fn pickcpu_prefers_last_cpu_then_shortest_queue() {
        let lens = [1usize, 0, 0, 2];
        let all = |_c: usize| true;
        // Last CPU 2 with an empty queue stays.
        assert_eq!(sched_pickcpu(Some(2), 4, all, |c| lens[c]), 2);
        // Last CPU 0 has a longer queue than CPU 1.
        assert_eq!(sched_pickcpu(Some(0), 4, all, |c| lens[c]), 1);
        // Last CPU not allowed: the shortest allowed queue, first in CPU order.
        assert_eq!(sched_pickcpu(Some(1), 4, |c| c == 0 || c == 3, |c| lens[c]), 0);
        assert_eq!(sched_pickcpu(None, 4, |c| c >= 2, |c| lens[c]), 2);
    }

    #[test]
    fn hog_priority_worsens_while_sleeper_stays_good() {
        // Four CPUs (W = 32), load average 1. A hog runs every stat tick; a sleeper
        // runs 2 stat ticks a second. schedcpu() once a second.
        let (w, nice, slice) = (32, 0, DEFAULT_SCHED_SLICE);
        let mut hog = TdSched::new(0, user_priority(0, nice, w), slice, 0);
        let mut sleeper = hog;
        let mut hog_pri = Vec::new();
        for _second in 0..10 {
            for tick in 0..STATHZ {
                let _ = hog.stat_tick(nice, w, slice);
                hog.resetpriority_thread();
                if tick < 2 {
                    let _ = sleeper.stat_tick(nice, w, slice);
                    sleeper.resetpriority_thread();
                }
            }
            assert!(hog.schedcpu_one(true, FSCALE, nice, w));
            hog.resetpriority_thread();
            // The sleeper ran this second (TDF_DIDRUN), so schedcpu counts it awake.
            assert!(sleeper.schedcpu_one(true, FSCALE, nice, w));
            sleeper.resetpriority_thread();
            hog_pri.push(hog.pri);
        }
        // The hog: e → (e + 127) * 2/3, truncated: 84, 140, 178, 203, 220, 231, 238,
        // 243, 246, 248 (converging on 254); priority 140 + 248 / 32 = 147.
        assert_eq!(hog.estcpu, 248);
        assert_eq!(hog.pri, 147);
        assert!(hog_pri.windows(2).all(|w| w[0] <= w[1]), "{hog_pri:?}");
        assert!(hog_pri[0] > 140);
        // The sleeper: e → (e + 2) * 2/3 stays at 2 or below: priority 140.
        assert!(sleeper.estcpu <= 4, "{}", sleeper.estcpu);
        assert_eq!(sleeper.pri, 140);
        // Decay while asleep: 3 schedcpu passes skipped, caught up on wakeup.
        let mut s = hog;
        assert!(s.schedcpu_one(false, FSCALE, nice, w)); // slptime 1: still decayed
        let after_first = s.estcpu;
        for _ in 0..3 {
            assert!(!s.schedcpu_one(false, FSCALE, nice, w)); // slptime 2, 3, 4: skipped
        }
        assert_eq!(s.estcpu, after_first);
        s.wakeup(FSCALE, nice, w, slice);
        // updatepri(slptime 4): 2 decays of 2/3.
        assert_eq!(s.estcpu, decay_cpu(2 * FSCALE, decay_cpu(2 * FSCALE, after_first)));
        assert!(s.user_pri < hog.user_pri);
        assert_eq!(s.slice, slice);
    }

    #[test]
    fn sleep_priority_is_kept_until_the_user_priority_returns() {
        let mut t = TdSched::new(500, user_priority(500, 0, 32), 12, 0);
        t.pri = SLEEP_PRI;
        // resetpriority_thread() leaves a kernel priority alone.
        t.estcpu = 0;
        t.resetpriority(0, 32);
        assert_eq!(t.resetpriority_thread(), None);
        assert_eq!(t.pri, SLEEP_PRI);
        assert_eq!(t.user_pri, 140);
    }
}
