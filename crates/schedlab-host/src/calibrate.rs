//! `schedlab calibrate`: measures the running Linux host with real processes and
//! threads and returns a [`MachineProfile`] for it.
//!
//! Every number is the median of several repetitions of a tight loop, so one
//! preemption or vCPU stall does not move it. What user space cannot see directly
//! (how an IPI splits into send cost and flight time, idle exit, cache refill,
//! scheduler search costs) is derived from differences between measurements; the
//! derivation of each field is written next to it and repeated, with the numbers
//! that went into it, in the profile's `sources`. Fields this host cannot exercise at
//! all (a cross-node migration on a one-node machine, IPIs on a one-CPU machine) get
//! a documented estimate and are listed as estimated.
//!
//! Side effects, all undone or harmless: the calling thread is pinned to CPUs while
//! measuring (its affinity is restored before returning), the
//! process registers for `membarrier(PRIVATE_EXPEDITED)` (a permanent per-process
//! flag with no cost), and short-lived child processes and threads are created; every
//! child is killed and reaped before `calibrate` returns, on success or error.

use std::hint::black_box;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::background;
use crate::counters::TracepointCounter;
use crate::halted_exit;
use crate::sys::{
    cpu_set_of, futex_wait, futex_wake, now_ns, pipe, read_exact, set_affinity, spin_for, thread_cpu_ns, write_all,
};
use crate::timer_program;
use schedlab_core::cost::{
    BackgroundThreads, ColdStep, MachineProfile, MigrationCost, SchedOpCost, SwitchCold, TlbProfile, TICK_IRQ_MAX_NS,
};

/// What `schedlab calibrate` was asked for.
pub struct CalibrateOptions {
    /// Profile name written into the result, e.g. `mybox`.
    pub name: String,
    /// Fewer repetitions and smaller buffers: under ~3 s instead of under ~30 s.
    pub quick: bool,
}

/// What tells one state of this host from another: the two-CPU figures that move
/// together with the real runs on this project's guests, minutes apart. The
/// hypervisor's placement of the two vCPUs moves the cache-line transfer between
/// them (36 or 232 ns), and the host's handling of a halted vCPU moves what waking
/// a sleeper on an idle vCPU costs the waker (1.7 or 2.8 us beyond a FUTEX_WAKE of
/// nobody); perf bench sched pipe took 11.2 us or 13.5 us a round trip with them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostSignature {
    /// One-way transfer of a modified cache line between the two CPUs.
    pub cache_line_ns: f64,
    /// A FUTEX_WAKE of a sleeper on the other, idle, CPU beyond one of nobody;
    /// None where an idle CPU polls (no IPI to price) or it is not known.
    pub idle_wake_ns: Option<f64>,
}

impl HostSignature {
    /// The state a profile calibrated on this host was measured in.
    pub fn of_profile(p: &MachineProfile) -> HostSignature {
        HostSignature {
            cache_line_ns: p.cache_line_ns as f64,
            idle_wake_ns: p.ipi_send_idle_ns.filter(|_| !p.idle_polls).map(|send| (send + p.wakeup_ns) as f64),
        }
    }

    /// Whether two signatures are one state: every figure both have within
    /// [`HOST_STATE_FACTOR`].
    pub fn same_state(&self, other: &HostSignature) -> bool {
        same_host_state(self.cache_line_ns, other.cache_line_ns)
            && match (self.idle_wake_ns, other.idle_wake_ns) {
                (Some(a), Some(b)) => same_host_state(a, b),
                _ => true,
            }
    }
}

/// This host's state measured again, as calibrate measures its figures (quick
/// mode: tens of milliseconds): the signature, with the two CPUs it was read on
/// (those calibrate uses). None with only one CPU allowed.
pub fn probe_host_state() -> Result<Option<(usize, usize, HostSignature)>> {
    let host = Host::detect()?;
    let Some(cpu_b) = host.cpu_b else { return Ok(None) };
    let _affinity = AffinityGuard::save()?;
    Ok(Some((host.cpu_a, cpu_b, read_signature(host.cpu_a, cpu_b)?)))
}

/// The host's signature between `cpu_a` and `cpu_b`, quick mode.
fn read_signature(cpu_a: usize, cpu_b: usize) -> Result<HostSignature> {
    let plan = Plan::new(true);
    let cache_line_ns = cache_line_transfer_ns(cpu_a, cpu_b, &plan)?;
    pin_current_thread(cpu_a)?;
    let timer_ns = timer_overhead_ns();
    let cfg = WakeConfig {
        waker_cpu: cpu_a,
        wakee_cpu: cpu_b,
        target: WakeTarget::Idle,
        samples: plan.wake_samples,
        settle_ns: 50_000,
    };
    let idle = run_wake_bench(&cfg, timer_ns)?;
    let polls = idle_polls_counted(idle.signals) == Some(true);
    let word = AtomicU32::new(0);
    pin_current_thread(cpu_a)?;
    let noop_ns = time_per_op(plan.reps, plan.syscall_iters / 4, || Ok(futex_wake(&word, 1).map(drop)?))?;
    let idle_wake_ns = median(idle.call_ns).filter(|_| !polls).map(|call| call - noop_ns);
    Ok(HostSignature { cache_line_ns, idle_wake_ns })
}

/// Whether the idle CPU was found polling more often than it was sent an IPI,
/// from the kernel's counts (found polling, IPIs sent); None without counts.
fn idle_polls_counted(signals: Option<(u64, u64)>) -> Option<bool> {
    signals.filter(|&(flag, ipis)| flag + ipis > 0).map(|(flag, ipis)| flag > ipis)
}

/// Two readings of a state figure ([`HostSignature`]) more than this factor apart
/// come from two states of the host, not from noise: readings within one state
/// spread by about 15% (the cache line) and 5% (the idle wake); the states this
/// project's guests show differ 6x and 1.6x (docs/validate.md).
pub const HOST_STATE_FACTOR: f64 = 1.5;

/// Whether two readings of one state figure come from one state of the host.
pub fn same_host_state(a_ns: f64, b_ns: f64) -> bool {
    a_ns <= b_ns * HOST_STATE_FACTOR && b_ns <= a_ns * HOST_STATE_FACTOR
}

/// How often calibrate measures its two-CPU figures when the host keeps changing
/// state under them.
const CROSS_CPU_ATTEMPTS: usize = 3;

/// Whether `profile` is a calibrate of this host (its CPU model, allowed CPUs
/// and kernel), so that its cross-CPU state can be compared with the host's now.
pub fn is_profile_of_this_host(profile: &MachineProfile) -> bool {
    Host::detect().is_ok_and(|h| h.profile_description() == profile.description)
}

