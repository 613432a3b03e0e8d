//! How a subcommand fails, and the exit code each failure maps to.

use std::process::ExitCode;

#[derive(Debug)]
pub enum Failure {
    /// A user error; the message (already formatted, diagnostics included) goes to stderr. Exit 1.
    User(String),
    /// User errors already printed (e.g. rendered diagnostics). Exit 1.
    Reported,
    /// A bug in tirx. Exit 2.
    Internal(String),
}

impl Failure {
    pub fn report(self) -> ExitCode {
        match self {
            Failure::User(m) => {
                eprintln!("{}", m.trim_end());
                ExitCode::from(1)
            }
            Failure::Reported => ExitCode::from(1),
            Failure::Internal(m) => {
                eprintln!("internal error: {}", m.trim_end());
                ExitCode::from(2)
            }
        }
    }
}

pub type CmdResult = Result<(), Failure>;

/// A panic is always our bug: say so and exit 2 (not Rust's default 101).
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("internal error (a bug in tirx, please report it): {info}");
        std::process::exit(2);
    }));
}
