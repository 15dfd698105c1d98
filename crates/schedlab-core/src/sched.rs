//! The scheduler interface (`SchedClass`, mirroring `struct sched_class` in
//! kernel/sched/sched.h) and `System`, the machine state a policy reads and the
//! services it calls: charging its own work, kicking CPUs, moving tasks.

use hdrhistogram::Histogram;

use crate::cost::MachineProfile;
use crate::cpuset::CpuSet;
use crate::rng::{SimRng, Stream};
use crate::stats::{latency_histogram, CpuStats};
use crate::task::{Task, TaskId, TaskState};
use crate::topology::{Distance, Topology};

/// Why `select_task_rq` is called (`SD_BALANCE_WAKE` / `SD_BALANCE_FORK` /
/// `SD_BALANCE_EXEC`, v5.10+ `WF_TTWU` / `WF_FORK` / `WF_EXEC`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectReason {
    Wakeup,
    Fork,
    /// `sched_exec()`: the running task starts an execve().
    Exec,
}

/// Wakeup flags (`WF_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeFlags {
    pub reason: SelectReason,
    /// `WF_SYNC`: the waker is about to sleep (pipe/socket sync wakeups).
    pub sync: bool,
}

/// Why a task enters a runqueue (`ENQUEUE_WAKEUP`, new task, migration arrival).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnqueueReason {
    Wakeup,
    New,
    Migrate,
}

/// Why a task leaves a runqueue (`DEQUEUE_SLEEP`, exit, migration departure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequeueReason {
    Sleep,
    Exit,
    Migrate,
}

/// The kernel's preemption model (`preempt=` with PREEMPT_DYNAMIC, or the
/// CONFIG_PREEMPT_* choice): when a reschedule asked of a CPU takes effect. Table in
/// `__sched_dynamic_update()` (core.c v6.18 L7576): with `none` and `voluntary` a
/// task in a system call switches at its return to user space (`voluntary` adds
/// `might_resched()` points, which the modelled system calls do not reach); with
/// `full` kernel code is preempted at once; `lazy` (v6.13+) is `full` for what
/// asks with the full bit, while the fair class's `resched_curr_lazy()` only sets a
/// lazy bit: no IPI, honoured at the next return to user space or promoted by the
/// next tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PreemptModel {
    #[default]
    None,
    Voluntary,
    Full,
    Lazy,
}

impl PreemptModel {
    pub const NAMES: &'static str = "none, voluntary, full or lazy";

    pub fn parse(s: &str) -> Option<PreemptModel> {
        Some(match s {
            "none" => PreemptModel::None,
            "voluntary" => PreemptModel::Voluntary,
            "full" => PreemptModel::Full,
            "lazy" => PreemptModel::Lazy,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            PreemptModel::None => "none",
            PreemptModel::Voluntary => "voluntary",
            PreemptModel::Full => "full",
            PreemptModel::Lazy => "lazy",
        }
    }

    /// Whether the full reschedule bit preempts kernel code (system calls).
    pub fn kernel_preemptible(self) -> bool {
        matches!(self, PreemptModel::Full | PreemptModel::Lazy)
    }
}

/// What a CPU is doing, as other CPUs can see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuState {
    /// Running the idle task, nothing on its way.
    Idle,
    /// Idle, but already woken (reschedule pending): not idle to `idle_cpu()`.
    Kicked,
    /// Running a task.
    Busy,
}

/// Kind of scheduler overhead, for the `%find` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Charge {
    /// Switching, enqueueing, waking: the scheduler's fixed costs.
    Sched,
    /// Searching for idle CPUs or for tasks to pull or steal.
    Find,
}

/// The scheduler state a workload's first task inherits from the process that
/// started it (a shell, perf, `schedlab real`), which the simulation does not
/// run: `dup_task_struct()` copies the parent's task_struct into the child.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Launcher {
    /// Linux `current->wakee_flips` of the launcher when it forked the
    /// workload (v3.12+ `record_wakee()`: how often it switched wakee, halved
    /// once a second). 0: a launcher that woke nobody, as a shell that only
    /// forks and waits.
    pub wakee_flips: u64,
}

