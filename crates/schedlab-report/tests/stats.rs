//! Statistics checked against hand computations, and error handling.

use schedlab_report::{
    csv, ministat, ministat_with, mmtests, mmtests_with, student_t, student_t_with, summarize, t_quantile, MinistatOptions,
    MmtestsOptions, ReportError, TQuantile,
};

fn close(actual: f64, expected: f64, tol: f64) {
    assert!((actual - expected).abs() <= tol, "{actual} is not within {tol} of {expected}");
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------- summarize

#[test]
fn summary_of_known_data() {
    // {2, 4, 4, 4, 5, 5, 7, 9}: sum 40 → mean 5; squared deviations 9+1+1+1+0+0+4+16 = 32,
    // sample variance 32/7, stddev 2.1380899; even n → median (4 + 5)/2 = 4.5.
    let s = summarize(&[9.0, 4.0, 2.0, 5.0, 4.0, 7.0, 4.0, 5.0]).unwrap();
    assert_eq!(s.n, 8);
    assert_eq!((s.min, s.max, s.median, s.mean), (2.0, 9.0, 4.5, 5.0));
    close(s.stddev, (32.0f64 / 7.0).sqrt(), 1e-12);
    close(s.variance(), 32.0 / 7.0, 1e-12);

    // Odd n: the middle value.
    let s = summarize(&[3.0, 1.0, 2.0]).unwrap();
    assert_eq!((s.median, s.mean, s.stddev), (2.0, 2.0, 1.0));
}

#[test]
fn summary_of_one_value_has_no_stddev() {
    let s = summarize(&[42.0]).unwrap();
    assert_eq!((s.n, s.min, s.max, s.median, s.mean), (1, 42.0, 42.0, 42.0, 42.0));
    assert!(s.stddev.is_nan());
}

#[test]
fn summary_of_nothing_is_an_error() {
    assert_eq!(summarize(&[]), Err(ReportError::EmptySample { name: "sample".into() }));
    // NaN never equals itself, so match on the variant.
    assert!(matches!(summarize(&[1.0, f64::NAN]), Err(ReportError::NonFinite { index: 1, .. })));
}

// ---------------------------------------------------------------- t test

/// a = {1, 2, 3, 4, 5}: mean 3, s² = 10/4 = 2.5.
/// b = {2, 3, 4, 5, 9}: mean 4.6, s² = (6.76 + 2.56 + 0.36 + 0.16 + 19.36)/4 = 7.3.
/// df = 8; pooled s² = (4·2.5 + 4·7.3)/8 = 4.9 → s = 2.2135944;
/// SE = s·√(1/5 + 1/5) = √(4.9·0.4) = 1.4; d = 1.6.
/// 95%: t₀.₉₇₅,₈ = 2.306004 → e = 3.228406 > 1.6 → no difference proven.
/// 70%: t₀.₈₅,₈ = 1.108145 → e = 1.551404 < 1.6 → difference.
#[test]
fn t_test_by_hand_not_significant_at_95() {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [2.0, 3.0, 4.0, 5.0, 9.0];
    assert_eq!(student_t(&a, &b, 0.95).unwrap(), None);

    let d = student_t(&a, &b, 0.70).unwrap().expect("significant at 70%");
    assert_eq!(d.df, 8);
    close(d.t, 1.108_145_4, 1e-6);
    close(d.pooled_s, 4.9f64.sqrt(), 1e-12);
    close(d.diff, 1.6, 1e-12);
    close(d.plus_minus, 1.108_145_4 * 1.4, 1e-6);
    close(d.pct, 1.6 * 100.0 / 3.0, 1e-9);
    // Ratio half-width: t·√((4·7.3 + 4·2.5·(4.6/3)²)·10/(25·8))·100/3
    //   = 1.1081454·√((29.2 + 23.511111)·0.05)·33.333 = 1.1081454·1.6234287·33.333 = 59.965.
    close(d.pct_plus_minus, 1.108_145_4 * ((29.2 + 10.0 * (4.6f64 / 3.0).powi(2)) * 0.05).sqrt() * 100.0 / 3.0, 1e-5);
}

/// a = {1..5}, b = {6..10}: means 3 and 8, both s² = 2.5, pooled s = √2.5 = 1.5811388,
/// SE = √(2.5·0.4) = 1, d = 5; at 95% e = t₀.₉₇₅,₈ = 2.306004 < 5 → difference of
/// 5 ± 2.306004, i.e. 166.667% of the baseline mean 3.
#[test]
fn t_test_by_hand_significant() {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0];
    let b = [10.0, 9.0, 8.0, 7.0, 6.0];
    let d = student_t(&a, &b, 0.95).unwrap().expect("significant");
    close(d.t, 2.306_004_135, 1e-6);
    close(d.diff, 5.0, 1e-12);
    close(d.plus_minus, 2.306_004_135, 1e-6);
    close(d.pooled_s, 2.5f64.sqrt(), 1e-12);
    close(d.pct, 500.0 / 3.0, 1e-9);
    // t·√((4·2.5 + 4·2.5·(8/3)²)·10/200)·100/3 = 2.306004·2.0138409·33.333 = 154.8049
    close(d.pct_plus_minus, 2.306_004_135 * ((10.0 + 10.0 * (8.0f64 / 3.0).powi(2)) * 0.05).sqrt() * 100.0 / 3.0, 1e-6);

    // Swapping the samples flips the sign of the difference.
    let r = student_t(&b, &a, 0.95).unwrap().unwrap();
    close(r.diff, -5.0, 1e-12);
    close(r.pct, -62.5, 1e-9);
}

