//! `fencesim`: the command-line edge of the harness. Parses flags, runs one subcommand, and maps
//! the outcome to the exit-code contract: 0 pass, 1 a violation was found, 2 usage, input or
//! harness error (one line on stderr, never a panic or a stack trace).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
