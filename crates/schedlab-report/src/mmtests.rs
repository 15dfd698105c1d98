//! mmtests `compare-kernels.sh` / `bin/compare-mmtests.pl` comparison tables.
//!
//! Re-derived from `bin/lib/MMTests/{Compare,Stat,Summarise,SummariseMultiops,PrintGeneric}.pm`
//! as they stood from October 2018 to November 2024 (the era whose layout the
//! research notes §3.1 show). The table is:
//!
//! ```text
//! <metric title>
//! # * = <significance rule>
//!                               6.8.0                  6.8.0        <- kernel name up to the first '-'
//!                             vanilla             patched-v1        <- the rest
//! Min       1       0.3480 (   0.00%)      0.3395 (   2.44%)
//! Amean     1       0.3521 (   0.00%)      0.3403 *   3.37%*
//! ...
//! ```
//!
//! * Statistics, one block each, rows in the order given within a block:
//!   `Min`, `Amean` (or `Hmean` when higher is better), `Stddev`, `CoeffVar`,
//!   `Max`, then `BAmean-N` (`BHmean-N`) for each N in
//!   [`MmtestsOptions::best_percents`] (50, 95, 99 by default, mmtests' list for
//!   multi-operation benchmarks in that era).
//! * Row label = statistic name left-justified to the longest statistic name,
//!   a space, the row label left-justified to the longest row label.
//! * Cell = `%{field_length}.{precision}f` then ` (%7.2f%%)`; on a significant
//!   mean row both parentheses become `*`: ` *%7.2f%%*`.
//! * Header: two rows; each kernel name is split at its first `-` (a `-rcN`
//!   right after that dash stays in the first part), the first header cell is
//!   blank and as wide as the row labels, each kernel cell is right-justified to
//!   `field_length + 11` columns. A name without `-` goes whole on the second
//!   row (mmtests' Perl would chop its last character onto the first row).
//! * Percentages are "positive = better": for lower-is-better statistics
//!   `pndiff(new, base) = 100 − 100·new/base`, for higher-is-better
//!   `pdiff = 100·new/base − 100`; Stddev and CoeffVar always use `pndiff`.
//!   Edge rules as in `Stat.pm`: equal values give 0; `pdiff` gives 0 for
//!   new = 0 and 100 for base = 0; `pndiff` gives 100 for new = 0 and −99 for base = 0.
//! * Statistics: values sorted best-first (ascending when lower is better);
//!   `Stddev` is the sample standard deviation (n − 1) around the arithmetic mean,
//!   `CoeffVar = 100·Stddev/Amean` (0 when undefined); `BAmean-N` is the mean of
//!   the best `max(1, ⌊n·N/100⌋)` values; `Hmean = n / Σ 1/x`. A statistic that
//!   mmtests cannot compute (Stddev of one value; a harmonic mean over a value
//!   ≤ 0) is printed as mmtests does: value 0 with `(   0.00%)`.
//!
//! Significance rule (mmtests `Compare.pm::_significanceTest`, Oct 2018 – Nov 2024),
//! applied to the Amean/Hmean row of every non-baseline kernel:
//! `t = |mean_base − mean_new| / √(s_base²/n_base + s_new²/n_new)` (sample
//! standard deviations, i.e. Welch's unpooled standard error),
//! `df = n_base + n_new − 2`, two-sided `p = 2·P(T_df > t)`; marked `*` when
//! `p < 0.10` (`_SignificanceLevel`, see [`MmtestsOptions::significance_level`]).
//! This is the rule mmtests applied to Amean rows in the era whose layout is
//! reproduced; since November 2024 mmtests instead marks a change when the mean ±
//! 1.96·stddev intervals do not overlap. One departure: mmtests marked any
//! difference significant when both standard deviations were 0 (or undefined,
//! with one run). Without two runs per side, or with no spread on either side,
//! there is no test to make, so no `*` is printed, and the header says so.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{check_shape, check_values, sample_stddev, ReportError};

/// Formatting and statistics options of [`mmtests_with`].
#[derive(Debug, Clone, PartialEq)]
pub struct MmtestsOptions {
    /// Digits after the decimal point of values (mmtests' `_Precision`; default 2,
    /// hackbench uses 4).
    pub precision: usize,
    /// Width of a value (mmtests' `_FieldLength`, default 12).
    pub field_length: usize,
    /// Two-sided p-value below which a mean is marked `*` (default 0.10).
    pub significance_level: f64,
    /// The N of the `BAmean-N` rows, in order (default 50, 95, 99).
    pub best_percents: Vec<u32>,
}

