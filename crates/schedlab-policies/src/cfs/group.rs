//! Group scheduling (CONFIG_FAIR_GROUP_SCHED): task groups in a hierarchy, each
//! with a cfs_rq and a group entity per CPU; the entity's weight is the group's
//! `cpu.shares` split by where its load is (`calc_group_shares()` /
//! `update_cfs_group()` / `reweight_entity()`, fair.c v4.19 L2921/L3006/L2803);
//! the hierarchical load the balancer reads (`update_cfs_rq_h_load()` /
//! `task_h_load()`, v4.19 L7390/L7424); and moving a task between groups
//! (`sched_move_task()` → `task_change_group_fair()`). An autogroup is such a group,
//! which the engine moves a session's first task into (schedlab-core's engine.rs).
//!
//! A group entity's load average follows its own runnable time at its current
//! weight, as `__update_load_avg_se()` computes it, and takes at once what tasks
//! attached below it or detached from it bring or take (`propagate_entity_load_avg()`,
//! v4.19+; in fair.rs). Not modelled: the propagation of the runnable signal
//! (v5.7+ `update_tg_cfs_runnable()`).

use schedlab_core::sched::System;
use schedlab_core::task::TaskId;

use super::domains::KernelVersion;
use super::pelt::SchedAvg;
use super::state::{Cfs, CfsRq, Ent, Se, TaskGroup, MIN_VRUNTIME_START};
use super::weights::LoadWeight;

/// `NSEC_PER_MSEC`: v6.7+ publishes a cfs_rq's load to its group at most this often.
const NSEC_PER_MSEC: u64 = 1_000_000;

/// `MIN_SHARES`: the smallest group entity weight, deliberately not scaled by the
/// extra load resolution (kernel/sched/sched.h).
pub const MIN_SHARES: u64 = 2;

/// `sysctl_sched_shares_window` (v3.0): the window of a group's load average.
pub const SCHED_SHARES_WINDOW_NS: u64 = 10_000_000;

/// A walk up an entity's chain: see [`Cfs::walk_up`].
#[derive(Clone, Copy, Debug)]
pub struct WalkUp {
    at: Option<Ent>,
    cpu: usize,
}

impl WalkUp {
    /// The next entity up, or None past the top.
    #[inline]
    pub fn next(&mut self, c: &Cfs) -> Option<Ent> {
        let e = self.at?;
        self.at = c.parent_ent(e, self.cpu);
        Some(e)
    }
}

impl Cfs {
    /// The entity `e`.
    pub fn ent(&self, e: Ent) -> &Se {
        match e {
            Ent::Task(p) => &self.se[p],
            Ent::Group(g, cpu) => &self.tg[g].se[cpu],
        }
    }

    pub fn ent_mut(&mut self, e: Ent) -> &mut Se {
        match e {
            Ent::Task(p) => &mut self.se[p],
            Ent::Group(g, cpu) => &mut self.tg[g].se[cpu],
        }
    }

    /// The group whose cfs_rq `e` is queued on (`cfs_rq_of(se)`), 0 for the root.
    pub fn q_of(&self, e: Ent) -> usize {
        match e {
            Ent::Task(p) => self.task_group[p],
            Ent::Group(g, _) => self.tg[g].parent,
        }
    }

    /// Group `q`'s cfs_rq on `cpu`.
    pub fn cfs(&self, q: usize, cpu: usize) -> &CfsRq {
        if q == 0 {
            &self.rq[cpu].cfs
        } else {
            &self.tg[q].cfs_rq[cpu]
        }
    }

    #[inline(always)]
    pub fn cfs_mut(&mut self, q: usize, cpu: usize) -> &mut CfsRq {
        if q == 0 {
            // The balancer's scan row of this CPU may go stale.
            self.scan.mark(cpu);
            &mut self.rq[cpu].cfs
        } else {
            &mut self.tg[q].cfs_rq[cpu]
        }
    }

    /// `parent_entity()`: the group entity owning the cfs_rq `e` is on.
    pub fn parent_ent(&self, e: Ent, cpu: usize) -> Option<Ent> {
        let q = self.q_of(e);
        (q != 0).then_some(Ent::Group(q, cpu))
    }

    /// `se->depth`.
    pub fn depth(&self, e: Ent) -> u32 {
        self.tg[self.q_of(e)].level
    }

