//! `schedlab compare` and `schedlab reproduce`: a base and a new policy on the same
//! workload, several seeds each, rows varied by one workload parameter, printed as
//! the steal seed prints its schedstat tables (per-CPU averages of the deltas).
//! Runs go to all cores; each run stays a single-threaded pure function.

use serde_json::json;

use schedlab_core::error::SpecError;
use schedlab_core::sched::IrqOffStats;
use schedlab_core::{MachineProfile, RunConfig, RunResult, Topology};
use schedlab_workloads::Workload;

use crate::run::{check_result, RunSpec};
use crate::Failure;

/// Per-CPU averages of one run's schedstat deltas, as the seed's tables show them.
#[derive(Clone, Debug, Default)]
pub struct RunRow {
    pub time_s: f64,
    pub busy_pct: f64,
    /// Mean timeslice, ms.
    pub slice_ms: f64,
    pub sched: f64,
    pub idle: f64,
    pub wake: f64,
    pub find_pct: f64,
    pub steal: f64,
    pub wasted_pct: f64,
    /// time(1)'s user and sys: summed over every task, s.
    pub user_s: f64,
    pub sys_s: f64,
    /// The run's interrupts-off scheduler sections (None in means).
    pub irq_off: Option<IrqOffStats>,
    /// The benchmark's own rate (tbench MB/sec, schbench rps) for benchmarks that
    /// run for a fixed time and report a rate; None for those that report a time.
    pub throughput: Option<f64>,
    /// Context switches and migrations of every task (perf stat's counts for the
    /// whole task tree).
    pub switches: f64,
    pub migrations: f64,
    /// The run's digest (None in means): equal inputs give equal digests, serial
    /// or parallel.
    pub digest: Option<u64>,
}

impl RunRow {
    /// `keep_irq_off`: keep the run's interrupts-off histograms (a few hundred KB),
    /// for the layouts that print them merged; most comparisons do not.
    pub fn from_result(r: &RunResult, w: &Workload, keep_irq_off: bool) -> RunRow {
        let t = r.total();
        let n = r.ncpus as f64;
        let el = r.elapsed_ns().max(1) as f64;
        RunRow {
            // What the benchmark prints (find_pct and wasted_pct keep the simulated
            // elapsed time they are shares of).
            time_s: w.printed_elapsed_ns(r.elapsed_ns()) as f64 / 1e9,
            busy_pct: r.busy_pct(),
            slice_ms: if t.timeslices == 0 { 0.0 } else { t.run_ns as f64 / t.timeslices as f64 / 1e6 },
            sched: t.sched_count as f64 / n,
            idle: t.sched_goidle as f64 / n,
            wake: t.ttwu_count as f64 / n,
            find_pct: 100.0 * t.find_ns as f64 / (el * n),
            steal: t.steals as f64 / n,
            wasted_pct: 100.0 * r.wasted_ns as f64 / (el * n),
            user_s: r.tasks.iter().map(|t| t.user_ns).sum::<u64>() as f64 / 1e9,
            sys_s: r.tasks.iter().map(|t| t.sys_ns).sum::<u64>() as f64 / 1e9,
            irq_off: keep_irq_off.then(|| r.irq_off.clone()),
            throughput: w.throughput(r).map(|(v, _)| v),
            switches: r.tasks.iter().map(|t| t.switches).sum::<u64>() as f64,
            migrations: r.tasks.iter().map(|t| t.migrations).sum::<u64>() as f64,
            digest: Some(r.digest),
        }
    }
}

/// One side of a row: the mean over runs, and the time's %stdev.
#[derive(Clone, Debug, Default)]
pub struct Side {
    pub runs: Vec<RunRow>,
    pub mean: RunRow,
    pub stddev_pct: f64,
}

