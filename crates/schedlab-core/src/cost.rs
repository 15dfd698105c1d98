//! Machine cost profiles: what the hardware charges for the things a scheduler and
//! its workloads do. Policies never hold hardware numbers; profiles do, each field
//! with its source in the TOML file that defines it (`machines/*.toml`).
//!
//! All times are integer nanoseconds; the copy cost is in picoseconds per byte so
//! that a 100-byte message costs a whole number of nanoseconds without floats.

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

/// The clock a profile without `cpu_mhz` is taken to run at, MHz.
pub const DEFAULT_CPU_MHZ: u64 = 3000;

/// The longest tick handler a profile may charge (`tick_irq_ns`): a tenth of
/// the shortest tick period (HZ = 1000). A handler taking the whole period would
/// leave its CPU no time between ticks; gaps that long are a descheduled
/// measurement, not the handler.
pub const TICK_IRQ_MAX_NS: u64 = 100_000;

/// Cache-refill cost paid by a task on its first run after changing CPU, by how far
/// it moved. Mirrors what `task_hot()`/`sched_migration_cost_ns` try to avoid.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigrationCost {
    /// To the other hardware thread of the same core (L1/L2 shared).
    pub smt_ns: u64,
    /// To another core of the same last-level cache.
    pub llc_ns: u64,
    /// To a core of another LLC on the same NUMA node.
    pub cross_llc_ns: u64,
    /// To another NUMA node.
    pub cross_node_ns: u64,
}

/// One kind of the machine's own background threads (kernel threads and daemons
/// that wake while a benchmark runs): what makes two real runs of one benchmark
/// differ. `schedlab calibrate` counts them in a trace of the otherwise idle host.
/// Each thread sleeps a time drawn from an exponential distribution of mean
/// `mean_interval_ns` (wakeups arriving as a Poisson process), then runs `run_ns`
/// in the kernel as a SCHED_NORMAL task of nice `nice`, placed and preempted by the
/// policy like any other task, and sleeps again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundThreads {
    /// Their name without CPU or instance numbers (`kworker` for kworker/1:2).
    pub comm: String,
    /// One thread bound to each CPU (kworker/N:M, ksoftirqd/N), or one thread
    /// that may run anywhere.
    pub per_cpu: bool,
    /// Mean time between two wakeups of one thread.
    pub mean_interval_ns: u64,
    /// CPU time of one wakeup.
    pub run_ns: u64,
    #[serde(default)]
    pub nice: i32,
}

/// A halted idle CPU's exit after a longer idle (`MachineProfile::halted_exit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaltedExit {
    /// The idle this step applies from: the CPU idled at least this long.
    pub idle_ns: u64,
    /// Its exit, in place of `idle_exit_ns`.
    pub exit_ns: u64,
}

/// One measured point of `MachineProfile::switch_cold`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchCold {
    /// Switch-ins of other tasks on the CPU since this task last ran there.
    pub tasks: u64,
    /// What the switch-in pays beyond a hot one (a wakeup and a switch to the
    /// task that ran just before), ns.
    pub extra_ns: u64,
}

/// One measured point of a cold-data curve (`MachineProfile::unix_cold`,
/// `pipe_cold`): what a 100-byte write and a read pay beyond their cache-hot
/// cost while `bytes` of data sit queued in all channels of that kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColdStep {
    pub bytes: u64,
    pub write_ns: u64,
    pub read_ns: u64,
}

/// The extra of a write (`write`) or read at `queued` bytes on `curve`: straight
/// lines from (0 bytes, 0 ns) through the steps, flat past the last one.
#[inline]
pub fn cold_extra_ns(curve: &[ColdStep], queued: u64, write: bool) -> u64 {
    let value = |s: &ColdStep| if write { s.write_ns } else { s.read_ns };
    let Some(last) = curve.last() else { return 0 };
    let Some(i) = curve.iter().position(|s| s.bytes >= queued) else { return value(last) };
    let hi = &curve[i];
    let (lo_bytes, lo_ns) = if i == 0 { (0, 0) } else { (curve[i - 1].bytes, value(&curve[i - 1])) };
    let span = (hi.bytes - lo_bytes) as i128;
    let rise = value(hi) as i128 - lo_ns as i128;
    (lo_ns as i128 + rise * (queued - lo_bytes) as i128 / span) as u64
}

/// Cache capacities and refill costs, for the refill a task pays when it runs again
/// on the same core after other tasks have pushed its working set out.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheProfile {
    /// Private cache of one core (shared by its hardware threads), bytes.
    pub l2_bytes: u64,
    /// One last-level cache, bytes.
    pub llc_bytes: u64,
    /// Refilling one line from the LLC, net of the L2 re-read, amortised over
    /// the misses in flight (the `migration` convention: latency / 16), ps.
    pub llc_line_ps: u64,
    /// Refilling one line from local DRAM, the same way, ps.
    pub dram_line_ps: u64,
}

/// Address-space switches on x86 with PCID (Linux 4.14+, `switch_mm_irqs_off()`,
/// arch/x86/mm/tlb.c): each CPU keeps the TLB entries of its last few address
/// spaces tagged by ASID; a switch to another one takes the next slot round robin
/// (`choose_new_asid()`), flushes it, and the task then refills its TLB entries
/// (page walks, nested ones in a guest) as it runs. Kernel threads borrow the
/// address space they find (lazy TLB) and switch none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlbProfile {
    /// ASID slots per CPU: the kernel's `TLB_NR_DYN_ASIDS` (6 from v4.14 to
    /// v6.18, arch/x86/include/asm/tlbflush.h); 0 for a CPU without PCID, where
    /// every switch between address spaces flushes.
    pub nr_dyn_asids: u32,
    /// What a task switched in on a flushed ASID pays refilling its TLB entries,
    /// beyond a switch that keeps them (`schedlab calibrate`: a sched_yield
    /// rotation of more processes than slots on one CPU, less the same rotation
    /// of threads of one process).
    pub flush_refill_ns: u64,
}

/// CPU time charged for the scheduler's own searching, per unit of work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedOpCost {
    /// Looking at one CPU's state (idle? load?) in a search.
    pub per_cpu_scanned_ns: u64,
    /// Taking and releasing one runqueue lock (uncontended, cache line remote).
    pub per_rq_lock_ns: u64,
    /// Examining one task on a runqueue (can_migrate_task and friends).
    pub per_task_examined_ns: u64,
    /// `per_cpu_scanned_ns` for a CPU in another last-level cache, whose runqueue
    /// line crosses the interconnect; absent = the same as within the LLC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_cpu_scanned_cross_llc_ns: Option<u64>,
    /// `per_rq_lock_ns` for a runqueue in another last-level cache; absent = the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_rq_lock_cross_llc_ns: Option<u64>,
}

