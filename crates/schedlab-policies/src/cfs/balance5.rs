//! The reworked load balancer of v5.5+ (Vincent Guittot, "sched/fair: rework
//! load_balance", v5.5), as in v5.10 and v5.15: groups classified by type,
//! `calculate_imbalance()` choosing what to migrate (load, utilisation or a task
//! count), loads that include blocked load (`cpu_load()` = `cfs.avg.load_avg`,
//! v5.7+) and the runnable signal; and the same classification for fork placement
//! (`find_idlest_group()`), with the NUMA imbalance rules of each version.
//!
//! What is shared with v4.19 (should_we_balance, detach from the least recently
//! run end, active balance, interval back-off) lives in `balance.rs`; this file
//! holds what v5.5 replaced. Line numbers are fair.c of v5.10 / v5.15.

use schedlab_core::cpuset::CpuSet;
use schedlab_core::sched::System;
use schedlab_core::task::TaskId;

use super::balance::{IdleType, MigrationType, MAX_PINNED_INTERVAL_MS};
use super::domains::{KernelVersion, SchedGroup, SD_NUMA, SD_PREFER_SIBLING, SD_SHARE_CPUCAPACITY, SD_SHARE_PKG_RESOURCES};
use super::scan::GroupSums;
use super::state::{Cfs, StopperWork};

/// `SCHED_CAPACITY_SCALE`.
const SCALE: u64 = 1024;

/// `NUMA_IMBALANCE_MIN` (v5.11: the "magic number" 2 of v5.7's
/// `adjust_numa_imbalance()`, named).
pub const NUMA_IMBALANCE_MIN: u64 = 2;

/// `enum group_type` (v5.10 L7344; v6.12 L9196): the order is the pull
/// priority. Misfit and asym-packing need asymmetric CPUs, which no modelled
/// machine has. `SmtBalance` (v6.6+, fee1759e4f04): an SMT core running more
/// than one task, seen by a CPU that would pull.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GroupType {
    HasSpare,
    FullyBusy,
    SmtBalance,
    Imbalanced,
    Overloaded,
}

/// `struct sg_lb_stats` (v5.10 L8125), the fields this model reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sg5 {
    /// Which group of the domain this is.
    pub group: usize,
    pub avg_load: u64,
    pub group_load: u64,
    pub group_capacity: u64,
    pub group_util: u64,
    pub group_runnable: u64,
    /// `sum_nr_running`: Σ `rq->nr_running`, delayed tasks included (only fair
    /// tasks exist here).
    pub sum_nr_running: u64,
    /// `sum_h_nr_running`: Σ `cfs.h_nr_running`, from v6.14 `h_nr_runnable`
    /// (delayed tasks left out); before v6.14 the same as `sum_nr_running`.
    pub sum_h_nr_running: u64,
    pub idle_cpus: u64,
    pub group_weight: u64,
    pub group_type: GroupType,
    /// The group's `sg->flags` and `sg->cores` (v6.6+ reads them).
    pub flags: u32,
    pub cores: u64,
}

impl Sg5 {
    fn empty(group: usize, weight: u64, capacity: u64) -> Sg5 {
        Sg5 {
            group,
            avg_load: 0,
            group_load: 0,
            group_capacity: capacity.max(1),
            group_util: 0,
            group_runnable: 0,
            sum_nr_running: 0,
            sum_h_nr_running: 0,
            idle_cpus: 0,
            group_weight: weight,
            group_type: GroupType::HasSpare,
            flags: 0,
            cores: 0,
        }
    }

    /// Group `g` (the domain's `group`-th) with the sums `update_sg_lb_stats()`
    /// takes over its CPUs, from the running sums kept per group.
    fn of_sums(group: usize, g: &SchedGroup, sums: &GroupSums) -> Sg5 {
        Sg5 {
            group_load: sums.load_avg,
            group_util: sums.util,
            group_runnable: sums.runnable_avg,
            sum_nr_running: sums.nr_running,
            sum_h_nr_running: sums.nr_runnable,
            idle_cpus: sums.idle_cpus,
            flags: g.flags,
            cores: g.cores,
            ..Sg5::empty(group, g.weight, g.capacity)
        }
    }

    /// The tail of `update_sg_wakeup_stats()`: the group's type, and its average
    /// load when fully busy or overloaded.
    fn classified_for_wakeup(mut self, pct: u64) -> Sg5 {
        self.group_type = group_classify(pct, &self, false);
        if matches!(self.group_type, GroupType::FullyBusy | GroupType::Overloaded) {
            self.avg_load = self.group_load * SCALE / self.group_capacity;
        }
        self
    }
}

/// `group_has_capacity()` (v5.10 L8267).
pub fn group_has_capacity(pct: u64, s: &Sg5) -> bool {
    if s.sum_nr_running < s.group_weight {
        return true;
    }
    if s.group_capacity * pct < s.group_runnable * 100 {
        return false;
    }
    s.group_capacity * 100 > s.group_util * pct
}

/// `group_is_overloaded()` (v5.10 L8292).
pub fn group_is_overloaded(pct: u64, s: &Sg5) -> bool {
    if s.sum_nr_running <= s.group_weight {
        return false;
    }
    s.group_capacity * 100 < s.group_util * pct || s.group_capacity * pct < s.group_runnable * 100
}

