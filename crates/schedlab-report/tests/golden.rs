//! Output layouts checked against golden files written by hand.
//!
//! The golden files in `tests/golden/` were not produced by this crate:
//!
//! * `ministat_iguana_chameleon_*`: the ministat(1) manual's example
//!   (`ministat -s -w 60 iguana chameleon`, and the same with `-c 80`). The plot
//!   rows are the manual's real output. The table rows use the current
//!   `"%c %3d %13.8g ..."` format (the manual shows an older, narrower one) with
//!   statistics from Python's `statistics` module. At 80% the manual prints
//!   `240 +/- 212.215` and `pooled s = 264.159`, reproduced here (t = 1.372 from
//!   the table for df = 10); its `80% +/- 70.7384%` is the original ministat's
//!   `100·e/avg`, while current FreeBSD propagates through the ratio of means,
//!   giving `102.3%` (hand formula in `src/lib.rs`, `Difference::pct_plus_minus`).
//! * `ministat_default_w74_even_n.txt`: my data chosen so that the span is 73,
//!   hence dx = 1 and column(v) = trunc(v + 0.5); every plot cell was placed by
//!   hand (see the derivation below).
//! * `ministat_identical.txt`: zero span, zero stddev: no test (schedlab's
//!   departure: ministat would test and report no difference).
//! * `mmtests_2x3_lower.txt`, `csv_2x3.csv`: integer data with exact standard
//!   deviations; each value and percentage was worked out by hand (see below).

use schedlab_report::{csv, ministat, ministat_with, mmtests, MinistatOptions};

