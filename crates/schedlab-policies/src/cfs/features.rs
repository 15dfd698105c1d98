//! Feature switches, like kernel/sched/features.h: each is a name that `+NAME`
//! turns on and `+NO_NAME` turns off in a policy name (`cfs@4.19+STEAL`).

use schedlab_core::error::SpecError;

/// Every switch `Features::slot` knows, in the order names are printed.
const NAMES: [&str; 13] = [
    "STEAL",
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
];

/// The fair-class features this model reads, with v4.19 defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
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
}

impl Features {
    pub fn v4_19() -> Features {
        Features {
            start_debit: true,
            gentle_fair_sleepers: true,
            next_buddy: false,
            last_buddy: true,
            cache_hot_buddy: true,
            wakeup_preemption: true,
            sis_prop: true,
            sis_avg_cpu: false,
            wa_idle: true,
            wa_weight: true,
            wa_bias: true,
            lb_bias: true,
            steal: false,
        }
    }

    /// The switch called `name` in features.h.
    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "STEAL" => &mut self.steal,
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
            match self.slot(name) {
                Some(s) => *s = on,
                None => {
                    let known = NAMES.join(", ");
                    return Err(SpecError::new(
                        "policy feature",
                        f,
                        format!("a feature of cfs@4.19 ({known}), optionally prefixed NO_"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The switches that differ from the version's defaults, as `+A+NO_B`.
    pub fn suffix(&self) -> String {
        let (mut me, mut base) = (self.clone(), Features::v4_19());
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
}
