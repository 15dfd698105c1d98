//! Recording a real command's scheduler events: a private tracefs instance around
//! a supervised session.

use std::time::Duration;

use crate::run::{Outcome, Supervised};
use crate::tracefs::Instance;
use crate::{signals, HostError};

/// What a recording produced.
#[derive(Debug)]
pub struct Recording {
    /// The instance's `trace` file: the kernel's ftrace text, header included.
    pub text: String,
    pub outcome: Outcome,
}

/// Runs `argv` in its own session with the scheduler tracepoints recording into a
/// private instance of `buffer_kb` KiB per CPU, for at most `limit`. With
/// `runtime`, `sched_stat_runtime` too: the runtime each `update_curr()` charges
/// to the running task (one more event per update, so a heavier trace). Tracing
/// starts just before the command and stops as soon as it ends; the instance is
/// removed (and tracefs unmounted if it was mounted here) on every path out.
pub fn record(argv: &[String], buffer_kb: u32, limit: Duration, runtime: bool) -> Result<Recording, HostError> {
    signals::install();
    let inst = Instance::open(buffer_kb)?;
    if runtime {
        inst.enable("sched_stat_runtime")?;
    }
    inst.set_on(true)?;
    let outcome = {
        let mut child = Supervised::spawn(argv)?;
        child.wait(limit)?
    };
    inst.set_on(false)?;
    let text = inst.read_trace()?;
    Ok(Recording { text, outcome })
}
