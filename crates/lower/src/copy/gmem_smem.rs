//! copy → gmem_smem (priority 10, docs/tile-primitives.md §3.2).
//!
//! **Accepts** a global ↔ shared copy (either direction) at thread, warp,
//! warpgroup or cta scope when every thread of the scope is active, the copy
//! is valid (same dtype, equal non-unit extents) and the region's element count
//! is divisible by the scope's thread count. Region begins may be symbolic
//! (`A[by*64 : by*64 + 64, ..]`, `S[(k + 1) % 2, ..]`): affine in loop vars and
//! scope ids with `//` and `%` atoms (docs/tile-primitives.md §3.1), where the
//! symbolic part must fall on a dim whose layout is a single strided iter.
//! Only the shared side may be swizzled.
//!
//! **Algorithm**: slice both layouts to the region, synthesize the
//! `[outer, threads, vec]` partition with the widest aligned vector
//! ([`partition::align`]), then each thread moves one vector per round. When no
//! such split exists (the region's rows do not cut into the threads), it
//! declines: `gmem_smem_predicated` then deals aligned vectors to the threads
//! instead of the reference's one-element-per-thread walk.
//!
//! **Generated code** (32×32 f32 on a warp):
//! ```text
//! for f in 0..8 {
//!   let off = f * 128 + lane * 4
//!   vcopy<4> A_smem[off] <- A[off]
//! }
//! ```
//! A swizzled shared side addresses `swizzle(s_off)` with xor/shift arithmetic.

use super::call::CopyRule;
use super::call::{add_sym, bind, copy_stmt, operands, scope_pair, thread_id, CopyOps, GsOperands, GLOBAL_SHARED};
use super::partition::{self, Partition};
use super::swizzle_iter::{recognize, Walk};
use crate::addr::{dim_offset, swizzle};
use crate::lay;
use crate::operand::{group_offset, MemOperand};
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::lir::{LBufId, LExpr, LStmt, LStmtKind};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::{Swizzle, TileLayout};

pub struct GmemSmem;

/// An exact `[outer, threads, vec]` plan of a global ↔ shared copy (also
/// `copy_async`'s ldgsts: the same partition, another instruction).
pub(crate) struct GsPlan {
    pub(crate) part: Partition,
    /// The recognised swizzle walk of the shared side (§3.6), if any.
    walk: Option<Walk>,
    g: MemOperand,
    s: MemOperand,
    g_is_src: bool,
    pub(crate) threads: i64,
    pub(crate) elem_bytes: i64,
}

impl Variant for GmemSmem {
    fn name(&self) -> &'static str {
        "gmem_smem"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Copy
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let ops = operands(cx)?;
        scope_pair(&ops, GLOBAL_SHARED)?;
        let (gp, limits) = GsPlan::new(cx, &ops, t)?;
        let summary = gp.summary();
        let (vec, rounds) = (gp.part.vec(), gp.part.rounds());
        let mut p = Plan::new(summary, gp);
        p.vec = Some(vec as u32);
        p.rounds = Some(rounds as u64);
        p.limits = limits;
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<GsPlan>("gmem_smem")?;
        p.emit(cx, em, &|em, dst, dst_index, src, src_index, vec| copy_stmt(em, dst, dst_index, src, src_index, vec))
    }
}

/// Builds one vector move `dst[dst_index..] <- src[src_index..]` of `vec` elements.
pub(crate) type MoveFn<'a> = &'a dyn Fn(&Emitter, LBufId, LExpr, LBufId, LExpr, u32) -> LStmt;

impl GsPlan {
    /// The exact `[outer, threads, vec]` split of a global ↔ shared copy over
    /// `t` threads (§3.2), and explain's limits; declines when the region does
    /// not divide over the threads or no exact split exists.
    pub(crate) fn new(cx: &CallCx, ops: &CopyOps, t: i64) -> Result<(GsPlan, Vec<String>), Decline> {
        // Both regions hold the same elements (`operands` checked their extents).
        let n = CopyOps::elems(ops.src);
        if n % t != 0 {
            return Err(Decline::new(
                CopyRule::DividesThreadCnt,
                format!("region size {n} not divisible by thread_cnt={t}"),
            ));
        }
        let o = GsOperands::resolve(cx, ops)?;
        let (part, mut limits) = partition::align(&o.sides(t));
        if let Partition::Linear { .. } = part {
            // The last limit is the generic "no split exists"; the others say why each width failed.
            limits.pop();
            let why = if limits.is_empty() { String::new() } else { format!(": {}", limits.join("; ")) };
            return Err(Decline::new(
                CopyRule::Partition,
                format!("no [outer, threads, vec] split of the {n} elements over {t} threads{why}"),
            ));
        }
        let GsOperands { g, s, g_is_src, elem_bytes } = o;
        let walk = s.swizzle.as_ref().and_then(|sw| swizzle_walk(sw, &part, &s, t));
        if s.swizzle.is_some() && walk.is_none() {
            limits.push(
                "swizzle: the fast path does not apply; the shared offset is swizzled with xor/shift every round"
                    .into(),
            );
        }
        Ok((GsPlan { part, walk, g, s, g_is_src, threads: t, elem_bytes }, limits))
    }

