//! What arming a timer costs when it reprograms the CPU's timer device
//! (`MachineProfile::timer_program_ns`).
//!
//! A thread pinned to one CPU spins 100 us (so its tick runs), reads the clock and
//! calls nanosleep() (timer slack 1 ns), over and over, while a private tracefs
//! instance records its switches out on the monotonic clock. A sleep of 50 us
//! expires before the CPU's next tick, so arming it reprograms the timer device
//! (`hrtimer_reprogram()`); one longer than a tick period expires after the next
//! tick, which stays the device's first event. Everything else on the way from
//! the clock read to the switch out (the system call's entry, `hrtimer_start()`'s
//! own work, the dequeue, `__schedule()` up to the tracepoint) is the same for
//! both, so the difference of the two medians is the programming. Sleeps that
//! never switched out (the timer fired first) are counted apart.

use std::time::Duration;

use crate::sys::{cpu_set_of, now_ns, set_affinity, spin_for};
use crate::tracefs::Instance;
use crate::{signals, HostError};

/// The short sleep: well inside any tick period (HZ up to 1000).
const NEAR_SLEEP_NS: u64 = 50_000;
/// The long sleep: longer than the longest tick period (HZ = 100).
const FAR_SLEEP_NS: u64 = 12_000_000;
/// The spin before each sleep: the CPU is busy, its tick running.
const SPIN_NS: u64 = 100_000;

/// The two medians and how many sleeps each is of.
#[derive(Clone, Debug, PartialEq)]
pub struct TimerProgram {
    /// Clock read to switch out, sleeps that expire before the next tick.
    pub near_median_ns: f64,
    pub near_switched: usize,
    /// Sleeps of the near kind that never switched out.
    pub near_unswitched: usize,
    /// The same for sleeps that expire after the next tick.
    pub far_median_ns: f64,
    pub far_switched: usize,
}

impl TimerProgram {
    /// The programming's cost: the near median less the far one, at least 0.
    pub fn program_ns(&self) -> f64 {
        (self.near_median_ns - self.far_median_ns).max(0.0)
    }
}

/// Measures on `cpu`: `near` sleeps of 50 us and `far` of 12 ms, in a thread of
/// their own (its affinity and timer slack die with it).
pub fn measure(cpu: usize, near: usize, far: usize) -> Result<TimerProgram, HostError> {
    let guard = signals::install_scoped();
    let result = record(cpu, near, far);
    guard.finish();
    result
}

/// The recording: the instance is removed on every path out of here.
fn record(cpu: usize, near: usize, far: usize) -> Result<TimerProgram, HostError> {
    let inst = Instance::open(8192)?;
    inst.set_trace_clock("mono")?;
    inst.set_on(true)?;
    let sleeper = std::thread::spawn(move || sleep_many(cpu, near, far));
    let joined = sleeper.join().map_err(|_| HostError::new("the timer sleeper thread", "panicked"))?;
    inst.set_on(false)?;
    let (tid, near_reads, far_reads) = joined?;
    if signals::interrupted() {
        return Err(HostError::new("measuring the timer's programming", "interrupted"));
    }
    let text = inst.read_trace()?;
    summarise(&text, tid, &near_reads, &far_reads)
}

/// The sleeper: pinned to `cpu`, timer slack 1 ns; returns its thread id and the
/// clock read before each sleep, near ones and far ones.
fn sleep_many(cpu: usize, near: usize, far: usize) -> Result<(u32, Vec<u64>, Vec<u64>), HostError> {
    let set = cpu_set_of(&[cpu]).map_err(|e| HostError::new(format!("a CPU set of CPU {cpu}"), e))?;
    set_affinity(&set).map_err(|e| HostError::new(format!("pinning the timer sleeper to CPU {cpu}"), e))?;
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only this thread.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
        return Err(HostError::new("setting the timer slack to 1 ns", std::io::Error::last_os_error()));
    }
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    let mut reads = [Vec::with_capacity(near), Vec::with_capacity(far)];
    for (kind, (n, sleep_ns)) in [(near, NEAR_SLEEP_NS), (far, FAR_SLEEP_NS)].into_iter().enumerate() {
        for _ in 0..n {
            if signals::interrupted() {
                break;
            }
            spin_for(SPIN_NS);
            reads[kind].push(now_ns());
            std::thread::sleep(Duration::from_nanos(sleep_ns));
        }
    }
    let [near_reads, far_reads] = reads;
    Ok((tid, near_reads, far_reads))
}

/// Matches each clock read with the thread's first switch out after it, if that
/// comes before the sleep would have ended.
fn summarise(text: &str, tid: u32, near: &[u64], far: &[u64]) -> Result<TimerProgram, HostError> {
    let mut outs: Vec<u64> = Vec::new();
    for line in text.lines() {
        let Ok(Some(l)) = schedlab_trace::parse_line(line) else { continue };
        if let schedlab_trace::Event::Switch { prev_pid, .. } = l.event {
            if prev_pid == tid {
                outs.push(l.ts_ns);
            }
        }
    }
    outs.sort_unstable();
    let spans = |reads: &[u64], sleep_ns: u64| -> (Vec<f64>, usize) {
        let mut spans = Vec::new();
        let mut unswitched = 0;
        for &t0 in reads {
            let i = outs.partition_point(|&t| t < t0);
            match outs.get(i) {
                Some(&t) if t < t0 + sleep_ns => spans.push((t - t0) as f64),
                _ => unswitched += 1,
            }
        }
        (spans, unswitched)
    };
    let (near_spans, near_unswitched) = spans(near, NEAR_SLEEP_NS);
    let (far_spans, _) = spans(far, FAR_SLEEP_NS);
    if near_spans.len() * 2 < near.len() || far_spans.len() * 2 < far.len() {
        return Err(HostError::new(
            "measuring the timer's programming",
            format!(
                "the trace shows {} of {} short and {} of {} long sleeps switching out (is sched_switch traced?)",
                near_spans.len(),
                near.len(),
                far_spans.len(),
                far.len()
            ),
        ));
    }
    Ok(TimerProgram {
        near_median_ns: median(near_spans.clone()),
        near_switched: near_spans.len(),
        near_unswitched,
        far_median_ns: median(far_spans.clone()),
        far_switched: far_spans.len(),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch_out(ts_us: u64, pid: u32) -> String {
        format!(
            "  sleeper-{pid} [001] d..2. {}.{:06}: sched_switch: prev_comm=sleeper prev_pid={pid} prev_prio=120 \
             prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120",
            ts_us / 1_000_000,
            ts_us % 1_000_000
        )
    }

    /// Each clock read takes the first switch out after it within its sleep;
    /// another thread's switches and a sleep that never switched are left out.
    #[test]
    fn spans_run_from_each_clock_read_to_the_next_switch_out() {
        let lines = [
            switch_out(1_000_009, 7),
            switch_out(1_000_005, 8),
            switch_out(1_001_003, 7),
            switch_out(2_000_002, 7),
            switch_out(2_020_003, 7),
        ];
        let text = lines.join("\n");
        let near = [1_000_000_000, 1_000_990_000, 1_500_000_000];
        let far = [2_000_000_000, 2_020_000_000];
        let t = summarise(&text, 7, &near, &far).unwrap();
        assert_eq!((t.near_switched, t.near_unswitched, t.far_switched), (2, 1, 2));
        assert_eq!(t.near_median_ns, 13_000.0);
        assert_eq!(t.far_median_ns, 3_000.0);
        assert_eq!(t.program_ns(), 10_000.0);
    }
}
