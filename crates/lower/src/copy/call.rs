//! What every copy variant shares: the copy's two regions ([`operands`],
//! `validate_copy_op`; region bounds are checked once per call, before
//! dispatch, by the bounds pass), the memory-pair predicate, and the global ↔
//! shared pair ([`GsOperands`]) with its emission helpers. Each region is
//! resolved by the one operand model (the crate's `operand` module).

use super::partition::Sides;
use crate::addr::dim_offset;
use crate::affine::Affine;
use crate::lay;
use crate::operand::{self, MemOperand};
use crate::variant::decline_rules;
use crate::variant::{CallCx, CommonRule, Decline, Emitter};
use tirx_ir::hir::{Buffer, BufferRegion, MemScope};
use tirx_ir::lir::{CacheHint, LBufId, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op;
use tirx_ir::DType;
use tirx_layout::TileLayout;

decline_rules! {
    /// The copy family's decline predicates.
    pub enum CopyRule {
        /// One operand does not split along the iters of the other.
        Align = "align",
        /// An access would not be aligned to its width.
        Alignment = "alignment",
        /// The region does not divide over the cooperating threads.
        DividesThreadCnt = "divides_thread_cnt",
        /// No thread can be elected to do the work.
        Elect = "elect",
        /// The register operand is not the instruction's fragment.
        Fragment = "fragment",
        /// A more general variant would not move wider vectors than the plain one already does.
        NotWider = "not_wider",
        /// No thread owns every element it would copy.
        OwnerComputes = "owner_computes",
        /// No split of the region over the threads exists.
        Partition = "partition",
        /// A guarded copy (`mask=`, `other=`, `clip=`) this variant cannot guard.
        Guard = "guard",
        /// A region does not hold the number of elements the variant moves (`vec_128b`: one 16-B vector).
        RegionSize = "region_size",
        /// The register operand's layout does not number the scope's threads.
        RegisterLayout = "register_layout",
        /// A store from registers replicated over threads.
        Replicated = "replicated",
        /// A swizzle the instruction cannot keep together.
        Swizzle = "swizzle",
        /// The copy is not valid (dtype, shapes, bounds).
        ValidateCopyOp = "validate_copy_op",
    }
}

/// The two operands of a copy.
pub struct CopyOps<'a> {
    pub dst: &'a BufferRegion,
    pub src: &'a BufferRegion,
    pub dst_buf: &'a Buffer,
    pub src_buf: &'a Buffer,
}

impl CopyOps<'_> {
    /// Non-unit extents of a region (what must match between the two sides).
    pub fn non_unit(r: &BufferRegion) -> Vec<i64> {
        r.ranges.iter().map(|g| g.extent).filter(|&e| e != 1).collect()
    }
    pub fn elems(r: &BufferRegion) -> i64 {
        r.ranges.iter().fold(1i64, |a, g| a.saturating_mul(g.extent))
    }
}

/// `dst`/`src` as regions, checked by `validate_copy_op` (§3.1): same dtype,
/// equal non-unit extents, one range per buffer dim, uniform begins (bounds
/// were checked before dispatch).
/// Declines guarded copies (`mask=`, `other=`, `clip=`): only [`operands_guarded`]'s callers
/// lower them.
pub fn operands<'a>(cx: &CallCx<'a>) -> Result<CopyOps<'a>, Decline> {
    unguarded(cx)?;
    operands_guarded(cx)
}

/// Whether the call asks for a guarded copy.
pub(crate) fn requested(cx: &CallCx) -> bool {
    cx.arg(&op::COPY_MASK).is_some() || cx.arg(&op::OTHER).is_some() || cx.flag(&op::CLIP)
}

/// The decline of a variant that copies every element of its regions.
fn unguarded(cx: &CallCx) -> Result<(), Decline> {
    if requested(cx) {
        return Err(Decline::new(
            CopyRule::Guard,
            "this variant copies every element; `mask=`, `other=` and `clip=` are lowered by `reg` (registers ↔ memory) and `gmem_smem_predicated` (global ↔ shared)",
        ));
    }
    Ok(())
}

