//! Wakeup and fork placement (fair.c, v4.19): `select_task_rq_fair()`,
//! `record_wakee()`/`wake_wide()`, `wake_affine()`, `select_idle_sibling()` with
//! its idle-core, SIS_PROP-bounded idle-CPU and SMT scans, and the fork slow path
//! `find_idlest_cpu()` → `find_idlest_group()` → `find_idlest_group_cpu()`.
//! Every CPU a search looks at is charged to the searching CPU as find time.

use schedlab_core::cpuset::WrapSearch;
use schedlab_core::sched::{CpuState, SelectReason, System, WakeFlags};
use schedlab_core::task::TaskId;

use super::domains::{KernelVersion, SD_BALANCE_EXEC, SD_BALANCE_FORK, SD_BALANCE_WAKE, SD_NUMA, SD_WAKE_AFFINE};
use super::state::Cfs;

/// `vcpu_pack_room()`'s utilisation bound: the CPU's utilisation with the task
/// added must stay below this per cent of its capacity (the hosts' text compares
/// `util * 100` with `capacity * 70`).
const VCPU_PACK_UTIL_PCT: u64 = 70;

impl Cfs {
    /// `available_idle_cpu()`: idle task running, nothing queued, no wakeup pending.
    pub fn available_idle_cpu(&self, sys: &System, cpu: usize) -> bool {
        self.idle_cpu(sys, cpu)
    }

    /// `cpus_share_cache()`.
    pub fn cpus_share_cache(&self, a: usize, b: usize) -> bool {
        self.llc_id(a) == self.llc_id(b)
    }

    /// `record_wakee()` (v4.19 L5529): the waker counts how often it switches wakee.
    fn record_wakee(&mut self, waker: TaskId, p: TaskId, jiffies: u64, hz: u64) {
        let w = &mut self.se[waker];
        if jiffies > w.wakee_flip_decay_ts + hz {
            w.wakee_flips >>= 1;
            w.wakee_flip_decay_ts = jiffies;
        }
        if w.last_wakee != Some(p) {
            w.last_wakee = Some(p);
            w.wakee_flips += 1;
        }
    }

    /// `wake_wide()` (v4.19 L5563): many-to-many wakers should not be pulled together.
    fn wake_wide(&self, waker: TaskId, p: TaskId, this_cpu: usize) -> bool {
        let mut master = self.se[waker].wakee_flips;
        let mut slave = self.se[p].wakee_flips;
        let factor = self.doms[this_cpu].sd_llc_size as u64;
        if master < slave {
            std::mem::swap(&mut master, &mut slave);
        }
        !(slave < factor || master < slave * factor)
    }

    /// `wake_affine_idle()` (v4.19 L5593; v5.15 L5907 adds the idle previous CPU).
    fn wake_affine_idle(&self, sys: &System, this_cpu: usize, prev_cpu: usize, sync: bool) -> Option<usize> {
        if self.available_idle_cpu(sys, this_cpu) && self.cpus_share_cache(this_cpu, prev_cpu) {
            return Some(if self.available_idle_cpu(sys, prev_cpu) { prev_cpu } else { this_cpu });
        }
        // v6.18 (L7350) leaves delayed tasks out of the count.
        if sync && self.h_nr_runnable(this_cpu) == 1 {
            return Some(this_cpu);
        }
        if self.version >= KernelVersion::V5_15 && self.available_idle_cpu(sys, prev_cpu) {
            return Some(prev_cpu);
        }
        None
    }

    /// The load `wake_affine_weight()` and `find_idlest_group_cpu()` compare:
    /// v4.19 the runnable load through the `wake_idx` index, v5.x `cpu_load()`.
    fn wake_load(&self, cpu: usize, idx: u32, target: bool) -> u64 {
        if self.reworked_balancer() {
            self.cpu_load(cpu)
        } else if target {
            self.target_load(cpu, idx)
        } else {
            self.source_load(cpu, idx)
        }
    }

