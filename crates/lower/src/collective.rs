//! Raw collectives (`s = T.cuda.warp_sum(v, width=8)`, `T.cuda.cta_sum(v, 4,
//! S.ptr_to([0]))`, `T.cuda.shfl_xor(v, 1)`; docs/tile-primitives.md §6) →
//! shuffles, and for the CTA reduction shared memory and two `__syncthreads()`.
//!
//! The member mask of every shuffle is the lanes active at the call (the
//! facts of §1.3: `if lane < 16:` gives `0x0000ffff`), so a call under a lane
//! condition is valid where the reference's fixed `0xffffffff` hangs. What
//! cannot work is an error at the call: a warp reduction whose `width`-lane
//! segments are partly active, a constant shuffle that would read an inactive
//! lane, a CTA reduction that not every thread reaches or whose `num_warps` is
//! not the CTA's, a scratch too small or not in shared memory.
//!
//! Numerics (`docs/numerics.md` §9): sums of 16-bit floats accumulate in f32
//! and round once to the value's type; the warp reduction is an xor
//! butterfly with masks `width/2, …, 1` (every lane of a segment gets the same
//! bits); the CTA reduction is the warp butterfly, then the warps' partials in
//! warp order through a butterfly with masks `num_warps/2, …, 1`. Unlike the
//! reference, every warp reads the partials itself (no broadcast through
//! `scratch[0]`), and the second barrier comes after those reads, so two CTA
//! reductions in a row on one scratch do not race (the reference's second call
//! overwrites `scratch[0]` while other warps may still read the first result).

use crate::build::{Builder, Hw};
use crate::env::Env;
use crate::reduce::call::{combine, compute_type, group_masks, identity};
use crate::scope::{Facts, ScopeView};
use tirx_ir::hir::{BarrierKind, Collective, Kernel, ReduceOp, ShuffleMode, VarId};
use tirx_ir::lir::{CollectiveOp, LBinOp, LExpr, LStmt, LStmtKind, LVarId, MemOp, SyncOp};
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::ExecScope;

/// Lowers one collective; returns its statements and the value of `var`.
pub(crate) fn lower(
    k: &Kernel,
    env: &Env,
    b: &mut Builder,
    at: &Facts,
    op: &Collective,
    var: VarId,
    span: Span,
) -> Result<(Vec<LStmt>, LExpr), Diagnostic> {
    let err = |m: String| Diagnostic::error(span, m).with_label("this collective");
    let value = crate::expr::lower(k, env, b, op.value())?;
    let name = k.var(var).name.clone();
    let dtype = op.value().dtype;
    let mut cx = Cx { b, out: vec![], span, name };
    let result = match op {
        Collective::WarpReduce { op, width, .. } => {
            let mask = active_lanes(at).map_err(err)?;
            whole_segments(mask, *width).map_err(err)?;
            let ct = compute_type(*op, dtype).map_err(|d| err(d.reason))?;
            let x = cx.bind(cx.b.convert(value, ct), ct);
            let x = cx.butterfly(*op, x, &group_masks(*width as i64), ct, mask);
            cx.bind(cx.b.convert(x, dtype), dtype)
        }
        Collective::CtaReduce { op, num_warps, scratch, index, .. } => {
            cta_reduce(&mut cx, k, env, at, (*op, *num_warps, *scratch, index), value, dtype).map_err(err)?
        }
        Collective::Shuffle { mode, lane, width, .. } => {
            let mask = active_lanes(at).map_err(err)?;
            let l = crate::expr::lower(k, env, cx.b, lane)?;
            if let LExpr::Int(c, _) = l {
                reads_active_lanes(*mode, *width, mask, c).map_err(err)?;
            }
            let v = cx.b.var(&cx.name, dtype, None);
            let s = CollectiveOp::Shuffle { var: v, value, mode: *mode, lane_or_delta: l, width: *width, mask };
            cx.push(LStmtKind::Collective(s));
            LExpr::Var(v)
        }
    };
    Ok((cx.out, result))
}

struct Cx<'a> {
    b: &'a mut Builder,
    out: Vec<LStmt>,
    span: Span,
    /// The bound name: partial values are named after it.
    name: String,
}

