//! Feature switches, like kernel/sched/features.h: each is a name that `+NAME`
//! turns on and `+NO_NAME` turns off in a policy name (`cfs@4.19+STEAL`).

use schedlab_core::error::SpecError;

use super::domains::KernelVersion;

/// Every switch `Features::slot` knows, in the order names are printed.
const NAMES: [&str; 36] = [
    "STEAL",
    "LOAD_RESOLUTION",
    "SCALE_WAKEUP_GRAN",
    "NUMA_FORK_SPREAD",
    "START_DEBIT",
    "GENTLE_FAIR_SLEEPERS",
    "NEXT_BUDDY",
    "LAST_BUDDY",
    "CACHE_HOT_BUDDY",
    "WAKEUP_PREEMPTION",
    "SIS_PROP",
    "SIS_AVG_CPU",
    "WA_IDLE",
    "WA_WEIGHT",
    "WA_BIAS",
    "LB_BIAS",
    "PLACE_LAG",
    "PLACE_DEADLINE_INITIAL",
    "PLACE_REL_DEADLINE",
    "RUN_TO_PARITY",
    "PREEMPT_SHORT",
    "DELAY_DEQUEUE",
    "DELAY_ZERO",
    "PICK_BUDDY",
    "SIS_UTIL",
    "UTIL_EST",
    "UTIL_EST_FASTUP",
    "NEWIDLE_COST_BUMP",
    "YIELD_FORFEIT",
    "NI_RANDOM",
    "WAKEUP_PREEMPT_619",
    "REWEIGHT_KEEPS_VPROT",
    "LAG_CLAMP_MAX_SLICE",
    "SG_WAKEUP_ALLOWED",
    "HOST_VCPU_PACK",
    "HOST_DEQUEUE_DELAYED_BUSY",
];

