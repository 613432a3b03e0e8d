//! `tirx sim FILE --arg A=a.npy --out B=b.npy`: lower a kernel and run it on
//! the CPU simulator, with race, bounds, alignment and barrier checks.
//!
//! Errors and warnings are rendered at their source span; `--stats` prints
//! the shared-memory bank conflicts of every shared-memory instruction. A
//! kernel whose buffers would take more than the host's physical memory is
//! refused before anything is allocated (exit 1). With
//! `--defer-bounds`, a region that provably leaves its buffer (an error for
//! every other command) is lowered with a bounds check before it, so the run
//! shows the first out-of-bounds access it makes (`docs/tile-primitives.md` §3.1).
use crate::exit::{CmdResult, Failure};
use crate::frontend::{eprint_diags, Source};
use crate::out::outln;
use std::time::Instant;
use tirx_ir::Diagnostic;
use tirx_sim::{simulate_args, SimOptions, SimReport};

#[derive(clap::Args)]
pub struct Args {
    /// The kernel script.
    pub file: std::path::PathBuf,
    #[command(flatten)]
    pub target: crate::frontend::ArchArg,
    /// An input: NAME=file.npy, NAME a parameter buffer (repeatable; others start zeroed),
    /// or NAME=VALUE for a scalar parameter (`--arg n=1024`; every scalar needs one).
    #[arg(long = "arg", value_name = "NAME=FILE|VALUE")]
    pub args: Vec<String>,
    /// An output to save after the run: NAME=file.npy (repeatable).
    #[arg(long = "out", value_name = "NAME=FILE")]
    pub outs: Vec<String>,
    /// Simulate only the first N CTAs (launch order, x fastest).
    #[arg(long, value_name = "N")]
    pub grid_limit: Option<u64>,
    /// Print shared-memory bank-conflict statistics per instruction.
    #[arg(long)]
    pub stats: bool,
    /// Skip data-race tracking (faster; bounds, alignment and barriers are still checked).
    #[arg(long)]
    pub no_race_check: bool,
    /// Lower regions that are provably out of bounds anyway (a warning each instead of an
    /// error) so that the simulator reports their first out-of-bounds access.
    #[arg(long)]
    pub defer_bounds: bool,
}

pub fn run(a: Args) -> CmdResult {
    crate::args::check_unique("--arg", &a.args)?;
    crate::args::check_unique("--out", &a.outs)?;
    let (kernel, src) = crate::frontend::load_kernel(&a.file)?;
    let opts = tirx_lower::LowerOptions { arch: a.target.arch, defer_bounds: a.defer_bounds };
    let lir = crate::frontend::lower_with(&kernel, &src, &opts)?;
    let opts = SimOptions {
        grid_limit: a.grid_limit,
        check_races: !a.no_race_check,
        stats: a.stats,
        memory_limit: tirx_sim::DEFAULT_MEMORY_LIMIT,
        warp_order_seed: None,
    };
    let bound = crate::scalars::bind(&a.args, &lir, &src)?;
    let lir = bound.lir;
    crate::frontend::check_sim_memory(&kernel, &lir, &src, &opts)?;
    let mut bufs = crate::npy::load_args(&bound.files, &lir)?;
    let start = Instant::now();
    let result = simulate_args(&lir, &mut bufs, &bound.values, &opts);
    let elapsed = start.elapsed();
    // What the kernel printed (`T.cuda.printf`), in thread order, also before an error.
    let printed = match &result {
        Ok(r) => &r.printed,
        Err(e) => e.printed(),
    };
    for line in printed {
        crate::out::out(line)?;
    }
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprint_diags(&[e.to_diagnostic()], &src);
            return Err(Failure::Reported);
        }
    };
    let warnings: Vec<Diagnostic> = report.warnings.iter().map(|w| w.to_diagnostic()).collect();
    eprint_diags(&warnings, &src);
    crate::npy::save_outs(&a.outs, &lir, &bufs)?;
    let warned = match report.warnings.len() {
        0 => String::new(),
        1 => "; 1 warning".to_string(),
        n => format!("; {n} warnings"),
    };
    outln!(
        "simulated `{}`: {} of {} CTAs × {} threads, {} instructions in {:.3} s{}{warned}",
        lir.name,
        report.ctas_run,
        lir.grid.iter().map(|d| *d as u64).product::<u64>(),
        lir.threads_per_cta(),
        report.instructions,
        elapsed.as_secs_f64(),
        if opts.check_races { "; no races" } else { " (race check off)" }
    )?;
    if a.stats {
        print_stats(&report, &src)?;
    }
    Ok(())
}

fn print_stats(report: &SimReport, src: &Source) -> CmdResult {
    if report.bank.is_empty() {
        return outln!("no shared-memory accesses");
    }
    outln!("shared-memory bank conflicts (ways per warp access; 1 = conflict-free):")?;
    outln!("{:<12} {:<10} {:<16} {:>10} {:>6} {:>8}", "line:col", "kind", "buffer", "warp execs", "worst", "average")?;
    for s in &report.bank {
        let (line, col) = tirx_ir::diag::line_col(&src.text, s.span.lo as usize);
        outln!(
            "{:<12} {:<10} {:<16} {:>10} {:>6} {:>8.2}",
            format!("{line}:{col}"),
            s.kind,
            s.buf,
            s.executions,
            s.worst_ways,
            s.avg_ways
        )?;
    }
    Ok(())
}
