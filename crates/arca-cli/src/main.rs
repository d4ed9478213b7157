//! The `arca` binary: parses the command line and hands over to the library crates.
//! Exit codes: 0 success, 1 fatal error, 3 finished but some entries failed.

mod cli;
mod commands;
mod progress;
mod util;

use std::process::ExitCode;

use clap::Parser;

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("arca: {e:#}");
            }
            ExitCode::from(1)
        }
    }
}