/// The fair-class features this model reads, with the defaults of one version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    /// The version whose features.h this is: decides which names exist.
    pub version: KernelVersion,
    /// Place new tasks one vslice to the right of min_vruntime.
    pub start_debit: bool,
    /// Sleeper credit is half of sched_latency.
    pub gentle_fair_sleepers: bool,
    /// Prefer the last woken task (off by default).
    pub next_buddy: bool,
    /// Prefer the task preempted by a wakeup.
    pub last_buddy: bool,
    /// Buddies count as cache hot for migration.
    pub cache_hot_buddy: bool,
    /// Wakeups may preempt the running task.
    pub wakeup_preemption: bool,
    /// Bound the idle-CPU scan by avg_idle / avg_scan_cost.
    pub sis_prop: bool,
    /// Skip the idle-CPU scan when avg_idle < avg_scan_cost (off by default).
    pub sis_avg_cpu: bool,
    /// wake_affine_idle().
    pub wa_idle: bool,
    /// wake_affine_weight().
    pub wa_weight: bool,
    /// Half the imbalance_pct in favour of the previous CPU.
    pub wa_bias: bool,
    /// source_load()/target_load() bias by cpu_load[] indexes.
    pub lb_bias: bool,
    /// Steal a task from an overloaded CPU of the LLC when going idle (Sistare 2018).
    pub steal: bool,
    /// Scale the wakeup granularity by the runqueue's length (Gorman 2021, v1 on 5.15-rc1).
    pub scale_wakeup_gran: bool,
    /// Limit the NUMA imbalance at fork and let it float in the balancer (Gorman 2020,
    /// merged for v5.11, so always on in 5.15).
    pub numa_fork_spread: bool,
    /// The extra 10 bits of load-weight resolution (Rao 2011, `SCHED_LOAD_RESOLUTION`
    /// / `scale_load()`): a compile-time constant in the kernel, on for 64-bit
    /// builds since v3.0; off is a 32-bit kernel or the pre-2011 scale.
    pub load_resolution: bool,
    /// EEVDF (v6.6+): keep a task's lag across sleep and migration (`place_entity()`).
    pub place_lag: bool,
    /// A new task's first deadline is half a slice away.
    pub place_deadline_initial: bool,
    /// v6.12+: a non-sleep dequeue keeps the deadline relative to vruntime.
    pub place_rel_deadline: bool,
    /// Keep the running task until it is ineligible or its slice (v6.17+: its
    /// protected part) is used.
    pub run_to_parity: bool,
    /// v6.12+: a wakee with a shorter slice may cut the running task's protection.
    pub preempt_short: bool,
    /// v6.12+: an ineligible task that sleeps stays queued until it is eligible.
    pub delay_dequeue: bool,
    /// v6.12+: a delayed task leaves (or is woken) with positive lag clipped to 0.
    pub delay_zero: bool,
    /// v6.18: pick the next buddy if it is eligible (the buddy itself is set by a
    /// group dequeue, or by NEXT_BUDDY).
    pub pick_buddy: bool,
    /// v6.0+: bound the idle-CPU scan by the LLC's utilisation (`nr_idle_scan`).
    pub sis_util: bool,
    /// v4.17+: each task keeps an estimate of its utilisation from its past
    /// activations, and a CPU's utilisation (`cpu_util()`) is at least the sum of
    /// its queued tasks' estimates.
    pub util_est: bool,
    /// v5.7-v6.7: a task's estimate follows a rise of its utilisation at once
    /// (only falls are averaged); unconditional from v6.8.
    pub util_est_fastup: bool,
    /// Not a features.h name: v6.18.0-6.18.2's newidle cost bump after a pass that
    /// pulled nothing (reverted in 6.18.3 by d206fbad9328; also in some 6.12.y).
    pub newidle_cost_bump: bool,
    /// Not a features.h name: "Forfeit vruntime on yield" (79104becf42b, v6.19),
    /// backported to 6.18.2.
    pub yield_forfeit: bool,
    /// 6.18.y (in a 6.18.35 tree; v6.19's "sched/fair: Proportional newidle
    /// balance", 33cf66d88306, with its features.h name): a newly idle CPU
    /// balances a domain only on a 1024-sided die's throw below the domain's
    /// recent success rate (`newidle_ratio`).
    pub ni_random: bool,
    /// Not a features.h name: `check_preempt_wakeup_fair()` as 6.18.y took it
    /// from v6.19 (e837456fdca8 "Reimplement NEXT_BUDDY to align with EEVDF
    /// goals", with 15257cc2f905 "Revert force wakeup preemption" and the
    /// delayed-dequeue fix; in the stable tree by May 2026), NEXT_BUDDY off: a
    /// forked task never preempts, the check's pick dequeues a delayed pick and
    /// picks again, and the running entity's protection is trimmed after every
    /// check that does not preempt.
    pub wakeup_preempt_619: bool,
    /// Not a features.h name: `reweight_entity()` as 6.18.y has it once
    /// `vlag` and `vprot` are fields of their own (6b6d09f274bd "Separate
    /// se->vlag from se->vprot", v6.19; in 6.18.y after 6.18.44): a running
    /// entity reweighted while protected keeps its protection, relative to its
    /// vruntime and scaled by old/new weight, instead of v6.18.0's union
    /// overwriting `vprot` with the lag just saved. (6.18.35-6.18.44 carry the
    /// reweight code but still the union, which overwrites `vprot` before the
    /// code reads it: v6.18.0's behaviour.)
    pub reweight_keeps_vprot: bool,
    /// Not a features.h name: `update_entity_lag()` as a 6.18.35 tree has it:
    /// the lag is clamped to the longest slice queued on the cfs_rq plus a tick
    /// (`cfs_rq_max_slice()`, an augmented `max_slice` in the tree), not to
    /// `max(2 x own slice, TICK_NSEC)`.
    pub lag_clamp_max_slice: bool,
    /// Not a features.h name: `update_sg_wakeup_stats()` as 6.18.39 took it
    /// from 82d6e01a0699 ("Only update stats for allowed CPUs when looking for
    /// dst group"): the slow path's group statistics (load, utilisation, tasks,
    /// idle CPUs) count only the CPUs the task may run on; before, every CPU of
    /// the group (v4.19 to v6.18.38).
    pub sg_wakeup_allowed: bool,
    /// Not upstream: the placement of this project's hosts' kernel (a vendor
    /// 6.18.44 booted with `sched_vcpu_pack=15`), read from its kernel text
    /// (`select_task_rq_fair()` and its helper `vcpu_pack_room()`; the machine
    /// code read through a BPF tracepoint program, docs/policies/eevdf.md) and
    /// checked against its traces: before upstream's placement, a task is packed
    /// onto a busy CPU that has room (at most one other runnable fair task,
    /// utilisation below 70% of capacity): on a sync wakeup the waker's, on any
    /// wakeup the previous CPU, the waker's or the first such CPU; on fork and
    /// exec the parent's; a wakeup from an interrupt on an idle CPU stays on it.
    /// Otherwise upstream places the task.
    pub host_vcpu_pack: bool,
    /// Not upstream: the wakeup of a delayed task (DELAY_DEQUEUE) on this
    /// project's hosts, shown by an experiment on them, not read from source: a
    /// pipe pair held on one vCPU for 20 000 round trips (every sleep a delayed
    /// dequeue, every wakeup a requeue in place) splits onto both vCPUs within
    /// three round trips once both are allowed, where upstream v6.18's
    /// `ttwu_runnable()` would requeue the wakee where it sleeps for as long as the
    /// pair runs (`tools/host-delayed-wake/`, docs/validate.md). The rule that
    /// explains it is Mike Galbraith's "sched/fair: Dequeue sched_delayed tasks
    /// when waking to a busy CPU" (tip sched/urgent d68803506ffb, November 2024;
    /// not in mainline): a delayed task woken while its runqueue holds another
    /// task, and allowed on another CPU, is dequeued for good and placed by
    /// `select_task_rq_fair()` like any sleeper.
    pub host_dequeue_delayed_busy: bool,
}

