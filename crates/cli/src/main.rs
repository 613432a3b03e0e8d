//! `tirx`: the command-line front end. Each subcommand lives in `cmd/<name>.rs`
//! with its own clap `Args` and `run`.
//!
//! Exit codes: 0 ok, 1 user error (diagnostics printed), 2 internal error.

mod cmd;
mod exit;

use clap::{Parser, Subcommand};
use exit::Failure;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tirx", version, about = "TIRx tile-primitive lowering for NVIDIA GPUs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Inspect a layout expression: apply, canonicalize, slice, draw.
    Layout(cmd::layout::Args),
}

fn main() -> ExitCode {
    exit::install_panic_hook();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Layout(a) => cmd::layout::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => f.report(),
    }
}
