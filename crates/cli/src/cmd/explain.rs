//! `tirx explain FILE [--json] [--sim]`: for every tile call, the operands with
//! their layouts, each variant tried with its verdict and reason, the chosen
//! variant, vector width, rounds and what limited the vector width. Also
//! explains calls that cannot be lowered (exit 1 after the report).
//!
//! `--sim` also runs the lowered kernel in the simulator (zeroed inputs, the
//! first `--sim-ctas` CTAs: bank behaviour repeats from CTA to CTA) and shows,
//! under each call, the shared-memory bank conflicts of the accesses it emitted.
use crate::exit::{CmdResult, Failure};
use crate::frontend::{eprint_diags, load_kernel, Source};
use crate::out::outln;
use std::path::PathBuf;
use tirx_ir::hir::Kernel;
use tirx_ir::lir::LKernel;
use tirx_lower::CallExplain;
use tirx_sim::{BankStat, SimOptions};

#[derive(clap::Args)]
pub struct Args {
    /// The kernel script.
    pub file: PathBuf,
    #[command(flatten)]
    pub target: crate::frontend::ArchArg,
    /// A JSON list of objects (`op`, `scope`, `span`, `threads`, `ranges` (when region begins use variables),
    /// `bounds`, `assumes` and `launch` (when there are any), `operands`, `chosen`, `vec`, `rounds`,
    /// `tried`, `limits`; with `--sim` also `bank`).
    #[arg(long)]
    pub json: bool,
    /// Also simulate the kernel and show each call's shared-memory bank conflicts.
    #[arg(long)]
    pub sim: bool,
    /// With `--sim`: how many CTAs to simulate.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub sim_ctas: u64,
    /// With `--sim`: the value of a scalar parameter, `NAME=VALUE` (repeatable; every scalar needs one).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    pub args: Vec<String>,
}

pub fn run(a: Args) -> CmdResult {
    let (k, src) = load_kernel(&a.file)?;
    let (mut calls, lowered) = tirx_lower::explain_kernel(&k, &tirx_lower::LowerOptions::for_arch(a.target.arch));
    for c in &mut calls {
        c.locate(&src.name, &src.text);
    }
    let bank = match &lowered {
        Ok(l) if a.sim => bank_stats(&k, &l.lir, &src, a.sim_ctas, &a.args)?,
        _ => vec![],
    };
    let of_call = |c: &CallExplain| -> Vec<&BankStat> { bank.iter().filter(|s| s.within(c.span())).collect() };
    if a.json {
        let mut j = serde_json::to_value(&calls).map_err(|e| Failure::Internal(e.to_string()))?;
        for (c, v) in calls.iter().zip(j.as_array_mut().into_iter().flatten()) {
            v["target"] = a.target.arch.to_string().into();
            if a.sim {
                v["bank"] = serde_json::to_value(of_call(c)).map_err(|e| Failure::Internal(e.to_string()))?;
            }
        }
        let text = serde_json::to_string_pretty(&j).map_err(|e| Failure::Internal(e.to_string()))?;
        outln!("{text}")?;
    } else if calls.is_empty() {
        outln!("no tile calls")?;
    } else {
        outln!("target: {}\n", a.target.arch)?;
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                outln!()?;
            }
            crate::out::out(&c.render())?;
            if a.sim {
                print_bank(&of_call(c))?;
            }
        }
    }
    match lowered {
        Ok(l) => {
            eprint_diags(&l.warnings, &src);
            eprint_diags(&l.notes, &src);
            Ok(())
        }
        Err(diags) => Err(crate::frontend::report_errors(&diags, &src)),
    }
}

/// Simulates the first `ctas` CTAs with zeroed inputs and returns the bank statistics.
/// A kernel the simulator rejects (a race, an out-of-bounds access) is a user error.
fn bank_stats(k: &Kernel, lir: &LKernel, src: &Source, ctas: u64, args: &[String]) -> Result<Vec<BankStat>, Failure> {
    let opts = SimOptions {
        grid_limit: Some(ctas.max(1)),
        check_races: true,
        stats: true,
        memory_limit: tirx_sim::host_memory_limit(),
        warp_order_seed: None,
    };
    crate::args::check_unique("--arg", args)?;
    let bound = crate::scalars::bind(args, lir, src)?;
    if let Some(f) = bound.files.first() {
        return Err(Failure::User(format!(
            "error: --arg `{f}`: `tirx explain --sim` takes values of scalar parameters only (buffers start zeroed)"
        )));
    }
    let lir = &bound.lir;
    crate::frontend::check_sim_memory(k, lir, src, &opts)?;
    let mut params = crate::npy::load_args(&[], lir)?;
    tirx_sim::simulate_args(lir, &mut params, &bound.values, &opts).map(|r| r.bank).map_err(|e| {
        eprint_diags(&[e.to_diagnostic()], src);
        Failure::Reported
    })
}

fn print_bank(stats: &[&BankStat]) -> CmdResult {
    crate::out::out(&BankStat::lines(stats))
}
