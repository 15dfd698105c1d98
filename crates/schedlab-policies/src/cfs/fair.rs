//! CFS runqueues and entity timing (fair.c, v4.19): vruntime, slices, placement,
//! tick and wakeup preemption, buddies, and the `SchedClass` hooks that call them.
//! No group scheduling here: every entity is a task on its CPU's root cfs_rq.

use std::collections::{BTreeMap, BTreeSet};

use schedlab_core::error::SpecError;
use schedlab_core::sched::{DequeueReason, EnqueueReason, SchedClass, System, WakeFlags};
use schedlab_core::task::TaskId;

use super::domains::{self, CpuDomains, KernelVersion};
use super::features::Features;
use super::pelt::SchedAvg;
use super::sysctl::Sysctls;
use super::weights::{calc_delta, calc_delta_fair, LoadRes, LoadWeight};

/// Per-task fair state (`struct sched_entity` plus the task fields CFS reads).
#[derive(Clone, Debug)]
pub struct Se {
    pub load: LoadWeight,
    pub vruntime: u64,
    pub exec_start_ns: u64,
    pub sum_exec_runtime_ns: u64,
    pub prev_sum_exec_runtime_ns: u64,
    pub on_rq: bool,
    /// The CPU whose cfs_rq this entity is (or was last) queued on.
    pub rq_cpu: usize,
    pub avg: SchedAvg,
    /// `p->wakee_flips`, `p->wakee_flip_decay_ts` (jiffies), `p->last_wakee`.
    pub wakee_flips: u64,
    pub wakee_flip_decay_ts: u64,
    pub last_wakee: Option<TaskId>,
    /// `p->recent_used_cpu`.
    pub recent_used_cpu: usize,
    /// Position in `rq->cfs_tasks` (larger = more recently picked).
    pub mru_key: u64,
    /// Key in the timeline while queued and not running.
    pub tree_key: Option<(u64, u64)>,
}

/// `struct cfs_rq` (root level only).
#[derive(Clone, Debug, Default)]
pub struct CfsRq {
    /// The rbtree: (vruntime, insertion order, task). Equal keys go right.
    pub timeline: BTreeSet<(u64, u64, TaskId)>,
    pub curr: Option<TaskId>,
    /// `nr_running` = `h_nr_running` without groups.
    pub nr_running: usize,
    pub load: LoadWeight,
    /// Sum of queued entities' runnable weights (`cfs_rq->runnable_weight`).
    pub runnable_weight: u64,
    pub min_vruntime: u64,
    pub next: Option<TaskId>,
    pub last: Option<TaskId>,
    pub skip: Option<TaskId>,
    pub avg: SchedAvg,
    /// `rq->cfs_tasks`, most recently picked last: key → task.
    pub cfs_tasks: BTreeMap<u64, TaskId>,
}

/// `struct rq`, fair-relevant parts.
#[derive(Clone, Debug)]
pub struct Rq {
    pub cfs: CfsRq,
    pub avg_idle_ns: u64,
    /// v5.15 `rq->wake_avg_idle`: half of avg_idle at the last wakeup from idle,
    /// halved per jiffy since (`wake_stamp`) and spent by idle-CPU scans.
    pub wake_avg_idle_ns: u64,
    pub wake_stamp: u64,
    pub idle_stamp_ns: Option<u64>,
    pub max_idle_balance_cost_ns: u64,
    pub next_balance: u64,
    /// `rq->cpu_load[]`, v4.19's per-tick decayed load indexes.
    pub cpu_load: [u64; 5],
    pub last_load_update_tick: u64,
    pub cpu_capacity: u64,
    /// Active balance asked: push the running task to this CPU at its next switch.
    pub active_balance_to: Option<usize>,
    /// This idle CPU was kicked to run NOHZ idle balancing.
    pub nohz_kick: bool,
}

/// The model: `cfs@4.19` with features.
pub struct Cfs {
    pub version: KernelVersion,
    pub feat: Features,
    pub sysctl: Sysctls,
    pub res: LoadRes,
    pub se: Vec<Se>,
    pub rq: Vec<Rq>,
    pub doms: Vec<CpuDomains>,
    /// Per LLC (indexed by `sd_llc_id`): `sd_llc_shared->has_idle_cores`.
    pub has_idle_cores: Vec<bool>,
    /// Per LLC: `sd_llc->avg_scan_cost`.
    pub avg_scan_cost_ns: Vec<u64>,
    /// Per LLC: STEAL's `cfs_overload_cpus`.
    pub overload_cpus: Vec<schedlab_core::cpuset::CpuSet>,
    /// `rd->overload`.
    pub rd_overload: bool,
    /// NOHZ: `nohz.next_balance` (jiffies).
    pub nohz_next_balance: u64,
    pub tree_seq: u64,
    pub mru_seq: u64,
    pub nr_total: usize,
    pub tick_ns: u64,
    /// STEAL is off on machines with more NUMA nodes than this (`sched_steal_node_limit`).
    pub steal_node_limit: usize,
    pub steal_enabled: bool,
    /// `--sysctl` settings, applied over the boot values once the CPU count is known.
    pending_sysctls: Vec<(String, String)>,
}

/// Where every cfs_rq's min_vruntime starts. The kernel starts just below 2^64 to
/// exercise wrapping; here vruntimes stay far from 0 so that a task carrying a
/// negative relative vruntime to a fresh queue still sorts as a small absolute value
/// and u64 ordering equals the kernel's signed-difference ordering.
pub const MIN_VRUNTIME_START: u64 = 1 << 40;

/// `SCHED_STEAL_COST`: steal only when the CPU expects to idle at least this long.
pub const SCHED_STEAL_COST_NS: u64 = 10_000;

