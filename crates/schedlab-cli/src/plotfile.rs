//! `--plot FILE.svg|png`: charts of a run (per-CPU utilisation over time), of a
//! comparison (base vs new per row) and of a reproduction (published vs simulated).
//! The chart is SVG (`schedlab_report::plot`); `.png` is rasterised with resvg.
//! Written to a temporary file beside FILE and renamed into place, so a failed
//! run leaves nothing behind.

use std::path::{Path, PathBuf};

use schedlab_core::error::SpecError;
use schedlab_core::RunResult;
use schedlab_report::plot::{bar_chart_svg, heat_map_svg, Series};

use schedlab_spec::compare::{Comparison, Row};
use schedlab_spec::experiment::Experiment;
use schedlab_spec::Failure;

/// Utilisation buckets recorded for `run --plot` (at least; they widen as the run grows).
pub const RUN_BUCKET_NS: u64 = 100_000;

/// The most columns a heat map shows; more buckets are merged.
const MAX_COLUMNS: usize = 400;

/// A checked plot destination.
#[derive(Clone, Debug)]
pub struct PlotFile {
    path: PathBuf,
    png: bool,
}

impl PlotFile {
    /// Accepts `*.svg` or `*.png` in an existing directory.
    pub fn new(path: &Path) -> Result<PlotFile, SpecError> {
        let shown = path.display().to_string();
        let png = match path.extension().and_then(|e| e.to_str()) {
            Some("svg") => false,
            Some("png") => true,
            _ => return Err(SpecError::new("plot", shown, "a file name ending in .svg or .png")),
        };
        Ok(PlotFile { path: crate::outputs::check("plot", path)?, png })
    }

    /// Writes `svg` (rasterised for .png) into place.
    pub fn write(&self, svg: &str) -> Result<(), Failure> {
        let io = |e: String| Failure::Run(format!("writing plot {}: {e}", self.path.display()));
        let bytes = if self.png { rasterise(svg).map_err(io)? } else { svg.as_bytes().to_vec() };
        crate::outputs::write_atomically("plot", &self.path, &bytes).map_err(Failure::Run)
    }
}

/// SVG → PNG with the system's fonts (text is left out if there are none).
fn rasterise(svg: &str) -> Result<Vec<u8>, String> {
    let mut opt = resvg::usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &opt).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty image")?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| e.to_string())
}

/// Per-CPU utilisation over the whole run, as a heat map.
pub fn run_heat_map(title: &str, r: &RunResult) -> String {
    let cols = r.util_buckets.iter().map(Vec::len).max().unwrap_or(0);
    let merge = cols.div_ceil(MAX_COLUMNS).max(1);
    let width_ns = (r.util_bucket_ns * merge as u64).max(1);
    let values: Vec<Vec<f64>> = r
        .util_buckets
        .iter()
        .map(|row| {
            let mut v: Vec<f64> = row.chunks(merge).map(|c| c.iter().sum::<u64>() as f64 / width_ns as f64).collect();
            v.resize(cols.div_ceil(merge), 0.0);
            v
        })
        .collect();
    let labels: Vec<String> = (0..r.util_buckets.len()).map(|c| format!("cpu{c}")).collect();
    heat_map_svg(title, &labels, width_ns as f64 / 1e6, &values)
}

/// Base vs new mean time per row, with ± one standard deviation.
pub fn comparison_bars(c: &Comparison, rows: &[Row]) -> String {
    let key = c.vary.as_ref().map_or("row", |(k, _)| k.as_str());
    let cats: Vec<String> = rows.iter().map(|r| r.vary.clone()).collect();
    let value = |s: &schedlab_spec::compare::Side| s.mean.throughput.unwrap_or(s.mean.time_s);
    let side = |name: &str, pick: &dyn Fn(&Row) -> &schedlab_spec::compare::Side| Series {
        name: name.to_string(),
        values: rows.iter().map(|r| Some(value(pick(r)))).collect(),
        errors: rows.iter().map(|r| Some(value(pick(r)) * pick(r).stddev_pct / 100.0)).collect(),
        hollow: false,
    };
    let series = vec![side(&c.base, &|r| &r.base), side(&c.new, &|r| &r.new)];
    let title = format!("{} on {}: {} runs per side", c.workload, c.topo.name, c.runs);
    let y = c.rate_unit().map_or("time (s), mean ± stddev".to_string(), |u| format!("{u}, mean ± stddev"));
    bar_chart_svg(&title, key, &y, &cats, &series)
}

/// Published (outlined) beside simulated (filled, ± stddev) for base and new.
pub fn reproduction_bars(e: &Experiment, c: &Comparison, rows: &[Row]) -> String {
    let matched: Vec<(&schedlab_spec::experiment::PublishedRow, &Row)> =
        rows.iter().filter_map(|r| e.rows.iter().find(|p| p.vary == r.vary).map(|p| (p, r))).collect();
    let cats: Vec<String> = matched.iter().map(|(_, r)| r.vary.clone()).collect();
    if e.layout == "throughput" {
        // Only the %speedup is published: published (outlined) beside simulated.
        let series = vec![
            Series {
                name: "published".to_string(),
                values: matched.iter().map(|(p, _)| p.pct_speedup).collect(),
                errors: vec![None; matched.len()],
                hollow: true,
            },
            Series {
                name: format!("{} vs {} simulated", c.new, c.base),
                values: matched.iter().map(|(_, r)| Some(r.pct_speedup())).collect(),
                errors: vec![None; matched.len()],
                hollow: false,
            },
        ];
        return bar_chart_svg(&e.title, &e.vary, "%speedup", &cats, &series);
    }
    let idle = e.layout == "mpstat";
    let value = |s: &schedlab_spec::compare::Side| if idle { 100.0 - s.mean.busy_pct } else { s.mean.time_s };
    let published = |p: &schedlab_spec::experiment::PublishedSide| {
        if idle {
            p.busy_pct.map(|b| 100.0 - b)
        } else {
            Some(p.time_s)
        }
    };
    let spread = |s: &schedlab_spec::compare::Side| if idle { None } else { Some(s.mean.time_s * s.stddev_pct / 100.0) };
    let series = vec![
        Series {
            name: format!("{} published", c.base),
            values: matched.iter().map(|(p, _)| published(&p.base)).collect(),
            errors: vec![None; matched.len()],
            hollow: true,
        },
        Series {
            name: format!("{} simulated", c.base),
            values: matched.iter().map(|(_, r)| Some(value(&r.base))).collect(),
            errors: matched.iter().map(|(_, r)| spread(&r.base)).collect(),
            hollow: false,
        },
        Series {
            name: format!("{} published", c.new),
            values: matched.iter().map(|(p, _)| published(&p.new)).collect(),
            errors: vec![None; matched.len()],
            hollow: true,
        },
        Series {
            name: format!("{} simulated", c.new),
            values: matched.iter().map(|(_, r)| Some(value(&r.new))).collect(),
            errors: matched.iter().map(|(_, r)| spread(&r.new)).collect(),
            hollow: false,
        },
    ];
    let y = if idle { "%idle" } else { "time (s)" };
    bar_chart_svg(&e.title, &e.vary, y, &cats, &series)
}
