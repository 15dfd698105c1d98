//! CFS runqueues and entity timing (fair.c, v4.19): vruntime, slices, placement,
//! tick and wakeup preemption, buddies, and the `SchedClass` hooks that call them.
//! Entities are tasks or group entities (their state in `state.rs`, what groups do
//! in `group.rs`); every function takes the cfs_rq it works on as (group, CPU),
//! group 0 being the CPU's root runqueue.

use schedlab_core::sched::{DequeueReason, EnqueueReason, Launcher, SchedClass, System, WakeFlags};
use schedlab_core::task::TaskId;

use super::domains::{self, KernelVersion};
use super::pelt::{SchedAvg, LOAD_AVG_MAX, SCHED_CAPACITY_SCALE};
use super::state::{Cfs, CfsRq, DequeueKind, EnqueueFlags, Ent, Rq, Se, StopperWork, TaskGroup, MIN_VRUNTIME_START};
use super::sysctl::Sysctls;
use super::weights::{calc_delta, calc_delta_fair, LoadWeight};

/// `UTIL_AVG_UNCHANGED` (v5.13+): the flag in a task's util_est saying its
/// utilisation has not been recomputed since its enqueue.
const UTIL_AVG_UNCHANGED: u32 = 0x8000_0000;

/// `UTIL_AVG_UNCHANGED` before v5.13: the lowest bit of `util_est.enqueued`.
const UTIL_AVG_UNCHANGED_LSB: u32 = 0x1;

/// `UTIL_EST_MARGIN` (1% of capacity): changes of an estimate smaller than this
/// are not recorded.
const UTIL_EST_MARGIN: u64 = SCHED_CAPACITY_SCALE / 100;

/// `UTIL_EST_WEIGHT_SHIFT`: a new sample weighs a quarter in the moving average.
const UTIL_EST_WEIGHT_SHIFT: u32 = 2;

/// `within_margin()` (fair.c, v4.17-v6.7): |value| < margin.
fn within_margin(value: i64, margin: u64) -> bool {
    value.unsigned_abs() < margin
}

impl Cfs {
    pub fn jiffies(&self, now_ns: u64) -> u64 {
        now_ns / self.tick_ns
    }

    pub fn llc_id(&self, cpu: usize) -> usize {
        self.doms[cpu].sd_llc_id
    }

    // ------------------------------------------------------------ entity timing

    /// `se_weight()`: the unscaled weight PELT multiplies by. v5.7+ (26cf52229efc)
    /// keeps any non-zero weight at 2 or more; v4.19 shifts tiny group weights to 0.
    pub fn se_weight(&self, weight: u64) -> u64 {
        if self.reworked_balancer() {
            self.res.scale_load_down_v57(weight)
        } else {
            self.res.scale_load_down(weight)
        }
    }

    /// `update_curr()` (fair.c v4.19 L802): charge the running entity of group
    /// `q`'s cfs_rq on `cpu` its time.
    pub fn update_curr(&mut self, q: usize, cpu: usize, now: u64) {
        let Some(curr) = self.cfs(q, cpu).curr else { return };
        let res = self.res;
        let se = self.ent_mut(curr);
        let delta = now.saturating_sub(se.exec_start_ns);
        if delta == 0 {
            return;
        }
        se.exec_start_ns = now;
        se.sum_exec_runtime_ns += delta;
        se.vruntime += calc_delta_fair(delta, &mut se.load, res);
        if self.version.eevdf() {
            self.update_curr_eevdf(q, cpu, curr);
            return;
        }
        if self.version == KernelVersion::V3_0 {
            self.cfs_mut(q, cpu).load_unacc_exec_ns += delta;
        }
        self.update_min_vruntime(q, cpu);
    }

    /// `update_curr_fair()`: the running task's own level.
    pub fn update_curr_task(&mut self, cpu: usize, p: TaskId, now: u64) {
        let q = self.task_group[p];
        self.update_curr(q, cpu, now);
    }

    /// `update_min_vruntime()` (v4.19 L496): monotonic max of min(curr, leftmost).
    pub fn update_min_vruntime(&mut self, q: usize, cpu: usize) {
        if self.version.eevdf() {
            self.update_min_vruntime_eevdf(q, cpu);
            return;
        }
        let vruntime = self.min_vruntime_candidate(q, cpu);
        let cfs = self.cfs_mut(q, cpu);
        cfs.min_vruntime = cfs.min_vruntime.max(vruntime);
    }

    /// What `update_min_vruntime()` moves towards: the smaller of the running
    /// entity's vruntime (if queued) and the leftmost one's, else where it is.
    pub fn min_vruntime_candidate(&self, q: usize, cpu: usize) -> u64 {
        let cfs = self.cfs(q, cpu);
        let curr = cfs.curr.filter(|&c| self.ent(c).on_rq).map(|c| self.ent(c).vruntime);
        let left = cfs.timeline.first().map(|&(v, _, _)| v);
        match (curr, left) {
            (Some(c), Some(l)) => c.min(l),
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => cfs.min_vruntime,
        }
    }

    /// `__sched_period()` (v4.19 L644).
    pub fn sched_period(&self, nr_running: u64) -> u64 {
        if nr_running > self.sysctl.nr_latency {
            nr_running * self.sysctl.min_granularity_ns
        } else {
            self.sysctl.latency_ns
        }
    }

    /// `sched_slice()` (v4.19 L658): the period of `e`'s cfs_rq, split by weight at
    /// every level up to the root.
    pub fn sched_slice(&mut self, cpu: usize, e: Ent) -> u64 {
        let q = self.q_of(e);
        let on_rq = self.ent(e).on_rq;
        let mut slice = self.sched_period(self.cfs(q, cpu).nr_running as u64 + u64::from(!on_rq));
        let mut at = Some(e);
        while let Some(x) = at {
            let q = self.q_of(x);
            let se = self.ent(x);
            let mut load = self.cfs(q, cpu).load;
            if !se.on_rq {
                load.add(se.load.weight);
            }
            slice = calc_delta(slice, se.load.weight, &mut load, self.res);
            at = self.parent_ent(x, cpu);
        }
        slice
    }

    /// `sched_vslice()`: the slice in virtual time.
    pub fn sched_vslice(&mut self, cpu: usize, e: Ent) -> u64 {
        let slice = self.sched_slice(cpu, e);
        let res = self.res;
        calc_delta_fair(slice, &mut self.ent_mut(e).load, res)
    }

    /// `place_entity()` (v4.19 L3772): START_DEBIT for new tasks, half-latency
    /// sleeper credit (GENTLE_FAIR_SLEEPERS) for wakeups, never backwards.
    pub fn place_entity(&mut self, q: usize, cpu: usize, e: Ent, initial: bool) {
        if self.version.eevdf() {
            self.place_entity_eevdf(q, cpu, e, initial);
            return;
        }
        let mut vruntime = self.cfs(q, cpu).min_vruntime;
        if initial && self.feat.start_debit {
            vruntime += self.sched_vslice(cpu, e);
        }
        if !initial {
            let mut thresh = self.sysctl.latency_ns;
            if self.feat.gentle_fair_sleepers {
                thresh >>= 1;
            }
            vruntime = vruntime.saturating_sub(thresh);
        }
        let se = self.ent_mut(e);
        se.vruntime = se.vruntime.max(vruntime);
    }

    /// `__enqueue_entity()`; EEVDF also adds the entity to the weighted sums
    /// (`avg_vruntime_add()`) and the deadline index.
    pub fn tree_insert(&mut self, q: usize, cpu: usize, e: Ent) {
        self.tree_seq += 1;
        let key = (self.ent(e).vruntime, self.tree_seq);
        self.ent_mut(e).tree_key = Some(key);
        self.cfs_mut(q, cpu).timeline.insert((key.0, key.1, e));
        if self.version.eevdf() {
            let slice = self.ent(e).slice_ns;
            self.ent_mut(e).tree_slice_ns = slice;
            let slices = &mut self.cfs_mut(q, cpu).queued_slices;
            match slices.binary_search_by_key(&slice, |&(s, _)| s) {
                Ok(i) => slices[i].1 += 1,
                Err(i) => slices.insert(i, (slice, 1)),
            }
            self.avg_vruntime_add(q, cpu, e);
            let dl = (self.ent(e).deadline, self.tree_seq);
            self.ent_mut(e).dl_key = Some(dl);
            self.cfs_mut(q, cpu).by_deadline.insert((dl.0, dl.1, e));
        }
    }

    /// `__dequeue_entity()`.
    pub fn tree_remove(&mut self, q: usize, cpu: usize, e: Ent) {
        if let Some((v, s)) = self.ent_mut(e).tree_key.take() {
            self.cfs_mut(q, cpu).timeline.remove(&(v, s, e));
            if self.version.eevdf() {
                let slice = self.ent(e).tree_slice_ns;
                let slices = &mut self.cfs_mut(q, cpu).queued_slices;
                let i = slices.binary_search_by_key(&slice, |&(s, _)| s).expect("a queued entity's slice is counted");
                slices[i].1 -= 1;
                if slices[i].1 == 0 {
                    slices.remove(i);
                }
                self.avg_vruntime_sub(q, cpu, e);
            }
        }
        if let Some((d, s)) = self.ent_mut(e).dl_key.take() {
            self.cfs_mut(q, cpu).by_deadline.remove(&(d, s, e));
        }
    }

    /// `list_move(&se->group_node, &rq->cfs_tasks)`: `p` becomes the most
    /// recently picked task of `cpu`'s list, taken off any list it was on.
    pub(crate) fn mru_touch(&mut self, cpu: usize, p: TaskId) {
        self.mru_unlink(p);
        let newest = self.rq[cpu].cfs.cfs_tasks.newest;
        let se = &mut self.se[p];
        se.mru_cpu = Some(cpu);
        se.mru_older = newest;
        se.mru_newer = None;
        match newest {
            Some(n) => self.se[n].mru_newer = Some(p),
            None => self.rq[cpu].cfs.cfs_tasks.oldest = Some(p),
        }
        self.rq[cpu].cfs.cfs_tasks.newest = Some(p);
    }

    /// `list_del_init(&se->group_node)`: `p` leaves its CPU's `cfs_tasks`, if on one.
    pub(crate) fn mru_unlink(&mut self, p: TaskId) {
        let se = &mut self.se[p];
        let Some(cpu) = se.mru_cpu.take() else { return };
        let (older, newer) = (se.mru_older.take(), se.mru_newer.take());
        match older {
            Some(o) => self.se[o].mru_newer = newer,
            None => self.rq[cpu].cfs.cfs_tasks.oldest = newer,
        }
        match newer {
            Some(n) => self.se[n].mru_older = older,
            None => self.rq[cpu].cfs.cfs_tasks.newest = older,
        }
    }

