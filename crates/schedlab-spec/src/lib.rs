//! What to simulate and how its results come back, shared by the two front ends
//! (the `schedlab` command line and the Python package): a run's spec and its
//! parsers, the shipped machine profiles, experiments and suites, comparisons of
//! policies, the parallel runner, and a run's report. Nothing here parses a
//! command line or prints on its own: a front end decides what to show.

pub mod compare;
pub mod events;
pub mod experiment;
pub mod machines;
pub mod parallel;
pub mod report;
pub mod run;
pub mod shipped;
pub mod suite;
pub mod sweep;

pub use run::{RunRequest, RunSpec};
pub use schedlab_core::error::SpecError;

/// A failure: bad input (exit 2), a host that cannot do what was asked (no
/// permission, not Linux, no tracefs: exit 2), or something that went wrong
/// while running (exit 1).
#[derive(Debug)]
pub enum Failure {
    Input(SpecError),
    Host(String),
    Run(String),
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::Input(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Input(e) => write!(f, "{e}"),
            Failure::Host(m) | Failure::Run(m) => f.write_str(m),
        }
    }
}
