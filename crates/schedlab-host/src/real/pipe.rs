//! `perf bench sched pipe` (tools/perf/bench/sched-pipe.c, perf 6.1): two pipes,
//! two workers passing an int back and forth `loops` times; worker 0 reads then
//! writes, worker 1 writes then reads. Process mode forks worker 0 and the main
//! task is worker 1 itself, then waitpid()s; thread mode starts both as threads
//! and joins them. The time runs from before the fork to after the wait or join,
//! as perf takes it and as the simulated workload (pipe.rs) marks it.

use std::os::fd::{AsRawFd, RawFd};

use schedlab_core::program::ForkKind;
use schedlab_workloads::pipe::PipeBench;

use super::sys::{fdpair, fork_worker, reap_any, THREAD_STACK_BYTES};
use crate::sys::{now_ns, read_exact, write_all};
use crate::HostError;

fn worker(read_first: bool, rd: RawFd, wr: RawFd, loops: u64) -> bool {
    let mut m = [0u8; 4];
    for _ in 0..loops {
        if read_first && read_exact(rd, &mut m).is_err() {
            return false;
        }
        if write_all(wr, &m).is_err() {
            return false;
        }
        if !read_first && read_exact(rd, &mut m).is_err() {
            return false;
        }
    }
    true
}

/// Runs it in the calling process; returns the measured time, ns.
pub fn run(b: &PipeBench) -> Result<u64, HostError> {
    let (p1_rd, p1_wr) = fdpair(true)?;
    let (p2_rd, p2_wr) = fdpair(true)?;
    // Worker 0 reads pipe 1 and writes pipe 2; worker 1 the other way round.
    let w0 = (p1_rd.as_raw_fd(), p2_wr.as_raw_fd());
    let w1 = (p2_rd.as_raw_fd(), p1_wr.as_raw_fd());
    let loops = b.loops;
    let t0 = now_ns();
    let ok = if b.mode == ForkKind::Thread {
        let spawn = |read_first: bool, (rd, wr): (RawFd, RawFd)| {
            std::thread::Builder::new()
                .stack_size(THREAD_STACK_BYTES)
                .spawn(move || worker(read_first, rd, wr, loops))
                .map_err(|e| HostError::new("pthread_create()", e))
        };
        let a = spawn(true, w0)?;
        let c = spawn(false, w1)?;
        let a_ok = a.join().unwrap_or(false);
        a_ok & c.join().unwrap_or(false)
    } else {
        fork_worker(move || worker(true, w0.0, w0.1, loops))?;
        let mine = worker(false, w1.0, w1.1, loops);
        reap_any()?;
        mine
    };
    let elapsed = now_ns() - t0;
    if !ok {
        return Err(HostError::new("a pipe worker", "a read or write failed"));
    }
    Ok(elapsed)
}
