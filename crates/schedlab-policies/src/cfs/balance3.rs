//! The v3.0 load balancer (kernel/sched_fair.c of v3.0, July 2011), the kernel
//! the load-resolution seed measured: loads are the instantaneous
//! `rq->load.weight` (no per-entity load tracking), a task group's per-CPU
//! entity weighs its shares split by instantaneous group loads
//! (`calc_cfs_shares()`, in `group.rs`), and tasks are moved group by group with
//! the remaining imbalance rescaled into each group's own weights
//! (`load_balance_fair()`). With or without the extra 10 bits of load resolution
//! this is where a `cpu.shares=2` group either shows its imbalance to the
//! balancer or hides it behind MIN_SHARES.
//!
//! Shared with v4.19 (`balance.rs`): the domains, `should_we_balance()`'s first
//! idle CPU rule, the load indexes (`source_load()`/`target_load()`),
//! `task_hot()`, active balance's push and the interval back-off.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::sched::System;
use schedlab_core::task::TaskId;

use super::balance::{IdleType, MAX_PINNED_INTERVAL_MS};
use super::domains::{SD_PREFER_SIBLING, SD_SHARE_CPUCAPACITY};
use super::state::Cfs;

/// `SCHED_POWER_SCALE`.
const POWER_SCALE: u64 = 1024;

/// `struct sg_lb_stats` of v3.0.
#[derive(Clone, Debug)]
struct SgStats3 {
    span: CpuSet,
    power: u64,
    avg_load: u64,
    group_load: u64,
    sum_nr_running: u64,
    sum_weighted_load: u64,
    /// Tasks the group can run at once: its power in whole CPUs.
    group_capacity: u64,
    group_has_capacity: bool,
    group_imb: bool,
    idle_cpus: u64,
    group_weight: u64,
}

/// `struct sd_lb_stats` of v3.0: the domain's average load per power, the local
/// group and the busiest one.
struct SdStats3 {
    avg_load: u64,
    this: SgStats3,
    busiest: Option<SgStats3>,
}

/// `DIV_ROUND_CLOSEST(power, SCHED_POWER_SCALE)`, with `fix_small_capacity()`'s
/// one CPU for an SMT group whose threads' power rounds to nothing.
fn capacity_of_power(power: u64, smt: bool) -> u64 {
    let c = (power + POWER_SCALE / 2) / POWER_SCALE;
    if c == 0 && smt {
        1
    } else {
        c
    }
}

impl Cfs {
    /// `update_sg_lb_stats()` (v3.0 L2658): loads biased by the index (the local
    /// group high, the others low), and a group is "imbalanced" when its CPUs'
    /// loads differ by at least an average task while one runs two.
    fn sg_stats_v3(&self, sys: &System, span: &CpuSet, power: u64, local: bool, load_idx: u32, smt: bool) -> SgStats3 {
        let (mut max_cpu_load, mut min_cpu_load, mut max_nr_running) = (0u64, u64::MAX, 0u64);
        let mut s = SgStats3 {
            span: span.clone(),
            power: power.max(1),
            avg_load: 0,
            group_load: 0,
            sum_nr_running: 0,
            sum_weighted_load: 0,
            group_capacity: 0,
            group_has_capacity: false,
            group_imb: false,
            idle_cpus: 0,
            group_weight: span.count() as u64,
        };
        for i in span.iter() {
            let nr = self.rq[i].cfs.h_nr_running as u64;
            let load = if local {
                self.target_load(i, load_idx)
            } else {
                let load = self.source_load(i, load_idx);
                if load > max_cpu_load {
                    max_cpu_load = load;
                    max_nr_running = nr;
                }
                min_cpu_load = min_cpu_load.min(load);
                load
            };
            s.group_load += load;
            s.sum_nr_running += nr;
            s.sum_weighted_load += self.weighted_cpuload(i);
            if self.idle_cpu(sys, i) {
                s.idle_cpus += 1;
            }
        }
        s.avg_load = s.group_load * POWER_SCALE / s.power;
        let avg_load_per_task = s.sum_weighted_load.checked_div(s.sum_nr_running).unwrap_or(0);
        s.group_imb = !local && max_cpu_load.wrapping_sub(min_cpu_load) >= avg_load_per_task && max_nr_running > 1;
        s.group_capacity = capacity_of_power(s.power, smt);
        s.group_has_capacity = s.group_capacity > s.sum_nr_running;
        s
    }