/// [`operands`] for a variant that lowers guarded copies.
pub fn operands_guarded<'a>(cx: &CallCx<'a>) -> Result<CopyOps<'a>, Decline> {
    operands_matching(cx, |dst, src| {
        let (de, se) = (CopyOps::non_unit(dst), CopyOps::non_unit(src));
        (de != se).then(|| format!("dst region shape {de:?} != src region shape {se:?}"))
    })
}

/// Two buffer regions of one dtype whose extents `mismatch` accepts (it says why not),
/// each naming every dim of its buffer with uniform begins: the checks every copy-like
/// op shares (`copy`'s and the async copies' `validate_copy_op`).
pub(crate) fn operands_matching<'a>(
    cx: &CallCx<'a>,
    mismatch: impl Fn(&BufferRegion, &BufferRegion) -> Option<String>,
) -> Result<CopyOps<'a>, Decline> {
    let (Some(dst), Some(src)) = (cx.region(&op::DST), cx.region(&op::SRC_REGION)) else {
        return Err(Decline::new(CopyRule::ValidateCopyOp, "copy needs two buffer regions (dst, src)"));
    };
    let ops = CopyOps { dst, src, dst_buf: cx.buf(dst.buf), src_buf: cx.buf(src.buf) };
    if ops.dst_buf.dtype != ops.src_buf.dtype {
        return Err(Decline::new(
            CopyRule::ValidateCopyOp,
            format!(
                "dtype mismatch: src `{}` is {}, dst `{}` is {}",
                ops.src_buf.name, ops.src_buf.dtype, ops.dst_buf.name, ops.dst_buf.dtype
            ),
        ));
    }
    if let Some(why) = mismatch(dst, src) {
        return Err(Decline::new(CopyRule::ValidateCopyOp, why));
    }
    for (r, b) in [(dst, ops.dst_buf), (src, ops.src_buf)] {
        check_rank(r, b)?;
        crate::operand::check_uniform(cx, r, b)?;
    }
    Ok(ops)
}

/// The region names every dim of its buffer. Bounds are not checked here:
/// the statement lowering checks every call's regions before dispatch
/// ([`crate::bounds::region`]) and never dispatches a provably outside one
/// (unless [`crate::options::LowerOptions::defer_bounds`] lets it through with a
/// simulator check), so every variant sees the same verdict once.
pub(crate) fn check_rank(r: &BufferRegion, b: &Buffer) -> Result<(), Decline> {
    if r.ranges.len() != b.shape.len() {
        return Err(Decline::new(
            CopyRule::ValidateCopyOp,
            format!("`{}` has {} dims, the region {}", b.name, b.shape.len(), r.ranges.len()),
        ));
    }
    Ok(())
}

/// `off` plus the symbolic element offset `sym`, in index type `ity`.
pub(super) fn add_sym(em: &mut Emitter, off: LExpr, sym: &Affine, ity: DType) -> Result<LExpr, Decline> {
    sym.add_to(off, &|v| em.env.var(v), em.builder(), ity)
        .ok_or_else(|| Decline::new(CommonRule::SymbolicBegin, "a region begin uses a variable not defined here"))
}

/// `e` as a per-thread `let` named `name` appended to `out`, unless it is
/// already a variable or a constant.
pub(super) fn bind(em: &mut Emitter, out: &mut Vec<LStmt>, name: &str, e: LExpr) -> LExpr {
    if matches!(e, LExpr::Var(_) | LExpr::Int(..)) {
        return e;
    }
    let t = em.builder().ity(&e);
    let range = em.builder().bounds(&e);
    let v = em.var(name, t, range);
    out.push(LStmt::new(LStmtKind::Let { var: v, value: e }, em.span));
    LExpr::Var(v)
}