/// `group_classify()` (v5.10 L8326; v6.12 L10138). `sg_imbalanced()` needs
/// affinity-pinned tasks, which the shipped workloads do not have.
/// `smt_balance`: v6.6+'s `group_smt_balance` flag of the group's stats.
pub fn group_classify(pct: u64, s: &Sg5, smt_balance: bool) -> GroupType {
    if group_is_overloaded(pct, s) {
        GroupType::Overloaded
    } else if smt_balance {
        GroupType::SmtBalance
    } else if !group_has_capacity(pct, s) {
        GroupType::FullyBusy
    } else {
        GroupType::HasSpare
    }
}

/// `adjust_numa_imbalance()` of v5.18+: a NUMA imbalance is allowed while the
/// destination would run at most `imb_numa_nr` tasks, and then only a small one
/// (up to NUMA_IMBALANCE_MIN, a pair of communicating tasks).
fn adjust_numa_imbalance_v518(imbalance: u64, dst_running: u64, imb_numa_nr: u64) -> u64 {
    if dst_running > imb_numa_nr || imbalance > NUMA_IMBALANCE_MIN {
        imbalance
    } else {
        0
    }
}

/// `smt_vs_nonsmt_groups()` (v6.6+): one group is an SMT core, the other not.
fn smt_vs_nonsmt_groups(a: &Sg5, b: &Sg5) -> bool {
    (a.flags & SD_SHARE_CPUCAPACITY) != (b.flags & SD_SHARE_CPUCAPACITY)
}

/// `sibling_imbalance()` (v6.6+, 7ff1693236f5 with the v6.6-rc2 rounding fix
/// 450e749707bc): the tasks to move so that both groups run as many tasks per
/// core; nothing unless this CPU is idle.
fn sibling_imbalance(idle: IdleType, busiest: &Sg5, local: &Sg5) -> u64 {
    if idle == IdleType::NotIdle || busiest.sum_nr_running == 0 {
        return 0;
    }
    let (nb, nl) = (busiest.cores, local.cores);
    if nb == nl {
        return busiest.sum_nr_running.saturating_sub(local.sum_nr_running);
    }
    let imbalance = (nl * busiest.sum_nr_running).saturating_sub(nb * local.sum_nr_running);
    let imbalance = (2 * imbalance + nl + nb) / (nl + nb);
    if imbalance <= 1 && local.sum_nr_running == 0 && busiest.sum_nr_running > 1 {
        return 2;
    }
    imbalance
}

/// `allow_numa_imbalance()` (v5.11, 7d2b5dd0bcc4 and the fork patch): a NUMA
/// imbalance is tolerated while fewer than a quarter of the CPUs are busy.
pub fn allow_numa_imbalance(dst_running: u64, dst_weight: u64) -> bool {
    dst_running < (dst_weight >> 2)
}

impl Cfs {
    /// `cpu_load()` (v5.7+): the runqueue's load average, blocked load included.
    pub fn cpu_load(&self, cpu: usize) -> u64 {
        self.rq[cpu].cfs.avg.load_avg
    }

    /// `cpu_runnable()` (v5.7+): 1024 × the recent average number of runnable tasks.
    pub fn cpu_runnable(&self, cpu: usize) -> u64 {
        self.rq[cpu].cfs.avg.runnable_load_avg
    }

    /// `adjust_numa_imbalance()`: v5.10 (v5.7's rule) lets the busiest node keep a
    /// communicating pair: no imbalance while it runs at most 2 tasks. With
    /// NUMA_FORK_SPREAD (v5.11+, and so v5.15) the tolerance floats: an imbalance of
    /// up to NUMA_IMBALANCE_MIN tasks is ignored while the busiest node runs fewer
    /// tasks than a quarter of its CPUs.
    pub fn adjust_numa_imbalance(&self, imbalance: u64, busiest_running: u64, busiest_weight: u64) -> u64 {
        if self.feat.numa_fork_spread {
            if !allow_numa_imbalance(busiest_running, busiest_weight) {
                return imbalance;
            }
            if imbalance <= NUMA_IMBALANCE_MIN {
                return 0;
            }
            return imbalance;
        }
        if busiest_running <= NUMA_IMBALANCE_MIN {
            return 0;
        }
        imbalance
    }

    /// `update_idle_cpu_scan()` (v6.0+; v6.6 L10271, v6.12 L10903, v6.18 L10948),
    /// from a periodic or idle balance of the LLC-wide domain: SIS_UTIL's scan
    /// depth, the LLC's CPUs times 1 - (util·imbalance_pct)², floored (so a
    /// 2-CPU LLC stops scanning from 60.5% busy, an 8-CPU one from 80%).
    pub(crate) fn update_idle_cpu_scan(&mut self, this_cpu: usize, sd_idx: usize, sum_util: u64) {
        if !self.version.eevdf() || !self.feat.sis_util {
            return;
        }
        let d = &self.doms[this_cpu];
        let llc_weight = d.sd_llc_size as u64;
        // The kernel compares span weights; the domain spanning the LLC is sd_llc.
        if d.sd_llc != Some(sd_idx) {
            return;
        }
        let pct = u64::from(d.domains[sd_idx].imbalance_pct);
        let x = sum_util / llc_weight.max(1);
        let tmp = (x * x * pct * pct / (10_000 * 1024)).min(1024);
        let y = 1024 - tmp;
        let llc = self.llc_id(this_cpu);
        self.nr_idle_scan[llc] = y * llc_weight / 1024;
    }

