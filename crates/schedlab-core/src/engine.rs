//! The engine: one run, one pure function of (workload, topology, machine costs,
//! policy, seed). It plays the kernel's part around the policy: try_to_wake_up(),
//! schedule(), the tick, fork and exit, system calls on pipes, sockets and futexes,
//! IPIs and idle exits, and charges every cost through the machine profile.
//!
//! Time advances only through the event queue. A running task executes one
//! *segment* at a time: user compute, or one system call whose effect (data moved,
//! tasks woken, caller blocked) applies when its cost has been paid. System calls are
//! not preemptible (PREEMPT_NONE/VOLUNTARY server kernels): a reschedule that arrives
//! during one takes effect on return to user space.

use std::collections::{BTreeMap, VecDeque};

use hdrhistogram::Histogram;

use crate::cost::{cold_extra_ns, ColdStep, MachineProfile};
use crate::cpuset::CpuSet;
use crate::events::{Digest, EventKind, EventQueue};
use crate::ipc::{Channel, IoOutcome, Pipe, UnixStream, WaitQueue};
use crate::memory::MemoryModel;
use crate::program::{ForkKind, MemAt, Op, OpResult, Program, DEFAULT_WORKING_SET_BYTES};
use crate::rng::{SimRng, Stream};
use crate::sched::{
    Charge, CpuState, DequeueReason, EnqueueReason, IrqOffStats, Launcher, PreemptModel, Request, SchedClass, SelectReason,
    System, TaskGroupInfo, WakeFlags, ROOT_TASK_GROUP_SHARES,
};
use crate::stats::{latency_histogram, CpuStats};
use crate::task::{nice_to_weight, Task, TaskId, TaskState};
use crate::topology::{Distance, Topology};
use crate::trace::{EntityRecord, EntitySink, PrevState, TraceContext, TraceKind, TraceRecord, TraceSink};

/// The workload's main program, first moved into its session's autogroup
/// (`sched_autogroup_create_attach()` at `setsid()`; the group's weight is
/// nice 0's, `autogroup->nice` = 0). Its children inherit the group.
struct InAutogroup {
    inner: Box<dyn Program>,
    joined: bool,
}

/// The task group an autogrouped run's session gets.
pub const AUTOGROUP_PATH: &str = "/autogroup-1";

impl Program for InAutogroup {
    fn next(&mut self, last: OpResult, rng: &mut SimRng) -> Op {
        if !self.joined {
            self.joined = true;
            return Op::JoinGroup { path: AUTOGROUP_PATH.into(), shares: ROOT_TASK_GROUP_SHARES };
        }
        self.inner.next(last, rng)
    }

    fn working_set_bytes(&self) -> u64 {
        self.inner.working_set_bytes()
    }
}

/// A background thread (`MachineProfile::background`): it runs `run_ns` in the
/// kernel, then sleeps an exponential time of mean `mean_interval_ns`, forever.
/// It is created asleep, so its first operation is a run.
struct BackgroundThread {
    mean_interval_ns: u64,
    run_ns: u64,
    ran: bool,
}

impl Program for BackgroundThread {
    fn next(&mut self, _last: OpResult, rng: &mut SimRng) -> Op {
        self.ran = !self.ran;
        if self.ran {
            Op::Kernel { ns: self.run_ns }
        } else {
            Op::Sleep { ns: rng.exponential_ns(self.mean_interval_ns) }
        }
    }

    /// A kernel thread's own data is small: a few cache lines of its work item.
    fn working_set_bytes(&self) -> u64 {
        4096
    }
}

/// Mark label a workload records just before its timed part starts.
pub const MARK_START: u32 = 0;
/// Mark label a workload records when its timed part ends.
pub const MARK_END: u32 = 1;

/// The most utilisation buckets a run keeps per CPU.
pub const MAX_UTIL_BUCKETS: usize = 2048;

/// First pid handed out; the workload's main task gets it.
const FIRST_PID: u32 = 1000;
/// Cache lines of a pipe's bookkeeping that a read or write takes over from the
/// CPU that used it last (struct pipe_inode_info and struct pipe_buffer,
/// include/linux/pipe_fs_i.h, v5.15): the mutex with rd_wait, head/tail with
/// wr_wait, and the ring slot's pipe_buffer (offset, len). The data lines are
/// charged apart, from the CPUs that wrote them.
const PIPE_STRUCT_LINES: u64 = 3;
/// Bytes in a cache line.
const CACHE_LINE_BYTES: u64 = 64;

/// A read or write system call: its channel, its byte count, its direction.
#[derive(Clone, Copy, Debug)]
struct RwCall {
    chan: crate::program::ChanId,
    bytes: u64,
    write: bool,
}

impl RwCall {
    fn of(op: &Op) -> Option<RwCall> {
        match *op {
            Op::Write { chan, bytes } => Some(RwCall { chan, bytes, write: true }),
            Op::Read { chan, bytes } => Some(RwCall { chan, bytes, write: false }),
            _ => None,
        }
    }
}

/// Run settings that are not the policy's.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub seed: u64,
    /// CONFIG_HZ: tick frequency of busy CPUs.
    pub hz: u64,
    /// Check invariants as the run goes (always on in tests).
    pub check: bool,
    /// Stop (and report) if simulated time passes this.
    pub max_sim_ns: u64,
    /// Where the run starts relative to the jiffy grid. A benchmark starts at an
    /// arbitrary moment between two timer ticks; None draws that phase from the seed,
    /// which is what makes runs with different seeds differ.
    pub tick_phase_ns: Option<u64>,
    /// Record each CPU's busy time in buckets of at least this many ns (for a
    /// utilisation heat map); the width doubles whenever a run outgrows
    /// `MAX_UTIL_BUCKETS`. None records nothing.
    pub util_bucket_ns: Option<u64>,
    /// When a requested reschedule takes effect (`preempt=`).
    pub preempt: PreemptModel,
    /// CONFIG_PREEMPT_DYNAMIC: the kernel was built to choose its preemption
    /// model at boot, so it is built with CONFIG_PREEMPTION whatever `preempt`
    /// says (a static full or lazy build has it too; a static none or voluntary
    /// one does not). See `System::preemption_built`.
    pub preempt_dynamic: bool,
    /// CONFIG_SCHED_AUTOGROUP with `sched_autogroup_enabled`: the workload starts
    /// in a session of its own (as under `setsid`), so it and every task it forks
    /// run in one autogroup, a task group of the root with a nice-0 share.
    pub autogroup: bool,
    /// What the workload's first task inherits from the process that started
    /// it, which is not simulated.
    pub launcher: Launcher,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            seed: 1,
            hz: 250,
            check: cfg!(debug_assertions),
            max_sim_ns: 3_600_000_000_000,
            tick_phase_ns: None,
            util_bucket_ns: None,
            preempt: PreemptModel::None,
            preempt_dynamic: false,
            autogroup: false,
            launcher: Launcher::default(),
        }
    }
}

/// An `OpResult` kept as two words. Written at the end of one step and read at the
/// start of the next, often a few hundred cycles later: as an enum it is stored
/// field by field and loaded as one 16-byte word, and that load waits for the
/// stores to drain instead of taking their data (a store-forwarding stall, a
/// fifth of `run_next()`'s samples). Word by word, each load matches a store.
#[derive(Clone, Copy, Default)]
struct LastResult {
    tag: u64,
    value: u64,
}

impl LastResult {
    fn of(r: OpResult) -> LastResult {
        let (tag, value) = match r {
            OpResult::None => (0, 0),
            OpResult::Bytes(n) => (1, n),
            OpResult::Chan(c) => (2, c as u64),
            OpResult::Task(t) => (3, t as u64),
            OpResult::Count(n) => (4, u64::from(n)),
            OpResult::NoChild => (5, 0),
            OpResult::Time(t) => (6, t),
        };
        LastResult { tag, value }
    }

    fn get(self) -> OpResult {
        match self.tag {
            0 => OpResult::None,
            1 => OpResult::Bytes(self.value),
            2 => OpResult::Chan(self.value as usize),
            3 => OpResult::Task(self.value as usize),
            4 => OpResult::Count(self.value as u32),
            5 => OpResult::NoChild,
            _ => OpResult::Time(self.value),
        }
    }
}

/// The program of a task killed by `Op::Kill`.
struct Killed;

impl Program for Killed {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        Op::Exit
    }
}

/// Per-task execution state the policy never sees.
struct TaskExec {
    program: Option<Box<dyn Program>>,
    rng: SimRng,
    /// The system call in progress, kept while blocked for the retry.
    op: Option<Op>,
    /// Bytes of the current write already transferred (partial writes).
    op_progress: u64,
    /// False once the current system call has blocked at least once.
    first_attempt: bool,
    /// The result handed to the program's next step.
    last: LastResult,
    /// A preempted segment: (ns left, kernel?).
    seg_remaining: Option<(u64, bool)>,
    /// A preempted stream: its work left (ns alone, local memory) and what it asks.
    stream_left: Option<(u64, StreamAsk)>,
    /// The node of the first CPU the task ran on (first touch after fork).
    home_node: Option<usize>,
    /// Cache refill to add to the next segment after a migration.
    refill_ns: u64,
    /// The CPU whose caches hold the task's working set: where it last did work.
    cache_cpu: Option<usize>,
    /// Its program's `working_set_bytes()`.
    working_set_bytes: u64,
    /// Bytes brought into its core's private cache and its LLC (`Engine::cache_in`)
    /// when it last ran there: what others brought in since pushed its lines out.
    cache_marks: (u64, u64),
    /// Where it was last switched in (`switch_cold` profiles only), packed in
    /// one word to keep this struct's size: that CPU + 1 above bit 40, that
    /// CPU's `switch_ins` after it below; 0 for never.
    last_switch_in: u64,
    timer_gen: u32,
    timer_fired: bool,
    /// What arming the current sleep's timer charged (`timer_program_ns` or 0):
    /// its expiry was fixed before it.
    timer_arm_ns: u32,
    futex_woken: bool,
    /// Exited process children not yet reaped.
    zombies: VecDeque<TaskId>,
    /// Process children not yet reaped (alive or zombie).
    unreaped_children: u64,
    /// Tasks blocked in pthread_join() on this task.
    joiners: Vec<TaskId>,
    /// Blocked in wait().
    in_wait: bool,
    /// One of the machine's background threads (`MachineProfile::background`),
    /// not part of the workload.
    background: bool,
}

/// What a stream asks of memory: bytes per second alone, and whose memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StreamAsk {
    demand_bps: u64,
    at: MemAt,
}

/// A stream running on a CPU: what it asks, and the remote-memory factor
/// (`distance : local distance`) its alone time was scaled by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RunningStream {
    ask: StreamAsk,
    remote_num: u64,
    remote_den: u64,
}

/// Engine-side CPU state.
#[derive(Clone, Debug, Default)]
struct CpuExec {
    seg_gen: u32,
    seg_start_ns: u64,
    seg_end_ns: u64,
    /// SMT contention: the segment's work left at `seg_mark_ns`, and the speed (per
    /// mille of alone) it has run at since.
    seg_mark_ns: u64,
    seg_left_ns: u64,
    seg_speed_pm: u64,
    seg_kernel: bool,
    in_segment: bool,
    resched_in_flight: bool,
    /// The tick runs (the CPU is busy).
    tick_on: bool,
    /// When the CPU goes (went) idle, after its last scheduler work.
    idle_start_ns: u64,
    /// When the CPU last left idle.
    busy_since_ns: u64,
    /// The stream this CPU's segment is, if it is one.
    stream: Option<RunningStream>,
    /// How much of the pending scheduler work the running task is charged if
    /// its call ends in a switch: set by a wakeup onto this CPU that asked to
    /// preempt it (see `try_to_wake_up`); the rest goes to the task switched in.
    waker_owned_ns: Option<u64>,
    /// The channel of the last pipe read or write on this CPU, kept only where
    /// the profile charges cold pipe calls (`pipe_cold_ns()`).
    last_chan: Option<crate::program::ChanId>,
    /// Tasks woken onto this idle CPU through its wake list, in order, to be
    /// enqueued when it handles the IPI (`sched_ttwu_pending()`).
    wake_list: Vec<(TaskId, WakeFlags)>,
    /// The tail of this halted CPU's idle exit that the task it switches to
    /// pays (`idle_exit_charged_ns`), set when a wakeup kicks it.
    exit_charged_ns: u64,
    /// Switch-ins of tasks on this CPU so far, kept where the profile charges
    /// a cold switch-in (`switch_cold`).
    switch_ins: u64,
}

/// Per-task numbers in the result. A process reaped during the run gives its
/// slot to a later fork (memory grows with the tasks alive at once, not with
/// the processes a run makes); its numbers are then added into one row per
/// `comm` of every such process (`count` of them, `pid` the first one's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSummary {
    pub pid: u32,
    pub comm: String,
    /// Tasks in the row: 1, or the reaped processes of this `comm` it adds up.
    pub count: u64,
    pub run_ns: u64,
    /// User time as getrusage() reports it: `run_ns` outside system calls.
    pub user_ns: u64,
    /// System time: system calls plus the scheduler work charged in its context.
    pub sys_ns: u64,
    pub wait_ns: u64,
    pub sleep_ns: u64,
    pub switches: u64,
    /// Of the switches out, those while still runnable (`ru_nivcsw`).
    pub involuntary: u64,
    pub migrations: u64,
}

impl TaskSummary {
    /// Adds `o`'s numbers into this row.
    fn add(&mut self, o: &TaskSummary) {
        self.pid = self.pid.min(o.pid);
        self.count += o.count;
        self.run_ns += o.run_ns;
        self.user_ns += o.user_ns;
        self.sys_ns += o.sys_ns;
        self.wait_ns += o.wait_ns;
        self.sleep_ns += o.sleep_ns;
        self.switches += o.switches;
        self.involuntary += o.involuntary;
        self.migrations += o.migrations;
    }
}

/// What one run produced.
pub struct RunResult {
    pub seed: u64,
    pub policy: String,
    /// The policy's tunables and switches in force (`SchedClass::settings`).
    pub settings: Vec<(String, String)>,
    pub ncpus: usize,
    /// Simulated time when the run started (its phase within a jiffy).
    pub start_ns: u64,
    /// Simulated time at the end of the run.
    pub end_ns: u64,
    /// (label, time) of every Mark.
    pub marks: Vec<(u32, u64)>,
    /// The measured window: MARK_START..MARK_END if the workload marked them, else the whole run.
    pub window_ns: (u64, u64),
    /// Per-CPU counters over the window.
    pub cpu_stats: Vec<CpuStats>,
    /// Wasted core-time over the window, ns.
    pub wasted_ns: u64,
    /// Wakeup-to-run latency over the window.
    pub latency: Histogram<u64>,
    /// The workload's own distributions (`Op::Record`), by metric, over the window.
    pub metrics: BTreeMap<u32, Histogram<u64>>,
    pub tasks: Vec<TaskSummary>,
    pub events: u64,
    pub digest: u64,
    /// Invariant violations (empty unless something is wrong).
    pub violations: Vec<String>,
    /// The run hit `max_sim_ns` before all tasks exited.
    pub timed_out: bool,
    /// If it did: the first workload tasks still alive then, each as "comm
    /// state on cpuN" (what a lost wakeup would leave asleep for good).
    pub alive_at_timeout: Vec<String>,
    /// Interrupts-disabled scheduler sections and the interrupts they delayed.
    pub irq_off: IrqOffStats,
    /// With `RunConfig::util_bucket_ns`: per CPU, busy ns in each bucket from `start_ns`.
    pub util_buckets: Vec<Vec<u64>>,
    /// The final bucket width, ns.
    pub util_bucket_ns: u64,
}

