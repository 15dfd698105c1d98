//! Group scheduling (CONFIG_FAIR_GROUP_SCHED): task groups in a hierarchy, each
//! with a cfs_rq and a group entity per CPU; the entity's weight is the group's
//! `cpu.shares` split by where its load is (`calc_group_shares()` /
//! `update_cfs_group()` / `reweight_entity()`, fair.c v4.19 L2921/L3006/L2803);
//! the hierarchical load the balancer reads (`update_cfs_rq_h_load()` /
//! `task_h_load()`, v4.19 L7390/L7424); and moving a task between groups
//! (`sched_move_task()` → `task_change_group_fair()`). Autogroup is not modelled.
//!
//! Not modelled: the propagation of a migrating task's PELT sums up the hierarchy
//! (`propagate_entity_load_avg()`): a group entity's load average follows its own
//! runnable time at its current weight, as `__update_load_avg_se()` computes it,
//! and moves with the group's weight, not with tasks arriving or leaving.

use schedlab_core::sched::System;
use schedlab_core::task::TaskId;

use super::fair::{Cfs, CfsRq, Se, MIN_VRUNTIME_START};
use super::pelt::SchedAvg;
use super::weights::LoadWeight;

/// `MIN_SHARES`: the smallest group entity weight, deliberately not scaled by the
/// extra load resolution (kernel/sched/sched.h).
pub const MIN_SHARES: u64 = 2;

/// A scheduling entity: a task, or group `g`'s entity on CPU `cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ent {
    Task(TaskId),
    Group(usize, usize),
}

/// `struct task_group`, per-CPU parts included. Group 0 is the root: its cfs_rqs
/// are the CPUs' own (`rq->cfs`) and it has no entities.
#[derive(Clone, Debug)]
pub struct TaskGroup {
    pub parent: usize,
    /// Depth of the entities queued on this group's cfs_rqs (`se->depth`): 0 for
    /// the root's, 1 for a child's.
    pub level: u32,
    /// `tg->shares`, scaled by the load resolution.
    pub shares: u64,
    /// `tg->load_avg`: the sum of the per-CPU contributions.
    pub load_avg: u64,
    pub cfs_rq: Vec<CfsRq>,
    pub se: Vec<Se>,
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

    pub fn cfs_mut(&mut self, q: usize, cpu: usize) -> &mut CfsRq {
        if q == 0 {
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
                cfs_rq: vec![CfsRq { min_vruntime: MIN_VRUNTIME_START, ..CfsRq::default() }; n],
                se: vec![group_se; n],
            });
        }
    }

    /// `update_tg_load_avg()` (v4.19 L3076): publish this cfs_rq's load to the
    /// group's sum when it moved by more than 1/64 of what was published.
    pub fn update_tg_load_avg(&mut self, q: usize, cpu: usize) {
        if q == 0 {
            return;
        }
        let cfs = &self.tg[q].cfs_rq[cpu];
        let delta = cfs.avg.load_avg as i64 - cfs.tg_load_avg_contrib as i64;
        if delta.unsigned_abs() > cfs.tg_load_avg_contrib / 64 {
            let load = cfs.avg.load_avg;
            let tg = &mut self.tg[q];
            tg.load_avg = (tg.load_avg as i64 + delta).max(0) as u64;
            tg.cfs_rq[cpu].tg_load_avg_contrib = load;
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

    /// `update_cfs_group()` (v4.19 L3006): re-weight a group entity from its
    /// group's cfs_rq; nothing for tasks.
    pub fn update_cfs_group(&mut self, e: Ent, now: u64) {
        let Ent::Group(g, cpu) = e else { return };
        let shares = self.calc_group_shares(g, cpu);
        if shares != self.ent(e).load.weight {
            self.reweight_entity(e, cpu, shares, now);
        }
    }

    /// `reweight_entity()` (v4.19 L2803): change `e`'s weight, taking it out of and
    /// back into its cfs_rq's load sums; its load average is re-derived from its
    /// load sum at the new weight.
    pub fn reweight_entity(&mut self, e: Ent, cpu: usize, weight: u64, now: u64) {
        let q = self.q_of(e);
        let on_rq = self.ent(e).on_rq;
        let old_w = self.ent(e).load.weight;
        let old_down = self.se_weight(old_w);
        let runnable_old = self.se_runnable_ent(e);
        if on_rq {
            if self.cfs(q, cpu).curr == Some(e) {
                self.update_curr(q, cpu, now);
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
    use schedlab_core::Topology;

    /// A Cfs on the 16-CPU 2x1x4x2 machine with a `shares` group whose every CPU
    /// runs three nice-0 tasks with settled load averages.
    fn loaded_group(version: &str, features: Option<&str>, shares: u64) -> Cfs {
        let mut c = Cfs::new(version, features, &[]).unwrap();
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
