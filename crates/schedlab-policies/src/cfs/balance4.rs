//! The pre-rework load balancer of v4.19 (fair.c): `update_sg_lb_stats()`,
//! `find_busiest_group()` with `calculate_imbalance()` and
//! `fix_small_imbalance()`, `find_busiest_queue()`, and `load_balance()` on
//! them. What it shares with v3.0's (`balance3.rs`) and the v5.x rework
//! (`balance5.rs`) is in `balance.rs`: the balancing passes that call
//! `load_balance()`, `detach_tasks()`, `can_migrate_task()`, active balance.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::sched::System;

use super::balance::{IdleType, MAX_PINNED_INTERVAL_MS};
use super::domains::{SchedGroup, SD_PREFER_SIBLING};
use super::state::Cfs;

/// `enum group_type` (v4.19): the order is the pull priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum GroupType {
    Other,
    Imbalanced,
    Overloaded,
}

/// `struct sg_lb_stats`.
#[derive(Clone, Debug)]
struct SgStats {
    /// The group's span, shared with the group.
    span: std::sync::Arc<CpuSet>,
    avg_load: u64,
    group_load: u64,
    sum_weighted_load: u64,
    load_per_task: u64,
    group_capacity: u64,
    group_util: u64,
    sum_nr_running: u64,
    idle_cpus: u64,
    group_weight: u64,
    group_type: GroupType,
    group_no_capacity: bool,
}

impl Cfs {
    /// `group_has_capacity()` (v4.19 L7758).
    fn group_has_capacity(pct: u64, s: &SgStats) -> bool {
        s.sum_nr_running < s.group_weight || s.group_capacity * 100 > s.group_util * pct
    }

    /// `group_is_overloaded()` (v4.19 L7779).
    fn group_is_overloaded(pct: u64, s: &SgStats) -> bool {
        s.sum_nr_running > s.group_weight && s.group_capacity * 100 < s.group_util * pct
    }

