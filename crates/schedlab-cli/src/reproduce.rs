//! `schedlab reproduce NAME`: a seed's published experiment (schedlab_spec::experiment)
//! simulated and printed side by side with the published table.

use schedlab_spec::compare;
use schedlab_spec::experiment::{load, summary_text, BUILTIN};
use schedlab_spec::Failure;

/// `schedlab reproduce all`: every shipped experiment at `fraction` of its
/// published scale, each printed as `reproduce NAME` prints it, then one summary.
pub fn run_all(runs: Option<u64>, fraction: f64, threads: usize) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let mut lines = Vec::new();
    for (name, _) in BUILTIN {
        let e = load(name)?;
        let scale = (fraction < 1.0).then(|| e.scaled(fraction));
        let c = e.comparison(runs, scale.as_deref(), None)?;
        c.validate()?;
        let t0 = std::time::Instant::now();
        let rows = c.run(threads)?;
        print!("{}", e.text(&c, &rows)?);
        println!("({} took {:.0} s)\n", e.name, t0.elapsed().as_secs_f64());
        lines.extend(e.summary(&rows));
    }
    println!("Summary (fraction {fraction} of the published scale):");
    print!("{}", summary_text(&lines));
    println!("All experiments took {:.0} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// `schedlab reproduce --list`.
pub fn list() -> Result<(), Failure> {
    for (name, _) in BUILTIN {
        let e = load(name)?;
        println!("{:<12} {}", e.name, e.title);
    }
    Ok(())
}

/// `schedlab reproduce NAME`.
pub fn run(
    name: &str,
    runs: Option<u64>,
    loops: Option<&str>,
    only: Option<Vec<String>>,
    json: bool,
    plot: Option<&crate::plotfile::PlotFile>,
    threads: usize,
) -> Result<(), Failure> {
    let e = load(name)?;
    let c = e.comparison(runs, loops, only.as_deref())?;
    c.validate()?;
    let rows = c.run(threads)?;
    if let Some(p) = plot {
        p.write(&crate::plotfile::reproduction_bars(&e, &c, &rows))?;
    }
    if json {
        println!("{}", compare::json(&c, &rows));
    } else {
        print!("{}", e.text(&c, &rows)?);
    }
    Ok(())
}
