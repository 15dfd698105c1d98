//! The `schedlab` command: clap structs → validated config → runs → reports.
//! Bad input of any kind ends with one line naming the field, the value and the
//! accepted form, and exit status 2.

mod bench;
mod calibrate;
mod cli;
mod compare;
mod machines;
mod plotfile;
mod report;
mod reproduce;
mod tracefile;

use std::process::ExitCode;

use clap::Parser;

use schedlab_core::error::SpecError;

/// A failure: bad input (exit 2) or something that went wrong while running (exit 1).
#[derive(Debug)]
pub enum Failure {
    Input(SpecError),
    Run(String),
}

impl From<SpecError> for Failure {
    fn from(e: SpecError) -> Self {
        Failure::Input(e)
    }
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    match cli::dispatch(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Input(e)) => {
            eprintln!("schedlab: error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Run(msg)) => {
            eprintln!("schedlab: error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// `schedlab calibrate`: measure this host, print or write the profile (written to
/// a temporary file and renamed, so a failure leaves nothing behind).
fn calibrate_cmd(name: String, out: Option<std::path::PathBuf>, quick: bool) -> Result<(), Failure> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Failure::Input(SpecError::new("name", name, "letters, digits, '-' and '_'")));
    }
    let opts = calibrate::CalibrateOptions { name, quick };
    let profile = calibrate::calibrate(&opts).map_err(|e| Failure::Run(format!("calibrate: {e:#}")))?;
    let text = profile.to_toml();
    match out {
        None => print!("{text}"),
        Some(path) => {
            let tmp = path.with_extension("toml.tmp");
            std::fs::write(&tmp, &text)
                .and_then(|_| std::fs::rename(&tmp, &path))
                .map_err(|e| Failure::Run(format!("writing {}: {e}", path.display())))?;
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
