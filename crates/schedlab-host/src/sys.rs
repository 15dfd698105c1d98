//! The system calls both calibrate and the real workloads make, each error
//! naming the call it came from. A short write or read is continued, an
//! interrupted one retried.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;

/// The last OS error, prefixed with the call that failed.
pub fn last_err(call: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{call}: {e}"))
}

fn interrupted() -> bool {
    io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
}

/// CLOCK_MONOTONIC in ns.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the kernel has charged the calling thread, ns (CLOCK_THREAD_CPUTIME_ID:
/// its sum_exec_runtime, brought up to date by the call).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; the thread CPU-time clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Busy for `ns`, reading the clock.
pub fn spin_for(ns: u64) {
    let start = now_ns();
    while now_ns().saturating_sub(start) < ns {
        std::hint::spin_loop();
    }
}

/// pipe2(O_CLOEXEC): (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(last_err("pipe2"));
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC).
pub fn unix_stream_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) } != 0 {
        return Err(last_err("socketpair(AF_UNIX, SOCK_STREAM)"));
    }
    // SAFETY: two fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `buf`.
pub fn write_all(fd: RawFd, buf: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unwritten rest of buf.
        let n = unsafe { libc::write(fd, buf[done..].as_ptr().cast(), buf.len() - done) };
        if n < 0 && interrupted() {
            continue;
        }
        if n <= 0 {
            return Err(last_err("write"));
        }
        done += n as usize;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes; end of file first is an error.
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: the pointer and length describe the unfilled rest of buf.
        let n = unsafe { libc::read(fd, buf[done..].as_mut_ptr().cast(), buf.len() - done) };
        if n < 0 && interrupted() {
            continue;
        }
        if n < 0 {
            return Err(last_err("read"));
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read: unexpected end of file"));
        }
        done += n as usize;
    }
    Ok(())
}

/// FUTEX_WAIT_PRIVATE while `word` holds `expected`, at most `timeout_ns` if given.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) {
    let ts = timeout_ns
        .map(|ns| libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: word is a live, aligned u32; ts outlives the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, ts_ptr) };
}

/// FUTEX_WAKE_PRIVATE of up to `n` waiters; how many were woken.
pub fn futex_wake(word: &AtomicU32, n: i32) -> io::Result<i64> {
    // SAFETY: word is a live, aligned u32.
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n) };
    if r < 0 {
        return Err(last_err("futex(FUTEX_WAKE)"));
    }
    Ok(r)
}

/// The CPU set of `cpus`.
pub fn cpu_set_of(cpus: &[usize]) -> io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("CPU {cpu} is beyond CPU_SETSIZE")));
        }
        // SAFETY: cpu < CPU_SETSIZE was checked, so the bit is inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    Ok(set)
}

/// sched_setaffinity() of the calling thread (and what it creates from now on).
pub fn set_affinity(set: &libc::cpu_set_t) -> io::Result<()> {
    // SAFETY: pid 0 is the calling thread; set is a valid cpu_set_t of the given size.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) } != 0 {
        return Err(last_err("sched_setaffinity"));
    }
    Ok(())
}

/// Makes the calling thread a sleeper for timing sleeps: pinned to `cpu`, its
/// timer slack 1 ns (so a sleep ends when asked, not up to 50 us later). Both
/// die with the thread, which should be one of its own. Returns its thread id.
pub fn exact_sleeper_on(cpu: usize) -> io::Result<u32> {
    set_affinity(&cpu_set_of(&[cpu])?)?;
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
        return Err(last_err("prctl(PR_SET_TIMERSLACK)"));
    }
    // SAFETY: gettid has no preconditions.
    Ok(unsafe { libc::gettid() } as u32)
}

/// O_NONBLOCK on `fd`.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } != 0 {
        return Err(last_err("fcntl(O_NONBLOCK)"));
    }
    Ok(())
}

/// The longest a supervising process sleeps in one wait for its run: a signal
/// ends the wait at once (the handlers have no SA_RESTART, and poll() is never
/// restarted), except one that lands just before the wait begins, which is
/// seen this much later at most. The owner wakes once a second, not a hundred
/// times: each of its wakeups lands on a vCPU the run is using and preempts a
/// task of the run there (`perf bench` has no such poller either).
pub const SUPERVISOR_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// Waits until `fd` is readable or hung up, at most `timeout` (and at most
/// [`SUPERVISOR_WAIT_MAX`]): true if it is. A signal cuts the wait short
/// (false).
pub fn wait_readable(fd: RawFd, timeout: std::time::Duration) -> io::Result<bool> {
    match poll_readable(fd, timeout.min(SUPERVISOR_WAIT_MAX).as_millis() as libc::c_int) {
        Err(e) if e.raw_os_error() == Some(libc::EINTR) => Ok(false),
        r => r,
    }
}

/// poll() for `fd` readable (or hung up), at most `timeout_ms` (-1: no limit):
/// true if it is; EINTR comes back as an error.
pub fn poll_readable(fd: RawFd, timeout_ms: libc::c_int) -> io::Result<bool> {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    match unsafe { libc::poll(&mut p, 1, timeout_ms) } {
        r if r < 0 => Err(io::Error::last_os_error()),
        r => Ok(r > 0),
    }
}

/// A pidfd of child `pid` (`pidfd_open()`, Linux 5.3+), readable once the child
/// has exited; None where the kernel has none.
pub fn pidfd_open(pid: libc::pid_t) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor the kernel just opened for us.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Waits for child `pid` (retrying on EINTR); its raw wait status.
pub fn wait_for(pid: libc::pid_t) -> io::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Ok(status);
        }
        if !interrupted() {
            return Err(last_err(&format!("waitpid({pid})")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};

    /// An empty pipe waits out its timeout; one with a byte in it, or whose
    /// writer has gone, is readable at once; the wait never exceeds
    /// SUPERVISOR_WAIT_MAX.
    #[test]
    fn wait_readable_waits_for_data_a_hang_up_or_the_time() {
        let (r, w) = pipe().unwrap();
        let t = Instant::now();
        assert!(!wait_readable(r.as_raw_fd(), Duration::from_millis(30)).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(25), "{:?}", t.elapsed());
        let t = Instant::now();
        assert!(!wait_readable(r.as_raw_fd(), Duration::from_secs(30)).unwrap());
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(900) && waited < Duration::from_secs(5), "{waited:?}");
        write_all(w.as_raw_fd(), b"x").unwrap();
        assert!(wait_readable(r.as_raw_fd(), Duration::from_secs(5)).unwrap());
        let (r2, w2) = pipe().unwrap();
        drop(w2);
        assert!(wait_readable(r2.as_raw_fd(), Duration::from_secs(5)).unwrap());
    }

    /// A child's pidfd turns readable when the child exits.
    #[test]
    fn a_pidfd_is_readable_once_the_child_exits() {
        // SAFETY: the child only sleeps and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: async-signal-safe calls in the child.
            unsafe {
                libc::usleep(50_000);
                libc::_exit(0);
            }
        }
        let Some(fd) = pidfd_open(pid) else {
            wait_for(pid).unwrap();
            return; // a kernel without pidfds: Supervised::wait polls instead
        };
        let t = Instant::now();
        assert!(wait_readable(fd.as_raw_fd(), Duration::from_secs(5)).unwrap());
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(wait_for(pid).unwrap(), 0);
    }
}
