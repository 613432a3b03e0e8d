//! elementwise → smem (priority 10, docs/tile-primitives.md §3.15).
//!
//! **Accepts** an elementwise op (§4) at thread, warp, warpgroup or cta scope
//! with every thread active when every region operand is in shared memory
//! (`shared`, `shared.dyn`) with a memory-only layout (swizzles allowed) of
//! float32, float16 or bfloat16 (`fill` also of float8: the value rounded once
//! to it, as a cast would), each source broadcasts to the destination
//! (right-aligned, each dim equal or 1) and the region begins agree across the
//! scope's threads; scalars (`2.0`, `s[0]`, `bias=`, `scale=`) anywhere an op
//! takes a value; `fill` and `zero`. The numerics are the register variant's
//! (`docs/numerics.md`: compute type, one rounding, `rounding_mode=`).
//!
//! **Algorithm**: the destination region, flattened row-major, is cut into
//! chunks of `vec` elements; chunk `c = r·T + t` goes to thread `t` in round
//! `r` (`T` threads; a last partial round is guarded). `vec` is the widest of
//! 16/8/4/2/1 bytes per element type for which every chunk of the destination
//! and of every source is `vec` consecutive, `vec`-aligned elements (checked
//! element by element on the sliced layouts, with the symbolic begin's
//! divisor and the swizzle chunk), or for a source broadcast along the chunk,
//! one element (a splat). A vector chunk moves through registers with one
//! vector access per operand (`vcopy<vec>`), is computed element by element,
//! and is stored with one vector access; otherwise each element is loaded,
//! computed and stored on its own. The call ends with the scope's barrier
//! (`__syncthreads()`, the warpgroup's own `bar.sync 1 + wg_id, 128`,
//! `__syncwarp()`; none at thread scope): other threads read the results next.
//!
//! **Generated code** (`Tx.cta.add(C_smem, A_smem, B_smem)`, 32×32 f16, 64 threads: vec 8, 2 rounds):
//! ```text
//! for r in 0..2 {
//!   let f = (r * 64 + tid) * 8
//!   vcopy<8> A_smem_r[0] <- A_smem[f]
//!   vcopy<8> B_smem_r[0] <- B_smem[f]
//!   unroll for i in 0..8 { C_smem_w[i] = A_smem_r[i] + B_smem_r[i] }
//!   vcopy<8> C_smem[f] <- C_smem_w[0]
//! }
//! cta_sync
//! ```

use super::call::EwiseRule;
use super::call::{broadcast_shape, convert, numerics, parse, scalar, scalar_values};
use super::call::{OpCall, Operand};
use crate::addr::{dim_offset, split_row_major};
use crate::operand::{self, group_offset, MemOperand};
use crate::variant::{barrier_text, Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant, COOPERATIVE_SCOPES};
use tirx_ir::hir::BufferRegion;
use tirx_ir::lir::{CacheHint, LBinOp, LBufId, LExpr, LStmt, LStmtKind, MemOp, RoundMode};
use tirx_ir::op::{ConfigKey, EwiseOp, Family};
use tirx_ir::DType;
use tirx_layout::ExecScope;

pub struct EwiseSmem;

/// Destination regions up to this many elements are checked chunk by chunk for vectors.
const VEC_CHECK_LIMIT: i64 = 1 << 17;

/// How one operand is read per chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// `vec` consecutive aligned elements: one vector access.
    Vector,
    /// One element for the whole chunk (broadcast along it).
    Splat,
}

struct SmemPlan {
    /// The destination, then each region source: sliced layouts, addressed by flat index
    /// when the region has the destination's extents.
    mems: Vec<MemOperand>,
    threads: i64,
    total: i64,
    vec: i64,
    rounds: i64,
    compute: DType,
    rounding: RoundMode,
    /// Per source: its access when it is a region.
    srcs: Vec<Option<Access>>,
}