    /// `wake_affine_weight()` (v4.19 L5619): pull to the waker if its CPU would
    /// still be less loaded than the previous one, with half the imbalance_pct bias.
    #[allow(clippy::too_many_arguments)]
    fn wake_affine_weight(
        &mut self,
        sd_idx: usize,
        p: TaskId,
        waker: Option<TaskId>,
        this_cpu: usize,
        prev_cpu: usize,
        sync: bool,
        jiffies: u64,
    ) -> Option<usize> {
        let sd = &self.doms[this_cpu].domains[sd_idx];
        let (wake_idx, imbalance_pct) = (sd.wake_idx, sd.imbalance_pct);
        let mut this_eff = self.wake_load(this_cpu, wake_idx, true) as i128;
        if sync {
            if let Some(w) = waker {
                let current_load = self.task_h_load(w, jiffies) as i128;
                if current_load > this_eff {
                    return Some(this_cpu);
                }
                this_eff -= current_load;
            }
        }
        let task_load = self.task_h_load(p, jiffies) as i128;
        this_eff += task_load;
        if self.feat.wa_bias {
            this_eff *= 100;
        }
        this_eff *= self.rq[prev_cpu].cpu_capacity as i128;
        let mut prev_eff = self.wake_load(prev_cpu, wake_idx, false) as i128 - task_load;
        if self.feat.wa_bias {
            prev_eff *= 100 + (imbalance_pct as i128 - 100) / 2;
        }
        prev_eff *= self.rq[this_cpu].cpu_capacity as i128;
        if sync {
            prev_eff += 1;
        }
        (this_eff < prev_eff).then_some(this_cpu)
    }

    /// The hosts' `vcpu_pack_room(p, cpu)` (HOST_VCPU_PACK): `cpu` can take `p`
    /// if `p` may run there, no wakeup is pending on it (`rq->ttwu_pending`: the
    /// model's kicked idle CPU), it runs nothing but fair tasks
    /// (`nr_running == cfs.h_nr_queued`: the stopper is the model's other
    /// class), at most one runnable fair task is there besides `p` itself, and
    /// its utilisation (`cpu_util()`, plus `p`'s if `p` is not on it) stays
    /// below VCPU_PACK_UTIL_PCT of its capacity, both utilisations with their
    /// util_est (`cpu_util()`, `task_util_est()`).
    fn vcpu_pack_room(&self, sys: &mut System, p: TaskId, cpu: usize, this_cpu: usize) -> bool {
        sys.charge_search(this_cpu, 1, 0, 0);
        let rq = &self.rq[cpu];
        if !sys.tasks[p].can_run_on(cpu) || sys.cpu_state(cpu) == CpuState::Kicked || rq.stopper.is_some() {
            return false;
        }
        let queued_here = usize::from(self.se[p].on_rq && sys.tasks[p].cpu == cpu);
        if self.h_nr_runnable(cpu) > 1 + queued_here {
            return false;
        }
        let mut util = self.cpu_util_est(cpu);
        if sys.tasks[p].cpu != cpu {
            util += self.task_util_est(p);
        }
        util * 100 < rq.cpu_capacity * VCPU_PACK_UTIL_PCT
    }

    /// HOST_VCPU_PACK: the hosts' placement ahead of upstream's in
    /// `select_task_rq_fair()` (vendor 6.18.44 with `sched_vcpu_pack=15`, all
    /// four of its bits on; a task allowed on one CPU only takes upstream's
    /// path). None: upstream places the task.
    fn vcpu_pack_select(
        &mut self,
        sys: &mut System,
        p: TaskId,
        prev_cpu: usize,
        this_cpu: usize,
        flags: WakeFlags,
    ) -> Option<usize> {
        if sys.tasks[p].nr_cpus_allowed(sys.ncpus()) == 1 {
            return None;
        }
        // Bit 0x8: a fork or exec onto this CPU if it has room.
        if flags.reason != SelectReason::Wakeup {
            return self.vcpu_pack_room(sys, p, this_cpu, this_cpu).then_some(this_cpu);
        }
        // Bit 0x1: a wakeup from an interrupt on an idle CPU (the waker is the
        // idle task) stays there when nothing is queued on it.
        if sys.curr(this_cpu).is_none()
            && self.rq[this_cpu].cfs.h_nr_running == 0
            && self.rq[this_cpu].stopper.is_none()
            && sys.tasks[p].can_run_on(this_cpu)
        {
            return Some(this_cpu);
        }
        // Bit 0x2: a sync wakeup onto the waker's CPU if it has room.
        if flags.sync && self.vcpu_pack_room(sys, p, this_cpu, this_cpu) {
            return Some(this_cpu);
        }
        // Bit 0x4: the busy previous CPU with room, the waker's with room, or
        // the first busy CPU with room.
        if !self.idle_cpu(sys, prev_cpu) && self.vcpu_pack_room(sys, p, prev_cpu, this_cpu) {
            return Some(prev_cpu);
        }
        if self.vcpu_pack_room(sys, p, this_cpu, this_cpu) {
            return Some(this_cpu);
        }
        (0..sys.ncpus())
            .find(|&cpu| sys.tasks[p].can_run_on(cpu) && !self.idle_cpu(sys, cpu) && self.vcpu_pack_room(sys, p, cpu, this_cpu))
    }