/// Measures this host and returns its machine profile.
pub fn calibrate(opts: &CalibrateOptions) -> Result<MachineProfile> {
    let plan = Plan::new(opts.quick);
    let host = Host::detect()?;
    // Restore the caller's affinity however we leave.
    let _affinity = AffinityGuard::save()?;
    let mut notes = Notes::default();
    notes.info(format!(
        "schedlab calibrate ({} mode) on {} ({} CPUs allowed), Linux {}; CPUs used: {} and {}",
        if opts.quick { "quick" } else { "full" },
        host.model,
        host.allowed.len(),
        host.kernel,
        host.cpu_a,
        host.cpu_b.map_or_else(|| "none".to_string(), |c| c.to_string()),
    ));

    // The host's own background threads, recorded first: the kernel work the
    // measurements below cause (freeing their buffers, writing back) is not the
    // host's background.
    let background = background_threads(&host, &plan, &mut notes);

    pin_current_thread(host.cpu_a)?;
    let timer_ns = timer_overhead_ns();

    // --- Single-CPU measurements -------------------------------------------------
    let cpu_mhz = match core_clock_mhz(plan.reps) {
        Some(mhz) => {
            let v = floor(mhz, 100);
            notes.measured(format!(
                "cpu_mhz = {v}: a chain of {CLOCK_CHAIN_ADDS} dependent adds (one cycle each) timed, median of {} reps",
                plan.reps
            ));
            Some(v)
        }
        None => {
            notes.estimated("cpu_mhz: not measured on this architecture (x86-64 and arm64 only); left out".to_string());
            None
        }
    };
    let mut tick_hz = None;
    let tick_irq_ns = match tick_irq(host.cpu_a, plan.tick_ms) {
        Ok(t) => {
            tick_hz = Some(t.hz);
            let v = floor(t.median_ns, 1);
            notes.measured(format!(
                "tick_irq_ns = {v}: median of the {} gaps a clock-reading spinner on CPU {} saw at the tick's \
                 phase in {} ms (HZ = {}: {:.0} local timer interrupts a second on that CPU; {} other gaps over \
                 {TICK_GAP_MIN_NS} ns, median {:.0} ns, not charged)",
                t.tick_gaps, host.cpu_a, plan.tick_ms, t.hz, t.timer_irqs_per_s, t.other_gaps, t.other_median_ns
            ));
            v
        }
        Err(e) => {
            notes.estimated(format!("tick_irq_ns = 0: the tick was not measured ({e:#}); not charged"));
            0
        }
    };

    // Arming a timer that expires before the next tick reprograms the timer
    // device: sleeps of half a tick period from a sleeper's clock read to its
    // switch out fall in two groups, apart by the programming.
    let tick_ns = 1_000_000_000 / tick_hz.unwrap_or(250);
    let timer_program_ns = match timer_program::measure(host.cpu_a, plan.timer_sleeps, tick_ns) {
        Ok(t) => {
            let v = floor(t.program_ns(), 0);
            notes.measured(format!(
                "timer_program_ns = {v}: a sleeper on CPU {} sleeping {} us (half a tick) from its clock read to \
                 its switch out (sched_switch on the monotonic trace clock, microsecond text): {} sleeps took \
                 {:.0} ns (median; the timer came first and was programmed), {} took {:.0} ns (the tick came \
                 first), {} were woken before they switched",
                host.cpu_a,
                t.sleep_ns / 1000,
                t.slow,
                t.slow_median_ns,
                t.fast,
                t.fast_median_ns,
                t.unswitched
            ));
            v
        }
        Err(e) => {
            notes.estimated(format!("timer_program_ns = 0: not measured ({e}); not charged"));
            0
        }
    };

    let syscall = time_per_op(plan.reps, plan.syscall_iters, || {
        // SAFETY: getppid has no preconditions and cannot fail.
        black_box(unsafe { libc::getppid() });
        Ok(())
    })?;
    let syscall_ns = floor(syscall, 1);
    notes.measured(format!(
        "syscall_ns = {syscall_ns}: getppid() loop, median of {} reps x {} calls",
        plan.reps, plan.syscall_iters
    ));

    let mut pipe = Pipe::new()?;
    // One byte in and out of a pipe in one process: 2 syscalls + 2 pipe ops, no
    // blocking, no wakeup (nobody waits). Every write finds the pipe empty and
    // every read empties it: the derived costs below subtract this pair.
    let pipe_rw = time_per_op(plan.reps, plan.pipe_iters, || pipe.write_read(1))?;
    // The pipe call's own work apart from what emptiness adds: 1-byte writes and
    // reads on pipes that keep a byte (the write merges, the read leaves one)
    // against the same on empty pipes (the write starts a slot and tests for
    // readers, the read releases the slot). A stream of small messages, as
    // hackbench's, mostly makes the first kind of call.
    let empty = pipe_empty_ns(&plan, timer_ns)?;
    let pipe_op_ns = floor((empty.kept_write_ns + empty.kept_read_ns) / 2.0 - syscall, 1);
    let pipe_was_empty_ns = floor(empty.empty_write_ns - empty.kept_write_ns, 0);
    let pipe_emptied_ns = floor(empty.empty_read_ns - empty.kept_read_ns, 0);
    notes.measured(format!(
        "pipe_op_ns = {pipe_op_ns}, pipe_was_empty_ns = {pipe_was_empty_ns}, pipe_emptied_ns = {pipe_emptied_ns}: \
         1-byte writes / reads over {EMPTY_PIPES} pipes that keep a byte {:.0} / {:.0} ns a call (pipe_op_ns: \
         their mean - syscall), on {EMPTY_PIPES} empty pipes {:.0} / {:.0} ns (the write starts a slot and tests \
         for readers, the read releases it: the differences); in-process 1-byte write+read on one pipe \
         {pipe_rw:.0} ns",
        empty.kept_write_ns, empty.kept_read_ns, empty.empty_write_ns, empty.empty_read_ns
    ));

    // The inode time stamps a pipe call updates on kernels before v6.14
    // (`file_update_time()` in a write, `file_accessed()` in a read): a FIFO's
    // calls still make them, an anonymous pipe's no longer do, so the difference
    // prices them. On a host whose anonymous pipes stamp them too there is no
    // difference to measure and `pipe_op_ns` above already holds them.
    let (pipe_mtime_ns, pipe_atime_ns) = if schedlab_core::ipc::stamps_pipe_times(host_release()) {
        notes.estimated(
            "pipe_mtime_ns = pipe_atime_ns = 0: this kernel's anonymous pipes stamp their inode times \
             (before v6.14), so pipe_op_ns includes them"
                .to_string(),
        );
        (0, 0)
    } else {
        match pipe_stamp_ns(&plan, timer_ns) {
            Ok(m) => {
                let (mtime, atime) = (floor(m.fifo_write_ns - m.anon_write_ns, 0), floor(m.fifo_read_ns - m.anon_read_ns, 0));
                notes.measured(format!(
                    "pipe_mtime_ns = {mtime}, pipe_atime_ns = {atime}: 1-byte writes / reads in batches of \
                     {STAMP_BATCH} on a FIFO in {} ({:.0} / {:.0} ns a call) less the same on an anonymous pipe \
                     ({:.0} / {:.0} ns): file_update_time() and file_accessed(), which anonymous pipes skip from \
                     v6.14",
                    m.dir, m.fifo_write_ns, m.fifo_read_ns, m.anon_write_ns, m.anon_read_ns
                ));
                (mtime, atime)
            }
            Err(e) => {
                notes.estimated(format!("pipe_mtime_ns = pipe_atime_ns = 0: the FIFO measurement failed ({e:#})"));
                (0, 0)
            }
        }
    };

    // A pipe's slot pages: batches of 16 packets (`O_DIRECT`, one slot each)
    // written then read in one process, against batches that only use the spare
    // pages the pipe keeps (one, two from v6.15), which allocate and free nothing.
    let spares = host_pipe_spare_pages();
    let pages = pipe_page_ns(spares, &plan, timer_ns, (pipe_was_empty_ns as f64, pipe_emptied_ns as f64))?;
    let pipe_page_alloc_ns = floor(pages.alloc_ns, 0);
    let pipe_page_free_ns = floor(pages.free_ns, 0);
    notes.measured(format!(
        "pipe_page_alloc_ns = {pipe_page_alloc_ns}, pipe_page_free_ns = {pipe_page_free_ns}: 512-byte packets \
         written then read in batches of {PAGE_BATCH} ({:.0} / {:.0} ns a call) and of {spares} ({:.0} / {:.0} ns, \
         the pipe's spare pages only), the difference per page allocated / freed ({} a batch)",
        pages.batch_write_ns,
        pages.batch_read_ns,
        pages.spare_write_ns,
        pages.spare_read_ns,
        PAGE_BATCH - spares
    ));

    // The same with 32 KiB: the extra time is 2 copies of the extra bytes (user to
    // pipe page, pipe page to user) and the pages beyond the spares, each
    // allocated by the write and freed by the read.
    let big = 32 * 1024;
    let pipe_big = time_per_op(plan.reps, plan.copy_iters, || pipe.write_read(big))?;
    let big_pages = (big / 4096).saturating_sub(spares) as f64;
    let page_work = big_pages * (pipe_page_alloc_ns + pipe_page_free_ns) as f64;
    let copy_ps = floor((pipe_big - pipe_rw - page_work) * 1000.0 / (2.0 * (big - 1) as f64), 1);
    notes.measured(format!(
        "copy_ps_per_byte = {copy_ps}: ({pipe_big:.0} ns for a 32 KiB pipe write+read - \
         {pipe_rw:.0} ns for 1 byte - {big_pages:.0} pages allocated and freed) / (2 copies x 32767 bytes), \
         buffers cache-hot"
    ));
    drop(pipe);
    let copy100_ns = (100 * copy_ps) as f64 / 1000.0;

    // AF_UNIX stream, 100-byte messages as hackbench sends them, sender and receiver
    // in one process: a batch of sends timed, then the batch of receives.
    let (unix_send_call, unix_recv_call) = unix_send_recv_ns(&plan)?;
    let (send, recv) = (unix_send_call, unix_recv_call);
    let unix_send_ns = floor(send - syscall - copy100_ns, 1);
    let unix_recv_ns = floor(recv - syscall - copy100_ns, 1);
    notes.measured(format!(
        "unix_send_ns = {unix_send_ns}, unix_recv_ns = {unix_recv_ns}: socketpair(AF_UNIX, \
         SOCK_STREAM) write/read of 100 bytes, batches of {UNIX_BATCH}, per call {send:.0} / \
         {recv:.0} ns - syscall - copy(100 B)"
    ));

    // The same calls with data queued in many sockets, at footprints from a
    // fraction of the L2 to past the LLC: the extra over the cache-hot call at
    // each, a curve the engine follows between its steps.
    let footprints = cold_footprints(host.l2_bytes, host.llc_bytes);
    let unix_cold = cold_curve("unix_cold", footprints.clone(), &mut notes, |bytes| {
        let cold = unix_cold_ns(bytes, &plan)?;
        let step = ColdStep {
            bytes: cold.footprint_bytes,
            write_ns: floor(cold.send_ns - unix_send_call, 0),
            read_ns: floor(cold.recv_ns - unix_recv_call, 0),
        };
        let detail = format!(
            "{} AF_UNIX sockets each filled with {} 100-byte messages (L2 {} KiB, LLC {} MiB), then drained, \
             on one CPU; per call {:.0} / {:.0} ns - the cache-hot call {unix_send_call:.0} / {unix_recv_call:.0} ns",
            cold.sockets,
            cold.per_socket,
            host.l2_bytes >> 10,
            host.llc_bytes >> 20,
            cold.send_ns,
            cold.recv_ns
        );
        Ok((step, detail))
    })?;

    // Pipes the same way: 100-byte writes merged into the pages of as many pipes
    // as fill each footprint (16 pages each), then the reads; less a few pipes'
    // worth. Below PIPE_COLD_MIN_PIPES full pipes the measurement is the hot one.
    let fewest = PIPE_COLD_MIN_PIPES * PIPE_FILL_BYTES;
    let pipe_footprints = footprints.into_iter().filter(|&b| b >= fewest).collect();
    let pipe_cold = cold_curve("pipe_cold", pipe_footprints, &mut notes, |bytes| {
        let pcold = pipe_cold_ns(bytes, &plan)?;
        let step = ColdStep {
            bytes: pcold.footprint_bytes,
            write_ns: floor(pcold.cold_write_ns - pcold.hot_write_ns, 0),
            read_ns: floor(pcold.cold_read_ns - pcold.hot_read_ns, 0),
        };
        let detail = format!(
            "{} pipes each filled with 100-byte writes to their 16 pages, then drained, on one CPU; per call \
             {:.0} / {:.0} ns - the same on {PIPE_HOT_PIPES} pipes {:.0} / {:.0} ns",
            pcold.pipes, pcold.cold_write_ns, pcold.cold_read_ns, pcold.hot_write_ns, pcold.hot_read_ns
        );
        Ok((step, detail))
    })?;

    // TCP over loopback, the same way: the send pays the loopback receive path too.
    let (send, recv) = tcp_send_recv_ns(&plan)?;
    let tcp_send_ns = floor(send - syscall - copy100_ns, 1);
    let tcp_recv_ns = floor(recv - syscall - copy100_ns, 1);
    notes.measured(format!(
        "tcp_send_ns = {tcp_send_ns}, tcp_recv_ns = {tcp_recv_ns}: TCP over 127.0.0.1 with TCP_NODELAY, \
         write/read of 100 bytes, batches of {UNIX_BATCH}, per call {send:.0} / {recv:.0} ns - syscall - copy(100 B)"
    ));

    // fork() and clone() before any large buffer exists: fork copies page tables.
    let (fork_call, fork_total) = fork_exit_ns(plan.fork_iters)?;
    let fork_ns = floor(fork_call, 1);
    let clone_ns = floor(thread_spawn_ns(plan.clone_iters)?, 1);
    notes.measured(format!(
        "fork_ns = {fork_ns}: parent's fork() call of this process (RSS {} MiB), median of {}",
        rss_mib(),
        plan.fork_iters
    ));
    notes.measured(format!(
        "clone_ns = {clone_ns}: parent's std::thread::spawn (pthread_create + clone3), median of {}",
        plan.clone_iters
    ));

    // Two processes pinned to one CPU that both call sched_yield(): each yield
    // switches to the other, so an iteration of one is 2 yields, each a system
    // call and a switching __schedule(). A yield with nothing to switch to is the
    // system call and a __schedule() that picks the caller again.
    let (yield_alone, yield_pair, switches_per_yield) = yield_switch_ns(host.cpu_a, &plan)?;
    let schedule_ns = floor(yield_alone - syscall, 1);
    notes.measured(format!(
        "schedule_ns = {schedule_ns}: a lone sched_yield() on one CPU {yield_alone:.0} ns - syscall {syscall:.0} ns"
    ));
    let context_switch_ns = if switches_per_yield > 0.9 {
        let v = floor(yield_pair / 2.0 - syscall, 50);
        notes.measured(format!(
            "context_switch_ns = {v}: sched_yield ping-pong of 2 processes on one CPU \
             {yield_pair:.0} ns per iteration (2 yields, each a system call and a switch) / 2 - syscall \
             {syscall:.0} ns"
        ));
        v
    } else {
        let v = DEFAULT_CONTEXT_SWITCH_NS;
        notes.estimated(format!(
            "context_switch_ns = {v}: sched_yield switched only {switches_per_yield:.2} times \
             per yield here, so the default"
        ));
        v
    };

    let tlb = tlb_profile(host.cpu_a, &plan, &mut notes)?;
    let switch_cold = switch_cold_steps(host.cpu_a, tlb.as_ref(), &plan, &mut notes)?;

    // Two processes pinned to one CPU ping-pong a byte over two pipes. Every wait
    // there ends in a wakeup and the woken side mostly preempts the writer before
    // it waits (about 1.15 waits per round trip, not 2), so the round trip prices
    // a wakeup and a wait together, never apart: it stands in for the wakeup only
    // when the direct measurement below cannot be made.
    let rtt_same = {
        let child = EchoChild::spawn(host.cpu_a)?;
        time_per_op(plan.reps, plan.pingpong_iters, || child.round_trip())?
    };
    // The wakeup alone: a write that wakes a same-CPU sleeper which cannot
    // preempt the writer, against the same write waking nobody.
    let local = local_wake(host.cpu_a, &plan);
    let wakeup_ns = match (&local, local.as_ref().ok().and_then(LocalWake::wakeup_ns)) {
        (Ok(m), Some(v)) => {
            notes.measured(format!(
                "wakeup_ns = {v}: a 1-byte pipe write that wakes a SCHED_IDLE reader asleep on the same CPU \
                 {:.0} ns - the same write waking nobody {:.0} ns (medians; the reader slept before {:.2} and \
                 preempted {:.2} of the writes); the same-CPU pipe ping-pong of 2 processes, {rtt_same:.0} ns \
                 per round trip, is not split (its wakeups and waits go together)",
                m.wake_write_ns, m.plain_write_ns, m.sleeps_per_wake, m.preempted_per_wake
            ));
            v
        }
        (outcome, _) => {
            let v = floor((rtt_same - 2.0 * pipe_rw) / 2.0 - context_switch_ns as f64, 50);
            let why = match outcome {
                Ok(m) => format!(
                    "the sleeper slept before {:.2} and preempted {:.2} of the writes",
                    m.sleeps_per_wake, m.preempted_per_wake
                ),
                Err(e) => format!("its measurement failed ({e:#})"),
            };
            notes.estimated(format!(
                "wakeup_ns = {v}: no direct measurement ({why}); same-CPU pipe ping-pong of 2 processes \
                 {rtt_same:.0} ns per round trip, (rtt - 2 x in-process write+read)/2 - context switch \
                 (counts 2 wakeups and no waits per round trip)"
            ));
            v
        }
    };

    // A ring of threads on one CPU passing a byte through one pipe each: every hop
    // is a write that wakes the next thread and a read that waits, so it prices
    // the waiting side the ping-pong above mostly skips (there the woken side
    // often preempts the writer before it waits: about 1.15 waits per round
    // trip, not 2). What a hop costs beyond its calls, the wakeup and its
    // switches is the wait, per wait (each wait is one voluntary switch).
    let ring = wake_ring(host.cpu_a, &plan, RingLink::Pipe)?;
    let wait_ns = wait_ns_of(&ring, pipe_rw, pipe_op_ns, wakeup_ns, context_switch_ns);
    notes.measured(format!(
        "wait_ns = {wait_ns}: a ring of {RING_TASKS} threads on one CPU passing a byte through {RING_TASKS} pipes \
         {:.0} ns per hop with {:.2} switches ({:.2} voluntary, one per wait); \
         (hop - write+read - pipe_op - wakeup - switches x context switch) / waits",
        ring.hop_ns, ring.switches_per_hop, ring.waits_per_hop
    ));
    // The same over AF_UNIX socketpairs: a hop is a send and a receive (each a
    // system call and its body), the receive's failed first attempt once more,
    // the wakeup and the switches, as the simulation charges them.
    let unix_ring = wake_ring(host.cpu_a, &plan, RingLink::UnixSocket)?;
    let unix_calls = 2.0 * syscall + (unix_send_ns + unix_recv_ns) as f64;
    let unix_wait_ns = wait_ns_of(&unix_ring, unix_calls, unix_recv_ns, wakeup_ns, context_switch_ns);
    notes.measured(format!(
        "unix_wait_ns = {unix_wait_ns}: the same ring over {RING_TASKS} AF_UNIX socketpairs {:.0} ns per hop \
         with {:.2} switches ({:.2} voluntary); (hop - send - receive - unix_recv - wakeup - switches x \
         context switch) / waits",
        unix_ring.hop_ns, unix_ring.switches_per_hop, unix_ring.waits_per_hop
    ));

    // How much of a preempting same-CPU wakeup the waker is charged: a SCHED_IDLE
    // writer and its reader pinned together, every write preempted by the woken
    // reader. The simulation charges the writer per cycle the switch back to it
    // and its write; what the kernel charges it beyond that is its part of the
    // wakeup (up to the rq clock update the following switch skips).
    let wakeup_waker_ns = match preempted_wake(host.cpu_a, &plan) {
        Ok(m) if m.preempted_per_write >= PREEMPTED_ENOUGH => {
            // Its write finds the pipe empty (the reader waits on it), and the
            // reader's read empties it before its next one waits.
            let modelled = context_switch_ns as f64 + syscall + (pipe_op_ns + pipe_was_empty_ns) as f64;
            let v = waker_part_ns(m.writer_ns, modelled, wakeup_ns);
            let reader_model =
                (wakeup_ns + context_switch_ns + wait_ns + 2 * pipe_op_ns + pipe_emptied_ns) as f64 + syscall - v as f64;
            notes.measured(format!(
                "wakeup_waker_ns = {v}: a SCHED_IDLE writer and a nice-0 reader pinned to one CPU passing single \
                 bytes through a pipe ({:.2} preempted writes per write, {:.0} ns per cycle): the writer charged \
                 {:.0} ns per cycle (sum_exec_runtime) - context switch - write ({modelled:.0} ns); the reader \
                 charged {:.0} ns, the model with this split {reader_model:.0}",
                m.preempted_per_write, m.cycle_ns, m.writer_ns, m.reader_ns
            ));
            Some(v)
        }
        Ok(m) => {
            notes.estimated(format!(
                "wakeup_waker_ns left out: the woken reader preempted only {:.2} of the SCHED_IDLE writer's writes \
                 here, so the whole wakeup is charged to the task switched in",
                m.preempted_per_write
            ));
            None
        }
        Err(e) => {
            notes.estimated(format!("wakeup_waker_ns left out: its measurement failed ({e:#})"));
            None
        }
    };

    let exit_ns = floor((fork_total - fork_call - 2.0 * context_switch_ns as f64 - wakeup_ns as f64) / 2.0, 50);
    notes.measured(format!(
        "exit_ns = {exit_ns}: fork + child _exit + waitpid on one CPU {fork_total:.0} ns; \
         (total - fork - 2 switches - wakeup)/2 for exit and wait each"
    ));

    // --- Two-CPU measurements ----------------------------------------------------
    let cross = match host.cpu_b {
        Some(cpu_b) => {
            // A hypervisor that runs other work on these vCPUs meanwhile (steal
            // time) slows every cross-CPU figure below; say how much there was.
            let (steal0, t0) = (steal_ticks(&[host.cpu_a, cpu_b]), now_ns());
            // The two-CPU figures must come from one state of the host (see
            // probe_cache_line_ns()): the line transfer is read again after them,
            // and all of them are measured again when the host moved meanwhile.
            let mut attempt = 1;
            let c = loop {
                let c = cross_cpu(&host, cpu_b, &plan, timer_ns)?;
                let during = HostSignature {
                    cache_line_ns: c.cache_line_ns,
                    idle_wake_ns: (idle_polls_counted(c.wake_idle_signals) != Some(true))
                        .then_some(c.wake_idle_call_ns - c.wake_noop_ns),
                };
                let after = read_signature(host.cpu_a, cpu_b)?;
                if during.same_state(&after) {
                    break c;
                }
                notes.info(format!(
                    "the host changed state during the two-CPU measurements (cross-CPU cache line {:.0} ns, idle-CPU \
                     wake {:?} ns in them, {:.0} ns and {:?} ns after them): measured again ({})",
                    during.cache_line_ns,
                    during.idle_wake_ns.map(f64::round),
                    after.cache_line_ns,
                    after.idle_wake_ns.map(f64::round),
                    if attempt < CROSS_CPU_ATTEMPTS { "next attempt" } else { "gave up: the figures below mix two states" }
                ));
                if attempt == CROSS_CPU_ATTEMPTS {
                    break c;
                }
                attempt += 1;
            };
            if let (Some(s0), Some(s1)) = (steal0, steal_ticks(&[host.cpu_a, cpu_b])) {
                notes.info(format!(
                    "steal time on CPUs {} and {cpu_b} during the two-CPU measurements: {} ms in {:.1} s",
                    host.cpu_a,
                    (s1.saturating_sub(s0)) * 1000 / clock_ticks_per_s(),
                    (now_ns() - t0) as f64 / 1e9
                ));
            }
            Some(c)
        }
        None => None,
    };
    let (ipi_send_ns, ipi_latency_ns, ipi_receive_ns, idle_exit_ns, idle_polls, cache_line_ns);
    let (unix_send_remote_ns, unix_recv_remote_ns, wakeup_remote_ns, ipi_send_idle_ns, idle_exit_charged_ns);
    let counter = AtomicU64::new(0);
    let atomic_ns = time_per_op(plan.reps, plan.syscall_iters, || {
        black_box(counter.fetch_add(1, Ordering::SeqCst));
        Ok(())
    })?;
    match &cross {
        Some(c) => {
            cache_line_ns = c.cache_line_ns;
            notes.info(format!(
                "cache line transfer CPU {} <-> {}: {:.0} ns one way (atomic ping-pong); \
                 cross-CPU pipe round trip {:.0} ns",
                host.cpu_a, c.cpu_b, c.cache_line_ns, c.pipe_rtt_ns
            ));
            // A wake of a sleeper on a CPU that runs a SCHED_IDLE spinner: remote
            // enqueue under the remote runqueue lock, then a reschedule IPI. Its extra
            // over a FUTEX_WAKE that finds no waiter is the wakeup itself, the lock's
            // cache-line transfer and the IPI send.
            match c.wake_remote_call_ns {
                Some(remote) => {
                    // The same remote enqueue without the IPI: the difference is the send,
                    // and what the enqueue costs beyond a local wakeup is its own figure.
                    ipi_send_ns = floor(c.wake_busy_call_ns - remote, 20);
                    wakeup_remote_ns = floor(remote - c.wake_noop_ns - wakeup_ns as f64, 0);
                    notes.measured(format!(
                        "ipi_send_ns = {ipi_send_ns}: FUTEX_WAKE of a sleeper on a remote CPU whose \
                         SCHED_IDLE spinner it preempts {:.0} ns - on one whose SCHED_FIFO spinner it \
                         cannot preempt {remote:.0} ns",
                        c.wake_busy_call_ns
                    ));
                    notes.measured(format!(
                        "wakeup_remote_ns = {wakeup_remote_ns}: FUTEX_WAKE of a sleeper on a busy remote \
                         CPU it cannot preempt {remote:.0} ns - FUTEX_WAKE of nobody {:.0} ns - wakeup",
                        c.wake_noop_ns
                    ));
                }
                None => {
                    ipi_send_ns = floor(c.wake_busy_call_ns - c.wake_noop_ns - wakeup_ns as f64 - c.cache_line_ns, 20);
                    wakeup_remote_ns = floor(c.cache_line_ns, 0);
                    notes.measured(format!(
                        "ipi_send_ns = {ipi_send_ns}: FUTEX_WAKE of a sleeper on a busy remote CPU \
                         {:.0} ns - FUTEX_WAKE of nobody {:.0} ns - wakeup - 1 cache-line transfer",
                        c.wake_busy_call_ns, c.wake_noop_ns
                    ));
                    notes.estimated(format!(
                        "wakeup_remote_ns = {wakeup_remote_ns}: SCHED_FIFO not allowed, so no unpreempted \
                         remote wake to measure; one cache-line transfer (the remote runqueue lock)"
                    ));
                }
            }
            // membarrier(PRIVATE_EXPEDITED) IPIs the CPU running our spinner and waits
            // for its acknowledgement, a cache-line write. A round trip that does not
            // even cover the send cannot have waited for an IPI (the spinner was not
            // running at that moment); then the wake latency stands in.
            let mb_flight =
                c.membarrier_ns.map(|mb| mb - syscall - ipi_send_ns as f64 - c.cache_line_ns).filter(|&flight| flight > 50.0);
            ipi_latency_ns = match (c.membarrier_ns, mb_flight) {
                // With the remote enqueue measured on its own, the wake's own latency
                // splits exactly as the simulator replays it: the waker's syscall,
                // wakeup, remote enqueue and send, the flight, the target's switch.
                _ if c.wake_remote_call_ns.is_some() => {
                    let v = floor(
                        c.wake_busy_latency_ns
                            - syscall
                            - wakeup_ns as f64
                            - wakeup_remote_ns as f64
                            - ipi_send_ns as f64
                            - context_switch_ns as f64,
                        50,
                    );
                    notes.measured(format!(
                        "ipi_latency_ns = {v}: wake-to-run latency on a busy CPU whose spinner the wakee \
                         preempts {:.0} ns - syscall - wakeup - wakeup_remote - ipi_send - context switch \
                         (membarrier round trip to a running CPU, for comparison: {:?} ns)",
                        c.wake_busy_latency_ns,
                        c.membarrier_ns.map(|m| m.round())
                    ));
                    v
                }
                (Some(mb), Some(flight)) => {
                    let v = floor(flight, 50);
                    notes.measured(format!(
                        "ipi_latency_ns = {v}: membarrier(PRIVATE_EXPEDITED) to 1 running CPU \
                         {mb:.0} ns - syscall - ipi_send - 1 cache-line transfer (the ack)"
                    ));
                    v
                }
                _ => {
                    let v = floor(
                        c.wake_busy_latency_ns - syscall - ipi_send_ns as f64 - wakeup_ns as f64 - context_switch_ns as f64,
                        50,
                    );
                    notes.estimated(format!(
                        "ipi_latency_ns = {v}: membarrier unavailable or IPI-less ({:?} ns); \
                         wake-to-run latency on a busy CPU {:.0} ns - syscall - ipi_send - \
                         wakeup - context switch",
                        c.membarrier_ns.map(|m| m.round()),
                        c.wake_busy_latency_ns
                    ));
                    v
                }
            };
            // Both ends busy on two CPUs: every send finds the socket and its queue
            // in the receiver's cache, every receive frees an skb the other CPU made.
            unix_send_remote_ns = floor(c.unix_stream_send_ns - unix_send_call, 0);
            unix_recv_remote_ns = floor(c.unix_stream_recv_ns - unix_recv_call, 0);
            notes.measured(format!(
                "unix_send_remote_ns = {unix_send_remote_ns}, unix_recv_remote_ns = {unix_recv_remote_ns}: \
                 a sender on CPU {} and a receiver on CPU {} streaming 100-byte messages over \
                 {UNIX_STREAM_SOCKETS} AF_UNIX sockets at once (non-blocking, both spinning), per call \
                 {:.0} / {:.0} ns - the one-CPU call {unix_send_call:.0} / {unix_recv_call:.0} ns",
                host.cpu_a, c.cpu_b, c.unix_stream_send_ns, c.unix_stream_recv_ns
            ));
            ipi_receive_ns = match c.ipi_receive_ns {
                Some(gap) => {
                    let v = floor(gap, 1);
                    notes.measured(format!(
                        "ipi_receive_ns = {v}: median gap a clock-reading spinner on CPU {} sees per \
                         membarrier(PRIVATE_EXPEDITED) IPI from CPU {}",
                        c.cpu_b, host.cpu_a
                    ));
                    v
                }
                None => {
                    notes.estimated(
                        "ipi_receive_ns = 0: membarrier unavailable; the IPI's handling time is not charged".to_string(),
                    );
                    0
                }
            };
            // Whether an idle CPU polls its need-resched flag: if it does, waking a
            // sleeper there costs the waker about a local wakeup; if it halts, an IPI
            // that has to get a halted CPU going (in a guest, the host wakes the vCPU
            // thread inside the sender's exit). The kernel says which it did for
            // every wake: `send_call_function_single_ipi()` (kernel/sched/core.c)
            // either finds the idle task polling (`set_nr_if_polling()`) and fires
            // sched_wake_idle_without_ipi, or sends (ipi_send_cpu). Where those
            // tracepoints cannot be counted, the time decides: half a reschedule
            // IPI's send beyond a local wakeup is the dividing line (a line the raw
            // times of this project's hosts sit on).
            let idle_extra = c.wake_idle_call_ns - c.wake_noop_ns;
            let by_time = idle_extra < wakeup_ns as f64 + ipi_send_ns as f64 / 2.0;
            let how = match c.wake_idle_signals {
                Some((flag, ipis)) if flag + ipis > 0 => {
                    idle_polls = idle_polls_counted(c.wake_idle_signals) == Some(true);
                    format!(
                        "of the wakes of a sleeper on an idle remote CPU, {flag} found it polling \
                         (sched:sched_wake_idle_without_ipi) and {ipis} sent an IPI (ipi:ipi_send_cpu)"
                    )
                }
                _ => {
                    idle_polls = by_time;
                    format!(
                        "the tracepoints could not be counted; by time: FUTEX_WAKE of a sleeper on an idle remote CPU \
                         - of nobody = {idle_extra:.0} ns, {} a local wakeup + half the IPI send ({wakeup_ns} + {ipi_send_ns}/2 ns)",
                        if by_time { "under" } else { "over" }
                    )
                }
            };
            ipi_send_idle_ns = (!idle_polls).then(|| floor(idle_extra - wakeup_ns as f64, 20));
            let text = format!(
                "idle_polls = {idle_polls}: {how}: an idle CPU here {} (idle driver {}){}",
                if idle_polls { "polls (no IPI to wake it)" } else { "halts (every wakeup of it is an IPI)" },
                host.idle_driver,
                ipi_send_idle_ns.map_or(String::new(), |v| format!(
                    "; ipi_send_idle_ns = {v}: FUTEX_WAKE of a sleeper on an idle remote CPU {:.0} ns - of nobody {:.0} ns - wakeup",
                    c.wake_idle_call_ns, c.wake_noop_ns
                ))
            );
            match c.wake_idle_signals {
                Some((flag, ipis)) if flag + ipis > 0 => notes.measured(text),
                _ => notes.estimated(text),
            }
            // Waking a sleeper on an idle CPU vs on a CPU that runs a spinner the
            // wakee preempts: what differs is the waker's path (the wake list and the
            // send to a halted CPU, or a flag write, against the remote enqueue and
            // the send) and the idle CPU leaving its idle state.
            let busy_path = (wakeup_remote_ns + ipi_send_ns) as f64;
            let idle_path = match ipi_send_idle_ns {
                Some(send_idle) => send_idle as f64,
                None => -(ipi_latency_ns as f64),
            };
            idle_exit_ns = floor(c.wake_idle_latency_ns - c.wake_busy_latency_ns + busy_path - idle_path, 1);
            notes.measured(format!(
                "idle_exit_ns = {idle_exit_ns}: wake-to-run latency on an idle CPU {:.0} ns - on a busy CPU {:.0} ns \
                 + the busy path's remote enqueue and send - {} (idle state: {}; 1: no slower than a running CPU)",
                c.wake_idle_latency_ns,
                c.wake_busy_latency_ns,
                if idle_polls {
                    "nothing, + the IPI flight the polling CPU does not wait for"
                } else {
                    "the send to a halted CPU"
                },
                host.idle_driver
            ));
            // What the woken task is charged of a halted CPU's exit: the wake
            // list's handler stamps the rq clock as it enqueues, and the switch
            // keeps that clock (rq_clock_skip_update() for the queued idle task),
            // so the sleeper's CPU time per wakeup on an idle CPU exceeds its CPU
            // time per wakeup on a busy CPU, where it waits for a SCHED_FIFO
            // spinner's nap and the switch takes a fresh clock.
            idle_exit_charged_ns = match (idle_polls, c.wake_remote_charged_ns) {
                (false, Some(remote)) => {
                    let v = floor(c.wake_idle_charged_ns - remote, 0).min(idle_exit_ns);
                    notes.measured(format!(
                        "idle_exit_charged_ns = {v}: CPU time (CLOCK_THREAD_CPUTIME_ID) charged to a sleeper per wakeup on \
                         an idle CPU {:.0} ns - per wakeup on a busy CPU whose SCHED_FIFO spinner it waits for \
                         {remote:.0} ns (at most idle_exit_ns)",
                        c.wake_idle_charged_ns
                    ));
                    Some(v)
                }
                (false, None) => {
                    notes.info(
                        "idle_exit_charged_ns left out: no SCHED_FIFO spinner to compare with (needs CAP_SYS_NICE)".to_string(),
                    );
                    None
                }
                (true, _) => None,
            };
        }
        None => {
            cache_line_ns = DEFAULT_CACHE_LINE_NS;
            ipi_send_ns = DEFAULT_IPI_SEND_NS;
            ipi_latency_ns = DEFAULT_IPI_LATENCY_NS;
            idle_exit_ns = DEFAULT_IDLE_EXIT_NS;
            idle_polls = true;
            ipi_receive_ns = 0;
            wakeup_remote_ns = 0;
            ipi_send_idle_ns = None;
            idle_exit_charged_ns = None;
            unix_send_remote_ns = 0;
            unix_recv_remote_ns = 0;
            notes.estimated(format!(
                "one CPU only: cache-line transfer {DEFAULT_CACHE_LINE_NS} ns, ipi_send_ns \
                 {DEFAULT_IPI_SEND_NS}, ipi_latency_ns {DEFAULT_IPI_LATENCY_NS}, idle_exit_ns \
                 {DEFAULT_IDLE_EXIT_NS} are defaults (machines/broadwell-ep.toml class values)"
            ));
        }
    }

    // --- A halted CPU's exit after longer idles --------------------------------------
    // Only where the idle halts (a polling idle CPU has no such states to leave).
    let halted_exit = if idle_polls {
        Vec::new()
    } else {
        match halted_exit::measure(host.cpu_a, plan.halted_exit_sleeps, plan.halted_exit_min_each) {
            Ok(o) => {
                let steps = halted_exit::steps(&o, idle_exit_ns, HALTED_EXIT_MIN_GROWTH_NS);
                let ms = |ns: u64| ns / 1_000_000;
                let each: Vec<String> = o.steps.iter().map(|(sleep, over)| format!("{} ms {over:.0} ns", ms(*sleep))).collect();
                let kept: Vec<String> = steps.iter().map(|h| format!("{} ns after {} ms", h.exit_ns, ms(h.idle_ns))).collect();
                let kept = if kept.is_empty() { "none".to_string() } else { kept.join(", ") };
                notes.measured(format!(
                    "halted_exit = {kept}: a lone sleeper on CPU {} took longer than asked (median) {:.0} ns at {} us \
                     sleeps, {}; idle_exit_ns plus each growth of at least {HALTED_EXIT_MIN_GROWTH_NS:.0} ns",
                    host.cpu_a,
                    o.base_ns,
                    halted_exit::BASE_SLEEP_NS / 1000,
                    each.join(", ")
                ));
                steps
            }
            Err(e) => {
                notes.estimated(format!("halted_exit: not measured ({e}); none"));
                Vec::new()
            }
        }
    };

    // --- Cache refill after migration ------------------------------------------------
    let migration = migration_costs(&host, &plan, &mut notes)?;

    // --- Scheduler operation costs -----------------------------------------------------
    // Not visible from user space; estimated from the cache-line transfer they are
    // dominated by. Looking at a CPU reads its runqueue lines, usually already shared
    // after the first scan: half a transfer. Taking a remote runqueue lock moves the
    // lock's line here and does one atomic. Examining a task reads one to two lines
    // of its task_struct that live on its CPU: one transfer.
    let sched_ops = SchedOpCost {
        per_cpu_scanned_ns: floor(cache_line_ns / 2.0, 1),
        per_rq_lock_ns: floor(cache_line_ns + atomic_ns, 1),
        per_task_examined_ns: floor(cache_line_ns, 1),
        // One cache-line latency is measured; the cross-LLC line is not.
        per_cpu_scanned_cross_llc_ns: None,
        per_rq_lock_cross_llc_ns: None,
    };
    notes.estimated(format!(
        "sched_ops = {}/{}/{} ns (per CPU scanned/rq lock/task examined): 1/2, 1 + atomic \
         {atomic_ns:.0} ns, 1 cache-line transfer of {cache_line_ns:.0} ns",
        sched_ops.per_cpu_scanned_ns, sched_ops.per_rq_lock_ns, sched_ops.per_task_examined_ns
    ));

    // --- Memory bandwidth of this node -------------------------------------------------
    // The buffers must dwarf the node's last-level caches or we measure those.
    let llcs_in_node = host.node_cpus.len().div_ceil(host.llc_cpus.max(1));
    let bw_bytes = plan.bw_bytes.max(plan.bw_llc_factor * host.llc_bytes * llcs_in_node).min(2 << 30);
    let bw = node_bandwidth_mbps(&host.node_cpus, bw_bytes, plan.bw_reps)?;
    let node_mem_bw_mbps = floor(bw, 1);
    notes.measured(format!(
        "node_mem_bw_mbps = {node_mem_bw_mbps}: {} threads on node CPUs each memcpy'ing its \
         share of {} MiB, best of {} (STREAM copy convention: read + write bytes)",
        host.node_cpus.len(),
        bw_bytes >> 20,
        plan.bw_reps
    ));

    Ok(MachineProfile {
        name: opts.name.clone(),
        description: host.profile_description(),
        sources: notes.into_sources(),
        context_switch_ns,
        schedule_ns: Some(schedule_ns),
        syscall_ns,
        copy_ps_per_byte: copy_ps,
        pipe_op_ns,
        unix_send_ns,
        unix_recv_ns,
        unix_send_remote_ns,
        unix_recv_remote_ns,
        unix_send_cold_ns: 0,
        unix_recv_cold_ns: 0,
        unix_cold_bytes: 0,
        unix_cold,
        pipe_write_cold_ns: 0,
        pipe_page_alloc_ns,
        pipe_page_free_ns,
        pipe_mtime_ns,
        pipe_atime_ns,
        pipe_was_empty_ns,
        pipe_emptied_ns,
        pipe_read_cold_ns: 0,
        pipe_cold_bytes: 0,
        pipe_cold,
        tcp_send_ns,
        tcp_recv_ns,
        wakeup_ns,
        wakeup_waker_ns,
        wait_ns,
        unix_wait_ns,
        ipi_send_ns,
        ipi_latency_ns,
        ipi_receive_ns,
        tick_irq_ns,
        timer_program_ns,
        halted_exit,
        switch_cold,
        wakeup_remote_ns,
        ipi_send_idle_ns,
        idle_exit_charged_ns,
        idle_exit_ns,
        idle_polls,
        fork_ns,
        clone_ns,
        exit_ns,
        cache_line_ns: floor(cache_line_ns, 1),
        // Measured between two CPUs of this host; a host with one LLC cannot show
        // the distance to another, so the same number stands for it.
        cache_line_remote_ns: floor(cache_line_ns, 1),
        migration,
        sched_ops,
        node_mem_bw_mbps: Some(node_mem_bw_mbps),
        cpu_mhz,
        // Not measured: a host run cannot isolate one core's two threads reliably.
        smt_throughput_pct: None,
        cache: None,
        tlb,
        background,
    })
}

