//! Independent simulated runs on all cores. Each run stays a single-threaded pure
//! function of its inputs; only the order in which they finish varies, and the
//! results come back in job order.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// `run(job)` for every job, on up to `available_parallelism()` threads, in job
/// order. `done(finished, total)` is called after each job.
pub fn map<J: Sync, R: Send>(jobs: &[J], run: impl Fn(&J) -> R + Sync, done: impl Fn(usize, usize) + Sync) -> Vec<R> {
    let total = jobs.len();
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..total).map(|_| None).collect());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(total.max(1));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let r = run(&jobs[i]);
                results.lock().expect("no panics while holding the lock")[i] = Some(r);
                done(finished.fetch_add(1, Ordering::Relaxed) + 1, total);
            });
        }
    });
    results.into_inner().expect("threads joined").into_iter().map(|r| r.expect("every job ran")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_job_order() {
        let jobs: Vec<u64> = (0..100).collect();
        let out = super::map(&jobs, |j| j * 2, |_, _| {});
        assert_eq!(out, (0..100).map(|j| j * 2).collect::<Vec<_>>());
    }
}