    /// `wake_affine()` (v4.19 L5655).
    #[allow(clippy::too_many_arguments)]
    fn wake_affine(
        &mut self,
        sys: &System,
        sd_idx: usize,
        p: TaskId,
        waker: Option<TaskId>,
        this_cpu: usize,
        prev_cpu: usize,
        sync: bool,
    ) -> usize {
        let mut target = None;
        if self.feat.wa_idle {
            target = self.wake_affine_idle(sys, this_cpu, prev_cpu, sync);
        }
        if self.feat.wa_weight && target.is_none() {
            let jiffies = self.jiffies(sys.now_ns);
            target = self.wake_affine_weight(sd_idx, p, waker, this_cpu, prev_cpu, sync, jiffies);
        }
        target.unwrap_or(prev_cpu)
    }

    /// `select_task_rq_fair()` (v4.19 L6309). A fork or an exec takes the slow
    /// path through the highest domain that balances it (every level but the
    /// distant NUMA ones), or stays; only a wakeup may be affine or take the fast
    /// path (`sd_flag & SD_BALANCE_WAKE`, v5.10+ `wake_flags & WF_TTWU`).
    pub fn select_task_rq_fair(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, cpu: usize, flags: WakeFlags) -> usize {
        let (sd_flag, wakeup) = match flags.reason {
            SelectReason::Wakeup => (SD_BALANCE_WAKE, true),
            SelectReason::Fork => (SD_BALANCE_FORK, false),
            SelectReason::Exec => (SD_BALANCE_EXEC, false),
        };
        // The hosts' placement comes first, before record_wakee().
        if self.feat.host_vcpu_pack {
            if let Some(target) = self.vcpu_pack_select(sys, p, prev_cpu, cpu, flags) {
                return target;
            }
        }
        let waker = sys.curr(cpu);
        let mut want_affine = false;
        if wakeup {
            if let Some(w) = waker {
                let j = self.jiffies(sys.now_ns);
                let hz = 1_000_000_000 / self.tick_ns;
                self.record_wakee(w, p, j, hz);
                want_affine = !self.wake_wide(w, p, cpu) && sys.tasks[p].can_run_on(cpu);
            } else {
                want_affine = sys.tasks[p].can_run_on(cpu);
            }
        }
        let mut new_cpu = prev_cpu;
        let mut sd: Option<usize> = None;
        for (i, d) in self.doms[cpu].domains.iter().enumerate() {
            if !self.sd_balances(d.flags) {
                break;
            }
            if want_affine && d.flags & SD_WAKE_AFFINE != 0 && d.span.contains(prev_cpu) {
                if cpu != prev_cpu {
                    new_cpu = self.wake_affine(sys, i, p, waker, cpu, prev_cpu, flags.sync);
                }
                sd = None;
                break;
            }
            if d.flags & sd_flag != 0 {
                sd = Some(i);
            } else if !want_affine {
                break;
            }
        }
        if let Some(sd) = sd {
            return self.find_idlest_cpu(sys, sd, p, cpu, prev_cpu, sd_flag);
        }
        if wakeup {
            if self.version >= KernelVersion::V5_15 {
                return self.select_idle_sibling_v515(sys, p, prev_cpu, new_cpu, cpu);
            }
            new_cpu = self.select_idle_sibling(sys, p, prev_cpu, new_cpu, cpu);
            if want_affine {
                if let Some(w) = waker {
                    self.se[w].recent_used_cpu = cpu;
                }
            }
        }
        new_cpu
    }

    /// The first two checks of `select_idle_sibling()` in every version: `target`
    /// if idle, else `prev` if idle and sharing its cache.
    fn idle_target_or_prev(&self, sys: &mut System, prev: usize, target: usize, this_cpu: usize) -> Option<usize> {
        sys.charge_search(this_cpu, 1, 0, 0);
        if self.available_idle_cpu(sys, target) {
            return Some(target);
        }
        if prev != target && self.cpus_share_cache(prev, target) {
            sys.charge_search(this_cpu, 1, 0, 0);
            if self.available_idle_cpu(sys, prev) {
                return Some(prev);
            }
        }
        None
    }