    /// `update_sd_lb_stats()` + `update_sd_pick_busiest()` (v3.0 L2788/L2740):
    /// the busiest group is the most loaded one that runs more tasks than it has
    /// CPUs (or is imbalanced); with a child preferring siblings, a remote group
    /// counts as one CPU when the local group has room.
    fn sd_stats_v3(&self, sys: &System, this_cpu: usize, sd_idx: usize, load_idx: u32) -> SdStats3 {
        let doms = &self.doms[this_cpu];
        let sd = &doms.domains[sd_idx];
        let prefer_sibling = sd_idx > 0 && doms.domains[sd_idx - 1].flags & SD_PREFER_SIBLING != 0;
        let child_smt = sd_idx > 0 && doms.domains[sd_idx - 1].flags & SD_SHARE_CPUCAPACITY != 0;
        let smt = sd.flags & SD_SHARE_CPUCAPACITY != 0;
        let mut total_load = 0;
        let mut total_pwr = 0;
        let mut this: Option<SgStats3> = None;
        let mut busiest: Option<SgStats3> = None;
        for (i, g) in sd.groups.iter().enumerate() {
            let local = i == sd.local_group;
            // A group of one SMT core, or of threads, may round to no capacity.
            let mut s = self.sg_stats_v3(sys, &g.span, g.capacity, local, load_idx, smt || child_smt);
            total_load += s.group_load;
            total_pwr += s.power;
            if local {
                this = Some(s);
                continue;
            }
            if prefer_sibling && this.as_ref().is_some_and(|t| t.group_has_capacity) {
                s.group_capacity = s.group_capacity.min(1);
            }
            let max_load = busiest.as_ref().map_or(0, |b| b.avg_load);
            if s.avg_load > max_load && (s.sum_nr_running > s.group_capacity || s.group_imb) {
                busiest = Some(s);
            }
        }
        let this = this.expect("the local group comes first");
        let avg_load = POWER_SCALE * total_load / total_pwr.max(1);
        SdStats3 { avg_load, this, busiest }
    }

    /// `find_busiest_group()` (v3.0 L3062): the busiest group and the load to move
    /// (which may be 0: v3.0 still returns the group, and `load_balance()` then
    /// finds nothing to move and counts a failure).
    fn find_busiest_group_v3(&self, sys: &System, this_cpu: usize, sd_idx: usize, idle: IdleType) -> Option<(SgStats3, u64)> {
        let sd = &self.doms[this_cpu].domains[sd_idx];
        let load_idx = match idle {
            IdleType::NotIdle => sd.busy_idx,
            IdleType::Idle => sd.idle_idx,
            IdleType::NewlyIdle => sd.newidle_idx,
        };
        let pct = sd.imbalance_pct as u64;
        let mut sds = self.sd_stats_v3(sys, this_cpu, sd_idx, load_idx);
        let busiest = sds.busiest.take().filter(|b| b.sum_nr_running > 0)?;
        let this = &sds.this;
        let force = busiest.group_imb || (idle == IdleType::NewlyIdle && this.group_has_capacity && !busiest.group_has_capacity);
        if !force {
            if this.avg_load >= busiest.avg_load || this.avg_load >= sds.avg_load {
                return None;
            }
            let balanced = if idle == IdleType::Idle {
                this.idle_cpus <= busiest.idle_cpus + 1 && busiest.sum_nr_running <= busiest.group_weight
            } else {
                100 * busiest.avg_load <= pct * this.avg_load
            };
            if balanced {
                return None;
            }
        }
        let imbalance = self.calculate_imbalance_v3(&sds, &busiest, this_cpu);
        Some((busiest, imbalance))
    }

