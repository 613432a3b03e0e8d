//! copy_async → ldgsts (priority 20, docs/tile-primitives.md §3.17).
//!
//! **Accepts** a global → shared copy at thread, warp, warpgroup or cta
//! scope (target sm_80+) when every thread of the scope is active, the copy is
//! valid (same dtype, equal non-unit extents), the region divides over the
//! threads and its exact `[outer, threads, vec]` split (the one `gmem_smem`
//! finds, docs/layout-model.md §3.3) moves 4, 8 or 16 bytes per vector — the
//! sizes `cp.async` has. Config: `predicate=` (a run-time condition per
//! thread), `fill_mode="zero"` (with a predicate: zero-fill instead of
//! skipping), `prefetch_size=64|128|256` (`.L2::nB`), `direct=True` (thread
//! scope: the region is exactly one 4/8/16-byte vector). Only the shared side
//! may be swizzled; begins may be symbolic (stage `k % 3` of a pipeline).
//!
//! **Algorithm**: the `gmem_smem` plan ([`GsPlan`]) over the scope's threads,
//! one `cp.async` per vector instead of a load and a store. A predicate is
//! evaluated once; without `fill_mode` each copy is skipped where it is false
//! (the destination keeps its bytes, as `@p cp.async` does), with
//! `fill_mode="zero"` each copy reads 0 source bytes there and zero-fills.
//! Nothing waits: the kernel commits (`T.ptx.cp_async.commit_group()`), waits
//! (`wait_group(n)`) and synchronises before reading, as in the reference; the
//! simulator reports a read before the wait, a source overwritten in flight and
//! copies never waited for (docs/lir.md §2.6).
//!
//! **Generated code** (128×32 f16 of a 3-stage ring, 256 threads, swizzled):
//! ```text
//! let s_base: int32 = ...                       // the swizzle walk of gmem_smem
//! for f in 0..2 {
//!   let g_off: int32 = f * 4096 + (tid / 4) * 2048 + (tid % 4) * 8 + ...
//!   cp.async.cg<16> A_s[s_base + ...] <- A[g_off]
//! }
//! ```
//! With `predicate=p`: `if p { cp.async… }`; with `fill_mode="zero"`:
//! `cp.async.cg<16> … src_bytes=select(p, 16, 0)`.
//!
//! Differences from the reference: the partition is `gmem_smem`'s, with its
//! alignment proofs (stride-1 global vectors, aligned strides, offsets and
//! symbolic steps); `direct=True` proves the region is one aligned vector
//! instead of trusting the caller; `fill_mode` without a predicate declines
//! (it would fill nothing); `predicate` may be an int (non-zero is true).

use super::call::CopyAsyncRule;
use crate::copy::call::{operands, scope_pair};
use crate::copy::gmem_smem::GsPlan;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::{Expr, MemScope, TileArg};
use tirx_ir::lir::{AsyncOp, LBinOp, LBufId, LExpr, LStmt, LStmtKind};
use tirx_ir::op::{self, ConfigKey, ConfigValue, Family, FillMode};
use tirx_ir::{Arch, DType};
use tirx_layout::ExecScope;

pub struct Ldgsts;

struct LdPlan {
    grid: GsPlan,
    /// Bytes per `cp.async`.
    bytes: u32,
    /// `predicate=`, and whether a false one zero-fills.
    pred: Option<Expr>,
    fill: bool,
    prefetch: Option<u32>,
}

const GLOBAL_TO_SHARED: &[(MemScope, MemScope)] = &[(MemScope::Global, MemScope::Shared)];

