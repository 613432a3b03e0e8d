//! copy_async → dsmem (priority 10, docs/tile-primitives.md §3.21).
//!
//! **Accepts** a shared → shared copy at thread scope (target sm_90) in a kernel
//! launched in clusters, with `mbar=` (an mbarrier of this CTA's shared memory;
//! the copy completes on the barrier at the same offset in the peer) and
//! `remote_cta_id=` (the peer's rank in the cluster; a constant must be below
//! the cluster size, `remote_cta_id`): one dtype, as many elements on each side
//! (`validate_copy_op`), both regions one dense chain in row-major order once
//! sliced (`bulk_chunk`: the stride-gap chunking of the reference is not done),
//! of a multiple of 16 bytes starting 16-byte aligned (`alignment`). No
//! `predicate=`, `cta_mask=` (`config`).
//!
//! **Algorithm**: the source region's bytes go to the same-shaped region of the
//! destination buffer in the peer CTA, in one
//! `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes`,
//! both peer addresses mapped with `mapa`. The copy only issues: the peer
//! announces the bytes (`mbarrier.arrive.expect_tx`) and waits for the phase;
//! the issuing CTA writes its source through the generic proxy, so it fences
//! (`fence.proxy.async.shared::cta`) before the copy, and it must not exit before
//! the copy completed (a cluster barrier after the peer's wait) — the simulator
//! reports both (docs/lir.md §2.14).
//!
//! **Generated code** (`Tx.copy_async(B_s[0:64, 0:64], A_s[0:64, 0:64], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=1)`):
//! ```text
//! bulk.to_peer B_s[0] <- A_s[0], 8192 B, rank 1, bar bar[0]
//! ```
//!
//! Differences from the reference: a region that is not one dense chain declines
//! (`bulk_chunk`) instead of being split into chunks; `remote_cta_id` out of the
//! cluster declines when constant.

use super::tma::{self, CTA_MASK, MBAR, REMOTE_CTA};
use crate::dispatch::{Bug, CallCx, Decline, Emitter, Plan, Rule, Variant};
use crate::operand::MemOperand;
use tirx_ir::hir::{Expr, ExprKind, TileArg};
use tirx_ir::lir::{AsyncOp, LStmtKind};
use tirx_ir::op::{ConfigKey, Family};
use tirx_ir::{Arch, DType};
use tirx_layout::ExecScope;

pub struct Dsmem;

struct DsPlan {
    src: MemOperand,
    dst: MemOperand,
    bytes: u32,
    rank: Expr,
}