impl RunResult {
    /// Every task the workload made (the rows' `count`s).
    pub fn task_count(&self) -> u64 {
        self.tasks.iter().map(|t| t.count).sum()
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.window_ns.1 - self.window_ns.0
    }

    /// Sum of the per-CPU counters.
    pub fn total(&self) -> CpuStats {
        let mut t = CpuStats::default();
        for s in &self.cpu_stats {
            t.add(s);
        }
        t
    }

    /// Mean per-CPU busy percentage over the window.
    pub fn busy_pct(&self) -> f64 {
        let el = self.elapsed_ns().max(1) as f64;
        100.0 * self.total().busy_ns as f64 / (el * self.ncpus as f64)
    }
}

/// What applying a system call's effect led to.
enum Outcome {
    /// Done; run the next operation (or reschedule if asked).
    Continue,
    /// The task sleeps.
    Block,
    /// The task exited.
    Exited,
}

/// A simulation in progress.
/// How often (in events) a progress callback hears from a run: about 20 times a
/// second at this simulator's speed.
pub const PROGRESS_EVENTS: u64 = 1 << 19;

pub struct Engine {
    sys: System,
    policy: Box<dyn SchedClass>,
    cfg: RunConfig,
    queue: EventQueue,
    /// Per CPU: the CPU its last `cpumask_any_and_distribute()` chose
    /// (`distribute_cpu_mask_prev`, 0 at boot).
    distribute_prev: Vec<usize>,
    digest: Digest,
    exec: Vec<TaskExec>,
    cpu: Vec<CpuExec>,
    chans: Vec<Channel>,
    /// skb truesize queued in all AF_UNIX sockets: their data's cache footprint.
    unix_queued_bytes: u64,
    /// Pages held by all pipes' rings: their data's cache footprint.
    pipe_queued_bytes: u64,
    /// The profile's cold curves of AF_UNIX and pipe calls (`unix_cold_curve()`,
    /// `pipe_cold_curve()`), read at the two footprints above; with both empty
    /// the footprints are not kept (`track_footprint()`).
    unix_cold: Vec<ColdStep>,
    pipe_cold: Vec<ColdStep>,
    /// The tail of a halted CPU's idle exit that the task it wakes for pays
    /// (`idle_exit_charged_ns`, see `resched_curr()`); 0 where it does not apply.
    halted_exit_charge_ns: u64,
    /// The policy's Linux release (`SchedClass::linux_release()`), asked once:
    /// the wakeup path reads it at every remote wakeup.
    linux_release: Option<(u32, u32)>,
    /// During a wakeup: the waker's remote enqueue, which its IPI follows.
    wake_enqueue_ns: u64,
    /// The context trace records are emitted in (the tick's balancing, a timer).
    trace_context: TraceContext,
    /// Futex words and their waiters, by key (BTreeMap: no hash-order effects).
    futexes: BTreeMap<u64, (u64, WaitQueue)>,
    marks: Vec<(u32, u64)>,
    latency: Histogram<u64>,
    metrics: BTreeMap<u32, Histogram<u64>>,
    trace: Option<Box<dyn TraceSink>>,
    /// `--lag-trace`: EEVDF's entity numbers at each switch and wakeup.
    entities: Option<Box<dyn EntitySink>>,
    /// Called every `PROGRESS_EVENTS` events with (simulated ns since the start,
    /// events so far); it only observes.
    progress: Option<Box<dyn FnMut(u64, u64)>>,
    violations: Vec<String>,
    events: u64,
    /// Workload tasks not yet exited (background threads are not counted).
    alive: usize,
    /// Slots of reaped processes, for the next forks (last freed first).
    free_slots: Vec<TaskId>,
    /// Channels of closed pipes, for the next pipes (last closed first).
    free_pipes: Vec<crate::program::ChanId>,
    /// Tasks made so far: the next task's serial number (its pid and its
    /// random stream follow it, not its slot).
    tasks_made: u64,
    /// The reaped processes whose slots were taken again, one row per comm.
    reaped: BTreeMap<String, TaskSummary>,
    /// The background threads' task ids.
    background: Vec<TaskId>,
    /// When the workload's last task exited, if background threads were still
    /// awake then: the run's end as the workload sees it, with the counters then.
    workload_end: Option<(u64, Vec<CpuStats>, u64)>,
    wake_buf: Vec<TaskId>,
    window_start: Option<(u64, Vec<CpuStats>, u64)>,
    window_end: Option<(u64, Vec<CpuStats>, u64)>,
    start_ns: u64,
    /// CPUs whose tick runs, and whether the next jiffy is queued.
    tick_cpus: CpuSet,
    jiffy_queued: bool,
    jiffy_buf: Vec<usize>,
    memory: MemoryModel,
    mem_buf: Vec<(usize, u64)>,
    util_buckets: Vec<Vec<u64>>,
    util_bucket_ns: u64,
    /// Bytes of working sets brought into each core's private cache and each LLC
    /// so far (the reuse model's clocks; see `cold_refill_ns`).
    cache_in: (Vec<u64>, Vec<u64>),
    /// Each CPU's ASID slots (the profile's `[tlb]`; empty without it).
    tlb: Vec<CpuTlb>,
}

/// One CPU's TLB tagging (x86 `cpu_tlbstate`, arch/x86/mm/tlb.c v6.18): the
/// address space loaded (`loaded_mm`; a kernel thread keeps its predecessor's,
/// lazy TLB), the one owning each ASID slot (`ctxs[].ctx_id`) and the next slot
/// to hand out (`next_asid`). Address spaces are named by tgid.
#[derive(Clone, Debug)]
struct CpuTlb {
    loaded: Option<u32>,
    ctxs: Vec<Option<u32>>,
    next_asid: usize,
}

impl CpuTlb {
    /// `switch_mm_irqs_off()` to `mm`: true when the switch flushes the ASID it
    /// lands on (`choose_new_asid()` found no slot of `mm` and took the next one
    /// round robin; without slots, every switch between address spaces flushes).
    fn switch_mm(&mut self, mm: u32) -> bool {
        if self.loaded.replace(mm) == Some(mm) {
            return false;
        }
        if self.ctxs.contains(&Some(mm)) {
            return false;
        }
        if !self.ctxs.is_empty() {
            if self.next_asid >= self.ctxs.len() {
                self.next_asid = 0;
            }
            self.ctxs[self.next_asid] = Some(mm);
            self.next_asid += 1;
        }
        true
    }
}

impl Engine {
    /// A run of `main` (the workload's first task, named `comm`) under `policy`.
    pub fn new(
        topo: Topology,
        cost: MachineProfile,
        policy: Box<dyn SchedClass>,
        cfg: RunConfig,
        comm: &str,
        main: Box<dyn Program>,
    ) -> Engine {
        let ncpus = topo.ncpus();
        let tick_ns = 1_000_000_000 / cfg.hz.max(1);
        let phase = cfg.tick_phase_ns.unwrap_or_else(|| SimRng::new(cfg.seed, Stream::TickPhase).range(0, tick_ns - 1));
        let nodes = topo.node_cpus.len();
        let (ncores, nllcs) = (topo.core_cpus.len(), topo.llc_cpus.len());
        let memory = MemoryModel::new(nodes, ncpus, cost.node_mem_bw_mbps.map_or(0, |mb| mb.saturating_mul(1_000_000)));
        let tlb_slots = cost.tlb.as_ref().map(|t| t.nr_dyn_asids as usize);
        let (unix_cold, pipe_cold) = (cost.unix_cold_curve(), cost.pipe_cold_curve());
        let mut sys = System::new(topo, cost, tick_ns, cfg.seed, phase % tick_ns);
        sys.preempt = cfg.preempt;
        sys.preemption_built = cfg.preempt_dynamic || cfg.preempt.kernel_preemptible();
        // From v6.0 (f3dd3f674555, "sched: Remove the limitation of WF_ON_CPU on
        // wakelist if wakee cpu is idle") a wakeup onto an idle CPU of the waker's
        // LLC goes through the wake list, so the woken CPU's handler stamps the rq
        // clock and the task pays only the rest of the idle exit, the part
        // calibrate measures. Before, the waker enqueued and stamped the clock
        // itself and the task paid the whole wake-to-run: not modelled. FreeBSD
        // keeps no such clock. A polling CPU's tail is not measured.
        let c = &sys.cost;
        let linux_release = policy.linux_release();
        let halted_exit_charge_ns = match (c.idle_exit_charged_ns, linux_release) {
            (Some(tail), Some(release)) if release >= (6, 0) && !c.idle_polls => tail.min(c.idle_exit_ns),
            _ => 0,
        };
        let mut e = Engine {
            sys,
            policy,
            progress: None,
            queue: EventQueue::default(),
            distribute_prev: vec![0; ncpus],
            digest: Digest::default(),
            exec: Vec::new(),
            cpu: vec![CpuExec::default(); ncpus],
            chans: Vec::new(),
            unix_queued_bytes: 0,
            pipe_queued_bytes: 0,
            unix_cold,
            pipe_cold,
            halted_exit_charge_ns,
            linux_release,
            wake_enqueue_ns: 0,
            trace_context: TraceContext::Task,
            futexes: BTreeMap::new(),
            marks: Vec::new(),
            latency: latency_histogram(),
            metrics: BTreeMap::new(),
            trace: None,
            entities: None,
            violations: Vec::new(),
            events: 0,
            alive: 0,
            free_slots: Vec::new(),
            free_pipes: Vec::new(),
            tasks_made: 0,
            reaped: BTreeMap::new(),
            background: Vec::new(),
            workload_end: None,
            wake_buf: Vec::new(),
            window_start: None,
            window_end: None,
            start_ns: phase % tick_ns,
            tick_cpus: CpuSet::new(ncpus),
            jiffy_queued: false,
            jiffy_buf: Vec::new(),
            memory,
            mem_buf: Vec::new(),
            util_buckets: vec![Vec::new(); ncpus],
            util_bucket_ns: cfg.util_bucket_ns.unwrap_or(0),
            cache_in: (vec![0; ncores], vec![0; nllcs]),
            tlb: match tlb_slots {
                Some(slots) => vec![CpuTlb { loaded: None, ctxs: vec![None; slots], next_asid: 0 }; ncpus],
                None => Vec::new(),
            },
            cfg,
        };
        e.policy.init(&mut e.sys);
        let main: Box<dyn Program> = if e.cfg.autogroup { Box::new(InAutogroup { inner: main, joined: false }) } else { main };
        let p = e.new_task(None, comm.to_string(), false, main, 0);
        e.policy.task_fork(&mut e.sys, p, None);
        let launcher = e.cfg.launcher;
        e.policy.task_launched(&mut e.sys, p, &launcher);
        e.activate_new(p, 0);
        e.spawn_background();
        e
    }

    /// The machine's background threads (`MachineProfile::background`), created
    /// asleep in the root task group, each with its first wakeup due after an
    /// exponential draw of its mean interval (so each is at a random point of its
    /// cycle when the workload starts). Their random stream is their own, so the
    /// workload's draws do not depend on them.
    fn spawn_background(&mut self) {
        let ncpus = self.sys.ncpus();
        let classes = self.sys.cost.background.clone();
        let mut index = 0u64;
        for class in &classes {
            let cpus: Vec<Option<usize>> = if class.per_cpu { (0..ncpus).map(Some).collect() } else { vec![None] };
            for bound in cpus {
                let cpu = bound.unwrap_or(index as usize % ncpus);
                let comm = match bound {
                    Some(c) => format!("{}/{c}", class.comm),
                    None => class.comm.clone(),
                };
                let program =
                    Box::new(BackgroundThread { mean_interval_ns: class.mean_interval_ns, run_ns: class.run_ns, ran: false });
                let p = self.new_task(None, comm, false, program, cpu);
                self.alive -= 1;
                let t = &mut self.sys.tasks[p];
                t.nice = class.nice;
                t.weight = nice_to_weight(class.nice);
                t.allowed = bound.map(|c| {
                    let mut set = CpuSet::new(ncpus);
                    set.set(c);
                    set
                });
                let mut rng = SimRng::derive(self.cfg.seed, Stream::Background, index);
                let first_ns = rng.exponential_ns(class.mean_interval_ns);
                let e = &mut self.exec[p];
                e.rng = rng;
                e.background = true;
                // Asleep in nanosleep(): the first wakeup completes it, and the
                // program's first operation is the thread's first run.
                e.op = Some(Op::Sleep { ns: first_ns });
                e.first_attempt = false;
                e.timer_gen = 1;
                self.queue.push(self.sys.now_ns + first_ns, EventKind::Timer { task: p as u32, gen: 1 });
                self.policy.task_fork(&mut self.sys, p, None);
                self.policy.task_booted(&mut self.sys, p);
                self.background.push(p);
                index += 1;
            }
        }
    }

    /// `__schedule()` counts a switch out of a task that did not block in its
    /// `nivcsw` (getrusage()'s `ru_nivcsw`; `nvcsw` for the others).
    fn count_involuntary(&mut self, p: TaskId, how: PrevState) {
        if matches!(how, PrevState::Running | PrevState::Preempted) {
            self.sys.tasks[p].involuntary += 1;
        }
    }

    /// A background thread still runnable or running (after the workload ended,
    /// the run goes on until none is, waking none of them again).
    fn background_awake(&self) -> bool {
        self.background
            .iter()
            .any(|&p| matches!(self.sys.tasks[p].state, TaskState::Running | TaskState::Runnable | TaskState::Waking))
    }

    /// Receive EEVDF's entity numbers at every switch to a task and every
    /// wakeup (the scheduling class's `entity_numbers()`; nothing for classes
    /// without them).
    pub fn set_entity_sink(&mut self, sink: Box<dyn EntitySink>) {
        self.entities = Some(sink);
    }

    /// Sends the timeline to `sink`.
    pub fn set_trace(&mut self, sink: Box<dyn TraceSink>) {
        self.trace = Some(sink);
    }

    /// Reports progress to `f` while running (see [`PROGRESS_EVENTS`]).
    pub fn set_progress(&mut self, f: Box<dyn FnMut(u64, u64)>) {
        self.progress = Some(f);
    }

    /// Takes the sink back (after `run`).
    pub fn take_trace(&mut self) -> Option<Box<dyn TraceSink>> {
        self.trace.take()
    }

