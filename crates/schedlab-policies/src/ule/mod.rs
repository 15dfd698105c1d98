//! FreeBSD's ULE scheduler (sys/kern/sched_ule.c) just before and just after the
//! idle-steal rework reviewed as D12130 (committed to head in February 2018 and
//! merged to stable/11 for 11.2):
//!
//! - `ule@pre`: FreeBSD 11.1 / head of 2017. `tdq_idled()` searches the whole
//!   `cpu_group` tree inside `spinlock_enter()`, with a steal threshold of 1 in SMT
//!   groups; the balancer's minimum donor load is 1.
//! - `ule@post`: FreeBSD 11.2 / 12.0. `tdq_idled()` searches with interrupts enabled,
//!   one `sched_highest()` per step, and restarts from the leaf when the victim it
//!   found has gone stale; `tdq_trysteal()` steals at switch-out within
//!   `kern.sched.trysteal_limit` levels before the CPU switches to its idle thread;
//!   `kern.sched.always_steal`; the balancer's minimum donor load is 2 and it
//!   notifies the receiver with `tdq_notify()`.
//!
//! The engine calls the Linux-shaped `SchedClass` hooks; they map onto ULE as
//! `select_task_rq` = sched_wakeup()/sched_fork() + sched_pickcpu(), `enqueue_task` =
//! tdq_add(), `check_preempt_curr` = tdq_notify() (remote) or sched_setpreempt()
//! (local), `pick_next_task` = sched_switch() + sched_choose() and the idle thread's
//! first pass, `task_tick` = sched_clock() on the stat ticks, `idle_poll` = the idle
//! thread's later steps (post).

mod prio;
mod runq;
mod steal;
mod topo;
mod tunables;

use schedlab_core::cpuset::CpuSet;
use schedlab_core::error::SpecError;
use schedlab_core::rng::SimRng;
use schedlab_core::sched::{Charge, DequeueReason, EnqueueReason, SchedClass, SelectReason, System, WakeFlags};
use schedlab_core::task::TaskId;

pub use prio::{Clocks, History};
use prio::{PRI_MAX_IDLE, PRI_MAX_TIMESHARE, PRI_MIN_IDLE};
use runq::{OnQueue, TdqQueues};
use topo::{cpu_search, CpuTopo, Search, TdqView, CG_SHARE_L2};
pub use tunables::{Tunables, STATHZ};

/// Which sched_ule.c.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Before D12130 (FreeBSD 11.1).
    Pre,
    /// After D12130 (FreeBSD 11.2 / 12.0).
    Post,
}

impl Variant {
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "pre" | "pre-D12130" | "11.1" => Some(Variant::Pre),
            "post" | "post-D12130" | "11.2" | "12.0" => Some(Variant::Post),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Variant::Pre => "pre",
            Variant::Post => "post",
        }
    }
}

/// Per-thread state: `struct td_sched` plus the `struct thread` fields ULE uses.
#[derive(Clone, Debug, Default)]
struct TdSched {
    h: History,
    /// `td_priority`: what the run queues use (boosted while in the kernel).
    pri: i32,
    /// `td_user_pri`: the latest sched_priority() result.
    user_pri: i32,
    /// `ts_slice`: stat ticks used of the current slice.
    slice: u32,
    /// `ts_cpu`.
    cpu: usize,
    /// `ts_rltick`: `ticks` when it last switched out.
    rltick: i64,
    /// `td_slptick`: `ticks` when it went to sleep, 0 when awake.
    slptick: i64,
    on: Option<OnQueue>,
    /// TDF_SLICEEND: the switch is a slice end, not a preemption.
    slice_end: bool,
    /// Switched out by sched_yield() (SW_VOL, not SRQ_PREEMPTED).
    yielding: bool,
    /// Only TDF_NEEDRESCHED was set by a local wakeup (no owepreempt): the
    /// switch at the return to user mode is SW_INVOL, not a preemption.
    needresched: bool,
}