    /// `select_idle_sibling()` (v4.19 L6116): the first idle CPU near `target`.
    fn select_idle_sibling(&mut self, sys: &mut System, p: TaskId, prev: usize, target: usize, this_cpu: usize) -> usize {
        if let Some(cpu) = self.idle_target_or_prev(sys, prev, target, this_cpu) {
            return cpu;
        }
        let recent = self.se[p].recent_used_cpu;
        if recent != prev && recent != target && self.cpus_share_cache(recent, target) {
            sys.charge_search(this_cpu, 1, 0, 0);
            if self.available_idle_cpu(sys, recent) && sys.tasks[p].can_run_on(recent) {
                self.se[p].recent_used_cpu = prev;
                return recent;
            }
        }
        let Some(llc) = self.doms[target].sd_llc else { return target };
        if let Some(i) = self.select_idle_core(sys, p, target, llc, this_cpu) {
            return i;
        }
        if let Some(i) = self.select_idle_cpu(sys, p, target, llc, this_cpu) {
            return i;
        }
        if let Some(i) = self.select_idle_smt(sys, p, target, this_cpu) {
            return i;
        }
        target
    }

    /// `select_idle_sibling()` of v5.15 (L6400): as v4.19 up to the LLC scan, with
    /// `recent_used_cpu` kept by the wakee (set to `prev` on every wakeup); then, on
    /// SMT machines without an idle core, an idle sibling of `prev`; then one pass
    /// of `select_idle_cpu()` that looks for an idle core when one is expected and
    /// for any idle CPU otherwise (Gorman's "scan for an idle sibling in a single
    /// pass", v5.12; van Riel's select_idle_smt on prev, v5.14).
    fn select_idle_sibling_v515(&mut self, sys: &mut System, p: TaskId, prev: usize, target: usize, this_cpu: usize) -> usize {
        if let Some(cpu) = self.idle_target_or_prev(sys, prev, target, this_cpu) {
            return cpu;
        }
        let recent = self.se[p].recent_used_cpu;
        self.se[p].recent_used_cpu = prev;
        if recent != prev && recent != target && self.cpus_share_cache(recent, target) {
            sys.charge_search(this_cpu, 1, 0, 0);
            // v5.15 tests the allowed mask against the field it just overwrote (prev).
            if self.available_idle_cpu(sys, recent) && sys.tasks[p].can_run_on(prev) {
                return recent;
            }
        }
        let Some(llc) = self.doms[target].sd_llc else { return target };
        let mut has_idle_core = false;
        if sys.topo.smt_weight(target) > 1 {
            has_idle_core = self.has_idle_cores[self.llc_id(target)];
            if !has_idle_core && self.cpus_share_cache(prev, target) {
                sys.charge_search(this_cpu, sys.topo.smt_weight(prev) as u64, 0, 0);
                let span = &self.doms[target].domains[llc].span;
                let found = sys
                    .topo
                    .smt_siblings(prev)
                    .iter()
                    .find(|&c| span.contains(c) && sys.tasks[p].can_run_on(c) && self.available_idle_cpu(sys, c));
                if let Some(c) = found {
                    return c;
                }
            }
        }
        self.select_idle_cpu_v515(sys, p, target, llc, this_cpu, has_idle_core).unwrap_or(target)
    }