    /// Runs to completion and returns the result.
    pub fn run(mut self) -> RunResult {
        let mut timed_out = false;
        loop {
            if self.alive == 0 {
                if !self.background_awake() {
                    break;
                }
                if self.workload_end.is_none() {
                    let now = self.sys.now_ns;
                    self.workload_end = Some(self.snapshot(now));
                }
            }
            let Some((t, ev)) = self.queue.pop() else {
                let stuck: Vec<String> = (0..self.sys.tasks.len())
                    .filter(|&p| !matches!(self.sys.tasks[p].state, TaskState::Zombie | TaskState::Dead))
                    .take(8)
                    .map(|p| format!("{} {:?} on cpu{}", self.sys.tasks[p].comm, self.sys.tasks[p].state, self.sys.tasks[p].cpu))
                    .collect();
                self.violation(format!(
                    "{} live tasks but no pending event: a runnable or sleeping task was lost ({})",
                    self.alive,
                    stuck.join(", ")
                ));
                break;
            };
            if t < self.sys.now_ns {
                self.violation(format!("time went backwards: {} after {}", t, self.sys.now_ns));
            }
            if t > self.start_ns + self.cfg.max_sim_ns {
                timed_out = true;
                break;
            }
            self.sys.now_ns = t;
            let (code, a, b) = ev.code();
            self.digest.add(t);
            self.digest.add(code << 56 | a << 24 | b);
            self.events += 1;
            if self.events.is_multiple_of(PROGRESS_EVENTS) {
                if let Some(f) = self.progress.as_mut() {
                    f(t - self.start_ns, self.events);
                }
            }
            self.sys.this_cpu = match ev {
                EventKind::SegmentDone { cpu, .. } | EventKind::Resched { cpu } | EventKind::IdlePoll { cpu } => cpu as usize,
                EventKind::Timer { task, .. } => self.sys.tasks[task as usize].cpu,
                EventKind::Jiffy => self.sys.this_cpu,
            };
            match ev {
                EventKind::SegmentDone { cpu, gen } => {
                    if self.cpu[cpu as usize].seg_gen == gen && self.cpu[cpu as usize].in_segment {
                        self.segment_done(cpu as usize);
                    }
                }
                EventKind::Resched { cpu } => self.resched_arrives(cpu as usize),
                EventKind::IdlePoll { cpu } => self.idle_poll(cpu as usize),
                EventKind::Jiffy => {
                    self.trace_context = TraceContext::SoftIrq;
                    self.jiffy();
                    self.trace_context = TraceContext::Task;
                }
                EventKind::Timer { task, gen } => {
                    let p = task as usize;
                    // Once the workload has ended, background threads sleep on.
                    let ended = self.alive == 0 && self.exec[p].background;
                    if self.exec[p].timer_gen == gen && !ended {
                        self.exec[p].timer_fired = true;
                        self.trace_context = TraceContext::HardIrq;
                        self.try_to_wake_up(p, None, false);
                        self.trace_context = TraceContext::Task;
                    }
                }
            }
        }
        self.finish(timed_out)
    }

    // ---------------------------------------------------------------- tasks

    fn new_task(
        &mut self,
        parent: Option<TaskId>,
        comm: String,
        is_thread: bool,
        program: Box<dyn Program>,
        cpu: usize,
    ) -> TaskId {
        let serial = self.tasks_made;
        self.tasks_made += 1;
        let pid = FIRST_PID + serial as u32;
        let (tgid, nice) = match parent {
            Some(pp) if is_thread => (self.sys.tasks[pp].tgid, self.sys.tasks[pp].nice),
            Some(pp) => (pid, self.sys.tasks[pp].nice),
            None => (pid, 0),
        };
        let task = Task {
            pid,
            tgid,
            comm,
            nice,
            weight: nice_to_weight(nice),
            state: TaskState::Sleeping,
            cpu,
            // fork() and clone() copy the parent's cpus_allowed.
            allowed: parent.and_then(|pp| self.sys.tasks[pp].allowed.clone()),
            parent,
            group: parent.map_or(0, |pp| self.sys.tasks[pp].group),
            is_thread,
            last_queued_ns: self.sys.now_ns,
            woken_at_ns: None,
            run_ns: 0,
            kernel_ns: 0,
            sched_ns: 0,
            wait_ns: 0,
            sleep_ns: 0,
            slept_at_ns: self.sys.now_ns,
            switches: 0,
            involuntary: 0,
            migrations: 0,
        };
        let working_set_bytes = program.working_set_bytes();
        let exec = TaskExec {
            program: Some(program),
            rng: SimRng::derive(self.cfg.seed, Stream::Workload, serial),
            op: None,
            op_progress: 0,
            first_attempt: true,
            last: LastResult::default(),
            seg_remaining: None,
            stream_left: None,
            home_node: None,
            refill_ns: 0,
            cache_cpu: None,
            working_set_bytes,
            cache_marks: (0, 0),
            last_switch_in: 0,
            timer_gen: 0,
            timer_fired: false,
            timer_arm_ns: 0,
            futex_woken: false,
            zombies: VecDeque::new(),
            unreaped_children: 0,
            joiners: Vec::new(),
            in_wait: false,
            background: false,
        };
        self.alive += 1;
        let Some(id) = self.free_slots.pop() else {
            self.sys.tasks.push(task);
            self.exec.push(exec);
            return self.sys.tasks.len() - 1;
        };
        // The slot of a reaped process: its numbers join its comm's row. Its
        // timer generation goes on, so that a timer of the old occupant still
        // queued cannot fire for the new one.
        let comm = std::mem::take(&mut self.sys.tasks[id].comm);
        let old = TaskSummary { comm, ..self.numbers(id) };
        match self.reaped.get_mut(&old.comm) {
            Some(row) => row.add(&old),
            None => {
                self.reaped.insert(old.comm.clone(), old);
            }
        }
        let timer_gen = self.exec[id].timer_gen.wrapping_add(1);
        self.sys.tasks[id] = task;
        self.exec[id] = TaskExec { timer_gen, ..exec };
        id
    }

    /// Task `p`'s numbers as the result reports them.
    fn summary(&self, p: TaskId) -> TaskSummary {
        TaskSummary { comm: self.sys.tasks[p].comm.clone(), ..self.numbers(p) }
    }

    /// Task `p`'s numbers without its comm (left empty: no allocation).
    fn numbers(&self, p: TaskId) -> TaskSummary {
        let t = &self.sys.tasks[p];
        TaskSummary {
            pid: t.pid,
            comm: String::new(),
            count: 1,
            run_ns: t.run_ns,
            user_ns: t.run_ns - t.kernel_ns,
            sys_ns: t.kernel_ns + t.sched_ns,
            wait_ns: t.wait_ns,
            sleep_ns: t.sleep_ns,
            switches: t.switches,
            involuntary: t.involuntary,
            migrations: t.migrations,
        }
    }

    /// `wake_up_new_task()`: place and enqueue a new task, from `parent_cpu`.
    fn activate_new(&mut self, p: TaskId, parent_cpu: usize) {
        let flags = WakeFlags { reason: SelectReason::Fork, sync: false };
        let cpu = self.policy.select_task_rq(&mut self.sys, p, parent_cpu, parent_cpu, flags);
        // __set_task_cpu(): a new task is placed without a migration event.
        self.sys.tasks[p].cpu = cpu;
        self.sys.tasks[p].state = TaskState::Runnable;
        self.sys.tasks[p].last_queued_ns = self.sys.now_ns;
        self.sys.tasks[p].woken_at_ns = Some(self.sys.now_ns);
        self.sys.mark_waiting(p);
        self.policy.enqueue_task(&mut self.sys, cpu, p, EnqueueReason::New);
        self.emit(parent_cpu, TraceKind::WakeupNew { p, target_cpu: cpu });
        self.process_requests();
        self.check_preempt(cpu, p, parent_cpu, flags);
    }

    /// `try_to_wake_up()` of sleeping `p`, executed on `waker` (None: a timer, which
    /// fires on the task's previous CPU).
    fn try_to_wake_up(&mut self, p: TaskId, waker: Option<usize>, sync: bool) {
        if self.sys.tasks[p].state != TaskState::Sleeping {
            return;
        }
        let prev_cpu = self.sys.tasks[p].cpu;
        let waker_cpu = waker.unwrap_or(prev_cpu);
        self.sys.this_cpu = waker_cpu;
        let now = self.sys.now_ns;
        self.sys.stats[waker_cpu].ttwu_count += 1;
        self.emit(waker_cpu, TraceKind::Waking { p, target_cpu: prev_cpu });
        let t = &mut self.sys.tasks[p];
        t.sleep_ns += now - t.slept_at_ns;
        let flags = WakeFlags { reason: SelectReason::Wakeup, sync };
        let cpu = self.policy.select_task_rq(&mut self.sys, p, prev_cpu, waker_cpu, flags);
        if cpu != prev_cpu {
            self.sys.set_task_cpu(p, cpu);
        }
        if cpu == waker_cpu {
            self.sys.stats[waker_cpu].ttwu_local += 1;
        }
        self.sys.charge(waker_cpu, Charge::Sched, self.sys.cost.wakeup_ns);
        // ttwu_queue_wakelist() (kernel/sched/core.c, v6.0-v6.18): a wakeup onto
        // another CPU of the LLC with nothing on its runqueue (ttwu_queue_cond():
        // `!cpu_rq(cpu)->nr_running`, since f3dd3f674555) is queued on that CPU's
        // wake list and the IPI sent; the target enqueues it in
        // sched_ttwu_pending() once it runs again, so the task is neither queued
        // nor runnable (PELT) through the IPI's flight and the idle exit. Earlier
        // releases' wake list (other-LLC wakeups; v5.8-v5.19 also WF_ON_CPU ones)
        // and other-LLC wakeups of 6.x onto busy CPUs are not modelled: the waker
        // enqueues.
        if cpu != waker_cpu
            && self.linux_release.is_some_and(|release| release >= (6, 0))
            && matches!(self.sys.cpu_state(cpu), CpuState::Idle | CpuState::Kicked)
            && self.sys.topo.cpus[cpu].llc == self.sys.topo.cpus[waker_cpu].llc
        {
            let t = &mut self.sys.tasks[p];
            t.state = TaskState::Waking;
            t.woken_at_ns = Some(now);
            self.cpu[cpu].wake_list.push((p, flags));
            self.resched_curr(cpu, waker_cpu);
            self.timer_irq_return(waker, waker_cpu);
            return;
        }
        // ttwu_queue() (kernel/sched/core.c, v5.8+): a busy remote runqueue is
        // locked and enqueued on from here (ttwu_queue_cond() sends only wakeups of
        // idle or other-LLC CPUs through the wake list).
        self.wake_enqueue_ns = 0;
        if cpu != waker_cpu && self.sys.cpu_state(cpu) == CpuState::Busy {
            self.wake_enqueue_ns = self.sys.cost.wakeup_remote_ns;
            self.sys.charge(waker_cpu, Charge::Sched, self.wake_enqueue_ns);
        }
        self.sys.tasks[p].woken_at_ns = Some(now);
        self.ttwu_do_activate(p, cpu, waker_cpu);
        self.check_preempt(cpu, p, waker_cpu, flags);
        self.wake_enqueue_ns = 0;
        // A wakeup from another CPU that leaves the running task asked to
        // reschedule: that CPU's next __schedule() keeps the clock of this
        // enqueue (`System::rq_clock`; a skip already pending was moved to now
        // above). The same on the waker's own CPU is the `wakeup_waker_ns`
        // split below.
        if cpu != waker_cpu
            && self.sys.cpu_state(cpu) == CpuState::Busy
            && self.sys.need_resched[cpu]
            && self.linux_release.is_some()
        {
            self.sys.rq_clock_skip_ns[cpu] = Some(now);
        }
        // A wakeup onto the waker's own CPU that asks to preempt it:
        // wakeup_preempt() asks rq_clock_skip_update(), so the waker stays
        // charged up to this wakeup's rq clock update (`wakeup_waker_ns` of it,
        // and everything it did before) and the task switched in pays the rest
        // (kernel/sched/core.c v6.18; check_preempt_curr() before v6.8 asks
        // the same skip). A lazy request alone skips nothing
        // (test_tsk_need_resched() reads the full bit); it, and profiles
        // without the measurement, keep charging all of it to the next task.
        // FreeBSD has no such skip; its policies keep the previous rule too.
        if let (Some(w), Some(share)) = (waker, self.sys.cost.wakeup_waker_ns) {
            if cpu == w && self.sys.active[w] && self.sys.need_resched[w] && self.linux_release.is_some() {
                let wakeup_ns = self.sys.cost.wakeup_ns;
                let after_clock_ns = wakeup_ns - share.min(wakeup_ns);
                self.cpu[w].waker_owned_ns = Some(self.sys.pending_overhead_ns[w].saturating_sub(after_clock_ns));
            }
        }
        self.timer_irq_return(waker, waker_cpu);
    }

    /// A timer wakeup runs in the timer interrupt: a reschedule asked of its own
    /// CPU happens on the interrupt's return, if that CPU was running user code.
    fn timer_irq_return(&mut self, waker: Option<usize>, waker_cpu: usize) {
        if waker.is_none() && self.sys.cpu_state(waker_cpu) == CpuState::Busy && self.resched_pending(waker_cpu) {
            self.preempt_if_user(waker_cpu);
        }
    }

    /// `check_preempt_curr()` after an enqueue on `cpu`, or wake it if idle.
    fn check_preempt(&mut self, cpu: usize, p: TaskId, from: usize, flags: WakeFlags) {
        match self.sys.cpu_state(cpu) {
            CpuState::Idle | CpuState::Kicked => self.resched_curr(cpu, from),
            CpuState::Busy => {
                if self.policy.check_preempt_curr(&mut self.sys, cpu, p, flags) {
                    self.resched_curr_class(cpu, from);
                }
                self.process_requests();
            }
        }
    }

    /// `resched_curr()` of `cpu`, asked from `from`. An idle CPU polling in mwait is
    /// woken by the flag write alone and pays its idle-exit latency (`set_nr_if_polling`);
    /// a halted idle CPU (a machine whose idle does not poll) and a busy remote CPU
    /// get a reschedule IPI.
    fn resched_curr(&mut self, cpu: usize, from: usize) {
        let now = self.sys.now_ns;
        match self.sys.cpu_state(cpu) {
            CpuState::Kicked => {}
            // This CPU is itself in schedule() (a pull onto it): the pick sees it.
            CpuState::Idle if cpu == from && self.sys.active[cpu] => {}
            CpuState::Idle => {
                self.sys.set_cpu_state(cpu, CpuState::Kicked);
                let c = &self.cpu[cpu];
                // Still switching to its idle task: it runs the wakee once the
                // switch is done, without an idle exit.
                let still_active = c.idle_start_ns > now;
                // resched_curr() (kernel/sched/core.c, v6.18; the same since v3.16)
                // and send_call_function_single_ipi() for the wake list: only an idle
                // task inside do_idle() has TIF_POLLING_NRFLAG set (do_idle(),
                // kernel/sched/idle.c: "our polling bit is clear if we're not
                // scheduled"), so a CPU still switching to it, and a halted one, take
                // a real IPI (smp_send_reschedule()); a polling idle CPU only needs
                // the flag written.
                let noticed_at = if cpu == from || (self.sys.cost.idle_polls && !still_active) {
                    now
                } else if still_active {
                    self.sys.send_ipi(from, 0, self.sys.cost.ipi_send_ns) + self.sys.cost.ipi_latency_ns
                } else {
                    let send = self.sys.cost.ipi_send_idle_ns.unwrap_or(self.sys.cost.ipi_send_ns);
                    self.sys.send_ipi(from, 0, send) + self.sys.cost.ipi_latency_ns
                };
                // A halted CPU's wake-list handler (sched_ttwu_pending()) enqueues
                // the task and updates the rq clock before the rest of the idle
                // exit, and wakeup_preempt()'s rq_clock_skip_update() of the
                // (queued) idle task keeps that clock through __schedule(): the
                // task's exec_start is the enqueue (kernel/sched/core.c, v6.0-v6.18).
                // The CPU reschedules that much earlier and the task pays it as its
                // first work, so it starts its own work when it did before.
                let charged = if still_active { 0 } else { self.halted_exit_charge_ns };
                let c = &mut self.cpu[cpu];
                c.exit_charged_ns = charged;
                let at = if still_active {
                    c.idle_start_ns.max(noticed_at)
                } else {
                    // A halted CPU's exit deepens with its idle (`halted_exit`).
                    let exit = self.sys.cost.idle_exit_after_ns(noticed_at.saturating_sub(c.idle_start_ns));
                    noticed_at + exit - charged.min(exit)
                };
                let at = self.sys.irq.deliver(cpu, now).max(at);
                self.queue.push(at, EventKind::Resched { cpu: cpu as u32 });
            }
            CpuState::Busy => {
                // TIF_NEED_RESCHED is set at once, so the target also reschedules if it
                // returns from a system call before the IPI arrives.
                self.sys.need_resched[cpu] = true;
                if cpu != from && !self.cpu[cpu].resched_in_flight {
                    self.cpu[cpu].resched_in_flight = true;
                    // The IPI of a wakeup goes out after its remote enqueue.
                    let sent_at = self.sys.send_ipi(from, self.wake_enqueue_ns, self.sys.cost.ipi_send_ns);
                    let at = self.sys.irq.deliver(cpu, sent_at + self.sys.cost.ipi_latency_ns);
                    self.queue.push(at, EventKind::Resched { cpu: cpu as u32 });
                }
            }
        }
    }