impl Cfs {
    /// `cfs@4.19` with `features` (`STEAL`, `NO_WA_IDLE`, …) and sysctls.
    pub fn new(version: &str, features: Option<&str>, sysctls: &[(String, String)]) -> Result<Cfs, SpecError> {
        let Some(version) = KernelVersion::parse(version) else {
            return Err(SpecError::new("cfs version", version, "a modelled version: 4.19, 5.10 or 5.15"));
        };
        let mut feat = Features::for_version(version);
        if let Some(f) = features {
            feat.apply(f)?;
        }
        // Sysctls are checked now against a placeholder CPU count; init() re-applies
        // them over the real boot values.
        let mut probe = Sysctls::boot(1);
        probe.apply(sysctls)?;
        Ok(Cfs {
            version,
            feat,
            sysctl: probe,
            res: LoadRes::HIGH,
            se: Vec::new(),
            rq: Vec::new(),
            doms: Vec::new(),
            has_idle_cores: Vec::new(),
            avg_scan_cost_ns: Vec::new(),
            overload_cpus: Vec::new(),
            rd_overload: false,
            nohz_next_balance: 0,
            tree_seq: 0,
            mru_seq: 0,
            nr_total: 0,
            tick_ns: 4_000_000,
            steal_node_limit: 2,
            steal_enabled: false,
            pending_sysctls: sysctls.to_vec(),
        })
    }

    pub fn jiffies(&self, now_ns: u64) -> u64 {
        now_ns / self.tick_ns
    }

    pub fn llc_id(&self, cpu: usize) -> usize {
        self.doms[cpu].sd_llc_id
    }

    // ------------------------------------------------------------ entity timing

    /// `update_curr()` (fair.c v4.19 L802): charge the running entity's time.
    pub fn update_curr(&mut self, cpu: usize, now: u64) {
        let Some(curr) = self.rq[cpu].cfs.curr else { return };
        let se = &mut self.se[curr];
        let delta = now.saturating_sub(se.exec_start_ns);
        if delta == 0 {
            return;
        }
        se.exec_start_ns = now;
        se.sum_exec_runtime_ns += delta;
        se.vruntime += calc_delta_fair(delta, &mut se.load, self.res);
        self.update_min_vruntime(cpu);
    }

    /// `update_min_vruntime()` (v4.19 L496): monotonic max of min(curr, leftmost).
    pub fn update_min_vruntime(&mut self, cpu: usize) {
        let cfs = &self.rq[cpu].cfs;
        let mut vruntime = cfs.min_vruntime;
        let curr = cfs.curr.filter(|&c| self.se[c].on_rq);
        if let Some(c) = curr {
            vruntime = self.se[c].vruntime;
        }
        if let Some(&(left, _, _)) = cfs.timeline.first() {
            vruntime = match curr {
                None => left,
                Some(_) => vruntime.min(left),
            };
        }
        let cfs = &mut self.rq[cpu].cfs;
        cfs.min_vruntime = cfs.min_vruntime.max(vruntime);
    }

    /// `__sched_period()` (v4.19 L644).
    pub fn sched_period(&self, nr_running: u64) -> u64 {
        if nr_running > self.sysctl.nr_latency {
            nr_running * self.sysctl.min_granularity_ns
        } else {
            self.sysctl.latency_ns
        }
    }

    /// `sched_slice()` (v4.19 L658): the entity's share of the period by weight.
    pub fn sched_slice(&mut self, cpu: usize, p: TaskId) -> u64 {
        let on_rq = self.se[p].on_rq;
        let cfs = &self.rq[cpu].cfs;
        let slice = self.sched_period(cfs.nr_running as u64 + u64::from(!on_rq));
        let mut load = cfs.load;
        if !on_rq {
            load.add(self.se[p].load.weight);
        }
        calc_delta(slice, self.se[p].load.weight, &mut load, self.res)
    }

    /// `sched_vslice()`: the slice in virtual time.
    pub fn sched_vslice(&mut self, cpu: usize, p: TaskId) -> u64 {
        let slice = self.sched_slice(cpu, p);
        calc_delta_fair(slice, &mut self.se[p].load, self.res)
    }

    /// `place_entity()` (v4.19 L3772): START_DEBIT for new tasks, half-latency
    /// sleeper credit (GENTLE_FAIR_SLEEPERS) for wakeups, never backwards.
    pub fn place_entity(&mut self, cpu: usize, p: TaskId, initial: bool) {
        let mut vruntime = self.rq[cpu].cfs.min_vruntime;
        if initial && self.feat.start_debit {
            vruntime += self.sched_vslice(cpu, p);
        }
        if !initial {
            let mut thresh = self.sysctl.latency_ns;
            if self.feat.gentle_fair_sleepers {
                thresh >>= 1;
            }
            vruntime = vruntime.saturating_sub(thresh);
        }
        let se = &mut self.se[p];
        se.vruntime = se.vruntime.max(vruntime);
    }

    fn tree_insert(&mut self, cpu: usize, p: TaskId) {
        self.tree_seq += 1;
        let key = (self.se[p].vruntime, self.tree_seq);
        self.se[p].tree_key = Some(key);
        self.rq[cpu].cfs.timeline.insert((key.0, key.1, p));
    }

    fn tree_remove(&mut self, cpu: usize, p: TaskId) {
        if let Some((v, s)) = self.se[p].tree_key.take() {
            self.rq[cpu].cfs.timeline.remove(&(v, s, p));
        }
    }

    fn mru_touch(&mut self, cpu: usize, p: TaskId) {
        let cfs = &mut self.rq[cpu].cfs;
        cfs.cfs_tasks.remove(&self.se[p].mru_key);
        self.mru_seq += 1;
        self.se[p].mru_key = self.mru_seq;
        cfs.cfs_tasks.insert(self.mru_seq, p);
    }