/// Threads in calibrate's wake rings (more than 2, so that no hop is a ping-pong).
const RING_TASKS: usize = 8;

/// A wake ring's timing: per hop, its time, its context switches and the
/// voluntary ones among them (the waits).
#[derive(Clone, Copy, Debug, PartialEq)]
struct RingTiming {
    hop_ns: f64,
    switches_per_hop: f64,
    waits_per_hop: f64,
}

/// The waits' own cost from a ring: a hop is a 1-byte write and read (`calls_ns`,
/// the read's failed first attempt charged its body once more: `retry_ns`), a
/// wakeup, its switches and its waits; what is left is the waits' cost, per wait.
fn wait_ns_of(ring: &RingTiming, calls_ns: f64, retry_ns: u64, wakeup_ns: u64, context_switch_ns: u64) -> u64 {
    if ring.waits_per_hop < 0.5 {
        return 0;
    }
    let known = calls_ns + retry_ns as f64 + wakeup_ns as f64 + ring.switches_per_hop * context_switch_ns as f64;
    floor((ring.hop_ns - known) / ring.waits_per_hop, 0)
}

/// What a calibrate ring passes its byte through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RingLink {
    Pipe,
    /// An AF_UNIX stream socketpair, one end written, the other read.
    UnixSocket,
}

/// `RING_TASKS` threads of this process pinned to `cpu` pass one byte round a ring
/// of links (pipes or socketpairs): thread i reads link i and writes link i+1.
/// The laps are timed on this thread (ring member 0) and the switches counted
/// over the process. The ring ends by EOF: this thread closes its write end and
/// each member, reading EOF, exits and closes its own.
fn wake_ring(cpu: usize, plan: &Plan, link: RingLink) -> Result<RingTiming> {
    pin_current_thread(cpu)?;
    let mut reads = Vec::with_capacity(RING_TASKS);
    let mut writes = Vec::with_capacity(RING_TASKS);
    for _ in 0..RING_TASKS {
        let (r, w): (OwnedFd, OwnedFd) = match link {
            RingLink::Pipe => pipe()?,
            RingLink::UnixSocket => {
                let (w, r) = std::os::unix::net::UnixStream::pair().context("socketpair(AF_UNIX) for the ring")?;
                (r.into(), w.into())
            }
        };
        reads.push(Some(r));
        writes.push(Some(w));
    }
    let mut members = Vec::new();
    for i in 1..RING_TASKS {
        let input = reads[i].take().expect("each read end is taken once");
        let output = writes[(i + 1) % RING_TASKS].take().expect("each write end is taken once");
        // Threads inherit this thread's single-CPU affinity.
        let spawned = std::thread::Builder::new().spawn(move || {
            let mut b = [0u8; 1];
            while read_exact(input.as_raw_fd(), &mut b).is_ok() {
                if write_all(output.as_raw_fd(), &b).is_err() {
                    return;
                }
            }
        });
        match spawned {
            Ok(h) => members.push(h),
            // Dropping the ends taken so far ends the members started.
            Err(e) => return Err(anyhow!("spawning a ring thread: {e}")),
        }
    }
    let input = reads[0].take().expect("ring member 0 reads link 0");
    let output = writes[1].take().expect("ring member 0 writes link 1");
    let lap = || -> Result<()> {
        write_all(output.as_raw_fd(), b"x")?;
        let mut b = [0u8; 1];
        Ok(read_exact(input.as_raw_fd(), &mut b)?)
    };
    let laps = (plan.pingpong_iters / RING_TASKS).max(10);
    let before = process_switches();
    let per_lap = time_per_op(plan.reps, laps, lap);
    let after = process_switches();
    drop(output);
    for h in members {
        let _ = h.join();
    }
    let per_lap = per_lap?;
    let ((vol0, all0), (vol1, all1)) = (before?, after?);
    let hops = (calls_made(plan.reps, laps) * RING_TASKS) as f64;
    Ok(RingTiming {
        hop_ns: per_lap / RING_TASKS as f64,
        switches_per_hop: (all1 - all0) as f64 / hops,
        waits_per_hop: (vol1 - vol0) as f64 / hops,
    })
}

/// The reader's policy in [`with_pipe_reader`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReaderPriority {
    Normal,
    /// SCHED_IDLE (nice 19 where that is refused): it never preempts the writer.
    Idle,
}

/// A reader thread pinned to `cpu` that reads single bytes from a fresh pipe
/// until end of file, and `measure` on a second thread pinned to `cpu`, given
/// the pipe's write end (closed when `measure` returns, which ends the reader)
/// and the reader's thread id. Returns what `measure` returned once both threads
/// have ended.
fn with_pipe_reader<T: Send + 'static>(
    cpu: usize,
    priority: ReaderPriority,
    measure: impl FnOnce(RawFd, libc::pid_t) -> Result<T> + Send + 'static,
) -> Result<T> {
    let (r, w) = pipe().context("pipe for a two-thread measurement")?;
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<libc::pid_t>();
    let reader = std::thread::Builder::new()
        .spawn(move || -> Result<()> {
            pin_current_thread(cpu)?;
            if priority == ReaderPriority::Idle {
                lower_own_priority();
            }
            // SAFETY: gettid() has no preconditions.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            let mut b = [0u8; 1];
            // Ends at EOF, when the writer closes its end.
            while read_exact(r.as_raw_fd(), &mut b).is_ok() {}
            Ok(())
        })
        .map_err(|e| anyhow!("spawning the reader thread: {e}"))?;
    let writer = std::thread::Builder::new()
        .spawn(move || -> Result<T> {
            pin_current_thread(cpu)?;
            let reader_tid = tid_rx
                .recv_timeout(Duration::from_nanos(HELPER_TIMEOUT_NS))
                .map_err(|_| anyhow!("the reader thread did not start"))?;
            let measured = measure(w.as_raw_fd(), reader_tid);
            drop(w);
            measured
        })
        .map_err(|e| anyhow!("spawning the writer thread: {e}"))?;
    let measured = writer.join().map_err(|_| anyhow!("the writer thread panicked"))?;
    reader.join().map_err(|_| anyhow!("the reader thread panicked"))??;
    measured
}

/// Below this share of preempted writes the primitive measures a mix and the
/// waker's part is left out.
const PREEMPTED_ENOUGH: f64 = 0.9;

/// The waker's part of a preempting wakeup: what the kernel charged the
/// preempted writer per cycle beyond what the model charges it without the part
/// (`modelled_ns`: the switch back to it and its write), within 0 ..= the whole
/// wakeup.
fn waker_part_ns(writer_ns: f64, modelled_ns: f64, wakeup_ns: u64) -> u64 {
    (writer_ns - modelled_ns).round().clamp(0.0, wakeup_ns as f64) as u64
}

/// Per cycle of [`preempted_wake`]: what the kernel charged each thread.
struct PreemptedWake {
    writer_ns: f64,
    reader_ns: f64,
    cycle_ns: f64,
    /// The writer's involuntary switches per write: 1 when the reader preempted
    /// every write.
    preempted_per_write: f64,
}

/// A writer thread at SCHED_IDLE and a reader thread at nice 0, both pinned to
/// `cpu`, pass single bytes through one pipe. Each write wakes the blocked
/// reader, which preempts the writer (a normal task always preempts an
/// idle-policy one: `check_preempt_wakeup_fair()`, v6.18), reads the byte and
/// blocks again, and the writer carries on. Per cycle: the runtime the kernel
/// charged each thread (`sum_exec_runtime`, /proc/self/task/TID/schedstat),
/// the wall time, and the writer's involuntary switches. The median of
/// `plan.reps` blocks; the measuring threads are its own, so no policy change
/// outlives it.
fn preempted_wake(cpu: usize, plan: &Plan) -> Result<PreemptedWake> {
    let cycles = plan.pingpong_iters.max(100);
    let reps = plan.reps;
    let blocks = with_pipe_reader(cpu, ReaderPriority::Normal, move |fd, reader_tid| {
        lower_own_priority();
        // SAFETY: gettid() has no preconditions.
        let own_tid = unsafe { libc::gettid() };
        for _ in 0..cycles / 10 {
            write_all(fd, b"x")?;
        }
        let mut blocks = Vec::with_capacity(reps);
        for _ in 0..reps {
            let (w0, r0) = (thread_runtime_ns(own_tid)?, thread_runtime_ns(reader_tid)?);
            let s0 = switches_of(libc::RUSAGE_THREAD)?;
            let t0 = now_ns();
            for _ in 0..cycles {
                write_all(fd, b"x")?;
            }
            let t1 = now_ns();
            let s1 = switches_of(libc::RUSAGE_THREAD)?;
            let (w1, r1) = (thread_runtime_ns(own_tid)?, thread_runtime_ns(reader_tid)?);
            // switches_of() gives (voluntary, all): the difference is involuntary.
            let involuntary = ((s1.1 - s1.0) - (s0.1 - s0.0)) as f64;
            let n = cycles as f64;
            blocks.push(PreemptedWake {
                writer_ns: (w1 - w0) as f64 / n,
                reader_ns: (r1 - r0) as f64 / n,
                cycle_ns: (t1 - t0) as f64 / n,
                preempted_per_write: involuntary / n,
            });
        }
        Ok(blocks)
    })?;
    let pick = |f: fn(&PreemptedWake) -> f64| median(blocks.iter().map(f).collect()).unwrap_or(0.0);
    Ok(PreemptedWake {
        writer_ns: pick(|b| b.writer_ns),
        reader_ns: pick(|b| b.reader_ns),
        cycle_ns: pick(|b| b.cycle_ns),
        preempted_per_write: pick(|b| b.preempted_per_write),
    })
}