    /// `for_each_sched_entity()` without a list: `let mut up = self.walk_up(e,
    /// cpu); while let Some(x) = up.next(self) { .. }` visits `e` and its
    /// ancestors bottom-up, the body free to change the entities (not their
    /// parents).
    pub fn walk_up(&self, e: Ent, cpu: usize) -> WalkUp {
        WalkUp { at: Some(e), cpu }
    }

    /// `e` and its ancestors, bottom-up (`for_each_sched_entity()`).
    pub fn chain(&self, e: Ent, cpu: usize) -> Vec<Ent> {
        let mut out = vec![e];
        let mut at = e;
        while let Some(p) = self.parent_ent(at, cpu) {
            out.push(p);
            at = p;
        }
        out
    }

    /// Creates the per-CPU state of groups the workload made since the last call
    /// (`sched_create_group()` → `alloc_fair_sched_group()` / `init_tg_cfs_entry()`):
    /// entities start at NICE_0_LOAD with empty load averages.
    pub fn sync_groups(&mut self, sys: &System) {
        let n = self.rq.len();
        while self.tg.len() < sys.groups.len() {
            let info = &sys.groups[self.tg.len()];
            let parent = info.parent;
            let group_se =
                Se { load: LoadWeight::new(self.res.nice_0_load()), avg: SchedAvg::default(), rq_cpu: usize::MAX, ..Se::blank() };
            self.tg.push(TaskGroup {
                parent,
                level: self.tg[parent].level + 1,
                shares: self.res.scale_load(info.shares),
                load_avg: 0,
                load_weight: 0,
                cfs_rq: vec![CfsRq { min_vruntime: MIN_VRUNTIME_START, ..CfsRq::default() }; n],
                se: vec![group_se; n],
            });
        }
    }

    /// `update_tg_load_avg()` (v4.19 L3076): publish this cfs_rq's load to the
    /// group's sum when it moved by more than 1/64 of what was published. From
    /// v6.7 (1528c661c24b, "sched/fair: Ratelimit update to tg->load_avg") at
    /// most once a millisecond per cfs_rq: a call within a millisecond of the
    /// last publication does nothing.
    pub fn update_tg_load_avg(&mut self, q: usize, cpu: usize, now: u64) {
        if q == 0 {
            return;
        }
        // v6.12 is the first modelled release with the limit (it came in v6.7).
        let ratelimited = self.version >= KernelVersion::V6_12;
        let cfs = &self.tg[q].cfs_rq[cpu];
        if ratelimited && cfs.last_update_tg_load_avg_ns.is_some_and(|last| now.saturating_sub(last) < NSEC_PER_MSEC) {
            return;
        }
        let delta = cfs.avg.load_avg as i64 - cfs.tg_load_avg_contrib as i64;
        if delta.unsigned_abs() > cfs.tg_load_avg_contrib / 64 {
            let load = cfs.avg.load_avg;
            let tg = &mut self.tg[q];
            tg.load_avg = (tg.load_avg as i64 + delta).max(0) as u64;
            tg.cfs_rq[cpu].tg_load_avg_contrib = load;
            if ratelimited {
                tg.cfs_rq[cpu].last_update_tg_load_avg_ns = Some(now);
            }
        }
    }

    /// `calc_group_shares()` (v4.19 L2921): the group's shares times this CPU's part
    /// of the group's load, where the other CPUs' parts are their published PELT
    /// averages and this one's is the larger of its weight and its average.
    pub fn calc_group_shares(&self, g: usize, cpu: usize) -> u64 {
        let tg = &self.tg[g];
        let cfs = &tg.cfs_rq[cpu];
        let tg_shares = tg.shares;
        let load = self.res.scale_load_down(cfs.load.weight).max(cfs.avg.load_avg);
        let tg_weight = (tg.load_avg as i64 - cfs.tg_load_avg_contrib as i64 + load as i64).max(0) as u64;
        let mut shares = tg_shares as u128 * load as u128;
        if tg_weight != 0 {
            shares /= tg_weight as u128;
        }
        (shares.min(u64::MAX as u128) as u64).clamp(MIN_SHARES, tg_shares.max(MIN_SHARES))
    }

