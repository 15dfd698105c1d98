//! A seed's published experiment, read from `experiments/NAME.toml` (built in) or
//! a `.toml` path: the comparison that simulates it, and its text printed side by
//! side with the published table, with the experiment's targets checked.

use serde::Deserialize;

use crate::compare::{self, Comparison, Row};
use crate::run::{parse_preempt, parse_sysctls, parse_topology};
use crate::Failure;
use schedlab_core::error::SpecError;
use schedlab_core::sched::IrqOffStats;

/// Shipped experiments: (name, TOML).
pub const BUILTIN: &[(&str, &str)] = &[
    ("steal", include_str!("../../../experiments/steal.toml")),
    ("numa-fork", include_str!("../../../experiments/numa-fork.toml")),
    ("wakeup-gran", include_str!("../../../experiments/wakeup-gran.toml")),
    ("load-resolution", include_str!("../../../experiments/load-resolution.toml")),
    ("ule-steal", include_str!("../../../experiments/ule-steal.toml")),
    ("steal-tbench", include_str!("../../../experiments/steal-tbench.toml")),
    ("eevdf-pipe", include_str!("../../../experiments/eevdf-pipe.toml")),
    ("steal-unixbench", include_str!("../../../experiments/steal-unixbench.toml")),
    ("steal-unixbench-shell", include_str!("../../../experiments/steal-unixbench-shell.toml")),
    ("steal-sysbench-mutex", include_str!("../../../experiments/steal-sysbench-mutex.toml")),
];

/// One experiment file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    pub name: String,
    pub title: String,
    /// Where the published numbers come from.
    pub source: String,
    pub topology: String,
    pub machine: String,
    pub base: String,
    pub new: String,
    /// More policies run beside base and new (`ministat` layout).
    #[serde(default)]
    pub others: Vec<String>,
    /// The workload spec without the varied key.
    pub workload: String,
    /// The workload key each row sets.
    pub vary: String,
    /// The workload key `--scale` sets for a smaller run (`loops`, or `mb` for pft).
    #[serde(default = "default_scale_key")]
    pub scale_key: String,
    /// How to print: `schedstat` (the steal seed's per-CPU tables), `mmtests`
    /// (compare-kernels' Amean rows with the gain in per cent), `mpstat` (system
    /// %idle over the measured window) or `ministat` (time(1)'s real, user and sys
    /// of every policy against the base, and their interrupts-off sections) or
    /// `throughput` (a benchmark's rate, base and new, with the %speedup of rates
    /// beside the published one).
    #[serde(default = "default_layout")]
    pub layout: String,
    #[serde(default)]
    pub sysctls: Vec<String>,
    pub runs: u64,
    #[serde(default = "default_hz")]
    pub hz: u64,
    /// The published kernels' preemption model (`none` unless said).
    #[serde(default = "default_preempt")]
    pub preempt: String,
    #[serde(default)]
    pub targets: Targets,
    pub rows: Vec<PublishedRow>,
}

fn default_hz() -> u64 {
    250
}

fn default_preempt() -> String {
    "none".to_string()
}

fn default_scale_key() -> String {
    "loops".to_string()
}

fn default_layout() -> String {
    "schedstat".to_string()
}

/// What the simulation should reach at full scale.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Targets {
    pub speedup_within_points: Option<f64>,
    pub base_busy_within_points: Option<f64>,
    pub new_busy_at_least: Option<f64>,
    pub find_at_most_pct: Option<f64>,
    /// `mpstat` layout: the base leaves at least this much of the machine idle…
    pub base_idle_at_least: Option<f64>,
    /// …and the new policy less than this.
    pub new_idle_below: Option<f64>,
    /// `ministat` layout: the new policy's wall time within ± this % of the base's…
    pub new_time_within_pct: Option<f64>,
    /// …the others' wall time this much (%) slower than the base's…
    pub others_time_worse_pct: Option<[f64; 2]>,
    /// …and the base's interrupts-off sections at `irq_site` (max and p99) at least
    /// this many times the new policy's.
    pub irq_cut_at_least: Option<f64>,
    pub irq_site: Option<String>,
    /// `kernels` layout: the new policy's rate against the base's, % (e.g. −50..−17)…
    pub new_rate_vs_base_pct: Option<[f64; 2]>,
    /// …these `others` with a rate between the base's and the new one's…
    pub rate_between_base_and_new: Option<Vec<String>>,
    /// …these `others` with a rate this much (%) above the new one's…
    pub rate_vs_new_pct: Option<Vec<RateVsNew>>,
    /// …the new policy switching more per operation than the base…
    pub new_more_switches_per_op: Option<bool>,
    /// …and migrating less.
    pub new_fewer_migrations: Option<bool>,
}

/// One `rate_vs_new_pct` target: `policy`'s rate `pct` (range, %) above the new one's.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateVsNew {
    pub policy: String,
    pub pct: [f64; 2],
}

