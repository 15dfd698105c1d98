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
    let threads = schedlab_spec::parallel::threads(a.jobs)?;
    let out = a.out.as_deref().map(|p| crate::outputs::check("out", p)).transpose()?;
    let wanted = a.format.name();
    match &out {
        Some(o) if o.extension().and_then(|e| e.to_str()) != Some(wanted) => {
            return Err(SpecError::new("out", o.display().to_string(), format!("a .{wanted} file with --format {wanted}")).into());
        }
        None if a.format == SweepFormat::Parquet => {
            return Err(
                SpecError::new("format", "parquet", "--out FILE.parquet with it (Parquet is not written to a terminal)").into()
            );
        }
        _ => {}
    }
    let mine = grid.shard_jobs(a.shard.as_deref())?;
    if let Some(address) = &a.dask {
        return on_dask(a, address, out.as_deref());
    }
    let cache_dir = a.cache.clone().unwrap_or_else(Cache::default_dir);
    let cache = if a.no_cache { None } else { Some(Cache::new(&cache_dir)?) };
    let started = Instant::now();
    let (rows, counts) = sweep::run_jobs(&mine, cache.as_ref(), threads)?;
    let table = match a.format {
        SweepFormat::Csv => sweep::csv(&rows).into_bytes(),
        SweepFormat::Json => (serde_json::to_string(&sweep::records(&rows)).expect("rows are JSON") + "\n").into_bytes(),
        SweepFormat::Parquet => parquet(&rows).map_err(Failure::Run)?,
    };
    match &out {
        Some(path) => crate::outputs::write_atomically("out", path, &table).map_err(Failure::Run)?,
        None => std::io::Write::write_all(&mut std::io::stdout(), &table)
            .map_err(|e| Failure::Run(format!("writing the table: {e}")))?,
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
    cmd.args(["--format", a.format.name()]);
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

/// A column's Parquet type, from its values: text, whole numbers, or numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ColumnKind {
    Text,
    Int,
    Float,
}

/// Rows as a Parquet file (uncompressed, one row group): each column optional,
/// of the type its values have (UTF-8 strings, INT64, DOUBLE; a column of mixed
/// numbers is DOUBLE, of anything else text), absent values null.
pub fn parquet(rows: &[sweep::SweepRow]) -> Result<Vec<u8>, String> {
    use std::sync::Arc;

    use parquet::basic::{LogicalType, Repetition, Type as PhysicalType};
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::types::Type;
    use serde_json::Value;

    let names = sweep::columns(rows);
    let cell =
        |row: &sweep::SweepRow, name: &str| row.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or(Value::Null);
    let kinds: Vec<ColumnKind> = names
        .iter()
        .map(|name| {
            let values: Vec<Value> = rows.iter().map(|r| cell(r, name)).filter(|v| !v.is_null()).collect();
            if values.iter().all(Value::is_i64) && !values.is_empty() {
                ColumnKind::Int
            } else if values.iter().all(Value::is_number) && !values.is_empty() {
                ColumnKind::Float
            } else {
                ColumnKind::Text
            }
        })
        .collect();
    let err = |e: parquet::errors::ParquetError| format!("writing Parquet: {e}");
    let fields = names
        .iter()
        .zip(&kinds)
        .map(|(name, kind)| {
            let (physical, logical) = match kind {
                ColumnKind::Text => (PhysicalType::BYTE_ARRAY, Some(LogicalType::String)),
                ColumnKind::Int => (PhysicalType::INT64, None),
                ColumnKind::Float => (PhysicalType::DOUBLE, None),
            };
            Type::primitive_type_builder(name, physical)
                .with_repetition(Repetition::OPTIONAL)
                .with_logical_type(logical)
                .build()
                .map(Arc::new)
                .map_err(err)
        })
        .collect::<Result<Vec<_>, String>>()?;
    let schema = Arc::new(Type::group_type_builder("schedlab_sweep").with_fields(fields).build().map_err(err)?);
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema, Arc::new(WriterProperties::builder().build())).map_err(err)?;
    let mut group = writer.next_row_group().map_err(err)?;
    let mut column = 0;
    while let Some(mut col) = group.next_column().map_err(err)? {
        let values: Vec<Value> = rows.iter().map(|r| cell(r, &names[column])).collect();
        let levels: Vec<i16> = values.iter().map(|v| i16::from(!v.is_null())).collect();
        let present = values.iter().filter(|v| !v.is_null());
        match kinds[column] {
            ColumnKind::Text => {
                let data: Vec<ByteArray> = present
                    .map(|v| match v {
                        Value::String(s) => ByteArray::from(s.as_bytes().to_vec()),
                        other => ByteArray::from(other.to_string().into_bytes()),
                    })
                    .collect();
                col.typed::<ByteArrayType>().write_batch(&data, Some(&levels), None).map_err(err)?;
            }
            ColumnKind::Int => {
                let data: Vec<i64> = present.map(|v| v.as_i64().unwrap_or(i64::MAX)).collect();
                col.typed::<Int64Type>().write_batch(&data, Some(&levels), None).map_err(err)?;
            }
            ColumnKind::Float => {
                let data: Vec<f64> = present.map(|v| v.as_f64().unwrap_or(f64::NAN)).collect();
                col.typed::<DoubleType>().write_batch(&data, Some(&levels), None).map_err(err)?;
            }
        }
        col.close().map_err(err)?;
        column += 1;
    }
    group.close().map_err(err)?;
    writer.close().map_err(err)?;
    Ok(out)
}