/// `src -> dst` memory scopes must be one of `allowed`.
pub fn scope_pair(ops: &CopyOps, allowed: &[(MemScope, MemScope)]) -> Result<(), Decline> {
    let norm = |s: MemScope| if s.is_shared() { MemScope::Shared } else { s };
    let pair = (norm(ops.src_buf.scope), norm(ops.dst_buf.scope));
    if allowed.contains(&pair) {
        return Ok(());
    }
    let list: Vec<String> = allowed.iter().map(|(a, b)| format!("{}->{}", a.name(), b.name())).collect();
    Err(Decline::new(
        CommonRule::ScopeAllowed,
        format!(
            "unsupported memory scopes src={} dst={}; allowed: {}",
            ops.src_buf.scope.name(),
            ops.dst_buf.scope.name(),
            list.join(", ")
        ),
    ))
}

// ---------------------------------------------------------------- global ↔ shared

/// The global and shared operands of a gmem ↔ smem copy, each sliced to its region.
pub(super) struct GsOperands {
    pub(super) g: MemOperand,
    pub(super) s: MemOperand,
    pub(super) g_is_src: bool,
    pub(super) elem_bytes: i64,
}

impl GsOperands {
    /// Slices both sides; only the shared one may be swizzled.
    pub(super) fn resolve(cx: &CallCx, ops: &CopyOps) -> Result<GsOperands, Decline> {
        let (g_reg, s_reg, g_is_src) =
            if ops.src_buf.scope == MemScope::Global { (ops.src, ops.dst, true) } else { (ops.dst, ops.src, false) };
        let g = operand::memory(cx, g_reg)?;
        if g.swizzle.is_some() {
            return Err(Decline::new(
                CommonRule::Layout,
                format!("global operand `{}` is swizzled; only the shared side may be", cx.buf(g_reg.buf).name),
            ));
        }
        let s = operand::memory(cx, s_reg)?;
        Ok(GsOperands { g, s, g_is_src, elem_bytes: cx.buf(g_reg.buf).dtype.bytes() as i64 })
    }

    /// The partition problem over `threads` threads.
    pub(super) fn sides(&self, threads: i64) -> Sides<'_> {
        Sides {
            g: &self.g.tile,
            s: &self.s.tile,
            elem_bytes: self.elem_bytes,
            threads,
            chunk: self.s.swizzle.map(|sw| 1i64 << sw.per_element),
            g_sym_div: self.g.sym_div,
            s_sym_div: self.s.sym_div,
        }
    }

    /// `(global, shared)` regions of the call's operands.
    pub(super) fn regions<'a>(g_is_src: bool, ops: &CopyOps<'a>) -> (&'a BufferRegion, &'a BufferRegion) {
        if g_is_src {
            (ops.src, ops.dst)
        } else {
            (ops.dst, ops.src)
        }
    }
}

/// The call's thread id, or 0 when one thread does the copy.
pub(super) fn thread_id(cx: &CallCx, em: &mut Emitter, threads: i64) -> LExpr {
    match cx.scope.tid_kind() {
        Some(k) if threads > 1 => em.thread_id(k),
        _ => LExpr::i32(0),
    }
}

/// The memory pairs the global ↔ shared variants move.
pub(super) const GLOBAL_SHARED: &[(MemScope, MemScope)] =
    &[(MemScope::Global, MemScope::Shared), (MemScope::Shared, MemScope::Global)];

/// Element `l` of the region split over the side's own shard.
pub(super) fn linear_offset(em: &Emitter, t: &TileLayout, l: &LExpr, ity: DType) -> LExpr {
    let b = em.builder();
    let base = LExpr::Int(lay::m_offset(t), ity);
    b.add(dim_offset(b, &t.shard, b.to_int(l.clone(), ity)), base)
}

pub(super) fn copy_stmt(em: &Emitter, dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, vec: u32) -> LStmt {
    let kind = if vec == 1 {
        LStmtKind::Memory(MemOp::Store { buf: dst, index: dst_index, value: LExpr::Load(src, Box::new(src_index)) })
    } else {
        LStmtKind::Memory(MemOp::VecCopy { dst, dst_index, src, src_index, lanes: vec, cache: CacheHint::Default })
    };
    LStmt::new(kind, em.span)
}