/// One published row.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedRow {
    pub vary: String,
    /// The steal seed's %speedup, base time / new time − 1.
    pub pct_speedup: Option<f64>,
    /// mmtests' gain, (base − new) / base, and whether it was marked significant.
    pub pct_gain: Option<f64>,
    pub significant: Option<bool>,
    /// The range the simulated gain must fall in (from the targets).
    pub target_gain: Option<[f64; 2]>,
    /// Absent when the source publishes only the %speedup (`throughput` layout).
    #[serde(default)]
    pub base: PublishedSide,
    #[serde(default)]
    pub new: PublishedSide,
    /// The `others` policies' published sides, in order.
    #[serde(default)]
    pub others: Vec<PublishedSide>,
}

/// One side of a published row; counters are per-CPU averages, as the seed prints.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedSide {
    pub time_s: f64,
    /// time(1)'s user and sys (`ministat` layout), and the runs behind the means.
    pub user_s: Option<f64>,
    pub sys_s: Option<f64>,
    pub n: Option<u64>,
    pub busy_pct: Option<f64>,
    pub slice_ms: Option<f64>,
    pub sched: Option<f64>,
    pub idle: Option<f64>,
    pub wake: Option<f64>,
    pub find_pct: Option<f64>,
    pub steal: Option<f64>,
    /// `kernels` layout: the benchmark's rate, context switches per operation and
    /// migrations over the run, as published.
    pub rate: Option<f64>,
    pub switches_per_op: Option<f64>,
    pub migrations: Option<f64>,
}

/// A shipped experiment by name, or a `.toml` file by path.
pub fn load(name_or_path: &str) -> Result<Experiment, SpecError> {
    let (text, origin) = crate::shipped::text("experiment", BUILTIN, name_or_path)?;
    parse(&text, &origin)
}

/// An experiment from its TOML text, every field checked; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Experiment, SpecError> {
    let e: Experiment = toml::from_str(text).map_err(|e| {
        SpecError::new("experiment file", origin, format!("an experiment TOML like experiments/steal.toml ({})", e.message()))
    })?;
    if e.rows.is_empty() {
        return Err(SpecError::new("experiment rows", origin, "at least one [[rows]] entry"));
    }
    if !["schedstat", "mmtests", "mpstat", "ministat", "throughput", "kernels"].contains(&e.layout.as_str()) {
        return Err(SpecError::new(
            "experiment layout",
            &e.layout,
            "schedstat, mmtests, mpstat, ministat, throughput or kernels",
        ));
    }
    if e.layout == "kernels" {
        let missing =
            e.rows.iter().find(|r| r.base.rate.is_none() || r.new.rate.is_none() || r.others.iter().any(|o| o.rate.is_none()));
        if let Some(bad) = missing {
            return Err(SpecError::new(
                "experiment rows.*.rate",
                format!("(missing in row {})", bad.vary),
                "the published rate of every policy, a number",
            ));
        }
    } else if e.layout == "throughput" {
        if let Some(bad) = e.rows.iter().find(|r| r.pct_speedup.is_none()) {
            return Err(SpecError::new("experiment rows.pct_speedup", format!("(missing in row {})", bad.vary), "a number"));
        }
    } else if let Some(bad) = e.rows.iter().find(|r| r.base.time_s <= 0.0 || r.new.time_s <= 0.0) {
        return Err(SpecError::new(
            "experiment rows.base/new.time_s",
            format!("(missing or not positive in row {})", bad.vary),
            "the published time in seconds, a positive number",
        ));
    }
    if let Some(bad) = e.rows.iter().find(|r| r.others.len() != e.others.len()) {
        return Err(SpecError::new(
            "experiment rows.others",
            format!("{} sides in row {}", bad.others.len(), bad.vary),
            format!("one published side per policy in others ({})", e.others.len()),
        ));
    }
    if !e.workload.split_whitespace().any(|w| w.starts_with(&format!("{}=", e.scale_key))) {
        return Err(SpecError::new("experiment scale_key", &e.scale_key, format!("a key of the workload '{}'", e.workload)));
    }
    Ok(e)
}

/// The value of `key=` in a workload spec, if it has one.
fn value_of(workload: &str, key: &str) -> Option<f64> {
    let prefix = format!("{key}=");
    workload.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).and_then(|v| v.parse().ok())
}

impl Experiment {
    /// The comparison at `runs` runs per side and, if given, `scale` as the value
    /// of the experiment's scale key (loops, region size) instead of the published.
    pub fn comparison(&self, runs: Option<u64>, scale: Option<&str>, only: Option<&[String]>) -> Result<Comparison, SpecError> {
        let mut workload = self.workload.clone();
        if let Some(l) = scale {
            let prefix = format!("{}=", self.scale_key);
            workload = workload
                .split_whitespace()
                .map(|w| if w.starts_with(&prefix) { format!("{prefix}{l}") } else { w.to_string() })
                .collect::<Vec<_>>()
                .join(" ");
        }
        let known: Vec<&str> = self.rows.iter().map(|r| r.vary.as_str()).collect();
        if let Some(unknown) = only.and_then(|o| o.iter().find(|v| !known.contains(&v.as_str()))) {
            return Err(SpecError::new(
                "rows",
                unknown,
                format!("values among the experiment's rows ({} = {})", self.vary, known.join(", ")),
            ));
        }
        let values: Vec<String> =
            self.rows.iter().map(|r| r.vary.clone()).filter(|v| only.is_none_or(|o| o.contains(v))).collect();
        Ok(Comparison {
            topo: parse_topology(&self.topology)?,
            machine: crate::machines::load(&self.machine)?,
            base: self.base.clone(),
            new: self.new.clone(),
            others: self.others.clone(),
            sysctls: parse_sysctls(&self.sysctls)?,
            workload,
            vary: Some((self.vary.clone(), values)),
            runs: runs.unwrap_or(self.runs),
            hz: self.hz,
            preempt: parse_preempt(Some(&self.preempt), &self.topology)?,
            autogroup: false,
            first_seed: 1,
            keep_irq_off: self.layout == "ministat",
        })
    }

