//! hackbench as `perf bench sched messaging` (tools/perf/bench/sched-messaging.c,
//! perf 6.1) runs it: per group, `fds` receivers each on its own pipe or AF_UNIX
//! stream pair, then `fds` senders that each write `loops` messages of
//! `datasize` bytes to every receiver of the group. Every worker writes one byte to
//! the ready pair and polls the wake pair; the main task reads one ready byte per
//! worker, takes the start time, writes the one wake byte, reaps every worker
//! (wait() for processes, join in creation order for threads) and takes the end
//! time. The same description, step for step, is the simulated workload
//! (schedlab-workloads' hackbench.rs).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use schedlab_core::program::ForkKind;
use schedlab_workloads::hackbench::{Hackbench, Ipc};

use super::sys::{fdpair, fork_worker, poll_in, reap_any, THREAD_STACK_BYTES};
use crate::sys::{now_ns, read_exact, write_all};
use crate::HostError;

#[derive(Clone, Copy)]
struct Start {
    ready_out: RawFd,
    wake_in: RawFd,
}

impl Start {
    /// perf's ready(): tell the main task, then wait for the start byte.
    fn ready(self) -> bool {
        write_all(self.ready_out, b"R").is_ok() && poll_in(self.wake_in)
    }
}

fn sender(start: Start, outs: &[RawFd], loops: u64, datasize: usize) -> bool {
    if !start.ready() {
        return false;
    }
    let data = vec![b'S'; datasize];
    for _ in 0..loops {
        for &fd in outs {
            if write_all(fd, &data).is_err() {
                return false;
            }
        }
    }
    true
}

fn receiver(start: Start, fd: RawFd, packets: u64, datasize: usize) -> bool {
    if !start.ready() {
        return false;
    }
    let mut data = vec![0u8; datasize];
    (0..packets).all(|_| read_exact(fd, &mut data).is_ok())
}

enum Worker {
    Process,
    Thread(std::thread::JoinHandle<bool>),
}

fn create(thread_mode: bool, body: impl FnOnce() -> bool + Send + 'static) -> Result<Worker, HostError> {
    if thread_mode {
        let h = std::thread::Builder::new()
            .stack_size(THREAD_STACK_BYTES)
            .spawn(body)
            .map_err(|e| HostError::new("pthread_create()", e))?;
        Ok(Worker::Thread(h))
    } else {
        fork_worker(body)?;
        Ok(Worker::Process)
    }
}

/// Runs it in the calling process (which must be single-threaded in process
/// mode); returns the measured time from the wake byte to the last reap, ns.
pub fn run(h: &Hackbench) -> Result<u64, HostError> {
    let thread_mode = h.mode == ForkKind::Thread;
    let pipe = h.ipc == Ipc::Pipe;
    let datasize = h.datasize as usize;
    let (ready_in, ready_out) = fdpair(pipe)?;
    let (wake_in, wake_out) = fdpair(pipe)?;
    let start = Start { ready_out: ready_out.as_raw_fd(), wake_in: wake_in.as_raw_fd() };
    let mut workers = Vec::with_capacity((2 * h.fds * h.groups) as usize);
    // Thread mode shares the descriptors: keep them until every worker is joined.
    let mut kept: Vec<OwnedFd> = Vec::new();
    for _ in 0..h.groups {
        let mut outs: Vec<OwnedFd> = Vec::new();
        for _ in 0..h.fds {
            let (rd, wr) = fdpair(pipe)?;
            let fd = rd.as_raw_fd();
            let packets = h.fds * h.loops;
            workers.push(create(thread_mode, move || receiver(start, fd, packets, datasize))?);
            outs.push(wr);
            if thread_mode {
                kept.push(rd);
            }
            // Process mode: the receiver has its copy; the main task closes its own.
        }
        let out_fds: Vec<RawFd> = outs.iter().map(|f| f.as_raw_fd()).collect();
        for _ in 0..h.fds {
            let fds = out_fds.clone();
            let loops = h.loops;
            workers.push(create(thread_mode, move || sender(start, &fds, loops, datasize))?);
        }
        if thread_mode {
            kept.extend(outs);
        }
        // Process mode: dropping `outs` closes the main task's write ends.
    }
    let mut byte = [0u8; 1];
    for _ in 0..workers.len() {
        if let Err(e) = read_exact(ready_in.as_raw_fd(), &mut byte) {
            return Err(HostError::new("reading the ready pipe", e));
        }
    }
    let t0 = now_ns();
    if let Err(e) = write_all(wake_out.as_raw_fd(), b"W") {
        return Err(HostError::new("writing the wake byte", e));
    }
    let mut failed = false;
    for w in workers {
        match w {
            Worker::Process => reap_any()?,
            Worker::Thread(h) => failed |= !h.join().unwrap_or(false),
        }
    }
    let elapsed = now_ns() - t0;
    drop(kept);
    if failed {
        return Err(HostError::new("a worker thread", "a read or write failed"));
    }
    Ok(elapsed)
}