    /// A reschedule the scheduling class asks for: `resched_curr_lazy()` if the
    /// class uses it and the model is lazy (a busy CPU only gets the lazy bit, and
    /// no IPI), `resched_curr()` otherwise.
    fn resched_curr_class(&mut self, cpu: usize, from: usize) {
        if self.sys.preempt == PreemptModel::Lazy && self.policy.lazy_resched() && self.sys.cpu_state(cpu) == CpuState::Busy {
            self.sys.need_resched_lazy[cpu] = true;
            return;
        }
        self.resched_curr(cpu, from);
    }

    /// Either reschedule bit is set: the next return to user space switches.
    fn resched_pending(&self, cpu: usize) -> bool {
        self.sys.need_resched[cpu] || self.sys.need_resched_lazy[cpu]
    }

    /// Carries out what the policy asked for during its last call.
    fn process_requests(&mut self) {
        while !self.sys.requests.is_empty() {
            // Handling a request may add more; keep the buffer's allocation for reuse.
            let mut reqs = std::mem::take(&mut self.sys.requests);
            for &r in &reqs {
                match r {
                    Request::Resched { cpu, from } => self.resched_curr_class(cpu, from),
                    // Logged in the destination CPU's context.
                    Request::Migrated { p, from, to } => self.emit(to, TraceKind::Migrate { p, orig_cpu: from, dest_cpu: to }),
                    Request::IdlePoll { cpu, at_ns } => {
                        self.queue.push(at_ns.max(self.sys.now_ns), EventKind::IdlePoll { cpu: cpu as u32 })
                    }
                }
            }
            if self.sys.requests.is_empty() {
                reqs.clear();
                self.sys.requests = reqs;
            }
        }
    }

    // ---------------------------------------------------------------- CPUs

    /// A reschedule IPI or idle wakeup reaches `cpu`.
    fn resched_arrives(&mut self, cpu: usize) {
        self.cpu[cpu].resched_in_flight = false;
        match self.sys.cpu_state(cpu) {
            CpuState::Idle | CpuState::Kicked => {
                let now = self.sys.now_ns;
                let until = self.sys.idle_busy_until_ns[cpu];
                if now < until {
                    // Still finishing scheduler work before idling, or interrupt
                    // work (a timer's wakeup): it looks again then.
                    self.queue.push(until, EventKind::Resched { cpu: cpu as u32 });
                    return;
                }
                self.sched_ttwu_pending(cpu, false);
                self.cpu[cpu].busy_since_ns = now;
                self.sys.active[cpu] = true;
                self.sys.set_working(cpu, true);
                // The idle exit's charged tail, paid by the task switched in.
                let tail = std::mem::take(&mut self.cpu[cpu].exit_charged_ns);
                self.sys.charge(cpu, Charge::Sched, tail);
                self.schedule(cpu, None);
            }
            // The IPI's return to user space reschedules only if the flag is still set
            // (the CPU may have rescheduled at a system call's end meanwhile).
            CpuState::Busy => {
                // Taking the interrupt costs the running CPU its handling time.
                self.sys.charge(cpu, Charge::Sched, self.sys.cost.ipi_receive_ns);
                // A wake list sent while this CPU was idle, which has since
                // picked a task: its handler enqueues and checks preemption.
                self.sched_ttwu_pending(cpu, true);
                if self.sys.need_resched[cpu] {
                    self.preempt_if_user(cpu);
                }
            }
        }
    }

    /// `ttwu_do_activate()`: woken `p` joins `cpu`'s runqueue, the enqueue
    /// running on `on_cpu` (the waker's, or `cpu` itself for its wake list),
    /// where its sched_wakeup is emitted.
    fn ttwu_do_activate(&mut self, p: TaskId, cpu: usize, on_cpu: usize) {
        let t = &mut self.sys.tasks[p];
        t.state = TaskState::Runnable;
        t.last_queued_ns = self.sys.now_ns;
        self.sys.mark_waiting(p);
        self.sys.rq_clock_update(cpu);
        self.policy.enqueue_task(&mut self.sys, cpu, p, EnqueueReason::Wakeup);
        self.process_requests();
        self.emit(on_cpu, TraceKind::Wakeup { p, target_cpu: cpu });
    }

    /// `sched_ttwu_pending()` on `cpu` as it handles the wake list's IPI: each
    /// queued task is enqueued here, in the order it was woken. A CPU leaving
    /// idle reschedules anyway; a busy one (`busy`) checks each for preemption.
    /// The list keeps its allocation.
    fn sched_ttwu_pending(&mut self, cpu: usize, busy: bool) {
        if self.cpu[cpu].wake_list.is_empty() {
            return;
        }
        // Handled from the CPU's own Resched event, which set this_cpu.
        debug_assert_eq!(self.sys.this_cpu, cpu);
        let mut list = std::mem::take(&mut self.cpu[cpu].wake_list);
        for &(p, flags) in &list {
            self.ttwu_do_activate(p, cpu, cpu);
            if busy {
                self.check_preempt(cpu, p, cpu, flags);
            }
        }
        list.clear();
        self.cpu[cpu].wake_list = list;
    }

    /// The idle thread of `cpu` takes the step it asked for, if the CPU is still idle
    /// and not woken meanwhile (a wakeup ends the idle thread's work).
    fn idle_poll(&mut self, cpu: usize) {
        if self.sys.cpu_state(cpu) != CpuState::Idle {
            return;
        }
        let until = self.sys.idle_busy_until_ns[cpu];
        if self.sys.now_ns < until {
            // Still finishing the scheduler or interrupt work: the step follows it.
            self.queue.push(until, EventKind::IdlePoll { cpu: cpu as u32 });
            return;
        }
        let run = self.policy.idle_poll(&mut self.sys, cpu);
        self.process_requests();
        if run && self.sys.cpu_state(cpu) == CpuState::Idle {
            // The idle thread is running: it switches without an idle exit.
            self.sys.set_cpu_state(cpu, CpuState::Kicked);
            self.queue.push(self.sys.now_ns, EventKind::Resched { cpu: cpu as u32 });
        }
    }

    /// With a reschedule bit set on busy `cpu` (an interrupt returning): preempt
    /// now if it runs user code; a system call finishes first, unless the model
    /// preempts kernel code and the full bit is set.
    fn preempt_if_user(&mut self, cpu: usize) {
        let c = &self.cpu[cpu];
        if !c.in_segment {
            return;
        }
        if c.seg_kernel && !(self.sys.preempt.kernel_preemptible() && self.sys.need_resched[cpu]) {
            return;
        }
        let now = self.sys.now_ns;
        if now < c.seg_start_ns {
            // Still paying scheduler overhead before the segment: preempt when it starts.
            let at = c.seg_start_ns;
            self.queue.push(at, EventKind::Resched { cpu: cpu as u32 });
            return;
        }
        let p = self.sys.curr(cpu).expect("busy CPU has a task");
        let left = self.seg_work_left(cpu, now);
        if let Some(stream) = self.stop_stream(cpu) {
            self.exec[p].stream_left = Some(stream);
        } else {
            // A preempted system call keeps its pending effect (`op`) for the
            // rest of its segment.
            self.exec[p].seg_remaining = Some((left, self.cpu[cpu].seg_kernel));
        }
        // Kernel code preempted by the interrupt's return is a kernel preemption
        // (`R+` in sched_switch); user code reschedules on the way back to user
        // space through schedule() (`R`).
        let how = if self.cpu[cpu].seg_kernel { PrevState::Preempted } else { PrevState::Running };
        self.account_segment(cpu, p);
        self.schedule(cpu, Some(how));
    }

    /// Speed (per mille of alone) of a segment on `cpu` with its core's hardware
    /// threads as busy as they are now.
    /// Inline test, out-of-line body: called at every step, it usually finds
    /// nothing to do (the event loop is sensitive to what the compiler inlines).
    #[inline]
    fn smt_speed_pm(&self, cpu: usize) -> u64 {
        if self.sys.cost.smt_throughput_pct.is_none() {
            return 1000;
        }
        self.smt_speed_pm_shared(cpu)
    }

    /// [`Self::smt_speed_pm`] on a machine whose threads share their core.
    fn smt_speed_pm_shared(&self, cpu: usize) -> u64 {
        let busy =
            self.sys.topo.smt_siblings(cpu).iter().filter(|&s| s == cpu || self.sys.cpu_state(s) == CpuState::Busy).count();
        self.sys.cost.smt_speed_pm(busy as u64)
    }

    /// Work (alone ns) left of `cpu`'s segment at `now`.
    fn seg_work_left(&self, cpu: usize, now: u64) -> u64 {
        let c = &self.cpu[cpu];
        if now <= c.seg_mark_ns {
            return c.seg_left_ns;
        }
        let done = ((now - c.seg_mark_ns) as u128 * c.seg_speed_pm as u128 / 1000) as u64;
        c.seg_left_ns.saturating_sub(done)
    }

    /// `cpu` started or stopped running a task: its SMT siblings' segments speed up
    /// or slow down from now on (machine profiles with `smt_throughput_pct`).
    fn smt_siblings_changed(&mut self, cpu: usize) {
        if self.sys.cost.smt_throughput_pct.is_none() {
            return;
        }
        let now = self.sys.now_ns;
        let siblings: Vec<usize> = self.sys.topo.smt_siblings(cpu).iter().filter(|&s| s != cpu).collect();
        for s in siblings {
            let c = &self.cpu[s];
            if !c.in_segment || c.stream.is_some() || self.sys.cpu_state(s) != CpuState::Busy {
                continue;
            }
            let speed = self.smt_speed_pm(s);
            if speed == c.seg_speed_pm {
                continue;
            }
            let left = self.seg_work_left(s, now);
            let c = &mut self.cpu[s];
            c.seg_mark_ns = c.seg_mark_ns.max(now);
            c.seg_left_ns = left;
            c.seg_speed_pm = speed;
            c.seg_end_ns = c.seg_mark_ns + wall_ns(left, speed);
            c.seg_gen = c.seg_gen.wrapping_add(1);
            self.queue.push(c.seg_end_ns, EventKind::SegmentDone { cpu: s as u32, gen: c.seg_gen });
        }
    }

    fn account_segment(&mut self, cpu: usize, p: TaskId) {
        let c = &mut self.cpu[cpu];
        c.in_segment = false;
        c.seg_gen = c.seg_gen.wrapping_add(1);
        let ran = self.sys.now_ns - c.seg_start_ns;
        self.sys.tasks[p].run_ns += ran;
        if c.seg_kernel {
            self.sys.tasks[p].kernel_ns += ran;
        }
        self.sys.stats[cpu].run_ns += ran;
    }

    /// A jiffy boundary: every CPU whose tick runs takes its tick, in CPU order. One
    /// queued event for all of them keeps the queue at one entry per busy CPU.
    fn jiffy(&mut self) {
        self.jiffy_queued = false;
        let mut cpus = std::mem::take(&mut self.jiffy_buf);
        cpus.clear();
        cpus.extend(self.tick_cpus.iter());
        for &cpu in &cpus {
            if self.cpu[cpu].tick_on {
                self.sys.this_cpu = cpu;
                self.digest.add(cpu as u64);
                self.events += 1;
                self.tick(cpu);
            }
        }
        self.jiffy_buf = cpus;
        if !self.tick_cpus.is_empty() {
            self.jiffy_queued = true;
            self.queue.push(self.sys.now_ns + self.sys.tick_ns, EventKind::Jiffy);
        }
    }

    fn tick(&mut self, cpu: usize) {
        let Some(curr) = self.sys.curr(cpu) else { return };
        self.sys.rq_clock_update(cpu);
        // The timer interrupt and the tick's own work (`tick_nohz_handler()` →
        // `update_process_times()`, kernel/time/tick-sched.c and timer.c, v6.18;
        // FreeBSD's `hardclock()`) delay the running task: `tick_irq_ns`.
        self.sys.charge(cpu, Charge::Sched, self.sys.cost.tick_irq_ns);
        let resched = self.policy.task_tick(&mut self.sys, cpu, curr);
        self.policy.trigger_load_balance(&mut self.sys, cpu);
        self.process_requests();
        // sched_tick(): under preempt=lazy a pending lazy bit (the tick's own
        // included) is promoted to the full one.
        if resched || self.sys.need_resched_lazy[cpu] {
            self.sys.need_resched[cpu] = true;
            self.preempt_if_user(cpu);
        }
    }

    /// Restart the tick of a CPU leaving idle (`tick_nohz_idle_exit`).
    fn start_tick(&mut self, cpu: usize) {
        self.cpu[cpu].tick_on = true;
        self.tick_cpus.set(cpu);
        if !self.jiffy_queued {
            self.jiffy_queued = true;
            let t = self.sys.tick_ns;
            let next = (self.sys.now_ns / t + 1) * t;
            self.queue.push(next, EventKind::Jiffy);
        }
    }