    /// `cpu`'s `cfs_tasks`, the least recently picked first (the order
    /// `detach_tasks()` takes them in, from the list's tail).
    pub fn cfs_tasks(&self, cpu: usize) -> impl Iterator<Item = TaskId> + '_ {
        std::iter::successors(self.rq[cpu].cfs.cfs_tasks.oldest, move |&p| self.se[p].mru_newer)
    }

    /// `cpu`'s `cfs_tasks` is a well-linked list of tasks that know they are on it.
    fn check_cfs_tasks(&self, cpu: usize) -> Option<String> {
        let mut older = None;
        let mut at = self.rq[cpu].cfs.cfs_tasks.oldest;
        let mut n = 0;
        while let Some(p) = at {
            let se = &self.se[p];
            n += 1;
            if se.mru_cpu != Some(cpu) || se.mru_older != older || n > self.se.len() {
                return Some(format!(
                    "cpu{cpu} cfs_tasks: task {p} is linked wrongly (on {:?}, after {:?})",
                    se.mru_cpu, se.mru_older
                ));
            }
            older = at;
            at = se.mru_newer;
        }
        (self.rq[cpu].cfs.cfs_tasks.newest != older)
            .then(|| format!("cpu{cpu} cfs_tasks: the newest end is not the list's last task"))
    }

    /// `--check`: the CPU's summed estimate is its queued (not delayed) tasks'.
    fn check_util_est(&self, cpu: usize) -> Option<String> {
        if !self.keeps_util_est() {
            return None;
        }
        let queued: u64 =
            self.cfs_tasks_newest_first(cpu).filter(|&p| !self.se[p].sched_delayed).map(|p| self.task_util_est_raw(p)).sum();
        let sum = self.rq[cpu].cfs.util_est;
        (queued != sum).then(|| format!("cpu{cpu} util_est: the sum is {sum}, its queued tasks' estimates {queued}"))
    }

    /// `cpu`'s `cfs_tasks`, the most recently picked first.
    pub fn cfs_tasks_newest_first(&self, cpu: usize) -> impl Iterator<Item = TaskId> + '_ {
        std::iter::successors(self.rq[cpu].cfs.cfs_tasks.newest, move |&p| self.se[p].mru_older)
    }

    /// `update_load_avg()` (v4.19 L3723) for the task on `cpu` (if any) and its
    /// cfs_rq, at `now`.
    pub fn update_load_avg(&mut self, cpu: usize, p: Option<TaskId>, now: u64) {
        match p {
            Some(p) => {
                let q = self.task_group[p];
                self.update_load_avg_se(q, cpu, Some(Ent::Task(p)), now);
            }
            None => self.update_load_avg_se(0, cpu, None, now),
        }
    }

    /// `update_load_avg()` of one level: `__update_load_avg_se()` for `e` (if any)
    /// then `update_cfs_rq_load_avg()` for group `q`'s cfs_rq, publishing it to the
    /// group's sum when it decayed.
    pub fn update_load_avg_se(&mut self, q: usize, cpu: usize, e: Option<Ent>, now: u64) {
        if let Some(e) = e {
            let running = self.cfs(q, cpu).curr == Some(e);
            let runnable = self.se_runnable_ent(e);
            let w = self.se_weight(self.ent(e).load.weight);
            let se = self.ent_mut(e);
            let on_rq = se.on_rq;
            if se.avg.update_se(now, on_rq, running, w, runnable) {
                // cfs_se_util_change(): util_avg moved since the task's enqueue.
                se.util_est &= !UTIL_AVG_UNCHANGED;
                se.util_est_enqueued &= !(UTIL_AVG_UNCHANGED | UTIL_AVG_UNCHANGED_LSB);
            }
        }
        let reworked = self.reworked_balancer();
        // update_cfs_rq_load_avg() and then propagate_entity_load_avg(): the
        // cfs_rq is brought to `now` first, below.
        let propagate = match e {
            Some(Ent::Group(g, _)) if self.version >= KernelVersion::V4_19 => std::mem::take(&mut self.cfs_mut(g, cpu).propagate),
            _ => false,
        };
        let load = self.se_weight(self.cfs(q, cpu).load.weight);
        let res = self.res;
        let (version, nr_delayed) = (self.version, self.rq[cpu].nr_delayed);
        let cfs = self.cfs_mut(q, cpu);
        // v5.7+ replaced the weighted runnable load by `runnable_avg`: 1024 per
        // runnable task (`h_nr_running << SCHED_CAPACITY_SHIFT`), whatever its weight.
        // v6.14+ counts `h_nr_runnable` (delayed tasks left out; kept per CPU, so
        // for the root cfs_rq only: a group's cfs_rq still counts its delayed tasks).
        let nr = if q == 0 && version >= KernelVersion::V6_18 { cfs.h_nr_running - nr_delayed } else { cfs.h_nr_running };
        let runnable = if reworked { nr as u64 * 1024 } else { res.scale_load_down(cfs.runnable_weight) };
        let decayed = cfs.avg.update_cfs_rq(now, load, runnable, cfs.curr.is_some());
        if propagate {
            if let Some(Ent::Group(g, _)) = e {
                self.propagate_entity_load_avg(q, g, cpu);
            }
        }
        if decayed || propagate {
            self.update_tg_load_avg(q, cpu, now);
        }
    }

    /// `_task_util_est()`: the task's estimate. v6.8+: its one value without the
    /// flag; v5.13-v6.7: the larger of its moving average and its last
    /// activation's utilisation, without the flag; v4.17-v5.12: the same with
    /// the flag's lowest bit set (so an estimate is never 0 there).
    pub fn task_util_est_raw(&self, p: TaskId) -> u64 {
        let se = &self.se[p];
        if !self.util_est_two_fields() {
            return u64::from(se.util_est & !UTIL_AVG_UNCHANGED);
        }
        if self.version >= KernelVersion::V5_15 {
            u64::from(se.util_est.max(se.util_est_enqueued & !UTIL_AVG_UNCHANGED))
        } else {
            u64::from(se.util_est.max(se.util_est_enqueued) | UTIL_AVG_UNCHANGED_LSB)
        }
    }

    /// `task_util_est()`: the larger of the task's utilisation and its estimate.
    pub fn task_util_est(&self, p: TaskId) -> u64 {
        self.se[p].avg.util_avg.max(self.task_util_est_raw(p))
    }

    /// Whether util_est is kept: UTIL_EST (v4.17+), or HOST_VCPU_PACK, which
    /// reads the estimates whatever UTIL_EST says.
    fn keeps_util_est(&self) -> bool {
        self.feat.util_est || self.feat.host_vcpu_pack
    }

    /// `struct util_est` with its two members, `enqueued` and `ewma` (v4.17 to
    /// v6.7; v6.8's "sched/fair: Simplify util_est" left the moving average alone).
    fn util_est_two_fields(&self) -> bool {
        self.version < KernelVersion::V6_12
    }

    /// `util_est_enqueue()` (v4.19; v6.18): the task's estimate joins its CPU's.
    fn util_est_enqueue(&mut self, cpu: usize, p: TaskId) {
        if !self.keeps_util_est() {
            return;
        }
        let est = self.task_util_est_raw(p);
        self.rq[cpu].cfs.util_est += est;
    }

    /// `util_est_dequeue()` (v4.19; v6.18): and leaves it.
    fn util_est_dequeue(&mut self, cpu: usize, p: TaskId) {
        if !self.keeps_util_est() {
            return;
        }
        let est = self.task_util_est_raw(p);
        let cfs = &mut self.rq[cpu].cfs;
        cfs.util_est = cfs.util_est.saturating_sub(est);
    }

    /// `util_est_update()` at a task's dequeue for a sleep, unless its
    /// utilisation has not moved since its enqueue: v6.8+ in
    /// [`Self::util_est_update_v6_8`], before it in
    /// [`Self::util_est_update_two_fields`].
    fn util_est_update(&mut self, p: TaskId, sleep: bool) {
        if !sleep || !self.keeps_util_est() {
            return;
        }
        if self.util_est_two_fields() {
            self.util_est_update_two_fields(p);
        } else {
            self.util_est_update_v6_8(p);
        }
    }

    /// `util_est_update()` (v6.18 fair.c): the estimate follows a rise at once
    /// and a fall by a quarter of the gap, except within UTIL_EST_MARGIN of it or
    /// when the task waited for the CPU (its runnable average beyond its
    /// utilisation by more than the margin).
    fn util_est_update_v6_8(&mut self, p: TaskId) {
        let se = &mut self.se[p];
        if se.util_est & UTIL_AVG_UNCHANGED != 0 {
            return;
        }
        let mut ewma = u64::from(se.util_est);
        let dequeued = se.avg.util_avg;
        if ewma <= dequeued {
            ewma = dequeued;
        } else {
            let diff = ewma - dequeued;
            if diff >= UTIL_EST_MARGIN && dequeued + UTIL_EST_MARGIN >= se.avg.runnable_load_avg {
                ewma = ((ewma << 2) - diff) >> 2;
            }
        }
        se.util_est = ewma as u32 | UTIL_AVG_UNCHANGED;
    }

    /// `util_est_dequeue()`'s second half (v4.19 fair.c) and `util_est_update()`
    /// (v5.10, v5.15, v6.6): `enqueued` takes the task's utilisation now (with
    /// the flag) and the moving average moves a quarter of the way to it, except
    /// within UTIL_EST_MARGIN of it. v5.7+ with UTIL_EST_FASTUP takes a rise at
    /// once; v5.12+ (b89997aa88f0) still records an `enqueued` that moved by the
    /// margin; a utilisation above the CPU's capacity is skipped (v5.10+;
    /// never here, where every CPU's is SCHED_CAPACITY_SCALE); v6.2+ (50181c0cff31)
    /// keeps the average when the task waited for the CPU.
    fn util_est_update_two_fields(&mut self, p: TaskId) {
        let version = self.version;
        let fastup = self.feat.util_est_fastup;
        let msb_flag = version >= KernelVersion::V5_15;
        let se = &mut self.se[p];
        let flag = if msb_flag { UTIL_AVG_UNCHANGED } else { UTIL_AVG_UNCHANGED_LSB };
        if se.util_est_enqueued & flag != 0 {
            return;
        }
        let last_enqueued = i64::from(se.util_est_enqueued);
        let util = se.avg.util_avg;
        let mut enqueued = if msb_flag { util as u32 } else { util as u32 | UTIL_AVG_UNCHANGED_LSB };
        let mut ewma = se.util_est;
        'update: {
            if fastup && ewma < enqueued {
                ewma = enqueued;
                break 'update;
            }
            let last_ewma_diff = i64::from(enqueued) - i64::from(ewma);
            if within_margin(last_ewma_diff, UTIL_EST_MARGIN) {
                if version >= KernelVersion::V5_15 && !within_margin(last_enqueued - i64::from(enqueued), UTIL_EST_MARGIN) {
                    break 'update;
                }
                return;
            }
            if version >= KernelVersion::V5_10 && util > SCHED_CAPACITY_SCALE {
                return;
            }
            if version >= KernelVersion::V6_6 && util + UTIL_EST_MARGIN < se.avg.runnable_load_avg {
                break 'update;
            }
            // ewma(t) = ewma(t-1) + (enqueued - ewma(t-1)) / 4, in the kernel's
            // unsigned arithmetic.
            ewma = (ewma << UTIL_EST_WEIGHT_SHIFT).wrapping_add(last_ewma_diff as u32) >> UTIL_EST_WEIGHT_SHIFT;
        }
        if msb_flag {
            enqueued |= UTIL_AVG_UNCHANGED;
        }
        se.util_est_enqueued = enqueued;
        se.util_est = ewma;
    }

    /// `cpu_util()` as v6.18 reads it with UTIL_EST: the larger of the CPU's
    /// utilisation and its enqueued tasks' estimates, capped at its capacity
    /// (`arch_scale_cpu_capacity()`: SCHED_CAPACITY_SCALE on the modelled machines).
    /// (Read by HOST_VCPU_PACK, which takes the estimates even under
    /// `+NO_UTIL_EST`; with UTIL_EST on it is [`Self::cpu_util`].)
    pub fn cpu_util_est(&self, cpu: usize) -> u64 {
        let rq = &self.rq[cpu];
        rq.cfs.avg.util_avg.max(rq.cfs.util_est).min(SCHED_CAPACITY_SCALE)
    }

    /// `propagate_entity_load_avg()` (fair.c, every modelled release from v4.19; v6.18 L4646): after
    /// entities were attached to or detached from group `g`'s cfs_rq on `cpu`,
    /// its group entity takes that cfs_rq's utilisation and the load the change
    /// brought, and its parent cfs_rq (group `q`) the difference, at once: a
    /// task that migrates in brings its signals up the hierarchy instead of the
    /// group entity's own runnable time building them again. The parent is
    /// marked in turn with the same sum (`add_tg_cfs_propagate()`). The group
    /// entity's runnable signal is not propagated (v5.7+
    /// `update_tg_cfs_runnable()`): the modelled cfs_rq's runnable signal counts
    /// its own queued tasks and leaves at dequeue (see [`Self::se_runnable`]).
    pub fn propagate_entity_load_avg(&mut self, q: usize, g: usize, cpu: usize) {
        let runnable_sum = std::mem::take(&mut self.cfs_mut(g, cpu).prop_runnable_sum);
        self.add_tg_cfs_propagate(q, cpu, runnable_sum);
        self.update_tg_cfs_util(q, g, cpu);
        self.update_tg_cfs_load(q, g, cpu, runnable_sum);
    }

    /// `update_tg_cfs_util()` (fair.c, v4.10+; v6.18 L4553): the group entity
    /// takes its cfs_rq's utilisation, its parent cfs_rq the difference.
    fn update_tg_cfs_util(&mut self, q: usize, g: usize, cpu: usize) {
        let group_util = self.cfs(g, cpu).avg.util_avg;
        let divider = self.cfs(q, cpu).avg.divider();
        let se = &mut self.ent_mut(Ent::Group(g, cpu)).avg;
        let delta_avg = group_util as i64 - se.util_avg as i64;
        if delta_avg == 0 {
            return;
        }
        se.util_avg = group_util;
        let new_sum = (group_util * divider) as i64;
        let delta_sum = new_sum - i64::from(se.util_sum);
        se.util_sum = new_sum as u32;
        let parent = self.cfs_mut(q, cpu);
        parent.avg.util_avg = (parent.avg.util_avg as i64 + delta_avg).max(0) as u64;
        parent.avg.util_sum = (i64::from(parent.avg.util_sum) + delta_sum).max(0) as u32;
        // As update_cfs_rq_load_avg() keeps it: the sum never below what the
        // average needs at the smallest divider.
        let min_sum = parent.avg.util_avg * (LOAD_AVG_MAX - 1024);
        parent.avg.util_sum = parent.avg.util_sum.max(min_sum as u32);
    }

    /// `update_tg_cfs_load()` (fair.c, v5.7+; v6.18 L4590; v4.19's
    /// `update_tg_cfs_runnable()`, L3330, the same with LOAD_AVG_MAX for the
    /// divider and the runnable load set alike): the group entity's runnable
    /// time becomes its own plus what was attached below it (at most a full
    /// window), or, after a detach, at most its cfs_rq's load sum per unit of
    /// queued weight (all tasks taken as equally runnable); never below its
    /// running time. Its load is that time at its weight; the parent takes the
    /// difference. So a new task's full load reaches the root at its first
    /// enqueue, as the balancer and `wake_affine_weight()` read it.
    fn update_tg_cfs_load(&mut self, q: usize, g: usize, cpu: usize, runnable_sum: i64) {
        if runnable_sum == 0 {
            return;
        }
        let v4_19 = self.version == KernelVersion::V4_19;
        let divider = if v4_19 { LOAD_AVG_MAX } else { self.cfs(q, cpu).avg.divider() } as i64;
        let e = Ent::Group(g, cpu);
        let w = self.se_weight(self.ent(e).load.weight) as i64;
        let se = self.ent(e).avg;
        let mut runnable_sum = if runnable_sum >= 0 {
            (runnable_sum + se.load_sum as i64).min(divider)
        } else {
            let group_weight = self.se_weight(self.cfs(g, cpu).load.weight) as i64;
            let per_weight = if group_weight != 0 { self.cfs(g, cpu).avg.load_sum as i64 / group_weight } else { 0 };
            (se.load_sum as i64).min(per_weight)
        };
        let running_sum = i64::from(se.util_sum >> 10);
        runnable_sum = runnable_sum.max(running_sum);
        let load_sum = w * runnable_sum;
        let load_avg = load_sum / divider;
        let delta_avg = load_avg - se.load_avg as i64;
        if delta_avg == 0 && !v4_19 {
            return;
        }
        let delta_sum = load_sum - w * se.load_sum as i64;
        let on_rq = self.ent(e).on_rq;
        let runnable_w = self.se_runnable_ent(e) as i64;
        let se = &mut self.ent_mut(e).avg;
        se.load_sum = runnable_sum as u64;
        se.load_avg = load_avg as u64;
        let mut runnable_delta = (0, 0);
        if v4_19 {
            // v4.19 sets the runnable load the same way, and the parent's while queued.
            let runnable_load_sum = runnable_w * runnable_sum;
            let runnable_load_avg = runnable_load_sum / divider;
            runnable_delta =
                (runnable_load_avg - se.runnable_load_avg as i64, runnable_load_sum - w * se.runnable_load_sum as i64);
            se.runnable_load_sum = runnable_sum as u64;
            se.runnable_load_avg = runnable_load_avg as u64;
        }
        let version = self.version;
        let parent = &mut self.cfs_mut(q, cpu).avg;
        parent.load_avg = (parent.load_avg as i64 + delta_avg).max(0) as u64;
        parent.load_sum = (parent.load_sum as i64 + delta_sum).max(0) as u64;
        if version >= KernelVersion::V6_6 {
            // As update_cfs_rq_load_avg() keeps it (present in v6.1; not
            // modelled before v6.6): the sum never below what the average
            // needs at the smallest divider.
            parent.load_sum = parent.load_sum.max(parent.load_avg * (LOAD_AVG_MAX - 1024));
        }
        if v4_19 && on_rq {
            parent.runnable_load_avg = (parent.runnable_load_avg as i64 + runnable_delta.0).max(0) as u64;
            parent.runnable_load_sum = (parent.runnable_load_sum as i64 + runnable_delta.1).max(0) as u64;
        }
    }

    /// `add_tg_cfs_propagate()` (fair.c, v4.15+ with its runnable sum; v6.18 the
    /// same): group `q`'s cfs_rq on `cpu` changed
    /// under its group entity by `runnable_sum` (an unweighted load sum), which
    /// the entity takes on at its next update. The root has no entity above it.
    fn add_tg_cfs_propagate(&mut self, q: usize, cpu: usize, runnable_sum: i64) {
        if q != 0 {
            let cfs = self.cfs_mut(q, cpu);
            cfs.propagate = true;
            cfs.prop_runnable_sum += runnable_sum;
        }
    }

    /// The runnable weight of `p`'s entity: its unscaled weight (v4.19
    /// `se_runnable()`), or 1024 for the v5.7+ `runnable_avg`, which counts tasks.
    /// (v5.7+ also keeps a sleeping task's runnable history attached to its
    /// runqueue, decaying like its load; here it leaves at dequeue as in v4.19.)
    pub fn se_runnable(&self, p: TaskId) -> u64 {
        self.se_runnable_ent(Ent::Task(p))
    }

    /// `se_runnable()` of any entity: a group entity's v5.7+ runnable signal
    /// counts the tasks below it; v4.19's `calc_group_runnable()` is taken as the
    /// entity's weight.
    /// From v6.12 a delayed entity (asleep, still queued) is not runnable
    /// (`se_runnable()` returns false for `sched_delayed`).
    pub fn se_runnable_ent(&self, e: Ent) -> u64 {
        if self.version >= KernelVersion::V6_12 && self.ent(e).sched_delayed {
            return 0;
        }
        match (e, self.reworked_balancer()) {
            (Ent::Task(_), true) => 1024,
            (Ent::Group(g, cpu), true) => 1024 * self.tg[g].cfs_rq[cpu].h_nr_running.max(1) as u64,
            (e, false) => self.se_weight(self.ent(e).load.weight),
        }
    }

    /// `enqueue_entity()` (v4.19 L3857) of `e` on group `q`'s cfs_rq on `cpu`.
    /// EEVDF (v6.6 L5204) keeps no relative vruntimes: every enqueue is placed by
    /// lag (`initial` for a new task), the running entity before `update_curr()`.
    fn enqueue_entity(&mut self, q: usize, cpu: usize, e: Ent, flags: EnqueueFlags, now: u64) {
        let EnqueueFlags { wakeup, migrated, initial } = flags;
        let eevdf = self.version.eevdf();
        let renorm = (!wakeup || migrated) && !eevdf;
        let is_curr = self.cfs(q, cpu).curr == Some(e);
        if eevdf && is_curr {
            self.place_entity(q, cpu, e, initial);
        }
        if renorm && is_curr {
            let min = self.cfs(q, cpu).min_vruntime;
            let se = self.ent_mut(e);
            se.vruntime = se.vruntime.wrapping_add(min);
        }
        self.update_curr(q, cpu, now);
        if self.version == KernelVersion::V3_0 {
            // v3.0 enqueue_entity(): the group's window takes the time so far at
            // the old weight.
            self.update_cfs_load_v30(q, cpu, now, false);
        }
        if renorm && !is_curr {
            let min = self.cfs(q, cpu).min_vruntime;
            let se = self.ent_mut(e);
            se.vruntime = se.vruntime.wrapping_add(min);
        }
        // An entity arriving from elsewhere (new, or migrated) attaches its load here
        // (update_load_avg(DO_ATTACH) → attach_entity_load_avg()).
        let w_down = self.se_weight(self.ent(e).load.weight);
        if self.ent(e).rq_cpu != cpu {
            self.update_load_avg_se(q, cpu, None, now);
            let mut avg = self.ent(e).avg;
            self.cfs_mut(q, cpu).avg.attach(&mut avg, w_down);
            if self.reworked_balancer() {
                // v5.7+ attach_entity_load_avg(): `runnable_sum = runnable_avg *
                // divider` (a task's runnable counts 1024 per runnable unit), not
                // the load's sum.
                avg.runnable_load_sum = avg.runnable_load_avg * avg.divider() / 1024;
            }
            self.add_tg_cfs_propagate(q, cpu, avg.load_sum as i64);
            let se = self.ent_mut(e);
            se.avg = avg;
            se.rq_cpu = cpu;
            self.update_tg_load_avg(q, cpu, now);
        } else {
            self.update_load_avg_se(q, cpu, Some(e), now);
        }
        self.update_cfs_group(e, now);
        let w = self.ent(e).load.weight;
        let avg = self.ent(e).avg;
        let runnable = self.se_runnable_ent(e);
        let cfs = self.cfs_mut(q, cpu);
        cfs.runnable_weight += w;
        cfs.avg.enqueue_runnable_load(&avg, runnable);
        cfs.load.add(w);
        if eevdf && !is_curr {
            // Placed before account_entity_enqueue(): nr_running does not count it yet.
            self.place_entity(q, cpu, e, initial);
        }
        self.cfs_mut(q, cpu).nr_running += 1;
        if wakeup && !eevdf {
            self.place_entity(q, cpu, e, false);
        }
        if !is_curr {
            self.tree_insert(q, cpu, e);
        }
        self.ent_mut(e).on_rq = true;
    }

    /// `dequeue_entity()` (v4.19 L3957) of `e` from group `q`'s cfs_rq on `cpu`.
    /// EEVDF saves the lag instead of a relative vruntime; v6.12+ keeps an
    /// ineligible sleeping task queued (DELAY_DEQUEUE, false returned) and, for a
    /// non-sleep dequeue, the deadline relative to vruntime (PLACE_REL_DEADLINE).
    fn dequeue_entity(&mut self, q: usize, cpu: usize, e: Ent, kind: DequeueKind, now: u64) -> bool {
        self.update_curr(q, cpu, now);
        let eevdf = self.version.eevdf();
        let sleep = kind != DequeueKind::Save;
        let delayed = kind == DequeueKind::Delayed;
        if eevdf && kind == DequeueKind::Sleep && self.feat.delay_dequeue {
            // v6.18 clears the buddies first; v6.12.0 only a next buddy pointing
            // here, and only when it delays.
            let v618 = self.version >= KernelVersion::V6_18;
            if v618 {
                self.clear_buddies(q, cpu, e);
            }
            if !self.entity_eligible(q, cpu, e) {
                if !v618 && self.cfs(q, cpu).next == Some(e) {
                    self.cfs_mut(q, cpu).next = None;
                }
                self.update_load_avg_se(q, cpu, Some(e), now);
                self.ent_mut(e).sched_delayed = true;
                return false;
            }
        }
        if self.version == KernelVersion::V3_0 {
            self.update_cfs_load_v30(q, cpu, now, false);
        }
        self.update_load_avg_se(q, cpu, Some(e), now);
        let w = self.ent(e).load.weight;
        {
            let runnable = self.se_runnable_ent(e);
            let avg = self.ent(e).avg;
            let cfs = self.cfs_mut(q, cpu);
            cfs.runnable_weight = cfs.runnable_weight.saturating_sub(w);
            cfs.avg.dequeue_runnable_load(&avg, runnable);
        }
        self.clear_buddies(q, cpu, e);
        if eevdf {
            self.update_entity_lag(q, cpu, e);
            if !sleep && self.feat.place_rel_deadline {
                let se = self.ent_mut(e);
                se.deadline = se.deadline.wrapping_sub(se.vruntime);
                se.rel_deadline = true;
            }
        }
        if self.cfs(q, cpu).curr != Some(e) {
            self.tree_remove(q, cpu, e);
        }
        self.ent_mut(e).on_rq = false;
        let cfs = self.cfs_mut(q, cpu);
        cfs.load.sub(w);
        cfs.nr_running -= 1;
        if let Ent::Task(p) = e {
            self.mru_unlink(p);
        }
        if !sleep && !eevdf {
            let min = self.cfs(q, cpu).min_vruntime;
            let se = self.ent_mut(e);
            se.vruntime = se.vruntime.wrapping_sub(min);
        }
        self.update_cfs_group(e, now);
        self.update_min_vruntime(q, cpu);
        if delayed {
            // finish_delayed_dequeue_entity(): DELAY_ZERO drops the positive lag
            // the task earned while it waited to become eligible.
            let zero = self.feat.delay_zero;
            let se = self.ent_mut(e);
            se.sched_delayed = false;
            if zero && se.vlag > 0 {
                se.vlag = 0;
            }
        }
        true
    }

    /// `enqueue_task_fair()` (v4.19 L5105): the task's entity, then every ancestor
    /// not yet queued (as wakeups), then the rest of the path's counts and loads;
    /// plus the STEAL overload bookkeeping.
    pub fn enqueue_task_fair(&mut self, cpu: usize, p: TaskId, wakeup: bool, migrated: bool, now: u64) {
        self.enqueue_task_fair_flags(cpu, p, wakeup, migrated, false, now);
    }

    /// `enqueue_task_fair()` with ENQUEUE_INITIAL (a new task, v6.12+).
    pub fn enqueue_task_fair_flags(&mut self, cpu: usize, p: TaskId, wakeup: bool, migrated: bool, initial: bool, now: u64) {
        // enqueue_task_fair() (v6.18): a delayed task moved here is not counted
        // (a delayed wakee's requeue counts it, `ttwu_runnable()`'s path).
        if !self.se[p].sched_delayed {
            self.util_est_enqueue(cpu, p);
        }
        let mut at = Some(Ent::Task(p));
        let (mut wakeup, mut migrated, mut initial) = (wakeup, migrated, initial);
        while let Some(e) = at {
            if self.ent(e).on_rq {
                if self.ent(e).sched_delayed {
                    // A delayed (empty) group entity: woken where it sits (v6.12).
                    let q = self.q_of(e);
                    self.requeue_delayed_entity(q, cpu, e);
                }
                break;
            }
            let q = self.q_of(e);
            self.enqueue_entity(q, cpu, e, EnqueueFlags { wakeup, migrated, initial }, now);
            self.cfs_mut(q, cpu).h_nr_running += 1;
            (wakeup, migrated, initial) = (true, false, false);
            at = self.parent_ent(e, cpu);
        }
        while let Some(e) = at {
            let q = self.q_of(e);
            self.cfs_mut(q, cpu).h_nr_running += 1;
            self.update_load_avg_se(q, cpu, Some(e), now);
            self.update_cfs_group(e, now);
            at = self.parent_ent(e, cpu);
        }
        self.mru_touch(cpu, p);
        self.nr_total += 1;
        let nr = self.rq[cpu].cfs.h_nr_running;
        if nr >= 2 {
            // add_nr_running(): rd->overload once any CPU has two tasks.
            self.rd_overload = true;
        }
        if nr == 2 {
            self.overload_set(cpu);
        }
    }

    /// `dequeue_task_fair()` (v4.19 L5162): the task's entity, then each ancestor
    /// whose cfs_rq it leaves empty; a sleeping task makes its still-busy parent
    /// the next buddy.
    pub fn dequeue_task_fair(&mut self, cpu: usize, p: TaskId, sleep: bool, now: u64) {
        let kind = if sleep { DequeueKind::Special } else { DequeueKind::Save };
        self.dequeue_task_fair_flags(cpu, p, kind, now);
    }

    /// `dequeue_task_fair()` / v6.12 `dequeue_entities()`. A task whose dequeue is
    /// delayed stays counted at every level (v6.12 counts delayed tasks in
    /// `h_nr_running`) and stays on the balancer's list (`dequeue_entity()`
    /// returns before `account_entity_dequeue()` takes it off `rq->cfs_tasks`);
    /// `delayed` is the later final dequeue of such a task (`DEQUEUE_DELAYED`),
    /// when it is picked. A delayed task dequeued otherwise (the balancer moving
    /// it) leaves still delayed.
    pub fn dequeue_task_fair_flags(&mut self, cpu: usize, p: TaskId, kind: DequeueKind, now: u64) {
        let was_delayed = self.se[p].sched_delayed;
        let task_sleep = matches!(kind, DequeueKind::Sleep | DequeueKind::Special);
        // dequeue_task_fair() (v6.18): a delayed task left the sum at its sleep;
        // the final dequeue of a picked delayed task does not come through it.
        // v6.12+ updates the estimate before the entities leave (v6.8+'s one
        // value); v4.19-v6.7 after, from the utilisation their dequeue brought up
        // to date (below).
        if kind != DequeueKind::Delayed {
            if !was_delayed {
                self.util_est_dequeue(cpu, p);
            }
            if !self.util_est_two_fields() {
                self.util_est_update(p, task_sleep);
            }
        }
        if was_delayed {
            // Already out of the runnable count since its dequeue was delayed
            // (v6.14+'s `h_nr_runnable`, which the root's runnable signal reads
            // while the levels are updated): it leaves the delayed count first.
            self.rq[cpu].nr_delayed -= 1;
        }
        if !self.dequeue_entities(cpu, Ent::Task(p), kind, now) {
            self.rq[cpu].nr_delayed += 1;
            self.scan.mark(cpu);
            if !was_delayed {
                self.nr_total -= 1;
            }
            return;
        }
        if was_delayed {
            self.scan.mark(cpu);
        } else {
            self.nr_total -= 1;
        }
        if self.util_est_two_fields() {
            self.util_est_update(p, task_sleep);
        }
        if self.rq[cpu].cfs.h_nr_running == 1 {
            self.overload_clear(cpu);
        }
    }

    /// `dequeue_entities()` (v6.12 L7084; `dequeue_task_fair()` before): `start`
    /// leaves its cfs_rq, then each ancestor whose cfs_rq it leaves empty, as a
    /// sleep (`DEQUEUE_SLEEP`, never `SPECIAL`, so from v6.12 an ineligible group
    /// entity may be delayed and stay queued, empty, until picked); the rest of the
    /// path only loses the tasks counted below. False when `start` is a task whose
    /// own dequeue was delayed: it stays counted everywhere.
    fn dequeue_entities(&mut self, cpu: usize, start: Ent, kind: DequeueKind, now: u64) -> bool {
        // A task takes itself out of every level's count; a (delayed, empty) group
        // entity takes nothing.
        let h = match start {
            Ent::Task(_) => 1,
            Ent::Group(..) => 0,
        };
        let sleep = kind != DequeueKind::Save;
        let mut kind = kind;
        let mut at = Some(start);
        while let Some(e) = at {
            let q = self.q_of(e);
            if !self.dequeue_entity(q, cpu, e, kind, now) {
                if e == start {
                    return false;
                }
                // A delayed parent: its cfs_rq and those above still lose the task.
                break;
            }
            self.cfs_mut(q, cpu).h_nr_running -= h;
            if self.cfs(q, cpu).load.weight > 0 {
                at = self.parent_ent(e, cpu);
                if sleep {
                    if let Some(parent) = at {
                        self.set_next_buddy(parent, cpu);
                    }
                }
                break;
            }
            kind = DequeueKind::Sleep;
            at = self.parent_ent(e, cpu);
        }
        while let Some(e) = at {
            let q = self.q_of(e);
            self.cfs_mut(q, cpu).h_nr_running -= h;
            self.update_load_avg_se(q, cpu, Some(e), now);
            self.update_cfs_group(e, now);
            at = self.parent_ent(e, cpu);
        }
        true
    }

    /// The final dequeue of a delayed group entity picked on `cpu`.
    pub fn dequeue_delayed_group(&mut self, cpu: usize, e: Ent, now: u64) {
        self.dequeue_entities(cpu, e, DequeueKind::Delayed, now);
    }

    /// A task leaving this CPU for good (migration, exit): take its load with it
    /// (`detach_entity_load_avg`/`remove_entity_load_avg`) from its cfs_rq.
    pub fn detach_load(&mut self, cpu: usize, p: TaskId, now: u64) {
        let avg = self.se[p].avg;
        let w_down = self.se_weight(self.se[p].load.weight);
        let q = self.task_group[p];
        self.cfs_mut(q, cpu).avg.detach(&avg, w_down);
        self.add_tg_cfs_propagate(q, cpu, -(avg.load_sum as i64));
        self.update_tg_load_avg(q, cpu, now);
    }

    /// `clear_buddies()` (v4.19 L3921): a buddy pointing at `e` is cleared, and so
    /// are the ones pointing at its ancestors up the same chain.
    pub(crate) fn clear_buddies(&mut self, q: usize, cpu: usize, e: Ent) {
        let cfs = self.cfs(q, cpu);
        let (last, next, skip) = (cfs.last == Some(e), cfs.next == Some(e), cfs.skip == Some(e));
        for (hit, which) in [(last, 0), (next, 1), (skip, 2)] {
            if !hit {
                continue;
            }
            let mut at = Some(e);
            while let Some(x) = at {
                let cfs = self.cfs_mut(self.q_of(x), cpu);
                let slot = match which {
                    0 => &mut cfs.last,
                    1 => &mut cfs.next,
                    _ => &mut cfs.skip,
                };
                if *slot != Some(x) {
                    break;
                }
                *slot = None;
                at = self.parent_ent(x, cpu);
            }
        }
    }

    /// `set_next_buddy()` (v4.19 L6485): `e` and its ancestors are each level's
    /// next buddy.
    fn set_next_buddy(&mut self, e: Ent, cpu: usize) {
        let mut up = self.walk_up(e, cpu);
        while let Some(x) = up.next(self) {
            if !self.ent(x).on_rq {
                return;
            }
            let q = self.q_of(x);
            self.cfs_mut(q, cpu).next = Some(x);
        }
    }

    /// `set_last_buddy()` (v4.19 L6473).
    fn set_last_buddy(&mut self, e: Ent, cpu: usize) {
        let mut up = self.walk_up(e, cpu);
        while let Some(x) = up.next(self) {
            if !self.ent(x).on_rq {
                return;
            }
            let q = self.q_of(x);
            self.cfs_mut(q, cpu).last = Some(x);
        }
    }

    /// `set_skip_buddy()` (v4.19 L6497).
    fn set_skip_buddy(&mut self, e: Ent, cpu: usize) {
        let mut up = self.walk_up(e, cpu);
        while let Some(x) = up.next(self) {
            let q = self.q_of(x);
            self.cfs_mut(q, cpu).skip = Some(x);
        }
    }

    /// `wakeup_gran()` (v4.19 L6433, v5.15 L7047): the granularity in the wakee's
    /// virtual time. With SCALE_WAKEUP_GRAN (Gorman 2021, v1) and a runqueue given
    /// (only check_preempt_wakeup passes one; buddy picks do not), a runqueue of more
    /// than one entity multiplies it by `min(nr_running >> 1, sched_nr_latency)`.
    pub fn wakeup_gran(&mut self, cfs_rq: Option<(usize, usize)>, e: Ent) -> u64 {
        let mut gran = self.sysctl.wakeup_granularity_ns;
        if let Some((q, cpu)) = cfs_rq.filter(|_| self.feat.scale_wakeup_gran) {
            let nr_running = self.cfs(q, cpu).nr_running as u64;
            if nr_running > 1 {
                gran *= (nr_running >> 1).min(self.sysctl.nr_latency);
            }
        }
        let res = self.res;
        calc_delta_fair(gran, &mut self.ent_mut(e).load, res)
    }

    /// `wakeup_preempt_entity()` (v4.19 L6468, v5.15 L7094): −1 if `curr` is not
    /// ahead of `se`, 1 if ahead by more than the wakee's granularity, else 0.
    /// `cfs_rq` (group, cpu) is what SCALE_WAKEUP_GRAN reads (None from buddy picks).
    pub fn wakeup_preempt_entity(&mut self, cfs_rq: Option<(usize, usize)>, curr: Ent, se: Ent) -> i32 {
        let vdiff = self.ent(curr).vruntime as i64 - self.ent(se).vruntime as i64;
        if vdiff <= 0 {
            return -1;
        }
        if vdiff as u64 > self.wakeup_gran(cfs_rq, se) {
            1
        } else {
            0
        }
    }

    /// `pick_next_entity()` (v4.19 L4091): leftmost, unless the skip buddy, or a
    /// last/next buddy within a wakeup granularity of it, should run instead.
    fn pick_next_entity(&mut self, q: usize, cpu: usize) -> Option<Ent> {
        let cfs = self.cfs(q, cpu);
        let left = cfs.timeline.first().map(|&(_, _, t)| t)?;
        let mut se = left;
        if cfs.skip == Some(se) {
            let second = cfs.timeline.iter().nth(1).map(|&(_, _, e)| e);
            if let Some(second) = second {
                if self.wakeup_preempt_entity(None, second, left) < 1 {
                    se = second;
                }
            }
        }
        let (last, next) = (self.cfs(q, cpu).last, self.cfs(q, cpu).next);
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
        self.clear_buddies(q, cpu, se);
        Some(se)
    }

    /// `set_next_entity()` (v4.19 L4052).
    pub(crate) fn set_next_entity(&mut self, q: usize, cpu: usize, e: Ent, now: u64) {
        if self.ent(e).on_rq {
            self.tree_remove(q, cpu, e);
            self.update_load_avg_se(q, cpu, Some(e), now);
        }
        self.cfs_mut(q, cpu).curr = Some(e);
        let se = self.ent_mut(e);
        se.exec_start_ns = now;
        se.prev_sum_exec_runtime_ns = se.sum_exec_runtime_ns;
    }

    /// `put_prev_entity()` (v4.19 L4134).
    pub(crate) fn put_prev_entity(&mut self, q: usize, cpu: usize, e: Ent, now: u64) {
        if self.ent(e).on_rq {
            self.update_curr(q, cpu, now);
            self.tree_insert(q, cpu, e);
            self.update_load_avg_se(q, cpu, Some(e), now);
        }
        self.cfs_mut(q, cpu).curr = None;
    }

    /// `put_prev_task_fair()`: every level of the task's chain.
    pub(crate) fn put_prev_task_fair(&mut self, cpu: usize, p: TaskId, now: u64) {
        let mut up = self.walk_up(Ent::Task(p), cpu);
        while let Some(e) = up.next(self) {
            let q = self.q_of(e);
            if self.cfs(q, cpu).curr == Some(e) {
                self.put_prev_entity(q, cpu, e, now);
            }
        }
    }

    /// `check_preempt_tick()` (v4.19 L4012) on group `q`'s cfs_rq.
    fn check_preempt_tick(&mut self, q: usize, cpu: usize, curr: Ent) -> bool {
        let ideal = self.sched_slice(cpu, curr);
        let se = self.ent(curr);
        let ran = se.sum_exec_runtime_ns - se.prev_sum_exec_runtime_ns;
        if ran > ideal {
            self.clear_buddies(q, cpu, curr);
            return true;
        }
        if ran < self.sysctl.min_granularity_ns {
            return false;
        }
        let Some(&(left_v, _, _)) = self.cfs(q, cpu).timeline.first() else { return false };
        let delta = self.ent(curr).vruntime as i64 - left_v as i64;
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

    /// `weighted_cpuload()`: the CPU's runnable load average; in v3.0 its
    /// instantaneous `rq->load.weight` (scaled when the extra resolution is on).
    pub fn weighted_cpuload(&self, cpu: usize) -> u64 {
        if self.version == KernelVersion::V3_0 {
            return self.rq[cpu].cfs.load.weight;
        }
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

    /// `cpu_util()` (v4.19; `cpu_util_cfs()` v6.x): utilisation, with UTIL_EST at
    /// least the queued tasks' estimates, clamped to the CPU's original capacity.
    pub fn cpu_util(&self, cpu: usize) -> u64 {
        let rq = &self.rq[cpu];
        self.util_with_est(cpu, rq.cfs.avg.util_avg, rq.cfs.util_est)
    }

    /// `cpu_util_cfs_boost()` (v6.5+): `cpu_util()` with the CPU's utilisation
    /// raised to its runnable average first, so a CPU whose tasks wait counts
    /// their waiting.
    pub fn cpu_util_boost(&self, cpu: usize) -> u64 {
        let rq = &self.rq[cpu];
        self.util_with_est(cpu, rq.cfs.avg.util_avg.max(rq.cfs.avg.runnable_load_avg), rq.cfs.util_est)
    }

    /// CPU `cpu`'s utilisation without task `p`'s, for a `p` that counts there:
    /// `cpu_util_wake()` (v4.19) takes p's utilisation out of the CPU's, and
    /// `cpu_util_without()` (v5.0+, c469933e7721, "for 'execl' type
    /// workloads") also p's estimate out of the queued tasks' when p is queued
    /// (or running) there.
    pub fn cpu_util_without(&self, cpu: usize, p: TaskId) -> u64 {
        let rq = &self.rq[cpu];
        let mut estimated = rq.cfs.util_est;
        if self.version >= KernelVersion::V5_10 && self.se[p].on_rq {
            estimated = estimated.saturating_sub(self.task_util_est_raw(p));
        }
        self.util_with_est(cpu, rq.cfs.avg.util_avg.saturating_sub(self.se[p].avg.util_avg), estimated)
    }

    /// The tail every `cpu_util()` variant shares (v6.x's `cpu_util(cpu, p,
    /// dst, boost)`): with UTIL_EST the utilisation is at least the queued
    /// tasks' `estimated` sum, and never beyond the CPU's capacity.
    fn util_with_est(&self, cpu: usize, util: u64, estimated: u64) -> u64 {
        let util = if self.feat.util_est { util.max(estimated) } else { util };
        util.min(self.rq[cpu].cpu_capacity)
    }

    /// Tasks the balancer counts on `cpu`: v6.14+ `h_nr_runnable` leaves out
    /// delayed tasks, earlier releases count them (`h_nr_running`).
    pub fn h_nr_runnable(&self, cpu: usize) -> usize {
        let rq = &self.rq[cpu];
        if self.version >= KernelVersion::V6_18 {
            rq.cfs.h_nr_running - rq.nr_delayed
        } else {
            rq.cfs.h_nr_running
        }
    }

    /// `idle_cpu()`: nothing running or queued, and not already woken.
    pub fn idle_cpu(&self, sys: &System, cpu: usize) -> bool {
        sys.cpu_idle(cpu) && self.rq[cpu].cfs.h_nr_running == 0
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
        if self.steal_enabled && was_overloaded != (self.rq[cpu].cfs.h_nr_running >= 2) {
            let this = sys.this_cpu();
            sys.charge_search(this, 0, 1, 0);
        }
    }

    /// Moves queued, not running `p` from `src` to `dst` (`detach_task()` +
    /// `attach_task()`, fair.c v4.19 L7159/L7267), with the wakeup-preemption check
    /// on `dst` that `attach_task()` does.
    ///
    /// A delayed task (asleep, still queued: v6.12+) moves queued and asleep: its
    /// dequeue is not a sleep, so `dequeue_entity()` takes it off `src` for good
    /// without `finish_delayed_dequeue_entity()` (v6.12 `dequeue_entity()` L5476
    /// calls it for `DEQUEUE_DELAYED` only), and `sched_delayed` stays set through
    /// `enqueue_entity()` on `dst` (v6.18 the same).
    /// There it waits, counted but not runnable, for a wakeup
    /// (`ttwu_runnable()` requeues it on `dst`) or a pick (which dequeues it).
    pub fn move_task(&mut self, sys: &mut System, p: TaskId, src: usize, dst: usize, this_cpu: usize) {
        let now = sys.now_ns;
        let (src_over, dst_over) = (self.rq[src].cfs.h_nr_running >= 2, self.rq[dst].cfs.h_nr_running >= 2);
        let delayed = self.se[p].sched_delayed;
        sys.rq_clock_update(src);
        sys.rq_clock_update(dst);
        self.dequeue_task_fair(src, p, false, now);
        self.charge_overload_update(sys, src, src_over);
        self.detach_load(src, p, now);
        sys.set_task_cpu(p, dst);
        self.enqueue_task_fair(dst, p, false, false, now);
        if delayed {
            // Queued on dst, but not runnable there either.
            self.rq[dst].nr_delayed += 1;
            self.scan.mark(dst);
            self.nr_total -= 1;
        }
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

    /// Balancing asked of `cpu` before it picks: the stopper's work (an
    /// active-balance push of its previous task, or `sched_exec()`'s
    /// `migration_cpu_stop()`) and a NOHZ idle balance it was kicked for.
    pub(crate) fn balance_asked_of(&mut self, sys: &mut System, cpu: usize) {
        match self.rq[cpu].stopper.take() {
            Some(StopperWork::ActiveBalance { dst }) => self.active_push(sys, cpu, dst),
            // migration_cpu_stop() → __migrate_task() → move_queued_task()
            // (kernel/sched/core.c, v4.19 to v6.18): only if the task is still
            // queued here and allowed there.
            Some(StopperWork::Migrate { p, dst })
                if sys.tasks[p].cpu == cpu && self.se[p].on_rq && sys.tasks[p].can_run_on(dst) =>
            {
                self.move_task(sys, p, cpu, dst, cpu)
            }
            _ => {}
        }
        if self.rq[cpu].nohz_kick {
            self.rq[cpu].nohz_kick = false;
            self.nohz_idle_balance(sys, cpu);
        }
    }

    /// `check_preempt_wakeup()` (v4.19 L6515): compare the running task and the
    /// wakee at the first level where their chains share a cfs_rq
    /// (`find_matching_se()`).
    pub fn check_preempt_wakeup(&mut self, sys: &mut System, cpu: usize, curr: TaskId, p: TaskId, fork: bool) -> bool {
        // A stopper that moved the task it preempted (active balance,
        // sched_exec()) is what runs here until the pick: it is not a fair task,
        // so check_preempt_curr() (kernel/sched/core.c, v4.19; wakeup_preempt()
        // from v6.6) asks nothing of the fair class: the stop class is above it.
        if curr == p || sys.tasks[curr].cpu != cpu {
            return false;
        }
        let (mut se, mut pse) = (Ent::Task(curr), Ent::Task(p));
        let scale = self.cfs(self.task_group[curr], cpu).nr_running as u64 >= self.sysctl.nr_latency;
        let mut next_buddy_marked = false;
        if self.feat.next_buddy && scale && !fork {
            self.set_next_buddy(pse, cpu);
            next_buddy_marked = true;
        }
        // A reschedule is already pending: nothing to decide (and no buddy to set).
        if sys.need_resched(cpu) {
            return false;
        }
        if !self.feat.wakeup_preemption {
            return false;
        }
        // find_matching_se(): same depth, then up until both share a cfs_rq.
        let (mut sd, mut pd) = (self.depth(se), self.depth(pse));
        while sd > pd {
            se = self.parent_ent(se, cpu).expect("deeper entity has a parent");
            sd -= 1;
        }
        while pd > sd {
            pse = self.parent_ent(pse, cpu).expect("deeper entity has a parent");
            pd -= 1;
        }
        while self.q_of(se) != self.q_of(pse) {
            se = self.parent_ent(se, cpu).expect("chains meet at the root");
            pse = self.parent_ent(pse, cpu).expect("chains meet at the root");
        }
        let q = self.q_of(se);
        if self.version.eevdf() {
            let preempt = self.wakeup_preempt_eevdf(q, cpu, se, pse, sys.now_ns, fork);
            // A slice that ended in update_curr() reschedules too.
            let ended = self.take_resched(cpu);
            self.flush_resched(sys);
            return preempt || ended;
        }
        self.update_curr(q, cpu, sys.now_ns);
        if self.wakeup_preempt_entity(Some((q, cpu)), se, pse) == 1 {
            // Bias the next pick towards the task that caused the preemption.
            if !next_buddy_marked {
                self.set_next_buddy(pse, cpu);
            }
            if self.feat.last_buddy && scale && self.ent(se).on_rq && matches!(se, Ent::Task(_)) {
                self.set_last_buddy(se, cpu);
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
        self.sysctl = Sysctls::boot_with(n, Cfs::normalized_base_slice_ns(self.version));
        self.sysctl.apply(&requested).expect("validated in new()");
        self.doms = domains::build(topo, self.version);
        let nllc = self.doms.iter().map(|d| d.sd_llc_id).max().unwrap_or(0) + 1;
        self.has_idle_cores = vec![false; nllc];
        self.avg_scan_cost_ns = vec![0; nllc];
        self.nr_idle_scan = vec![0; nllc];
        self.overload_cpus = vec![schedlab_core::cpuset::CpuSet::new(n); nllc];
        self.steal_enabled = self.feat.steal && topo.node_cpus.len() <= self.steal_node_limit;
        self.tg = vec![TaskGroup {
            parent: 0,
            level: 0,
            shares: self.res.scale_load(schedlab_core::sched::ROOT_TASK_GROUP_SHARES),
            load_avg: 0,
            load_weight: 0,
            cfs_rq: Vec::new(),
            se: Vec::new(),
        }];
        self.rq = (0..n)
            .map(|cpu| Rq {
                cfs: CfsRq { min_vruntime: MIN_VRUNTIME_START, ..CfsRq::default() },
                // sched_init(): avg_idle = 2 × migration cost, max_idle_balance_cost = migration cost.
                avg_idle_ns: 2 * self.sysctl.migration_cost_ns,
                wake_avg_idle_ns: 2 * self.sysctl.migration_cost_ns,
                wake_stamp: 0,
                idle_stamp_ns: None,
                idle_stamp_until_ns: None,
                max_idle_balance_cost_ns: self.sysctl.migration_cost_ns,
                next_balance: 0,
                cpu_load: [0; 5],
                last_load_update_tick: 0,
                cpu_capacity: domains::cpu_capacity_orig(topo, cpu, self.version),
                stopper: None,
                nohz_kick: false,
                curr_task: None,
                resched_pending: false,
                nr_delayed: 0,
            })
            .collect();
        // Only the v5.5+ balancer scans through the rows.
        self.scan =
            if self.reworked_balancer() { super::scan::ScanRows::new(&self.doms) } else { super::scan::ScanRows::default() };
    }
}

impl SchedClass for Cfs {
    fn name(&self) -> String {
        format!("{}@{}{}", self.version.family(), self.version.name(), self.feat.suffix())
    }

    fn settings(&self) -> Vec<(String, String)> {
        let sysctls = self.sysctl.in_force().into_iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let features =
            self.feat.in_force().into_iter().map(|(k, on)| (format!("feature.{k}"), if on { "on" } else { "off" }.to_string()));
        sysctls.chain(features).collect()
    }

    fn init(&mut self, sys: &mut System) {
        self.boot(sys);
    }

    /// `sched_fork()` + `task_fork_fair()` (v4.19 L9668): start at the vruntime of
    /// the running entity of the child's cfs_rq, placed with START_DEBIT, made
    /// relative to that cfs_rq's min_vruntime.
    fn task_fork(&mut self, sys: &mut System, p: TaskId, parent: Option<TaskId>) {
        self.sync_groups(sys);
        let now = sys.now_ns;
        let nice = sys.tasks[p].nice;
        let cpu = parent.map_or(sys.tasks[p].cpu, |pp| sys.tasks[pp].cpu);
        let load = LoadWeight::for_nice(nice, self.res);
        // init_entity_runnable_average(): a new task starts with full load.
        let w = self.se_weight(load.weight);
        let avg = SchedAvg::new_task(w);
        // dup_task_struct() copies the parent's task_struct and nothing in
        // sched_fork() resets the wake_wide() history (v3.12+, still so in
        // v6.18): the child starts with the parent's wakee_flips, its decay
        // stamp and its last wakee.
        let (wakee_flips, wakee_flip_decay_ts, last_wakee) =
            parent.map_or((0, 0, None), |pp| (self.se[pp].wakee_flips, self.se[pp].wakee_flip_decay_ts, self.se[pp].last_wakee));
        let se = Se {
            load,
            exec_start_ns: now,
            rq_cpu: cpu,
            avg,
            recent_used_cpu: cpu,
            wakee_flips,
            wakee_flip_decay_ts,
            last_wakee,
            ..Se::blank()
        };
        if p >= self.se.len() {
            self.se.resize(p + 1, se.clone());
            self.task_group.resize(p + 1, 0);
        }
        self.se[p] = se;
        let q = sys.tasks[p].group;
        self.task_group[p] = q;
        self.update_curr(q, cpu, now);
        if self.version.eevdf() {
            // task_fork_fair() of v6.6 places the child on the parent's queue, but
            // wake_up_new_task() places it again where it lands, without
            // ENQUEUE_INITIAL; v6.12 places it only there, with it. Either way it
            // starts with zero lag and the base slice.
            self.se[p].slice_ns = self.sysctl.base_slice_ns;
            self.se[p].rq_cpu = usize::MAX;
            self.flush_resched(sys);
            return;
        }
        if let Some(curr) = self.cfs(q, cpu).curr {
            self.se[p].vruntime = self.ent(curr).vruntime;
        }
        self.place_entity(q, cpu, Ent::Task(p), true);
        let min = self.cfs(q, cpu).min_vruntime;
        self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(min);
        // Not attached anywhere yet: wake_up_new_task() attaches it where it lands.
        self.se[p].rq_cpu = usize::MAX;
    }

    /// A kernel thread running since boot starts with its PELT history fully
    /// decayed, not with init_entity_runnable_average()'s full load: the
    /// modelled ones sleep hundreds of milliseconds between runs of at most
    /// 1.4 ms (machines/*.toml `[[background]]`), far longer than PELT's
    /// memory (a 32 ms half-life), so their signals are within a few units of
    /// zero. A new task's full load would land on its CPU's root at its first
    /// wakeup and bias every load comparison there for a hundred milliseconds.
    fn task_booted(&mut self, _sys: &mut System, p: TaskId) {
        self.se[p].avg = SchedAvg::default();
    }

    /// The launcher's wake_wide() history, inherited as any child's is (above);
    /// its decay stamp is the run's start.
    fn task_launched(&mut self, sys: &mut System, p: TaskId, launcher: &Launcher) {
        self.se[p].wakee_flips = launcher.wakee_flips;
        self.se[p].wakee_flip_decay_ts = self.jiffies(sys.now_ns);
    }

    fn select_exec_cpu(&mut self, sys: &mut System, p: TaskId, cpu: usize) -> usize {
        let flags = WakeFlags { reason: schedlab_core::sched::SelectReason::Exec, sync: false };
        self.select_task_rq_fair(sys, p, cpu, cpu, flags)
    }

    fn push_running_task(&mut self, _sys: &mut System, cpu: usize, p: TaskId, dest: usize) {
        self.rq[cpu].stopper = Some(StopperWork::Migrate { p, dst: dest });
    }

    fn pushes_running_tasks(&self) -> bool {
        true
    }

    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, waker_cpu: usize, flags: WakeFlags) -> usize {
        if let Some(cpu) = self.delayed_on(p) {
            // HOST_DEQUEUE_DELAYED_BUSY (inferred, not upstream): with another task
            // on its runqueue (rq->nr_running counts the delayed wakee too) and
            // another CPU allowed, the wakee leaves for good
            // (DEQUEUE_SLEEP | DEQUEUE_DELAYED) and is placed as any sleeper.
            let busy = self.rq[cpu].cfs.h_nr_running > 1;
            let movable = sys.tasks[p].nr_cpus_allowed(sys.ncpus()) > 1;
            if !(self.feat.host_dequeue_delayed_busy && busy && movable) {
                // ttwu_runnable(): still queued there, woken in place.
                return cpu;
            }
            self.dequeue_task_fair_flags(cpu, p, DequeueKind::Delayed, sys.now_ns);
            self.flush_resched(sys);
        }
        self.select_task_rq_fair(sys, p, prev_cpu, waker_cpu, flags)
    }

    fn enqueue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: EnqueueReason) {
        let now = sys.now_ns;
        let was_overloaded = self.rq[cpu].cfs.h_nr_running >= 2;
        let wakeup = reason == EnqueueReason::Wakeup;
        let from = self.se[p].rq_cpu;
        let migrated = wakeup && from != cpu && from != usize::MAX;
        let q = self.task_group[p];
        if wakeup && self.se[p].sched_delayed {
            // ttwu_runnable() → enqueue_task(ENQUEUE_DELAYED): requeue_delayed_entity().
            // The task never left `rq->cfs_tasks`: its place there is unchanged.
            self.requeue_delayed_entity(q, cpu, Ent::Task(p));
            self.util_est_enqueue(cpu, p);
            self.rq[cpu].nr_delayed -= 1;
            self.scan.mark(cpu);
            self.nr_total += 1;
            self.flush_resched(sys);
            return;
        }
        if migrated {
            // migrate_task_rq_fair(): vruntime relative to the old queue (CFS only:
            // EEVDF carries the lag), load detached.
            if !self.version.eevdf() {
                let min = self.cfs(q, from).min_vruntime;
                self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(min);
            }
            self.detach_load(from, p, sys.now_ns);
        }
        if reason == EnqueueReason::New {
            // wake_up_new_task() → post_init_entity_util_avg(): the new task's
            // utilisation is estimated from the runqueue it lands on.
            let cfs_avg = self.cfs(q, cpu).avg;
            let w = self.se[p].load.weight;
            self.se[p].avg.post_init_util_avg(&cfs_avg, w);
            if self.reworked_balancer() {
                // post_init_entity_util_avg() (v5.10+ as modelled; the runnable
                // signal came in the v5.7 cycle): `sa->runnable_avg =
                // sa->util_avg`, not a full runnable history
                // (attach_entity_load_avg() builds the sum from it).
                let a = &mut self.se[p].avg;
                a.runnable_load_avg = a.util_avg;
            }
        }
        // v6.12 wake_up_new_task() enqueues with ENQUEUE_INITIAL; v6.6 lost it (see task_fork).
        let initial = reason == EnqueueReason::New && self.version >= KernelVersion::V6_12;
        self.enqueue_task_fair_flags(cpu, p, wakeup, migrated, initial, now);
        self.charge_overload_update(sys, cpu, was_overloaded);
        if wakeup {
            // ttwu_do_wakeup(): a wakeup onto an idle CPU updates its avg_idle; so
            // does one that lands while a newly idle pass has the rq lock dropped.
            if let Some(stamp) = self.idle_stamp_for_wakeup(sys, cpu, p) {
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
        let was_overloaded = self.rq[cpu].cfs.h_nr_running >= 2;
        let kind = match reason {
            DequeueReason::Sleep => DequeueKind::Sleep,
            DequeueReason::Migrate => DequeueKind::Save,
            _ => DequeueKind::Special,
        };
        // A task that blocks or exits leaves inside __schedule(), on its clock.
        let now = match reason {
            DequeueReason::Sleep | DequeueReason::Exit => sys.rq_clock(cpu),
            _ => sys.now_ns,
        };
        self.dequeue_task_fair_flags(cpu, p, kind, now);
        self.charge_overload_update(sys, cpu, was_overloaded);
        self.flush_resched(sys);
        if reason == DequeueReason::Exit {
            self.detach_load(cpu, p, sys.now_ns);
        }
    }

    fn check_preempt_curr(&mut self, sys: &mut System, cpu: usize, p: TaskId, flags: WakeFlags) -> bool {
        let Some(curr) = sys.curr(cpu) else { return true };
        let fork = flags.reason == schedlab_core::sched::SelectReason::Fork;
        self.check_preempt_wakeup(sys, cpu, curr, p, fork)
    }

    /// `pick_next_task_fair()` (v4.19 L6599), with the steal series' idle path:
    /// `idle_balance()`, then `try_steal()` if it found nothing. The previous
    /// task's chain is put back level by level; the pick descends from the root
    /// through group entities to a task.
    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, _prev: Option<TaskId>) -> Option<TaskId> {
        if self.version.eevdf() {
            let next = self.pick_next_task_eevdf(sys, cpu);
            self.flush_resched(sys);
            return next;
        }
        let now = sys.rq_clock(cpu);
        if let Some(prev) = self.rq[cpu].curr_task.take() {
            // A blocked or exited task is already dequeued: its levels just let go.
            self.put_prev_task_fair(cpu, prev, now);
        }
        self.balance_asked_of(sys, cpu);
        loop {
            if self.rq[cpu].cfs.h_nr_running > 0 {
                let mut q = 0;
                loop {
                    let e = self.pick_next_entity(q, cpu).expect("a cfs_rq with tasks below has an entity");
                    self.set_next_entity(q, cpu, e, now);
                    match e {
                        Ent::Group(g, _) => q = g,
                        Ent::Task(p) => {
                            self.mru_touch(cpu, p);
                            self.rq[cpu].curr_task = Some(p);
                            return Some(p);
                        }
                    }
                }
            }
            // The steal series sets idle_stamp here so the search counts as idle time.
            self.rq[cpu].idle_stamp_ns = Some(now);
            self.rq[cpu].idle_stamp_until_ns = None;
            let mut pulled = self.idle_balance(sys, cpu);
            if pulled == 0 && self.steal_enabled {
                pulled = self.try_steal(sys, cpu);
            }
            if pulled > 0 {
                self.end_newidle_pass(sys, cpu);
                continue;
            }
            // pick_next_task_idle() → update_idle_core(); going tickless keeps the
            // current load as cpu_load[0] (cpu_load_update_nohz_start()).
            self.update_idle_core(sys, cpu);
            self.rq[cpu].cpu_load[0] = self.weighted_cpuload(cpu);
            return None;
        }
    }

    /// `task_tick_fair()` (v4.19 L9647): `entity_tick()` at every level of the
    /// running task's chain.
    fn task_tick(&mut self, sys: &mut System, cpu: usize, curr: TaskId) -> bool {
        let now = sys.now_ns;
        if self.version.eevdf() {
            // entity_tick() of v6.6+: update_curr() decides (there is no
            // check_preempt_tick()); the load signals as in v5.x.
            let mut up = self.walk_up(Ent::Task(curr), cpu);
            while let Some(e) = up.next(self) {
                let q = self.q_of(e);
                self.update_curr(q, cpu, now);
                self.update_load_avg_se(q, cpu, Some(e), now);
                self.update_cfs_group(e, now);
            }
            let resched = self.take_resched(cpu);
            self.flush_resched(sys);
            return resched;
        }
        let mut resched = false;
        let mut up = self.walk_up(Ent::Task(curr), cpu);
        while let Some(e) = up.next(self) {
            let q = self.q_of(e);
            self.update_curr(q, cpu, now);
            self.update_load_avg_se(q, cpu, Some(e), now);
            if self.version != KernelVersion::V3_0 {
                self.update_cfs_group(e, now);
            } else if q != 0 && self.cfs(q, cpu).load_unacc_exec_ns > super::group::SCHED_SHARES_WINDOW_NS {
                // v3.0 update_entity_shares_tick(): once the group has run a window
                // unaccounted, fold it and re-weight the group's entity.
                self.update_cfs_load_v30(q, cpu, now, false);
                self.update_cfs_group(Ent::Group(q, cpu), now);
            }
            if self.cfs(q, cpu).nr_running > 1 && self.check_preempt_tick(q, cpu, e) {
                resched = true;
            }
        }
        // scheduler_tick() → cpu_load_update_active(), once every level is updated.
        let load = self.weighted_cpuload(cpu);
        self.cpu_load_update(cpu, now, load);
        resched
    }

    fn trigger_load_balance(&mut self, sys: &mut System, cpu: usize) {
        self.trigger_load_balance_fair(sys, cpu);
    }

    /// `yield_task_fair()` (v4.19 L6750): mark as skip buddy.
    fn yield_task(&mut self, sys: &mut System, cpu: usize, curr: TaskId) {
        if self.rq[cpu].cfs.h_nr_running <= 1 {
            return;
        }
        let q = self.task_group[curr];
        self.clear_buddies(q, cpu, Ent::Task(curr));
        self.update_curr(q, cpu, sys.now_ns);
        if self.version.eevdf() {
            self.yield_eevdf(q, cpu, Ent::Task(curr));
            self.flush_resched(sys);
            return;
        }
        self.set_skip_buddy(Ent::Task(curr), cpu);
    }

    /// `set_user_nice()` → `reweight_task()`: the task's new weight, in and out of
    /// its cfs_rq's sums.
    fn reweight_task(&mut self, sys: &mut System, p: TaskId, _old_weight: u32) {
        let cpu = sys.tasks[p].cpu;
        let q = self.task_group[p];
        let on_rq = self.se[p].on_rq;
        let now = sys.now_ns;
        let is_curr = self.cfs(q, cpu).curr == Some(Ent::Task(p));
        let old_w = self.se[p].load.weight;
        let mut v_before = 0;
        if on_rq {
            self.update_curr(q, cpu, now);
            if self.version.eevdf() {
                v_before = self.avg_vruntime(q, cpu);
            }
            if !is_curr {
                self.tree_remove(q, cpu, Ent::Task(p));
            }
            let w = self.se[p].load.weight;
            let cfs = self.cfs_mut(q, cpu);
            cfs.load.sub(w);
            cfs.runnable_weight = cfs.runnable_weight.saturating_sub(w);
        }
        self.se[p].load = LoadWeight::for_nice(sys.tasks[p].nice, self.res);
        if self.version.eevdf() {
            // reweight_entity() of v6.6+: the lag survives the new weight.
            let new_w = self.se[p].load.weight;
            if on_rq {
                self.reweight_queued_eevdf(q, cpu, Ent::Task(p), v_before, old_w, new_w);
            } else {
                self.reweight_sleeping_eevdf(Ent::Task(p), old_w, new_w);
            }
        }
        if on_rq {
            let w = self.se[p].load.weight;
            let cfs = self.cfs_mut(q, cpu);
            cfs.load.add(w);
            cfs.runnable_weight += w;
            if !is_curr {
                self.tree_insert(q, cpu, Ent::Task(p));
            }
        }
    }

    /// `__setparam_fair()` (v6.12 syscalls.c): a non-zero `sched_runtime` becomes the
    /// task's custom slice, clamped to 0.1-100 ms; 0 returns to the base slice.
    /// Only v6.12+ reads it. The deadline keeps its distance until the next one is
    /// set (sched_setattr's DEQUEUE_SAVE/ENQUEUE_RESTORE keep the relative deadline).
    fn set_slice(&mut self, _sys: &mut System, p: TaskId, ns: u64) {
        if self.version < KernelVersion::V6_12 {
            return;
        }
        let base = self.sysctl.base_slice_ns;
        let se = &mut self.se[p];
        se.custom_slice = ns != 0;
        se.slice_ns = if ns == 0 { base } else { ns.clamp(100_000, 100_000_000) };
    }

    /// `sched_move_task()` → `task_change_group_fair()` (v4.19 L10057): out of the
    /// old group's hierarchy (load detached, vruntime made relative), into the new
    /// one's, keeping the task running if it was.
    fn task_change_group(&mut self, sys: &mut System, p: TaskId, _old: usize) {
        self.sync_groups(sys);
        let now = sys.now_ns;
        let cpu = sys.tasks[p].cpu;
        if self.se[p].sched_delayed {
            // An asleep task still queued by DELAY_DEQUEUE leaves for good first.
            self.dequeue_task_fair_flags(cpu, p, DequeueKind::Delayed, now);
        }
        let queued = self.se[p].on_rq;
        let running = self.rq[cpu].curr_task == Some(p);
        if queued {
            self.dequeue_task_fair(cpu, p, false, now);
        }
        if running {
            self.put_prev_task_fair(cpu, p, now);
        }
        // detach_task_cfs_rq(): a sleeping task's vruntime leaves relative to the
        // old cfs_rq (dequeue did that for a queued one) ...
        let old_q = self.task_group[p];
        let eevdf = self.version.eevdf();
        if !queued && !eevdf {
            let min = self.cfs(old_q, cpu).min_vruntime;
            self.se[p].vruntime = self.se[p].vruntime.wrapping_sub(min);
        }
        if self.se[p].rq_cpu == cpu {
            self.detach_load(cpu, p, sys.now_ns);
            self.se[p].rq_cpu = usize::MAX;
        }
        self.task_group[p] = sys.tasks[p].group;
        let new_q = self.task_group[p];
        if queued {
            self.enqueue_task_fair(cpu, p, false, false, now);
        } else if !eevdf {
            // ... and attach_task_cfs_rq() makes it absolute in the new one.
            let min = self.cfs(new_q, cpu).min_vruntime;
            self.se[p].vruntime = self.se[p].vruntime.wrapping_add(min);
        }
        if running {
            // set_curr_task_fair(): the new chain's levels run it.
            for e in self.chain(Ent::Task(p), cpu).into_iter().rev() {
                let q = self.q_of(e);
                self.set_next_entity(q, cpu, e, now);
            }
        }
    }

    fn group_shares_changed(&mut self, sys: &mut System, g: usize) {
        self.set_group_shares(sys, g);
    }

    fn nr_running(&self, cpu: usize) -> usize {
        self.rq[cpu].cfs.h_nr_running - self.rq[cpu].nr_delayed
    }

    fn linux_release(&self) -> Option<(u32, u32)> {
        Some(match self.version {
            KernelVersion::V3_0 => (3, 0),
            KernelVersion::V4_19 => (4, 19),
            KernelVersion::V5_10 => (5, 10),
            KernelVersion::V5_15 => (5, 15),
            KernelVersion::V6_6 => (6, 6),
            KernelVersion::V6_12 => (6, 12),
            KernelVersion::V6_18 => (6, 18),
        })
    }

    /// v6.13+ fair code asks with `resched_curr_lazy()` (wakeup preemption,
    /// `update_curr()`'s end of slice).
    fn lazy_resched(&self) -> bool {
        self.version >= KernelVersion::V6_18
    }

    fn entity_numbers(&self, p: TaskId) -> Option<schedlab_core::trace::EntityNumbers> {
        let se = self.se.get(p)?;
        if !self.version.eevdf() || se.rq_cpu == usize::MAX {
            return None;
        }
        let cfs = self.cfs(self.q_of(Ent::Task(p)), se.rq_cpu);
        let vprot = if self.version >= KernelVersion::V6_18 { se.vprot as i64 } else { se.vlag };
        Some(schedlab_core::trace::EntityNumbers {
            vruntime: se.vruntime,
            deadline: se.deadline,
            vlag: se.vlag,
            vprot,
            on_rq: se.on_rq,
            sum_w_vruntime: cfs.avg_vruntime,
            sum_weight: cfs.avg_load,
            zero_vruntime: cfs.min_vruntime,
        })
    }

    fn check_invariants(&self, cpu: usize) -> Option<String> {
        if let Some(broken) = self.check_cfs_tasks(cpu).or_else(|| self.check_util_est(cpu)) {
            return Some(broken);
        }
        if self.version.eevdf() {
            return self.check_eevdf(cpu);
        }
        None
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
        let mut c = Cfs::new(version, features, &s).or_else(|_| Cfs::new_eevdf(version, features, &s)).unwrap();
        c.boot_on(&Topology::parse(spec).unwrap(), 4_000_000);
        c
    }

    fn add_task(c: &mut Cfs, nice: i32) -> TaskId {
        let se = Se { load: LoadWeight::for_nice(nice, c.res), ..Se::blank() };
        c.se.push(se);
        c.task_group.push(0);
        c.se.len() - 1
    }

    #[test]
    fn a_skipped_newidle_pass_notes_only_the_lowest_domains_next_balance() {
        for version in ["4.19", "5.15"] {
            let mut c = cfs_version_on(version, "x6-2-20", None, &[]);
            // SMT then MC on x6-2-20; the MC domain is due long before the SMT one.
            assert_eq!(c.doms[0].domains.len(), 2);
            c.doms[0].domains[0].last_balance_jiffies = 1_000;
            c.doms[0].domains[1].last_balance_jiffies = 10;
            let lowest = c.next_balance_of(0, 0, 20);
            assert!(c.next_balance_of(0, 1, 20) < lowest);
            assert_eq!(c.skipped_newidle_next_balance(0, 20), Some(lowest), "{version}");
        }
        let c = cfs_version_on("3.0", "x6-2-20", None, &[]);
        assert_eq!(c.skipped_newidle_next_balance(0, 20), None);
    }

    /// A task's util_est after sleeps at the given utilisations, in `version`.
    fn util_est_after(version: &str, features: Option<&str>, sleeps: &[(u64, u64)]) -> (u32, u32, u64) {
        let mut c = cfs_version_on(version, "x6-2-20", features, &[]);
        let p = add_task(&mut c, 0);
        for &(util, runnable) in sleeps {
            c.se[p].avg.util_avg = util;
            c.se[p].avg.runnable_load_avg = runnable;
            // Its utilisation moved since its enqueue (`cfs_se_util_change()`).
            c.se[p].util_est &= !UTIL_AVG_UNCHANGED;
            c.se[p].util_est_enqueued &= !(UTIL_AVG_UNCHANGED | UTIL_AVG_UNCHANGED_LSB);
            c.util_est_update(p, true);
        }
        (c.se[p].util_est, c.se[p].util_est_enqueued, c.task_util_est_raw(p))
    }

    #[test]
    fn util_est_follows_each_releases_arithmetic() {
        // v4.19: enqueued = 300 | 1 (the flag in the lowest bit); the average moves
        // a quarter of the way from 0: (0 * 4 + 301) >> 2 = 75; the estimate is the
        // larger, 301, with the flag bit.
        assert_eq!(util_est_after("4.19", None, &[(300, 300)]), (75, 301, 301));
        // A second sleep at 300: enqueued 301 again, 301 - 75 = 226 past the
        // margin: (75 * 4 + 226) >> 2 = 131.
        assert_eq!(util_est_after("4.19", None, &[(300, 300), (300, 300)]).0, 131);
        // v5.15 with UTIL_EST_FASTUP: a rise is taken at once; enqueued carries
        // the flag in its top bit, which the estimate leaves out.
        assert_eq!(util_est_after("5.15", None, &[(300, 300)]), (300, 300 | UTIL_AVG_UNCHANGED, 300));
        // Without FASTUP, v5.15 averages as v4.19 did, without the flag bit: 300 >> 2.
        assert_eq!(util_est_after("5.15", Some("NO_UTIL_EST_FASTUP"), &[(300, 300)]).0, 75);
        // A fall from 300 to 200: (300 * 4 - 100) >> 2 = 275.
        assert_eq!(util_est_after("5.15", None, &[(300, 300), (200, 200)]).0, 275);
        // Within the margin (1% of 1024: |diff| < 10) nothing moves, unless
        // enqueued itself moved by the margin since it was last recorded (v5.12+):
        // 300 -> 295 records nothing; 320 -> 250 (the average (1280 - 70) >> 2 =
        // 302) -> 295 records enqueued only.
        let (ewma, enq, _) = util_est_after("5.15", None, &[(300, 300), (295, 295)]);
        assert_eq!((ewma, enq & !UTIL_AVG_UNCHANGED), (300, 300));
        let (ewma, enq, _) = util_est_after("5.15", None, &[(320, 320), (250, 250), (295, 295)]);
        assert_eq!((ewma, enq & !UTIL_AVG_UNCHANGED), (302, 295));
        // v6.6: a fall seen while the task waited for the CPU (runnable beyond its
        // utilisation by more than the margin) records enqueued but keeps the average.
        let (ewma, enq, _) = util_est_after("6.6", None, &[(300, 300), (200, 400)]);
        assert_eq!((ewma, enq & !UTIL_AVG_UNCHANGED), (300, 200));
        // v5.15 has no such rule.
        assert_eq!(util_est_after("5.15", None, &[(300, 300), (200, 400)]).0, 275);
        // v6.12+: one value, a rise at once, the fall filtered the same way.
        assert_eq!(util_est_after("6.18", None, &[(300, 300), (200, 200)]).0 & !UTIL_AVG_UNCHANGED, 275);
        // An update with the utilisation unchanged since the enqueue is skipped.
        let mut c = cfs_version_on("5.15", "x6-2-20", None, &[]);
        let p = add_task(&mut c, 0);
        c.se[p].avg.util_avg = 300;
        c.se[p].util_est_enqueued = UTIL_AVG_UNCHANGED;
        c.util_est_update(p, true);
        assert_eq!(c.se[p].util_est, 0);
    }

    #[test]
    fn cpu_util_counts_the_queued_tasks_estimates_with_util_est() {
        for (version, features, with_est) in
            [("4.19", None, true), ("5.15", None, true), ("5.15", Some("NO_UTIL_EST"), false), ("3.0", None, false)]
        {
            let mut c = cfs_version_on(version, "x6-2-20", features, &[]);
            let p = add_task(&mut c, 0);
            c.se[p].util_est = 400;
            c.rq[0].cfs.avg.util_avg = 100;
            c.enqueue_task_fair(0, p, false, false, 0);
            c.rq[0].cfs.avg.util_avg = 100;
            let est = c.rq[0].cfs.util_est;
            assert_eq!(est, if with_est { c.task_util_est_raw(p) } else { 0 }, "{version} {features:?}");
            assert_eq!(c.cpu_util(0), if with_est { est } else { 100 }, "{version} {features:?}");
            c.se[p].avg.util_avg = 60;
            // Without p: v4.19's cpu_util_wake() keeps p's estimate in the sum;
            // v5.0+'s cpu_util_without() takes it out for a queued p.
            let without = c.cpu_util_without(0, p);
            assert_eq!(without, if version == "4.19" { est } else { 40 }, "{version} {features:?}");
        }
        // v6.5+'s boost: the runnable average (700) raises the utilisation (100)
        // before the estimates (400) are read.
        let mut c = cfs_version_on("6.6", "x6-2-20", None, &[]);
        c.rq[0].cfs.util_est = 400;
        c.rq[0].cfs.avg.util_avg = 100;
        c.rq[0].cfs.avg.runnable_load_avg = 700;
        assert_eq!((c.cpu_util(0), c.cpu_util_boost(0)), (400, 700));
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
        c.enqueue_task_fair(0, a, false, false, 0);
        c.enqueue_task_fair(0, b, false, false, 0);
        // 24 ms × 1024/2048 through __calc_delta's inverse: a hair under 12 ms.
        assert_eq!(c.sched_slice(0, Ent::Task(a)), 11_999_994);
        // A waking nice-5 task against two nice-0 ones: 335/2383 of the 24 ms period.
        let d = add_task(&mut c, 5);
        let s = c.sched_slice(0, Ent::Task(d));
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
        assert_eq!(
            c.wakeup_preempt_entity(None, Ent::Task(curr), Ent::Task(woken)),
            0,
            "exactly the granularity ahead: no preemption"
        );
        c.se[curr].vruntime += 1;
        assert_eq!(c.wakeup_preempt_entity(None, Ent::Task(curr), Ent::Task(woken)), 1);
        c.se[curr].vruntime = 999_000_000;
        assert_eq!(c.wakeup_preempt_entity(None, Ent::Task(curr), Ent::Task(woken)), -1);
        // A nice-19 wakee needs 1024/15 × the granularity in its virtual time.
        let light = add_task(&mut c, 19);
        assert_eq!(c.wakeup_gran(None, Ent::Task(light)), calc_delta_fair(15_000_000, &mut c.se[light].load.clone(), c.res));
        assert!(c.wakeup_gran(None, Ent::Task(light)) > 1_000_000_000);
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
                assert_eq!(c.wakeup_gran(None, Ent::Task(p)), 4_000_000, "buddy picks never scale");
            }
            let p = add_task(&mut on, 0);
            assert_eq!(on.wakeup_gran(Some((0, 0)), Ent::Task(p)), 4_000_000 * factor, "nr_running {nr_running}");
            let p = add_task(&mut off, 0);
            assert_eq!(off.wakeup_gran(Some((0, 0)), Ent::Task(p)), 4_000_000, "feature off, nr_running {nr_running}");
        }
    }

    #[test]
    fn sleeper_credit_is_half_the_latency_and_never_backwards() {
        let mut c = cfs_on("x6-2-20", None, &[]);
        let p = add_task(&mut c, 0);
        let min = c.rq[0].cfs.min_vruntime;
        c.se[p].vruntime = 0;
        c.place_entity(0, 0, Ent::Task(p), false);
        assert_eq!(c.se[p].vruntime, min - 12_000_000);
        c.se[p].vruntime = min + 5;
        c.place_entity(0, 0, Ent::Task(p), false);
        assert_eq!(c.se[p].vruntime, min + 5, "a task ahead keeps its vruntime");
        let mut no = cfs_on("x6-2-20", Some("NO_GENTLE_FAIR_SLEEPERS"), &[]);
        let q = add_task(&mut no, 0);
        no.place_entity(0, 0, Ent::Task(q), false);
        assert_eq!(no.se[q].vruntime, no.rq[0].cfs.min_vruntime - 24_000_000);
    }

    #[test]
    fn fork_starts_one_vslice_right_with_start_debit() {
        let mut c = cfs_on("x6-2-20", None, &[]);
        let a = add_task(&mut c, 0);
        c.enqueue_task_fair(0, a, false, false, 0);
        let p = add_task(&mut c, 0);
        c.place_entity(0, 0, Ent::Task(p), true);
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
        c.enqueue_task_fair(3, a, false, false, 0);
        assert!(!c.overload_cpus[0].contains(3));
        c.enqueue_task_fair(3, b, false, false, 0);
        assert!(c.overload_cpus[0].contains(3), "1 → 2 sets the bit");
        c.enqueue_task_fair(3, d, false, false, 0);
        c.dequeue_task_fair(3, d, true, 0);
        assert!(c.overload_cpus[0].contains(3), "3 → 2 keeps it");
        c.dequeue_task_fair(3, b, true, 0);
        assert!(!c.overload_cpus[0].contains(3), "2 → 1 clears it");
        // Without the feature the mask stays empty.
        let mut off = cfs_on("x6-2-20", None, &[]);
        let (a, b) = (add_task(&mut off, 0), add_task(&mut off, 0));
        off.enqueue_task_fair(1, a, false, false, 0);
        off.enqueue_task_fair(1, b, false, false, 0);
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