impl Variant for EwiseSmem {
    fn name(&self) -> &'static str {
        "smem"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Elementwise
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[ConfigKey::RoundingMode]
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(COOPERATIVE_SCOPES)?;
        let call = parse(cx)?;
        if call.mask.is_some() {
            return Err(Decline::new(
                CommonRule::OperandScope,
                "masked_fill reads its mask per register from the layout; it takes registers (scope=\"local\"), not shared memory",
            ));
        }
        let mut mems = Vec::new();
        for r in call.regions() {
            mems.push(shared_operand(cx, r, call.op == EwiseOp::Fill)?);
        }
        let (compute, rounding) = numerics(cx, &call)?;
        let dst_ext: Vec<i64> = call.dst.ranges.iter().map(|r| r.extent).collect();
        let dst_name = &cx.buf(call.dst.buf).name;
        let mut maps = Vec::new();
        for s in &call.srcs {
            maps.push(match s {
                Operand::Region(r) => {
                    let shape = broadcast_shape(r, &dst_ext, &cx.buf(r.buf).name)
                        .map_err(|m| Decline::new(EwiseRule::Broadcast, format!("{m} (destination `{dst_name}`)")))?;
                    Some(shape)
                }
                Operand::Scalar(_) => None,
            });
        }
        let total: i64 = dst_ext.iter().product();
        let mut limits = Vec::new();
        let bits = call.regions().map(|r| cx.buf(r.buf).dtype.bits()).max().unwrap_or(32);
        let (vec, srcs) = choose_vec(&mems, &maps, &dst_ext, bits, &mut limits);
        let rounds = (total + vec * t - 1) / (vec * t);
        let ragged = total % (vec * t) != 0;
        let reads: Vec<String> = call
            .srcs
            .iter()
            .zip(&srcs)
            .filter_map(|(s, a)| match (s, a) {
                (Operand::Region(r), Some(a)) => {
                    Some(format!("`{}` {}", cx.buf(r.buf).name, if *a == Access::Splat { "splat" } else { "vector" }))
                }
                _ => None,
            })
            .collect();
        let summary = format!(
            "{total} elements as chunks of {vec} over {t} thread{}, {rounds} round{}{}{}; computed in {compute}{}; barrier: {}",
            if t == 1 { "" } else { "s" },
            if rounds == 1 { "" } else { "s" },
            if ragged { " (last round guarded)" } else { "" },
            if reads.is_empty() { String::new() } else { format!("; sources {}", reads.join(", ")) },
            if rounding != RoundMode::Rn { format!(", rounding {rounding}") } else { String::new() },
            barrier_text(cx.scope.kind)
        );
        let mut p = Plan::new(summary, SmemPlan { mems, threads: t, total, vec, rounds, compute, rounding, srcs });
        p.vec = Some(vec as u32);
        p.rounds = Some(rounds as u64);
        p.limits = limits;
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<SmemPlan>("elementwise/smem")?;
        let call = parse(cx)?;
        let (scalars, scale) = scalar_values(em, &call, p.compute, p.compute)?;
        let kind = cx.scope.kind;
        let tid = match cx.scope.tid_kind() {
            Some(k) if kind != ExecScope::Thread => em.thread_id(k),
            _ => LExpr::i32(0),
        };
        let r = (p.rounds > 1).then(|| em.var("r", DType::I32, Some((0, p.rounds - 1))));
        let b = em.builder();
        let chunk = match r {
            Some(r) => b.add(b.mul(LExpr::Var(r), LExpr::i32(p.threads)), tid),
            None => tid,
        };
        let mut body = Vec::new();
        let f = b.mul(chunk.clone(), LExpr::i32(p.vec));
        let f = em.bind_i32(&mut body, "f", f);
        let stmts = if p.vec > 1 {
            vector_chunk(em, p, &call, &scalars, scale, &f)?
        } else {
            let (d, di) = element(em, p, 0, call.dst, call.dst, &f)?;
            let mut vals = Vec::with_capacity(call.srcs.len());
            let mut k = 0;
            for (s, sc) in call.srcs.iter().zip(&scalars) {
                vals.push(match (s, sc) {
                    (Operand::Region(rg), _) => {
                        k += 1;
                        let (lb, i) = element(em, p, k, rg, call.dst, &f)?;
                        em.builder().convert(LExpr::Load(lb, Box::new(i)), p.compute)
                    }
                    (Operand::Scalar(_), Some(v)) => v.clone(),
                    (Operand::Scalar(_), None) => return Err(Bug("a scalar operand without a value".into())),
                });
            }
            let value = compute(em, &call, p, &vals, scale.clone(), d);
            vec![LStmt::new(LStmtKind::Memory(MemOp::Store { buf: d, index: di, value }), em.span)]
        };
        body.extend(stmts);
        if p.total % (p.vec * p.threads) != 0 {
            let cond = LExpr::bin(LBinOp::Lt, chunk, LExpr::i32(p.total / p.vec));
            body = vec![LStmt::new(LStmtKind::If { cond, then_body: body, else_body: vec![] }, em.span)];
        }
        let out = match r {
            Some(r) => vec![LStmt::new(
                LStmtKind::For { var: r, begin: LExpr::i32(0), extent: LExpr::i32(p.rounds), unroll: false, body },
                em.span,
            )],
            None => body,
        };
        em.stmts.extend(out);
        if let Some(bar) = em.scope_barrier(kind) {
            em.push(bar);
        }
        Ok(())
    }
}

