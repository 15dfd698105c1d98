//! `schedlab sweep GRID.toml`: every combination of a grid's parameters, through
//! the content-addressed cache (schedlab_spec::sweep), as one tidy table. With
//! `--dask` the same grid runs on a Dask cluster through the Python package.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use schedlab_spec::sweep::{self, Cache, Grid};
use schedlab_spec::{Failure, SpecError};

use crate::cli::{SweepArgs, SweepFormat};

pub fn run(a: &SweepArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.grid)
        .map_err(|e| SpecError::new("grid file", a.grid.display().to_string(), format!("a readable TOML grid file ({e})")))?;
    let grid = Grid::parse_toml(&text, &a.grid.display().to_string())?;
    let shard = a.shard.as_deref().map(sweep::parse_shard).transpose()?;
    let threads = schedlab_spec::parallel::threads(a.jobs)?;
    let out = a.out.as_deref().map(|p| crate::outputs::check("out", p)).transpose()?;
    if let Some(o) = &out {
        let ext = o.extension().and_then(|e| e.to_str()).unwrap_or("");
        let wanted = match a.format {
            SweepFormat::Csv => "csv",
            SweepFormat::Json => "json",
        };
        if ext != wanted {
            return Err(SpecError::new(
                "out",
                o.display().to_string(),
                format!("a .{wanted} file with --format {wanted} (Parquet: the Python package's sweep(...).to_parquet)"),
            )
            .into());
        }
    }
    let jobs = grid.jobs()?;
    if let Some(address) = &a.dask {
        return on_dask(a, address, out.as_deref());
    }
    let cache_dir = a.cache.clone().unwrap_or_else(Cache::default_dir);
    let cache = if a.no_cache { None } else { Some(Cache::new(&cache_dir)?) };
    let mine: Vec<_> = match shard {
        Some((i, n)) => jobs.into_iter().filter(|j| j.index % n == i).collect(),
        None => jobs,
    };
    let started = Instant::now();
    let (rows, counts) = sweep::run_jobs(&mine, cache.as_ref(), threads)?;
    let table = match a.format {
        SweepFormat::Csv => sweep::csv(&rows),
        SweepFormat::Json => serde_json::to_string(&sweep::records(&rows)).expect("rows are JSON") + "\n",
    };
    match &out {
        Some(path) => crate::outputs::write_atomically("out", path, table.as_bytes()).map_err(Failure::Run)?,
        None => print!("{table}"),
    }
    let cached_where = cache.as_ref().map_or(String::new(), |_| format!(", cache {}", cache_dir.display()));
    eprintln!(
        "schedlab sweep: {} runs ({} computed, {} cached, {} damaged entries recomputed) in {:.1} s{cached_where}",
        rows.len(),
        counts.computed,
        counts.cached,
        counts.repaired,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The grid on a Dask cluster: the Python package's `python -m schedlab sweep`,
/// with the same flags, its output and exit status passed through.
fn on_dask(a: &SweepArgs, address: &str, out: Option<&Path>) -> Result<(), Failure> {
    let python = std::env::var("SCHEDLAB_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python).args(["-c", "import schedlab, distributed"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        return Err(Failure::Host(format!(
            "--dask needs Python with the schedlab package and dask.distributed ({python} could not import them): \
             pip install ./python 'dask[distributed]', or set SCHEDLAB_PYTHON"
        )));
    }
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "schedlab", "sweep"]).arg(&a.grid).args(["--dask", address]);
    cmd.args(["--format", if a.format == SweepFormat::Json { "json" } else { "csv" }]);
    if let Some(o) = out {
        cmd.arg("--out").arg(o);
    }
    if let Some(c) = &a.cache {
        cmd.arg("--cache").arg(c);
    }
    if a.no_cache {
        cmd.arg("--no-cache");
    }
    if let Some(s) = &a.shard {
        cmd.args(["--shard", s]);
    }
    for (flag, v) in [("--tls-ca-file", &a.tls_ca_file), ("--tls-cert", &a.tls_cert), ("--tls-key", &a.tls_key)] {
        if let Some(p) = v {
            cmd.arg(flag).arg(p);
        }
    }
    let status = cmd.status().map_err(|e| Failure::Host(format!("starting {python}: {e}")))?;
    match status.code() {
        Some(0) => Ok(()),
        Some(2) => std::process::exit(2),
        _ => Err(Failure::Run(format!("the Dask sweep failed ({status})"))),
    }
}