/// One step of a post-D12130 `tdq_idled()` in progress on an idle CPU.
#[derive(Clone, Debug)]
struct IdledSearch {
    mask: CpuSet,
    /// The group the next sched_highest() looks at.
    cg: usize,
    /// A victim found by the last step, to lock and steal from in this one.
    victim: Option<usize>,
}

/// `struct tdq`.
#[derive(Clone, Debug)]
struct Tdq {
    load: u32,
    sysload: u32,
    transferable: u32,
    lowpri: i32,
    switchcnt: i64,
    oldswitchcnt: i64,
    q: TdqQueues,
    /// The running thread, None for the idle thread.
    curr: Option<TaskId>,
    /// A thread of this CPU blocked since the last pick (sched_switch() counted
    /// it; an exit goes through sched_throw(), which does not).
    switched_out: bool,
    /// A thread left this CPU (blocked or exited) since the last pick: reaching a
    /// thread through the idle thread then takes two switches.
    left: bool,
    /// The idle thread runs here (the last pick found nothing).
    idle: bool,
    /// The stat tick index last processed by sched_clock().
    last_stat: i64,
    /// `oldsw` of sched_idletd().
    idle_oldsw: i64,
    /// The per-CPU LCG of the tie-breaks (`randomval`).
    randomval: u32,
    idled: Option<IdledSearch>,
}

pub struct Ule {
    variant: Variant,
    tun: Tunables,
    sysctls: Vec<(String, String)>,
    clk: Clocks,
    tick_ns: u64,
    topo: Option<CpuTopo>,
    tdq: Vec<Tdq>,
    ts: Vec<TdSched>,
    /// `balance_ticks`: stat ticks to the next balancer run.
    balance_ticks: i64,
}

impl Ule {
    /// Statclock ticks that fall while the idle thread runs are its own
    /// (`cpu_activeclock()` → `handleevents()` catches them up on wakeup): the
    /// boot CPU's balancer countdown, the switch-count roll and the calendar
    /// advance happen, but no thread is charged, so a thread switched in after
    /// idling starts counting at the next stat boundary.
    fn note_idle(&mut self, sys: &System, cpu: usize, idle: bool) {
        if self.tdq[cpu].idle && !idle {
            let stat = (sys.now_ns as u128 * STATHZ as u128 / 1_000_000_000) as i64;
            let missed = stat - self.tdq[cpu].last_stat;
            if missed > 0 {
                if cpu == 0 && self.tun.balance {
                    // sched_balance() itself waits for the next tick that finds
                    // the countdown spent.
                    self.balance_ticks -= missed;
                }
                let t = &mut self.tdq[cpu];
                t.oldswitchcnt = if missed > 1 { 0 } else { t.switchcnt };
                t.switchcnt = 0;
                for _ in 0..missed.min(runq::RQ_NQS as i64) {
                    t.q.advance_calendar();
                }
            }
            self.tdq[cpu].last_stat = stat;
        }
        self.tdq[cpu].idle = idle;
    }

    /// `version` is `pre` or `post` (also `pre-D12130`, `post-D12130`, `11.1`, `11.2`).
    pub fn new(version: &str, features: Option<&str>, sysctls: &[(String, String)]) -> Result<Ule, SpecError> {
        let variant = Variant::parse(version)
            .ok_or_else(|| SpecError::new("policy version", version, "ule@pre or ule@post (before or after D12130)"))?;
        if let Some(f) = features {
            return Err(SpecError::new(
                "policy feature",
                f,
                "no +FEATURE switches for ule; its tunables are --sysctl kern.sched.*",
            ));
        }
        // Checked now for a clear error; applied in init() once hz is known.
        Tunables::defaults(1000).apply(variant, sysctls)?;
        Ok(Ule {
            variant,
            tun: Tunables::defaults(1000),
            sysctls: sysctls.to_vec(),
            clk: Clocks::new(1000, STATHZ),
            tick_ns: 1_000_000,
            topo: None,
            tdq: Vec::new(),
            ts: Vec::new(),
            balance_ticks: 0,
        })
    }

    fn topo(&self) -> &CpuTopo {
        self.topo.as_ref().expect("ule initialised")
    }