    /// `__schedule()` on `cpu`. `prev_state` says how the running task (if any) left:
    /// None when the CPU was idle.
    fn schedule(&mut self, cpu: usize, prev_state: Option<PrevState>) {
        let now = self.sys.now_ns;
        self.sys.stats[cpu].sched_count += 1;
        let prev = self.sys.curr(cpu);
        let prev_runnable = prev.filter(|&p| self.sys.tasks[p].state == TaskState::Running);
        let next = self.policy.pick_next_task(&mut self.sys, cpu, prev_runnable);
        // __schedule() clears the clock-update skip on either path (switch or not).
        self.sys.rq_clock_skip_ns[cpu] = None;
        self.process_requests();
        if self.cfg.check {
            if let Some(what) = self.policy.check_invariants(cpu) {
                self.violation(what);
            }
        }
        // clear_tsk_need_resched(prev) comes after the pick in __schedule(): a
        // reschedule asked while pulling work onto this CPU is satisfied by this pick.
        self.sys.need_resched[cpu] = false;
        self.sys.need_resched_lazy[cpu] = false;
        let was_idle = prev.is_none();
        match next {
            None => {
                if let Some(p) = prev_runnable {
                    if self.sys.tasks[p].cpu == cpu {
                        // The policy dropped a runnable task on the floor.
                        self.violation(format!("cpu{cpu}: pick_next_task returned idle while task {p} is runnable"));
                    } else {
                        // Pushed to another CPU during the pick (active balance's stopper
                        // had preempted it): it now waits there.
                        let t = &mut self.sys.tasks[p];
                        t.state = TaskState::Runnable;
                        t.last_queued_ns = now;
                        self.sys.mark_waiting(p);
                    }
                }
                if self.cfg.check && self.policy.nr_running(cpu) != 0 {
                    self.violation(format!("cpu{cpu} goes idle with {} runnable tasks queued", self.policy.nr_running(cpu)));
                }
                self.sys.stats[cpu].sched_goidle += 1;
                self.sys.stats[cpu].idle_entries += 1;
                if let Some(p) = prev {
                    let st = prev_state.unwrap_or(PrevState::Sleeping);
                    self.count_involuntary(p, st);
                    self.emit(cpu, TraceKind::Switch { prev: Some(p), prev_state: st, next: None });
                    self.sys.charge(cpu, Charge::Sched, self.sys.cost.context_switch_ns);
                }
                self.sys.curr[cpu] = None;
                let c = &mut self.cpu[cpu];
                c.waker_owned_ns = None;
                c.idle_start_ns = now + std::mem::take(&mut self.sys.pending_overhead_ns[cpu]);
                self.sys.idle_busy_until_ns[cpu] = c.idle_start_ns;
                self.sys.active[cpu] = false;
                c.tick_on = false;
                self.tick_cpus.clear(cpu);
                self.sys.stats[cpu].busy_ns += c.idle_start_ns - c.busy_since_ns;
                let (from, to) = (c.busy_since_ns, c.idle_start_ns);
                self.record_busy(cpu, from, to);
                self.sys.set_cpu_state(cpu, CpuState::Idle);
                self.sys.set_working(cpu, false);
                self.sys.idle_from(cpu, to);
                self.smt_siblings_changed(cpu);
            }
            Some(n) if Some(n) == prev => {
                // No switch: __schedule() still took the lock and picked.
                self.sys.charge(cpu, Charge::Sched, self.sys.cost.schedule_ns.unwrap_or(0));
                self.run_next(cpu)
            }
            Some(n) => {
                if let Some(p) = prev_runnable {
                    let t = &mut self.sys.tasks[p];
                    t.state = TaskState::Runnable;
                    t.last_queued_ns = now;
                    self.sys.mark_waiting(p);
                }
                let prev_state = if prev.is_some() { prev_state.unwrap_or(PrevState::Sleeping) } else { PrevState::Running };
                if let Some(p) = prev {
                    self.count_involuntary(p, prev_state);
                }
                self.emit(cpu, TraceKind::Switch { prev, prev_state, next: Some(n) });
                self.sys.charge(cpu, Charge::Sched, self.sys.cost.context_switch_ns);
                if was_idle {
                    self.sys.set_cpu_state(cpu, CpuState::Busy);
                    self.smt_siblings_changed(cpu);
                    self.start_tick(cpu);
                }
                self.switch_in(cpu, n);
            }
        }
    }

    /// `n` starts running on `cpu`.
    fn switch_in(&mut self, cpu: usize, n: TaskId) {
        let now = self.sys.now_ns;
        if self.sys.tasks[n].state != TaskState::Runnable {
            self.violation(format!(
                "cpu{cpu}: picked task {n} in state {:?} (already running elsewhere?)",
                self.sys.tasks[n].state
            ));
        }
        if self.sys.tasks[n].cpu != cpu {
            self.violation(format!("cpu{cpu}: picked task {n} queued on cpu{}", self.sys.tasks[n].cpu));
            self.sys.set_task_cpu(n, cpu);
            self.process_requests();
        }
        self.sys.unmark_waiting(n);
        let t = &mut self.sys.tasks[n];
        t.state = TaskState::Running;
        let waited = now - t.last_queued_ns;
        t.wait_ns += waited;
        t.switches += 1;
        let woken = t.woken_at_ns.take();
        self.sys.stats[cpu].wait_ns += waited;
        self.sys.stats[cpu].timeslices += 1;
        if let Some(w) = woken {
            if self.window_end.is_none() && !self.exec[n].background {
                let _ = self.latency.record((now - w).max(1));
            }
        }
        // A run that only re-checks a pipe wait condition touches the wait entry and
        // the pipe's index line, not the task's working set: that stays where it
        // was, and any refill owed waits for a run that does the work.
        let e = &self.exec[n];
        let only_rechecks = e.seg_remaining.is_none()
            && e.stream_left.is_none()
            && e.op.as_ref().is_some_and(|op| self.pipe_wait_recheck_fails(op).is_some());
        if !only_rechecks {
            self.move_working_set(n, cpu);
        }
        self.switch_cold(n, cpu);
        self.switch_mm(n, cpu);
        self.sys.curr[cpu] = Some(n);
        if self.exec[n].home_node.is_none() {
            self.exec[n].home_node = Some(self.sys.topo.cpus[cpu].node as usize);
        }
        self.run_next(cpu);
    }

    /// A switch-in's own cold state (`switch_cold` profiles): task `n`, back on
    /// `cpu` after others were switched in there, refills its kernel state as it
    /// runs, by the profile's curve at their count. A task arriving from another
    /// CPU pays its migration instead; a background thread's measured runs
    /// include theirs. Every switch-in counts towards the others'.
    /// Inline test, out-of-line body: called at every switch, it usually finds
    /// nothing to do (the event loop is sensitive to what the compiler inlines).
    #[inline]
    fn switch_cold(&mut self, n: TaskId, cpu: usize) {
        if !self.sys.cost.switch_cold.is_empty() {
            self.switch_cold_charged(n, cpu);
        }
    }

    /// [`Self::switch_cold`] on a profile that charges it.
    fn switch_cold_charged(&mut self, n: TaskId, cpu: usize) {
        const COUNT_BITS: u32 = 40;
        const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
        let count = self.cpu[cpu].switch_ins;
        self.cpu[cpu].switch_ins += 1;
        let e = &mut self.exec[n];
        let here = (cpu as u64 + 1) << COUNT_BITS;
        let last = std::mem::replace(&mut e.last_switch_in, here | ((count + 1) & COUNT_MASK));
        // Others switched in since, modulo 2^40 (the count wraps in the word).
        let since = count.wrapping_sub(last) & COUNT_MASK;
        if last >> COUNT_BITS == here >> COUNT_BITS && !e.background && since > 0 {
            e.refill_ns += self.sys.cost.switch_cold_ns(since);
        }
    }

    /// The address-space half of a switch to task `n` on `cpu` (with a `[tlb]`
    /// profile): a flushed ASID leaves `n` its TLB entries to refill as it runs.
    /// Background threads are taken as kernel threads, which borrow the loaded
    /// address space (`enter_lazy_tlb()`).
    fn switch_mm(&mut self, n: TaskId, cpu: usize) {
        if self.tlb.is_empty() || self.exec[n].background {
            return;
        }
        let mm = self.sys.tasks[n].tgid;
        if self.tlb[cpu].switch_mm(mm) {
            let refill = self.sys.cost.tlb.as_ref().map_or(0, |t| t.flush_refill_ns);
            self.exec[n].refill_ns += refill;
        }
    }

    /// Task `n` runs on `cpu`: the refill it owes for bringing its working set
    /// there (the profile's migration cost scaled to its size, or the reuse
    /// model's cold refill on the same core).
    fn move_working_set(&mut self, n: TaskId, cpu: usize) {
        let cold = self.cold_refill_ns(n, cpu);
        let e = &mut self.exec[n];
        if let Some(from) = e.cache_cpu.replace(cpu) {
            let m = &self.sys.cost.migration;
            // The profile's costs are for DEFAULT_WORKING_SET_BYTES; a move refills
            // what this task touches.
            let scaled = |ns: u64| (ns as u128 * e.working_set_bytes as u128 / DEFAULT_WORKING_SET_BYTES as u128) as u64;
            e.refill_ns += match self.sys.distance(from, cpu) {
                Distance::SameCpu => cold,
                Distance::Smt => scaled(m.smt_ns).max(cold),
                Distance::Llc => scaled(m.llc_ns),
                Distance::CrossLlc => scaled(m.cross_llc_ns),
                Distance::CrossNode => scaled(m.cross_node_ns),
            };
        }
    }

    /// Starts the next segment of `cpu`'s current task.
    fn run_next(&mut self, cpu: usize) {
        let p = self.sys.curr(cpu).expect("run_next on a busy CPU");
        if let Some((left, ask)) = self.exec[p].stream_left.take() {
            self.start_stream(cpu, p, left, ask);
            return;
        }
        if let Some((left, kernel)) = self.exec[p].seg_remaining.take() {
            self.start_segment(cpu, p, left, kernel);
            return;
        }
        if let Some(op) = &self.exec[p].op {
            // Retry of a system call that blocked. Back from a wait on a pipe or
            // AF_UNIX socket, the waiter first pays the waiting side's own cost
            // (`wait_ns`, `unix_wait_ns`: finish_wait and the re-entry, with the
            // prepare_to_wait and schedule() before it). A pipe waiter woken into
            // a pipe that still cannot serve it only re-checks the condition
            // inside `wait_event_interruptible_exclusive()` (the ring indexes'
            // line, which holds the wait queues' locks too) and waits again,
            // without the mutex; otherwise the body runs again under the mutex,
            // taken after the wait's own work.
            let wait = match *op {
                Op::Read { chan, .. } | Op::Write { chan, .. } | Op::Poll { chan } => match self.chans.get(chan) {
                    Some(Channel::Pipe(_)) => self.sys.cost.wait_ns,
                    Some(Channel::Unix(_)) => self.sys.cost.unix_wait_ns,
                    // Not measured for TCP.
                    _ => 0,
                },
                _ => 0,
            };
            if let Some(chan) = self.pipe_wait_recheck_fails(op) {
                // A refill owed (see switch_in) waits for a run that does the work.
                let cost = self.pipe_line_ns(cpu, chan) + wait;
                let owed = std::mem::take(&mut self.exec[p].refill_ns);
                self.start_segment(cpu, p, cost, true);
                self.exec[p].refill_ns = owed;
                return;
            }
            let cost = match RwCall::of(op) {
                Some(rw) => self.rw_attempt_ns(cpu, p, rw, wait, true),
                None => wait + self.op_body_ns(op),
            };
            self.start_segment(cpu, p, cost, true);
            return;
        }
        let mut guard = 0u32;
        loop {
            let e = &mut self.exec[p];
            let last = std::mem::take(&mut e.last).get();
            let op = e.program.as_mut().expect("live task has a program").next(last, &mut e.rng);
            // Matched by reference: the op a program just returned is not moved
            // (a copy of a freshly written enum stalls on store forwarding) until
            // a system call stores it, after its costs are worked out.
            match &op {
                &Op::Mark { label } => self.mark(cpu, label),
                Op::Clock => {
                    let now = self.sys.now_ns + self.sys.pending_overhead_ns[cpu];
                    self.exec[p].last = LastResult::of(OpResult::Time(now));
                }
                Op::GetCpu => self.exec[p].last = LastResult::of(OpResult::Count(cpu as u32)),
                &Op::Record { metric, value } => {
                    if self.window_start.is_some() && self.window_end.is_none() {
                        let h = self.metrics.entry(metric).or_insert_with(latency_histogram);
                        let _ = h.record(value.max(1));
                    }
                }
                &Op::Store { key, value } => {
                    self.futexes.entry(key).or_insert_with(|| (0, WaitQueue::default())).0 = value;
                }
                &Op::Compute { ns } => {
                    self.start_segment(cpu, p, ns, false);
                    return;
                }
                &Op::Cycles { n } => {
                    let ns = self.sys.cost.cycles_ns(n);
                    self.start_segment(cpu, p, ns, false);
                    return;
                }
                &Op::Stream { ns, bytes, at } => {
                    let demand_bps = (bytes as u128 * 1_000_000_000 / ns.max(1) as u128).min(u64::MAX as u128) as u64;
                    self.start_stream(cpu, p, ns, StreamAsk { demand_bps, at });
                    return;
                }
                _ => {
                    if let Op::Exec { ns } = op {
                        if self.sched_exec_moves(cpu, p) {
                            // The stopper preempted the task, which runs its exec on
                            // the CPU it was pushed to (the retry path above, no
                            // second entry).
                            let e = &mut self.exec[p];
                            e.op = Some(Op::Exec { ns });
                            e.first_attempt = false;
                            e.op_progress = 0;
                            self.schedule(cpu, Some(PrevState::Running));
                            return;
                        }
                    }
                    let entry = self.sys.cost.syscall_ns;
                    let cost = match RwCall::of(&op) {
                        Some(rw) => self.rw_attempt_ns(cpu, p, rw, entry, false),
                        None => {
                            let arm = self.timer_arm_ns(cpu, &op, entry);
                            self.exec[p].timer_arm_ns = arm;
                            entry + self.op_body_ns(&op) + u64::from(arm)
                        }
                    };
                    let e = &mut self.exec[p];
                    e.op = Some(op);
                    e.first_attempt = true;
                    e.op_progress = 0;
                    self.start_segment(cpu, p, cost, true);
                    return;
                }
            }
            guard += 1;
            if guard > 1_000_000 {
                self.violation(format!("task {p} issued a million operations without consuming time"));
                self.exec[p].op = Some(Op::Exit);
                self.start_segment(cpu, p, 0, true);
                return;
            }
        }
    }

    /// `sched_exec()` (kernel/sched/core.c, v3.0-v6.18) at the start of `p`'s
    /// execve() on `cpu`: asks the policy where the task should run, and if that
    /// is another CPU, has the stopper (`stop_one_cpu(migration_cpu_stop)`)
    /// preempt it there and push it over. The stopper's run costs this CPU one
    /// more context switch than the switch away from `p` the caller's
    /// schedule() charges. True if `p` is being moved.
    fn sched_exec_moves(&mut self, cpu: usize, p: TaskId) -> bool {
        let dest = self.policy.select_exec_cpu(&mut self.sys, p, cpu);
        self.process_requests();
        if dest == cpu || !self.sys.tasks[p].can_run_on(dest) {
            return false;
        }
        self.policy.push_running_task(&mut self.sys, cpu, p, dest);
        self.sys.charge(cpu, Charge::Sched, self.sys.cost.context_switch_ns);
        self.sys.stats[cpu].exec_pushes += 1;
        true
    }

    /// `sched_setaffinity()` of running task `p` on `cpu`, at the end of the
    /// call's segment: the new mask; and when `cpu` is not in it,
    /// `affine_move_task()` (kernel/sched/core.c, v5.15 to v6.18) has the
    /// stopper preempt `p` and push it to `cpumask_any_and_distribute()`'s CPU,
    /// picked at every change of mask (`__set_cpus_allowed_ptr_locked()`): the
    /// first allowed CPU after the one this CPU's last pick chose
    /// (`distribute_cpu_mask_prev`), wrapping. The call returns on that CPU. The
    /// stopper's run costs `cpu` one more context switch, as at exec.
    fn set_affinity(&mut self, cpu: usize, p: TaskId, cpus: CpuSet) {
        let ncpus = self.sys.ncpus();
        // The mask as far as this machine goes (the kernel's cpu_valid_mask).
        let mut mask = CpuSet::new(ncpus);
        cpus.iter().filter(|&c| c < ncpus).for_each(|c| mask.set(c));
        let allowed = mask.count();
        if allowed == 0 {
            // The kernel refuses an empty or offline mask (EINVAL): nothing changes.
            self.violation(format!("task {p} asked for an affinity mask with no CPU of this machine"));
            return;
        }
        // Picked on every change of mask, used only if the task must move.
        let dest = mask.next_wrap(self.distribute_prev[cpu] + 1).expect("a CPU is allowed");
        let allowed = (allowed < ncpus).then_some(mask);
        if allowed == self.sys.tasks[p].allowed {
            // The same mask: __set_cpus_allowed_ptr_locked() returns at once.
            return;
        }
        self.distribute_prev[cpu] = dest;
        self.sys.tasks[p].allowed = allowed;
        if self.sys.tasks[p].can_run_on(cpu) {
            return;
        }
        if !self.policy.pushes_running_tasks() {
            self.violation(format!("sched_setaffinity() moving running task {p} is not modelled by this policy"));
            return;
        }
        self.policy.push_running_task(&mut self.sys, cpu, p, dest);
        self.process_requests();
        self.sys.charge(cpu, Charge::Sched, self.sys.cost.context_switch_ns);
        self.sys.need_resched[cpu] = true;
    }