impl Features {
    pub fn v4_19() -> Features {
        Features::for_version(KernelVersion::V4_19)
    }

    /// features.h of `version`. The seed patches are off; NUMA_FORK_SPREAD is part
    /// of v5.15.
    pub fn for_version(version: KernelVersion) -> Features {
        let eevdf = version.eevdf();
        let v612 = version >= KernelVersion::V6_12;
        Features {
            version,
            start_debit: true,
            gentle_fair_sleepers: true,
            next_buddy: false,
            last_buddy: true,
            cache_hot_buddy: true,
            wakeup_preemption: true,
            sis_avg_cpu: false,
            // v3.0 has no SIS_PROP scan limit and no wake_affine_idle(); v6.6 turned
            // SIS_PROP off (SIS_UTIL on) and v6.12 removed it.
            sis_prop: version != KernelVersion::V3_0 && !eevdf,
            wa_idle: version != KernelVersion::V3_0,
            wa_weight: true,
            wa_bias: true,
            lb_bias: version.pre_rework(),
            steal: false,
            scale_wakeup_gran: false,
            numa_fork_spread: version >= KernelVersion::V5_15,
            load_resolution: true,
            place_lag: eevdf,
            place_deadline_initial: eevdf,
            place_rel_deadline: v612,
            run_to_parity: eevdf,
            preempt_short: v612,
            delay_dequeue: v612,
            delay_zero: v612,
            pick_buddy: version >= KernelVersion::V6_18,
            sis_util: eevdf,
            util_est: version != KernelVersion::V3_0,
            util_est_fastup: matches!(version, KernelVersion::V5_10 | KernelVersion::V5_15 | KernelVersion::V6_6),
            newidle_cost_bump: version == KernelVersion::V6_18,
            yield_forfeit: false,
            ni_random: false,
            wakeup_preempt_619: false,
            reweight_keeps_vprot: false,
            lag_clamp_max_slice: false,
            sg_wakeup_allowed: false,
            host_vcpu_pack: false,
            host_dequeue_delayed_busy: false,
        }
    }