    /// `ticks`: hz ticks since boot.
    fn ticks(&self, sys: &System) -> i64 {
        (sys.now_ns / self.tick_ns) as i64
    }

    /// sched_random(): the per-CPU LCG, upper 16 bits.
    fn random(&mut self, cpu: usize) -> u32 {
        let r = &mut self.tdq[cpu].randomval;
        *r = r.wrapping_mul(69069).wrapping_add(5);
        *r >> 16
    }

    fn ts_mut(&mut self, p: TaskId) -> &mut TdSched {
        if p >= self.ts.len() {
            self.ts.resize(p + 1, TdSched::default());
        }
        &mut self.ts[p]
    }

    /// sched_priority(): refresh the user priority of `p`.
    fn sched_priority(&mut self, sys: &System, p: TaskId) {
        let nice = sys.tasks[p].nice;
        let (interact, clk) = (self.tun.interact, self.clk);
        let ts = &mut self.ts[p];
        ts.user_pri = prio::user_priority(&ts.h, nice, interact, &clk);
    }

    /// cpu_search() run by `cpu`, with its cost: each CPU looked at costs a read of
    /// its runqueue line, dearer from another LLC. The tie-break draw is POST
    /// sched_random() % 32, PRE the top 6 bits of the same LCG.
    fn search(&mut self, sys: &System, cpu: usize, g: usize, mask: &CpuSet, s: Search) -> (Option<usize>, u64) {
        let topo = self.topo.take().expect("ule initialised");
        let variant = self.variant;
        let tdq = std::mem::take(&mut self.tdq);
        let mut randomval = tdq[cpu].randomval;
        let view = |c: usize| {
            let t = &tdq[c];
            TdqView { load: t.load, lowpri: t.lowpri, transferable: t.transferable }
        };
        let mut rnd = || {
            randomval = randomval.wrapping_mul(69069).wrapping_add(5);
            match variant {
                Variant::Post => ((randomval >> 16) % 32) as i64,
                Variant::Pre => (randomval >> 26) as i64,
            }
        };
        let mut ns = 0;
        let (near, far) = (sys.cost.sched_ops.per_cpu_scanned_ns, sys.cost.sched_ops.scanned_far_ns());
        let mut examine = |c: usize| ns += if same_llc(sys, cpu, c) { near } else { far };
        let (best, _) = cpu_search(&topo, g, mask, &view, s, &mut rnd, &mut examine);
        self.tdq = tdq;
        self.tdq[cpu].randomval = randomval;
        self.topo = Some(topo);
        (best.map(|b| b.0), ns)
    }

    /// `cpu` takes the lock of `q`'s queue.
    fn lock_ns(sys: &System, cpu: usize, q: usize) -> u64 {
        let c = &sys.cost.sched_ops;
        if same_llc(sys, cpu, q) {
            c.per_rq_lock_ns
        } else {
            c.lock_far_ns()
        }
    }

    /// tdq_lock_pair() taken by `cpu` on its own queue and `other`'s.
    fn lock_pair_ns(sys: &System, cpu: usize, other: usize) -> u64 {
        Self::lock_ns(sys, cpu, cpu) + Self::lock_ns(sys, cpu, other)
    }

    /// sched_lowest().
    #[allow(clippy::too_many_arguments)]
    fn sched_lowest(
        &mut self,
        sys: &System,
        cpu: usize,
        g: usize,
        mask: &CpuSet,
        pri: i32,
        limit: u32,
        prefer: usize,
    ) -> (Option<usize>, u64) {
        self.search(sys, cpu, g, mask, Search::Lowest { pri, limit, prefer: Some(prefer) })
    }

    /// sched_highest().
    fn sched_highest(&mut self, sys: &System, cpu: usize, g: usize, mask: &CpuSet, minload: u32) -> (Option<usize>, u64) {
        self.search(sys, cpu, g, mask, Search::Highest { limit: minload })
    }

