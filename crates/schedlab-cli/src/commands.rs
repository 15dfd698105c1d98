//! Each subcommand run from its parsed flags (`cli`), through the shared spec
//! (schedlab_spec) to its report.

use schedlab_core::error::SpecError;
use schedlab_spec::run::{check_result, parse_topology};
use schedlab_spec::{Failure, RunSpec};

use crate::cli::{Cli, Command, CompareArgs, CompareFormat, Format, RunArgs};
use crate::outputs;

pub fn dispatch(cli: Cli) -> Result<(), Failure> {
    // The simulating commands write their outputs through temporary files, which a
    // signal must not leave behind (the commands that run real work handle their
    // signals themselves, through schedlab_host::signals).
    if matches!(cli.command, Command::Run(_) | Command::Compare(_) | Command::Reproduce { .. } | Command::Sweep(_)) {
        crate::outputs::remove_temporaries_on_signals();
    }
    match cli.command {
        Command::Run(a) => run(&a),
        Command::Topology { spec } => {
            print!("{}", parse_topology(&spec)?.describe());
            Ok(())
        }
        Command::Calibrate { name, out, quick } => calibrate_cmd(name, out, quick),
        Command::Record { out, buffer_kb, timeout_s, runtime, command } => {
            record_cmd(&out, buffer_kb, timeout_s, runtime, &command)
        }
        Command::TraceSummary { traces, comm } => crate::trace_summary::run(&traces, comm.as_deref()),
        Command::Swarm { seed, scenarios, jobs } => crate::swarm::run(seed, scenarios, schedlab_spec::parallel::threads(jobs)?),
        Command::Bench { quick, one: None, format, repeat, .. } => crate::bench::run(quick, format == Format::Json, repeat),
        Command::Bench { quick, one: Some(i), policy, .. } => crate::bench::run_one(i, &policy, quick),
        Command::Real { launcher_halvings: Some(h), .. } => {
            schedlab_host::launcher::serve(h).map_err(|e| Failure::Host(format!("launcher: {e}")))
        }
        Command::Real { workload, runs, cpus, timeout_s, format, host_state, counters, in_process, launcher_halvings: None } => {
            let opts = crate::validate::RealOptions {
                json_out: format == Format::Json,
                host_state,
                in_process,
                counters: counters.method(),
            };
            crate::validate::real_cmd(&workload, runs, cpus.as_deref(), timeout_s, opts)
        }
        Command::Validate(a) => crate::validate::validate_cmd(&a),
        Command::Sweep(a) => crate::sweep::run(&a),
        Command::Compare(a) => compare(&a),
        Command::Reproduce { name, list, runs, scale, rows, format, fraction, plot, jobs } => {
            let Some(name) = name.filter(|_| !list) else { return crate::reproduce::list() };
            let threads = schedlab_spec::parallel::threads(jobs)?;
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(SpecError::new("fraction", fraction.to_string(), "a number in (0, 1]").into());
            }
            if let Some(r) = runs.filter(|&r| r == 0 || r > 10_000) {
                return Err(SpecError::new("runs", r.to_string(), "an integer from 1 to 10000").into());
            }
            if let Some(s) = scale.as_deref().filter(|s| s.parse::<f64>().map_or(true, |v| !(v > 0.0 && v.is_finite()))) {
                return Err(SpecError::new("scale", s, "a positive number (an integer for integer keys)").into());
            }
            if name == "all" {
                let ignored = [
                    (scale.is_some(), "--scale"),
                    (rows.is_some(), "--rows"),
                    (plot.is_some(), "--plot"),
                    (format == Format::Json, "--format json"),
                ];
                if let Some((_, flag)) = ignored.iter().find(|(set, _)| *set) {
                    return Err(SpecError::new("reproduce all", *flag, "only --runs, --fraction and --jobs with all").into());
                }
                return crate::reproduce::run_all(runs, fraction, threads);
            }
            if fraction != 1.0 {
                return Err(SpecError::new(
                    "fraction",
                    fraction.to_string(),
                    "--fraction only with `reproduce all`; use --scale",
                )
                .into());
            }
            let plot = plot.map(|p| crate::plotfile::PlotFile::new(&p)).transpose()?;
            crate::reproduce::run(&name, runs, scale.as_deref(), rows, format == Format::Json, plot.as_ref(), threads)
        }
    }
}

