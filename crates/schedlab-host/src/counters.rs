//! The kernel's own counters for a whole task tree, counted so that counting
//! costs the tree nothing at its switches.
//!
//! `perf stat -e context-switches,cpu-migrations,task-clock -- CMD` opens software
//! counters on CMD with `inherit` set, so every process and thread CMD creates
//! gets its own counters, summed into the parent's at exit (kernel/events/core.c,
//! perf_event_exit_task → sync_child_event). A task with perf events of its own
//! pays for them at every switch: `perf_event_task_sched_out()` and
//! `perf_event_task_sched_in()` stop and start its events, timestamps and all.
//! On this project's hosts that is 0.45 us a switch for one such counter and
//! 0.65-0.70 us for perf stat's three (a ring of 40 processes passing a byte
//! through pipes on one vCPU: 4.22-4.30 us a hop alone, 4.92-4.94 us under
//! `perf stat -e context-switches,cpu-migrations,task-clock`, 4.73-4.77 us with
//! any one of them; per-CPU counting with `-a` 4.29-4.46 us): the observer's cost,
//! which a real run measured that way charges to the machine.
//!
//! So the default here ([`CounterMethod::Quiet`]) puts no event on the tree's
//! tasks. Switches and CPU time come from getrusage() of the caller and its reaped
//! children: every switch-out of a task is one voluntary or involuntary switch
//! (`__schedule()` counts `nvcsw`/`nivcsw` where perf counts context-switches),
//! and utime + stime add up to the tasks' `sum_exec_runtime` (`cputime_adjust()`
//! scales the two to it), which is task-clock. Migrations come from per-CPU
//! counts of the `sched:sched_migrate_task` tracepoint on every online CPU,
//! filtered on the tree's comm: `set_task_cpu()` fires it where it counts the
//! task's `nr_migrations` and perf's cpu-migrations (a placement elsewhere at
//! wakeup, a balancer's move), so only a migration pays, and only a tracepoint.
//! The filter takes every task of that comm on the host: the tree carries the
//! workload's comm (`hackbench`, `perf`, `schbench`), and a program of that
//! name running beside it would be counted too. That needs what per-CPU tracepoint
//! counting needs (root, or CAP_PERFMON, and tracefs); where it is refused the
//! counters fall back to perf stat's inherited ones ([`CounterMethod::Inherited`],
//! which can also be asked for), and where those are refused too to getrusage()
//! alone, without migrations.

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

/// How a tree's counts are to be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterMethod {
    /// Nothing on the tree's tasks: getrusage() and per-CPU migration counts.
    Quiet,
    /// perf stat's inherited software counters, which cost every switch.
    Inherited,
}

impl CounterMethod {
    /// The command-line name (`--counters`).
    pub fn name(self) -> &'static str {
        match self {
            CounterMethod::Quiet => "quiet",
            CounterMethod::Inherited => "inherited",
        }
    }
}

/// How the counts were obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterSource {
    /// getrusage() for switches and CPU time, per-CPU tracepoint counts for
    /// migrations.
    Quiet,
    /// Software perf events with inherit, the same as `perf stat`.
    PerfEvents,
    /// getrusage(SELF) + getrusage(CHILDREN): switches and CPU time, no migrations.
    Rusage,
}

