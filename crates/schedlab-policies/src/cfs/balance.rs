//! Load balancing (fair.c), what every release's balancer shares (each
//! release's `load_balance()` is in `balance3.rs`, `balance4.rs` or
//! `balance5.rs`, using this file's vocabulary): newly-idle `idle_balance()`,
//! the periodic `rebalance_domains()` from the tick, NOHZ idle balancing on
//! behalf of tickless CPUs, `detach_tasks()` with `can_migrate_task()` /
//! `task_hot()`, the tail of a pass (failures, active balance, the interval),
//! the steal series' `try_steal()` (Sistare, 2018, v4 on 4.20-rc1), and the
//! scan rows' refresh.
//!
//! Balancing work is charged to the balancing CPU as scheduler time; searches
//! for idle CPUs and for tasks to steal as find time, as the seed's `%find` counts.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::sched::{Charge, CpuState, System};
use schedlab_core::task::TaskId;

use super::domains::{KernelVersion, SD_BALANCE_NEWIDLE, SD_LOAD_BALANCE};
use super::scan::ScanRow;
use super::state::{Cfs, Ent, StopperWork};

/// `enum migration_type` (v5.10 L7382), without `migrate_misfit`: what
/// `detach_tasks()` counts, from the v5.x balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrationType {
    Load,
    Util,
    Task,
}

/// `enum cpu_idle_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleType {
    Idle,
    NotIdle,
    NewlyIdle,
}

/// `MAX_PINNED_INTERVAL`, ms.
pub const MAX_PINNED_INTERVAL_MS: u64 = 512;

/// `SCHED_STEAL_COST`: steal only when the CPU expects to idle at least this long.
pub const SCHED_STEAL_COST_NS: u64 = 10_000;

impl Cfs {
    pub(crate) fn balance_cost(sys: &mut System, cpu: usize, cpus: u64, locks: u64, tasks: u64) {
        let c = &sys.cost.sched_ops;
        let ns = cpus * c.per_cpu_scanned_ns + locks * c.per_rq_lock_ns + tasks * c.per_task_examined_ns;
        sys.charge(cpu, Charge::Sched, ns);
    }

    /// `load_balance()` of `sd_idx` for `this_cpu`, each release's: returns the
    /// number of tasks pulled and whether higher levels should still balance.
    pub fn load_balance(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        sd_idx: usize,
        idle: IdleType,
        charge_cpu: usize,
    ) -> (usize, bool) {
        if self.reworked_balancer() {
            return self.load_balance_v5(sys, this_cpu, sd_idx, idle, charge_cpu);
        }
        if self.version == KernelVersion::V3_0 {
            return self.load_balance_v3(sys, this_cpu, sd_idx, idle, charge_cpu);
        }
        self.load_balance_v4(sys, this_cpu, sd_idx, idle, charge_cpu)
    }

