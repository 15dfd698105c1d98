//! The kernel's own counters for a whole task tree, as `perf stat` reads them.
//!
//! `perf stat -e context-switches,cpu-migrations,task-clock -- CMD` opens software
//! counters on CMD with `inherit` set, so every process and thread CMD creates
//! afterwards gets its own counter whose total is added to the parent's when it
//! exits (kernel/events/core.c, perf_event_exit_task → sync_child_event). Opening
//! the same three counters on the calling task, before it creates any worker, and
//! reading them after every worker has been reaped gives the same numbers for the
//! same tree. Where perf_event_open is refused (perf_event_paranoid, seccomp,
//! a kernel without perf events) the fallback is getrusage(): voluntary plus
//! involuntary switches of the caller and its reaped children (the same events:
//! every switch-out of the task), CPU time from utime + stime, and no migrations.

use std::os::fd::{FromRawFd, OwnedFd};

use crate::HostError;

/// perf_event_attr as of PERF_ATTR_SIZE_VER0 (64 bytes), enough for software
/// counting events (include/uapi/linux/perf_event.h).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttrV0 {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit field: bit 0 `disabled`, bit 1 `inherit`, ...
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
const ATTR_FLAG_INHERIT: u64 = 1 << 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// How the counts were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterSource {
    /// Software perf events with inherit, the same as `perf stat`.
    PerfEvents,
    /// getrusage(SELF) + getrusage(CHILDREN): switches and CPU time, no migrations.
    Rusage,
}

impl CounterSource {
    pub fn name(self) -> &'static str {
        match self {
            CounterSource::PerfEvents => "perf_event_open (software, inherited)",
            CounterSource::Rusage => "getrusage (no migration count)",
        }
    }
}

/// What the tree did between `TreeCounters::open` and `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub context_switches: u64,
    /// None where the kernel's migration counter could not be opened.
    pub cpu_migrations: Option<u64>,
    pub task_clock_ns: u64,
    pub source: CounterSource,
}

/// Counters on the calling task and everything it creates from now on.
pub struct TreeCounters {
    perf: Option<[OwnedFd; 3]>,
    /// The rusage baseline, for the fallback.
    base: (u64, u64),
}

fn open_counter(config: u64) -> Result<OwnedFd, std::io::Error> {
    open_event(PERF_TYPE_SOFTWARE, config, ATTR_FLAG_INHERIT)
}

fn open_event(type_: u32, config: u64, flags: u64) -> Result<OwnedFd, std::io::Error> {
    let attr =
        PerfEventAttrV0 { type_, size: std::mem::size_of::<PerfEventAttrV0>() as u32, config, flags, ..Default::default() };
    // SAFETY: a valid attr of the size it declares; pid 0 = this task, cpu -1 = any.
    let fd =
        unsafe { libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttrV0, 0, -1, -1, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A count of one tracepoint's hits by the calling thread alone (not inherited),
/// from its opening on: what the kernel did on this thread's behalf.
pub struct TracepointCounter(OwnedFd);

impl TracepointCounter {
    /// Opens `<subsystem>:<event>`; fails where tracefs or perf events are refused.
    pub fn open(subsystem: &str, event: &str) -> Result<TracepointCounter, HostError> {
        let id = crate::tracefs::event_id(subsystem, event)?;
        open_event(PERF_TYPE_TRACEPOINT, id, 0)
            .map(TracepointCounter)
            .map_err(|e| HostError::new(format!("counting tracepoint {subsystem}:{event} (perf_event_open)"), e))
    }

    /// The hits so far.
    pub fn read(&self) -> Result<u64, HostError> {
        read_u64(&self.0).map_err(|e| HostError::new("reading a tracepoint counter", e))
    }
}

/// A counter's value (a read of 8 bytes from its descriptor).
fn read_u64(fd: &OwnedFd) -> Result<u64, std::io::Error> {
    use std::os::fd::AsRawFd;
    let mut buf = [0u8; 8];
    // SAFETY: reading 8 bytes into an 8-byte buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
    if n != 8 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(buf))
}

/// (switches, cpu ns) of this process (all its threads) plus its reaped children.
fn rusage_totals() -> (u64, u64) {
    let mut total = (0u64, 0u64);
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: getrusage fills the struct we pass.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut ru) };
        let tv_ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
        total.0 += (ru.ru_nvcsw + ru.ru_nivcsw) as u64;
        total.1 += tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
    }
    total
}