    /// `update_cfs_load()` (v3.0 sched_fair.c L664): fold the time since the last
    /// fold into group `g`'s window on `cpu` at its current `load.weight`, truncate
    /// history after four idle windows, publish the window's average to
    /// `tg->load_weight` when it moved by more than 1/8 (always if `global`), and
    /// halve the window while it is longer than `sched_shares_window`.
    pub fn update_cfs_load_v30(&mut self, g: usize, cpu: usize, now: u64, global: bool) {
        if g == 0 {
            return;
        }
        let period = SCHED_SHARES_WINDOW_NS;
        let load = self.tg[g].cfs_rq[cpu].load.weight;
        let c = &mut self.tg[g].cfs_rq[cpu];
        let mut delta = now.saturating_sub(c.load_stamp_ns);
        if c.load_stamp_ns > c.load_last_ns && now - c.load_last_ns > 4 * period {
            c.load_period_ns = 0;
            c.v30_load_avg = 0;
            delta = period - 1;
        }
        c.load_stamp_ns = now;
        c.load_unacc_exec_ns = 0;
        c.load_period_ns += delta;
        if load > 0 {
            c.load_last_ns = now;
            c.v30_load_avg += delta as u128 * load as u128;
        }
        if global || c.load_period_ns > period || c.load_period_ns == 0 {
            // update_cfs_rq_load_contribution() (L642).
            let avg = (c.v30_load_avg / (c.load_period_ns as u128 + 1)) as i128;
            let diff = avg - c.load_contribution as i128;
            if global || diff.unsigned_abs() > (c.load_contribution / 8) as u128 {
                c.load_contribution = avg as u64;
                let tg = &mut self.tg[g];
                tg.load_weight = (tg.load_weight as i128 + diff).max(0) as u64;
            }
        }
        let c = &mut self.tg[g].cfs_rq[cpu];
        while c.load_period_ns > period {
            c.load_period_ns /= 2;
            c.v30_load_avg /= 2;
        }
    }

    /// `calc_cfs_shares()` (v3.0 L726): the group's shares times this CPU's part
    /// of its load, where this CPU counts its instantaneous weight and the others
    /// what they last published; at least MIN_SHARES, at most the shares.
    pub fn calc_cfs_shares_v30(&self, g: usize, cpu: usize) -> u64 {
        let tg = &self.tg[g];
        let c = &tg.cfs_rq[cpu];
        let load = c.load.weight;
        let load_weight = (tg.load_weight as i128 + load as i128 - c.load_contribution as i128).max(0) as u128;
        // The kernel divides only by a non-zero total.
        let product = tg.shares as u128 * load as u128;
        let shares = product.checked_div(load_weight).unwrap_or(product);
        (shares.min(u64::MAX as u128) as u64).clamp(MIN_SHARES, tg.shares.max(MIN_SHARES))
    }

    /// `update_shares()` (v3.0 L2077) for `cpu`, from the balancer: every group's
    /// window folded and published, and its entity re-weighted, children first.
    pub fn update_shares_v30(&mut self, cpu: usize, now: u64) {
        for g in (1..self.tg.len()).rev() {
            self.update_cfs_load_v30(g, cpu, now, true);
            self.update_cfs_group(Ent::Group(g, cpu), now);
        }
    }

    /// `update_cfs_group()` (v4.19 L3006): re-weight a group entity from its
    /// group's cfs_rq; nothing for tasks. v3.0 (`update_cfs_shares()`, L749)
    /// computes the weight from instantaneous loads (`calc_cfs_shares()`).
    pub fn update_cfs_group(&mut self, e: Ent, now: u64) {
        let Ent::Group(g, cpu) = e else { return };
        let shares =
            if self.version == KernelVersion::V3_0 { self.calc_cfs_shares_v30(g, cpu) } else { self.calc_group_shares(g, cpu) };
        if shares != self.ent(e).load.weight {
            self.reweight_entity(e, cpu, shares, now);
        }
    }

