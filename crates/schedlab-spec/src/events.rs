//! A run's timeline as the kernel's sched tracepoints print it: each engine
//! record becomes an ftrace line (`schedlab_trace::Line`), for `--trace` files and
//! for the Python package's per-tracepoint tables.

use schedlab_core::task::{Task, TaskId};
use schedlab_core::trace::{TraceContext, TraceKind, TraceRecord, TraceSink};
use schedlab_trace::{Event, Line};

/// Keeps every line of a run in memory (the Python package's `events=True`).
#[derive(Default)]
pub struct LineSink {
    pub lines: std::rc::Rc<std::cell::RefCell<Vec<Line>>>,
}

impl TraceSink for LineSink {
    fn record(&mut self, rec: &TraceRecord, tasks: &[Task]) {
        self.lines.borrow_mut().push(to_line(rec, tasks));
    }
}

fn comm_pid_prio(tasks: &[Task], t: Option<TaskId>, cpu: usize) -> (String, u32, i32) {
    match t {
        Some(t) => (tasks[t].comm.clone(), tasks[t].pid, tasks[t].prio()),
        None => (format!("swapper/{cpu}"), 0, 120),
    }
}

/// One engine record as an ftrace line, in the 5.12+ layout.
pub fn to_line(rec: &TraceRecord, tasks: &[Task]) -> Line {
    let (comm, pid) = match rec.current {
        Some(t) => (tasks[t].comm.clone(), tasks[t].pid),
        None => ("<idle>".to_string(), 0),
    };
    let task = |p: TaskId| (tasks[p].comm.clone(), tasks[p].pid, tasks[p].prio());
    // irqs off, preempt depth 2 (the runqueue lock), and the interrupt context.
    let sched_flags = match rec.context {
        TraceContext::Task => "d..2.",
        TraceContext::SoftIrq => "d.s2.",
        TraceContext::HardIrq => "d.h2.",
    };
    let (flags, event) = match rec.kind {
        TraceKind::Switch { prev, prev_state, next } => {
            let (prev_comm, prev_pid, prev_prio) = comm_pid_prio(tasks, prev, rec.cpu);
            let (next_comm, next_pid, next_prio) = comm_pid_prio(tasks, next, rec.cpu);
            let prev_state = prev_state.letters().to_string();
            (sched_flags, Event::Switch { prev_comm, prev_pid, prev_prio, prev_state, next_comm, next_pid, next_prio })
        }
        TraceKind::Waking { p, target_cpu } => {
            let (comm, pid, prio) = task(p);
            (sched_flags, Event::Waking { comm, pid, prio, target_cpu: target_cpu as u32 })
        }
        TraceKind::Wakeup { p, target_cpu } => {
            let (comm, pid, prio) = task(p);
            (sched_flags, Event::Wakeup { comm, pid, prio, target_cpu: target_cpu as u32 })
        }
        TraceKind::WakeupNew { p, target_cpu } => {
            let (comm, pid, prio) = task(p);
            (sched_flags, Event::WakeupNew { comm, pid, prio, target_cpu: target_cpu as u32 })
        }
        TraceKind::Migrate { p, orig_cpu, dest_cpu } => {
            let (comm, pid, prio) = task(p);
            (sched_flags, Event::MigrateTask { comm, pid, prio, orig_cpu: orig_cpu as u32, dest_cpu: dest_cpu as u32 })
        }
        TraceKind::Fork { parent, child } => {
            let (comm, pid, _) = task(parent);
            let (child_comm, child_pid, _) = task(child);
            (".....", Event::ProcessFork { comm, pid, child_comm, child_pid })
        }
        TraceKind::Exit { p } => {
            let (comm, pid, prio) = task(p);
            (".....", Event::ProcessExit { comm, pid, prio, group_dead: Some(!tasks[p].is_thread) })
        }
    };
    Line { comm, pid, tgid: None, cpu: rec.cpu as u32, flags: flags.to_string(), ts_ns: rec.time_ns, event }
}