    /// `update_sg_lb_stats()` (v5.10 L8377; v5.15 L8605; v6.18 L10355). Sets
    /// `overload` when a CPU has more than one task (`rq->nr_running`, delayed
    /// tasks included); v6.18's `sum_h_nr_running` counts runnable tasks
    /// (`h_nr_runnable`), its `sum_nr_running` every queued one.
    /// The sums come from the running sums kept per group (`cfs/scan.rs`).
    fn sg_stats5(&self, gi: usize, g: &SchedGroup, pct: u64, overload: &mut bool, idle: IdleType) -> Sg5 {
        let sums = self.scan.group_sums(g);
        let mut s = Sg5::of_sums(gi, g, &sums);
        *overload |= sums.overloaded_cpus > 0;
        // v6.6+ `smt_balance()`: a CPU that would pull sees another SMT core
        // sharing its capacity between tasks.
        let smt_balance = self.version >= KernelVersion::V6_6
            && gi != 0
            && idle != IdleType::NotIdle
            && g.flags & SD_SHARE_CPUCAPACITY != 0
            && s.sum_h_nr_running > 1;
        s.group_type = group_classify(pct, &s, smt_balance);
        if s.group_type == GroupType::Overloaded {
            s.avg_load = s.group_load * SCALE / s.group_capacity;
        }
        s
    }

    /// `update_sd_pick_busiest()` (v5.10 L8465; v6.12 L10401): should `sg`
    /// replace `busiest`? `v66`: the v6.6+ rules for SMT groups.
    fn pick_busiest5(sg: &Sg5, busiest: Option<&Sg5>, v66: bool) -> bool {
        if sg.sum_h_nr_running == 0 {
            return false;
        }
        let Some(b) = busiest else { return true };
        if sg.group_type != b.group_type {
            return sg.group_type > b.group_type;
        }
        // Fewer idle CPUs, then more running tasks.
        let has_spare = || sg.idle_cpus < b.idle_cpus || (sg.idle_cpus == b.idle_cpus && sg.sum_nr_running > b.sum_nr_running);
        // v6.6+: the higher avg_load (0 unless overloaded), keeping an SMT busiest
        // group on a tie ("SMT sched groups need more help").
        let fully_busy = || !(sg.avg_load < b.avg_load || (sg.avg_load == b.avg_load && b.flags & SD_SHARE_CPUCAPACITY != 0));
        match sg.group_type {
            GroupType::Overloaded => sg.avg_load > b.avg_load,
            GroupType::FullyBusy if !v66 => sg.avg_load > b.avg_load,
            GroupType::FullyBusy => fully_busy(),
            GroupType::SmtBalance if sg.idle_cpus != 0 || b.idle_cpus != 0 => has_spare(),
            GroupType::SmtBalance => fully_busy(),
            GroupType::Imbalanced => false,
            // v6.6+: an SMT group running one task is not picked over a group
            // of plain CPUs (it would leave a core idle).
            GroupType::HasSpare if v66 && smt_vs_nonsmt_groups(b, sg) => {
                !(sg.flags & SD_SHARE_CPUCAPACITY != 0 && sg.sum_h_nr_running <= 1)
            }
            GroupType::HasSpare => has_spare(),
        }
    }

