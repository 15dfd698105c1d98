//! Linux scheduling domains and groups, built from a [`Topology`].
//!
//! This re-derives what `kernel/sched/topology.c` does at boot on x86 for three kernel
//! versions (v4.19, v5.10, v5.15):
//!
//! 1. the topology levels: x86's `x86_topology[]` (SMT, MC, DIE) followed by the levels
//!    `sched_init_numa()` appends (NODE at the local distance, then one NUMA level per
//!    larger distinct node distance);
//! 2. for every CPU, one domain per level from `sd_init()`, stopping early once a domain
//!    spans every CPU (`build_sched_domains()`);
//! 3. the groups of every domain (`build_sched_groups()`, or `build_overlap_sched_groups()`
//!    for NUMA levels);
//! 4. the removal of domains that do not contribute (`cpu_attach_domain()` with
//!    `sd_degenerate()` / `sd_parent_degenerate()`);
//! 5. the per-CPU shortcuts `sd_llc`, `sd_llc_size`, `sd_llc_id`, `sd_numa`
//!    (`update_top_cache_domain()`).
//!
//! Our [`Topology`] has one NUMA node per package, so DIE (x86's `cpu_cpu_mask()`, which is
//! the CPU's node) is the package, MC is the last-level-cache span (x86's
//! `cpu_coregroup_mask()` returns `cpu_llc_shared_mask()`) and SMT the core's threads. The
//! x86 "NUMA in package" topology (several nodes per package, no DIE level) does not arise.
//!
//! Not modelled: cpusets / isolated CPUs (the CPU map is always every CPU),
//! `relax_domain_level`, ITMT and asymmetric-capacity flags (`SD_ASYM_*`), and the AMD Zen
//! override that raises `node_reclaim_distance` to 32 in 5.x (we always use
//! [`RECLAIM_DISTANCE`] = 30).
//!
//! Where to read the originals (`kernel/sched/topology.c`; versions as in
//! the research notes `linux-sched.md` §0: 4.19.0, 5.10.7, 5.15.24):
//!
//! | function | v4.19 | v5.10 | v5.15 |
//! |---|---|---|---|
//! | `sd_degenerate` | L148 | L170 | L170 |
//! | `sd_parent_degenerate` | L174 | L188 | L188 |
//! | `update_top_cache_domain` | L402 | L639 | L653 |
//! | `cpu_attach_domain` | L433 | L673 | L687 |
//! | `build_balance_mask` | L612 | L852 | L870 |
//! | `find_descended_sibling` | — | — | L957 |
//! | `build_overlap_sched_groups` | L698 | L939 | L982 |
//! | `get_group` | L828 | L1069 | L1147 |
//! | `build_sched_groups` | L866 | L1114 | L1192 |
//! | `sd_init` | L1080 | L1322 | L1512 |
//! | `sched_init_numa` | L1325 | L1552 | L1749 |
//! | `build_sched_domain` | L1605 | L1852 | L2106 |
//! | `build_sched_domains` | L1640 | L1982 | L2177 |
//!
//! Also `arch/x86/kernel/smpboot.c: x86_topology[]` (v4.19 L499), `cpu_coregroup_mask()`
//! (v4.19 L587), `include/linux/topology.h: cpu_cpu_mask()`, and v4.19
//! `kernel/sched/sched.h: arch_scale_cpu_capacity()` (L1762).

use std::collections::BTreeMap;
use std::sync::Arc;

use schedlab_core::cpuset::CpuSet;
use schedlab_core::topology::Topology;

/// The kernel whose domain-building rules are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelVersion {
    /// The domains and flags of v4.19; balancing on instantaneous `rq->load.weight`
    /// without PELT (`balance3.rs`), the load-resolution seed's kernel.
    V3_0,
    /// `SD_LOAD_BALANCE`, load indexes, `smt_gain`; busy_factor 32, default imbalance 125%.
    V4_19,
    /// No `SD_LOAD_BALANCE` / load indexes / `smt_gain`; PREFER_SIBLING by default;
    /// busy_factor 16, default imbalance 117%; 5.x degenerate-flag masks.
    V5_10,
    /// As v5.10, plus `sched_init_numa()` over the whole distance table and
    /// `find_descended_sibling()` for NUMA groups.
    V5_15,
    /// EEVDF (`eevdf@6.6`): the domains and balancer of v5.15; entity timing in
    /// `eevdf.rs`. The tree is ordered by vruntime.
    V6_6,
    /// `eevdf@6.12`: "Complete EEVDF": delayed dequeue, PREEMPT_SHORT, custom
    /// slices, PLACE_REL_DEADLINE; the tree ordered by deadline.
    V6_12,
    /// `eevdf@6.18`: the protected slice (`vprot`), a 0.70 ms base slice, PICK_BUDDY,
    /// `h_nr_runnable` in the balancer, yield that forfeits.
    V6_18,
}

impl KernelVersion {
    /// The version as written in a policy name (`cfs@5.15`).
    pub fn name(self) -> &'static str {
        match self {
            KernelVersion::V3_0 => "3.0",
            KernelVersion::V4_19 => "4.19",
            KernelVersion::V5_10 => "5.10",
            KernelVersion::V5_15 => "5.15",
            KernelVersion::V6_6 => "6.6",
            KernelVersion::V6_12 => "6.12",
            KernelVersion::V6_18 => "6.18",
        }
    }

    /// A CFS version (`cfs@…`).
    pub fn parse(s: &str) -> Option<KernelVersion> {
        [KernelVersion::V3_0, KernelVersion::V4_19, KernelVersion::V5_10, KernelVersion::V5_15]
            .into_iter()
            .find(|v| v.name() == s)
    }

    /// An EEVDF version (`eevdf@…`).
    pub fn parse_eevdf(s: &str) -> Option<KernelVersion> {
        [KernelVersion::V6_6, KernelVersion::V6_12, KernelVersion::V6_18].into_iter().find(|v| v.name() == s)
    }

    /// EEVDF entity timing (v6.6+) instead of CFS's.
    pub fn eevdf(self) -> bool {
        self >= KernelVersion::V6_6
    }

    /// The policy family as written in a policy name.
    pub fn family(self) -> &'static str {
        if self.eevdf() {
            "eevdf"
        } else {
            "cfs"
        }
    }

    /// Before the v5.5 balancer rework: `SD_LOAD_BALANCE`, load indexes, `smt_gain`.
    pub fn pre_rework(self) -> bool {
        matches!(self, KernelVersion::V3_0 | KernelVersion::V4_19)
    }
}

/// The topology level a domain was built for.
///
/// The kernel's NODE level (the NUMA identity distance added by `sched_init_numa()`) has the
/// same span as DIE on every machine our [`Topology`] describes with sane distances, so it is
/// always removed as degenerate. If a distance table puts another node at the local
/// distance, it survives and is reported as `Numa(local distance)` (without `SD_NUMA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Hardware threads of one core (`cpu_smt_mask`).
    Smt,
    /// Cores sharing the last-level cache (`cpu_coregroup_mask`).
    Mc,
    /// The package, i.e. the NUMA node (`cpu_cpu_mask`).
    Die,
    /// All nodes within this SLIT distance (`sd_numa_mask`).
    Numa(u32),
}

impl Level {
    /// The kernel's `sd->name` for the level.
    pub fn name(&self) -> &'static str {
        match self {
            Level::Smt => "SMT",
            Level::Mc => "MC",
            Level::Die => "DIE",
            Level::Numa(_) => "NUMA",
        }
    }
}

// Domain flags, with the values of v4.19 `include/linux/sched/topology.h` for every version
// (5.x generates other values from `sd_flags.h`; only the names matter to the simulator).

