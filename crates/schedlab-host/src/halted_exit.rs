//! How a halted idle CPU's exit grows with the idle (`MachineProfile::halted_exit`).
//!
//! A thread pinned to one CPU, the others idle, spins 100 us and sleeps (timer
//! slack 1 ns), and times each sleep clock to clock. What a sleep takes beyond
//! what it asked is the same path each time (the system call, the switch out,
//! the timer's wakeup of the idle CPU, its idle exit, the switch back) but for
//! the idle exit, which on a KVM guest deepens with the halt: the host's halt
//! polling ends, its thread sleeps, its CPU enters deeper C-states. So the
//! overshoot's median at 1, 3 and 10 ms less its median at 20 us is what those
//! idles add to a short idle's exit.

use std::time::Duration;

use crate::sys::{exact_sleeper_on, now_ns, spin_for};
use crate::{signals, HostError};

/// The short sleep every other is compared with.
pub const BASE_SLEEP_NS: u64 = 20_000;
/// The longer sleeps, each a step of the table.
pub const STEP_SLEEPS_NS: [u64; 3] = [1_000_000, 3_000_000, 10_000_000];
/// The spin before each sleep: the CPU is busy, its tick running.
const SPIN_NS: u64 = 100_000;

/// The median overshoot of the base sleep and of each longer one.
#[derive(Clone, Debug, PartialEq)]
pub struct Overshoots {
    pub base_ns: f64,
    /// (sleep, median overshoot), in `STEP_SLEEPS_NS` order.
    pub steps: Vec<(u64, f64)>,
}

/// Times sleeps on `cpu` in a thread of its own: `n` of 20 us, and of each
/// longer length as many as fit in the same time, at least `min_each`.
pub fn measure(cpu: usize, n: usize, min_each: usize) -> Result<Overshoots, HostError> {
    let guard = signals::install_scoped();
    let handle = std::thread::spawn(move || sleep_all(cpu, n, min_each));
    let result = handle.join().map_err(|_| HostError::new("the idle-exit sleeper thread", "panicked"));
    guard.finish();
    let result = result??;
    if signals::interrupted() {
        return Err(HostError::new("measuring halted idle exits", "interrupted"));
    }
    Ok(result)
}

fn sleep_all(cpu: usize, n: usize, min_each: usize) -> Result<Overshoots, HostError> {
    exact_sleeper_on(cpu).map_err(|e| HostError::new(format!("making CPU {cpu}'s idle-exit sleeper"), e))?;
    let base_ns = median_overshoot(BASE_SLEEP_NS, n);
    let budget_ns = n as u64 * (BASE_SLEEP_NS + SPIN_NS);
    let steps = STEP_SLEEPS_NS
        .iter()
        .map(|&sleep_ns| {
            let each = ((budget_ns / (sleep_ns + SPIN_NS)) as usize).max(min_each);
            (sleep_ns, median_overshoot(sleep_ns, each))
        })
        .collect();
    Ok(Overshoots { base_ns, steps })
}

/// The median of how much longer than `sleep_ns` each of `n` sleeps took.
fn median_overshoot(sleep_ns: u64, n: usize) -> f64 {
    let mut over = Vec::with_capacity(n);
    for _ in 0..n {
        if signals::interrupted() {
            break;
        }
        spin_for(SPIN_NS);
        let t0 = now_ns();
        std::thread::sleep(Duration::from_nanos(sleep_ns));
        over.push(now_ns().saturating_sub(t0).saturating_sub(sleep_ns));
    }
    over.sort_unstable();
    over.get(over.len() / 2).map_or(0.0, |&v| v as f64)
}

/// The table's steps: each longer sleep's growth over the base added to
/// `idle_exit_ns`, for the steps that grew by at least `min_growth_ns`.
pub fn steps(o: &Overshoots, idle_exit_ns: u64, min_growth_ns: f64) -> Vec<schedlab_core::cost::HaltedExit> {
    o.steps
        .iter()
        .filter(|(_, over)| over - o.base_ns >= min_growth_ns)
        .map(|&(idle_ns, over)| schedlab_core::cost::HaltedExit {
            idle_ns,
            exit_ns: idle_exit_ns + (over - o.base_ns).round() as u64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps keep the growth over the short sleep, on top of the short idle's
    /// exit; a step that did not grow enough is left out.
    #[test]
    fn steps_add_the_growth_to_the_short_idles_exit() {
        let o =
            Overshoots { base_ns: 25_000.0, steps: vec![(1_000_000, 25_500.0), (3_000_000, 65_000.0), (10_000_000, 125_000.0)] };
        let s = steps(&o, 10_000, 2_000.0);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].idle_ns, s[0].exit_ns), (3_000_000, 50_000));
        assert_eq!((s[1].idle_ns, s[1].exit_ns), (10_000_000, 110_000));
    }
}