    /// `load_balance()` of v5.10 (L9532) / v5.15 (L9794) for domain `sd_idx` of
    /// `this_cpu`: `find_busiest_group()`, `find_busiest_queue()`, `detach_tasks()`.
    /// Returns the tasks pulled and whether higher levels should still balance.
    pub fn load_balance_v5(
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
        let sd_flags = sd.flags;
        let prefer_sibling = sd_idx > 0 && self.doms[this_cpu].domains[sd_idx - 1].flags & SD_PREFER_SIBLING != 0;
        let imb_numa_nr = self.doms[this_cpu].domains[sd_idx].imb_numa_nr;
        let is_root = sd_idx + 1 == self.doms[this_cpu].domains.len();
        let v66 = self.version >= KernelVersion::V6_6;
        if !self.should_we_balance(sys, this_cpu, sd_idx, idle) {
            self.out_balanced5(this_cpu, sd_idx, idle);
            return (0, false);
        }
        // update_sd_lb_stats() (v5.10 L8991).
        self.scan_rows_refresh(sys);
        let mut overload = false;
        let mut local: Option<Sg5> = None;
        let mut busiest: Option<Sg5> = None;
        let (mut total_load, mut total_capacity) = (0u64, 0u64);
        let mut scanned = 0u64;
        let mut sum_util = 0u64;
        // Borrowed out of the domain for the scan (no copies of the spans).
        let groups = std::mem::take(&mut self.doms[this_cpu].domains[sd_idx].groups);
        groups.iter().for_each(|g| self.scan.prefetch_sums(g));
        for (i, g) in groups.iter().enumerate() {
            scanned += g.weight;
            #[cfg(debug_assertions)]
            self.debug_check_group_sums(sys, g);
            let s = self.sg_stats5(i, g, pct, &mut overload, idle);
            total_load += s.group_load;
            total_capacity += s.group_capacity;
            sum_util += s.group_util;
            if i == 0 {
                local = Some(s);
            } else if Self::pick_busiest5(&s, busiest.as_ref(), v66) {
                busiest = Some(s);
            }
        }
        self.doms[this_cpu].domains[sd_idx].groups = groups;
        Self::balance_cost(sys, charge_cpu, scanned, 0, 0);
        if is_root {
            self.rd_overload = overload;
        }
        if idle != IdleType::NewlyIdle {
            self.update_idle_cpu_scan(this_cpu, sd_idx, sum_util);
        }
        let mut local = local.expect("local group");
        let Some(busiest) = busiest else {
            self.out_balanced5(this_cpu, sd_idx, idle);
            return (0, true);
        };
        let sds_avg = SCALE * total_load / total_capacity.max(1);
        // find_busiest_group() (v5.10 L9184; v6.12 L11250): the decision matrix.
        // v6.6+ spreads to the sibling domain only from an idle CPU, by the
        // groups' tasks per core (`sibling_imbalance()`).
        let spread =
            if v66 { sibling_imbalance(idle, &busiest, &local) > 1 } else { busiest.sum_nr_running > local.sum_nr_running + 1 };
        let force =
            busiest.group_type == GroupType::Imbalanced || (prefer_sibling && local.group_type == GroupType::HasSpare && spread);
        if !force {
            let balanced = Self::group_balanced5(&local, &busiest, sds_avg, pct, idle, v66);
            if balanced {
                self.out_balanced5(this_cpu, sd_idx, idle);
                return (0, true);
            }
        }
        let (migration, imbalance) = self.calculate_imbalance5(
            &busiest,
            &mut local,
            sds_avg,
            (sd_flags, imb_numa_nr),
            prefer_sibling,
            idle,
            total_load,
            total_capacity,
        );
        if imbalance == 0 {
            self.out_balanced5(this_cpu, sd_idx, idle);
            return (0, true);
        }
        let busiest_span = &self.doms[this_cpu].domains[sd_idx].groups[busiest.group].span;
        let Some(src) = self.find_busiest_queue5(busiest_span, migration, imbalance, self.version) else {
            self.out_balanced5(this_cpu, sd_idx, idle);
            return (0, true);
        };
        let mut moved = 0;
        let detached = self.rq[src].cfs.h_nr_running > 1;
        if detached {
            Self::balance_cost(sys, charge_cpu, 0, 2, 0);
            let loop_max = (self.sysctl.nr_migrate as usize).min(self.rq[src].cfs.h_nr_running);
            let (n, all_pinned) =
                self.detach_tasks(sys, src, this_cpu, sd_idx, idle, Some(migration), imbalance as i64, loop_max, charge_cpu);
            moved = n;
            sys.stats[this_cpu].lb_gained += n as u64;
            if all_pinned {
                // out_all_pinned (the kernel first retries without that runqueue;
                // shipped workloads allow every CPU).
                self.doms[this_cpu].domains[sd_idx].nr_balance_failed = 0;
                self.out_one_pinned5(this_cpu, sd_idx, idle, true);
                return (0, true);
            }
        }
        let v515 = self.version >= KernelVersion::V5_15;
        let mut active = false;
        if moved == 0 {
            let sd = &mut self.doms[this_cpu].domains[sd_idx];
            if idle != IdleType::NewlyIdle {
                sd.nr_balance_failed += 1;
            }
            // need_active_balance(): reduced capacity, misfits and asym packing need
            // asymmetric CPUs, so only repeated failures push the running task; from
            // v5.15 (imbalanced_active_balance()) only for a task-count imbalance.
            let failed = sd.nr_balance_failed > sd.cache_nice_tries + 2;
            if failed && (!v515 || migration == MigrationType::Task) {
                let curr = sys.curr(src).filter(|&c| sys.tasks[c].can_run_on(this_cpu));
                let Some(_) = curr else {
                    // The running task (or the idle task) may not come here:
                    // out_one_pinned with LBF_ALL_PINNED (v5.10 sets it here; v5.15
                    // set it before detaching and only detach_tasks clears it).
                    let all_pinned = !v515 || !detached;
                    self.out_one_pinned5(this_cpu, sd_idx, idle, all_pinned);
                    return (0, true);
                };
                if self.rq[src].stopper.is_none() {
                    self.rq[src].stopper = Some(StopperWork::ActiveBalance { dst: this_cpu });
                    sys.resched_cpu(src, charge_cpu);
                    active = true;
                }
                if !v515 {
                    // v5.10: force the stopper's migration past the hot test.
                    let sd = &mut self.doms[this_cpu].domains[sd_idx];
                    sd.nr_balance_failed = sd.cache_nice_tries + 1;
                }
            }
        } else {
            self.doms[this_cpu].domains[sd_idx].nr_balance_failed = 0;
        }
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        // v5.10 backs off once an active balance is under way; v5.15 resets the
        // interval whenever the active balance was needed, i.e. always here.
        if !active || v515 {
            sd.balance_interval_ms = sd.min_interval_ms;
        } else if sd.balance_interval_ms < sd.max_interval_ms {
            sd.balance_interval_ms *= 2;
        }
        (moved, true)
    }