    /// The tail of `load_balance()` (v4.19 L8473-L8560; v3.0 L3389-L3440): a
    /// failure counts unless newly idle; after `cache_nice_tries + 2` of them the
    /// busiest CPU's running task is pushed here (`need_active_balance()`; v3.0
    /// never from a newly idle CPU: `newidle_active` false); then the interval is
    /// reset, or backed off while an active balance is under way.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn after_move(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        sd_idx: usize,
        src: usize,
        idle: IdleType,
        moved: bool,
        newidle_active: bool,
        charge_cpu: usize,
    ) {
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        let mut active = false;
        if !moved {
            if idle != IdleType::NewlyIdle {
                sd.nr_balance_failed += 1;
            }
            if (newidle_active || idle != IdleType::NewlyIdle) && sd.nr_balance_failed > sd.cache_nice_tries + 2 {
                if let Some(curr) = sys.curr(src) {
                    if sys.tasks[curr].can_run_on(this_cpu) && self.rq[src].stopper.is_none() {
                        self.rq[src].stopper = Some(StopperWork::ActiveBalance { dst: this_cpu });
                        sys.resched_cpu(src, charge_cpu);
                        active = true;
                    }
                }
                let sd = &mut self.doms[this_cpu].domains[sd_idx];
                sd.nr_balance_failed = sd.cache_nice_tries + 1;
            }
        } else {
            sd.nr_balance_failed = 0;
        }
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        if !active {
            sd.balance_interval_ms = sd.min_interval_ms;
        } else if sd.balance_interval_ms < sd.max_interval_ms {
            sd.balance_interval_ms *= 2;
        }
    }

    /// `should_we_balance()` (v4.19 L8493, v5.10 L9474) for domain `sd_idx` of
    /// `this_cpu`: newly idle always; otherwise only the first idle CPU of the
    /// local group, or its first CPU if none is idle. (The local group is read
    /// only past the newly idle answer: a thousand-CPU machine's newly idle
    /// passes would otherwise each fetch a span they never look at.)
    pub(crate) fn should_we_balance(&self, sys: &System, this_cpu: usize, sd_idx: usize, idle: IdleType) -> bool {
        if idle == IdleType::NewlyIdle {
            return true;
        }
        let sd = &self.doms[this_cpu].domains[sd_idx];
        let local: &CpuSet = &sd.groups[sd.local_group].span;
        let balance_cpu = local.iter().find(|&c| self.idle_cpu(sys, c)).unwrap_or_else(|| local.iter().next().expect("group"));
        balance_cpu == this_cpu
    }

    /// Domains `load_balance()` may work on: v4.19 needs SD_LOAD_BALANCE, which
    /// v5.8 removed (every attached domain balances).
    pub(crate) fn sd_balances(&self, flags: u32) -> bool {
        self.reworked_balancer() || flags & SD_LOAD_BALANCE != 0
    }

    /// `update_blocked_averages()` for a CPU without queued work: its load average
    /// keeps decaying while nothing updates it. v5.x balances on `cpu_load()`,
    /// which includes this blocked load.
    pub(crate) fn update_blocked_averages(&mut self, cpu: usize, now: u64) {
        // Groups bottom-up (children were created after their parents): each
        // group's cfs_rq, then its entity on the parent's.
        for g in (1..self.tg.len()).rev() {
            self.update_load_avg_se(g, cpu, None, now);
            let parent = self.tg[g].parent;
            self.update_load_avg_se(parent, cpu, Some(Ent::Group(g, cpu)), now);
        }
        self.update_load_avg(cpu, None, now);
    }

    /// `task_hot()` (v4.19 L7050). (v5.x added "SMT siblings share cache"; 4.19 has
    /// no such exception.)
    pub(crate) fn task_hot(&self, sys: &System, p: TaskId, src: usize, dst: usize) -> bool {
        let cfs = self.cfs(self.task_group[p], src);
        let buddy = cfs.next == Some(Ent::Task(p)) || cfs.last == Some(Ent::Task(p));
        if self.feat.cache_hot_buddy && self.rq[dst].cfs.h_nr_running > 0 && buddy {
            return true;
        }
        let mc = self.sysctl.migration_cost_ns;
        if mc == 0 {
            return false;
        }
        sys.now_ns.saturating_sub(self.se[p].exec_start_ns) < mc
    }

    /// `detach_tasks()` (v4.19 L7178; v5.10 L7644; v5.15 L7875) + `attach_tasks()`:
    /// from the least recently run end of `src`'s task list, tasks that
    /// `can_migrate_task()` allows, each counted against the imbalance by the
    /// version's rule: v4.19 (`migration` None) by its hierarchical load, skipping a
    /// task heavier than twice what is left; v5.x by `migration` type.
    /// Returns (moved, all pinned).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn detach_tasks(
        &mut self,
        sys: &mut System,
        src: usize,
        dst: usize,
        sd_idx: usize,
        idle: IdleType,
        migration: Option<MigrationType>,
        mut imbalance: i64,
        loop_max: usize,
        charge_cpu: usize,
    ) -> (usize, bool) {
        if imbalance <= 0 {
            return (0, false);
        }
        let sd = &self.doms[dst].domains[sd_idx];
        let (nr_failed, cache_nice_tries, sd_flags) = (sd.nr_balance_failed, sd.cache_nice_tries, sd.flags);
        // At most loop_max tasks from the least recently run end (tasks move while we go).
        let candidates: Vec<TaskId> = self.cfs_tasks(src).take(loop_max).collect();
        let mut moved = 0;
        let mut all_pinned = true;
        let mut examined = 0;
        for p in candidates {
            if idle != IdleType::NotIdle && self.rq[src].cfs.h_nr_running <= 1 {
                break;
            }
            examined += 1;
            // can_migrate_task() (v4.19 L7104; v5.10 L7517; v6.18 L9371). v6.18
            // refuses a delayed task, and an ineligible one, before it looks at
            // the CPUs allowed, so neither clears LBF_ALL_PINNED.
            if self.se[p].sched_delayed && !self.may_migrate_delayed(migration) {
                continue;
            }
            if self.ineligible_on_dst(p, src, dst, nr_failed) {
                continue;
            }
            if !sys.tasks[p].can_run_on(dst) {
                continue;
            }
            all_pinned = false;
            if sys.curr(src) == Some(p) {
                continue;
            }
            let hot =
                if migration.is_some() { self.task_hot5(sys, p, src, dst, sd_flags) } else { self.task_hot(sys, p, src, dst) };
            if hot && nr_failed <= cache_nice_tries {
                continue;
            }
            let Some(cost) = self.detach_cost(sys, p, migration, nr_failed, imbalance) else { continue };
            self.move_task(sys, p, src, dst, charge_cpu);
            moved += 1;
            imbalance -= cost;
            // A preemptible build stops a newly idle CPU's pull after its first
            // task, to keep the critical section short (detach_tasks(): under
            // CONFIG_PREEMPT in v4.19, CONFIG_PREEMPTION once that replaced it;
            // v6.18.2 L9652): on a PREEMPT_DYNAMIC kernel whatever preempt= it
            // booted with.
            if sys.preemption_built && idle == IdleType::NewlyIdle {
                break;
            }
            if imbalance <= 0 {
                break;
            }
        }
        Self::balance_cost(sys, charge_cpu, 0, 0, examined as u64);
        (moved, all_pinned)
    }

    /// v6.18's `task_is_ineligible_on_dst_cpu()` test in `can_migrate_task()`
    /// ("prioritize the migration of eligible tasks"): while the domain has not
    /// failed a balance, a task ineligible where it is waits when its group's
    /// cfs_rq on `dst` has entities queued (with PLACE_LAG it would arrive
    /// ineligible there too).
    pub(crate) fn ineligible_on_dst(&self, p: TaskId, src: usize, dst: usize, nr_failed: u32) -> bool {
        if self.version < KernelVersion::V6_18 || nr_failed > 0 || !self.feat.place_lag {
            return false;
        }
        let q = self.task_group[p];
        self.cfs(q, dst).nr_running > 0 && !self.entity_eligible(q, src, Ent::Task(p))
    }

    /// Whether the balancer may move a delayed task (asleep, still queued):
    /// v6.12 may, as any queued task; from v6.14 ("sched/fair: Do not try to
    /// migrate delayed dequeue task", 61b82dfb6b7e) `can_migrate_task()` allows it
    /// only when the pass migrates load (v6.18 the same), which active balance's
    /// `detach_one_task()` does too (its `lb_env` leaves `migration_type` at
    /// `migrate_load`, 0).
    pub(crate) fn may_migrate_delayed(&self, migration: Option<MigrationType>) -> bool {
        self.version < KernelVersion::V6_18 || matches!(migration, None | Some(MigrationType::Load))
    }

    /// What moving `p` takes off the imbalance, or None if it would move too much.
    fn detach_cost(
        &mut self,
        sys: &System,
        p: TaskId,
        migration: Option<MigrationType>,
        nr_failed: u32,
        imbalance: i64,
    ) -> Option<i64> {
        let jiffies = self.jiffies(sys.now_ns);
        match migration {
            // v4.19: half a task's load may overshoot.
            None => {
                let load = self.task_h_load(p, jiffies) as i64;
                (load / 2 <= imbalance).then_some(load)
            }
            // v5.x migrate_load: the size rule relaxes as failures accumulate (LB_MIN off).
            Some(MigrationType::Load) => {
                let load = self.task_h_load(p, jiffies).max(1);
                let shifted = if nr_failed >= 64 { 0 } else { load >> nr_failed };
                (shifted as i64 <= imbalance).then_some(load as i64)
            }
            // v5.5+ migrate_util: the task's estimate (`task_util_est()`).
            Some(MigrationType::Util) => {
                let util = self.task_util_est(p) as i64;
                (util <= imbalance).then_some(util)
            }
            Some(MigrationType::Task) => Some(1),
        }
    }

    /// `idle_balance()` (v4.19 L9470): skipped unless this CPU expects to idle at
    /// least `sched_migration_cost` and some CPU is overloaded; each level only if
    /// the expected idle time covers what balancing cost so far.
    pub fn idle_balance(&mut self, sys: &mut System, cpu: usize) -> usize {
        let jiffies = self.jiffies(sys.now_ns);
        let mut next_balance = jiffies + 1_000_000_000 / self.tick_ns;
        let avg_idle = self.rq[cpu].avg_idle_ns;
        let mut pulled = 0;
        // v3.0 has no root-domain overload flag and no per-domain cost gate (v3.11).
        let v30 = self.version == KernelVersion::V3_0;
        // v5.16+ (so every EEVDF release) gates on the lowest domain's newidle cost
        // instead of sched_migration_cost (`sched_balance_newidle()` v6.18 L12828).
        let gate_ns = if self.version.eevdf() {
            self.doms[cpu].domains.first().map_or(0, |d| d.max_newidle_lb_cost_ns)
        } else {
            self.sysctl.migration_cost_ns
        };
        // v5.16+ ("sched/fair: Wait before decaying max_newidle_lb_cost" and its
        // series) calls update_next_balance() first in each domain, before the
        // cost gate; before, after the domain's pass (and at the gate's break).
        let next_first = self.version.eevdf();
        if avg_idle < gate_ns || !(self.rd_overload || v30) {
            sys.stats[cpu].newidle_skipped += 1;
            if let Some(t) = self.skipped_newidle_next_balance(cpu, sys.ncpus()) {
                next_balance = next_balance.min(t);
            }
        } else {
            if self.reworked_balancer() {
                self.update_blocked_averages(cpu, sys.now_ns);
            }
            if v30 {
                self.update_shares_v30(cpu, sys.now_ns);
            }
            let mut curr_cost = 0u64;
            for i in 0..self.doms[cpu].domains.len() {
                let d = &self.doms[cpu].domains[i];
                if !self.sd_balances(d.flags) {
                    continue;
                }
                if next_first {
                    next_balance = next_balance.min(self.next_balance_of(cpu, i, sys.ncpus()));
                }
                let d = &self.doms[cpu].domains[i];
                if !v30 && avg_idle < curr_cost + d.max_newidle_lb_cost_ns {
                    if !next_first {
                        next_balance = next_balance.min(self.next_balance_of(cpu, i, sys.ncpus()));
                    }
                    break;
                }
                if d.flags & SD_BALANCE_NEWIDLE != 0 {
                    // NI_RANDOM (6.18.y, v6.19 `sched_balance_newidle()`): the domain
                    // is balanced on a 1024-sided die's throw at most 1 + its recent
                    // success rate; a pass that runs counts a success as the inverse
                    // of its chance, so the rate estimates all calls.
                    let mut weight = 1;
                    if self.feat.ni_random {
                        let d1k = (sys.rng.next_u64() as u32) % 1024;
                        weight = 1 + d.newidle_ratio;
                        if d1k > weight {
                            self.doms[cpu].domains[i].update_newidle_stats(0);
                            continue;
                        }
                        weight = (1024 + weight / 2) / weight;
                    }
                    let before = sys.stats[cpu].sched_ns;
                    let (n, _) = self.load_balance(sys, cpu, i, IdleType::NewlyIdle, cpu);
                    pulled += n;
                    let cost = sys.stats[cpu].sched_ns - before;
                    curr_cost += cost;
                    if self.feat.ni_random && cost > 0 {
                        self.doms[cpu].domains[i].update_newidle_stats(weight * u32::from(n > 0));
                    }
                    let bump = self.feat.newidle_cost_bump;
                    let cap = self.sysctl.migration_cost_ns + 200;
                    let d = &mut self.doms[cpu].domains[i];
                    // v6.18.0-6.18.2 (NEWIDLE_COST_BUMP): a pass that pulled nothing
                    // books 1.5x the domain's cost so far, and update_newidle_cost()
                    // caps what it keeps at sched_migration_cost + 200 ns.
                    let cost = if bump && n == 0 { 3 * d.max_newidle_lb_cost_ns / 2 } else { cost };
                    if cost > d.max_newidle_lb_cost_ns {
                        d.max_newidle_lb_cost_ns = if bump { cost.min(cap) } else { cost };
                    }
                }
                if !next_first {
                    next_balance = next_balance.min(self.next_balance_of(cpu, i, sys.ncpus()));
                }
                if pulled > 0 || self.rq[cpu].cfs.h_nr_running > 0 {
                    break;
                }
            }
            let rq = &mut self.rq[cpu];
            rq.max_idle_balance_cost_ns = rq.max_idle_balance_cost_ns.max(curr_cost);
        }
        if self.rq[cpu].next_balance > next_balance {
            self.rq[cpu].next_balance = next_balance;
        }
        pulled.max(self.rq[cpu].cfs.h_nr_running)
    }

    /// Whether another CPU's wakeup can enqueue on this runqueue while its newly
    /// idle pass has the rq lock dropped. `idle_balance()` (v4.19 L9470) and
    /// `newidle_balance()` (v5.10, v5.15) unlock the runqueue while they browse the
    /// domains (so does the steal series' `steal_from()`), and clear `idle_stamp`
    /// only after locking it again ("a task could have been enqueued in the
    /// meantime"); a wakeup from the same LLC locks the target and enqueues at once
    /// (`ttwu_queue()`, v4.19 and v5.x), so `ttwu_do_wakeup()` counts the pass so
    /// far as idle time in `avg_idle`. v3.0 queues every remote wakeup on the
    /// target's list (TTWU_QUEUE for any other CPU, narrowed to other LLCs in
    /// v3.6), and from v6.0 `ttwu_queue_cond()` queues a wakeup onto a CPU with
    /// nothing running: both are taken after the pass, with interrupts on again
    /// (the rest of a v6.x pass after it attached a pulled task is left out).
    pub(crate) fn newidle_pass_takes_wakeups(&self) -> bool {
        matches!(self.version, KernelVersion::V4_19 | KernelVersion::V5_10 | KernelVersion::V5_15)
    }

    /// The end of a newly idle pass that found work: the kernel clears
    /// `idle_stamp` once the pass has locked the runqueue again, when the work
    /// charged so far (the pass's own search included) is done.
    pub(crate) fn end_newidle_pass(&mut self, sys: &System, cpu: usize) {
        if self.newidle_pass_takes_wakeups() {
            self.rq[cpu].idle_stamp_until_ns = Some(sys.charged_until_ns(cpu));
        } else {
            self.rq[cpu].idle_stamp_ns = None;
        }
    }

    /// The `idle_stamp` a wakeup of `p` onto `cpu` finds and clears
    /// (`ttwu_do_wakeup()`): set while the CPU idles, and during a newly idle pass
    /// that found work only for a wakeup from another CPU of its LLC of a task
    /// that is not still switching out (`p` went to sleep before the pass began; a
    /// task still on its CPU is queued on that CPU's list, or waited for,
    /// instead).
    pub(crate) fn idle_stamp_for_wakeup(&mut self, sys: &System, cpu: usize, p: TaskId) -> Option<u64> {
        let rq = &mut self.rq[cpu];
        let stamp = rq.idle_stamp_ns.take()?;
        let Some(until) = rq.idle_stamp_until_ns.take() else { return Some(stamp) };
        let waker = sys.this_cpu();
        let in_pass =
            sys.now_ns < until && waker != cpu && self.llc_id(waker) == self.llc_id(cpu) && sys.tasks[p].slept_at_ns < stamp;
        in_pass.then_some(stamp)
    }

    /// The next balance a newly idle CPU that skips balancing notes: its lowest
    /// domain's (`this_rq->sd`, v3.11-v6.18: `idle_balance()` /
    /// `sched_balance_newidle()` call `update_next_balance()` for it alone),
    /// none in v3.0, which returns before looking at any.
    pub(crate) fn skipped_newidle_next_balance(&self, cpu: usize, ncpus: usize) -> Option<u64> {
        if self.version == KernelVersion::V3_0 || self.doms[cpu].domains.is_empty() {
            return None;
        }
        Some(self.next_balance_of(cpu, 0, ncpus))
    }

    /// `update_next_balance()`'s candidate for domain `i` of `cpu` seen from a
    /// newly idle CPU: its last balance plus its idle (not busy) interval.
    pub(crate) fn next_balance_of(&self, cpu: usize, i: usize, ncpus: usize) -> u64 {
        let d = &self.doms[cpu].domains[i];
        d.last_balance_jiffies + self.balance_interval_jiffies(d.balance_interval_ms, d.busy_factor, false, ncpus)
    }

    /// `get_sd_balance_interval()` (v4.19 L8800, v5.10 L9807), in jiffies.
    fn balance_interval_jiffies(&self, balance_interval_ms: u64, busy_factor: u32, busy: bool, ncpus: usize) -> u64 {
        let mut ms = balance_interval_ms;
        if busy {
            ms *= busy_factor as u64;
        }
        let hz = 1_000_000_000 / self.tick_ns;
        let mut j = (ms * hz).div_ceil(1000);
        // v5.10 (L9807): a busy CPU balances one jiffy early so that the levels do not
        // all come due on the same tick.
        if busy && self.reworked_balancer() {
            j = j.saturating_sub(1);
        }
        // max_load_balance_interval = HZ × online CPUs / 10.
        j.clamp(1, (hz * ncpus as u64 / 10).max(1))
    }

    /// `rebalance_domains()` (v4.19 L8935) for `cpu`, run on `charge_cpu`.
    pub fn rebalance_domains(&mut self, sys: &mut System, cpu: usize, mut idle: IdleType, charge_cpu: usize) {
        if self.reworked_balancer() {
            // run_rebalance_domains() / _nohz_idle_balance() first bring the CPU's
            // blocked load up to date; only 5.x reads it.
            self.update_blocked_averages(cpu, sys.now_ns);
        }
        if self.version == KernelVersion::V3_0 {
            // v3.0 rebalance_domains() starts with update_shares().
            self.update_shares_v30(cpu, sys.now_ns);
        }
        let jiffies = self.jiffies(sys.now_ns);
        let hz = 1_000_000_000 / self.tick_ns;
        let mut next_balance = jiffies + 60 * hz;
        let mut update_next = false;
        let mut need_decay = false;
        let mut max_cost = 0;
        let mut continue_balancing = true;
        for i in 0..self.doms[cpu].domains.len() {
            let reworked = self.reworked_balancer();
            let d = &mut self.doms[cpu].domains[i];
            if jiffies > d.next_decay_max_lb_cost_jiffies {
                d.max_newidle_lb_cost_ns = d.max_newidle_lb_cost_ns * 253 / 256;
                d.next_decay_max_lb_cost_jiffies = jiffies + hz;
                need_decay = true;
            }
            max_cost += d.max_newidle_lb_cost_ns;
            if !reworked && d.flags & SD_LOAD_BALANCE == 0 {
                continue;
            }
            if !continue_balancing {
                if need_decay {
                    continue;
                }
                break;
            }
            let (bi, bf) = (d.balance_interval_ms, d.busy_factor);
            let mut interval = self.balance_interval_jiffies(bi, bf, idle != IdleType::Idle, sys.ncpus());
            if jiffies >= self.doms[cpu].domains[i].last_balance_jiffies + interval {
                let (moved, cont) = self.load_balance(sys, cpu, i, idle, charge_cpu);
                continue_balancing = cont;
                if moved > 0 {
                    idle = if self.idle_cpu(sys, cpu) && self.rq[cpu].cfs.h_nr_running == 0 {
                        IdleType::Idle
                    } else {
                        IdleType::NotIdle
                    };
                }
                let d = &mut self.doms[cpu].domains[i];
                d.last_balance_jiffies = jiffies;
                let (bi, bf) = (d.balance_interval_ms, d.busy_factor);
                interval = self.balance_interval_jiffies(bi, bf, idle != IdleType::Idle, sys.ncpus());
            }
            let last = self.doms[cpu].domains[i].last_balance_jiffies;
            if next_balance > last + interval {
                next_balance = last + interval;
                update_next = true;
            }
        }
        if need_decay {
            self.rq[cpu].max_idle_balance_cost_ns = self.sysctl.migration_cost_ns.max(max_cost);
        }
        if update_next {
            self.rq[cpu].next_balance = next_balance;
        }
        // v4.19 (L9004): an idle CPU balancing for itself also brings
        // nohz.next_balance forward; from v5.10 the ILB's loop does that.
        if !self.reworked_balancer() && idle == IdleType::Idle && self.nohz_next_balance > self.rq[cpu].next_balance {
            self.nohz_next_balance = self.rq[cpu].next_balance;
        }
    }

    /// `trigger_load_balance()` (v4.19 L9432) from a busy CPU's tick, then
    /// `nohz_balancer_kick()` (L9099).
    pub fn trigger_load_balance_fair(&mut self, sys: &mut System, cpu: usize) {
        let jiffies = self.jiffies(sys.now_ns);
        if jiffies >= self.rq[cpu].next_balance {
            self.rebalance_domains(sys, cpu, IdleType::NotIdle, cpu);
        }
        // nohz_balancer_kick(): wake one tickless idle CPU to balance for all of them.
        if sys.idle_mask().is_empty() || jiffies < self.nohz_next_balance {
            return;
        }
        let mut kick = self.rq[cpu].cfs.h_nr_running >= 2;
        if !kick {
            if let Some(llc) = self.doms[cpu].sd_llc {
                let span = &self.doms[cpu].domains[llc].span;
                let busy = span.iter().filter(|&c| !sys.cpu_idle(c)).count();
                kick = busy > 1;
            }
        }
        if kick {
            let Some(ilb) = sys.idle_mask().iter().next() else { return };
            if !self.rq[ilb].nohz_kick {
                self.rq[ilb].nohz_kick = true;
                self.nohz_next_balance = jiffies + 1;
                sys.resched_cpu(ilb, cpu);
            }
        }
    }

    /// `nohz_idle_balance()` (v4.19 L9292; `_nohz_idle_balance()` v6.18 L12612):
    /// the kicked idle CPU balances, on their behalf, the tickless idle CPUs whose
    /// balance is due, and itself. v4.19 visits the others, then itself; from v5.10
    /// ("Merge for each idle cpu loop of ILB") one loop visits every idle CPU from
    /// the next one round to itself, last. `nohz.next_balance` becomes the earliest
    /// next balance of the CPUs visited, and stays as the kick left it (the next
    /// jiffy) when none was: with no other idle CPU, v4.19's loop visits none.
    pub fn nohz_idle_balance(&mut self, sys: &mut System, this_cpu: usize) {
        let jiffies = self.jiffies(sys.now_ns);
        let hz = 1_000_000_000 / self.tick_ns;
        let mut next_balance = jiffies + 60 * hz;
        let mut update_next_balance = false;
        let merged = self.reworked_balancer();
        let ncpus = sys.ncpus();
        // for_each_cpu_wrap(balance_cpu, nohz.idle_cpus_mask, this_cpu + 1). The
        // kicked CPU is in that mask too: it runs the softirq from its idle task
        // (here it is already marked awake for the kick).
        let idle: Vec<usize> = (1..=ncpus)
            .map(|k| (this_cpu + k) % ncpus)
            .filter(|&c| if c == this_cpu { merged } else { sys.idle_mask().contains(c) })
            .collect();
        for cpu in idle {
            // This CPU got work meanwhile: the next balance owner picks up the rest.
            if self.rq[this_cpu].cfs.h_nr_running > 0 {
                return;
            }
            Self::balance_cost(sys, this_cpu, 1, 1, 0);
            // cpu_load_update_idle(): an idle CPU's load indexes decay towards zero.
            if self.weighted_cpuload(cpu) == 0 {
                self.cpu_load_update(cpu, sys.now_ns, 0);
            }
            if jiffies >= self.rq[cpu].next_balance {
                self.rebalance_domains(sys, cpu, IdleType::Idle, this_cpu);
            }
            if next_balance > self.rq[cpu].next_balance {
                next_balance = self.rq[cpu].next_balance;
                update_next_balance = true;
            }
        }
        if !merged && jiffies >= self.rq[this_cpu].next_balance {
            self.rebalance_domains(sys, this_cpu, IdleType::Idle, this_cpu);
        }
        if update_next_balance {
            self.nohz_next_balance = next_balance;
        }
    }

    /// `active_load_balance_cpu_stop()` (v4.19 L8833) with `detach_one_task()`: the
    /// stopper has preempted the busiest CPU's task; it pushes the least recently run
    /// task that may run on `dst` (the hot test is off: the failures that started
    /// this exceed cache_nice_tries), and resets the domain's failure count.
    pub fn active_push(&mut self, sys: &mut System, cpu: usize, dst: usize) {
        let candidates: Vec<TaskId> = self.cfs_tasks(cpu).collect();
        Self::balance_cost(sys, cpu, 0, 2, candidates.len() as u64);
        if let Some(p) = candidates.into_iter().find(|&p| sys.tasks[p].can_run_on(dst) && self.rq[cpu].curr_task != Some(p)) {
            self.move_task(sys, p, cpu, dst, cpu);
            if let Some(sd) = self.doms[dst].domains.iter_mut().find(|d| d.span.contains(cpu)) {
                sd.nr_balance_failed = 0;
            }
        }
    }

    /// `try_steal()` (steal series v4, patch 8): when `idle_balance()` found nothing
    /// and this CPU expects to idle at least SCHED_STEAL_COST, take the first
    /// migratable task from an overloaded SMT sibling, else from the LLC's
    /// overloaded CPUs in wrap order from this one. No cache-hot test.
    pub fn try_steal(&mut self, sys: &mut System, dst: usize) -> usize {
        if self.rq[dst].avg_idle_ns < SCHED_STEAL_COST_NS {
            return 0;
        }
        let llc = self.llc_id(dst);
        if self.overload_cpus[llc].is_empty() {
            return 0;
        }
        let sibs: Vec<usize> = sys.topo.smt_siblings(dst).iter().collect();
        sys.charge_search(dst, sibs.len() as u64, 0, 0);
        for src in sibs {
            if self.overload_cpus[llc].contains(src) && self.steal_from(sys, dst, src) {
                sys.stats[dst].steals += 1;
                return 1;
            }
        }
        // A snapshot of the mask: steal_from() changes it as tasks move.
        let mask = self.overload_cpus[llc].clone();
        for src in mask.iter_wrap(dst) {
            sys.charge_search(dst, 1, 0, 0);
            if self.steal_from(sys, dst, src) {
                sys.stats[dst].steals += 1;
                return 1;
            }
        }
        sys.stats[dst].steal_fails += 1;
        0
    }

    /// `steal_from()`: lock `src`, re-check it is overloaded, move its least
    /// recently run task that may run on `dst` and is not running.
    fn steal_from(&mut self, sys: &mut System, dst: usize, src: usize) -> bool {
        if src == dst || self.rq[src].cfs.h_nr_running < 2 {
            return false;
        }
        sys.charge_search(dst, 0, 1, 0);
        // can_migrate_task_llc(): allowed on dst and not running; least recently run first.
        let curr = sys.curr(src);
        let mut examined = 0;
        let found = self.cfs_tasks(src).find(|&p| {
            examined += 1;
            sys.tasks[p].can_run_on(dst) && curr != Some(p)
        });
        sys.charge_search(dst, 0, 0, examined);
        match found {
            Some(p) => {
                self.move_task(sys, p, src, dst, dst);
                true
            }
            None => false,
        }
    }
}

