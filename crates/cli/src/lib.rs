//! `tirx`: the command-line front end, as a library so that the `tirx` binary and the
//! Python package's `tirx` command run the same code ([`run`]). Each subcommand lives in
//! `cmd/<name>.rs` with its own clap `Args` and `run`.
//!
//! Exit codes: 0 ok, 1 user error (diagnostics printed), 2 internal error.
//! Output goes through [`out`] (no `println!`: it panics on a closed pipe).
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod cmd;
mod exit;
mod failure;
mod frontend;
mod input;
mod npy;
mod npy_header;
mod out;
mod scalars;

use clap::{Parser, Subcommand};
use std::ffi::OsString;

pub use exit::install_panic_hook;

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
    /// Parse and check kernel scripts; report every problem with its location.
    Check(cmd::check::Args),
    /// Parse a kernel script and print it back in canonical form.
    Print(cmd::print::Args),
    /// Lower a kernel and print the per-thread IR (`--emit tir`) or CUDA C++ (`--emit cuda`).
    Lower(cmd::lower::Args),
    /// Show, for every tile call, each variant tried and why it was chosen or declined.
    Explain(cmd::explain::Args),
    /// Run a kernel on the CPU simulator with race, bounds and alignment checking.
    Sim(cmd::sim::Args),
    /// Compile (NVRTC) and run a kernel on the GPU.
    Run(cmd::run::Args),
    /// Time a kernel on the GPU against cudaMemcpy of the same bytes.
    Bench(cmd::bench::Args),
}

/// Runs the command line `args` (the program name first) and returns its exit status:
/// 0 ok, 1 user error (also a success whose message could not be written to stderr),
/// 2 internal error (a panic exits 2 through [`install_panic_hook`]).
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // --help / --version print and exit 0; a usage mistake is a user error (exit 1), not clap's 2.
        Err(e) => {
            // `--help | head -1`: clap's own write error is ignored like ours.
            let _ = e.print();
            return u8::from(e.use_stderr());
        }
    };
    let result = match cli.cmd {
        Cmd::Layout(a) => cmd::layout::run(a),
        Cmd::Check(a) => cmd::check::run(a),
        Cmd::Print(a) => cmd::print::run(a),
        Cmd::Lower(a) => cmd::lower::run(a),
        Cmd::Explain(a) => cmd::explain::run(a),
        Cmd::Sim(a) => cmd::sim::run(a),
        Cmd::Run(a) => cmd::run::run(a),
        Cmd::Bench(a) => cmd::bench::run(a),
    };
    exit::status(match result {
        Ok(()) => 0,
        Err(f) => f.report(),
    })
}
