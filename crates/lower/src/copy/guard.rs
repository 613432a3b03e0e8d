//! Guarded copies (`mask=`, `other=`, `clip=True`; docs/tile-primitives.md §3.3): which
//! elements of a register ↔ memory copy move, decided per element from its coordinates.
//!
//! The condition of an element is the call's mask at its coordinates in the destination
//! region, and with `clip=True` that its memory coordinate `begin + c` lies inside the
//! buffer on every dim the bounds pass could not prove (a ragged row's tail, a tile past
//! the matrix's edge). Each vector is tested as a whole: when its coordinates are an
//! arithmetic progression and the condition is *convex* along it (a conjunction of
//! comparisons affine in the coordinates: `j < n`, `j <= i + off`), it holds on the whole
//! vector iff it holds at both ends; otherwise every lane is tested. Whole vectors keep
//! their vector access; the others fall to one guarded scalar access per lane, and a load
//! writes `other` where it does not read (or leaves the register as it was).

pub(crate) use super::call::requested;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter};
use std::collections::HashMap;
use tirx_ir::hir::{BinOp, BufferRegion, Expr, ExprKind, MaskFn, TileArg, UnOp, VarId};
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind};
use tirx_ir::op;
use tirx_ir::DType;

/// The parts of a guarded copy's plan. Each element has coordinates in one region of the
/// copy (the *coordinate region*: the register side, or the global side of a global ↔ shared
/// copy); the clipped region's and the mask's coordinates are read from them.
#[derive(Clone, Debug)]
pub(crate) struct Guard {
    /// Coordinate offset of each lane of a vector, per coordinate-region dim.
    pub lanes: Vec<Vec<i64>>,
    /// The vector's condition is its two ends' (see the module doc).
    pub ends_only: bool,
    /// The memory region `clip=True` bounds, and per dim of it the coordinate dim giving its
    /// coordinate (unit dims: none).
    pub clipped: BufferRegion,
    pub clip_from: Vec<Option<usize>>,
    /// Per memory dim: whether `begin + c >= 0` and `begin + c < size` must be tested.
    pub clip: Vec<(bool, bool)>,
    /// Per mask parameter (a dim of the destination), the coordinate dim giving it.
    pub mask_from: Vec<Option<usize>>,
    /// Whether the destination is written with `other` where nothing is read.
    pub fill: bool,
}

/// What a guarded copy is made of: the region the coordinates are of, the memory region
/// `clip=True` bounds, the destination (the mask's), and whether `other=` may fill it.
pub(crate) struct Sides<'a> {
    pub coords: &'a BufferRegion,
    pub clipped: &'a BufferRegion,
    pub dst: &'a BufferRegion,
    pub load: bool,
}

/// The guard of a copy; `lanes` are the vector's lane coordinates (each a progression or not,
/// `progression`).
pub(crate) fn plan(cx: &CallCx, x: Sides, lanes: Vec<Vec<i64>>, progression: bool) -> Result<Guard, Decline> {
    let other = cx.arg(&op::OTHER).is_some();
    if other && !x.load {
        return Err(Decline::new(
            CommonRule::Parse,
            "`other=` is what a load writes where it does not read; a store writes nothing there: drop it",
        ));
    }
    let mask = mask(cx)?;
    if let Some(m) = mask {
        if m.params.len() != x.dst.ranges.len() {
            return Err(Decline::new(
                CommonRule::Parse,
                format!(
                    "the mask takes {} coordinate(s) but the destination region has {} dim(s): one parameter per dim",
                    m.params.len(),
                    x.dst.ranges.len()
                ),
            ));
        }
    }
    if mask.is_none() && !cx.flag(&op::CLIP) {
        return Err(Decline::new(
            CommonRule::Parse,
            "`other=` fills the elements a guarded load does not read: give `mask=` or `clip=True` with it",
        ));
    }
    let clip = if cx.flag(&op::CLIP) {
        crate::bounds::clip_guards(cx.kernel, cx.env, cx.facts, x.clipped)
    } else {
        vec![(false, false); x.clipped.ranges.len()]
    };
    let convex = mask.is_none_or(|m| convex(&m.cond, &m.params));
    Ok(Guard {
        lanes,
        ends_only: progression && convex,
        clipped: x.clipped.clone(),
        clip_from: pairing(x.coords, x.clipped),
        clip,
        mask_from: pairing(x.coords, x.dst),
        fill: other,
    })
}

/// Per dim of `to`, the dim of `from` whose coordinate it has: the regions' non-unit dims in
/// order (a copy's two regions have the same non-unit extents); unit dims have none.
fn pairing(from: &BufferRegion, to: &BufferRegion) -> Vec<Option<usize>> {
    if std::ptr::eq(from, to) {
        return (0..to.ranges.len()).map(Some).collect();
    }
    let non_unit =
        |r: &BufferRegion| -> Vec<usize> { (0..r.ranges.len()).filter(|&d| r.ranges[d].extent != 1).collect() };
    let mut out = vec![None; to.ranges.len()];
    for (t, f) in non_unit(to).into_iter().zip(non_unit(from)) {
        out[t] = Some(f);
    }
    out
}

