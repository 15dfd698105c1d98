//! ULE's priorities, interactivity score, %CPU window and slices (sys/kern/sched_ule.c
//! of FreeBSD 11/12, 2017-2018; sys/sys/priority.h). Times are in hz ticks (`ticks`)
//! and the run/sleep histories in hz ticks << SCHED_TICK_SHIFT, as in the kernel.

/// sys/sys/priority.h: the time-sharing band and the idle band.
pub const PRI_MIN_TIMESHARE: i32 = 120;
pub const PRI_MAX_TIMESHARE: i32 = 223;
pub const PRI_MIN_IDLE: i32 = 224;
pub const PRI_MAX_IDLE: i32 = 255;
/// PRI_MIN_KERN: the default `kern.sched.preempt_thresh` with `options PREEMPTION`.
pub const PRI_MIN_KERN: i32 = 80;

/// sched_ule.c: the nice range (PRIO_MAX - PRIO_MIN) and its half.
pub const SCHED_PRI_NRESV: i32 = 40;
pub const SCHED_PRI_NHALF: i32 = SCHED_PRI_NRESV / 2;
const PRI_TIMESHARE_RANGE: i32 = PRI_MAX_TIMESHARE - PRI_MIN_TIMESHARE + 1;
/// The interactive band 120..151 and the batch band 152..223.
pub const PRI_INTERACT_RANGE: i32 = (PRI_TIMESHARE_RANGE - SCHED_PRI_NRESV) / 2;
pub const PRI_BATCH_RANGE: i32 = PRI_TIMESHARE_RANGE - PRI_INTERACT_RANGE;
pub const PRI_MIN_INTERACT: i32 = PRI_MIN_TIMESHARE;
pub const PRI_MAX_INTERACT: i32 = PRI_MIN_TIMESHARE + PRI_INTERACT_RANGE - 1;
pub const PRI_MIN_BATCH: i32 = PRI_MIN_TIMESHARE + PRI_INTERACT_RANGE;
pub const PRI_MAX_BATCH: i32 = PRI_MAX_TIMESHARE;
/// The CPU-usage part of a batch priority: 172..203.
pub const SCHED_PRI_MIN: i32 = PRI_MIN_BATCH + SCHED_PRI_NHALF;
pub const SCHED_PRI_MAX: i32 = PRI_MAX_BATCH - SCHED_PRI_NHALF;
pub const SCHED_PRI_RANGE: i32 = SCHED_PRI_MAX - SCHED_PRI_MIN + 1;

/// Fixed-point shift of the run/sleep histories and of `ts_ticks`.
pub const SCHED_TICK_SHIFT: u32 = 10;
/// SCHED_INTERACT_MAX / _HALF / _THRESH (the default `kern.sched.interact`).
pub const SCHED_INTERACT_MAX: i64 = 100;
pub const SCHED_INTERACT_HALF: i64 = SCHED_INTERACT_MAX / 2;
pub const SCHED_INTERACT_THRESH: i64 = 30;
/// SCHED_SLICE_DEFAULT_DIVISOR and SCHED_SLICE_MIN_DIVISOR.
pub const SCHED_SLICE_DEFAULT_DIVISOR: u32 = 10;
pub const SCHED_SLICE_MIN_DIVISOR: u32 = 6;

/// The clock-derived constants `sched_initticks()` computes at boot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clocks {
    pub hz: i64,
    /// `realstathz`: stat ticks per second.
    pub stathz: i64,
    /// `tickincr`: hz ticks << 10 charged per stat tick a thread is seen running.
    pub tickincr: i64,
    /// SCHED_SLP_RUN_MAX: 5 s of history.
    pub slp_run_max: i64,
    /// SCHED_SLP_RUN_FORK: 0.5 s, what a child inherits at most.
    pub slp_run_fork: i64,
    /// SCHED_TICK_TARG and SCHED_TICK_MAX: the %CPU window, 10 s and 11 s.
    pub tick_targ: i64,
    pub tick_max: i64,
}

impl Clocks {
    pub fn new(hz: i64, stathz: i64) -> Clocks {
        Clocks {
            hz,
            stathz,
            tickincr: (hz << SCHED_TICK_SHIFT) / stathz,
            slp_run_max: (hz * 5) << SCHED_TICK_SHIFT,
            slp_run_fork: (hz / 2) << SCHED_TICK_SHIFT,
            tick_targ: hz * 10,
            tick_max: hz * 11,
        }
    }
}

/// The part of `struct td_sched` the priority computation reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct History {
    /// `ts_runtime`, `ts_slptime`: hz ticks << 10.
    pub runtime: i64,
    pub slptime: i64,
    /// `ts_ticks` (hz ticks << 10 run inside the window), `ts_ltick`, `ts_ftick`.
    pub ticks: i64,
    pub ltick: i64,
    pub ftick: i64,
}

