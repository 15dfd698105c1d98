//! The runqueue fields the balancer's group scans read, one dense row per CPU.
//!
//! `update_sg_lb_stats()` visits every CPU of every group of the domain being
//! balanced: from v5.16 newly idle balancing runs whenever the CPU's average
//! idle time exceeds the domain's measured cost, so on a thousand-CPU machine the
//! simulator walks tens of millions of runqueues a simulated second. Each walk
//! read five fields spread over each CPU's large `Rq`; here they sit in 32 bytes,
//! two CPUs to a cache line. This is the simulator's own bookkeeping, not a
//! kernel structure: the kernel reads the runqueues themselves, and so do the
//! scans' results (debug builds check every row against its runqueue).
//!
//! Rows go stale when a root cfs_rq changes: [`Cfs::cfs_mut`] for the root
//! (every PELT update, enqueue and dequeue goes through it) and the delayed-task
//! count mark the CPU, and [`Cfs::scan_rows_refresh`] rewrites the marked rows
//! before a scan.

use super::domains::KernelVersion;
use super::fair::{Cfs, Rq};

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
}

impl ScanRow {
    /// The row as `rq` holds it now.
    pub fn of(rq: &Rq, version: KernelVersion) -> ScanRow {
        let h_nr_running = rq.cfs.h_nr_running;
        let nr_runnable = if version >= KernelVersion::V6_18 { h_nr_running - rq.nr_delayed } else { h_nr_running };
        ScanRow {
            load_avg: rq.cfs.avg.load_avg,
            util: rq.cfs.avg.util_avg.min(rq.cpu_capacity),
            runnable_avg: rq.cfs.avg.runnable_load_avg,
            h_nr_running: h_nr_running as u32,
            nr_runnable: nr_runnable as u32,
        }
    }
}

/// The rows, and which of them are stale.
#[derive(Clone, Debug, Default)]
pub struct ScanRows {
    pub rows: Vec<ScanRow>,
    stale: Vec<bool>,
    /// The CPUs marked stale since the last refresh, each once.
    stale_list: Vec<usize>,
}

impl ScanRows {
    /// Rows for `ncpus` CPUs, all stale.
    pub fn new(ncpus: usize) -> ScanRows {
        ScanRows { rows: vec![ScanRow::default(); ncpus], stale: vec![true; ncpus], stale_list: (0..ncpus).collect() }
    }

    /// `cpu`'s root cfs_rq may have changed.
    #[inline]
    pub fn mark(&mut self, cpu: usize) {
        if !self.stale[cpu] {
            self.stale[cpu] = true;
            self.stale_list.push(cpu);
        }
    }
}

impl Cfs {
    /// Rewrites every stale row from its runqueue.
    pub fn scan_rows_refresh(&mut self) {
        let scan = &mut self.scan;
        for &cpu in &scan.stale_list {
            scan.rows[cpu] = ScanRow::of(&self.rq[cpu], self.version);
            scan.stale[cpu] = false;
        }
        scan.stale_list.clear();
    }

    /// Debug builds: a fresh row agrees with its runqueue.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_scan_row(&self, cpu: usize) {
        debug_assert_eq!(
            self.scan.rows[cpu],
            ScanRow::of(&self.rq[cpu], self.version),
            "the balancer's scan row of CPU {cpu} is stale: a root cfs_rq change did not mark it"
        );
    }
}
