//! Sweeps: a grid of run parameters, every combination run `runs` times (seeds
//! `seed`, `seed + 1`, ...), one tidy row per run with every parameter a column.
//!
//! A grid is a TOML file (`schedlab sweep grid.toml`) or, from Python, a dict of
//! the same keys. Each key takes one value or a list of values:
//!
//! ```toml
//! runs = 3                      # runs (seeds) per cell; default 1
//! seed = 1                      # the first seed; default 1
//! [grid]
//! topology = ["x6-2-20", "2x1x8x2"]
//! policy = ["cfs@4.19", "cfs@4.19+STEAL"]
//! workload = "hackbench loops=2000"
//! "workload.groups" = [1, 2, 4] # a workload key, added to the workload spec
//! "sysctl.sched_migration_cost_ns" = [500000, 5000000]
//! ```
//!
//! Accepted keys: `topology`, `machine`, `policy`, `workload`, `hz`, `preempt`,
//! `autogroup`, `workload.KEY` and `sysctl.NAME`. Cells are the cartesian product
//! in a fixed key order (that list's order, then `workload.*` and `sysctl.*` by
//! name), so a grid always expands to the same jobs in the same order, whatever
//! order its file lists them in.
//!
//! Every job is a pure function of its request and of the simulator's source, so
//! its row is cached under a content address: the SHA-256 of the normalised
//! request, the machine profile it resolves to, and the digest of the simulator's
//! source (`SOURCE_DIGEST`, a dirty tree included). A rerun computes only what is
//! missing; a sweep killed at any moment loses only the runs in flight. Entries
//! are written whole (temporary file, then rename) and checked against their own
//! hash when read; a damaged entry is recomputed, never trusted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use schedlab_core::error::SpecError;

use crate::run::{check_result, RunRequest, RunSpec};
use crate::Failure;

/// SHA-256 of every source file the simulator is built from (build.rs).
pub const SOURCE_DIGEST: &str = env!("SCHEDLAB_SOURCE_DIGEST");
/// `git describe`-like revision of the build: a commit, `-dirty` when the tree
/// had changes, or `unknown` outside a git checkout.
pub const SOURCE_REVISION: &str = env!("SCHEDLAB_SOURCE_REVISION");

/// Most jobs one grid may expand to (its rows are kept until the table is
/// written: about a kilobyte each).
pub const MAX_JOBS: usize = 1_000_000;

const SCALAR_KEYS: [&str; 7] = ["topology", "machine", "policy", "workload", "hz", "preempt", "autogroup"];
const ACCEPTED: &str = "topology, machine, policy, workload, hz, preempt, autogroup, workload.KEY or sysctl.NAME";

/// A parsed grid.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    /// (key, values) in expansion order.
    pub axes: Vec<(String, Vec<String>)>,
    pub runs: u64,
    pub first_seed: u64,
}

/// One run of a sweep: its parameters (every grid key) and its request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// Position in the expanded grid (shards split on it).
    pub index: usize,
    pub params: Vec<(String, String)>,
    pub seed: u64,
    pub request: RunRequest,
}

/// A TOML value as the text a command line would carry.
fn toml_text(field: &str, v: &toml::Value) -> Result<String, SpecError> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on" } else { "off" }.to_string()),
        other => Err(SpecError::new(field, other.to_string(), "a string, a number, or a list of them")),
    }
}