impl SchedOpCost {
    /// Looking at a CPU in another LLC than the searcher's.
    pub fn scanned_far_ns(&self) -> u64 {
        self.per_cpu_scanned_cross_llc_ns.unwrap_or(self.per_cpu_scanned_ns)
    }

    /// Locking a runqueue in another LLC than the locker's.
    pub fn lock_far_ns(&self) -> u64 {
        self.per_rq_lock_cross_llc_ns.unwrap_or(self.per_rq_lock_ns)
    }
}

/// One machine's costs. See `machines/broadwell-ep.toml` for a documented example.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineProfile {
    /// Profile name, e.g. `broadwell-ep`.
    pub name: String,
    /// One line saying which machines it describes.
    pub description: String,
    /// Where the numbers come from (datasheets, microbenchmarks, `schedlab calibrate`).
    #[serde(default)]
    pub sources: Vec<String>,
    /// Direct cost of `__schedule()` switching between two tasks: the switch itself,
    /// address-space change and the immediate cache/TLB effect. (`schedlab
    /// calibrate`: the whole switching `__schedule()`, a sched_yield() that
    /// switches less the system call.)
    pub context_switch_ns: u64,
    /// A `__schedule()` that picks the task it had and does not switch (a
    /// sched_yield() with nothing else to run, a reschedule that finds the
    /// current task still first): the runqueue lock, the clock update, the
    /// class's put_prev and pick. `schedlab calibrate`: a lone sched_yield() less
    /// the system call. Absent, 0: profiles whose `context_switch_ns` comes from
    /// a published whole-switch figure charge nothing apart for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_ns: Option<u64>,
    /// Kernel entry and exit of one system call with a trivial body.
    pub syscall_ns: u64,
    /// Copying one byte between user and kernel, in picoseconds.
    pub copy_ps_per_byte: u64,
    /// Fixed work of a pipe read or write beyond entry/exit (mutex, ring bookkeeping).
    pub pipe_op_ns: u64,
    /// Fixed work of an AF_UNIX stream send beyond entry/exit (skb alloc, locks, queueing).
    pub unix_send_ns: u64,
    /// Fixed work of an AF_UNIX stream receive beyond entry/exit (dequeue, skb free).
    pub unix_recv_ns: u64,
    /// Extra work of an AF_UNIX send when the socket's receiver last ran on another
    /// core of the LLC, and of a receive when its sender did: the socket, its
    /// queue and the skbs (allocated on one CPU, freed on the other) come from the
    /// other core's cache. Across LLCs it scales by cache_line_remote_ns /
    /// cache_line_ns. `schedlab calibrate` measures both as a sender and a receiver
    /// streaming 100-byte messages over 20 sockets from two CPUs at once, less the
    /// one-CPU costs; absent, 0.
    #[serde(default)]
    pub unix_send_remote_ns: u64,
    #[serde(default)]
    pub unix_recv_remote_ns: u64,
    /// Extra work of an AF_UNIX send and receive when the data queued in all
    /// AF_UNIX sockets (skb truesize) fills `unix_cold_bytes`: the skbs and the
    /// sockets they sit on have left the caches by the time they are used. Below
    /// that footprint the extra scales linearly with it: the one-step form of
    /// `unix_cold` below, which `schedlab calibrate` wrote until 2026-11-28 (one
    /// point past the LLC); absent, 0 (not charged).
    #[serde(default)]
    pub unix_send_cold_ns: u64,
    #[serde(default)]
    pub unix_recv_cold_ns: u64,
    #[serde(default)]
    pub unix_cold_bytes: u64,
    /// The same extra measured at several footprints, in place of the three
    /// fields above (which are one step of it): the caches do not empty in
    /// proportion to the footprint, so `schedlab calibrate` measures sockets
    /// filled to fractions and multiples of the L2 and past the LLC, less the
    /// cache-hot calls, and the engine draws straight lines between the steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unix_cold: Vec<ColdStep>,
    /// The same for pipes: extra work of a 100-byte pipe write and read when the
    /// pages queued in all pipes fill `pipe_cold_bytes`, scaled linearly below it:
    /// the one-step form of `pipe_cold`; absent, 0 (not charged).
    #[serde(default)]
    pub pipe_write_cold_ns: u64,
    #[serde(default)]
    pub pipe_read_cold_ns: u64,
    #[serde(default)]
    pub pipe_cold_bytes: u64,
    /// The same as steps, as `unix_cold` is for sockets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pipe_cold: Vec<ColdStep>,
    /// A pipe write's new slot when the pipe keeps no spare page:
    /// `alloc_page(GFP_HIGHUSER | __GFP_ACCOUNT)` in `anon_pipe_get_page()` (the
    /// page allocator and the memory cgroup charge), and the first touch of the
    /// page. `pipe_page_free_ns`: a read's released slot when the spares are
    /// full, `put_page()` with the uncharge. Packet-mode writes (`O_DIRECT`)
    /// take a slot each, so a pipe filled with small packets pays them on most
    /// calls; a byte stream merges into its last page. `schedlab calibrate`
    /// measures both as batches of 16 packets written then read in one process,
    /// less batches that use only the pipe's spare pages; absent, 0 (the
    /// shipped bare-metal profiles fold page allocation into `copy_ps_per_byte`).
    #[serde(default)]
    pub pipe_page_alloc_ns: u64,
    #[serde(default)]
    pub pipe_page_free_ns: u64,
    /// The inode time stamps a Linux pipe call updates when it moves data, on
    /// kernels that still did it for anonymous pipes (v6.12 and earlier; by
    /// v6.18 only FIFOs do, `fifo_pipe_read()` / `fifo_pipe_write()`): a write's
    /// `file_update_time()` under `sb_start_write_trylock()`, a read's
    /// `file_accessed()` (`touch_atime()`). `schedlab calibrate` measures both
    /// as 1-byte writes and reads on a FIFO less the same on an anonymous pipe
    /// (a FIFO's calls are an anonymous pipe's plus these); absent, 0.
    #[serde(default)]
    pub pipe_mtime_ns: u64,
    #[serde(default)]
    pub pipe_atime_ns: u64,
    /// What a pipe write into an empty pipe costs beyond one that merges into
    /// the last slot: `anon_pipe_write()` (fs/pipe.c, v6.18) sets up a new
    /// `pipe_buffer` on a spare page instead of merging, and with `was_empty`
    /// set runs the readers' wake-up (`wake_up_interruptible_sync_poll()` on
    /// `rd_wait`, its lock taken even when nobody sleeps there).
    /// `pipe_emptied_ns`: what a read that leaves the pipe empty costs beyond one
    /// that leaves bytes behind: it releases the last slot (`pipe_buf_release()`,
    /// the page kept as a spare). `pipe_op_ns` is then the call that merges or
    /// leaves bytes, as a stream of small messages mostly makes. `schedlab
    /// calibrate` measures both as 1-byte writes and reads on empty pipes less
    /// the same on pipes that keep a byte; absent, 0 (`pipe_op_ns` then holds
    /// them, measured on a pipe emptied at every call).
    #[serde(default)]
    pub pipe_was_empty_ns: u64,
    #[serde(default)]
    pub pipe_emptied_ns: u64,
    /// One send() / recv() on a loopback TCP connection (TCP_NODELAY), beyond the
    /// system call and the copy: the send pays the whole loopback transmit and
    /// receive path (the receive softirq runs on the sending CPU).
    pub tcp_send_ns: u64,
    pub tcp_recv_ns: u64,
    /// Waker-side cost of `try_to_wake_up()` for a sleeping task (lock, enqueue,
    /// preemption check), excluding any search the policy charges separately.
    pub wakeup_ns: u64,
    /// Of `wakeup_ns`, the part a waker is charged when its wakee, enqueued on
    /// the waker's own CPU, preempts it: `try_to_wake_up()` up to the runqueue
    /// clock update under the rq lock (kernel/sched/core.c `ttwu_queue()` /
    /// `ttwu_runnable()`, v6.18), which `update_curr()` in the enqueue then
    /// charges to the waker. `wakeup_preempt()` asks `rq_clock_skip_update()`,
    /// so the `__schedule()` that follows keeps that clock and the rest of the
    /// wakeup is charged to the task switched in. `schedlab calibrate` measures
    /// it as what a SCHED_IDLE writer pinned with its reader is charged per
    /// preempting write beyond a context switch and the write. Absent: the
    /// whole wakeup is charged to the task switched in.
    #[serde(default)]
    pub wakeup_waker_ns: Option<u64>,
    /// The waiting side of a blocking pipe call, beyond its attempts'
    /// system-call and body costs: `prepare_to_wait_event()`, the dequeue and
    /// pick of the `schedule()` it sleeps in, and on its return `finish_wait()`
    /// and the call's re-entry (fs/pipe.c `pipe_read()`/`pipe_write()`, v6.18).
    /// Paid by the waiting
    /// task when it runs again after the wakeup. `schedlab calibrate` measures it
    /// as a ring of 8 threads on one CPU passing a byte through 8 pipes (every
    /// hop one wakeup and one wait), less the hop's other costs; absent, 0.
    #[serde(default)]
    pub wait_ns: u64,
    /// `wait_ns` for an AF_UNIX stream call (`unix_stream_data_wait()`, and
    /// `sock_alloc_send_pskb()`'s wait for send buffer): the same ring over
    /// socketpairs; absent, 0.
    #[serde(default)]
    pub unix_wait_ns: u64,
    /// Waker-side extra of a wakeup that enqueues the task on another CPU's
    /// runqueue while that CPU is busy (ttwu_queue → ttwu_do_activate under the
    /// remote rq lock; an idle target takes the wake list instead): the lock and
    /// the runqueue's lines come from the other core. `schedlab calibrate`
    /// measures it as a FUTEX_WAKE of a sleeper on a CPU whose SCHED_FIFO spinner
    /// it cannot preempt, less a local wakeup; absent, 0.
    #[serde(default)]
    pub wakeup_remote_ns: u64,
    /// Sender-side cost of an IPI (reschedule or wake-list kick) to a running CPU.
    pub ipi_send_ns: u64,
    /// Sender-side cost of the IPI that wakes a halted idle CPU (`idle_polls`
    /// false), where it differs: in a KVM guest the host wakes the halted vCPU's
    /// thread inside the sender's exit. `schedlab calibrate` measures it as a
    /// FUTEX_WAKE of a sleeper on an idle CPU less one of nobody and a local
    /// wakeup; absent, `ipi_send_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipi_send_idle_ns: Option<u64>,
    /// Delay from sending an IPI until the target CPU takes it, when it is running.
    pub ipi_latency_ns: u64,
    /// CPU time a running CPU loses to take an IPI: interrupt entry, handler and
    /// exit, and in a guest the VM exit and the interrupt injection around them.
    /// The task it interrupts is delayed by as much. `schedlab calibrate` measures
    /// it as the gap a spinning thread sees in its clock per IPI; absent, 0 (the
    /// shipped bare-metal profiles do not charge it).
    #[serde(default)]
    pub ipi_receive_ns: u64,
    /// CPU time a busy CPU loses to each periodic tick (the policy's HZ): the
    /// local timer interrupt, the tick handler (`tick_nohz_handler()` →
    /// `update_process_times()` with the scheduler's `sched_tick()`), the
    /// softirqs it raises (timers, RCU), and in a guest the VM exits around the
    /// interrupt and the timer's reprogramming. The task it interrupts is delayed
    /// by as much; a CPU whose tick is stopped (idle, NOHZ) pays nothing, and the
    /// balancing passes a tick triggers are the policy's to charge. `schedlab
    /// calibrate` measures it as the median gap a clock-reading spinner sees at the
    /// tick's phase; absent, 0 (not charged).
    #[serde(default)]
    pub tick_irq_ns: u64,
    /// Kernel time a system call spends programming the CPU's timer device when
    /// the timer it arms (nanosleep()) expires before the CPU's next event, the
    /// tick (`hrtimer_start_range_ns()` → `hrtimer_reprogram()` →
    /// `clockevents_program_event()`, kernel/time/hrtimer.c and clockevents.c,
    /// v6.18): on x86 a TSC-deadline MSR write, in a KVM guest without an
    /// exitless timer a VM exit. The expiry is fixed before the programming, so
    /// a sleep shorter than it has expired by the time the call would block: the
    /// task takes the timer interrupt instead and returns without switching.
    /// `schedlab calibrate` measures it as the time from a sleeper's clock read
    /// to its switch out, for sleeps of half a tick: those that expire before
    /// the next tick less those that expire after it; absent, 0 (not charged).
    #[serde(default)]
    pub timer_program_ns: u64,
    /// Extra delay for an idle CPU to leave its idle state (shallow C-state exit)
    /// before it can run the scheduler.
    pub idle_exit_ns: u64,
    /// The part of a halted idle CPU's exit (`idle_polls` false) that the task it
    /// was woken for is charged as its own runtime: the wake list's IPI handler
    /// updates the rq clock as it enqueues the task (sched_ttwu_pending()), and
    /// wakeup_preempt() asks rq_clock_skip_update() of the idle task (which
    /// init_idle() leaves queued), so __schedule() keeps that clock and the task's
    /// exec_start is the enqueue, not the switch (kernel/sched/core.c, v6.0 to
    /// v6.18: older releases enqueue from the waker, which this does not model).
    /// At most `idle_exit_ns`; the task starts its work at the same time, it only
    /// pays for the tail. `schedlab calibrate` measures it as the CPU time a
    /// sleeper is charged per wakeup on an idle CPU less per wakeup on a busy one
    /// whose SCHED_FIFO spinner it waits for; absent, 0 (Linux 6.0+ policies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_exit_charged_ns: Option<u64>,
    /// Whether an idle CPU watches its own need-resched flag (TIF_POLLING_NRFLAG:
    /// mwait- or poll-based idle, as intel_idle and acpi_idle on bare metal), so a
    /// wakeup only writes the flag (resched_curr → set_nr_and_not_polling,
    /// ttwu_queue_wakelist → set_nr_if_polling); or halts (HLT: a KVM guest's
    /// default_idle or haltpoll's halt state with guest polling off), so every
    /// wakeup of an idle CPU is a reschedule or call-function IPI that the waker
    /// pays `ipi_send_ns` for and that arrives after `ipi_latency_ns`.
    /// `schedlab calibrate` measures which; absent, true.
    #[serde(default = "idle_polls_default")]
    pub idle_polls: bool,
    /// The exit of a halted idle CPU (`idle_polls` false) that idled longer,
    /// steps in increasing `idle_ns`: a CPU woken after idling at least a step's
    /// `idle_ns` takes its `exit_ns` (the last such step) instead of
    /// `idle_exit_ns`. In a KVM guest the host puts a halted vCPU's thread and
    /// then its own CPU into deeper states the longer the halt lasts (halt
    /// polling, then C-states), so a wakeup after a long idle waits longer, for
    /// an IPI and the CPU's own timer alike. `schedlab calibrate` measures it as
    /// how much longer than asked a lone sleeper's sleeps of 1, 3 and 10 ms take
    /// than its 20 us ones, added to `idle_exit_ns`; absent, none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub halted_exit: Vec<HaltedExit>,
    /// What waking a task and switching to it costs beyond the hot case once
    /// other tasks have run on its CPU since it last did: its `task_struct`,
    /// kernel stack, wait-queue entry, page tables and its channel's kernel
    /// state have left the CPU's caches. Steps in increasing `tasks` (the
    /// switch-ins of others on the CPU since), straight lines between them from
    /// (0, 0), flat past the last. `schedlab calibrate` measures it as a token
    /// passed round rings of 2 to 1024 processes through pipes on one CPU, per
    /// hop less the 2-process ring's (and less `tlb.flush_refill_ns`, charged on
    /// its own, where the ring outgrows the ASID slots); absent, none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switch_cold: Vec<SwitchCold>,
    /// Parent's cost of `fork()` of a process (page tables, mm copy).
    pub fork_ns: u64,
    /// Parent's cost of `clone()` of a thread.
    pub clone_ns: u64,
    /// Cost of `exit()` and of the parent's `wait()` reaping it, each.
    pub exit_ns: u64,
    /// One cache line, modified in another core's cache, moving to this core
    /// within an LLC: what the next user of a shared lock word or queue head pays
    /// (`t_cl`; the sched_ops costs are built from it too).
    pub cache_line_ns: u64,
    /// The same between LLCs: another CCX or another socket.
    pub cache_line_remote_ns: u64,
    /// Cache refill after migration.
    pub migration: MigrationCost,
    /// Scheduler search costs.
    pub sched_ops: SchedOpCost,
    /// Cache sizes and refill costs for the reuse model; absent = a task that runs
    /// again on the core it last ran on finds its working set warm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheProfile>,
    /// ASID recycling on address-space switches; absent = a switch between
    /// processes costs what `context_switch_ns` says however many take turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb: Option<TlbProfile>,
    /// The core clock under load (all cores busy), MHz: what user work a
    /// workload gives in cycles (`Op::Cycles`, e.g. a byte loop of stress-ng's)
    /// takes here. A datasheet's all-core frequency, or `schedlab calibrate`'s
    /// timed chain of dependent adds (one cycle each); absent: 3000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz: Option<u64>,
    /// Memory bandwidth of one NUMA node, MB/s (used by memory-bound workloads);
    /// absent: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_mem_bw_mbps: Option<u64>,
    /// Throughput of one core with two hardware threads busy, in per cent of one
    /// thread alone (e.g. 125): each of `k` busy threads of a core then runs at
    /// `min(1, pct / 100 / k)` of its alone speed. Absent: hardware threads do not
    /// slow each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smt_throughput_pct: Option<u64>,
    /// The machine's own background threads; absent, none (a run's timing then
    /// varies between seeds only through where it starts in the tick).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub background: Vec<BackgroundThreads>,
}