impl Cx<'_> {
    fn push(&mut self, kind: LStmtKind) {
        self.out.push(LStmt::new(kind, self.span));
    }

    /// `e` as a `let` named after the binding.
    fn bind(&mut self, e: LExpr, t: DType) -> LExpr {
        if matches!(e, LExpr::Var(_)) {
            return e;
        }
        let v = self.b.var(&self.name, t, None);
        self.push(LStmtKind::Let { var: v, value: e });
        LExpr::Var(v)
    }

    fn shuffle(&mut self, name: &str, x: LExpr, mode: ShuffleMode, lane: i64, t: DType, mask: u32) -> LVarId {
        let s = self.b.var(name, t, None);
        let op = CollectiveOp::Shuffle { var: s, value: x, mode, lane_or_delta: LExpr::i32(lane), width: 32, mask };
        self.push(LStmtKind::Collective(op));
        s
    }

    /// `x = op(x, shfl.bfly(x, m))` for each mask, as `let`s.
    fn butterfly(&mut self, op: ReduceOp, mut x: LExpr, masks: &[u32], t: DType, mask: u32) -> LExpr {
        for &m in masks {
            let s = self.shuffle("s", x.clone(), ShuffleMode::Bfly, m as i64, t, mask);
            let v = self.b.var(&self.name, t, None);
            self.push(LStmtKind::Let { var: v, value: combine(op, x, LExpr::Var(s)) });
            x = LExpr::Var(v);
        }
        x
    }
}

/// The lanes active in every active warp, as a member mask: the lane range of
/// the facts (an enclosure when untracked; the simulator checks the rest),
/// minus none — a partial last warp that misses active lanes is an error.
fn active_lanes(at: &Facts) -> Result<u32, String> {
    let a = &at.active;
    let mut mask = 0u32;
    for i in 0..a.lane.extent.max(0) {
        let l = a.lane.offset + i * a.lane.stride;
        if (0..32).contains(&l) {
            mask |= 1 << l;
        }
    }
    if mask == 0 {
        return Err("no lane is active here, so no shuffle can run".into());
    }
    for i in 0..a.warp.extent.max(0) {
        let w = a.warp.offset + i * a.warp.stride;
        let have = (a.threads - 32 * w).clamp(0, 32);
        let exists = if have == 32 { u32::MAX } else { (1u32 << have) - 1 };
        if mask & !exists != 0 {
            return Err(format!(
                "warp {w} of the {}-thread CTA has only {have} lanes, but the shuffles here need lanes {}; run collectives in whole warps",
                a.threads,
                lanes_text(mask)
            ));
        }
    }
    Ok(mask)
}

/// `0-15`, `0-7, 16-23`.
fn lanes_text(mask: u32) -> String {
    let mut parts = vec![];
    let mut l = 0;
    while l < 32 {
        if mask >> l & 1 == 1 {
            let start = l;
            while l < 32 && mask >> l & 1 == 1 {
                l += 1;
            }
            parts.push(if l - 1 == start { start.to_string() } else { format!("{start}-{}", l - 1) });
        } else {
            l += 1;
        }
    }
    parts.join(", ")
}

/// Every aligned segment of `width` lanes is wholly active or wholly inactive.
fn whole_segments(mask: u32, width: u32) -> Result<(), String> {
    let seg = if width == 32 { u32::MAX } else { (1u32 << width) - 1 };
    for s in 0..32 / width {
        let part = mask >> (s * width) & seg;
        if part != 0 && part != seg {
            return Err(format!(
                "a width-{width} warp reduction combines aligned groups of {width} lanes, but only lanes {} are active here",
                lanes_text(mask)
            ));
        }
    }
    Ok(())
}

/// A shuffle with a constant operand reads only active lanes.
fn reads_active_lanes(mode: ShuffleMode, width: u32, mask: u32, operand: i64) -> Result<(), String> {
    for l in (0..32).filter(|l| mask >> l & 1 == 1) {
        let j = mode.source_lane(width, l, operand);
        if mask >> j & 1 == 0 {
            return Err(format!(
                "lane {l} would read lane {j}, which is not active here (active: {}); its value is undefined on a GPU",
                lanes_text(mask)
            ));
        }
    }
    Ok(())
}