/// Load balance this domain (v4.19 only; removed in v5.8).
pub const SD_LOAD_BALANCE: u32 = 0x0001;
/// Balance when a CPU is about to become idle.
pub const SD_BALANCE_NEWIDLE: u32 = 0x0002;
/// Balance on exec.
pub const SD_BALANCE_EXEC: u32 = 0x0004;
/// Balance on fork and clone.
pub const SD_BALANCE_FORK: u32 = 0x0008;
/// Balance on wakeup (never set by default).
pub const SD_BALANCE_WAKE: u32 = 0x0010;
/// Consider waking a task on the waking CPU.
pub const SD_WAKE_AFFINE: u32 = 0x0020;
/// Groups have different CPU capacities (not produced here).
pub const SD_ASYM_CPUCAPACITY: u32 = 0x0040;
/// Members share CPU capacity (SMT).
pub const SD_SHARE_CPUCAPACITY: u32 = 0x0080;
/// Members share a power domain (v4.19 only; not produced here).
pub const SD_SHARE_POWERDOMAIN: u32 = 0x0100;
/// Members share package resources, i.e. the LLC (renamed `SD_SHARE_LLC` in v6.10).
pub const SD_SHARE_PKG_RESOURCES: u32 = 0x0200;
/// Only one CPU at a time balances this domain (NUMA levels).
pub const SD_SERIALIZE: u32 = 0x0400;
/// Place busy tasks on preferred CPUs (ITMT; not produced here).
pub const SD_ASYM_PACKING: u32 = 0x0800;
/// Prefer to spread tasks to sibling groups.
pub const SD_PREFER_SIBLING: u32 = 0x1000;
/// The groups of this domain overlap (NUMA levels).
pub const SD_OVERLAP: u32 = 0x2000;
/// Cross-node balancing.
pub const SD_NUMA: u32 = 0x4000;

/// Node distance above which a NUMA level loses exec/fork balancing and wake affinity
/// (`RECLAIM_DISTANCE`, `node_reclaim_distance` in 5.x).
pub const RECLAIM_DISTANCE: u32 = 30;
/// Capacity of a full CPU (`SCHED_CAPACITY_SCALE`).
pub const SCHED_CAPACITY_SCALE: u64 = 1024;
/// v4.19 SMT level `smt_gain`: a whole core is worth ~115% of one CPU.
pub const SMT_GAIN: u32 = 1178;
/// SLIT distance of a node to itself (`LOCAL_DISTANCE`).
pub const LOCAL_DISTANCE: u32 = 10;

/// Flag names, for printing.
const FLAG_NAMES: &[(u32, &str)] = &[
    (SD_LOAD_BALANCE, "SD_LOAD_BALANCE"),
    (SD_BALANCE_NEWIDLE, "SD_BALANCE_NEWIDLE"),
    (SD_BALANCE_EXEC, "SD_BALANCE_EXEC"),
    (SD_BALANCE_FORK, "SD_BALANCE_FORK"),
    (SD_BALANCE_WAKE, "SD_BALANCE_WAKE"),
    (SD_WAKE_AFFINE, "SD_WAKE_AFFINE"),
    (SD_ASYM_CPUCAPACITY, "SD_ASYM_CPUCAPACITY"),
    (SD_SHARE_CPUCAPACITY, "SD_SHARE_CPUCAPACITY"),
    (SD_SHARE_POWERDOMAIN, "SD_SHARE_POWERDOMAIN"),
    (SD_SHARE_PKG_RESOURCES, "SD_SHARE_PKG_RESOURCES"),
    (SD_SERIALIZE, "SD_SERIALIZE"),
    (SD_ASYM_PACKING, "SD_ASYM_PACKING"),
    (SD_PREFER_SIBLING, "SD_PREFER_SIBLING"),
    (SD_OVERLAP, "SD_OVERLAP"),
    (SD_NUMA, "SD_NUMA"),
];

/// `flags` as `SD_A|SD_B` (empty string for none), in bit order.
pub fn flags_to_string(flags: u32) -> String {
    let names: Vec<&str> = FLAG_NAMES.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, name)| *name).collect();
    names.join("|")
}

/// Flags that only mean something when the domain has at least two groups
/// (v4.19 `sd_degenerate()`).
const V4_19_NEEDS_GROUPS: u32 = SD_LOAD_BALANCE
    | SD_BALANCE_NEWIDLE
    | SD_BALANCE_FORK
    | SD_BALANCE_EXEC
    | SD_SHARE_CPUCAPACITY
    | SD_ASYM_CPUCAPACITY
    | SD_SHARE_PKG_RESOURCES
    | SD_SHARE_POWERDOMAIN;

/// 5.x `SD_DEGENERATE_GROUPS_MASK`: every flag of `sd_flags.h` marked `SDF_NEEDS_GROUPS`,
/// i.e. all but `SD_WAKE_AFFINE` (5.15's `SD_ASYM_CPUCAPACITY_FULL` is not modelled).
const V5_NEEDS_GROUPS: u32 = SD_BALANCE_NEWIDLE
    | SD_BALANCE_EXEC
    | SD_BALANCE_FORK
    | SD_BALANCE_WAKE
    | SD_ASYM_CPUCAPACITY
    | SD_SHARE_CPUCAPACITY
    | SD_SHARE_PKG_RESOURCES
    | SD_SERIALIZE
    | SD_ASYM_PACKING
    | SD_PREFER_SIBLING
    | SD_OVERLAP
    | SD_NUMA;

/// One group of a domain: a child-domain span (or one CPU at the lowest level).
/// A handle: the CPUs whose domains list the same group share one
/// [`SchedGroupData`], as the kernel's CPUs share their `struct sched_group`s,
/// so a thousand CPUs' balancing passes read a few hundred groups, not a copy
/// each. The few numbers every group scan reads are kept in the handle itself:
/// a scan then reads its domain's groups as one array, where following each
/// group's pointer was a cache miss per group (a fifth of a thousand-CPU newly
/// idle pass's samples).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedGroup {
    /// Which of the machine's distinct group spans this is (0, 1, ...): groups
    /// of equal spans share one number, overlapping NUMA groups built per CPU
    /// included. The balancer keeps its running sums per span (`cfs/scan.rs`).
    pub span_id: usize,
    /// CPUs in the span (`group_weight`), counted once when built.
    pub weight: u64,
    /// Sum of [`cpu_capacity_orig`] over the span (what `update_group_capacity()` computes
    /// on an otherwise idle machine).
    pub capacity: u64,
    /// `sg->cores` (v6.6+): the cores the span touches.
    pub cores: u64,
    /// `sg->flags` (v6.0+): the flags of the child domain the group was built
    /// from, so SD_SHARE_CPUCAPACITY marks a group of SMT siblings; 0 for a group
    /// of one CPU, or whose child domain was degenerate (one CPU) and destroyed.
    pub flags: u32,
    data: Arc<SchedGroupData>,
}

impl std::ops::Deref for SchedGroup {
    type Target = SchedGroupData;

    fn deref(&self) -> &SchedGroupData {
        &self.data
    }
}

/// What a group is (`struct sched_group` and its `sched_group_capacity`),
/// beyond the numbers its handle [`SchedGroup`] carries.
#[derive(Debug, PartialEq, Eq)]
pub struct SchedGroupData {
    /// Shared by every CPU whose domains list this group, as the kernel shares its
    /// `struct sched_group`s: one copy per group instead of one per CPU and group
    /// (a thousand-CPU LLC would otherwise hold a million spans).
    pub span: Arc<CpuSet>,
    /// First CPU of the group's balance mask (`group_balance_cpu()`): the span itself for
    /// ordinary groups; for overlapping NUMA groups only the CPUs whose own child domain is
    /// exactly this group (`build_balance_mask()`).
    pub balance_cpu: usize,
    /// The span as runs of consecutive CPUs, in order (an LLC whose SMT
    /// siblings are numbered half the machine apart is two runs), so the
    /// balancer's scans walk slices instead of a thousand-bit mask. Same CPUs,
    /// same order. Shared, like the span, by the CPUs that list the group.
    pub span_runs: Arc<[std::ops::Range<usize>]>,
}

