//! FreeBSD `ministat(1)` output.
//!
//! Re-derived from `usr.bin/ministat/ministat.c` (current FreeBSD). The output is,
//! line by line:
//!
//! 1. one legend line per data set, `"<symbol> <name>"`, symbols `x + * % # @ O`;
//! 2. the plot (unless the span of the data is zero, which prints
//!    `[no plot, span is zero width]`): a `+---+` frame of `width` dashes, the
//!    point rows, one bar row (or one per set with `separate_bars`), the frame;
//! 3. the header `    N           Min           Max        Median           Avg        Stddev`;
//! 4. one row per set, `"%c %3d %13.8g %13.8g %13.8g %13.8g %13.8g"`, each set after
//!    the first followed by its Student's t verdict against the first:
//!    `Difference at 95.0% confidence` and the tab-indented lines `d +/- e`,
//!    `d% +/- e%`, `(Student's t, pooled s = s)` (all `%g`), or
//!    `No difference proven at 95.0% confidence`. One departure: when neither side
//!    has any spread (every value equal), there is no test, and the line says so
//!    (`No test at 95.0% confidence: no spread on either side ...`).
//!
//! Plot geometry: the range runs from the smallest to the largest of every set's
//! min, max, avg − stddev and avg + stddev; `dx = span / (width − 1)`,
//! `x0 = min − dx/2`, and a value lands in column `trunc((v − x0) / dx)`. A set's
//! sorted values that share a column stack upwards from row 1; a cell shows the
//! symbol whose index is the bitwise OR of the set numbers (1, 2, 3, ...) that
//! landed in it, so a cell hit by sets 1 and 2 shows `*`. The bar row gets `|`
//! at avg ± stddev, `_` on the empty cells between, `M` at the median and `A`
//! at the average (A drawn last). Without `separate_bars` all sets share one bar
//! row, drawn in set order.
//!
//! Faithful quirks: the plot shows only as many point rows as the *last* set's
//! tallest stack (ministat overwrites its row count per set, and clears rows it
//! grows back into), so an earlier set's higher stacked points can be hidden —
//! the ministat(1) manual's own iguana/chameleon example shows this.
//!
//! Deliberate differences: the variance is computed in two passes around the
//! mean rather than from running sums (same result to the printed 8 digits
//! except for data with a huge offset, where ministat loses digits); any
//! confidence in (0, 1) is accepted (ministat offers 80, 90, 95, 98, 99, 99.5);
//! the t quantile is chosen by [`MinistatOptions::t_quantile`].

use crate::cfmt::{g, g_width};
use crate::{check_confidence, compare, sorted_copy, summarize_named, ReportError, Summary, TQuantile};

/// Most data sets ministat draws (symbols `x + * % # @ O`).
pub const MINISTAT_MAX_SAMPLES: usize = 7;

/// Fewest values ministat accepts in a data set ("must contain at least 3 data points").
pub const MINISTAT_MIN_VALUES: usize = 3;

const SYMBOLS: [u8; 8] = [b' ', b'x', b'+', b'*', b'%', b'#', b'@', b'O'];

/// ministat's options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinistatOptions {
    /// Confidence level of the test, in (0, 1); ministat's `-c 95` is `0.95`.
    pub confidence: f64,
    /// Plot width in columns between the frame's `+` corners (`-w`, default 74).
    pub width: usize,
    /// One avg/median/stddev bar row per set (`-s`).
    pub separate_bars: bool,
    /// Which t quantile to use; the default reproduces ministat's table.
    pub t_quantile: TQuantile,
}

impl Default for MinistatOptions {
    /// ministat's defaults: 95% confidence, width 74, shared bar row, its t table.
    fn default() -> Self {
        MinistatOptions { confidence: 0.95, width: 74, separate_bars: false, t_quantile: TQuantile::MinistatTable }
    }
}

/// FreeBSD ministat output for one or more data sets (the first is the baseline)
/// at `confidence` (e.g. 0.95), with ministat's default width of 74 and its
/// t table ([`TQuantile::MinistatTable`]).
///
/// Each sample is `(name, values)`; values may be in any order. The result ends
/// with a newline. See the module documentation for the exact layout.
///
/// Errors: no samples or more than [`MINISTAT_MAX_SAMPLES`]; a sample with
/// fewer than [`MINISTAT_MIN_VALUES`] values (ministat refuses those too) or a
/// non-finite value; a confidence outside (0, 1).
pub fn ministat(samples: &[(String, Vec<f64>)], confidence: f64) -> Result<String, ReportError> {
    ministat_with(samples, &MinistatOptions { confidence, ..MinistatOptions::default() })
}