/// `T.cuda.cta_reduce`: warp butterflies, the partials through `scratch`, a
/// butterfly over them in every warp, barriers before and after their reads.
fn cta_reduce(
    cx: &mut Cx,
    k: &Kernel,
    env: &Env,
    at: &Facts,
    (op, warps, scratch, index): (ReduceOp, u32, tirx_ir::hir::BufId, &[tirx_ir::hir::Expr]),
    value: LExpr,
    dtype: DType,
) -> Result<LExpr, String> {
    let view = ScopeView::new(ExecScope::Cta, &at.active);
    view.all_threads_active().map_err(|m| format!("every thread of the CTA must reach a CTA reduction: {m}"))?;
    let threads = at.active.threads;
    if threads != 32 * warps as i64 {
        return Err(format!(
            "num_warps={warps} but the CTA has {threads} threads; a CTA reduction runs in {} whole warps of 32",
            (threads + 31) / 32
        ));
    }
    let ct = compute_type(op, dtype).map_err(|d| d.reason)?;
    let sb = k.buf(scratch);
    if sb.dtype != ct && sb.dtype != dtype {
        let want = if ct == dtype { format!("{ct}") } else { format!("{ct} (or the value's {dtype})") };
        return Err(format!("the scratch `{}` is {}; the partials are {want}: allocate it as {ct}", sb.name, sb.dtype));
    }
    let mut idx = Vec::with_capacity(index.len());
    for e in index {
        idx.push(crate::expr::lower(k, env, cx.b, e).map_err(|d| d.message)?);
    }
    let (lb, base) = crate::addr::element(k, env, cx.b, scratch, &idx, false)?;
    let LExpr::Int(base, ity) = base else {
        return Err(format!("the scratch address `{}.ptr_to(..)` must be a constant element", sb.name));
    };
    let elems = cx.b.bufs[lb.0 as usize].elems;
    if base + warps as i64 > elems {
        return Err(format!(
            "the scratch `{}` holds {elems} elements; {warps} partials from element {base} do not fit",
            sb.name
        ));
    }
    let x = cx.bind(cx.b.convert(value, ct), ct);
    let x = cx.butterfly(op, x, &group_masks(32), ct, u32::MAX);
    if warps == 1 {
        return Ok(cx.bind(cx.b.convert(x, dtype), dtype));
    }
    let lane = cx.b.hw(Hw::Lane, "lane");
    let warp = cx.b.hw(Hw::WarpId, "warp_id");
    let slot = |b: &Builder, i: LExpr| b.add(LExpr::Int(base, ity), b.to_int(i, ity));
    let store = LStmtKind::Memory(MemOp::Store { buf: lb, index: slot(cx.b, warp), value: cx.b.convert(x, sb.dtype) });
    let first = LExpr::bin(LBinOp::Eq, lane.clone(), LExpr::i32(0));
    cx.push(LStmtKind::If { cond: first, then_body: vec![LStmt::new(store, cx.span)], else_body: vec![] });
    cx.push(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta)));
    let read = cx.b.convert(LExpr::Load(lb, Box::new(slot(cx.b, lane.clone()))), ct);
    let y = if warps == 32 {
        read
    } else {
        let has = LExpr::bin(LBinOp::Lt, lane, LExpr::i32(warps as i64));
        LExpr::Select(Box::new(has), Box::new(read), Box::new(identity(op, ct)))
    };
    let y = cx.bind(y, ct);
    let mut y = cx.butterfly(op, y, &group_masks(warps as i64), ct, u32::MAX);
    if warps < 32 {
        // Lanes 0..warps hold the result, the others the identity's: take lane 0's.
        let name = cx.name.clone();
        y = LExpr::Var(cx.shuffle(&name, y, ShuffleMode::Idx, 0, ct, u32::MAX));
    }
    cx.push(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta)));
    Ok(cx.bind(cx.b.convert(y, dtype), dtype))
}