    /// The scale key's value at `fraction` of the published one: an integer (at
    /// least 1) when the published value is one, else a decimal.
    pub fn scaled(&self, fraction: f64) -> String {
        let prefix = format!("{}=", self.scale_key);
        let text = self.workload.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap_or("1");
        let published: f64 = text.parse().unwrap_or(1.0);
        if text.contains('.') {
            format!("{:.6}", (published * fraction).max(1e-6)).trim_end_matches('0').to_string()
        } else {
            ((published * fraction).round() as u64).max(1).to_string()
        }
    }

    /// Factor that brings simulated counters to the published loop count.
    fn counter_scale(&self, c: &Comparison) -> f64 {
        match (value_of(&self.workload, &self.scale_key), value_of(&c.workload, &self.scale_key)) {
            (Some(published), Some(sim)) if sim > 0.0 => published / sim,
            _ => 1.0,
        }
    }

    /// Each target, checked on one row.
    pub fn check(&self, p: &PublishedRow, r: &Row) -> Vec<(String, bool)> {
        let t = &self.targets;
        let mut out = Vec::new();
        if let Some([lo, hi]) = p.target_gain {
            let g = pct_gain(r);
            out.push((format!("gain in [{lo}, {hi}]%"), (lo..=hi).contains(&g)));
        }
        if let Some(published) = p.pct_speedup {
            out.push(("new faster".to_string(), r.pct_speedup() > 0.0));
            if let Some(w) = t.speedup_within_points {
                out.push((format!("%speedup within ±{w}"), (r.pct_speedup() - published).abs() <= w));
            }
        }
        if let (Some(w), Some(pb)) = (t.base_busy_within_points, p.base.busy_pct) {
            out.push((format!("base %busy within ±{w}"), (r.base.mean.busy_pct - pb).abs() <= w));
        }
        if let Some(m) = t.new_busy_at_least {
            out.push((format!("new %busy ≥ {m}"), r.new.mean.busy_pct >= m));
        }
        if let Some(m) = t.base_idle_at_least {
            out.push((format!("base %idle ≥ {m}"), 100.0 - r.base.mean.busy_pct >= m));
        }
        if let Some(m) = t.new_idle_below {
            out.push((format!("new %idle < {m}"), 100.0 - r.new.mean.busy_pct < m));
        }
        if let Some(m) = t.find_at_most_pct {
            out.push((format!("%find ≤ {m}"), r.base.mean.find_pct <= m && r.new.mean.find_pct <= m));
        }
        if let Some(w) = t.new_time_within_pct {
            out.push((format!("{} wall within ±{w}% of {}", self.new, self.base), time_vs_base_pct(r, &r.new).abs() <= w));
        }
        if let Some([lo, hi]) = t.others_time_worse_pct {
            for (name, side) in self.others.iter().zip(&r.others) {
                let d = time_vs_base_pct(r, side);
                out.push((format!("{name} wall {lo}..{hi}% above {}", self.base), (lo..=hi).contains(&d)));
            }
        }
        let rate = |s: &compare::Side| s.mean.throughput.unwrap_or(0.0);
        let other = |name: &str| self.others.iter().position(|o| o == name).map(|i| &r.others[i]);
        if let Some([lo, hi]) = t.new_rate_vs_base_pct {
            let d = (rate(&r.new) / rate(&r.base).max(1e-9) - 1.0) * 100.0;
            out.push((format!("{} rate {lo}..{hi}% vs {}", self.new, self.base), (lo..=hi).contains(&d)));
        }
        for name in t.rate_between_base_and_new.iter().flatten() {
            let Some(side) = other(name) else { continue };
            let (a, b) = (rate(&r.base).min(rate(&r.new)), rate(&r.base).max(rate(&r.new)));
            out.push((format!("{name} rate between {} and {}", self.base, self.new), (a..=b).contains(&rate(side))));
        }
        for rv in t.rate_vs_new_pct.iter().flatten() {
            let Some(side) = other(&rv.policy) else { continue };
            let d = (rate(side) / rate(&r.new).max(1e-9) - 1.0) * 100.0;
            let [lo, hi] = rv.pct;
            out.push((format!("{} rate {lo}..{hi}% above {}", rv.policy, self.new), (lo..=hi).contains(&d)));
        }
        let per_op = |s: &compare::Side| s.mean.switches / (rate(s) * s.mean.time_s).max(1.0);
        if t.new_more_switches_per_op == Some(true) {
            out.push((format!("{} more switches per op", self.new), per_op(&r.new) > per_op(&r.base)));
        }
        if t.new_fewer_migrations == Some(true) {
            out.push((format!("{} fewer migrations", self.new), r.new.mean.migrations < r.base.mean.migrations));
        }
        if let (Some(x), Some(site)) = (t.irq_cut_at_least, &t.irq_site) {
            let (base, new) = (merged_irq_site(&r.base, site), merged_irq_site(&r.new, site));
            let cut = |q: f64| base.value_at_quantile(q) as f64 / (new.value_at_quantile(q).max(1) as f64);
            out.push((format!("{site} max cut ≥ {x}×"), cut(1.0) >= x));
            out.push((format!("{site} p99 cut ≥ {x}×"), cut(0.99) >= x));
        }
        out
    }