/// What [`local_wake`] measured: medians over its blocks.
struct LocalWake {
    /// A 1-byte write into a pipe whose reader sleeps on this CPU, ns.
    wake_write_ns: f64,
    /// The same write into a drained pipe nobody waits on, ns.
    plain_write_ns: f64,
    /// The waker's involuntary switches per wake write: 0 when the sleeper never
    /// preempted it.
    preempted_per_wake: f64,
    /// The sleeper's voluntary switches per wake write: 1 when it slept before
    /// every write.
    sleeps_per_wake: f64,
}

impl LocalWake {
    /// The wakeup's cost to the waker: the wake write less the plain one, if the
    /// measurement is of what it claims (the sleeper slept before the writes and
    /// did not preempt them); else None.
    fn wakeup_ns(&self) -> Option<u64> {
        (self.preempted_per_wake < LOCAL_WAKE_PREEMPTED_AT_MOST && self.sleeps_per_wake > LOCAL_WAKE_SLEPT_AT_LEAST)
            .then(|| floor(self.wake_write_ns - self.plain_write_ns, 50))
    }
}

/// [`local_wake`] measures the wakeup alone only if the sleeper preempted the
/// waker in at most this share of the writes and slept before at least this
/// share of them.
const LOCAL_WAKE_PREEMPTED_AT_MOST: f64 = 0.1;
const LOCAL_WAKE_SLEPT_AT_LEAST: f64 = 0.9;

/// How long the waker sleeps after each timed write, so that the sleeper (which
/// runs only when the waker does not) reads the byte and blocks again.
const LOCAL_WAKE_PAUSE_NS: u64 = 30_000;

/// What waking a sleeper on its own CPU costs the waker, measured apart from
/// the wait that ends: a waker thread at nice 0 and a sleeper thread at
/// SCHED_IDLE, both pinned to `cpu`. The sleeper blocks reading a pipe; the
/// waker writes one byte into it, timed. An idle-policy task never preempts a
/// normal one (`wakeup_preempt_fair()`, v6.18), so the whole
/// `try_to_wake_up()` runs inside the write and nothing of the sleeper's side
/// does. Then the waker sleeps (`LOCAL_WAKE_PAUSE_NS`) while the sleeper reads
/// and blocks again, and times the same write into a drained pipe nobody reads
/// (which it then drains itself), after the same sleep. Medians of `plan.reps`
/// blocks; the policy change dies with the sleeper thread.
fn local_wake(cpu: usize, plan: &Plan) -> Result<LocalWake> {
    let (plain_r, plain_w) = pipe().context("second pipe for the local-wakeup measurement")?;
    let samples = (plan.wake_samples / 2).max(100);
    let reps = plan.reps;
    let blocks = with_pipe_reader(cpu, ReaderPriority::Idle, move |fd, sleeper_tid| {
        let pause = libc::timespec { tv_sec: 0, tv_nsec: LOCAL_WAKE_PAUSE_NS as libc::c_long };
        // SAFETY: pause is a valid timespec; an interrupted sleep only shortens the pause.
        let sleep = || unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        let (plain_fd, plain_rd) = (plain_w.as_raw_fd(), plain_r.as_raw_fd());
        let mut b = [0u8; 1];
        let mut blocks = Vec::with_capacity(reps);
        // The first block warms up and is dropped.
        for block in 0..=reps {
            let (mut wake, mut plain) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
            let s0 = switches_of(libc::RUSAGE_THREAD)?;
            let v0 = thread_voluntary_switches(sleeper_tid)?;
            for _ in 0..samples {
                sleep();
                let t0 = now_ns();
                write_all(fd, b"x")?;
                wake.push(now_ns().saturating_sub(t0) as f64);
                sleep();
                let t0 = now_ns();
                write_all(plain_fd, b"x")?;
                plain.push(now_ns().saturating_sub(t0) as f64);
                read_exact(plain_rd, &mut b)?;
            }
            let s1 = switches_of(libc::RUSAGE_THREAD)?;
            let v1 = thread_voluntary_switches(sleeper_tid)?;
            if block == 0 {
                continue;
            }
            let n = samples as f64;
            blocks.push(LocalWake {
                wake_write_ns: median(wake).unwrap_or(0.0),
                plain_write_ns: median(plain).unwrap_or(0.0),
                preempted_per_wake: ((s1.1 - s1.0) - (s0.1 - s0.0)) as f64 / n,
                sleeps_per_wake: (v1 - v0) as f64 / n,
            });
        }
        Ok(blocks)
    })?;
    let pick = |f: fn(&LocalWake) -> f64| median(blocks.iter().map(f).collect()).unwrap_or(0.0);
    Ok(LocalWake {
        wake_write_ns: pick(|b| b.wake_write_ns),
        plain_write_ns: pick(|b| b.plain_write_ns),
        preempted_per_wake: pick(|b| b.preempted_per_wake),
        sleeps_per_wake: pick(|b| b.sleeps_per_wake),
    })
}

/// Thread `tid` of this process: its voluntary context switches so far
/// (`voluntary_ctxt_switches` in /proc/self/task/TID/status).
fn thread_voluntary_switches(tid: libc::pid_t) -> Result<i64> {
    let path = format!("/proc/self/task/{tid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| anyhow!("{path}: no voluntary_ctxt_switches line"))
}

/// The runtime the kernel has charged thread `tid` of this process so far
/// (`se.sum_exec_runtime`, the first field of its schedstat), ns.
fn thread_runtime_ns(tid: libc::pid_t) -> Result<u64> {
    let path = format!("/proc/self/task/{tid}/schedstat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{path}: expected three numbers, got {text:?}"))
}

/// Voluntary and all context switches of this process's threads so far.
fn process_switches() -> Result<(i64, i64)> {
    switches_of(libc::RUSAGE_SELF)
}

/// How many tasks take turns on one CPU to measure ASID recycling: twice the
/// kernel's slots, so that every switch lands on an address space whose slot was
/// taken since it last ran.
const ASID_ROTATION_TASKS: usize = 2 * TLB_NR_DYN_ASIDS as usize;

/// `TLB_NR_DYN_ASIDS` (arch/x86/include/asm/tlbflush.h, v4.14 to v6.18).
const TLB_NR_DYN_ASIDS: u32 = 6;

/// The `[tlb]` section on x86-64: the kernel's ASID slots (or none without PCID)
/// and the refill a switch onto a flushed ASID costs, measured as a sched_yield
/// rotation of `ASID_ROTATION_TASKS` processes on one CPU less the same rotation
/// of threads of this process (one address space, no switch_mm). Elsewhere (other
/// architectures allocate ASIDs globally, without per-switch flushes at these
/// scales) no section.
fn tlb_profile(cpu: usize, plan: &Plan, notes: &mut Notes) -> Result<Option<TlbProfile>> {
    if !cfg!(target_arch = "x86_64") {
        return Ok(None);
    }
    let flags = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let pcid = flags.lines().filter(|l| l.starts_with("flags")).any(|l| l.split_whitespace().any(|f| f == "pcid"));
    let nr_dyn_asids = if pcid { TLB_NR_DYN_ASIDS } else { 0 };
    let threads = yield_rotation_ns(cpu, plan, false)?;
    let processes = yield_rotation_ns(cpu, plan, true)?;
    let (Some(threads), Some(processes)) = (threads, processes) else {
        notes.estimated(format!(
            "tlb: left out: a sched_yield rotation of {ASID_ROTATION_TASKS} tasks on one CPU did not take turns here"
        ));
        return Ok(None);
    };
    let flush_refill_ns = floor((processes - threads).max(0.0), 10);
    notes.measured(format!(
        "tlb.nr_dyn_asids = {nr_dyn_asids}: TLB_NR_DYN_ASIDS of arch/x86 Linux 4.14+ (this CPU {} PCID); \
         tlb.flush_refill_ns = {flush_refill_ns}: a sched_yield rotation of {ASID_ROTATION_TASKS} processes on \
         one CPU {processes:.0} ns per switch, of {ASID_ROTATION_TASKS} threads of one process {threads:.0} ns",
        if pcid { "has" } else { "has no" }
    ));
    Ok(Some(TlbProfile { nr_dyn_asids, flush_refill_ns }))
}

/// Time per switch of `ASID_ROTATION_TASKS` tasks taking turns with sched_yield on
/// `cpu`: this thread and the others as processes (each its own address space) or
/// as threads of this process. None when they do not take turns (this thread
/// switched out less than 0.9 times per yield).
fn yield_rotation_ns(cpu: usize, plan: &Plan, processes: bool) -> Result<Option<f64>> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    pin_current_thread(cpu)?;
    let others = ASID_ROTATION_TASKS - 1;
    let stop = Arc::new(AtomicBool::new(false));
    let mut children = Vec::new();
    let mut threads = Vec::new();
    if processes {
        for _ in 0..others {
            children.push(fork_yielder(cpu)?);
        }
    } else {
        for _ in 0..others {
            let flag = Arc::clone(&stop);
            // Threads inherit this thread's single-CPU affinity.
            let spawned = std::thread::Builder::new().spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    // SAFETY: sched_yield has no preconditions.
                    unsafe { libc::sched_yield() };
                }
            });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(anyhow!("spawning a yielding thread: {e}"));
                }
            }
        }
    }
    let sched_yield = || {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
        Ok(())
    };
    let iters = (plan.pingpong_iters / ASID_ROTATION_TASKS).max(10);
    let before = thread_switches();
    let per_turn = time_per_op(plan.reps, iters, sched_yield);
    let after = thread_switches();
    stop.store(true, Ordering::Relaxed);
    for h in threads {
        let _ = h.join();
    }
    drop(children);
    let per_turn = per_turn?;
    let calls = calls_made(plan.reps, iters);
    let switches_per_yield = (after? - before?) as f64 / calls as f64;
    Ok((switches_per_yield > 0.9).then(|| per_turn / ASID_ROTATION_TASKS as f64))
}

/// Ring sizes for `switch_cold`: from two processes (everything stays in the
/// CPU's caches) past the private cache and then the LLC with their kernel state.
const COLD_RING_TASKS: [usize; 9] = [2, 8, 16, 32, 64, 128, 256, 512, 1024];

/// The `switch_cold` steps: a token passed round rings of `COLD_RING_TASKS`
/// processes through pipes on one CPU (`cold_ring_ns`), each hop a wakeup and a
/// switch to the process that ran longest ago; a step at n - 1 switch-ins of
/// others since, of the hop less the 2-process ring's, less the TLB refill
/// (`tlb.flush_refill_ns`, charged on its own) once the ring outgrows the ASID
/// slots. Left out in quick mode, and with a note where a ring does not switch
/// at every hop.
fn switch_cold_steps(cpu: usize, tlb: Option<&TlbProfile>, plan: &Plan, notes: &mut Notes) -> Result<Vec<SwitchCold>> {
    if plan.ring_laps == 0 {
        notes.estimated("switch_cold: left out in quick mode (the rings take seconds)".to_string());
        return Ok(Vec::new());
    }
    let biggest = COLD_RING_TASKS[COLD_RING_TASKS.len() - 1];
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(os_err("getrlimit"));
    }
    if (limit.rlim_cur as usize) < 2 * biggest + 64 {
        notes.estimated(format!(
            "switch_cold: left out: a ring of {biggest} processes needs {} descriptors, the limit here is {}",
            2 * biggest + 64,
            limit.rlim_cur
        ));
        return Ok(Vec::new());
    }
    let mut hops = Vec::new();
    for &n in &COLD_RING_TASKS {
        let Some(hop) = cold_ring_ns(cpu, n, plan.ring_laps * biggest / n)? else {
            notes.estimated(format!(
                "switch_cold: left out: a token passed round {n} processes on one CPU did not switch at every hop here"
            ));
            return Ok(Vec::new());
        };
        hops.push(hop);
    }
    let hot = hops[0];
    let slots = tlb.map_or(usize::MAX, |t| t.nr_dyn_asids as usize);
    let flush = tlb.map_or(0.0, |t| t.flush_refill_ns as f64);
    let steps: Vec<SwitchCold> = COLD_RING_TASKS
        .iter()
        .zip(&hops)
        .map(|(&n, &hop)| {
            let own = if n > slots { flush } else { 0.0 };
            SwitchCold { tasks: n as u64 - 1, extra_ns: floor(hop - hot - own, 0) }
        })
        .collect();
    let listed = |f: &dyn Fn(usize) -> String| (0..COLD_RING_TASKS.len()).map(f).collect::<Vec<_>>().join(" / ");
    notes.measured(format!(
        "switch_cold = {} ns at {} others since: a token passed round {} processes through pipes on one CPU, \
         {} ns a hop (a wakeup and a switch to the process that ran longest ago), less the 2-process ring's{}",
        listed(&|i| steps[i].extra_ns.to_string()),
        listed(&|i| steps[i].tasks.to_string()),
        listed(&|i| COLD_RING_TASKS[i].to_string()),
        listed(&|i| format!("{:.0}", hops[i])),
        if flush > 0.0 { format!(" and, past {slots} processes, tlb.flush_refill_ns") } else { String::new() }
    ));
    Ok(steps)
}

/// Time per hop of a token passed round a ring of `n` processes on `cpu` (this
/// thread and `n - 1` forked children), each reading it from its own pipe and
/// writing it into the next one's: every hop a wakeup and a switch to the
/// process that ran longest ago, in a fixed order. None when a hop does not switch
/// (this thread switched out less than 0.9 times a lap). Needs 2 `n` descriptors.
fn cold_ring_ns(cpu: usize, n: usize, laps: usize) -> Result<Option<f64>> {
    pin_current_thread(cpu)?;
    let pipes = (0..n).map(|_| pipe()).collect::<std::io::Result<Vec<_>>>()?;
    let set = cpu_set_of(&[cpu])?;
    let mut children = Vec::with_capacity(n - 1);
    for i in 1..n {
        let (from, to) = (pipes[i].0.as_raw_fd(), pipes[(i + 1) % n].1.as_raw_fd());
        // SAFETY: raw system calls on descriptors we own.
        children.push(Child::fork(move || unsafe { pinned_relay(&set, from, to) })?);
    }
    let (from, to) = (pipes[0].0.as_raw_fd(), pipes[1 % n].1.as_raw_fd());
    let lap = || {
        write_all(to, b"x")?;
        let mut b = [0u8; 1];
        Ok(read_exact(from, &mut b)?)
    };
    let reps = 3;
    let before = thread_switches();
    let per_lap = time_per_op(reps, laps, lap);
    let after = thread_switches();
    // Each child is blocked in its read (the token stopped here), so killing and
    // reaping them one by one waits for no rotation.
    drop(children);
    drop(pipes);
    let per_lap = per_lap?;
    let switches_per_lap = (after? - before?) as f64 / calls_made(reps, laps) as f64;
    Ok((switches_per_lap > 0.9).then(|| per_lap / n as f64))
}

/// The host's background threads, from a recording of it while calibrate sleeps
/// (`background::measure`); none, with a note saying why, where tracefs is out of
/// reach (not root, no tracefs).
fn background_threads(host: &Host, plan: &Plan, notes: &mut Notes) -> Vec<BackgroundThreads> {
    let span = Duration::from_millis(plan.background_ms);
    match background::measure(span, host.allowed.len()) {
        Ok(sample) => {
            for (b, (runs, run_ns)) in sample.threads.iter().zip(&sample.runs) {
                notes.measured(format!(
                    "background {}{}: {runs} runs, {:.3} ms of CPU in {:.1} s of sched_switch recorded on the \
                     idle host (nice {}): one wakeup per {:.1} ms per thread, {} ns each",
                    b.comm,
                    if b.per_cpu { " (one per CPU)" } else { "" },
                    *run_ns as f64 / 1e6,
                    sample.span_ns as f64 / 1e9,
                    b.nice,
                    b.mean_interval_ns as f64 / 1e6,
                    b.run_ns
                ));
            }
            notes.info(format!(
                "background: {} runs of real-time threads in the same recording are not modelled; \
                 interrupts and softirqs are not counted",
                sample.rt_runs
            ));
            sample.threads
        }
        Err(e) => {
            notes.info(format!("background: not measured ({e}); the profile has no background threads"));
            Vec::new()
        }
    }
}

// Defaults for what a one-CPU host cannot show; the class values of
// machines/broadwell-ep.toml, where each is sourced.
const DEFAULT_CONTEXT_SWITCH_NS: u64 = 1_500;
const DEFAULT_CACHE_LINE_NS: f64 = 45.0;
const DEFAULT_IPI_SEND_NS: u64 = 150;
const DEFAULT_IPI_LATENCY_NS: u64 = 1_000;
const DEFAULT_IDLE_EXIT_NS: u64 = 2_000;
/// A longer idle's exit enters the profile only if it grew at least this much
/// over a short idle's (the medians of a few hundred sleeps move by about 1 us
/// from run to run).
const HALTED_EXIT_MIN_GROWTH_NS: f64 = 2_000.0;

/// Messages per timed AF_UNIX batch: ~32 KiB of skb truesize, well inside the default
/// socket buffer, so no send blocks.
const UNIX_BATCH: usize = 32;

/// Working set re-read after a migration: a task's hot data, about an L2's worth.
const REFILL_BYTES: usize = 256 * 1024;

/// How long any wait for a helper thread or child may take before we give up.
const HELPER_TIMEOUT_NS: u64 = 2_000_000_000;

/// Iteration counts: quick mode finishes in ~1-3 s, full mode in well under 30 s.
struct Plan {
    reps: usize,
    syscall_iters: usize,
    pipe_iters: usize,
    copy_iters: usize,
    unix_batches: usize,
    fork_iters: usize,
    clone_iters: usize,
    pingpong_iters: usize,
    cross_iters: usize,
    wake_samples: usize,
    cache_line_iters: usize,
    refill_reps: usize,
    bw_bytes: usize,
    /// The copied buffers are at least this many times the node's LLC capacity.
    bw_llc_factor: usize,
    bw_reps: usize,
    /// How long the idle host is recorded for its background threads.
    background_ms: u64,
    /// How long a spinner watches for the tick's gaps.
    tick_ms: u64,
    /// Sleeps of half a tick timed for `timer_program_ns`.
    timer_sleeps: usize,
    /// 20 us sleeps timed for `halted_exit`, and the fewest of each longer one.
    halted_exit_sleeps: usize,
    halted_exit_min_each: usize,
    /// Laps of the largest ring for `switch_cold` (smaller rings more in
    /// proportion); 0 leaves it out.
    ring_laps: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Plan {
                reps: 5,
                syscall_iters: 20_000,
                pipe_iters: 5_000,
                copy_iters: 500,
                unix_batches: 100,
                fork_iters: 60,
                clone_iters: 100,
                pingpong_iters: 1_000,
                cross_iters: 300,
                wake_samples: 150,
                cache_line_iters: 20_000,
                refill_reps: 5,
                bw_bytes: 32 << 20,
                bw_llc_factor: 2,
                bw_reps: 2,
                background_ms: 1_000,
                tick_ms: 300,
                timer_sleeps: 100,
                halted_exit_sleeps: 300,
                halted_exit_min_each: 15,
                ring_laps: 0,
            }
        } else {
            Plan {
                reps: 9,
                syscall_iters: 200_000,
                pipe_iters: 50_000,
                copy_iters: 5_000,
                unix_batches: 2_000,
                fork_iters: 1_000,
                clone_iters: 2_000,
                pingpong_iters: 20_000,
                cross_iters: 3_000,
                wake_samples: 2_000,
                cache_line_iters: 200_000,
                refill_reps: 21,
                bw_bytes: 256 << 20,
                bw_llc_factor: 4,
                bw_reps: 5,
                background_ms: 5_000,
                tick_ms: 1_000,
                timer_sleeps: 400,
                halted_exit_sleeps: 2_000,
                halted_exit_min_each: 60,
                ring_laps: 20,
            }
        }
    }
}