impl Side {
    pub fn from_runs(runs: Vec<RunRow>) -> Side {
        let n = runs.len().max(1) as f64;
        let avg = |f: fn(&RunRow) -> f64| runs.iter().map(f).sum::<f64>() / n;
        let mean = RunRow {
            time_s: avg(|r| r.time_s),
            busy_pct: avg(|r| r.busy_pct),
            slice_ms: avg(|r| r.slice_ms),
            sched: avg(|r| r.sched),
            idle: avg(|r| r.idle),
            wake: avg(|r| r.wake),
            find_pct: avg(|r| r.find_pct),
            steal: avg(|r| r.steal),
            wasted_pct: avg(|r| r.wasted_pct),
            user_s: avg(|r| r.user_s),
            sys_s: avg(|r| r.sys_s),
            irq_off: None,
            throughput: runs.iter().map(|r| r.throughput).sum::<Option<f64>>().map(|t| t / n),
            switches: avg(|r| r.switches),
            migrations: avg(|r| r.migrations),
            digest: None,
        };
        // Sample standard deviation, as the seed's "%stdev" (stdev / mean × 100), of
        // the rate for benchmarks that report one, else of the time.
        let value = |r: &RunRow| r.throughput.unwrap_or(r.time_s);
        let m = value(&mean);
        let var = if runs.len() > 1 { runs.iter().map(|r| (value(r) - m).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
        let stddev_pct = if m > 0.0 { 100.0 * var.sqrt() / m } else { 0.0 };
        Side { runs, mean, stddev_pct }
    }
}

/// One row of a comparison.
#[derive(Clone, Debug)]
pub struct Row {
    pub vary: String,
    pub base: Side,
    pub new: Side,
    /// The `others` policies, in order.
    pub others: Vec<Side>,
}

impl Row {
    /// Positive = new is faster: (base / new − 1) × 100, as the steal seed computes
    /// its %speedup (its hackbench row 8.008 s → 5.905 s is 35.6). For a benchmark
    /// that reports a rate the same ratio is of rates: (new / base − 1) × 100, as
    /// the seed's tbench table.
    pub fn pct_speedup(&self) -> f64 {
        if let (Some(base), Some(new)) = (self.base.mean.throughput, self.new.mean.throughput) {
            return if base == 0.0 { 0.0 } else { 100.0 * (new / base - 1.0) };
        }
        if self.new.mean.time_s == 0.0 {
            0.0
        } else {
            100.0 * (self.base.mean.time_s / self.new.mean.time_s - 1.0)
        }
    }
}

/// What to compare.
pub struct Comparison {
    pub topo: Topology,
    pub machine: MachineProfile,
    pub base: String,
    pub new: String,
    /// More policies run beside base and new (e.g. 4bsd beside two ULEs).
    pub others: Vec<String>,
    pub sysctls: Vec<(String, String)>,
    /// The workload spec without the varied key.
    pub workload: String,
    /// `KEY` and its values, or None for a single row.
    pub vary: Option<(String, Vec<String>)>,
    pub runs: u64,
    pub hz: u64,
    pub preempt: schedlab_core::sched::PreemptModel,
    pub autogroup: bool,
    pub first_seed: u64,
    /// Keep every run's interrupts-off histograms (reproduce's ministat layout
    /// prints them merged per side); without it a run's row stays a few hundred
    /// bytes, so memory does not grow with `--runs`.
    pub keep_irq_off: bool,
}

/// A comparison as a user writes it (`schedlab compare --help`), unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareRequest {
    pub base: String,
    pub new: String,
    /// More policies run beside base and new.
    pub others: Vec<String>,
    pub topology: String,
    pub machine: Option<String>,
    pub workload: String,
    /// `KEY=V1,V2,...`: one row per value.
    pub vary: Option<String>,
    pub runs: u64,
    pub sysctls: Vec<String>,
    pub hz: u64,
    pub preempt: Option<String>,
    pub autogroup: Option<String>,
    pub first_seed: u64,
}

impl Default for CompareRequest {
    /// `schedlab compare`'s defaults (base and new must be set).
    fn default() -> Self {
        CompareRequest {
            base: String::new(),
            new: String::new(),
            others: Vec::new(),
            topology: crate::run::DEFAULT_TOPOLOGY.to_string(),
            machine: None,
            workload: "hackbench loops=10000".to_string(),
            vary: None,
            runs: 5,
            sysctls: Vec::new(),
            hz: 250,
            preempt: None,
            autogroup: None,
            first_seed: 1,
        }
    }
}

impl Comparison {
    /// Every field checked (`validate` included) before anything runs.
    pub fn from_request(a: &CompareRequest) -> Result<Comparison, SpecError> {
        if !(10..=10_000).contains(&a.hz) {
            return Err(SpecError::new("hz", a.hz.to_string(), "an integer from 10 to 10000"));
        }
        let c = Comparison {
            topo: crate::run::parse_topology(&a.topology)?,
            machine: crate::machines::load_for(a.machine.as_deref(), &a.topology)?,
            base: a.base.clone(),
            new: a.new.clone(),
            others: a.others.clone(),
            sysctls: crate::run::parse_sysctls(&a.sysctls)?,
            workload: a.workload.clone(),
            vary: a.vary.as_deref().map(parse_vary).transpose()?,
            runs: a.runs,
            hz: a.hz,
            preempt: crate::run::parse_preempt(a.preempt.as_deref(), &a.topology)?,
            autogroup: crate::run::parse_autogroup(a.autogroup.as_deref(), &a.topology)?,
            first_seed: a.first_seed,
            keep_irq_off: false,
        };
        c.validate()?;
        Ok(c)
    }
}

/// Parses `--vary KEY=V1,V2,...`.
pub fn parse_vary(s: &str) -> Result<(String, Vec<String>), SpecError> {
    let form = "KEY=V1,V2,... with a workload parameter, e.g. groups=1,2,3,4,8";
    let (k, vs) = s.split_once('=').ok_or_else(|| SpecError::new("vary", s, form))?;
    let values: Vec<String> = vs.split(',').map(str::to_string).collect();
    if k.is_empty() || values.iter().any(|v| v.is_empty()) {
        return Err(SpecError::new("vary", s, form));
    }
    Ok((k.to_string(), values))
}

impl Comparison {
    fn row_workloads(&self) -> Result<Vec<(String, Workload)>, SpecError> {
        match &self.vary {
            None => Ok(vec![(String::new(), Workload::parse(&self.workload)?)]),
            Some((k, values)) => values
                .iter()
                .map(|v| {
                    let spec = format!("{} {k}={v}", self.workload);
                    Workload::parse(&spec).map(|w| (v.clone(), w))
                })
                .collect(),
        }
    }