/// A shared operand: its sliced layout (memory axes only) for the vector check;
/// `fill`'s destination may be float8 (it stores a value, computes nothing).
fn shared_operand(cx: &CallCx, r: &BufferRegion, fill: bool) -> Result<MemOperand, Decline> {
    let b = cx.buf(r.buf);
    if !b.scope.is_shared() {
        return Err(Decline::new(
            CommonRule::OperandScope,
            format!(
                "operand `{}` is in {} memory; elementwise `smem` needs every operand in shared memory",
                b.name,
                b.scope.name()
            ),
        ));
    }
    let computed = matches!(b.dtype, DType::F32 | DType::F16 | DType::BF16);
    let stored = fill && matches!(b.dtype, DType::F8E4M3 | DType::F8E5M2);
    if !computed && !stored {
        return Err(Decline::new(
            CommonRule::Dtype,
            format!(
                "operand `{}` is {}; elementwise `smem` computes on float32, float16 and bfloat16 (fills float8 too)",
                b.name, b.dtype
            ),
        ));
    }
    operand::check_uniform(cx, r, b)?;
    operand::memory(cx, r)
}

/// The widest vector every operand reads or writes whole (or, for a source, splats).
fn choose_vec(
    mems: &[MemOperand],
    maps: &[Option<Vec<i64>>],
    dst_ext: &[i64],
    bits: u32,
    limits: &mut Vec<String>,
) -> (i64, Vec<Option<Access>>) {
    let scalar: Vec<Option<Access>> = maps.iter().map(|m| m.as_ref().map(|_| Access::Vector)).collect();
    let total: i64 = dst_ext.iter().product();
    if total > VEC_CHECK_LIMIT {
        limits.push(format!(
            "{total} elements: more than the {VEC_CHECK_LIMIT} checked for vectors; one element per access"
        ));
        return (1, scalar);
    }
    'vec: for v in crate::copy::partition::vec_candidates(bits).into_iter().filter(|&v| v > 1) {
        if total % v != 0 {
            limits.push(format!("vec {v}: {total} elements are not whole chunks of {v}"));
            continue;
        }
        if let Err(why) = access(&mems[0], &|f| f, total, v).and_then(|a| match a {
            Access::Vector => Ok(()),
            Access::Splat => Err("the destination repeats one element".into()),
        }) {
            limits.push(format!("vec {v}: destination: {why}"));
            continue;
        }
        let mut srcs = Vec::with_capacity(maps.len());
        let mut k = 1;
        for m in maps {
            let Some(shape) = m else {
                srcs.push(None);
                continue;
            };
            let map = |f: i64| broadcast_flat(shape, dst_ext, f);
            match access(&mems[k], &map, total, v) {
                Ok(a) => srcs.push(Some(a)),
                Err(why) => {
                    limits.push(format!("vec {v}: source {k}: {why}"));
                    continue 'vec;
                }
            }
            k += 1;
        }
        return (v, srcs);
    }
    (1, scalar)
}

