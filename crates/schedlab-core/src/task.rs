//! Tasks as the scheduler sees them: identity, weight, state, where they run.

use crate::cpuset::CpuSet;

/// Index of a task in `System::tasks`. Never reused within a run.
pub type TaskId = usize;

/// The kernel's `sched_prio_to_weight[]` (kernel/sched/core.c, unchanged 4.19..6.12):
/// nice -20..19 → load weight, each step ≈ 1.25×, nice 0 = 1024.
pub const SCHED_PRIO_TO_WEIGHT: [u32; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586,
    1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

/// The kernel's `sched_prio_to_wmult[]`: 2^32 / weight, for `__calc_delta()`.
pub const SCHED_PRIO_TO_WMULT: [u32; 40] = [
    48388, 59856, 76040, 92818, 118348, 147320, 184698, 229616, 287308, 360437, 449829, 563644, 704093, 875809, 1099582, 1376151,
    1717300, 2157191, 2708050, 3363326, 4194304, 5237765, 6557202, 8165337, 10153587, 12820798, 15790321, 19976592, 24970740,
    31350126, 39045157, 49367440, 61356676, 76695844, 95443717, 119304647, 148102320, 186737708, 238609294, 286331153,
];

/// Weight of a nice value, clamped to -20..=19 like `set_user_nice()`.
pub fn nice_to_weight(nice: i32) -> u32 {
    SCHED_PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Lifecycle state, with the letters ftrace prints for a switched-out task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// On a CPU right now.
    Running,
    /// Runnable, waiting in a runqueue.
    Runnable,
    /// Woken onto an idle CPU's wake list and not yet enqueued (`TASK_WAKING`
    /// between `__ttwu_queue_wakelist()` and the target's `sched_ttwu_pending()`):
    /// on no runqueue, and not runnable to the load averages.
    Waking,
    /// Blocked (interruptible sleep, `S`).
    Sleeping,
    /// Exited, not yet reaped by its parent (`Z`).
    Zombie,
    /// Gone (`X`).
    Dead,
}

/// Scheduler-visible task data. Policies keep their own per-task state indexed by
/// `TaskId`; this is what the engine owns.
#[derive(Clone, Debug)]
pub struct Task {
    pub pid: u32,
    pub tgid: u32,
    pub comm: String,
    pub nice: i32,
    /// Load weight from `SCHED_PRIO_TO_WEIGHT`.
    pub weight: u32,
    pub state: TaskState,
    /// CPU it runs on, is queued on, or last ran on (`task_cpu(p)`).
    pub cpu: usize,
    /// Allowed CPUs (`p->cpus_allowed`); None = all.
    pub allowed: Option<CpuSet>,
    pub parent: Option<TaskId>,
    /// Its task group (cgroup), an index into `System::groups`; 0 is the root.
    pub group: usize,
    /// A thread of its parent's process (clone with CLONE_THREAD).
    pub is_thread: bool,
    /// Time the task last started running, or was enqueued (schedstat bookkeeping).
    pub last_queued_ns: u64,
    /// When it was last woken, for wakeup-to-run latency; None when not pending.
    pub woken_at_ns: Option<u64>,
    /// Cumulative accounting. `run_ns` is all time in the task's own segments
    /// (user code and system calls, cache refills included).
    pub run_ns: u64,
    /// Of `run_ns`, the part spent in system calls.
    pub kernel_ns: u64,
    /// Scheduler work done in this task's context before its segments (the switch
    /// in, wakeups it performed): system time outside `run_ns`.
    pub sched_ns: u64,
    pub wait_ns: u64,
    pub sleep_ns: u64,
    pub slept_at_ns: u64,
    pub switches: u64,
    /// Switched out while still runnable (preempted, or yielding): getrusage()'s
    /// `ru_nivcsw`, the kernel's `nivcsw`.
    pub involuntary: u64,
    pub migrations: u64,
}

impl Task {
    /// Kernel priority as printed by ftrace: 120 + nice for normal tasks.
    pub fn prio(&self) -> i32 {
        120 + self.nice
    }

    pub fn can_run_on(&self, cpu: usize) -> bool {
        self.allowed.as_ref().is_none_or(|s| s.contains(cpu))
    }

    /// `p->nr_cpus_allowed` on a machine of `ncpus` CPUs.
    pub fn nr_cpus_allowed(&self, ncpus: usize) -> usize {
        self.allowed.as_ref().map_or(ncpus, |s| s.count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weight_table_matches_wmult() {
        // wmult = 2^32 / weight, rounded as the kernel's table was generated.
        for (w, m) in SCHED_PRIO_TO_WEIGHT.iter().zip(SCHED_PRIO_TO_WMULT.iter()) {
            let exact = (1u64 << 32) / *w as u64;
            assert!((exact as i64 - *m as i64).abs() <= 1, "weight {w}: {exact} vs {m}");
        }
        assert_eq!(nice_to_weight(0), 1024);
        assert_eq!(nice_to_weight(-30), 88761);
        assert_eq!(nice_to_weight(19), 15);
    }
}