    /// The unit of the workload's rate when it reports one (tbench, schbench):
    /// then %speedup is of rates.
    pub fn rate_unit(&self) -> Option<&'static str> {
        self.row_workloads().ok()?.first().and_then(|(_, w)| w.rate_unit())
    }

    /// Checks every input (policies, sysctls, workloads) before any run starts.
    pub fn validate(&self) -> Result<(), SpecError> {
        if let Some((k, values)) = &self.vary {
            let set_already =
                self.workload.split_whitespace().skip(1).any(|t| t.split_once('=').is_some_and(|(key, _)| key == k));
            if set_already {
                return Err(SpecError::new(
                    "vary",
                    format!("{k}={}", values.join(",")),
                    format!("a key the workload does not set already (--workload sets {k}=; drop it there)"),
                ));
            }
        }
        for p in self.policies() {
            let policy = schedlab_policies::policy_by_name(p, &self.sysctls)?;
            crate::run::check_preempt_for(self.preempt, p, policy.as_ref())?;
        }
        if self.runs == 0 || self.runs > 10_000 {
            return Err(SpecError::new("runs", self.runs.to_string(), "an integer from 1 to 10000"));
        }
        self.row_workloads().map(|_| ())
    }

    /// Base, new, then the others.
    fn policies(&self) -> impl Iterator<Item = &String> {
        [&self.base, &self.new].into_iter().chain(self.others.iter())
    }

