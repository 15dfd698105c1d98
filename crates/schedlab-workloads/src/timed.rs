//! The main process of a benchmark that runs `n` instances for a set time
//! (stress-ng's stressors, UnixBench's `Run`): it marks the start of the window,
//! forks the instances, sleeps through the duration (standing in for the
//! instances' own timers or alarm), raises the shared stop flag at the end of the
//! window, and reaps them.

use std::cell::Cell;
use std::rc::Rc;

use schedlab_core::engine::{MARK_END, MARK_START};
use schedlab_core::program::{ForkKind, Op, OpResult, Program};
use schedlab_core::rng::SimRng;

/// The stop flag the instances share: set once the duration is over.
pub type Stop = Rc<Cell<bool>>;

/// Builds an instance that watches the stop flag.
pub type MakeInstance = Box<dyn Fn(Stop) -> Box<dyn Program>>;

pub struct TimedInstances {
    instances: u64,
    duration_ns: u64,
    /// The instances' name (`comm`).
    comm: &'static str,
    stop: Stop,
    instance: MakeInstance,
    step: u64,
    reaped: u64,
}

impl TimedInstances {
    pub fn new(instances: u64, duration_ns: u64, comm: &'static str, instance: MakeInstance) -> TimedInstances {
        TimedInstances { instances, duration_ns, comm, stop: Rc::new(Cell::new(false)), instance, step: 0, reaped: 0 }
    }
}

impl Program for TimedInstances {
    fn next(&mut self, _last: OpResult, _rng: &mut SimRng) -> Op {
        self.step += 1;
        let n = self.instances;
        match self.step {
            1 => Op::Mark { label: MARK_START },
            k if k <= 1 + n => {
                Op::Fork { kind: ForkKind::Process, comm: Some(self.comm.into()), program: (self.instance)(self.stop.clone()) }
            }
            k if k == 2 + n => Op::Sleep { ns: self.duration_ns },
            k if k == 3 + n => {
                self.stop.set(true);
                Op::Mark { label: MARK_END }
            }
            _ if self.reaped < n => {
                self.reaped += 1;
                Op::WaitChild
            }
            _ => Op::Exit,
        }
    }
}