fn compare(a: &CompareArgs) -> Result<(), Failure> {
    let c = schedlab_spec::compare::Comparison::from_request(&a.request())?;
    if a.format == CompareFormat::Ministat && a.runs < 3 {
        return Err(SpecError::new(
            "runs",
            a.runs.to_string(),
            "at least 3 with --format ministat (its test needs 3 runs per side)",
        )
        .into());
    }
    let plot = a.plot.as_deref().map(crate::plotfile::PlotFile::new).transpose()?;
    let rows = c.run(schedlab_spec::parallel::threads(a.jobs)?)?;
    if let Some(p) = plot {
        p.write(&crate::plotfile::comparison_bars(&c, &rows))?;
    }
    let out = match a.format {
        CompareFormat::Text => schedlab_spec::compare::text(&c, &rows),
        CompareFormat::Json => schedlab_spec::compare::json(&c, &rows) + "\n",
        CompareFormat::Mmtests => schedlab_spec::compare::mmtests(&c, &rows)?,
        CompareFormat::Ministat => schedlab_spec::compare::ministat(&c, &rows)?,
        CompareFormat::Csv => schedlab_spec::compare::csv(&c, &rows)?,
    };
    print!("{out}");
    Ok(())
}

/// A run's progress line on stderr, from its third second on: simulated time,
/// events, and for a benchmark that runs for a set simulated time the wall time
/// left at the pace so far. Cleared when the run ends.
fn run_progress(expected_sim_ns: Option<u64>) -> Box<dyn FnMut(u64, u64)> {
    let started = std::time::Instant::now();
    let mut last_drawn = 0.0f64;
    Box::new(move |sim_ns, events| {
        let wall = started.elapsed().as_secs_f64();
        if wall < 2.0 || wall - last_drawn < 0.5 {
            return;
        }
        last_drawn = wall;
        let left = expected_sim_ns
            .filter(|&e| sim_ns > 0 && e > sim_ns)
            .map(|e| format!(", about {:.0} s left", wall * (e - sim_ns) as f64 / sim_ns as f64))
            .unwrap_or_default();
        eprint!("\r\x1b[Ksimulated {:.3} s, {:.1} M events, {wall:.0} s{left}", sim_ns as f64 / 1e9, events as f64 / 1e6);
    })
}

fn run(a: &RunArgs) -> Result<(), Failure> {
    let mut spec = RunSpec::from_request(&a.request())?;
    // Every output is checked before the run: a regular file (or a new one) in a
    // writable directory, and not the same file twice.
    let plot = a.plot.as_deref().map(crate::plotfile::PlotFile::new).transpose()?;
    let trace_path = a.trace.as_deref().map(|p| crate::outputs::check("trace", p)).transpose()?;
    let lag_path = a.lag_trace.as_deref().map(|p| crate::outputs::check("lag-trace", p)).transpose()?;
    let outputs: Vec<(&str, &std::path::Path)> =
        [("trace", a.trace.as_deref()), ("lag-trace", a.lag_trace.as_deref()), ("plot", a.plot.as_deref())]
            .into_iter()
            .filter_map(|(name, p)| p.map(|p| (name, p)))
            .collect();
    crate::outputs::distinct(&outputs)?;
    if lag_path.is_some() && !spec.policy.starts_with("eevdf@") {
        return Err(SpecError::new(
            "lag-trace",
            &spec.policy,
            "an EEVDF policy (eevdf@6.6, 6.12 or 6.18, or host on a 6.6+ kernel): only they keep lags",
        )
        .into());
    }
    if plot.is_some() {
        spec.cfg.util_bucket_ns = Some(crate::plotfile::RUN_BUCKET_NS);
    }
    let mut engine = spec.engine();
    let trace = match &trace_path {
        Some(path) => Some(crate::tracefile::TraceFile::create(path, spec.topo.ncpus())?),
        None => None,
    };
    if let Some(t) = &trace {
        engine.set_trace(Box::new(t.sink()));
    }
    let lags = match &lag_path {
        Some(path) => Some(crate::lagfile::LagFile::create(path)?),
        None => None,
    };
    if let Some(l) = &lags {
        engine.set_entity_sink(Box::new(l.sink()));
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        engine.set_progress(run_progress(spec.workload.expected_sim_ns()));
    }
    let started = std::time::Instant::now();
    let result = engine.run();
    let wall = started.elapsed();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && wall.as_secs_f64() >= 2.0 {
        eprint!("\r\x1b[K");
    }
    // A failed run leaves no trace file behind.
    check_result(&result, spec.cfg.check)?;
    if let Some(t) = trace {
        t.finish().map_err(Failure::Run)?;
    }
    if let Some(l) = lags {
        l.finish().map_err(Failure::Run)?;
    }
    if let Some(p) = plot {
        let title = format!("{} on {}: {}, seed {}", spec.policy, spec.topo.name, a.workload, a.seed);
        p.write(&crate::plotfile::run_heat_map(&title, &result))?;
    }
    match a.format {
        Format::Text => print!("{}", schedlab_spec::report::text(&spec, &result, wall)),
        Format::Json => println!("{}", schedlab_spec::report::json(&spec, &result)),
    }
    Ok(())
}