#[test]
fn t_quantile_modes() {
    // Exact values (t tables / mpmath): t₀.₉₇₅,₁₀ = 2.2281389, t₀.₉,₁₀ = 1.3721836.
    close(t_quantile(0.95, 10, TQuantile::Exact).unwrap(), 2.228_138_85, 1e-7);
    close(t_quantile(0.80, 10, TQuantile::Exact).unwrap(), 1.372_183_64, 1e-7);
    // ministat's table: 3 decimals, and the normal quantile beyond df = 100.
    assert_eq!(t_quantile(0.95, 10, TQuantile::MinistatTable).unwrap(), 2.228);
    assert_eq!(t_quantile(0.95, 150, TQuantile::MinistatTable).unwrap(), 1.96);
    close(t_quantile(0.95, 150, TQuantile::Exact).unwrap(), 1.975_905, 1e-5);
}

#[test]
fn t_test_identical_and_constant_samples() {
    // Identical: d = 0, e = 0 → not significant.
    assert_eq!(student_t(&[4.0, 4.0, 4.0], &[4.0, 4.0, 4.0], 0.95).unwrap(), None);
    assert_eq!(student_t(&[1.0, 2.0, 3.0], &[3.0, 1.0, 2.0], 0.95).unwrap(), None);
    // Two different constants: zero spread, so any difference is proven.
    let d = student_t(&[1.0, 1.0, 1.0], &[2.0, 2.0, 2.0], 0.95).unwrap().unwrap();
    assert_eq!((d.diff, d.plus_minus, d.pooled_s, d.pct), (1.0, 0.0, 0.0, 100.0));
}

#[test]
fn t_test_errors() {
    assert_eq!(student_t(&[], &[1.0, 2.0], 0.95), Err(ReportError::EmptySample { name: "a".into() }));
    assert_eq!(student_t(&[1.0, 2.0], &[3.0], 0.95), Err(ReportError::TooFewValues { name: "b".into(), n: 1, needed: 2 }));
    for bad in [0.0, 1.0, 95.0, -0.5, f64::NAN] {
        assert!(matches!(student_t(&[1.0, 2.0], &[3.0, 4.0], bad), Err(ReportError::InvalidConfidence(_))), "{bad}");
    }
    assert!(matches!(
        student_t_with(&[1.0, f64::INFINITY], &[3.0, 4.0], 0.95, TQuantile::Exact),
        Err(ReportError::NonFinite { index: 1, .. })
    ));
}

// ---------------------------------------------------------------- ministat

fn set(name: &str, values: &[f64]) -> (String, Vec<f64>) {
    (name.to_string(), values.to_vec())
}

#[test]
fn ministat_refuses_fewer_than_three_points() {
    let err = ministat(&[set("one", &[1.0])], 0.95).unwrap_err();
    assert_eq!(err, ReportError::TooFewValues { name: "one".into(), n: 1, needed: 3 });
    assert_eq!(err.to_string(), "sample one must contain at least 3 data points (it has 1)");
    let err = ministat(&[set("ok", &[1.0, 2.0, 3.0]), set("two", &[1.0, 2.0])], 0.95).unwrap_err();
    assert_eq!(err, ReportError::TooFewValues { name: "two".into(), n: 2, needed: 3 });
    assert_eq!(ministat(&[set("empty", &[])], 0.95), Err(ReportError::EmptySample { name: "empty".into() }));
}