impl Grid {
    /// A grid file's text; `origin` names it in errors.
    pub fn parse_toml(text: &str, origin: &str) -> Result<Grid, SpecError> {
        let doc: toml::Table = toml::from_str(text).map_err(|e| {
            SpecError::new("grid file", origin, format!("a TOML grid: runs, seed and a [grid] table ({})", e.message()))
        })?;
        let mut runs = 1;
        let mut first_seed = 1;
        let mut grid: Option<&toml::Table> = None;
        for (k, v) in &doc {
            match (k.as_str(), v) {
                ("runs", toml::Value::Integer(n)) if *n >= 1 => runs = *n as u64,
                ("seed", toml::Value::Integer(n)) if *n >= 0 => first_seed = *n as u64,
                ("grid", toml::Value::Table(t)) => grid = Some(t),
                ("runs", v) => return Err(SpecError::new("grid runs", v.to_string(), "a whole number from 1")),
                ("seed", v) => return Err(SpecError::new("grid seed", v.to_string(), "a whole number")),
                (other, _) => return Err(SpecError::new("grid file key", other, "runs, seed or [grid]")),
            }
        }
        let grid = grid.ok_or_else(|| SpecError::new("grid file", origin, "a [grid] table of parameters"))?;
        let mut axes = Vec::new();
        for (k, v) in grid {
            let field = format!("grid {k}");
            let values = match v {
                toml::Value::Array(a) => a.iter().map(|x| toml_text(&field, x)).collect::<Result<Vec<_>, _>>()?,
                x => vec![toml_text(&field, x)?],
            };
            axes.push((k.clone(), values));
        }
        Grid::new(axes, runs, first_seed)
    }

    /// A grid from (key, values) pairs in any order; every key and the size checked.
    pub fn new(axes: Vec<(String, Vec<String>)>, runs: u64, first_seed: u64) -> Result<Grid, SpecError> {
        let mut by_key: BTreeMap<(usize, String), Vec<String>> = BTreeMap::new();
        for (k, values) in axes {
            let rank = match SCALAR_KEYS.iter().position(|s| *s == k) {
                Some(i) => i,
                None if k.strip_prefix("workload.").is_some_and(|r| !r.is_empty() && !r.contains(char::is_whitespace)) => {
                    SCALAR_KEYS.len()
                }
                None if k.strip_prefix("sysctl.").is_some_and(|r| !r.is_empty() && !r.contains(char::is_whitespace)) => {
                    SCALAR_KEYS.len() + 1
                }
                None => return Err(SpecError::new("grid key", k, ACCEPTED)),
            };
            if values.is_empty() {
                return Err(SpecError::new(format!("grid {k}"), "[]", "at least one value"));
            }
            if let Some(v) =
                values.iter().find(|v| v.is_empty() || (rank >= SCALAR_KEYS.len() && v.contains(char::is_whitespace)))
            {
                return Err(SpecError::new(
                    format!("grid {k}"),
                    v,
                    "a non-empty value (without spaces for a workload or sysctl key)",
                ));
            }
            if by_key.insert((rank, k.clone()), values).is_some() {
                return Err(SpecError::new("grid key", k, "each key once"));
            }
        }
        if !(1..=100_000).contains(&runs) {
            return Err(SpecError::new("grid runs", runs.to_string(), "an integer from 1 to 100000"));
        }
        if first_seed.checked_add(runs).is_none() {
            return Err(SpecError::new("grid seed", first_seed.to_string(), "a seed that leaves room for the runs' seeds"));
        }
        let axes: Vec<(String, Vec<String>)> = by_key.into_iter().map(|((_, k), v)| (k, v)).collect();
        let cells = axes.iter().try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()));
        let jobs = cells.and_then(|c| c.checked_mul(runs as usize));
        if jobs.is_none_or(|j| j > MAX_JOBS) {
            let total = axes.iter().map(|(_, v)| v.len() as f64).product::<f64>() * runs as f64;
            return Err(SpecError::new("grid size", format!("{total} runs"), format!("at most {MAX_JOBS} runs")));
        }
        Ok(Grid { axes, runs, first_seed })
    }

    /// Every job, in order: cells in row-major order of the axes, seeds innermost.
    /// Each job's request is checked (a bad value anywhere fails the whole grid
    /// before anything runs).
    pub fn jobs(&self) -> Result<Vec<Job>, SpecError> {
        let cells: usize = self.axes.iter().map(|(_, v)| v.len()).product();
        let mut jobs = Vec::with_capacity(cells * self.runs as usize);
        for cell in 0..cells {
            let mut rest = cell;
            let mut params = vec![(String::new(), String::new()); self.axes.len()];
            for (i, (k, values)) in self.axes.iter().enumerate().rev() {
                params[i] = (k.clone(), values[rest % values.len()].clone());
                rest /= values.len();
            }
            for run in 0..self.runs {
                let seed = self.first_seed + run;
                let request = request_of(&params, seed)?;
                // Validate each cell once (seeds do not change validity).
                if run == 0 {
                    RunSpec::from_request(&request)?;
                }
                jobs.push(Job { index: jobs.len(), params: params.clone(), seed, request });
            }
        }
        Ok(jobs)
    }

    /// The jobs of shard `I/N` (`--shard`): those whose index is I modulo N; every
    /// job without a shard.
    pub fn shard_jobs(&self, shard: Option<&str>) -> Result<Vec<Job>, SpecError> {
        let shard = shard.map(parse_shard).transpose()?;
        let jobs = self.jobs()?;
        Ok(match shard {
            Some((i, n)) => jobs.into_iter().filter(|j| j.index % n == i).collect(),
            None => jobs,
        })
    }
}