impl CounterSource {
    pub fn name(self) -> &'static str {
        match self {
            CounterSource::Quiet => "getrusage + per-CPU sched_migrate_task counts of the tree's comm",
            CounterSource::PerfEvents => "perf_event_open (software, inherited: each costs the tree's switches)",
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

enum Counting {
    /// One `sched:sched_migrate_task` counter per online CPU, filtered on a comm.
    Quiet(Vec<OwnedFd>),
    /// context-switches, cpu-migrations and task-clock, inherited.
    Inherited([OwnedFd; 3]),
    Rusage,
}

/// Counters on the calling task and everything it creates from now on.
pub struct TreeCounters {
    counting: Counting,
    /// The rusage baseline (switches, CPU ns).
    base: (u64, u64),
}

fn open_counter(config: u64) -> Result<OwnedFd, std::io::Error> {
    open_event(PERF_TYPE_SOFTWARE, config, ATTR_FLAG_INHERIT, EventTarget::ThisTask)
}

/// What a counting event counts.
#[derive(Clone, Copy)]
enum EventTarget {
    /// The calling task, on any CPU (pid 0, cpu -1).
    ThisTask,
    /// Every task while it runs on this CPU (pid -1).
    Cpu(usize),
}

fn open_event(type_: u32, config: u64, flags: u64, target: EventTarget) -> Result<OwnedFd, std::io::Error> {
    let attr =
        PerfEventAttrV0 { type_, size: std::mem::size_of::<PerfEventAttrV0>() as u32, config, flags, ..Default::default() };
    let (pid, cpu): (libc::pid_t, libc::c_int) = match target {
        EventTarget::ThisTask => (0, -1),
        EventTarget::Cpu(cpu) => (-1, cpu as libc::c_int),
    };
    // SAFETY: a valid attr of the size it declares, no group leader.
    let fd =
        unsafe { libc::syscall(libc::SYS_perf_event_open, &attr as *const PerfEventAttrV0, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC) };
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
        open_event(PERF_TYPE_TRACEPOINT, id, 0, EventTarget::ThisTask)
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

/// `PERF_EVENT_IOC_SET_FILTER`: `_IOW('$', 6, char *)` (include/uapi/linux/perf_event.h).
const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// Per online CPU, a count of `sched:sched_migrate_task` for tasks named `comm`.
fn open_migration_counts(comm: &str) -> Result<Vec<OwnedFd>, HostError> {
    use std::os::fd::AsRawFd;
    if comm.is_empty() || comm.len() > 15 || !comm.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
        return Err(HostError::new("counting the tree's migrations", format!("comm {comm:?} cannot be filtered on")));
    }
    let id = crate::tracefs::event_id("sched", "sched_migrate_task")?;
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(|e| HostError::new("reading /sys/devices/system/cpu/online", e))?;
    let cpus = schedlab_core::topology::parse_cpu_list(online.trim())
        .ok_or_else(|| HostError::new("reading /sys/devices/system/cpu/online", format!("not a CPU list: {online:?}")))?;
    let filter = std::ffi::CString::new(format!("comm == \"{comm}\"")).expect("no NUL in a checked comm");
    cpus.into_iter()
        .map(|cpu| {
            let what = || format!("counting sched:sched_migrate_task on CPU {cpu} (perf_event_open)");
            let fd = open_event(PERF_TYPE_TRACEPOINT, id, 0, EventTarget::Cpu(cpu)).map_err(|e| HostError::new(what(), e))?;
            // SAFETY: the filter is a NUL-terminated string the kernel copies.
            if unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER as _, filter.as_ptr()) } != 0 {
                return Err(HostError::new(what(), std::io::Error::last_os_error()));
            }
            Ok(fd)
        })
        .collect()
}

fn open_inherited() -> Result<[OwnedFd; 3], std::io::Error> {
    Ok([
        open_counter(PERF_COUNT_SW_CONTEXT_SWITCHES)?,
        open_counter(PERF_COUNT_SW_CPU_MIGRATIONS)?,
        open_counter(PERF_COUNT_SW_TASK_CLOCK)?,
    ])
}

impl TreeCounters {
    /// Opens the counters for a tree whose tasks are all named `comm` (the
    /// caller's, which its workers inherit): by `method`, falling back to
    /// perf stat's inherited counters and then to getrusage() alone where the
    /// host refuses (the result's source says which).
    pub fn open(method: CounterMethod, comm: &str) -> TreeCounters {
        let base = rusage_totals();
        let quiet = || open_migration_counts(comm).ok().map(Counting::Quiet);
        let inherited = || open_inherited().ok().map(Counting::Inherited);
        let counting = match method {
            CounterMethod::Quiet => quiet().or_else(inherited),
            CounterMethod::Inherited => inherited(),
        };
        TreeCounters { counting: counting.unwrap_or(Counting::Rusage), base }
    }