    /// Runs every (row, side, seed) on `threads` threads (the parallel runner) and
    /// gathers the rows in order.
    pub fn run(&self, threads: usize) -> Result<Vec<Row>, Failure> {
        let rows = self.row_workloads()?;
        let mut jobs = Vec::new();
        for (ri, (_, w)) in rows.iter().enumerate() {
            for (si, policy) in self.policies().enumerate() {
                for k in 0..self.runs {
                    jobs.push((ri, si, policy.clone(), w.clone(), self.first_seed + k));
                }
            }
        }
        let run_one = |(_, _, policy, w, seed): &(usize, usize, String, Workload, u64)| {
            let spec = RunSpec {
                topo: self.topo.clone(),
                machine: self.machine.clone(),
                policy: policy.clone(),
                sysctls: self.sysctls.clone(),
                workload: w.clone(),
                cfg: RunConfig {
                    seed: *seed,
                    hz: self.hz,
                    check: false,
                    preempt: self.preempt,
                    autogroup: self.autogroup,
                    ..RunConfig::default()
                },
            };
            let r = spec.engine().run();
            check_result(&r, false).map(|_| RunRow::from_result(&r, w, self.keep_irq_off))
        };
        let results = crate::parallel::map(&jobs, threads, "simulating", run_one);
        let sides = self.policies().count();
        let mut per: Vec<Vec<Vec<RunRow>>> = (0..rows.len()).map(|_| vec![Vec::new(); sides]).collect();
        for ((ri, si, ..), r) in jobs.iter().zip(results) {
            per[*ri][*si].push(r?);
        }
        Ok(rows
            .into_iter()
            .zip(per)
            .map(|((vary, _), sides)| {
                let mut sides = sides.into_iter().map(Side::from_runs);
                let base = sides.next().expect("a base side");
                let new = sides.next().expect("a new side");
                Row { vary, base, new, others: sides.collect() }
            })
            .collect())
    }
}

/// The seed's two tables (base, then new with %speedup), then the time summary.
pub fn text(c: &Comparison, rows: &[Row]) -> String {
    let mut out = String::new();
    let key = c.vary.as_ref().map_or("row", |(k, _)| k.as_str());
    out.push_str(&format!(
        "{} on {} ({} CPUs), machine {}, {} runs per side\n",
        c.workload,
        c.topo.name,
        c.topo.ncpus(),
        c.machine.name,
        c.runs
    ));
    if !c.sysctls.is_empty() {
        let s: Vec<String> = c.sysctls.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!("{}\n", s.join(" ")));
    }
    for (label, side) in [(c.base.as_str(), 0), (c.new.as_str(), 1)] {
        out.push_str(&format!("\n  {label}\n"));
        out.push_str(&format!(
            "  {key:>6} {:>8} {:>6} {:>6} {:>8} {:>7} {:>8} {:>5} {:>6}{}\n",
            "time",
            "%busy",
            "slice",
            "sched",
            "idle",
            "wake",
            "%find",
            "steal",
            if side == 1 { "  %speedup" } else { "" }
        ));
        for r in rows {
            let s = if side == 0 { &r.base.mean } else { &r.new.mean };
            out.push_str(&format!(
                "  {:>6} {:>8.3} {:>6.2} {:>6.2} {:>8.0} {:>7.0} {:>8.0} {:>5.2} {:>6.0}",
                r.vary, s.time_s, s.busy_pct, s.slice_ms, s.sched, s.idle, s.wake, s.find_pct, s.steal
            ));
            if side == 1 {
                out.push_str(&format!("  {:>8.1}", r.pct_speedup()));
            }
            out.push('\n');
        }
    }
    out.push_str(&format!("\n  Average of {} runs\n", c.runs));
    let unit = c.rate_unit();
    let what = unit.map_or("time".to_string(), |u| u.to_string());
    out.push_str(&format!("            --- base --    --- new ---\n  {key:>6} {what:>7} %stdev {what:>7} %stdev  %speedup\n"));
    for r in rows {
        let value = |s: &Side| s.mean.throughput.unwrap_or(s.mean.time_s);
        out.push_str(&format!(
            "  {:>6} {:>7.3} {:>6.1} {:>7.3} {:>6.1} {:>9.1}\n",
            r.vary,
            value(&r.base),
            r.base.stddev_pct,
            value(&r.new),
            r.new.stddev_pct,
            r.pct_speedup()
        ));
    }
    out
}