/// The balancer's scan rows (`scan.rs`), read by the v5.5+ group scans and
/// rewritten from the runqueues before each.
impl Cfs {
    /// CPU `cpu`'s row as its runqueue holds it now, through the accessors the
    /// kernel's scans use.
    pub fn scan_row(&self, sys: &System, cpu: usize) -> ScanRow {
        let h_nr_running = self.rq[cpu].cfs.h_nr_running as u32;
        ScanRow {
            load_avg: self.cpu_load(cpu),
            util: self.cpu_util(cpu),
            runnable_avg: self.cpu_runnable(cpu),
            h_nr_running,
            nr_runnable: self.h_nr_runnable(cpu) as u32,
            idle: h_nr_running == 0 && sys.cpu_state(cpu) == CpuState::Idle,
        }
    }

    /// Rewrites every stale row from its runqueue, and the sums holding it.
    /// The first call asks the engine for the CPUs' state changes from then on
    /// (every row is stale until the first call).
    pub fn scan_rows_refresh(&mut self, sys: &mut System) {
        if !sys.state_changes_tracked() {
            sys.track_state_changes();
        }
        let scan = &mut self.scan;
        sys.take_state_changes(|cpu| scan.mark(cpu));
        let stale = self.scan.take_stale();
        for &cpu in &stale {
            let row = self.scan_row(sys, cpu);
            self.scan.refresh_row(cpu, row);
        }
        self.scan.refreshed(stale);
    }

    /// Debug builds: a fresh row agrees with its runqueue.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_scan_row(&self, sys: &System, cpu: usize) {
        debug_assert_eq!(
            self.scan.row(cpu),
            self.scan_row(sys, cpu),
            "the balancer's scan row of CPU {cpu} is stale: a root cfs_rq change did not mark it"
        );
    }

    /// Debug builds: `group`'s sums are its rows added up.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_group_sums(&self, sys: &System, group: &super::domains::SchedGroup) {
        let mut sums = super::scan::GroupSums::default();
        for cpu in group.span_runs.iter().flat_map(|r| r.clone()) {
            self.debug_check_scan_row(sys, cpu);
            sums.add(&self.scan.row(cpu));
        }
        debug_assert_eq!(self.scan.group_sums(group), sums, "the running sums of the group {:?} drifted", group.span_runs);
    }
}