/// Mirrors sched_ule.c:sched_interact_score(): 0 (sleeps) .. 100 (runs).
pub fn interact_score(h: &History, interact: i64) -> i64 {
    if interact <= SCHED_INTERACT_HALF && h.runtime >= h.slptime {
        return SCHED_INTERACT_HALF;
    }
    if h.runtime > h.slptime {
        let div = (h.runtime / SCHED_INTERACT_HALF).max(1);
        return SCHED_INTERACT_HALF + (SCHED_INTERACT_HALF - h.slptime / div);
    }
    if h.slptime > h.runtime {
        let div = (h.slptime / SCHED_INTERACT_HALF).max(1);
        return h.runtime / div;
    }
    if h.runtime != 0 {
        SCHED_INTERACT_HALF
    } else {
        0
    }
}

/// SCHED_PRI_TICKS: about 32 x the share of the window spent running.
fn pri_ticks(h: &History, clk: &Clocks) -> i64 {
    let total = (h.ltick - h.ftick).max(clk.hz);
    let range = SCHED_PRI_RANGE as i64;
    let per = (total + range - 1) / range * range / range;
    (h.ticks >> SCHED_TICK_SHIFT) / per.max(1)
}

/// Mirrors sched_ule.c:sched_priority() for a time-sharing thread: the user priority.
pub fn user_priority(h: &History, nice: i32, interact: i64, clk: &Clocks) -> i32 {
    let score = (interact_score(h, interact) + nice as i64).max(0);
    if score < interact {
        let step = (PRI_MAX_INTERACT - PRI_MIN_INTERACT + 1) as i64 / interact;
        PRI_MIN_INTERACT + (step * score) as i32
    } else {
        let mut pri = SCHED_PRI_MIN;
        if h.ticks != 0 {
            pri += pri_ticks(h, clk).min(SCHED_PRI_RANGE as i64 - 1) as i32;
        }
        pri + nice
    }
}

/// Mirrors sched_ule.c:sched_interact_update(): keep the history near 5 s.
pub fn interact_update(h: &mut History, clk: &Clocks) {
    let sum = h.runtime + h.slptime;
    if sum < clk.slp_run_max {
        return;
    }
    if sum > clk.slp_run_max * 2 {
        if h.runtime > h.slptime {
            h.runtime = clk.slp_run_max;
            h.slptime = 1;
        } else {
            h.slptime = clk.slp_run_max;
            h.runtime = 1;
        }
        return;
    }
    if sum > (clk.slp_run_max / 5) * 6 {
        h.runtime /= 2;
        h.slptime /= 2;
        return;
    }
    h.runtime = (h.runtime / 5) * 4;
    h.slptime = (h.slptime / 5) * 4;
}

/// Mirrors sched_ule.c:sched_interact_fork(): a child keeps at most 0.5 s of history.
pub fn interact_fork(h: &mut History, clk: &Clocks) {
    let sum = h.runtime + h.slptime;
    if sum > clk.slp_run_fork {
        let ratio = sum / clk.slp_run_fork;
        h.runtime /= ratio;
        h.slptime /= ratio;
    }
}

/// Mirrors sched_ule.c:sched_pctcpu_update(): slide the 10 s %CPU window to `now`.
pub fn pctcpu_update(h: &mut History, now_ticks: i64, run: bool, clk: &Clocks) {
    let t = now_ticks;
    if t - h.ltick >= clk.tick_targ {
        h.ticks = 0;
        h.ftick = t - clk.tick_targ;
    } else if t - h.ftick >= clk.tick_max {
        let span = (h.ltick - h.ftick).max(1);
        h.ticks = (h.ticks / span) * (h.ltick - (t - clk.tick_targ));
        h.ftick = t - clk.tick_targ;
    }
    if run {
        h.ticks += (t - h.ltick) << SCHED_TICK_SHIFT;
    }
    h.ltick = t;
}

/// Mirrors sched_ule.c:tdq_slice(): the slice in stat ticks for a queue whose
/// `tdq_sysload` is `sysload`.
pub fn tdq_slice(sysload: u32, slice: u32, slice_min: u32) -> u32 {
    let load = sysload.saturating_sub(1);
    if load >= SCHED_SLICE_MIN_DIVISOR {
        slice_min
    } else if load <= 1 {
        slice
    } else {
        slice / load
    }
}

