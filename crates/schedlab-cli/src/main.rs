//! The `schedlab` command: clap structs → validated config → runs → reports.
//! Bad input of any kind ends with one line naming the field, the value and the
//! accepted form, and exit status 2.

mod bench;
mod cli;
mod compare;
mod machines;
mod outputs;
mod parallel;
mod plotfile;
mod report;
mod reproduce;
mod shipped;
mod swarm;
mod trace_summary;
mod tracefile;
mod validate;

use std::process::ExitCode;

use clap::Parser;

use schedlab_core::error::SpecError;

/// A failure: bad input (exit 2), a host that cannot do what was asked (no
/// permission, not Linux, no tracefs: exit 2), or something that went wrong
/// while running (exit 1).
#[derive(Debug)]
pub enum Failure {
    Input(SpecError),
    Host(String),
    Run(String),
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::Input(e)
    }
}

fn main() -> ExitCode {
    // A reader that stops early (`schedlab bench | head`) ends the output, as for
    // any Unix filter: the default SIGPIPE action, which Rust's runtime turns off
    // (writes would then fail with EPIPE and printing would panic).
    // SAFETY: called before any other thread exists; SIG_DFL is a valid action.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let args = match cli::Cli::try_parse() {
        Ok(args) => args,
        Err(e) => return flag_error(e),
    };
    match cli::dispatch(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(e)) => {
            eprintln!("schedlab: error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Host(msg)) => {
            eprintln!("schedlab: error: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Run(msg)) => {
            eprintln!("schedlab: error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// A command line clap cannot take: help and version print as clap prints them;
/// anything else is one line (what clap says first, which names the flag and the
/// value) and exit status 2. Numeric flags accept a leading '-' as a value, so a
/// negative number is reported as an invalid value of its flag.
fn flag_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return ExitCode::from(if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 });
    }
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("invalid command line").trim_start_matches("error: ");
    eprintln!("schedlab: error: {first} (see --help)");
    ExitCode::from(2)
}

/// `schedlab record`: a real command's scheduler events, written only if the
/// command ran to its end (a temporary file renamed into place).
fn record_cmd(out: &std::path::Path, buffer_kb: u32, timeout_s: u64, argv: &[String]) -> Result<(), Failure> {
    use schedlab_host::run::Outcome;
    if !(64..=1 << 20).contains(&buffer_kb) {
        return Err(SpecError::new("buffer-kb", buffer_kb.to_string(), "an integer from 64 to 1048576").into());
    }
    if !(1..=3600).contains(&timeout_s) {
        return Err(SpecError::new("timeout-s", timeout_s.to_string(), "an integer from 1 to 3600").into());
    }
    let out = &outputs::check("out", out)?;
    let rec = schedlab_host::record::record(argv, buffer_kb, std::time::Duration::from_secs(timeout_s))
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