fn idle_polls_default() -> bool {
    true
}

impl MachineProfile {
    /// Round numbers so that hand-computed expectations in tests stay simple. Not a
    /// real machine.
    pub fn round_numbers() -> MachineProfile {
        MachineProfile {
            name: "unit".into(),
            description: "round numbers for tests".into(),
            sources: vec![],
            context_switch_ns: 1000,
            syscall_ns: 100,
            copy_ps_per_byte: 1000,
            pipe_op_ns: 200,
            unix_send_ns: 500,
            unix_recv_ns: 300,
            unix_send_remote_ns: 0,
            unix_recv_remote_ns: 0,
            unix_send_cold_ns: 0,
            unix_recv_cold_ns: 0,
            unix_cold_bytes: 0,
            unix_cold: Vec::new(),
            pipe_page_alloc_ns: 0,
            pipe_page_free_ns: 0,
            pipe_mtime_ns: 0,
            pipe_atime_ns: 0,
            pipe_was_empty_ns: 0,
            pipe_emptied_ns: 0,
            pipe_write_cold_ns: 0,
            pipe_read_cold_ns: 0,
            pipe_cold_bytes: 0,
            pipe_cold: Vec::new(),
            tcp_send_ns: 2000,
            tcp_recv_ns: 300,
            wakeup_ns: 200,
            wakeup_waker_ns: None,
            wait_ns: 0,
            unix_wait_ns: 0,
            wakeup_remote_ns: 0,
            ipi_send_ns: 100,
            ipi_send_idle_ns: None,
            idle_exit_charged_ns: None,
            schedule_ns: None,
            ipi_latency_ns: 1000,
            ipi_receive_ns: 0,
            tick_irq_ns: 0,
            timer_program_ns: 0,
            idle_exit_ns: 2000,
            idle_polls: true,
            fork_ns: 50_000,
            clone_ns: 20_000,
            exit_ns: 10_000,
            // No cache-line transfers, so pipe costs stay the hand-computed ones.
            cache_line_ns: 0,
            cache_line_remote_ns: 0,
            migration: MigrationCost { smt_ns: 100, llc_ns: 1000, cross_llc_ns: 5000, cross_node_ns: 10_000 },
            sched_ops: SchedOpCost {
                per_cpu_scanned_ns: 10,
                per_rq_lock_ns: 50,
                per_task_examined_ns: 20,
                per_cpu_scanned_cross_llc_ns: None,
                per_rq_lock_cross_llc_ns: None,
            },
            node_mem_bw_mbps: Some(50_000),
            cpu_mhz: Some(1000),
            smt_throughput_pct: None,
            cache: None,
            tlb: None,
            background: Vec::new(),
            halted_exit: Vec::new(),
            switch_cold: Vec::new(),
        }
    }

