//! reduce → shared (priority 10, docs/tile-primitives.md §3.14).
//!
//! **Accepts** `sum`, `max`, `min` at thread, warp, warpgroup or cta scope
//! with every thread active when both operands are in shared memory
//! (`shared`, `shared.dyn`) with memory-only layouts (swizzles allowed), the
//! destination holds the kept extents (unit dims aside), the region begins
//! agree across the scope's threads (`uniform_region`), and the element type
//! is one the reductions compute on. `thread_reduce` is a register key and
//! declines (`config`). A CTA whose last warp is partial declines when it
//! would need shuffles (`partition`).
//!
//! **Algorithm** (`T` threads, `L` elements per reduction, `S` reductions):
//! groups of `g = min(next_pow2(L), 32, largest power of two dividing T)`
//! threads (the reference's `min(next_pow2(L), 32, T)` is no power of two for a
//! CTA of 24 threads) — or `g = 1` when the innermost dim of the source is kept
//! and `S ≥ T`, so that consecutive threads read consecutive elements of a row
//! instead of a column (the reference's groups read a 32-float-wide tile's
//! column with 32-way bank conflicts); `T / g` groups take `T / g` destination elements per
//! step, `⌈S / (T/g)⌉` steps. Lane `i` of a group folds the elements
//! `i, i + g, i + 2g, …` of its reduction (row-major over the reduced
//! coordinates) into a register, from the identity, in the compute type
//! (`docs/numerics.md` §9); an xor butterfly with masks `g/2, …, 1` (all lanes
//! take part, groups past the last element with the identity, so the member
//! mask is the whole warp) leaves the result in every lane; lane 0 of the group
//! stores it (combined with the old value under `accum`), converted once.
//! The call ends with the scope's barrier (`Emitter::scope_barrier`):
//! `__syncthreads()`, the warpgroup's own `bar.sync 1 + wg_id, 128` (the
//! reference hard-codes barrier 8 for every warpgroup), `__syncwarp()`; none at
//! thread scope, where one thread folds sequentially.
//!
//! **Generated code** (`Tx.cta.sum(B[0:4], A[0:4, 0:8])`, 32 threads: `g = 8`, 4 groups, 1 step):
//! ```text
//! let grp = tid / 8; let lig = tid % 8
//! acc[0] = -0.0
//! acc[0] = acc[0] + A[grp * 8 + lig]
//! let s = shfl.sync.bfly(acc[0], 4; …); acc[0] = acc[0] + s   … masks 2, 1 …
//! if lig == 0 { B[grp] = acc[0] }
//! cta_sync
//! ```

use super::call::ReduceCall;
use super::call::ReduceRule;
use super::call::{
    accum_text, butterfly, combine, compute_type, identity, masks_text, member_mask, operand_scopes, parse,
};
use crate::addr::split_row_major;
use crate::variant::{barrier_text, Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant, COOPERATIVE_SCOPES};
use tirx_ir::hir::BufferRegion;
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::ExecScope;

pub struct Shared;

struct SharedPlan {
    group: i64,
    /// Destination elements per step (`threads / group`) and steps.
    per_step: i64,
    steps: i64,
    /// Elements each lane folds (`⌈L / group⌉`).
    per_lane: i64,
    red_len: i64,
    spatial: i64,
    ct: DType,
    member: u32,
}