/// The request a cell's parameters describe.
pub fn request_of(params: &[(String, String)], seed: u64) -> Result<RunRequest, SpecError> {
    let mut r = RunRequest { seed, ..RunRequest::default() };
    let mut workload_keys = Vec::new();
    for (k, v) in params {
        match k.as_str() {
            "topology" => r.topology = v.clone(),
            "machine" => r.machine = Some(v.clone()),
            "policy" => r.policy = v.clone(),
            "workload" => r.workload = v.clone(),
            "hz" => {
                r.hz = v.parse().map_err(|_| SpecError::new("grid hz", v, "an integer from 10 to 10000"))?;
            }
            "preempt" => r.preempt = Some(v.clone()),
            "autogroup" => r.autogroup = Some(v.clone()),
            _ => {
                if let Some(key) = k.strip_prefix("workload.") {
                    workload_keys.push(format!("{key}={v}"));
                } else if let Some(name) = k.strip_prefix("sysctl.") {
                    r.sysctls.push(format!("{name}={v}"));
                }
            }
        }
    }
    if !workload_keys.is_empty() {
        r.workload = format!("{} {}", r.workload, workload_keys.join(" "));
    }
    Ok(r)
}

/// `--shard I/N`: this process takes the jobs whose index is I modulo N
/// (I from 0, as Slurm's SLURM_ARRAY_TASK_ID with --array=0-(N-1)).
pub fn parse_shard(s: &str) -> Result<(usize, usize), SpecError> {
    let accepted = "I/N with 0 <= I < N, e.g. 0/4";
    let (i, n) = s.split_once('/').ok_or_else(|| SpecError::new("shard", s, accepted))?;
    match (i.parse::<usize>(), n.parse::<usize>()) {
        (Ok(i), Ok(n)) if n >= 1 && i < n => Ok((i, n)),
        _ => Err(SpecError::new("shard", s, accepted)),
    }
}

