//! schedlab-core: the deterministic discrete-event core of schedlab.
//!
//! No I/O lives here. A run is a pure function of its inputs: a topology, a machine
//! cost profile, a policy implementing [`sched::SchedClass`], a workload's main
//! [`program::Program`] and a seed. See docs/ARCHITECTURE.md.

pub mod cost;
pub mod cpuset;
pub mod engine;
pub mod error;
pub mod events;
pub mod ipc;
pub mod memory;
pub mod program;
pub mod rng;
pub mod sched;
pub mod stats;
pub mod task;
pub mod topology;
pub mod trace;

pub use cost::MachineProfile;
pub use engine::{Engine, RunConfig, RunResult, MARK_END, MARK_START};
pub use error::SpecError;
pub use topology::Topology;
