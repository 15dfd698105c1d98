//! What arming a timer costs when it reprograms the CPU's timer device
//! (`MachineProfile::timer_program_ns`).
//!
//! A thread pinned to one CPU spins 100 us (so its tick runs), reads the clock and
//! calls nanosleep() for half a tick period (timer slack 1 ns), over and over,
//! while a private tracefs instance records its switches out on the monotonic
//! clock. Started at a random phase of the tick, such a sleep expires before the
//! CPU's next tick about half the time: arming it then reprograms the timer
//! device (`hrtimer_reprogram()`); otherwise the tick stays the device's first
//! event. Everything else on the way from the clock read to the switch out (the
//! system call's entry, `hrtimer_start()`'s own work, the dequeue,
//! `__schedule()` up to the tracepoint) is the same, so the spans fall in two
//! groups, and the difference of their medians is the programming. (Sleeps
//! longer than a tick period are no baseline on this project's hosts: after the
//! long idle they take as long as the short ones, though they cannot come
//! before the tick.) The groups are split where the spans' within-group
//! variance is least (Otsu's threshold); each must hold a fifth of the sleeps.

use std::time::Duration;

use crate::sys::{exact_sleeper_on, now_ns, spin_for};
use crate::tracefs::Instance;
use crate::{signals, HostError};

/// The spin before each sleep: the CPU is busy, its tick running.
const SPIN_NS: u64 = 100_000;

/// The two groups of spans and the sleeps that never switched out.
#[derive(Clone, Debug, PartialEq)]
pub struct TimerProgram {
    pub sleep_ns: u64,
    /// Clock read to switch out: the fast group (the tick came first).
    pub fast_median_ns: f64,
    pub fast: usize,
    /// The slow group (the sleep's timer came first and was programmed).
    pub slow_median_ns: f64,
    pub slow: usize,
    /// Sleeps with no switch out before their end (the timer fired first).
    pub unswitched: usize,
}

impl TimerProgram {
    /// The programming's cost: the slow median less the fast one.
    pub fn program_ns(&self) -> f64 {
        self.slow_median_ns - self.fast_median_ns
    }
}

/// Measures on `cpu`: `n` sleeps of half of `tick_ns`, in a thread of their own
/// (its affinity and timer slack die with it).
pub fn measure(cpu: usize, n: usize, tick_ns: u64) -> Result<TimerProgram, HostError> {
    let guard = signals::install_scoped();
    let result = record(cpu, n, tick_ns / 2);
    guard.finish();
    result
}

/// The recording: the instance is removed on every path out of here.
fn record(cpu: usize, n: usize, sleep_ns: u64) -> Result<TimerProgram, HostError> {
    let inst = Instance::open(8192)?;
    inst.set_trace_clock("mono")?;
    inst.set_on(true)?;
    let sleeper = std::thread::spawn(move || sleep_many(cpu, n, sleep_ns));
    let joined = sleeper.join().map_err(|_| HostError::new("the timer sleeper thread", "panicked"))?;
    inst.set_on(false)?;
    let (tid, reads) = joined?;
    if signals::interrupted() {
        return Err(HostError::new("measuring the timer's programming", "interrupted"));
    }
    let text = inst.read_trace()?;
    summarise(&text, tid, &reads, sleep_ns)
}

/// The sleeper: pinned to `cpu`, timer slack 1 ns; returns its thread id and the
/// clock read before each sleep.
fn sleep_many(cpu: usize, n: usize, sleep_ns: u64) -> Result<(u32, Vec<u64>), HostError> {
    let tid = exact_sleeper_on(cpu).map_err(|e| HostError::new(format!("making CPU {cpu}'s timer sleeper"), e))?;
    let mut reads = Vec::with_capacity(n);
    for _ in 0..n {
        if signals::interrupted() {
            break;
        }
        spin_for(SPIN_NS);
        reads.push(now_ns());
        std::thread::sleep(Duration::from_nanos(sleep_ns));
    }
    Ok((tid, reads))
}