#[test]
fn ministat_input_errors() {
    assert_eq!(ministat(&[], 0.95), Err(ReportError::NoSamples));
    let eight: Vec<_> = (0..8).map(|i| set(&format!("s{i}"), &[1.0, 2.0, 3.0])).collect();
    assert_eq!(ministat(&eight, 0.95), Err(ReportError::TooManySamples { n: 8, max: 7 }));
    assert_eq!(ministat(&[set("a", &[1.0, 2.0, 3.0])], 1.5), Err(ReportError::InvalidConfidence(1.5)));
    let opts = MinistatOptions { width: 1, ..MinistatOptions::default() };
    assert_eq!(ministat_with(&[set("a", &[1.0, 2.0, 3.0])], &opts), Err(ReportError::InvalidWidth(1)));
    assert!(matches!(ministat(&[set("nan", &[1.0, f64::NAN, 3.0])], 0.95), Err(ReportError::NonFinite { index: 1, .. })));
}

#[test]
fn ministat_single_set_has_no_test() {
    let out = ministat(&[set("only", &[1.0, 2.0, 3.0])], 0.95).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "x only");
    assert_eq!(lines.len(), 1 + 4 + 2); // legend; frame, 1 point row, 1 bar row, frame; header, row
    assert_eq!(lines[6], "x   3             1             3             2             2             1");
    assert!(!out.contains("confidence"));
}

#[test]
fn ministat_seven_sets_use_all_symbols() {
    let sets: Vec<_> = (0..7).map(|i| set(&format!("s{i}"), &[i as f64, i as f64 + 1.0, i as f64 + 2.0])).collect();
    let out = ministat(&sets, 0.95).unwrap();
    let legend: Vec<&str> = out.lines().take(7).collect();
    assert_eq!(legend, ["x s0", "+ s1", "* s2", "% s3", "# s4", "@ s5", "O s6"]);
    assert_eq!(out.matches("confidence").count(), 6);
}

/// ministat redraws only as many point rows as the last set's tallest stack:
/// here the first set stacks three points in one column but the second set
/// stacks none, so — as in FreeBSD's ministat — a single point row is drawn.
#[test]
fn ministat_shows_rows_of_last_set_only() {
    let out = ministat(&[set("stacked", &[10.0, 10.0, 10.0, 0.0]), set("flat", &[20.0, 30.0, 40.0])], 0.95).unwrap();
    let plot_rows = out.lines().filter(|l| l.starts_with('|')).count();
    assert_eq!(plot_rows, 2, "one point row + one bar row:\n{out}");
    // The other way round, the stack is fully visible.
    let out = ministat(&[set("flat", &[20.0, 30.0, 40.0]), set("stacked", &[10.0, 10.0, 10.0, 0.0])], 0.95).unwrap();
    assert_eq!(out.lines().filter(|l| l.starts_with('|')).count(), 4, "three point rows + one bar row:\n{out}");
}

#[test]
fn ministat_exact_quantile_option() {
    // The manual's example at 80% with the exact t(10) = 1.3721836 instead of the
    // table's 1.372: SE = 264.159043·√(1/7 + 1/5) = 154.675698, e = 1.3721836·154.675698 = 212.2434.
    let samples = vec![
        set("iguana", &[50.0, 200.0, 150.0, 400.0, 750.0, 400.0, 150.0]),
        set("chameleon", &[150.0, 400.0, 720.0, 500.0, 930.0]),
    ];
    let opts = MinistatOptions { confidence: 0.80, t_quantile: TQuantile::Exact, ..MinistatOptions::default() };
    let out = ministat_with(&samples, &opts).unwrap();
    assert!(out.contains("\n\t240 +/- 212.243\n"), "{out}");
}

// ---------------------------------------------------------------- mmtests

#[test]
fn mmtests_single_runs_and_errors() {
    let rows = strings(&["1"]);
    let kernels = strings(&["a-base", "a-new"]);
    // One run each: Stddev is undefined → printed as mmtests does, 0 and 0.00%;
    // with one run per side there is no test, so no star, and the header says so.
    let out = mmtests("t", &rows, &kernels, &[vec![vec![2.0], vec![1.0]]], true).unwrap();
    assert!(out.contains("\nStddev    1        0.00 (   0.00%)        0.00 (   0.00%)\n"), "{out}");
    assert!(out.contains("\nAmean     1        2.00 (   0.00%)        1.00 (  50.00%)\n"), "{out}");
    assert!(out.contains("# no test (fewer than 2 runs on a side, or no spread on either): 1\n"), "{out}");
    assert!(out.contains("\nCoeffVar  1        0.00 (   0.00%)        0.00 (   0.00%)\n"), "{out}");
    // Two runs each but identical values on both sides: no spread, no test.
    let out = mmtests("t", &rows, &kernels, &[vec![vec![2.0, 2.0], vec![1.0, 1.0]]], true).unwrap();
    assert!(out.contains("1.00 (  50.00%)\n") && out.contains("# no test"), "{out}");
    // Spread on both sides: tested, and this difference is significant.
    let out = mmtests("t", &rows, &kernels, &[vec![vec![2.0, 2.1, 1.9], vec![1.0, 1.1, 0.9]]], true).unwrap();
    assert!(out.contains("*  50.00%*") && !out.contains("# no test"), "{out}");

    assert_eq!(
        mmtests("t", &rows, &kernels, &[vec![vec![1.0], vec![]]], true),
        Err(ReportError::EmptySample { name: "1/a-new".into() })
    );
    assert!(matches!(mmtests("t", &rows, &kernels, &[vec![vec![1.0]]], true), Err(ReportError::ShapeMismatch(_))));
    assert!(matches!(mmtests("t", &rows, &kernels, &[], true), Err(ReportError::ShapeMismatch(_))));
    assert_eq!(mmtests("t", &[], &kernels, &[], true), Err(ReportError::NoSamples));
    let opts = MmtestsOptions { significance_level: 0.0, ..MmtestsOptions::default() };
    assert_eq!(
        mmtests_with("t", &rows, &kernels, &[vec![vec![1.0], vec![1.0]]], true, &opts),
        Err(ReportError::InvalidSignificanceLevel(0.0))
    );
}

