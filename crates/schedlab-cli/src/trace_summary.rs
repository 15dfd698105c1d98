//! `schedlab trace-summary`: what one or two ftrace recordings (real, from
//! `schedlab record` or tracefs, or simulated, from `run --trace`) say the tasks
//! did: switches, wakeups, migrations, run lengths and wakeup latencies (and,
//! from a `record --runtime` trace, the runtime charged per run); with two
//! traces, side by side, the most different figure first. Traces are read as a
//! stream, so their size is not limited by memory.

use std::io::BufReader;
use std::path::Path;

use schedlab_trace::summary::{compare, TraceSummary};

use schedlab_spec::Failure;

/// Summarises the trace at `path` (`-`: standard input), keeping the tasks whose
/// comm `keep` accepts.
pub fn summarise(path: &Path, keep: &dyn Fn(&str) -> bool) -> Result<TraceSummary, Failure> {
    let shown = path.display().to_string();
    let mut s = TraceSummary::default();
    let mut add = |reader: &mut dyn std::io::BufRead| -> Result<(), Failure> {
        for line in schedlab_trace::read_trace(reader) {
            let line = line.map_err(|e| {
                Failure::Input(schedlab_core::SpecError::new("trace", shown.clone(), format!("ftrace text ({e})")))
            })?;
            s.add(&line, keep);
        }
        Ok(())
    };
    if path == Path::new("-") {
        add(&mut std::io::stdin().lock())?;
    } else {
        let file = std::fs::File::open(path).map_err(|e| {
            Failure::Input(schedlab_core::SpecError::new("trace", shown.clone(), format!("a readable file ({e})")))
        })?;
        add(&mut BufReader::with_capacity(1 << 20, file))?;
    }
    Ok(s)
}

/// `schedlab trace-summary TRACE [OTHER] [--comm PREFIX]`.
pub fn run(traces: &[std::path::PathBuf], comm: Option<&str>) -> Result<(), Failure> {
    let keep = |c: &str| comm.is_none_or(|p| c.starts_with(p));
    let started = std::time::Instant::now();
    let summaries: Vec<TraceSummary> = traces.iter().map(|p| summarise(p, &keep)).collect::<Result<_, _>>()?;
    let bytes: u64 = traces.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let who = comm.map_or("all tasks".to_string(), |c| format!("tasks whose comm starts with {c:?}"));
    match summaries.as_slice() {
        [one] => {
            let (a, b) = one.span();
            println!("{} ({who}, {:.6} s of trace)", traces[0].display(), b.saturating_sub(a) as f64 / 1e9);
            for (figure, v) in one.figures().into_iter().chain(one.charged_figures()) {
                println!("  {figure:<34} {v:>12.1}");
            }
        }
        [first, second] => {
            println!("{} against {} ({who})", traces[0].display(), traces[1].display());
            println!("  {:<34} {:>12} {:>12} {:>9}", "figure", "first", "second", "2nd/1st");
            for d in compare(first, second) {
                let ratio = if d.real == 0.0 { "-".to_string() } else { format!("{:.2}", d.sim / d.real) };
                println!("  {:<34} {:>12.1} {:>12.1} {:>9}", d.figure, d.real, d.sim, ratio);
            }
            // Only a trace with sched_stat_runtime has these; in a simulated one a
            // run's length is what it is charged.
            let (a, b) = (first.charged_figures(), second.charged_figures());
            let names: Vec<&str> = a.iter().chain(&b).map(|&(f, _)| f).collect();
            for name in names.iter().take(a.len().max(b.len())) {
                let cell =
                    |v: &[(&str, f64)]| v.iter().find(|(f, _)| f == name).map_or("-".to_string(), |(_, x)| format!("{x:.1}"));
                println!("  {:<34} {:>12} {:>12} {:>9}", name, cell(&a), cell(&b), "-");
            }
        }
        _ => unreachable!("clap takes one or two traces"),
    }
    for (path, s) in traces.iter().zip(&summaries) {
        if let Some(note) = s.untraced_note(&path.display().to_string()) {
            println!("{note}");
        }
    }
    let secs = started.elapsed().as_secs_f64();
    if bytes > 0 {
        eprintln!("read {:.0} MB in {secs:.1} s ({:.0} MB/s)", bytes as f64 / 1e6, bytes as f64 / 1e6 / secs.max(1e-9));
    }
    Ok(())
}
