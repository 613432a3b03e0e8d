//! `tirx explain FILE [--json]`: for every tile call, the operands with their
//! layouts, each variant tried with its verdict and reason, the chosen variant,
//! vector width, rounds and what limited the vector width. Also explains calls
//! that cannot be lowered (exit 1 after the report).
use super::lower::eprint_diags;
use crate::exit::{CmdResult, Failure};
use crate::frontend::load_kernel;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The kernel script.
    pub file: PathBuf,
    /// A JSON list of objects (`op`, `scope`, `span`, `operands`, `chosen`, `vec`, `rounds`, `tried`, `limits`).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: Args) -> CmdResult {
    let (k, src) = load_kernel(&a.file)?;
    let (mut calls, diags) = tirx_lower::explain_kernel(&k, &Default::default());
    for c in &mut calls {
        c.locate(&src.name, &src.text);
    }
    if a.json {
        let j = serde_json::to_string_pretty(&calls).map_err(|e| Failure::Internal(e.to_string()))?;
        println!("{j}");
    } else if calls.is_empty() {
        println!("no tile calls");
    } else {
        print!("{}", tirx_lower::explain::render_all(&calls));
    }
    eprint_diags(&diags, &src);
    if diags.iter().any(|d| d.is_error()) {
        return Err(Failure::Reported);
    }
    Ok(())
}