    /// `calculate_imbalance()` (v3.0 L2990): bring the busiest group down to the
    /// average but not below its capacity, and this one up to it at most.
    fn calculate_imbalance_v3(&self, sds: &SdStats3, busiest: &SgStats3, this_cpu: usize) -> u64 {
        let mut busiest_lpt = busiest.sum_weighted_load.checked_div(busiest.sum_nr_running).unwrap_or(0);
        if busiest.group_imb {
            busiest_lpt = busiest_lpt.min(sds.avg_load);
        }
        if busiest.avg_load < sds.avg_load {
            return self.fix_small_imbalance_v3(sds, busiest, busiest_lpt, this_cpu, 0);
        }
        let mut load_above_capacity = u64::MAX;
        if !busiest.group_imb && busiest.sum_nr_running > busiest.group_capacity {
            // SCHED_LOAD_SCALE carries the extra resolution, SCHED_POWER_SCALE not.
            let l =
                (busiest.sum_nr_running - busiest.group_capacity) as u128 * self.res.nice_0_load() as u128 * POWER_SCALE as u128;
            load_above_capacity = (l / busiest.power as u128).min(u64::MAX as u128) as u64;
        }
        let max_pull = (busiest.avg_load - sds.avg_load).min(load_above_capacity);
        let this = &sds.this;
        let imbalance = ((max_pull as u128 * busiest.power as u128)
            .min(sds.avg_load.saturating_sub(this.avg_load) as u128 * this.power as u128)
            / POWER_SCALE as u128) as u64;
        if imbalance < busiest_lpt {
            return self.fix_small_imbalance_v3(sds, busiest, busiest_lpt, this_cpu, imbalance);
        }
        imbalance
    }

    /// `fix_small_imbalance()` (v3.0 L2925): move one task's load if that evens
    /// things out or raises the power in use; otherwise leave `imbalance`.
    fn fix_small_imbalance_v3(
        &self,
        sds: &SdStats3,
        busiest: &SgStats3,
        busiest_lpt: u64,
        this_cpu: usize,
        imbalance: u64,
    ) -> u64 {
        let this = &sds.this;
        let mut imbn = 2;
        let this_lpt = if let Some(lpt) = this.sum_weighted_load.checked_div(this.sum_nr_running) {
            if busiest_lpt > lpt {
                imbn = 1;
            }
            lpt
        } else {
            // cpu_avg_load_per_task()
            let nr = self.rq[this_cpu].cfs.h_nr_running as u64;
            self.rq[this_cpu].cfs.load.weight.checked_div(nr).unwrap_or(0)
        };
        let scaled_busy_lpt = busiest_lpt * POWER_SCALE / busiest.power;
        // Unsigned in the kernel: a local load above the busiest wraps to "large".
        if busiest.avg_load.wrapping_sub(this.avg_load).wrapping_add(scaled_busy_lpt) >= scaled_busy_lpt * imbn {
            return busiest_lpt;
        }
        let mut pwr_now = busiest.power * busiest_lpt.min(busiest.avg_load);
        pwr_now += this.power * this_lpt.min(this.avg_load);
        pwr_now /= POWER_SCALE;
        let mut pwr_move = 0;
        let tmp = busiest_lpt * POWER_SCALE / busiest.power;
        if busiest.avg_load > tmp {
            pwr_move += busiest.power * busiest_lpt.min(busiest.avg_load - tmp);
        }
        let tmp = if busiest.avg_load * busiest.power < busiest_lpt * POWER_SCALE {
            busiest.avg_load * busiest.power / this.power
        } else {
            busiest_lpt * POWER_SCALE / this.power
        };
        pwr_move += this.power * this_lpt.min(this.avg_load + tmp);
        pwr_move /= POWER_SCALE;
        if pwr_move > pwr_now {
            busiest_lpt
        } else {
            imbalance
        }
    }