    /// The `out_balanced` exits of `find_busiest_group()` (v5.10 L9184) once no
    /// group type forces a pull.
    fn group_balanced5(local: &Sg5, busiest: &Sg5, sds_avg: u64, pct: u64, idle: IdleType, v66: bool) -> bool {
        if local.group_type > busiest.group_type {
            return true;
        }
        if local.group_type == GroupType::Overloaded {
            // Both overloaded: pull load only if local is below both the busiest
            // group and the domain average, by more than imbalance_pct.
            return local.avg_load >= busiest.avg_load
                || local.avg_load >= sds_avg
                || 100 * busiest.avg_load <= pct * local.avg_load;
        }
        if busiest.group_type != GroupType::Overloaded {
            // Spare capacity on the busiest side: only an idle CPU pulls, and only if
            // it would even out idle CPUs or tasks; v6.6+ lets a plain CPU pull from an
            // SMT core sharing its capacity.
            if idle == IdleType::NotIdle {
                return true;
            }
            if v66 && busiest.group_type == GroupType::SmtBalance && smt_vs_nonsmt_groups(local, busiest) {
                return false;
            }
            return (busiest.group_weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1) || busiest.sum_h_nr_running == 1;
        }
        false
    }

    /// The `out_balanced` tail of v5.10's `load_balance()`: newly-idle passes no
    /// longer touch the interval (they disregard it, so it would only skyrocket).
    fn out_balanced5(&mut self, this_cpu: usize, sd_idx: usize, idle: IdleType) {
        self.doms[this_cpu].domains[sd_idx].nr_balance_failed = 0;
        self.out_one_pinned5(this_cpu, sd_idx, idle, false);
    }

    /// `out_one_pinned`: back off the interval, except for newly-idle passes; up to
    /// `MAX_PINNED_INTERVAL` when everything was pinned, else to `max_interval`.
    fn out_one_pinned5(&mut self, this_cpu: usize, sd_idx: usize, idle: IdleType, all_pinned: bool) {
        let sd = &mut self.doms[this_cpu].domains[sd_idx];
        if idle == IdleType::NewlyIdle {
            return;
        }
        let cap = if all_pinned { MAX_PINNED_INTERVAL_MS } else { 0 };
        if sd.balance_interval_ms < cap || sd.balance_interval_ms < sd.max_interval_ms {
            sd.balance_interval_ms *= 2;
        }
    }

    /// `calculate_imbalance()` (v5.10 L9013; v5.15 L9253): what to migrate and how much.
    #[allow(clippy::too_many_arguments)]
    fn calculate_imbalance5(
        &self,
        busiest: &Sg5,
        local: &mut Sg5,
        mut sds_avg: u64,
        (sd_flags, imb_numa_nr): (u32, u64),
        prefer_sibling: bool,
        idle: IdleType,
        total_load: u64,
        total_capacity: u64,
    ) -> (MigrationType, u64) {
        if busiest.group_type == GroupType::Imbalanced || busiest.group_type == GroupType::SmtBalance {
            return (MigrationType::Task, 1);
        }
        if local.group_type == GroupType::HasSpare {
            if busiest.group_type > GroupType::FullyBusy && sd_flags & SD_SHARE_PKG_RESOURCES == 0 {
                // Fill the local group's spare capacity with utilisation.
                let imbalance = local.group_capacity.max(local.group_util) - local.group_util;
                if idle != IdleType::NotIdle && imbalance == 0 {
                    return (MigrationType::Task, 1);
                }
                return (MigrationType::Util, imbalance);
            }
            if self.version >= KernelVersion::V6_6 {
                // v6.6+: spread by tasks per core, or even out idle CPUs (unsigned
                // int arithmetic as before: fewer idle CPUs locally wraps to a huge
                // count, which `max_t(long, 0, ..)` keeps); halved after v5.18's
                // NUMA allowance.
                let mut imbalance = if busiest.group_weight == 1 || prefer_sibling {
                    sibling_imbalance(idle, busiest, local)
                } else {
                    u64::from((local.idle_cpus as u32).wrapping_sub(busiest.idle_cpus as u32))
                };
                if sd_flags & SD_NUMA != 0 {
                    imbalance = adjust_numa_imbalance_v518(imbalance, local.sum_nr_running + 1, imb_numa_nr);
                }
                return (MigrationType::Task, imbalance >> 1);
            }
            let mut imbalance = if busiest.group_weight == 1 || prefer_sibling {
                busiest.sum_nr_running.saturating_sub(local.sum_nr_running) >> 1
            } else {
                // Unsigned int arithmetic in the kernel: fewer idle CPUs locally wraps
                // to a huge count (only reachable when the busiest group is overloaded).
                u64::from((local.idle_cpus as u32).wrapping_sub(busiest.idle_cpus as u32) >> 1)
            };
            if sd_flags & SD_NUMA != 0 {
                imbalance = self.adjust_numa_imbalance(imbalance, busiest.sum_nr_running, busiest.group_weight);
            }
            return (MigrationType::Task, imbalance);
        }
        if local.group_type < GroupType::Overloaded {
            local.avg_load = local.group_load * SCALE / local.group_capacity;
            sds_avg = SCALE * total_load / total_capacity.max(1);
            if local.avg_load >= busiest.avg_load {
                return (MigrationType::Load, 0);
            }
        }
        // Both sides' distance from the domain average, in unsigned long arithmetic.
        let pull = busiest.avg_load.wrapping_sub(sds_avg).wrapping_mul(busiest.group_capacity);
        let push = sds_avg.wrapping_sub(local.avg_load).wrapping_mul(local.group_capacity);
        (MigrationType::Load, pull.min(push) / SCALE)
    }

