//! EEVDF entity timing (kernel/sched/fair.c v6.6, v6.12, v6.18): weighted average
//! vruntime and lag, eligibility, virtual deadlines, `pick_eevdf()`, lag-preserving
//! `place_entity()`, wakeup preemption with RUN_TO_PARITY / the protected slice and
//! PREEMPT_SHORT, delayed dequeue, reweight and yield.
//!
//! What EEVDF shares with CFS stays where it is: weights and `calc_delta_fair()`
//! (`weights.rs`), PELT (`pelt.rs`), group entities and shares (`group.rs`),
//! domains (`domains.rs`), wakeup placement (`select.rs`, the v5.15 path) and the
//! v5.x balancer (`balance5.rs`). `fair.rs` calls into this file wherever the
//! kernel's fair.c of v6.6+ differs from v5.15's: where an entity is placed, which
//! entity is picked, when the running one is preempted.
//!
//! Line references are to fair.c of each tag: v6.6 (`avg_vruntime` L651,
//! `update_entity_lag` L700, `entity_eligible` L744, `__pick_eevdf` L881,
//! `update_deadline` L1025, `reweight_eevdf` L3711, `place_entity` L5144,
//! `check_preempt_wakeup` L8250, `yield_task_fair` L8526); v6.12
//! (`vruntime_eligible` L726, `pick_eevdf` L907, `update_curr` L1216,
//! `place_entity` L5266, `dequeue_entity` L5476, `requeue_delayed_entity` L6919,
//! `check_preempt_wakeup_fair` L8764); v6.18 (`set_protect_slice` L884,
//! `update_curr` L1207, `set_next_entity` L5464, `check_preempt_wakeup_fair` L8741,
//! `yield_task_fair` L8994).

use schedlab_core::sched::System;
use schedlab_core::task::TaskId;

use super::domains::KernelVersion;
use super::state::{Cfs, DequeueKind, Ent};
use super::weights::calc_delta_fair;

impl Cfs {
    /// `entity_key()`: `e`'s vruntime relative to its cfs_rq's `min_vruntime`.
    #[inline]
    pub fn entity_key(&self, q: usize, cpu: usize, e: Ent) -> i64 {
        self.ent(e).vruntime.wrapping_sub(self.cfs(q, cpu).min_vruntime) as i64
    }

    /// The weight EEVDF averages with: `scale_load_down(se->load.weight)`.
    #[inline]
    fn avg_weight(&self, e: Ent) -> u64 {
        self.se_weight(self.ent(e).load.weight)
    }

    /// `avg_vruntime_add()`: `e` enters the tree's weighted sums.
    pub fn avg_vruntime_add(&mut self, q: usize, cpu: usize, e: Ent) {
        let w = self.avg_weight(e);
        let key = self.entity_key(q, cpu, e);
        let cfs = self.cfs_mut(q, cpu);
        cfs.avg_vruntime = cfs.avg_vruntime.wrapping_add(key.wrapping_mul(w as i64));
        cfs.avg_load += w;
    }

    /// `avg_vruntime_sub()`.
    pub fn avg_vruntime_sub(&mut self, q: usize, cpu: usize, e: Ent) {
        let w = self.avg_weight(e);
        let key = self.entity_key(q, cpu, e);
        let cfs = self.cfs_mut(q, cpu);
        cfs.avg_vruntime = cfs.avg_vruntime.wrapping_sub(key.wrapping_mul(w as i64));
        cfs.avg_load -= w;
    }

    /// The sums `avg_vruntime()` and the eligibility test use: the tree's, plus
    /// the running entity's if it is still queued (it is kept out of the tree).
    /// 64-bit and wrapping, as the kernel's `s64 avg` and `long load` (the
    /// kernel builds with -fno-strict-overflow).
    #[inline]
    fn avg_sums(&self, q: usize, cpu: usize) -> (i64, i64) {
        let cfs = self.cfs(q, cpu);
        let (mut avg, mut load) = (cfs.avg_vruntime, cfs.avg_load as i64);
        if let Some(c) = cfs.curr.filter(|&c| self.ent(c).on_rq) {
            let w = self.avg_weight(c) as i64;
            avg = avg.wrapping_add(self.entity_key(q, cpu, c).wrapping_mul(w));
            load += w;
        }
        (avg, load)
    }

    /// `avg_vruntime()`: V, the weighted average vruntime of the queued entities,
    /// the division rounded towards minus infinity so that an entity exactly at V
    /// is eligible. `min_vruntime` when nothing is queued.
    pub fn avg_vruntime(&self, q: usize, cpu: usize) -> u64 {
        let (mut avg, load) = self.avg_sums(q, cpu);
        if load > 0 {
            if avg < 0 {
                avg -= load - 1;
            }
            avg /= load;
        }
        self.cfs(q, cpu).min_vruntime.wrapping_add(avg as u64)
    }

    /// `vruntime_eligible()` (v6.12; `entity_eligible()` in v6.6): lag >= 0, i.e.
    /// `vruntime <= V`, tested without dividing: Σ key·w >= key(v)·Σ w.
    pub fn vruntime_eligible(&self, q: usize, cpu: usize, vruntime: u64) -> bool {
        self.eligibility(q, cpu).holds(vruntime)
    }

    pub fn entity_eligible(&self, q: usize, cpu: usize, e: Ent) -> bool {
        self.vruntime_eligible(q, cpu, self.ent(e).vruntime)
    }

    /// The sums `vruntime_eligible()` compares with, taken once for a scan
    /// that tests many entities of one cfs_rq against the same average.
    #[inline]
    fn eligibility(&self, q: usize, cpu: usize) -> Eligibility {
        let (avg, load) = self.avg_sums(q, cpu);
        Eligibility { avg, load, min_vruntime: self.cfs(q, cpu).min_vruntime }
    }

    /// `update_entity_lag()`: `vlag = V - vruntime`, clamped to the lag of
    /// `max(2 slices, TICK_NSEC)` of real time in `e`'s virtual time (the tick is
    /// the run's `tick_ns`); with LAG_CLAMP_MAX_SLICE, of the longest queued
    /// slice plus a tick.
    pub fn update_entity_lag(&mut self, q: usize, cpu: usize, e: Ent) {
        let lag = self.avg_vruntime(q, cpu).wrapping_sub(self.ent(e).vruntime) as i64;
        let res = self.res;
        let tick = self.tick_ns;
        // LAG_CLAMP_MAX_SLICE (6.18.y): the longest slice queued here (the
        // running entity's and the tree's augmented `max_slice`; `e` is one of
        // them, being queued) plus a tick.
        let span = if self.feat.lag_clamp_max_slice {
            self.cfs_rq_max_slice(q, cpu) + tick
        } else {
            (2 * self.ent(e).slice_ns).max(tick)
        };
        let se = self.ent_mut(e);
        let limit = calc_delta_fair(span, &mut se.load, res) as i64;
        se.vlag = lag.clamp(-limit, limit);
    }

    /// `cfs_rq_max_slice()` (6.18.y): the longest slice of the running entity
    /// (if queued) and of the tree.
    fn cfs_rq_max_slice(&self, q: usize, cpu: usize) -> u64 {
        let cfs = self.cfs(q, cpu);
        let curr = cfs.curr.filter(|&c| self.ent(c).on_rq).map_or(0, |c| self.ent(c).slice_ns);
        curr.max(cfs.queued_slices.last().map_or(0, |&(s, _)| s))
    }

    /// The slice `e` gets: its custom slice (v6.12+) or `sysctl_sched_base_slice`.
    fn refresh_slice(&mut self, e: Ent) {
        let base = self.sysctl.base_slice_ns;
        let se = self.ent_mut(e);
        if !se.custom_slice {
            se.slice_ns = base;
        }
    }

    /// `update_deadline()`: once the running entity reaches its deadline it gets a
    /// new slice and a deadline one slice (in its virtual time) further. True when
    /// that happened: the caller reschedules if others are queued.
    fn update_deadline(&mut self, e: Ent) -> bool {
        let se = self.ent(e);
        if (se.vruntime.wrapping_sub(se.deadline) as i64) < 0 {
            return false;
        }
        self.refresh_slice(e);
        let res = self.res;
        let se = self.ent_mut(e);
        se.deadline = se.vruntime + calc_delta_fair(se.slice_ns, &mut se.load, res);
        true
    }