/// A scheduling policy. Mirrors `struct sched_class` (kernel/sched/sched.h). The
/// engine calls these at the kernel's call sites:
/// wakeup = `select_task_rq` → `enqueue_task` → `check_preempt_curr`;
/// schedule() = `dequeue_task` (if prev sleeps) → `pick_next_task` (which does
/// put-prev and newidle balancing, as `pick_next_task_fair()` does in v4.19);
/// tick = `task_tick` + `trigger_load_balance`; fork = `task_fork` →
/// `select_task_rq(Fork)` → `enqueue_task(New)` → `check_preempt_curr`.
pub trait SchedClass {
    /// Policy name with features, e.g. `cfs@4.19+STEAL`.
    fn name(&self) -> String;

    /// Once, before the first task exists.
    fn init(&mut self, _sys: &mut System) {}

    /// `sched_fork()`/`task_fork_fair()`: `p` was just created by `parent` and is
    /// not yet runnable.
    fn task_fork(&mut self, _sys: &mut System, _p: TaskId, _parent: Option<TaskId>) {}

    /// After `task_fork(p, None)` for a thread that has existed since boot (a
    /// machine's background kernel thread), created asleep: its history is a
    /// long-lived thread's, not a new task's.
    fn task_booted(&mut self, _sys: &mut System, _p: TaskId) {}

    /// After `task_fork(p, None)` for the workload's first task: what it
    /// inherits from the unsimulated process that started it.
    fn task_launched(&mut self, _sys: &mut System, _p: TaskId, _launcher: &Launcher) {}