/// The collected `sources` lines, tagged by how each number was obtained.
#[derive(Default)]
struct Notes(Vec<String>);

impl Notes {
    fn info(&mut self, s: String) {
        self.0.push(s);
    }
    fn measured(&mut self, s: String) {
        self.0.push(format!("measured: {s}"));
    }
    fn estimated(&mut self, s: String) {
        self.0.push(format!("estimated: {s}"));
    }
    fn into_sources(self) -> Vec<String> {
        self.0
    }
}

/// Rounds a nanosecond figure, never below `min` (a difference of two noisy medians
/// can come out at or below zero when the true value is small).
fn floor(x: f64, min: u64) -> u64 {
    if x.is_finite() && x > min as f64 {
        x.round() as u64
    } else {
        min
    }
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 })
}

/// Cost of one `now_ns()` call, subtracted from individually timed calls.
fn timer_overhead_ns() -> f64 {
    let samples = (0..1_000)
        .map(|_| {
            let t0 = now_ns();
            let t1 = now_ns();
            t1.saturating_sub(t0) as f64
        })
        .collect();
    median(samples).unwrap_or(0.0)
}

fn sleep_ns(ns: u64) {
    let ts = libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long };
    // SAFETY: valid timespec; an early return on a signal only shortens the sleep.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// The untimed calls `time_per_op` makes first.
fn warmup_calls(iters: usize) -> usize {
    (iters / 10).max(1)
}

/// Every call `time_per_op(reps, iters, _)` makes, warm-up included: what a
/// count of switches taken around it is divided by.
fn calls_made(reps: usize, iters: usize) -> usize {
    warmup_calls(iters) + reps * iters
}

/// Median over `reps` repetitions of the mean time of `op` over `iters` calls,
/// after a short warm-up.
fn time_per_op(reps: usize, iters: usize, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warmup_calls(iters) {
        op()?;
    }
    let mut per_op = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = now_ns();
        for _ in 0..iters {
            op()?;
        }
        per_op.push(now_ns().saturating_sub(t0) as f64 / iters as f64);
    }
    median(per_op).context("no repetitions")
}

fn os_err(what: &str) -> anyhow::Error {
    anyhow!("{what}: {}", std::io::Error::last_os_error())
}

// --- CPUs and topology -------------------------------------------------------------

/// Moves the calling thread to `cpu`; returns once it runs there.
fn pin_current_thread(cpu: usize) -> Result<()> {
    set_affinity(&cpu_set_of(&[cpu])?).with_context(|| format!("pinning to CPU {cpu}"))
}

/// Restores the calling thread's CPU affinity when dropped.
struct AffinityGuard(libc::cpu_set_t);

impl AffinityGuard {
    fn save() -> Result<Self> {
        // SAFETY: all-zero cpu_set_t is valid; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return Err(os_err("sched_getaffinity"));
        }
        Ok(AffinityGuard(set))
    }

    fn cpus(&self) -> Vec<usize> {
        // SAFETY: every c is below CPU_SETSIZE, inside the set.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) }).collect()
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        // Nothing sensible to do if restoring fails; the thread keeps a valid mask.
        let _ = set_affinity(&self.0);
    }
}

fn read_sys(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => {
                if let Ok(c) = part.trim().parse() {
                    cpus.push(c);
                }
            }
        }
    }
    cpus
}

/// Parses a sysfs cache size such as `32768K`.
fn parse_cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

/// The CPUs we measure between and what the host looks like.
struct Host {
    allowed: Vec<usize>,
    /// Where single-CPU measurements run and migrations start.
    cpu_a: usize,
    /// Another core sharing cpu_a's LLC if there is one, else any other CPU.
    cpu_b: Option<usize>,
    sibling: Option<usize>,
    other_llc: Option<usize>,
    other_node: Option<usize>,
    llc_bytes: usize,
    /// cpu_a's level-2 cache (1 MiB where sysfs does not say).
    l2_bytes: usize,
    /// How many CPUs share cpu_a's LLC.
    llc_cpus: usize,
    /// Allowed CPUs of cpu_a's NUMA node (at most 64: enough to saturate memory).
    node_cpus: Vec<usize>,
    model: String,
    kernel: String,
    idle_driver: String,
}

impl Host {
    /// The profile description calibrate writes, which names the host.
    fn profile_description(&self) -> String {
        format!("Measured by schedlab calibrate on {} ({} CPUs allowed), Linux {}", self.model, self.allowed.len(), self.kernel)
    }

    fn detect() -> Result<Host> {
        let allowed = AffinityGuard::save()?.cpus();
        let cpu_a = *allowed.first().context("no CPU in this thread's affinity mask")?;
        let cpu_dir = format!("/sys/devices/system/cpu/cpu{cpu_a}");
        let siblings = read_sys(&format!("{cpu_dir}/topology/thread_siblings_list"))
            .map(|s| parse_cpu_list(&s))
            .unwrap_or_else(|| vec![cpu_a]);

        // The last-level cache: the highest cache index level.
        let (mut llc_level, mut llc_cpus, mut llc_bytes) = (0u32, vec![cpu_a], 32usize << 20);
        let mut l2_bytes = 1usize << 20;
        for index in 0..8 {
            let dir = format!("{cpu_dir}/cache/index{index}");
            let Some(level) = read_sys(&format!("{dir}/level")).and_then(|l| l.parse().ok()) else {
                continue;
            };
            if level == 2 {
                if let Some(size) = read_sys(&format!("{dir}/size")).and_then(|s| parse_cache_size(&s)) {
                    l2_bytes = size;
                }
            }
            if level > llc_level {
                llc_level = level;
                if let Some(list) = read_sys(&format!("{dir}/shared_cpu_list")) {
                    llc_cpus = parse_cpu_list(&list);
                }
                if let Some(size) = read_sys(&format!("{dir}/size")).and_then(|s| parse_cache_size(&s)) {
                    llc_bytes = size;
                }
            }
        }

        let mut node_of_a = allowed.clone();
        if let Ok(entries) = std::fs::read_dir("/sys/devices/system/node") {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().to_string();
                if !name.starts_with("node") || name[4..].parse::<usize>().is_err() {
                    continue;
                }
                let path = format!("/sys/devices/system/node/{name}/cpulist");
                if let Some(list) = read_sys(&path) {
                    let cpus = parse_cpu_list(&list);
                    if cpus.contains(&cpu_a) {
                        node_of_a = cpus;
                    }
                }
            }
        }

        let others: Vec<usize> = allowed.iter().copied().filter(|&c| c != cpu_a).collect();
        let sibling = others.iter().copied().find(|c| siblings.contains(c));
        let same_llc_core = others.iter().copied().find(|c| !siblings.contains(c) && llc_cpus.contains(c));
        let cpu_b = same_llc_core.or_else(|| others.iter().copied().find(|c| !siblings.contains(c))).or(sibling);
        let other_llc = others.iter().copied().find(|c| !llc_cpus.contains(c) && node_of_a.contains(c));
        let other_node = others.iter().copied().find(|c| !node_of_a.contains(c));
        let mut node_cpus: Vec<usize> = allowed.iter().copied().filter(|c| node_of_a.contains(c)).collect();
        node_cpus.truncate(64);

        let model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, m)| m.trim().to_string())
            })
            .unwrap_or_else(|| "unknown CPU".to_string());
        let idle_driver = read_sys("/sys/devices/system/cpu/cpuidle/current_driver").unwrap_or_else(|| "unknown".to_string());

        Ok(Host {
            allowed,
            cpu_a,
            cpu_b,
            sibling,
            other_llc,
            other_node,
            llc_bytes,
            l2_bytes,
            llc_cpus: llc_cpus.len(),
            node_cpus,
            model,
            kernel: crate::kernel::release(),
            idle_driver: format!("cpuidle driver {idle_driver}"),
        })
    }
}

fn rss_mib() -> u64 {
    // /proc/self/statm: size resident ... in pages.
    read_sys("/proc/self/statm")
        .and_then(|s| s.split_whitespace().nth(1).and_then(|r| r.parse::<u64>().ok()))
        .map_or(0, |pages| (pages * 4096) >> 20)
}

// --- Pipes, sockets, child processes ---------------------------------------------------

/// Both ends of one pipe, for in-process write-then-read loops.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    data: Vec<u8>,
    sink: Vec<u8>,
}

impl Pipe {
    fn new() -> Result<Self> {
        let (read, write) = pipe()?;
        Ok(Pipe { read, write, data: vec![0x5a; 64 * 1024], sink: vec![0; 64 * 1024] })
    }

    /// Writes `len` bytes into the pipe and reads them back (len fits the pipe).
    fn write_read(&mut self, len: usize) -> Result<()> {
        write_all(self.write.as_raw_fd(), &self.data[..len])?;
        Ok(read_exact(self.read.as_raw_fd(), &mut self.sink[..len])?)
    }
}

/// The steal time (a hypervisor running something else on the vCPU) of `cpus`
/// so far, in clock ticks: the eighth field of their lines in /proc/stat. None
/// where it cannot be read.
fn steal_ticks(cpus: &[usize]) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let mut total = 0;
    for cpu in cpus {
        let name = format!("cpu{cpu}");
        let line = stat.lines().find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        total += line.split_whitespace().nth(8)?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// /proc/stat's clock ticks per second (`sysconf(_SC_CLK_TCK)`, USER_HZ).
fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Calls per timed batch in [`pipe_stamp_ns`].
const STAMP_BATCH: usize = 64;

/// Per-call times of [`pipe_stamp_ns`].
struct PipeStamps {
    dir: String,
    fifo_write_ns: f64,
    fifo_read_ns: f64,
    anon_write_ns: f64,
    anon_read_ns: f64,
}

/// Removes a path when dropped (a FIFO made for a measurement).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// 1-byte writes then 1-byte reads in batches of `STAMP_BATCH` by this thread,
/// on a FIFO (in /dev/shm if it is there, else the temporary directory) and on
/// an anonymous pipe, the two alternating batch by batch; each batch timed less
/// one clock read, medians per call. The FIFO is removed on every path out: a
/// SIGINT, SIGTERM or SIGHUP meanwhile takes effect once it is gone.
fn pipe_stamp_ns(plan: &Plan, timer_ns: f64) -> Result<PipeStamps> {
    let guard = crate::signals::install_scoped();
    let measured = fifo_and_pipe_ns(plan, timer_ns);
    guard.finish();
    measured
}

/// [`pipe_stamp_ns`]'s measurement; its FIFO is removed when it returns.
fn fifo_and_pipe_ns(plan: &Plan, timer_ns: f64) -> Result<PipeStamps> {
    use std::os::unix::ffi::OsStrExt;
    let dir = if std::path::Path::new("/dev/shm").is_dir() { std::path::PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let path = dir.join(format!("schedlab-calibrate-fifo-{}", std::process::id()));
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).context("FIFO path")?;
    // SAFETY: c_path is a valid NUL-terminated path.
    if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
        return Err(os_err(&format!("mkfifo {}", path.display())));
    }
    let _remove = RemoveOnDrop(path.clone());
    let open = |flags: libc::c_int| -> Result<OwnedFd> {
        // SAFETY: c_path is valid; a returned descriptor is owned by nothing else.
        let fd = unsafe { libc::open(c_path.as_ptr(), flags | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(os_err(&format!("open {}", path.display())));
        }
        // SAFETY: fd is a fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    // The read end first, non-blocking (a blocking open waits for a writer), then
    // back to blocking for the measurement.
    let fifo_r = open(libc::O_RDONLY | libc::O_NONBLOCK)?;
    let fifo_w = open(libc::O_WRONLY)?;
    // SAFETY: plain fcntl on our own descriptor.
    if unsafe { libc::fcntl(fifo_r.as_raw_fd(), libc::F_SETFL, 0) } != 0 {
        return Err(os_err("fcntl(F_SETFL) on the FIFO"));
    }
    let (anon_r, anon_w) = pipe().context("pipe for the time-stamp measurement")?;
    let fifo = vec![(fifo_r.as_raw_fd(), fifo_w.as_raw_fd()); STAMP_BATCH];
    let anon = vec![(anon_r.as_raw_fd(), anon_w.as_raw_fd()); STAMP_BATCH];
    let batches = (plan.pipe_iters / STAMP_BATCH).max(20);
    let [(fifo_write_ns, fifo_read_ns), (anon_write_ns, anon_read_ns)] =
        alternating_medians(batches, || write_read_batch_ns(&fifo, timer_ns), || write_read_batch_ns(&anon, timer_ns))?;
    Ok(PipeStamps { dir: dir.display().to_string(), fifo_write_ns, fifo_read_ns, anon_write_ns, anon_read_ns })
}

/// Dependent adds per timed chain when measuring the core clock.
const CLOCK_CHAIN_ADDS: u64 = 32_000_000;

/// The core clock, MHz: `CLOCK_CHAIN_ADDS` adds, each needing the one before
/// (one cycle of latency on every x86-64 and arm64 core), timed `reps` times;
/// the median. None on other architectures.
fn core_clock_mhz(reps: usize) -> Option<f64> {
    let samples = (0..reps.max(1))
        .filter_map(|_| {
            let t0 = now_ns();
            add_chain(CLOCK_CHAIN_ADDS / 16)?;
            let ns = now_ns().saturating_sub(t0).max(1);
            Some(CLOCK_CHAIN_ADDS as f64 * 1000.0 / ns as f64)
        })
        .collect();
    median(samples)
}

/// `iters` times 16 dependent adds. Some(()) where it is written for the
/// architecture.
#[allow(unreachable_code, unused_macros)]
fn add_chain(iters: u64) -> Option<()> {
    // The loop, with the architecture's add, decrement and branch.
    macro_rules! chain {
        ($add:literal, $dec:literal, $branch:literal) => {
            // SAFETY: register arithmetic and a counted loop; no memory, no stack.
            unsafe {
                std::arch::asm!(
                    "2:", ".rept 16", $add, ".endr", $dec, $branch,
                    x = inout(reg) 0u64 => _,
                    n = inout(reg) iters.max(1) => _,
                    options(nomem, nostack),
                )
            }
        };
    }
    #[cfg(target_arch = "x86_64")]
    {
        chain!("add {x}, 1", "dec {n}", "jnz 2b");
        return Some(());
    }
    #[cfg(target_arch = "aarch64")]
    {
        chain!("add {x}, {x}, #1", "subs {n}, {n}, #1", "b.ne 2b");
        return Some(());
    }
    let _ = iters;
    None
}

/// Packets written then read per batch when pricing a pipe's slot pages: a
/// full ring (`PIPE_DEF_BUFFERS`).
const PAGE_BATCH: usize = 16;

/// The spare pages this host's pipes keep (`pipe->tmp_page`), by the model's
/// rule; an unreadable release is taken as before v6.15.
fn host_pipe_spare_pages() -> usize {
    usize::from(schedlab_core::ipc::tmp_page_slots(Some(host_release().unwrap_or((0, 0)))))
}

/// This kernel's (major, minor), if uname's release parses.
fn host_release() -> Option<(u32, u32)> {
    crate::kernel::major_minor(&crate::kernel::release())
}

struct PipePages {
    /// Per call in batches of `PAGE_BATCH` packets.
    batch_write_ns: f64,
    batch_read_ns: f64,
    /// Per call in batches of as many packets as the pipe keeps spare pages.
    spare_write_ns: f64,
    spare_read_ns: f64,
    alloc_ns: f64,
    free_ns: f64,
}

/// Per-call write and read times of 512-byte packets (`pipe2(O_DIRECT)`) in
/// batches of `batch` written then read by this thread, each batch timed less
/// one clock read; medians over the batches after a warm-up tenth.
fn packet_batch_ns(batch: usize, batches: usize, timer_ns: f64) -> Result<(f64, f64)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds is a valid 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_DIRECT) } != 0 {
        return Err(os_err("pipe2(O_DIRECT)"));
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let (msg, mut buf) = ([0x5au8; 512], [0u8; 512]);
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for round in 0..batches + batches / 10 {
        let t0 = now_ns();
        for _ in 0..batch {
            write_all(w.as_raw_fd(), &msg)?;
        }
        let t1 = now_ns();
        for _ in 0..batch {
            read_exact(r.as_raw_fd(), &mut buf)?;
        }
        let t2 = now_ns();
        if round >= batches / 10 {
            writes.push(((t1 - t0) as f64 - timer_ns) / batch as f64);
            reads.push(((t2 - t1) as f64 - timer_ns) / batch as f64);
        }
    }
    Ok((median(writes).context("no packet write sample")?, median(reads).context("no packet read sample")?))
}

/// What a pipe pays for a slot's page when it keeps no spare: allocating it
/// (write) and freeing it (read), from batches that fill the ring against
/// batches that use only the `spares` spare pages. Each batch's first write
/// finds the pipe empty and its last read empties it (`emptiness`: what the
/// two cost apart, `pipe_was_empty_ns` and `pipe_emptied_ns`), a larger share
/// of the calls in the short batches: that share is taken out.
fn pipe_page_ns(spares: usize, plan: &Plan, timer_ns: f64, emptiness: (f64, f64)) -> Result<PipePages> {
    let batches = plan.unix_batches;
    let (batch_write_ns, batch_read_ns) = packet_batch_ns(PAGE_BATCH, batches, timer_ns)?;
    let (spare_write_ns, spare_read_ns) = packet_batch_ns(spares, batches * PAGE_BATCH / spares, timer_ns)?;
    let per_page = PAGE_BATCH as f64 / (PAGE_BATCH - spares) as f64;
    let share = 1.0 / spares as f64 - 1.0 / PAGE_BATCH as f64;
    Ok(PipePages {
        batch_write_ns,
        batch_read_ns,
        spare_write_ns,
        spare_read_ns,
        alloc_ns: (batch_write_ns - spare_write_ns + emptiness.0 * share) * per_page,
        free_ns: (batch_read_ns - spare_read_ns + emptiness.1 * share) * per_page,
    })
}

/// Pipes in each batch of [`pipe_empty_ns`].
const EMPTY_PIPES: usize = 64;

/// Per-call times of [`pipe_empty_ns`].
struct PipeEmpty {
    /// On pipes that keep a byte: the write merges, the read leaves one.
    kept_write_ns: f64,
    kept_read_ns: f64,
    /// On empty pipes: the write starts a slot, the read empties the pipe.
    empty_write_ns: f64,
    empty_read_ns: f64,
}

/// 1-byte writes into `EMPTY_PIPES` pipes, one each, then 1-byte reads from
/// them, by this thread: once with every pipe empty before its write (so every
/// read empties it again) and once with every pipe keeping a byte, the two
/// alternating batch by batch; each batch timed less one clock read, medians
/// per call after a warm-up tenth. The pipes are closed when it returns.
fn pipe_empty_ns(plan: &Plan, timer_ns: f64) -> Result<PipeEmpty> {
    let mut pipes = Vec::with_capacity(EMPTY_PIPES);
    for _ in 0..EMPTY_PIPES {
        pipes.push(pipe().context("pipes for the empty-pipe measurement")?);
    }
    let fds: Vec<(RawFd, RawFd)> = pipes.iter().map(|(r, w)| (r.as_raw_fd(), w.as_raw_fd())).collect();
    // Each kept batch runs on pipes given a byte before it and drained after it.
    let kept_batch = || -> Result<(f64, f64)> {
        for &(_, w) in &fds {
            write_all(w, b"k")?;
        }
        let times = write_read_batch_ns(&fds, timer_ns)?;
        let mut b = [0u8; 1];
        for &(r, _) in &fds {
            read_exact(r, &mut b)?;
        }
        Ok(times)
    };
    let batches = (plan.pipe_iters / EMPTY_PIPES).max(20);
    let [(empty_write_ns, empty_read_ns), (kept_write_ns, kept_read_ns)] =
        alternating_medians(batches, || write_read_batch_ns(&fds, timer_ns), kept_batch)?;
    Ok(PipeEmpty { kept_write_ns, kept_read_ns, empty_write_ns, empty_read_ns })
}