    /// The EEVDF half of `update_curr()`, after the running entity of group `q`'s
    /// cfs_rq on `cpu` has been charged: a new deadline when the slice is used, the
    /// zero-lag reference moved, and a reschedule requested when the running entity
    /// should give way (v6.6: its slice ended; v6.12: or PREEMPT_SHORT cancelled its
    /// protection and it is ineligible; v6.18: or its protected slice ended).
    pub fn update_curr_eevdf(&mut self, q: usize, cpu: usize, curr: Ent) {
        let resched = self.update_deadline(curr);
        self.update_min_vruntime_eevdf(q, cpu);
        if self.cfs(q, cpu).nr_running <= 1 {
            return;
        }
        let give_way = resched
            || match self.version {
                KernelVersion::V6_18 => !self.protect_slice(curr),
                KernelVersion::V6_12 => {
                    // did_preempt_short(): the protection was cut and curr is ineligible.
                    self.feat.preempt_short && !self.protect_slice(curr) && !self.entity_eligible(q, cpu, curr)
                }
                _ => false,
            };
        if give_way {
            self.clear_buddies(q, cpu, curr);
            self.request_resched(cpu);
        }
    }

    /// `resched_curr(rq)` from inside the class, where the hook has no `System`:
    /// flushed to the engine when the hook returns (`flush_resched`).
    pub fn request_resched(&mut self, cpu: usize) {
        if !self.rq[cpu].resched_pending {
            self.rq[cpu].resched_pending = true;
            self.resched_cpus.push(cpu);
        }
    }

    /// Hands the reschedules requested during a hook to the engine, asked from the
    /// CPU running the hook (an IPI if remote).
    pub fn flush_resched(&mut self, sys: &mut System) {
        let from = sys.this_cpu();
        while let Some(cpu) = self.resched_cpus.pop() {
            self.rq[cpu].resched_pending = false;
            if sys.curr(cpu).is_some() {
                sys.resched_cpu(cpu, from);
            }
        }
    }

    /// Takes the reschedule requested for `cpu` (the tick reports it itself).
    pub fn take_resched(&mut self, cpu: usize) -> bool {
        if !self.rq[cpu].resched_pending {
            return false;
        }
        self.rq[cpu].resched_pending = false;
        self.resched_cpus.retain(|&c| c != cpu);
        true
    }

    /// `update_min_vruntime()` of v6.6+: as CFS's, and the tree's weighted sum
    /// follows its new reference (`avg_vruntime_update()`).
    pub fn update_min_vruntime_eevdf(&mut self, q: usize, cpu: usize) {
        let vruntime = self.min_vruntime_candidate(q, cpu);
        let cfs = self.cfs_mut(q, cpu);
        if vruntime > cfs.min_vruntime {
            let delta = vruntime - cfs.min_vruntime;
            cfs.avg_vruntime = cfs.avg_vruntime.wrapping_sub((cfs.avg_load as i64).wrapping_mul(delta as i64));
            cfs.min_vruntime = vruntime;
        }
    }

    /// `place_entity()` of v6.6+: at V less the entity's lag, the lag inflated so
    /// that it is still the entity's lag once its own weight is in the average
    /// (PLACE_LAG), and a deadline one virtual slice later (half a slice for a new
    /// task with PLACE_DEADLINE_INITIAL; the saved relative deadline after a
    /// migration with PLACE_REL_DEADLINE, v6.12+).
    pub fn place_entity_eevdf(&mut self, q: usize, cpu: usize, e: Ent, initial: bool) {
        let v = self.avg_vruntime(q, cpu);
        self.refresh_slice(e);
        let res = self.res;
        let vslice = {
            let se = self.ent_mut(e);
            calc_delta_fair(se.slice_ns, &mut se.load, res)
        };
        let mut lag: i64 = 0;
        // v6.18 also skips the arithmetic when vlag is 0; the result is the same.
        if self.feat.place_lag && self.cfs(q, cpu).nr_running > 0 {
            let cfs = self.cfs(q, cpu);
            let mut load = cfs.avg_load as i64;
            if let Some(c) = cfs.curr.filter(|&c| self.ent(c).on_rq) {
                load += self.avg_weight(c) as i64;
            }
            // s64 arithmetic as the kernel's (`lag *= load + weight`, wrapping).
            lag = self.ent(e).vlag.wrapping_mul(load + self.avg_weight(e) as i64);
            if load == 0 {
                load = 1;
            }
            // div_s64() truncates towards zero, as Rust's `/` does.
            lag /= load;
        }
        let rel_deadline = self.feat.place_rel_deadline || self.version >= KernelVersion::V6_18;
        let se = self.ent_mut(e);
        se.vruntime = v.wrapping_sub(lag as u64);
        if se.rel_deadline {
            se.rel_deadline = false;
            if rel_deadline {
                se.deadline = se.deadline.wrapping_add(se.vruntime);
                return;
            }
        }
        let vslice = if initial && self.feat.place_deadline_initial { vslice / 2 } else { vslice };
        let se = self.ent_mut(e);
        se.deadline = se.vruntime + vslice;
    }

    /// Whether the running entity `e` is still protected from being switched away
    /// from: v6.6/v6.12 RUN_TO_PARITY's "`vlag == deadline`" mark (set at pick,
    /// broken by a new deadline); v6.18 `protect_slice()`, `vprot > vruntime`.
    pub fn protect_slice(&self, e: Ent) -> bool {
        let se = self.ent(e);
        if self.version >= KernelVersion::V6_18 {
            (se.vprot.wrapping_sub(se.vruntime) as i64) > 0
        } else {
            se.vlag == se.deadline as i64
        }
    }

    /// `cancel_protect_slice()` (v6.18; v6.12 moves `vlag` off the deadline).
    fn cancel_protect_slice(&mut self, e: Ent) {
        let v618 = self.version >= KernelVersion::V6_18;
        let se = self.ent_mut(e);
        if v618 {
            se.vprot = se.vruntime;
        } else if se.vlag == se.deadline as i64 {
            se.vlag = se.deadline as i64 + 1;
        }
    }

    /// `cfs_rq_min_slice()` (v6.12+): the shortest slice among the queued entities.
    /// The kernel keeps the tree's as an augmented value; here the timeline's
    /// slices are counted as entities enter and leave it.
    fn cfs_rq_min_slice(&self, q: usize, cpu: usize) -> u64 {
        let cfs = self.cfs(q, cpu);
        let curr = cfs.curr.filter(|&c| self.ent(c).on_rq).map_or(u64::MAX, |c| self.ent(c).slice_ns);
        let queued = cfs.queued_slices.first().map_or(u64::MAX, |&(s, _)| s);
        debug_assert_eq!(
            queued,
            cfs.timeline.iter().map(|&(_, _, e)| self.ent(e).slice_ns).min().unwrap_or(u64::MAX),
            "a queued entity's slice changed in the timeline"
        );
        curr.min(queued)
    }

    /// `set_next_entity()`'s protection of a newly picked entity: v6.6/v6.12 copy
    /// the deadline into `vlag`; v6.18 `set_protect_slice()` protects up to the
    /// deadline, or less when a shorter slice is queued (RUN_TO_PARITY) or without
    /// RUN_TO_PARITY for one normalized base slice.
    pub fn set_protect_slice(&mut self, q: usize, cpu: usize, e: Ent) {
        if self.version < KernelVersion::V6_18 {
            let se = self.ent_mut(e);
            se.vlag = se.deadline as i64;
            return;
        }
        let mut slice = super::sysctl::NORMALIZED_BASE_SLICE_V615_NS;
        if self.feat.run_to_parity {
            slice = self.cfs_rq_min_slice(q, cpu);
        }
        let res = self.res;
        let se = self.ent_mut(e);
        slice = slice.min(se.slice_ns);
        let mut vprot = se.deadline;
        if slice != se.slice_ns {
            let until = se.vruntime + calc_delta_fair(slice, &mut se.load, res);
            vprot = vprot.min(until);
        }
        se.vprot = vprot;
    }

    /// `update_protect_slice()` (v6.18): a shorter-slice wakee that did not preempt
    /// still shortens the running entity's protection to the queue's min slice.
    fn update_protect_slice(&mut self, q: usize, cpu: usize, e: Ent) {
        let slice = self.cfs_rq_min_slice(q, cpu);
        let res = self.res;
        let se = self.ent_mut(e);
        let until = se.vruntime + calc_delta_fair(slice, &mut se.load, res);
        se.vprot = se.vprot.min(until);
    }