    /// `update_load_avg()` (v4.19 L3723) for the task (if any) and its cfs_rq, at `now`:
    /// `__update_load_avg_se()` then `update_cfs_rq_load_avg()`.
    pub fn update_load_avg(&mut self, cpu: usize, p: Option<TaskId>, now: u64) {
        let res = self.res;
        if let Some(p) = p {
            let running = self.rq[cpu].cfs.curr == Some(p);
            let runnable = self.se_runnable(p);
            let se = &mut self.se[p];
            let w = res.scale_load_down(se.load.weight);
            se.avg.update_se(now, se.on_rq, running, w, runnable);
        }
        let reworked = self.reworked_balancer();
        let cfs = &mut self.rq[cpu].cfs;
        let load = res.scale_load_down(cfs.load.weight);
        // v5.7+ replaced the weighted runnable load by `runnable_avg`: 1024 per
        // runnable task (`h_nr_running << SCHED_CAPACITY_SHIFT`), whatever its weight.
        let runnable = if reworked { cfs.nr_running as u64 * 1024 } else { res.scale_load_down(cfs.runnable_weight) };
        cfs.avg.update_cfs_rq(now, load, runnable, cfs.curr.is_some());
    }

    /// The runnable weight of `p`'s entity: its unscaled weight (v4.19
    /// `se_runnable()`), or 1024 for the v5.7+ `runnable_avg`, which counts tasks.
    /// (v5.7+ also keeps a sleeping task's runnable history attached to its
    /// runqueue, decaying like its load; here it leaves at dequeue as in v4.19.)
    pub fn se_runnable(&self, p: TaskId) -> u64 {
        if self.reworked_balancer() {
            1024
        } else {
            self.res.scale_load_down(self.se[p].load.weight)
        }
    }

    /// `enqueue_entity()` (v4.19 L3857) plus the STEAL overload bookkeeping of
    /// `enqueue_task_fair()`.
    pub fn enqueue_entity(&mut self, cpu: usize, p: TaskId, wakeup: bool, migrated: bool, now: u64) {
        let renorm = !wakeup || migrated;
        let is_curr = self.rq[cpu].cfs.curr == Some(p);
        if renorm && is_curr {
            self.se[p].vruntime = self.se[p].vruntime.wrapping_add(self.rq[cpu].cfs.min_vruntime);
        }
        self.update_curr(cpu, now);
        if renorm && !is_curr {
            self.se[p].vruntime = self.se[p].vruntime.wrapping_add(self.rq[cpu].cfs.min_vruntime);
        }
        // A task arriving from elsewhere (new, or migrated) attaches its load here
        // (update_load_avg(DO_ATTACH) → attach_entity_load_avg()).
        let w_down = self.res.scale_load_down(self.se[p].load.weight);
        if self.se[p].rq_cpu != cpu {
            self.update_load_avg(cpu, None, now);
            let mut avg = self.se[p].avg;
            self.rq[cpu].cfs.avg.attach(&mut avg, w_down);
            self.se[p].avg = avg;
            self.se[p].rq_cpu = cpu;
        } else {
            self.update_load_avg(cpu, Some(p), now);
        }
        let w = self.se[p].load.weight;
        let avg = self.se[p].avg;
        let runnable = self.se_runnable(p);
        let cfs = &mut self.rq[cpu].cfs;
        cfs.runnable_weight += w;
        cfs.avg.enqueue_runnable_load(&avg, runnable);
        cfs.load.add(w);
        cfs.nr_running += 1;
        if wakeup {
            self.place_entity(cpu, p, false);
        }
        if !is_curr {
            self.tree_insert(cpu, p);
        }
        self.se[p].on_rq = true;
        self.mru_touch(cpu, p);
        self.nr_total += 1;
        let nr = self.rq[cpu].cfs.nr_running;
        if nr >= 2 {
            // add_nr_running(): rd->overload once any CPU has two tasks.
            self.rd_overload = true;
        }
        if nr == 2 {
            self.overload_set(cpu);
        }
    }

    /// `dequeue_entity()` (v4.19 L3957).
    pub fn dequeue_entity(&mut self, cpu: usize, p: TaskId, sleep: bool, now: u64) {
        self.update_curr(cpu, now);
        self.update_load_avg(cpu, Some(p), now);
        let w = self.se[p].load.weight;
        {
            let runnable = self.se_runnable(p);
            let avg = self.se[p].avg;
            let cfs = &mut self.rq[cpu].cfs;
            cfs.runnable_weight = cfs.runnable_weight.saturating_sub(w);
            cfs.avg.dequeue_runnable_load(&avg, runnable);
        }
        self.clear_buddies(cpu, p);
        if self.rq[cpu].cfs.curr != Some(p) {
            self.tree_remove(cpu, p);
        }
        self.se[p].on_rq = false;
        let cfs = &mut self.rq[cpu].cfs;
        cfs.load.sub(w);
        cfs.nr_running -= 1;
        cfs.cfs_tasks.remove(&self.se[p].mru_key);
        if !sleep {
            self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(self.rq[cpu].cfs.min_vruntime);
        }
        self.update_min_vruntime(cpu);
        self.nr_total -= 1;
        if self.rq[cpu].cfs.nr_running == 1 {
            self.overload_clear(cpu);
        }
    }

    /// A task leaving this CPU for good (migration): take its load with it
    /// (`detach_entity_load_avg`/`remove_entity_load_avg`).
    pub fn detach_load(&mut self, cpu: usize, p: TaskId) {
        let avg = self.se[p].avg;
        let w_down = self.res.scale_load_down(self.se[p].load.weight);
        self.rq[cpu].cfs.avg.detach(&avg, w_down);
    }

    fn clear_buddies(&mut self, cpu: usize, p: TaskId) {
        let cfs = &mut self.rq[cpu].cfs;
        for b in [&mut cfs.next, &mut cfs.last, &mut cfs.skip] {
            if *b == Some(p) {
                *b = None;
            }
        }
    }

