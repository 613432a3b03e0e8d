//! What every reduction variant shares: the call ([`ReduceCall`], [`parse`]),
//! compute types and identities, butterflies over lane masks and the loops
//! around them.

use crate::variant::decline_rules;
use crate::variant::{CallCx, CommonRule, Decline, Emitter};
use tirx_ir::hir::{BufferRegion, ConfigKey, ConfigValue, TileArg, TileOp};
use tirx_ir::lir::{CollectiveOp, LBinOp, LBufId, LExpr, LStmt, LStmtKind, MemOp, ShuffleMode};
use tirx_ir::op::{self, normalize_axes, AttrValue, ReduceOp};
use tirx_ir::DType;

decline_rules! {
    /// The reduction family's decline predicates.
    pub enum ReduceRule {
        /// The destination is not replicated over the lanes a reduction combines.
        DstReplica = "dst_replica",
        /// No split of the region over the threads exists.
        Partition = "partition",
        /// Source and destination layouts do not form a reduction the variant performs.
        ReduceLayout = "reduce_layout",
        /// The register operand's layout does not number the scope's threads.
        RegisterLayout = "register_layout",
        /// A store from registers replicated over threads.
        Replicated = "replicated",
    }
}

/// A parsed reduction call.
#[derive(Clone, Debug)]
pub struct ReduceCall<'a> {
    pub op: ReduceOp,
    pub dst: &'a BufferRegion,
    pub src: &'a BufferRegion,
    /// The reduced dims of the source region, sorted.
    pub axes: Vec<usize>,
    pub accum: bool,
    /// The element type of both operands.
    pub dtype: DType,
}

impl ReduceCall<'_> {
    /// Extents of the source region.
    pub fn src_extents(&self) -> Vec<i64> {
        self.src.ranges.iter().map(|r| r.extent).collect()
    }
    pub fn dst_extents(&self) -> Vec<i64> {
        self.dst.ranges.iter().map(|r| r.extent).collect()
    }
    /// Elements combined into each destination element, and how many destination elements.
    pub fn lengths(&self) -> (i64, i64) {
        let se = self.src_extents();
        let red = self.axes.iter().map(|&d| se[d]).product();
        let spatial = se.iter().enumerate().filter(|(d, _)| !self.axes.contains(d)).map(|(_, e)| e).product();
        (red, spatial)
    }
}

/// The call's operands by the op's row: `(dst, src, axes, accum)`.
pub fn parse<'a>(cx: &CallCx<'a>) -> Result<ReduceCall<'a>, Decline> {
    let TileOp::Reduce(op) = cx.call.op else {
        return Err(Decline::new(CommonRule::Parse, format!("`{}` is not a reduction", cx.call.op.name())));
    };
    let (Some(dst), Some(src)) = (cx.region(&op::DST), cx.region(&op::SRC_REGION)) else {
        return Err(Decline::new(
            CommonRule::Parse,
            format!("`{}` takes a destination and a source region", op.name()),
        ));
    };
    let axes = match cx.arg(&op::AXES) {
        Some(TileArg::Attr(AttrValue::Axes(a))) => a.clone(),
        _ => vec![-1],
    };
    let axes = normalize_axes(&axes, src.ranges.len()).map_err(|m| Decline::new(CommonRule::Parse, m))?;
    let accum = cx.flag(&op::ACCUM);
    let (db, sb) = (cx.buf(dst.buf), cx.buf(src.buf));
    if db.dtype != sb.dtype {
        return Err(Decline::new(
            CommonRule::Dtype,
            format!("`{}` is {} but `{}` is {}", sb.name, sb.dtype, db.name, db.dtype),
        ));
    }
    Ok(ReduceCall { op, dst, src, axes, accum, dtype: sb.dtype })
}

/// The type a reduction computes in (`docs/numerics.md` §9): sums of 16-bit
/// floats accumulate in f32 and round once to the destination; everything
/// else in the element type. Types without a shuffle or arithmetic here decline.
pub fn compute_type(op: ReduceOp, t: DType) -> Result<DType, Decline> {
    match (op, t) {
        // 16-bit sums accumulate in f32 (max and min are exact in their own type).
        (ReduceOp::Sum, DType::F16 | DType::BF16) => Ok(DType::F32),
        (_, DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::I32 | DType::U32 | DType::I64) => Ok(t),
        _ => Err(Decline::new(
            CommonRule::Dtype,
            format!(
                "{} of {t}: reductions compute on float32, float16, bfloat16, float64, int32, uint32 and int64",
                op.name()
            ),
        )),
    }
}

/// The identity of `op` in type `ct`: `-0.0` for float sums (so that `x + id`
/// is `x` for every `x`, signed zeros included), `0` for integer sums, `∓∞`
/// for float max/min, the type's extremes for integers.
pub fn identity(op: ReduceOp, ct: DType) -> LExpr {
    match (op, ct.is_float()) {
        (ReduceOp::Sum, true) => LExpr::Float(-0.0, ct),
        (ReduceOp::Sum, false) => LExpr::Int(0, ct),
        (ReduceOp::Max, true) => LExpr::Float(f64::NEG_INFINITY, ct),
        (ReduceOp::Min, true) => LExpr::Float(f64::INFINITY, ct),
        (ReduceOp::Max, false) => LExpr::Int(ct.int_range().map_or(0, |r| r.0), ct),
        (ReduceOp::Min, false) => LExpr::Int(ct.int_range().map_or(0, |r| r.1), ct),
    }
}