    /// Speed, per mille of alone, of each of `busy` running hardware threads of one core.
    pub fn smt_speed_pm(&self, busy: u64) -> u64 {
        match self.smt_throughput_pct {
            Some(pct) if busy > 1 => (pct * 10 / busy).clamp(1, 1000),
            _ => 1000,
        }
    }
}

impl MachineProfile {
    /// Parses a profile from TOML text. `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, SpecError> {
        let profile: MachineProfile = toml::from_str(text).map_err(|e| {
            SpecError::new(
                "machine profile",
                origin,
                format!("a TOML machine profile with the fields of machines/broadwell-ep.toml ({})", e.message()),
            )
        })?;
        profile.check(origin)?;
        Ok(profile)
    }

    /// Every cost within what a real machine could measure: an operation that
    /// must cost something at least 1 ns, nothing beyond a physical bound (10 ms
    /// for one kernel operation, 100 ms for a fork or a cache refill). The error
    /// names the field, its value and the accepted range.
    pub fn check(&self, origin: &str) -> Result<(), SpecError> {
        const OP_NS: u64 = 10_000_000;
        const BIG_NS: u64 = 100_000_000;
        let m = &self.migration;
        let o = &self.sched_ops;
        let fields: Vec<(&str, u64, u64, u64, &str)> = vec![
            ("context_switch_ns", self.context_switch_ns, 1, OP_NS, "ns"),
            ("syscall_ns", self.syscall_ns, 1, OP_NS, "ns"),
            ("copy_ps_per_byte", self.copy_ps_per_byte, 1, 1_000_000, "ps per byte"),
            ("pipe_op_ns", self.pipe_op_ns, 1, OP_NS, "ns"),
            ("unix_send_ns", self.unix_send_ns, 1, OP_NS, "ns"),
            ("unix_recv_ns", self.unix_recv_ns, 1, OP_NS, "ns"),
            ("unix_send_remote_ns", self.unix_send_remote_ns, 0, OP_NS, "ns"),
            ("unix_recv_remote_ns", self.unix_recv_remote_ns, 0, OP_NS, "ns"),
            ("unix_send_cold_ns", self.unix_send_cold_ns, 0, OP_NS, "ns"),
            ("unix_recv_cold_ns", self.unix_recv_cold_ns, 0, OP_NS, "ns"),
            ("unix_cold_bytes", self.unix_cold_bytes, 0, 1 << 40, "bytes"),
            ("pipe_write_cold_ns", self.pipe_write_cold_ns, 0, OP_NS, "ns"),
            ("pipe_read_cold_ns", self.pipe_read_cold_ns, 0, OP_NS, "ns"),
            ("pipe_cold_bytes", self.pipe_cold_bytes, 0, 1 << 40, "bytes"),
            ("pipe_page_alloc_ns", self.pipe_page_alloc_ns, 0, OP_NS, "ns"),
            ("pipe_page_free_ns", self.pipe_page_free_ns, 0, OP_NS, "ns"),
            ("pipe_mtime_ns", self.pipe_mtime_ns, 0, OP_NS, "ns"),
            ("pipe_atime_ns", self.pipe_atime_ns, 0, OP_NS, "ns"),
            ("pipe_was_empty_ns", self.pipe_was_empty_ns, 0, OP_NS, "ns"),
            ("pipe_emptied_ns", self.pipe_emptied_ns, 0, OP_NS, "ns"),
            ("tcp_send_ns", self.tcp_send_ns, 1, OP_NS, "ns"),
            ("tcp_recv_ns", self.tcp_recv_ns, 1, OP_NS, "ns"),
            ("wakeup_ns", self.wakeup_ns, 1, OP_NS, "ns"),
            ("wakeup_remote_ns", self.wakeup_remote_ns, 0, OP_NS, "ns"),
            ("wait_ns", self.wait_ns, 0, OP_NS, "ns"),
            ("unix_wait_ns", self.unix_wait_ns, 0, OP_NS, "ns"),
            ("ipi_send_ns", self.ipi_send_ns, 0, OP_NS, "ns"),
            ("ipi_send_idle_ns", self.ipi_send_idle_ns.unwrap_or(0), 0, OP_NS, "ns"),
            ("ipi_latency_ns", self.ipi_latency_ns, 0, OP_NS, "ns"),
            ("ipi_receive_ns", self.ipi_receive_ns, 0, OP_NS, "ns"),
            ("tick_irq_ns", self.tick_irq_ns, 0, TICK_IRQ_MAX_NS, "ns"),
            ("timer_program_ns", self.timer_program_ns, 0, OP_NS, "ns"),
            ("idle_exit_ns", self.idle_exit_ns, 0, OP_NS, "ns"),
            ("fork_ns", self.fork_ns, 1, BIG_NS, "ns"),
            ("clone_ns", self.clone_ns, 1, BIG_NS, "ns"),
            ("exit_ns", self.exit_ns, 1, BIG_NS, "ns"),
            ("cache_line_ns", self.cache_line_ns, 0, 100_000, "ns"),
            ("cache_line_remote_ns", self.cache_line_remote_ns, 0, 100_000, "ns"),
            ("migration.smt_ns", m.smt_ns, 0, BIG_NS, "ns"),
            ("migration.llc_ns", m.llc_ns, 0, BIG_NS, "ns"),
            ("migration.cross_llc_ns", m.cross_llc_ns, 0, BIG_NS, "ns"),
            ("migration.cross_node_ns", m.cross_node_ns, 0, BIG_NS, "ns"),
            ("sched_ops.per_cpu_scanned_ns", o.per_cpu_scanned_ns, 0, 1_000_000, "ns"),
            ("sched_ops.per_rq_lock_ns", o.per_rq_lock_ns, 0, 1_000_000, "ns"),
            ("sched_ops.per_task_examined_ns", o.per_task_examined_ns, 0, 1_000_000, "ns"),
            ("sched_ops.per_cpu_scanned_cross_llc_ns", o.per_cpu_scanned_cross_llc_ns.unwrap_or(0), 0, 1_000_000, "ns"),
            ("sched_ops.per_rq_lock_cross_llc_ns", o.per_rq_lock_cross_llc_ns.unwrap_or(0), 0, 1_000_000, "ns"),
        ];
        let optional: Vec<(&str, Option<u64>, u64, u64, &str)> = vec![
            ("node_mem_bw_mbps", self.node_mem_bw_mbps, 1, 100_000_000, "MB/s (leave it out for unlimited)"),
            ("cpu_mhz", self.cpu_mhz, 100, 10_000, "MHz (leave it out for 3000)"),
            ("wakeup_waker_ns", self.wakeup_waker_ns, 0, self.wakeup_ns, "ns, at most wakeup_ns"),
            ("idle_exit_charged_ns", self.idle_exit_charged_ns, 0, self.idle_exit_ns, "ns, at most idle_exit_ns"),
            ("schedule_ns", self.schedule_ns, 0, OP_NS, "ns"),
            ("smt_throughput_pct", self.smt_throughput_pct, 50, 200, "per cent of one thread alone"),
            ("cache.l2_bytes", self.cache.as_ref().map(|c| c.l2_bytes), 1, 1 << 40, "bytes"),
            ("cache.llc_bytes", self.cache.as_ref().map(|c| c.llc_bytes), 1, 1 << 40, "bytes"),
            ("cache.llc_line_ps", self.cache.as_ref().map(|c| c.llc_line_ps), 0, 1_000_000_000, "ps"),
            ("cache.dram_line_ps", self.cache.as_ref().map(|c| c.dram_line_ps), 0, 1_000_000_000, "ps"),
            ("tlb.nr_dyn_asids", self.tlb.as_ref().map(|t| u64::from(t.nr_dyn_asids)), 0, 4096, "slots"),
            ("tlb.flush_refill_ns", self.tlb.as_ref().map(|t| t.flush_refill_ns), 0, OP_NS, "ns"),
        ];
        let given = optional.into_iter().filter_map(|(f, v, lo, hi, unit)| v.map(|v| (f, v, lo, hi, unit)));
        for (field, v, lo, hi, unit) in fields.into_iter().chain(given) {
            if !(lo..=hi).contains(&v) {
                return Err(SpecError::new(field, v.to_string(), format!("{lo} to {hi} {unit} (in {origin})")));
            }
        }
        let mut last_idle_ns = 0;
        for (i, h) in self.halted_exit.iter().enumerate() {
            let field = |name: &str| format!("halted_exit[{i}].{name}");
            if h.idle_ns <= last_idle_ns || h.idle_ns > 3_600_000_000_000 {
                let expected = format!("1 to 3600000000000 ns, above the step before it (in {origin})");
                return Err(SpecError::new(field("idle_ns"), h.idle_ns.to_string(), expected));
            }
            if h.exit_ns > OP_NS {
                return Err(SpecError::new(field("exit_ns"), h.exit_ns.to_string(), format!("0 to {OP_NS} ns (in {origin})")));
            }
            last_idle_ns = h.idle_ns;
        }
        let mut last_tasks = 0;
        for (i, step) in self.switch_cold.iter().enumerate() {
            let field = |name: &str| format!("switch_cold[{i}].{name}");
            if step.tasks <= last_tasks || step.tasks > 1 << 32 {
                let expected = format!("1 to {} tasks, above the step before it (in {origin})", 1u64 << 32);
                return Err(SpecError::new(field("tasks"), step.tasks.to_string(), expected));
            }
            if step.extra_ns > OP_NS {
                return Err(SpecError::new(
                    field("extra_ns"),
                    step.extra_ns.to_string(),
                    format!("0 to {OP_NS} ns (in {origin})"),
                ));
            }
            last_tasks = step.tasks;
        }
        for (name, steps, one_step) in
            [("unix_cold", &self.unix_cold, self.unix_cold_bytes), ("pipe_cold", &self.pipe_cold, self.pipe_cold_bytes)]
        {
            if !steps.is_empty() && one_step != 0 {
                let expected = format!(
                    "either {name} steps or the one-step fields ({name}_bytes and the two _cold_ns), not both (in {origin})"
                );
                return Err(SpecError::new(format!("{name}_bytes"), one_step.to_string(), expected));
            }
            let mut last_bytes = 0;
            for (i, step) in steps.iter().enumerate() {
                let field = |f: &str| format!("{name}[{i}].{f}");
                if step.bytes <= last_bytes || step.bytes > 1 << 40 {
                    let expected = format!("1 to {} bytes, above the step before it (in {origin})", 1u64 << 40);
                    return Err(SpecError::new(field("bytes"), step.bytes.to_string(), expected));
                }
                for (f, v) in [("write_ns", step.write_ns), ("read_ns", step.read_ns)] {
                    if v > OP_NS {
                        return Err(SpecError::new(field(f), v.to_string(), format!("0 to {OP_NS} ns (in {origin})")));
                    }
                }
                last_bytes = step.bytes;
            }
        }
        for (i, b) in self.background.iter().enumerate() {
            let field = |name: &str| format!("background[{i}].{name}");
            let comm_ok = !b.comm.is_empty() && b.comm.len() <= 15 && !b.comm.contains(char::is_whitespace);
            if !comm_ok {
                return Err(SpecError::new(field("comm"), &b.comm, format!("1 to 15 characters without spaces (in {origin})")));
            }
            // At least 10 us between wakeups (a thread busier than that is part of
            // the workload, not background), at most an hour.
            if !(10_000..=3_600_000_000_000).contains(&b.mean_interval_ns) {
                let v = b.mean_interval_ns.to_string();
                return Err(SpecError::new(field("mean_interval_ns"), v, format!("10000 to 3600000000000 ns (in {origin})")));
            }
            if !(1..=OP_NS).contains(&b.run_ns) || b.run_ns >= b.mean_interval_ns {
                let v = b.run_ns.to_string();
                let expected = format!("1 to {OP_NS} ns and below mean_interval_ns (in {origin})");
                return Err(SpecError::new(field("run_ns"), v, expected));
            }
            if !(-20..=19).contains(&b.nice) {
                return Err(SpecError::new(field("nice"), b.nice.to_string(), format!("-20 to 19 (in {origin})")));
            }
        }
        Ok(())
    }

    /// Writes the profile as TOML (used by `schedlab calibrate`).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a MachineProfile always serialises")
    }

    /// The AF_UNIX cold curve: `unix_cold`, or the one step of
    /// `unix_cold_bytes` (empty where neither is given).
    pub fn unix_cold_curve(&self) -> Vec<ColdStep> {
        Self::cold_curve(&self.unix_cold, self.unix_cold_bytes, self.unix_send_cold_ns, self.unix_recv_cold_ns)
    }

    /// The pipes' cold curve: `pipe_cold`, or the one step of `pipe_cold_bytes`.
    pub fn pipe_cold_curve(&self) -> Vec<ColdStep> {
        Self::cold_curve(&self.pipe_cold, self.pipe_cold_bytes, self.pipe_write_cold_ns, self.pipe_read_cold_ns)
    }

    fn cold_curve(steps: &[ColdStep], bytes: u64, write_ns: u64, read_ns: u64) -> Vec<ColdStep> {
        if !steps.is_empty() {
            steps.to_vec()
        } else if bytes != 0 {
            vec![ColdStep { bytes, write_ns, read_ns }]
        } else {
            Vec::new()
        }
    }

    /// The idle exit of a CPU woken after idling `idle_ns`: `idle_exit_ns`, or a
    /// halted CPU's `halted_exit` step for that long an idle.
    #[inline]
    pub fn idle_exit_after_ns(&self, idle_ns: u64) -> u64 {
        if self.halted_exit.is_empty() || self.idle_polls {
            return self.idle_exit_ns;
        }
        self.halted_exit.iter().rev().find(|h| h.idle_ns <= idle_ns).map_or(self.idle_exit_ns, |h| h.exit_ns)
    }

    /// `switch_cold` at `tasks` switch-ins of others since: straight lines from
    /// (0, 0) through the steps, flat past the last.
    #[inline]
    pub fn switch_cold_ns(&self, tasks: u64) -> u64 {
        let curve = &self.switch_cold;
        let Some(last) = curve.last() else { return 0 };
        let Some(i) = curve.iter().position(|s| s.tasks >= tasks) else { return last.extra_ns };
        let hi = &curve[i];
        let (lo_tasks, lo_ns) = if i == 0 { (0, 0) } else { (curve[i - 1].tasks, curve[i - 1].extra_ns) };
        let rise = hi.extra_ns as i128 - lo_ns as i128;
        (lo_ns as i128 + rise * (tasks - lo_tasks) as i128 / (hi.tasks - lo_tasks) as i128) as u64
    }

    /// Time of `cycles` core cycles of user work at `cpu_mhz`.
    pub fn cycles_ns(&self, cycles: u64) -> u64 {
        cycles.saturating_mul(1000).div_ceil(self.cpu_mhz.unwrap_or(DEFAULT_CPU_MHZ))
    }

    /// CPU time to copy `bytes` between user and kernel space.
    pub fn copy_ns(&self, bytes: u64) -> u64 {
        (bytes * self.copy_ps_per_byte).div_ceil(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BROADWELL: &str = include_str!("../../../machines/broadwell-ep.toml");

    #[test]
    fn a_cache_section_is_optional_and_its_sizes_must_be_positive() {
        assert_eq!(MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap().cache, None);
        let with =
            format!("{BROADWELL}\n[cache]\nl2_bytes = 262144\nllc_bytes = 57671680\nllc_line_ps = 1000\ndram_line_ps = 5000\n");
        let c = MachineProfile::from_toml(&with, "x.toml").unwrap().cache.unwrap();
        assert_eq!((c.l2_bytes, c.llc_bytes), (262_144, 57_671_680));
        let zero = with.replace("l2_bytes = 262144", "l2_bytes = 0");
        let e = MachineProfile::from_toml(&zero, "x.toml").unwrap_err();
        assert_eq!(e.field, "cache.l2_bytes");
        assert_eq!(e.value, "0");
    }

    #[test]
    fn a_tlb_section_is_optional_round_trips_and_is_checked() {
        assert_eq!(MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap().tlb, None);
        let with = format!("{BROADWELL}\n[tlb]\nnr_dyn_asids = 6\nflush_refill_ns = 260\n");
        let p = MachineProfile::from_toml(&with, "x.toml").unwrap();
        assert_eq!(p.tlb, Some(TlbProfile { nr_dyn_asids: 6, flush_refill_ns: 260 }));
        assert_eq!(MachineProfile::from_toml(&p.to_toml(), "again.toml").unwrap(), p);
        let e = MachineProfile::from_toml(&with.replace("nr_dyn_asids = 6", "nr_dyn_asids = 5000"), "x.toml").unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("tlb.nr_dyn_asids", "5000"));
        let e = MachineProfile::from_toml(&with.replace("= 260", "= 20000000"), "x.toml").unwrap_err();
        assert_eq!((e.field.as_str(), e.value.as_str()), ("tlb.flush_refill_ns", "20000000"));
    }

    /// Background threads round-trip through TOML (as calibrate writes them), and
    /// one that could not be background is refused naming its field.
    #[test]
    fn background_threads_round_trip_and_are_checked() {
        let mut p = MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap();
        assert!(p.background.is_empty(), "shipped profiles have none");
        p.background = vec![BackgroundThreads {
            comm: "kworker".into(),
            per_cpu: true,
            mean_interval_ns: 900_000_000,
            run_ns: 20_000,
            nice: -20,
        }];
        let again = MachineProfile::from_toml(&p.to_toml(), "x.toml").unwrap();
        assert_eq!(again, p);
        for (edit, field) in [
            ("run_ns = 20000", "background[0].run_ns"),
            ("mean_interval_ns = 900000000", "background[0].mean_interval_ns"),
            ("comm = \"kworker\"", "background[0].comm"),
            ("nice = -20", "background[0].nice"),
        ] {
            let bad_value = match field {
                "background[0].run_ns" => "run_ns = 900000000",
                "background[0].mean_interval_ns" => "mean_interval_ns = 5",
                "background[0].comm" => "comm = \"k w\"",
                _ => "nice = 20",
            };
            let text = p.to_toml().replace(edit, bad_value);
            let e = MachineProfile::from_toml(&text, "x.toml").unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
    }

    /// The cold curve's interpolation, worked by hand.
    #[test]
    fn a_cold_curve_draws_straight_lines_between_its_steps() {
        let curve = [
            ColdStep { bytes: 1000, write_ns: 100, read_ns: 10 },
            ColdStep { bytes: 3000, write_ns: 300, read_ns: 50 },
            ColdStep { bytes: 4000, write_ns: 200, read_ns: 50 },
        ];
        // From (0, 0) to the first step: 500 bytes is half of 100 and of 10.
        assert_eq!((cold_extra_ns(&curve, 500, true), cold_extra_ns(&curve, 500, false)), (50, 5));
        assert_eq!(cold_extra_ns(&curve, 1000, true), 100);
        // 2000 bytes is halfway from 1000 to 3000: 100 + 200 / 2, 10 + 40 / 2.
        assert_eq!((cold_extra_ns(&curve, 2000, true), cold_extra_ns(&curve, 2000, false)), (200, 30));
        // A step below the one before it is followed down: 300 - 100 / 2.
        assert_eq!(cold_extra_ns(&curve, 3500, true), 250);
        // Flat past the last step, and nothing with no curve.
        assert_eq!((cold_extra_ns(&curve, 1 << 30, true), cold_extra_ns(&curve, 1 << 30, false)), (200, 50));
        assert_eq!(cold_extra_ns(&[], 5000, true), 0);
        assert_eq!(cold_extra_ns(&curve, 0, true), 0);
    }

    #[test]
    fn the_one_step_cold_fields_are_a_curve_of_one_step() {
        let mut p = MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap();
        (p.unix_send_cold_ns, p.unix_recv_cold_ns, p.unix_cold_bytes) = (151, 322, 32 << 20);
        let curve = p.unix_cold_curve();
        assert_eq!(curve, vec![ColdStep { bytes: 32 << 20, write_ns: 151, read_ns: 322 }]);
        // What the linear form charged: full x min(queued, bytes) / bytes.
        for queued in [0u64, 1, 4 << 20, 17 << 20, 32 << 20, 1 << 30] {
            let linear = (322u128 * queued.min(32 << 20) as u128 / (32u128 << 20)) as u64;
            assert_eq!(cold_extra_ns(&curve, queued, false), linear, "{queued}");
        }
        assert!(p.pipe_cold_curve().is_empty());
    }

    #[test]
    fn cold_steps_round_trip_and_are_checked() {
        let mut p = MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap();
        p.unix_cold =
            vec![ColdStep { bytes: 1000, write_ns: 10, read_ns: 20 }, ColdStep { bytes: 3000, write_ns: 15, read_ns: 40 }];
        let again = MachineProfile::from_toml(&p.to_toml(), "x.toml").unwrap();
        assert_eq!(again, p);
        let mut both = p.clone();
        both.unix_cold_bytes = 5000;
        assert_eq!(both.check("x.toml").unwrap_err().field, "unix_cold_bytes");
        let text = p.to_toml().replace("bytes = 3000", "bytes = 1000");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "unix_cold[1].bytes");
        let text = p.to_toml().replace("read_ns = 40", "read_ns = 99000000");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "unix_cold[1].read_ns");
    }

    /// A halted CPU's exit steps round-trip, apply from their idle on and only
    /// where the idle halts; steps out of order or too long are refused naming
    /// the field.
    #[test]
    fn halted_exit_steps_round_trip_apply_and_are_checked() {
        let mut p = MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap();
        p.idle_polls = false;
        p.halted_exit =
            vec![HaltedExit { idle_ns: 1_000_000, exit_ns: 13_000 }, HaltedExit { idle_ns: 3_000_000, exit_ns: 32_000 }];
        let again = MachineProfile::from_toml(&p.to_toml(), "x.toml").unwrap();
        assert_eq!(again, p);
        assert_eq!(p.idle_exit_after_ns(999_999), p.idle_exit_ns);
        assert_eq!(p.idle_exit_after_ns(2_000_000), 13_000);
        assert_eq!(p.idle_exit_after_ns(50_000_000), 32_000);
        p.idle_polls = true;
        assert_eq!(p.idle_exit_after_ns(50_000_000), p.idle_exit_ns);
        p.idle_polls = false;
        let text = p.to_toml().replace("idle_ns = 3000000", "idle_ns = 1000000");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "halted_exit[1].idle_ns");
        let text = p.to_toml().replace("exit_ns = 32000", "exit_ns = 99000000");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "halted_exit[1].exit_ns");
    }

    /// The switch-in curve round-trips, is drawn in straight lines from (0, 0)
    /// and flat past its last step, and steps out of order are refused.
    #[test]
    fn switch_cold_steps_round_trip_apply_and_are_checked() {
        let mut p = MachineProfile::from_toml(BROADWELL, "broadwell-ep.toml").unwrap();
        assert_eq!(p.switch_cold_ns(500), 0);
        p.switch_cold = vec![
            SwitchCold { tasks: 1, extra_ns: 0 },
            SwitchCold { tasks: 31, extra_ns: 1500 },
            SwitchCold { tasks: 1023, extra_ns: 2500 },
        ];
        assert_eq!(MachineProfile::from_toml(&p.to_toml(), "x.toml").unwrap(), p);
        assert_eq!(p.switch_cold_ns(1), 0);
        assert_eq!(p.switch_cold_ns(16), 750);
        assert_eq!(p.switch_cold_ns(527), 2000);
        assert_eq!(p.switch_cold_ns(100_000), 2500);
        let text = p.to_toml().replace("tasks = 1023", "tasks = 31");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "switch_cold[2].tasks");
        let text = p.to_toml().replace("extra_ns = 2500", "extra_ns = 99000000");
        assert_eq!(MachineProfile::from_toml(&text, "x.toml").unwrap_err().field, "switch_cold[2].extra_ns");
    }

    /// A profile whose costs no machine could have is refused, naming the field,
    /// the value and the accepted range: zero for an operation that must cost
    /// something, or beyond the physical bound.
    #[test]
    fn costs_outside_their_physical_range_are_refused() {
        for (from, to, field) in [
            ("context_switch_ns = ", "context_switch_ns = 0 #", "context_switch_ns"),
            ("context_switch_ns = ", "context_switch_ns = 1000000000000000000 #", "context_switch_ns"),
            ("syscall_ns = ", "syscall_ns = 0 #", "syscall_ns"),
            ("fork_ns = ", "fork_ns = 0 #", "fork_ns"),
            ("node_mem_bw_mbps = ", "node_mem_bw_mbps = 0 #", "node_mem_bw_mbps"),
        ] {
            let line = BROADWELL.lines().find(|l| l.starts_with(from)).unwrap_or_else(|| panic!("{from}"));
            let bad = BROADWELL.replace(line, &line.replacen(from, to, 1));
            let e = MachineProfile::from_toml(&bad, "x.toml").unwrap_err();
            assert_eq!(e.field, field, "{e}");
            assert!(e.expected.contains(" to ") && e.expected.contains("x.toml"), "{e}");
        }
        let no_bw: String = BROADWELL.lines().filter(|l| !l.starts_with("node_mem_bw_mbps")).collect::<Vec<_>>().join("\n");
        assert_eq!(MachineProfile::from_toml(&no_bw, "x.toml").unwrap().node_mem_bw_mbps, None, "absent means unlimited");
    }
}