fn golden(name: &str) -> String {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn assert_same(actual: &str, expected: &str) {
    if actual != expected {
        panic!("output differs from golden file\n--- expected ---\n{expected}--- actual ---\n{actual}--------");
    }
}

fn iguana_chameleon() -> Vec<(String, Vec<f64>)> {
    vec![
        ("iguana".to_string(), vec![50.0, 200.0, 150.0, 400.0, 750.0, 400.0, 150.0]),
        ("chameleon".to_string(), vec![150.0, 400.0, 720.0, 500.0, 930.0]),
    ]
}

/// `ministat -s -w 60 iguana chameleon`.
///
/// By hand: span = 930 − 50 = 880 (avg ± stddev stay inside), dx = 880/59,
/// x0 = 50 − dx/2; columns: 50→0, 150→7, 200→10, 400→23, 500→30, 720→45,
/// 750→47, 930→59. Both sets hit 150 and 400 → `*`. iguana stacks two points
/// at 150 and at 400, but chameleon (drawn last) stacks none, so ministat shows
/// only one point row. Bars: iguana 300 ± 238.05 → `|` at 1 and 33, M(200) at 10,
/// A(300) at 17; chameleon 540 ± 299.08 → `|` at 13 and 53, M(500) at 30, A at 33.
/// Pooled s = √((6·56666.67 + 4·89450)/10) = 264.159; SE = s·√(1/7 + 1/5) = 154.68;
/// at 95% e = 2.228·154.68 = 344.6 > 240 → no difference proven.
#[test]
fn ministat_manual_example_95() {
    let opts = MinistatOptions { width: 60, separate_bars: true, ..MinistatOptions::default() };
    assert_same(&ministat_with(&iguana_chameleon(), &opts).unwrap(), &golden("ministat_iguana_chameleon_s_w60_c95.txt"));
}

/// The manual's `-c 80` run: e = 1.372·154.676 = 212.215 < 240 → difference.
#[test]
fn ministat_manual_example_80() {
    let opts = MinistatOptions { confidence: 0.80, width: 60, separate_bars: true, ..MinistatOptions::default() };
    assert_same(&ministat_with(&iguana_chameleon(), &opts).unwrap(), &golden("ministat_iguana_chameleon_s_w60_c80.txt"));
}

/// Default width 74, one shared bar row, even n.
///
/// base = {0, 10, 10, 20, 30, 40}: mean 18.333, s = √(1083.33/5) = 14.7196, median (10+20)/2 = 15.
/// new  = {33, 43, 53, 63, 73, 73}: mean 56.333, s = √(1333.33/5) = 16.3299, median (53+63)/2 = 58.
/// Range [0, 73] → dx = 1, column(v) = trunc(v + 0.5). Row 2 holds the second 10
/// (`x` at 10) and the second 73 (`+` at 73). Bars: base `|` at trunc(4.11) = 4 and
/// trunc(33.55) = 33, M at 15, A at 18; new `|` at trunc(40.50) = 40 and
/// trunc(73.16) = 73, A at 56, M at 58 (new's `|` at 40 lands right of base's span).
/// Test: df = 10, t = 2.228, pooled s = √((5·216.67 + 5·266.67)/10) = 15.5456,
/// e = 2.228·15.5456·√(1/3) = 19.9969 < d = 38 → difference; 38/18.333 = 207.273%;
/// ratio half-width 2.228·√((5·266.67 + 5·216.67·(56.333/18.333)²)·12/360)·100/18.333 = 238.575%.
#[test]
fn ministat_default_width_even_n() {
    let samples = vec![
        ("base".to_string(), vec![10.0, 0.0, 40.0, 20.0, 10.0, 30.0]),
        ("new".to_string(), vec![73.0, 33.0, 63.0, 43.0, 73.0, 53.0]),
    ];
    assert_same(&ministat(&samples, 0.95).unwrap(), &golden("ministat_default_w74_even_n.txt"));
}

#[test]
fn ministat_identical_samples() {
    let samples = vec![("same-a".to_string(), vec![5.0; 3]), ("same-b".to_string(), vec![5.0; 3])];
    assert_same(&ministat(&samples, 0.95).unwrap(), &golden("ministat_identical.txt"));
}

/// Two sides that each repeat one value, different between them: a summed mean
/// leaves a rounding error in the standard deviation (about 2e-18 here), which a
/// t test would divide by and call a difference. There is no test to make.
#[test]
fn ministat_no_spread_on_either_side_is_no_test() {
    let samples = vec![("a".to_string(), vec![0.050416356; 3]), ("b".to_string(), vec![0.014577798; 3])];
    let out = ministat(&samples, 0.95).unwrap();
    assert!(out.ends_with("No test at 95.0% confidence: no spread on either side (every run gave the same value)\n"), "{out}");
    assert!(!out.contains("Difference at"), "{out}");
    // One side with spread: tested as ministat does.
    let samples = vec![("a".to_string(), vec![0.050416356; 3]), ("b".to_string(), vec![0.0145, 0.0146, 0.0147])];
    assert!(ministat(&samples, 0.95).unwrap().contains("Difference at 95.0% confidence"));
}

/// 2 kernels × 3 rows, lower is better, three runs each.
///
/// Row 1: base {10, 11, 12} (mean 11, s 1), new {8, 9, 10} (mean 9, s 1):
///   Amean pndiff = 100 − 900/11 = 18.18; t = 2/√(1/3 + 1/3) = 2.449, df = 4,
///   two-sided p = 0.070 < 0.10 (t > t₀.₉₅,₄ = 2.132) → `*`.
/// Row 4: base {20, 24, 22} (22, s 2), new {21, 25, 23} (23, s 2):
///   pndiff = 100 − 2300/22 = −4.55; t = 1/√(8/3) = 0.612, p = 0.573 → no mark.
/// Row 16: base {50, 50, 50}, new {40, 40, 40}: both s = 0 → no test (mmtests would
/// star any change; the header names the row instead).
/// CoeffVar row 1: 100/11 = 9.09 vs 100/9 = 11.11 → 100 − 11.11·100/9.09 = −22.22.
/// BAmean-50 = best int(3·50/100) = 1 value; BAmean-95/-99 = best 2 values
/// (row 1: 10.5 vs 8.5 → 19.05%).
#[test]
fn mmtests_two_kernels_three_rows() {
    let rows: Vec<String> = ["1", "4", "16"].iter().map(|s| s.to_string()).collect();
    let kernels = vec!["6.8.0-vanilla".to_string(), "6.8.0-patched".to_string()];
    let samples = vec![
        vec![vec![10.0, 11.0, 12.0], vec![8.0, 9.0, 10.0]],
        vec![vec![20.0, 24.0, 22.0], vec![21.0, 25.0, 23.0]],
        vec![vec![50.0, 50.0, 50.0], vec![40.0, 40.0, 40.0]],
    ];
    let out = mmtests("hackbench-process-pipes", &rows, &kernels, &samples, true).unwrap();
    assert_same(&out, &golden("mmtests_2x3_lower.txt"));

    let out = csv(&rows, &kernels, &samples).unwrap();
    assert_same(&out, &golden("csv_2x3.csv"));
}

/// Sides that each repeat one value whose standard deviation rounds to about
/// 2e-18 rather than 0: still no spread, so no test and no star.
#[test]
fn mmtests_no_spread_with_rounding_is_no_test() {
    let rows = vec!["1".to_string()];
    let kernels = vec!["a".to_string(), "b".to_string()];
    let samples = vec![vec![vec![0.050416356; 3], vec![0.014577798; 3]]];
    let out = mmtests("pipe", &rows, &kernels, &samples, true).unwrap();
    assert!(out.contains("# no test (fewer than 2 runs on a side, or no spread on either): 1"), "{out}");
    let amean = out.lines().find(|l| l.starts_with("Amean")).unwrap();
    assert!(!amean.contains('*'), "{amean}");
}