    /// `select_task_rq()`: the CPU `p` should run on. `prev_cpu` is where it last
    /// ran, `waker_cpu` where the wakeup (or fork) executes. The engine migrates `p`
    /// if the answer differs from `prev_cpu`.
    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, waker_cpu: usize, flags: WakeFlags) -> usize;

    /// `sched_exec()` (Linux, kernel/sched/core.c, every modelled version): running
    /// task `p` on `cpu` starts an execve(), "a valuable balancing opportunity"
    /// (its footprint is smallest): the CPU it should move to. FreeBSD balances
    /// nothing at exec, hence the default.
    fn select_exec_cpu(&mut self, _sys: &mut System, _p: TaskId, cpu: usize) -> usize {
        cpu
    }

    /// `stop_one_cpu(migration_cpu_stop)` after `select_exec_cpu()` chose `dest`:
    /// the stopper preempts `p` on `cpu` (a schedule() follows), and moves it to
    /// `dest` if it is still queued there and allowed on `dest`. Only called when
    /// `select_exec_cpu()` returned another CPU.
    fn push_running_task(&mut self, _sys: &mut System, _cpu: usize, _p: TaskId, _dest: usize) {}

    /// Whether `push_running_task()` moves the task: what `sched_setaffinity()`
    /// needs when it takes a running task off its CPU. Policies that do not model
    /// it refuse workloads that change affinity.
    fn pushes_running_tasks(&self) -> bool {
        false
    }

    /// `enqueue_task()`: `p` becomes runnable on `cpu` (`sys.tasks[p].cpu == cpu`).
    fn enqueue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: EnqueueReason);

    /// `dequeue_task()`: `p` (possibly the running task) stops being runnable on `cpu`.
    fn dequeue_task(&mut self, sys: &mut System, cpu: usize, p: TaskId, reason: DequeueReason);

    /// `check_preempt_curr()`: after `p` was enqueued on busy `cpu`, should it
    /// preempt the running task? Only asked when `cpu` is busy.
    fn check_preempt_curr(&mut self, sys: &mut System, cpu: usize, p: TaskId, flags: WakeFlags) -> bool;

    /// `pick_next_task()`: choose what `cpu` runs next. `prev` is the task that was
    /// running if it is still runnable (preempted or yielding), and must be put back
    /// first. May pull work (newidle balance, steal). None = go idle.
    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, prev: Option<TaskId>) -> Option<TaskId>;

    /// `task_tick()`: periodic tick on busy `cpu`; true = reschedule.
    fn task_tick(&mut self, sys: &mut System, cpu: usize, curr: TaskId) -> bool;

    /// The idle thread of idle `cpu` takes a step it asked for with
    /// `System::idle_poll_at` (FreeBSD's `sched_idletd()` searching with interrupts
    /// enabled). True = a task is now queued on `cpu`: the idle thread switches to
    /// it at once (it is running, not halted, so there is no idle-exit latency).
    fn idle_poll(&mut self, _sys: &mut System, _cpu: usize) -> bool {
        false
    }

    /// `trigger_load_balance()`: the tick's balancing hook.
    fn trigger_load_balance(&mut self, _sys: &mut System, _cpu: usize) {}

    /// `yield_task()`: `curr` called sched_yield(); a schedule() follows.
    fn yield_task(&mut self, _sys: &mut System, _cpu: usize, _curr: TaskId) {}

    /// `task_dead()`: `p` exited and was dequeued.
    fn task_dead(&mut self, _sys: &mut System, _p: TaskId) {}

    /// `reweight_task()`: `p`'s nice changed (its weight is already updated).
    fn reweight_task(&mut self, _sys: &mut System, _p: TaskId, _old_weight: u32) {}
    /// `sched_setattr()` asked running task `p` for a slice of `ns` (0: the
    /// default). Classes without per-task slices ignore it.
    fn set_slice(&mut self, _sys: &mut System, _p: TaskId, _ns: u64) {}
    /// `p` moved from group `old` to `sys.tasks[p].group` (`sched_move_task()`).
    fn task_change_group(&mut self, _sys: &mut System, _p: TaskId, _old: usize) {}
    /// The `cpu.shares` of group `g` changed (`sched_group_set_shares()`).
    fn group_shares_changed(&mut self, _sys: &mut System, _g: usize) {}

    /// `--check`: the policy's own invariants on `cpu`, recomputed independently
    /// of its incremental bookkeeping, after every pick. None = all hold.
    fn check_invariants(&self, _cpu: usize) -> Option<String> {
        None
    }

    /// The Linux release this class models, as (major, minor), for the kernel
    /// paths around it whose rules changed between releases (the pipe's writer
    /// wakeup in v6.14). None for a non-Linux class: the engine's v5.5-v6.13 rules.
    fn linux_release(&self) -> Option<(u32, u32)> {
        None
    }

    /// The tunables and switches in force after `init`, by the names a user sets
    /// them with (sysctls, `feature.NAME` = on/off), for reports.
    fn settings(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// EEVDF's numbers of `p`'s entity and of its cfs_rq (v6.6+ fair classes);
    /// None where the class has none. Read for `--lag-trace` only.
    fn entity_numbers(&self, _p: TaskId) -> Option<crate::trace::EntityNumbers> {
        None
    }

    /// The class asks reschedules with `resched_curr_lazy()` (fair, v6.13+): under
    /// `preempt=lazy` they set the lazy bit only.
    fn lazy_resched(&self) -> bool {
        false
    }

    /// Runnable tasks on `cpu` including the running one (`rq->nr_running`).
    fn nr_running(&self, cpu: usize) -> usize;

    /// Runnable tasks in the whole system, by the policy's books (invariant check).
    fn nr_running_total(&self) -> usize;
}

/// A request a policy leaves for the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// Reschedule `cpu`, asked from `from` (IPI if remote).
    Resched { cpu: usize, from: usize },
    /// `p` moved from `from` to `to` (trace `sched_migrate_task`).
    Migrated { p: TaskId, from: usize, to: usize },
    /// Call `idle_poll(cpu)` at `at_ns` if `cpu` is still idle then.
    IdlePoll { cpu: usize, at_ns: u64 },
}

/// `cpu.shares` of the root group and the default of a new one (`ROOT_TASK_GROUP_LOAD`,
/// i.e. NICE_0_LOAD unscaled).
pub const ROOT_TASK_GROUP_SHARES: u64 = 1024;

