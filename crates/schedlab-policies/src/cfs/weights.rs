//! Load weights and the fixed-point "divide by a weight" arithmetic of the Linux fair class,
//! re-derived from Linux v4.19 (`kernel/sched/sched.h`, `kernel/sched/core.c`,
//! `kernel/sched/fair.c`). Everything here is integer math with the widths of a 64-bit
//! kernel, so that a simulated vruntime or slice matches the kernel's to the nanosecond,
//! truncation included.
//!
//! Two units of weight exist: the *scaled* weight kept in
//! `load.weight` (nice 0 = `1 << 20` on 64-bit kernels since v4.7) and the *unscaled* weight
//! (nice 0 = 1024) that PELT and the inverse-multiply math use. [`LoadRes`] converts between
//! them and lets a simulation choose either resolution.

/// `SCHED_FIXEDPOINT_SHIFT` (include/linux/sched.h): the extra bits of load resolution.
pub const SCHED_FIXEDPOINT_SHIFT: u32 = 10;

/// `WMULT_CONST` (fair.c, v4.19): the numerator of every cached inverse weight, `2^32 - 1`
/// (not `2^32`, so that the inverse of weight 1 still fits in a `u32`).
pub const WMULT_CONST: u32 = 0xffff_ffff;

/// `WMULT_SHIFT` (fair.c, v4.19): the inverse weights are fractions of `2^32`.
pub const WMULT_SHIFT: u32 = 32;

/// `WEIGHT_IDLEPRIO` (sched.h, v4.19): the unscaled weight of a SCHED_IDLE task.
pub const WEIGHT_IDLEPRIO: u64 = 3;

/// `WMULT_IDLEPRIO` (sched.h, v4.19): the precomputed inverse of [`WEIGHT_IDLEPRIO`].
pub const WMULT_IDLEPRIO: u32 = 1_431_655_765;

/// The kernel's nice tables live once, in `schedlab_core::task`: `sched_prio_to_weight[]`
/// (core.c, v4.19 L7026) and `sched_prio_to_wmult[]` (L7044). The wmult values are *not*
/// what [`LoadWeight::update_inv_weight`] would compute (that gives `floor((2^32 - 1) / w)`,
/// off by one for 14 of the 40 entries, e.g. 4194303 instead of 4194304 for nice 0), so a
/// task's weight carries the table value to reproduce the kernel's vruntime exactly.
pub use schedlab_core::task::{SCHED_PRIO_TO_WEIGHT, SCHED_PRIO_TO_WMULT};

/// The load resolution of `load.weight` values: how far task weights are shifted left
/// (`scale_load`) before they are summed into runqueue weights and group shares.
///
/// 64-bit kernels used 10 extra bits in 2011 (c8b281161dfa), turned them off soon after, and
/// turned them on again in v4.7 (2159197d6677); 32-bit kernels never use them. The choice
/// matters for low-weight task groups, whose per-CPU shares round to 0 or 2 without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadRes {
    /// Extra bits of resolution: [`SCHED_FIXEDPOINT_SHIFT`] or 0.
    pub shift: u32,
}

impl LoadRes {
    /// 64-bit kernels since v4.7: `NICE_0_LOAD = 1 << 20`.
    pub const HIGH: LoadRes = LoadRes { shift: SCHED_FIXEDPOINT_SHIFT };
    /// 32-bit kernels, and 64-bit kernels from 2011 to v4.6: `NICE_0_LOAD = 1024`.
    pub const LOW: LoadRes = LoadRes { shift: 0 };

    /// `scale_load(w)` (sched.h): unscaled weight to `load.weight` units.
    pub fn scale_load(self, w: u64) -> u64 {
        w << self.shift
    }

    /// `scale_load_down(w)` as in v4.19 (sched.h L125): a plain right shift, so any scaled
    /// weight below `1 << shift` becomes 0.
    pub fn scale_load_down(self, w: u64) -> u64 {
        w >> self.shift
    }