/// `op(a, b)`.
pub fn combine(op: ReduceOp, a: LExpr, b: LExpr) -> LExpr {
    let bin = match op {
        ReduceOp::Sum => LBinOp::Add,
        ReduceOp::Max => LBinOp::Max,
        ReduceOp::Min => LBinOp::Min,
    };
    LExpr::bin(bin, a, b)
}

/// The call's `thread_reduce=`, if given.
pub fn thread_reduce(cx: &CallCx) -> Option<bool> {
    match cx.call.config(ConfigKey::ThreadReduce)?.value {
        ConfigValue::Flag(b) => Some(b),
        _ => None,
    }
}

/// The lane masks of a butterfly over groups of `width` lanes (`width / 2`, …, 1).
pub fn group_masks(width: i64) -> Vec<u32> {
    let mut out = Vec::new();
    let mut m = width / 2;
    while m >= 1 {
        out.push(m as u32);
        m /= 2;
    }
    out
}

/// `16, 8, 4` (or `none`).
pub fn masks_text(masks: &[u32]) -> String {
    if masks.is_empty() {
        return "none".into();
    }
    masks.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ")
}

/// The xor butterfly on `acc[i]` (type `ct`): for each mask, widest first,
/// the value is combined with the same register of lane `lane ^ mask`
/// (`let s = shfl.bfly(acc[i], m); acc[i] = op(acc[i], s)`). `member` is the
/// lanes that execute it together. Every lane of a group ends with the same
/// value (the combine steps are commutative).
pub fn butterfly(
    em: &mut Emitter,
    op: ReduceOp,
    acc: LBufId,
    i: &LExpr,
    masks: &[u32],
    ct: DType,
    member: u32,
) -> Vec<LStmt> {
    let mut out = Vec::new();
    for &m in masks {
        let s = em.var("s", ct, None);
        let cur = LExpr::Load(acc, Box::new(i.clone()));
        let shfl = CollectiveOp::Shuffle {
            var: s,
            value: cur.clone(),
            mode: ShuffleMode::Bfly,
            lane_or_delta: LExpr::i32(m as i64),
            width: 32,
            mask: member,
        };
        out.push(LStmt::new(LStmtKind::Collective(shfl), em.span));
        let value = combine(op, cur, LExpr::Var(s));
        out.push(LStmt::new(LStmtKind::Memory(MemOp::Store { buf: acc, index: i.clone(), value }), em.span));
    }
    out
}

/// A loop variable `name` over `0..n`, or none when `n == 1` (the body then uses 0).
pub fn loop_var(em: &mut Emitter, name: &str, n: i64) -> Option<tirx_ir::lir::LVarId> {
    (n > 1).then(|| em.var(name, DType::I32, Some((0, n - 1))))
}

/// `for v in 0..n { body }`, or the body itself without a variable.
pub fn wrap_loop(em: &Emitter, v: Option<tirx_ir::lir::LVarId>, n: i64, unroll: bool, body: Vec<LStmt>) -> Vec<LStmt> {
    match v {
        None => body,
        Some(v) => vec![LStmt::new(
            LStmtKind::For { var: v, begin: LExpr::i32(0), extent: LExpr::i32(n), unroll, body },
            em.span,
        )],
    }
}

/// The lanes of each warp that run a butterfly among `threads` cooperating
/// threads: the whole warp, or the first `threads` lanes of a CTA smaller
/// than a warp; a CTA whose last warp is partial has no one mask.
pub fn member_mask(threads: i64) -> Result<u32, Decline> {
    if threads % 32 == 0 {
        Ok(u32::MAX)
    } else if threads < 32 {
        Ok((1u32 << threads) - 1)
    } else {
        Err(Decline::new(
            ReduceRule::Partition,
            format!("the {threads} threads are not whole warps: the last warp's shuffles would need another lane mask"),
        ))
    }
}

/// Both operands must be in `scope` memory (registers or shared).
pub fn operand_scopes(cx: &CallCx, call: &ReduceCall, shared: bool, variant: &str) -> Result<(), Decline> {
    for r in [call.dst, call.src] {
        let b = cx.buf(r.buf);
        let ok = if shared { b.scope.is_shared() } else { b.scope == tirx_ir::hir::MemScope::Local };
        if !ok {
            let want =
                if shared { "shared memory (\"shared\" or \"shared.dyn\")" } else { "registers (scope=\"local\")" };
            return Err(Decline::new(
                CommonRule::OperandScope,
                format!("`{}` is in {} memory; `{variant}` reduces {want}", b.name, b.scope.name()),
            ));
        }
    }
    Ok(())
}

/// `, accum: op(result, old dst)` for summaries.
pub fn accum_text(call: &ReduceCall) -> &'static str {
    if call.accum {
        "; accum: the old destination is combined last"
    } else {
        ""
    }
}