impl Variant for Shared {
    fn name(&self) -> &'static str {
        "shared"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Reduce
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(COOPERATIVE_SCOPES)?;
        let call = parse(cx)?;
        operand_scopes(cx, &call, true, self.name())?;
        let ct = compute_type(call.op, call.dtype)?;
        for r in [call.dst, call.src] {
            let b = cx.buf(r.buf);
            if !crate::lay::tile_of(&b.layout).thread_axes().is_empty() {
                return Err(Decline::new(
                    CommonRule::Layout,
                    format!("`{}` is in shared memory but its layout has thread axes", b.name),
                ));
            }
            crate::operand::check_uniform(cx, r, b)?;
        }
        whole_destination(cx, &call)?;
        let (red_len, spatial) = call.lengths();
        // Threads along the kept innermost dim read consecutive elements (no bank conflicts)
        // when there are reductions enough for all of them; else lanes share each reduction.
        let columns = innermost_kept(&call) && spatial >= t;
        let group = if columns { 1 } else { group_size(red_len, t) };
        let member = if group > 1 { member_mask(t)? } else { u32::MAX };
        let per_step = t / group;
        let steps = (spatial + per_step - 1) / per_step;
        let per_lane = (red_len + group - 1) / group;
        let masks = super::call::group_masks(group);
        let why = if columns {
            format!("the innermost dim is kept and {spatial} reductions cover the {t} threads: one thread each")
        } else {
            format!("min(next_pow2({red_len}) = {}, 32, {t} threads)", next_pow2(red_len))
        };
        let summary = format!(
            "groups of {group} thread{} ({why}), {per_step} reduction{} per step, {steps} step{}; each lane folds {per_lane} element{} strided by {group}; butterfly masks {} in {ct}{}; barrier: {}",
            plural(group),
            plural(per_step),
            plural(steps),
            plural(per_lane),
            masks_text(&masks),
            accum_text(&call),
            barrier_text(cx.scope.kind)
        );
        let mut p = Plan::new(summary, SharedPlan { group, per_step, steps, per_lane, red_len, spatial, ct, member });
        p.vec = Some(1);
        p.rounds = Some((steps * per_lane) as u64);
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<SharedPlan>("shared")?;
        let call = parse(cx)?;
        let kind = cx.scope.kind;
        let tid = match cx.scope.tid_kind() {
            Some(k) if kind != ExecScope::Thread => em.thread_id(k),
            _ => LExpr::i32(0),
        };
        let b = em.builder();
        let (grp, lig) = (b.div_c(tid.clone(), p.group), b.rem_c(tid, p.group));
        let mut lets = vec![];
        let grp = em.bind_i32(&mut lets, "grp", grp);
        let lig = em.bind_i32(&mut lets, "lig", lig);
        em.stmts.extend(lets);
        let acc = em.local_buf("acc", p.ct, 1);
        let at0 = || Box::new(LExpr::i32(0));
        let step = super::call::loop_var(em, "step", p.steps);
        let b = em.builder();
        let spa = match step {
            Some(s) => b.add(b.mul(LExpr::Var(s), LExpr::i32(p.per_step)), grp.clone()),
            None => grp.clone(),
        };
        let mut body = vec![];
        let spa = em.bind_i32(&mut body, "spa", spa);
        let valid = (p.spatial % p.per_step != 0).then(|| LExpr::bin(LBinOp::Lt, spa.clone(), LExpr::i32(p.spatial)));
        body.push(LStmt::new(
            LStmtKind::Memory(MemOp::Store { buf: acc, index: LExpr::i32(0), value: identity(call.op, p.ct) }),
            em.span,
        ));
        // Lane `lig` folds elements lig, lig + g, ... of its reduction.
        let r = super::call::loop_var(em, "r", p.per_lane);
        let b = em.builder();
        let red = match r {
            Some(r) => b.add(b.mul(LExpr::Var(r), LExpr::i32(p.group)), lig.clone()),
            None => lig.clone(),
        };
        let (src, si) = element(em, call.src, &call, &spa, Some(&red))?;
        let load = em.builder().convert(LExpr::Load(src, Box::new(si)), p.ct);
        let mut fold = vec![LStmt::new(
            LStmtKind::Memory(MemOp::Store {
                buf: acc,
                index: LExpr::i32(0),
                value: combine(call.op, LExpr::Load(acc, at0()), load),
            }),
            em.span,
        )];
        let mut guard = valid.clone();
        if p.red_len % p.group != 0 {
            guard = and(guard, Some(LExpr::bin(LBinOp::Lt, red, LExpr::i32(p.red_len))));
        }
        if let Some(c) = guard {
            fold = vec![LStmt::new(LStmtKind::If { cond: c, then_body: fold, else_body: vec![] }, em.span)];
        }
        body.extend(super::call::wrap_loop(em, r, p.per_lane, p.per_lane <= crate::operand::UNROLL_ELEMS, fold));
        body.extend(butterfly(em, call.op, acc, &LExpr::i32(0), &super::call::group_masks(p.group), p.ct, p.member));
        // Lane 0 of the group stores.
        let (dst, di) = element(em, call.dst, &call, &spa, None)?;
        let mut value = LExpr::Load(acc, at0());
        if call.accum {
            value = combine(call.op, value, em.builder().convert(LExpr::Load(dst, Box::new(di.clone())), p.ct));
        }
        let value = em.builder().convert(value, call.dtype);
        let mut store = vec![LStmt::new(LStmtKind::Memory(MemOp::Store { buf: dst, index: di, value }), em.span)];
        let first = (p.group > 1).then(|| LExpr::bin(LBinOp::Eq, lig.clone(), LExpr::i32(0)));
        if let Some(c) = and(valid, first) {
            store = vec![LStmt::new(LStmtKind::If { cond: c, then_body: store, else_body: vec![] }, em.span)];
        }
        body.extend(store);
        let out = super::call::wrap_loop(em, step, p.steps, false, body);
        em.stmts.extend(out);
        if let Some(bar) = em.scope_barrier(kind) {
            em.push(bar);
        }
        Ok(())
    }
}