    /// `update_sg_lb_stats()` (v4.19 L7840) of group `g`.
    fn sg_stats(&self, sys: &System, g: &SchedGroup, local: bool, load_idx: u32, pct: u64, overload: &mut bool) -> SgStats {
        let span = &g.span;
        let mut s = SgStats {
            span: span.clone(),
            avg_load: 0,
            group_load: 0,
            sum_weighted_load: 0,
            load_per_task: 0,
            group_capacity: g.capacity.max(1),
            group_util: 0,
            sum_nr_running: 0,
            idle_cpus: 0,
            group_weight: g.weight,
            group_type: GroupType::Other,
            group_no_capacity: false,
        };
        for i in span.iter() {
            s.group_load += if local { self.target_load(i, load_idx) } else { self.source_load(i, load_idx) };
            s.group_util += self.cpu_util(i);
            let nr = self.rq[i].cfs.h_nr_running as u64;
            s.sum_nr_running += nr;
            if nr > 1 {
                *overload = true;
            }
            s.sum_weighted_load += self.weighted_cpuload(i);
            if self.idle_cpu(sys, i) {
                s.idle_cpus += 1;
            }
        }
        s.avg_load = s.group_load * 1024 / s.group_capacity;
        s.load_per_task = s.sum_weighted_load.checked_div(s.sum_nr_running).unwrap_or(0);
        s.group_no_capacity = Self::group_is_overloaded(pct, &s);
        s.group_type = if s.group_no_capacity { GroupType::Overloaded } else { GroupType::Other };
        s
    }
    /// `load_balance()` (v4.19 L8535) of `sd_idx` for `this_cpu`. Returns the number
    /// of tasks pulled and whether higher levels should still balance.
    pub(crate) fn load_balance_v4(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        sd_idx: usize,
        idle: IdleType,
        charge_cpu: usize,
    ) -> (usize, bool) {
        sys.stats[this_cpu].lb_count += 1;
        let sd = &self.doms[this_cpu].domains[sd_idx];
        let pct = sd.imbalance_pct as u64;
        let load_idx = match idle {
            IdleType::NotIdle => sd.busy_idx,
            IdleType::Idle => sd.idle_idx,
            IdleType::NewlyIdle => sd.newidle_idx,
        };
        let prefer_sibling = sd_idx > 0 && self.doms[this_cpu].domains[sd_idx - 1].flags & SD_PREFER_SIBLING != 0;
        let is_root = sd_idx + 1 == self.doms[this_cpu].domains.len();
        if !self.should_we_balance(sys, this_cpu, sd_idx, idle) {
            self.out_balanced(this_cpu, sd_idx);
            return (0, false);
        }
        // Borrowed out of the domain for the scan (no copies), put back after it.
        let groups = std::mem::take(&mut self.doms[this_cpu].domains[sd_idx].groups);
        // update_sd_lb_stats() (v4.19 L8143).
        let mut overload = false;
        let mut local: Option<SgStats> = None;
        let mut busiest: Option<SgStats> = None;
        let (mut total_load, mut total_capacity) = (0u64, 0u64);
        let mut scanned = 0u64;
        for (i, g) in groups.iter().enumerate() {
            scanned += g.weight;
            let mut s = self.sg_stats(sys, g, i == 0, load_idx, pct, &mut overload);
            total_load += s.group_load;
            total_capacity += s.group_capacity;
            if i == 0 {
                local = Some(s);
                continue;
            }
            if prefer_sibling {
                if let Some(l) = &local {
                    if Self::group_has_capacity(pct, l) && s.sum_nr_running > l.sum_nr_running + 1 {
                        s.group_no_capacity = true;
                        s.group_type = GroupType::Overloaded;
                    }
                }
            }
            // update_sd_pick_busiest() (v4.19 L7908).
            let pick = match &busiest {
                None => true,
                Some(b) => s.group_type > b.group_type || (s.group_type == b.group_type && s.avg_load > b.avg_load),
            };
            if pick {
                busiest = Some(s);
            }
        }
        self.doms[this_cpu].domains[sd_idx].groups = groups;
        Self::balance_cost(sys, charge_cpu, scanned, 0, 0);
        if is_root {
            self.rd_overload = overload;
        }
        let local = local.expect("local group");
        // find_busiest_group() (v4.19 L8292).
        let Some(mut busiest) = busiest.filter(|b| b.sum_nr_running > 0) else {
            self.out_balanced(this_cpu, sd_idx);
            return (0, true);
        };
        let sds_avg = 1024 * total_load / total_capacity.max(1);
        let force = busiest.group_type == GroupType::Imbalanced
            || (idle != IdleType::NotIdle && Self::group_has_capacity(pct, &local) && busiest.group_no_capacity);
        if !force {
            let balanced = local.avg_load >= busiest.avg_load
                || local.avg_load >= sds_avg
                || match idle {
                    IdleType::Idle => busiest.group_type != GroupType::Overloaded && local.idle_cpus <= busiest.idle_cpus + 1,
                    _ => 100 * busiest.avg_load <= pct * local.avg_load,
                };
            if balanced {
                self.out_balanced(this_cpu, sd_idx);
                return (0, true);
            }
        }
        let imbalance = Self::calculate_imbalance(&mut busiest, &local, sds_avg, this_cpu, self);
        // find_busiest_group() returns no group when there is nothing to move.
        if imbalance == 0 {
            self.out_balanced(this_cpu, sd_idx);
            return (0, true);
        }
        // find_busiest_queue() (v4.19 L8383).
        let mut src: Option<usize> = None;
        let (mut busiest_load, mut busiest_capacity) = (0u64, 1u64);
        for i in busiest.span.iter() {
            let capacity = self.rq[i].cpu_capacity;
            let wl = self.weighted_cpuload(i);
            if self.rq[i].cfs.h_nr_running == 1 && wl > imbalance {
                continue;
            }
            if wl as u128 * busiest_capacity as u128 > busiest_load as u128 * capacity as u128 {
                busiest_load = wl;
                busiest_capacity = capacity;
                src = Some(i);
            }
        }
        let Some(src) = src else {
            self.out_balanced(this_cpu, sd_idx);
            return (0, true);
        };
        let mut moved = 0;
        if self.rq[src].cfs.h_nr_running > 1 {
            Self::balance_cost(sys, charge_cpu, 0, 2, 0);
            let loop_max = (self.sysctl.nr_migrate as usize).min(self.rq[src].cfs.h_nr_running);
            let (n, all_pinned) =
                self.detach_tasks(sys, src, this_cpu, sd_idx, idle, None, imbalance as i64, loop_max, charge_cpu);
            moved = n;
            sys.stats[this_cpu].lb_gained += n as u64;
            if all_pinned {
                // out_all_pinned: nothing here may run on this CPU. (The kernel first
                // retries without that runqueue; shipped workloads allow every CPU.)
                let sd = &mut self.doms[this_cpu].domains[sd_idx];
                sd.nr_balance_failed = 0;
                if sd.balance_interval_ms < MAX_PINNED_INTERVAL_MS {
                    sd.balance_interval_ms *= 2;
                }
                return (0, true);
            }
        }
        self.after_move(sys, this_cpu, sd_idx, src, idle, moved > 0, true, charge_cpu);
        (moved, true)
    }