/// Interrupts-disabled scheduler sections and the interrupts they delayed.
#[derive(Clone, Debug)]
pub struct IrqOffStats {
    /// Per CPU: end of the last masked section.
    pub(crate) masked_until_ns: Vec<u64>,
    /// Length of every section, ns.
    pub sections: Histogram<u64>,
    /// The same, by the kernel function holding the section.
    pub by_site: std::collections::BTreeMap<&'static str, Histogram<u64>>,
    /// Sum of the section lengths, ns.
    pub total_ns: u64,
    /// Interrupts (reschedule IPIs, idle wakeups) delivered.
    pub interrupts: u64,
    /// Delay of each interrupt that arrived inside a section, ns.
    pub delays: Histogram<u64>,
}

impl IrqOffStats {
    fn new(ncpus: usize) -> IrqOffStats {
        IrqOffStats {
            masked_until_ns: vec![0; ncpus],
            sections: latency_histogram(),
            by_site: std::collections::BTreeMap::new(),
            total_ns: 0,
            interrupts: 0,
            delays: latency_histogram(),
        }
    }

    /// Adds another run's sections and delays (for summaries over runs).
    pub fn merge(&mut self, other: &IrqOffStats) {
        let _ = self.sections.add(&other.sections);
        for (site, h) in &other.by_site {
            let _ = self.by_site.entry(site).or_insert_with(latency_histogram).add(h);
        }
        self.total_ns += other.total_ns;
        self.interrupts += other.interrupts;
        let _ = self.delays.add(&other.delays);
    }

    /// An interrupt reaches `cpu` at `at_ns`: when its handler can run.
    pub(crate) fn deliver(&mut self, cpu: usize, at_ns: u64) -> u64 {
        self.interrupts += 1;
        let until = self.masked_until_ns[cpu];
        if until > at_ns {
            let _ = self.delays.record(until - at_ns);
            until
        } else {
            at_ns
        }
    }
}

/// A task group as the cgroup file system shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskGroupInfo {
    pub path: String,
    /// Index of the parent group (the root is its own parent).
    pub parent: usize,
    /// `cpu.shares` as written (unscaled).
    pub shares: u64,
}

/// What the policy sees of the machine and the services it may call.
pub struct System {
    pub now_ns: u64,
    /// Task groups (cgroups of the cpu controller); `groups[0]` is the root.
    pub groups: Vec<TaskGroupInfo>,
    pub topo: Topology,
    pub cost: MachineProfile,
    pub tasks: Vec<Task>,
    pub stats: Vec<CpuStats>,
    /// Tick period (1/HZ), ns.
    pub tick_ns: u64,
    /// Tie-break stream for policies.
    pub rng: SimRng,
    pub(crate) cpu_state: Vec<CpuState>,
    pub(crate) curr: Vec<Option<TaskId>>,
    /// CPUs in state Idle (not kicked), like `nohz.idle_cpus_mask`.
    pub(crate) idle_mask: CpuSet,
    /// Scheduler time charged but not yet spent, per CPU.
    pub(crate) pending_overhead_ns: Vec<u64>,
    /// The CPU is out of idle (executing the scheduler or a task).
    pub(crate) active: Vec<bool>,
    /// A CPU that is not active has work booked in `busy_ns` until then: its
    /// switch into idle, then interrupt work queued behind it (`charge`). It
    /// takes a reschedule only after that, as an idle CPU's `schedule()` runs
    /// after the interrupt that woke it returns.
    pub(crate) idle_busy_until_ns: Vec<u64>,
    /// TIF_NEED_RESCHED of the CPU's current task.
    pub(crate) need_resched: Vec<bool>,
    /// TIF_NEED_RESCHED_LAZY (preempt=lazy only).
    pub(crate) need_resched_lazy: Vec<bool>,
    /// Per CPU, while a wakeup from another CPU has asked it to reschedule:
    /// the time of its runqueue's last clock update (`rq_clock_skip_update()`,
    /// see [`System::rq_clock`]).
    pub(crate) rq_clock_skip_ns: Vec<Option<u64>>,
    /// The preemption model of this run.
    pub preempt: PreemptModel,
    /// CONFIG_PREEMPTION (CONFIG_PREEMPT before v5.4): the kernel is built
    /// preemptible, as every PREEMPT_DYNAMIC build is even when booted with
    /// preempt=none. Code under `#ifdef CONFIG_PREEMPTION` follows it, not the
    /// boot-time model.
    pub preemption_built: bool,
    pub(crate) requests: Vec<Request>,
    /// The CPU executing the current kernel path (`smp_processor_id()`).
    pub(crate) this_cpu: usize,
    /// Runnable-not-running tasks per CPU (`task.cpu`), for wasted core-time.
    waiting: Vec<u64>,
    /// Interrupts-disabled sections of scheduler code (see `charge_irq_off`).
    pub(crate) irq: IrqOffStats,
    /// Sum of `waiting` over CPUs that are busy.
    waiting_on_busy: u64,
    idle_count: u64,
    /// Idle CPUs still finishing the switch into idle: (cpu, the time it ends).
    /// They count as idle for wasted core-time only from then, as they count as
    /// busy in `busy_ns` until then.
    idle_from: Vec<(usize, u64)>,
    /// No entry of `idle_from` ends before this (a lower bound, exact after
    /// each sweep): while it lies ahead, nothing in the list has ended yet and
    /// wasted core-time advances without sorting the list.
    idle_from_min_ns: u64,
    /// Idle CPUs running the scheduler (woken by an interrupt or their idle
    /// thread, not yet switched to a task): busy in `busy_ns`, so not idle for
    /// wasted core-time, though still idle to the policies as in the kernel.
    working: Vec<bool>,
    wasted_ns: u64,
    wasted_since_ns: u64,
    /// Per CPU: whether its `CpuState` changed since a policy last took the
    /// changes, and those CPUs in order, each once; empty unless a policy asked
    /// for them (`track_state_changes()`).
    state_changed: Vec<bool>,
    state_changed_list: Vec<usize>,
}

