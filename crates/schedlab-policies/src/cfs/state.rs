//! The fair class's state, shared by every modelled version (v3.0 to v6.18):
//! `struct sched_entity` (include/linux/sched.h), `struct cfs_rq`, `struct rq` and
//! `struct task_group` (kernel/sched/sched.h), and the model that holds them. What
//! the kernel does with them lives in the files that use this one: `fair` (entity
//! timing, enqueue and dequeue, the class hooks), `eevdf` (v6.6+), `group` (task
//! groups), `select` (placement), `balance` with `balance3` / `balance5` (load
//! balancing).

use schedlab_core::cpuset::CpuSet;
use schedlab_core::error::SpecError;
use schedlab_core::task::TaskId;

use super::domains::{CpuDomains, KernelVersion};
use super::features::Features;
use super::pelt::SchedAvg;
use super::scan::ScanRows;
use super::sysctl::{Sysctls, NORMALIZED_BASE_SLICE_NS, NORMALIZED_BASE_SLICE_V615_NS};
use super::tree::EntityTree;
use super::weights::{LoadRes, LoadWeight};

/// A scheduling entity: a task, or group `g`'s entity on CPU `cpu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ent {
    Task(TaskId),
    Group(usize, usize),
}

/// Per-entity fair state (`struct sched_entity`, plus the task fields CFS reads).
#[derive(Clone, Debug)]
pub struct Se {
    pub load: LoadWeight,
    pub vruntime: u64,
    pub exec_start_ns: u64,
    pub sum_exec_runtime_ns: u64,
    pub prev_sum_exec_runtime_ns: u64,
    pub on_rq: bool,
    /// The CPU whose cfs_rq this entity is (or was last) queued on; `usize::MAX`
    /// before its load was first attached anywhere.
    pub rq_cpu: usize,
    pub avg: SchedAvg,
    /// `p->wakee_flips`, `p->wakee_flip_decay_ts` (jiffies), `p->last_wakee`.
    pub wakee_flips: u64,
    pub wakee_flip_decay_ts: u64,
    pub last_wakee: Option<TaskId>,
    /// `p->recent_used_cpu`.
    pub recent_used_cpu: usize,
    /// Links in `rq->cfs_tasks` (`se->group_node`): the CPU whose list holds
    /// the task, and its neighbours there, less and more recently picked.
    pub mru_cpu: Option<usize>,
    pub mru_older: Option<TaskId>,
    pub mru_newer: Option<TaskId>,
    /// Key in the timeline while queued and not running.
    pub tree_key: Option<(u64, u64)>,
    /// EEVDF: the slice this entity was counted with in its cfs_rq's
    /// `queued_slices` when it entered the timeline.
    pub tree_slice_ns: u64,
    /// EEVDF (v6.6+): the virtual deadline, `vruntime` + the slice in virtual time.
    pub deadline: u64,
    /// EEVDF: the slice this entity requests (`se->slice`), ns.
    pub slice_ns: u64,
    /// EEVDF: `se->vlag`, V - vruntime saved at dequeue; v6.6/v6.12 also store the
    /// deadline here while the entity runs protected (RUN_TO_PARITY).
    pub vlag: i64,
    /// EEVDF v6.18: `se->vprot`, the vruntime up to which the running entity is
    /// protected.
    pub vprot: u64,
    /// v6.12+: `se->custom_slice` (sched_attr.sched_runtime was set).
    pub custom_slice: bool,
    /// v6.12+: `se->rel_deadline`: `deadline` holds deadline - vruntime.
    pub rel_deadline: bool,
    /// v6.12+: `se->sched_delayed`: asleep but still queued (DELAY_DEQUEUE).
    pub sched_delayed: bool,
    /// A task's `se->avg.util_est` (v4.17+ UTIL_EST): v6.8+ its one value, the
    /// estimate of its utilisation taken at its sleeps, with UTIL_AVG_UNCHANGED
    /// in the top bit; v4.17-v6.7 `util_est.ewma`, the moving average.
    pub util_est: u32,
    /// v4.17-v6.7 `se->avg.util_est.enqueued`: the task's utilisation at its last
    /// sleep, with UTIL_AVG_UNCHANGED (its lowest bit before v5.13, its top bit
    /// from v5.13).
    pub util_est_enqueued: u32,
    /// Key in the EEVDF deadline index while in the tree.
    pub dl_key: Option<(u64, u64)>,
}

