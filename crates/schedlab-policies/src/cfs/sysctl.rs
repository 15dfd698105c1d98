//! CFS tunables by their kernel names, with the boot-time CPU-count scaling of
//! `sched_init_granularity()`/`update_sysctl()` (fair.c, v4.19).

use schedlab_core::error::SpecError;

/// `SCHED_TUNABLESCALING_LOG`: factor 1 + ilog2(min(ncpus, 8)).
const TUNABLESCALING_LOG: u64 = 1;

/// Effective values (what /proc/sys/kernel/sched_* reads back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysctls {
    /// `sysctl_sched_latency`: normalized 6 ms.
    pub latency_ns: u64,
    /// `sysctl_sched_min_granularity`: normalized 0.75 ms.
    pub min_granularity_ns: u64,
    /// `sysctl_sched_wakeup_granularity`: normalized 1 ms.
    pub wakeup_granularity_ns: u64,
    /// `sched_nr_latency` = latency / min_granularity (8).
    pub nr_latency: u64,
    /// `sysctl_sched_migration_cost`: 0.5 ms, not scaled.
    pub migration_cost_ns: u64,
    /// `sysctl_sched_nr_migrate`: 32.
    pub nr_migrate: u64,
    /// `sysctl_sched_child_runs_first`: 0.
    pub child_runs_first: bool,
    /// EEVDF's `sysctl_sched_base_slice` (debugfs `base_slice_ns`): the normalized
    /// base slice times the same factor. Only EEVDF reads it, and only EEVDF
    /// accepts it; EEVDF has no latency or wakeup granularity.
    pub base_slice_ns: u64,
    /// Whether these are EEVDF's tunables (v6.6+) rather than CFS's.
    pub eevdf: bool,
}

impl Sysctls {
    /// The values in force, by their sysctl (or debugfs) names.
    pub fn in_force(&self) -> Vec<(&'static str, u64)> {
        let mut v = if self.eevdf {
            vec![("base_slice_ns", self.base_slice_ns)]
        } else {
            vec![
                ("sched_latency_ns", self.latency_ns),
                ("sched_min_granularity_ns", self.min_granularity_ns),
                ("sched_wakeup_granularity_ns", self.wakeup_granularity_ns),
                ("sched_child_runs_first", u64::from(self.child_runs_first)),
            ]
        };
        v.extend([("sched_migration_cost_ns", self.migration_cost_ns), ("sched_nr_migrate", self.nr_migrate)]);
        v
    }
}

/// `normalized_sysctl_sched_base_slice` (fair.c v6.6 L75: 0.75 ms).
pub const NORMALIZED_BASE_SLICE_NS: u64 = 750_000;
/// From v6.15 (2ae891b82695 "sched: Reduce the default slice to avoid tasks
/// getting an extra tick"): 0.70 ms; 6.18 has it.
pub const NORMALIZED_BASE_SLICE_V615_NS: u64 = 700_000;

/// Normalized defaults (fair.c top of file, v4.19).
pub const NORMALIZED_LATENCY_NS: u64 = 6_000_000;
pub const NORMALIZED_MIN_GRANULARITY_NS: u64 = 750_000;
pub const NORMALIZED_WAKEUP_GRANULARITY_NS: u64 = 1_000_000;

/// `get_update_sysctl_factor()` for SCHED_TUNABLESCALING_LOG.
pub fn sysctl_factor(ncpus: usize, scaling: u64) -> u64 {
    let cpus = ncpus.clamp(1, 8) as u64;
    match scaling {
        0 => 1,
        TUNABLESCALING_LOG => 1 + cpus.ilog2() as u64,
        _ => cpus,
    }
}

impl Sysctls {
    /// Boot values on a machine with `ncpus` online CPUs.
    pub fn boot(ncpus: usize) -> Sysctls {
        Sysctls::boot_with(ncpus, None)
    }

    /// Boot values; `normalized_base_slice_ns` given for an EEVDF kernel.
    pub fn boot_with(ncpus: usize, normalized_base_slice_ns: Option<u64>) -> Sysctls {
        let f = sysctl_factor(ncpus, TUNABLESCALING_LOG);
        Sysctls {
            base_slice_ns: f * normalized_base_slice_ns.unwrap_or(NORMALIZED_BASE_SLICE_NS),
            eevdf: normalized_base_slice_ns.is_some(),
            latency_ns: f * NORMALIZED_LATENCY_NS,
            min_granularity_ns: f * NORMALIZED_MIN_GRANULARITY_NS,
            wakeup_granularity_ns: f * NORMALIZED_WAKEUP_GRANULARITY_NS,
            nr_latency: NORMALIZED_LATENCY_NS.div_ceil(NORMALIZED_MIN_GRANULARITY_NS),
            migration_cost_ns: 500_000,
            nr_migrate: 32,
            child_runs_first: false,
        }
    }

