//! copy → fallback (priority 0, docs/tile-primitives.md §3.5).
//!
//! **Accepts** any copy that passes `validate_copy_op` (any scope pair, local ↔
//! local included). Who copies:
//! * no operand distributed over threads: one elected thread — the first
//!   active thread of the scope (lane base + 32 × warp offset) — copies the
//!   whole region; at thread scope the thread itself, no guard;
//! * one operand distributed over threads (a thread-axis layout such as
//!   `S[(32,8):(1@laneid,1)]`): every thread of the scope walks the region and
//!   copies the elements it owns (owner computes). The reference lets one
//!   thread write other threads' registers, which silently loses data. This
//!   needs all threads of the scope active, no thread replicas, and thread axes
//!   no wider than the scope; two distributed operands are declined.
//!
//! **Algorithm**: one loop per non-unit extent; each side addressed through its
//! own layout (swizzles included). Picking it is a warning: it exists for
//! correctness, not speed.
//!
//! **Generated code**:
//! ```text
//! if lane == 0 {
//!   for i in 0..4 { for j in 0..6 { A_smem[i * 6 + j] = A[i * 6 + j] } }
//! }
//! for i in 0..32 { for j in 0..8 { if i == lane { R[j] = A_smem[i * 8 + j] } } }
//! ```

use super::call::CopyRule;
use super::call::{operands, CopyOps};
use crate::scope::TidKind;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::{Buffer, BufferRegion};
use tirx_ir::lir::{LBinOp, LBufId, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::ExecScope;

pub struct Fallback;

/// Who copies.
enum Who {
    /// One thread: `None` at thread scope, else (thread id kind, elected id).
    Elected(Option<(TidKind, i64)>),
    /// Every thread copies the elements it owns of the distributed side.
    Owners { dst_distributed: bool },
}

impl Variant for Fallback {
    fn name(&self) -> &'static str {
        "fallback"
    }
    fn priority(&self) -> u8 {
        0
    }
    fn family(&self) -> Family {
        Family::Copy
    }
    fn warns(&self) -> bool {
        true
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let ops = operands(cx)?;
        let n = CopyOps::elems(ops.dst);
        let (who, summary) = match (distributed(ops.dst_buf), distributed(ops.src_buf)) {
            (true, true) => {
                return Err(Decline::new(
                    CopyRule::OwnerComputes,
                    format!(
                    "both `{}` and `{}` are distributed over threads; no single thread owns both sides of an element",
                    ops.dst_buf.name, ops.src_buf.name
                ),
                ))
            }
            (false, false) => elected(cx, n)?,
            (dst_distributed, _) => {
                let d = if dst_distributed { ops.dst_buf } else { ops.src_buf };
                owners_ok(cx, d)?;
                let s = format!("each thread copies the elements of `{}` it owns ({n} checked per thread)", d.name);
                (Who::Owners { dst_distributed }, s)
            }
        };
        let mut p = Plan::new(summary, who);
        p.vec = Some(1);
        p.rounds = Some(n as u64);
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let who = plan.data::<Who>("fallback")?;
        let ops = operands(cx)?;
        let names = ["i", "j", "k", "l"];
        let loop_vars: Vec<_> = ops
            .dst
            .ranges
            .iter()
            .filter(|r| r.extent != 1)
            .enumerate()
            .map(|(d, r)| {
                let name = names.get(d).map_or_else(|| format!("i{d}"), |n| n.to_string());
                (em.var(&name, DType::I32, Some((0, r.extent - 1))), r.extent)
            })
            .collect();
        let lv: Vec<LExpr> = loop_vars.iter().map(|(v, _)| LExpr::Var(*v)).collect();
        let dst_idx = indices(em, ops.dst, &lv)?;
        let src_idx = indices(em, ops.src, &lv)?;
        let (dst, di) = em.address(ops.dst.buf, &dst_idx)?;
        let (src, si) = em.address(ops.src.buf, &src_idx)?;
        let mut body = vec![copy_stmt(em, dst, di, src, si)];
        if let Who::Owners { dst_distributed } = who {
            let (buf, idx) = if *dst_distributed { (ops.dst.buf, &dst_idx) } else { (ops.src.buf, &src_idx) };
            let cond = owned(em, buf, idx)?;
            body = vec![LStmt::new(LStmtKind::If { cond, then_body: body, else_body: vec![] }, em.span)];
        }
        for (v, n) in loop_vars.into_iter().rev() {
            body = vec![LStmt::new(
                LStmtKind::For { var: v, begin: LExpr::i32(0), extent: LExpr::i32(n), unroll: false, body },
                em.span,
            )];
        }
        if let Who::Elected(Some((kind, first))) = who {
            let tid = em.thread_id(*kind);
            let cond = LExpr::bin(LBinOp::Eq, tid, LExpr::i32(*first));
            body = vec![LStmt::new(LStmtKind::If { cond, then_body: body, else_body: vec![] }, em.span)];
        }
        em.stmts.extend(body);
        Ok(())
    }
}

