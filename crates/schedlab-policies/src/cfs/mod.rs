//! Linux's fair scheduling class (CFS) as of v4.19: kernel/sched/fair.c,
//! core.c, topology.c, pelt.c. One file per kernel source area:
//! `weights` (fixed point), `pelt` (load tracking), `domains` (topology.c),
//! `fair` (entity timing, runqueues, the class hooks), `select` (wakeup and fork
//! placement), `balance` (idle and periodic load balancing, NOHZ, and the STEAL
//! feature), `balance3` (v3.0's balancer on instantaneous weights), `balance5`
//! (the v5.x rework), `features` (features.h), `sysctl` (tunables); `scan` is
//! the simulator's dense copy of what the balancer's group scans read.

pub mod balance;
pub mod balance3;
pub mod balance5;
pub mod domains;
pub mod eevdf;
pub mod fair;
pub mod features;
pub mod group;
pub mod pelt;
pub mod scan;
pub mod select;
pub mod sysctl;
pub mod weights;

pub use fair::Cfs;