    /// `scale_load_down(w)` as in v5.7 and later (commit 26cf52229efc, also in stable
    /// trees): when the extra resolution is on, a nonzero weight never scales down below 2,
    /// so that a tiny group share does not turn into 0 in `calc_group_shares()` of its
    /// parent. With the resolution off the macro is the identity, as in v4.19.
    pub fn scale_load_down_v57(self, w: u64) -> u64 {
        if self.shift == 0 || w == 0 {
            return w;
        }
        (w >> self.shift).max(2)
    }

    /// `NICE_0_LOAD` (sched.h): the `load.weight` of a nice-0 task in this resolution.
    pub fn nice_0_load(self) -> u64 {
        1 << (SCHED_FIXEDPOINT_SHIFT + self.shift)
    }
}

/// `struct load_weight` (include/linux/sched.h, v4.19): a scaled weight and a cached
/// `2^32 / weight` used to divide by it with a multiply. `inv_weight == 0` means "not
/// computed yet"; every change of `weight` must reset it, as the kernel's `update_load_*`
/// helpers do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadWeight {
    /// Scaled weight (`load.weight`), e.g. `1 << 20` for a nice-0 task at [`LoadRes::HIGH`].
    pub weight: u64,
    /// Cached inverse of `scale_load_down(weight)` as a fraction of `2^32`; 0 = stale.
    pub inv_weight: u32,
}

impl LoadWeight {
    /// A weight whose inverse will be computed on first use (runqueue and group weights).
    pub fn new(weight: u64) -> LoadWeight {
        LoadWeight { weight, inv_weight: 0 }
    }

    /// The weight of a SCHED_NORMAL/SCHED_BATCH task of nice `nice` (-20..=19), with the
    /// table inverse, as `set_load_weight()` (core.c, v4.19 L693) stores it. Panics outside
    /// the nice range, which the kernel clamps before it gets here.
    pub fn for_nice(nice: i32, res: LoadRes) -> LoadWeight {
        assert!((-20..=19).contains(&nice), "nice {nice} outside -20..=19");
        let idx = (nice + 20) as usize;
        LoadWeight { weight: res.scale_load(SCHED_PRIO_TO_WEIGHT[idx] as u64), inv_weight: SCHED_PRIO_TO_WMULT[idx] }
    }

    /// The weight of a SCHED_IDLE task (`set_load_weight()`, core.c, v4.19 L701).
    pub fn idle_policy(res: LoadRes) -> LoadWeight {
        LoadWeight { weight: res.scale_load(WEIGHT_IDLEPRIO), inv_weight: WMULT_IDLEPRIO }
    }

    /// `update_load_add()` (fair.c, v4.19 L121): an entity's weight joins a runqueue's.
    pub fn add(&mut self, inc: u64) {
        self.weight += inc;
        self.inv_weight = 0;
    }

    /// `update_load_sub()` (fair.c, v4.19 L127): an entity's weight leaves a runqueue's.
    /// The kernel subtracts without a check; a simulator that goes below 0 has a bug, so
    /// this panics (in debug builds) rather than wrapping.
    pub fn sub(&mut self, dec: u64) {
        self.weight -= dec;
        self.inv_weight = 0;
    }

    /// `update_load_set()` (fair.c, v4.19 L133): reweighting (group shares, renice).
    pub fn set(&mut self, weight: u64) {
        self.weight = weight;
        self.inv_weight = 0;
    }

    /// `__update_inv_weight()` (fair.c, v4.19 L189): fills the cache if it is stale.
    /// The inverse is taken of the *unscaled* weight; a weight that scales down to 0
    /// (e.g. a group entity's minimum share of 2 at [`LoadRes::HIGH`]) behaves like weight 1,
    /// and one of `2^32 - 1` or more gets the smallest inverse, 1.
    pub fn update_inv_weight(&mut self, res: LoadRes) {
        if self.inv_weight != 0 {
            return;
        }
        let w = res.scale_load_down(self.weight);
        self.inv_weight = if w >= u64::from(WMULT_CONST) {
            1
        } else {
            // Weight 0 gets the largest inverse; otherwise w < WMULT_CONST and the quotient
            // fits in 32 bits.
            u64::from(WMULT_CONST).checked_div(w).map_or(WMULT_CONST, |inv| inv as u32)
        };
    }
}

