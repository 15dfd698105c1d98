//! Accounting: per-CPU counters with `/proc/schedstat` v15 meaning plus the
//! simulator's own (idle entries, migrations, scheduler and search time), and the
//! wasted core-time integral.

use hdrhistogram::Histogram;

/// Per-CPU counters. Field names follow `struct rq`'s schedstat members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// sched_yield() calls (`yld_count`).
    pub yld_count: u64,
    /// schedule() calls (`sched_count`).
    pub sched_count: u64,
    /// schedule() calls that left the CPU idle (`sched_goidle`).
    pub sched_goidle: u64,
    /// try_to_wake_up() calls made by this CPU (`ttwu_count`).
    pub ttwu_count: u64,
    /// ... of which woke a task onto this same CPU (`ttwu_local`).
    pub ttwu_local: u64,
    /// Time tasks ran here (`rq_cpu_time`), ns.
    pub run_ns: u64,
    /// Time tasks waited in this runqueue (`run_delay`), ns.
    pub wait_ns: u64,
    /// Tasks switched in (`pcount`, "timeslices").
    pub timeslices: u64,
    /// Times the CPU entered idle.
    pub idle_entries: u64,
    /// Tasks that arrived here from another CPU.
    pub migrations_in: u64,
    /// Scheduler overhead charged here (switches, wakeups, enqueues), ns.
    pub sched_ns: u64,
    /// Time in searches for idle CPUs or tasks to pull/steal ("%find"), ns.
    pub find_ns: u64,
    /// Wall time the CPU was not idle, ns.
    pub busy_ns: u64,
    /// Idle CPUs pulled a task from another CPU this many times (policy-defined, e.g. steal).
    pub steals: u64,
    /// Steal attempts that found nothing.
    pub steal_fails: u64,
    /// Of `steals`, those made while switching out, before the idle thread ran
    /// (ULE's `tdq_trysteal()`).
    pub switch_steals: u64,
    /// Idle searches restarted because the victim found had gone stale (ULE
    /// after D12130).
    pub steal_restarts: u64,
    /// `load_balance()` calls with this CPU as destination, all domains and idle
    /// types (schedstat `lb_count` summed).
    pub lb_count: u64,
    /// Tasks pulled by those calls (`lb_gained` summed).
    pub lb_gained: u64,
    /// Newly-idle balancing skipped by its `avg_idle`/overload gate.
    pub newidle_skipped: u64,
    /// Tasks this CPU's stopper pushed elsewhere at the start of their execve()
    /// (`sched_exec()`; the 2.6 kernels' schedstat `sbe_pushed`).
    pub exec_pushes: u64,
}

impl CpuStats {
    /// `self - earlier`, field by field.
    pub fn delta(&self, earlier: &CpuStats) -> CpuStats {
        CpuStats {
            yld_count: self.yld_count - earlier.yld_count,
            sched_count: self.sched_count - earlier.sched_count,
            sched_goidle: self.sched_goidle - earlier.sched_goidle,
            ttwu_count: self.ttwu_count - earlier.ttwu_count,
            ttwu_local: self.ttwu_local - earlier.ttwu_local,
            run_ns: self.run_ns - earlier.run_ns,
            wait_ns: self.wait_ns - earlier.wait_ns,
            timeslices: self.timeslices - earlier.timeslices,
            idle_entries: self.idle_entries - earlier.idle_entries,
            migrations_in: self.migrations_in - earlier.migrations_in,
            sched_ns: self.sched_ns - earlier.sched_ns,
            find_ns: self.find_ns - earlier.find_ns,
            busy_ns: self.busy_ns - earlier.busy_ns,
            steals: self.steals - earlier.steals,
            steal_fails: self.steal_fails - earlier.steal_fails,
            switch_steals: self.switch_steals - earlier.switch_steals,
            steal_restarts: self.steal_restarts - earlier.steal_restarts,
            lb_count: self.lb_count - earlier.lb_count,
            lb_gained: self.lb_gained - earlier.lb_gained,
            newidle_skipped: self.newidle_skipped - earlier.newidle_skipped,
            exec_pushes: self.exec_pushes - earlier.exec_pushes,
        }
    }

    pub fn add(&mut self, o: &CpuStats) {
        self.yld_count += o.yld_count;
        self.sched_count += o.sched_count;
        self.sched_goidle += o.sched_goidle;
        self.ttwu_count += o.ttwu_count;
        self.ttwu_local += o.ttwu_local;
        self.run_ns += o.run_ns;
        self.wait_ns += o.wait_ns;
        self.timeslices += o.timeslices;
        self.idle_entries += o.idle_entries;
        self.migrations_in += o.migrations_in;
        self.sched_ns += o.sched_ns;
        self.find_ns += o.find_ns;
        self.busy_ns += o.busy_ns;
        self.steals += o.steals;
        self.steal_fails += o.steal_fails;
        self.switch_steals += o.switch_steals;
        self.steal_restarts += o.steal_restarts;
        self.lb_count += o.lb_count;
        self.lb_gained += o.lb_gained;
        self.newidle_skipped += o.newidle_skipped;
        self.exec_pushes += o.exec_pushes;
    }
}

/// Wakeup-to-run latency histogram (ns, 3 significant digits).
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 1_000_000_000_000, 3).expect("static bounds are valid")
}