/// The content address of a job: what decides its result, and nothing else.
pub fn cache_key(job: &Job) -> Result<String, SpecError> {
    let spec = RunSpec::from_request(&job.request)?;
    let r = &job.request;
    let normalised = json!({
        "topology": r.topology,
        "machine": format!("{:?}", spec.machine),
        "policy": r.policy,
        "workload": spec.workload.spec(),
        "seed": r.seed,
        "sysctls": spec.sysctls,
        "hz": r.hz,
        "preempt": spec.cfg.preempt.name(),
        "preempt_dynamic": spec.cfg.preempt_dynamic,
        "autogroup": spec.cfg.autogroup,
        "source": SOURCE_DIGEST,
    });
    Ok(hex(&Sha256::digest(normalised.to_string().as_bytes())))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One run's row: (column, value) in column order, parameters first.
pub type SweepRow = Vec<(String, Value)>;

/// One job's row: its parameters, then what the run measured.
pub fn run_job(job: &Job) -> Result<SweepRow, Failure> {
    let spec = RunSpec::from_request(&job.request)?;
    let result = spec.engine().run();
    check_result(&result, false)?;
    let mut row: SweepRow = job.params.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    row.push(("seed".into(), json!(job.seed)));
    let t = result.total();
    let n = result.ncpus as f64;
    let el = result.elapsed_ns().max(1) as f64;
    row.push(("ncpus".into(), json!(result.ncpus)));
    row.push(("elapsed_s".into(), json!(result.elapsed_ns() as f64 / 1e9)));
    row.push(("busy_pct".into(), json!(result.busy_pct())));
    row.push(("wasted_pct".into(), json!(100.0 * result.wasted_ns as f64 / (el * n))));
    row.push(("switches".into(), json!(result.tasks.iter().map(|t| t.switches).sum::<u64>())));
    row.push(("migrations".into(), json!(result.tasks.iter().map(|t| t.migrations).sum::<u64>())));
    row.push(("sched_count".into(), json!(t.sched_count)));
    row.push(("ttwu_count".into(), json!(t.ttwu_count)));
    row.push(("steals".into(), json!(t.steals)));
    let (rate, unit) = match spec.workload.throughput(&result) {
        Some((v, u)) => (json!(v), json!(u)),
        None => (Value::Null, Value::Null),
    };
    row.push(("rate".into(), rate));
    row.push(("rate_unit".into(), unit));
    row.push(("latency_p50_ns".into(), json!(result.latency.value_at_percentile(50.0))));
    row.push(("latency_p99_ns".into(), json!(result.latency.value_at_percentile(99.0))));
    for (k, v) in spec.workload.results(&result) {
        row.push((format!("results.{k}"), json!(v)));
    }
    row.push(("events".into(), json!(result.events)));
    row.push(("digest".into(), json!(format!("{:016x}", result.digest))));
    row.push(("revision".into(), json!(SOURCE_REVISION)));
    Ok(row)
}

/// The result cache: `DIR/ab/abcdef....json`, one file per job.
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    pub fn new(dir: &Path) -> Result<Cache, Failure> {
        std::fs::create_dir_all(dir)
            .map_err(|e| SpecError::new("cache", dir.display().to_string(), format!("a directory that can be created ({e})")))?;
        let cache = Cache { dir: dir.to_path_buf() };
        cache.remove_stale_temporaries();
        Ok(cache)
    }

    /// Temporary files of writers that were killed before their rename (named
    /// `.KEY.PID.THREAD.tmp`; the PID is gone): removed, as nothing will finish them.
    fn remove_stale_temporaries(&self) {
        let Ok(subdirs) = std::fs::read_dir(&self.dir) else { return };
        for sub in subdirs.flatten() {
            let Ok(entries) = std::fs::read_dir(sub.path()) else { continue };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let pid = name.strip_suffix(".tmp").and_then(|n| n.split('.').nth(2)).and_then(|p| p.parse::<u32>().ok());
                if pid.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    /// The default place: $XDG_CACHE_HOME/schedlab, else ~/.cache/schedlab.
    pub fn default_dir() -> PathBuf {
        match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d).join("schedlab"),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| ".".into())).join(".cache/schedlab"),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// A cached row, if there is one whose content matches its hash. A damaged or
    /// foreign entry is reported as `Err` (the caller recomputes it).
    pub fn get(&self, key: &str) -> Result<Option<SweepRow>, String> {
        let path = self.path(key);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        // Two lines: a header with the key and the SHA-256 of the second line's
        // bytes, then the row.
        let damaged = || format!("{}: damaged (its key or hash does not match)", path.display());
        let (head, body) = text.split_once('\n').ok_or_else(damaged)?;
        let head: Value = serde_json::from_str(head).map_err(|_| damaged())?;
        let sound = head.get("key").and_then(Value::as_str) == Some(key)
            && head.get("sha256").and_then(Value::as_str) == Some(hex(&Sha256::digest(body.as_bytes())).as_str());
        if !sound {
            return Err(damaged());
        }
        serde_json::from_str::<SweepRow>(body).map(Some).map_err(|_| damaged())
    }

    /// Stores a row whole: a temporary file beside the entry, then a rename.
    pub fn put(&self, key: &str, row: &SweepRow) -> Result<(), String> {
        let path = self.path(key);
        let dir = path.parent().expect("entries live in a subdirectory");
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let body = serde_json::to_string(row).expect("rows are JSON values");
        let head = json!({ "key": key, "sha256": hex(&Sha256::digest(body.as_bytes())) });
        let entry = format!("{head}\n{body}");
        let tmp = dir.join(format!(".{key}.{}.{:?}.tmp", std::process::id(), std::thread::current().id()));
        let written = std::fs::write(&tmp, entry).and_then(|_| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("{}: {e}", path.display()));
        }
        Ok(())
    }
}

