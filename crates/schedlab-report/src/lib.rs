//! Benchmark-style text reports for schedlab results.
//!
//! Kernel developers read scheduler benchmark results in a few well-known
//! layouts; this crate prints simulator results in them so that they can be put
//! side by side with real runs:
//!
//! * [`ministat`] — FreeBSD `ministat(1)`: the ASCII distribution plot, the
//!   N/Min/Max/Median/Avg/Stddev table and the Student's t verdict
//!   ("Difference at 95.0% confidence" / "No difference proven at 95.0%
//!   confidence"), re-derived from `usr.bin/ministat/ministat.c`.
//! * [`mmtests`] — the comparison table of mmtests' `compare-kernels.sh` /
//!   `bin/compare-mmtests.pl` (Min, Amean, Stddev, CoeffVar, Max, BAmean-N rows,
//!   percentage columns, `*` significance marks), re-derived from
//!   `bin/lib/MMTests/{Compare,Stat,Summarise,PrintGeneric}.pm`.
//! * [`csv`] — the raw samples as `row,kernel,run,value`.
//!
//! plus the statistics behind them: [`summarize`] and the pooled-variance
//! Student's t test [`student_t`].
//!
//! Every entry point validates its input and returns a [`ReportError`] instead
//! of panicking (empty samples, NaN or infinite values, too few values, shape
//! mismatches, impossible confidence levels).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cfmt;
mod ministat;
mod mmtests;
pub mod plot;

use std::fmt;

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

pub use ministat::{ministat, ministat_with, MinistatOptions, MINISTAT_MAX_SAMPLES, MINISTAT_MIN_VALUES};
pub use mmtests::{mmtests, mmtests_with, MmtestsOptions};

/// Why a report or statistic could not be produced.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ReportError {
    /// No sample (data set, kernel or row) was given at all.
    NoSamples,
    /// The named sample holds no values.
    EmptySample {
        /// Sample name (ministat data set name, `"row/kernel"`, `"a"`, ...).
        name: String,
    },
    /// The named sample holds fewer values than the computation needs.
    TooFewValues {
        /// Sample name.
        name: String,
        /// Values present.
        n: usize,
        /// Values needed.
        needed: usize,
    },
    /// A value is NaN or infinite.
    NonFinite {
        /// Sample name.
        name: String,
        /// Index of the value in the sample as given.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// More samples than the output format can show (ministat draws at most 7).
    TooManySamples {
        /// Samples given.
        n: usize,
        /// Largest number supported.
        max: usize,
    },
    /// A confidence level outside the open interval (0, 1).
    InvalidConfidence(f64),
    /// A significance level outside the open interval (0, 1).
    InvalidSignificanceLevel(f64),
    /// A plot width below 2 columns.
    InvalidWidth(usize),
    /// The row/kernel/sample arrays do not have matching lengths.
    ShapeMismatch(String),
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::NoSamples => write!(f, "no samples were given"),
            ReportError::EmptySample { name } => write!(f, "sample {name} is empty"),
            ReportError::TooFewValues { name, n, needed } => {
                write!(f, "sample {name} must contain at least {needed} data points (it has {n})")
            }
            ReportError::NonFinite { name, index, value } => {
                write!(f, "sample {name} holds a non-finite value {value} at index {index}")
            }
            ReportError::TooManySamples { n, max } => write!(f, "too many samples: {n} given, at most {max} supported"),
            ReportError::InvalidConfidence(c) => {
                write!(f, "confidence level {c} is not strictly between 0 and 1 (use 0.95 for 95%)")
            }
            ReportError::InvalidSignificanceLevel(l) => {
                write!(f, "significance level {l} is not strictly between 0 and 1 (use 0.10 for 10%)")
            }
            ReportError::InvalidWidth(w) => write!(f, "plot width {w} is too small (at least 2 columns)"),
            ReportError::ShapeMismatch(what) => write!(f, "shape mismatch: {what}"),
        }
    }
}

impl std::error::Error for ReportError {}

/// Summary statistics of one sample, as ministat's table reports them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Number of values.
    pub n: usize,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median; for an even count, the mean of the two middle values (the rule of
    /// current FreeBSD ministat; the original ministat took the upper one).
    pub median: f64,
    /// Arithmetic mean (values summed in the order given, like ministat).
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1), computed in two passes around
    /// the mean. NaN when `n == 1`, where it is undefined.
    pub stddev: f64,
}

impl Summary {
    /// Sample variance (`stddev²`); NaN when `n == 1`.
    pub fn variance(&self) -> f64 {
        self.stddev * self.stddev
    }
}

/// Summary statistics of `values` (in any order).
///
/// Errors: [`ReportError::EmptySample`] for no values, [`ReportError::NonFinite`]
/// for a NaN or infinite value. One value is accepted (its `stddev` is NaN).
pub fn summarize(values: &[f64]) -> Result<Summary, ReportError> {
    summarize_named("sample", values)
}