/// `mul_u64_u32_shr()` (include/linux/math64.h): `(a * mul) >> shift` with a 128-bit
/// intermediate, truncated back to 64 bits as the kernel's `(u64)` cast does.
fn mul_u64_u32_shr(a: u64, mul: u32, shift: u32) -> u64 {
    ((u128::from(a) * u128::from(mul)) >> shift) as u64
}

/// `__calc_delta()` (fair.c, v4.19 L218): `delta_exec * weight / lw.weight` without a
/// division, i.e. `delta_exec * scale_load_down(weight) * lw.inv_weight >> 32`.
///
/// To keep the product within 64 bits, the factor `scale_load_down(weight)` is first
/// narrowed to 32 bits, then `factor * inv_weight` is narrowed again, each time by
/// dropping low bits one at a time and reducing the final shift to match. Every step
/// truncates, exactly as in the kernel, so results are at most a few ns below the exact
/// quotient (e.g. 2 nice-0 tasks and a 24 ms period give a 11_999_994 ns slice).
///
/// Fills `lw.inv_weight` if it is stale, as the kernel does.
pub fn calc_delta(delta_exec: u64, weight: u64, lw: &mut LoadWeight, res: LoadRes) -> u64 {
    let mut fact = res.scale_load_down(weight);
    let mut shift = WMULT_SHIFT;

    lw.update_inv_weight(res);

    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }

    // Both operands now fit in 32 bits, so the product fits in 64.
    fact = (fact & 0xffff_ffff) * u64::from(lw.inv_weight);

    while fact >> 32 != 0 {
        fact >>= 1;
        shift -= 1;
    }

    mul_u64_u32_shr(delta_exec, fact as u32, shift)
}