fn mask<'a>(cx: &CallCx<'a>) -> Result<Option<&'a MaskFn>, Decline> {
    match cx.arg(&op::COPY_MASK) {
        None => Ok(None),
        Some(TileArg::Mask(m)) => Ok(Some(m)),
        Some(_) => {
            Err(Decline::new(CommonRule::Parse, "`mask=` takes a lambda of the coordinates (`lambda i, j: j < n`)"))
        }
    }
}

/// Which ends of the clipped dims a test covers: a vector's first lane has the least
/// coordinate on every dim and its last lane the greatest (lane offsets are mixed-radix
/// numbers with non-negative steps), so the whole vector is inside iff those two are.
#[derive(Clone, Copy)]
pub(crate) struct Ends {
    pub lo: bool,
    pub hi: bool,
    pub mask: bool,
}

impl Ends {
    pub const ALL: Ends = Ends { lo: true, hi: true, mask: true };
}

/// One lane of a guarded vector: its copy, and what a load writes where it does not read.
pub(crate) struct Lane {
    pub copy: LStmt,
    pub fill: Option<LStmt>,
}

/// A clipped dim's begin and size, lowered once per vector, in the type its tests compare in.
type Bounds = Vec<Option<(LExpr, LExpr, DType)>>;

impl Guard {
    /// The statements of one vector whose lanes have the coordinates `coords`: `vector` where
    /// every lane holds (its two ends where that decides, see the module doc), else each lane
    /// as `if its condition { copy } else { fill }`; a one-lane vector is its lane.
    pub(crate) fn vector(
        &self,
        cx: &CallCx,
        em: &mut Emitter,
        coords: &[Vec<LExpr>],
        vector: LStmt,
        lanes: Vec<Lane>,
    ) -> Result<Vec<LStmt>, Bug> {
        let bounds = self.bounds(cx, em)?;
        let span = em.span;
        let mut whole = Vec::new();
        let mut conds = Vec::with_capacity(lanes.len());
        for (c, ends) in coords.iter().zip(self.vector_ends()) {
            whole.extend(self.cond(cx, em, &bounds, c, ends)?);
            conds.push(self.cond(cx, em, &bounds, c, Ends::ALL)?.unwrap_or(LExpr::Bool(true)));
        }
        if lanes.len() > 1 && conds.iter().all(|c| *c == conds[0]) {
            // Every lane has the same test (the clipped dims are not along the vector): the
            // whole vector holds or none does, so no lane moves on its own.
            let fills: Vec<LStmt> = lanes.into_iter().filter_map(|l| l.fill).collect();
            let cond = conds.swap_remove(0);
            return Ok(vec![LStmt::new(LStmtKind::If { cond, then_body: vec![vector], else_body: fills }, span)]);
        }
        let per_lane: Vec<LStmt> = lanes
            .into_iter()
            .zip(conds)
            .map(|(lane, cond)| {
                let if_lane =
                    LStmtKind::If { cond, then_body: vec![lane.copy], else_body: lane.fill.into_iter().collect() };
                LStmt::new(if_lane, span)
            })
            .collect();
        if per_lane.len() == 1 {
            return Ok(per_lane);
        }
        let all = whole.into_iter().reduce(|a, c| LExpr::bin(LBinOp::And, a, c)).unwrap_or(LExpr::Bool(true));
        Ok(vec![LStmt::new(LStmtKind::If { cond: all, then_body: vec![vector], else_body: per_lane }, span)])
    }

    /// `other=` converted to `dtype` (the destination's), where the copy fills.
    pub(crate) fn fill_value(&self, cx: &CallCx, em: &Emitter, dtype: DType) -> Result<Option<LExpr>, Bug> {
        let (true, Some(e)) = (self.fill, cx.scalar(&op::OTHER)) else { return Ok(None) };
        let v = crate::expr::lower(cx.kernel, cx.env, em.builder(), e)
            .map_err(|d| Bug(format!("`other` does not lower: {}", d.message)))?;
        Ok(Some(em.builder().convert(v, dtype)))
    }