    /// `find_busiest_queue()` (v5.10 L9313) among the busiest group's CPUs.
    /// v5.10 still looks at CPUs without tasks (only their blocked load is left,
    /// which can make an empty CPU "busiest" by load); v5.15 skips them.
    fn find_busiest_queue5(
        &self,
        span: &CpuSet,
        migration: MigrationType,
        imbalance: u64,
        version: KernelVersion,
    ) -> Option<usize> {
        let mut busiest = None;
        let (mut busiest_load, mut busiest_capacity, mut busiest_util, mut busiest_nr) = (0u64, 1u64, 0u64, 0usize);
        for i in span.iter() {
            // `cfs.h_nr_running`; v6.14+ `h_nr_runnable` (delayed tasks left out).
            let nr = self.h_nr_runnable(i);
            if nr == 0 && version >= KernelVersion::V5_15 {
                continue;
            }
            let capacity = self.rq[i].cpu_capacity;
            match migration {
                MigrationType::Load => {
                    let load = self.cpu_load(i);
                    // A lone task heavier than the imbalance would only move the problem
                    // (check_cpu_capacity() is false at full capacity).
                    if nr == 1 && load > imbalance {
                        continue;
                    }
                    if load as u128 * busiest_capacity as u128 > busiest_load as u128 * capacity as u128 {
                        busiest_load = load;
                        busiest_capacity = capacity;
                        busiest = Some(i);
                    }
                }
                MigrationType::Util => {
                    // v6.5+ (7d0583cf9ec7, "runnable boosting"): `cpu_util_cfs_boost()`,
                    // the CPU's utilisation at least its runnable average.
                    let util = if self.version >= KernelVersion::V6_6 { self.cpu_util_boost(i) } else { self.cpu_util(i) };
                    if nr <= 1 {
                        continue;
                    }
                    if busiest_util < util {
                        busiest_util = util;
                        busiest = Some(i);
                    }
                }
                MigrationType::Task => {
                    if busiest_nr < nr {
                        busiest_nr = nr;
                        busiest = Some(i);
                    }
                }
            }
        }
        busiest
    }

    /// `task_hot()` (v5.10 L7458): as v4.19, but SMT siblings share their caches, so
    /// nothing is hot for a move between them.
    pub(crate) fn task_hot5(&self, sys: &System, p: TaskId, src: usize, dst: usize, sd_flags: u32) -> bool {
        sd_flags & SD_SHARE_CPUCAPACITY == 0 && self.task_hot(sys, p, src, dst)
    }

    // ------------------------------------------------------------------ fork placement

    /// `update_sg_wakeup_stats()` (v5.10 L8690): the group as `p` would find it,
    /// without `p` itself (`cpu_load_without()`, `cpu_util_without()`,
    /// `cpu_runnable_without()`, `idle_cpu_without()`): a forking task is not
    /// queued anywhere yet, an exec'ing one runs on its CPU and counts there as if
    /// gone (`task_running_on_cpu()`).
    /// `p_h_load` is `task_h_load(p)`, what `cpu_load_without()` takes off.
    fn sg_wakeup_stats5(&self, sys: &System, gi: usize, g: &SchedGroup, pct: u64, p: TaskId, p_h_load: u64) -> Sg5 {
        if sys.tasks[p].allowed.is_none() || !self.feat.sg_wakeup_allowed {
            // Every CPU of the group counted: the group's running sums, less
            // p's part on its own CPU (the loop below, without walking the group).
            let s = self.sg_wakeup_stats5_from_sums(sys, gi, g, pct, p, p_h_load);
            debug_assert_eq!(
                s,
                self.sg_wakeup_stats5_walk(sys, gi, g, pct, p, p_h_load),
                "update_sg_wakeup_stats() from the group sums differs from the walk of group {:?}",
                g.span_runs
            );
            return s;
        }
        self.sg_wakeup_stats5_walk(sys, gi, g, pct, p, p_h_load)
    }

