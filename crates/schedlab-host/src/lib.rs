//! The real machine schedlab runs on: measuring its primitives ([`calibrate`]),
//! running real workloads under the kernel's own counters, and recording what its
//! kernel scheduler does.
//!
//! Everything here touches the host (tracefs, processes, signals, perf counters) and nothing in the
//! simulator depends on it. A real run must be short, must never leave a process
//! behind and must leave tracing as it found it: [`tracefs::Instance`] owns a private
//! tracefs instance and removes it on drop, [`run::Supervised`] owns a child's whole
//! session and kills it on drop, and [`signals`] turns SIGINT/SIGTERM into a flag the
//! waiting loops check so that both drops run.

pub mod background;
pub mod calibrate;
pub mod counters;
pub mod halted_exit;
pub mod kernel;
pub mod launcher;
pub mod real;
pub mod record;
pub mod run;
pub mod signals;
mod sys;
pub mod timer_program;
pub mod tracefs;

/// A host failure: what was attempted and the operating system's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    pub what: String,
    pub reason: String,
}

impl HostError {
    pub fn new(what: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        HostError { what: what.into(), reason: reason.to_string() }
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.reason)
    }
}

impl std::error::Error for HostError {}