impl Se {
    /// An entity with nothing set.
    pub fn blank() -> Se {
        Se {
            load: LoadWeight::new(0),
            vruntime: 0,
            exec_start_ns: 0,
            sum_exec_runtime_ns: 0,
            prev_sum_exec_runtime_ns: 0,
            on_rq: false,
            rq_cpu: usize::MAX,
            avg: SchedAvg::default(),
            wakee_flips: 0,
            wakee_flip_decay_ts: 0,
            last_wakee: None,
            recent_used_cpu: 0,
            mru_cpu: None,
            mru_older: None,
            mru_newer: None,
            tree_key: None,
            tree_slice_ns: 0,
            deadline: 0,
            slice_ns: 0,
            vlag: 0,
            vprot: 0,
            custom_slice: false,
            rel_deadline: false,
            sched_delayed: false,
            util_est: 0,
            util_est_enqueued: 0,
            dl_key: None,
        }
    }
}

/// The ends of a runqueue's `cfs_tasks` list (a `list_head`): `list_move()`
/// puts a task at the most recently picked end, `detach_tasks()` starts at the
/// other.
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskList {
    pub oldest: Option<TaskId>,
    pub newest: Option<TaskId>,
}

/// `struct cfs_rq`: a CPU's root runqueue, or a task group's on that CPU.
///
/// Laid out in declaration order (`repr(C)`) with what the load balancer reads of
/// every CPU first, so that a scan of a thousand runqueues touches one or two
/// cache lines of each.
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct CfsRq {
    pub avg: SchedAvg,
    /// Tasks queued here or below.
    pub h_nr_running: usize,
    /// The rbtree: (vruntime, insertion order, entity). Equal keys go right.
    pub timeline: EntityTree<(u64, u64, Ent)>,
    /// EEVDF: the same entities by (deadline, insertion order), the order v6.12's
    /// tree uses and where `pick_eevdf()` finds the earliest eligible deadline.
    pub by_deadline: EntityTree<(u64, u64, Ent)>,
    /// EEVDF: the slices of the entities in the timeline, (slice, how many),
    /// shortest first: what the kernel's tree keeps as its augmented
    /// `min_slice` (v6.12+), read by `cfs_rq_min_slice()`.
    pub queued_slices: Vec<(u64, u32)>,
    /// EEVDF: `cfs_rq->avg_vruntime`, Σ (vruntime - min_vruntime) · weight over the
    /// tree (the running entity is added on the fly), and `avg_load`, Σ weight.
    pub avg_vruntime: i64,
    pub avg_load: u64,
    pub curr: Option<Ent>,
    /// Entities queued here (tasks and group entities).
    pub nr_running: usize,
    pub load: LoadWeight,
    /// Sum of queued entities' runnable weights (`cfs_rq->runnable_weight`).
    pub runnable_weight: u64,
    pub min_vruntime: u64,
    pub next: Option<Ent>,
    pub last: Option<Ent>,
    pub skip: Option<Ent>,
    /// `rq->cfs_tasks` (root runqueues only): its least and most recently
    /// picked ends; the links are the tasks' (`Se::mru_older`, `Se::mru_newer`).
    pub cfs_tasks: TaskList,
    /// What this cfs_rq last published to `tg->load_avg`.
    pub tg_load_avg_contrib: u64,
    /// `cfs_rq->avg.util_est` (v4.17+, root cfs_rq only): the summed util_est
    /// of the tasks enqueued here.
    pub util_est: u64,
    /// `cfs_rq->propagate` (v4.10+): an entity attached to or detached from this
    /// group cfs_rq since its group entity last took its signals
    /// (`add_tg_cfs_propagate()`; [`crate::cfs::Cfs::propagate_entity_load_avg`]).
    pub propagate: bool,
    /// `cfs_rq->prop_runnable_sum` (v4.15+): the unweighted load sums of the
    /// entities attached (+) and detached (-) since then, which the group
    /// entity's load takes at its next update (`update_tg_cfs_load()`).
    pub prop_runnable_sum: i64,
    /// When this cfs_rq last published to `tg->load_avg` (v6.7+, which publishes
    /// at most once a millisecond per cfs_rq); None before the first time.
    pub last_update_tg_load_avg_ns: Option<u64>,
    /// `cfs_rq->h_load` and the jiffy it was computed in.
    pub h_load: u64,
    pub last_h_load_update: Option<u64>,
    /// v3.0 group load window (`update_cfs_load()`): ∑ load.weight × ns over the
    /// window (`cfs_rq->load_avg`), its length, when it was last folded and last
    /// saw load, what it publishes to `tg->load_weight`, and run time not yet
    /// folded in (`load_unacc_exec_time`).
    pub v30_load_avg: u128,
    pub load_period_ns: u64,
    pub load_stamp_ns: u64,
    pub load_last_ns: u64,
    pub load_contribution: u64,
    pub load_unacc_exec_ns: u64,
}

/// What a CPU's stopper thread does once it has preempted the running task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopperWork {
    /// `active_load_balance_cpu_stop()`: push a task to `dst`.
    ActiveBalance { dst: usize },
    /// `migration_cpu_stop()` for `sched_exec()`: move `p` to `dst`.
    Migrate { p: TaskId, dst: usize },
}

