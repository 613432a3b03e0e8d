//! `tirx print FILE`: parse a kernel script and print it back in canonical
//! form (constants inlined, regions and layouts spelled out).
use crate::exit::CmdResult;
use crate::frontend::load_kernel;

#[derive(clap::Args)]
pub struct Args {
    /// The kernel script.
    pub file: std::path::PathBuf,
}

pub fn run(a: Args) -> CmdResult {
    let (kernel, _) = load_kernel(&a.file)?;
    crate::out::out(&tirx_script::print_kernel(&kernel))?;
    Ok(())
}