impl System {
    pub(crate) fn new(topo: Topology, cost: MachineProfile, tick_ns: u64, seed: u64, start_ns: u64) -> System {
        let n = topo.ncpus();
        System {
            now_ns: start_ns,
            groups: vec![TaskGroupInfo { path: "/".into(), parent: 0, shares: ROOT_TASK_GROUP_SHARES }],
            stats: vec![CpuStats::default(); n],
            tick_ns,
            rng: SimRng::new(seed, Stream::Policy),
            cpu_state: vec![CpuState::Idle; n],
            curr: vec![None; n],
            idle_mask: CpuSet::full(n),
            pending_overhead_ns: vec![0; n],
            active: vec![false; n],
            idle_busy_until_ns: vec![start_ns; n],
            need_resched: vec![false; n],
            need_resched_lazy: vec![false; n],
            rq_clock_skip_ns: vec![None; n],
            preempt: PreemptModel::None,
            preemption_built: false,
            requests: Vec::new(),
            this_cpu: 0,
            waiting: vec![0; n],
            irq: IrqOffStats::new(n),
            waiting_on_busy: 0,
            idle_count: n as u64,
            idle_from: Vec::new(),
            idle_from_min_ns: u64::MAX,
            working: vec![false; n],
            wasted_ns: 0,
            wasted_since_ns: start_ns,
            state_changed: Vec::new(),
            state_changed_list: Vec::new(),
            topo,
            cost,
            tasks: Vec::new(),
        }
    }

    pub fn ncpus(&self) -> usize {
        self.topo.ncpus()
    }

    /// The CPU running the current kernel path (`smp_processor_id()`): the waker in a
    /// wakeup, the CPU scheduling or ticking. Policies charge work they do to it.
    pub fn this_cpu(&self) -> usize {
        self.this_cpu
    }

    /// When the work charged to `cpu` so far ends: a busy CPU's pending scheduler
    /// work, or an idle CPU's switch into idle and interrupt work behind it.
    pub fn charged_until_ns(&self, cpu: usize) -> u64 {
        if self.active[cpu] {
            self.now_ns + self.pending_overhead_ns[cpu]
        } else {
            self.idle_busy_until_ns[cpu].max(self.now_ns)
        }
    }