    /// `wakeup_gran()` (v4.19 L6433, v5.15 L7047): the granularity in the wakee's
    /// virtual time. With SCALE_WAKEUP_GRAN (Gorman 2021, v1) and a runqueue given
    /// (only check_preempt_wakeup passes one; buddy picks do not), a runqueue of more
    /// than one entity multiplies it by `min(nr_running >> 1, sched_nr_latency)`.
    pub fn wakeup_gran(&mut self, cfs_rq_cpu: Option<usize>, p: TaskId) -> u64 {
        let mut gran = self.sysctl.wakeup_granularity_ns;
        if let Some(cpu) = cfs_rq_cpu.filter(|_| self.feat.scale_wakeup_gran) {
            let nr_running = self.rq[cpu].cfs.nr_running as u64;
            if nr_running > 1 {
                gran *= (nr_running >> 1).min(self.sysctl.nr_latency);
            }
        }
        calc_delta_fair(gran, &mut self.se[p].load, self.res)
    }

    /// `wakeup_preempt_entity()` (v4.19 L6468, v5.15 L7094): −1 if `curr` is not
    /// ahead of `se`, 1 if ahead by more than the wakee's granularity, else 0.
    /// `cfs_rq_cpu` is the runqueue SCALE_WAKEUP_GRAN reads (None from buddy picks).
    pub fn wakeup_preempt_entity(&mut self, cfs_rq_cpu: Option<usize>, curr: TaskId, se: TaskId) -> i32 {
        let vdiff = self.se[curr].vruntime as i64 - self.se[se].vruntime as i64;
        if vdiff <= 0 {
            return -1;
        }
        if vdiff as u64 > self.wakeup_gran(cfs_rq_cpu, se) {
            1
        } else {
            0
        }
    }

    /// `pick_next_entity()` (v4.19 L4091): leftmost, unless the skip buddy, or a
    /// last/next buddy within a wakeup granularity of it, should run instead.
    fn pick_next_entity(&mut self, cpu: usize) -> Option<TaskId> {
        let cfs = &self.rq[cpu].cfs;
        let left = cfs.timeline.first().map(|&(_, _, t)| t)?;
        let mut se = left;
        if cfs.skip == Some(se) {
            if let Some(&(_, _, second)) = cfs.timeline.iter().nth(1) {
                if self.wakeup_preempt_entity(None, second, left) < 1 {
                    se = second;
                }
            }
        }
        let (last, next) = (self.rq[cpu].cfs.last, self.rq[cpu].cfs.next);
        if let Some(l) = last {
            if self.wakeup_preempt_entity(None, l, left) < 1 {
                se = l;
            }
        }
        if let Some(n) = next {
            if self.wakeup_preempt_entity(None, n, left) < 1 {
                se = n;
            }
        }
        self.clear_buddies(cpu, se);
        Some(se)
    }

    /// `set_next_entity()` (v4.19 L4052).
    fn set_next_entity(&mut self, cpu: usize, p: TaskId, now: u64) {
        if self.se[p].on_rq {
            self.tree_remove(cpu, p);
            self.update_load_avg(cpu, Some(p), now);
        }
        self.rq[cpu].cfs.curr = Some(p);
        let se = &mut self.se[p];
        se.exec_start_ns = now;
        se.prev_sum_exec_runtime_ns = se.sum_exec_runtime_ns;
    }

    /// `put_prev_entity()` (v4.19 L4134).
    fn put_prev_entity(&mut self, cpu: usize, p: TaskId, now: u64) {
        if self.se[p].on_rq {
            self.update_curr(cpu, now);
            self.tree_insert(cpu, p);
            self.update_load_avg(cpu, Some(p), now);
        }
        self.rq[cpu].cfs.curr = None;
    }

    /// `check_preempt_tick()` (v4.19 L4012).
    fn check_preempt_tick(&mut self, cpu: usize, curr: TaskId) -> bool {
        let ideal = self.sched_slice(cpu, curr);
        let se = &self.se[curr];
        let ran = se.sum_exec_runtime_ns - se.prev_sum_exec_runtime_ns;
        if ran > ideal {
            self.clear_buddies(cpu, curr);
            return true;
        }
        if ran < self.sysctl.min_granularity_ns {
            return false;
        }
        let Some(&(left_v, _, _)) = self.rq[cpu].cfs.timeline.first() else { return false };
        let delta = self.se[curr].vruntime as i64 - left_v as i64;
        delta > 0 && delta as u64 > ideal
    }

    /// `cpu_load_update()` (v4.19 L5314): the per-tick decayed load indexes, with
    /// ticks missed while tickless decayed by `decay_load_missed()`.
    pub fn cpu_load_update(&mut self, cpu: usize, now: u64, this_load: u64) {
        let jiffies = self.jiffies(now);
        let rq = &mut self.rq[cpu];
        let pending = jiffies.saturating_sub(rq.last_load_update_tick).max(1);
        rq.last_load_update_tick = jiffies;
        rq.cpu_load[0] = this_load;
        for i in 1..5u32 {
            let scale = 1u64 << i;
            let mut old = rq.cpu_load[i as usize];
            // Missed ticks: each one decays old by (2^i − 1)/2^i with no new load.
            for _ in 1..pending.min(64) {
                old = (old * (scale - 1)) >> i;
            }
            let mut new = this_load;
            // Round up when rising so the index can reach the new load.
            if new > old {
                new += scale - 1;
            }
            rq.cpu_load[i as usize] = (old * (scale - 1) + new) >> i;
        }
    }

    /// `weighted_cpuload()`: the CPU's runnable load average.
    pub fn weighted_cpuload(&self, cpu: usize) -> u64 {
        self.rq[cpu].cfs.avg.runnable_load_avg
    }

    /// `source_load()` (v4.19 L5433): a low guess of a remote CPU's load.
    pub fn source_load(&self, cpu: usize, idx: u32) -> u64 {
        let total = self.weighted_cpuload(cpu);
        if idx == 0 || !self.feat.lb_bias {
            return total;
        }
        self.rq[cpu].cpu_load[idx as usize - 1].min(total)
    }