    /// SCHED_AFFINITY(ts, level): switched out less than `level` x affinity ticks ago.
    fn affinity(&self, ticks: i64, p: TaskId, level: i64) -> bool {
        self.ts[p].rltick > ticks - level * self.tun.affinity
    }

    /// Mirrors sched_ule.c:sched_pickcpu() (identical before and after D12130).
    /// Returns the CPU and the cost of its searches.
    fn sched_pickcpu(&mut self, sys: &System, p: TaskId, self_cpu: usize) -> (usize, u64) {
        let ticks = self.ticks(sys);
        let task = &sys.tasks[p];
        let ts_cpu = self.ts[p].cpu;
        let pri = self.ts[p].pri;
        let near = sys.cost.sched_ops.per_cpu_scanned_ns;
        let mut ns = 0;
        // The last CPU if it is idle and its L2 is still warm (all SMT siblings idle).
        let leaf = self.topo().leaf[ts_cpu];
        if task.can_run_on(ts_cpu) && self.tdq[ts_cpu].lowpri >= PRI_MIN_IDLE && self.affinity(ticks, p, CG_SHARE_L2) {
            let g = &self.topo().groups[leaf];
            ns += near * g.mask.count() as u64;
            if !g.smt || g.mask.iter().all(|c| self.tdq[c].lowpri >= PRI_MIN_IDLE) {
                return (ts_cpu, ns);
            }
        }
        // The outermost non-SMT group whose cache is still warm.
        let mut ccg = None;
        let mut cg = Some(leaf);
        while let Some(g) = cg {
            let grp = &self.topo().groups[g];
            if !grp.smt && self.affinity(ticks, p, grp.level) {
                ccg = Some(g);
            }
            cg = grp.parent;
        }
        let mask = task.allowed.clone().unwrap_or_else(|| CpuSet::full(sys.ncpus()));
        let root = self.topo().root();
        let mut cpu = None;
        if let Some(g) = ccg.filter(|&g| self.topo().groups[g].mask != self.topo().groups[root].mask) {
            // An idle CPU in the warm group.
            let (c, n) = self.sched_lowest(sys, self_cpu, g, &mask, pri.max(PRI_MAX_TIMESHARE), u32::MAX, ts_cpu);
            cpu = c;
            ns += n;
        }
        if cpu.is_none() {
            // A CPU where it would be the best thread.
            let (c, n) = self.sched_lowest(sys, self_cpu, root, &mask, pri, u32::MAX, ts_cpu);
            cpu = c;
            ns += n;
        }
        if cpu.is_none() {
            // The least loaded CPU at all.
            let (c, n) = self.sched_lowest(sys, self_cpu, root, &mask, -1, u32::MAX, ts_cpu);
            cpu = c;
            ns += n;
        }
        let cpu = cpu.unwrap_or(ts_cpu);
        // Prefer this CPU when it is about as loaded and the thread would run first.
        let me = &self.tdq[self_cpu];
        if task.can_run_on(self_cpu)
            && me.lowpri > pri
            && self.tdq[cpu].lowpri < PRI_MIN_IDLE
            && me.load <= self.tdq[cpu].load + 1
        {
            return (self_cpu, ns);
        }
        (cpu, ns)
    }

    /// tdq_runq_add() with the transferable count.
    fn runq_add(&mut self, cpu: usize, p: TaskId, preempted: bool) {
        let pri = self.ts[p].pri;
        let on = self.tdq[cpu].q.add(p, pri, preempted, false);
        self.ts[p].on = Some(on);
        self.tdq[cpu].transferable += 1;
    }

    /// tdq_runq_rem().
    fn runq_rem(&mut self, cpu: usize, p: TaskId) {
        if let Some(on) = self.ts[p].on.take() {
            self.tdq[cpu].q.remove(p, on);
            self.tdq[cpu].transferable -= 1;
        }
    }

    /// tdq_add(): queue and count `p` on `cpu`.
    fn tdq_add(&mut self, cpu: usize, p: TaskId, preempted: bool) {
        let pri = self.ts[p].pri;
        if pri < self.tdq[cpu].lowpri {
            self.tdq[cpu].lowpri = pri;
        }
        self.runq_add(cpu, p, preempted);
        self.tdq[cpu].load += 1;
        self.tdq[cpu].sysload += 1;
    }

