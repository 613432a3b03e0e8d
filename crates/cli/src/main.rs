//! The `tirx` binary: [`tirx_cli::run`] on the process's arguments.

use std::process::ExitCode;

fn main() -> ExitCode {
    tirx_cli::install_panic_hook();
    ExitCode::from(tirx_cli::run(std::env::args_os()))
}
