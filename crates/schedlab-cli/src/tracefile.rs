//! `--trace FILE`: the timeline as Linux ftrace text, written to a temporary file
//! beside FILE and renamed into place only when the run succeeded, so a failed or
//! interrupted run leaves no partial output (see `outputs`).

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::task::{Task, TaskId};
use schedlab_core::trace::{TraceContext, TraceKind, TraceRecord, TraceSink};
use schedlab_trace::{Event, Line};

struct Writer {
    body: BufWriter<File>,
    body_path: PathBuf,
    entries: u64,
    line: String,
    error: Option<String>,
}

/// The open trace: keep it, hand `sink()` to the engine, `finish()` after the run.
pub struct TraceFile {
    inner: Rc<RefCell<Writer>>,
    path: PathBuf,
    ncpus: usize,
}

/// What the engine holds.
pub struct Sink(Rc<RefCell<Writer>>);

impl TraceFile {
    /// `path` is an output already checked by `outputs::check`.
    pub fn create(path: &Path, ncpus: usize) -> Result<TraceFile, SpecError> {
        let body_path = crate::outputs::temporary_beside(path, "body");
        let file = File::create(&body_path).map_err(|e| {
            crate::outputs::done_with(&body_path);
            SpecError::new("trace", path.display().to_string(), format!("a path in a writable directory ({e})"))
        })?;
        let w = Writer { body: BufWriter::with_capacity(1 << 20, file), body_path, entries: 0, line: String::new(), error: None };
        Ok(TraceFile { inner: Rc::new(RefCell::new(w)), path: path.to_path_buf(), ncpus })
    }

    pub fn sink(&self) -> Sink {
        Sink(self.inner.clone())
    }

    /// Writes the header and the body into place.
    pub fn finish(self) -> Result<(), String> {
        let mut w = self.inner.borrow_mut();
        if let Some(e) = w.error.take() {
            return Err(format!("writing trace {}: {e}", self.path.display()));
        }
        let io = |e: std::io::Error| format!("writing trace {}: {e}", self.path.display());
        w.body.flush().map_err(io)?;
        let final_tmp = crate::outputs::temporary_beside(&self.path, "tmp");
        let written = (|| {
            let mut out = BufWriter::new(File::create(&final_tmp)?);
            out.write_all(schedlab_trace::header(w.entries, self.ncpus as u32).as_bytes())?;
            let mut body = File::open(&w.body_path)?;
            std::io::copy(&mut body, &mut out)?;
            out.flush()?;
            drop(out);
            std::fs::rename(&final_tmp, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&final_tmp);
        }
        crate::outputs::done_with(&final_tmp);
        written.map_err(io)
    }
}

impl Drop for TraceFile {
    /// The temporary body goes on every path: after `finish()` and on errors.
    fn drop(&mut self) {
        if let Ok(w) = self.inner.try_borrow() {
            let _ = std::fs::remove_file(&w.body_path);
            crate::outputs::done_with(&w.body_path);
        }
    }
}

impl TraceSink for Sink {
    fn record(&mut self, rec: &TraceRecord, tasks: &[Task]) {
        let mut w = self.0.borrow_mut();
        if w.error.is_some() {
            return;
        }
        let line = to_line(rec, tasks);
        let mut text = std::mem::take(&mut w.line);
        text.clear();
        schedlab_trace::format_line(&line, &mut text);
        if let Err(e) = w.body.write_all(text.as_bytes()) {
            w.error = Some(e.to_string());
        }
        w.entries += 1;
        w.line = text;
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