    /// tdq_setlowpri(): the better of the running thread and the next to run.
    fn tdq_setlowpri(&mut self, cpu: usize) {
        let t = &self.tdq[cpu];
        let cur = t.curr.map_or(PRI_MAX_IDLE, |c| self.ts[c].pri);
        let next = t.q.choose().map_or(PRI_MAX_IDLE, |n| self.ts[n].pri);
        self.tdq[cpu].lowpri = cur.min(next);
    }

    /// sched_rem() of a queued thread, then the move of tdq_move(): `p` leaves
    /// `from`'s queue for `to`'s (SRQ_YIELDING: no preemption check here).
    fn move_thread(&mut self, sys: &mut System, p: TaskId, from: usize, to: usize) {
        self.runq_rem(from, p);
        self.tdq[from].load -= 1;
        self.tdq[from].sysload -= 1;
        self.tdq_setlowpri(from);
        self.ts[p].cpu = to;
        sys.set_task_cpu(p, to);
        self.tdq_add(to, p, false);
    }

    /// Mirrors sched_ule.c:tdq_steal() + runq_steal()/runq_steal_from(): the first
    /// migratable realtime-queue thread that may run on `cpu`; else, from the
    /// calendar at the removal point, the second eligible thread (the first is
    /// about to run there) or the first if it is the only one; else the idle queue.
    fn tdq_steal(&self, sys: &System, from: usize, cpu: usize) -> (Option<TaskId>, u64) {
        let q = &self.tdq[from].q;
        let mut examined = 0u64;
        let can = |p: TaskId| sys.tasks[p].can_run_on(cpu);
        for i in q.realtime.lists_from(0) {
            for &p in q.realtime.list(i) {
                examined += 1;
                if can(p) {
                    return (Some(p), examined);
                }
            }
        }
        let mut first = None;
        for i in q.timeshare.lists_from(q.ridx) {
            for &p in q.timeshare.list(i) {
                examined += 1;
                if first.is_some() && can(p) {
                    return (Some(p), examined);
                }
                first.get_or_insert(p);
            }
        }
        if let Some(p) = first.filter(|&p| can(p)) {
            return (Some(p), examined);
        }
        for i in q.idle.lists_from(0) {
            for &p in q.idle.list(i) {
                examined += 1;
                if can(p) {
                    return (Some(p), examined);
                }
            }
        }
        (None, examined)
    }

    /// tdq_move(): one thread from `from` to `to`. Returns it and the cost of
    /// looking at the threads on the way.
    fn tdq_move(&mut self, sys: &mut System, from: usize, to: usize) -> (Option<TaskId>, u64) {
        let (p, examined) = self.tdq_steal(sys, from, to);
        if let Some(p) = p {
            self.move_thread(sys, p, from, to);
        }
        (p, examined * sys.cost.sched_ops.per_task_examined_ns)
    }

    /// Mirrors sched_ule.c:tdq_notify() for a thread just queued on `cpu` from elsewhere.
    fn tdq_notify(&mut self, sys: &mut System, cpu: usize, p: TaskId) {
        let cpri = self.tdq[cpu].curr.map_or(PRI_MAX_IDLE, |c| self.ts[c].pri);
        if prio::should_preempt(self.ts[p].pri, cpri, true, self.tun.preempt_thresh) {
            sys.resched_cpu(cpu, sys.this_cpu());
        }
    }