    fn start_segment(&mut self, cpu: usize, p: TaskId, len_ns: u64, kernel: bool) {
        let now = self.sys.now_ns;
        self.cpu[cpu].waker_owned_ns = None;
        let overhead = std::mem::take(&mut self.sys.pending_overhead_ns[cpu]);
        self.sys.tasks[p].sched_ns += overhead;
        let refill = std::mem::take(&mut self.exec[p].refill_ns);
        let speed = self.smt_speed_pm(cpu);
        let c = &mut self.cpu[cpu];
        c.seg_start_ns = now + overhead;
        c.seg_mark_ns = c.seg_start_ns;
        c.seg_left_ns = len_ns + refill;
        c.seg_speed_pm = speed;
        c.seg_end_ns = c.seg_start_ns + wall_ns(len_ns + refill, speed);
        c.seg_kernel = kernel;
        c.in_segment = true;
        c.seg_gen = c.seg_gen.wrapping_add(1);
        let ev = EventKind::SegmentDone { cpu: cpu as u32, gen: c.seg_gen };
        self.queue.push(c.seg_end_ns, ev);
    }

    /// Starts (or resumes) a stream of `alone_ns` of local-memory work on `cpu`.
    /// The scheduler overhead and cache refill owed count as more of its work.
    fn start_stream(&mut self, cpu: usize, p: TaskId, alone_ns: u64, ask: StreamAsk) {
        let now = self.sys.now_ns;
        self.cpu[cpu].waker_owned_ns = None;
        let overhead = std::mem::take(&mut self.sys.pending_overhead_ns[cpu]);
        self.sys.tasks[p].sched_ns += overhead;
        let refill = std::mem::take(&mut self.exec[p].refill_ns);
        let cpu_node = self.sys.topo.cpus[cpu].node as usize;
        let node = match ask.at {
            MemAt::Local => cpu_node,
            MemAt::Home => self.exec[p].home_node.unwrap_or(cpu_node),
        };
        let d = &self.sys.topo.distance;
        let (remote_num, remote_den) = (u64::from(d[cpu_node][node]).max(1), u64::from(d[cpu_node][cpu_node]).max(1));
        let alone = (alone_ns as u128 * remote_num as u128 / remote_den as u128) as u64 + overhead + refill;
        let c = &mut self.cpu[cpu];
        c.seg_start_ns = now + overhead;
        c.seg_kernel = false;
        c.in_segment = true;
        c.stream = Some(RunningStream { ask, remote_num, remote_den });
        let mut buf = std::mem::take(&mut self.mem_buf);
        self.memory.start(cpu, node, alone, ask.demand_bps, now, &mut buf);
        self.retime_streams(&mut buf);
        self.mem_buf = buf;
    }

    /// Re-queues the end of every stream whose finish time moved.
    fn retime_streams(&mut self, ends: &mut Vec<(usize, u64)>) {
        for (cpu, end) in ends.drain(..) {
            let c = &mut self.cpu[cpu];
            c.seg_end_ns = end;
            c.seg_gen = c.seg_gen.wrapping_add(1);
            self.queue.push(end, EventKind::SegmentDone { cpu: cpu as u32, gen: c.seg_gen });
        }
    }

    /// Ends `cpu`'s stream, re-timing the others on its node. Returns what is left
    /// of it in local-memory alone time, and what it asked.
    /// Inline test, out-of-line body: called at every step, it usually finds
    /// nothing to do (the event loop is sensitive to what the compiler inlines).
    #[inline]
    fn stop_stream(&mut self, cpu: usize) -> Option<(u64, StreamAsk)> {
        if self.cpu[cpu].stream.is_some() {
            self.stop_running_stream(cpu)
        } else {
            None
        }
    }

    /// [`Self::stop_stream`] of a CPU running a stream.
    fn stop_running_stream(&mut self, cpu: usize) -> Option<(u64, StreamAsk)> {
        let st = self.cpu[cpu].stream.take()?;
        let mut buf = std::mem::take(&mut self.mem_buf);
        let left = self.memory.stop(cpu, self.sys.now_ns, &mut buf);
        self.retime_streams(&mut buf);
        self.mem_buf = buf;
        Some(((left as u128 * st.remote_den as u128 / st.remote_num as u128) as u64, st.ask))
    }

    fn segment_done(&mut self, cpu: usize) {
        let p = self.sys.curr(cpu).expect("segment on a busy CPU");
        self.stop_stream(cpu);
        self.account_segment(cpu, p);
        let outcome = if self.exec[p].op.is_some() { self.apply_op(cpu, p) } else { Outcome::Continue };
        match outcome {
            Outcome::Continue => {
                if self.resched_pending(cpu) {
                    // When a wakeup preempts its waker, wakeup_preempt() asks for
                    // rq_clock_skip_update() and __schedule() skips its clock
                    // update: the waker is charged up to the wakeup's rq clock
                    // update, the task switched in from there (kernel/sched/core.c,
                    // v6.18). The waker's part runs first, as its own kernel work
                    // (`waker_owned_ns`, set by the wakeup); what is left of the
                    // call's pending work is charged to the next task.
                    if let Some(owned) = self.cpu[cpu].waker_owned_ns.take().filter(|&o| o > 0) {
                        // An empty kernel segment that pays `owned` as its
                        // scheduler overhead, then switches (back here, with no
                        // op and nothing owned).
                        let rest = self.sys.pending_overhead_ns[cpu] - owned;
                        self.sys.pending_overhead_ns[cpu] = owned;
                        self.start_segment(cpu, p, 0, true);
                        self.sys.pending_overhead_ns[cpu] = rest;
                        return;
                    }
                    // At the end of a segment: a system call returning to user
                    // space, or user code reaching a point the model checks, both
                    // reschedule through schedule() (`R`).
                    self.schedule(cpu, Some(PrevState::Running));
                } else {
                    self.run_next(cpu);
                }
            }
            Outcome::Block => {
                let t = &mut self.sys.tasks[p];
                t.state = TaskState::Sleeping;
                t.slept_at_ns = self.sys.now_ns;
                self.exec[p].first_attempt = false;
                self.policy.dequeue_task(&mut self.sys, cpu, p, DequeueReason::Sleep);
                self.process_requests();
                self.schedule(cpu, Some(PrevState::Sleeping));
            }
            Outcome::Exited => {
                let st = if self.sys.tasks[p].state == TaskState::Zombie { PrevState::Zombie } else { PrevState::Dead };
                self.schedule(cpu, Some(st));
            }
        }
    }

    // ---------------------------------------------------------------- system calls

    /// What a system call's arming of a timer costs: a nanosleep() whose timer
    /// expires before the CPU's next event, the tick, is the new first hrtimer
    /// and reprograms the timer device (`hrtimer_start_range_ns()` →
    /// `hrtimer_reprogram()` → `clockevents_program_event()`, kernel/time/,
    /// v6.18): `timer_program_ns`. One that expires after the next tick leaves
    /// the device alone. (Other tasks' timers pending on the CPU, which could
    /// also come first, are not looked at.) `entry_ns` is the call's entry,
    /// before the timer is armed.
    fn timer_arm_ns(&self, cpu: usize, op: &Op, entry_ns: u64) -> u32 {
        let program_ns = self.sys.cost.timer_program_ns;
        let Op::Sleep { ns } = *op else { return 0 };
        if program_ns == 0 {
            return 0;
        }
        let armed_at = self.sys.now_ns + self.sys.pending_overhead_ns[cpu] + entry_ns;
        let tick = self.sys.tick_ns;
        let next_tick = (armed_at / tick + 1) * tick;
        if armed_at.saturating_add(ns) < next_tick {
            u32::try_from(program_ns).unwrap_or(u32::MAX)
        } else {
            0
        }
    }

    /// The kernel time of a system call's body other than a read or write (those
    /// are `rw_attempt_ns()`'s), without the system-call entry. A retry after
    /// blocking runs the body again.
    fn op_body_ns(&self, op: &Op) -> u64 {
        let c = &self.sys.cost;
        match *op {
            Op::Fork { kind: ForkKind::Process, .. } => c.fork_ns,
            Op::Fork { kind: ForkKind::Thread, .. } => c.clone_ns,
            Op::Exit => c.exit_ns,
            Op::Kernel { ns } | Op::Exec { ns } => ns,
            _ => 0,
        }
    }

    /// The CPU time of one attempt at read or write `rw` by `p` on `cpu`, a retry
    /// after a wait if `retry`: `entry_ns` first (the system-call
    /// entry, or on a retry the woken waiter's own cost), then the body (the
    /// channel's own work and the copy; a pipe's pages), then what sharing the
    /// channel adds. A pipe's sharing reserves its mutex until the call's end
    /// (`pipe_mutex_taken_ns()`) before its cold footprint is added; a socket's
    /// records this end's CPU (`unix_extra_ns()`).
    fn rw_attempt_ns(&mut self, cpu: usize, p: TaskId, rw: RwCall, entry_ns: u64, retry: bool) -> u64 {
        let RwCall { chan, bytes, write } = rw;
        let c = &self.sys.cost;
        let copy_ns = c.copy_ns(bytes);
        match self.chans.get(chan) {
            Some(Channel::Pipe(pipe)) => {
                // On kernels whose pipes stamp the inode's times
                // (`stamps_pipe_times()`), a call that can move data as the
                // pipe stands when it starts also pays a write's
                // `file_update_time()` or a read's `file_accessed()`
                // (`pipe_write()` L607 / `pipe_read()` L407 of v6.12's
                // fs/pipe.c); one that waits first stamps on its retry.
                let fixed = match write {
                    true if pipe.stamps_times && !pipe.full() => c.pipe_op_ns + c.pipe_mtime_ns,
                    false if pipe.stamps_times && pipe.readable() => c.pipe_op_ns + c.pipe_atime_ns,
                    _ => c.pipe_op_ns,
                };
                // `anon_pipe_write()` (fs/pipe.c, v6.18) into an empty pipe
                // starts a slot and tests for sleeping readers (`was_empty`);
                // `anon_pipe_read()` taking the last bytes releases the last
                // slot. Both as the pipe stands when the call starts; the
                // emptiness test only where the profile prices it.
                let fixed = fixed
                    + match write {
                        true if c.pipe_was_empty_ns > 0 && !pipe.readable() => c.pipe_was_empty_ns,
                        false if c.pipe_emptied_ns > 0 && pipe.read_empties(bytes) => c.pipe_emptied_ns,
                        _ => 0,
                    };
                let body = fixed + copy_ns + self.pipe_page_ns(pipe, p, rw, retry);
                entry_ns + body + self.pipe_mutex_taken_ns(cpu, p, rw, entry_ns, body) + self.pipe_cold_ns(cpu, rw)
            }
            Some(Channel::Unix(_)) => {
                let fixed = if write { c.unix_send_ns } else { c.unix_recv_ns };
                entry_ns + fixed + copy_ns + self.unix_extra_ns(cpu, chan, write)
            }
            Some(Channel::Tcp(_)) => entry_ns + if write { c.tcp_send_ns } else { c.tcp_recv_ns } + copy_ns,
            None => entry_ns + copy_ns,
        }
    }

    /// What a pipe read or write pays for the pages of the slots it takes or
    /// releases (`anon_pipe_get_page()` / `anon_pipe_put_page()`): allocations
    /// beyond the pipe's spare pages, frees beyond their room, as the pipe stands
    /// when the call starts. Linux pipes only.
    /// Inline test, out-of-line body: called at every step, it usually finds
    /// nothing to do (the event loop is sensitive to what the compiler inlines).
    #[inline]
    fn pipe_page_ns(&self, pipe: &Pipe, p: TaskId, rw: RwCall, retry: bool) -> u64 {
        let c = &self.sys.cost;
        if (c.pipe_page_alloc_ns == 0 && c.pipe_page_free_ns == 0) || pipe.tmp_page_slots == 0 {
            return 0;
        }
        self.pipe_page_charged_ns(pipe, p, rw, retry)
    }

    /// [`Self::pipe_page_ns`] on a machine that charges pipe pages.
    fn pipe_page_charged_ns(&self, pipe: &Pipe, p: TaskId, rw: RwCall, retry: bool) -> u64 {
        let c = &self.sys.cost;
        if rw.write {
            let left = rw.bytes - self.exec[p].op_progress;
            pipe.write_page_allocs(left, retry) * c.pipe_page_alloc_ns
        } else {
            pipe.read_page_frees(rw.bytes) * c.pipe_page_free_ns
        }
    }

    /// What a pipe read or write pays beyond its cache-hot cost for sharing the
    /// pipe: `pipe_read()`/`pipe_write()` (fs/pipe.c, v5.15) run under
    /// `__pipe_lock()`, so concurrent callers on other CPUs wait for the mutex,
    /// spinning while its owner runs (`mutex_optimistic_spin()`; a holder is never
    /// preempted inside, the kernel being non-preemptible there) and then queue
    /// in arrival order; and the pipe's lines come from the cache of the CPU that
    /// used it last. `entry_ns` is the system-call entry before the lock is taken
    /// (or a woken waiter's own cost), `body_ns` the locked part (the pipe work and
    /// the copy). Returns the spin plus the line transfers, and reserves the mutex
    /// until this call's end. A spinner that is asked to reschedule sleeps on the
    /// mutex instead; that is not modelled (it spins on).
    fn pipe_mutex_taken_ns(&mut self, cpu: usize, p: TaskId, rw: RwCall, entry_ns: u64, body_ns: u64) -> u64 {
        let chan = rw.chan;
        let Some(Channel::Pipe(pipe)) = self.chans.get(chan) else { return 0 };
        let arrive = self.sys.now_ns + self.sys.pending_overhead_ns[cpu] + self.exec[p].refill_ns + entry_ns;
        let transfer = PIPE_STRUCT_LINES * self.line_ns(pipe.last_cpu, cpu) + self.pipe_data_lines_ns(cpu, pipe, rw);
        let start = arrive.max(pipe.mutex_free_ns);
        let spin = start - arrive;
        let Some(Channel::Pipe(pipe)) = self.chans.get_mut(chan) else { return 0 };
        pipe.mutex_free_ns = start + transfer + body_ns;
        pipe.last_cpu = Some(cpu);
        spin + transfer
    }