    /// Each clipped dim's begin and size (none where the dim needs no test).
    fn bounds(&self, cx: &CallCx, em: &Emitter) -> Result<Bounds, Bug> {
        let mem = &self.clipped;
        let buf = cx.buf(mem.buf);
        let lower = |e: &Expr| {
            crate::expr::lower(cx.kernel, cx.env, em.builder(), e)
                .map_err(|d| Bug(format!("a region begin does not lower: {}", d.message)))
        };
        let mut out = Vec::with_capacity(self.clip.len());
        for (d, &(lo, hi)) in self.clip.iter().enumerate() {
            if !(lo || hi) {
                out.push(None);
                continue;
            }
            let begin = lower(&mem.ranges[d].begin)?;
            let size = match (&buf.dyn_outer, d) {
                (Some(e), 0) => lower(e)?,
                _ => LExpr::i32(buf.shape[d]),
            };
            let b = em.builder();
            // 64-bit only where a begin or size is.
            let wide = [&begin, &size].iter().any(|e| b.ity(e) == DType::I64) || buf.shape[d] > i32::MAX as i64;
            let t = if wide { DType::I64 } else { DType::I32 };
            out.push(Some((b.to_int(begin, t), b.to_int(size, t), t)));
        }
        Ok(out)
    }

    /// The condition at the coordinates `c`, the parts `ends` names.
    fn cond(&self, cx: &CallCx, em: &Emitter, bounds: &Bounds, c: &[LExpr], ends: Ends) -> Result<Option<LExpr>, Bug> {
        let from = |m: &[Option<usize>]| -> Vec<LExpr> {
            m.iter().map(|r| r.map_or(LExpr::i32(0), |d| c[d].clone())).collect()
        };
        let mem_c = from(&self.clip_from);
        let mut conds = Vec::new();
        for (d, (&(lo, hi), dim)) in self.clip.iter().zip(bounds).enumerate() {
            let (lo, hi) = (lo && ends.lo, hi && ends.hi);
            let Some((begin, size, t)) = dim.as_ref().filter(|_| lo || hi) else { continue };
            let b = em.builder();
            let at = b.add(begin.clone(), b.to_int(mem_c[d].clone(), *t));
            if lo {
                conds.push(LExpr::bin(LBinOp::Ge, at.clone(), LExpr::Int(0, *t)));
            }
            if hi {
                conds.push(LExpr::bin(LBinOp::Lt, at, size.clone()));
            }
        }
        if let (true, Some(TileArg::Mask(m))) = (ends.mask, cx.arg(&op::COPY_MASK)) {
            let bound: HashMap<VarId, LExpr> = m.params.iter().copied().zip(from(&self.mask_from)).collect();
            let v = crate::expr::lower_with(cx.kernel, cx.env, em.builder(), &m.cond, &bound)
                .map_err(|d| Bug(format!("the mask does not lower: {}", d.message)))?;
            conds.push(v);
        }
        Ok(conds.into_iter().reduce(|a, b| LExpr::bin(LBinOp::And, a, b)))
    }

    /// Whether no element needs a test (no mask, every clipped dim proven inside): the copy
    /// is then a plain one.
    pub(crate) fn is_trivial(&self, cx: &CallCx) -> bool {
        cx.arg(&op::COPY_MASK).is_none() && self.clip.iter().all(|&(lo, hi)| !(lo || hi))
    }

    /// What each lane's test contributes to the whole vector's.
    fn vector_ends(&self) -> Vec<Ends> {
        let n = self.lanes.len();
        (0..n).map(|l| Ends { lo: l == 0, hi: l + 1 == n, mask: !self.ends_only || l == 0 || l + 1 == n }).collect()
    }
}

/// Whether `e` holding at both ends of a segment of coordinates implies it holds along
/// it: a conjunction of comparisons (not `!=`) whose sides are affine in the parameters.
pub(crate) fn convex(e: &Expr, params: &[VarId]) -> bool {
    let uses = |x: &Expr| params.iter().any(|&p| x.uses(p));
    if !uses(e) {
        return true;
    }
    match &e.kind {
        ExprKind::Binary(BinOp::And, a, b) => convex(a, params) && convex(b, params),
        ExprKind::Binary(BinOp::BitAnd, a, b) if e.dtype == DType::Bool => convex(a, params) && convex(b, params),
        ExprKind::Binary(BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq, a, b) => {
            affine(a, params) && affine(b, params)
        }
        _ => false,
    }
}

/// Whether `e` is affine in the parameters (each product has at most one factor using them).
fn affine(e: &Expr, params: &[VarId]) -> bool {
    let uses = |x: &Expr| params.iter().any(|&p| x.uses(p));
    if !uses(e) {
        return true;
    }
    match &e.kind {
        ExprKind::Var(_) => true,
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => affine(a, params) && affine(b, params),
        ExprKind::Binary(BinOp::Mul, a, b) => (!uses(a) && affine(b, params)) || (!uses(b) && affine(a, params)),
        ExprKind::Unary(UnOp::Neg, a) => affine(a, params),
        // Widening casts are monotone; a narrowing one could wrap.
        ExprKind::Cast(a) => (e.dtype.is_float() || e.dtype.bits() >= 32) && affine(a, params),
        _ => false,
    }
}