    /// sched_clock() on a stat tick of busy `cpu` running `p`. True = slice ended.
    fn sched_clock(&mut self, sys: &mut System, cpu: usize, p: TaskId, elapsed_stat: i64) -> bool {
        // The balancer runs from the boot CPU's stat clock (balance_tdq). Stat ticks
        // missed while that CPU idled count too, as statclock catches up.
        if cpu == 0 && self.tun.balance {
            self.balance_ticks -= elapsed_stat;
            if self.balance_ticks <= 0 {
                self.sched_balance(sys, cpu);
            }
        }
        let t = &mut self.tdq[cpu];
        t.oldswitchcnt = t.switchcnt;
        t.switchcnt = t.load as i64;
        t.q.advance_calendar();
        let ticks = self.ticks(sys);
        let clk = self.clk;
        let ts = &mut self.ts[p];
        prio::pctcpu_update(&mut ts.h, ticks, true, &clk);
        ts.h.runtime += clk.tickincr;
        prio::interact_update(&mut ts.h, &clk);
        self.sched_priority(sys, p);
        let slice = prio::tdq_slice(self.tdq[cpu].sysload, self.tun.slice, self.tun.slice_min);
        let ts = &mut self.ts[p];
        ts.slice += 1;
        if ts.slice >= slice {
            ts.slice = 0;
            ts.slice_end = true;
            return true;
        }
        false
    }
}

impl SchedClass for Ule {
    fn name(&self) -> String {
        format!("ule@{}", self.variant.name())
    }

    fn settings(&self) -> Vec<(String, String)> {
        self.tun.in_force(self.variant).into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn init(&mut self, sys: &mut System) {
        self.tick_ns = sys.tick_ns;
        let hz = (1_000_000_000 / sys.tick_ns) as i64;
        self.clk = Clocks::new(hz, STATHZ);
        let mut tun = Tunables::defaults(hz);
        tun.apply(self.variant, &self.sysctls).expect("sysctls checked in new()");
        self.tun = tun;
        self.topo = Some(CpuTopo::build(&sys.topo));
        let n = sys.ncpus();
        let mut seeds = SimRng::derive(sys.rng.next_u64(), schedlab_core::rng::Stream::Policy, 1);
        self.tdq = (0..n)
            .map(|_| Tdq {
                load: 0,
                sysload: 0,
                transferable: 0,
                lowpri: PRI_MAX_IDLE,
                switchcnt: 0,
                oldswitchcnt: 0,
                q: TdqQueues::default(),
                curr: None,
                switched_out: false,
                left: false,
                idle: true,
                last_stat: 0,
                idle_oldsw: -1,
                randomval: seeds.next_u64() as u32,
                idled: None,
            })
            .collect();
        // sched_initticks(): the first balancer run.
        self.balance_ticks = self.tun.balance_interval;
    }

    /// sched_fork() / sched_fork_thread(): the child inherits the parent's history
    /// (at most 0.5 s of it), CPU and %CPU window, and starts near its slice end
    /// to learn its interactivity fast; the parent is charged one tick.
    fn task_fork(&mut self, sys: &mut System, p: TaskId, parent: Option<TaskId>) {
        let ticks = self.ticks(sys);
        self.ts_mut(p);
        let clk = self.clk;
        match parent {
            Some(par) => {
                self.ts_mut(par);
                let pts = self.ts[par].clone();
                let pcpu = pts.cpu;
                let slice = prio::tdq_slice(self.tdq[pcpu].sysload, self.tun.slice, self.tun.slice_min);
                let ts = &mut self.ts[p];
                *ts = TdSched {
                    h: pts.h,
                    pri: pts.user_pri,
                    cpu: pcpu,
                    slice: slice.saturating_sub(self.tun.slice_min),
                    ..TdSched::default()
                };
                prio::interact_fork(&mut ts.h, &clk);
                self.sched_priority(sys, p);
                let pt = &mut self.ts[par];
                pt.h.runtime += clk.tickincr;
                prio::interact_update(&mut pt.h, &clk);
                self.sched_priority(sys, par);
            }
            None => {
                let cpu = sys.tasks[p].cpu;
                self.ts[p] =
                    TdSched { cpu, h: History { ltick: ticks, ftick: ticks, ..History::default() }, ..TdSched::default() };
                self.sched_priority(sys, p);
                self.ts[p].pri = self.ts[p].user_pri;
            }
        }
    }

    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, _prev_cpu: usize, waker_cpu: usize, flags: WakeFlags) -> usize {
        self.ts_mut(p);
        if flags.reason == SelectReason::Wakeup {
            // sched_wakeup(): credit the sleep, restart the slice.
            let ticks = self.ticks(sys);
            let clk = self.clk;
            let ts = &mut self.ts[p];
            let slptick = std::mem::take(&mut ts.slptick);
            if slptick != 0 && slptick != ticks {
                ts.h.slptime += (ticks - slptick) << prio::SCHED_TICK_SHIFT;
                prio::interact_update(&mut ts.h, &clk);
                prio::pctcpu_update(&mut ts.h, ticks, false, &clk);
            }
            ts.slice = 0;
        }
        // sched_add(): recompute the priority, then place.
        self.sched_priority(sys, p);
        let (cpu, search_ns) = self.sched_pickcpu(sys, p, waker_cpu);
        // sched_add() runs under the thread lock: interrupts are off for the search
        // and for taking the target queue's lock.
        let ns = search_ns + Self::lock_ns(sys, waker_cpu, cpu);
        sys.charge_irq_off(waker_cpu, Charge::Find, "sched_add", ns);
        self.ts[p].cpu = cpu;
        cpu
    }