    /// `target_load()` (v4.19 L5448): a high guess of the local CPU's load.
    pub fn target_load(&self, cpu: usize, idx: u32) -> u64 {
        let total = self.weighted_cpuload(cpu);
        if idx == 0 || !self.feat.lb_bias {
            return total;
        }
        self.rq[cpu].cpu_load[idx as usize - 1].max(total)
    }

    /// `cpu_util()` (v4.19): utilisation clamped to the CPU's original capacity.
    pub fn cpu_util(&self, cpu: usize) -> u64 {
        self.rq[cpu].cfs.avg.util_avg.min(self.rq[cpu].cpu_capacity)
    }

    /// `idle_cpu()`: nothing running or queued, and not already woken.
    pub fn idle_cpu(&self, sys: &System, cpu: usize) -> bool {
        sys.cpu_idle(cpu) && self.rq[cpu].cfs.nr_running == 0
    }

    // ------------------------------------------------------------ STEAL bookkeeping

    /// `overload_set()` (steal series): this CPU has two or more fair tasks.
    pub fn overload_set(&mut self, cpu: usize) {
        if self.steal_enabled {
            let llc = self.llc_id(cpu);
            self.overload_cpus[llc].set(cpu);
        }
    }

    /// `overload_clear()`.
    pub fn overload_clear(&mut self, cpu: usize) {
        if self.steal_enabled {
            let llc = self.llc_id(cpu);
            self.overload_cpus[llc].clear(cpu);
        }
    }

    /// Setting or clearing a bit of the shared overload mask is an atomic on a cache
    /// line other CPUs write too; the seed counts it in `%find`. Charged to the CPU
    /// doing the enqueue or dequeue.
    pub fn charge_overload_update(&self, sys: &mut System, cpu: usize, was_overloaded: bool) {
        if self.steal_enabled && was_overloaded != (self.rq[cpu].cfs.nr_running >= 2) {
            let this = sys.this_cpu();
            sys.charge_search(this, 0, 1, 0);
        }
    }

    /// Moves queued, not running `p` from `src` to `dst` (`detach_task()` +
    /// `attach_task()`, fair.c v4.19 L7159/L7267), with the wakeup-preemption check
    /// on `dst` that `attach_task()` does.
    pub fn move_task(&mut self, sys: &mut System, p: TaskId, src: usize, dst: usize, this_cpu: usize) {
        let now = sys.now_ns;
        let (src_over, dst_over) = (self.rq[src].cfs.nr_running >= 2, self.rq[dst].cfs.nr_running >= 2);
        self.dequeue_entity(src, p, false, now);
        self.charge_overload_update(sys, src, src_over);
        self.detach_load(src, p);
        sys.set_task_cpu(p, dst);
        self.enqueue_entity(dst, p, false, false, now);
        self.charge_overload_update(sys, dst, dst_over);
        // attach_task() → check_preempt_curr().
        match sys.curr(dst) {
            None => sys.resched_cpu(dst, this_cpu),
            Some(curr) => {
                if self.check_preempt_wakeup(sys, dst, curr, p, false) {
                    sys.resched_cpu(dst, this_cpu);
                }
            }
        }
    }

    /// `check_preempt_wakeup()` (v4.19 L6515), without groups.
    pub fn check_preempt_wakeup(&mut self, sys: &mut System, cpu: usize, curr: TaskId, p: TaskId, fork: bool) -> bool {
        if curr == p {
            return false;
        }
        let scale = self.rq[cpu].cfs.nr_running as u64 >= self.sysctl.nr_latency;
        let mut next_buddy_marked = false;
        if self.feat.next_buddy && scale && !fork {
            self.rq[cpu].cfs.next = Some(p);
            next_buddy_marked = true;
        }
        // A reschedule is already pending: nothing to decide (and no buddy to set).
        if sys.need_resched(cpu) {
            return false;
        }
        if !self.feat.wakeup_preemption {
            return false;
        }
        self.update_curr(cpu, sys.now_ns);
        if self.wakeup_preempt_entity(Some(cpu), curr, p) == 1 {
            // Bias the next pick towards the task that caused the preemption.
            if !next_buddy_marked {
                self.rq[cpu].cfs.next = Some(p);
            }
            if self.feat.last_buddy && scale && self.se[curr].on_rq {
                self.rq[cpu].cfs.last = Some(curr);
            }
            return true;
        }
        false
    }
}

/// Builds the machine-dependent state once the topology is known.
impl Cfs {
    fn boot(&mut self, sys: &mut System) {
        self.boot_on(&sys.topo, sys.tick_ns);
    }

    /// Boot on a machine: scaled sysctls, domains, per-CPU runqueues.
    pub fn boot_on(&mut self, topo: &schedlab_core::Topology, tick_ns: u64) {
        let n = topo.ncpus();
        self.tick_ns = tick_ns;
        let requested = std::mem::take(&mut self.pending_sysctls);
        self.sysctl = Sysctls::boot(n);
        self.sysctl.apply(&requested).expect("validated in new()");
        self.doms = domains::build(topo, self.version);
        let nllc = self.doms.iter().map(|d| d.sd_llc_id).max().unwrap_or(0) + 1;
        self.has_idle_cores = vec![false; nllc];
        self.avg_scan_cost_ns = vec![0; nllc];
        self.overload_cpus = vec![schedlab_core::cpuset::CpuSet::new(n); nllc];
        self.steal_enabled = self.feat.steal && topo.node_cpus.len() <= self.steal_node_limit;
        self.rq = (0..n)
            .map(|cpu| Rq {
                cfs: CfsRq { min_vruntime: MIN_VRUNTIME_START, ..CfsRq::default() },
                // sched_init(): avg_idle = 2 × migration cost, max_idle_balance_cost = migration cost.
                avg_idle_ns: 2 * self.sysctl.migration_cost_ns,
                wake_avg_idle_ns: 2 * self.sysctl.migration_cost_ns,
                wake_stamp: 0,
                idle_stamp_ns: None,
                max_idle_balance_cost_ns: self.sysctl.migration_cost_ns,
                next_balance: 0,
                cpu_load: [0; 5],
                last_load_update_tick: 0,
                cpu_capacity: domains::cpu_capacity_orig(topo, cpu, self.version),
                active_balance_to: None,
                nohz_kick: false,
            })
            .collect();
    }
}