    /// `find_busiest_queue()` (v3.0 L3160): the CPU with the most load per power,
    /// passing over a CPU running one task that alone outweighs the imbalance.
    fn find_busiest_queue_v3(&self, span: &CpuSet, imbalance: u64) -> Option<usize> {
        let mut best: Option<(usize, u64)> = None;
        for i in span.iter() {
            let power = self.rq[i].cpu_capacity.max(1);
            let capacity = capacity_of_power(power, true);
            let wl = self.weighted_cpuload(i);
            if capacity > 0 && self.rq[i].cfs.h_nr_running == 1 && wl > imbalance {
                continue;
            }
            let scaled = wl * POWER_SCALE / power;
            if scaled > best.map_or(0, |(_, l)| l) {
                best = Some((i, scaled));
            }
        }
        best.map(|(i, _)| i)
    }

    /// `update_h_load()` → `tg_load_down()` (v3.0 L2405): each group's share of
    /// `cpu`'s load, top-down, from instantaneous weights.
    fn update_h_load_v3(&mut self, cpu: usize) {
        self.rq[cpu].cfs.h_load = self.rq[cpu].cfs.load.weight;
        for g in 1..self.tg.len() {
            let parent = self.tg[g].parent;
            let pc = self.cfs(parent, cpu);
            let load = pc.h_load as u128 * self.tg[g].se[cpu].load.weight as u128 / (pc.load.weight as u128 + 1);
            self.tg[g].cfs_rq[cpu].h_load = load as u64;
        }
    }

    /// v3.0's share of `p`'s weight in its CPU's load, for wake_affine().
    pub(crate) fn task_h_load_v3(&mut self, p: TaskId) -> u64 {
        let q = self.task_group[p];
        let w = self.se[p].load.weight;
        let cpu = self.se[p].rq_cpu;
        if q == 0 || cpu == usize::MAX {
            return w;
        }
        self.update_h_load_v3(cpu);
        let c = self.cfs(q, cpu);
        (w as u128 * c.h_load as u128 / (c.load.weight as u128 + 1)) as u64
    }

    /// `load_balance_fair()` + `balance_tasks()` (v3.0 L2444/L2340): group by
    /// group (children first, the root's own tasks last), the remaining imbalance
    /// is converted into the group's own weights (× weight / h_load); tasks are
    /// pulled while half of one fits what is left; what moved is converted back.
    /// `one_per_group`: a newly idle pass on a preemptible build, whose
    /// `balance_tasks()` stops after its first pull (under CONFIG_PREEMPT).
    /// Returns (load moved in CPU terms, tasks pulled, all pinned).
    #[allow(clippy::too_many_arguments)]
    fn load_balance_fair_v3(
        &mut self,
        sys: &mut System,
        src: usize,
        dst: usize,
        sd_idx: usize,
        max_load_move: u64,
        one_per_group: bool,
        charge_cpu: usize,
    ) -> (u64, usize, bool) {
        let (nr_failed, cache_nice_tries) = {
            let sd = &self.doms[dst].domains[sd_idx];
            (sd.nr_balance_failed, sd.cache_nice_tries)
        };
        self.update_h_load_v3(src);
        let mut rem_load_move = max_load_move as i128;
        let mut pulled = 0;
        let mut all_pinned = true;
        let mut examined = 0u64;
        let order: Vec<usize> = (1..self.tg.len()).rev().chain(std::iter::once(0)).collect();
        for g in order {
            let (h_load, weight) = {
                let c = self.cfs(g, src);
                (c.h_load, c.load.weight)
            };
            // Tasks queued directly on this cfs_rq (the kernel's task_weight), the
            // most recently enqueued first.
            let tasks: Vec<TaskId> = self.cfs_tasks_newest_first(src).filter(|&p| self.task_group[p] == g).collect();
            if tasks.is_empty() {
                continue;
            }
            let rem_load = (rem_load_move.max(0) as u128 * weight as u128 / (h_load as u128 + 1)) as i128;
            if rem_load == 0 {
                continue;
            }
            let mut left = rem_load;
            for (loops, p) in tasks.into_iter().enumerate() {
                if loops as u64 > self.sysctl.nr_migrate {
                    break;
                }
                examined += 1;
                // can_migrate_task() (v3.0 L2283).
                if !sys.tasks[p].can_run_on(dst) {
                    continue;
                }
                all_pinned = false;
                let w = self.se[p].load.weight as i128;
                if (w >> 1) > left || sys.curr(src) == Some(p) {
                    continue;
                }
                if self.task_hot(sys, p, src, dst) && nr_failed <= cache_nice_tries {
                    continue;
                }
                self.move_task(sys, p, src, dst, charge_cpu);
                pulled += 1;
                left -= w;
                if one_per_group || left <= 0 {
                    break;
                }
            }
            let moved = (rem_load - left).max(0) as u128;
            if moved == 0 {
                continue;
            }
            rem_load_move -= (moved * h_load as u128 / (weight as u128 + 1)) as i128;
            if rem_load_move < 0 {
                break;
            }
        }
        Self::balance_cost(sys, charge_cpu, 0, 0, examined);
        ((max_load_move as i128 - rem_load_move).max(0) as u64, pulled, all_pinned)
    }