    /// `pick_eevdf()` (`__pick_eevdf(cfs_rq, protect)` in v6.18) on group `q`'s
    /// cfs_rq: the running entity while it is eligible and protected
    /// (RUN_TO_PARITY, `protect`), else the eligible entity with the earliest
    /// virtual deadline, the running one included. `curr` is the entity running at
    /// this level (the model has already put it back into the tree, so it is one of
    /// the queued entities here; the kernel keeps it aside).
    ///
    /// The deadline-ordered scan stops at the first eligible entity: v6.12's tree is
    /// ordered by deadline and takes the leftmost eligible one; v6.6 searches a
    /// vruntime-ordered tree augmented with the subtree's earliest deadline for the
    /// same entity (ties between equal deadlines aside).
    pub fn pick_eevdf(&self, q: usize, cpu: usize, curr: Option<Ent>, protect: bool) -> Option<Ent> {
        let cfs = self.cfs(q, cpu);
        let queued = cfs.timeline.len() + usize::from(cfs.curr.is_some_and(|c| self.ent(c).on_rq));
        let aside = cfs.curr.filter(|&c| self.ent(c).on_rq);
        let first = cfs.by_deadline.first().map(|&(_, _, e)| e);
        if queued == 1 {
            // v6.12+: "only one entity, skip the eligibility check" (it is eligible anyway).
            return aside.or(first);
        }
        let curr = curr.filter(|&c| self.ent(c).on_rq && self.entity_eligible(q, cpu, c));
        if let Some(c) = curr {
            if protect && self.feat.run_to_parity && self.protect_slice(c) {
                return Some(c);
            }
        }
        let eligibility = self.eligibility(q, cpu);
        let eligible = |e: Ent| eligibility.holds(self.ent(e).vruntime);
        let mut best = cfs.by_deadline.iter().map(|&(_, _, e)| e).find(|&e| eligible(e));
        // The running entity kept aside competes on its deadline.
        if let Some(a) = aside.filter(|&a| eligible(a)) {
            if best.is_none_or(|b| (self.ent(a).deadline as i64).wrapping_sub(self.ent(b).deadline as i64) < 0) {
                best = Some(a);
            }
        }
        // Some entity is always eligible (the one furthest behind is at or below
        // the average); v6.6 falls back to the leftmost with an error message.
        best.or(first).or(aside)
    }

    /// `pick_next_entity()` of v6.6+: the next buddy if it is eligible (v6.18
    /// PICK_BUDDY, or NEXT_BUDDY), else `pick_eevdf()`.
    pub fn pick_next_entity_eevdf(&self, q: usize, cpu: usize, curr: Option<Ent>) -> Option<Ent> {
        let cfs = self.cfs(q, cpu);
        if self.feat.pick_buddy || self.feat.next_buddy {
            if let Some(n) = cfs.next.filter(|&n| self.ent(n).on_rq && self.entity_eligible(q, cpu, n)) {
                return Some(n);
            }
        }
        self.pick_eevdf(q, cpu, curr, true)
    }

    /// `check_preempt_wakeup_fair()` of v6.6+ at the level where the running
    /// entity `se` and the wakee's `pse` share cfs_rq `q`: preempt iff the pick
    /// would now be the wakee. v6.12: a shorter-slice wakee (PREEMPT_SHORT) that is
    /// eligible and due first, or facing an ineligible `se`, first cancels `se`'s
    /// protection; v6.18 compares slices only and lets the unprotected pick decide,
    /// shortening the protection when it does not preempt.
    pub fn wakeup_preempt_eevdf(&mut self, q: usize, cpu: usize, se: Ent, pse: Ent, now: u64, fork: bool) -> bool {
        self.update_curr(q, cpu, now);
        let shorter = self.feat.preempt_short && self.ent(pse).slice_ns < self.ent(se).slice_ns;
        if self.feat.wakeup_preempt_619 {
            return self.wakeup_preempt_619(q, cpu, se, pse, now, fork, shorter);
        }
        match self.version {
            KernelVersion::V6_6 => self.pick_eevdf(q, cpu, Some(se), true) == Some(pse),
            KernelVersion::V6_12 => {
                let do_preempt_short = shorter
                    && self.entity_eligible(q, cpu, pse)
                    && ((self.ent(pse).deadline as i64).wrapping_sub(self.ent(se).deadline as i64) < 0
                        || !self.entity_eligible(q, cpu, se));
                if do_preempt_short {
                    self.cancel_protect_slice(se);
                }
                self.pick_eevdf(q, cpu, Some(se), true) == Some(pse)
            }
            _ => {
                if self.pick_eevdf(q, cpu, Some(se), !shorter) == Some(pse) {
                    if shorter {
                        self.cancel_protect_slice(se);
                    }
                    return true;
                }
                if self.feat.run_to_parity && shorter {
                    self.update_protect_slice(q, cpu, se);
                }
                false
            }
        }
    }

    /// `check_preempt_wakeup_fair()` as 6.18.y took it from v6.19
    /// (WAKEUP_PREEMPT_619, read in a 6.18.35 tree), with NEXT_BUDDY off: a
    /// shorter slice goes straight to the pick without protection; otherwise a
    /// fork (WF_FORK) or a delayed wakee never preempts. The pick is
    /// `pick_next_entity()`: a delayed entity it finds is dequeued for good
    /// there and the pick is made again while anything is queued. Without a
    /// preemption the running entity's protection is trimmed to the queue's
    /// shortest slice (RUN_TO_PARITY), whatever the slices.
    #[allow(clippy::too_many_arguments)]
    fn wakeup_preempt_619(&mut self, q: usize, cpu: usize, se: Ent, pse: Ent, now: u64, fork: bool, shorter: bool) -> bool {
        if !shorter && (fork || self.ent(pse).sched_delayed) {
            return false;
        }
        loop {
            match self.pick_eevdf(q, cpu, Some(se), !shorter) {
                Some(n) if n == pse => {
                    if shorter {
                        self.cancel_protect_slice(se);
                    }
                    return true;
                }
                Some(n) if self.ent(n).sched_delayed => {
                    match n {
                        Ent::Task(p) => self.dequeue_task_fair_flags(cpu, p, DequeueKind::Delayed, now),
                        Ent::Group(..) => self.dequeue_delayed_group(cpu, n, now),
                    }
                    if self.cfs(q, cpu).nr_running == 0 {
                        break;
                    }
                }
                _ => break,
            }
        }
        if self.feat.run_to_parity {
            self.update_protect_slice(q, cpu, se);
        }
        false
    }

    /// `yield_task_fair()` of v6.6 to v6.18.0: the yielder's deadline moves one
    /// slice later. With v6.18's `vprot` untouched, an eligible protected yielder
    /// is usually picked again. YIELD_FORFEIT (79104becf42b, v6.19, in 6.18.2):
    /// an eligible yielder first gives up the rest of its slice (vruntime moved to
    /// its deadline), which also ends its protection.
    pub fn yield_eevdf(&mut self, q: usize, cpu: usize, e: Ent) {
        if self.feat.yield_forfeit && self.entity_eligible(q, cpu, e) {
            let se = self.ent_mut(e);
            se.vruntime = se.deadline;
            self.update_min_vruntime_eevdf(q, cpu);
        }
        let res = self.res;
        let se = self.ent_mut(e);
        se.deadline += calc_delta_fair(se.slice_ns, &mut se.load, res);
    }

    /// `reweight_eevdf()` (v6.12 L3768): a queued entity's new weight keeps its lag,
    /// clamped as at dequeue (`entity_lag()`), scaled by old/new weight, and its
    /// deadline's distance from V scales the same way. `v` is V taken before the
    /// entity left the tree's sums, as v6.12's `reweight_entity()` does.
    pub fn reweight_eevdf(&mut self, v: u64, e: Ent, old_weight: u64, new_weight: u64) {
        let (old, new) = (i128::from(old_weight), i128::from(new_weight.max(1)));
        let res = self.res;
        let tick = self.tick_ns;
        let se = self.ent_mut(e);
        if v != se.vruntime {
            let limit = calc_delta_fair((2 * se.slice_ns).max(tick), &mut se.load.clone(), res) as i64;
            let lag = (v.wrapping_sub(se.vruntime) as i64).clamp(-limit, limit);
            let vlag = i128::from(lag) * old / new;
            se.vruntime = v.wrapping_sub(vlag as i64 as u64);
        }
        let vslice = i128::from(se.deadline.wrapping_sub(v) as i64) * old / new;
        se.deadline = v.wrapping_add(vslice as i64 as u64);
    }