/// What a sweep did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SweepCounts {
    pub computed: usize,
    pub cached: usize,
    /// Damaged entries found and recomputed.
    pub repaired: usize,
}

/// One job through the cache: the cached row, or the run (then cached).
pub fn row_for(job: &Job, cache: Option<&Cache>) -> Result<(SweepRow, SweepOutcome), Failure> {
    let Some(cache) = cache else { return Ok((run_job(job)?, SweepOutcome::Computed)) };
    let key = cache_key(job)?;
    let damaged = match cache.get(&key) {
        Ok(Some(row)) => return Ok((row, SweepOutcome::Cached)),
        Ok(None) => false,
        Err(why) => {
            eprintln!("schedlab: warning: cache entry {why}; recomputing it");
            true
        }
    };
    let row = run_job(job)?;
    cache.put(&key, &row).map_err(|e| Failure::Run(format!("writing the cache: {e}")))?;
    Ok((row, if damaged { SweepOutcome::Repaired } else { SweepOutcome::Computed }))
}

/// How one job's row was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepOutcome {
    Computed,
    Cached,
    Repaired,
}

impl SweepOutcome {
    pub fn name(self) -> &'static str {
        match self {
            SweepOutcome::Computed => "computed",
            SweepOutcome::Cached => "cached",
            SweepOutcome::Repaired => "repaired",
        }
    }
}

/// Runs `jobs` (already sharded) on `threads` threads through the cache; rows in
/// job order.
pub fn run_jobs(jobs: &[Job], cache: Option<&Cache>, threads: usize) -> Result<(Vec<SweepRow>, SweepCounts), Failure> {
    let results = crate::parallel::map(jobs, threads, "sweeping", |j| row_for(j, cache));
    let mut rows = Vec::with_capacity(jobs.len());
    let mut counts = SweepCounts::default();
    for r in results {
        let (row, outcome) = r?;
        match outcome {
            SweepOutcome::Computed => counts.computed += 1,
            SweepOutcome::Cached => counts.cached += 1,
            SweepOutcome::Repaired => counts.repaired += 1,
        }
        rows.push(row);
    }
    Ok((rows, counts))
}