impl Variant for Dsmem {
    fn name(&self) -> &'static str {
        "dsmem"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::CopyAsync
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[]
    }
    fn min_arch(&self) -> Arch {
        Arch::SM_90
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        if cx.scope.kind != ExecScope::Thread {
            return Err(Decline::new(
                Rule::ExecScope,
                format!(
                    "unsupported exec_scope {}, expected single thread: one thread issues a dsmem copy (`if tid == 0: Tx.copy_async(...)`)",
                    cx.scope.kind
                ),
            ));
        }
        let ops = tma::operands(cx)?;
        if !ops.src_buf.scope.is_shared() || !ops.dst_buf.scope.is_shared() {
            return Err(Decline::new(
                Rule::ScopeAllowed,
                format!(
                    "dsmem copies shared -> shared (of a peer CTA), not {} -> {}",
                    ops.src_buf.scope.name(),
                    ops.dst_buf.scope.name()
                ),
            ));
        }
        for (i, name) in [(tma::PREDICATE, "predicate"), (CTA_MASK, "cta_mask")] {
            if !matches!(cx.call.args.get(i), None | Some(TileArg::None)) {
                return Err(Decline::new(Rule::Config, format!("a dsmem copy takes no `{name}=`")));
            }
        }
        if !matches!(cx.call.args.get(MBAR), Some(TileArg::Barrier(_))) {
            return Err(Decline::new(
                Rule::Mbar,
                "a dsmem copy completes on the peer's mbarrier: pass `mbar=bar.ptr_to([i])` (the barrier at the same offset in the peer CTA)",
            ));
        }
        let rank = remote_rank(cx)?;
        let src = crate::operand::memory(cx, ops.src)?;
        let dst = crate::operand::memory(cx, ops.dst)?;
        let esize = i64::from(ops.src_buf.dtype.bytes());
        for (m, r) in [(&src, ops.src), (&dst, ops.dst)] {
            dense_chain(cx, m, r.buf, esize)?;
        }
        let bytes = crate::copy::CopyOps::elems(ops.src) * esize;
        if bytes < 16 || bytes % 16 != 0 || bytes > i64::from(u32::MAX) {
            return Err(Decline::new(
                Rule::BulkChunk,
                format!("a bulk copy moves a multiple of 16 bytes, and this region is {bytes} B"),
            ));
        }
        let summary = format!("cp.async.bulk shared::cta -> shared::cluster, {bytes} B, one instruction");
        Ok(Plan::new(summary, DsPlan { src, dst, bytes: bytes as u32, rank }))
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<DsPlan>("dsmem")?;
        let (src, src_index) = p.src.start(em)?;
        let (dst, dst_index) = p.dst.start(em)?;
        let Some(TileArg::Barrier(r)) = cx.call.args.get(MBAR) else {
            return Err(Bug("the dsmem plan has no barrier".into()));
        };
        let bar = super::mbar(em, r)?;
        let rank = em.expr(&p.rank)?;
        let rank = em.builder().convert(rank, DType::I32);
        em.push(LStmtKind::Async(AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes: p.bytes, bar, rank }));
        Ok(())
    }
}

/// `remote_cta_id=`: present, an integer, and (when constant) a rank of the cluster.
fn remote_rank(cx: &CallCx) -> Result<Expr, Decline> {
    let size = cx.env.cluster_size();
    if size == 1 {
        return Err(Decline::new(
            Rule::Cluster,
            "a dsmem copy writes a peer CTA of the cluster, and this kernel is not launched in clusters (declare `T.cta_id_in_cluster([n])`)",
        ));
    }
    let Some(TileArg::Scalar(e)) = cx.call.args.get(REMOTE_CTA) else {
        return Err(Decline::new(
            Rule::RemoteCta,
            "a dsmem copy needs `remote_cta_id=` (the peer's rank in the cluster)",
        ));
    };
    if !e.dtype.is_int() {
        return Err(Decline::new(Rule::RemoteCta, format!("`remote_cta_id=` is an integer rank, not {}", e.dtype)));
    }
    if let ExprKind::Int(v) = e.kind {
        if !(0..i64::from(size)).contains(&v) {
            return Err(Decline::new(
                Rule::RemoteCta,
                format!("`remote_cta_id={v}` is not a CTA of the cluster of {size} (ranks 0..{})", size - 1),
            ));
        }
    }
    Ok(e.clone())
}

/// A region that is one dense row-major chain, starting 16-byte aligned.
fn dense_chain(cx: &CallCx, m: &MemOperand, buf: tirx_ir::hir::BufId, esize: i64) -> Result<(), Decline> {
    let name = &cx.buf(buf).name;
    if m.swizzle.is_some() || !m.is_dense_chain() {
        return Err(Decline::new(
            Rule::BulkChunk,
            format!(
                "the region of `{name}` is {} once sliced, not one dense unswizzled chunk; copy it in chunks that are",
                m.tile
            ),
        ));
    }
    let off = crate::lay::m_offset(&m.tile) * esize;
    if off % 16 != 0 || (m.sym_div * esize) % 16 != 0 {
        return Err(Decline::new(
            Rule::Alignment,
            format!(
                "the region of `{name}` starts at byte {off} (steps of {} B); a bulk copy starts 16-byte aligned",
                m.sym_div * esize
            ),
        ));
    }
    Ok(())
}