/// One scheduling domain of one CPU, as `sd_init()` creates it and `cpu_attach_domain()`
/// leaves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedDomain {
    pub level: Level,
    pub span: CpuSet,
    pub span_weight: usize,
    /// `SD_*` bits.
    pub flags: u32,
    /// `groups[0]` is the local group (it contains the owning CPU); the others follow in the
    /// kernel's list order (the span walked from the owning CPU, wrapping).
    pub groups: Vec<SchedGroup>,
    /// Always 0.
    pub local_group: usize,
    pub imbalance_pct: u32,
    pub cache_nice_tries: u32,
    pub busy_factor: u32,
    /// v4.19 `cpu_load[]` indexes; 0 in 5.x, which removed them.
    pub busy_idx: u32,
    pub idle_idx: u32,
    pub newidle_idx: u32,
    pub wake_idx: u32,
    pub forkexec_idx: u32,
    pub min_interval_ms: u64,
    pub max_interval_ms: u64,
    /// v4.19 SMT level: [`SMT_GAIN`]; otherwise 0.
    pub smt_gain: u32,
    // Balancing state, initialised as `sd_init()` does (jiffies is 0 at build time).
    pub balance_interval_ms: u64,
    pub last_balance_jiffies: u64,
    pub nr_balance_failed: u32,
    pub max_newidle_lb_cost_ns: u64,
    pub next_decay_max_lb_cost_jiffies: u64,
    /// `sd->imb_numa_nr` (v5.18+; the v6.0+ rule): the tasks a NUMA domain lets
    /// a node run before balancing evens out idle CPUs, from the LLCs per node
    /// (`build_sched_domains()`); 0 below the LLC's parent.
    pub imb_numa_nr: u64,
    /// NI_RANDOM (6.18.y, v6.19): newly idle passes asked, those that pulled
    /// (weighted by the inverse of the chance to run), and the success rate in
    /// 1024ths; sd_init() starts them at 512, 256, 512 ("50% success rate").
    pub newidle_call: u32,
    pub newidle_success: u32,
    pub newidle_ratio: u32,
}

impl SchedDomain {
    /// `update_newidle_stats()` (6.18.y; v6.19 "sched/fair: Proportional newidle
    /// balance"): one more newly idle call, `success` of it (weighted by the
    /// inverse of the pass's chance to run); every 1024 calls the success count
    /// becomes the domain's rate and both counts halve.
    pub fn update_newidle_stats(&mut self, success: u32) {
        self.newidle_call += 1;
        self.newidle_success += success;
        if self.newidle_call >= 1024 {
            self.newidle_ratio = self.newidle_success;
            self.newidle_call /= 2;
            self.newidle_success /= 2;
        }
    }

    /// The level's kernel name (`sd->name`).
    pub fn name(&self) -> &'static str {
        self.level.name()
    }

    /// True if all bits of `flag` are set.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag == flag
    }
}

/// The attached domains of one CPU and the shortcuts of `update_top_cache_domain()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuDomains {
    pub cpu: usize,
    /// Bottom-up (`rq->sd` first, then parents), after degenerate removal. Empty on a
    /// one-CPU machine.
    pub domains: Vec<SchedDomain>,
    /// Index of the highest domain with `SD_SHARE_PKG_RESOURCES`, walking up from the bottom
    /// and stopping at the first domain without it (`highest_flag_domain()`).
    pub sd_llc: Option<usize>,
    /// Weight of `sd_llc`'s span, 1 without one.
    pub sd_llc_size: usize,
    /// First CPU of `sd_llc`'s span, the CPU itself without one; two CPUs share a cache iff
    /// their ids are equal (`cpus_share_cache()`).
    pub sd_llc_id: usize,
    /// Index of the lowest domain with `SD_NUMA` (`lowest_flag_domain()`).
    pub sd_numa: Option<usize>,
}

/// `rq->cpu_capacity_orig` of `cpu` on a machine running only CFS.
///
/// v4.19: the generic `arch_scale_cpu_capacity()` (x86 does not override it) divides the
/// SMT domain's `smt_gain` among its threads, so each of 2 siblings gets 1178 / 2 = 589 and
/// a lone thread 1024. v5.x: every CPU of a symmetric machine has 1024.
pub fn cpu_capacity_orig(topo: &Topology, cpu: usize, version: KernelVersion) -> u64 {
    let threads = topo.smt_siblings(cpu).count();
    if version.pre_rework() && threads > 1 {
        u64::from(SMT_GAIN) / threads as u64
    } else {
        SCHED_CAPACITY_SCALE
    }
}

/// What a topology level's mask is keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MaskKey {
    Core,
    Llc,
    Node,
}

/// Kind of level, including NODE which [`Level`] folds into `Numa`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LevelKind {
    Smt,
    Mc,
    Die,
    Node,
    Numa,
}

/// One entry of the kernel's `sched_domain_topology_level` table.
struct TopoLevel {
    kind: LevelKind,
    /// What `tl->sd_flags()` returns.
    topo_flags: u32,
    /// `SDTL_OVERLAP`: groups are built by `build_overlap_sched_groups()`.
    overlap: bool,
    /// `sched_domains_numa_distance[tl->numa_level]` for NODE/NUMA levels.
    numa_distance: u32,
    key: MaskKey,
    /// The mask per key (core, LLC or node index).
    masks: Vec<CpuSet>,
}

impl TopoLevel {
    /// `tl->mask(cpu)`.
    fn mask<'a>(&'a self, topo: &Topology, cpu: usize) -> &'a CpuSet {
        let info = &topo.cpus[cpu];
        let idx = match self.key {
            MaskKey::Core => info.core,
            MaskKey::Llc => info.llc,
            MaskKey::Node => info.node,
        };
        &self.masks[idx as usize]
    }

    fn level(&self) -> Level {
        match self.kind {
            LevelKind::Smt => Level::Smt,
            LevelKind::Mc => Level::Mc,
            LevelKind::Die => Level::Die,
            LevelKind::Node | LevelKind::Numa => Level::Numa(self.numa_distance),
        }
    }
}

/// `node_distance(a, b)`, tolerating a short table (local 10, remote 20 by default).
fn node_distance(topo: &Topology, a: usize, b: usize) -> u32 {
    match topo.distance.get(a).and_then(|row| row.get(b)) {
        Some(&d) => d,
        None if a == b => LOCAL_DISTANCE,
        None => 20,
    }
}

/// The distinct distances `sched_init_numa()` turns into levels, smallest (the NODE level)
/// first, or `None` if it gives up and adds no NUMA levels.
///
/// v4.19 and v5.10 only look at node 0's row, assuming it holds every distance; v5.15 takes
/// the distinct values of the whole table and refuses tables with values outside
/// `[LOCAL_DISTANCE, 256)`.
fn numa_distances(topo: &Topology, version: KernelVersion) -> Option<Vec<u32>> {
    let nodes = topo.node_cpus.len();
    if nodes == 0 {
        return None;
    }
    let mut out = Vec::new();
    match version {
        KernelVersion::V3_0 | KernelVersion::V4_19 | KernelVersion::V5_10 => {
            let mut curr = node_distance(topo, 0, 0);
            out.push(curr);
            loop {
                let next = (0..nodes).map(|k| node_distance(topo, 0, k)).filter(|&d| d > curr).min();
                match next {
                    Some(d) => {
                        out.push(d);
                        curr = d;
                    }
                    None => break,
                }
            }
        }
        _ => {
            for a in 0..nodes {
                for b in 0..nodes {
                    let d = node_distance(topo, a, b);
                    if !(LOCAL_DISTANCE..256).contains(&d) {
                        return None;
                    }
                    if !out.contains(&d) {
                        out.push(d);
                    }
                }
            }
            out.sort_unstable();
        }
    }
    Some(out)
}

