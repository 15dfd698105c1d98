//! The runqueue fields the balancer's group scans read, in one array per field.
//!
//! `update_sg_lb_stats()` visits every CPU of every group of the domain being
//! balanced: from v5.16 newly idle balancing runs whenever the CPU's average
//! idle time exceeds the domain's measured cost, so on a thousand-CPU machine the
//! simulator walks tens of millions of runqueues a simulated second. Each walk
//! read five fields spread over each CPU's large `Rq`; here each field has an
//! array of its own, so a scan sums consecutive words (and the compiler can do
//! it several CPUs at a time). This is the simulator's own bookkeeping, not a
//! kernel structure: the kernel reads the runqueues themselves, and so do the
//! scans' results (debug builds check every row against its runqueue).
//!
//! Rows go stale when a root cfs_rq changes: [`Cfs::cfs_mut`] for the root
//! (every PELT update, enqueue and dequeue goes through it) and the delayed-task
//! count mark the CPU, and [`Cfs::scan_rows_refresh`] rewrites the marked rows
//! before a scan.

use super::fair::Cfs;

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

/// The rows, one array per field, and which of them are stale.
#[derive(Clone, Debug, Default)]
pub struct ScanRows {
    pub load_avg: Vec<u64>,
    pub util: Vec<u64>,
    pub runnable_avg: Vec<u64>,
    pub h_nr_running: Vec<u32>,
    pub nr_runnable: Vec<u32>,
    stale: Vec<bool>,
    /// The CPUs marked stale since the last refresh, each once.
    stale_list: Vec<usize>,
}

impl ScanRows {
    /// Rows for `ncpus` CPUs, all stale.
    pub fn new(ncpus: usize) -> ScanRows {
        ScanRows {
            load_avg: vec![0; ncpus],
            util: vec![0; ncpus],
            runnable_avg: vec![0; ncpus],
            h_nr_running: vec![0; ncpus],
            nr_runnable: vec![0; ncpus],
            stale: vec![true; ncpus],
            stale_list: (0..ncpus).collect(),
        }
    }

    /// `cpu`'s root cfs_rq may have changed. Nothing to do without rows (the
    /// balancers before v5.5 do not read them).
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
        }
    }

    fn set(&mut self, cpu: usize, row: ScanRow) {
        self.load_avg[cpu] = row.load_avg;
        self.util[cpu] = row.util;
        self.runnable_avg[cpu] = row.runnable_avg;
        self.h_nr_running[cpu] = row.h_nr_running;
        self.nr_runnable[cpu] = row.nr_runnable;
    }
}

impl Cfs {
    /// CPU `cpu`'s row as its runqueue holds it now, through the accessors the
    /// kernel's scans use.
    pub fn scan_row(&self, cpu: usize) -> ScanRow {
        ScanRow {
            load_avg: self.cpu_load(cpu),
            util: self.cpu_util(cpu),
            runnable_avg: self.cpu_runnable(cpu),
            h_nr_running: self.rq[cpu].cfs.h_nr_running as u32,
            nr_runnable: self.h_nr_runnable(cpu) as u32,
        }
    }

    /// Rewrites every stale row from its runqueue.
    pub fn scan_rows_refresh(&mut self) {
        let mut stale = std::mem::take(&mut self.scan.stale_list);
        for &cpu in &stale {
            let row = self.scan_row(cpu);
            self.scan.set(cpu, row);
            self.scan.stale[cpu] = false;
        }
        stale.clear();
        self.scan.stale_list = stale;
    }

    /// Debug builds: a fresh row agrees with its runqueue.
    #[cfg(debug_assertions)]
    pub(crate) fn debug_check_scan_row(&self, cpu: usize) {
        debug_assert_eq!(
            self.scan.row(cpu),
            self.scan_row(cpu),
            "the balancer's scan row of CPU {cpu} is stale: a root cfs_rq change did not mark it"
        );
    }
}
