//! copy → gmem_smem_predicated (priority 5, between `gmem_smem` and `fallback`; docs/tile-primitives.md §3.8).
//!
//! **Accepts** what [`gmem_smem`](super::gmem_smem) accepts without its
//! divisibility rule: a global ↔ shared copy (either direction) at thread,
//! warp, warpgroup or cta scope, all threads of the scope active, shared side
//! possibly swizzled, region begins possibly symbolic. A ragged tile (60×100
//! f32 on 128 threads) keeps every thread working instead of dropping to the
//! one-thread scalar fallback (CuTe's `cooperative_copy` does the same).
//! Guarded copies (`clip=True`, `mask=`, `other=`) number their chunks over a
//! virtual layout of the global region and read each chunk's coordinates back
//! from its virtual offset ([`virtual_layout`]); the address comes from them.
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
    add_sym, copy_stmt, linear_offset, operands_guarded, scope_pair, thread_id, CopyOps, CopyRule, GsOperands,
    GLOBAL_SHARED,
};
use super::guard::{self, Guard, Lane};
use super::partition::{self, Partition};
use crate::addr::{dim_offset, swizzle};
use crate::lay;
use crate::operand::MemOperand;
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::Iter;
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
    /// `mask=` / `other=` / `clip=True` (module `guard`), with the global region's dims.
    guard: Option<(Guard, Vec<GDim>, bool)>,
}