/// The level table: x86's `x86_topology[]` plus what `sched_init_numa()` appends.
fn topology_levels(topo: &Topology, version: KernelVersion) -> Vec<TopoLevel> {
    let mut levels = vec![
        TopoLevel {
            kind: LevelKind::Smt,
            topo_flags: SD_SHARE_CPUCAPACITY | SD_SHARE_PKG_RESOURCES,
            overlap: false,
            numa_distance: 0,
            key: MaskKey::Core,
            masks: topo.core_cpus.clone(),
        },
        TopoLevel {
            kind: LevelKind::Mc,
            topo_flags: SD_SHARE_PKG_RESOURCES,
            overlap: false,
            numa_distance: 0,
            key: MaskKey::Llc,
            masks: topo.llc_cpus.clone(),
        },
        TopoLevel {
            kind: LevelKind::Die,
            topo_flags: 0,
            overlap: false,
            numa_distance: 0,
            // x86 `cpu_cpu_mask()` is `cpumask_of_node()`: the package is the node.
            key: MaskKey::Node,
            masks: topo.node_cpus.clone(),
        },
    ];
    let Some(distances) = numa_distances(topo, version) else {
        return levels;
    };
    let nodes = topo.node_cpus.len();
    for (i, &dist) in distances.iter().enumerate() {
        // sched_domains_numa_masks[i][j]: the CPUs of every node within `dist` of node j.
        let mut masks = Vec::with_capacity(nodes);
        for j in 0..nodes {
            let mut mask = CpuSet::new(topo.ncpus());
            for (k, node_span) in topo.node_cpus.iter().enumerate() {
                if node_distance(topo, j, k) <= dist {
                    mask.union_with(node_span);
                }
            }
            masks.push(mask);
        }
        let numa = i > 0;
        levels.push(TopoLevel {
            kind: if numa { LevelKind::Numa } else { LevelKind::Node },
            topo_flags: if numa { SD_NUMA } else { 0 },
            overlap: numa,
            numa_distance: dist,
            key: MaskKey::Node,
            masks,
        });
    }
    levels
}

/// A fresh domain for `tl` (`sd_init()`): the version's defaults, then the level's
/// topology flags turned into behaviour.
fn sd_init(tl: &TopoLevel, version: KernelVersion, sd_weight: usize, span: CpuSet) -> SchedDomain {
    let v4 = version.pre_rework();
    let weight = sd_weight as u64;
    let mut flags = SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE | tl.topo_flags;
    // v4.19 balances every domain explicitly; 5.x dropped the flag and starts every level
    // with PREFER_SIBLING instead.
    flags |= if v4 { SD_LOAD_BALANCE } else { SD_PREFER_SIBLING };
    let mut sd = SchedDomain {
        level: tl.level(),
        span_weight: span.count(),
        span,
        flags,
        groups: Vec::new(),
        local_group: 0,
        imbalance_pct: if v4 { 125 } else { 117 },
        cache_nice_tries: 0,
        busy_factor: if v4 { 32 } else { 16 },
        busy_idx: 0,
        idle_idx: 0,
        newidle_idx: 0,
        wake_idx: 0,
        forkexec_idx: 0,
        min_interval_ms: weight,
        max_interval_ms: 2 * weight,
        smt_gain: 0,
        balance_interval_ms: weight,
        last_balance_jiffies: 0,
        nr_balance_failed: 0,
        max_newidle_lb_cost_ns: 0,
        next_decay_max_lb_cost_jiffies: 0,
        newidle_call: 512,
        newidle_success: 256,
        newidle_ratio: 512,
        imb_numa_nr: 0,
    };
    if sd.flags & SD_SHARE_CPUCAPACITY != 0 {
        sd.imbalance_pct = 110;
        if v4 {
            sd.flags |= SD_PREFER_SIBLING;
            sd.smt_gain = SMT_GAIN;
        }
    } else if sd.flags & SD_SHARE_PKG_RESOURCES != 0 {
        sd.imbalance_pct = 117;
        sd.cache_nice_tries = 1;
        if v4 {
            sd.flags |= SD_PREFER_SIBLING;
            sd.busy_idx = 2;
        }
    } else if sd.flags & SD_NUMA != 0 {
        sd.cache_nice_tries = 2;
        if v4 {
            sd.busy_idx = 3;
            sd.idle_idx = 2;
        } else {
            sd.flags &= !SD_PREFER_SIBLING;
        }
        sd.flags |= SD_SERIALIZE;
        if tl.numa_distance > RECLAIM_DISTANCE {
            sd.flags &= !(SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE);
        }
    } else {
        sd.cache_nice_tries = 1;
        if v4 {
            sd.flags |= SD_PREFER_SIBLING;
            sd.busy_idx = 2;
            sd.idle_idx = 1;
        }
    }
    sd
}

/// Groups of `chains[cpu][level]` for a non-overlapping level (`build_sched_groups()` with
/// `get_group()`): walk the span from `cpu`, wrapping; each uncovered CPU contributes its
/// own child-domain span at this level, or itself at the lowest level.
fn plain_groups(
    chains: &[Vec<SchedDomain>],
    level: usize,
    cpu: usize,
    caps: &[u64],
    shared: &mut BTreeMap<(usize, usize, bool), SchedGroup>,
    span_ids: &mut SpanIds,
    core_of: &[usize],
) -> Vec<SchedGroup> {
    let ncpus = chains.len();
    let span = &chains[cpu][level].span;
    let mut covered = CpuSet::new(ncpus);
    let mut groups = Vec::new();
    for i in span.iter_wrap(cpu) {
        if covered.contains(i) {
            continue;
        }
        // A CPU whose chain stopped below this level has a blank domain here with no child
        // (asymmetric machines only): its group is the CPU alone, as at the lowest level.
        let from_child = level > 0 && chains[i].len() > level;
        // The groups of a non-overlapping level partition it: the group of CPU i is
        // the same for every CPU whose domain holds it, named here by its first CPU.
        let first = if from_child { chains[i][level - 1].span.next_from(0).unwrap_or(i) } else { i };
        let g = shared.entry((level, first, from_child)).or_insert_with(|| {
            let group_span = if from_child {
                chains[i][level - 1].span.clone()
            } else {
                let mut one = CpuSet::new(ncpus);
                one.set(i);
                one
            };
            let child = &chains[i][level.saturating_sub(1)];
            let flags = if from_child && child.span.count() > 1 { child.flags } else { 0 };
            make_group(Arc::new(group_span.clone()), &group_span, caps, span_ids, flags, core_of)
        });
        covered.union_with(&g.span);
        groups.push(g.clone());
    }
    groups
}