    /// Whether `name` is a switch in this version: LB_BIAS went with the load
    /// indexes (v5.0), SIS_AVG_CPU in v5.13; the seed patches apply to the kernel
    /// they were posted against (STEAL: 4.20-rc1, SCALE_WAKEUP_GRAN: 5.15-rc1,
    /// NUMA_FORK_SPREAD: 5.10-rc2 and merged in 5.11).
    fn exists(&self, name: &str) -> bool {
        use KernelVersion::*;
        let eevdf = self.version.eevdf();
        match name {
            // EEVDF's own switches, from the release that added them.
            "PLACE_LAG" | "PLACE_DEADLINE_INITIAL" | "RUN_TO_PARITY" => eevdf,
            "PLACE_REL_DEADLINE" | "PREEMPT_SHORT" | "DELAY_DEQUEUE" | "DELAY_ZERO" => self.version >= V6_12,
            "PICK_BUDDY" => self.version >= V6_18,
            "SIS_UTIL" => eevdf,
            "UTIL_EST" => self.version != V3_0,
            "UTIL_EST_FASTUP" => matches!(self.version, V5_10 | V5_15 | V6_6),
            // Stable-branch changes, offered where a release's .y took them.
            "NEWIDLE_COST_BUMP" => matches!(self.version, V6_12 | V6_18),
            "YIELD_FORFEIT"
            | "NI_RANDOM"
            | "WAKEUP_PREEMPT_619"
            | "REWEIGHT_KEEPS_VPROT"
            | "LAG_CLAMP_MAX_SLICE"
            | "SG_WAKEUP_ALLOWED" => self.version == V6_18,
            // A host's non-upstream placement (read from its kernel text) and
            // delayed-task wakeup (inferred from an experiment).
            "HOST_VCPU_PACK" | "HOST_DEQUEUE_DELAYED_BUSY" => self.version == V6_18,
            // CFS's, gone with v6.6 (sleeper credit, START_DEBIT, LAST_BUDDY), or
            // seed patches that target one CFS kernel; SIS_PROP went in v6.12 and
            // the v5.11 NUMA fork rule is unconditional since.
            "START_DEBIT" | "GENTLE_FAIR_SLEEPERS" | "LAST_BUDDY" => !eevdf,
            "SIS_PROP" if eevdf => self.version == V6_6,
            "LB_BIAS" => self.version.pre_rework(),
            "STEAL" => self.version == V4_19,
            "SIS_AVG_CPU" => matches!(self.version, V4_19 | V5_10),
            "SCALE_WAKEUP_GRAN" => self.version == V5_15,
            "NUMA_FORK_SPREAD" => !self.version.pre_rework() && !eevdf,
            // Added after v3.0 (3.8-4.14): WA_* with wake_affine()'s split, SIS_* scan limits.
            "SIS_PROP" | "WA_IDLE" | "WA_WEIGHT" | "WA_BIAS" => self.version != V3_0,
            _ => true,
        }
    }

    /// Every switch this version has, with its state.
    pub fn in_force(&self) -> Vec<(&'static str, bool)> {
        let mut f = self.clone();
        NAMES.iter().filter(|n| self.exists(n)).filter_map(|n| f.slot(n).map(|on| (*n, *on))).collect()
    }