    /// `load_balance()` (v3.0 L3283) of `sd_idx` for `this_cpu`: returns (tasks
    /// pulled if any load moved, else 0; whether higher levels should balance).
    pub(crate) fn load_balance_v3(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        sd_idx: usize,
        idle: IdleType,
        charge_cpu: usize,
    ) -> (usize, bool) {
        sys.stats[this_cpu].lb_count += 1;
        if !self.should_we_balance(sys, this_cpu, sd_idx, idle) {
            self.out_balanced_v3(this_cpu, sd_idx, false);
            return (0, false);
        }
        let scanned = self.doms[this_cpu].domains[sd_idx].span_weight as u64;
        Self::balance_cost(sys, charge_cpu, scanned, 0, 0);
        let Some((busiest, imbalance)) = self.find_busiest_group_v3(sys, this_cpu, sd_idx, idle) else {
            self.out_balanced_v3(this_cpu, sd_idx, false);
            return (0, true);
        };
        let Some(src) = self.find_busiest_queue_v3(&busiest.span, imbalance) else {
            self.out_balanced_v3(this_cpu, sd_idx, false);
            return (0, true);
        };
        let (mut ld_moved, mut pulled) = (false, 0);
        if self.rq[src].cfs.h_nr_running > 1 {
            Self::balance_cost(sys, charge_cpu, 0, 2, 0);
            // move_tasks() (v3.0 L2480): until no load moves or the imbalance is met.
            // A preemptible build (CONFIG_PREEMPT) keeps a newly idle pass short:
            // balance_tasks() stops at its first pull, and move_tasks() once this
            // CPU has a task (its lock contention test is not modelled).
            let newidle_short = sys.preemption_built && idle == IdleType::NewlyIdle;
            let mut total = 0u64;
            let mut all_pinned = true;
            loop {
                let left = imbalance.saturating_sub(total);
                let (moved, n, pinned) = self.load_balance_fair_v3(sys, src, this_cpu, sd_idx, left, newidle_short, charge_cpu);
                total += moved;
                pulled += n;
                all_pinned &= pinned;
                if moved == 0 || total >= imbalance || (newidle_short && pulled > 0) {
                    break;
                }
            }
            ld_moved = total > 0;
            sys.stats[this_cpu].lb_gained += pulled as u64;
            if all_pinned {
                self.out_balanced_v3(this_cpu, sd_idx, true);
                return (0, true);
            }
        }
        self.after_move(sys, this_cpu, sd_idx, src, idle, ld_moved, false, charge_cpu);
        (if ld_moved { pulled.max(1) } else { 0 }, true)
    }

    /// `out_balanced` / `out_one_pinned` of v3.0's `load_balance()`: back off.
    fn out_balanced_v3(&mut self, this_cpu: usize, sd_idx: usize, all_pinned: bool) {
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        sd.nr_balance_failed = 0;
        if (all_pinned && sd.balance_interval_ms < MAX_PINNED_INTERVAL_MS) || sd.balance_interval_ms < sd.max_interval_ms {
            sd.balance_interval_ms *= 2;
        }
    }
}
