//! copy → gmem_smem_predicated (priority 5, between `gmem_smem` and `fallback`; docs/tile-primitives.md §3.8).
//!
//! **Accepts** what [`gmem_smem`](super::gmem_smem) accepts without its
//! divisibility rule: a global ↔ shared copy (either direction) at thread,
//! warp, warpgroup or cta scope, all threads of the scope active, shared side
//! possibly swizzled, region begins possibly symbolic. A ragged tile (60×100
//! f32 on 128 threads) keeps every thread working instead of dropping to the
//! one-thread scalar fallback (CuTe's `cooperative_copy` does the same).
//!
//! **Algorithm**: cut the region into `K` chunks of `vec` elements that are
//! one aligned vector on both sides: the partition of
//! [`partition::align`] for a single thread, so the vector obeys gmem_smem's
//! alignment reasoning (stride-1 global tail, strides, offsets, symbolic begin
//! steps, swizzle chunk). Chunks are numbered in global stride order and dealt
//! round-robin: thread `t` moves chunk `c = f·T + t` in round `f`, so a warp's
//! accesses are consecutive in global memory. `⌊K/T⌋` full rounds run
//! unguarded; the last `K mod T` chunks run in one guarded round. Rounds copy
//! directly: staging all loads in registers first measured slower on an H200
//! (0.81 vs 0.93 of memcpy for the 60×100 tile), ptxas already overlaps them.
//!
//! **Generated code** (60×100 f32 region, 128 threads: vec 4, 1500 chunks):
//! ```text
//! for f in 0..11 {
//!   let c = f * 128 + tid
//!   vcopy<4> A_smem[(c / 25) * 100 + (c % 25) * 4] <- A[(c / 25) * 4000 + (c % 25) * 4 + ..]
//! }
//! if tid < 92 {
//!   let c = tid + 1408
//!   vcopy<4> ...
//! }
//! ```

use super::call::{
    add_sym, copy_stmt, linear_offset, operands, scope_pair, thread_id, CopyOps, GsOperands, GLOBAL_SHARED,
};
use super::partition::{self, Partition};
use crate::addr::{dim_offset, swizzle};
use crate::lay;
use crate::operand::MemOperand;
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::TileLayout;

pub struct GmemSmemPredicated;

struct PredPlan {
    /// The chunk partition: `Grid` over `[chunks, 1, vec]`, or `Linear` (vec 1).
    part: Partition,
    g: MemOperand,
    s: MemOperand,
    g_is_src: bool,
    threads: i64,
    chunks: i64,
}

impl PredPlan {
    fn vec(&self) -> i64 {
        self.part.vec()
    }
    /// Rounds every thread runs unguarded.
    fn full_rounds(&self) -> i64 {
        self.chunks / self.threads
    }
    /// Threads active in the guarded last round (0: no guarded round).
    fn tail_threads(&self) -> i64 {
        self.chunks % self.threads
    }
}