    /// The switch called `name` in features.h.
    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "STEAL" => &mut self.steal,
            "SCALE_WAKEUP_GRAN" => &mut self.scale_wakeup_gran,
            "NUMA_FORK_SPREAD" => &mut self.numa_fork_spread,
            "LOAD_RESOLUTION" => &mut self.load_resolution,
            "START_DEBIT" => &mut self.start_debit,
            "GENTLE_FAIR_SLEEPERS" => &mut self.gentle_fair_sleepers,
            "NEXT_BUDDY" => &mut self.next_buddy,
            "LAST_BUDDY" => &mut self.last_buddy,
            "CACHE_HOT_BUDDY" => &mut self.cache_hot_buddy,
            "WAKEUP_PREEMPTION" => &mut self.wakeup_preemption,
            "SIS_PROP" => &mut self.sis_prop,
            "SIS_AVG_CPU" => &mut self.sis_avg_cpu,
            "WA_IDLE" => &mut self.wa_idle,
            "WA_WEIGHT" => &mut self.wa_weight,
            "WA_BIAS" => &mut self.wa_bias,
            "LB_BIAS" => &mut self.lb_bias,
            "PLACE_LAG" => &mut self.place_lag,
            "PLACE_DEADLINE_INITIAL" => &mut self.place_deadline_initial,
            "PLACE_REL_DEADLINE" => &mut self.place_rel_deadline,
            "RUN_TO_PARITY" => &mut self.run_to_parity,
            "PREEMPT_SHORT" => &mut self.preempt_short,
            "DELAY_DEQUEUE" => &mut self.delay_dequeue,
            "DELAY_ZERO" => &mut self.delay_zero,
            "PICK_BUDDY" => &mut self.pick_buddy,
            "SIS_UTIL" => &mut self.sis_util,
            "UTIL_EST" => &mut self.util_est,
            "UTIL_EST_FASTUP" => &mut self.util_est_fastup,
            "NEWIDLE_COST_BUMP" => &mut self.newidle_cost_bump,
            "YIELD_FORFEIT" => &mut self.yield_forfeit,
            "NI_RANDOM" => &mut self.ni_random,
            "WAKEUP_PREEMPT_619" => &mut self.wakeup_preempt_619,
            "REWEIGHT_KEEPS_VPROT" => &mut self.reweight_keeps_vprot,
            "LAG_CLAMP_MAX_SLICE" => &mut self.lag_clamp_max_slice,
            "SG_WAKEUP_ALLOWED" => &mut self.sg_wakeup_allowed,
            "HOST_VCPU_PACK" => &mut self.host_vcpu_pack,
            "HOST_DEQUEUE_DELAYED_BUSY" => &mut self.host_dequeue_delayed_busy,
            _ => return None,
        })
    }

    /// Applies `+A+NO_B` style switches.
    pub fn apply(&mut self, list: &str) -> Result<(), SpecError> {
        for f in list.split('+') {
            let (name, on) = match f.strip_prefix("NO_") {
                Some(n) => (n, false),
                None => (f, true),
            };
            let exists = self.exists(name);
            match self.slot(name) {
                Some(s) if exists => *s = on,
                _ => {
                    let known: Vec<&str> = NAMES.iter().copied().filter(|n| self.exists(n)).collect();
                    return Err(SpecError::new(
                        "policy feature",
                        f,
                        format!(
                            "a feature modelled for {}@{} ({}), optionally prefixed NO_; others are not modelled",
                            self.version.family(),
                            self.version.name(),
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The switches that differ from the version's defaults, as `+A+NO_B`.
    pub fn suffix(&self) -> String {
        let (mut me, mut base) = (self.clone(), Features::for_version(self.version));
        let mut out = String::new();
        for name in NAMES {
            let mine = *me.slot(name).expect("NAMES lists slots");
            if mine != *base.slot(name).expect("NAMES lists slots") {
                out.push('+');
                if !mine {
                    out.push_str("NO_");
                }
                out.push_str(name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_name_is_a_switch_and_round_trips() {
        let mut f = Features::v4_19();
        for name in NAMES {
            assert!(f.slot(name).is_some(), "{name}");
        }
        f.apply("STEAL+NO_WA_IDLE").unwrap();
        assert_eq!(f.suffix(), "+STEAL+NO_WA_IDLE");
        let e = f.apply("NO_SUCH").unwrap_err();
        assert!(e.expected.contains("LB_BIAS"), "{e}");
    }

    #[test]
    fn switches_exist_only_in_their_versions() {
        let mut f = Features::for_version(KernelVersion::V5_15);
        assert!(f.numa_fork_spread && !f.lb_bias && !f.scale_wakeup_gran);
        f.apply("SCALE_WAKEUP_GRAN").unwrap();
        assert_eq!(f.suffix(), "+SCALE_WAKEUP_GRAN");
        let e = f.apply("STEAL").unwrap_err();
        assert!(e.expected.contains("cfs@5.15") && !e.expected.contains("STEAL"), "{e}");
        assert!(f.apply("SIS_AVG_CPU").is_err());
        let mut f = Features::for_version(KernelVersion::V5_10);
        assert!(!f.numa_fork_spread);
        f.apply("NUMA_FORK_SPREAD").unwrap();
        assert_eq!(f.suffix(), "+NUMA_FORK_SPREAD");
        assert!(f.apply("SCALE_WAKEUP_GRAN").is_err());
        assert!(Features::v4_19().apply("NUMA_FORK_SPREAD").is_err());
    }

    #[test]
    fn util_est_is_every_release_from_v4_19_and_fastup_v5_10_to_v6_6() {
        use KernelVersion::*;
        for v in [V3_0, V4_19, V5_10, V5_15, V6_6, V6_12, V6_18] {
            let f = Features::for_version(v);
            assert_eq!(f.util_est, v != V3_0, "{v:?}");
            assert_eq!(f.util_est_fastup, matches!(v, V5_10 | V5_15 | V6_6), "{v:?}");
            let mut g = f.clone();
            assert_eq!(g.apply("NO_UTIL_EST").is_ok(), v != V3_0, "{v:?}");
            assert_eq!(g.apply("NO_UTIL_EST_FASTUP").is_ok(), matches!(v, V5_10 | V5_15 | V6_6), "{v:?}");
        }
        let mut f = Features::v4_19();
        f.apply("NO_UTIL_EST").unwrap();
        assert!(!f.util_est);
        assert_eq!(f.suffix(), "+NO_UTIL_EST");
    }
}
