//! Validation suites (`suites/NAME.toml` built in, or a `.toml` path): the rows
//! `schedlab validate` runs for real and simulated, and the tolerances it judges by.

use serde::Deserialize;

use schedlab_core::error::SpecError;
use schedlab_host::real;
use schedlab_workloads::Workload;

/// The shipped suites, built into the binary.
pub const BUILTIN: &[(&str, &str)] = &[
    ("host-default", include_str!("../../../suites/host-default.toml")),
    ("host-quick", include_str!("../../../suites/host-quick.toml")),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    name: String,
    runs: Option<u64>,
    sim_seeds: Option<u64>,
    timeout_s: Option<u64>,
    extra_budget_s: Option<u64>,
    tolerance: Option<ToleranceFile>,
    rows: Vec<RowFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToleranceFile {
    elapsed_pct: Option<f64>,
    switches_pct: Option<f64>,
    migrations_factor: Option<f64>,
    migrations_min: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RowFile {
    name: String,
    workload: String,
}

/// When a simulated median agrees with the real one.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerance {
    pub elapsed_pct: f64,
    pub switches_pct: f64,
    pub migrations_factor: f64,
    /// Migrations are judged only where the real median is at least this.
    pub migrations_min: u64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance { elapsed_pct: 15.0, switches_pct: 25.0, migrations_factor: 2.0, migrations_min: 100 }
    }
}

pub struct SuiteRow {
    pub name: String,
    pub spec: String,
    pub workload: Workload,
}

pub struct Suite {
    pub name: String,
    /// Real runs per row.
    pub runs: u64,
    /// Simulated runs per kept real run, each with a seed of its own, on the
    /// profile of the host state that real run ran in. A row's simulated count
    /// swings from seed to seed more than its real runs do (pipe messaging at 1
    /// group on these hosts: 122 to 192 thousand switches over 20 seeds, real
    /// 91 to 105 thousand over 3 runs), so one seed per real run would judge a
    /// row by its luck; simulated runs cost a second or less.
    pub sim_seeds: u64,
    pub timeout_s: u64,
    /// Wall seconds the real side may spend on work beyond the suite's own
    /// `runs` rounds, which always run: retries of runs set aside because the
    /// host changed state during them, and calibrates of states first seen. No
    /// such work starts once this much has been spent (the last one may run
    /// over); a row left short of runs is judged on the runs it kept, and the
    /// report says what the budget cut.
    pub extra_budget_s: u64,
    pub tolerance: Tolerance,
    pub rows: Vec<SuiteRow>,
}

/// A shipped suite by name, or a `.toml` file by path; every field checked.
pub fn load_suite(name_or_path: &str) -> Result<Suite, SpecError> {
    let (text, origin) = crate::shipped::text("suite", BUILTIN, name_or_path)?;
    parse(&text, &origin)
}

/// A suite's `extra_budget_s` when it names none.
pub const DEFAULT_EXTRA_BUDGET_S: u64 = 60;

/// A suite from its TOML text, every field checked; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Suite, SpecError> {
    let f: SuiteFile = toml::from_str(text).map_err(|e| {
        SpecError::new("suite file", origin, format!("a suite TOML like suites/host-quick.toml ({})", e.message()))
    })?;
    let runs = f.runs.unwrap_or(3);
    if !(1..=100).contains(&runs) {
        return Err(SpecError::new("suite runs", runs.to_string(), "an integer from 1 to 100"));
    }
    let sim_seeds = f.sim_seeds.unwrap_or(1);
    if !(1..=100).contains(&sim_seeds) {
        return Err(SpecError::new("suite sim_seeds", sim_seeds.to_string(), "an integer from 1 to 100"));
    }
    let timeout_s = f.timeout_s.unwrap_or(120);
    if !(1..=3600).contains(&timeout_s) {
        return Err(SpecError::new("suite timeout_s", timeout_s.to_string(), "an integer from 1 to 3600"));
    }
    let extra_budget_s = f.extra_budget_s.unwrap_or(DEFAULT_EXTRA_BUDGET_S);
    if extra_budget_s > 3600 {
        return Err(SpecError::new("suite extra_budget_s", extra_budget_s.to_string(), "an integer from 0 to 3600"));
    }
    let d = Tolerance::default();
    let t = f.tolerance.unwrap_or(ToleranceFile {
        elapsed_pct: None,
        switches_pct: None,
        migrations_factor: None,
        migrations_min: None,
    });
    let tolerance = Tolerance {
        elapsed_pct: t.elapsed_pct.unwrap_or(d.elapsed_pct),
        switches_pct: t.switches_pct.unwrap_or(d.switches_pct),
        migrations_factor: t.migrations_factor.unwrap_or(d.migrations_factor),
        migrations_min: t.migrations_min.unwrap_or(d.migrations_min),
    };
    for (field, v) in [("tolerance.elapsed_pct", tolerance.elapsed_pct), ("tolerance.switches_pct", tolerance.switches_pct)] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(SpecError::new(field, v.to_string(), "a positive percentage"));
        }
    }
    if !(tolerance.migrations_factor >= 1.0 && tolerance.migrations_factor.is_finite()) {
        return Err(SpecError::new("tolerance.migrations_factor", tolerance.migrations_factor.to_string(), "a number >= 1"));
    }
    if f.rows.is_empty() {
        return Err(SpecError::new("suite rows", origin, "at least one [[rows]] entry"));
    }
    let mut rows: Vec<SuiteRow> = Vec::new();
    for r in f.rows {
        if r.name.is_empty() || rows.iter().any(|x| x.name == r.name) {
            return Err(SpecError::new("suite rows.name", &r.name, "a non-empty name, unique in the suite"));
        }
        let workload = Workload::parse(&r.workload)?;
        real::check_runnable(&workload)
            .map_err(|e| SpecError::new("suite rows.workload", &r.workload, format!("a workload with a real run ({e})")))?;
        rows.push(SuiteRow { name: r.name, spec: r.workload, workload });
    }
    Ok(Suite { name: f.name, runs, sim_seeds, timeout_s, extra_budget_s, tolerance, rows })
}