impl TreeCounters {
    /// Opens the counters, falling back to getrusage if perf events are refused.
    pub fn open() -> TreeCounters {
        let perf = (|| {
            Ok::<_, std::io::Error>([
                open_counter(PERF_COUNT_SW_CONTEXT_SWITCHES)?,
                open_counter(PERF_COUNT_SW_CPU_MIGRATIONS)?,
                open_counter(PERF_COUNT_SW_TASK_CLOCK)?,
            ])
        })()
        .ok();
        TreeCounters { perf, base: rusage_totals() }
    }

    /// Like [`open`](Self::open), but fails instead of falling back.
    pub fn open_perf_only() -> Result<TreeCounters, HostError> {
        let c = TreeCounters::open();
        if c.perf.is_none() {
            let e = open_counter(PERF_COUNT_SW_CONTEXT_SWITCHES).err();
            let reason = e.map_or_else(|| "refused".to_string(), |e| e.to_string());
            return Err(HostError::new("opening perf software counters (perf_event_open)", reason));
        }
        Ok(c)
    }

    pub fn source(&self) -> CounterSource {
        if self.perf.is_some() {
            CounterSource::PerfEvents
        } else {
            CounterSource::Rusage
        }
    }

    /// The totals so far. Call after every worker has been reaped (waited for or
    /// joined): a live child's counts are not yet in its parent's counter.
    pub fn read(&self) -> Result<Counts, HostError> {
        match &self.perf {
            Some(fds) => {
                let mut v = [0u64; 3];
                for (fd, slot) in fds.iter().zip(v.iter_mut()) {
                    *slot = read_u64(fd).map_err(|e| HostError::new("reading a perf counter", e))?;
                }
                Ok(Counts {
                    context_switches: v[0],
                    cpu_migrations: Some(v[1]),
                    task_clock_ns: v[2],
                    source: CounterSource::PerfEvents,
                })
            }
            None => {
                let now = rusage_totals();
                Ok(Counts {
                    context_switches: now.0 - self.base.0,
                    cpu_migrations: None,
                    task_clock_ns: now.1 - self.base.1,
                    source: CounterSource::Rusage,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracepoint_counter_counts_this_threads_hits_only() {
        // Needs root (or CAP_PERFMON) and tracefs: skipped where refused.
        let forks = match TracepointCounter::open("sched", "sched_process_fork") {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let spawn_three = || {
            for _ in 0..3 {
                std::process::Command::new("true").status().expect("run true");
            }
        };
        spawn_three();
        // Creating a thread is a clone by this thread too (kernel_clone() fires
        // the tracepoint), but that thread's own three are not this thread's.
        std::thread::spawn(spawn_three).join().unwrap();
        assert_eq!(forks.read().unwrap(), 3 + 1);
    }

    #[test]
    fn attr_is_the_v0_size() {
        assert_eq!(std::mem::size_of::<PerfEventAttrV0>(), 64);
    }

    /// A child that sleeps 20 times switches out at least 20 times, and the
    /// switches reach the parent's counter once the child is reaped.
    #[test]
    fn a_reaped_childs_switches_are_counted() {
        let c = TreeCounters::open();
        let before = c.read().unwrap();
        let child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sleep 0.001; done")
            .status()
            .unwrap();
        assert!(child.success());
        let after = c.read().unwrap();
        assert!(after.context_switches >= before.context_switches + 20, "{before:?} -> {after:?}");
        assert!(after.task_clock_ns > before.task_clock_ns);
    }
}