    /// `update_sg_wakeup_stats()` from the group's running sums, for a task
    /// allowed on every CPU: the sums with p's own CPU (if p is queued in the
    /// group) counted without p, as the walk counts it.
    fn sg_wakeup_stats5_from_sums(&self, sys: &System, gi: usize, g: &SchedGroup, pct: u64, p: TaskId, p_h_load: u64) -> Sg5 {
        let mut s = Sg5::of_sums(gi, g, &self.scan.group_sums(g));
        let p_cpu = (self.se[p].on_rq).then_some(sys.tasks[p].cpu);
        if let Some(i) = p_cpu.filter(|&i| g.span.contains(i)) {
            let row = self.scan.row(i);
            let avg = &self.se[p].avg;
            s.group_load = s.group_load - row.load_avg + row.load_avg.saturating_sub(p_h_load);
            s.group_util = s.group_util - row.util + self.cpu_util_without(i, p);
            s.group_runnable = s.group_runnable - row.runnable_avg + row.runnable_avg.saturating_sub(avg.runnable_load_avg);
            let nr = u64::from(row.h_nr_running) - 1;
            s.sum_nr_running -= 1;
            s.sum_h_nr_running -= 1;
            // idle_cpu_without(): only p running here.
            s.idle_cpus = s.idle_cpus - u64::from(row.idle) + u64::from(nr == 0 && sys.curr(i) == Some(p));
        }
        s.classified_for_wakeup(pct)
    }

    /// `update_sg_wakeup_stats()` walking the group's CPUs: every one
    /// (`for_each_cpu()` over the group's span, v5.10-v6.18.38), or with
    /// SG_WAKEUP_ALLOWED (6.18.39+) those p may use (`for_each_cpu_and()` with
    /// `p->cpus_ptr`).
    fn sg_wakeup_stats5_walk(&self, sys: &System, gi: usize, g: &SchedGroup, pct: u64, p: TaskId, p_h_load: u64) -> Sg5 {
        let mut s = Sg5 { flags: g.flags, cores: g.cores, ..Sg5::empty(gi, g.weight, g.capacity) };
        let only_allowed = self.feat.sg_wakeup_allowed;
        let p_cpu = (self.se[p].on_rq).then_some(sys.tasks[p].cpu);
        let avg = &self.se[p].avg;
        for i in g.span_runs.iter().flat_map(|run| run.clone()).filter(|&i| !only_allowed || sys.tasks[p].can_run_on(i)) {
            #[cfg(debug_assertions)]
            self.debug_check_scan_row(sys, i);
            let row = self.scan.row(i);
            let local = p_cpu == Some(i);
            let without = |v: u64, mine: u64| if local { v.saturating_sub(mine) } else { v };
            s.group_load += without(row.load_avg, p_h_load);
            s.group_util += if local { self.cpu_util_without(i, p) } else { row.util };
            s.group_runnable += without(row.runnable_avg, avg.runnable_load_avg);
            let nr = u64::from(row.h_nr_running) - u64::from(local);
            s.sum_nr_running += nr;
            s.sum_h_nr_running += u64::from(row.nr_runnable) - u64::from(local);
            // idle_cpu_without(): idle_cpu(), or only p running here.
            let idle = if local { sys.curr(i) == Some(p) } else { sys.cpu_idle(i) && row.h_nr_running == 0 };
            if nr == 0 && idle {
                s.idle_cpus += 1;
            }
        }
        // group_weight stays the whole group's (`sgs->group_weight =
        // group->group_weight`), whichever CPUs the loop counted.
        s.classified_for_wakeup(pct)
    }