/// [`ministat`] with all options.
pub fn ministat_with(samples: &[(String, Vec<f64>)], options: &MinistatOptions) -> Result<String, ReportError> {
    check_confidence(options.confidence)?;
    if options.width < 2 {
        return Err(ReportError::InvalidWidth(options.width));
    }
    if samples.is_empty() {
        return Err(ReportError::NoSamples);
    }
    if samples.len() > MINISTAT_MAX_SAMPLES {
        return Err(ReportError::TooManySamples { n: samples.len(), max: MINISTAT_MAX_SAMPLES });
    }
    let mut sets = Vec::with_capacity(samples.len());
    for (name, values) in samples {
        let summary = summarize_named(name, values)?;
        if summary.n < MINISTAT_MIN_VALUES {
            return Err(ReportError::TooFewValues { name: name.clone(), n: summary.n, needed: MINISTAT_MIN_VALUES });
        }
        sets.push(DataSet { summary, sorted: sorted_copy(values) });
    }

    let mut out = String::new();
    for (i, (name, _)) in samples.iter().enumerate() {
        out.push_str(&format!("{} {}\n", SYMBOLS[i + 1] as char, name));
    }
    out.push_str(&plot(&sets, options.width, options.separate_bars));
    out.push_str("    N           Min           Max        Median           Avg        Stddev\n");
    let conf_pct = format!("{:.1}", options.confidence * 100.0);
    for (i, set) in sets.iter().enumerate() {
        let s = &set.summary;
        out.push_str(&format!(
            "{} {:>3} {} {} {} {} {}\n",
            SYMBOLS[i + 1] as char,
            s.n,
            g_width(s.min, 13, 8),
            g_width(s.max, 13, 8),
            g_width(s.median, 13, 8),
            g_width(s.mean, 13, 8),
            g_width(s.stddev, 13, 8)
        ));
        if i == 0 {
            continue;
        }
        // Every run of both sides gave the same value: the runs are not samples of
        // anything that varies, and there is no test to make (the t statistic
        // would divide by a rounding error).
        let base = &sets[0].summary;
        if base.min == base.max && s.min == s.max {
            out.push_str(&format!(
                "No test at {conf_pct}% confidence: no spread on either side (every run gave the same value)\n"
            ));
            continue;
        }
        let (d, significant) = compare(&sets[0].summary, s, options.confidence, options.t_quantile)?;
        if significant {
            out.push_str(&format!("Difference at {conf_pct}% confidence\n"));
            out.push_str(&format!("\t{} +/- {}\n", g(d.diff, 6), g(d.plus_minus, 6)));
            out.push_str(&format!("\t{}% +/- {}%\n", g(d.pct, 6), g(d.pct_plus_minus, 6)));
            out.push_str(&format!("\t(Student's t, pooled s = {})\n", g(d.pooled_s, 6)));
        } else {
            out.push_str(&format!("No difference proven at {conf_pct}% confidence\n"));
        }
    }
    Ok(out)
}

struct DataSet {
    summary: Summary,
    sorted: Vec<f64>,
}

/// The plot block (frame included), or the zero-span notice.
fn plot(sets: &[DataSet], width: usize, separate_bars: bool) -> String {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for set in sets {
        let s = &set.summary;
        for v in [s.min, s.max, s.mean - s.stddev, s.mean + s.stddev] {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    let span = hi - lo;
    if span == 0.0 {
        return "[no plot, span is zero width]\n".to_string();
    }
    let dx = span / (width as f64 - 1.0);
    let x0 = lo - 0.5 * dx;
    // C assigns the double to an int (truncation toward zero); clamp instead of
    // writing out of bounds if rounding ever pushes a value past an edge.
    let column = |v: f64| -> usize { (((v - x0) / dx) as i64).clamp(0, width as i64 - 1) as usize };

    // rows[j][x]: OR of set numbers at stack level j (row 0 is never drawn).
    let mut rows: Vec<Vec<u8>> = Vec::new();
    let mut height = 0usize;
    let mut bars: Vec<Option<Vec<u8>>> = vec![None; sets.len()];

    for (i, set) in sets.iter().enumerate() {
        let val = u8::try_from(i + 1).expect("at most 7 sets");
        let columns: Vec<usize> = set.sorted.iter().map(|&v| column(v)).collect();
        let levels = stack_levels(&columns);
        let m = levels.iter().copied().max().unwrap_or(1) + 1;
        if m > height {
            // ministat reallocates to m rows and zeroes the rows from its
            // current height upwards.
            rows.truncate(height);
            rows.resize(m, vec![0; width]);
        }
        height = m;
        for (&x, &j) in columns.iter().zip(&levels) {
            rows[j][x] |= val;
        }

        let s = &set.summary;
        let bar = bars[if separate_bars { i } else { 0 }].get_or_insert_with(|| vec![0; width]);
        if !s.stddev.is_nan() {
            let left = column(s.mean - s.stddev);
            let right = column(s.mean + s.stddev);
            bar[right] = b'|';
            bar[left] = b'|';
            for cell in bar.iter_mut().take(right).skip(left + 1) {
                if *cell == 0 {
                    *cell = b'_';
                }
            }
        }
        bar[column(s.median)] = b'M';
        bar[column(s.mean)] = b'A';
    }

    let frame = format!("+{}+\n", "-".repeat(width));
    let mut out = frame.clone();
    for j in (1..height).rev() {
        out.push('|');
        out.extend(rows[j].iter().map(|&k| SYMBOLS[usize::from(k)] as char));
        out.push_str("|\n");
    }
    for bar in bars.iter().flatten() {
        out.push('|');
        out.extend(bar.iter().map(|&c| if c == 0 { ' ' } else { c as char }));
        out.push_str("|\n");
    }
    out.push_str(&frame);
    out
}

/// Stack level (1-based) of each point: consecutive points in the same column
/// climb one row each.
fn stack_levels(columns: &[usize]) -> Vec<usize> {
    let mut levels = Vec::with_capacity(columns.len());
    let mut prev = None;
    let mut j = 0;
    for &x in columns {
        if prev == Some(x) {
            j += 1;
        } else {
            j = 1;
            prev = Some(x);
        }
        levels.push(j);
    }
    levels
}