    /// The `out_balanced` tail of `load_balance()`: back off the interval.
    fn out_balanced(&mut self, this_cpu: usize, sd_idx: usize) {
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        sd.nr_balance_failed = 0;
        if sd.balance_interval_ms < sd.max_interval_ms {
            sd.balance_interval_ms *= 2;
        }
    }

    /// `calculate_imbalance()` (v4.19 L8211) with `fix_small_imbalance()` (L8132).
    fn calculate_imbalance(busiest: &mut SgStats, local: &SgStats, sds_avg: u64, this_cpu: usize, cfs: &Cfs) -> u64 {
        if busiest.group_type == GroupType::Imbalanced {
            busiest.load_per_task = busiest.load_per_task.min(sds_avg);
        }
        if busiest.avg_load <= sds_avg || local.avg_load >= sds_avg {
            return Self::fix_small_imbalance(busiest, local, this_cpu, cfs, 0);
        }
        let mut load_above_capacity = u64::MAX;
        if busiest.group_type == GroupType::Overloaded && local.group_type == GroupType::Overloaded {
            let l = busiest.sum_nr_running * 1024;
            if l > busiest.group_capacity {
                load_above_capacity = (l - busiest.group_capacity) * 1024 / busiest.group_capacity;
            }
        }
        let max_pull = (busiest.avg_load - sds_avg).min(load_above_capacity);
        let imbalance = ((max_pull as u128 * busiest.group_capacity as u128)
            .min((sds_avg - local.avg_load) as u128 * local.group_capacity as u128)
            / 1024) as u64;
        if imbalance < busiest.load_per_task {
            return Self::fix_small_imbalance(busiest, local, this_cpu, cfs, imbalance);
        }
        imbalance
    }

    /// `fix_small_imbalance()` (v4.19 L8132): move one task if that helps; otherwise
    /// the imbalance stays as `calculate_imbalance()` left it.
    fn fix_small_imbalance(busiest: &SgStats, local: &SgStats, this_cpu: usize, cfs: &Cfs, imbalance: u64) -> u64 {
        let mut local_lpt = local.load_per_task;
        let mut imbn = 2;
        if local.sum_nr_running == 0 {
            let nr = cfs.rq[this_cpu].cfs.h_nr_running as u64;
            local_lpt = cfs.weighted_cpuload(this_cpu).checked_div(nr).unwrap_or(0);
        } else if busiest.load_per_task > local_lpt {
            imbn = 1;
        }
        let scaled_busy_lpt = busiest.load_per_task * 1024 / busiest.group_capacity;
        if busiest.avg_load + scaled_busy_lpt >= local.avg_load + scaled_busy_lpt * imbn {
            return busiest.load_per_task;
        }
        let mut capa_now = busiest.group_capacity * busiest.load_per_task.min(busiest.avg_load);
        capa_now += local.group_capacity * local_lpt.min(local.avg_load);
        capa_now /= 1024;
        let mut capa_move = 0;
        if busiest.avg_load > scaled_busy_lpt {
            capa_move += busiest.group_capacity * busiest.load_per_task.min(busiest.avg_load - scaled_busy_lpt);
        }
        let tmp = if busiest.avg_load * busiest.group_capacity < busiest.load_per_task * 1024 {
            busiest.avg_load * busiest.group_capacity / local.group_capacity
        } else {
            busiest.load_per_task * 1024 / local.group_capacity
        };
        capa_move += local.group_capacity * local_lpt.min(local.avg_load + tmp);
        capa_move /= 1024;
        if capa_move > capa_now {
            busiest.load_per_task
        } else {
            imbalance
        }
    }
}