    /// What an AF_UNIX send or receive on `chan` pays beyond its one-CPU
    /// cache-hot cost: when the other end last used the socket on another core
    /// (its lines and its skbs are in that core's cache), and when the data queued
    /// in all AF_UNIX sockets has pushed them out of the caches. Records this
    /// end's CPU.
    fn unix_extra_ns(&mut self, cpu: usize, chan: crate::program::ChanId, write: bool) -> u64 {
        let Some(Channel::Unix(u)) = self.chans.get(chan) else { return 0 };
        let c = &self.sys.cost;
        let (peer, extra) =
            if write { (u.last_recv_cpu, c.unix_send_remote_ns) } else { (u.last_send_cpu, c.unix_recv_remote_ns) };
        // line_ns is 0 on the same core, one line within the LLC, a remote one across.
        let remote = match self.line_ns(peer, cpu) {
            0 => 0,
            l if l == c.cache_line_ns || c.cache_line_ns == 0 => extra,
            l => extra * l / c.cache_line_ns,
        };
        let cold = cold_extra_ns(&self.unix_cold, self.unix_queued_bytes, write);
        let Some(Channel::Unix(u)) = self.chans.get_mut(chan) else { return 0 };
        if write {
            u.last_send_cpu = Some(cpu);
        } else {
            u.last_recv_cpu = Some(cpu);
        }
        remote + cold
    }

    /// The profile charges cold AF_UNIX or pipe calls, which read the queued
    /// footprints; without it they are not kept.
    #[inline]
    fn track_footprint(&self) -> bool {
        !self.unix_cold.is_empty() || !self.pipe_cold.is_empty()
    }

    /// The bytes `ch` holds towards the cache footprint of queued data: (AF_UNIX
    /// skb truesize, pipe pages). TCP's are not counted.
    fn queued_footprint(ch: &Channel) -> (u64, u64) {
        match ch {
            Channel::Unix(u) => (u.wmem_alloc, 0),
            Channel::Pipe(pipe) => (0, pipe.slots_used() as u64 * crate::ipc::PAGE_SIZE),
            Channel::Tcp(_) => (0, 0),
        }
    }

    /// `chan`'s footprint before a read or write, when the footprints are kept.
    #[inline]
    fn footprint_of(&self, chan: crate::program::ChanId) -> Option<(u64, u64)> {
        if self.track_footprint() {
            self.chans.get(chan).map(Self::queued_footprint)
        } else {
            None
        }
    }

    /// Moves the machine-wide footprints by what a read or write on `chan` changed.
    fn account_footprint(&mut self, chan: crate::program::ChanId, before: Option<(u64, u64)>) {
        let (Some((u0, p0)), Some(ch)) = (before, self.chans.get(chan)) else { return };
        let (u1, p1) = Self::queued_footprint(ch);
        self.unix_queued_bytes = self.unix_queued_bytes + u1 - u0;
        self.pipe_queued_bytes = self.pipe_queued_bytes + p1 - p0;
    }

    /// What a pipe read or write pays beyond its cache-hot cost when the pages
    /// queued in all pipes have pushed the pipes out of the caches.
    ///
    /// calibrate measures the curve with each call on another pipe than the
    /// call before; a call on the pipe this CPU's last call used finds its
    /// `pipe_inode_info` and the page it reads or writes in the cache (a reader
    /// draining its pipe takes 40 hackbench messages from one page), and pays
    /// none of it. A socket's calls get no such pass: each receive takes
    /// another skb, allocated by its sender long before (validate-host.txt,
    /// step 34: a pipe drained in a row reads at the cache-hot cost, sockets
    /// drained in a row as dear as taken round-robin).
    fn pipe_cold_ns(&mut self, cpu: usize, rw: RwCall) -> u64 {
        if self.pipe_cold.is_empty() {
            return 0;
        }
        if self.cpu[cpu].last_chan.replace(rw.chan) == Some(rw.chan) {
            return 0;
        }
        cold_extra_ns(&self.pipe_cold, self.pipe_queued_bytes, rw.write)
    }

    /// The reuse model: what task `p`, switched in on `cpu`, pays to refill the part
    /// of its working set (its program's `working_set_bytes()`) that the working
    /// sets brought into this core's private cache and this LLC since it last ran
    /// here have pushed out (a fraction min(1, brought in / capacity) of each, as
    /// in an LRU cache fed uniformly). Books the bytes it brings back into both
    /// clocks. 0 without a `cache` section in the profile.
    fn cold_refill_ns(&mut self, p: TaskId, cpu: usize) -> u64 {
        let Some(c) = &self.sys.cost.cache else { return 0 };
        let info = &self.sys.topo.cpus[cpu];
        let (core, llc) = (info.core as usize, info.llc as usize);
        let e = &mut self.exec[p];
        let ws = e.working_set_bytes;
        let same_core = e.cache_cpu.is_some_and(|c| self.sys.topo.cpus[c].core as usize == core);
        let (in_l2, in_llc) = (&mut self.cache_in.0[core], &mut self.cache_in.1[llc]);
        let cost = if same_core {
            let l2_gone_pm = (*in_l2 - e.cache_marks.0).min(c.l2_bytes) as u128 * 1000 / c.l2_bytes as u128;
            let llc_gone_pm = ((*in_llc - e.cache_marks.1).min(c.llc_bytes) as u128 * 1000 / c.llc_bytes as u128).min(l2_gone_pm);
            let lines = (ws / CACHE_LINE_BYTES) as u128;
            let ps = lines * ((l2_gone_pm - llc_gone_pm) * c.llc_line_ps as u128 + llc_gone_pm * c.dram_line_ps as u128) / 1000;
            *in_l2 += (ws as u128 * l2_gone_pm / 1000) as u64;
            *in_llc += (ws as u128 * llc_gone_pm / 1000) as u64;
            (ps / 1000) as u64
        } else {
            // Arriving from elsewhere (the migration cost pays for it): its whole
            // working set comes into this core and this LLC.
            *in_l2 += ws;
            *in_llc += ws;
            0
        };
        e.cache_marks = (*in_l2, *in_llc);
        cost
    }

    /// The data lines a pipe read or write takes from other cores. A read takes
    /// the lines of the bytes it will consume, each run from the cache of the CPU
    /// that wrote it (messages from many writers come from many caches; lines
    /// counted as bytes / 64, in thousandths). A write merges into the line the
    /// newest unread byte's writer left, or, with nothing unread, into the page
    /// the last user of the pipe released (`pipe->tmp_page` is reused).
    fn pipe_data_lines_ns(&self, cpu: usize, pipe: &Pipe, rw: RwCall) -> u64 {
        match rw {
            RwCall { write: false, bytes, .. } => {
                let per_mille: u64 = pipe
                    .unread_writers(bytes)
                    .map(|(n, writer)| n * 1000 * self.line_ns(Some(writer), cpu) / CACHE_LINE_BYTES)
                    .sum();
                per_mille / 1000
            }
            RwCall { write: true, .. } => self.line_ns(pipe.last_writer().or(pipe.last_cpu), cpu),
        }
    }

    /// What one cache line last written on `from` costs `cpu` to fetch: nothing
    /// from its own core (or with no previous user), `t_cl` within an LLC, the
    /// remote `t_cl` across.
    fn line_ns(&self, from: Option<usize>, cpu: usize) -> u64 {
        match from {
            Some(last) if last != cpu => {
                let (a, b) = (&self.sys.topo.cpus[last], &self.sys.topo.cpus[cpu]);
                if a.core == b.core {
                    0
                } else if a.llc == b.llc {
                    self.sys.cost.cache_line_ns
                } else {
                    self.sys.cost.cache_line_remote_ns
                }
            }
            _ => 0,
        }
    }

    /// What one of a pipe's bookkeeping lines costs `cpu` to fetch: nothing when this
    /// core used the pipe last, `t_cl` within an LLC, the remote `t_cl` across.
    fn pipe_line_ns(&self, cpu: usize, chan: crate::program::ChanId) -> u64 {
        let Some(Channel::Pipe(pipe)) = self.chans.get(chan) else { return 0 };
        self.line_ns(pipe.last_cpu, cpu)
    }

    /// The pipe of a blocked read or write whose wait condition is still false:
    /// `pipe_readable()` (a slot holds data) for a reader, `pipe_writable()` (a
    /// free slot, whatever room the last page has) for a writer (fs/pipe.c, v5.15).
    fn pipe_wait_recheck_fails(&self, op: &Op) -> Option<crate::program::ChanId> {
        let chan = RwCall::of(op)?.chan;
        let Some(Channel::Pipe(pipe)) = self.chans.get(chan) else { return None };
        let blocked = if matches!(op, Op::Write { .. }) { pipe.full() } else { !pipe.readable() };
        blocked.then_some(chan)
    }

    /// Applies the effect of the system call `p` just paid for.
    fn apply_op(&mut self, cpu: usize, p: TaskId) -> Outcome {
        let op = self.exec[p].op.take().expect("apply_op with an op");
        let first = self.exec[p].first_attempt;
        let mut result = OpResult::None;
        let mut keep = None;
        let outcome = match op {
            Op::Pipe | Op::PipePacket => {
                let release = self.linux_release;
                let mut pipe = Pipe::default();
                pipe.wake_writer_on_freed_slot = release.is_some_and(|v| v >= (6, 14));
                pipe.stamps_times = crate::ipc::stamps_pipe_times(release);
                pipe.packet = matches!(op, Op::PipePacket);
                pipe.tmp_page_slots = crate::ipc::tmp_page_slots(release);
                let id = match self.free_pipes.pop() {
                    Some(id) => {
                        self.chans[id] = Channel::Pipe(pipe);
                        id
                    }
                    None => {
                        self.chans.push(Channel::Pipe(pipe));
                        self.chans.len() - 1
                    }
                };
                result = OpResult::Chan(id);
                Outcome::Continue
            }
            Op::Close { chan } => {
                match self.chans.get(chan) {
                    Some(Channel::Pipe(pipe)) if !self.free_pipes.contains(&chan) => {
                        if !(pipe.rd_wait.is_empty() && pipe.wr_wait.is_empty()) {
                            self.violation(format!("task {p} closed pipe {chan} with tasks waiting on it"));
                        }
                        // Unread pages leave the machine's queued footprint with it.
                        let before = self.track_footprint().then(|| Self::queued_footprint(&self.chans[chan]));
                        self.chans[chan] = Channel::Pipe(Pipe::default());
                        self.account_footprint(chan, before);
                        self.free_pipes.push(chan);
                    }
                    _ => self.violation(format!("task {p} closed channel {chan}, which is not an open pipe")),
                }
                Outcome::Continue
            }
            Op::SocketPair => {
                self.chans.push(Channel::Unix(UnixStream::default()));
                self.chans.push(Channel::Unix(UnixStream::default()));
                result = OpResult::Chan(self.chans.len() - 2);
                Outcome::Continue
            }
            Op::TcpConnect => {
                self.chans.push(Channel::Tcp(UnixStream::default()));
                self.chans.push(Channel::Tcp(UnixStream::default()));
                result = OpResult::Chan(self.chans.len() - 2);
                Outcome::Continue
            }
            Op::Write { chan, bytes } => {
                let left = bytes - self.exec[p].op_progress;
                let mut wake = std::mem::take(&mut self.wake_buf);
                let before = self.footprint_of(chan);
                let io = match self.chans.get_mut(chan) {
                    Some(Channel::Pipe(pipe)) => pipe.write(p, cpu, left, !first, &mut wake),
                    Some(Channel::Unix(u)) | Some(Channel::Tcp(u)) => u.write(p, left, &mut wake),
                    None => {
                        self.violation(format!("task {p} wrote to unknown channel {chan}"));
                        IoOutcome::Done(left)
                    }
                };
                self.account_footprint(chan, before);
                self.wake_all(&mut wake, cpu, true);
                self.wake_buf = wake;
                match io {
                    IoOutcome::Done(_) => {
                        result = OpResult::Bytes(bytes);
                        discard_plain(op);
                        Outcome::Continue
                    }
                    IoOutcome::Partial(n) => {
                        self.exec[p].op_progress += n;
                        keep = Some(op);
                        Outcome::Block
                    }
                    IoOutcome::Blocked => {
                        keep = Some(op);
                        Outcome::Block
                    }
                }
            }
            Op::Read { chan, bytes } => {
                let mut wake = std::mem::take(&mut self.wake_buf);
                let before = self.footprint_of(chan);
                let io = match self.chans.get_mut(chan) {
                    Some(Channel::Pipe(pipe)) => pipe.read(p, bytes, &mut wake),
                    Some(Channel::Unix(u)) | Some(Channel::Tcp(u)) => u.read(p, bytes, &mut wake),
                    None => {
                        self.violation(format!("task {p} read from unknown channel {chan}"));
                        IoOutcome::Done(0)
                    }
                };
                self.account_footprint(chan, before);
                self.wake_all(&mut wake, cpu, true);
                self.wake_buf = wake;
                match io {
                    IoOutcome::Done(n) | IoOutcome::Partial(n) => {
                        result = OpResult::Bytes(n);
                        discard_plain(op);
                        Outcome::Continue
                    }
                    IoOutcome::Blocked => {
                        keep = Some(op);
                        Outcome::Block
                    }
                }
            }
            Op::Poll { chan } => match self.chans.get_mut(chan) {
                Some(ch) if ch.readable() => Outcome::Continue,
                Some(ch) => {
                    ch.add_poller(p);
                    keep = Some(op);
                    Outcome::Block
                }
                None => {
                    self.violation(format!("task {p} polled unknown channel {chan}"));
                    Outcome::Continue
                }
            },
            Op::Sleep { ns } => {
                if !first && self.exec[p].timer_fired {
                    Outcome::Continue
                } else {
                    // The expiry was fixed as the timer was armed, before the
                    // timer device was programmed (`timer_arm_ns()`).
                    let e = &mut self.exec[p];
                    let expiry_ns = self.sys.now_ns - u64::from(std::mem::take(&mut e.timer_arm_ns)) + ns;
                    if expiry_ns <= self.sys.now_ns {
                        // It expired while the device was programmed: the timer
                        // interrupt reaches the running task before schedule()
                        // dequeues it (an interrupt delivered to a running CPU,
                        // `ipi_latency_ns` and `ipi_receive_ns`), hrtimer_wakeup()
                        // clears the sleeper's task, and do_nanosleep() returns
                        // without switching.
                        let c = &self.sys.cost;
                        e.seg_remaining = Some((c.ipi_latency_ns + c.ipi_receive_ns, true));
                        Outcome::Continue
                    } else {
                        e.timer_fired = false;
                        e.timer_gen = e.timer_gen.wrapping_add(1);
                        let ev = EventKind::Timer { task: p as u32, gen: e.timer_gen };
                        self.queue.push(expiry_ns, ev);
                        keep = Some(op);
                        Outcome::Block
                    }
                }
            }
            Op::Fork { kind, comm, program } => {
                let comm = comm.unwrap_or_else(|| self.sys.tasks[p].comm.clone());
                let child = self.new_task(Some(p), comm, kind == ForkKind::Thread, program, cpu);
                if kind == ForkKind::Process {
                    self.exec[p].unreaped_children += 1;
                }
                self.policy.task_fork(&mut self.sys, child, Some(p));
                self.emit(cpu, TraceKind::Fork { parent: p, child });
                self.activate_new(child, cpu);
                result = OpResult::Task(child);
                Outcome::Continue
            }
            Op::Exit => {
                self.do_exit(cpu, p);
                Outcome::Exited
            }
            Op::WaitChild => {
                if let Some(z) = self.exec[p].zombies.pop_front() {
                    self.exec[p].in_wait = false;
                    self.exec[p].unreaped_children -= 1;
                    self.sys.tasks[z].state = TaskState::Dead;
                    // Reaped: nothing refers to the process any more (it is off
                    // every CPU and queue, and only threads are joined), unless
                    // children it left unreaped still name it as their parent.
                    if self.exec[z].unreaped_children == 0 {
                        self.free_slots.push(z);
                    }
                    result = OpResult::Task(z);
                    Outcome::Continue
                } else if self.exec[p].unreaped_children == 0 {
                    self.exec[p].in_wait = false;
                    result = OpResult::NoChild;
                    Outcome::Continue
                } else {
                    self.exec[p].in_wait = true;
                    keep = Some(op);
                    Outcome::Block
                }
            }
            Op::Join { task } => {
                if task >= self.sys.tasks.len() {
                    self.violation(format!("task {p} joined unknown task {task}"));
                    Outcome::Continue
                } else if matches!(self.sys.tasks[task].state, TaskState::Zombie | TaskState::Dead) {
                    Outcome::Continue
                } else {
                    self.exec[task].joiners.push(p);
                    keep = Some(op);
                    Outcome::Block
                }
            }
            Op::FutexWait { key, expected } => {
                if !first && self.exec[p].futex_woken {
                    self.exec[p].futex_woken = false;
                    Outcome::Continue
                } else {
                    let f = self.futexes.entry(key).or_insert_with(|| (0, WaitQueue::default()));
                    if f.0 == expected {
                        f.1.add(p, true);
                        keep = Some(op);
                        Outcome::Block
                    } else {
                        Outcome::Continue
                    }
                }
            }
            Op::FutexWake { key, nr } => {
                let mut wake = std::mem::take(&mut self.wake_buf);
                if let Some(f) = self.futexes.get_mut(&key) {
                    f.1.wake(nr as usize, &mut wake);
                }
                result = OpResult::Count(wake.len() as u32);
                for &t in &wake {
                    self.exec[t].futex_woken = true;
                }
                self.wake_all(&mut wake, cpu, false);
                self.wake_buf = wake;
                Outcome::Continue
            }
            Op::Yield => {
                self.sys.stats[cpu].yld_count += 1;
                self.policy.yield_task(&mut self.sys, cpu, p);
                self.process_requests();
                self.sys.need_resched[cpu] = true;
                Outcome::Continue
            }
            Op::JoinGroup { ref path, shares } => {
                let g = self.group_for(path, shares);
                let old = self.sys.tasks[p].group;
                if g != old {
                    self.sys.tasks[p].group = g;
                    self.policy.task_change_group(&mut self.sys, p, old);
                    self.process_requests();
                }
                Outcome::Continue
            }
            Op::SetNice { nice } => {
                let old = self.sys.tasks[p].weight;
                let t = &mut self.sys.tasks[p];
                t.nice = nice.clamp(-20, 19);
                t.weight = nice_to_weight(t.nice);
                self.policy.reweight_task(&mut self.sys, p, old);
                self.process_requests();
                Outcome::Continue
            }
            Op::SetSlice { ns } => {
                self.policy.set_slice(&mut self.sys, p, ns);
                self.process_requests();
                Outcome::Continue
            }
            Op::SetAffinity { cpus } => {
                self.set_affinity(cpu, p, cpus);
                Outcome::Continue
            }
            Op::Kill { task } => {
                // Its program is done: the next operation it asks for is exit().
                if let Some(e) = self.exec.get_mut(task).filter(|e| e.program.is_some()) {
                    e.program = Some(Box::new(Killed));
                }
                Outcome::Continue
            }
            Op::Kernel { .. } | Op::Exec { .. } => Outcome::Continue,
            Op::Compute { .. }
            | Op::Cycles { .. }
            | Op::Stream { .. }
            | Op::Mark { .. }
            | Op::Store { .. }
            | Op::Clock
            | Op::GetCpu
            | Op::Record { .. } => Outcome::Continue,
        };
        self.exec[p].op = keep;
        self.exec[p].last = LastResult::of(result);
        outcome
    }

