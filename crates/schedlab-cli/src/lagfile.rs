//! `run --lag-trace FILE`: EEVDF's entity numbers at every switch to a task and
//! every wakeup, one line each in the format tools/host-lag's `lagtrace` writes
//! for a real host, so that `tools/host-lag/lags.py` reads both. Written to a
//! temporary file beside FILE and renamed into place only when the run
//! succeeded (see `outputs`).

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::task::Task;
use schedlab_core::trace::{EntityNumbers, EntityRecord, EntitySink, PrevState};

struct Writer {
    body: BufWriter<File>,
    tmp: PathBuf,
    error: Option<String>,
}

/// The open file: keep it, hand `sink()` to the engine, `finish()` after the run.
pub struct LagFile {
    inner: Rc<RefCell<Writer>>,
    path: PathBuf,
}

/// What the engine holds.
pub struct Sink(Rc<RefCell<Writer>>);

impl LagFile {
    /// `path` is an output already checked by `outputs::check`.
    pub fn create(path: &Path) -> Result<LagFile, SpecError> {
        let tmp = crate::outputs::temporary_beside(path, "tmp");
        let file = File::create(&tmp).map_err(|e| {
            crate::outputs::done_with(&tmp);
            SpecError::new("lag-trace", path.display().to_string(), format!("a path in a writable directory ({e})"))
        })?;
        let w = Writer { body: BufWriter::with_capacity(1 << 20, file), tmp, error: None };
        Ok(LagFile { inner: Rc::new(RefCell::new(w)), path: path.to_path_buf() })
    }

    pub fn sink(&self) -> Sink {
        Sink(self.inner.clone())
    }

    /// Moves the file into place.
    pub fn finish(self) -> Result<(), String> {
        let mut w = self.inner.borrow_mut();
        let io = |e: String| format!("writing lag trace {}: {e}", self.path.display());
        if let Some(e) = w.error.take() {
            return Err(io(e));
        }
        w.body.flush().map_err(|e| io(e.to_string()))?;
        std::fs::rename(&w.tmp, &self.path).map_err(|e| io(e.to_string()))
    }
}

impl Drop for LagFile {
    /// The temporary file goes on every path that did not rename it.
    fn drop(&mut self) {
        if let Ok(w) = self.inner.try_borrow() {
            let _ = std::fs::remove_file(&w.tmp);
            crate::outputs::done_with(&w.tmp);
        }
    }
}

/// `prev_state` as the kernel's `sched_switch` gives it: 0 for a task switched
/// out runnable, TASK_INTERRUPTIBLE (1) for one that went to sleep, TASK_DEAD
/// (0x80) for one that exited.
fn kernel_prev_state(s: PrevState) -> u8 {
    match s {
        PrevState::Running | PrevState::Preempted => 0,
        PrevState::Sleeping => 1,
        PrevState::Zombie | PrevState::Dead => 0x80,
    }
}

/// The vlag/vprot union as a v6.18.0 kernel holds it: a wakee's is the lag its
/// placement used (nothing picked it since); a queued entity's otherwise the
/// protection of its last pick (a delayed sleeper keeps it); a dequeued one's
/// the lag its dequeue saved.
fn union_of(n: &EntityNumbers, wakeup: bool) -> i64 {
    if !wakeup && n.on_rq {
        n.vprot
    } else {
        n.vlag
    }
}

impl EntitySink for Sink {
    fn record(&mut self, rec: &EntityRecord, tasks: &[Task]) {
        let mut w = self.0.borrow_mut();
        if w.error.is_some() {
            return;
        }
        let (pb, b) = rec.b;
        let (pa, a) = rec.a.map_or((0, EntityNumbers::default()), |(p, n)| (tasks[p].pid, n));
        // The columns of tools/host-lag/lagtrace.c: kind, time, CPU, prev_state,
        // preempt (sched_switch's in-kernel preemption flag), the two pids, A's
        // and B's vruntime, deadline and union, B's cfs_rq sums, B's comm.
        let comm: String = tasks[pb].comm.chars().take(15).map(|c| if c == ' ' { '_' } else { c }).collect();
        let line = format!(
            "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}\n",
            if rec.wakeup { 'W' } else { 'S' },
            rec.time_ns,
            rec.cpu,
            if rec.wakeup { 0xfe } else { kernel_prev_state(rec.prev_state) },
            u8::from(!rec.wakeup && rec.prev_state == PrevState::Preempted),
            pa,
            tasks[pb].pid,
            a.vruntime as i64,
            a.deadline as i64,
            union_of(&a, rec.wakeup),
            b.vruntime as i64,
            b.deadline as i64,
            union_of(&b, rec.wakeup),
            b.sum_w_vruntime,
            b.sum_weight,
            b.zero_vruntime as i64,
            comm
        );
        if let Err(e) = w.body.write_all(line.as_bytes()) {
            w.error = Some(e.to_string());
        }
    }
}
