//! schedlab-policies: scheduling policies behind `SchedClass`, one folder per
//! scheduler, named `family@version` with `+FEATURE` switches.

pub mod bsd4;
pub mod cfs;
pub mod fifo;
pub mod ule;

use schedlab_core::error::SpecError;
use schedlab_core::sched::SchedClass;

/// Policies this build knows, for help texts and errors.
pub const POLICIES: &[(&str, &str)] = &[
    ("fifo", "one global FIFO queue: the ideal work-conserving reference"),
    ("cfs@3.0", "Linux CFS as of v3.0: balancing on instantaneous weights, no PELT; +NO_LOAD_RESOLUTION (Rao 2011)"),
    ("cfs@4.19", "Linux CFS as of v4.19; features: +STEAL (Sistare 2018), +NO_<feature> for features.h switches"),
    ("cfs@5.10", "Linux CFS as of v5.10; features: +NUMA_FORK_SPREAD (Gorman 2020), +NO_LOAD_RESOLUTION"),
    ("cfs@5.15", "Linux CFS as of v5.15; features: +SCALE_WAKEUP_GRAN (Gorman 2021), +NO_LOAD_RESOLUTION"),
    ("eevdf@6.6", "Linux EEVDF as of v6.6: lag placement, eligibility, earliest virtual deadline, RUN_TO_PARITY"),
    ("eevdf@6.12", "Linux EEVDF as of v6.12: + DELAY_DEQUEUE, PREEMPT_SHORT, PLACE_REL_DEADLINE (+NO_<feature> to switch off)"),
    ("eevdf@6.18", "Linux EEVDF as of v6.18: + protected slice (vprot), 0.70 ms base slice, PICK_BUDDY, forfeiting yield"),
    ("ule@pre", "FreeBSD ULE before D12130 (11.1): idle steal under spinlock_enter(); tunables --sysctl kern.sched.*"),
    ("ule@post", "FreeBSD ULE after D12130 (11.2/12.0): interruptible idle steal, switch-out trysteal"),
    ("4bsd", "FreeBSD 4BSD (sched_4bsd.c, 11/12): one global run queue, estcpu decay; --sysctl kern.sched.quantum|slice"),
];

/// Builds a policy from its name (`fifo`, later `cfs@4.19+STEAL` …) and `--sysctl`s.
pub fn policy_by_name(name: &str, sysctls: &[(String, String)]) -> Result<Box<dyn SchedClass>, SpecError> {
    let (base, features) = match name.split_once('+') {
        Some((b, f)) => (b, Some(f)),
        None => (name, None),
    };
    let known = POLICIES.iter().map(|p| p.0).collect::<Vec<_>>().join(", ");
    // A switch given twice, or on and off (`+STEAL+NO_STEAL`), is refused rather
    // than resolved by its last mention.
    if let Some(f) = features {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for given in f.split('+') {
            let switch = given.strip_prefix("NO_").unwrap_or(given);
            if let Some((_, first)) = seen.iter().find(|(s, _)| *s == switch) {
                return Err(SpecError::new("policy feature", given, format!("each switch once (given as {first} and {given})")));
            }
            seen.push((switch, given));
        }
    }
    match base {
        "fifo" => {
            if let Some(f) = features {
                return Err(SpecError::new("policy feature", f, "no features for fifo"));
            }
            Ok(Box::new(fifo::GlobalFifo::new(sysctls)?))
        }
        b if b.starts_with("cfs@") => Ok(Box::new(cfs::Cfs::new(&b[4..], features, sysctls)?)),
        b if b.starts_with("eevdf@") => Ok(Box::new(cfs::Cfs::new_eevdf(&b[6..], features, sysctls)?)),
        "4bsd" => {
            if let Some(f) = features {
                return Err(SpecError::new("policy feature", f, "no features for 4bsd"));
            }
            Ok(Box::new(bsd4::Bsd4::new(sysctls)?))
        }
        b if b.starts_with("ule@") => Ok(Box::new(ule::Ule::new(&b[4..], features, sysctls)?)),
        _ => Err(SpecError::new("policy", name, format!("one of: {known}"))),
    }
}
