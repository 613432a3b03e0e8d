//! `tirx lower FILE --emit tir|cuda [-o OUT] [--meta META.json]`: lowers a kernel
//! script and prints the per-thread IR or the CUDA C++ (warnings go to stderr).
use crate::exit::{CmdResult, Failure};
use crate::frontend::{load_kernel, lower};
use std::path::PathBuf;

/// `explain` renders its diagnostics through this path.

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// The lowered per-thread IR.
    Tir,
    /// CUDA C++.
    Cuda,
}

#[derive(clap::Args)]
pub struct Args {
    /// The kernel script.
    pub file: PathBuf,
    /// What to print.
    #[arg(long, value_enum, default_value = "tir")]
    pub emit: Emit,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Also write the launch metadata (grid, block, parameters) as JSON (with `--emit cuda`).
    #[arg(long)]
    pub meta: Option<PathBuf>,
    #[command(flatten)]
    pub target: crate::frontend::ArchArg,
}

pub fn run(a: Args) -> CmdResult {
    let (k, src) = load_kernel(&a.file)?;
    let lir = lower(&k, &src, a.target.arch)?;
    let text = match a.emit {
        Emit::Tir => {
            if a.meta.is_some() {
                return Err(Failure::User("--meta needs --emit cuda".into()));
            }
            lir.to_string()
        }
        Emit::Cuda => {
            let m = tirx_cuda::generate(&lir).map_err(|e| Failure::Internal(e.to_string()))?;
            if let Some(p) = &a.meta {
                write(p, &m.meta.to_json())?;
            }
            m.source
        }
    };
    match &a.output {
        Some(p) => write(p, &text),
        None => {
            crate::out::out(&text)?;
            Ok(())
        }
    }
}

fn write(p: &std::path::Path, text: &str) -> CmdResult {
    std::fs::write(p, text).map_err(|e| Failure::User(format!("cannot write {}: {e}", p.display())))
}