/// The operand's flat region index of destination element `f` (broadcast dims read index 0).
fn broadcast_flat(shape: &[i64], dst_ext: &[i64], mut f: i64) -> i64 {
    let mut coords = vec![0; dst_ext.len()];
    for d in (0..dst_ext.len()).rev() {
        coords[d] = f % dst_ext[d];
        f /= dst_ext[d];
    }
    coords.iter().zip(shape).fold(0, |acc, (&c, &e)| acc * e + if e == 1 { 0 } else { c })
}

/// How the chunks of `v` destination elements read operand `m` (`map`: destination
/// flat index → the operand's): consecutive aligned elements, one element, or neither.
fn access(m: &MemOperand, map: &dyn Fn(i64) -> i64, total: i64, v: i64) -> Result<Access, String> {
    let addr = |f: i64| crate::lay::m_offset(&m.tile) + group_offset(&m.tile.shard, map(f));
    let (mut vector, mut splat) = (true, true);
    for c in (0..total).step_by(v as usize) {
        let a0 = addr(c);
        for i in 1..v {
            let a = addr(c + i);
            vector &= a == a0 + i;
            splat &= a == a0;
        }
        vector &= a0 % v == 0;
        if !vector && !splat {
            return Err(format!("elements {c}..{} are neither {v} consecutive aligned elements nor one", c + v));
        }
    }
    if splat {
        return Ok(Access::Splat);
    }
    if let Some(sw) = m.swizzle {
        if v > sw.chunk() {
            return Err(format!("a vector of {v} would cross the swizzle chunk of {} elements", sw.chunk()));
        }
    }
    let div = m.sym.divisor();
    if !m.sym.is_zero() && div % v != 0 {
        return Err(format!("the symbolic begin moves in steps of {div} elements, not a multiple of {v}"));
    }
    Ok(Access::Vector)
}

/// `op(values)` in the compute type, converted to `dst`'s type.
fn compute(em: &Emitter, call: &OpCall, p: &SmemPlan, vals: &[LExpr], scale: Option<LExpr>, dst: LBufId) -> LExpr {
    let b = em.builder();
    let value = scalar(call.op, call.params, vals, scale, p.compute, p.rounding);
    convert(b, value, b.bufs[dst.0 as usize].dtype, p.rounding)
}

/// One vector chunk: vector loads of the sources into registers, the op per
/// element, a vector store (splat sources loaded once).
fn vector_chunk(
    em: &mut Emitter,
    p: &SmemPlan,
    call: &OpCall,
    scalars: &[Option<LExpr>],
    scale: Option<LExpr>,
    f: &LExpr,
) -> Result<Vec<LStmt>, Bug> {
    let mut out = Vec::new();
    let (d, di) = element(em, p, 0, call.dst, call.dst, f)?;
    let mut reads = Vec::with_capacity(call.srcs.len());
    let mut k = 0;
    for ((s, a), sc) in call.srcs.iter().zip(&p.srcs).zip(scalars) {
        k += usize::from(matches!(s, Operand::Region(_)));
        reads.push(match (s, a, sc) {
            (Operand::Region(rg), Some(Access::Vector), _) => {
                let (lb, i) = element(em, p, k, rg, call.dst, f)?;
                let name = format!("{}_r", em.builder().bufs[lb.0 as usize].name);
                let dt = em.builder().bufs[lb.0 as usize].dtype;
                let tmp = em.local_buf(&name, dt, p.vec);
                out.push(vcopy(em, tmp, LExpr::i32(0), lb, i, p.vec));
                Read::Regs(tmp)
            }
            (Operand::Region(rg), Some(Access::Splat), _) => {
                let (lb, i) = element(em, p, k, rg, call.dst, f)?;
                let x = em.builder().convert(LExpr::Load(lb, Box::new(i)), p.compute);
                let v = em.var("x", p.compute, None);
                out.push(LStmt::new(LStmtKind::Let { var: v, value: x }, em.span));
                Read::Value(LExpr::Var(v))
            }
            (Operand::Scalar(_), _, Some(v)) => Read::Value(v.clone()),
            _ => return Err(Bug("an operand without a planned access".into())),
        });
    }
    let dname = format!("{}_w", em.builder().bufs[d.0 as usize].name);
    let ddt = em.builder().bufs[d.0 as usize].dtype;
    let res = em.local_buf(&dname, ddt, p.vec);
    let i = em.var("i", DType::I32, Some((0, p.vec - 1)));
    let iv = LExpr::Var(i);
    let vals: Vec<LExpr> = reads
        .iter()
        .map(|r| match r {
            Read::Regs(tmp) => em.builder().convert(LExpr::Load(*tmp, Box::new(iv.clone())), p.compute),
            Read::Value(v) => v.clone(),
        })
        .collect();
    let value = compute(em, call, p, &vals, scale, res);
    let store = LStmt::new(LStmtKind::Memory(MemOp::Store { buf: res, index: iv, value }), em.span);
    out.push(LStmt::new(
        LStmtKind::For { var: i, begin: LExpr::i32(0), extent: LExpr::i32(p.vec), unroll: true, body: vec![store] },
        em.span,
    ));
    out.push(vcopy(em, d, di, res, LExpr::i32(0), p.vec));
    Ok(out)
}