    /// `select_idle_cpu()` of v5.15 (L6279) with `select_idle_core()` (L6207): one
    /// wrap-order pass from `target + 1`. Expecting an idle core, it wants a core
    /// whose threads are all idle (remembering the first idle CPU as fallback, no
    /// bound) and clears the hint if none is found; otherwise SIS_PROP bounds the
    /// scan by this CPU's aged `wake_avg_idle` over the LLC's average scan cost.
    fn select_idle_cpu_v515(
        &mut self,
        sys: &mut System,
        p: TaskId,
        target: usize,
        llc: usize,
        this_cpu: usize,
        has_idle_core: bool,
    ) -> Option<usize> {
        let this_llc = self.llc_id(this_cpu);
        let mut nr = u64::MAX;
        if self.version.eevdf() && self.feat.sis_util {
            // SIS_UTIL (v6.0+, `select_idle_cpu()` v6.12 L7720): at most
            // nr_idle_scan CPUs; none at all when it is 0, idle core expected or not.
            nr = self.nr_idle_scan[self.llc_id(target)] + 1;
            if nr == 1 {
                return None;
            }
        }
        if self.feat.sis_prop && !has_idle_core {
            let now_j = self.jiffies(sys.now_ns);
            let rq = &mut self.rq[this_cpu];
            while rq.wake_stamp < now_j && rq.wake_avg_idle_ns > 0 {
                rq.wake_stamp += 1;
                rq.wake_avg_idle_ns >>= 1;
            }
            let avg_cost = self.avg_scan_cost_ns[this_llc] + 1;
            let span_avg = self.doms[target].domains[llc].span_weight as u64 * self.rq[this_cpu].wake_avg_idle_ns;
            nr = if span_avg > 4 * avg_cost { span_avg / avg_cost } else { 4 };
        }
        let span = &self.doms[target].domains[llc].span;
        // The kernel's copy of the span, from which select_idle_core() clears
        // each core's threads as it goes; kept between calls, so it allocates
        // once.
        let mut cpus = std::mem::take(&mut self.sis_cpus);
        if has_idle_core {
            cpus.copy_from(span);
        }
        let (mut idle_cpu, mut idle_core, mut out_of_budget) = (None, None, false);
        let mut scanned = 0u64;
        let start = (target + 1) % sys.ncpus();
        if has_idle_core {
            for cpu in span.iter_wrap(start) {
                if !cpus.contains(cpu) || !sys.tasks[p].can_run_on(cpu) {
                    continue;
                }
                // select_idle_core(): every thread of this core idle?
                let mut idle = true;
                let sibs = sys.topo.smt_siblings(cpu);
                for c in sibs.iter() {
                    cpus.clear(c);
                }
                for c in sibs.iter() {
                    scanned += 1;
                    if !self.available_idle_cpu(sys, c) {
                        idle = false;
                        // Keep looking at this core's threads for a fallback idle
                        // CPU until one is known (v5.15 L6200).
                        if idle_cpu.is_none() {
                            continue;
                        }
                        break;
                    }
                    if idle_cpu.is_none() && sys.tasks[p].can_run_on(c) {
                        idle_cpu = Some(c);
                    }
                }
                if idle {
                    idle_core = Some(cpu);
                    break;
                }
            }
        } else {
            // The loop's `--nr <= 0` budget over the allowed CPUs of the span, each
            // looked at with available_idle_cpu(); only CPUs in the idle mask can
            // pass it, so the search goes a word of CPUs at a time and calls it
            // for those alone.
            let allowed = sys.tasks[p].allowed.as_ref();
            let search = span.wrap_search(start, allowed, sys.idle_mask(), nr - 1, |c| self.available_idle_cpu(sys, c));
            // Debug builds: the loop it replaces, CPU by CPU over every CPU of the
            // span, finds the same (the idle mask holds every CPU that can pass).
            debug_assert_eq!(
                search,
                span.wrap_search_each(start, allowed, span, nr - 1, |c| self.available_idle_cpu(sys, c)),
                "select_idle_cpu()'s search"
            );
            match search {
                WrapSearch::Found { cpu, looked } => {
                    idle_cpu = Some(cpu);
                    scanned = looked;
                }
                WrapSearch::OutOfBudget => {
                    out_of_budget = true;
                    scanned = nr - 1;
                }
                WrapSearch::Exhausted { looked } => scanned = looked,
            }
        }
        self.sis_cpus = cpus;
        sys.charge_search(this_cpu, scanned, 0, 0);
        // A whole idle core, or out of budget: neither updates the hints.
        if idle_core.is_some() || out_of_budget {
            return idle_core;
        }
        if has_idle_core {
            let id = self.llc_id(target);
            self.has_idle_cores[id] = false;
        } else if self.feat.sis_prop {
            let time = scanned * sys.cost.sched_ops.per_cpu_scanned_ns;
            let rq = &mut self.rq[this_cpu];
            rq.wake_avg_idle_ns -= rq.wake_avg_idle_ns.min(time);
            let cost = self.avg_scan_cost_ns[this_llc] as i64;
            self.avg_scan_cost_ns[this_llc] = (cost + (time as i64 - cost) / 8).max(0) as u64;
        }
        idle_cpu
    }

    /// `select_idle_core()` (v4.19 L5997): a core whose threads are all idle, if the
    /// LLC hints that one exists; clears the hint when the scan finds none.
    fn select_idle_core(&mut self, sys: &mut System, p: TaskId, target: usize, llc: usize, this_cpu: usize) -> Option<usize> {
        if sys.topo.smt_weight(target) < 2 {
            return None;
        }
        let id = self.llc_id(target);
        if !self.has_idle_cores[id] {
            return None;
        }
        // The kernel clears each core's siblings from a copy of the span as it goes,
        // so every core is looked at once, starting from the target, wrapping.
        let mut cpus = self.doms[target].domains[llc].span.clone();
        let mut scanned = 0;
        for core in self.doms[target].domains[llc].span.iter_wrap(target) {
            if !cpus.contains(core) || !sys.tasks[p].can_run_on(core) {
                continue;
            }
            let mut idle = true;
            for cpu in sys.topo.smt_siblings(core).iter() {
                cpus.clear(cpu);
                scanned += 1;
                idle &= self.available_idle_cpu(sys, cpu);
            }
            if idle {
                sys.charge_search(this_cpu, scanned, 0, 0);
                return Some(core);
            }
        }
        sys.charge_search(this_cpu, scanned, 0, 0);
        self.has_idle_cores[id] = false;
        None
    }