    /// Like [`open`](Self::open) by `method` alone: fails, with the host's
    /// reason, where that method cannot count migrations.
    pub fn open_exactly(method: CounterMethod, comm: &str) -> Result<TreeCounters, HostError> {
        let base = rusage_totals();
        let counting = match method {
            CounterMethod::Quiet => Counting::Quiet(open_migration_counts(comm)?),
            CounterMethod::Inherited => Counting::Inherited(
                open_inherited().map_err(|e| HostError::new("opening perf software counters (perf_event_open)", e))?,
            ),
        };
        Ok(TreeCounters { counting, base })
    }

    /// The totals so far. Call after every worker has been reaped (waited for or
    /// joined): a live child's counts are not yet in its parent's totals.
    pub fn read(&self) -> Result<Counts, HostError> {
        let rusage = || {
            let now = rusage_totals();
            (now.0 - self.base.0, now.1 - self.base.1)
        };
        let counts = match &self.counting {
            Counting::Quiet(fds) => {
                let mut migrations = 0;
                for fd in fds {
                    migrations += read_u64(fd).map_err(|e| HostError::new("reading a migration counter", e))?;
                }
                let (context_switches, task_clock_ns) = rusage();
                Counts { context_switches, cpu_migrations: Some(migrations), task_clock_ns, source: CounterSource::Quiet }
            }
            Counting::Inherited(fds) => {
                let mut v = [0u64; 3];
                for (fd, slot) in fds.iter().zip(v.iter_mut()) {
                    *slot = read_u64(fd).map_err(|e| HostError::new("reading a perf counter", e))?;
                }
                Counts {
                    context_switches: v[0],
                    cpu_migrations: Some(v[1]),
                    task_clock_ns: v[2],
                    source: CounterSource::PerfEvents,
                }
            }
            Counting::Rusage => {
                let (context_switches, task_clock_ns) = rusage();
                Counts { context_switches, cpu_migrations: None, task_clock_ns, source: CounterSource::Rusage }
            }
        };
        Ok(counts)
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
        let c = TreeCounters::open(CounterMethod::Quiet, "sh");
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

    /// A thread of the tree's comm moved between two CPUs 10 times (each move a
    /// migration by the stopper, `move_queued_task()` → `set_task_cpu()`) is
    /// counted 10 times, and the other threads of the host not at all.
    #[test]
    fn the_quiet_counters_count_the_trees_migrations_only() {
        let comm = format!("sl-mig-{}", std::process::id() % 100_000);
        let c = match TreeCounters::open_exactly(CounterMethod::Quiet, &comm) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let Ok(online) = std::fs::read_to_string("/sys/devices/system/cpu/online") else { return };
        let cpus = schedlab_core::topology::parse_cpu_list(online.trim()).unwrap_or_default();
        if cpus.len() < 2 {
            eprintln!("skipped: one CPU");
            return;
        }
        let (a, b) = (cpus[0], cpus[1]);
        let name = std::ffi::CString::new(comm.clone()).unwrap();
        let moved = std::thread::spawn(move || {
            // SAFETY: PR_SET_NAME with a NUL-terminated string, on this thread.
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
            crate::sys::set_affinity(&crate::sys::cpu_set_of(&[a]).unwrap()).unwrap();
            for i in 0..10 {
                let to = if i % 2 == 0 { b } else { a };
                crate::sys::set_affinity(&crate::sys::cpu_set_of(&[to]).unwrap()).unwrap();
            }
        });
        moved.join().unwrap();
        let counts = c.read().unwrap();
        assert_eq!(counts.source, CounterSource::Quiet);
        // The first pin may or may not move the new thread (it starts where
        // the spawner placed it); the ten moves after it always do.
        let m = counts.cpu_migrations.unwrap();
        assert!((10..=11).contains(&m), "{counts:?}");
    }
}
