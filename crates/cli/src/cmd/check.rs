//! `tirx check FILE...`: parse and check kernel scripts, print every problem
//! with its location, and `ok: FILE` for each clean file. Exit 1 if any file
//! has an error.
use crate::exit::{CmdResult, Failure};
use crate::frontend::load_kernel;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel scripts to check.
    #[arg(required = true)]
    pub files: Vec<std::path::PathBuf>,
}

pub fn run(a: Args) -> CmdResult {
    let mut failed = false;
    for f in &a.files {
        match load_kernel(f) {
            Ok(_) => println!("ok: {}", f.display()),
            Err(Failure::Reported) => failed = true,
            Err(Failure::User(m)) => {
                eprintln!("{}", m.trim_end());
                failed = true;
            }
            Err(e @ Failure::Internal(_)) => return Err(e),
        }
    }
    if failed {
        Err(Failure::Reported)
    } else {
        Ok(())
    }
}