/// Matches each clock read with the thread's first switch out after it, if that
/// comes before the sleep would have ended, and splits the spans in two.
fn summarise(text: &str, tid: u32, reads: &[u64], sleep_ns: u64) -> Result<TimerProgram, HostError> {
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
    let mut spans = Vec::new();
    let mut unswitched = 0;
    for &t0 in reads {
        let i = outs.partition_point(|&t| t < t0);
        match outs.get(i) {
            Some(&t) if t < t0 + sleep_ns => spans.push(t - t0),
            _ => unswitched += 1,
        }
    }
    spans.sort_unstable();
    let split = otsu_split(&spans);
    let (fast, slow) = spans.split_at(split);
    let fail = |why: String| Err(HostError::new("measuring the timer's programming", why));
    if spans.len() * 2 < reads.len() {
        return fail(format!(
            "the trace shows {} of {} sleeps switching out (is sched_switch traced?)",
            spans.len(),
            reads.len()
        ));
    }
    if fast.len() * 5 < spans.len() || slow.len() * 5 < spans.len() {
        return fail(format!(
            "the spans do not fall in two groups ({} fast, {} slow of {}): no reprogramming to tell apart",
            fast.len(),
            slow.len(),
            spans.len()
        ));
    }
    Ok(TimerProgram {
        sleep_ns,
        fast_median_ns: fast[fast.len() / 2] as f64,
        fast: fast.len(),
        slow_median_ns: slow[slow.len() / 2] as f64,
        slow: slow.len(),
        unswitched,
    })
}

/// Where sorted `v` splits into two groups with the least summed squared
/// deviation from their means (the first index of the second group).
fn otsu_split(v: &[u64]) -> usize {
    let n = v.len();
    if n < 2 {
        return n;
    }
    let total: f64 = v.iter().map(|&x| x as f64).sum();
    let mut left = 0.0;
    let mut best = (f64::MIN, n);
    for i in 1..n {
        left += v[i - 1] as f64;
        let (nl, nr) = (i as f64, (n - i) as f64);
        let (ml, mr) = (left / nl, (total - left) / nr);
        // Maximising the between-group variance minimises the within-group one.
        let between = nl * nr * (ml - mr) * (ml - mr);
        if between > best.0 {
            best = (between, i);
        }
    }
    best.1
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
    /// another thread's switches and a sleep that never switched are left out;
    /// the spans split into a fast and a slow group.
    #[test]
    fn spans_run_from_each_clock_read_to_the_next_switch_out_and_split_in_two() {
        let mut lines = vec![switch_out(1_000_001, 8)];
        let mut reads = Vec::new();
        for (k, span_us) in [2, 3, 2, 9, 8, 9, 3, 8, 2, 9].into_iter().enumerate() {
            let t0_us = 1_000_000 + 10_000 * k as u64;
            reads.push(t0_us * 1000);
            lines.push(switch_out(t0_us + span_us, 7));
        }
        reads.push(2_000_000_000);
        let t = summarise(&lines.join("\n"), 7, &reads, 2_000_000).unwrap();
        assert_eq!((t.fast, t.slow, t.unswitched), (5, 5, 1));
        assert_eq!((t.fast_median_ns, t.slow_median_ns), (2_000.0, 9_000.0));
        assert_eq!(t.program_ns(), 7_000.0);
    }

    /// One group only: no reprogramming to tell apart, an error.
    #[test]
    fn spans_of_one_kind_are_refused() {
        let mut lines = Vec::new();
        let mut reads = Vec::new();
        for k in 0..10u64 {
            let t0_us = 1_000_000 + 10_000 * k;
            reads.push(t0_us * 1000);
            lines.push(switch_out(t0_us + 3 + u64::from(k == 9), 7));
        }
        assert!(summarise(&lines.join("\n"), 7, &reads, 2_000_000).is_err());
    }
}