    /// A weight change of queued entity `e` on group `q`'s cfs_rq (the kernel's
    /// `reweight_entity()`), called with `e` out of the tree's sums and its load
    /// already at `new_weight`; `v_before` is V before `e` left the sums.
    /// v6.6.0 keeps the vruntime and scales only the deadline's distance from it
    /// (so the lag is not kept: `reweight_eevdf()` came in v6.7); v6.12 keeps the
    /// lag (`reweight_eevdf()`); v6.18 saves the lag, scales it and the relative
    /// deadline, and places the entity again.
    pub fn reweight_queued_eevdf(&mut self, q: usize, cpu: usize, e: Ent, v_before: u64, old_weight: u64, new_weight: u64) {
        let (old, new) = (i128::from(old_weight), i128::from(new_weight.max(1)));
        match self.version {
            KernelVersion::V6_6 => {
                let se = self.ent_mut(e);
                let rel = i128::from(se.deadline.wrapping_sub(se.vruntime) as i64) * old / new;
                se.deadline = se.vruntime.wrapping_add(rel as i64 as u64);
                return;
            }
            KernelVersion::V6_12 => {
                self.reweight_eevdf(v_before, e, old_weight, new_weight);
                return;
            }
            _ => {}
        }
        let is_curr = self.cfs(q, cpu).curr == Some(e);
        self.update_entity_lag(q, cpu, e);
        // REWEIGHT_KEEPS_VPROT (6.18.y after 6.18.44): `vprot` is a field of its
        // own (v6.19's "Separate se->vlag from se->vprot") and a protected
        // running entity keeps its protection, relative to its vruntime and
        // scaled as its lag.
        let keep = self.feat.reweight_keeps_vprot;
        let rel_vprot = (keep && is_curr && self.protect_slice(e)).then(|| {
            let se = self.ent(e);
            i128::from(se.vprot.wrapping_sub(se.vruntime) as i64)
        });
        let (old, new) = (i128::from(old_weight), i128::from(new_weight.max(1)));
        let se = self.ent_mut(e);
        se.vlag = (i128::from(se.vlag) * old / new) as i64;
        let rel = i128::from(se.deadline.wrapping_sub(se.vruntime) as i64) * old / new;
        se.deadline = rel as i64 as u64;
        se.rel_deadline = true;
        // Placed as a fresh arrival: it does not count itself in nr_queued.
        self.cfs_mut(q, cpu).nr_running -= 1;
        self.place_entity_eevdf(q, cpu, e, false);
        self.cfs_mut(q, cpu).nr_running += 1;
        let se = self.ent_mut(e);
        if let Some(rel) = rel_vprot {
            se.vprot = se.vruntime.wrapping_add((rel * old / new) as i64 as u64);
        } else if is_curr && !keep {
            // v6.18.0: `vprot` shares its storage with `vlag` (a union in struct
            // sched_entity): saving the lag of the running entity overwrote it.
            se.vprot = se.vlag as u64;
        }
    }

    /// The weight change of a sleeping entity: its stored lag is `V - v`, so the
    /// lag `w·(V - v)` is kept by scaling by old/new weight.
    pub fn reweight_sleeping_eevdf(&mut self, e: Ent, old_weight: u64, new_weight: u64) {
        let se = self.ent_mut(e);
        se.vlag = (i128::from(se.vlag) * i128::from(old_weight) / i128::from(new_weight.max(1))) as i64;
    }

    /// `requeue_delayed_entity()` (v6.12): a delayed task is woken where it still
    /// sits; with DELAY_ZERO a positive lag it earned while delayed is dropped and it
    /// is placed again at zero lag.
    pub fn requeue_delayed_entity(&mut self, q: usize, cpu: usize, e: Ent) {
        if self.feat.delay_zero {
            self.update_entity_lag(q, cpu, e);
            if self.ent(e).vlag > 0 {
                let is_curr = self.cfs(q, cpu).curr == Some(e);
                self.cfs_mut(q, cpu).nr_running -= 1;
                if !is_curr {
                    self.tree_remove(q, cpu, e);
                }
                self.ent_mut(e).vlag = 0;
                self.place_entity_eevdf(q, cpu, e, false);
                if !is_curr {
                    self.tree_insert(q, cpu, e);
                }
                self.cfs_mut(q, cpu).nr_running += 1;
            }
        }
        self.ent_mut(e).sched_delayed = false;
    }

    /// Independent recomputations for `--check`: every cfs_rq's weighted sum and
    /// load equal a sum over its tree, V is within rounding of the exact weighted
    /// average, and the pick equals a brute-force EEVDF pick. Returns what failed.
    pub fn check_eevdf(&self, cpu: usize) -> Option<String> {
        let mut queues = vec![0usize];
        queues.extend((1..self.tg.len()).filter(|&g| g < self.tg.len() && cpu < self.tg[g].cfs_rq.len()));
        for q in queues {
            let cfs = self.cfs(q, cpu);
            let (mut sum, mut load) = (0i128, 0i128);
            for &(_, _, e) in cfs.timeline.iter() {
                let w = i128::from(self.avg_weight(e));
                sum += i128::from(self.entity_key(q, cpu, e)) * w;
                load += w;
            }
            if sum != i128::from(cfs.avg_vruntime) || load != i128::from(cfs.avg_load) {
                return Some(format!(
                    "cpu{cpu} cfs_rq {q}: avg_vruntime {} / avg_load {} but the tree sums to {sum} / {load}",
                    cfs.avg_vruntime, cfs.avg_load
                ));
            }
            if cfs.timeline.len() != cfs.by_deadline.len() {
                return Some(format!(
                    "cpu{cpu} cfs_rq {q}: the deadline index has {} entities, the tree {}",
                    cfs.by_deadline.len(),
                    cfs.timeline.len()
                ));
            }
            // V against the exact average over every queued entity (rounding: the
            // kernel's floor division is at most one unit below).
            let mut all: Vec<Ent> = cfs.timeline.iter().map(|&(_, _, e)| e).collect();
            all.extend(cfs.curr.filter(|&c| self.ent(c).on_rq));
            let total_w: i128 = all.iter().map(|&e| i128::from(self.avg_weight(e))).sum();
            if total_w > 0 {
                let exact: i128 = all.iter().map(|&e| i128::from(self.ent(e).vruntime) * i128::from(self.avg_weight(e))).sum();
                let v = i128::from(self.avg_vruntime(q, cpu));
                if v * total_w > exact || (v + 1) * total_w <= exact {
                    return Some(format!(
                        "cpu{cpu} cfs_rq {q}: V = {v} is not the floor of the weighted average {exact}/{total_w}"
                    ));
                }
                // Brute force: the earliest deadline among entities at or below V.
                let eligible: Vec<Ent> =
                    all.iter().copied().filter(|&e| i128::from(self.ent(e).vruntime) * total_w <= exact).collect();
                let min_dl = eligible.iter().map(|&e| self.ent(e).deadline).min();
                let got = self.pick_eevdf(q, cpu, None, false);
                let ok = match (got, min_dl) {
                    (Some(g), Some(d)) => eligible.contains(&g) && self.ent(g).deadline == d,
                    (None, None) => true,
                    _ => false,
                };
                if !ok {
                    return Some(format!("cpu{cpu} cfs_rq {q}: pick_eevdf chose {got:?}, not an eligible entity with the earliest deadline {min_dl:?}"));
                }
            }
        }
        None
    }

    /// ttwu of a task whose dequeue was delayed: it is still queued on its CPU, so
    /// the kernel takes `ttwu_runnable()` and never calls `select_task_rq()`.
    pub fn delayed_on(&self, p: TaskId) -> Option<usize> {
        let se = self.se.get(p)?;
        (se.sched_delayed && se.on_rq).then_some(se.rq_cpu)
    }
}

impl Cfs {
    /// `pick_next_task_fair()` of v6.6+ (v6.12 `pick_task_fair()` +
    /// `put_prev_set_next_task()`): descend from the root picking with
    /// `pick_next_entity()`, each level's previous running entity as `curr`; a
    /// delayed task picked is dequeued for good and the pick starts over (v6.12+).
    /// Only levels whose entity changed get `set_next_entity()`'s protection: a
    /// task picked again keeps the (possibly spent) protection it had, as the kernel
    /// does when `prev == next`; after active balance's stopper, prev is the stopper
    /// and every level is set. With nothing to run, newidle balancing as in v5.x.
    pub fn pick_next_task_eevdf(&mut self, sys: &mut System, cpu: usize) -> Option<TaskId> {
        // The two chains live in buffers kept between picks (no allocation per pick).
        let (mut prev_chain, mut picked) = std::mem::take(&mut self.pick_buffers);
        prev_chain.clear();
        let next = self.pick_next_task_eevdf_with(sys, cpu, &mut prev_chain, &mut picked);
        self.pick_buffers = (prev_chain, picked);
        next
    }