    /// `test_tsk_need_resched(rq->curr)`: a reschedule of `cpu` is already pending.
    pub fn need_resched(&self, cpu: usize) -> bool {
        self.need_resched[cpu]
    }

    pub fn cpu_state(&self, cpu: usize) -> CpuState {
        self.cpu_state[cpu]
    }

    /// The task running on `cpu` (`rq->curr`), None for the idle task.
    pub fn curr(&self, cpu: usize) -> Option<TaskId> {
        self.curr[cpu]
    }

    /// The clock `__schedule()` on `cpu` charges the task leaving and starts the
    /// one picked with: now, unless a wakeup from another CPU asked it to
    /// reschedule. Then `wakeup_preempt()` (`check_preempt_curr()` before v6.8)
    /// asked `rq_clock_skip_update()`, `__schedule()` skips its clock update,
    /// and the clock is that of the runqueue's last update (the wakeup's, or a
    /// later tick's or enqueue's): what ran since, the reschedule IPI's flight
    /// and handling included, is charged to the task switched in, not to the one
    /// that ran (kernel/sched/core.c, v3.0 to v6.18). A Linux policy reads it in
    /// its pick and in the dequeue of a task that blocks.
    pub fn rq_clock(&self, cpu: usize) -> u64 {
        self.rq_clock_skip_ns[cpu].unwrap_or(self.now_ns)
    }

    /// `update_rq_clock()` of `cpu`'s runqueue by work on it from elsewhere (a
    /// wakeup onto it, its tick, a balancer moving a task to or from it): a
    /// skipped `__schedule()` clock is then this one.
    pub fn rq_clock_update(&mut self, cpu: usize) {
        if let Some(t) = self.rq_clock_skip_ns[cpu].as_mut() {
            *t = self.now_ns;
        }
    }

    /// Idle and not already woken: the engine's part of `idle_cpu()`; a policy also
    /// checks its own `nr_running`.
    pub fn cpu_idle(&self, cpu: usize) -> bool {
        self.cpu_state[cpu] == CpuState::Idle
    }

    /// CPUs that are idle and not kicked.
    pub fn idle_mask(&self) -> &CpuSet {
        &self.idle_mask
    }

    /// Charges `ns` of scheduler work to `cpu`; it delays what `cpu` does next. On a
    /// CPU that is idle (work done from interrupt context, or before the first task
    /// exists) it is booked as busy time at once and delays only the CPU's next
    /// reschedule, which waits for the interrupt to return.
    pub fn charge(&mut self, cpu: usize, kind: Charge, ns: u64) {
        if self.active[cpu] {
            self.pending_overhead_ns[cpu] += ns;
        } else {
            // Work an idle CPU does in interrupt context (a timer's wakeup, a
            // balance): busy for that long, after what it is still doing, so not
            // idle for wasted core-time. Kicked CPUs too: two timers may fire
            // before the first one's wakeup has been scheduled.
            self.stats[cpu].busy_ns += ns;
            let until = self.idle_busy_until_ns[cpu].max(self.now_ns) + ns;
            self.idle_busy_until_ns[cpu] = until;
            if ns > 0 {
                self.idle_from(cpu, until);
            }
        }
        match kind {
            Charge::Sched => self.stats[cpu].sched_ns += ns,
            Charge::Find => self.stats[cpu].find_ns += ns,
        }
    }

    /// When an IPI that `from` sends `after_ns` from now (behind work of the same
    /// call that comes first) leaves it: after the send, which is charged here,
    /// `send_ns` long. `ipi_latency_ns` counts from then, as `schedlab calibrate`
    /// derives it.
    pub fn send_ipi(&mut self, from: usize, after_ns: u64, send_ns: u64) -> u64 {
        self.charge(from, Charge::Sched, send_ns);
        self.now_ns + after_ns + send_ns
    }