/// `schedlab record`: a real command's scheduler events, written only if the
/// command ran to its end (a temporary file renamed into place).
fn record_cmd(out: &std::path::Path, buffer_kb: u32, timeout_s: u64, runtime: bool, argv: &[String]) -> Result<(), Failure> {
    use schedlab_host::run::Outcome;
    if !(64..=1 << 20).contains(&buffer_kb) {
        return Err(SpecError::new("buffer-kb", buffer_kb.to_string(), "an integer from 64 to 1048576").into());
    }
    if !(1..=3600).contains(&timeout_s) {
        return Err(SpecError::new("timeout-s", timeout_s.to_string(), "an integer from 1 to 3600").into());
    }
    let out = &outputs::check("out", out)?;
    let rec = schedlab_host::record::record(argv, buffer_kb, std::time::Duration::from_secs(timeout_s), runtime)
        .map_err(|e| Failure::Host(format!("record: {e}")))?;
    match rec.outcome {
        Outcome::Exited(s) if s.success() => {}
        Outcome::Exited(s) => return Err(Failure::Run(format!("record: the command failed ({s}); nothing written"))),
        Outcome::Interrupted => return Err(Failure::Run("record: interrupted; the command was killed, nothing written".into())),
        Outcome::TimedOut => {
            return Err(Failure::Run(format!("record: the command ran over {timeout_s} s and was killed; nothing written")))
        }
    }
    if rec.text.lines().any(|l| l.starts_with("CPU:") && l.contains("LOST")) {
        eprintln!("schedlab: warning: the trace buffer overflowed; raise --buffer-kb");
    }
    outputs::write_atomically("out", out, rec.text.as_bytes()).map_err(Failure::Run)?;
    eprintln!("wrote {} ({} lines)", out.display(), rec.text.lines().count());
    Ok(())
}

/// `schedlab calibrate`: measure this host, print or write the profile (written to
/// a temporary file and renamed, so a failure leaves nothing behind).
fn calibrate_cmd(name: String, out: Option<std::path::PathBuf>, quick: bool) -> Result<(), Failure> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Failure::Input(SpecError::new("name", name, "letters, digits, '-' and '_'")));
    }
    // Checked before measuring, which takes a while.
    let out = out.map(|p| outputs::check("out", &p)).transpose()?;
    let opts = schedlab_host::calibrate::CalibrateOptions { name, quick };
    let profile = schedlab_host::calibrate::calibrate(&opts).map_err(|e| Failure::Run(format!("calibrate: {e:#}")))?;
    let text = profile.to_toml();
    match out {
        None => print!("{text}"),
        Some(path) => {
            outputs::write_atomically("out", &path, text.as_bytes()).map_err(Failure::Run)?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