/// `calc_delta_fair()` (fair.c, v4.19 L628): real time to the virtual time of an entity of
/// weight `se_weight`, i.e. `delta * NICE_0_LOAD / weight`. A nice-0 entity's virtual time
/// is its real time, with no rounding at all.
pub fn calc_delta_fair(delta: u64, se_weight: &mut LoadWeight, res: LoadRes) -> u64 {
    if se_weight.weight == res.nice_0_load() {
        return delta;
    }
    calc_delta(delta, res.nice_0_load(), se_weight, res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions() {
        assert_eq!(LoadRes::HIGH.nice_0_load(), 1 << 20);
        assert_eq!(LoadRes::LOW.nice_0_load(), 1024);
        assert_eq!(LoadRes::HIGH.scale_load(1024), 1 << 20);
        assert_eq!(LoadRes::LOW.scale_load(1024), 1024);
        assert_eq!(LoadRes::HIGH.scale_load_down(1 << 20), 1024);
        // v4.19: a minimum group share of 2 (unscaled on purpose) vanishes.
        assert_eq!(LoadRes::HIGH.scale_load_down(2), 0);
        assert_eq!(LoadRes::HIGH.scale_load_down(2047), 1);
        // v5.7+: nonzero weights keep at least 2; zero stays zero; no effect without the shift.
        assert_eq!(LoadRes::HIGH.scale_load_down_v57(0), 0);
        assert_eq!(LoadRes::HIGH.scale_load_down_v57(2), 2);
        assert_eq!(LoadRes::HIGH.scale_load_down_v57(2047), 2);
        assert_eq!(LoadRes::HIGH.scale_load_down_v57(3072), 3);
        assert_eq!(LoadRes::LOW.scale_load_down_v57(1), 1);
        assert_eq!(LoadRes::LOW.scale_load_down(2), 2);
    }

    #[test]
    fn inverse_is_floor_of_wmult_const_and_close_to_table() {
        for (i, (&w32, &table)) in SCHED_PRIO_TO_WEIGHT.iter().zip(SCHED_PRIO_TO_WMULT.iter()).enumerate() {
            let w = u64::from(w32);
            for res in [LoadRes::HIGH, LoadRes::LOW] {
                let mut lw = LoadWeight::new(res.scale_load(w));
                lw.update_inv_weight(res);
                assert_eq!(u64::from(lw.inv_weight), 0xffff_ffff / w, "nice {}", i as i32 - 20);
                // The table was rounded from 2^32 / w, the kernel formula floors (2^32 - 1) / w.
                assert!(table - lw.inv_weight <= 1, "nice {}", i as i32 - 20);
                assert_eq!(LoadWeight::for_nice(i as i32 - 20, res).inv_weight, table);
            }
        }
        // Nice 0 is one of the entries that differ.
        let mut lw = LoadWeight::new(1 << 20);
        lw.update_inv_weight(LoadRes::HIGH);
        assert_eq!(lw.inv_weight, 4_194_303);
        assert_eq!(SCHED_PRIO_TO_WMULT[20], 4_194_304);
    }

    #[test]
    fn cached_inverse_is_kept_until_weight_changes() {
        let mut lw = LoadWeight::for_nice(0, LoadRes::HIGH);
        lw.update_inv_weight(LoadRes::HIGH);
        assert_eq!(lw.inv_weight, 4_194_304, "table value must not be recomputed");
        lw.add(1 << 20);
        assert_eq!(lw.inv_weight, 0);
        lw.update_inv_weight(LoadRes::HIGH);
        assert_eq!(lw.inv_weight, 0xffff_ffff / 2048);
        lw.sub(1 << 20);
        assert_eq!((lw.weight, lw.inv_weight), (1 << 20, 0));
        lw.set(5 << 20);
        assert_eq!((lw.weight, lw.inv_weight), (5 << 20, 0));
    }

    #[test]
    fn nice_0_is_identity() {
        for res in [LoadRes::HIGH, LoadRes::LOW] {
            let mut lw = LoadWeight::for_nice(0, res);
            assert_eq!(calc_delta_fair(1_000_000, &mut lw, res), 1_000_000);
            assert_eq!(calc_delta_fair(u64::MAX, &mut lw, res), u64::MAX);
        }
    }

    #[test]
    fn nice_5_by_hand() {
        // fact = 1024; 1024 * 12820798 = 13_128_497_152 needs 34 bits, so two low bits are
        // dropped (both zero) and the shift becomes 30: the result equals
        // 1_000_000 * 1024 * 12820798 >> 32 = 13_128_497_152_000_000 >> 32 = 3_056_716
        // (exact quotient 3_056_716.4..., i.e. 1024 / 335 = 3.0567 ns of vruntime per ns).
        for res in [LoadRes::HIGH, LoadRes::LOW] {
            let mut lw = LoadWeight::for_nice(5, res);
            assert_eq!(lw.weight, res.scale_load(335));
            assert_eq!(calc_delta_fair(1_000_000, &mut lw, res), 3_056_716);
            assert_eq!(lw.inv_weight, 12_820_798);
        }
    }

    #[test]
    fn slice_of_two_nice_0_tasks_truncates() {
        // sched_slice(): 24 ms period * 1024 / 2048 through the computed inverse
        // floor((2^32 - 1) / 2048) = 2_097_151: fact = 1024 * 2_097_151 = 2_147_482_624 fits
        // in 32 bits, so the result is 24_000_000 * 2_147_482_624 >> 32 = 11_999_994.
        let mut rq = LoadWeight::new(2 << 20);
        assert_eq!(calc_delta(24_000_000, 1 << 20, &mut rq, LoadRes::HIGH), 11_999_994);
        assert_eq!(rq.inv_weight, 2_097_151);
    }

    #[test]
    fn zero_and_huge_weights() {
        // Weight 0: inverse saturates at 2^32 - 1, as if the weight were 1 (unscaled).
        let mut zero = LoadWeight::new(0);
        assert_eq!(calc_delta(1_000, 1 << 20, &mut zero, LoadRes::HIGH), 1_023_999);
        assert_eq!(zero.inv_weight, WMULT_CONST);

        // lw weight whose unscaled value is >= 2^32 - 1: inverse 1. The caller's weight
        // (2^42 scaled, 2^32 unscaled) needs the first narrowing loop: fact 2^32 -> 2^31,
        // shift 31; 2^31 * 1 fits, so the result is delta * 2^31 >> 31 = delta.
        let mut huge = LoadWeight::new(1 << 42);
        assert_eq!(calc_delta(1_000_000, 1 << 42, &mut huge, LoadRes::HIGH), 1_000_000);
        assert_eq!(huge.inv_weight, 1);
        let mut just_below = LoadWeight::new(u64::from(WMULT_CONST - 1) << 10);
        just_below.update_inv_weight(LoadRes::HIGH);
        assert_eq!(just_below.inv_weight, 1);

        // A nice-0 entity on a runqueue of huge weight gets a share of about 2^-22:
        // 1024 * 1 >> 32 of 10^9 ns = 238 ns.
        assert_eq!(calc_delta(1_000_000_000, 1 << 20, &mut huge, LoadRes::HIGH), 238);

        // Weight 0 as the numerator: nothing.
        let mut rq = LoadWeight::new(1 << 20);
        assert_eq!(calc_delta(1_000_000, 0, &mut rq, LoadRes::HIGH), 0);
    }

    #[test]
    fn group_entity_of_weight_2() {
        // MIN_SHARES = 2 is clamped in *scaled* units. With the extra resolution that is
        // 2 / 1024 of a nice-0 task, but scale_load_down() makes it 0 and the inverse
        // saturates, so vruntime advances like an unscaled weight of 1:
        // fact = 1024 * (2^32 - 1) needs 42 bits -> drop 10 bits (exactly 2^32 - 1), shift 22,
        // 1_000_000 * 4_294_967_295 >> 22 = 1_023_999_999.
        let mut high = LoadWeight::new(2);
        assert_eq!(calc_delta_fair(1_000_000, &mut high, LoadRes::HIGH), 1_023_999_999);
        assert_eq!(high.inv_weight, WMULT_CONST);

        // Without the resolution the weight really is 2: inverse 2_147_483_647,
        // fact = 1024 * 2_147_483_647 -> drop 10 bits, shift 22:
        // 1_000_000 * 2_147_483_647 >> 22 = 511_999_999.
        let mut low = LoadWeight::new(2);
        assert_eq!(calc_delta_fair(1_000_000, &mut low, LoadRes::LOW), 511_999_999);
        assert_eq!(low.inv_weight, 2_147_483_647);

        // With the resolution, the scaled weight 2 << 10 is a genuine unscaled 2.
        let mut scaled = LoadWeight::new(LoadRes::HIGH.scale_load(2));
        assert_eq!(calc_delta_fair(1_000_000, &mut scaled, LoadRes::HIGH), 511_999_999);
    }

    #[test]
    fn idle_policy_weight() {
        let mut lw = LoadWeight::idle_policy(LoadRes::HIGH);
        assert_eq!(lw.weight, 3 << 10);
        // 1024 * 1_431_655_765 -> drop 9 bits -> 2_863_311_530 at shift 23:
        // 1_000 * 2_863_311_530 >> 23 = 341_333.
        assert_eq!(calc_delta_fair(1_000, &mut lw, LoadRes::HIGH), 341_333);
    }

    #[test]
    #[should_panic(expected = "outside")]
    fn nice_out_of_range() {
        let _ = LoadWeight::for_nice(20, LoadRes::HIGH);
    }
}