/// [`summarize`] with the sample's name used in errors.
pub(crate) fn summarize_named(name: &str, values: &[f64]) -> Result<Summary, ReportError> {
    check_values(name, values)?;
    let sorted = sorted_copy(values);
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n as f64;
    let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
    let stddev = sample_stddev(values, mean);
    Ok(Summary { n, min: sorted[0], max: sorted[n - 1], median, mean, stddev })
}

/// Rejects empty samples and non-finite values.
pub(crate) fn check_values(name: &str, values: &[f64]) -> Result<(), ReportError> {
    if values.is_empty() {
        return Err(ReportError::EmptySample { name: name.to_string() });
    }
    if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(ReportError::NonFinite { name: name.to_string(), index, value });
    }
    Ok(())
}

/// Ascending copy; values must be finite.
pub(crate) fn sorted_copy(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

/// Sample standard deviation around `mean` (divisor n − 1); NaN for n < 2.
pub(crate) fn sample_stddev(values: &[f64], mean: f64) -> f64 {
    if values.len() < 2 {
        return f64::NAN;
    }
    let ss: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

/// Which Student's t quantile a test uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TQuantile {
    /// The exact two-sided quantile `t(df)⁻¹((1 + confidence) / 2)` from
    /// `statrs::distribution::StudentsT::inverse_cdf`.
    #[default]
    Exact,
    /// What ministat's built-in table holds: the exact quantile rounded to 3
    /// decimals for df ≤ 100, and the normal quantile rounded to 3 decimals for
    /// larger df (ministat's "∞" row). For 80, 90, 95, 98 and 99% this equals
    /// ministat's table entry for every df (checked against `ministat.c`), so the
    /// `+/-` figures match the real tool digit for digit. ministat's column
    /// labelled 99.5% actually holds one-sided 0.999 quantiles (two-sided 99.8%);
    /// that slip is not imitated: 0.995 gives the true 99.5% quantile.
    MinistatTable,
}

/// Two-sided Student's t quantile for `confidence` (in (0, 1)) and `df` ≥ 1.
pub fn t_quantile(confidence: f64, df: usize, mode: TQuantile) -> Result<f64, ReportError> {
    check_confidence(confidence)?;
    let p = (1.0 + confidence) / 2.0;
    let exact_t = |df: usize| StudentsT::new(0.0, 1.0, df.max(1) as f64).expect("df >= 1 is a valid StudentsT").inverse_cdf(p);
    Ok(match mode {
        TQuantile::Exact => exact_t(df),
        TQuantile::MinistatTable => {
            let q = if df > 100 { Normal::new(0.0, 1.0).expect("standard normal").inverse_cdf(p) } else { exact_t(df) };
            (q * 1000.0).round() / 1000.0
        }
    })
}

pub(crate) fn check_confidence(confidence: f64) -> Result<(), ReportError> {
    if confidence.is_finite() && confidence > 0.0 && confidence < 1.0 {
        Ok(())
    } else {
        Err(ReportError::InvalidConfidence(confidence))
    }
}

/// A difference between two means that a Student's t test found significant.
///
/// The first sample (`a`) is the baseline; all signs and percentages are of
/// `b` relative to `a`, as in ministat's "Difference at ..." block.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    /// `mean(b) − mean(a)`.
    pub diff: f64,
    /// Half-width of the confidence interval of `diff`:
    /// `t · pooled_s · √(1/n_a + 1/n_b)`.
    pub plus_minus: f64,
    /// `diff` as a percentage of the baseline mean: `100 · diff / mean(a)`.
    pub pct: f64,
    /// Half-width of the interval of `pct`, propagated through the ratio
    /// `mean(b)/mean(a)` as current FreeBSD ministat does:
    /// `t · √(((n_b−1)s_b² + (n_a−1)s_a²·mean(b)²/mean(a)²) · (n_a+n_b)/(n_a·n_b·df)) · 100/mean(a)`.
    /// (The original ministat printed `100 · plus_minus / mean(a)`.)
    pub pct_plus_minus: f64,
    /// Pooled standard deviation `√(((n_a−1)s_a² + (n_b−1)s_b²) / df)`.
    pub pooled_s: f64,
    /// The t quantile used.
    pub t: f64,
    /// Degrees of freedom, `n_a + n_b − 2`.
    pub df: usize,
}

/// Student's t two-sample test with pooled variance at `confidence` (e.g. 0.95).
///
/// `a` is the baseline. Returns `Ok(Some(Difference))` when
/// `|mean(b) − mean(a)| > t · pooled_s · √(1/n_a + 1/n_b)` with the exact
/// two-sided t quantile for `n_a + n_b − 2` degrees of freedom
/// (`statrs::distribution::StudentsT::inverse_cdf`), and `Ok(None)` when ministat
/// would say "No difference proven". Two identical constant samples give
/// `None`; two different constant samples give a difference with `plus_minus == 0`.
///
/// Errors: empty or non-finite samples, fewer than 2 values in either sample,
/// a confidence outside (0, 1).
pub fn student_t(a: &[f64], b: &[f64], confidence: f64) -> Result<Option<Difference>, ReportError> {
    student_t_with(a, b, confidence, TQuantile::Exact)
}