enum Read {
    Regs(LBufId),
    Value(LExpr),
}

fn vcopy(em: &Emitter, dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr, lanes: i64) -> LStmt {
    LStmt::new(
        LStmtKind::Memory(MemOp::VecCopy {
            dst,
            dst_index,
            src,
            src_index,
            lanes: lanes as u32,
            cache: CacheHint::Default,
        }),
        em.span,
    )
}

/// The flat array and element index of the element of region `r` (operand `k`
/// of the plan) that destination element `f` (flat, row-major over `dst`'s
/// region) reads or writes. A region of the destination's extents is addressed
/// through its sliced layout (`m` offset, symbolic begin, swizzle); a broadcast
/// one dim by dim through its buffer's layout, broadcast dims at their begin.
fn element(
    em: &mut Emitter,
    p: &SmemPlan,
    k: usize,
    r: &BufferRegion,
    dst: &BufferRegion,
    f: &LExpr,
) -> Result<(LBufId, LExpr), Bug> {
    let dst_ext: Vec<i64> = dst.ranges.iter().map(|g| g.extent).collect();
    let ext: Vec<i64> = r.ranges.iter().map(|g| g.extent).collect();
    if let Some(m) = p.mems.get(k).filter(|_| ext == dst_ext) {
        let (lb, ity) = em.lbuf(m.buf)?;
        let b = em.builder();
        let off = b.add(
            LExpr::Int(crate::lay::m_offset(&m.tile), ity),
            dim_offset(b, &m.tile.shard, b.to_int(f.clone(), ity)),
        );
        let off = m
            .sym
            .add_to(off, &|v| em.env.var(v), b, ity)
            .ok_or_else(|| Bug("a region begin uses a variable not defined here".into()))?;
        let off = match &m.swizzle {
            Some(sw) => crate::addr::swizzle(b, sw, off),
            None => off,
        };
        return Ok((lb, off));
    }
    let mut coords = vec![LExpr::i32(0); dst_ext.len()];
    let dims: Vec<usize> = (0..dst_ext.len()).collect();
    split_row_major(em.builder(), f, &dims, &dst_ext, &mut coords);
    // Right-aligned: the operand's dims are the destination's last ones (extra leading unit dims at 0).
    let rank = r.ranges.len();
    let mut idx = Vec::with_capacity(rank);
    for (k, rg) in r.ranges.iter().enumerate() {
        let begin = em.expr(&rg.begin)?;
        let b = em.builder();
        let begin = b.to_int(begin, DType::I32);
        let from_end = rank - k;
        let c = if rg.extent == 1 || from_end > dst_ext.len() {
            LExpr::i32(0)
        } else {
            coords[dst_ext.len() - from_end].clone()
        };
        idx.push(b.add(begin, c));
    }
    Ok(em.address(r.buf, &idx)?)
}