    /// Published and simulated side by side, then the target checks and the
    /// simulated tables in the seed's own layout.
    pub fn text(&self, c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
        if self.layout == "mmtests" {
            return self.mmtests_text(c, rows);
        }
        if self.layout == "mpstat" {
            return Ok(self.mpstat_text(c, rows));
        }
        if self.layout == "ministat" {
            return self.ministat_text(c, rows);
        }
        if self.layout == "throughput" {
            return Ok(self.throughput_text(c, rows));
        }
        if self.layout == "kernels" {
            return Ok(self.kernels_text(c, rows));
        }
        Ok(self.schedstat_text(c, rows))
    }

    /// The header lines every layout starts with.
    fn header(&self, c: &Comparison) -> String {
        let mut out = format!("Reproduction: {}\nPublished: {}\n", self.title, self.source);
        out.push_str(&format!(
            "Simulated: {} vs {} on {} ({} CPUs), machine {}, '{}' per {}, {} runs per side{}\n",
            c.base,
            c.new,
            c.topo.name,
            c.topo.ncpus(),
            c.machine.name,
            c.workload,
            self.vary,
            c.runs,
            if c.sysctls.is_empty() { String::new() } else { format!(", {}", self.sysctls.join(" ")) }
        ));
        if self.counter_scale(c) != 1.0 {
            out.push_str(&format!(
                "Reduced scale ({}={}): times are not comparable with the published ones.\n",
                self.scale_key,
                value_of(&c.workload, &self.scale_key).unwrap_or(0.0)
            ));
        }
        out
    }

    /// Each target checked on each row, as a summary paragraph.
    fn targets_text(&self, rows: &[Row]) -> String {
        let mut out = String::from("\nTargets (they apply at full scale):");
        let mut all = true;
        for (p, r) in self.matched(rows) {
            let missed: Vec<String> = self.check(p, r).into_iter().filter(|(_, ok)| !ok).map(|(n, _)| n).collect();
            if !missed.is_empty() {
                all = false;
                out.push_str(&format!("\n  {} {}: missed {}", self.vary, r.vary, missed.join(", ")));
            }
        }
        if all {
            out.push_str(" all met");
        }
        out.push('\n');
        out
    }

    /// mmtests' view: Amean elapsed time per row and the gain, published beside
    /// simulated, then the simulated comparison in compare-kernels' layout.
    fn mmtests_text(&self, c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
        let mut out = self.header(c);
        out.push_str(&format!(
            "\n{:>8} | {:>17} | {:>17} | {:>17} | {:>15}\n",
            self.vary, "base Amean s", "new Amean s", "gain %", "target gain %"
        ));
        out.push_str(&format!(
            "{:>8} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8} | {:>15}\n",
            "", "pub", "sim", "pub", "sim", "pub", "sim", ""
        ));
        for (p, r) in self.matched(rows) {
            let mark = |sig: Option<bool>| if sig == Some(true) { "*" } else { " " };
            out.push_str(&format!(
                "{:>8} | {:>8.4} {:>8.4} | {:>8.4} {:>8.4} | {:>7.2}{} {:>8.2} | {:>15}\n",
                r.vary,
                p.base.time_s,
                r.base.mean.time_s,
                p.new.time_s,
                r.new.mean.time_s,
                p.pct_gain.unwrap_or(0.0),
                mark(p.significant),
                pct_gain(r),
                p.target_gain.map_or("-".to_string(), |[lo, hi]| format!("{lo} .. {hi}")),
            ));
        }
        out.push_str(&self.targets_text(rows));
        out.push_str("\nSimulated, as compare-kernels prints it:\n");
        out.push_str(&compare::mmtests(c, rows)?);
        Ok(out)
    }

    /// mpstat's view: the system's %idle over the window, base and new, published
    /// beside simulated (mean of the runs, with their spread).
    fn mpstat_text(&self, c: &Comparison, rows: &[Row]) -> String {
        let mut out = self.header(c);
        out.push_str(&format!("\n{:>8} | {:>28} | {:>28}\n", self.vary, "base %idle", "new %idle"));
        out.push_str(&format!("{:>8} | {:>8} {:>19} | {:>8} {:>19}\n", "", "pub", "sim [min-max]", "pub", "sim [min-max]"));
        for (p, r) in self.matched(rows) {
            let idle = |b: Option<f64>| b.map_or("-".to_string(), |b| format!("{:.2}", 100.0 - b));
            let sim = |s: &compare::Side| {
                let v: Vec<f64> = s.runs.iter().map(|x| 100.0 - x.busy_pct).collect();
                let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
                format!("{:.2} [{:.1}-{:.1}]", 100.0 - s.mean.busy_pct, lo, hi)
            };
            out.push_str(&format!(
                "{:>8} | {:>8} {:>19} | {:>8} {:>19}\n",
                r.vary,
                idle(p.base.busy_pct),
                sim(&r.base),
                idle(p.new.busy_pct),
                sim(&r.new)
            ));
        }
        out.push_str(&self.targets_text(rows));
        out
    }