/// Per-call times of a 1-byte write into each of `pipes` (read end, write end)
/// in turn, then of a 1-byte read from each, by this thread: each of the two
/// loops timed less one clock read.
fn write_read_batch_ns(pipes: &[(RawFd, RawFd)], timer_ns: f64) -> Result<(f64, f64)> {
    let mut b = [0u8; 1];
    let t0 = now_ns();
    for &(_, w) in pipes {
        write_all(w, b"x")?;
    }
    let t1 = now_ns();
    for &(r, _) in pipes {
        read_exact(r, &mut b)?;
    }
    let t2 = now_ns();
    let per = |ns: u64| (ns as f64 - timer_ns) / pipes.len() as f64;
    Ok((per(t1 - t0), per(t2 - t1)))
}

/// Two measurements of (write, read) per call taken alternately `batches`
/// times after a warm-up tenth, so that both see the same host: the medians of
/// each. Stops on SIGINT, SIGTERM or SIGHUP.
fn alternating_medians(
    batches: usize,
    mut first: impl FnMut() -> Result<(f64, f64)>,
    mut second: impl FnMut() -> Result<(f64, f64)>,
) -> Result<[(f64, f64); 2]> {
    let mut samples = [Vec::with_capacity(batches), Vec::with_capacity(batches)];
    for i in 0..batches + batches / 10 {
        if crate::signals::interrupted() {
            bail!("interrupted");
        }
        let pair = [first()?, second()?];
        if i >= batches / 10 {
            for (s, v) in samples.iter_mut().zip(pair) {
                s.push(v);
            }
        }
    }
    let med = |v: &[(f64, f64)], pick: fn(&(f64, f64)) -> f64| median(v.iter().map(pick).collect()).unwrap_or(0.0);
    Ok(samples.map(|v| (med(&v, |x| x.0), med(&v, |x| x.1))))
}

/// The footprints the cold curves are measured at: a quarter, a half, one, two,
/// four and eight L2s, and 1.5 LLCs, each below the last. Measured on this
/// project's hosts (1 MiB L2, 32 MiB LLC) the extra of a socket receive grows
/// to nearly all of its past-the-LLC value by 2-4 MiB (validate-host.txt, step
/// 34), so one step at the LLC with straight lines below it undercharged every
/// footprint between.
fn cold_footprints(l2_bytes: usize, llc_bytes: usize) -> Vec<usize> {
    let past_llc = llc_bytes * 3 / 2;
    let mut at: Vec<usize> = [l2_bytes / 4, l2_bytes / 2, l2_bytes, 2 * l2_bytes, 4 * l2_bytes, 8 * l2_bytes]
        .into_iter()
        .filter(|&b| b > 0 && b < past_llc)
        .collect();
    at.push(past_llc);
    at
}

/// One cold curve: a step measured at each of `footprints` (the step and the
/// rest of its source line), kept, and noted, only where its footprint is above
/// the last one's (a measurement the descriptor or socket limits capped adds
/// nothing).
fn cold_curve(
    name: &str,
    footprints: Vec<usize>,
    notes: &mut Notes,
    mut measure: impl FnMut(usize) -> Result<(ColdStep, String)>,
) -> Result<Vec<ColdStep>> {
    let mut curve: Vec<ColdStep> = Vec::new();
    for bytes in footprints {
        let (step, detail) = measure(bytes)?;
        if curve.last().is_some_and(|last| step.bytes <= last.bytes) {
            continue;
        }
        notes.measured(format!(
            "{name} step at {} KiB: write_ns = {}, read_ns = {}: {detail}",
            step.bytes >> 10,
            step.write_ns,
            step.read_ns
        ));
        curve.push(step);
    }
    Ok(curve)
}

/// Per-call times of 100-byte AF_UNIX stream writes and reads.
fn unix_send_recv_ns(plan: &Plan) -> Result<(f64, f64)> {
    let (mut a, mut b) = std::os::unix::net::UnixStream::pair().context("socketpair(AF_UNIX)")?;
    batched_send_recv_ns(&mut a, &mut b, plan)
}

struct UnixCold {
    sockets: usize,
    per_socket: usize,
    footprint_bytes: u64,
    send_ns: f64,
    recv_ns: f64,
}

/// Messages queued per socket: under the default 208 KiB send buffer.
const UNIX_COLD_PER_SOCKET: usize = 250;
/// Sockets filled at the smallest footprints: a hackbench group's 20.
const UNIX_COLD_MIN_SOCKETS: usize = 20;
/// At most this many socket pairs (two descriptors each), within the usual
/// 1024-descriptor limit.
const UNIX_COLD_MAX_SOCKETS: usize = 400;

/// Per-call times of 100-byte AF_UNIX sends that fill enough sockets to queue
/// `footprint_bytes` in skbs (at least [`UNIX_COLD_MIN_SOCKETS`], at most
/// [`UNIX_COLD_MAX_SOCKETS`]), written round-robin, then of the receives that
/// drain them in the same order; the median of three such rounds, on the
/// calling thread's CPU.
fn unix_cold_ns(footprint_bytes: usize, plan: &Plan) -> Result<UnixCold> {
    use std::os::unix::net::UnixStream;
    // The simulator's own skb accounting, so that the footprint means the same there.
    let truesize = schedlab_core::ipc::skb_truesize(100) as usize;
    let messages = (footprint_bytes / truesize).max(UNIX_COLD_MIN_SOCKETS);
    // hackbench's 20 sockets a group at the small footprints, each holding up
    // to UNIX_COLD_PER_SOCKET messages, more sockets past that.
    let per_socket = (messages / UNIX_COLD_MIN_SOCKETS).clamp(1, UNIX_COLD_PER_SOCKET);
    let sockets = messages.div_ceil(per_socket).clamp(UNIX_COLD_MIN_SOCKETS, UNIX_COLD_MAX_SOCKETS);
    let mut pairs = Vec::with_capacity(sockets);
    for _ in 0..sockets {
        pairs.push(UnixStream::pair().context("socketpair(AF_UNIX) for the cold-socket measurement")?);
    }
    let rounds = if plan.reps > 5 { 3 } else { 1 };
    let (msg, mut buf) = ([0x5au8; 100], [0u8; 100]);
    let (mut sends, mut recvs, mut queued) = (Vec::new(), Vec::new(), 0);
    for _ in 0..rounds {
        let t0 = now_ns();
        let mut sent = 0usize;
        for _ in 0..per_socket {
            for (tx, _) in &pairs {
                // SAFETY: sending from a 100-byte buffer.
                if unsafe { libc::send(tx.as_raw_fd(), msg.as_ptr().cast(), 100, libc::MSG_DONTWAIT) } == 100 {
                    sent += 1;
                }
            }
        }
        let t1 = now_ns();
        let mut got = 0usize;
        for _ in 0..per_socket {
            for (_, rx) in &pairs {
                // SAFETY: reading into a 100-byte buffer.
                if unsafe { libc::recv(rx.as_raw_fd(), buf.as_mut_ptr().cast(), 100, libc::MSG_DONTWAIT) } == 100 {
                    got += 1;
                }
            }
        }
        let t2 = now_ns();
        if sent == 0 || got == 0 {
            bail!("the cold-socket measurement moved no message");
        }
        queued = sent;
        sends.push((t1 - t0) as f64 / sent as f64);
        recvs.push((t2 - t1) as f64 / got as f64);
    }
    Ok(UnixCold {
        sockets,
        per_socket,
        footprint_bytes: (queued * truesize) as u64,
        send_ns: median(sends).context("no cold send sample")?,
        recv_ns: median(recvs).context("no cold receive sample")?,
    })
}

struct PipeCold {
    pipes: usize,
    footprint_bytes: u64,
    cold_write_ns: f64,
    cold_read_ns: f64,
    hot_write_ns: f64,
    hot_read_ns: f64,
}

/// Pipes of the cache-hot reference measurement.
const PIPE_HOT_PIPES: usize = 4;
/// The fewest pipes a cold measurement fills.
const PIPE_COLD_MIN_PIPES: usize = PIPE_HOT_PIPES * 4;
/// The pages of one filled pipe: a default pipe's 16.
const PIPE_FILL_BYTES: usize = 16 * 4096;
/// 100-byte writes that fill a default pipe's 16 pages (40 merged per page).
const PIPE_FILL_WRITES: usize = 16 * 40;

/// Per-call times of 100-byte writes filling `n` pipes round-robin, then of the
/// reads draining them: the median of a few rounds.
fn pipe_round_ns(n: usize, rounds: usize) -> Result<(f64, f64)> {
    let mut pipes = Vec::with_capacity(n);
    for _ in 0..n {
        let (r, w) = pipe()?;
        for fd in [r.as_raw_fd(), w.as_raw_fd()] {
            crate::sys::set_nonblocking(fd)?;
        }
        pipes.push((r, w));
    }
    let (msg, mut buf) = ([0x5au8; 100], [0u8; 100]);
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (mut wrote, mut got) = (0usize, 0usize);
        let t0 = now_ns();
        for _ in 0..PIPE_FILL_WRITES {
            for (_, w) in &pipes {
                // SAFETY: writing from a 100-byte buffer.
                if unsafe { libc::write(w.as_raw_fd(), msg.as_ptr().cast(), 100) } == 100 {
                    wrote += 1;
                }
            }
        }
        let t1 = now_ns();
        for _ in 0..PIPE_FILL_WRITES {
            for (r, _) in &pipes {
                // SAFETY: reading into a 100-byte buffer.
                if unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), 100) } == 100 {
                    got += 1;
                }
            }
        }
        let t2 = now_ns();
        if wrote == 0 || got == 0 {
            bail!("the pipe fill measurement moved no data");
        }
        writes.push((t1 - t0) as f64 / wrote as f64);
        reads.push((t2 - t1) as f64 / got as f64);
    }
    Ok((median(writes).context("no pipe write sample")?, median(reads).context("no pipe read sample")?))
}

/// Cold pipe writes and reads: as many pipes as fill `footprint_bytes` with
/// pages, within the descriptor limit (raised to its hard limit for the measurement and
/// put back after), against the same calls on a few pipes.
fn pipe_cold_ns(footprint_bytes: usize, plan: &Plan) -> Result<PipeCold> {
    let want = footprint_bytes.div_ceil(PIPE_FILL_BYTES).max(PIPE_COLD_MIN_PIPES);
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit fills the struct.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    let saved = lim;
    let raised = libc::rlimit { rlim_cur: lim.rlim_max.min(1 << 16), rlim_max: lim.rlim_max };
    // SAFETY: raising the soft limit up to the hard one is always allowed.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) };
    let room = (raised.rlim_cur as usize).saturating_sub(64) / 2;
    let pipes = want.min(room).max(PIPE_HOT_PIPES);
    let rounds = if plan.reps > 5 { 3 } else { 1 };
    let cold = pipe_round_ns(pipes, rounds);
    // SAFETY: restoring the limits we read.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &saved) };
    let (cold_write_ns, cold_read_ns) = cold?;
    let (hot_write_ns, hot_read_ns) = pipe_round_ns(PIPE_HOT_PIPES, rounds * 3)?;
    Ok(PipeCold {
        pipes,
        footprint_bytes: (pipes * PIPE_FILL_BYTES) as u64,
        cold_write_ns,
        cold_read_ns,
        hot_write_ns,
        hot_read_ns,
    })
}

/// Per-call times of 100-byte writes and reads on a loopback TCP connection
/// (TCP_NODELAY).
fn tcp_send_recv_ns(plan: &Plan) -> Result<(f64, f64)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
    let mut client = std::net::TcpStream::connect(listener.local_addr()?).context("connect 127.0.0.1")?;
    let (mut server, _) = listener.accept().context("accept")?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    batched_send_recv_ns(&mut client, &mut server, plan)
}

/// Median per-call times of 100-byte writes to `tx`, then reads from `rx`, in
/// batches of `UNIX_BATCH` (sender and receiver in one thread).
fn batched_send_recv_ns(tx: &mut impl std::io::Write, rx: &mut impl std::io::Read, plan: &Plan) -> Result<(f64, f64)> {
    let msg = [0x5au8; 100];
    let mut got = [0u8; 100];
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    for batch in 0..plan.unix_batches + plan.unix_batches / 10 {
        let t0 = now_ns();
        for _ in 0..UNIX_BATCH {
            tx.write_all(&msg)?;
        }
        let t1 = now_ns();
        for _ in 0..UNIX_BATCH {
            rx.read_exact(&mut got)?;
        }
        let t2 = now_ns();
        // The first tenth warms caches and the slab.
        if batch >= plan.unix_batches / 10 {
            sends.push(t1.saturating_sub(t0) as f64 / UNIX_BATCH as f64);
            recvs.push(t2.saturating_sub(t1) as f64 / UNIX_BATCH as f64);
        }
    }
    Ok((median(sends).context("no send sample")?, median(recvs).context("no recv sample")?))
}

/// A forked child process. Dropping it kills and reaps it, so none outlives
/// `calibrate`, whichever way it returns.
struct Child(libc::pid_t);

impl Child {
    /// Forks a child that runs `body` and exits. `body` runs in a copy of a possibly
    /// multi-threaded process, so it may only make raw system calls: no allocation,
    /// no locks, no printing.
    fn fork(body: impl FnOnce()) -> Result<Child> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child only runs `body` (raw system calls) and _exit.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(os_err("fork"));
        }
        if pid == 0 {
            // SAFETY: raw system calls in the child.
            unsafe {
                // Die with the parent thread; and if the parent is already gone,
                // before prctl took effect, leave at once.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
            }
            body();
            // SAFETY: _exit is async-signal-safe and skips atexit handlers.
            unsafe { libc::_exit(0) };
        }
        Ok(Child(pid))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Kill first: the pid stays ours (a zombie at worst) until reaped, so this
        // cannot hit another process. Then reap so no zombie is left behind.
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
        let _ = reap(self.0);
    }
}

/// Waits for a child, retrying on EINTR.
fn reap(pid: libc::pid_t) -> Result<()> {
    crate::sys::wait_for(pid)?;
    Ok(())
}

/// The body of a forked helper: moves itself onto the CPUs of `set`, then
/// copies every byte it reads from `input` to `output`, one at a time, until a
/// read or write fails (end of file included).
///
/// # Safety
/// Raw system calls only (a forked child of a possibly multi-threaded process);
/// `input` and `output` must be open descriptors of the calling process.
unsafe fn pinned_relay(set: &libc::cpu_set_t, input: RawFd, output: RawFd) {
    // SAFETY: plain system calls on the caller's descriptors and a local byte.
    unsafe {
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
            return;
        }
        let mut b = [0u8; 1];
        while libc::read(input, b.as_mut_ptr().cast(), 1) == 1 {
            if libc::write(output, b.as_ptr().cast(), 1) != 1 {
                return;
            }
        }
    }
}

/// A child process pinned to one CPU that echoes every byte it reads from one pipe
/// into another.
struct EchoChild {
    // Field order matters: the pipes close before the child is killed.
    to_child: OwnedFd,
    from_child: OwnedFd,
    _child: Child,
}

impl EchoChild {
    fn spawn(cpu: usize) -> Result<EchoChild> {
        let (p2c_read, p2c_write) = pipe()?;
        let (c2p_read, c2p_write) = pipe()?;
        // Prepared before fork: the child may only make raw system calls.
        let set = cpu_set_of(&[cpu])?;
        let (input, output) = (p2c_read.as_raw_fd(), c2p_write.as_raw_fd());
        let (unused_w, unused_r) = (p2c_write.as_raw_fd(), c2p_read.as_raw_fd());
        let child = Child::fork(|| {
            // SAFETY: raw system calls on descriptors we own.
            unsafe {
                // Our copy of the parent's write end would keep EOF from coming.
                libc::close(unused_w);
                libc::close(unused_r);
                pinned_relay(&set, input, output);
            }
        })?;
        drop(p2c_read);
        drop(c2p_write);
        Ok(EchoChild { to_child: p2c_write, from_child: c2p_read, _child: child })
    }

    fn round_trip(&self) -> Result<()> {
        write_all(self.to_child.as_raw_fd(), b"x")?;
        let mut b = [0u8; 1];
        Ok(read_exact(self.from_child.as_raw_fd(), &mut b)?)
    }
}

/// Context switch cost from sched_yield: (time of a lone yield, time of one
/// iteration when a child process on the same CPU yields back, switches per yield).
fn yield_switch_ns(cpu: usize, plan: &Plan) -> Result<(f64, f64, f64)> {
    pin_current_thread(cpu)?;
    let sched_yield = || {
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
        Ok(())
    };
    let alone = time_per_op(plan.reps, plan.pingpong_iters, sched_yield)?;
    let _child = fork_yielder(cpu)?;
    let before = thread_switches()?;
    let pair = time_per_op(plan.reps, plan.pingpong_iters, sched_yield)?;
    let switches = (thread_switches()? - before) as f64;
    let calls = calls_made(plan.reps, plan.pingpong_iters);
    Ok((alone, pair, switches / calls as f64))
}

/// A child process pinned to `cpu` that calls sched_yield() until killed.
fn fork_yielder(cpu: usize) -> Result<Child> {
    // Prepared before fork: the child may only make raw system calls.
    let set = cpu_set_of(&[cpu])?;
    Child::fork(|| {
        // SAFETY: raw system calls only.
        unsafe {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return;
            }
            loop {
                libc::sched_yield();
            }
        }
    })
}

/// Voluntary + involuntary context switches of the calling thread so far.
fn thread_switches() -> Result<i64> {
    Ok(switches_of(libc::RUSAGE_THREAD)?.1)
}

/// getrusage()'s voluntary and all context switches of `who` (RUSAGE_SELF or
/// RUSAGE_THREAD).
fn switches_of(who: libc::c_int) -> Result<(i64, i64)> {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return Err(os_err("getrusage"));
    }
    Ok((usage.ru_nvcsw, usage.ru_nvcsw + usage.ru_nivcsw))
}

/// Median parent-side fork() time and median fork-to-reaped time of a child that
/// exits at once, both on the parent's (pinned) CPU.
fn fork_exit_ns(iters: usize) -> Result<(f64, f64)> {
    let (mut calls, mut totals) = (Vec::new(), Vec::new());
    for i in 0..iters + 5 {
        let t0 = now_ns();
        // SAFETY: the child only calls _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: child; _exit is async-signal-safe and skips atexit handlers.
            unsafe { libc::_exit(0) };
        }
        let t1 = now_ns();
        if pid < 0 {
            return Err(os_err("fork"));
        }
        reap(pid)?;
        let t2 = now_ns();
        if i >= 5 {
            calls.push(t1.saturating_sub(t0) as f64);
            totals.push(t2.saturating_sub(t0) as f64);
        }
    }
    Ok((median(calls).context("no fork sample")?, median(totals).context("no fork sample")?))
}