    /// Applies `--sysctl name=value` settings, as writing /proc/sys/kernel/NAME would
    /// (`sched_proc_update_handler` recomputes `sched_nr_latency`).
    pub fn apply(&mut self, settings: &[(String, String)]) -> Result<(), SpecError> {
        for (k, v) in settings {
            let val: u64 = v.parse().map_err(|_| SpecError::new(format!("sysctl {k}"), v, "a non-negative integer"))?;
            if self.eevdf {
                let slot = match k.as_str() {
                    "base_slice_ns" => &mut self.base_slice_ns,
                    "sched_migration_cost_ns" => &mut self.migration_cost_ns,
                    "sched_nr_migrate" => &mut self.nr_migrate,
                    _ => {
                        return Err(SpecError::new(
                            "sysctl",
                            k,
                            "an EEVDF tunable: base_slice_ns, sched_migration_cost_ns, sched_nr_migrate",
                        ))
                    }
                };
                // sched_update_scaling() takes any value; a slice under 0.1 ms is what
                // sched_setattr() refuses for a custom slice, so keep the same floor.
                if k == "base_slice_ns" && !(100_000..=100_000_000).contains(&val) {
                    return Err(SpecError::new(format!("sysctl {k}"), v, "an integer from 100000 to 100000000"));
                }
                *slot = val;
                continue;
            }
            let slot = match k.as_str() {
                "sched_latency_ns" => &mut self.latency_ns,
                "sched_min_granularity_ns" => &mut self.min_granularity_ns,
                "sched_wakeup_granularity_ns" => &mut self.wakeup_granularity_ns,
                "sched_migration_cost_ns" => &mut self.migration_cost_ns,
                "sched_nr_migrate" => &mut self.nr_migrate,
                "sched_child_runs_first" => {
                    self.child_runs_first = val != 0;
                    continue;
                }
                _ => {
                    return Err(SpecError::new(
                        "sysctl",
                        k,
                        "a CFS sysctl: sched_latency_ns, sched_min_granularity_ns, sched_wakeup_granularity_ns, \
                         sched_migration_cost_ns, sched_nr_migrate, sched_child_runs_first",
                    ))
                }
            };
            // The kernel's proc handlers bound these: min_granularity ≥ 100 µs, latency
            // and wakeup granularity ≤ 1 s.
            let (lo, hi) = match k.as_str() {
                "sched_min_granularity_ns" => (100_000, 1_000_000_000),
                "sched_latency_ns" => (100_000, 1_000_000_000),
                "sched_wakeup_granularity_ns" => (0, 1_000_000_000),
                _ => (0, u64::MAX),
            };
            if !(lo..=hi).contains(&val) {
                return Err(SpecError::new(format!("sysctl {k}"), v, format!("an integer from {lo} to {hi}")));
            }
            *slot = val;
        }
        self.nr_latency = self.latency_ns.div_ceil(self.min_granularity_ns);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_caps_at_eight_cpus() {
        assert_eq!(sysctl_factor(1, 1), 1);
        assert_eq!(sysctl_factor(2, 1), 2);
        assert_eq!(sysctl_factor(4, 1), 3);
        assert_eq!(sysctl_factor(20, 1), 4);
        let s = Sysctls::boot(20);
        assert_eq!(
            (s.latency_ns, s.min_granularity_ns, s.wakeup_granularity_ns, s.nr_latency),
            (24_000_000, 3_000_000, 4_000_000, 8)
        );
    }

    #[test]
    fn sysctl_sets_effective_value() {
        let mut s = Sysctls::boot(20);
        s.apply(&[("sched_wakeup_granularity_ns".into(), "15000000".into())]).unwrap();
        assert_eq!(s.wakeup_granularity_ns, 15_000_000);
        assert!(s.apply(&[("sched_min_granularity_ns".into(), "5".into())]).is_err());
        assert!(s.apply(&[("sched_bogus".into(), "5".into())]).is_err());
    }
}