/// Groups of `chains[cpu][level]` for a NUMA level (`build_overlap_sched_groups()`): each
/// uncovered CPU of the span contributes the child span of its own domain at this level;
/// the groups may overlap.
///
/// v5.15 (`find_descended_sibling()`): when that child span reaches outside the domain
/// (NUMA diameter of 3 or more), walk down that CPU's chain to the first domain whose child
/// fits, then further down past domains whose child has the same span.
fn overlap_groups(
    chains: &[Vec<SchedDomain>],
    level: usize,
    cpu: usize,
    version: KernelVersion,
    caps: &[u64],
    span_ids: &mut SpanIds,
    core_of: &[usize],
) -> Vec<SchedGroup> {
    let ncpus = chains.len();
    let span = &chains[cpu][level].span;
    let mut covered = CpuSet::new(ncpus);
    let mut groups = Vec::new();
    for i in span.iter_wrap(cpu) {
        if covered.contains(i) {
            continue;
        }
        // Skip CPUs whose chain ended below this level (their domain here is blank).
        let chain = &chains[i];
        if chain.len() <= level || !chain[level].span.contains(i) {
            continue;
        }
        let mut sibling = level;
        if version >= KernelVersion::V5_15 && sibling > 0 && !chain[sibling - 1].span.is_subset(span) {
            while sibling > 0 && !chain[sibling - 1].span.is_subset(span) {
                sibling -= 1;
            }
            while sibling > 0 && chain[sibling - 1].span == chain[sibling].span {
                sibling -= 1;
            }
        }
        // build_group_from_child_sched_domain(): the child's span, or the domain's own.
        let group_span = if sibling > 0 { chain[sibling - 1].span.clone() } else { chain[sibling].span.clone() };
        covered.union_with(&group_span);
        let balance = balance_mask(chains, sibling, &group_span);
        let flags = if sibling > 0 && chain[sibling - 1].span.count() > 1 { chain[sibling - 1].flags } else { 0 };
        groups.push(make_group(Arc::new(group_span), &balance, caps, span_ids, flags, core_of));
    }
    groups
}

/// `build_balance_mask()`: the CPUs of `group_span` whose own domain at `level` has a child
/// spanning exactly `group_span`, i.e. the CPUs that reach this group going up their chain.
fn balance_mask(chains: &[Vec<SchedDomain>], level: usize, group_span: &CpuSet) -> CpuSet {
    let mut mask = CpuSet::new(chains.len());
    for i in group_span.iter() {
        if level > 0 && chains[i].len() > level && chains[i][level - 1].span == *group_span {
            mask.set(i);
        }
    }
    mask
}

/// The allowed NUMA imbalance of each domain of one CPU's (not yet pruned)
/// chain, as `build_sched_domains()` sets it (v6.0+ rule, 026b98a93bbd): the
/// LLC's parent allows as many tasks as the LLCs it holds (an eighth of its
/// CPUs when it holds one, at least 1), and each domain above it that many
/// times how many of the first NUMA domain's spans it covers.
fn set_imb_numa_nr(chain: &mut [SchedDomain]) {
    let (mut imb, mut imb_span) = (0u64, 1u64);
    for i in 0..chain.len() {
        let child_llc = i > 0 && chain[i - 1].flags & SD_SHARE_PKG_RESOURCES != 0;
        let weight = chain[i].span_weight as u64;
        if chain[i].flags & SD_SHARE_PKG_RESOURCES == 0 && child_llc {
            let nr_llcs = weight / chain[i - 1].span_weight as u64;
            imb = if nr_llcs == 1 { weight >> 3 } else { nr_llcs }.max(1);
            chain[i].imb_numa_nr = imb;
            let top = chain[i + 1..].iter().find(|sd| sd.flags & SD_NUMA != 0);
            imb_span = top.map_or(weight, |sd| sd.span_weight as u64);
        } else {
            chain[i].imb_numa_nr = imb * (weight / imb_span).max(1);
        }
    }
}

/// The numbers given to distinct group spans, by the span's runs of CPUs.
type SpanIds = BTreeMap<Vec<(usize, usize)>, usize>;

/// A group with its summed capacity and the first CPU of `balance` (of the span if the
/// balance mask came out empty, which the kernel warns about).
fn make_group(
    span: Arc<CpuSet>,
    balance: &CpuSet,
    caps: &[u64],
    span_ids: &mut SpanIds,
    flags: u32,
    core_of: &[usize],
) -> SchedGroup {
    let capacity = span.iter().map(|c| caps[c]).sum();
    // Core ids are below the CPU count.
    let mut cores_seen = CpuSet::new(core_of.len());
    for c in span.iter() {
        cores_seen.set(core_of[c]);
    }
    let cores = cores_seen.count() as u64;
    let balance_cpu = balance.next_from(0).or_else(|| span.next_from(0)).unwrap_or(0);
    let weight = span.count() as u64;
    let mut span_runs: Vec<std::ops::Range<usize>> = Vec::new();
    for c in span.iter() {
        match span_runs.last_mut() {
            Some(run) if run.end == c => run.end += 1,
            _ => span_runs.push(c..c + 1),
        }
    }
    let next_id = span_ids.len();
    let span_id = *span_ids.entry(span_runs.iter().map(|r| (r.start, r.end)).collect()).or_insert(next_id);
    SchedGroup {
        span_id,
        weight,
        capacity,
        cores,
        flags,
        data: Arc::new(SchedGroupData { span, balance_cpu, span_runs: span_runs.into() }),
    }
}

/// `sd_degenerate()`: a domain of one CPU, or one whose only group makes its
/// group-dependent flags pointless and which has no wake-affine use either.
fn sd_degenerate(sd: &SchedDomain, version: KernelVersion) -> bool {
    if sd.span.count() == 1 {
        return true;
    }
    let needs_groups = if version.pre_rework() { V4_19_NEEDS_GROUPS } else { V5_NEEDS_GROUPS };
    if sd.flags & needs_groups != 0 && sd.groups.len() > 1 {
        return false;
    }
    sd.flags & SD_WAKE_AFFINE == 0
}

/// `sd_parent_degenerate()`: `parent` adds nothing over `child` if it is degenerate itself,
/// or has the same span and no flag the child lacks (group-dependent flags not counting
/// when the parent has a single group).
///
/// v4.19 lists the group-dependent flags explicitly (plus PREFER_SIBLING) and ignores
/// SERIALIZE only on single-node machines; 5.x ignores the whole `SDF_NEEDS_GROUPS` mask,
/// SERIALIZE, NUMA and OVERLAP included.
fn sd_parent_degenerate(child: &SchedDomain, parent: &SchedDomain, version: KernelVersion, nr_nodes: usize) -> bool {
    if sd_degenerate(parent, version) {
        return true;
    }
    if child.span != parent.span {
        return false;
    }
    let mut pflags = parent.flags;
    if parent.groups.len() == 1 {
        if version.pre_rework() {
            pflags &= !(V4_19_NEEDS_GROUPS | SD_PREFER_SIBLING);
            if nr_nodes == 1 {
                pflags &= !SD_SERIALIZE;
            }
        } else {
            pflags &= !V5_NEEDS_GROUPS;
        }
    }
    !child.flags & pflags == 0
}

/// `cpu_attach_domain()`'s pruning: drop every parent that is degenerate with respect to
/// the domain below it (handing its PREFER_SIBLING down), then the bottom domain if it is
/// degenerate on its own.
fn remove_degenerate(mut chain: Vec<SchedDomain>, version: KernelVersion, nr_nodes: usize) -> Vec<SchedDomain> {
    let mut t = 0;
    while t + 1 < chain.len() {
        if sd_parent_degenerate(&chain[t], &chain[t + 1], version, nr_nodes) {
            let parent = chain.remove(t + 1);
            if parent.flags & SD_PREFER_SIBLING != 0 {
                chain[t].flags |= SD_PREFER_SIBLING;
            }
        } else {
            t += 1;
        }
    }
    if chain.first().is_some_and(|sd| sd_degenerate(sd, version)) {
        chain.remove(0);
    }
    chain
}

