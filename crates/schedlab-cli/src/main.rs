//! The `schedlab` command: clap structs → validated config → runs → reports.
//! Bad input of any kind ends with one line naming the field, the value and the
//! accepted form, and exit status 2.

mod bench;
mod cli;
mod commands;
mod lagfile;
mod outputs;
mod plotfile;
mod reproduce;
mod swarm;
mod sweep;
mod trace_summary;
mod tracefile;
mod validate;

use std::process::ExitCode;

use clap::Parser;

use schedlab_spec::Failure;

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
    match commands::dispatch(args) {
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