    /// time(1)'s view of every policy: real, user and sys, published beside
    /// simulated with the difference from the base, the targets, ministat's
    /// comparison of the simulated runs, and each policy's interrupts-off sections.
    fn ministat_text(&self, c: &Comparison, rows: &[Row]) -> Result<String, Failure> {
        let mut out = self.header(c);
        let names: Vec<&String> = [&c.base, &c.new].into_iter().chain(c.others.iter()).collect();
        for (p, r) in self.matched(rows) {
            let sides: Vec<(&PublishedSide, &compare::Side)> =
                [(&p.base, &r.base), (&p.new, &r.new)].into_iter().chain(p.others.iter().zip(&r.others)).collect();
            out.push_str(&format!("\n{} = {}", self.vary, r.vary));
            if let Some(n) = p.base.n {
                out.push_str(&format!(" (published: means of {n} runs)"));
            }
            out.push('\n');
            out.push_str(&format!(
                "{:<10} | {:>19} | {:>17} | {:>19} | {:>19}\n",
                "policy", "real s", "real vs base %", "user s", "sys s"
            ));
            out.push_str(&format!(
                "{:<10} | {:>9} {:>9} | {:>8} {:>8} | {:>9} {:>9} | {:>9} {:>9}\n",
                "", "pub", "sim", "pub", "sim", "pub", "sim", "pub", "sim"
            ));
            let opt = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.2}"));
            for (name, (ps, side)) in names.iter().zip(&sides) {
                let pub_vs = (ps.time_s / p.base.time_s - 1.0) * 100.0;
                out.push_str(&format!(
                    "{:<10} | {:>9.2} {:>9.2} | {:>8.2} {:>8.2} | {:>9} {:>9.2} | {:>9} {:>9.2}\n",
                    name,
                    ps.time_s,
                    side.mean.time_s,
                    pub_vs,
                    time_vs_base_pct(r, side),
                    opt(ps.user_s),
                    side.mean.user_s,
                    opt(ps.sys_s),
                    side.mean.sys_s
                ));
            }
        }
        out.push_str(&self.targets_text(rows));
        for r in rows {
            let sides: Vec<&compare::Side> = [&r.base, &r.new].into_iter().chain(r.others.iter()).collect();
            for (what, f) in [
                ("real", (|x: &compare::RunRow| x.time_s) as fn(&compare::RunRow) -> f64),
                ("user", |x| x.user_s),
                ("sys", |x| x.sys_s),
            ] {
                if c.runs < 3 {
                    break;
                }
                out.push_str(&format!("\nSimulated {what} seconds, {} = {}, as ministat prints it:\n", self.vary, r.vary));
                let sets: Vec<(String, Vec<f64>)> =
                    names.iter().zip(&sides).map(|(n, s)| (n.to_string(), s.runs.iter().map(f).collect())).collect();
                out.push_str(&schedlab_report::ministat(&sets, 0.95).map_err(compare::report_failure)?);
            }
            for (name, side) in names.iter().zip(&sides) {
                out.push_str(&format!("\n{name}, all runs: "));
                out.push_str(&crate::report::irq_off_text(&merged_irq(side)));
            }
        }
        Ok(out)
    }

    /// A rate benchmark's view: base and new rates (mean ± %stdev of the runs),
    /// the %speedup of rates published beside simulated, %busy and steals, then
    /// the simulated tables in the steal seed's layout. A benchmark that reports
    /// a time shows its times instead (the %speedup is then base / new - 1).
    fn throughput_text(&self, c: &Comparison, rows: &[Row]) -> String {
        let mut out = self.header(c);
        let unit = c.rate_unit().unwrap_or("time s");
        let value = |m: &compare::RunRow| m.throughput.unwrap_or(m.time_s);
        out.push_str(&format!(
            "\n{:>8} | {:>21} | {:>21} | {:>15} | {:>7} {:>7} | {:>9}\n",
            self.vary,
            format!("base {unit} sim"),
            format!("new {unit} sim"),
            "%speedup",
            "%busy",
            "%busy",
            "steal/CPU"
        ));
        out.push_str(&format!(
            "{:>8} | {:>12} {:>8} | {:>12} {:>8} | {:>7} {:>7} | {:>7} {:>7} | {:>9}\n",
            "", "mean", "%stdev", "mean", "%stdev", "pub", "sim", "base", "new", "new"
        ));
        for (p, r) in self.matched(rows) {
            out.push_str(&format!(
                "{:>8} | {:>12.2} {:>8.2} | {:>12.2} {:>8.2} | {:>7.1} {:>7.1} | {:>7.2} {:>7.2} | {:>9.0}\n",
                r.vary,
                value(&r.base.mean),
                r.base.stddev_pct,
                value(&r.new.mean),
                r.new.stddev_pct,
                p.pct_speedup.unwrap_or(0.0),
                r.pct_speedup(),
                r.base.mean.busy_pct,
                r.new.mean.busy_pct,
                r.new.mean.steal,
            ));
        }
        out.push_str(&self.targets_text(rows));
        out.push_str("\nSimulated, in the seed's layout:\n");
        out.push_str(&compare::text(c, rows));
        out
    }

    /// Kernels side by side on one benchmark: each policy's rate (published and
    /// simulated, mean ± %stdev), its rate against the base's, context switches per
    /// operation and migrations, then the target checks.
    fn kernels_text(&self, c: &Comparison, rows: &[Row]) -> String {
        let mut out = self.header(c);
        let unit = c.rate_unit().unwrap_or("rate");
        for (p, r) in self.matched(rows) {
            out.push_str(&format!("\n{} = {}\n", self.vary, r.vary));
            out.push_str(&format!(
                "{:<32} | {:>12} {:>12} {:>7} | {:>15} | {:>13} | {:>15}\n",
                "policy",
                format!("{unit} pub"),
                "sim",
                "%stdev",
                "vs base % p/s",
                "switch/op p/s",
                "migrations p/s"
            ));
            let names = std::iter::once(&self.base).chain(std::iter::once(&self.new)).chain(self.others.iter());
            let published = std::iter::once(&p.base).chain(std::iter::once(&p.new)).chain(p.others.iter());
            let simulated = std::iter::once(&r.base).chain(std::iter::once(&r.new)).chain(r.others.iter());
            let base_pub = p.base.rate.unwrap_or(0.0);
            let base_sim = r.base.mean.throughput.unwrap_or(0.0);
            for ((name, ps), ss) in names.zip(published).zip(simulated) {
                let (rp, rs) = (ps.rate.unwrap_or(0.0), ss.mean.throughput.unwrap_or(0.0));
                let ops = (rs * ss.mean.time_s).max(1.0);
                let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |v| format!("{v:.prec$}"));
                out.push_str(&format!(
                    "{:<32} | {:>12.0} {:>12.0} {:>7.2} | {:>7.1} {:>7.1} | {:>6} {:>6.3} | {:>7} {:>7.0}\n",
                    name,
                    rp,
                    rs,
                    ss.stddev_pct,
                    (rp / base_pub.max(1e-9) - 1.0) * 100.0,
                    (rs / base_sim.max(1e-9) - 1.0) * 100.0,
                    opt(ps.switches_per_op, 2),
                    ss.mean.switches / ops,
                    opt(ps.migrations, 0),
                    ss.mean.migrations,
                ));
            }
        }
        out.push_str(&self.targets_text(rows));
        out
    }

    fn schedstat_text(&self, c: &Comparison, rows: &[Row]) -> String {
        let mut out = String::new();
        let scale = self.counter_scale(c);
        out.push_str(&self.header(c));
        if scale != 1.0 {
            out.push_str(&format!("Counters below are simulated × {scale:.1}.\n"));
        }
        out.push_str(&format!(
            "\n{:>6} | {:>15} | {:>15} | {:>13} | {:>13} | {:>13} | {:>15}\n",
            self.vary, "base time s", "new time s", "%speedup", "base %busy", "new %busy", "steal/CPU"
        ));
        out.push_str(&format!(
            "{:>6} | {:>7} {:>7} | {:>7} {:>7} | {:>6} {:>6} | {:>6} {:>6} | {:>6} {:>6} | {:>7} {:>7}\n",
            "", "pub", "sim", "pub", "sim", "pub", "sim", "pub", "sim", "pub", "sim", "pub", "sim"
        ));
        let opt = |v: Option<f64>, prec: usize| v.map_or("-".to_string(), |x| format!("{x:.prec$}"));
        for (p, r) in self.matched(rows) {
            out.push_str(&format!(
                "{:>6} | {:>7.3} {:>7.3} | {:>7.3} {:>7.3} | {:>6.1} {:>6.1} | {:>6} {:>6.2} | {:>6} {:>6.2} | {:>7} {:>7.0}\n",
                r.vary,
                p.base.time_s,
                r.base.mean.time_s,
                p.new.time_s,
                r.new.mean.time_s,
                p.pct_speedup.unwrap_or(0.0),
                r.pct_speedup(),
                opt(p.base.busy_pct, 2),
                r.base.mean.busy_pct,
                opt(p.new.busy_pct, 2),
                r.new.mean.busy_pct,
                opt(p.new.steal, 0),
                r.new.mean.steal * scale,
            ));
        }
        out.push_str("\nPer-CPU schedstat deltas, published vs simulated:\n");
        out.push_str(&format!(
            "{:>6} | {:<5} | {:>15} | {:>15} | {:>15} | {:>11} | {:>11}\n",
            self.vary, "side", "sched", "idle", "wake", "%find", "slice ms"
        ));
        for (p, r) in self.matched(rows) {
            for (label, ps, s) in [("base", &p.base, &r.base.mean), ("new", &p.new, &r.new.mean)] {
                out.push_str(&format!(
                    "{:>6} | {:<5} | {:>7} {:>7.0} | {:>7} {:>7.0} | {:>7} {:>7.0} | {:>5} {:>5.2} | {:>5} {:>5.2}\n",
                    r.vary,
                    label,
                    opt(ps.sched, 0),
                    s.sched * scale,
                    opt(ps.idle, 0),
                    s.idle * scale,
                    opt(ps.wake, 0),
                    s.wake * scale,
                    opt(ps.find_pct, 2),
                    s.find_pct,
                    opt(ps.slice_ms, 2),
                    s.slice_ms,
                ));
            }
        }
        out.push_str(&self.targets_text(rows));
        out.push_str("\nSimulated, in the seed's layout:\n");
        out.push_str(&compare::text(c, rows));
        out
    }

    fn matched<'a>(&'a self, rows: &'a [Row]) -> impl Iterator<Item = (&'a PublishedRow, &'a Row)> {
        rows.iter().filter_map(|r| self.rows.iter().find(|p| p.vary == r.vary).map(|p| (p, r)))
    }
}