impl SchedClass for Cfs {
    fn name(&self) -> String {
        format!("cfs@{}{}", self.version.name(), self.feat.suffix())
    }

    fn init(&mut self, sys: &mut System) {
        self.boot(sys);
    }

    /// `sched_fork()` + `task_fork_fair()` (v4.19 L9668): start at the parent's
    /// vruntime, placed with START_DEBIT, made relative to min_vruntime.
    fn task_fork(&mut self, sys: &mut System, p: TaskId, parent: Option<TaskId>) {
        let now = sys.now_ns;
        let nice = sys.tasks[p].nice;
        let cpu = parent.map_or(sys.tasks[p].cpu, |pp| sys.tasks[pp].cpu);
        let load = LoadWeight::for_nice(nice, self.res);
        // init_entity_runnable_average(): a new task starts with full load.
        let w = self.res.scale_load_down(load.weight);
        let avg = SchedAvg::new_task(w);
        let se = Se {
            load,
            vruntime: 0,
            exec_start_ns: now,
            sum_exec_runtime_ns: 0,
            prev_sum_exec_runtime_ns: 0,
            on_rq: false,
            rq_cpu: cpu,
            avg,
            wakee_flips: 0,
            wakee_flip_decay_ts: 0,
            last_wakee: None,
            recent_used_cpu: cpu,
            mru_key: 0,
            tree_key: None,
        };
        if p >= self.se.len() {
            self.se.resize(p + 1, se.clone());
        }
        self.se[p] = se;
        self.update_curr(cpu, now);
        if let Some(curr) = self.rq[cpu].cfs.curr {
            self.se[p].vruntime = self.se[curr].vruntime;
        }
        self.place_entity(cpu, p, true);
        let min = self.rq[cpu].cfs.min_vruntime;
        self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(min);
        // Not attached anywhere yet: wake_up_new_task() attaches it where it lands.
        self.se[p].rq_cpu = usize::MAX;
    }

    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, waker_cpu: usize, flags: WakeFlags) -> usize {
        self.select_task_rq_fair(sys, p, prev_cpu, waker_cpu, flags)
    }

    fn enqueue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: EnqueueReason) {
        let now = sys.now_ns;
        let was_overloaded = self.rq[cpu].cfs.nr_running >= 2;
        let wakeup = reason == EnqueueReason::Wakeup;
        let from = self.se[p].rq_cpu;
        let migrated = wakeup && from != cpu && from != usize::MAX;
        if migrated {
            // migrate_task_rq_fair(): vruntime relative to the old queue, load detached.
            self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(self.rq[from].cfs.min_vruntime);
            self.detach_load(from, p);
        }
        if reason == EnqueueReason::New {
            // wake_up_new_task() → post_init_entity_util_avg(): the new task's
            // utilisation is estimated from the runqueue it lands on.
            let cfs_avg = self.rq[cpu].cfs.avg;
            let w = self.se[p].load.weight;
            self.se[p].avg.post_init_util_avg(&cfs_avg, w);
        }
        self.enqueue_entity(cpu, p, wakeup, migrated, now);
        self.charge_overload_update(sys, cpu, was_overloaded);
        if wakeup {
            // ttwu_do_wakeup(): a wakeup onto an idle CPU updates its avg_idle.
            if let Some(stamp) = self.rq[cpu].idle_stamp_ns.take() {
                let rq = &mut self.rq[cpu];
                let delta = now.saturating_sub(stamp) as i64;
                let avg = rq.avg_idle_ns as i64;
                let max = 2 * rq.max_idle_balance_cost_ns;
                rq.avg_idle_ns = ((avg + ((delta - avg) >> 3)).max(0) as u64).min(max);
                rq.wake_avg_idle_ns = rq.avg_idle_ns / 2;
                rq.wake_stamp = now / self.tick_ns;
            }
        }
    }

    fn dequeue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: DequeueReason) {
        let was_overloaded = self.rq[cpu].cfs.nr_running >= 2;
        self.dequeue_entity(cpu, p, reason != DequeueReason::Migrate, sys.now_ns);
        self.charge_overload_update(sys, cpu, was_overloaded);
        if reason == DequeueReason::Exit {
            self.detach_load(cpu, p);
        }
    }

    fn check_preempt_curr(&mut self, sys: &mut System, cpu: usize, p: TaskId, flags: WakeFlags) -> bool {
        let Some(curr) = sys.curr(cpu) else { return true };
        let fork = flags.reason == schedlab_core::sched::SelectReason::Fork;
        self.check_preempt_wakeup(sys, cpu, curr, p, fork)
    }

    /// `pick_next_task_fair()` (v4.19 L6599), with the steal series' idle path:
    /// `idle_balance()`, then `try_steal()` if it found nothing.
    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, prev: Option<TaskId>) -> Option<TaskId> {
        let now = sys.now_ns;
        if let Some(prev) = prev {
            self.put_prev_entity(cpu, prev, now);
        } else {
            // The previous task blocked or exited: it is already dequeued.
            self.rq[cpu].cfs.curr = None;
        }
        if let Some(dst) = self.rq[cpu].active_balance_to.take() {
            self.active_push(sys, cpu, dst);
        }
        if self.rq[cpu].nohz_kick {
            self.rq[cpu].nohz_kick = false;
            self.nohz_idle_balance(sys, cpu);
        }
        loop {
            if self.rq[cpu].cfs.nr_running > 0 {
                let p = self.pick_next_entity(cpu).expect("nr_running > 0 means a queued task");
                self.set_next_entity(cpu, p, now);
                self.mru_touch(cpu, p);
                return Some(p);
            }
            // The steal series sets idle_stamp here so the search counts as idle time.
            self.rq[cpu].idle_stamp_ns = Some(now);
            let mut pulled = self.idle_balance(sys, cpu);
            if pulled == 0 && self.steal_enabled {
                pulled = self.try_steal(sys, cpu);
            }
            if pulled > 0 {
                self.rq[cpu].idle_stamp_ns = None;
                continue;
            }
            // pick_next_task_idle() → update_idle_core(); going tickless keeps the
            // current load as cpu_load[0] (cpu_load_update_nohz_start()).
            self.update_idle_core(sys, cpu);
            self.rq[cpu].cpu_load[0] = self.weighted_cpuload(cpu);
            return None;
        }
    }

    fn task_tick(&mut self, sys: &mut System, cpu: usize, curr: TaskId) -> bool {
        let now = sys.now_ns;
        self.update_curr(cpu, now);
        self.update_load_avg(cpu, Some(curr), now);
        // scheduler_tick() → cpu_load_update_active().
        let load = self.weighted_cpuload(cpu);
        self.cpu_load_update(cpu, now, load);
        if self.rq[cpu].cfs.nr_running > 1 {
            return self.check_preempt_tick(cpu, curr);
        }
        false
    }

    fn trigger_load_balance(&mut self, sys: &mut System, cpu: usize) {
        self.trigger_load_balance_fair(sys, cpu);
    }

    /// `yield_task_fair()` (v4.19 L6750): mark as skip buddy.
    fn yield_task(&mut self, sys: &mut System, cpu: usize, curr: TaskId) {
        if self.rq[cpu].cfs.nr_running <= 1 {
            return;
        }
        self.clear_buddies(cpu, curr);
        self.update_curr(cpu, sys.now_ns);
        self.rq[cpu].cfs.skip = Some(curr);
    }

    fn reweight_task(&mut self, sys: &mut System, p: TaskId, _old_weight: u32) {
        let cpu = sys.tasks[p].cpu;
        let on_rq = self.se[p].on_rq;
        let now = sys.now_ns;
        let is_curr = self.rq[cpu].cfs.curr == Some(p);
        if on_rq {
            self.update_curr(cpu, now);
            if !is_curr {
                self.tree_remove(cpu, p);
            }
            let cfs = &mut self.rq[cpu].cfs;
            cfs.load.sub(self.se[p].load.weight);
            cfs.runnable_weight = cfs.runnable_weight.saturating_sub(self.se[p].load.weight);
        }
        self.se[p].load = LoadWeight::for_nice(sys.tasks[p].nice, self.res);
        if on_rq {
            let w = self.se[p].load.weight;
            let cfs = &mut self.rq[cpu].cfs;
            cfs.load.add(w);
            cfs.runnable_weight += w;
            if !is_curr {
                self.tree_insert(cpu, p);
            }
        }
    }

    fn nr_running(&self, cpu: usize) -> usize {
        self.rq[cpu].cfs.nr_running
    }

    fn nr_running_total(&self) -> usize {
        self.nr_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::Topology;

    fn cfs_on(spec: &str, features: Option<&str>, sysctls: &[(&str, &str)]) -> Cfs {
        cfs_version_on("4.19", spec, features, sysctls)
    }

    fn cfs_version_on(version: &str, spec: &str, features: Option<&str>, sysctls: &[(&str, &str)]) -> Cfs {
        let s: Vec<(String, String)> = sysctls.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut c = Cfs::new(version, features, &s).unwrap();
        c.boot_on(&Topology::parse(spec).unwrap(), 4_000_000);
        c
    }

    fn add_task(c: &mut Cfs, nice: i32) -> TaskId {
        let se = Se {
            load: LoadWeight::for_nice(nice, c.res),
            vruntime: 0,
            exec_start_ns: 0,
            sum_exec_runtime_ns: 0,
            prev_sum_exec_runtime_ns: 0,
            on_rq: false,
            rq_cpu: usize::MAX,
            avg: SchedAvg::default(),
            wakee_flips: 0,
            wakee_flip_decay_ts: 0,
            last_wakee: None,
            recent_used_cpu: 0,
            mru_key: 0,
            tree_key: None,
        };
        c.se.push(se);
        c.se.len() - 1
    }

    #[test]
    fn period_scales_past_nr_latency() {
        let c = cfs_on("x6-2-20", None, &[]);
        // ≥ 8 CPUs: latency 24 ms, min_granularity 3 ms, nr_latency 8.
        assert_eq!(c.sched_period(5), 24_000_000);
        assert_eq!(c.sched_period(8), 24_000_000);
        assert_eq!(c.sched_period(12), 36_000_000);
    }

    #[test]
    fn slice_splits_the_period_by_weight() {
        let mut c = cfs_on("x6-2-20", None, &[]);
        let a = add_task(&mut c, 0);
        let b = add_task(&mut c, 0);
        c.enqueue_entity(0, a, false, false, 0);
        c.enqueue_entity(0, b, false, false, 0);
        // 24 ms × 1024/2048 through __calc_delta's inverse: a hair under 12 ms.
        assert_eq!(c.sched_slice(0, a), 11_999_994);
        // A waking nice-5 task against two nice-0 ones: 335/2383 of the 24 ms period.
        let d = add_task(&mut c, 5);
        let s = c.sched_slice(0, d);
        let exact = 24_000_000u64 * 335 / (2048 + 335);
        assert!(s.abs_diff(exact) < 1000, "{s} vs {exact}");
    }

    #[test]
    fn wakeup_preemption_needs_more_than_the_granularity() {
        let mut c = cfs_on("x6-2-20", None, &[("sched_wakeup_granularity_ns", "15000000")]);
        let curr = add_task(&mut c, 0);
        let woken = add_task(&mut c, 0);
        c.se[woken].vruntime = 1_000_000_000;
        c.se[curr].vruntime = 1_000_000_000 + 15_000_000;
        assert_eq!(c.wakeup_preempt_entity(None, curr, woken), 0, "exactly the granularity ahead: no preemption");
        c.se[curr].vruntime += 1;
        assert_eq!(c.wakeup_preempt_entity(None, curr, woken), 1);
        c.se[curr].vruntime = 999_000_000;
        assert_eq!(c.wakeup_preempt_entity(None, curr, woken), -1);
        // A nice-19 wakee needs 1024/15 × the granularity in its virtual time.
        let light = add_task(&mut c, 19);
        assert_eq!(c.wakeup_gran(None, light), calc_delta_fair(15_000_000, &mut c.se[light].load.clone(), c.res));
        assert!(c.wakeup_gran(None, light) > 1_000_000_000);
    }

    #[test]
    fn scale_wakeup_gran_multiplies_by_half_the_queue_up_to_nr_latency() {
        // 80 CPUs: the normalized 1 ms granularity × (1 + ilog2(8)) = 4 ms; nr_latency 8.
        let mut on = cfs_version_on("5.15", "2x1x20x2", Some("SCALE_WAKEUP_GRAN"), &[]);
        let mut off = cfs_version_on("5.15", "2x1x20x2", None, &[]);
        assert_eq!((on.sysctl.wakeup_granularity_ns, on.sysctl.nr_latency), (4_000_000, 8));
        for (nr_running, factor) in [(1usize, 1u64), (2, 1), (9, 4), (40, 8)] {
            for c in [&mut on, &mut off] {
                let p = add_task(c, 0);
                c.rq[0].cfs.nr_running = nr_running;
                // A nice-0 wakee: virtual time equals real time.
                assert_eq!(c.wakeup_gran(None, p), 4_000_000, "buddy picks never scale");
            }
            let p = add_task(&mut on, 0);
            assert_eq!(on.wakeup_gran(Some(0), p), 4_000_000 * factor, "nr_running {nr_running}");
            let p = add_task(&mut off, 0);
            assert_eq!(off.wakeup_gran(Some(0), p), 4_000_000, "feature off, nr_running {nr_running}");
        }
    }

    #[test]
    fn sleeper_credit_is_half_the_latency_and_never_backwards() {
        let mut c = cfs_on("x6-2-20", None, &[]);
        let p = add_task(&mut c, 0);
        let min = c.rq[0].cfs.min_vruntime;
        c.se[p].vruntime = 0;
        c.place_entity(0, p, false);
        assert_eq!(c.se[p].vruntime, min - 12_000_000);
        c.se[p].vruntime = min + 5;
        c.place_entity(0, p, false);
        assert_eq!(c.se[p].vruntime, min + 5, "a task ahead keeps its vruntime");
        let mut no = cfs_on("x6-2-20", Some("NO_GENTLE_FAIR_SLEEPERS"), &[]);
        let q = add_task(&mut no, 0);
        no.place_entity(0, q, false);
        assert_eq!(no.se[q].vruntime, no.rq[0].cfs.min_vruntime - 24_000_000);
    }

    #[test]
    fn fork_starts_one_vslice_right_with_start_debit() {
        let mut c = cfs_on("x6-2-20", None, &[]);
        let a = add_task(&mut c, 0);
        c.enqueue_entity(0, a, false, false, 0);
        let p = add_task(&mut c, 0);
        c.place_entity(0, p, true);
        // Two tasks counting the newcomer: vslice = 12 ms (less __calc_delta rounding).
        assert_eq!(c.se[p].vruntime - c.rq[0].cfs.min_vruntime, 11_999_994);
    }

    #[test]
    fn overload_mask_follows_one_two_transitions() {
        let mut c = cfs_on("x6-2-20", Some("STEAL"), &[]);
        assert!(c.steal_enabled);
        let a = add_task(&mut c, 0);
        let b = add_task(&mut c, 0);
        let d = add_task(&mut c, 0);
        c.enqueue_entity(3, a, false, false, 0);
        assert!(!c.overload_cpus[0].contains(3));
        c.enqueue_entity(3, b, false, false, 0);
        assert!(c.overload_cpus[0].contains(3), "1 → 2 sets the bit");
        c.enqueue_entity(3, d, false, false, 0);
        c.dequeue_entity(3, d, true, 0);
        assert!(c.overload_cpus[0].contains(3), "3 → 2 keeps it");
        c.dequeue_entity(3, b, true, 0);
        assert!(!c.overload_cpus[0].contains(3), "2 → 1 clears it");
        // Without the feature the mask stays empty.
        let mut off = cfs_on("x6-2-20", None, &[]);
        let (a, b) = (add_task(&mut off, 0), add_task(&mut off, 0));
        off.enqueue_entity(1, a, false, false, 0);
        off.enqueue_entity(1, b, false, false, 0);
        assert!(off.overload_cpus[0].is_empty());
    }

    #[test]
    fn steal_is_off_beyond_two_nodes() {
        assert!(cfs_on("2x1x4x2", Some("STEAL"), &[]).steal_enabled);
        assert!(!cfs_on("4x1x4x2", Some("STEAL"), &[]).steal_enabled);
    }

    #[test]
    fn policy_names_round_trip_features() {
        assert_eq!(cfs_on("kvm-4", Some("STEAL"), &[]).name(), "cfs@4.19+STEAL");
        assert_eq!(cfs_on("kvm-4", Some("NO_WA_IDLE+STEAL"), &[]).name(), "cfs@4.19+STEAL+NO_WA_IDLE");
        assert!(Cfs::new("4.19", Some("STEEL"), &[]).is_err());
        assert!(Cfs::new("3.10", None, &[]).is_err());
    }
}