/// Median time for the parent to create a thread (the new thread starts later: it
/// inherits the parent's single-CPU affinity).
fn thread_spawn_ns(iters: usize) -> Result<f64> {
    let mut samples = Vec::new();
    for i in 0..iters + 5 {
        let t0 = now_ns();
        let handle = std::thread::Builder::new().spawn(|| {}).context("spawning a thread")?;
        let t1 = now_ns();
        handle.join().map_err(|_| anyhow!("an empty thread panicked"))?;
        if i >= 5 {
            samples.push(t1.saturating_sub(t0) as f64);
        }
    }
    median(samples).context("no thread sample")
}

// --- Futex wakeups -------------------------------------------------------------------

// From include/uapi/linux/futex.h.

/// Makes the calling thread as unimportant as allowed: SCHED_IDLE (a policy an
/// unprivileged thread may move itself to), else nice 19. Either way a normal thread
/// that wakes up on its CPU preempts it.
fn lower_own_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; param is valid.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0 {
        return;
    }
    // SAFETY: plain syscalls on our own thread id. Failing leaves the spinner at
    // nice 0: woken threads then preempt it less promptly, which only adds to the
    // measured busy-CPU latency.
    let tid = unsafe { libc::gettid() };
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19) };
}

/// Shared state of one wake benchmark.
#[derive(Default)]
struct WakeShared {
    /// The futex word: the round number the waker last released.
    word: AtomicU32,
    /// The round the wakee is (about to be) sleeping for.
    armed: AtomicU32,
    /// The last round the wakee saw, after recording `woke_at_ns`.
    done: AtomicU32,
    woke_at_ns: AtomicU64,
    /// CPU time the wakee was charged from just before it went to sleep to just
    /// after it woke, in the last round.
    charged_ns: AtomicU64,
    stop: AtomicBool,
}

struct WakeConfig {
    waker_cpu: usize,
    wakee_cpu: usize,
    /// What the wakee's CPU does when the wake arrives.
    target: WakeTarget,
    samples: usize,
    /// Pause before each wake, spinning so the waker stays hot, while the wakee
    /// sleeps and (when not busy) its CPU settles into its idle state.
    settle_ns: u64,
}

struct WakeSamples {
    /// Waker-side FUTEX_WAKE durations, timer overhead removed.
    call_ns: Vec<f64>,
    /// From just before FUTEX_WAKE to the wakee running in user space.
    latency_ns: Vec<f64>,
    /// CPU time the wakee was charged across its sleep and wakeup.
    charged_ns: Vec<f64>,
    /// How the waker told the wakee's CPU, over all rounds: (found it polling,
    /// IPIs sent); None where the tracepoints cannot be counted.
    signals: Option<(u64, u64)>,
}

/// The wakee's CPU in a wake benchmark.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WakeTarget {
    /// Idle: the wake leaves it idle state.
    Idle,
    /// Running a SCHED_IDLE spinner: the woken thread preempts it, so the waker
    /// enqueues remotely and sends a reschedule IPI.
    Preempted,
    /// Running a SCHED_FIFO spinner that naps 20 us every 100 us: a fair-class
    /// wakee cannot preempt it, so the waker enqueues remotely and sends nothing;
    /// the wakee runs at the next nap.
    Unpreempted,
}

/// How a spinner runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spin {
    /// An ordinary nice-0 thread.
    Normal,
    /// SCHED_IDLE (or nice 19): anything woken preempts it.
    Lowest,
    /// SCHED_FIFO priority 1, napping 20 us every 100 us: no fair-class wakee
    /// preempts it.
    FifoNapping,
}

/// Spins on `cpu` until `shared.stop` (an error if SCHED_FIFO is asked for and
/// not allowed).
fn spawn_spinner(cpu: usize, shared: Arc<WakeShared>, kind: Spin) -> JoinHandle<Result<()>> {
    std::thread::spawn(move || {
        pin_current_thread(cpu)?;
        let fifo = kind == Spin::FifoNapping;
        if fifo {
            let param = libc::sched_param { sched_priority: 1 };
            // SAFETY: pid 0 is the calling thread; param is valid.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
                return Err(os_err("sched_setscheduler(SCHED_FIFO)"));
            }
        } else if kind == Spin::Lowest {
            lower_own_priority();
        }
        // Busy with stores rather than PAUSE: a pausing vCPU may be descheduled by
        // the hypervisor, which is not the "running CPU" this stands for.
        let mut count = 0u64;
        let mut nap_at = now_ns() + 100_000;
        while !shared.stop.load(Ordering::Relaxed) {
            count = black_box(count.wrapping_add(1));
            if fifo && count.is_multiple_of(64) && now_ns() >= nap_at {
                sleep_ns(20_000);
                nap_at = now_ns() + 100_000;
            }
        }
        Ok(())
    })
}

/// Joins helper threads, returning the first error any of them reported.
fn join_all(threads: Vec<JoinHandle<Result<()>>>) -> Result<()> {
    let mut first = Ok(());
    for t in threads {
        let outcome = t.join().map_err(|_| anyhow!("a calibration thread panicked")).and_then(|r| r);
        if first.is_ok() {
            first = outcome;
        }
    }
    first
}

/// Repeatedly wakes a thread sleeping in FUTEX_WAIT on `wakee_cpu` (another CPU)
/// from the calling thread on `waker_cpu`.
fn run_wake_bench(cfg: &WakeConfig, timer_ns: f64) -> Result<WakeSamples> {
    pin_current_thread(cfg.waker_cpu)?;
    let shared = Arc::new(WakeShared::default());
    let mut threads = Vec::new();
    if cfg.target != WakeTarget::Idle {
        let kind = if cfg.target == WakeTarget::Unpreempted { Spin::FifoNapping } else { Spin::Lowest };
        threads.push(spawn_spinner(cfg.wakee_cpu, shared.clone(), kind));
    }
    {
        let shared = shared.clone();
        let cpu = cfg.wakee_cpu;
        threads.push(std::thread::spawn(move || -> Result<()> {
            pin_current_thread(cpu)?;
            let mut seen = 0u32;
            loop {
                shared.armed.store(seen.wrapping_add(1), Ordering::Release);
                let before_sleep_ns = thread_cpu_ns();
                loop {
                    if shared.stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    if shared.word.load(Ordering::Acquire) != seen {
                        break;
                    }
                    futex_wait(&shared.word, seen, Some(100_000_000));
                }
                shared.woke_at_ns.store(now_ns(), Ordering::Release);
                shared.charged_ns.store(thread_cpu_ns().saturating_sub(before_sleep_ns), Ordering::Release);
                seen = shared.word.load(Ordering::Acquire);
                shared.done.store(seen, Ordering::Release);
            }
        }));
    }

    // How an idle CPU is told, counted on this thread, the waker, around the rounds.
    let counters = (cfg.target == WakeTarget::Idle)
        .then(|| {
            TracepointCounter::open("sched", "sched_wake_idle_without_ipi")
                .and_then(|flag| Ok((flag, TracepointCounter::open("ipi", "ipi_send_cpu")?)))
                .ok()
        })
        .flatten();
    let result = drive_wakes(cfg, &shared, timer_ns).map(|mut samples| {
        samples.signals = counters.and_then(|(flag, ipis)| Some((flag.read().ok()?, ipis.read().ok()?)));
        samples
    });

    shared.stop.store(true, Ordering::Release);
    shared.word.fetch_add(1, Ordering::AcqRel);
    let _ = futex_wake(&shared.word, i32::MAX);
    let joined = join_all(threads);
    let samples = result?;
    joined?;
    Ok(samples)
}

/// Spins (then sleeps) until `cond`, giving up after [`HELPER_TIMEOUT_NS`].
fn wait_until(mut cond: impl FnMut() -> bool, what: &str) -> Result<()> {
    let start = now_ns();
    let mut spins = 0u32;
    while !cond() {
        if now_ns().saturating_sub(start) > HELPER_TIMEOUT_NS {
            bail!("calibration helper did not respond within 2 s ({what})");
        }
        if spins < 1_000_000 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            sleep_ns(50_000);
        }
    }
    Ok(())
}

fn drive_wakes(cfg: &WakeConfig, shared: &WakeShared, timer_ns: f64) -> Result<WakeSamples> {
    let (mut call_ns, mut latency_ns, mut charged_ns) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=cfg.samples as u32 + 5 {
        wait_until(|| shared.armed.load(Ordering::Acquire) >= round, "wakee arming")?;
        spin_for(cfg.settle_ns);
        let t0 = now_ns();
        shared.word.store(round, Ordering::Release);
        let woken = futex_wake(&shared.word, 1)?;
        let t1 = now_ns();
        wait_until(|| shared.done.load(Ordering::Acquire) >= round, "wakee running")?;
        // A wakee that saw the new word before sleeping was not woken: no sample.
        // The first few rounds warm up.
        if woken == 1 && round > 5 {
            call_ns.push(t1.saturating_sub(t0) as f64 - timer_ns);
            latency_ns.push(shared.woke_at_ns.load(Ordering::Acquire).saturating_sub(t0) as f64);
            charged_ns.push(shared.charged_ns.load(Ordering::Acquire) as f64);
        }
    }
    Ok(WakeSamples { call_ns, latency_ns, charged_ns, signals: None })
}

// --- Two-CPU measurements --------------------------------------------------------------

struct Cross {
    cpu_b: usize,
    cache_line_ns: f64,
    pipe_rtt_ns: f64,
    wake_noop_ns: f64,
    wake_busy_call_ns: f64,
    wake_busy_latency_ns: f64,
    wake_idle_latency_ns: f64,
    wake_idle_call_ns: f64,
    /// (found polling, IPIs sent) over the idle-CPU wakes.
    wake_idle_signals: Option<(u64, u64)>,
    /// FUTEX_WAKE of a sleeper on a busy CPU it cannot preempt (None without SCHED_FIFO).
    wake_remote_call_ns: Option<f64>,
    /// CPU time charged to a sleeper per wakeup on an idle CPU, and on a busy CPU
    /// whose SCHED_FIFO spinner it waits for (None without SCHED_FIFO).
    wake_idle_charged_ns: f64,
    wake_remote_charged_ns: Option<f64>,
    membarrier_ns: Option<f64>,
    ipi_receive_ns: Option<f64>,
    unix_stream_send_ns: f64,
    unix_stream_recv_ns: f64,
}

fn cross_cpu(host: &Host, cpu_b: usize, plan: &Plan, timer_ns: f64) -> Result<Cross> {
    let cpu_a = host.cpu_a;
    let cache_line_ns = cache_line_transfer_ns(cpu_a, cpu_b, plan)?;

    pin_current_thread(cpu_a)?;
    let pipe_rtt_ns = {
        let child = EchoChild::spawn(cpu_b)?;
        time_per_op(plan.reps, plan.cross_iters, || child.round_trip())?
    };

    let mut cfg = WakeConfig {
        waker_cpu: cpu_a,
        wakee_cpu: cpu_b,
        target: WakeTarget::Idle,
        samples: plan.wake_samples,
        // Long enough for the idle CPU to enter the idle state it picks for gaps
        // of tens of microseconds, as between hackbench messages.
        settle_ns: 50_000,
    };
    let idle = run_wake_bench(&cfg, timer_ns)?;
    cfg.target = WakeTarget::Preempted;
    cfg.settle_ns = 20_000;
    let busy = run_wake_bench(&cfg, timer_ns)?;
    // Without SCHED_FIFO (no CAP_SYS_NICE) there is no unpreempted sample.
    cfg.target = WakeTarget::Unpreempted;
    // The wakee last ran when the spinner began a 20 us nap: 50 us later the
    // spinner is mid-run, so the wake finds the CPU busy.
    cfg.settle_ns = 50_000;
    let (remote, wake_remote_charged_ns) =
        run_wake_bench(&cfg, timer_ns).map_or((None, None), |r| (median(r.call_ns), median(r.charged_ns)));

    // FUTEX_WAKE with nobody waiting: syscall + futex hash lookup, the baseline that
    // the busy-CPU wake is compared with.
    pin_current_thread(cpu_a)?;
    let word = AtomicU32::new(0);
    let wake_noop_ns = time_per_op(plan.reps, plan.syscall_iters / 4, || Ok(futex_wake(&word, 1).map(drop)?))?;

    let membarrier_ns = membarrier_round_trip_ns(cpu_a, cpu_b, plan)?;
    let ipi_receive_ns = ipi_receive_ns(cpu_a, cpu_b, plan)?;
    let (unix_stream_send_ns, unix_stream_recv_ns) = unix_stream_cross_ns(cpu_a, cpu_b, plan)?;
    Ok(Cross {
        cpu_b,
        cache_line_ns,
        pipe_rtt_ns,
        wake_noop_ns,
        wake_busy_call_ns: median(busy.call_ns).context("no busy-CPU wake sample")?,
        wake_busy_latency_ns: median(busy.latency_ns).context("no busy-CPU wake sample")?,
        wake_idle_latency_ns: median(idle.latency_ns).context("no idle-CPU wake sample")?,
        wake_idle_charged_ns: median(idle.charged_ns).context("no idle-CPU wake sample")?,
        wake_remote_charged_ns,
        wake_idle_call_ns: median(idle.call_ns).context("no idle-CPU wake sample")?,
        wake_idle_signals: idle.signals,
        wake_remote_call_ns: remote,
        membarrier_ns,
        ipi_receive_ns,
        unix_stream_send_ns,
        unix_stream_recv_ns,
    })
}

#[repr(align(128))]
struct PaddedU64(AtomicU64);

/// One-way time to move a modified cache line between the two CPUs: two threads
/// take turns incrementing one word.
fn cache_line_transfer_ns(cpu_a: usize, cpu_b: usize, plan: &Plan) -> Result<f64> {
    pin_current_thread(cpu_a)?;
    let line = Arc::new(PaddedU64(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let partner = {
        let (line, stop) = (line.clone(), stop.clone());
        std::thread::spawn(move || -> Result<()> {
            pin_current_thread(cpu_b)?;
            let mut expect = 1u64;
            loop {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        return Ok(());
                    }
                    if line.0.load(Ordering::Acquire) == expect {
                        break;
                    }
                    std::hint::spin_loop();
                }
                line.0.store(expect + 1, Ordering::Release);
                expect += 2;
            }
        })
    };
    let mut next = 1u64;
    let mut ping = || -> Result<()> {
        line.0.store(next, Ordering::Release);
        let mut spins = 0u64;
        while line.0.load(Ordering::Acquire) != next + 1 {
            spins += 1;
            if spins & ((1 << 20) - 1) == 0 && partner.is_finished() {
                bail!("cache-line partner thread stopped");
            }
            std::hint::spin_loop();
        }
        next += 2;
        Ok(())
    };
    let result = time_per_op(plan.reps, plan.cache_line_iters, &mut ping);
    stop.store(true, Ordering::Relaxed);
    let joined = partner.join().map_err(|_| anyhow!("cache-line partner panicked")).and_then(|r| r);
    let round_trip = result?;
    joined?;
    Ok(round_trip / 2.0)
}

// From include/uapi/linux/membarrier.h.
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// membarrier(PRIVATE_EXPEDITED) with one other thread of ours spinning on `cpu_b`:
/// the kernel IPIs that CPU and waits for the handler. None if the kernel (or a
/// seccomp filter) refuses membarrier.
fn membarrier_round_trip_ns(cpu_a: usize, cpu_b: usize, plan: &Plan) -> Result<Option<f64>> {
    // SAFETY: membarrier takes plain integers.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) };
    if rc != 0 {
        return Ok(None);
    }
    pin_current_thread(cpu_a)?;
    let shared = Arc::new(WakeShared::default());
    let spinner = spawn_spinner(cpu_b, shared.clone(), Spin::Normal);
    // Let the spinner reach its CPU before measuring.
    sleep_ns(2_000_000);
    let result = time_per_op(plan.reps, plan.cross_iters.max(1_000), || {
        // SAFETY: as above.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
        if r != 0 {
            return Err(os_err("membarrier"));
        }
        Ok(())
    });
    shared.stop.store(true, Ordering::Release);
    let joined = spinner.join().map_err(|_| anyhow!("spinner panicked")).and_then(|r| r);
    joined?;
    // A membarrier that fails only now (e.g. a seccomp filter) counts as unavailable.
    Ok(result.ok())
}

/// Sockets the cross-CPU AF_UNIX stream runs over, as one hackbench sender writes
/// to its group's receivers.
const UNIX_STREAM_SOCKETS: usize = 20;

/// Per-call times of 100-byte AF_UNIX sends on `cpu_a` and receives on `cpu_b`
/// running at the same time: the sender writes round-robin to
/// [`UNIX_STREAM_SOCKETS`] sockets, the receiver reads them round-robin, both
/// with MSG_DONTWAIT so neither sleeps; only calls that moved a message are timed.
fn unix_stream_cross_ns(cpu_a: usize, cpu_b: usize, plan: &Plan) -> Result<(f64, f64)> {
    use std::os::unix::net::UnixStream;
    let msgs = plan.unix_batches * UNIX_BATCH * 4;
    let mut pairs = Vec::new();
    for _ in 0..UNIX_STREAM_SOCKETS {
        pairs.push(UnixStream::pair().context("socketpair(AF_UNIX)")?);
    }
    let rx: Vec<RawFd> = pairs.iter().map(|p| p.1.as_raw_fd()).collect();
    let tx: Vec<RawFd> = pairs.iter().map(|p| p.0.as_raw_fd()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<(u64, u64)> {
            pin_current_thread(cpu_b)?;
            let mut buf = [0u8; 100];
            let (mut busy, mut got) = (0u64, 0u64);
            while got < msgs as u64 && !stop.load(Ordering::Relaxed) {
                for &fd in &rx {
                    let t0 = now_ns();
                    // SAFETY: reading into a 100-byte buffer.
                    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), 100, libc::MSG_DONTWAIT) };
                    if r == 100 {
                        busy += now_ns() - t0;
                        got += 1;
                    }
                }
            }
            Ok((busy, got))
        })
    };
    pin_current_thread(cpu_a)?;
    let msg = [0x5au8; 100];
    let (mut busy, mut sent) = (0u64, 0u64);
    let deadline = now_ns() + 10 * HELPER_TIMEOUT_NS;
    while sent < msgs as u64 && now_ns() < deadline {
        for &fd in &tx {
            let t0 = now_ns();
            // SAFETY: sending from a 100-byte buffer.
            let r = unsafe { libc::send(fd, msg.as_ptr().cast(), 100, libc::MSG_DONTWAIT) };
            if r == 100 {
                busy += now_ns() - t0;
                sent += 1;
            }
        }
    }
    // Whatever the receiver still waits for will not come after a timeout.
    if sent < msgs as u64 {
        stop.store(true, Ordering::Relaxed);
    }
    let (rbusy, got) = receiver.join().map_err(|_| anyhow!("the stream receiver panicked"))??;
    drop(pairs);
    if sent == 0 || got == 0 {
        bail!("the cross-CPU AF_UNIX stream moved no message");
    }
    Ok((busy as f64 / sent as f64, rbusy as f64 / got as f64))
}

/// What taking one IPI costs a running CPU: a thread on `cpu_b` reads the clock in
/// a tight loop and keeps every gap over 300 ns, while `cpu_a` sends it one
/// membarrier(PRIVATE_EXPEDITED) IPI every 100 us. The median gap is the time the
/// interrupt took from it (the few timer ticks among the gaps do not move the
/// median). None where membarrier is unavailable.
fn ipi_receive_ns(cpu_a: usize, cpu_b: usize, plan: &Plan) -> Result<Option<f64>> {
    // SAFETY: membarrier takes plain integers; registering is idempotent.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) };
    if rc != 0 {
        return Ok(None);
    }
    pin_current_thread(cpu_a)?;
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<Vec<(u64, u64)>> {
            pin_current_thread(cpu_b)?;
            Ok(clock_gaps(300, |_| !stop.load(Ordering::Relaxed)))
        })
    };
    // Let the watcher reach its CPU.
    sleep_ns(5_000_000);
    let sent = (|| {
        for _ in 0..plan.cross_iters.max(500) {
            spin_for(100_000);
            // SAFETY: as above.
            if unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) } != 0 {
                return Err(os_err("membarrier"));
            }
        }
        Ok(())
    })();
    stop.store(true, Ordering::Relaxed);
    let gaps = watcher.join().map_err(|_| anyhow!("the IPI watcher panicked"))??;
    if sent.is_err() {
        return Ok(None);
    }
    Ok(median(gaps.into_iter().map(|(_, g)| g as f64).collect()))
}