impl Variant for GmemSmemPredicated {
    fn name(&self) -> &'static str {
        "gmem_smem_predicated"
    }
    fn priority(&self) -> u8 {
        5
    }
    fn family(&self) -> Family {
        Family::Copy
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let ops = operands(cx)?;
        scope_pair(&ops, GLOBAL_SHARED)?;
        let o = GsOperands::resolve(cx, &ops)?;
        // One thread: the chunking needs no thread split; threads are dealt chunks afterwards.
        let (part, mut limits) = partition::align(&o.sides(1));
        let GsOperands { g, s, g_is_src, elem_bytes: bytes } = o;
        let chunks = part.rounds();
        let p = PredPlan { part, g, s, g_is_src, threads: t, chunks };
        let (vec, rounds) = (p.vec(), p.full_rounds() + (p.tail_threads() > 0) as i64);
        let n = CopyOps::elems(ops.src);
        let last = match p.tail_threads() {
            0 => "no guarded round".to_string(),
            r => format!("last round guarded: {r} of {t} threads active"),
        };
        if p.tail_threads() > 0 {
            limits.push(format!(
                "{n} elements = {chunks} vectors of {vec} do not divide over {t} threads: {} threads idle in the last round",
                t - p.tail_threads()
            ));
        }
        if p.s.swizzle.is_some() {
            limits.push("swizzle: the shared offset is swizzled with xor/shift every round".into());
        }
        let summary = format!(
            "vec {vec} ({} B) × {t} threads, {chunks} vectors in {}, {last}",
            vec * bytes,
            crate::text::rounds(rounds)
        );
        let mut plan = Plan::new(summary, p);
        plan.vec = Some(vec as u32);
        plan.rounds = Some(rounds as u64);
        plan.limits = limits;
        Ok(plan)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<PredPlan>("gmem_smem_predicated")?;
        let tid = thread_id(cx, em, p.threads);
        let t = p.threads;
        let full = p.full_rounds();
        if full == 1 {
            let body = chunk_copy(cx, em, p, tid.clone())?;
            em.stmts.extend(body);
        } else if full > 1 {
            let f = em.var("f", DType::I32, Some((0, full - 1)));
            let c = em.builder().add(em.builder().mul(LExpr::Var(f), LExpr::i32(t)), tid.clone());
            let body = chunk_copy(cx, em, p, c)?;
            em.push(LStmtKind::For { var: f, begin: LExpr::i32(0), extent: LExpr::i32(full), unroll: false, body });
        }
        let rem = p.tail_threads();
        if rem > 0 {
            let c = em.builder().add(tid.clone(), LExpr::i32(full * t));
            let then_body = chunk_copy(cx, em, p, c)?;
            let cond = LExpr::bin(LBinOp::Lt, tid, LExpr::i32(rem));
            em.push(LStmtKind::If { cond, then_body, else_body: vec![] });
        }
        Ok(())
    }
}

/// The statements that move chunk `c` (an `I32` expression in `0..chunks`).
fn chunk_copy(cx: &CallCx, em: &mut Emitter, p: &PredPlan, c: LExpr) -> Result<Vec<LStmt>, Bug> {
    let ops = operands(cx)?;
    let (g_reg, s_reg) = GsOperands::regions(p.g_is_src, &ops);
    let (gb, g_ity) = em.lbuf(g_reg.buf)?;
    let (sb, s_ity) = em.lbuf(s_reg.buf)?;
    let mut body = Vec::new();
    let c = if matches!(c, LExpr::Var(_) | LExpr::Int(..) | LExpr::Special(_)) {
        c
    } else {
        let v = em.var("c", DType::I32, Some((0, p.chunks - 1)));
        body.push(LStmt::new(LStmtKind::Let { var: v, value: c }, em.span));
        LExpr::Var(v)
    };
    let (g_off, s_lin) = match &p.part {
        Partition::Grid { g, s, vec, .. } => {
            (chunk_offset(em, g, p.chunks, *vec, &c, g_ity)?, chunk_offset(em, s, p.chunks, *vec, &c, s_ity)?)
        }
        Partition::Linear { g, s, .. } => (linear_offset(em, g, &c, g_ity), linear_offset(em, s, &c, s_ity)),
    };
    let g_off = add_sym(em, g_off, &p.g.sym, g_ity)?;
    let s_lin = add_sym(em, s_lin, &p.s.sym, s_ity)?;
    let s_off = match &p.s.swizzle {
        Some(sw) => swizzle(em.builder(), sw, s_lin),
        None => s_lin,
    };
    let vec = p.vec() as u32;
    let stmt =
        if p.g_is_src { copy_stmt(em, sb, s_off, gb, g_off, vec) } else { copy_stmt(em, gb, g_off, sb, s_off, vec) };
    body.push(stmt);
    Ok(body)
}

/// Element offset of chunk `c` of a `[chunks, vec]` split of `l` (its `m` axis).
fn chunk_offset(em: &Emitter, l: &TileLayout, chunks: i64, vec: i64, c: &LExpr, ity: DType) -> Result<LExpr, Bug> {
    let b = em.builder();
    let (g, seps) = lay::group(&l.shard, &[chunks, vec])
        .ok_or_else(|| Bug(format!("the partition does not split as [{chunks}, {vec}]")))?;
    let base = LExpr::Int(lay::m_offset(l), ity);
    Ok(b.add(dim_offset(b, &g[seps[0]..seps[1]], b.to_int(c.clone(), ity)), base))
}