    /// A search that looked at `cpus` CPUs, took `locks` runqueue locks and examined
    /// `tasks` tasks, priced by the machine profile.
    pub fn charge_search(&mut self, cpu: usize, cpus: u64, locks: u64, tasks: u64) {
        let c = &self.cost.sched_ops;
        let ns = cpus * c.per_cpu_scanned_ns + locks * c.per_rq_lock_ns + tasks * c.per_task_examined_ns;
        self.charge(cpu, Charge::Find, ns);
    }

    /// Charges `ns` of scheduler work that `cpu` runs with interrupts disabled (a
    /// spin lock section: `spinlock_enter()` on FreeBSD, `raw_spin_lock_irq` on
    /// Linux). The section starts when the CPU's earlier scheduler work ends; an
    /// interrupt (an IPI) reaching the CPU inside it waits for its end.
    /// `site` names the kernel function holding the section, for the breakdown.
    pub fn charge_irq_off(&mut self, cpu: usize, kind: Charge, site: &'static str, ns: u64) {
        let start = if self.active[cpu] { self.now_ns + self.pending_overhead_ns[cpu] } else { self.now_ns };
        self.charge(cpu, kind, ns);
        let end = start + ns;
        let irq = &mut self.irq;
        irq.masked_until_ns[cpu] = irq.masked_until_ns[cpu].max(end);
        irq.total_ns += ns;
        let _ = irq.sections.record(ns.max(1));
        let _ = irq.by_site.entry(site).or_insert_with(latency_histogram).record(ns.max(1));
    }

    /// `resched_curr()` of a remote runqueue, asked from `from`: the engine sends the
    /// IPI (or wakes the idle CPU) once the policy call returns.
    pub fn resched_cpu(&mut self, cpu: usize, from: usize) {
        self.requests.push(Request::Resched { cpu, from });
    }

    /// Asks for `SchedClass::idle_poll(cpu)` at `at_ns`, if `cpu` is still idle (not
    /// woken) then: an idle thread whose work goes on after the CPU looks idle.
    pub fn idle_poll_at(&mut self, cpu: usize, at_ns: u64) {
        self.requests.push(Request::IdlePoll { cpu, at_ns });
    }

    /// `set_task_cpu()`: record that `p` now belongs to `cpu`'s runqueue. Policies
    /// call it when they move a queued task (load balance, steal).
    pub fn set_task_cpu(&mut self, p: TaskId, cpu: usize) {
        let from = self.tasks[p].cpu;
        if from == cpu {
            return;
        }
        if self.tasks[p].state == TaskState::Runnable {
            self.unmark_waiting(p);
            self.tasks[p].cpu = cpu;
            self.mark_waiting(p);
        } else {
            self.tasks[p].cpu = cpu;
        }
        self.tasks[p].migrations += 1;
        self.stats[cpu].migrations_in += 1;
        self.requests.push(Request::Migrated { p, from, to: cpu });
    }

    /// Distance class between two CPUs.
    pub fn distance(&self, a: usize, b: usize) -> Distance {
        self.topo.distance_class(a, b)
    }

    // ---- wasted core-time: ∫ min(idle CPUs, tasks waiting behind a busy CPU) dt ----

    fn wasted_advance(&mut self) {
        let (since, now) = (self.wasted_since_ns, self.now_ns);
        if self.idle_from.is_empty() {
            self.wasted_ns += self.idle_count.min(self.waiting_on_busy) * (now - since);
        } else if self.idle_from_min_ns > now {
            // None has ended: all of them are still not idle, as the sweep
            // below would find.
            let not_yet = self.idle_from.len() as u64;
            self.wasted_ns += self.idle_count.saturating_sub(not_yet).min(self.waiting_on_busy) * (now - since);
        } else {
            // Piecewise: each CPU still switching into idle joins the idle count
            // when its switch ends.
            self.idle_from.sort_unstable_by_key(|&(cpu, at)| (at, cpu));
            let mut not_yet = self.idle_from.len() as u64;
            let mut t = since;
            for &(_, at) in &self.idle_from {
                if at > now {
                    break;
                }
                let idle = self.idle_count.saturating_sub(not_yet);
                self.wasted_ns += idle.min(self.waiting_on_busy) * at.saturating_sub(t);
                t = t.max(at);
                not_yet -= 1;
            }
            self.wasted_ns += self.idle_count.saturating_sub(not_yet).min(self.waiting_on_busy) * (now - t);
            self.idle_from.retain(|&(_, at)| at > now);
            self.idle_from_min_ns = self.idle_from.first().map_or(u64::MAX, |&(_, at)| at);
        }
        self.wasted_since_ns = now;
    }

