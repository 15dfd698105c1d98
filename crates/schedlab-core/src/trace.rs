//! Timeline records the engine emits, in the vocabulary of the kernel's sched
//! tracepoints. A sink turns them into ftrace text (schedlab-trace) or anything else.

use crate::task::{Task, TaskId};

/// How the previous task left the CPU, as `sched_switch` prints `prev_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrevState {
    /// Still runnable, switched out by `schedule()` (a yield, the idle task, or a
    /// reschedule taken on the way back to user space, as `exit_to_user_mode_loop()`
    /// does, kernel/entry/common.c v5.11+; `prepare_exit_to_usermode()` before): `R`.
    Running,
    /// Preempted in the kernel (`preempt_schedule_irq()`, `__schedule(SM_PREEMPT)`):
    /// `R+`, the TASK_REPORT_MAX bit `__trace_sched_switch_state()`
    /// (include/trace/events/sched.h, v4.14+; `TASK_STATE_MAX` before) sets when
    /// `preempt` is true.
    Preempted,
    /// Blocked: `S`.
    Sleeping,
    /// Exited, waiting to be reaped: `Z`.
    Zombie,
    /// Exited and gone: `X`.
    Dead,
}

impl PrevState {
    pub fn letters(self) -> &'static str {
        match self {
            PrevState::Running => "R",
            PrevState::Preempted => "R+",
            PrevState::Sleeping => "S",
            PrevState::Zombie => "Z",
            PrevState::Dead => "X",
        }
    }
}

/// One tracepoint hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// `sched_switch`; None is the idle task (`swapper/N`).
    Switch { prev: Option<TaskId>, prev_state: PrevState, next: Option<TaskId> },
    /// `sched_waking`, in the waker's context; `target_cpu` = the task's previous CPU.
    Waking { p: TaskId, target_cpu: usize },
    /// `sched_wakeup` once enqueued on `target_cpu`.
    Wakeup { p: TaskId, target_cpu: usize },
    /// `sched_wakeup_new` for a forked task.
    WakeupNew { p: TaskId, target_cpu: usize },
    /// `sched_migrate_task`.
    Migrate { p: TaskId, orig_cpu: usize, dest_cpu: usize },
    /// `sched_process_fork`.
    Fork { parent: TaskId, child: TaskId },
    /// `sched_process_exit`.
    Exit { p: TaskId },
}

/// Where a tracepoint fired, as ftrace's irq-info column shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TraceContext {
    /// Task context (a system call, schedule(), newidle balancing).
    #[default]
    Task,
    /// Softirq: the periodic and idle load balance of the tick (SCHED_SOFTIRQ).
    SoftIrq,
    /// Hardirq: a timer's wakeup.
    HardIrq,
}

/// A tracepoint hit with its context: when, on which CPU, in which task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceRecord {
    pub time_ns: u64,
    pub cpu: usize,
    /// The task running on `cpu` when the event fired (None = idle task).
    pub current: Option<TaskId>,
    pub context: TraceContext,
    pub kind: TraceKind,
}

/// Receives the timeline.
pub trait TraceSink {
    fn record(&mut self, rec: &TraceRecord, tasks: &[Task]);
}

/// EEVDF's numbers of one task's scheduling entity and of the cfs_rq it is
/// queued on (`struct sched_entity`, `struct cfs_rq`, v6.6+), as a scheduling
/// class keeps them: what `schedlab run --lag-trace` writes, in the format of
/// tools/host-lag's recordings of a real host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EntityNumbers {
    pub vruntime: u64,
    pub deadline: u64,
    /// The lag saved at the entity's last dequeue (v6.6 and v6.12 also keep
    /// their RUN_TO_PARITY mark here).
    pub vlag: i64,
    /// v6.18's protection, set at the entity's last pick (v6.6, v6.12: `vlag`).
    /// v6.18.0 keeps the two in one union, which holds whichever was written
    /// last: what a recording of a real host shows.
    pub vprot: i64,
    /// Queued on its cfs_rq (running, runnable, or delayed).
    pub on_rq: bool,
    /// The cfs_rq's Σ (vruntime - zero_vruntime) · weight over its tree, the
    /// running entity not included (`cfs_rq->avg_vruntime`; `sum_w_vruntime`
    /// from v6.19).
    pub sum_w_vruntime: i64,
    /// Σ weight over the tree (`avg_load`; `sum_weight` from v6.19).
    pub sum_weight: u64,
    /// The key's origin (`min_vruntime`; `zero_vruntime` from v6.19).
    pub zero_vruntime: u64,
}

/// One switch or wakeup with the entity numbers of the tasks in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntityRecord {
    pub time_ns: u64,
    pub cpu: usize,
    /// A switch (`a` the task switched out, None for the idle task; `b` the one
    /// switched in, with its cfs_rq), or a wakeup (`a` and `b` the wakee, after
    /// its enqueue).
    pub wakeup: bool,
    pub prev_state: PrevState,
    pub a: Option<(TaskId, EntityNumbers)>,
    pub b: (TaskId, EntityNumbers),
}

/// Receives entity records (`Engine::set_entity_sink`).
pub trait EntitySink {
    fn record(&mut self, rec: &EntityRecord, tasks: &[Task]);
}

/// Keeps every record in memory (tests, small runs).
#[derive(Default)]
pub struct VecSink {
    pub records: Vec<TraceRecord>,
}

impl TraceSink for VecSink {
    fn record(&mut self, rec: &TraceRecord, _tasks: &[Task]) {
        self.records.push(*rec);
    }
}