fn plural(n: i64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn next_pow2(n: i64) -> i64 {
    (n.max(1) as u64).next_power_of_two() as i64
}

/// `min(next_pow2(len), 32)`, halved until it divides the thread count (whole groups only).
fn group_size(len: i64, threads: i64) -> i64 {
    let mut g = next_pow2(len).min(32);
    while g > 1 && threads % g != 0 {
        g /= 2;
    }
    g
}

/// The last non-unit dim of the source region is a kept one.
fn innermost_kept(call: &ReduceCall) -> bool {
    let se = call.src_extents();
    (0..se.len()).rev().find(|&d| se[d] != 1).is_some_and(|d| !call.axes.contains(&d))
}

/// The destination must hold the kept extents (unit dims aside).
fn whole_destination(cx: &CallCx, call: &ReduceCall) -> Result<(), Decline> {
    let se = call.src_extents();
    let sq = |v: Vec<i64>| v.into_iter().filter(|&e| e != 1).collect::<Vec<_>>();
    let kept = sq(se.iter().enumerate().filter(|(d, _)| !call.axes.contains(d)).map(|(_, &e)| e).collect());
    if kept != sq(call.dst_extents()) {
        return Err(Decline::new(
            ReduceRule::ReduceLayout,
            format!(
                "`{}` must hold the kept extents {kept:?} of the source; per-thread partials exist only in registers",
                cx.buf(call.dst.buf).name
            ),
        ));
    }
    Ok(())
}

fn and(a: Option<LExpr>, b: Option<LExpr>) -> Option<LExpr> {
    match (a, b) {
        (Some(a), Some(b)) => Some(LExpr::bin(LBinOp::And, a, b)),
        (a, b) => a.or(b),
    }
}

/// The flat array and element index of a region element: `spa` split over the
/// kept dims and `red` (the source's) over the reduced dims, added to the region's begins.
fn element(
    em: &mut Emitter,
    r: &BufferRegion,
    call: &ReduceCall,
    spa: &LExpr,
    red: Option<&LExpr>,
) -> Result<(tirx_ir::lir::LBufId, LExpr), Bug> {
    let ext: Vec<i64> = r.ranges.iter().map(|g| g.extent).collect();
    let (spatial_dims, reduced_dims): (Vec<usize>, Vec<usize>) = match red {
        Some(_) => (0..ext.len()).partition(|d| !call.axes.contains(d)),
        None => ((0..ext.len()).collect(), vec![]),
    };
    let mut coords = vec![LExpr::i32(0); ext.len()];
    split_row_major(em.builder(), spa, &spatial_dims, &ext, &mut coords);
    if let Some(red) = red {
        split_row_major(em.builder(), red, &reduced_dims, &ext, &mut coords);
    }
    let mut idx = Vec::with_capacity(ext.len());
    for (rg, c) in r.ranges.iter().zip(coords) {
        let begin = em.expr(&rg.begin)?;
        let b = em.builder();
        idx.push(b.add(b.to_int(begin, DType::I32), c));
    }
    Ok(em.address(r.buf, &idx)?)
}