/// A side's wall time against the base's, in per cent (positive = slower).
pub fn time_vs_base_pct(r: &Row, side: &compare::Side) -> f64 {
    let b = r.base.mean.time_s;
    if b == 0.0 {
        0.0
    } else {
        (side.mean.time_s / b - 1.0) * 100.0
    }
}

/// The interrupts-off sections of every run of a side, merged.
fn merged_irq(side: &compare::Side) -> IrqOffStats {
    let mut runs = side.runs.iter().filter_map(|r| r.irq_off.as_ref());
    let mut all = runs.next().cloned().expect("a side has runs");
    for r in runs {
        all.merge(r);
    }
    all
}

/// The merged sections of one site, empty when it never ran.
fn merged_irq_site(side: &compare::Side, site: &str) -> hdrhistogram::Histogram<u64> {
    let all = merged_irq(side);
    all.by_site.get(site).cloned().unwrap_or_else(schedlab_core::stats::latency_histogram)
}

/// mmtests' gain for a time: (base − new) / base, in per cent.
pub fn pct_gain(r: &Row) -> f64 {
    let b = r.base.mean.time_s;
    if b == 0.0 {
        0.0
    } else {
        (b - r.new.mean.time_s) / b * 100.0
    }
}

/// One line of the `reproduce all` summary.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryLine {
    pub experiment: String,
    pub row: String,
    /// What is compared: `%speedup` (steal seed) or `gain %` (mmtests layouts).
    pub metric: &'static str,
    /// None when nothing was published for it.
    pub published: Option<f64>,
    pub simulated: f64,
    /// None when the row has no target.
    pub within_target: Option<bool>,
}

