//! The runqueue fields the balancer's group scans read, one array per field,
//! and their running sums per group.
//!
//! `update_sg_lb_stats()` visits every CPU of every group of the domain being
//! balanced: from v5.16 newly idle balancing runs whenever the CPU's average
//! idle time exceeds the domain's measured cost, so on a thousand-CPU machine the
//! simulator would walk tens of millions of runqueues a simulated second. The
//! sums it takes (loads, utilisation, runnable tasks, overloaded and idle CPUs)
//! are kept here per group span instead, and moved by each CPU's change: a
//! scan reads a group in one step whatever its size. The simulator charges the
//! kernel's walk all the same (`balance_cost()` per CPU scanned); this is the
//! simulator's own bookkeeping, not a kernel structure, and its sums are those
//! of the runqueues themselves (debug builds add up every group's rows at
//! every scan and check each row against its runqueue).
//!
//! Rows go stale when a root cfs_rq changes (`Cfs::cfs_mut()` for the root,
//! through which every PELT update, enqueue and dequeue goes, and the
//! delayed-task count mark the CPU) or when the CPU goes idle or busy (the
//! engine's list of state changes); `Cfs::scan_rows_refresh()` (balance.rs)
//! rewrites the marked rows, and the sums of every group holding them, before a
//! scan.

use super::domains::{CpuDomains, SchedGroup};

/// One CPU's scanned fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanRow {
    /// `cpu_load()`: the root cfs_rq's `load_avg`.
    pub load_avg: u64,
    /// `cpu_util()`: `util_avg` capped at the CPU's capacity.
    pub util: u64,
    /// `cpu_runnable()`.
    pub runnable_avg: u64,
    /// `cfs.h_nr_running` (`idle_cpu()` needs it whatever the release counts).
    pub h_nr_running: u32,
    /// What the balancer counts: `h_nr_runnable()` of the release.
    pub nr_runnable: u32,
    /// `idle_cpu()` as the scan asks it: nothing queued at all, delayed tasks
    /// included, and the CPU idle (and not kicked).
    pub idle: bool,
}

/// What `update_sg_lb_stats()` adds up over a group's CPUs. One cache line each
/// (56 bytes of sums, aligned to 64): a balance pass reads one group's sums per
/// group it scans, and an unaligned array puts half of them across two lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(align(64))]
pub struct GroupSums {
    pub load_avg: u64,
    pub util: u64,
    pub runnable_avg: u64,
    pub nr_runnable: u64,
    /// Σ `rq->nr_running`: delayed tasks included in every release.
    pub nr_running: u64,
    /// CPUs with more than one task (`rq->nr_running > 1`, delayed tasks
    /// included): the root domain's overload flag.
    pub overloaded_cpus: u64,
    pub idle_cpus: u64,
}

impl GroupSums {
    /// Counts a row in.
    pub fn add(&mut self, row: &ScanRow) {
        self.load_avg += row.load_avg;
        self.util += row.util;
        self.runnable_avg += row.runnable_avg;
        self.nr_runnable += u64::from(row.nr_runnable);
        self.nr_running += u64::from(row.h_nr_running);
        self.overloaded_cpus += u64::from(row.h_nr_running > 1);
        self.idle_cpus += u64::from(row.idle);
    }

    /// Takes out a row added before (so nothing goes below zero).
    fn sub(&mut self, row: &ScanRow) {
        self.load_avg -= row.load_avg;
        self.util -= row.util;
        self.runnable_avg -= row.runnable_avg;
        self.nr_runnable -= u64::from(row.nr_runnable);
        self.nr_running -= u64::from(row.h_nr_running);
        self.overloaded_cpus -= u64::from(row.h_nr_running > 1);
        self.idle_cpus -= u64::from(row.idle);
    }
}

/// The rows, one array per field, which of them are stale, and the sums per
/// group span.
#[derive(Clone, Debug, Default)]
pub struct ScanRows {
    pub load_avg: Vec<u64>,
    pub util: Vec<u64>,
    pub runnable_avg: Vec<u64>,
    pub h_nr_running: Vec<u32>,
    pub nr_runnable: Vec<u32>,
    pub idle: Vec<bool>,
    stale: Vec<bool>,
    /// The CPUs marked stale since the last refresh, each once.
    stale_list: Vec<usize>,
    /// Per group span (`SchedGroupData::span_id`): the sums of its rows.
    sums: Vec<GroupSums>,
    /// Per CPU: the spans holding it, `span_of[span_start[cpu]..span_start[cpu + 1]]`.
    span_start: Vec<usize>,
    span_of: Vec<usize>,
}