    /// `select_idle_cpu()` (v4.19 L6064): scan the LLC from `target` for an idle
    /// CPU, at most `nr` − 1 of them under SIS_PROP, where nr grows with this CPU's
    /// expected idle time over the LLC's average scan cost.
    fn select_idle_cpu(&mut self, sys: &mut System, p: TaskId, target: usize, llc: usize, this_cpu: usize) -> Option<usize> {
        let this_llc = self.llc_id(this_cpu);
        let avg_idle = self.rq[this_cpu].avg_idle_ns / 512;
        let avg_cost = self.avg_scan_cost_ns[this_llc] + 1;
        if self.feat.sis_avg_cpu && avg_idle < avg_cost {
            return None;
        }
        let sd = &self.doms[target].domains[llc];
        let span = &sd.span;
        debug_assert_eq!(sd.span_weight, span.count());
        let mut nr = u64::MAX;
        if self.feat.sis_prop {
            let span_avg = sd.span_weight as u64 * avg_idle;
            nr = if span_avg > 4 * avg_cost { span_avg / avg_cost } else { 4 };
        }
        let per_cpu = sys.cost.sched_ops.per_cpu_scanned_ns;
        let mut scanned = 0u64;
        let mut found = None;
        for c in span.iter_wrap(target) {
            nr -= 1;
            if nr == 0 {
                // Out of budget: give up without updating the scan cost.
                sys.charge_search(this_cpu, scanned, 0, 0);
                return None;
            }
            scanned += 1;
            if sys.tasks[p].can_run_on(c) && self.available_idle_cpu(sys, c) {
                found = Some(c);
                break;
            }
        }
        sys.charge_search(this_cpu, scanned, 0, 0);
        // avg_scan_cost += (time − avg_scan_cost) / 8, in signed arithmetic.
        let time = (scanned * per_cpu) as i64;
        let cost = self.avg_scan_cost_ns[this_llc] as i64;
        self.avg_scan_cost_ns[this_llc] = (cost + (time - cost) / 8).max(0) as u64;
        found
    }

    /// `select_idle_smt()` (v4.19 L6041): any idle thread of the target's core.
    fn select_idle_smt(&mut self, sys: &mut System, p: TaskId, target: usize, this_cpu: usize) -> Option<usize> {
        let threads = sys.topo.smt_weight(target);
        if threads < 2 {
            return None;
        }
        sys.charge_search(this_cpu, threads as u64, 0, 0);
        let found = sys.topo.smt_siblings(target).iter().find(|&c| sys.tasks[p].can_run_on(c) && self.available_idle_cpu(sys, c));
        found
    }

    /// `__update_idle_core()` (v4.19 L5976): when a CPU goes idle and its whole core
    /// is idle, tell the LLC an idle core exists.
    pub fn update_idle_core(&mut self, sys: &System, cpu: usize) {
        if sys.topo.smt_weight(cpu) < 2 {
            return;
        }
        let sibs = sys.topo.smt_siblings(cpu);
        if sibs.iter().all(|c| c == cpu || self.available_idle_cpu(sys, c)) {
            let id = self.llc_id(cpu);
            self.has_idle_cores[id] = true;
        }
    }