impl Experiment {
    /// The summary lines of one experiment's rows.
    pub fn summary(&self, rows: &[Row]) -> Vec<SummaryLine> {
        if self.layout == "ministat" {
            return self.ministat_summary(rows);
        }
        self.matched(rows)
            .map(|(p, r)| {
                let checks = self.check(p, r);
                let (metric, published, simulated) = match (p.pct_speedup, self.layout.as_str()) {
                    (Some(s), _) => ("%speedup", s, r.pct_speedup()),
                    (None, "kernels") => {
                        let rate = |s: &compare::Side| s.mean.throughput.unwrap_or(0.0);
                        let pub_pct = (p.new.rate.unwrap_or(0.0) / p.base.rate.unwrap_or(1.0).max(1e-9) - 1.0) * 100.0;
                        ("new rate vs base %", pub_pct, (rate(&r.new) / rate(&r.base).max(1e-9) - 1.0) * 100.0)
                    }
                    (None, "mpstat") => ("new %idle", 100.0 - p.new.busy_pct.unwrap_or(100.0), 100.0 - r.new.mean.busy_pct),
                    (None, _) => ("gain %", p.pct_gain.unwrap_or(0.0), pct_gain(r)),
                };
                SummaryLine {
                    experiment: self.name.clone(),
                    row: format!("{}={}", self.vary, r.vary),
                    metric,
                    published: Some(published),
                    simulated,
                    within_target: (!checks.is_empty()).then(|| checks.iter().all(|(_, ok)| *ok)),
                }
            })
            .collect()
    }
}