/// A non-unit dim of a guarded copy's global region: its stride in memory, and in the
/// *virtual* layout the chunks are numbered over (see [`plan_guard`]).
#[derive(Clone, Copy, Debug)]
struct GDim {
    dim: usize,
    real: i64,
    virt: i64,
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
        let ops = operands_guarded(cx)?;
        scope_pair(&ops, GLOBAL_SHARED)?;
        let o = GsOperands::resolve(cx, &ops)?;
        // One thread: the chunking needs no thread split; threads are dealt chunks afterwards.
        // A guarded copy numbers its chunks over the virtual layout of its global region.
        let virt = match guard::requested(cx) {
            true => Some(virtual_layout(cx, &ops, &o.g, o.g_is_src)?),
            false => None,
        };
        let mut sides = o.sides(1);
        if let Some((_, v)) = &virt {
            sides.g = v;
        }
        let (mut part, mut limits) = partition::align(&sides);
        let guard = match virt {
            Some((dims, _)) => {
                Some(plan_guard(cx, &ops, o.g_is_src, dims, part.vec())?).filter(|g| !g.0.is_trivial(cx))
            }
            None => None,
        };
        if guard.is_none() && guard::requested(cx) {
            // Nothing to test (every dim proven inside): the plain partition over the real layout.
            (part, limits) = partition::align(&o.sides(1));
        }
        let GsOperands { g, s, g_is_src, elem_bytes: bytes } = o;
        let chunks = part.rounds();
        let p = PredPlan { part, g, s, g_is_src, threads: t, chunks, guard };
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
        let guarded = match &p.guard {
            Some((g, ..)) => format!(
                "; guarded per vector ({}), partial vectors per lane{}",
                if g.ends_only { "its two ends" } else { "every lane" },
                if g.fill { ", `other` where not read" } else { "" }
            ),
            None => String::new(),
        };
        let summary = format!(
            "vec {vec} ({} B) × {t} threads, {chunks} vectors in {}, {last}{guarded}",
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
    let ops = operands_guarded(cx)?;
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
    // A guarded copy: the chunk's offset in the virtual layout (32-bit: it spans one tile) gives
    // its coordinates, and those its offset in memory.
    let v_ity = if p.guard.is_some() { DType::I32 } else { g_ity };
    let (g_off, s_lin, g_base) = match &p.part {
        Partition::Grid { g, s, vec, .. } => (
            chunk_offset(em, g, p.chunks, *vec, &c, v_ity)?,
            chunk_offset(em, s, p.chunks, *vec, &c, s_ity)?,
            lay::m_offset(g),
        ),
        Partition::Linear { g, s, .. } => {
            (linear_offset(em, g, &c, v_ity), linear_offset(em, s, &c, s_ity), lay::m_offset(g))
        }
    };
    let rel = em.builder().sub(g_off.clone(), LExpr::Int(g_base, v_ity));
    let coords = p.guard.as_ref().map(|(_, dims, _)| coordinates(em.builder(), &rel, dims, g_reg.ranges.len()));
    let g_off = match (&p.guard, &coords) {
        (Some((_, dims, _)), Some(c)) => {
            let b = em.builder();
            dims.iter().fold(LExpr::Int(g_base, g_ity), |acc, d| {
                b.add(acc, b.mul(b.to_int(c[d.dim].clone(), g_ity), LExpr::Int(d.real, g_ity)))
            })
        }
        _ => g_off,
    };
    let g_off = add_sym(em, g_off, &p.g.sym, g_ity)?;
    let s_lin = add_sym(em, s_lin, &p.s.sym, s_ity)?;
    let s_at = |em: &Emitter, l: i64| {
        let b = em.builder();
        let lin = if l == 0 { s_lin.clone() } else { b.add(s_lin.clone(), LExpr::Int(l, s_ity)) };
        match &p.s.swizzle {
            Some(sw) => swizzle(b, sw, lin),
            None => lin,
        }
    };
    let vec = p.vec();
    let at = |em: &Emitter, l: i64, i: &LExpr| {
        let b = em.builder();
        if l == 0 {
            i.clone()
        } else {
            b.add(i.clone(), LExpr::Int(l, b.ity(i)))
        }
    };
    let copy = |em: &Emitter, l: i64, n: u32| {
        if p.g_is_src {
            copy_stmt(em, sb, s_at(em, l), gb, at(em, l, &g_off), n)
        } else {
            copy_stmt(em, gb, at(em, l, &g_off), sb, s_at(em, l), n)
        }
    };
    let stmt = copy(em, 0, vec as u32);
    let (Some((g, dims, in_row)), Some(coords0)) = (&p.guard, &coords) else {
        body.push(stmt);
        return Ok(body);
    };
    // Each lane's coordinates; a vector in one row: lane l is `l` past lane 0 along the stride-1 dim.
    let coords: Vec<Vec<LExpr>> = (0..vec)
        .map(|l| match (in_row, dims.last()) {
            (true, Some(inner)) => {
                let mut c = coords0.clone();
                c[inner.dim] = at(em, l, &c[inner.dim]);
                c
            }
            _ => coordinates(em.builder(), &at(em, l, &rel), dims, g_reg.ranges.len()),
        })
        .collect();
    let other = g.fill_value(cx, em, cx.buf(s_reg.buf).dtype)?;
    let lanes = (0..vec)
        .map(|l| Lane {
            copy: copy(em, l, 1),
            fill: other.clone().map(|value| {
                LStmt::new(LStmtKind::Memory(MemOp::Store { buf: sb, index: s_at(em, l), value }), em.span)
            }),
        })
        .collect();
    body.extend(g.vector(cx, em, &coords, stmt, lanes)?);
    Ok(body)
}

/// The coordinates in a region of `rank` dims of the element at offset `rel` from its start:
/// the non-unit dims by descending stride, each `rel / stride` of what the outer ones left
/// (exact where each stride exceeds the span of the dims inside it: [`plan_guard`] checks).
fn coordinates(b: &crate::build::Builder, rel: &LExpr, dims: &[GDim], rank: usize) -> Vec<LExpr> {
    let mut c = vec![LExpr::i32(0); rank];
    let mut rest = rel.clone();
    for (k, &GDim { dim: d, virt: stride, .. }) in dims.iter().enumerate() {
        let q = if stride == 1 { rest.clone() } else { b.div_c(rest.clone(), stride) };
        c[d] = b.to_int(q, DType::I32);
        if k + 1 < dims.len() {
            rest = b.rem_c(rest, stride);
        }
    }
    c
}

/// The virtual layout a guarded copy numbers its chunks over: the global region's dims with
/// their strides, except that a stride not above the span of the dims inside it (a tile
/// hanging past a matrix's last column: rows of 64 over a pitch of 50) grows by multiples of
/// 32 elements until it is, so every chunk's coordinates are its virtual offset's digits and
/// the alignment of every stride (modulo 32 elements, above any vector) is the real one's.
fn virtual_layout(
    cx: &CallCx,
    ops: &CopyOps,
    g: &MemOperand,
    g_is_src: bool,
) -> Result<(Vec<GDim>, TileLayout), Decline> {
    let (g_reg, _) = GsOperands::regions(g_is_src, ops);
    let name = &cx.buf(g_reg.buf).name;
    let Some(strides) = &g.dim_strides else {
        return Err(Decline::new(
            CopyRule::Guard,
            format!("a guarded copy numbers `{name}`'s elements by coordinates: each of its dims must be one stride"),
        ));
    };
    let mut dims: Vec<GDim> = (0..g_reg.ranges.len())
        .filter(|&d| g_reg.ranges[d].extent != 1)
        .map(|d| GDim { dim: d, real: strides[d], virt: strides[d] })
        .collect();
    dims.sort_by_key(|d| d.real);
    let mut span = 0i64;
    for d in dims.iter_mut() {
        if d.virt <= span {
            d.virt += (span + 1 - d.virt + 31) / 32 * 32;
        }
        span += (g_reg.ranges[d.dim].extent - 1) * d.virt;
    }
    if span.saturating_add(lay::m_offset(&g.tile)) > i32::MAX as i64 {
        return Err(Decline::new(
            CopyRule::Guard,
            format!("the region of `{name}` spans over 2^31 elements; a guarded copy numbers its elements in 32 bits"),
        ));
    }
    dims.reverse();
    let iters: Vec<Iter> = {
        let mut by_dim: Vec<&GDim> = dims.iter().collect();
        by_dim.sort_by_key(|d| d.dim);
        by_dim.iter().map(|d| Iter::m(g_reg.ranges[d.dim].extent, d.virt)).collect()
    };
    let offsets = g.tile.offset.clone();
    let virt = TileLayout::new(iters, vec![], offsets)
        .canonicalize(tirx_layout::Fusion::Cuda)
        .map_err(|e| Decline::new(CopyRule::Guard, format!("`{name}`: {e}")))?;
    Ok((dims, virt))
}

/// The guard of a global ↔ shared copy: coordinates are the global region's (read from the
/// virtual layout); `clip=True` bounds the global side only.
fn plan_guard(
    cx: &CallCx,
    ops: &CopyOps,
    g_is_src: bool,
    dims: Vec<GDim>,
    vec: i64,
) -> Result<(Guard, Vec<GDim>, bool), Decline> {
    let (g_reg, s_reg) = GsOperands::regions(g_is_src, ops);
    if cx.flag(&tirx_ir::op::CLIP)
        && crate::bounds::clip_guards(cx.kernel, cx.env, cx.facts, s_reg).iter().any(|&(lo, hi)| lo || hi)
    {
        return Err(Decline::new(
            CopyRule::Guard,
            format!(
                "`clip=True` bounds the global side; the shared region of `{}` must lie inside it",
                cx.buf(s_reg.buf).name
            ),
        ));
    }
    // Lanes run along the stride-1 dim; whole vectors stay in one of its runs when its extent is
    // a multiple of the vector.
    let inner = dims.last().copied();
    let progression = vec == 1 || inner.is_some_and(|d| d.real == 1 && g_reg.ranges[d.dim].extent % vec == 0);
    let dst = if g_is_src { s_reg } else { g_reg };
    let sides = guard::Sides { coords: g_reg, clipped: g_reg, dst, load: g_is_src };
    let lanes = vec![vec![0; g_reg.ranges.len()]; vec as usize];
    Ok((guard::plan(cx, sides, lanes, progression)?, dims, progression))
}
/// Element offset of chunk `c` of a `[chunks, vec]` split of `l` (its `m` axis).
fn chunk_offset(em: &Emitter, l: &TileLayout, chunks: i64, vec: i64, c: &LExpr, ity: DType) -> Result<LExpr, Bug> {
    let b = em.builder();
    let (g, seps) = lay::group(&l.shard, &[chunks, vec])
        .ok_or_else(|| Bug(format!("the partition does not split as [{chunks}, {vec}]")))?;
    let base = LExpr::Int(lay::m_offset(l), ity);
    Ok(b.add(dim_offset(b, &g[seps[0]..seps[1]], b.to_int(c.clone(), ity)), base))
}
