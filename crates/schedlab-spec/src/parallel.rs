//! The one parallel runner: independent simulations (replications, rows, sides,
//! sweep cells) on a pool of threads, results in job order. Every run is a pure
//! function of its spec and seed, so the results, digests included, are the same
//! with one thread as with many; only the wall time changes.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use schedlab_core::error::SpecError;

/// Most threads `--jobs` accepts.
pub const MAX_JOBS: usize = 1024;

/// The threads a parallel step uses: `--jobs N`, or every core the process may use.
pub fn threads(jobs: Option<usize>) -> Result<usize, SpecError> {
    match jobs {
        Some(n) if (1..=MAX_JOBS).contains(&n) => Ok(n),
        Some(n) => Err(SpecError::new("jobs", n.to_string(), format!("an integer from 1 to {MAX_JOBS}"))),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

/// `run(job)` for every job on `threads` threads, returned in job order. While it
/// works, a progress bar with the elapsed time and an estimate of the time left
/// is drawn on stderr, headed `label`, if stderr is a terminal.
pub fn map<J: Sync, R: Send>(jobs: &[J], threads: usize, label: &str, run: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let total = jobs.len();
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..total).map(|_| None).collect());
    let progress = Progress::new(label, total);
    let threads = threads.clamp(1, total.max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let r = run(&jobs[i]);
                results.lock().expect("no panics while holding the lock")[i] = Some(r);
                progress.show(finished.fetch_add(1, Ordering::Relaxed) + 1);
            });
        }
    });
    progress.finish();
    results.into_inner().expect("threads joined").into_iter().map(|r| r.expect("every job ran")).collect()
}

/// A one-line progress bar on stderr, only when stderr is a terminal.
struct Progress<'a> {
    label: &'a str,
    total: usize,
    started: Instant,
    on_terminal: bool,
    drawn: Mutex<bool>,
}

impl<'a> Progress<'a> {
    fn new(label: &'a str, total: usize) -> Self {
        let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        Progress { label, total, started: Instant::now(), on_terminal, drawn: Mutex::new(false) }
    }

    fn show(&self, done: usize) {
        if !self.on_terminal || self.total == 0 {
            return;
        }
        let elapsed_s = self.started.elapsed().as_secs_f64();
        let left_s = elapsed_s / done as f64 * (self.total - done) as f64;
        let line = progress_line(self.label, done, self.total, elapsed_s, left_s);
        let mut drawn = self.drawn.lock().expect("no panics while drawing");
        let mut e = std::io::stderr().lock();
        let _ = write!(e, "\r\x1b[K{line}");
        let _ = e.flush();
        *drawn = true;
    }

    fn finish(&self) {
        if *self.drawn.lock().expect("no panics while drawing") {
            eprintln!();
        }
    }
}

/// `label [#####     ] 12/40 runs, 8 s, about 19 s left`.
fn progress_line(label: &str, done: usize, total: usize, elapsed_s: f64, left_s: f64) -> String {
    const WIDTH: usize = 30;
    let filled = done * WIDTH / total.max(1);
    format!(
        "{label} [{}{}] {done}/{total} runs, {}, about {} left",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        duration(elapsed_s),
        duration(left_s)
    )
}

/// Seconds as `42 s`, `3 min 05 s` or `1 h 02 min`.
fn duration(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_job_order() {
        let jobs: Vec<u64> = (0..100).collect();
        for threads in [1, 2, 7] {
            let out = super::map(&jobs, threads, "test", |j| j * 2);
            assert_eq!(out, (0..100).map(|j| j * 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn jobs_flag_is_checked() {
        assert_eq!(super::threads(Some(3)).unwrap(), 3);
        assert!(super::threads(None).unwrap() >= 1);
        let e = super::threads(Some(0)).unwrap_err().to_string();
        assert!(e.contains("jobs") && e.contains("1 to 1024"), "{e}");
    }

    #[test]
    fn progress_line_shows_count_and_time_left() {
        let l = super::progress_line("compare", 12, 40, 8.2, 19.4);
        assert_eq!(l, format!("compare [{}{}] 12/40 runs, 8 s, about 19 s left", "#".repeat(9), " ".repeat(21)));
        assert_eq!(super::duration(185.0), "3 min 05 s");
        assert_eq!(super::duration(3720.0), "1 h 02 min");
    }
}
