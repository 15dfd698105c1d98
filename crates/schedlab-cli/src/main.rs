//! The `schedlab` command: clap structs → validated config → runs → reports.
//! Bad input of any kind ends with one line naming the field, the value and the
//! accepted form, and exit status 2.

mod bench;
mod cli;
mod machines;
mod report;
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

/// `schedlab calibrate`.
fn calibrate_cmd(_name: String, _out: Option<std::path::PathBuf>, _quick: bool) -> Result<(), Failure> {
    Err(Failure::Run("calibrate is being wired".into()))
}