/// What a thread reading the clock in a tight loop sees taken from it: every
/// gap between two readings longer than `min_ns`, as (when it began, how long),
/// for as long as `go_on(now)` holds.
fn clock_gaps(min_ns: u64, mut go_on: impl FnMut(u64) -> bool) -> Vec<(u64, u64)> {
    let mut gaps = Vec::with_capacity(4096);
    let mut last = now_ns();
    while go_on(last) {
        let t = now_ns();
        if t - last > min_ns {
            gaps.push((last, t - last));
        }
        last = t;
    }
    gaps
}

/// A gap in a spinner's clock readings shorter than this is the loop itself.
const TICK_GAP_MIN_NS: u64 = 300;
/// Phase bins per tick period.
const TICK_PHASE_BINS: u64 = 80;
/// The CONFIG_HZ values Linux offers.
const KERNEL_HZ: [u64; 4] = [100, 250, 300, 1000];

/// The tick as a spinner sees it: see [`tick_irq`].
struct TickIrq {
    hz: u64,
    timer_irqs_per_s: f64,
    tick_gaps: usize,
    median_ns: f64,
    other_gaps: usize,
    other_median_ns: f64,
}

/// The CPU time a busy CPU's periodic tick takes from the task it interrupts: a
/// thread pinned to `cpu` reads the clock in a tight loop for `ms` and keeps
/// every gap over [`TICK_GAP_MIN_NS`] with the time it began. The CPU's local
/// timer interrupts over the same time (`LOC` in /proc/interrupts) give the tick
/// rate, hence HZ (the nearest value Linux offers); the gaps that begin at one
/// phase of that period (the most crowded of [`TICK_PHASE_BINS`] bins and its two
/// neighbours) are the tick's, and their median is its cost. Other gaps (other
/// interrupts, and in a guest the host's own exits, which the guest cannot see)
/// are counted apart. An error where the tick cannot be told apart: no `LOC`
/// line, a rate far from every HZ, or fewer tick gaps than half the ticks.
fn tick_irq(cpu: usize, ms: u64) -> Result<TickIrq> {
    pin_current_thread(cpu)?;
    let irqs_before = local_timer_interrupts(cpu)?;
    let dur_ns = ms * 1_000_000;
    let t0 = now_ns();
    let gaps = clock_gaps(TICK_GAP_MIN_NS, |t| t - t0 < dur_ns);
    let elapsed_ns = now_ns() - t0;
    let irqs = local_timer_interrupts(cpu)?.saturating_sub(irqs_before);
    let per_s = irqs as f64 * 1e9 / elapsed_ns as f64;
    let hz =
        KERNEL_HZ.into_iter().min_by(|a, b| (*a as f64 - per_s).abs().total_cmp(&(*b as f64 - per_s).abs())).expect("HZ values");
    if per_s < hz as f64 * 0.75 || per_s > hz as f64 * 1.5 {
        bail!("{per_s:.0} local timer interrupts a second on CPU {cpu}, near no CONFIG_HZ of {KERNEL_HZ:?}");
    }
    let period = 1_000_000_000 / hz;
    let bin = |at: u64| (at % period) * TICK_PHASE_BINS / period;
    let mut bins = vec![0usize; TICK_PHASE_BINS as usize];
    for &(at, _) in &gaps {
        bins[bin(at) as usize] += 1;
    }
    let peak = (0..TICK_PHASE_BINS).max_by_key(|&b| bins[b as usize]).expect("bins") as i64;
    let near = |b: u64| {
        let d = (b as i64 - peak).rem_euclid(TICK_PHASE_BINS as i64);
        d <= 1 || d >= TICK_PHASE_BINS as i64 - 1
    };
    let (tick, other): (Vec<_>, Vec<_>) = gaps.iter().partition(|&&(at, _)| near(bin(at)));
    let ticks_expected = elapsed_ns / period;
    if (tick.len() as u64) * 2 < ticks_expected {
        bail!("{} gaps at the tick's phase in {ms} ms, {ticks_expected} ticks expected at HZ = {hz}", tick.len());
    }
    let median_of = |v: &[&(u64, u64)]| median(v.iter().map(|g| g.1 as f64).collect()).unwrap_or(0.0);
    // A tick handler takes microseconds; gaps at its phase as long as the
    // profile's bound (`TICK_IRQ_MAX_NS`) are the spinner descheduled (another
    // task on the CPU), and a profile charging them would be refused.
    let tick_median_ns = median_of(&tick);
    if tick_median_ns >= TICK_IRQ_MAX_NS as f64 {
        bail!(
            "the gaps at the tick's phase have a median of {tick_median_ns:.0} ns, at least the {TICK_IRQ_MAX_NS} ns \
             a profile may charge for a tick: the spinner on CPU {cpu} was descheduled (is the CPU busy?)"
        );
    }
    Ok(TickIrq {
        hz,
        timer_irqs_per_s: per_s,
        tick_gaps: tick.len(),
        median_ns: tick_median_ns,
        other_gaps: other.len(),
        other_median_ns: median_of(&other),
    })
}

/// `cpu`'s local timer interrupts so far: its column of the `LOC` line of
/// /proc/interrupts (x86; arm64's arch timer line is named after its driver).
fn local_timer_interrupts(cpu: usize) -> Result<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").context("/proc/interrupts")?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let col = header.iter().position(|c| *c == format!("CPU{cpu}")).context("no column for the CPU in /proc/interrupts")?;
    let line = lines
        .find(|l| {
            let name = l.split_whitespace().next().unwrap_or("");
            name == "LOC:" || (name.ends_with(':') && l.contains("arch_timer"))
        })
        .context("no local timer line (LOC, arch_timer) in /proc/interrupts")?;
    line.split_whitespace()
        .nth(col + 1)
        .and_then(|v| v.parse().ok())
        .context("an unreadable local timer count in /proc/interrupts")
}

// --- Cache refill ----------------------------------------------------------------------

fn write_lines(buf: &mut [u64]) {
    for i in (0..buf.len()).step_by(8) {
        buf[i] = buf[i].wrapping_add(1);
    }
}

fn read_lines(buf: &[u64]) -> u64 {
    let mut sum = 0u64;
    for i in (0..buf.len()).step_by(8) {
        sum = sum.wrapping_add(buf[i]);
    }
    sum
}

fn timed_read(buf: &[u64]) -> f64 {
    let t0 = now_ns();
    black_box(read_lines(black_box(buf)));
    now_ns().saturating_sub(t0) as f64
}

/// Median extra time to read a 256 KiB working set written on `cpu_a` after moving
/// to `target`, over reading it where it was written. Sequential reads let the
/// prefetchers overlap misses, so this is the cheap end of a real task's refill.
fn refill_after_move_ns(cpu_a: usize, target: usize, reps: usize) -> Result<f64> {
    let mut buf = vec![0u64; REFILL_BYTES / 8];
    let mut samples = Vec::new();
    for _ in 0..reps {
        pin_current_thread(cpu_a)?;
        write_lines(&mut buf);
        black_box(read_lines(&buf));
        let hot = timed_read(&buf);
        pin_current_thread(target)?;
        let moved = timed_read(&buf);
        samples.push(moved - hot);
    }
    median(samples).context("no refill sample")
}

/// The same working set re-read from memory: written, then pushed out of every
/// cache by sweeping a buffer twice the LLC.
fn refill_from_memory_ns(cpu_a: usize, llc_bytes: usize, reps: usize) -> Result<f64> {
    pin_current_thread(cpu_a)?;
    let mut buf = vec![0u64; REFILL_BYTES / 8];
    let evict_bytes = (2 * llc_bytes).clamp(8 << 20, 512 << 20);
    let mut evict = vec![1u64; evict_bytes / 8];
    write_lines(&mut evict);
    let mut samples = Vec::new();
    for _ in 0..reps {
        write_lines(&mut buf);
        black_box(read_lines(&buf));
        let hot = timed_read(&buf);
        black_box(read_lines(&evict));
        let cold = timed_read(&buf);
        samples.push(cold - hot);
    }
    median(samples).context("no refill sample")
}

fn migration_costs(host: &Host, plan: &Plan, notes: &mut Notes) -> Result<MigrationCost> {
    let reps = plan.refill_reps;
    let from_memory = refill_from_memory_ns(host.cpu_a, host.llc_bytes, reps)?;
    notes.info(format!("refill of a 256 KiB working set from memory (LLC swept): {from_memory:.0} ns"));
    let measure =
        |target: Option<usize>| -> Result<Option<f64>> { target.map(|t| refill_after_move_ns(host.cpu_a, t, reps)).transpose() };

    let llc = match measure(host.cpu_b.filter(|&b| Some(b) != host.sibling))? {
        Some(v) => {
            let v = floor(v, 1);
            notes.measured(format!(
                "migration.llc_ns = {v}: re-read 256 KiB written on CPU {} from another core \
                 of its LLC, minus re-reading it in place (sequential, prefetched)",
                host.cpu_a
            ));
            v
        }
        None => {
            // L3 hit latency is about a third of DRAM latency (Intel's Xeon 5500
            // performance guide: ~40 cycles vs ~60 ns).
            let v = floor(from_memory / 3.0, 1);
            notes.estimated(format!("migration.llc_ns = {v}: no second core here; 1/3 of the refill from memory"));
            v
        }
    };
    let smt = match measure(host.sibling)? {
        Some(v) => {
            let v = floor(v, 1);
            notes.measured(format!("migration.smt_ns = {v}: the same, to the SMT sibling"));
            v
        }
        None => {
            // Siblings share L1 and L2: nearly nothing to refill.
            let v = floor(llc as f64 / 20.0, 1);
            notes.estimated(format!("migration.smt_ns = {v}: no SMT sibling here; llc/20 (L1/L2 shared)"));
            v
        }
    };
    let cross_llc = match measure(host.other_llc)? {
        Some(v) => {
            let v = floor(v, 1);
            notes.measured(format!("migration.cross_llc_ns = {v}: the same, to a core of another LLC"));
            v
        }
        None => {
            // Lines in another LLC cost about what memory does.
            let v = floor(from_memory, llc);
            notes.estimated(format!("migration.cross_llc_ns = {v}: one LLC here; the refill from memory"));
            v
        }
    };
    let cross_node = match measure(host.other_node)? {
        Some(v) => {
            let v = floor(v, 1);
            notes.measured(format!("migration.cross_node_ns = {v}: the same, to another NUMA node"));
            v
        }
        None => {
            // Remote memory/cache ~100 ns vs local ~60 ns (same Intel guide).
            let v = floor(1.7 * from_memory, cross_llc);
            notes.estimated(format!("migration.cross_node_ns = {v}: one node here; 1.7 x the refill from memory"));
            v
        }
    };
    Ok(MigrationCost { smt_ns: smt, llc_ns: llc, cross_llc_ns: cross_llc, cross_node_ns: cross_node })
}

// --- Memory bandwidth ------------------------------------------------------------------

/// Aggregate memcpy bandwidth of threads pinned one per CPU of the node, each
/// copying its own first-touched buffers: MB/s of bytes read plus bytes written.
fn node_bandwidth_mbps(cpus: &[usize], total_bytes: usize, reps: usize) -> Result<f64> {
    if cpus.is_empty() {
        bail!("no CPU to measure memory bandwidth on");
    }
    let per_thread = (total_bytes / cpus.len()).max(1 << 20) & !4095;
    let barrier = Arc::new(Barrier::new(cpus.len()));
    let threads: Vec<JoinHandle<Result<Vec<u64>>>> = cpus
        .iter()
        .map(|&cpu| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Result<Vec<u64>> {
                // Keep going on a pinning failure so the barriers stay balanced; the
                // error is reported after the last one.
                let pinned = pin_current_thread(cpu);
                let src = vec![1u8; per_thread];
                let mut dst = vec![2u8; per_thread];
                let mut times = Vec::with_capacity(reps);
                for _ in 0..reps {
                    barrier.wait();
                    let t0 = now_ns();
                    dst.copy_from_slice(&src);
                    black_box(&mut dst);
                    times.push(now_ns().saturating_sub(t0));
                    barrier.wait();
                }
                pinned.map(|()| times)
            })
        })
        .collect();
    let mut per_thread_times = Vec::new();
    let mut first_error = None;
    for t in threads {
        match t.join().map_err(|_| anyhow!("bandwidth thread panicked")).and_then(|r| r) {
            Ok(times) => per_thread_times.push(times),
            Err(e) => {
                if first_error.is_none() {
                    first_error = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    let bytes_moved = 2.0 * (per_thread * cpus.len()) as f64;
    let best = (0..reps)
        .filter_map(|rep| per_thread_times.iter().map(|t| t[rep]).max())
        .filter(|&slowest| slowest > 0)
        .map(|slowest| bytes_moved / slowest as f64 * 1000.0)
        .fold(0.0, f64::max);
    Ok(best)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_ring_hop_less_its_known_costs_is_the_wait() {
        // 2941 ns a hop, 1.33 switches, one wait: 2941 - 500 (write+read) - 128
        // (the read's failed first attempt) - 700 (wakeup) - 1.33 x 706 = 674.
        let ring = RingTiming { hop_ns: 2941.0, switches_per_hop: 1.33, waits_per_hop: 1.0 };
        assert_eq!(wait_ns_of(&ring, 500.0, 128, 700, 706), 674);
        // Two waits a hop share what is left.
        assert_eq!(wait_ns_of(&RingTiming { waits_per_hop: 2.0, ..ring }, 500.0, 128, 700, 706), 337);
        // Nothing left, or a ring that did not wait: no cost.
        assert_eq!(wait_ns_of(&RingTiming { hop_ns: 1500.0, ..ring }, 500.0, 128, 700, 706), 0);
        assert_eq!(wait_ns_of(&RingTiming { waits_per_hop: 0.1, ..ring }, 500.0, 128, 700, 706), 0);
    }
    use super::*;

    #[test]
    fn cpu_lists_and_cache_sizes_parse() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("5"), vec![5]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
    }

    #[test]
    fn the_wakers_part_is_its_charge_beyond_the_model_within_the_wakeup() {
        // The host's full calibrate: writer charged 1437 ns a cycle, model 981.
        assert_eq!(waker_part_ns(1437.0, 981.0, 785), 456);
        // Charged less than the model: no part; more than a whole wakeup: all of it.
        assert_eq!(waker_part_ns(900.0, 981.0, 785), 0);
        assert_eq!(waker_part_ns(2500.0, 981.0, 785), 785);
    }

    #[test]
    fn steal_ticks_read_the_cpus_lines_of_proc_stat() {
        // On Linux /proc/stat has a line per CPU; CPU 0 always exists.
        if std::path::Path::new("/proc/stat").exists() {
            assert!(steal_ticks(&[0]).is_some());
        }
        assert_eq!(steal_ticks(&[usize::MAX]), None);
        assert!(clock_ticks_per_s() > 0);
    }

    #[test]
    fn a_local_wake_counts_only_when_the_sleeper_slept_and_never_preempted() {
        let m = LocalWake { wake_write_ns: 1432.0, plain_write_ns: 521.0, preempted_per_wake: 0.0, sleeps_per_wake: 1.0 };
        assert_eq!(m.wakeup_ns(), Some(911));
        assert_eq!(LocalWake { preempted_per_wake: 0.5, ..m }.wakeup_ns(), None);
        assert_eq!(LocalWake { sleeps_per_wake: 0.4, ..m }.wakeup_ns(), None);
        // A difference at or below the floor gives the floor.
        assert_eq!(LocalWake { wake_write_ns: 530.0, ..m }.wakeup_ns(), Some(50));
    }

    #[test]
    fn medians_and_floors() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
        assert_eq!(floor(-5.0, 7), 7);
        assert_eq!(floor(f64::NAN, 1), 1);
        assert_eq!(floor(12.6, 1), 13);
    }

    /// The one test that measures: quick mode, plausible numbers, TOML round trip.
    #[test]
    fn quick_calibration_is_plausible_and_round_trips() {
        let affinity_before = AffinityGuard::save().expect("affinity readable").cpus();
        let t0 = std::time::Instant::now();
        let p = calibrate(&CalibrateOptions { name: "test-host".to_string(), quick: true }).expect("quick calibration runs");
        let elapsed = t0.elapsed();
        assert_eq!(AffinityGuard::save().expect("affinity readable").cpus(), affinity_before, "affinity restored");
        // ~1-3 s on an idle host; generous for loaded CI machines.
        assert!(elapsed.as_secs() < 15, "quick calibration took {elapsed:?}");

        assert!((20..=20_000).contains(&p.syscall_ns), "syscall_ns {}", p.syscall_ns);
        let times = [
            ("context_switch_ns", p.context_switch_ns),
            ("pipe_op_ns", p.pipe_op_ns),
            ("unix_send_ns", p.unix_send_ns),
            ("unix_recv_ns", p.unix_recv_ns),
            ("tcp_send_ns", p.tcp_send_ns),
            ("tcp_recv_ns", p.tcp_recv_ns),
            ("wakeup_ns", p.wakeup_ns),
            ("ipi_send_ns", p.ipi_send_ns),
            ("ipi_latency_ns", p.ipi_latency_ns),
            ("idle_exit_ns", p.idle_exit_ns),
            ("fork_ns", p.fork_ns),
            ("clone_ns", p.clone_ns),
            ("exit_ns", p.exit_ns),
            ("migration.smt_ns", p.migration.smt_ns),
            ("migration.llc_ns", p.migration.llc_ns),
            ("migration.cross_llc_ns", p.migration.cross_llc_ns),
            ("migration.cross_node_ns", p.migration.cross_node_ns),
            ("sched_ops.per_cpu_scanned_ns", p.sched_ops.per_cpu_scanned_ns),
            ("sched_ops.per_rq_lock_ns", p.sched_ops.per_rq_lock_ns),
            ("sched_ops.per_task_examined_ns", p.sched_ops.per_task_examined_ns),
        ];
        for (field, ns) in times {
            assert!(ns > 0 && ns < 50_000_000, "{field} = {ns} ns is implausible");
        }
        assert!((1..=100_000).contains(&p.copy_ps_per_byte), "copy_ps_per_byte {}", p.copy_ps_per_byte);
        // Allocating and freeing a page costs something, and far less than a fork.
        let page_ns = p.pipe_page_alloc_ns + p.pipe_page_free_ns;
        assert!(page_ns > 0 && page_ns < p.fork_ns, "pipe page alloc + free {page_ns} ns, fork {} ns", p.fork_ns);
        assert!(p.node_mem_bw_mbps.is_some_and(|b| b > 100), "node_mem_bw_mbps {:?}", p.node_mem_bw_mbps);
        assert!(p.fork_ns > p.syscall_ns, "fork {} <= syscall {}", p.fork_ns, p.syscall_ns);
        assert!(p.sources.iter().any(|s| s.starts_with("measured: syscall_ns")));

        let text = p.to_toml();
        let back = MachineProfile::from_toml(&text, "calibrated").expect("own TOML parses");
        assert_eq!(back, p);
    }
}
