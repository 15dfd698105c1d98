//! The few system calls the real workloads make, with perf bench's error rules:
//! a short write or read is continued, any error ends the worker.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

use crate::HostError;

pub fn os_err(what: &str) -> HostError {
    HostError::new(what, std::io::Error::last_os_error())
}

/// A pipe or an AF_UNIX stream socket pair, as perf bench's fdpair() makes them:
/// (read end, write end).
pub fn fdpair(pipe: bool) -> Result<(OwnedFd, OwnedFd), HostError> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: both calls fill a two-element array.
    let r = unsafe {
        if pipe {
            libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC)
        } else {
            libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
        }
    };
    if r < 0 {
        return Err(os_err(if pipe { "pipe()" } else { "socketpair(AF_UNIX, SOCK_STREAM)" }));
    }
    // SAFETY: two new descriptors we own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `buf`, continuing short writes; false on error.
pub fn write_all(fd: RawFd, buf: &[u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the remaining part of a valid buffer.
        let r = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return false;
        }
        done += r as usize;
    }
    true
}

/// Reads exactly `buf.len()` bytes, continuing short reads; false on error or EOF.
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> bool {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the remaining part of a valid buffer.
        let r = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return false;
        }
        if r == 0 {
            return false;
        }
        done += r as usize;
    }
    true
}

/// Blocks until `fd` is readable (perf bench's wait for the start byte).
pub fn poll_in(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    loop {
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, -1) };
        if r == 1 {
            return true;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return false;
    }
}

/// CLOCK_MONOTONIC in ns.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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

/// FUTEX_WAIT_PRIVATE while `word` still holds `expected`.
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: a valid aligned u32 in memory shared by this process's threads.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

/// FUTEX_WAKE_PRIVATE of up to `n` waiters.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: as futex_wait.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n) };
}

/// Stack for worker threads: perf bench asks for PTHREAD_STACK_MIN; Rust code
/// needs a little more.
pub const THREAD_STACK_BYTES: usize = 64 * 1024;
