//! How a subcommand fails (`crate::failure`), and the exit code each failure maps to.

pub(crate) use crate::failure::{runtime_failure, CmdResult, Failure};
use crate::out::errln;

impl Failure {
    /// Prints the message and gives the exit code.
    pub fn report(self) -> u8 {
        match self {
            Failure::User(m) => {
                errln!("{}", m.trim_end());
                1
            }
            Failure::Reported => 1,
            Failure::Internal(m) => {
                errln!("internal error: {}", m.trim_end());
                2
            }
            Failure::Closed => 0,
        }
    }
}

/// The exit status for a command's `code`: a failed write to stderr (a message the
/// user did not get) turns success into 1.
pub fn status(code: u8) -> u8 {
    if code == 0 && crate::out::stderr_failed() {
        1
    } else {
        code
    }
}

/// A panic is always our bug: say so and exit 2 (not Rust's default 101).
/// The message is written without `eprintln!`, which would panic again on a
/// broken stderr.
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        errln!("internal error (a bug in tirx, please report it): {info}");
        std::process::exit(2);
    }));
}