/// Higher is better: harmonic means, `pdiff`, `BHmean` rows.
/// base {1, 2, 4}: Hmean = 3/(1 + 0.5 + 0.25) = 1.7143; new {2, 4, 8}: Hmean 3.4286 → +100%.
/// Stddev is arithmetic (base 1.5275, new 3.0551 → pndiff −100%).
/// t = 1.7143/√(1.5275²/3 + 3.0551²/3) = 0.8697, df 4, p = 0.43 → no mark.
/// BHmean-50 = best value: 4 vs 8 → +100%; BHmean-95 = Hmean{4, 2} = 2.6667 vs 5.3333.
#[test]
fn mmtests_higher_is_better() {
    let rows = strings(&["8"]);
    let kernels = strings(&["6.9.0-rc3-eevdf", "6.9.0-rc3-cfs"]);
    let opts = MmtestsOptions { precision: 4, ..MmtestsOptions::default() };
    let out = mmtests_with("tbench", &rows, &kernels, &[vec![vec![1.0, 2.0, 4.0], vec![2.0, 4.0, 8.0]]], false, &opts).unwrap();
    let expected = [
        "tbench",
        "# * = Hmean differs from the baseline: two-sided t-test p < 0.1 (Welch standard error, df = n1+n2-2; mmtests rule Oct 2018-Nov 2024)",
        "                         6.9.0-rc3              6.9.0-rc3",
        "                             eevdf                    cfs",
        "Min       8      1.0000 (   0.00%)      2.0000 ( 100.00%)",
        "Hmean     8      1.7143 (   0.00%)      3.4286 ( 100.00%)",
        "Stddev    8      1.5275 (   0.00%)      3.0551 (-100.00%)",
        "CoeffVar  8     65.4654 (   0.00%)     65.4654 (   0.00%)",
        "Max       8      4.0000 (   0.00%)      8.0000 ( 100.00%)",
        "BHmean-50 8      4.0000 (   0.00%)      8.0000 ( 100.00%)",
        "BHmean-95 8      2.6667 (   0.00%)      5.3333 ( 100.00%)",
        "BHmean-99 8      2.6667 (   0.00%)      5.3333 ( 100.00%)",
    ];
    assert_eq!(out.lines().collect::<Vec<_>>(), expected, "{out}");
}

#[test]
fn mmtests_nonpositive_rate_has_no_harmonic_mean() {
    // mmtests' calc_hmean gives up on values ≤ 0; the cell shows 0 and 0.00%.
    let out = mmtests("r", &strings(&["1"]), &strings(&["k-a", "k-b"]), &[vec![vec![1.0, 2.0], vec![0.0, 2.0]]], false).unwrap();
    assert!(out.contains("\nHmean     1        1.33 (   0.00%)        0.00 (   0.00%)\n"), "{out}");
}

// ---------------------------------------------------------------- csv

#[test]
fn csv_quotes_and_shapes() {
    let out = csv(&strings(&["a,b"]), &strings(&["k\"1\""]), &[vec![vec![0.5, 1e-7]]]).unwrap();
    assert_eq!(out, "row,kernel,run,value\n\"a,b\",\"k\"\"1\"\"\",1,0.5\n\"a,b\",\"k\"\"1\"\"\",2,0.0000001\n");
    assert_eq!(csv(&[], &[], &[]).unwrap(), "row,kernel,run,value\n");
    assert!(matches!(csv(&strings(&["r"]), &strings(&["k"]), &[vec![]]), Err(ReportError::ShapeMismatch(_))));
}