    /// `reweight_entity()` (v4.19 L2803): change `e`'s weight, taking it out of and
    /// back into its cfs_rq's load sums; its load average is re-derived from its
    /// load sum at the new weight. EEVDF (v6.6+) also keeps the entity's lag
    /// (`reweight_eevdf()`, or v6.18's re-placement), out of the tree meanwhile.
    pub fn reweight_entity(&mut self, e: Ent, cpu: usize, weight: u64, now: u64) {
        let q = self.q_of(e);
        let on_rq = self.ent(e).on_rq;
        let old_w = self.ent(e).load.weight;
        let old_down = self.se_weight(old_w);
        let runnable_old = self.se_runnable_ent(e);
        let eevdf = self.version.eevdf();
        let is_curr = self.cfs(q, cpu).curr == Some(e);
        let mut v_before = 0;
        if on_rq {
            if is_curr {
                self.update_curr(q, cpu, now);
            }
            if eevdf {
                v_before = self.avg_vruntime(q, cpu);
                if !is_curr {
                    self.tree_remove(q, cpu, e);
                }
            }
            let avg = self.ent(e).avg;
            let cfs = self.cfs_mut(q, cpu);
            cfs.load.sub(old_w);
            cfs.runnable_weight = cfs.runnable_weight.saturating_sub(old_w);
            cfs.avg.dequeue_runnable_load(&avg, runnable_old);
        }
        let avg = self.ent(e).avg;
        self.cfs_mut(q, cpu).avg.dequeue_load(&avg, old_down);
        let new_down = self.se_weight(weight);
        self.ent_mut(e).load = LoadWeight::new(weight);
        let runnable = self.se_runnable_ent(e);
        {
            let se = self.ent_mut(e);
            let divider = se.avg.divider();
            se.avg.load_avg = new_down * se.avg.load_sum / divider;
            se.avg.runnable_load_avg = runnable * se.avg.runnable_load_sum / divider;
        }
        if eevdf {
            if on_rq {
                self.reweight_queued_eevdf(q, cpu, e, v_before, old_w, weight);
                if !is_curr {
                    self.tree_insert(q, cpu, e);
                }
            } else {
                self.reweight_sleeping_eevdf(e, old_w, weight);
            }
        }
        let avg = self.ent(e).avg;
        let runnable_new = self.se_runnable_ent(e);
        let cfs = self.cfs_mut(q, cpu);
        cfs.avg.enqueue_load(&avg, new_down);
        if on_rq {
            cfs.load.add(weight);
            cfs.runnable_weight += weight;
            cfs.avg.enqueue_runnable_load(&avg, runnable_new);
        }
    }

    /// `update_cfs_rq_h_load()` (v4.19 L7390), once per jiffy per cfs_rq: the
    /// share of the CPU's load that group `q`'s cfs_rq carries, top-down.
    fn update_cfs_rq_h_load(&mut self, q: usize, cpu: usize, jiffies: u64) {
        if self.cfs(q, cpu).last_h_load_update == Some(jiffies) {
            return;
        }
        // The path from the root down to q, stopping early at a fresh cfs_rq.
        let mut path = vec![q];
        let mut at = q;
        while at != 0 && self.cfs(self.tg[at].parent, cpu).last_h_load_update != Some(jiffies) {
            at = self.tg[at].parent;
            path.push(at);
        }
        let top = *path.last().expect("path");
        if top == 0 && self.cfs(0, cpu).last_h_load_update != Some(jiffies) {
            let root = self.cfs_mut(0, cpu);
            root.h_load = root.avg.load_avg;
            root.last_h_load_update = Some(jiffies);
        }
        for &g in path.iter().rev().filter(|&&g| g != 0) {
            let parent = self.tg[g].parent;
            let pc = self.cfs(parent, cpu);
            let load = pc.h_load as u128 * self.tg[g].se[cpu].avg.load_avg as u128 / (pc.avg.load_avg as u128 + 1);
            let c = self.cfs_mut(g, cpu);
            c.h_load = load as u64;
            c.last_h_load_update = Some(jiffies);
        }
    }

    /// `task_h_load()` (v4.19 L7424): the task's load as a share of its CPU's.
    /// A task of the root group counts its own load average.
    pub fn task_h_load(&mut self, p: TaskId, jiffies: u64) -> u64 {
        if self.version == KernelVersion::V3_0 {
            return self.task_h_load_v3(p);
        }
        let q = self.task_group[p];
        if q == 0 {
            return self.se[p].avg.load_avg;
        }
        let cpu = self.se[p].rq_cpu;
        if cpu == usize::MAX {
            return self.se[p].avg.load_avg;
        }
        self.update_cfs_rq_h_load(q, cpu, jiffies);
        let c = self.cfs(q, cpu);
        (self.se[p].avg.load_avg as u128 * c.h_load as u128 / (c.avg.load_avg as u128 + 1)) as u64
    }

