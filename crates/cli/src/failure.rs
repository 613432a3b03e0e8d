//! How a subcommand fails: what `exit` reports and maps to an exit code, and what `out`'s
//! writes return (its own module so that both read it, neither the other's).

#[derive(Debug)]
pub enum Failure {
    /// A user error; the message (already formatted, diagnostics included) goes to stderr. Exit 1.
    User(String),
    /// User errors already printed (e.g. rendered diagnostics). Exit 1.
    Reported,
    /// A bug in tirx. Exit 2.
    Internal(String),
    /// Stdout was closed by its reader (`tirx ... | head -1`): stop quietly. Exit 0.
    Closed,
}

pub type CmdResult = Result<(), Failure>;

/// A runtime error as a failure: the user's (environment, sizes: exit 1) or a tirx bug (exit 2).
pub(crate) fn runtime_failure(e: tirx_runtime::RuntimeError) -> Failure {
    if e.is_user_error() {
        Failure::User(e.to_string())
    } else {
        Failure::Internal(e.to_string())
    }
}