/// Mirrors sched_ule.c:sched_shouldpreempt(): should a thread of priority `pri`
/// preempt one of `cpri`? `remote` when the thread was queued from another CPU.
pub fn should_preempt(pri: i32, cpri: i32, remote: bool, preempt_thresh: i32) -> bool {
    if pri >= cpri {
        return false;
    }
    // Always preempt the idle thread.
    if cpri >= PRI_MIN_IDLE {
        return true;
    }
    if preempt_thresh == 0 {
        return false;
    }
    if pri <= preempt_thresh {
        return true;
    }
    // An interactive thread queued from elsewhere onto a CPU running batch work.
    remote && pri <= PRI_MAX_INTERACT && cpri > PRI_MAX_INTERACT
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLK: Clocks = Clocks {
        hz: 1000,
        stathz: 127,
        tickincr: (1000 << 10) / 127,
        slp_run_max: 5000 << 10,
        slp_run_fork: 500 << 10,
        tick_targ: 10_000,
        tick_max: 11_000,
    };

    #[test]
    fn bands_match_priority_h() {
        assert_eq!((PRI_MIN_INTERACT, PRI_MAX_INTERACT), (120, 151));
        assert_eq!((PRI_MIN_BATCH, PRI_MAX_BATCH), (152, 223));
        assert_eq!((SCHED_PRI_MIN, SCHED_PRI_MAX, SCHED_PRI_RANGE), (172, 203, 32));
        assert_eq!(Clocks::new(1000, 127), CLK);
        assert_eq!(CLK.tickincr, 8062);
    }

    #[test]
    fn interact_score_by_hand() {
        let h = |r: i64, s: i64| History { runtime: r << 10, slptime: s << 10, ..Default::default() };
        // Sleeping dominates: score = r / (s / 50). r = 100, s = 1000 ticks: 102400 / 20480 = 5.
        assert_eq!(interact_score(&h(100, 1000), 30), 5);
        // Running dominates: with the default threshold (<= 50) the shortcut gives 50;
        // above it, 50 + (50 - s / (r / 50)): r = 1000, s = 100: 50 + 50 - 5 = 95.
        assert_eq!(interact_score(&h(1000, 100), 30), 50);
        assert_eq!(interact_score(&h(1000, 100), 60), 95);
        // r = 600, s = 1000: 614400 / 20480 = 30, exactly the threshold (not interactive).
        assert_eq!(interact_score(&h(600, 1000), 30), 30);
        assert_eq!(interact_score(&h(500, 500), 30), 50);
        // A thread with no history counts as running as much as sleeping: 50 under
        // the default threshold (the shortcut), 0 above it.
        assert_eq!(interact_score(&h(0, 0), 30), 50);
        assert_eq!(interact_score(&h(0, 0), 60), 0);
        assert_eq!(interact_score(&h(1000, 100), 50), 50);
    }

    #[test]
    fn user_priority_by_hand() {
        // Interactive: 120 + score (32 / 30 = 1 level per point).
        let sleeper = History { runtime: 100 << 10, slptime: 1000 << 10, ..Default::default() };
        assert_eq!(user_priority(&sleeper, 0, 30, &CLK), 125);
        // nice +5 adds to the score: 10 -> 130.
        assert_eq!(user_priority(&sleeper, 5, 30, &CLK), 130);
        // A hog that ran the whole of a 10 s window: 172 + min(32 * 1, 31) = 203.
        let hog = History { runtime: 5000 << 10, slptime: 1, ticks: 10_000 << 10, ltick: 20_000, ftick: 10_000 };
        assert_eq!(user_priority(&hog, 0, 30, &CLK), 203);
        // Half of the window: 10000 ticks / 2 = 5000 ticks -> 5000 / (10016 / 32 = 313) = 15.
        let half = History { ticks: 5000 << 10, ..hog };
        assert_eq!(user_priority(&half, 0, 30, &CLK), 172 + 15);
        // nice is added linearly in the batch band.
        assert_eq!(user_priority(&half, 10, 30, &CLK), 172 + 15 + 10);
    }

    #[test]
    fn interact_update_keeps_five_seconds() {
        let mut h = History { runtime: 4000 << 10, slptime: 2000 << 10, ..Default::default() };
        // sum 6000 ticks: between 5 s and 6 s -> x 4/5.
        interact_update(&mut h, &CLK);
        assert_eq!((h.runtime, h.slptime), ((4096000 / 5) * 4, (2048000 / 5) * 4));
        // sum 10000 ticks: above 6 s, not above 10 s -> halved.
        let mut big = History { runtime: 8000 << 10, slptime: 2000 << 10, ..Default::default() };
        interact_update(&mut big, &CLK);
        assert_eq!((big.runtime, big.slptime), ((8000 << 10) / 2, (2000 << 10) / 2));
        let mut huge = History { runtime: 12000 << 10, slptime: 1, ..Default::default() };
        interact_update(&mut huge, &CLK);
        assert_eq!((huge.runtime, huge.slptime), (CLK.slp_run_max, 1));
    }

    #[test]
    fn slices_by_load() {
        // sched_slice = 127 / 10 = 12, sched_slice_min = 2: 12, 12, 6, 4, 3, 2, 2 for L = 0..6.
        let got: Vec<u32> = (1..=8).map(|sysload| tdq_slice(sysload, 12, 2)).collect();
        assert_eq!(got, vec![12, 12, 6, 4, 3, 2, 2, 2]);
    }

    #[test]
    fn preemption_rules() {
        assert!(should_preempt(150, 255, false, 80), "idle is always preempted");
        assert!(!should_preempt(150, 180, false, 80), "a better timeshare thread waits locally");
        assert!(should_preempt(150, 180, true, 80), "interactive onto batch, remote");
        assert!(!should_preempt(160, 180, true, 80), "batch onto batch waits");
        assert!(should_preempt(60, 100, false, 80), "below preempt_thresh");
        assert!(!should_preempt(180, 150, true, 80));
        assert!(!should_preempt(60, 100, false, 0));
    }
}