impl Experiment {
    /// `ministat` layout: each policy's wall time against the base's, and the cut
    /// of the interrupts-off sections, each with its own target check.
    fn ministat_summary(&self, rows: &[Row]) -> Vec<SummaryLine> {
        let mut lines = Vec::new();
        let t = &self.targets;
        for (p, r) in self.matched(rows) {
            let vs = |ps: &PublishedSide| (ps.time_s / p.base.time_s - 1.0) * 100.0;
            let sim = time_vs_base_pct(r, &r.new);
            lines.push(SummaryLine {
                experiment: self.name.clone(),
                row: self.new.clone(),
                metric: "real vs base %",
                published: Some(vs(&p.new)),
                simulated: sim,
                within_target: t.new_time_within_pct.map(|w| sim.abs() <= w),
            });
            for ((name, ps), side) in self.others.iter().zip(&p.others).zip(&r.others) {
                let d = time_vs_base_pct(r, side);
                lines.push(SummaryLine {
                    experiment: self.name.clone(),
                    row: name.clone(),
                    metric: "real vs base %",
                    published: Some(vs(ps)),
                    simulated: d,
                    within_target: t.others_time_worse_pct.map(|[lo, hi]| (lo..=hi).contains(&d)),
                });
            }
            if let (Some(x), Some(site)) = (t.irq_cut_at_least, &t.irq_site) {
                let (base, new) = (merged_irq_site(&r.base, site), merged_irq_site(&r.new, site));
                for (q, metric) in [(1.0, "irq-off max x"), (0.99, "irq-off p99 x")] {
                    let cut = base.value_at_quantile(q) as f64 / new.value_at_quantile(q).max(1) as f64;
                    lines.push(SummaryLine {
                        experiment: self.name.clone(),
                        row: site.clone(),
                        metric,
                        published: None,
                        simulated: cut,
                        within_target: Some(cut >= x),
                    });
                }
            }
        }
        lines
    }
}

/// The summary table `reproduce all` ends with.
pub fn summary_text(lines: &[SummaryLine]) -> String {
    let mut out = format!(
        "{:<15} {:<14} {:<14} {:>10} {:>10}  {}\n",
        "experiment", "row", "metric", "published", "simulated", "within target"
    );
    for l in lines {
        let target = match l.within_target {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let published = l.published.map_or("-".to_string(), |p| format!("{p:.2}"));
        out.push_str(&format!(
            "{:<15} {:<14} {:<14} {:>10} {:>10.2}  {}\n",
            l.experiment, l.row, l.metric, published, l.simulated, target
        ));
    }
    let with: Vec<&SummaryLine> = lines.iter().filter(|l| l.within_target.is_some()).collect();
    let met = with.iter().filter(|l| l.within_target == Some(true)).count();
    out.push_str(&format!("{met} of {} rows with a target are within it.\n", with.len()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_experiment_loads_and_builds_its_comparison() {
        for (name, _) in BUILTIN {
            let e = load(name).unwrap();
            assert_eq!(&e.name, name);
            let scale = e.scaled(0.01);
            let c = e.comparison(Some(1), Some(&scale), None).unwrap();
            c.validate().unwrap();
            assert!(c.workload.contains(&format!("{}={scale}", e.scale_key)), "{}", c.workload);
        }
    }

    #[test]
    fn summary_lists_rows_and_counts_targets_met() {
        let line = |row: &str, published: f64, simulated: f64, within_target: Option<bool>| SummaryLine {
            experiment: "numa-fork".into(),
            row: row.into(),
            metric: "gain %",
            published: Some(published),
            simulated,
            within_target,
        };
        let text = summary_text(&[
            line("threads=30", 37.62, 33.95, Some(true)),
            line("threads=21", 7.74, 4.04, None),
            line("threads=79", 4.95, 0.0, Some(false)),
        ]);
        let expected = "\
experiment      row            metric          published  simulated  within target
numa-fork       threads=30     gain %              37.62      33.95  yes
numa-fork       threads=21     gain %               7.74       4.04  -
numa-fork       threads=79     gain %               4.95       0.00  NO
1 of 2 rows with a target are within it.
";
        assert_eq!(text, expected);
    }

    #[test]
    fn bad_experiment_files_name_the_problem() {
        let dir = std::env::temp_dir().join(format!("schedlab-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bad.toml");
        std::fs::write(&p, "name = \"x\"\ntitle = 3\n").unwrap();
        let e = load(p.to_str().unwrap()).unwrap_err();
        assert!(e.expected.contains("experiment TOML"), "{e}");
        let e = load("nosuch").unwrap_err();
        assert!(e.expected.contains("steal"));
        let e = load(dir.join("missing.toml").to_str().unwrap()).unwrap_err();
        assert_eq!(e.field, "experiment file");
        // A layout or scale key the program does not know.
        let steal = BUILTIN[0].1;
        for (edit, field) in [("layout = \"plain\"\n", "experiment layout"), ("scale_key = \"mb\"\n", "experiment scale_key")] {
            let text = steal.replacen("runs = 10\n", &format!("runs = 10\n{edit}"), 1);
            std::fs::write(&p, text).unwrap();
            let e = load(p.to_str().unwrap()).unwrap_err();
            assert_eq!(e.field, field, "{e}");
        }
        // A throughput table needs each row's %speedup.
        let text =
            steal.replacen("runs = 10\n", "runs = 10\nlayout = \"throughput\"\n", 1).replacen("pct_speedup = 36.1\n", "", 1);
        std::fs::write(&p, text).unwrap();
        let e = load(p.to_str().unwrap()).unwrap_err();
        assert_eq!(e.field, "experiment rows.pct_speedup", "{e}");
        // Other layouts need the published times.
        let text = steal.replacen("base = { time_s = 8.084,", "base = { time_s = 0.0,", 1);
        std::fs::write(&p, text).unwrap();
        let e = load(p.to_str().unwrap()).unwrap_err();
        assert_eq!(e.field, "experiment rows.base/new.time_s", "{e}");
    }
}