/// `struct rq`, fair-relevant parts, what the load balancer reads first (see
/// [`CfsRq`]).
#[derive(Clone, Debug)]
#[repr(C)]
pub struct Rq {
    pub cpu_capacity: u64,
    /// v6.12+: tasks asleep but still queued here (delayed dequeue). They count in
    /// `h_nr_running` (as in v6.12) but not in what the engine sees as runnable.
    pub nr_delayed: usize,
    pub cfs: CfsRq,
    pub avg_idle_ns: u64,
    /// v5.15 `rq->wake_avg_idle`: half of avg_idle at the last wakeup from idle,
    /// halved per jiffy since (`wake_stamp`) and spent by idle-CPU scans.
    pub wake_avg_idle_ns: u64,
    pub wake_stamp: u64,
    pub idle_stamp_ns: Option<u64>,
    /// The end of the newly idle balancing pass that found work: `idle_stamp_ns`
    /// stays set until then (see `newidle_pass_takes_wakeups()`). None while the
    /// stamp marks a CPU that went idle.
    pub idle_stamp_until_ns: Option<u64>,
    pub max_idle_balance_cost_ns: u64,
    pub next_balance: u64,
    /// `rq->cpu_load[]`, v4.19's per-tick decayed load indexes.
    pub cpu_load: [u64; 5],
    pub last_load_update_tick: u64,
    /// Work queued for this CPU's stopper, done at its next switch (the stopper
    /// preempts the running task first).
    pub stopper: Option<StopperWork>,
    /// This idle CPU was kicked to run NOHZ idle balancing.
    pub nohz_kick: bool,
    /// The task this CPU's levels last picked (`rq->curr` for the fair class).
    pub curr_task: Option<TaskId>,
    /// EEVDF: a `resched_curr()` asked inside a hook, for `flush_resched()`.
    pub resched_pending: bool,
}

/// How an entity enters its cfs_rq (`ENQUEUE_WAKEUP`, `ENQUEUE_MIGRATED`,
/// `ENQUEUE_INITIAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnqueueFlags {
    pub wakeup: bool,
    pub migrated: bool,
    pub initial: bool,
}

/// How an entity leaves its cfs_rq (the kernel's `DEQUEUE_*` flags that decide).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DequeueKind {
    /// Not a sleep (`DEQUEUE_SAVE`/`MOVE`): migration, group change, reweight.
    Save,
    /// A task going to sleep (`DEQUEUE_SLEEP`): v6.12+ may delay it.
    Sleep,
    /// A sleep that must not be delayed (`DEQUEUE_SPECIAL`: an exiting task).
    Special,
    /// The final dequeue of a delayed entity, task or group, once it is picked
    /// (`DEQUEUE_SLEEP | DEQUEUE_DELAYED`).
    Delayed,
}

/// The model of one release (`cfs@3.0` to `eevdf@6.18`) with its features and
/// sysctls: every CPU's runqueue, every task's entity, every task group.
pub struct Cfs {
    pub version: KernelVersion,
    pub feat: Features,
    pub sysctl: Sysctls,
    pub res: LoadRes,
    pub se: Vec<Se>,
    /// Each task's group (`task_group(p)`), by TaskId.
    pub task_group: Vec<usize>,
    /// Task groups; `tg[0]` is the root.
    pub tg: Vec<TaskGroup>,
    pub rq: Vec<Rq>,
    pub doms: Vec<CpuDomains>,
    /// Per LLC (indexed by `sd_llc_id`): `sd_llc_shared->has_idle_cores`.
    pub has_idle_cores: Vec<bool>,
    /// Per LLC: `sd_llc->avg_scan_cost`.
    pub avg_scan_cost_ns: Vec<u64>,
    /// Per LLC: `sd_llc_shared->nr_idle_scan` (SIS_UTIL), 0 until the first
    /// periodic balance at the LLC level sets it.
    pub nr_idle_scan: Vec<u64>,
    /// `select_idle_cpu()`'s per-call copy of the LLC span (the kernel's per-CPU
    /// `select_rq_mask`), kept here so a wakeup does not allocate one.
    pub sis_cpus: CpuSet,
    /// The balancer's dense copy of each root runqueue's scanned fields.
    pub scan: ScanRows,
    /// Per LLC: STEAL's `cfs_overload_cpus`.
    pub overload_cpus: Vec<CpuSet>,
    /// `rd->overload`.
    pub rd_overload: bool,
    /// NOHZ: `nohz.next_balance` (jiffies).
    pub nohz_next_balance: u64,
    pub tree_seq: u64,
    pub nr_total: usize,
    pub tick_ns: u64,
    /// STEAL is off on machines with more NUMA nodes than this (`sched_steal_node_limit`).
    pub steal_node_limit: usize,
    pub steal_enabled: bool,
    /// `--sysctl` settings, applied over the boot values once the CPU count is known.
    pub(crate) pending_sysctls: Vec<(String, String)>,
    /// EEVDF: CPUs with `resched_pending` set.
    pub resched_cpus: Vec<usize>,
    /// EEVDF: the previous and the picked chains of `pick_next_task_eevdf()`,
    /// kept between picks.
    pub pick_buffers: (Vec<Ent>, Vec<Ent>),
}