    /// The group at `path`, created with its missing parents (default shares) like
    /// `mkdir -p`; its `cpu.shares` set to `shares` (clamped to the kernel's
    /// MIN_SHARES..MAX_SHARES, 2..2^18). A malformed path or the root is a violation.
    fn group_for(&mut self, path: &str, shares: u64) -> usize {
        let shares = shares.clamp(2, 1 << 18);
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        if !path.starts_with('/') || parts.is_empty() {
            self.violation(format!("JoinGroup path '{path}': expected an absolute path below the root, like /batch"));
            return 0;
        }
        let mut g = 0;
        let mut at = String::new();
        for (i, part) in parts.iter().enumerate() {
            at.push('/');
            at.push_str(part);
            g = match self.sys.groups.iter().position(|x| x.path == at) {
                Some(found) => found,
                None => {
                    self.sys.groups.push(TaskGroupInfo { path: at.clone(), parent: g, shares: ROOT_TASK_GROUP_SHARES });
                    self.sys.groups.len() - 1
                }
            };
            if i + 1 == parts.len() && self.sys.groups[g].shares != shares {
                self.sys.groups[g].shares = shares;
                self.policy.group_shares_changed(&mut self.sys, g);
            }
        }
        g
    }

    /// Wakes `tasks` from `cpu`; `sync` for the wakeups that pass `WF_SYNC`
    /// (a pipe's or an AF_UNIX socket's `wake_up_interruptible_sync_poll()`),
    /// not for a futex's (`futex_wake()` → `wake_up_q()` → `wake_up_process()`,
    /// no flags, in every modelled version).
    #[inline]
    fn wake_all(&mut self, tasks: &mut Vec<TaskId>, cpu: usize, sync: bool) {
        // Most reads and writes wake nobody: no drain to set up and drop.
        if tasks.is_empty() {
            return;
        }
        for t in tasks.drain(..) {
            self.try_to_wake_up(t, Some(cpu), sync);
        }
    }

    /// `do_exit()`: dequeue, become a zombie for the parent or vanish, wake whoever waits.
    fn do_exit(&mut self, cpu: usize, p: TaskId) {
        self.emit(cpu, TraceKind::Exit { p });
        self.policy.dequeue_task(&mut self.sys, cpu, p, DequeueReason::Exit);
        self.policy.task_dead(&mut self.sys, p);
        self.process_requests();
        self.alive -= 1;
        self.exec[p].program = None;
        let parent =
            self.sys.tasks[p].parent.filter(|&pp| !matches!(self.sys.tasks[pp].state, TaskState::Zombie | TaskState::Dead));
        match parent {
            Some(pp) if !self.sys.tasks[p].is_thread => {
                self.sys.tasks[p].state = TaskState::Zombie;
                self.exec[pp].zombies.push_back(p);
                if self.exec[pp].in_wait {
                    self.try_to_wake_up(pp, Some(cpu), false);
                }
            }
            _ => self.sys.tasks[p].state = TaskState::Dead,
        }
        for j in std::mem::take(&mut self.exec[p].joiners) {
            self.try_to_wake_up(j, Some(cpu), false);
        }
    }

    // ---------------------------------------------------------------- accounting

    /// gettimeofday() in the task: after the scheduler work it is still waiting for.
    fn mark(&mut self, cpu: usize, label: u32) {
        let now = self.sys.now_ns + self.sys.pending_overhead_ns[cpu];
        self.marks.push((label, now));
        let snap = self.snapshot(now);
        if label == MARK_START && self.window_start.is_none() {
            self.latency.reset();
            self.window_start = Some(snap);
        } else if label == MARK_END && self.window_start.is_some() && self.window_end.is_none() {
            self.window_end = Some(snap);
        }
    }

    /// (now, the counters brought up to it, wasted core-time): what a window's
    /// edge and the workload's end record.
    fn snapshot(&mut self, now: u64) -> (u64, Vec<CpuStats>, u64) {
        let stats = self.snapshot_stats(now);
        (now, stats, self.sys.wasted_ns())
    }

    /// Stats with busy time brought up to `now`.
    fn snapshot_stats(&self, now: u64) -> Vec<CpuStats> {
        let mut s = self.sys.stats.clone();
        for (cpu, st) in s.iter_mut().enumerate() {
            // Active (running a task, or the scheduler after a wakeup): the time
            // since it became busy is booked only when it next goes idle.
            if self.sys.active[cpu] {
                st.busy_ns += now.saturating_sub(self.cpu[cpu].busy_since_ns);
            } else if self.sys.idle_busy_until_ns[cpu] > now {
                // Its switch into idle and interrupt work are booked ahead.
                st.busy_ns -= self.sys.idle_busy_until_ns[cpu] - now;
            }
        }
        s
    }

    fn emit(&mut self, cpu: usize, kind: TraceKind) {
        if self.entities.is_some() {
            self.emit_entities(cpu, kind);
        }
        if let Some(sink) = self.trace.as_mut() {
            // A switch happens in task context even when an interrupt asked for it.
            let context = if matches!(kind, TraceKind::Switch { .. }) { TraceContext::Task } else { self.trace_context };
            let rec = TraceRecord { time_ns: self.sys.now_ns, cpu, current: self.sys.curr[cpu], context, kind };
            sink.record(&rec, &self.sys.tasks);
        }
    }

    /// The entity numbers of a switch to a task or of a wakeup, as
    /// tools/host-lag reads them at `sched_switch` and `sched_wakeup`.
    fn emit_entities(&mut self, cpu: usize, kind: TraceKind) {
        let numbers = |p: TaskId| self.policy.entity_numbers(p).map(|n| (p, n));
        let (wakeup, prev_state, a, b) = match kind {
            TraceKind::Switch { prev, prev_state, next: Some(next) } => {
                (false, prev_state, prev.and_then(numbers), numbers(next))
            }
            TraceKind::Wakeup { p, .. } => (true, PrevState::Running, numbers(p), numbers(p)),
            _ => return,
        };
        let Some(b) = b else { return };
        let rec = EntityRecord { time_ns: self.sys.now_ns, cpu, wakeup, prev_state, a, b };
        if let Some(sink) = self.entities.as_mut() {
            sink.record(&rec, &self.sys.tasks);
        }
    }

    fn violation(&mut self, what: String) {
        if self.violations.len() < 100 {
            self.violations.push(format!("t={}ns: {what}", self.sys.now_ns));
        }
    }

    /// Adds the busy interval `from..to` of `cpu` to its utilisation buckets.
    fn record_busy(&mut self, cpu: usize, from: u64, to: u64) {
        if self.util_bucket_ns == 0 {
            return;
        }
        let (mut t, end) = (from.saturating_sub(self.start_ns), to.saturating_sub(self.start_ns));
        while end / self.util_bucket_ns >= MAX_UTIL_BUCKETS as u64 {
            // Twice as wide: merge neighbours on every CPU.
            for row in &mut self.util_buckets {
                *row = row.chunks(2).map(|p| p.iter().sum()).collect();
            }
            self.util_bucket_ns *= 2;
        }
        let b = self.util_bucket_ns;
        let buckets = &mut self.util_buckets[cpu];
        while t < end {
            let i = (t / b) as usize;
            let next = ((i as u64 + 1) * b).min(end);
            if buckets.len() <= i {
                buckets.resize(i + 1, 0);
            }
            buckets[i] += next - t;
            t = next;
        }
    }

    fn finish(mut self, timed_out: bool) -> RunResult {
        let end = self.sys.now_ns;
        let stats_end = self.snapshot_stats(end);
        if self.cfg.check && !timed_out {
            // Busy time must be exactly task run time plus scheduler overhead.
            // At the end every CPU is idle, so its busy time is fully booked.
            for (cpu, s) in self.sys.stats.iter().enumerate() {
                if s.busy_ns != s.run_ns + s.sched_ns + s.find_ns {
                    let msg = format!(
                        "cpu{cpu}: busy {} ns != run {} + sched {} + find {} ns",
                        s.busy_ns, s.run_ns, s.sched_ns, s.find_ns
                    );
                    self.violations.push(msg);
                }
            }
            if self.policy.nr_running_total() != 0 {
                let n = self.policy.nr_running_total();
                self.violation(format!("run ended with {n} tasks still runnable in the policy"));
            }
        }
        let wasted_end = self.sys.wasted_ns();
        // With background threads the run goes on until they sleep; the workload's
        // run ended when its last task did.
        let (workload_end_ns, stats_end, wasted_end) = self.workload_end.take().unwrap_or((end, stats_end, wasted_end));
        let (window_ns, cpu_stats, wasted_ns) = match (&self.window_start, &self.window_end) {
            (Some((t0, s0, w0)), Some((t1, s1, w1))) => {
                ((*t0, *t1), s1.iter().zip(s0).map(|(a, b)| a.delta(b)).collect(), w1 - w0)
            }
            _ => ((self.start_ns, workload_end_ns), stats_end, wasted_end),
        };
        if self.cfg.check && !timed_out {
            // Wasted core-time accrues only while CPUs are idle, and idle is what
            // busy_ns leaves of the window.
            let capacity = (window_ns.1 - window_ns.0) * cpu_stats.len() as u64;
            let idle = capacity.saturating_sub(cpu_stats.iter().map(|s| s.busy_ns).sum());
            if wasted_ns > idle {
                self.violation(format!("wasted core-time {wasted_ns} ns exceeds the idle time {idle} ns of the measured window"));
            }
        }
        let mut tasks: Vec<TaskSummary> =
            (0..self.sys.tasks.len()).filter(|&p| !self.exec[p].background).map(|p| self.summary(p)).collect();
        tasks.extend(std::mem::take(&mut self.reaped).into_values());
        self.digest.add(end);
        self.digest.add(self.events);
        let alive_at_timeout: Vec<String> = if timed_out {
            (0..self.sys.tasks.len())
                .filter(|&p| !self.exec[p].background)
                .filter(|&p| !matches!(self.sys.tasks[p].state, TaskState::Zombie | TaskState::Dead))
                .take(8)
                .map(|p| format!("{} {:?} on cpu{}", self.sys.tasks[p].comm, self.sys.tasks[p].state, self.sys.tasks[p].cpu))
                .collect()
        } else {
            Vec::new()
        };
        RunResult {
            settings: self.policy.settings(),
            seed: self.cfg.seed,
            policy: self.policy.name(),
            ncpus: self.sys.ncpus(),
            start_ns: self.start_ns,
            end_ns: workload_end_ns,
            marks: self.marks,
            window_ns,
            cpu_stats,
            wasted_ns,
            latency: self.latency,
            metrics: self.metrics,
            tasks,
            events: self.events,
            digest: self.digest.value(),
            violations: self.violations,
            timed_out,
            alive_at_timeout,
            util_buckets: self.util_buckets,
            util_bucket_ns: self.util_bucket_ns,
            irq_off: self.sys.irq.clone(),
        }
    }
}

/// Lets go of a read or write that is done, without `Op`'s drop glue: the glue
/// (for the program `Fork` carries and the path of `JoinGroup`) is too large to
/// be inlined, and the event loop's hottest path would call it for every read
/// and write, which own nothing.
#[inline(always)]
fn discard_plain(op: Op) {
    debug_assert!(matches!(op, Op::Read { .. } | Op::Write { .. }));
    std::mem::forget(op);
}

/// Wall time to do `work_ns` of alone work at `speed_pm` per mille.
fn wall_ns(work_ns: u64, speed_pm: u64) -> u64 {
    if speed_pm == 1000 {
        return work_ns;
    }
    ((work_ns as u128 * 1000).div_ceil(speed_pm as u128)) as u64
}