/// The columns of a set of rows, in first-seen order (every row has the
/// parameter columns first, in grid order).
pub fn columns(rows: &[SweepRow]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for row in rows {
        for (k, _) in row {
            if !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    cols
}

/// Rows as JSON records (objects; key order is not kept).
pub fn records(rows: &[SweepRow]) -> Vec<Value> {
    rows.iter().map(|r| Value::Object(r.iter().cloned().collect())).collect()
}

/// Rows as CSV (RFC 4180 quoting), a header line first; an absent value is empty.
pub fn csv(rows: &[SweepRow]) -> String {
    let cols = columns(rows);
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = cols.iter().map(|c| quote(c)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for row in rows {
        let cells: Vec<String> = cols
            .iter()
            .map(|c| match row.iter().find(|(k, _)| k == c).map(|(_, v)| v) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => quote(s),
                Some(v) => v.to_string(),
            })
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(text: &str) -> Result<Grid, SpecError> {
        Grid::parse_toml(text, "g.toml")
    }

    #[test]
    fn a_grid_expands_in_a_fixed_order_whatever_the_file_order() {
        let a = grid("runs = 2\n[grid]\npolicy = ['fifo', 'cfs@4.19']\ntopology = ['1x1x2x1', '1x1x4x1']\n\"workload.loops\" = 10\nworkload = 'hackbench groups=1'\n").unwrap();
        let b = grid("runs = 2\n[grid]\nworkload = 'hackbench groups=1'\n\"workload.loops\" = 10\ntopology = ['1x1x2x1', '1x1x4x1']\npolicy = ['fifo', 'cfs@4.19']\n").unwrap();
        assert_eq!(a, b);
        let jobs = a.jobs().unwrap();
        assert_eq!(jobs.len(), 8);
        let keys: Vec<&str> = jobs[0].params.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["topology", "policy", "workload", "workload.loops"]);
        let first: Vec<(&str, &str, u64)> =
            jobs.iter().take(3).map(|j| (j.params[0].1.as_str(), j.params[1].1.as_str(), j.seed)).collect();
        assert_eq!(first, [("1x1x2x1", "fifo", 1), ("1x1x2x1", "fifo", 2), ("1x1x2x1", "cfs@4.19", 1)]);
        assert_eq!(jobs[0].request.workload, "hackbench groups=1 loops=10");
    }

    #[test]
    fn bad_grids_name_the_field() {
        let e = grid("[grid]\ncolour = 'red'\n").unwrap_err();
        assert_eq!(e.field, "grid key");
        let e = grid("[grid]\npolicy = []\n").unwrap_err();
        assert_eq!(e.field, "grid policy");
        let e = grid("runs = 0\n[grid]\npolicy = 'fifo'\n").unwrap_err();
        assert_eq!(e.field, "grid runs");
        let e = grid("[grid]\npolicy = 'cfs@9.9'\n").unwrap().jobs().unwrap_err();
        assert_eq!(e.field, "cfs version");
        let e = grid("[grid]\n\"sysctl.sched_latency_ns\" = [{a = 1}]\n").unwrap_err();
        assert_eq!(e.field, "grid sysctl.sched_latency_ns");
        assert_eq!(grid("runs = 1\n").unwrap_err().field, "grid file");
        assert_eq!(parse_shard("4/4").unwrap_err().field, "shard");
        assert_eq!(parse_shard("1/4").unwrap(), (1, 4));
    }

    #[test]
    fn cache_keys_follow_the_inputs_and_damaged_entries_are_refused() {
        let g = grid("runs = 2\n[grid]\nworkload = 'hackbench groups=1 loops=20'\ntopology = '1x1x2x1'\n").unwrap();
        let jobs = g.jobs().unwrap();
        let (k0, k1) = (cache_key(&jobs[0]).unwrap(), cache_key(&jobs[1]).unwrap());
        assert_ne!(k0, k1, "the seed is part of the key");
        assert_eq!(k0, cache_key(&jobs[0]).unwrap());
        let dir = std::env::temp_dir().join(format!("schedlab-cache-test-{}", std::process::id()));
        let cache = Cache::new(&dir).unwrap();
        let (row, how) = row_for(&jobs[0], Some(&cache)).unwrap();
        assert_eq!(how, SweepOutcome::Computed);
        let (again, how) = row_for(&jobs[0], Some(&cache)).unwrap();
        assert_eq!((how, &again), (SweepOutcome::Cached, &row));
        // One flipped digit in the stored row: refused, recomputed, repaired.
        let path = cache.path(&k0);
        let text = std::fs::read_to_string(&path).unwrap();
        let digest = row.iter().find(|(k, _)| k == "digest").unwrap().1.as_str().unwrap();
        let flipped = format!("{}{}", if digest.starts_with('0') { '1' } else { '0' }, &digest[1..]);
        std::fs::write(&path, text.replace(digest, &flipped)).unwrap();
        assert!(cache.get(&k0).is_err());
        let (fixed, how) = row_for(&jobs[0], Some(&cache)).unwrap();
        assert_eq!((how, &fixed), (SweepOutcome::Repaired, &row));
        assert_eq!(row_for(&jobs[0], Some(&cache)).unwrap().1, SweepOutcome::Cached);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let r: SweepRow = vec![
            ("workload".into(), json!("hackbench groups=1, \"x\"")),
            ("rate".into(), Value::Null),
            ("seed".into(), json!(3)),
        ];
        assert_eq!(csv(&[r]), "workload,rate,seed\n\"hackbench groups=1, \"\"x\"\"\",,3\n");
    }
}