    /// An idle `cpu` starts (`true`) or stops running the scheduler without
    /// leaving the idle state: for wasted core-time it is not idle meanwhile.
    pub(crate) fn set_working(&mut self, cpu: usize, working: bool) {
        if self.cpu_state[cpu] != CpuState::Idle || self.working[cpu] == working {
            return;
        }
        self.wasted_advance();
        if working {
            self.idle_count -= 1;
        } else {
            self.idle_count += 1;
        }
        self.working[cpu] = working;
    }

    /// `cpu`, just marked idle, finishes its switch into idle at `at_ns`: until
    /// then it is busy in its own accounting, so not idle for wasted core-time.
    pub(crate) fn idle_from(&mut self, cpu: usize, at_ns: u64) {
        if at_ns > self.now_ns && self.cpu_state[cpu] == CpuState::Idle {
            self.wasted_advance();
            match self.idle_from.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, at)) => *at = (*at).max(at_ns),
                None => self.idle_from.push((cpu, at_ns)),
            }
            self.idle_from_min_ns = self.idle_from_min_ns.min(at_ns);
        }
    }

    pub(crate) fn wasted_ns(&mut self) -> u64 {
        self.wasted_advance();
        self.wasted_ns
    }

    /// `p` (state Runnable) now waits on `tasks[p].cpu`.
    pub(crate) fn mark_waiting(&mut self, p: TaskId) {
        self.wasted_advance();
        let cpu = self.tasks[p].cpu;
        self.waiting[cpu] += 1;
        if self.cpu_state[cpu] == CpuState::Busy {
            self.waiting_on_busy += 1;
        }
    }

    pub(crate) fn unmark_waiting(&mut self, p: TaskId) {
        self.wasted_advance();
        let cpu = self.tasks[p].cpu;
        self.waiting[cpu] -= 1;
        if self.cpu_state[cpu] == CpuState::Busy {
            self.waiting_on_busy -= 1;
        }
    }

    pub(crate) fn set_cpu_state(&mut self, cpu: usize, state: CpuState) {
        let old = self.cpu_state[cpu];
        if old == state {
            return;
        }
        self.wasted_advance();
        if old == CpuState::Busy {
            self.waiting_on_busy -= self.waiting[cpu];
        }
        if state == CpuState::Busy {
            self.waiting_on_busy += self.waiting[cpu];
        }
        if old == CpuState::Idle {
            if !std::mem::take(&mut self.working[cpu]) {
                self.idle_count -= 1;
            }
            self.idle_mask.clear(cpu);
            self.idle_from.retain(|&(c, _)| c != cpu);
        }
        if state == CpuState::Idle {
            self.idle_count += 1;
            self.idle_mask.set(cpu);
        }
        if let Some(changed) = self.state_changed.get_mut(cpu).filter(|c| !**c) {
            *changed = true;
            self.state_changed_list.push(cpu);
        }
        self.cpu_state[cpu] = state;
    }

    /// Keep the CPUs whose state changes from now on, for `take_state_changes()`
    /// (a policy that keeps its own copy of which CPUs are idle asks once).
    pub fn track_state_changes(&mut self) {
        self.state_changed = vec![false; self.ncpus()];
        self.state_changed_list.clear();
    }

    /// Whether `track_state_changes()` was asked for.
    pub fn state_changes_tracked(&self) -> bool {
        !self.state_changed.is_empty()
    }

    /// Calls `f` for every CPU whose state changed since the last call, each
    /// once, in the order of their first change, and forgets them.
    pub fn take_state_changes(&mut self, mut f: impl FnMut(usize)) {
        for &cpu in &self.state_changed_list {
            self.state_changed[cpu] = false;
            f(cpu);
        }
        self.state_changed_list.clear();
    }
}