impl Default for MmtestsOptions {
    fn default() -> Self {
        MmtestsOptions { precision: 2, field_length: 12, significance_level: 0.10, best_percents: vec![50, 95, 99] }
    }
}

/// mmtests comparison table with the default [`MmtestsOptions`].
///
/// `samples[row][kernel]` holds the values of one row label (an mmtests
/// operation, e.g. the hackbench group count `"4"`) for one kernel/policy;
/// `kernels[0]` is the baseline. `lower_is_better` selects Amean/`pndiff`
/// (times, latencies) or Hmean/`pdiff` (rates). The first line is
/// `metric_title`, the second states the significance rule (see the module
/// documentation for the rule and the layout). The result ends with a newline.
///
/// Errors: no rows or no kernels, mismatched shapes, an empty sample or a
/// non-finite value.
pub fn mmtests(
    metric_title: &str,
    row_labels: &[String],
    kernels: &[String],
    samples: &[Vec<Vec<f64>>],
    lower_is_better: bool,
) -> Result<String, ReportError> {
    mmtests_with(metric_title, row_labels, kernels, samples, lower_is_better, &MmtestsOptions::default())
}

/// [`mmtests`] with explicit options.
pub fn mmtests_with(
    metric_title: &str,
    row_labels: &[String],
    kernels: &[String],
    samples: &[Vec<Vec<f64>>],
    lower_is_better: bool,
    options: &MmtestsOptions,
) -> Result<String, ReportError> {
    if row_labels.is_empty() || kernels.is_empty() {
        return Err(ReportError::NoSamples);
    }
    check_shape(row_labels, kernels, samples)?;
    let level = options.significance_level;
    if !(level.is_finite() && level > 0.0 && level < 1.0) {
        return Err(ReportError::InvalidSignificanceLevel(level));
    }
    for (row, per_kernel) in row_labels.iter().zip(samples) {
        for (kernel, values) in kernels.iter().zip(per_kernel) {
            check_values(&format!("{row}/{kernel}"), values)?;
        }
    }

    let mean_name = if lower_is_better { "Amean" } else { "Hmean" };
    let best_prefix = if lower_is_better { "BAmean" } else { "BHmean" };
    let mut stats: Vec<(String, Stat)> = vec![
        ("Min".into(), Stat::Min),
        (mean_name.into(), Stat::Mean),
        ("Stddev".into(), Stat::Stddev),
        ("CoeffVar".into(), Stat::CoeffVar),
        ("Max".into(), Stat::Max),
    ];
    stats.extend(options.best_percents.iter().map(|&p| (format!("{best_prefix}-{p}"), Stat::Best(p))));

    // [row][kernel] summaries.
    let summaries: Vec<Vec<KernelSummary>> =
        samples.iter().map(|per_kernel| per_kernel.iter().map(|v| KernelSummary::new(v, lower_is_better)).collect()).collect();

    let stat_width = stats.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let label_width = row_labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let header_width = options.field_length + 7 + 4;

    let mut out = String::new();
    out.push_str(metric_title);
    out.push('\n');
    out.push_str(&format!(
        "# * = {mean_name} differs from the baseline: two-sided t-test p < {} (Welch standard error, df = n1+n2-2; mmtests rule Oct 2018-Nov 2024)\n",
        crate::cfmt::g(level, 6)
    ));
    let untested: Vec<&str> = row_labels
        .iter()
        .zip(&summaries)
        .filter(|(_, per_kernel)| per_kernel.iter().skip(1).any(|k| significant(&per_kernel[0], k, level).is_none()))
        .map(|(label, _)| label.as_str())
        .collect();
    if !untested.is_empty() {
        out.push_str(&format!("# no test (fewer than 2 runs on a side, or no spread on either): {}\n", untested.join(" ")));
    }
    for part in 0..2 {
        out.push_str(&" ".repeat(stat_width + 1 + label_width));
        for kernel in kernels {
            let (first, second) = split_kernel_name(kernel);
            out.push_str(&format!("{:>header_width$}", if part == 0 { first } else { second }));
        }
        out.push('\n');
    }

    let fl = options.field_length;
    let prec = options.precision;
    for (stat_name, stat) in &stats {
        for (label, per_kernel) in row_labels.iter().zip(&summaries) {
            out.push_str(&format!("{stat_name:<stat_width$} {label:<label_width$}"));
            let base = &per_kernel[0];
            let base_value = base.stat(*stat);
            for (k, summary) in per_kernel.iter().enumerate() {
                let value = summary.stat(*stat);
                let (shown, pct) = match (value, base_value) {
                    (Some(v), Some(b)) => (v, stat.compare(lower_is_better)(v, b)),
                    (Some(v), None) => (v, 0.0),
                    (None, _) => (0.0, 0.0),
                };
                let significant = *stat == Stat::Mean && k > 0 && significant(base, summary, level) == Some(true);
                if significant {
                    out.push_str(&format!("{shown:>fl$.prec$} *{pct:>7.2}%*"));
                } else {
                    out.push_str(&format!("{shown:>fl$.prec$} ({pct:>7.2}%)"));
                }
            }
            out.push('\n');
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stat {
    Min,
    Mean,
    Stddev,
    CoeffVar,
    Max,
    Best(u32),
}

impl Stat {
    /// mmtests' `stat_compare`: Stddev/CoeffVar always `pndiff`, the rest by preference.
    fn compare(self, lower_is_better: bool) -> fn(f64, f64) -> f64 {
        match self {
            Stat::Stddev | Stat::CoeffVar => pndiff,
            _ if lower_is_better => pndiff,
            _ => pdiff,
        }
    }
}

/// `Stat.pm::pdiff`: percentage gain of `new` over `base` for higher-is-better values.
fn pdiff(new: f64, base: f64) -> f64 {
    if new == base || new == 0.0 {
        0.0
    } else if base == 0.0 {
        100.0
    } else {
        new * 100.0 / base - 100.0
    }
}

/// `Stat.pm::pndiff`: percentage gain of `new` over `base` for lower-is-better values.
fn pndiff(new: f64, base: f64) -> f64 {
    if new == base {
        0.0
    } else if new == 0.0 {
        100.0
    } else if base == 0.0 {
        -99.0
    } else {
        100.0 - new * 100.0 / base
    }
}

/// One kernel's values for one row, sorted best-first, with the figures the
/// significance test needs.
struct KernelSummary {
    best_first: Vec<f64>,
    lower_is_better: bool,
    amean: f64,
    /// Sample stddev; NaN for a single value.
    stddev: f64,
}

impl KernelSummary {
    fn new(values: &[f64], lower_is_better: bool) -> Self {
        let mut best_first = values.to_vec();
        if lower_is_better {
            best_first.sort_by(f64::total_cmp);
        } else {
            best_first.sort_by(|a, b| b.total_cmp(a));
        }
        let amean = best_first.iter().sum::<f64>() / best_first.len() as f64;
        let stddev = sample_stddev(&best_first, amean);
        KernelSummary { best_first, lower_is_better, amean, stddev }
    }

    /// The row's mean: arithmetic when lower is better, harmonic otherwise
    /// (None when a value is ≤ 0, where mmtests' `calc_hmean` gives up).
    fn mean_of(&self, values: &[f64]) -> Option<f64> {
        if self.lower_is_better {
            Some(values.iter().sum::<f64>() / values.len() as f64)
        } else if values.iter().all(|&v| v > 0.0) {
            Some(values.len() as f64 / values.iter().map(|v| 1.0 / v).sum::<f64>())
        } else {
            None
        }
    }

    /// A statistic's value; None where mmtests has NaN or its −1 marker.
    fn stat(&self, stat: Stat) -> Option<f64> {
        let n = self.best_first.len();
        match stat {
            Stat::Min => self.best_first.iter().copied().reduce(f64::min),
            Stat::Max => self.best_first.iter().copied().reduce(f64::max),
            Stat::Mean => self.mean_of(&self.best_first),
            Stat::Stddev => (!self.stddev.is_nan()).then_some(self.stddev),
            Stat::CoeffVar => {
                let s = if self.stddev.is_nan() { 0.0 } else { self.stddev };
                Some(if self.amean != 0.0 { s * 100.0 / self.amean } else { 0.0 })
            }
            Stat::Best(percent) => {
                let count = (n * percent as usize / 100).max(1).min(n);
                self.mean_of(&self.best_first[..count])
            }
        }
    }
}

/// mmtests' `_significanceTest` (Oct 2018 – Nov 2024), or None where there is no
/// test to make: a side with fewer than 2 runs, or no spread on either side.
fn significant(base: &KernelSummary, new: &KernelSummary, level: f64) -> Option<bool> {
    let (Some(mb), Some(mn)) = (base.stat(Stat::Mean), new.stat(Stat::Mean)) else {
        return None;
    };
    let sd = |s: &KernelSummary| if s.stddev.is_nan() { 0.0 } else { s.stddev };
    let (nb, nn) = (base.best_first.len(), new.best_first.len());
    // No spread: every value of a side equal (tested exactly, as a standard
    // deviation computed around a summed mean can be a rounding error above 0).
    let flat = |s: &KernelSummary| s.best_first.iter().all(|&v| v == s.best_first[0]);
    if nb < 2 || nn < 2 || (flat(base) && flat(new)) {
        return None;
    }
    let stderr = (sd(base).powi(2) / nb as f64 + sd(new).powi(2) / nn as f64).sqrt();
    let t = (mb - mn).abs() / stderr;
    let df = (nb + nn - 2) as f64;
    let p = 2.0 * StudentsT::new(0.0, 1.0, df).expect("df >= 2 is a valid StudentsT").sf(t);
    Some(p < level)
}

/// Splits a kernel name into mmtests' two header rows: up to the first `-`
/// (plus a directly following `-rcN`) and the rest after that dash.
fn split_kernel_name(name: &str) -> (&str, &str) {
    let Some(mut index) = name.find('-') else {
        return ("", name);
    };
    let rest = &name.as_bytes()[index..];
    if rest.len() >= 4 && rest.starts_with(b"-rc") && rest[3].is_ascii_digit() {
        index += 4;
    }
    if index >= name.len() {
        return (name, "");
    }
    // `index` is at or right after ASCII bytes, so these are char boundaries;
    // the rest starts after the dash that follows (if any).
    let second = name[index..].strip_prefix('-').unwrap_or(&name[index..]);
    (&name[..index], second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_split_like_mmtests() {
        assert_eq!(split_kernel_name("6.8.0-vanilla"), ("6.8.0", "vanilla"));
        assert_eq!(split_kernel_name("6.8.0-patched-v1"), ("6.8.0", "patched-v1"));
        assert_eq!(split_kernel_name("6.9.0-rc3-vanilla"), ("6.9.0-rc3", "vanilla"));
        assert_eq!(split_kernel_name("6.9.0-rc3"), ("6.9.0-rc3", ""));
        assert_eq!(split_kernel_name("cfs"), ("", "cfs"));
        assert_eq!(split_kernel_name("cfs-"), ("cfs", ""));
    }

    #[test]
    fn percentage_rules_follow_stat_pm() {
        assert_eq!(pndiff(2.0, 2.0), 0.0);
        assert_eq!(pndiff(0.0, 2.0), 100.0);
        assert_eq!(pndiff(1.0, 0.0), -99.0);
        assert!((pndiff(1.5, 2.0) - 25.0).abs() < 1e-12);
        assert_eq!(pdiff(0.0, 2.0), 0.0);
        assert_eq!(pdiff(1.0, 0.0), 100.0);
        assert!((pdiff(3.0, 2.0) - 50.0).abs() < 1e-12);
    }

    #[test]
    fn best_mean_counts() {
        // n = 3: BAmean-50 uses the best 1 value, BAmean-95 and -99 the best 2.
        let s = KernelSummary::new(&[3.0, 1.0, 2.0], true);
        assert_eq!(s.stat(Stat::Best(50)), Some(1.0));
        assert_eq!(s.stat(Stat::Best(95)), Some(1.5));
        assert_eq!(s.stat(Stat::Best(99)), Some(1.5));
        assert_eq!(s.stat(Stat::Best(100)), Some(2.0));
        // Higher is better: best = largest, harmonic mean.
        let h = KernelSummary::new(&[1.0, 2.0, 4.0], false);
        assert_eq!(h.stat(Stat::Best(50)), Some(4.0));
        let bh95 = h.stat(Stat::Best(95)).unwrap();
        assert!((bh95 - 2.0 / (1.0 / 4.0 + 1.0 / 2.0)).abs() < 1e-12);
        assert_eq!(KernelSummary::new(&[1.0, 0.0], false).stat(Stat::Mean), None);
    }
}
