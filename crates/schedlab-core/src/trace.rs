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