    fn enqueue_task(&mut self, _sys: &mut System, cpu: usize, p: TaskId, _reason: EnqueueReason) {
        self.ts_mut(p);
        self.ts[p].cpu = cpu;
        self.tdq_add(cpu, p, false);
    }

    fn dequeue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: DequeueReason) {
        let ticks = self.ticks(sys);
        let t = &mut self.tdq[cpu];
        if t.curr == Some(p) {
            // sched_switch() of a blocking thread, counted in tdq_switchcnt; an
            // exiting one leaves through sched_throw(), which neither counts it
            // nor tries a switch-time steal.
            t.curr = None;
            t.left = true;
            if reason != DequeueReason::Exit {
                t.switchcnt += 1;
                t.switched_out = true;
            }
            t.load -= 1;
            t.sysload -= 1;
            let clk = self.clk;
            let boost = self.tun.static_boost;
            let ts = &mut self.ts[p];
            prio::pctcpu_update(&mut ts.h, ticks, true, &clk);
            ts.rltick = ticks;
            if reason == DequeueReason::Sleep {
                // sched_sleep(): note the time and boost to static_boost while asleep.
                ts.slptick = ticks.max(1);
                if boost > 1 && ts.pri > boost {
                    ts.pri = boost;
                }
            }
        } else {
            // sched_rem() of a queued thread.
            self.runq_rem(cpu, p);
            let t = &mut self.tdq[cpu];
            t.load -= 1;
            t.sysload -= 1;
            self.tdq_setlowpri(cpu);
        }
    }

    /// tdq_notify() for a remote queue, sched_setpreempt() for the local one (the
    /// NEEDRESCHED it sets takes effect at the return to user mode).
    fn check_preempt_curr(&mut self, sys: &mut System, cpu: usize, p: TaskId, _flags: WakeFlags) -> bool {
        let cpri = self.tdq[cpu].curr.map_or(PRI_MAX_IDLE, |c| self.ts[c].pri);
        let pri = self.ts[p].pri;
        if cpu != sys.this_cpu() {
            return prio::should_preempt(pri, cpri, true, self.tun.preempt_thresh);
        }
        // sched_setpreempt(): NEEDRESCHED for any better priority, owepreempt (a
        // real preemption, SRQ_PREEMPTED) only if sched_shouldpreempt() agrees.
        if pri < cpri && !prio::should_preempt(pri, cpri, false, self.tun.preempt_thresh) {
            if let Some(c) = self.tdq[cpu].curr {
                self.ts[c].needresched = true;
            }
        }
        pri < cpri
    }

    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, prev: Option<TaskId>) -> Option<TaskId> {
        let ticks = self.ticks(sys);
        self.tdq[cpu].idled = None;
        if let Some(p) = prev {
            // sched_switch() of a thread that stays runnable: preempted mid-slice it
            // goes first (SRQ_PREEMPTED); at a slice end or yield, to its slot.
            let clk = self.clk;
            let ts = &mut self.ts[p];
            prio::pctcpu_update(&mut ts.h, ticks, true, &clk);
            ts.rltick = ticks;
            let preempted = !ts.slice_end && !ts.yielding && !ts.needresched;
            ts.slice_end = false;
            ts.yielding = false;
            ts.needresched = false;
            // userret() has set td_priority to the user priority by now.
            ts.pri = ts.user_pri;
            let t = &mut self.tdq[cpu];
            t.curr = None;
            t.switchcnt += 1;
            self.runq_add(cpu, p, preempted);
        } else if std::mem::take(&mut self.tdq[cpu].switched_out) && self.variant == Variant::Post && self.tdq[cpu].load == 0 {
            // sched_switch(), post-D12130: the CPU is about to idle; try a short steal.
            self.tdq_trysteal(sys, cpu);
        }
        let left = std::mem::take(&mut self.tdq[cpu].left);
        let picked = match self.sched_choose(sys, cpu) {
            Some(n) => Some(n),
            // The idle thread's first pass of sched_idletd().
            None => self.idle_pass(sys, cpu, left),
        };
        self.note_idle(sys, cpu, picked.is_none());
        picked
    }

    fn idle_poll(&mut self, sys: &mut System, cpu: usize) -> bool {
        if self.tdq[cpu].load > 0 {
            return true;
        }
        self.tdq_idled_step(sys, cpu)
    }

    fn task_tick(&mut self, sys: &mut System, cpu: usize, curr: TaskId) -> bool {
        let stat = (sys.now_ns as u128 * STATHZ as u128 / 1_000_000_000) as i64;
        let last = self.tdq[cpu].last_stat;
        if stat <= last {
            return false;
        }
        self.tdq[cpu].last_stat = stat;
        let elapsed = if last == 0 { 1 } else { stat - last };
        self.sched_clock(sys, cpu, curr, elapsed)
    }

    fn yield_task(&mut self, _sys: &mut System, _cpu: usize, curr: TaskId) {
        self.ts[curr].yielding = true;
    }

    /// sched_exit(): the parent is charged the child's run time, so a shell that
    /// spawns CPU hogs stops looking interactive.
    fn task_dead(&mut self, sys: &mut System, p: TaskId) {
        let Some(parent) = sys.tasks[p].parent else { return };
        if sys.tasks[p].is_thread || parent >= self.ts.len() {
            return;
        }
        let clk = self.clk;
        let child_run = self.ts[p].h.runtime;
        let pt = &mut self.ts[parent];
        pt.h.runtime += child_run;
        prio::interact_update(&mut pt.h, &clk);
        self.sched_priority(sys, parent);
    }

    fn reweight_task(&mut self, sys: &mut System, p: TaskId, _old_weight: u32) {
        // sched_nice(): recompute the priority.
        self.sched_priority(sys, p);
    }

    fn nr_running(&self, cpu: usize) -> usize {
        self.tdq[cpu].load as usize
    }

    fn nr_running_total(&self) -> usize {
        self.tdq.iter().map(|t| t.load as usize).sum()
    }
}

impl Ule {
    /// sched_choose(): the next thread, or None for the idle thread.
    fn sched_choose(&mut self, sys: &mut System, cpu: usize) -> Option<TaskId> {
        let _ = sys;
        match self.tdq[cpu].q.choose() {
            Some(n) => {
                self.runq_rem(cpu, n);
                // It returns to user mode, where userret() applies the user priority.
                let ts = &mut self.ts[n];
                ts.pri = ts.user_pri;
                let t = &mut self.tdq[cpu];
                t.curr = Some(n);
                t.lowpri = self.ts[n].pri;
                Some(n)
            }
            None => {
                self.tdq[cpu].lowpri = PRI_MAX_IDLE;
                None
            }
        }
    }
}

/// Both CPUs share a last-level cache.
fn same_llc(sys: &System, a: usize, b: usize) -> bool {
    let (x, y) = (&sys.topo.cpus[a], &sys.topo.cpus[b]);
    x.node == y.node && x.llc == y.llc
}