    fn pick_next_task_eevdf_with(
        &mut self,
        sys: &mut System,
        cpu: usize,
        prev_chain: &mut Vec<Ent>,
        picked: &mut Vec<Ent>,
    ) -> Option<TaskId> {
        let now = sys.rq_clock(cpu);
        let prev = self.rq[cpu].curr_task.take();
        if let Some(p) = prev {
            let mut at = Some(Ent::Task(p));
            while let Some(e) = at {
                prev_chain.push(e);
                at = self.parent_ent(e, cpu);
            }
            self.put_prev_task_fair(cpu, p, now);
        }
        // A stopper (active balance's `active_load_balance_cpu_stop()`, or
        // `sched_exec()`'s `migration_cpu_stop()`) preempted prev, and may push
        // it to another CPU: the pick after it is
        // `pick_next_task_fair()` with the stopper as prev, its `simple` path. No
        // level has a running entity (`put_prev_entity()` cleared each
        // `cfs_rq->curr`) and `put_prev_set_next_task()` sets every level of the
        // pick anew, as for a task picked after the idle task.
        if self.rq[cpu].stopper.is_some() {
            prev_chain.clear();
        }
        self.balance_asked_of(sys, cpu);
        'pick: loop {
            // Entities, not tasks: a delayed empty group entity is queued too.
            if self.rq[cpu].cfs.nr_running > 0 {
                picked.clear();
                let mut q = 0;
                let task = loop {
                    let curr = prev_chain.iter().copied().find(|&e| self.q_of(e) == q);
                    let e = self.pick_next_entity_eevdf(q, cpu, curr).expect("a cfs_rq with entities has a pick");
                    if self.ent(e).sched_delayed {
                        // Eligible now: it leaves for good and the pick starts over.
                        match e {
                            Ent::Task(p) => self.dequeue_task_fair_flags(cpu, p, DequeueKind::Delayed, now),
                            Ent::Group(..) => self.dequeue_delayed_group(cpu, e, now),
                        }
                        continue 'pick;
                    }
                    picked.push(e);
                    match e {
                        Ent::Group(g, _) => q = g,
                        Ent::Task(p) => break p,
                    }
                };
                for &e in picked.iter() {
                    let q = self.q_of(e);
                    self.set_next_entity(q, cpu, e, now);
                    if !prev_chain.contains(&e) {
                        self.set_protect_slice(q, cpu, e);
                    }
                }
                self.mru_touch(cpu, task);
                self.rq[cpu].curr_task = Some(task);
                return Some(task);
            }
            self.rq[cpu].idle_stamp_ns = Some(now);
            self.rq[cpu].idle_stamp_until_ns = None;
            if self.idle_balance(sys, cpu) > 0 {
                self.end_newidle_pass(sys, cpu);
                continue;
            }
            self.update_idle_core(sys, cpu);
            self.rq[cpu].cpu_load[0] = self.weighted_cpuload(cpu);
            return None;
        }
    }
}

/// `vruntime_eligible()`'s sums for one cfs_rq: Σ (vruntime - min_vruntime)
/// · weight and Σ weight over the queued entities, the running one included.
struct Eligibility {
    avg: i64,
    load: i64,
    min_vruntime: u64,
}