impl ScanRows {
    /// Rows for the CPUs of `doms`, all stale and counted nowhere yet, with a
    /// sum for every group span their domains list.
    pub fn new(doms: &[CpuDomains]) -> ScanRows {
        let ncpus = doms.len();
        let groups = || doms.iter().flat_map(|d| d.domains.iter().flat_map(|sd| sd.groups.iter()));
        let nspans = groups().map(|g| g.span_id + 1).max().unwrap_or(0);
        // Each span's CPUs once, however many CPUs list a group of that span.
        let mut seen = vec![false; nspans];
        let mut spans_of_cpu: Vec<Vec<usize>> = vec![Vec::new(); ncpus];
        for g in groups() {
            if !std::mem::replace(&mut seen[g.span_id], true) {
                for cpu in g.span_runs.iter().flat_map(|r| r.clone()) {
                    spans_of_cpu[cpu].push(g.span_id);
                }
            }
        }
        let mut span_start = Vec::with_capacity(ncpus + 1);
        let mut span_of = Vec::new();
        for spans in &spans_of_cpu {
            span_start.push(span_of.len());
            span_of.extend_from_slice(spans);
        }
        span_start.push(span_of.len());
        ScanRows {
            load_avg: vec![0; ncpus],
            util: vec![0; ncpus],
            runnable_avg: vec![0; ncpus],
            h_nr_running: vec![0; ncpus],
            nr_runnable: vec![0; ncpus],
            idle: vec![false; ncpus],
            stale: vec![true; ncpus],
            stale_list: (0..ncpus).collect(),
            sums: vec![GroupSums::default(); nspans],
            span_start,
            span_of,
        }
    }

    /// `cpu`'s root cfs_rq (or its idle state) may have changed. Nothing to do
    /// without rows (the balancers before v5.5 do not read them).
    #[inline]
    pub fn mark(&mut self, cpu: usize) {
        if let Some(stale) = self.stale.get_mut(cpu).filter(|s| !**s) {
            *stale = true;
            self.stale_list.push(cpu);
        }
    }

    /// CPU `cpu`'s row.
    #[inline]
    pub fn row(&self, cpu: usize) -> ScanRow {
        ScanRow {
            load_avg: self.load_avg[cpu],
            util: self.util[cpu],
            runnable_avg: self.runnable_avg[cpu],
            h_nr_running: self.h_nr_running[cpu],
            nr_runnable: self.nr_runnable[cpu],
            idle: self.idle[cpu],
        }
    }

    /// The sums over `group`'s CPUs.
    #[inline]
    pub fn group_sums(&self, group: &SchedGroup) -> GroupSums {
        self.sums[group.span_id]
    }

    /// Asks the CPU to start loading `group`'s sums (one cache line each): a
    /// balance pass reads every group of a domain in turn, and on thousand-CPU
    /// machines each read is a miss; issued for all groups first, the misses
    /// overlap. Nothing on other architectures.
    #[inline]
    pub fn prefetch_sums(&self, group: &SchedGroup) {
        #[cfg(not(target_arch = "x86_64"))]
        let _ = group;
        #[cfg(target_arch = "x86_64")]
        if let Some(sums) = self.sums.get(group.span_id) {
            // SAFETY: a prefetch is a hint; the address is a live element.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((sums as *const GroupSums).cast::<i8>())
            };
        }
    }

    /// The CPUs marked stale since the last refresh, each once, for the caller
    /// to rewrite ([`Self::refresh_row`]) and hand back ([`Self::refreshed`]).
    pub fn take_stale(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.stale_list)
    }

    /// The list [`Self::take_stale`] gave, its rows rewritten: kept for its
    /// allocation.
    pub fn refreshed(&mut self, mut list: Vec<usize>) {
        list.clear();
        self.stale_list = list;
    }

    /// Replaces `cpu`'s row, in the sums of every span holding it too (rows
    /// start as zeros, which the zero sums hold); the row is fresh.
    pub fn refresh_row(&mut self, cpu: usize, row: ScanRow) {
        self.stale[cpu] = false;
        let old = self.row(cpu);
        for &span in &self.span_of[self.span_start[cpu]..self.span_start[cpu + 1]] {
            let sums = &mut self.sums[span];
            sums.sub(&old);
            sums.add(&row);
        }
        self.load_avg[cpu] = row.load_avg;
        self.util[cpu] = row.util;
        self.runnable_avg[cpu] = row.runnable_avg;
        self.h_nr_running[cpu] = row.h_nr_running;
        self.nr_runnable[cpu] = row.nr_runnable;
        self.idle[cpu] = row.idle;
    }
}