impl Variant for Ldgsts {
    fn name(&self) -> &'static str {
        "ldgsts"
    }
    fn priority(&self) -> u8 {
        20
    }
    fn family(&self) -> Family {
        Family::CopyAsync
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[ConfigKey::FillMode, ConfigKey::PrefetchSize, ConfigKey::Direct]
    }
    fn min_arch(&self) -> Arch {
        Arch::SM_80
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        bulk_operands_absent(cx)?;
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let ops = operands(cx)?;
        scope_pair(&ops, GLOBAL_TO_SHARED)?;
        let direct = matches!(cx.call.config(ConfigKey::Direct), Some(e) if e.value == ConfigValue::Flag(true));
        if direct && cx.scope.kind != ExecScope::Thread {
            return Err(Decline::new(
                CommonRule::ExecScope,
                format!(
                    "direct=True issues one cp.async per thread from the region starts: thread scope only, not {}",
                    cx.scope.kind
                ),
            ));
        }
        let (pred, fill) = predicate(cx)?;
        let prefetch = match cx.call.config(ConfigKey::PrefetchSize).map(|e| e.value) {
            Some(ConfigValue::PrefetchSize(n)) => Some(n),
            _ => None,
        };
        let (grid, mut limits) = GsPlan::new(cx, &ops, t)?;
        let bytes = grid.part.vec() * grid.elem_bytes;
        if ![4, 8, 16].contains(&bytes) {
            limits.retain(|l| l.starts_with("vec"));
            return Err(Decline::new(
                CopyAsyncRule::Alignment,
                format!(
                    "cp.async moves 4, 8 or 16 bytes, but the widest aligned vector here is {bytes} B ({})",
                    limits.join("; ")
                ),
            ));
        }
        if direct && grid.part.rounds() != 1 {
            let n = crate::copy::call::CopyOps::elems(ops.src) * grid.elem_bytes;
            return Err(Decline::new(
                CopyAsyncRule::Partition,
                format!("direct=True needs a region of exactly one aligned 4/8/16-byte vector; this one is {n} B in {} vectors of {bytes} B", grid.part.rounds()),
            ));
        }
        let mut how = format!("cp.async.{} {bytes} B", if bytes == 16 { "cg" } else { "ca" });
        if pred.is_some() {
            how.push_str(if fill { ", predicated (zero-fill)" } else { ", predicated" });
        }
        if let Some(n) = prefetch {
            how.push_str(&format!(", L2 prefetch {n} B"));
        }
        let summary = format!("{how}: {}", grid.summary());
        let (vec, rounds) = (grid.part.vec(), grid.part.rounds());
        let mut p = Plan::new(summary, LdPlan { grid, bytes: bytes as u32, pred, fill, prefetch });
        p.vec = Some(vec as u32);
        p.rounds = Some(rounds as u64);
        p.limits = limits;
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<LdPlan>("ldgsts")?;
        let pred = match &p.pred {
            Some(e) => Some(bind_predicate(em, e)?),
            None => None,
        };
        let (bytes, fill, prefetch) = (p.bytes, p.fill, p.prefetch);
        let mv = |em: &Emitter, dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, _vec: u32| {
            let src_bytes = match (&pred, fill) {
                (Some(c), true) => Some(LExpr::Select(
                    Box::new(c.clone()),
                    Box::new(LExpr::i32(i64::from(bytes))),
                    Box::new(LExpr::i32(0)),
                )),
                _ => None,
            };
            let cp = LStmtKind::Async(AsyncOp::CpAsync { dst, dst_index, src, src_index, bytes, src_bytes, prefetch });
            let kind = match (&pred, fill) {
                (Some(c), false) => {
                    LStmtKind::If { cond: c.clone(), then_body: vec![LStmt::new(cp, em.span)], else_body: vec![] }
                }
                _ => cp,
            };
            LStmt::new(kind, em.span)
        };
        p.grid.emit(cx, em, &mv)
    }
}

/// `mbar=`, `cta_mask=` and `remote_cta_id=` belong to bulk copies (TMA, DSMEM):
/// `cp.async` completes in commit groups and writes this CTA only.
fn bulk_operands_absent(cx: &CallCx) -> Result<(), Decline> {
    for slot in [&op::MBAR, &op::CTA_MASK, &op::REMOTE_CTA] {
        if cx.arg(slot).is_some() {
            return Err(Decline::new(
                CommonRule::Config,
                format!("`{}=` is for bulk copies (TMA, dsmem); cp.async completes in commit groups", slot.name()),
            ));
        }
    }
    Ok(())
}

/// `predicate=` (bool, or an int where non-zero is true) and `fill_mode=`.
fn predicate(cx: &CallCx) -> Result<(Option<Expr>, bool), Decline> {
    let pred = match cx.arg(&op::PREDICATE) {
        Some(TileArg::Scalar(e)) => Some(e.clone()),
        None => None,
        Some(_) => return Err(Decline::new(CommonRule::Operand, "`predicate=` must be a scalar condition")),
    };
    if let Some(e) = &pred {
        if e.dtype != DType::Bool && !e.dtype.is_int() {
            return Err(Decline::new(
                CommonRule::Operand,
                format!("`predicate=` is a condition (bool or int), not {}", e.dtype),
            ));
        }
    }
    let fill =
        matches!(cx.call.config(ConfigKey::FillMode).map(|e| e.value), Some(ConfigValue::FillMode(FillMode::Zero)));
    if fill && pred.is_none() {
        return Err(Decline::new(
            CommonRule::Config,
            "fill_mode=\"zero\" zero-fills where `predicate` is false, and there is no predicate: give one, or drop fill_mode",
        ));
    }
    Ok((pred, fill))
}

/// The predicate as a per-thread `let pred: bool` (evaluated once, before the copies).
fn bind_predicate(em: &mut Emitter, e: &Expr) -> Result<LExpr, Bug> {
    let v = em.expr(e)?;
    let c = if e.dtype == DType::Bool { v } else { LExpr::bin(LBinOp::Ne, v, LExpr::Int(0, e.dtype)) };
    if matches!(c, LExpr::Var(_) | LExpr::Bool(_)) {
        return Ok(c);
    }
    let var = em.var("pred", DType::Bool, None);
    em.push(LStmtKind::Let { var, value: c });
    Ok(LExpr::Var(var))
}