    /// `vec 4 (16 B) × 32 threads, 8 rounds[, swizzle fast path]`.
    pub(crate) fn summary(&self) -> String {
        let how = if self.walk.is_some() { ", swizzle fast path" } else { "" };
        let vec = self.part.vec();
        let rounds = crate::text::rounds(self.part.rounds());
        format!("vec {vec} ({} B) × {} threads, {rounds}{how}", vec * self.elem_bytes, self.threads)
    }

    /// Thread `t` moves one vector per round with `mv`.
    pub(crate) fn emit(&self, cx: &CallCx, em: &mut Emitter, mv: MoveFn) -> Result<(), Bug> {
        let p = self;
        let ops = operands(cx)?;
        let (g_reg, s_reg) = GsOperands::regions(p.g_is_src, &ops);
        let (gb, g_ity) = em.lbuf(g_reg.buf)?;
        let (sb, s_ity) = em.lbuf(s_reg.buf)?;
        let tid = thread_id(cx, em, p.threads);
        let rounds = p.part.rounds();
        let f_var = (rounds > 1).then(|| em.var("f", DType::I32, Some((0, rounds - 1))));
        let f = f_var.map_or(LExpr::i32(0), LExpr::Var);
        let mut body = Vec::new();
        let Partition::Grid { g, s, vec, .. } = &p.part else {
            return Err(Bug("gmem_smem planned without an exact split".into()));
        };
        let shape = [rounds, p.threads, *vec];
        let (g_off, s_off) =
            (grid_offset(em, g, &shape, &f, &tid, g_ity)?, grid_offset(em, s, &shape, &f, &tid, s_ity)?);
        let g_off = add_sym(em, g_off, &p.g.sym, g_ity)?;
        let s_lin = add_sym(em, s_off, &p.s.sym, s_ity)?;
        let mut pre = Vec::new();
        let s_off = match (&p.s.swizzle, &p.walk, &p.part) {
            (Some(_), Some(walk), Partition::Grid { s, vec, rounds, .. }) => {
                let m0 = grid_offset(em, s, &[*rounds, p.threads, *vec], &LExpr::i32(0), &tid, s_ity)?;
                walk.emit(em, &mut pre, m0, &f)
            }
            (Some(sw), ..) => swizzle(em.builder(), sw, s_lin),
            (None, ..) => s_lin,
        };
        em.stmts.extend(pre);
        let (g_idx, s_idx) = if f_var.is_some() { name_offsets(em, &mut body, g_off, s_off) } else { (g_off, s_off) };
        let vec = p.part.vec() as u32;
        let (dst, dst_index, src, src_index) = if p.g_is_src { (sb, s_idx, gb, g_idx) } else { (gb, g_idx, sb, s_idx) };
        body.push(mv(em, dst, dst_index, src, src_index, vec));
        match f_var {
            Some(v) => em.push(LStmtKind::For {
                var: v,
                begin: LExpr::i32(0),
                extent: LExpr::i32(rounds),
                unroll: false,
                body,
            }),
            None => em.stmts.extend(body),
        }
        Ok(())
    }
}

/// The §3.6 walk for a grid partition with a swizzled, non-symbolic shared side.
fn swizzle_walk(sw: &Swizzle, part: &Partition, s: &MemOperand, threads: i64) -> Option<Walk> {
    let Partition::Grid { s: s_p, vec, rounds, .. } = part else { return None };
    if !s.sym.is_zero() {
        return None;
    }
    let (g, seps) = lay::group(&s_p.shard, &[*rounds, threads, *vec])?;
    let base = lay::m_offset(s_p);
    let tgroup = &g[seps[1]..seps[2]];
    let m0: Vec<i64> = (0..threads).map(|t| base + group_offset(tgroup, t)).collect();
    recognize(sw, &g[seps[0]..seps[1]], &m0)
}

/// `l.apply(f, tid, 0)` against `[rounds, threads, vec]` on the `m` axis.
fn grid_offset(
    em: &Emitter,
    l: &TileLayout,
    shape: &[i64; 3],
    f: &LExpr,
    tid: &LExpr,
    ity: DType,
) -> Result<LExpr, Bug> {
    let b = em.builder();
    let (g, seps) =
        lay::group(&l.shard, shape).ok_or_else(|| Bug(format!("the partition does not split as {shape:?}")))?;
    let f = b.to_int(f.clone(), ity);
    let tid = b.to_int(tid.clone(), ity);
    let base = LExpr::Int(lay::m_offset(l), ity);
    let off = b.add(dim_offset(b, &g[seps[0]..seps[1]], f), dim_offset(b, &g[seps[1]..seps[2]], tid));
    Ok(b.add(off, base))
}

/// Per-round offsets as `let g_off` / `let s_off` (one `off` when equal).
fn name_offsets(em: &mut Emitter, body: &mut Vec<LStmt>, g: LExpr, s: LExpr) -> (LExpr, LExpr) {
    if g == s {
        let o = bind(em, body, "off", g);
        (o.clone(), o)
    } else {
        let go = bind(em, body, "g_off", g);
        let so = bind(em, body, "s_off", s);
        (go, so)
    }
}
