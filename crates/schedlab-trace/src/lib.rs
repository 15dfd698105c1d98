//! Linux ftrace text (the `/sys/kernel/tracing/trace` format) for scheduler events.
//!
//! The crate reads and writes the line format produced by the kernel's
//! `trace_print_context` plus the `TP_printk` formats of the sched tracepoints
//! (`include/trace/events/sched.h`). Parsing is hand-written (no regex) because
//! traces can hold millions of lines, and it never panics: every malformed line
//! becomes a [`ParseError`] that names the line and the reason.
//!
//! The writer emits the 5.12+ layout (`%16s-%-7d`, 5 irq-info characters when
//! the caller supplies them), so a line parsed from a 5.12+ trace is written back
//! byte for byte, and a line parsed from the older layout is written back in the
//! newer layout and parses to an equal [`Line`].

mod parse;
pub mod summary;
mod write;

pub use parse::{parse_line, parse_trace, read_trace, TraceReader};
pub use write::{format_line, header};

/// The sched tracepoints this crate reads and writes: what a recording enables
/// and what the simulator's traces contain.
pub const SCHED_EVENTS: [&str; 7] = [
    "sched_switch",
    "sched_waking",
    "sched_wakeup",
    "sched_wakeup_new",
    "sched_migrate_task",
    "sched_process_fork",
    "sched_process_exit",
];

/// One scheduler tracepoint (or any other event, kept raw).
///
/// Fields mirror the tracepoints' printed arguments, not their binary records, so
/// that a parsed event can be written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// `sched_switch`: `prev_state` is the letter string exactly as printed
    /// (`R`, `R+`, `S`, `D`, `T`, `t`, `X`, `Z`, `P`, `I`, or combinations such as
    /// `S|D` from older kernels), kept as text because kernels differ in encoding.
    Switch {
        prev_comm: String,
        prev_pid: u32,
        prev_prio: i32,
        prev_state: String,
        next_comm: String,
        next_pid: u32,
        next_prio: i32,
    },
    /// `sched_waking`: fires in the waker's context; `target_cpu` is the task's
    /// previous CPU.
    Waking { comm: String, pid: u32, prio: i32, target_cpu: u32 },
    /// `sched_wakeup`: the task was enqueued on `target_cpu`.
    Wakeup { comm: String, pid: u32, prio: i32, target_cpu: u32 },
    /// `sched_wakeup_new`: first enqueue of a freshly forked task.
    WakeupNew { comm: String, pid: u32, prio: i32, target_cpu: u32 },
    /// `sched_migrate_task`.
    MigrateTask { comm: String, pid: u32, prio: i32, orig_cpu: u32, dest_cpu: u32 },
    /// `sched_process_fork`: `comm`/`pid` are the parent.
    ProcessFork { comm: String, pid: u32, child_comm: String, child_pid: u32 },
    /// `sched_process_exit`: `group_dead` is printed only by kernels since ~6.15,
    /// hence `Option` (None = field absent, so older traces round-trip).
    ProcessExit { comm: String, pid: u32, prio: i32, group_dead: Option<bool> },
    /// Any other event: its name and the raw text after `name: `.
    Other { name: String, args: String },
}

impl Event {
    /// The tracepoint name as printed in the trace (e.g. `"sched_switch"`).
    pub fn name(&self) -> &str {
        match self {
            Event::Switch { .. } => "sched_switch",
            Event::Waking { .. } => "sched_waking",
            Event::Wakeup { .. } => "sched_wakeup",
            Event::WakeupNew { .. } => "sched_wakeup_new",
            Event::MigrateTask { .. } => "sched_migrate_task",
            Event::ProcessFork { .. } => "sched_process_fork",
            Event::ProcessExit { .. } => "sched_process_exit",
            Event::Other { name, .. } => name,
        }
    }
}

/// One event line: the context prefix (task, CPU, irq-info, time) plus the event.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Line {
    /// Task name from ftrace's comm cache: `<idle>` for pid 0, `<...>` if unknown.
    pub comm: String,
    pub pid: u32,
    /// Contents of the `(tgid)` column when `record-tgid` was set: digits, or
    /// dashes when the kernel had no tgid. Kept as text so both spellings survive.
    pub tgid: Option<String>,
    pub cpu: u32,
    /// Irq-info characters (e.g. `d..2.`), empty when the `irq-info` option is off.
    pub flags: String,
    /// Timestamp in nanoseconds (the text has microsecond precision).
    pub ts_ns: u64,
    pub event: Event,
}

/// A line that could not be parsed.
///
/// `line_no` is 1-based when produced by [`parse_trace`]; [`parse_line`] does not
/// know where its line came from and reports 0.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("trace line {line_no}: {reason}: '{line}'")]
pub struct ParseError {
    pub line_no: usize,
    pub line: String,
    pub reason: String,
}