/// Where every cfs_rq's min_vruntime starts. The kernel starts just below 2^64 to
/// exercise wrapping; here vruntimes stay far from 0 so that a task carrying a
/// negative relative vruntime to a fresh queue still sorts as a small absolute value
/// and u64 ordering equals the kernel's signed-difference ordering.
pub const MIN_VRUNTIME_START: u64 = 1 << 40;

/// `struct task_group`, per-CPU parts included. Group 0 is the root: its cfs_rqs
/// are the CPUs' own (`rq->cfs`) and it has no entities.
#[derive(Clone, Debug)]
pub struct TaskGroup {
    pub parent: usize,
    /// Depth of the entities queued on this group's cfs_rqs (`se->depth`): 0 for
    /// the root's, 1 for a child's.
    pub level: u32,
    /// `tg->shares`, scaled by the load resolution.
    pub shares: u64,
    /// `tg->load_avg`: the sum of the per-CPU contributions.
    pub load_avg: u64,
    /// v3.0 `tg->load_weight`: the sum of the per-CPU `load_contribution`s.
    pub load_weight: u64,
    pub cfs_rq: Vec<CfsRq>,
    pub se: Vec<Se>,
}

impl Cfs {
    /// `cfs@4.19` with `features` (`STEAL`, `NO_WA_IDLE`, …) and sysctls.
    pub fn new(version: &str, features: Option<&str>, sysctls: &[(String, String)]) -> Result<Cfs, SpecError> {
        let Some(version) = KernelVersion::parse(version) else {
            return Err(SpecError::new("cfs version", version, "a modelled version: 3.0, 4.19, 5.10 or 5.15"));
        };
        Cfs::with_version(version, features, sysctls)
    }

    /// `eevdf@6.6`, `eevdf@6.12` or `eevdf@6.18` with features and sysctls.
    pub fn new_eevdf(version: &str, features: Option<&str>, sysctls: &[(String, String)]) -> Result<Cfs, SpecError> {
        let Some(version) = KernelVersion::parse_eevdf(version) else {
            return Err(SpecError::new("eevdf version", version, "a modelled version: 6.6, 6.12 or 6.18"));
        };
        Cfs::with_version(version, features, sysctls)
    }

    /// The base slice before CPU scaling: 0.75 ms, 0.70 ms from v6.15.
    pub fn normalized_base_slice_ns(version: KernelVersion) -> Option<u64> {
        match version {
            v if v >= KernelVersion::V6_18 => Some(NORMALIZED_BASE_SLICE_V615_NS),
            v if v.eevdf() => Some(NORMALIZED_BASE_SLICE_NS),
            _ => None,
        }
    }

    fn with_version(version: KernelVersion, features: Option<&str>, sysctls: &[(String, String)]) -> Result<Cfs, SpecError> {
        let mut feat = Features::for_version(version);
        if let Some(f) = features {
            feat.apply(f)?;
        }
        // Sysctls are checked now against a placeholder CPU count; init() re-applies
        // them over the real boot values.
        let res = if feat.load_resolution { LoadRes::HIGH } else { LoadRes::LOW };
        let mut probe = Sysctls::boot_with(1, Cfs::normalized_base_slice_ns(version));
        probe.apply(sysctls)?;
        Ok(Cfs {
            version,
            feat,
            sysctl: probe,
            res,
            se: Vec::new(),
            task_group: Vec::new(),
            tg: Vec::new(),
            rq: Vec::new(),
            doms: Vec::new(),
            has_idle_cores: Vec::new(),
            avg_scan_cost_ns: Vec::new(),
            nr_idle_scan: Vec::new(),
            sis_cpus: CpuSet::default(),
            scan: ScanRows::default(),
            overload_cpus: Vec::new(),
            rd_overload: false,
            nohz_next_balance: 0,
            tree_seq: 0,
            nr_total: 0,
            tick_ns: 4_000_000,
            steal_node_limit: 2,
            steal_enabled: false,
            pending_sysctls: sysctls.to_vec(),
            resched_cpus: Vec::new(),
            pick_buffers: (Vec::new(), Vec::new()),
        })
    }
}