fn distributed(b: &Buffer) -> bool {
    crate::lay::tile_of(&b.layout).shard.iter().any(|i| i.axis.is_thread())
}

/// The first active thread of the scope copies everything.
fn elected(cx: &CallCx, n: i64) -> Result<(Who, String), Decline> {
    if cx.scope.kind == ExecScope::Thread {
        return Ok((Who::Elected(None), format!("the thread copies {n} elements one by one")));
    }
    let kind = cx
        .scope
        .tid_kind()
        .ok_or_else(|| Decline::new(CommonRule::ExecScope, format!("unsupported exec_scope {}", cx.scope.kind)))?;
    let first = cx.scope.first_thread().map_err(|m| Decline::new(CopyRule::Elect, m))?;
    Ok((
        Who::Elected(Some((kind, first))),
        format!("thread {first} of the {} copies {n} elements one by one", cx.scope.kind),
    ))
}

/// Owner-computes needs every owner present and exactly one home per element.
fn owners_ok(cx: &CallCx, d: &Buffer) -> Result<(), Decline> {
    let tile = crate::lay::tile_of(&d.layout);
    cx.scope.all_threads_active().map_err(|m| {
        Decline::new(CommonRule::AllThreadsActive, format!("`{}` is distributed over threads: {m}", d.name))
    })?;
    if let Some(r) = tile.replica.iter().find(|i| i.axis.is_thread()) {
        return Err(Decline::new(
            CopyRule::OwnerComputes,
            format!("`{}` is replicated over {}; owner-computes needs one home per element", d.name, r.axis),
        ));
    }
    for it in tile.shard.iter().filter(|i| i.axis.is_thread()) {
        let outer = it.axis.scopes().map(|s| s.0);
        if outer.is_none_or(|o| o.wider_than(cx.scope.kind) || o == ExecScope::Kernel || o == ExecScope::Cluster) {
            return Err(Decline::new(
                CopyRule::OwnerComputes,
                format!(
                    "`{}` is distributed over {}, wider than the {} scope of the call",
                    d.name, it.axis, cx.scope.kind
                ),
            ));
        }
    }
    Ok(())
}

/// `region.begin + (loop vars on the non-unit dims)`.
fn indices(em: &mut Emitter, r: &BufferRegion, lv: &[LExpr]) -> Result<Vec<LExpr>, Bug> {
    let mut next = lv.iter();
    let mut idx = Vec::with_capacity(r.ranges.len());
    for rg in &r.ranges {
        let b = em.expr(&rg.begin)?;
        let b = em.builder().to_int(b, DType::I32);
        idx.push(if rg.extent != 1 {
            let v = next.next().cloned().ok_or_else(|| Bug("region rank mismatch".into()))?;
            em.builder().add(b, v)
        } else {
            b
        });
    }
    Ok(idx)
}

/// `owner(buf[idx]) == this thread` on every thread axis of the layout.
fn owned(em: &mut Emitter, buf: tirx_ir::hir::BufId, idx: &[LExpr]) -> Result<LExpr, Bug> {
    let mut cond: Option<LExpr> = None;
    for (axis, value) in em.owner(buf, idx)? {
        let me = em.axis_id(axis).ok_or_else(|| {
            Decline::new(CopyRule::OwnerComputes, format!("thread axis {axis} has no id inside a CTA"))
        })?;
        let eq = LExpr::bin(LBinOp::Eq, value, me);
        cond = Some(match cond {
            Some(c) => LExpr::bin(LBinOp::And, c, eq),
            None => eq,
        });
    }
    cond.ok_or_else(|| Bug("a distributed operand without thread axes".into()))
}

fn copy_stmt(em: &Emitter, dst: LBufId, di: LExpr, src: LBufId, si: LExpr) -> LStmt {
    LStmt::new(LStmtKind::Memory(MemOp::Store { buf: dst, index: di, value: LExpr::Load(src, Box::new(si)) }), em.span)
}