fn side_json(s: &Side) -> serde_json::Value {
    json!({
        "mean_s": s.mean.time_s,
        "stddev_pct": s.stddev_pct,
        "busy_pct": s.mean.busy_pct,
        "slice_ms": s.mean.slice_ms,
        "sched": s.mean.sched,
        "idle": s.mean.idle,
        "wake": s.mean.wake,
        "find_pct": s.mean.find_pct,
        "steal": s.mean.steal,
        "wasted_pct": s.mean.wasted_pct,
        "runs_s": s.runs.iter().map(|r| r.time_s).collect::<Vec<_>>(),
        "throughput": s.mean.throughput,
        "runs_throughput": s.runs.iter().map(|r| r.throughput).collect::<Vec<_>>(),
        "runs_digest": s.runs.iter().map(|r| r.digest.map(|d| format!("{d:016x}"))).collect::<Vec<_>>(),
    })
}

pub fn json(c: &Comparison, rows: &[Row]) -> String {
    let v = json!({
        "base": c.base,
        "new": c.new,
        "workload": c.workload,
        "vary_key": c.vary.as_ref().map(|(k, _)| k.clone()),
        "topology": c.topo.name,
        "machine": c.machine.name,
        "runs": c.runs,
        "rows": rows.iter().map(|r| json!({
            "vary": r.vary,
            "base": side_json(&r.base),
            "new": side_json(&r.new),
            "pct_speedup": r.pct_speedup(),
        })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&v).expect("a json! value serialises")
}

/// Every simulated run of a comparison as a record: the row's value, the side
/// (`base`, `new`, or `other`), the policy, the seed, and the run's counters
/// (RunRow's fields), for tables with one row per run.
pub fn run_records(c: &Comparison, rows: &[Row]) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let vary_key = c.vary.as_ref().map(|(k, _)| k.clone());
    for r in rows {
        let sides = [("base", &c.base, &r.base), ("new", &c.new, &r.new)]
            .into_iter()
            .chain(c.others.iter().zip(&r.others).map(|(p, s)| ("other", p, s)));
        for (side, policy, s) in sides {
            for (k, x) in s.runs.iter().enumerate() {
                out.push(json!({
                    "vary_key": vary_key, "vary": r.vary, "side": side, "policy": policy,
                    "seed": c.first_seed + k as u64,
                    "time_s": x.time_s, "busy_pct": x.busy_pct, "slice_ms": x.slice_ms,
                    "sched": x.sched, "idle": x.idle, "wake": x.wake, "find_pct": x.find_pct,
                    "steal": x.steal, "wasted_pct": x.wasted_pct, "user_s": x.user_s, "sys_s": x.sys_s,
                    "throughput": x.throughput, "switches": x.switches, "migrations": x.migrations,
                    "digest": x.digest.map(|d| format!("{d:016x}")),
                }));
            }
        }
    }
    out
}

/// Per row and kernel, each run's headline value: `[row][kernel] -> runs`, the
/// benchmark's rate when it reports one, else the elapsed time.
fn samples(rows: &[Row]) -> Vec<Vec<Vec<f64>>> {
    rows.iter()
        .map(|r| {
            [&r.base, &r.new].iter().map(|side| side.runs.iter().map(|x| x.throughput.unwrap_or(x.time_s)).collect()).collect()
        })
        .collect()
}

/// What `samples()` holds, for titles: the rate's unit or elapsed seconds.
fn value_name(c: &Comparison) -> String {
    c.rate_unit().map_or("elapsed seconds".to_string(), |u| format!("throughput ({u})"))
}

fn row_labels(rows: &[Row]) -> Vec<String> {
    rows.iter().map(|r| if r.vary.is_empty() { "1".to_string() } else { r.vary.clone() }).collect()
}

pub fn report_failure(e: schedlab_report::ReportError) -> Failure {
    Failure::Run(format!("report: {e}"))
}

/// mmtests compare table: elapsed times (Amean, lower is better) or, for a
/// benchmark that reports a rate, the rates (Hmean, higher is better).
pub fn mmtests(c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
    let key = c.vary.as_ref().map_or("row", |(k, _)| k.as_str());
    let title = match c.rate_unit() {
        Some(unit) => format!("{} throughput ({unit}), rows = {key}", c.workload),
        None => format!("{} time (seconds), rows = {key}", c.workload),
    };
    let lower_is_better = c.rate_unit().is_none();
    schedlab_report::mmtests(&title, &row_labels(rows), &[c.base.clone(), c.new.clone()], &samples(rows), lower_is_better)
        .map_err(report_failure)
}

/// One ministat block per row: base (x) against new (+).
pub fn ministat(c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
    let mut out = String::new();
    for (label, samples) in row_labels(rows).iter().zip(samples(rows)) {
        let key = c.vary.as_ref().map_or("row", |(k, _)| k.as_str());
        out.push_str(&format!("{key} = {label}: {}\n", value_name(c)));
        let sets = vec![(c.base.clone(), samples[0].clone()), (c.new.clone(), samples[1].clone())];
        out.push_str(&schedlab_report::ministat(&sets, 0.95).map_err(report_failure)?);
        out.push('\n');
    }
    Ok(out)
}

/// row,kernel,run,value of the elapsed times, or of the rates for a benchmark
/// that reports one.
pub fn csv(c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
    schedlab_report::csv(&row_labels(rows), &[c.base.clone(), c.new.clone()], &samples(rows)).map_err(report_failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speedup_is_base_over_new_as_the_seed_computes_it() {
        // The steal seed's first hackbench row: 8.008 s → 5.905 s, %speedup 35.6.
        let side = |t: f64| Side::from_runs(vec![RunRow { time_s: t, ..RunRow::default() }]);
        let row = Row { vary: "1".into(), base: side(8.008), new: side(5.905), others: Vec::new() };
        assert!((row.pct_speedup() - 35.6).abs() < 0.05, "{}", row.pct_speedup());
    }

    #[test]
    fn speedup_of_a_rate_is_new_over_base() {
        // tbench: 100 → 116.2 MB/sec is the seed's 16.2 %speedup, whatever the times.
        let side = |mb: f64| Side::from_runs(vec![RunRow { time_s: 10.0, throughput: Some(mb), ..RunRow::default() }]);
        let row = Row { vary: "1".into(), base: side(100.0), new: side(116.2), others: Vec::new() };
        assert!((row.pct_speedup() - 16.2).abs() < 1e-9, "{}", row.pct_speedup());
        // The spread is of the rates: 90 and 110 MB/sec have a sample stdev of 14.14 %.
        let two = Side::from_runs(vec![
            RunRow { time_s: 10.0, throughput: Some(90.0), ..RunRow::default() },
            RunRow { time_s: 10.0, throughput: Some(110.0), ..RunRow::default() },
        ]);
        assert_eq!(two.mean.throughput, Some(100.0));
        assert!((two.stddev_pct - 14.142).abs() < 0.001, "{}", two.stddev_pct);
    }
}
