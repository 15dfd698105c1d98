//! What only the real workloads need beyond crate::sys: perf bench's fdpair(),
//! ready/poll, and workers as forked processes.

use std::os::fd::{OwnedFd, RawFd};

use crate::HostError;

fn os_err(what: &str) -> HostError {
    HostError::new(what, std::io::Error::last_os_error())
}

/// A pipe or an AF_UNIX stream socket pair, as perf bench's fdpair() makes them:
/// (read end, write end; either end of a socket pair does both).
pub fn fdpair(pipe: bool) -> Result<(OwnedFd, OwnedFd), HostError> {
    let pair = if pipe { crate::sys::pipe() } else { crate::sys::unix_stream_pair() };
    pair.map_err(|e| HostError::new("creating a channel", e))
}

/// Blocks until `fd` is readable (perf bench's wait for the start byte).
pub fn poll_in(fd: RawFd) -> bool {
    loop {
        match crate::sys::poll_readable(fd, -1) {
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            r => return r.unwrap_or(false),
        }
    }
}

/// fork(); the child runs `body` and leaves with `_exit(0)`, or `_exit(1)` if it
/// returns false. Only for a single-threaded caller (the workload leader is one).
pub fn fork_worker(body: impl FnOnce() -> bool) -> Result<libc::pid_t, HostError> {
    // SAFETY: the caller is single-threaded, so the child's memory is consistent.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(os_err("fork()"));
    }
    if pid == 0 {
        let ok = body();
        // SAFETY: leave without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    Ok(pid)
}

/// wait() for any child; Err if it did not exit with status 0.
pub fn reap_any() -> Result<(), HostError> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own children.
        let r = unsafe { libc::wait(&mut status) };
        if r >= 0 {
            break;
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_err("wait()"));
        }
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(HostError::new("a worker process", format!("failed (wait status {status:#x})")));
    }
    Ok(())
}

/// Stack for worker threads: perf bench asks for PTHREAD_STACK_MIN; Rust code
/// needs a little more.
pub const THREAD_STACK_BYTES: usize = 64 * 1024;
