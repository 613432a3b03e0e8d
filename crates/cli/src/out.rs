//! Writing to stdout and stderr without panicking.
//!
//! Rust ignores SIGPIPE, so `println!` to a closed pipe panics and `eprintln!`
//! to a full disk aborts through the panic hook. Everything the CLI prints goes
//! through here instead (`clippy::print_stdout`/`print_stderr` are denied in
//! the crate):
//! * [`out`] / [`outln!`]: stdout. A closed pipe (`tirx ... | head -1`) is
//!   [`Failure::Closed`]: the command stops and exits 0 quietly, like standard
//!   Unix tools; any other write error (`>/dev/full`) is a user error (exit 1).
//! * [`err`] / [`errln!`]: stderr. A failed write cannot be reported anywhere, so
//!   it is remembered and the command exits 1 (or 2) instead of 0 ([`stderr_failed`]).

use crate::failure::Failure;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDERR_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes `text` to stdout and flushes it.
pub fn out(text: &str) -> Result<(), Failure> {
    // Unit tests: through `print!`, which the test harness captures.
    #[cfg(test)]
    #[allow(clippy::print_stdout)]
    {
        print!("{text}");
        return Ok(());
    }
    #[allow(unreachable_code)]
    let mut lock = std::io::stdout().lock();
    lock.write_all(text.as_bytes()).and_then(|()| lock.flush()).map_err(stdout_failure)
}

/// How a failed stdout write ends the command.
pub fn stdout_failure(e: std::io::Error) -> Failure {
    if e.kind() == ErrorKind::BrokenPipe {
        Failure::Closed
    } else {
        Failure::User(format!("error: cannot write to stdout: {e}"))
    }
}

/// Writes `text` to stderr; a failure is remembered, never a panic.
pub fn err(text: &str) {
    let mut lock = std::io::stderr().lock();
    if lock.write_all(text.as_bytes()).and_then(|()| lock.flush()).is_err() {
        STDERR_FAILED.store(true, Ordering::Relaxed);
    }
}

/// Some write to stderr failed: the user may have missed a message.
pub fn stderr_failed() -> bool {
    STDERR_FAILED.load(Ordering::Relaxed)
}

/// `println!` to stdout that returns `Result<(), Failure>` (use with `?`).
macro_rules! outln {
    () => {
        $crate::out::out("\n")
    };
    ($($arg:tt)*) => {
        $crate::out::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (see [`err`]).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::out::err(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {errln, outln};