    /// `sched_group_set_shares()` (v4.19 L10139): new shares, then every CPU's
    /// entity of the group re-weighted at once.
    pub fn set_group_shares(&mut self, sys: &System, g: usize) {
        self.sync_groups(sys);
        self.tg[g].shares = self.res.scale_load(sys.groups[g].shares);
        for cpu in 0..self.rq.len() {
            for e in self.chain(Ent::Group(g, cpu), cpu) {
                let q = self.q_of(e);
                self.update_load_avg_se(q, cpu, Some(e), sys.now_ns);
                self.update_cfs_group(e, sys.now_ns);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfs::pelt::LOAD_AVG_MAX;
    use schedlab_core::Topology;

    /// A Cfs on the 16-CPU 2x1x4x2 machine with a `shares` group whose every CPU
    /// runs three nice-0 tasks with settled load averages.
    fn loaded_group(version: &str, features: Option<&str>, shares: u64) -> Cfs {
        let mut c = Cfs::new(version, features, &[]).or_else(|_| Cfs::new_eevdf(version, features, &[])).unwrap();
        c.boot_on(&Topology::parse("2x1x4x2").unwrap(), 4_000_000);
        let n = c.rq.len();
        let nice0 = c.res.nice_0_load();
        let mut cfs_rq = CfsRq { min_vruntime: MIN_VRUNTIME_START, ..CfsRq::default() };
        cfs_rq.load.add(3 * nice0);
        cfs_rq.avg.load_avg = 3 * 1024;
        cfs_rq.tg_load_avg_contrib = 3 * 1024;
        c.tg.push(TaskGroup {
            parent: 0,
            level: 1,
            shares: c.res.scale_load(shares),
            load_avg: n as u64 * 3 * 1024,
            load_weight: 0,
            cfs_rq: vec![cfs_rq; n],
            se: vec![Se { load: LoadWeight::new(nice0), ..Se::blank() }; n],
        });
        c
    }

    #[test]
    fn a_shares_2_group_on_16_cpus_with_and_without_the_extra_resolution() {
        // Each CPU carries 1/16 of the group's load: 2 shares / 16 = 1/8 of a unit.
        // With the extra 10 bits that is 2048 / 16 = 128 (scaled) ...
        let hi = loaded_group("4.19", None, 2);
        assert_eq!(hi.calc_group_shares(1, 0), 128);
        // ... which v4.19's PELT sees as weight 128 >> 10 = 0, v5.7+ as at least 2.
        assert_eq!(hi.se_weight(128), 0);
        assert_eq!(loaded_group("5.15", None, 2).se_weight(128), 2);
        // Without them 2 / 16 rounds to 0 and is clamped to MIN_SHARES = 2: the group
        // weighs 2 on every CPU, 16 times its shares in all.
        let lo = loaded_group("4.19", Some("NO_LOAD_RESOLUTION"), 2);
        assert_eq!(lo.calc_group_shares(1, 0), MIN_SHARES);
        assert_eq!(lo.se_weight(MIN_SHARES), 2);
        // A default group (1024 shares) gets 1024/16 = 64 units per CPU either way.
        assert_eq!(loaded_group("4.19", None, 1024).calc_group_shares(1, 0), 64 << 10);
        assert_eq!(loaded_group("4.19", Some("NO_LOAD_RESOLUTION"), 1024).calc_group_shares(1, 0), 64);
    }

    /// update_tg_cfs_util(): a task attached to a group cfs_rq brings its
    /// utilisation to the group entity and the root at the group entity's next
    /// update, and taking it away takes it back; without the mark nothing moves.
    #[test]
    fn a_group_entity_takes_its_cfs_rqs_utilisation_when_marked() {
        let mut c = loaded_group("6.18", None, 1024);
        let g = Ent::Group(1, 0);
        c.tg[1].cfs_rq[0].avg.util_avg = 300;
        c.ent_mut(g).avg.util_avg = 100;
        c.rq[0].cfs.avg.util_avg = 100;
        c.propagate_entity_load_avg(0, 1, 0);
        assert_eq!((c.ent(g).avg.util_avg, c.rq[0].cfs.avg.util_avg), (300, 300));
        assert!(!c.rq[0].cfs.propagate, "the root is never marked");
        c.tg[1].cfs_rq[0].avg.util_avg = 50;
        c.propagate_entity_load_avg(0, 1, 0);
        assert_eq!((c.ent(g).avg.util_avg, c.rq[0].cfs.avg.util_avg), (50, 50));
        // Through update_load_avg_se(): only a marked cfs_rq is taken.
        c.tg[1].cfs_rq[0].avg.util_avg = 400;
        c.update_load_avg_se(0, 0, Some(g), 0);
        assert_eq!(c.ent(g).avg.util_avg, 50);
        c.tg[1].cfs_rq[0].propagate = true;
        c.update_load_avg_se(0, 0, Some(g), 0);
        assert_eq!((c.ent(g).avg.util_avg, c.tg[1].cfs_rq[0].propagate), (400, false));
    }

    /// update_tg_cfs_load(): a task attached to a group cfs_rq brings its
    /// (unweighted) runnable sum to the group entity at the entity's next
    /// update, at most a full window, so the entity's load jumps to its weight
    /// and the root takes the difference; a detach takes the entity's sum down
    /// to its cfs_rq's sum per unit of queued weight. v4.19 divides by
    /// LOAD_AVG_MAX and sets the runnable load alike.
    #[test]
    fn a_group_entity_takes_the_load_attached_below_it() {
        for version in ["4.19", "5.15", "6.18"] {
            let mut c = loaded_group(version, None, 1024);
            let g = Ent::Group(1, 0);
            let weight = c.se_weight(c.ent(g).load.weight);
            assert_eq!(weight, 1024, "{version}");
            let divider = if version == "4.19" { LOAD_AVG_MAX } else { c.rq[0].cfs.avg.divider() };
            // A quarter window of runnable history so far.
            c.ent_mut(g).avg.load_sum = divider / 4;
            c.ent_mut(g).avg.load_avg = weight / 4;
            c.rq[0].cfs.avg.load_avg = weight / 4;
            c.rq[0].cfs.avg.load_sum = weight * divider / 4;
            // A new task's full sum is attached below: the entity is saturated.
            c.tg[1].cfs_rq[0].propagate = true;
            c.tg[1].cfs_rq[0].prop_runnable_sum = divider as i64;
            c.update_load_avg_se(0, 0, Some(g), 0);
            assert_eq!((c.ent(g).avg.load_sum, c.ent(g).avg.load_avg), (divider, weight), "{version}");
            assert_eq!(c.rq[0].cfs.avg.load_avg, weight, "{version}: the root takes the difference");
            assert_eq!(c.tg[1].cfs_rq[0].prop_runnable_sum, 0, "{version}");
            if version == "4.19" {
                assert_eq!(c.ent(g).avg.runnable_load_avg, weight, "v4.19 sets the runnable load alike");
            }
            // A detach: three queued nice-0 tasks whose cfs_rq sum is a tenth of a
            // window each; the entity falls to that.
            let nice0 = c.se_weight(c.res.nice_0_load());
            c.tg[1].cfs_rq[0].avg.load_sum = 3 * nice0 * (divider / 10);
            c.tg[1].cfs_rq[0].propagate = true;
            c.tg[1].cfs_rq[0].prop_runnable_sum = -((divider / 2) as i64);
            c.update_load_avg_se(0, 0, Some(g), 0);
            assert_eq!(c.ent(g).avg.load_sum, divider / 10, "{version}");
            assert_eq!(c.ent(g).avg.load_avg, weight * (divider / 10) / divider, "{version}");
            assert_eq!(c.rq[0].cfs.avg.load_avg, c.ent(g).avg.load_avg, "{version}");
            // Nothing marked, nothing moves.
            c.tg[1].cfs_rq[0].prop_runnable_sum = divider as i64;
            c.update_load_avg_se(0, 0, Some(g), 0);
            assert_eq!(c.ent(g).avg.load_sum, divider / 10, "{version}: unmarked");
        }
    }

    /// v6.7+ publishes a cfs_rq's load to `tg->load_avg` at most once a
    /// millisecond; v6.6 whenever it moved by more than 1/64.
    #[test]
    fn the_group_load_is_published_at_most_once_a_millisecond_from_v6_7() {
        for (version, published_at_half_ms) in [("6.6", true), ("6.12", false), ("6.18", false)] {
            let mut c = loaded_group(version, None, 1024);
            let total = c.tg[1].load_avg;
            // CPU 0's load doubles at t = 10 ms and is published: +3072.
            c.tg[1].cfs_rq[0].avg.load_avg = 6 * 1024;
            c.update_tg_load_avg(1, 0, 10_000_000);
            assert_eq!(c.tg[1].load_avg, total + 3 * 1024, "{version}");
            // It drops to 4 tasks' worth half a millisecond later.
            c.tg[1].cfs_rq[0].avg.load_avg = 4 * 1024;
            c.update_tg_load_avg(1, 0, 10_500_000);
            let want = if published_at_half_ms { total + 1024 } else { total + 3 * 1024 };
            assert_eq!(c.tg[1].load_avg, want, "{version} at 10.5 ms");
            // A millisecond after the last publication every release publishes.
            c.update_tg_load_avg(1, 0, 11_000_000);
            assert_eq!(c.tg[1].load_avg, total + 1024, "{version} at 11 ms");
            assert_eq!(c.tg[1].cfs_rq[0].tg_load_avg_contrib, 4 * 1024);
        }
    }

    #[test]
    fn v3_0_shares_of_a_shares_2_group_on_16_cpus() {
        // v3.0 splits by instantaneous weights: this CPU's 3 tasks against the 15
        // others' published 3 each. With the extra resolution 2048 × 3/48 = 128
        // (scaled), a proportional weight; without, 2 × 3/48 rounds to 0 and is
        // clamped to MIN_SHARES = 2, so a CPU with one task and one with ten weigh
        // the same.
        let setup = |features: Option<&str>| {
            let mut c = loaded_group("3.0", features, 2);
            let nice0 = c.res.nice_0_load();
            for cpu in 0..16 {
                c.tg[1].cfs_rq[cpu].load_contribution = 3 * nice0;
            }
            c.tg[1].load_weight = 16 * 3 * nice0;
            c
        };
        let hi = setup(None);
        assert_eq!(hi.calc_cfs_shares_v30(1, 0), 128);
        let mut hi10 = setup(None);
        hi10.tg[1].cfs_rq[0].load.add(7 * hi10.res.nice_0_load());
        assert_eq!(hi10.calc_cfs_shares_v30(1, 0), 2048 * 10 / 55);
        let lo = setup(Some("NO_LOAD_RESOLUTION"));
        assert_eq!(lo.calc_cfs_shares_v30(1, 0), MIN_SHARES);
        let mut lo10 = setup(Some("NO_LOAD_RESOLUTION"));
        lo10.tg[1].cfs_rq[0].load.add(7 * 1024);
        assert_eq!(lo10.calc_cfs_shares_v30(1, 0), MIN_SHARES);
    }

    #[test]
    fn v3_0_load_window_folds_publishes_and_halves() {
        // One CPU's cfs_rq at 3 tasks for 6 ms, then 1 task for 6 ms: the window
        // (10 ms) halves once past it, and the average published moves to the
        // window's weighted mean.
        let mut c = loaded_group("3.0", None, 1024);
        let nice0 = c.res.nice_0_load();
        c.tg[1].cfs_rq[0].load_stamp_ns = 1_000_000;
        c.tg[1].cfs_rq[0].load_last_ns = 1_000_000;
        c.update_cfs_load_v30(1, 0, 7_000_000, false);
        let q = &c.tg[1].cfs_rq[0];
        assert_eq!((q.load_period_ns, q.v30_load_avg), (6_000_000, 6_000_000 * 3 * nice0 as u128));
        // Not past the window and not global: nothing published yet.
        assert_eq!((q.load_contribution, c.tg[1].load_weight), (0, 0));
        c.tg[1].cfs_rq[0].load = LoadWeight::new(nice0);
        c.update_cfs_load_v30(1, 0, 13_000_000, false);
        let q = &c.tg[1].cfs_rq[0];
        let sum = 6_000_000u128 * 3 * nice0 as u128 + 6_000_000 * nice0 as u128;
        // Published over 12 ms (+1), then halved to a 6 ms window.
        let published = (sum / 12_000_001) as u64;
        assert_eq!(q.load_contribution, published);
        assert_eq!(c.tg[1].load_weight, published);
        assert_eq!((q.load_period_ns, q.v30_load_avg), (6_000_000, sum / 2));
    }

    #[test]
    fn the_local_cpu_counts_its_instantaneous_weight() {
        // A CPU whose group cfs_rq just got four more tasks than its average shows:
        // load = max(weight, average) = 7 units against 15 × 3 elsewhere.
        let mut c = loaded_group("4.19", None, 1024);
        c.tg[1].cfs_rq[0].load.add(4 * c.res.nice_0_load());
        let shares = c.calc_group_shares(1, 0);
        assert_eq!(shares, (1024u64 << 10) * 7 * 1024 / ((15 * 3 + 7) * 1024));
    }
}