impl Eligibility {
    /// `vruntime` is at or before the weighted average: avg >= key · load.
    #[inline]
    fn holds(&self, vruntime: u64) -> bool {
        let key = vruntime.wrapping_sub(self.min_vruntime) as i64;
        self.avg >= key.wrapping_mul(self.load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfs::state::{Se, MIN_VRUNTIME_START};
    use crate::cfs::weights::LoadWeight;
    use schedlab_core::sched::SchedClass;
    use schedlab_core::Topology;

    const MIN: u64 = MIN_VRUNTIME_START;

    fn eevdf_on(version: &str, spec: &str, features: Option<&str>) -> Cfs {
        let mut c = Cfs::new_eevdf(version, features, &[]).unwrap();
        c.boot_on(&Topology::parse(spec).unwrap(), 4_000_000);
        c
    }

    fn add_task(c: &mut Cfs, nice: i32) -> TaskId {
        let se = Se { load: LoadWeight::for_nice(nice, c.res), slice_ns: c.sysctl.base_slice_ns, ..Se::blank() };
        c.se.push(se);
        c.task_group.push(0);
        c.se.len() - 1
    }

    /// Puts `p` in CPU 0's tree at `vruntime` with `deadline`, bypassing placement.
    fn queue_at(c: &mut Cfs, p: TaskId, vruntime: u64, deadline: u64) {
        let se = &mut c.se[p];
        (se.vruntime, se.deadline, se.on_rq) = (vruntime, deadline, true);
        c.tree_insert(0, 0, Ent::Task(p));
        c.rq[0].cfs.nr_running += 1;
    }

    /// Nice-0 tasks a (running, fresh pick, at MIN with deadline MIN + 3 ms), b (not
    /// queued) and one far ahead (MIN + 3 ms), so that V = 1 ms after a's start
    /// and a is eligible and protected.
    fn protected_runner(c: &mut Cfs) -> (TaskId, TaskId) {
        let (a, b, far) = (add_task(c, 0), add_task(c, 0), add_task(c, 0));
        queue_at(c, a, MIN, MIN + 3_000_000);
        queue_at(c, far, MIN + 3_000_000, MIN + 6_000_000);
        run(c, a);
        (a, b)
    }

    /// Nice-0 tasks a and b enqueued on CPU 0; a runs 2 ms (V = 1 ms, a 1 ms past
    /// it) and sleeps: delayed from v6.12, gone in v6.6.
    fn sleep_after_running_2ms(c: &mut Cfs) -> (TaskId, TaskId) {
        let (a, b) = (add_task(c, 0), add_task(c, 0));
        c.enqueue_task_fair(0, a, true, false, 0);
        c.enqueue_task_fair(0, b, true, false, 0);
        c.tree_remove(0, 0, Ent::Task(a));
        c.rq[0].cfs.curr = Some(Ent::Task(a));
        c.se[a].vruntime += 2_000_000;
        c.dequeue_task_fair_flags(0, a, DequeueKind::Sleep, 0);
        (a, b)
    }

    /// Makes queued `p` CPU 0's running entity, as a fresh pick.
    fn run(c: &mut Cfs, p: TaskId) {
        c.tree_remove(0, 0, Ent::Task(p));
        c.rq[0].cfs.curr = Some(Ent::Task(p));
        c.set_protect_slice(0, 0, Ent::Task(p));
    }

    #[test]
    fn base_slice_is_the_normalized_slice_times_the_cpu_factor() {
        // 0.75 ms x (1 + ilog2(min(ncpus, 8))) before v6.15, 0.70 ms after.
        assert_eq!(eevdf_on("6.6", "x6-2-20", None).sysctl.base_slice_ns, 3_000_000);
        assert_eq!(eevdf_on("6.12", "kvm-4", None).sysctl.base_slice_ns, 2_250_000);
        assert_eq!(eevdf_on("6.18", "kvm-2", None).sysctl.base_slice_ns, 1_400_000);
        assert_eq!(eevdf_on("6.18", "x6-2-20", None).sysctl.base_slice_ns, 2_800_000);
    }

    #[test]
    fn deadline_is_one_slice_of_virtual_time_away() {
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let light = add_task(&mut c, 5);
        c.enqueue_task_fair(0, light, true, false, 0);
        // Alone: placed at V = min_vruntime. 3 ms at weight 335 through __calc_delta:
        // 1024 x 12820798 (wmult of 335) = 13128497152, narrowed by 2 bits to
        // 3282124288 with shift 30; 3e6 x 3282124288 >> 30 = 9170149 (exact 9170149.25).
        assert_eq!(c.se[light].vruntime, MIN);
        assert_eq!(c.se[light].deadline - c.se[light].vruntime, 9_170_149);
        let heavy = add_task(&mut c, -5);
        c.se[heavy].vruntime = 0;
        c.place_entity_eevdf(0, 0, Ent::Task(heavy), false);
        // 3 ms x 1024/3121 = 984299.9, truncated.
        assert_eq!(c.se[heavy].deadline - c.se[heavy].vruntime, 984_299);
        // v6.12 gives a new task half a slice (PLACE_DEADLINE_INITIAL + ENQUEUE_INITIAL).
        let mut c = eevdf_on("6.12", "x6-2-20", None);
        let p = add_task(&mut c, 5);
        c.enqueue_task_fair_flags(0, p, false, false, true, 0);
        assert_eq!(c.se[p].deadline - c.se[p].vruntime, 9_170_149 / 2);
    }

    #[test]
    fn placement_inflates_the_lag_so_that_it_survives_the_entitys_own_weight() {
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let (a, b, w) = (add_task(&mut c, 0), add_task(&mut c, 0), add_task(&mut c, 0));
        queue_at(&mut c, a, MIN, MIN + 3_000_000);
        queue_at(&mut c, b, MIN, MIN + 3_000_000);
        c.se[w].vlag = 1_000_000;
        c.place_entity_eevdf(0, 0, Ent::Task(w), false);
        // V = MIN; W = 2048, w = 1024: lag' = 1 ms x 3072 / 2048 = 1.5 ms.
        assert_eq!(c.se[w].vruntime, MIN - 1_500_000);
        assert_eq!(c.se[w].deadline, MIN - 1_500_000 + 3_000_000);
        // Once queued, V = (0 + 0 - 1.5 ms) / 3 = -0.5 ms: the lag is the 1 ms it had.
        let (v, d) = (c.se[w].vruntime, c.se[w].deadline);
        queue_at(&mut c, w, v, d);
        assert_eq!(c.avg_vruntime(0, 0), MIN - 500_000);
        c.update_entity_lag(0, 0, Ent::Task(w));
        assert_eq!(c.se[w].vlag, 1_000_000);
        // Without PLACE_LAG the lag is forgotten.
        let mut off = eevdf_on("6.6", "x6-2-20", Some("NO_PLACE_LAG"));
        let (a2, p) = (add_task(&mut off, 0), add_task(&mut off, 0));
        queue_at(&mut off, a2, MIN, MIN + 3_000_000);
        off.se[p].vlag = 1_000_000;
        off.place_entity_eevdf(0, 0, Ent::Task(p), false);
        assert_eq!(off.se[p].vruntime, MIN);
        let _ = (a, b);
    }

    #[test]
    fn lag_is_clamped_to_two_slices_or_a_tick() {
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
        queue_at(&mut c, a, MIN, MIN + 3_000_000);
        queue_at(&mut c, b, MIN + 100_000_000, MIN + 103_000_000);
        c.update_entity_lag(0, 0, Ent::Task(a));
        // V is 50 ms ahead of a; the clamp is max(2 x 3 ms, 4 ms) = 6 ms.
        assert_eq!(c.se[a].vlag, 6_000_000);
        c.update_entity_lag(0, 0, Ent::Task(b));
        assert_eq!(c.se[b].vlag, -6_000_000);
    }

    #[test]
    fn v618y_lag_clamp_is_the_longest_slice_and_a_tick() {
        for (features, limit) in [(None, 6_000_000), (Some("LAG_CLAMP_MAX_SLICE"), 7_000_000)] {
            let mut c = eevdf_on("6.18", "x6-2-20", features);
            let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
            // Slices of 3 ms, a tick of 4 ms: max(2 x 3, 4) = 6 ms before,
            // 3 + 4 = 7 ms in 6.18.y.
            c.se[a].slice_ns = 3_000_000;
            c.se[b].slice_ns = 3_000_000;
            queue_at(&mut c, a, MIN, MIN + 3_000_000);
            queue_at(&mut c, b, MIN + 100_000_000, MIN + 103_000_000);
            c.update_entity_lag(0, 0, Ent::Task(a));
            assert_eq!(c.se[a].vlag, limit, "{features:?}");
        }
    }

    #[test]
    fn pick_is_the_earliest_deadline_among_eligible_entities() {
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let (a, b, d) = (add_task(&mut c, 0), add_task(&mut c, 0), add_task(&mut c, 0));
        queue_at(&mut c, a, MIN, MIN + 10_000_000);
        queue_at(&mut c, b, MIN + 1_000_000, MIN + 2_000_000);
        // d has the earliest deadline but is ahead of V = 11/3 ms: not eligible.
        queue_at(&mut c, d, MIN + 10_000_000, MIN + 1_000_000);
        assert!(c.entity_eligible(0, 0, Ent::Task(b)) && !c.entity_eligible(0, 0, Ent::Task(d)));
        assert_eq!(c.pick_eevdf(0, 0, None, true), Some(Ent::Task(b)));
        assert_eq!(c.check_eevdf(0), None);
    }

    #[test]
    fn run_to_parity_keeps_an_eligible_running_task_until_its_deadline() {
        for (features, preempts) in [(None, false), (Some("NO_RUN_TO_PARITY"), true)] {
            let mut c = eevdf_on("6.6", "x6-2-20", features);
            let (a, b) = protected_runner(&mut c);
            // The wakee is eligible (V = 1 ms) and due 1 ms before the running task.
            queue_at(&mut c, b, MIN, MIN + 2_000_000);
            let got = c.wakeup_preempt_eevdf(0, 0, Ent::Task(a), Ent::Task(b), 0, false);
            assert_eq!(got, preempts, "{features:?}");
        }
        // A new deadline ends the protection (v6.6 keeps it as vlag == deadline).
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let a = add_task(&mut c, 0);
        queue_at(&mut c, a, MIN, MIN + 3_000_000);
        run(&mut c, a);
        assert!(c.protect_slice(Ent::Task(a)));
        c.se[a].vruntime = MIN + 3_000_000;
        assert!(c.update_deadline(Ent::Task(a)));
        assert!(!c.protect_slice(Ent::Task(a)));
    }

    #[test]
    fn preempt_short_lets_a_shorter_slice_through_the_protection_v612() {
        // a runs protected and eligible (V = 1 ms); b wakes with a 0.1 ms custom
        // slice, eligible, due before a. Protected a keeps the CPU unless
        // PREEMPT_SHORT cuts its protection for the shorter slice.
        for (features, preempts) in [(None, true), (Some("NO_PREEMPT_SHORT"), false)] {
            let mut c = eevdf_on("6.12", "x6-2-20", features);
            let (a, b) = protected_runner(&mut c);
            assert!(c.protect_slice(Ent::Task(a)));
            c.se[b].slice_ns = 100_000;
            c.se[b].custom_slice = true;
            queue_at(&mut c, b, MIN, MIN + 100_000);
            let got = c.wakeup_preempt_eevdf(0, 0, Ent::Task(a), Ent::Task(b), 0, false);
            assert_eq!(got, preempts, "{features:?}");
            assert_eq!(c.protect_slice(Ent::Task(a)), !preempts, "{features:?}: protection cut iff preempting");
        }
    }

    #[test]
    fn v618_protection_is_a_vruntime_bound() {
        let mut c = eevdf_on("6.18", "x6-2-20", None);
        let a = add_task(&mut c, 0);
        queue_at(&mut c, a, MIN, MIN + 2_800_000);
        run(&mut c, a);
        assert_eq!(c.se[a].vprot, MIN + 2_800_000);
        c.se[a].vruntime = MIN + 2_799_999;
        assert!(c.protect_slice(Ent::Task(a)));
        c.se[a].vruntime = MIN + 2_800_000;
        assert!(!c.protect_slice(Ent::Task(a)));
        // Without RUN_TO_PARITY a 0.70 ms quantum is still protected.
        let mut c = eevdf_on("6.18", "x6-2-20", Some("NO_RUN_TO_PARITY"));
        let a = add_task(&mut c, 0);
        queue_at(&mut c, a, MIN, MIN + 2_800_000);
        run(&mut c, a);
        assert_eq!(c.se[a].vprot, MIN + 700_000);
    }

    #[test]
    fn reweight_by_release() {
        let w0 = LoadWeight::for_nice(0, crate::cfs::weights::LoadRes::HIGH).weight;
        let w5 = LoadWeight::for_nice(-5, crate::cfs::weights::LoadRes::HIGH).weight;
        // a, b at MIN and p at MIN - 1.5 ms (deadline MIN + 1.5 ms), all nice 0; p
        // goes to nice -5 (weight 3121).
        for (version, want_v, want_d) in [
            // v6.6.0: vruntime kept; deadline - vruntime = 3 ms x 1024/3121 = 984299.
            ("6.6", MIN - 1_500_000, MIN - 1_500_000 + 984_299),
            // v6.12: V before p leaves = MIN - 0.5 ms; lag 1 ms x 1024/3121 = 328099;
            // d - V = 2 ms x 1024/3121 = 656199.
            ("6.12", MIN - 500_000 - 328_099, MIN - 500_000 + 656_199),
            // v6.18: lag without p (V = MIN) 1.5 ms -> 492149, relative deadline 3 ms
            // -> 984299, then placed with W = 2048, w = 3121: 492149 x 5169 / 2048 =
            // 1242147.
            ("6.18", MIN - 1_242_147, MIN - 1_242_147 + 984_299),
        ] {
            let mut c = eevdf_on(version, "x6-2-20", None);
            let (a, b, p) = (add_task(&mut c, 0), add_task(&mut c, 0), add_task(&mut c, 0));
            c.sysctl.base_slice_ns = 3_000_000;
            queue_at(&mut c, a, MIN, MIN + 3_000_000);
            queue_at(&mut c, b, MIN, MIN + 3_000_000);
            c.se[p].slice_ns = 3_000_000;
            queue_at(&mut c, p, MIN - 1_500_000, MIN + 1_500_000);
            let v_before = c.avg_vruntime(0, 0);
            c.tree_remove(0, 0, Ent::Task(p));
            c.se[p].load = LoadWeight::new(w5);
            c.reweight_queued_eevdf(0, 0, Ent::Task(p), v_before, w0, w5);
            assert_eq!((c.se[p].vruntime, c.se[p].deadline), (want_v, want_d), "{version}");
        }
    }

    #[test]
    fn v618y_reweight_keeps_the_running_entitys_protection() {
        let w0 = LoadWeight::for_nice(0, crate::cfs::weights::LoadRes::HIGH).weight;
        let w5 = LoadWeight::for_nice(-5, crate::cfs::weights::LoadRes::HIGH).weight;
        for (features, protected) in [(None, false), (Some("REWEIGHT_KEEPS_VPROT"), true)] {
            let mut c = eevdf_on("6.18", "x6-2-20", features);
            let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
            queue_at(&mut c, a, MIN, MIN + 2_800_000);
            queue_at(&mut c, b, MIN, MIN + 2_800_000);
            run(&mut c, a);
            // a has run 1 ms of its protection (up to MIN + 2.8 ms) and goes to
            // nice -5: 1.8 ms of protection left, 1.8 ms x 1024/3121 = 590579
            // after the re-placement.
            c.se[a].vruntime = MIN + 1_000_000;
            let v_before = c.avg_vruntime(0, 0);
            c.se[a].load = LoadWeight::new(w5);
            c.reweight_queued_eevdf(0, 0, Ent::Task(a), v_before, w0, w5);
            assert_eq!(c.protect_slice(Ent::Task(a)), protected, "{features:?}");
            if protected {
                assert_eq!(c.se[a].vprot - c.se[a].vruntime, 590_579);
            }
        }
    }

    #[test]
    fn v619_wakeup_check_lets_no_fork_preempt() {
        for (features, fork, want) in
            [(None, true, true), (Some("WAKEUP_PREEMPT_619"), true, false), (Some("WAKEUP_PREEMPT_619"), false, true)]
        {
            let mut c = eevdf_on("6.18", "x6-2-20", features);
            let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
            queue_at(&mut c, a, MIN, MIN + 2_800_000);
            run(&mut c, a);
            // a ran 3 ms: past its protection and V (1.5 ms); b waits at MIN.
            c.se[a].vruntime = MIN + 3_000_000;
            queue_at(&mut c, b, MIN, MIN + 1_400_000);
            let got = c.wakeup_preempt_eevdf(0, 0, Ent::Task(a), Ent::Task(b), 0, fork);
            assert_eq!(got, want, "{features:?} fork={fork}");
        }
    }

    #[test]
    fn v619_wakeup_check_dequeues_a_delayed_pick_and_picks_again() {
        for (features, want) in [(None, false), (Some("WAKEUP_PREEMPT_619"), true)] {
            let mut c = eevdf_on("6.18", "x6-2-20", features);
            // a runs 2 ms and sleeps ineligible: delayed, back in the tree.
            let (a, b) = sleep_after_running_2ms(&mut c);
            let w = add_task(&mut c, 0);
            assert!(c.se[a].sched_delayed);
            c.rq[0].cfs.curr = None;
            c.tree_insert(0, 0, Ent::Task(a));
            // b runs 6 ms, unprotected: V = 4 ms, so a (2 ms) is eligible again.
            c.tree_remove(0, 0, Ent::Task(b));
            c.rq[0].cfs.curr = Some(Ent::Task(b));
            c.se[b].vruntime += 6_000_000;
            // The wakee w, eligible, its deadline after the delayed a's.
            let base = c.cfs(0, 0).min_vruntime;
            let dl = c.se[a].deadline + 1_000_000;
            queue_at(&mut c, w, base + 3_000_000, dl);
            let got = c.wakeup_preempt_eevdf(0, 0, Ent::Task(b), Ent::Task(w), 0, false);
            assert_eq!(got, want, "{features:?}");
            // v6.18.0 leaves the delayed a queued; the 6.18.y check took it off.
            assert_eq!(c.se[a].on_rq, !want, "{features:?}");
            assert_eq!(c.check_eevdf(0), None);
        }
    }

    #[test]
    fn a_delayed_task_is_queued_but_not_runnable() {
        use crate::cfs::scan::GroupSums;
        for (version, runnable, counted) in [("6.6", 1024, 2), ("6.12", 0, 2), ("6.18", 0, 1)] {
            let mut c = eevdf_on(version, "x6-2-20", None);
            let (a, _) = sleep_after_running_2ms(&mut c);
            // v6.6 has no delayed dequeue: a left, b alone is queued and runnable.
            let (queued, counted) = if version == "6.6" { (1, 1) } else { (2, counted) };
            assert_eq!(c.se_runnable_ent(Ent::Task(a)), if version == "6.6" { 1024 } else { runnable }, "{version}");
            // The balancer's sums: every queued task in sum_nr_running (and the
            // overload flag), v6.14+ leaves the delayed one out of sum_h_nr_running.
            let mut sums = GroupSums::default();
            sums.add(&crate::cfs::scan::ScanRow {
                h_nr_running: c.rq[0].cfs.h_nr_running as u32,
                nr_runnable: c.h_nr_runnable(0) as u32,
                ..Default::default()
            });
            assert_eq!((sums.nr_running, sums.nr_runnable, sums.overloaded_cpus), (queued, counted, queued - 1), "{version}");
        }
    }

    #[test]
    fn an_ineligible_sleeper_stays_queued_until_picked_v612() {
        for (version, features, delayed) in
            [("6.12", None, true), ("6.12", Some("NO_DELAY_DEQUEUE"), false), ("6.6", None, false)]
        {
            let mut c = eevdf_on(version, "x6-2-20", features);
            let (a, _) = sleep_after_running_2ms(&mut c);
            assert_eq!((c.se[a].on_rq, c.se[a].sched_delayed), (delayed, delayed), "{version} {features:?}");
            assert_eq!(SchedClass::nr_running(&c, 0), 1);
            assert_eq!(c.rq[0].cfs.h_nr_running, 1 + usize::from(delayed));
            if delayed {
                // It is woken where it sits; with negative lag, it keeps its place.
                let v = c.se[a].vruntime;
                c.rq[0].cfs.curr = None;
                c.tree_insert(0, 0, Ent::Task(a));
                c.requeue_delayed_entity(0, 0, Ent::Task(a));
                assert_eq!(c.se[a].vruntime, v);
                assert!(!c.se[a].sched_delayed);
            }
        }
    }

    #[test]
    fn an_ineligible_group_entity_whose_queue_empties_is_delayed_too() {
        use crate::cfs::state::{CfsRq, TaskGroup};
        let mut c = eevdf_on("6.12", "x6-2-20", None);
        let n = c.rq.len();
        let group_se = Se { load: LoadWeight::new(c.res.nice_0_load()), rq_cpu: usize::MAX, ..Se::blank() };
        c.tg.push(TaskGroup {
            parent: 0,
            level: 1,
            shares: c.res.nice_0_load(),
            load_avg: 0,
            load_weight: 0,
            cfs_rq: vec![CfsRq { min_vruntime: MIN, ..CfsRq::default() }; n],
            se: vec![group_se; n],
        });
        let (t, u) = (add_task(&mut c, 0), add_task(&mut c, 0));
        c.task_group[t] = 1;
        c.enqueue_task_fair(0, u, true, false, 0);
        c.enqueue_task_fair(0, t, true, false, 0);
        // The group runs t, and both are 2 ms past where they started: at the root
        // V = 1 ms, so the group's entity is ineligible; in the group t is alone.
        let g = Ent::Group(1, 0);
        c.tree_remove(0, 0, g);
        c.rq[0].cfs.curr = Some(g);
        c.tree_remove(1, 0, Ent::Task(t));
        c.tg[1].cfs_rq[0].curr = Some(Ent::Task(t));
        c.ent_mut(g).vruntime += 2_000_000;
        c.se[t].vruntime += 2_000_000;
        c.dequeue_task_fair_flags(0, t, DequeueKind::Sleep, 0);
        assert!(!c.se[t].on_rq && !c.se[t].sched_delayed, "t is eligible in its own queue: gone");
        assert!(c.ent(g).on_rq && c.ent(g).sched_delayed, "the emptied group entity stays, delayed");
        assert_eq!((c.rq[0].cfs.h_nr_running, c.rq[0].cfs.nr_running, SchedClass::nr_running(&c, 0)), (1, 2, 1));
        // Switched out, then t wakes: its group's entity is requeued where it sits.
        c.tg[1].cfs_rq[0].curr = None;
        c.put_prev_entity(0, 0, g, 0);
        c.enqueue_task_fair(0, t, true, false, 0);
        assert!(c.ent(g).on_rq && !c.ent(g).sched_delayed);
        assert_eq!((c.rq[0].cfs.h_nr_running, c.rq[0].cfs.nr_running), (2, 2));
        assert_eq!(c.check_eevdf(0), None);
    }

    #[test]
    fn delay_zero_drops_the_lag_a_delayed_task_earned() {
        let mut c = eevdf_on("6.12", "x6-2-20", None);
        let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
        queue_at(&mut c, b, MIN + 4_000_000, MIN + 7_000_000);
        queue_at(&mut c, a, MIN, MIN + 3_000_000);
        c.se[a].sched_delayed = true;
        // V = 2 ms ahead of a: a's lag is +2 ms; DELAY_ZERO places it at V instead.
        c.requeue_delayed_entity(0, 0, Ent::Task(a));
        assert_eq!(c.se[a].vlag, 0);
        assert_eq!(c.se[a].vruntime, c.avg_vruntime(0, 0));
        assert_eq!(c.check_eevdf(0), None);
    }

    #[test]
    fn sis_util_stops_scanning_a_busy_llc() {
        // x = mean util; nr_idle_scan = (1024 - x²·117²/(10000·1024)) · llc / 1024,
        // floored: 2 CPUs scan one CPU up to x = 619 and none from 620; 8 CPUs one
        // CPU at 819 and none at 820.
        for (spec, llc, x_last, x_none) in [("kvm-2", 2u64, 619u64, 620u64), ("1x1x8x1", 8, 819, 820)] {
            let mut c = eevdf_on("6.12", spec, None);
            assert_eq!(c.nr_idle_scan[0], 0, "nothing scanned before the first balance");
            let sd = c.doms[0].domains.len() - 1;
            c.update_idle_cpu_scan(0, sd, 0);
            assert_eq!(c.nr_idle_scan[0], llc, "{spec} idle");
            c.update_idle_cpu_scan(0, sd, x_last * llc);
            assert_eq!(c.nr_idle_scan[0], 1, "{spec} at {x_last}");
            c.update_idle_cpu_scan(0, sd, x_none * llc);
            assert_eq!(c.nr_idle_scan[0], 0, "{spec} at {x_none}");
        }
    }

    #[test]
    fn v618_balancer_leaves_an_ineligible_task_while_the_domain_has_not_failed() {
        for (version, want) in [("6.12", false), ("6.18", true)] {
            let mut c = eevdf_on(version, "x6-2-20", None);
            let (a, b, d) = (add_task(&mut c, 0), add_task(&mut c, 0), add_task(&mut c, 0));
            // CPU 0: a at MIN, b 2 ms ahead of it (V = MIN + 1 ms: b ineligible).
            queue_at(&mut c, a, MIN, MIN + 2_800_000);
            queue_at(&mut c, b, MIN + 2_000_000, MIN + 4_800_000);
            assert!(!c.entity_eligible(0, 0, Ent::Task(b)));
            // An empty destination would take b; CPU 1 with a task queued not.
            assert!(!c.ineligible_on_dst(b, 0, 1, 0), "{version}: nothing queued on dst");
            let se = &mut c.se[d];
            (se.vruntime, se.deadline, se.on_rq) = (MIN, MIN + 2_800_000, true);
            c.tree_insert(0, 1, Ent::Task(d));
            c.rq[1].cfs.nr_running += 1;
            assert_eq!(c.ineligible_on_dst(b, 0, 1, 0), want, "{version}");
            assert!(!c.ineligible_on_dst(b, 0, 1, 1), "{version}: once the domain failed");
            assert!(!c.ineligible_on_dst(a, 0, 1, 0), "{version}: a is eligible");
        }
    }

    #[test]
    fn only_a_pass_migrating_load_moves_a_delayed_task_from_v614() {
        use crate::cfs::balance::MigrationType::{Load, Task, Util};
        let (v612, v618) = (eevdf_on("6.12", "kvm-2", None), eevdf_on("6.18", "kvm-2", None));
        for m in [Load, Util, Task] {
            assert!(v612.may_migrate_delayed(Some(m)), "{m:?}");
            assert_eq!(v618.may_migrate_delayed(Some(m)), m == Load, "{m:?}");
        }
    }

    #[test]
    fn a_delayed_task_stays_on_the_balancers_list() {
        let mut c = eevdf_on("6.12", "x6-2-20", None);
        let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
        c.enqueue_task_fair(0, a, true, false, 0);
        c.enqueue_task_fair(0, b, true, false, 0);
        // a ran 2 ms past V: its sleep is delayed and it stays on cfs_tasks.
        c.tree_remove(0, 0, Ent::Task(a));
        c.se[a].vruntime += 2_000_000;
        c.tree_insert(0, 0, Ent::Task(a));
        c.dequeue_task_fair_flags(0, a, DequeueKind::Sleep, 0);
        assert!(c.se[a].sched_delayed && c.se[a].on_rq);
        assert_eq!(c.rq[0].nr_delayed, 1);
        assert!(c.cfs_tasks(0).any(|p| p == a));
        // Picked (eligible by then) it leaves for good, and the list with it.
        c.dequeue_task_fair_flags(0, a, DequeueKind::Delayed, 0);
        assert!(!c.se[a].sched_delayed && !c.se[a].on_rq);
        assert_eq!(c.rq[0].nr_delayed, 0);
        assert!(!c.cfs_tasks(0).any(|p| p == a));
        assert_eq!(c.check_eevdf(0), None);
    }

    #[test]
    fn the_checker_catches_a_wrong_weighted_sum() {
        let mut c = eevdf_on("6.6", "x6-2-20", None);
        let (a, b) = (add_task(&mut c, 0), add_task(&mut c, 0));
        queue_at(&mut c, a, MIN, MIN + 3_000_000);
        queue_at(&mut c, b, MIN + 1_000_000, MIN + 4_000_000);
        assert_eq!(c.check_eevdf(0), None);
        c.rq[0].cfs.avg_vruntime += 1;
        assert!(c.check_eevdf(0).unwrap().contains("avg_vruntime"));
    }

    #[test]
    fn switches_exist_from_the_release_that_added_them() {
        assert!(Cfs::new_eevdf("6.12", Some("NO_DELAY_DEQUEUE"), &[]).is_ok());
        let Err(e) = Cfs::new_eevdf("6.6", Some("DELAY_DEQUEUE"), &[]) else { panic!("DELAY_DEQUEUE is not in v6.6") };
        assert!(e.expected.contains("not modelled") && e.expected.contains("RUN_TO_PARITY"), "{e}");
        assert!(Cfs::new_eevdf("6.18", Some("START_DEBIT"), &[]).is_err());
        assert!(Cfs::new_eevdf("6.12", Some("PICK_BUDDY"), &[]).is_err());
        assert!(Cfs::new_eevdf("6.7", None, &[]).is_err());
        let c = eevdf_on("6.12", "kvm-2", Some("NO_DELAY_DEQUEUE+NO_RUN_TO_PARITY"));
        assert_eq!(c.name(), "eevdf@6.12+NO_RUN_TO_PARITY+NO_DELAY_DEQUEUE");
        // Only EEVDF's tunables: there is no wakeup granularity any more.
        assert!(Cfs::new_eevdf("6.6", None, &[("sched_wakeup_granularity_ns".into(), "1".into())]).is_err());
        assert!(Cfs::new_eevdf("6.6", None, &[("base_slice_ns".into(), "1000000".into())]).is_ok());
    }
}