    /// `find_idlest_cpu()` (v4.19 L5881): descend from `sd` through idlest groups.
    fn find_idlest_cpu(&mut self, sys: &mut System, sd: usize, p: TaskId, cpu: usize, prev_cpu: usize, sd_flag: u32) -> usize {
        let mut cpu = cpu;
        let mut level = Some(sd);
        let mut new_cpu = cpu;
        let any_allowed = self.doms[cpu].domains[sd].span.iter().any(|c| sys.tasks[p].can_run_on(c));
        if !any_allowed {
            return prev_cpu;
        }
        while let Some(l) = level {
            let d = &self.doms[cpu].domains[l];
            if d.flags & sd_flag == 0 {
                level = l.checked_sub(1);
                continue;
            }
            let group = if self.reworked_balancer() {
                self.find_idlest_group_v5(sys, l, p, cpu).map(|g| self.doms[cpu].domains[l].groups[g].span.as_ref().clone())
            } else if self.version == KernelVersion::V3_0 {
                self.find_idlest_group_v30(sys, cpu, l, p, sd_flag)
            } else {
                self.find_idlest_group(sys, cpu, l, p, sd_flag)
            };
            let Some(group) = group else {
                level = l.checked_sub(1);
                continue;
            };
            new_cpu = self.find_idlest_group_cpu(sys, &group, p, cpu);
            if new_cpu == cpu {
                level = l.checked_sub(1);
                continue;
            }
            let weight = self.doms[cpu].domains[l].span_weight;
            cpu = new_cpu;
            level = None;
            for (i, tmp) in self.doms[cpu].domains.iter().enumerate() {
                if weight <= tmp.span_weight {
                    break;
                }
                if tmp.flags & sd_flag != 0 {
                    level = Some(i);
                }
            }
        }
        new_cpu
    }

    /// `find_idlest_group()` (v4.19 L5689).
    fn find_idlest_group(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        l: usize,
        p: TaskId,
        sd_flag: u32,
    ) -> Option<schedlab_core::cpuset::CpuSet> {
        let sd = &self.doms[this_cpu].domains[l];
        let load_idx = if sd_flag & SD_BALANCE_WAKE != 0 { sd.wake_idx } else { sd.forkexec_idx };
        let pct = sd.imbalance_pct as u64;
        let imbalance_scale = 100 + (pct - 100) / 2;
        let imbalance = 1024 * (pct - 100) / 100;
        let numa = sd.flags & SD_NUMA != 0;
        let groups: Vec<(std::sync::Arc<schedlab_core::cpuset::CpuSet>, u64)> =
            sd.groups.iter().map(|g| (g.span.clone(), g.capacity)).collect();
        let (mut idlest, mut most_spare_sg) = (None, None);
        let (mut min_runnable, mut this_runnable) = (u64::MAX, u64::MAX);
        let (mut min_avg, mut this_avg) = (u64::MAX, u64::MAX);
        let (mut most_spare, mut this_spare) = (0u64, 0u64);
        let mut scanned = 0;
        for (span, capacity) in groups {
            if !span.iter().any(|c| sys.tasks[p].can_run_on(c)) {
                continue;
            }
            let local = span.contains(this_cpu);
            let (mut avg_load, mut runnable_load, mut max_spare) = (0u64, 0u64, 0u64);
            // Every CPU of the group, allowed or not (`for_each_cpu()` over the
            // span); only the group itself must hold an allowed one.
            for i in span.iter() {
                scanned += 1;
                // Bias toward the local group: its CPUs at their low estimate.
                runnable_load += if local { self.source_load(i, load_idx) } else { self.target_load(i, load_idx) };
                avg_load += self.rq[i].cfs.avg.load_avg;
                // capacity_spare_wake(): the CPU's spare capacity without p's own
                // utilization where p is queued (an exec'ing task on its CPU;
                // `cpu_util_wake()`).
                let util = if self.se[p].on_rq && sys.tasks[p].cpu == i { self.cpu_util_without(i, p) } else { self.cpu_util(i) };
                let spare = self.rq[i].cpu_capacity.saturating_sub(util);
                max_spare = max_spare.max(spare);
            }
            let capacity = capacity.max(1);
            avg_load = avg_load * 1024 / capacity;
            runnable_load = runnable_load * 1024 / capacity;
            if local {
                this_runnable = runnable_load;
                this_avg = avg_load;
                this_spare = max_spare;
            } else {
                if runnable_load < min_runnable.saturating_sub(imbalance) {
                    min_runnable = runnable_load;
                    min_avg = avg_load;
                    idlest = Some(span.clone());
                } else if runnable_load < min_runnable.saturating_add(imbalance)
                    && 100 * min_avg as u128 > (imbalance_scale * avg_load) as u128
                {
                    min_avg = avg_load;
                    idlest = Some(span.clone());
                }
                if most_spare < max_spare {
                    most_spare = max_spare;
                    most_spare_sg = Some(span.clone());
                }
            }
        }
        let this = sys.this_cpu();
        sys.charge_search(this, scanned, 0, 0);
        if sd_flag != SD_BALANCE_FORK {
            let task_util = self.se[p].avg.util_avg;
            if this_spare > task_util / 2 && imbalance_scale * this_spare > 100 * most_spare {
                return None;
            }
            if most_spare > task_util / 2 {
                return most_spare_sg.map(|s| s.as_ref().clone());
            }
        }
        idlest.as_ref()?;
        if numa && min_runnable.saturating_add(imbalance) >= this_runnable {
            return None;
        }
        if min_runnable > this_runnable.saturating_add(imbalance) {
            return None;
        }
        if this_runnable < min_runnable.saturating_add(imbalance)
            && 100 * (this_avg as u128) < (imbalance_scale as u128) * (min_avg as u128)
        {
            return None;
        }
        idlest.map(|s| s.as_ref().clone())
    }

