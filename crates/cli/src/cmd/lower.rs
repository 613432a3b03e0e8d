//! `tirx lower` (being written).
use crate::exit::{CmdResult, Failure};

#[derive(clap::Args)]
pub struct Args {
    pub file: std::path::PathBuf,
}

pub fn run(_a: Args) -> CmdResult {
    Err(Failure::Internal("tirx lower is not implemented yet".into()))
}
