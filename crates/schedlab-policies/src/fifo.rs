//! `fifo`: one global first-in first-out runqueue shared by every CPU. Not a kernel
//! policy: the reference bound of an ideal work-conserving scheduler. A woken task
//! goes to an idle CPU when there is one (its previous CPU first), and no CPU idles
//! while the queue holds a task it may run. Runs are never preempted on wakeup; a
//! busy tick rotates the queue after `sched_rr_timeslice_ms`, like SCHED_RR.

use std::collections::VecDeque;

use schedlab_core::error::SpecError;
use schedlab_core::sched::{DequeueReason, EnqueueReason, SchedClass, System, WakeFlags};
use schedlab_core::task::TaskId;

/// `RR_TIMESLICE` (include/linux/sched/rt.h): 100 ms.
pub const DEFAULT_RR_TIMESLICE_MS: u64 = 100;

pub struct GlobalFifo {
    queue: VecDeque<TaskId>,
    running: Vec<Option<TaskId>>,
    run_start_ns: Vec<u64>,
    rr_timeslice_ns: u64,
}

impl GlobalFifo {
    /// Accepts the sysctl `sched_rr_timeslice_ms`.
    pub fn new(sysctls: &[(String, String)]) -> Result<Self, SpecError> {
        let mut rr_ms = DEFAULT_RR_TIMESLICE_MS;
        for (k, v) in sysctls {
            match k.as_str() {
                "sched_rr_timeslice_ms" => {
                    rr_ms = v.parse().ok().filter(|&x| x > 0).ok_or_else(|| {
                        SpecError::new("sysctl sched_rr_timeslice_ms", v, "a positive integer number of milliseconds")
                    })?;
                }
                _ => return Err(SpecError::new("sysctl", k, "a sysctl the fifo policy knows: sched_rr_timeslice_ms")),
            }
        }
        Ok(GlobalFifo {
            queue: VecDeque::new(),
            running: Vec::new(),
            run_start_ns: Vec::new(),
            rr_timeslice_ns: rr_ms * 1_000_000,
        })
    }
}

impl SchedClass for GlobalFifo {
    fn name(&self) -> String {
        "fifo".to_string()
    }

    fn init(&mut self, sys: &mut System) {
        self.running = vec![None; sys.ncpus()];
        self.run_start_ns = vec![0; sys.ncpus()];
    }

    fn select_task_rq(&mut self, sys: &mut System, p: TaskId, prev_cpu: usize, _waker_cpu: usize, _flags: WakeFlags) -> usize {
        // One bitmap lookup: the ideal policy's search is free of scans.
        sys.charge_search(prev_cpu, 1, 0, 0);
        // The previous CPU if idle, else the next idle CPU after it, wrapping.
        let task = &sys.tasks[p];
        sys.idle_mask().iter_wrap(prev_cpu).find(|&cpu| task.can_run_on(cpu)).unwrap_or(prev_cpu)
    }

    fn enqueue_task(&mut self, _sys: &mut System, _cpu: usize, p: TaskId, _reason: EnqueueReason) {
        self.queue.push_back(p);
    }

    fn dequeue_task(&mut self, _sys: &mut System, cpu: usize, p: TaskId, _reason: DequeueReason) {
        if self.running[cpu] == Some(p) {
            self.running[cpu] = None;
        } else if let Some(i) = self.queue.iter().position(|&t| t == p) {
            self.queue.remove(i);
        }
    }

    fn check_preempt_curr(&mut self, _sys: &mut System, _cpu: usize, _p: TaskId, _flags: WakeFlags) -> bool {
        false
    }

    fn pick_next_task(&mut self, sys: &mut System, cpu: usize, prev: Option<TaskId>) -> Option<TaskId> {
        if let Some(prev) = prev {
            self.running[cpu] = None;
            self.queue.push_back(prev);
        }
        let i = self.queue.iter().position(|&t| sys.tasks[t].can_run_on(cpu))?;
        let next = self.queue.remove(i).expect("position is in range");
        sys.set_task_cpu(next, cpu);
        self.running[cpu] = Some(next);
        self.run_start_ns[cpu] = sys.now_ns;
        Some(next)
    }

    fn task_tick(&mut self, sys: &mut System, cpu: usize, _curr: TaskId) -> bool {
        !self.queue.is_empty() && sys.now_ns - self.run_start_ns[cpu] >= self.rr_timeslice_ns
    }

    fn nr_running(&self, cpu: usize) -> usize {
        self.running[cpu].is_some() as usize
    }

    fn nr_running_total(&self) -> usize {
        self.queue.len() + self.running.iter().filter(|r| r.is_some()).count()
    }
}
