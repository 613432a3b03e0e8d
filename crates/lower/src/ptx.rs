//! `T.ptx.*` statements (docs/tile-primitives.md §9): each is one LIR
//! instruction, checked here against what the kernel knows at the statement.
//!
//! * `wgmma.fence` / `commit_group` / `wait_group n` and `setmaxnreg.inc/dec n`
//!   are warpgroup instructions: every thread of the warpgroups that run them
//!   must be active (a condition like `if wg_id == 1:` keeps whole
//!   warpgroups; `if warp_id == 0:` does not), and the target sm_90a.
//!   `setmaxnreg` takes 24..=256 registers in steps of 8.
//! * `bar.sync id, n` / `bar.arrive id, n`: whole warps active, `n` a multiple
//!   of 32 up to the CTA's threads, and every value `id` can take in
//!   [`USER_BARRIERS`] — ids 1..8 are the warpgroup barriers lowering emits
//!   itself (`bar.sync 1 + wg_id, 128`), 0 is `__syncthreads`'.
//!
//! * `griddepcontrol.wait` / `.launch_dependents` (programmatic dependent
//!   launch): per thread, sm_90.
//!
//! (`fence.proxy.async`, which wgmma's shared operands need, is an
//! asynchronous-copy statement: module `asynch`.)

use crate::build::Builder;
use crate::env::Env;
use crate::options::LowerOptions;
use crate::scope::{Facts, ScopeView};
use tirx_ir::hir::{Expr, Kernel, PtxStmt};
use tirx_ir::lir::wgmma::{setmaxnreg_ok, WgmmaSync, SETMAXNREG_MAX, SETMAXNREG_MIN, WGMMA_ARCH};
use tirx_ir::lir::{LExpr, LStmt, LStmtKind, MatrixOp, SyncOp};
use tirx_ir::{Arch, Diagnostic, Span};
use tirx_layout::ExecScope;

/// The named-barrier ids a script may use (`T.ptx.bar.sync`, `T.ptx.bar.arrive`).
pub const USER_BARRIERS: std::ops::RangeInclusive<i64> = 9..=15;

pub(crate) fn lower(
    k: &Kernel,
    env: &Env,
    b: &mut Builder,
    at: &Facts,
    opts: &LowerOptions,
    p: &PtxStmt,
    span: Span,
) -> Result<Vec<LStmt>, Diagnostic> {
    let name = p.script_name();
    let err = |m: String| Diagnostic::error(span, m).with_label(format!("this `{name}`"));
    let need = |min: Arch| -> Result<(), Diagnostic> {
        if opts.arch.supports(min) {
            return Ok(());
        }
        Err(err(format!("`{name}` needs {min}; the target is {}", opts.arch))
            .with_help("lower for a Hopper GPU: `--arch sm_90a`"))
    };
    let group = |scope: ExecScope, what: &str| -> Result<(), Diagnostic> {
        ScopeView::new(scope, &at.active).all_threads_active().map_err(|m| {
            err(format!("`{name}` is a {what} instruction: every thread of the {scope}s that run it executes it together, but here {m}"))
                .with_help(format!("guard it only with conditions a whole {scope} agrees on (`if wg_id == 1:`)"))
        })
    };
    let one = |kind| Ok(vec![LStmt::new(kind, span)]);
    match p {
        PtxStmt::WgmmaFence | PtxStmt::WgmmaCommit | PtxStmt::WgmmaWait(_) => {
            need(WGMMA_ARCH)?;
            group(ExecScope::Warpgroup, "warpgroup")?;
            let s = match p {
                PtxStmt::WgmmaFence => WgmmaSync::Fence,
                PtxStmt::WgmmaCommit => WgmmaSync::Commit,
                PtxStmt::WgmmaWait(n) => WgmmaSync::Wait(*n),
                _ => return Err(Diagnostic::internal(span, "not a wgmma statement")),
            };
            one(LStmtKind::Matrix(MatrixOp::WgmmaSync(s)))
        }
        PtxStmt::SetMaxNReg { inc, regs } => {
            need(WGMMA_ARCH)?;
            group(ExecScope::Warpgroup, "warpgroup")?;
            if !setmaxnreg_ok(*regs) {
                return Err(err(format!(
                    "`{name}({regs})`: the register count is a multiple of 8 in {SETMAXNREG_MIN}..={SETMAXNREG_MAX}"
                )));
            }
            one(LStmtKind::Sync(SyncOp::SetMaxNReg { inc: *inc, regs: *regs }))
        }
        PtxStmt::GridDepWait | PtxStmt::GridDepLaunch => {
            need(Arch::SM_90)?;
            one(LStmtKind::Sync(if *p == PtxStmt::GridDepWait { SyncOp::GridDepWait } else { SyncOp::GridDepLaunch }))
        }
        PtxStmt::BarSync { id, threads } | PtxStmt::BarArrive { id, threads } => {
            group(ExecScope::Warp, "warp")?;
            let cta = at.active.threads;
            if *threads % 32 != 0 || i64::from(*threads) > cta {
                return Err(err(format!(
                    "`{name}` for {threads} threads: the count is a multiple of 32 up to the CTA's {cta} threads"
                )));
            }
            let lid = barrier_id(k, env, b, at, id).map_err(err)?;
            let threads = *threads;
            one(match p {
                PtxStmt::BarSync { .. } => LStmtKind::Sync(SyncOp::NamedBarrier { id: lid, threads }),
                _ => LStmtKind::Sync(SyncOp::NamedBarrierArrive { id: lid, threads }),
            })
        }
    }
}

/// The LIR id of a named barrier, every value of which lies in [`USER_BARRIERS`].
fn barrier_id(k: &Kernel, env: &Env, b: &Builder, at: &Facts, id: &Expr) -> Result<LExpr, String> {
    let (lo, hi) = (*USER_BARRIERS.start(), *USER_BARRIERS.end());
    let range = crate::expr::affine(env, id).and_then(|a| a.range(&|v| env.var_bounds(at, v)));
    match range {
        Some(r) if r.lo >= lo && r.hi <= hi => {}
        Some(r) => {
            return Err(format!(
                "the barrier id takes values in [{}, {}]; scripts use ids {lo}..={hi} (0 is `__syncthreads`', 1..8 the warpgroup barriers lowering emits)",
                r.lo, r.hi
            ))
        }
        None => {
            return Err(format!(
                "the barrier id has no known range; use a constant or an affine expression of loop variables and scope ids in {lo}..={hi}"
            ))
        }
    }
    let e = crate::expr::lower(k, env, b, id).map_err(|d| d.message)?;
    Ok(b.convert(e, tirx_ir::DType::I32))
}
