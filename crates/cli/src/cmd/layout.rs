//! `tirx layout EXPR ...`
use crate::exit::{CmdResult, Failure};

#[derive(clap::Args)]
pub struct Args {
    /// The layout expression, e.g. `S[(32,8):(1@laneid,1)]`.
    pub expr: String,
}

pub fn run(_a: Args) -> CmdResult {
    Err(Failure::Internal("tirx layout is being written".into()))
}
