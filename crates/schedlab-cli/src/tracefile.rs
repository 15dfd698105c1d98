//! `--trace FILE`: the timeline as Linux ftrace text, written to a temporary file
//! beside FILE and renamed into place only when the run succeeded, so a failed or
//! interrupted run leaves no partial output (see `outputs`).

use std::cell::RefCell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use schedlab_core::error::SpecError;
use schedlab_core::task::Task;
use schedlab_core::trace::{TraceRecord, TraceSink};

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
        let line = schedlab_spec::events::to_line(rec, tasks);
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
