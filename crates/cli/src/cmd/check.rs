//! `tirx check FILE...`: parse, check and lower kernel scripts (no code is
//! emitted), print every problem with its location, and `ok: FILE` for each
//! clean file. `check` ok ⇒ `lower` ok: it runs every check lowering runs.
//! Exit 1 if any file has an error, 2 if tirx itself failed.
use crate::exit::{CmdResult, Failure};
use crate::frontend::{load_kernel, lower};
use crate::out::outln;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel scripts to check.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub target: crate::frontend::ArchArg,
}

pub fn run(a: Args) -> CmdResult {
    let mut failed = false;
    for f in &a.files {
        match load_kernel(f).and_then(|(k, src)| lower(&k, &src, a.target.arch)) {
            Ok(_) => outln!("ok: {}", f.display())?,
            Err(Failure::Reported) => failed = true,
            Err(Failure::User(m)) => {
                crate::out::errln!("{}", m.trim_end());
                failed = true;
            }
            Err(e @ (Failure::Internal(_) | Failure::Closed)) => return Err(e),
        }
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}