/// Builds every CPU's scheduling domains as `build_sched_domains()` does for the whole
/// machine at boot, then attaches them (`cpu_attach_domain()`, `update_top_cache_domain()`).
/// Returns one entry per CPU, in CPU order.
pub fn build(topo: &Topology, version: KernelVersion) -> Vec<CpuDomains> {
    let ncpus = topo.ncpus();
    if ncpus == 0 {
        return Vec::new();
    }
    let levels = topology_levels(topo, version);
    let cpu_map = CpuSet::full(ncpus);
    let caps: Vec<u64> = (0..ncpus).map(|cpu| cpu_capacity_orig(topo, cpu, version)).collect();
    let core_of: Vec<usize> = (0..ncpus).map(|cpu| topo.cpus[cpu].core as usize).collect();

    // Per-CPU chains, bottom-up, stopping at the first domain that spans the whole map.
    let mut chains: Vec<Vec<SchedDomain>> = Vec::with_capacity(ncpus);
    for cpu in 0..ncpus {
        let mut chain: Vec<SchedDomain> = Vec::new();
        for tl in &levels {
            let mask = tl.mask(topo, cpu);
            let mut sd = sd_init(tl, version, mask.count(), mask.clone());
            if tl.overlap {
                sd.flags |= SD_OVERLAP;
            }
            // build_sched_domain(): a level that does not contain its child is widened.
            if let Some(child) = chain.last() {
                if !child.span.is_subset(&sd.span) {
                    sd.span.union_with(&child.span);
                    sd.span_weight = sd.span.count();
                }
            }
            let spans_all = sd.span == cpu_map;
            chain.push(sd);
            if spans_all {
                break;
            }
        }
        chains.push(chain);
    }

    // Groups, built on the complete (not yet pruned) chains.
    let mut all_groups: Vec<Vec<Vec<SchedGroup>>> = Vec::with_capacity(ncpus);
    let mut shared = BTreeMap::new();
    let mut span_ids = SpanIds::new();
    for (cpu, chain) in chains.iter().enumerate() {
        let mut per_level = Vec::with_capacity(chain.len());
        for (level, tl) in levels.iter().enumerate().take(chain.len()) {
            let groups = if tl.overlap {
                overlap_groups(&chains, level, cpu, version, &caps, &mut span_ids, &core_of)
            } else {
                plain_groups(&chains, level, cpu, &caps, &mut shared, &mut span_ids, &core_of)
            };
            per_level.push(groups);
        }
        all_groups.push(per_level);
    }
    for (chain, groups) in chains.iter_mut().zip(all_groups) {
        for (sd, g) in chain.iter_mut().zip(groups) {
            sd.groups = g;
        }
        set_imb_numa_nr(chain);
    }

    let nr_nodes = topo.node_cpus.len();
    let mut out = Vec::with_capacity(ncpus);
    for (cpu, chain) in chains.into_iter().enumerate() {
        let domains = remove_degenerate(chain, version, nr_nodes);
        let mut sd_llc = None;
        for (i, sd) in domains.iter().enumerate() {
            if sd.flags & SD_SHARE_PKG_RESOURCES == 0 {
                break;
            }
            sd_llc = Some(i);
        }
        let (sd_llc_size, sd_llc_id) = match sd_llc {
            Some(i) => (domains[i].span.count(), domains[i].span.next_from(0).unwrap_or(cpu)),
            None => (1, cpu),
        };
        let sd_numa = domains.iter().position(|sd| sd.flags & SD_NUMA != 0);
        out.push(CpuDomains { cpu, domains, sd_llc, sd_llc_size, sd_llc_id, sd_numa });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedlab_core::topology::CpuInfo;

    #[test]
    fn groups_carry_their_child_domains_flags_and_cores() {
        // x6-2-20: 10 cores of 2 threads in one LLC. The MC domain's groups are
        // the SMT cores (the child SMT domain's flags, one core each); the SMT
        // domain's groups are single CPUs (no child, no flags).
        let doms = build(&Topology::parse("x6-2-20").unwrap(), KernelVersion::V6_18);
        let smt = &doms[0].domains[0];
        assert!(smt.groups.iter().all(|g| g.flags == 0 && g.cores == 1));
        let mc = &doms[0].domains[1];
        assert_eq!(mc.groups.len(), 10);
        assert!(mc.groups.iter().all(|g| g.flags & SD_SHARE_CPUCAPACITY != 0 && g.cores == 1 && g.weight == 2));
        // Without SMT the MC groups are single CPUs: no child domain survives.
        let doms = build(&Topology::parse("1x1x8x1").unwrap(), KernelVersion::V6_18);
        assert!(doms[0].domains[0].groups.iter().all(|g| g.flags & SD_SHARE_CPUCAPACITY == 0 && g.cores == 1));
    }

    #[test]
    fn imb_numa_nr_follows_the_llcs_per_node() {
        let nr = |spec: &str| -> Vec<(String, u64)> {
            let doms = build(&Topology::parse(spec).unwrap(), KernelVersion::V6_18);
            doms[0].domains.iter().map(|sd| (sd.level.name().to_string(), sd.imb_numa_nr)).collect()
        };
        // One LLC per node of 40 CPUs: the LLC's parent is the (later pruned)
        // package level, which holds one LLC, so an eighth of its CPUs, 5; the
        // NUMA domain spans the first NUMA span, so the same 5.
        let cl = nr("cascadelake-2s");
        assert_eq!(cl.last().unwrap().1, 5, "{cl:?}");
        // 8 sockets of 2 LLCs: the socket level holds 2 LLCs; the NUMA level
        // spans the first NUMA span, so the same 2.
        let big = nr("8x2x32x2");
        assert!(big.iter().filter(|(l, _)| l.starts_with("NUMA")).all(|&(_, n)| n == 2), "{big:?}");
        // Below the LLC's parent nothing is allowed.
        assert_eq!(cl[0].1, 0, "{cl:?}");
    }

    #[test]
    fn newidle_stats_start_at_half_and_turn_into_a_rate_every_1024_calls() {
        let topo = schedlab_core::Topology::parse("x6-2-20").unwrap();
        let mut sd = build(&topo, KernelVersion::V6_18)[0].domains[0].clone();
        assert_eq!((sd.newidle_call, sd.newidle_success, sd.newidle_ratio), (512, 256, 512));
        // 511 failures leave the rate alone; the 512th makes 1024 calls.
        for _ in 0..511 {
            sd.update_newidle_stats(0);
        }
        assert_eq!((sd.newidle_call, sd.newidle_ratio), (1023, 512));
        sd.update_newidle_stats(0);
        assert_eq!((sd.newidle_call, sd.newidle_success, sd.newidle_ratio), (512, 128, 256));
        // A success counted with the weight of a pass that ran 1 time in 4.
        for _ in 0..511 {
            sd.update_newidle_stats(0);
        }
        sd.update_newidle_stats(4);
        assert_eq!((sd.newidle_call, sd.newidle_success, sd.newidle_ratio), (512, 66, 132));
    }

    fn lists(groups: &[SchedGroup]) -> Vec<String> {
        groups.iter().map(|g| g.span.to_list()).collect()
    }

    /// One CPU per node (own core and LLC) with the given distance table.
    fn one_cpu_per_node(distance: Vec<Vec<u32>>) -> Topology {
        let cpus = (0..distance.len() as u32).map(|n| CpuInfo { node: n, llc: n, core: n, smt: 0 }).collect();
        Topology::from_cpus("test", cpus, distance)
    }

    #[test]
    fn x6_2_20_v4_19() {
        let topo = Topology::parse("1x1x10x2").unwrap();
        let all = build(&topo, KernelVersion::V4_19);
        assert_eq!(all.len(), 20);
        let c0 = &all[0];
        assert_eq!(c0.domains.len(), 2);

        let smt = &c0.domains[0];
        assert_eq!(smt.level, Level::Smt);
        assert_eq!(smt.name(), "SMT");
        assert_eq!(smt.span.to_list(), "0,10");
        assert_eq!(smt.span_weight, 2);
        assert_eq!(lists(&smt.groups), ["0", "10"]);
        assert!(smt.groups.iter().all(|g| g.capacity == 589));
        assert_eq!(smt.imbalance_pct, 110);
        assert_eq!(smt.smt_gain, 1178);
        assert_eq!(smt.busy_factor, 32);
        assert_eq!(
            smt.flags,
            SD_LOAD_BALANCE
                | SD_BALANCE_NEWIDLE
                | SD_BALANCE_EXEC
                | SD_BALANCE_FORK
                | SD_WAKE_AFFINE
                | SD_SHARE_CPUCAPACITY
                | SD_SHARE_PKG_RESOURCES
                | SD_PREFER_SIBLING
        );
        assert_eq!((smt.min_interval_ms, smt.max_interval_ms, smt.balance_interval_ms), (2, 4, 2));
        assert_eq!((smt.busy_idx, smt.idle_idx, smt.cache_nice_tries), (0, 0, 0));

        let mc = &c0.domains[1];
        assert_eq!(mc.level, Level::Mc);
        assert_eq!(mc.span.to_list(), "0-19");
        assert_eq!(mc.groups.len(), 10);
        assert_eq!(mc.groups[0].span.to_list(), "0,10");
        assert_eq!(mc.groups[9].span.to_list(), "9,19");
        assert!(mc.groups.iter().all(|g| g.capacity == 1178 && g.span.count() == 2));
        assert_eq!(mc.groups[3].balance_cpu, 3);
        assert_eq!((mc.imbalance_pct, mc.cache_nice_tries, mc.busy_idx, mc.idle_idx), (117, 1, 2, 0));
        assert_eq!((mc.min_interval_ms, mc.max_interval_ms, mc.balance_interval_ms), (20, 40, 20));
        assert_eq!(mc.smt_gain, 0);
        assert!(mc.has(SD_PREFER_SIBLING | SD_SHARE_PKG_RESOURCES | SD_LOAD_BALANCE));
        assert!(!mc.has(SD_SHARE_CPUCAPACITY));
        assert_eq!(mc.local_group, 0);

        assert_eq!((c0.sd_llc, c0.sd_llc_size, c0.sd_llc_id, c0.sd_numa), (Some(1), 20, 0, None));
        assert_eq!(cpu_capacity_orig(&topo, 0, KernelVersion::V4_19), 589);
        assert_eq!(cpu_capacity_orig(&topo, 0, KernelVersion::V5_10), 1024);
    }

    #[test]
    fn group_order_starts_at_the_owning_cpu_and_wraps() {
        let topo = Topology::parse("1x1x10x2").unwrap();
        let c13 = &build(&topo, KernelVersion::V4_19)[13];
        assert_eq!(lists(&c13.domains[0].groups), ["13", "3"]);
        assert_eq!(
            lists(&c13.domains[1].groups),
            ["3,13", "4,14", "5,15", "6,16", "7,17", "8,18", "9,19", "0,10", "1,11", "2,12"]
        );
        assert_eq!(c13.domains[1].groups[0].balance_cpu, 3);
        assert_eq!(c13.sd_llc_id, 0);
    }

    #[test]
    fn kvm_4_has_only_mc() {
        let topo = Topology::parse("1x1x4x1").unwrap();
        for version in [KernelVersion::V4_19, KernelVersion::V5_10, KernelVersion::V5_15] {
            let all = build(&topo, version);
            let c2 = &all[2];
            assert_eq!(c2.domains.len(), 1);
            let mc = &c2.domains[0];
            assert_eq!(mc.level, Level::Mc);
            assert_eq!(lists(&mc.groups), ["2", "3", "0", "1"]);
            assert!(mc.groups.iter().all(|g| g.capacity == 1024));
            assert_eq!((c2.sd_llc, c2.sd_llc_size, c2.sd_llc_id), (Some(0), 4, 0));
        }
    }

    #[test]
    fn single_cpu_has_no_domains() {
        let topo = Topology::parse("1x1x1x1").unwrap();
        let all = build(&topo, KernelVersion::V4_19);
        assert!(all[0].domains.is_empty());
        assert_eq!((all[0].sd_llc, all[0].sd_llc_size, all[0].sd_llc_id, all[0].sd_numa), (None, 1, 0, None));
    }

    #[test]
    fn two_socket_88_v4_19() {
        let topo = Topology::parse("2x1x22x2").unwrap();
        let all = build(&topo, KernelVersion::V4_19);
        let c0 = &all[0];
        let names: Vec<Level> = c0.domains.iter().map(|d| d.level).collect();
        assert_eq!(names, [Level::Smt, Level::Mc, Level::Numa(21)]);
        assert_eq!(c0.domains[0].span.to_list(), "0,44");
        let mc = &c0.domains[1];
        assert_eq!(mc.span.to_list(), "0-21,44-65");
        assert_eq!(mc.span_weight, 44);
        assert_eq!(mc.groups.len(), 22);
        assert!(mc.has(SD_PREFER_SIBLING));
        let numa = &c0.domains[2];
        assert_eq!(numa.name(), "NUMA");
        assert_eq!(numa.span_weight, 88);
        assert_eq!(
            numa.flags,
            SD_LOAD_BALANCE
                | SD_BALANCE_NEWIDLE
                | SD_BALANCE_EXEC
                | SD_BALANCE_FORK
                | SD_WAKE_AFFINE
                | SD_SERIALIZE
                | SD_OVERLAP
                | SD_NUMA
        );
        assert_eq!(
            (numa.imbalance_pct, numa.busy_idx, numa.idle_idx, numa.cache_nice_tries, numa.busy_factor),
            (125, 3, 2, 2, 32)
        );
        assert_eq!((numa.min_interval_ms, numa.max_interval_ms, numa.balance_interval_ms), (88, 176, 88));
        assert_eq!(lists(&numa.groups), ["0-21,44-65", "22-43,66-87"]);
        assert_eq!(numa.groups[0].capacity, 22 * 1178);
        assert_eq!((numa.groups[0].balance_cpu, numa.groups[1].balance_cpu), (0, 22));
        assert_eq!((c0.sd_llc, c0.sd_llc_size, c0.sd_llc_id, c0.sd_numa), (Some(1), 44, 0, Some(2)));

        let c23 = &all[23];
        assert_eq!(lists(&c23.domains[2].groups), ["22-43,66-87", "0-21,44-65"]);
        assert_eq!(c23.sd_llc_id, 22);
    }

    #[test]
    fn two_socket_88_v5() {
        let topo = Topology::parse("2x1x22x2").unwrap();
        for version in [KernelVersion::V5_10, KernelVersion::V5_15] {
            let c0 = &build(&topo, version)[0];
            assert_eq!(c0.domains.len(), 3);
            let [smt, mc, numa] = [&c0.domains[0], &c0.domains[1], &c0.domains[2]];
            assert!(c0.domains.iter().all(|d| d.busy_factor == 16 && d.flags & SD_LOAD_BALANCE == 0));
            assert!(c0.domains.iter().all(|d| d.busy_idx == 0 && d.idle_idx == 0 && d.smt_gain == 0));
            assert_eq!((smt.imbalance_pct, mc.imbalance_pct, numa.imbalance_pct), (110, 117, 117));
            assert!(smt.has(SD_PREFER_SIBLING) && mc.has(SD_PREFER_SIBLING));
            assert_eq!(
                numa.flags,
                SD_BALANCE_NEWIDLE | SD_BALANCE_EXEC | SD_BALANCE_FORK | SD_WAKE_AFFINE | SD_SERIALIZE | SD_OVERLAP | SD_NUMA
            );
            assert_eq!(smt.groups[0].capacity, 1024);
            assert_eq!(mc.groups[0].capacity, 2048);
            assert_eq!(numa.groups[1].capacity, 44 * 1024);
            assert_eq!(c0.sd_numa, Some(2));
        }
    }

    #[test]
    fn ryzen_1700_has_die() {
        let topo = Topology::parse("ryzen-1700").unwrap();
        let all = build(&topo, KernelVersion::V4_19);
        let c0 = &all[0];
        let levels: Vec<Level> = c0.domains.iter().map(|d| d.level).collect();
        assert_eq!(levels, [Level::Smt, Level::Mc, Level::Die]);
        assert_eq!(c0.domains[0].span.to_list(), "0-1");
        assert_eq!(c0.domains[1].span.to_list(), "0-7");
        assert_eq!(lists(&c0.domains[1].groups), ["0-1", "2-3", "4-5", "6-7"]);
        let die = &c0.domains[2];
        assert_eq!(die.span.to_list(), "0-15");
        assert_eq!(lists(&die.groups), ["0-7", "8-15"]);
        assert_eq!(die.groups[1].capacity, 4 * 1178);
        assert_eq!((die.imbalance_pct, die.cache_nice_tries, die.busy_idx, die.idle_idx), (125, 1, 2, 1));
        assert!(die.has(SD_PREFER_SIBLING | SD_LOAD_BALANCE | SD_WAKE_AFFINE));
        assert!(!die.has(SD_SHARE_PKG_RESOURCES));
        assert_eq!((die.min_interval_ms, die.max_interval_ms), (16, 32));
        assert_eq!((c0.sd_llc, c0.sd_llc_size, c0.sd_llc_id), (Some(1), 8, 0));

        let c9 = &all[9];
        assert_eq!(lists(&c9.domains[0].groups), ["9", "8"]);
        assert_eq!(lists(&c9.domains[2].groups), ["8-15", "0-7"]);
        assert_eq!((c9.sd_llc_size, c9.sd_llc_id), (8, 8));

        let v5 = &build(&topo, KernelVersion::V5_10)[0].domains[2];
        assert_eq!((v5.imbalance_pct, v5.cache_nice_tries, v5.busy_factor), (117, 1, 16));
        assert!(v5.has(SD_PREFER_SIBLING));
    }

    #[test]
    fn far_numa_drops_exec_fork_and_affine() {
        let topo = Topology::regular("far", [2, 1, 2, 1], schedlab_core::topology::Numbering::ThreadMajor, 10, 32);
        let c0 = &build(&topo, KernelVersion::V4_19)[0];
        let numa = c0.domains.last().unwrap();
        assert_eq!(numa.level, Level::Numa(32));
        assert!(!numa.has(SD_BALANCE_EXEC) && !numa.has(SD_BALANCE_FORK) && !numa.has(SD_WAKE_AFFINE));
        assert!(numa.has(SD_BALANCE_NEWIDLE | SD_SERIALIZE | SD_NUMA));
    }

    #[test]
    fn numa_ring_overlapping_groups() {
        // The 4-node ring from the kernel's topology.c commentary.
        let topo = one_cpu_per_node(vec![vec![10, 20, 30, 20], vec![20, 10, 20, 30], vec![30, 20, 10, 20], vec![20, 30, 20, 10]]);
        for version in [KernelVersion::V4_19, KernelVersion::V5_10, KernelVersion::V5_15] {
            let all = build(&topo, version);
            let c0 = &all[0];
            let levels: Vec<Level> = c0.domains.iter().map(|d| d.level).collect();
            assert_eq!(levels, [Level::Numa(20), Level::Numa(30)]);
            assert_eq!(c0.domains[0].span.to_list(), "0-1,3");
            assert_eq!(lists(&c0.domains[0].groups), ["0", "1", "3"]);
            assert_eq!(lists(&c0.domains[1].groups), ["0-1,3", "1-3"]);
            // Only CPU 2 reaches the group 1-3 from below.
            assert_eq!(c0.domains[1].groups[1].balance_cpu, 2);
            assert_eq!((c0.sd_llc, c0.sd_llc_size, c0.sd_llc_id, c0.sd_numa), (None, 1, 0, Some(0)));
            assert_eq!(lists(&all[1].domains[1].groups), ["0-2", "0,2-3"]);
        }
    }

    #[test]
    fn numa_line_descended_sibling_in_5_15() {
        let topo = one_cpu_per_node(vec![vec![10, 20, 30, 40], vec![20, 10, 20, 30], vec![30, 20, 10, 20], vec![40, 30, 20, 10]]);
        let old = &build(&topo, KernelVersion::V5_10)[0];
        assert_eq!(old.domains[1].span.to_list(), "0-2");
        assert_eq!(lists(&old.domains[1].groups), ["0-1", "1-3"]);
        let new = &build(&topo, KernelVersion::V5_15)[0];
        assert_eq!(lists(&new.domains[1].groups), ["0-1", "2"]);
        assert_eq!(new.domains[1].groups[1].balance_cpu, 2);
        assert_eq!(lists(&new.domains[2].groups), ["0-2", "1-3"]);
    }

    #[test]
    fn single_group_serialize_level_survives_only_in_v4_19() {
        // Nodes 0 and 1 are 20 apart, node 2 is 30 from both: node 2's 20-distance level
        // spans only itself, a single group with the same span as MC.
        let mut cpus = Vec::new();
        for n in 0..3u32 {
            for t in 0..2u32 {
                cpus.push(CpuInfo { node: n, llc: n, core: 2 * n + t, smt: 0 });
            }
        }
        let topo = Topology::from_cpus("asym", cpus, vec![vec![10, 20, 30], vec![20, 10, 30], vec![30, 30, 10]]);
        let old = &build(&topo, KernelVersion::V4_19)[4];
        let levels: Vec<Level> = old.domains.iter().map(|d| d.level).collect();
        assert_eq!(levels, [Level::Mc, Level::Numa(20), Level::Numa(30)]);
        assert_eq!(old.domains[1].groups.len(), 1);
        assert_eq!(old.sd_numa, Some(1));
        let new = &build(&topo, KernelVersion::V5_10)[4];
        let levels: Vec<Level> = new.domains.iter().map(|d| d.level).collect();
        assert_eq!(levels, [Level::Mc, Level::Numa(30)]);
        assert_eq!(lists(&new.domains[1].groups), ["4-5", "0-3"]);
        assert_eq!(new.sd_numa, Some(1));
    }

    #[test]
    fn flags_print() {
        assert_eq!(flags_to_string(SD_LOAD_BALANCE | SD_NUMA), "SD_LOAD_BALANCE|SD_NUMA");
        assert_eq!(flags_to_string(0), "");
    }

    #[test]
    fn every_domain_is_covered_by_its_groups() {
        for spec in ["x6-2-56", "cascadelake-2s", "ryzen-1700", "kvm-2", "2x2x3x2"] {
            let topo = Topology::parse(spec).unwrap();
            for version in [KernelVersion::V4_19, KernelVersion::V5_10, KernelVersion::V5_15] {
                for cd in build(&topo, version) {
                    for (i, sd) in cd.domains.iter().enumerate() {
                        assert!(sd.span.contains(cd.cpu));
                        assert!(sd.groups[0].span.contains(cd.cpu));
                        assert!(sd.groups.len() > 1, "{spec} cpu{} {}", cd.cpu, sd.name());
                        let mut union = CpuSet::new(topo.ncpus());
                        for g in &sd.groups {
                            union.union_with(&g.span);
                            assert!(g.span.contains(g.balance_cpu));
                        }
                        assert_eq!(union, sd.span);
                        if i > 0 {
                            assert_eq!(*sd.groups[0].span, cd.domains[i - 1].span);
                        }
                    }
                }
            }
        }
    }
}
