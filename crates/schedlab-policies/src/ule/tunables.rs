//! `kern.sched.*` tunables of ULE with their 2017-2018 defaults (sched_ule.c:
//! sched_initticks() and the SYSCTL declarations at the end of the file).

use schedlab_core::error::SpecError;

use super::prio::{PRI_MIN_BATCH, PRI_MIN_KERN, SCHED_INTERACT_THRESH, SCHED_SLICE_DEFAULT_DIVISOR, SCHED_SLICE_MIN_DIVISOR};
use super::Variant;

/// `stathz` of an amd64 kernel with hz = 1000 on the local APIC timer: 127 (the
/// research notes' `realstathz`; sched_initticks() derives everything from it).
pub const STATHZ: i64 = 127;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// `kern.sched.slice`: stat ticks (realstathz / 10).
    pub slice: u32,
    /// `sched_slice_min`: slice / 6.
    pub slice_min: u32,
    /// `kern.sched.interact`: interactivity threshold (30).
    pub interact: i64,
    /// `kern.sched.preempt_thresh`: PRI_MIN_KERN (80) with options PREEMPTION.
    pub preempt_thresh: i32,
    /// `kern.sched.static_boost`: PRI_MIN_BATCH (152).
    pub static_boost: i32,
    /// `kern.sched.affinity`: hz ticks per cache level, max(1, hz / 1000).
    pub affinity: i64,
    /// `kern.sched.balance`: the periodic balancer runs.
    pub balance: bool,
    /// `kern.sched.balance_interval`: mean stat ticks between balancer runs.
    pub balance_interval: i64,
    /// `kern.sched.steal_idle`: idle CPUs steal.
    pub steal_idle: bool,
    /// `kern.sched.steal_thresh`: minimum victim load (2).
    pub steal_thresh: u32,
    /// `kern.sched.trysteal_limit` (post only): levels searched at switch-out (2).
    pub trysteal_limit: u32,
    /// `kern.sched.always_steal` (post only): search on every idle-loop pass.
    pub always_steal: bool,
}

impl Tunables {
    pub fn defaults(hz: i64) -> Tunables {
        let slice = (STATHZ / SCHED_SLICE_DEFAULT_DIVISOR as i64) as u32;
        Tunables {
            slice,
            slice_min: slice / SCHED_SLICE_MIN_DIVISOR,
            interact: SCHED_INTERACT_THRESH,
            preempt_thresh: PRI_MIN_KERN,
            static_boost: PRI_MIN_BATCH,
            affinity: (hz / 1000).max(1),
            balance: true,
            balance_interval: STATHZ,
            steal_idle: true,
            steal_thresh: 2,
            trysteal_limit: 2,
            always_steal: false,
        }
    }

    /// The values in force, by their sysctl names (sysctl(8) prints booleans as
    /// 0/1; `slice` in stathz ticks).
    pub fn in_force(&self, variant: Variant) -> Vec<(&'static str, i64)> {
        let mut v = vec![
            ("kern.sched.slice", i64::from(self.slice)),
            ("kern.sched.interact", self.interact),
            ("kern.sched.preempt_thresh", i64::from(self.preempt_thresh)),
            ("kern.sched.static_boost", i64::from(self.static_boost)),
            ("kern.sched.affinity", self.affinity),
            ("kern.sched.balance", i64::from(self.balance)),
            ("kern.sched.balance_interval", self.balance_interval),
            ("kern.sched.steal_idle", i64::from(self.steal_idle)),
            ("kern.sched.steal_thresh", i64::from(self.steal_thresh)),
        ];
        if variant == Variant::Post {
            v.extend([
                ("kern.sched.trysteal_limit", i64::from(self.trysteal_limit)),
                ("kern.sched.always_steal", i64::from(self.always_steal)),
            ]);
        }
        v
    }

    /// Applies `--sysctl kern.sched.NAME=VALUE` settings.
    pub fn apply(&mut self, variant: Variant, sysctls: &[(String, String)]) -> Result<(), SpecError> {
        let mut names = vec![
            "kern.sched.quantum",
            "kern.sched.slice",
            "kern.sched.interact",
            "kern.sched.preempt_thresh",
            "kern.sched.static_boost",
            "kern.sched.affinity",
            "kern.sched.balance",
            "kern.sched.balance_interval",
            "kern.sched.steal_idle",
            "kern.sched.steal_thresh",
        ];
        if variant == Variant::Post {
            names.extend(["kern.sched.trysteal_limit", "kern.sched.always_steal"]);
        }
        for (k, v) in sysctls {
            let field = format!("sysctl {k}");
            let int = |lo: i64, hi: i64| -> Result<i64, SpecError> {
                v.parse::<i64>()
                    .ok()
                    .filter(|x| (lo..=hi).contains(x))
                    .ok_or_else(|| SpecError::new(&field, v, format!("an integer from {lo} to {hi}")))
            };
            match k.as_str() {
                "kern.sched.quantum" => {
                    // sysctl_kern_quantum(): microseconds rounded to stat ticks.
                    let us = int(1, 10_000_000)?;
                    let period_us = 1_000_000 / STATHZ;
                    self.slice = ((us + period_us / 2) / period_us).max(1) as u32;
                    self.slice_min = (self.slice / SCHED_SLICE_MIN_DIVISOR).max(1);
                }
                "kern.sched.slice" => {
                    self.slice = int(1, 100_000)? as u32;
                    self.slice_min = (self.slice / SCHED_SLICE_MIN_DIVISOR).max(1);
                }
                "kern.sched.interact" => self.interact = int(0, 100)?,
                "kern.sched.preempt_thresh" => self.preempt_thresh = int(0, 255)? as i32,
                "kern.sched.static_boost" => self.static_boost = int(0, 255)? as i32,
                "kern.sched.affinity" => self.affinity = int(0, 1_000_000)?,
                "kern.sched.balance" => self.balance = int(0, 1)? == 1,
                "kern.sched.balance_interval" => self.balance_interval = int(1, 1_000_000)?,
                "kern.sched.steal_idle" => self.steal_idle = int(0, 1)? == 1,
                "kern.sched.steal_thresh" => self.steal_thresh = int(1, 1_000_000)? as u32,
                "kern.sched.trysteal_limit" if variant == Variant::Post => self.trysteal_limit = int(0, 64)? as u32,
                "kern.sched.always_steal" if variant == Variant::Post => self.always_steal = int(0, 1)? == 1,
                _ => {
                    return Err(SpecError::new(
                        "sysctl",
                        k,
                        format!("a sysctl ule@{} knows: {}", variant.name(), names.join(", ")),
                    ))
                }
            }
        }
        Ok(())
    }
}
