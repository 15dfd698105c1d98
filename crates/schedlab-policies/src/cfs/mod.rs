//! Linux's fair scheduling class: CFS of v3.0 to v5.15 and EEVDF of v6.6 to
//! v6.18 (kernel/sched/fair.c, core.c, topology.c, pelt.c). One file per kernel
//! source area, each using the shared ones below it and none using it back:
//! `weights` (fixed point), `pelt` (load tracking), `domains` (topology.c),
//! `features` (features.h), `sysctl` (tunables) and `scan` (the simulator's
//! dense copy of what the balancer's group scans read) at the bottom; `state`
//! (the runqueues, entities and task groups every version shares) on them; then
//! what the kernel does with that state: `fair` (entity timing, runqueues, the
//! class hooks), `eevdf` (v6.6+ picking, placement and preemption), `group`
//! (task groups and their shares), `select` (wakeup and fork placement) and
//! `balance` (idle and periodic load balancing, NOHZ, the STEAL feature, and
//! the parts of `load_balance()` every version shares), whose per-version
//! halves are `balance3` (v3.0's on instantaneous weights), `balance4` (v4.19's)
//! and `balance5` (the v5.x rework, used by v5.10 to v6.18).

pub mod balance;
pub mod balance3;
pub mod balance4;
pub mod balance5;
pub mod domains;
pub mod eevdf;
pub mod fair;
pub mod features;
pub mod group;
pub mod pelt;
pub mod scan;
pub mod select;
pub mod state;
pub mod sysctl;
pub mod tree;
pub mod weights;

pub use state::Cfs;