    /// `find_idlest_group()` (v3.0 sched_fair.c L1569): the remote group with the
    /// least load per power (remote CPUs counted high, local ones low, the
    /// opposite of the balancer's bias), unless the local group is within half
    /// the imbalance percentage of it.
    fn find_idlest_group_v30(
        &mut self,
        sys: &mut System,
        this_cpu: usize,
        l: usize,
        p: TaskId,
        sd_flag: u32,
    ) -> Option<schedlab_core::cpuset::CpuSet> {
        let sd = &self.doms[this_cpu].domains[l];
        let load_idx = if sd_flag & SD_BALANCE_WAKE != 0 { sd.wake_idx } else { sd.forkexec_idx };
        let imbalance = 100 + (sd.imbalance_pct as u64 - 100) / 2;
        let groups: Vec<(std::sync::Arc<schedlab_core::cpuset::CpuSet>, u64)> =
            sd.groups.iter().map(|g| (g.span.clone(), g.capacity)).collect();
        let (mut idlest, mut min_load, mut this_load) = (None, u64::MAX, 0u64);
        let mut scanned = 0;
        for (span, power) in groups {
            if !span.iter().any(|c| sys.tasks[p].can_run_on(c)) {
                continue;
            }
            let local = span.contains(this_cpu);
            let mut avg_load = 0u64;
            for i in span.iter() {
                scanned += 1;
                avg_load += if local { self.source_load(i, load_idx) } else { self.target_load(i, load_idx) };
            }
            avg_load = avg_load * 1024 / power.max(1);
            if local {
                this_load = avg_load;
            } else if avg_load < min_load {
                min_load = avg_load;
                idlest = Some(span);
            }
        }
        let this = sys.this_cpu();
        sys.charge_search(this, scanned, 0, 0);
        if idlest.is_none() || (100 * this_load as u128) < (imbalance as u128 * min_load as u128) {
            return None;
        }
        idlest.map(|s| s.as_ref().clone())
    }

    /// `find_idlest_group_cpu()` (v4.19 L5832): the most recently idled idle CPU
    /// (all idle states here exit alike), else the least loaded. v3.0's
    /// `find_idlest_cpu()` (L1615) takes the least `weighted_cpuload()`, this CPU
    /// on ties.
    fn find_idlest_group_cpu(
        &mut self,
        sys: &mut System,
        group: &schedlab_core::cpuset::CpuSet,
        p: TaskId,
        this_cpu: usize,
    ) -> usize {
        if group.count() == 1 {
            return group.iter().next().expect("one CPU");
        }
        if self.version == KernelVersion::V3_0 {
            let mut best: Option<(usize, u64)> = None;
            for i in group.iter().filter(|&c| sys.tasks[p].can_run_on(c)) {
                let load = self.weighted_cpuload(i);
                if best.is_none_or(|(_, l)| load < l || (load == l && i == this_cpu)) {
                    best = Some((i, load));
                }
            }
            let this = sys.this_cpu();
            sys.charge_search(this, group.count() as u64, 0, 0);
            return best.map_or(this_cpu, |(c, _)| c);
        }
        let mut shallowest: Option<(usize, u64)> = None;
        let mut least: Option<(usize, u64)> = None;
        let mut scanned = 0;
        for i in group.iter().filter(|&c| sys.tasks[p].can_run_on(c)) {
            scanned += 1;
            if self.available_idle_cpu(sys, i) {
                let stamp = self.rq[i].idle_stamp_ns.unwrap_or(0);
                if shallowest.is_none_or(|(_, s)| stamp > s) {
                    shallowest = Some((i, stamp));
                }
            } else if shallowest.is_none() {
                let load = self.wake_load(i, 0, false);
                if least.is_none_or(|(_, l)| load < l || (load == l && i == this_cpu)) {
                    least = Some((i, load));
                }
            }
        }
        let this = sys.this_cpu();
        sys.charge_search(this, scanned, 0, 0);
        shallowest.or(least).map_or(this_cpu, |(c, _)| c)
    }
}
