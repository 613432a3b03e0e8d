//! `tirx lower FILE --emit tir|cuda [-o OUT] [--meta META.json] [--ptxas]`: lowers a kernel
//! script and prints the per-thread IR or the CUDA C++ (warnings go to stderr). `--ptxas`
//! also compiles the CUDA with NVRTC as a launch would (no GPU needed) and prints what ptxas
//! says costs it speed: its wgmmas serialized, registers spilled.
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
    /// Also compile the CUDA with NVRTC (as a launch does; no GPU needed) and print ptxas's
    /// performance warnings (wgmmas serialized, registers spilled) to stderr (with `--emit cuda`).
    #[arg(long)]
    pub ptxas: bool,
    #[command(flatten)]
    pub target: crate::frontend::ArchArg,
}

pub fn run(a: Args) -> CmdResult {
    let (k, src) = load_kernel(&a.file)?;
    let lir = lower(&k, &src, a.target.arch)?;
    let text = match a.emit {
        Emit::Tir => {
            if a.meta.is_some() || a.ptxas {
                return Err(Failure::User(format!("{} needs --emit cuda", if a.ptxas { "--ptxas" } else { "--meta" })));
            }
            lir.to_string()
        }
        Emit::Cuda => {
            let m = tirx_cuda::generate(&lir).map_err(|e| Failure::Internal(e.to_string()))?;
            if let Some(p) = &a.meta {
                write(p, &m.meta.to_json())?;
            }
            if a.ptxas {
                ptxas_warnings(&m.source, a.target.arch)?;
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

/// NVRTC (through the cache) on `source` for `arch`, its performance warnings printed.
fn ptxas_warnings(source: &str, arch: tirx_ir::Arch) -> CmdResult {
    let cache = tirx_runtime::cache::default_dir();
    let compiled =
        tirx_runtime::compile_cached(source, arch, cache.as_deref()).map_err(crate::exit::runtime_failure)?;
    crate::cmd::run::report_compile(&compiled);
    Ok(())
}
