//! `schedlab._native`: the Python package's bridge to schedlab-spec. Each function
//! takes what the command line takes, validates it the same way (a bad spec
//! raises ValueError with the command line's message), runs with the GIL
//! released, and returns plain Python values (JSON text, lists, dicts) that the
//! pure-Python layer (python/schedlab) turns into results and DataFrames.

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use schedlab_spec::compare::{CompareRequest, Comparison};
use schedlab_spec::events::LineSink;
use schedlab_spec::sweep::{self, Cache, Grid, Job};
use schedlab_spec::{Failure, RunRequest, RunSpec};
use schedlab_trace::{Event, Line};

fn py_err(f: Failure) -> PyErr {
    match f {
        Failure::Input(e) => PyValueError::new_err(e.to_string()),
        Failure::Host(m) => PyOSError::new_err(m),
        Failure::Run(m) => PyRuntimeError::new_err(m),
    }
}

/// One tracepoint's columns, LISA's way: `__cpu`, `__pid`, `__comm` of the
/// context, the time in ns, then the tracepoint's own fields.
#[derive(Default)]
struct Table {
    time_ns: Vec<u64>,
    cpu: Vec<u32>,
    pid: Vec<u32>,
    comm: Vec<String>,
    ints: Vec<(&'static str, Vec<i64>)>,
    texts: Vec<(&'static str, Vec<String>)>,
}

impl Table {
    fn push(&mut self, line: &Line, ints: &[(&'static str, i64)], texts: &[(&'static str, &str)]) {
        self.time_ns.push(line.ts_ns);
        self.cpu.push(line.cpu);
        self.pid.push(line.pid);
        self.comm.push(line.comm.clone());
        if self.ints.is_empty() && self.texts.is_empty() {
            self.ints = ints.iter().map(|(k, _)| (*k, Vec::new())).collect();
            self.texts = texts.iter().map(|(k, _)| (*k, Vec::new())).collect();
        }
        for (col, (_, v)) in self.ints.iter_mut().zip(ints) {
            col.1.push(*v);
        }
        for (col, (_, v)) in self.texts.iter_mut().zip(texts) {
            col.1.push(v.to_string());
        }
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("time_ns", self.time_ns)?;
        d.set_item("__cpu", self.cpu)?;
        d.set_item("__pid", self.pid)?;
        d.set_item("__comm", self.comm)?;
        for (k, v) in self.texts {
            d.set_item(k, v)?;
        }
        for (k, v) in self.ints {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
}

/// Lines grouped by tracepoint, in the kernel's field names.
fn event_tables(lines: &[Line]) -> Vec<(&'static str, Table)> {
    let names = schedlab_trace::SCHED_EVENTS;
    let mut tables: Vec<(&'static str, Table)> = names.iter().map(|n| (*n, Table::default())).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).expect("a sched tracepoint");
    for l in lines {
        match &l.event {
            Event::Switch { prev_comm, prev_pid, prev_prio, prev_state, next_comm, next_pid, next_prio } => {
                tables[at("sched_switch")].1.push(
                    l,
                    &[
                        ("prev_pid", *prev_pid as i64),
                        ("prev_prio", *prev_prio as i64),
                        ("next_pid", *next_pid as i64),
                        ("next_prio", *next_prio as i64),
                    ],
                    &[("prev_comm", prev_comm), ("prev_state", prev_state), ("next_comm", next_comm)],
                )
            }
            Event::Waking { comm, pid, prio, target_cpu }
            | Event::Wakeup { comm, pid, prio, target_cpu }
            | Event::WakeupNew { comm, pid, prio, target_cpu } => tables[at(l.event.name())].1.push(
                l,
                &[("pid", *pid as i64), ("prio", *prio as i64), ("target_cpu", *target_cpu as i64)],
                &[("comm", comm)],
            ),
            Event::MigrateTask { comm, pid, prio, orig_cpu, dest_cpu } => tables[at("sched_migrate_task")].1.push(
                l,
                &[("pid", *pid as i64), ("prio", *prio as i64), ("orig_cpu", *orig_cpu as i64), ("dest_cpu", *dest_cpu as i64)],
                &[("comm", comm)],
            ),
            Event::ProcessFork { comm, pid, child_comm, child_pid } => tables[at("sched_process_fork")].1.push(
                l,
                &[("parent_pid", *pid as i64), ("child_pid", *child_pid as i64)],
                &[("parent_comm", comm), ("child_comm", child_comm)],
            ),
            Event::ProcessExit { comm, pid, prio, group_dead } => tables[at("sched_process_exit")].1.push(
                l,
                &[("pid", *pid as i64), ("prio", *prio as i64), ("group_dead", group_dead.map_or(-1, i64::from))],
                &[("comm", comm)],
            ),
            Event::Other { .. } => {}
        }
    }
    tables
}

/// One run. Returns a dict: `json` (what `schedlab run --format json` prints),
/// `text` (what `schedlab run` prints), and with
/// `events=True` `events`, a dict of tracepoint name → columns.
#[pyfunction]
#[pyo3(signature = (topology, machine, policy, workload, seed, sysctls, hz, preempt, autogroup, check, events))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    topology: String,
    machine: Option<String>,
    policy: String,
    workload: String,
    seed: u64,
    sysctls: Vec<String>,
    hz: u64,
    preempt: Option<String>,
    autogroup: Option<String>,
    check: bool,
    events: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let request =
        RunRequest { topology, machine, policy, workload, seed, sysctls, hz, preempt, autogroup, launcher_wakee_flips: 0, check };
    let (json, text, lines) = py
        .detach(|| -> Result<(String, String, Option<Vec<Line>>), Failure> {
            let spec = RunSpec::from_request(&request)?;
            let mut engine = spec.engine();
            let sink = LineSink::default();
            let lines = events.then(|| sink.lines.clone());
            if events {
                engine.set_trace(Box::new(sink));
            }
            let started = std::time::Instant::now();
            let result = engine.run();
            let wall = started.elapsed();
            schedlab_spec::run::check_result(&result, request.check)?;
            let json = schedlab_spec::report::json(&spec, &result);
            let text = schedlab_spec::report::text(&spec, &result, wall);
            Ok((json, text, lines.map(|l| l.take())))
        })
        .map_err(py_err)?;
    let out = PyDict::new(py);
    out.set_item("json", json)?;
    out.set_item("text", text)?;
    if let Some(lines) = lines {
        let tables = PyDict::new(py);
        for (name, t) in event_tables(&lines) {
            tables.set_item(name, t.into_dict(py)?)?;
        }
        out.set_item("events", tables)?;
    }
    Ok(out)
}

/// A comparison. Returns a dict: `json` and `text` (as `schedlab compare`
/// prints them) and `runs`, JSON records of every run.
#[pyfunction]
#[pyo3(signature = (base, new, others, topology, machine, workload, vary, runs, sysctls, hz, preempt, autogroup, seed, jobs))]
#[allow(clippy::too_many_arguments)]
fn compare<'py>(
    py: Python<'py>,
    base: String,
    new: String,
    others: Vec<String>,
    topology: String,
    machine: Option<String>,
    workload: String,
    vary: Option<String>,
    runs: u64,
    sysctls: Vec<String>,
    hz: u64,
    preempt: Option<String>,
    autogroup: Option<String>,
    seed: u64,
    jobs: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let request = CompareRequest {
        base,
        new,
        others,
        topology,
        machine,
        workload,
        vary,
        runs,
        sysctls,
        hz,
        preempt,
        autogroup,
        first_seed: seed,
    };
    let (json, text, records) = py
        .detach(|| -> Result<(String, String, String), Failure> {
            let c = Comparison::from_request(&request)?;
            let rows = c.run(schedlab_spec::parallel::threads(jobs)?)?;
            let records = serde_json::to_string(&schedlab_spec::compare::run_records(&c, &rows)).expect("JSON values");
            Ok((schedlab_spec::compare::json(&c, &rows), schedlab_spec::compare::text(&c, &rows), records))
        })
        .map_err(py_err)?;
    let out = PyDict::new(py);
    out.set_item("json", json)?;
    out.set_item("text", text)?;
    out.set_item("runs", records)?;
    Ok(out)
}

/// A shipped experiment (or an experiment .toml). Returns a dict: `text` (what
/// `schedlab reproduce NAME` prints), `json`, `summary` (JSON records: row,
/// metric, published, simulated, within_target) and `runs` (JSON records).
#[pyfunction]
#[pyo3(signature = (name, runs, scale, rows, jobs))]
fn reproduce<'py>(
    py: Python<'py>,
    name: String,
    runs: Option<u64>,
    scale: Option<String>,
    rows: Option<Vec<String>>,
    jobs: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let (text, json, summary, records) = py
        .detach(|| -> Result<(String, String, String, String), Failure> {
            let e = schedlab_spec::experiment::load(&name)?;
            let c = e.comparison(runs, scale.as_deref(), rows.as_deref())?;
            c.validate()?;
            let result = c.run(schedlab_spec::parallel::threads(jobs)?)?;
            let summary: Vec<serde_json::Value> = e
                .summary(&result)
                .into_iter()
                .map(|l| {
                    serde_json::json!({
                        "experiment": l.experiment, "row": l.row, "metric": l.metric,
                        "published": l.published, "simulated": l.simulated, "within_target": l.within_target,
                    })
                })
                .collect();
            let records = schedlab_spec::compare::run_records(&c, &result);
            Ok((
                e.text(&c, &result)?,
                schedlab_spec::compare::json(&c, &result),
                serde_json::to_string(&summary).expect("JSON values"),
                serde_json::to_string(&records).expect("JSON values"),
            ))
        })
        .map_err(py_err)?;
    let out = PyDict::new(py);
    out.set_item("text", text)?;
    out.set_item("json", json)?;
    out.set_item("summary", summary)?;
    out.set_item("runs", records)?;
    Ok(out)
}

/// A grid from a TOML text, or from (key, values) pairs with runs and seed.
fn grid_of(toml: Option<String>, axes: Option<Vec<(String, Vec<String>)>>, runs: u64, seed: u64) -> Result<Grid, Failure> {
    Ok(match (toml, axes) {
        (Some(text), None) => Grid::parse_toml(&text, "grid")?,
        (None, Some(axes)) => Grid::new(axes, runs, seed)?,
        _ => return Err(schedlab_spec::SpecError::new("grid", "(both or neither)", "a TOML text or a dict of parameters").into()),
    })
}

/// A grid's jobs (of shard `I/N` if given): JSON `[{index, params: [[key, value],
/// ...], seed}, ...]`, every cell validated first.
#[pyfunction]
#[pyo3(signature = (toml, axes, runs, seed, shard))]
fn sweep_jobs(
    py: Python<'_>,
    toml: Option<String>,
    axes: Option<Vec<(String, Vec<String>)>>,
    runs: u64,
    seed: u64,
    shard: Option<String>,
) -> PyResult<String> {
    py.detach(|| -> Result<String, Failure> {
        let jobs = grid_of(toml, axes, runs, seed)?.shard_jobs(shard.as_deref())?;
        let v: Vec<serde_json::Value> =
            jobs.iter().map(|j| serde_json::json!({ "index": j.index, "params": j.params, "seed": j.seed })).collect();
        Ok(serde_json::to_string(&v).expect("JSON values"))
    })
    .map_err(py_err)
}

/// One job of a sweep (for a Dask worker), through the cache at `cache` if
/// given. Returns (row as JSON `[[column, value], ...]`, "computed" | "cached" |
/// "repaired").
#[pyfunction]
#[pyo3(signature = (index, params, seed, cache))]
fn sweep_one(
    py: Python<'_>,
    index: usize,
    params: Vec<(String, String)>,
    seed: u64,
    cache: Option<String>,
) -> PyResult<(String, String)> {
    py.detach(|| -> Result<(String, String), Failure> {
        let request = sweep::request_of(&params, seed)?;
        let job = Job { index, params, seed, request };
        let cache = cache.map(|d| Cache::new(std::path::Path::new(&d))).transpose()?;
        let (row, how) = sweep::row_for(&job, cache.as_ref())?;
        Ok((serde_json::to_string(&row).expect("JSON values"), how.name().to_string()))
    })
    .map_err(py_err)
}

/// A whole sweep on this machine's cores (the parallel runner). Returns (rows as
/// JSON `[[[column, value], ...], ...]`, computed, cached, repaired).
#[pyfunction]
#[pyo3(signature = (toml, axes, runs, seed, cache, shard, jobs))]
#[allow(clippy::too_many_arguments)]
fn sweep_local(
    py: Python<'_>,
    toml: Option<String>,
    axes: Option<Vec<(String, Vec<String>)>>,
    runs: u64,
    seed: u64,
    cache: Option<String>,
    shard: Option<String>,
    jobs: Option<usize>,
) -> PyResult<(String, usize, usize, usize)> {
    py.detach(|| -> Result<(String, usize, usize, usize), Failure> {
        let threads = schedlab_spec::parallel::threads(jobs)?;
        let mine = grid_of(toml, axes, runs, seed)?.shard_jobs(shard.as_deref())?;
        let cache = cache.map(|d| Cache::new(std::path::Path::new(&d))).transpose()?;
        let (rows, counts) = sweep::run_jobs(&mine, cache.as_ref(), threads)?;
        Ok((serde_json::to_string(&rows).expect("JSON values"), counts.computed, counts.cached, counts.repaired))
    })
    .map_err(py_err)
}

/// The default cache directory.
#[pyfunction]
fn default_cache_dir() -> String {
    Cache::default_dir().display().to_string()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_jobs, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_one, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_local, m)?)?;
    m.add_function(wrap_pyfunction!(default_cache_dir, m)?)?;
    m.add("SOURCE_REVISION", sweep::SOURCE_REVISION)?;
    m.add("SOURCE_DIGEST", sweep::SOURCE_DIGEST)?;
    Ok(())
}