/// [`student_t`] with a choice of t quantile (see [`TQuantile`]).
pub fn student_t_with(a: &[f64], b: &[f64], confidence: f64, mode: TQuantile) -> Result<Option<Difference>, ReportError> {
    check_confidence(confidence)?;
    let sa = summarize_named("a", a)?;
    let sb = summarize_named("b", b)?;
    for (name, s) in [("a", &sa), ("b", &sb)] {
        if s.n < 2 {
            return Err(ReportError::TooFewValues { name: name.to_string(), n: s.n, needed: 2 });
        }
    }
    let (difference, significant) = compare(&sa, &sb, confidence, mode)?;
    Ok(significant.then_some(difference))
}

/// ministat's `Relative()`: `base` is the baseline, `new` the compared set.
/// Both need n ≥ 2. Returns the figures and whether `|diff| > plus_minus`.
pub(crate) fn compare(
    base: &Summary,
    new: &Summary,
    confidence: f64,
    mode: TQuantile,
) -> Result<(Difference, bool), ReportError> {
    let (na, nb) = (base.n as f64, new.n as f64);
    let df = base.n + new.n - 2;
    let t = t_quantile(confidence, df, mode)?;
    let (va, vb) = (base.variance(), new.variance());
    let pooled_s = (((na - 1.0) * va + (nb - 1.0) * vb) / df as f64).sqrt();
    let plus_minus = t * pooled_s * (1.0 / na + 1.0 / nb).sqrt();
    let diff = new.mean - base.mean;
    let ratio_sq = (new.mean * new.mean) / (base.mean * base.mean);
    let rel = ((nb - 1.0) * vb + (na - 1.0) * va * ratio_sq) * (na + nb) / (na * nb * df as f64);
    let pct_plus_minus = t * rel.sqrt() * 100.0 / base.mean;
    let difference = Difference { diff, plus_minus, pct: diff * 100.0 / base.mean, pct_plus_minus, pooled_s, t, df };
    Ok((difference, diff.abs() > plus_minus))
}

/// The raw samples as CSV with the header `row,kernel,run,value`.
///
/// `samples[row][kernel]` holds the values of one row label (an mmtests
/// "operation", e.g. a hackbench group count) for one kernel/policy; `run`
/// counts from 1 in the order given. Values are written in Rust's shortest
/// round-trip form (`0.1`, `1234.5`, `NaN`, `inf`), and labels containing a
/// comma, a double quote or a line break are quoted per RFC 4180. Lines end
/// with `\n`. An empty sample simply contributes no lines.
///
/// Errors: [`ReportError::ShapeMismatch`] when `samples` does not have one entry
/// per row label, each with one entry per kernel.
pub fn csv(row_labels: &[String], kernels: &[String], samples: &[Vec<Vec<f64>>]) -> Result<String, ReportError> {
    check_shape(row_labels, kernels, samples)?;
    let mut out = String::from("row,kernel,run,value\n");
    for (row, per_kernel) in row_labels.iter().zip(samples) {
        for (kernel, values) in kernels.iter().zip(per_kernel) {
            for (run, value) in values.iter().enumerate() {
                out.push_str(&format!("{},{},{},{}\n", csv_field(row), csv_field(kernel), run + 1, value));
            }
        }
    }
    Ok(out)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `samples` must be `[row][kernel]` with the lengths of `row_labels` and `kernels`.
pub(crate) fn check_shape(row_labels: &[String], kernels: &[String], samples: &[Vec<Vec<f64>>]) -> Result<(), ReportError> {
    if samples.len() != row_labels.len() {
        return Err(ReportError::ShapeMismatch(format!(
            "{} row labels but samples for {} rows",
            row_labels.len(),
            samples.len()
        )));
    }
    for (row, per_kernel) in row_labels.iter().zip(samples) {
        if per_kernel.len() != kernels.len() {
            return Err(ReportError::ShapeMismatch(format!(
                "row {row} has samples for {} kernels but {} kernels are named",
                per_kernel.len(),
                kernels.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ministat_table_mode_matches_known_entries() {
        // Spot checks against ministat.c's table (df: 80% 90% 95% 98% 99%).
        let cases = [
            (1, [3.078, 6.314, 12.706, 31.821, 63.657]),
            (8, [1.397, 1.860, 2.306, 2.896, 3.355]),
            (10, [1.372, 1.812, 2.228, 2.764, 3.169]),
            (100, [1.290, 1.660, 1.984, 2.364, 2.626]),
            (101, [1.282, 1.645, 1.960, 2.326, 2.576]),
        ];
        for (df, row) in cases {
            for (conf, want) in [0.80, 0.90, 0.95, 0.98, 0.99].into_iter().zip(row) {
                let got = t_quantile(conf, df, TQuantile::MinistatTable).unwrap();
                assert!((got - want).abs() < 1e-9, "df={df} conf={conf}: {got} != {want}");
            }
        }
    }

    #[test]
    fn csv_quotes_awkward_labels() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