    /// `update_pick_idlest()` (v5.10 L8746): should `sg` replace `idlest`?
    fn pick_idlest5(sg: &Sg5, idlest: Option<&Sg5>) -> bool {
        let Some(b) = idlest else { return true };
        if sg.group_type != b.group_type {
            return sg.group_type < b.group_type;
        }
        match sg.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => sg.avg_load < b.avg_load,
            // Not used in the slow wakeup path (never classified there).
            GroupType::Imbalanced | GroupType::SmtBalance => false,
            GroupType::HasSpare => sg.idle_cpus > b.idle_cpus || (sg.idle_cpus == b.idle_cpus && sg.group_util < b.group_util),
        }
    }

    /// `find_idlest_group()` (v5.10 L8767; v5.15 L9020): the index of the group of
    /// domain `sd_idx` of `this_cpu` to send forking `p` to, or None to stay local.
    pub fn find_idlest_group_v5(&mut self, sys: &mut System, sd_idx: usize, p: TaskId, this_cpu: usize) -> Option<usize> {
        let sd = &self.doms[this_cpu].domains[sd_idx];
        let pct = sd.imbalance_pct as u64;
        let (sd_flags, span_weight, imb_numa_nr) = (sd.flags, sd.span_weight as u64, sd.imb_numa_nr);
        // The allowed load gap: a nice-0 task's load × (imbalance_pct − 100) / 100.
        let imbalance = SCALE * (pct - 100) / 100;
        let mut local: Option<Sg5> = None;
        let mut idlest: Option<(usize, Sg5)> = None;
        let mut scanned = 0u64;
        self.scan_rows_refresh(sys);
        let p_h_load = if self.se[p].on_rq {
            let jiffies = self.jiffies(sys.now_ns);
            self.task_h_load(p, jiffies)
        } else {
            0
        };
        for (gi, g) in self.doms[this_cpu].domains[sd_idx].groups.iter().enumerate() {
            if !g.span.iter().any(|c| sys.tasks[p].can_run_on(c)) {
                continue;
            }
            scanned += g.weight;
            let s = self.sg_wakeup_stats5(sys, gi, g, pct, p, p_h_load);
            if g.span.contains(this_cpu) {
                local = Some(s);
            } else if Self::pick_idlest5(&s, idlest.as_ref().map(|(_, s)| s)) {
                idlest = Some((gi, s));
            }
        }
        sys.charge_search(this_cpu, scanned, 0, 0);
        let (gi, idlest) = idlest?;
        let Some(local) = local else { return Some(gi) };
        if local.group_type != idlest.group_type {
            return (local.group_type > idlest.group_type).then_some(gi);
        }
        match local.group_type {
            GroupType::Overloaded | GroupType::FullyBusy => {
                // Across nodes, charge the remote side the imbalance and consider staying.
                if sd_flags & SD_NUMA != 0 && idlest.avg_load + imbalance >= local.avg_load {
                    return None;
                }
                if idlest.avg_load >= local.avg_load + imbalance {
                    return None;
                }
                if 100 * local.avg_load <= pct * idlest.avg_load {
                    return None;
                }
            }
            GroupType::Imbalanced | GroupType::SmtBalance => {}
            GroupType::HasSpare => {
                if sd_flags & SD_NUMA != 0 {
                    // Stay on this node, near the waker's memory, and let the periodic
                    // balancer spread if it must: v5.10 while the node has any idle CPU;
                    // NUMA_FORK_SPREAD (v5.11) only while under a quarter of the
                    // domain's CPUs run tasks; v5.18+ while the node would run at
                    // most `imb_numa_nr` tasks and the idle CPUs differ by at most 2.
                    let stay = if self.version >= KernelVersion::V6_6 {
                        let imbalance = local.idle_cpus.abs_diff(idlest.idle_cpus);
                        adjust_numa_imbalance_v518(imbalance, local.sum_nr_running + 1, imb_numa_nr) == 0
                    } else if self.feat.numa_fork_spread {
                        allow_numa_imbalance(local.sum_nr_running, span_weight)
                    } else {
                        local.idle_cpus > 0
                    };
                    if stay {
                        return None;
                    }
                }
                // The group with the most idle CPUs.
                if local.idle_cpus >= idlest.idle_cpus {
                    return None;
                }
            }
        }
        Some(gi)
    }

    /// True for the versions whose balancer is this file's.
    pub fn reworked_balancer(&self) -> bool {
        !self.version.pre_rework()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group's stats with what the v6.6+ rules read.
    fn sg(nr: u64, idle_cpus: u64, cores: u64, smt: bool) -> Sg5 {
        Sg5 {
            sum_nr_running: nr,
            sum_h_nr_running: nr,
            idle_cpus,
            cores,
            flags: if smt { SD_SHARE_CPUCAPACITY } else { 0 },
            ..Sg5::empty(0, 2 * cores, 1024 * 2 * cores)
        }
    }

    #[test]
    fn sibling_imbalance_evens_out_tasks_per_core_from_an_idle_cpu() {
        // Equal cores: the task difference, nothing from a busy CPU.
        assert_eq!(sibling_imbalance(IdleType::NewlyIdle, &sg(5, 0, 4, false), &sg(2, 2, 4, false)), 3);
        assert_eq!(sibling_imbalance(IdleType::NotIdle, &sg(5, 0, 4, false), &sg(2, 2, 4, false)), 0);
        assert_eq!(sibling_imbalance(IdleType::Idle, &sg(1, 3, 4, false), &sg(3, 1, 4, false)), 0);
        // 4 cores with 6 tasks against 2 cores with 1: (2*6 - 4*1) = 8, (2*8 + 6) / 6 = 3.
        assert_eq!(sibling_imbalance(IdleType::Idle, &sg(6, 0, 4, false), &sg(1, 1, 2, false)), 3);
        // The v6.6-rc2 rounding fix: an empty local group pulls at least 2.
        assert_eq!(sibling_imbalance(IdleType::Idle, &sg(2, 2, 4, false), &sg(0, 1, 1, false)), 2);
    }

    #[test]
    fn v66_keeps_an_smt_group_as_busiest_on_a_tie() {
        let mut a = sg(2, 0, 1, true);
        let mut b = sg(2, 0, 1, true);
        a.group_type = GroupType::FullyBusy;
        b.group_type = GroupType::FullyBusy;
        // v5.x keeps the first of equal fully busy groups, v6.6+ too when the
        // first is an SMT core, and takes a later one otherwise.
        assert!(!Cfs::pick_busiest5(&b, Some(&a), false));
        assert!(!Cfs::pick_busiest5(&b, Some(&a), true));
        a.flags = 0;
        assert!(Cfs::pick_busiest5(&b, Some(&a), true));
        // An SMT core sharing its capacity outranks fully busy groups.
        b.group_type = GroupType::SmtBalance;
        assert!(Cfs::pick_busiest5(&b, Some(&a), true));
        assert_eq!(group_classify(117, &sg(2, 0, 1, true), true), GroupType::SmtBalance);
    }
}
