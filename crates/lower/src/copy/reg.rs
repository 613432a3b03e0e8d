//! copy → reg (priority 10, docs/tile-primitives.md §3.3).
//!
//! **Accepts** a copy between registers (`local`) and shared or global memory
//! (exactly one side local) at thread, warp, warpgroup or cta scope with every
//! thread of the scope active, when the register layout is a plain tile whose
//! thread iters, after CUDA fusion, number exactly the scope's threads as a
//! compact chain (`laneid` 32:1 for a warp, `tid_in_wg` 128:1 for a warpgroup,
//! `tx` for a cta; none at thread scope), and the region does not split a
//! thread dimension. The memory side may be swizzled and may begin at a
//! symbolic offset (`A[by * 32 : by * 32 + 32, 0:8]`, `A[(k + 1) % 4, ..]`).
//! Guarded copies (`clip=True`, `mask=`, `other=`; module [`guard`](super::guard)):
//! each atom and thread group also carries its step in the register region's
//! coordinates, so every vector's first and last lane are known; a whole vector
//! keeps its access, a partial one moves lane by lane (none does where every
//! lane has the vector's test: then the vector moves whole or fills).
//!
//! **Algorithm**: the register layout induces the partition. The memory side
//! is grouped by the register iters: the group of a thread iter gives each
//! thread its base offset (coordinate `(tid / stride) % extent` split over the
//! group), the groups of register iters give *atoms* `(extent, memory stride,
//! register stride)`, ordered by register stride. The vector is the widest
//! width that divides the tail contiguous on *both* sides, stays inside one
//! swizzle chunk, and keeps every access aligned: outer atom strides, both
//! offsets, the symbolic begin step and the memory strides of the thread
//! groups (rows padded to 20 f16 put thread bases 40 B apart: 8-B vectors).
//! Differences from the reference (pitfall 18): the R-side contiguity and the
//! thread-owned strides are checked, thread coordinates are computed from the
//! strides, and the vector never crosses a swizzle chunk.
//!
//! **Generated code** (seed: 32×8 f32, lane i owns row i):
//! ```text
//! let base = lane * 8
//! for f in 0..2 (unroll) { vcopy<4> R[f * 4] <- A_smem[base + f * 4] }
//! ```
//! The loop is unrolled (bundles up to 256 elements) so the register array is
//! only indexed by constants: a dynamically indexed array lives in local
//! memory. Global loads with `cache="nc"` use the non-coherent path.

use super::call::CopyRule;
use super::call::{add_sym, bind, operands_guarded, scope_pair};
use super::guard::{self, Guard, Lane};
use super::partition::vec_candidates;
use super::swizzle_iter::{recognize, Walk};
use crate::addr::{dim_offset, swizzle};
use crate::affine::Affine;
use crate::lay;
use crate::operand::{self, group_offset, thread_part, UNROLL_ELEMS};
use crate::scope::TidKind;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::BufferRegion;
use tirx_ir::hir::{ConfigKey, MemScope};
use tirx_ir::lir::{CacheHint, LBufId, LExpr, LStmt, LStmtKind, MemOp};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::{Axis, Iter, Swizzle, TileLayout};

pub struct RegCopy;

const PAIRS: &[(MemScope, MemScope)] = &[
    (MemScope::Local, MemScope::Shared),
    (MemScope::Shared, MemScope::Local),
    (MemScope::Local, MemScope::Global),
    (MemScope::Global, MemScope::Local),
];

/// `extent` steps of `mem` elements on the memory side and `reg` registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Atom {
    pub extent: i64,
    pub mem: i64,
    pub reg: i64,
    /// The register-region dim a step moves along and by how much (a guarded copy's
    /// coordinates; `(0, 0)` otherwise).
    pub coord: (usize, i64),
}

/// A thread iter of the register layout and the memory iters its coordinate walks.
#[derive(Clone, Debug)]
struct ThreadGroup {
    extent: i64,
    stride: i64,
    mem: Vec<Iter>,
    /// As [`Atom::coord`].
    coord: (usize, i64),
}

struct RegPlan {
    r_is_src: bool,
    tid: Option<TidKind>,
    threads: Vec<ThreadGroup>,
    /// Round atoms (the vector split off), outermost first.
    outer: Vec<Atom>,
    vec: i64,
    mem_off: i64,
    reg_off: i64,
    sym: Affine,
    swizzle: Option<Swizzle>,
    /// The swizzle fast path over the rounds (§3.6), when it applies.
    walk: Option<Walk>,
    cache: CacheHint,
    /// `mask=` / `other=` / `clip=True` (module `guard`).
    guard: Option<Guard>,
}

impl Variant for RegCopy {
    fn name(&self) -> &'static str {
        "reg"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Copy
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[ConfigKey::Cache]
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let ops = operands_guarded(cx)?;
        scope_pair(&ops, PAIRS)?;
        let r_is_src = ops.src_buf.scope == MemScope::Local;
        let (r_reg, m_reg) = if r_is_src { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
        let r_name = &cx.buf(r_reg.buf).name;
        let r = operand::register(cx, r_reg).map_err(|m| Decline::new(CopyRule::RegisterLayout, m))?.tile;
        // A load may fill every copy of a replicated element (each thread reads its own); a store
        // needs one owner per element.
        let tid = thread_part(&r, r_name, cx.scope.kind, t, !r_is_src)
            .map_err(|m| Decline::new(CopyRule::RegisterLayout, m))?;
        let guarded = guard::requested(cx);
        let (r, coord_of) =
            if guarded { by_dims(&r, r_reg, r_name)? } else { (r.clone(), vec![(0, 0); r.shard.len()]) };
        let m = operand::memory(cx, m_reg)?;
        let global_load = !r_is_src && cx.buf(m_reg.buf).scope == MemScope::Global;
        let cache = cache_hint(cx, global_load)?;
        let mut limits = vec![];
        let (threads, atoms) = partition(&r, &m.tile, r_name, &cx.buf(m_reg.buf).name, &coord_of)?;
        let dtype = cx.buf(r_reg.buf).dtype;
        let bytes = dtype.bytes() as i64;
        let reg_off = lay::m_offset(&r);
        let mem_off = lay::m_offset(&m.tile);
        let sym_div = m.sym_div;
        let align =
            Alignment { threads: &threads, mem_off, reg_off, sym_div, chunk: m.swizzle.map(|s| s.chunk()), bytes };
        let (vec, outer) = choose_vec(&atoms, dtype.bits(), &align, &mut limits);
        let rounds: i64 = outer.iter().map(|a| a.extent).product();
        let bundle: i64 = atoms.iter().map(|a| a.extent).product();
        let walk = m
            .swizzle
            .as_ref()
            .filter(|_| m.sym.is_zero())
            .and_then(|sw| swizzle_walk(sw, &threads, &outer, mem_off, t));
        if m.swizzle.is_some() && walk.is_none() {
            limits.push(
                "swizzle: the fast path does not apply; the memory offset is swizzled with xor/shift every round"
                    .into(),
            );
        }
        let guard = match guarded {
            true => {
                let (lanes, progression) = lane_coords(&atoms, vec, r_reg.ranges.len());
                let dst = if r_is_src { m_reg } else { r_reg };
                let sides = guard::Sides { coords: r_reg, clipped: m_reg, dst, load: !r_is_src };
                Some(guard::plan(cx, sides, lanes, progression)?).filter(|g| !g.is_trivial(cx))
            }
            false => None,
        };
        let guard_text = guard.as_ref().map_or(String::new(), |g| {
            format!(
                "; guarded per vector ({}), partial vectors per lane{}",
                if g.ends_only { "its two ends" } else { "every lane" },
                if g.fill { ", `other` where not read" } else { "" }
            )
        });
        let summary = format!(
            "vec {vec} ({} B) × {t} thread{}, {rounds} round{}{}; per-thread bundle {bundle} element{} as atoms (extent:mem/reg) {}{guard_text}",
            vec * bytes,
            plural(t),
            plural(rounds),
            if walk.is_some() { ", swizzle fast path" } else { "" },
            plural(bundle),
            atoms_text(&atoms)
        );
        let data = RegPlan {
            r_is_src,
            tid,
            threads,
            outer,
            vec,
            mem_off,
            reg_off,
            sym: m.sym,
            swizzle: m.swizzle,
            walk,
            cache,
            guard,
        };
        let mut p = Plan::new(summary, data);
        p.vec = Some(vec as u32);
        p.rounds = Some(rounds as u64);
        p.limits = limits;
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<RegPlan>("copy/reg")?;
        let ops = operands_guarded(cx)?;
        let (r_reg, m_reg) = if p.r_is_src { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
        let (rb, r_ity) = em.lbuf(r_reg.buf)?;
        let (mb, m_ity) = em.lbuf(m_reg.buf)?;
        let base = thread_base(em, p, m_ity)?;
        // Computed once before the rounds.
        let mut lets = Vec::new();
        let base = bind(em, &mut lets, "base", base);
        em.stmts.extend(lets);
        let rounds: i64 = p.outer.iter().map(|a| a.extent).product();
        let f_var = (rounds > 1).then(|| em.var("f", DType::I32, Some((0, rounds - 1))));
        let thread_coords = match &p.guard {
            Some(_) => thread_coords(em, p, r_reg.ranges.len()),
            None => vec![],
        };
        let f = f_var.map_or(LExpr::i32(0), LExpr::Var);
        let mem_iters: Vec<Iter> = p.outer.iter().map(|a| Iter::m(a.extent, a.mem)).collect();
        let reg_iters: Vec<Iter> = p.outer.iter().map(|a| Iter::m(a.extent, a.reg)).collect();
        let m_idx = match (&p.swizzle, &p.walk) {
            (Some(_), Some(walk)) => {
                let mut pre = Vec::new();
                let idx = walk.emit(em, &mut pre, base, &em.builder().to_int(f.clone(), m_ity));
                em.stmts.extend(pre);
                idx
            }
            (sw, _) => {
                let b = em.builder();
                let idx = b.add(base, dim_offset(b, &mem_iters, b.to_int(f.clone(), m_ity)));
                match sw {
                    Some(sw) => swizzle(b, sw, idx),
                    None => idx,
                }
            }
        };
        let b = em.builder();
        let r_idx = b.add(LExpr::Int(p.reg_off, r_ity), dim_offset(b, &reg_iters, b.to_int(f.clone(), r_ity)));
        let (dst, dst_index, src, src_index) = if p.r_is_src { (mb, m_idx, rb, r_idx) } else { (rb, r_idx, mb, m_idx) };
        let kind = if p.vec == 1 {
            LStmtKind::Memory(MemOp::Store {
                buf: dst,
                index: dst_index.clone(),
                value: LExpr::Load(src, Box::new(src_index.clone())),
            })
        } else {
            let (dst_index, src_index) = (dst_index.clone(), src_index.clone());
            LStmtKind::Memory(MemOp::VecCopy { dst, dst_index, src, src_index, lanes: p.vec as u32, cache: p.cache })
        };
        let body = match &p.guard {
            None => vec![LStmt::new(kind, em.span)],
            Some(g) => {
                let at = (dst, dst_index, src, src_index);
                guarded(cx, em, g, kind, round_coords(em, p, &thread_coords, &f), at)?
            }
        };
        match f_var {
            Some(v) => {
                let unroll = rounds * p.vec <= UNROLL_ELEMS;
                em.push(LStmtKind::For { var: v, begin: LExpr::i32(0), extent: LExpr::i32(rounds), unroll, body })
            }
            None => em.stmts.extend(body),
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

/// `[(8:1/1), (2:64/8)]`.
fn atoms_text(atoms: &[Atom]) -> String {
    let parts: Vec<String> = atoms.iter().map(|a| format!("({}:{}/{})", a.extent, a.mem, a.reg)).collect();
    format!("[{}]", parts.join(", "))
}

/// `cache="nc"` applies to global → register loads; on any other copy the
/// variant cannot honour it and declines (no key is silently ignored).
fn cache_hint(cx: &CallCx, global_load: bool) -> Result<CacheHint, Decline> {
    match cx.call.config(ConfigKey::Cache) {
        None => Ok(CacheHint::Default),
        Some(_) if global_load => Ok(CacheHint::NonCoherent),
        Some(_) => {
            Err(Decline::new(CommonRule::Config, "cache=\"nc\" applies to loads from global memory into registers"))
        }
    }
}

/// Groups the memory side by the register iters: thread groups, and atoms of
/// the register iters ordered by register stride (outermost first).
fn partition(
    r: &TileLayout,
    m: &TileLayout,
    r_name: &str,
    m_name: &str,
    coord_of: &[(usize, i64)],
) -> Result<(Vec<ThreadGroup>, Vec<Atom>), Decline> {
    let (g, seps) = m.group(&r.extents()).map_err(|e| {
        Decline::new(
            CopyRule::Align,
            format!("the layout of `{m_name}` does not split along the register iters of `{r_name}` ({e})"),
        )
    })?;
    if let Some(it) = g.shard.iter().find(|i| i.axis != Axis::M) {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("`{m_name}` addresses the {} axis; memory operands use `m`", it.axis),
        ));
    }
    let mut threads = Vec::new();
    let mut regs: Vec<(i64, &[Iter], (usize, i64))> = Vec::new();
    for (k, it) in r.shard.iter().enumerate() {
        let group = &g.shard[seps[k]..seps[k + 1]];
        if it.axis.is_thread() {
            threads.push(ThreadGroup { extent: it.extent, stride: it.stride, mem: group.to_vec(), coord: coord_of[k] });
        } else if it.extent > 1 {
            regs.push((it.stride, group, coord_of[k]));
        }
    }
    regs.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut atoms = Vec::new();
    for (rs, group, (d, c)) in regs {
        let mut below = 1i64;
        let mut part = Vec::new();
        for it in group.iter().rev() {
            if it.extent > 1 {
                part.push(Atom { extent: it.extent, mem: it.stride, reg: rs * below, coord: (d, c * below) });
            }
            below *= it.extent;
        }
        part.reverse();
        atoms.extend(part);
    }
    Ok((threads, atoms))
}

/// What every vector access must be aligned to, besides the round atoms.
struct Alignment<'a> {
    threads: &'a [ThreadGroup],
    mem_off: i64,
    reg_off: i64,
    sym_div: i64,
    chunk: Option<i64>,
    bytes: i64,
}

/// Elements contiguous on both sides at the end of the bundle.
fn contiguous_tail(atoms: &[Atom]) -> i64 {
    let mut acc = 1;
    for a in atoms.iter().rev() {
        if a.mem != acc || a.reg != acc {
            break;
        }
        acc *= a.extent;
    }
    acc
}

/// The atoms left once the innermost `vec` elements form the vector.
fn split_for_vec(atoms: &[Atom], vec: i64) -> Option<Vec<Atom>> {
    let mut out = atoms.to_vec();
    let mut acc = 1i64;
    while acc < vec {
        let last = out.pop()?;
        if acc * last.extent <= vec {
            acc *= last.extent;
            continue;
        }
        let f = vec / acc;
        if vec % acc != 0 || last.extent % f != 0 {
            return None;
        }
        out.push(Atom {
            extent: last.extent / f,
            mem: last.mem * f,
            reg: last.reg * f,
            coord: (last.coord.0, last.coord.1 * f),
        });
        acc = vec;
    }
    (acc == vec).then_some(out)
}

/// The widest vector that is contiguous, inside a swizzle chunk and aligned;
/// why each wider one was not possible goes to `limits`.
fn choose_vec(atoms: &[Atom], bits: u32, al: &Alignment, limits: &mut Vec<String>) -> (i64, Vec<Atom>) {
    let tail = contiguous_tail(atoms);
    for vec in vec_candidates(bits) {
        if vec == 1 {
            return (1, atoms.to_vec());
        }
        if tail % vec != 0 {
            limits.push(format!(
                "vec {vec}: only {tail} element{} per thread are contiguous in both memory and registers",
                plural(tail)
            ));
            continue;
        }
        if let Some(c) = al.chunk.filter(|&c| vec > c) {
            limits.push(format!("vec {vec} would cross the swizzle chunk of {c} elements"));
            continue;
        }
        let Some(outer) = split_for_vec(atoms, vec) else {
            limits.push(format!("vec {vec}: the contiguous tail does not split into vectors of {vec}"));
            continue;
        };
        match misaligned(vec, &outer, al) {
            Some(why) => limits.push(why),
            None => return (vec, outer),
        }
    }
    (1, atoms.to_vec())
}

/// The first term that is not a multiple of `vec`, as a limit line.
fn misaligned(vec: i64, outer: &[Atom], al: &Alignment) -> Option<String> {
    let mut terms: Vec<(&str, i64)> = Vec::new();
    for a in outer.iter().filter(|a| a.extent > 1) {
        terms.push(("memory round stride", a.mem));
        terms.push(("register round stride", a.reg));
    }
    for g in al.threads {
        terms.extend(g.mem.iter().filter(|i| i.extent > 1).map(|i| ("memory stride between threads", i.stride)));
    }
    terms.push(("memory region offset", al.mem_off));
    terms.push(("register region offset", al.reg_off));
    if al.sym_div != 0 {
        terms.push(("symbolic begin step", al.sym_div));
    }
    let (what, v) = terms.into_iter().find(|(_, v)| v % vec != 0)?;
    Some(format!(
        "vec {vec}: {what} {v} × {} B = {} B is not {}-B aligned",
        al.bytes,
        v.saturating_mul(al.bytes),
        vec * al.bytes
    ))
}

/// The §3.6 walk over the round atoms, with every thread's unswizzled base.
fn swizzle_walk(sw: &Swizzle, threads: &[ThreadGroup], outer: &[Atom], mem_off: i64, t: i64) -> Option<Walk> {
    let m0: Vec<i64> = (0..t)
        .map(|tid| mem_off + threads.iter().map(|g| group_offset(&g.mem, (tid / g.stride) % g.extent)).sum::<i64>())
        .collect();
    let iters: Vec<Iter> = outer.iter().map(|a| Iter::m(a.extent, a.mem)).collect();
    recognize(sw, &iters, &m0)
}

/// This thread's memory element offset: region offset, symbolic begin, and
/// the thread coordinate of every thread iter split over its memory group.
fn thread_base(em: &mut Emitter, p: &RegPlan, ity: DType) -> Result<LExpr, Decline> {
    let mut base = LExpr::Int(p.mem_off, ity);
    if let Some(k) = p.tid {
        let tid = em.thread_id(k);
        let b = em.builder();
        let tid = b.to_int(tid, ity);
        for g in &p.threads {
            let c = b.rem_c(b.div_c(tid.clone(), g.stride), g.extent);
            base = b.add(base, dim_offset(b, &g.mem, c));
        }
    }
    add_sym(em, base, &p.sym, ity)
}

/// `r` split along the register region's dims, and each shard iter's dim and coordinate
/// step (a guarded copy's coordinates).
fn by_dims(r: &TileLayout, reg: &BufferRegion, name: &str) -> Result<(TileLayout, Vec<(usize, i64)>), Decline> {
    let ext: Vec<i64> = reg.ranges.iter().map(|g| g.extent).collect();
    let (g, seps) = r.group(&ext).map_err(|e| {
        Decline::new(
            CopyRule::Align,
            format!("the layout of `{name}` does not split along its region's dims ({e}); a guarded copy needs each element's coordinates"),
        )
    })?;
    let mut coord_of = Vec::with_capacity(g.shard.len());
    for d in 0..ext.len() {
        let dim = &g.shard[seps[d]..seps[d + 1]];
        for k in 0..dim.len() {
            coord_of.push((d, dim[k + 1..].iter().map(|i| i.extent).product()));
        }
    }
    Ok((g, coord_of))
}

/// Each lane's coordinate offsets (per register-region dim) in a vector of `vec` made of
/// the innermost atoms, and whether they are an arithmetic progression.
fn lane_coords(atoms: &[Atom], vec: i64, rank: usize) -> (Vec<Vec<i64>>, bool) {
    let mut parts = Vec::new();
    let mut acc = 1i64;
    for a in atoms.iter().rev() {
        if acc >= vec {
            break;
        }
        let take = a.extent.min(vec / acc);
        parts.push((take, a.coord));
        acc *= take;
    }
    let lanes: Vec<Vec<i64>> = (0..vec)
        .map(|l| {
            let mut c = vec![0i64; rank];
            let mut rest = l;
            for &(e, (d, step)) in &parts {
                c[d] += (rest % e) * step;
                rest /= e;
            }
            c
        })
        .collect();
    let step: Vec<i64> = match lanes.get(1) {
        Some(l1) => l1.iter().zip(&lanes[0]).map(|(a, b)| a - b).collect(),
        None => vec![0; rank],
    };
    let progression = lanes.iter().enumerate().all(|(l, c)| c.iter().zip(&step).all(|(x, s)| *x == l as i64 * s));
    (lanes, progression)
}

/// This thread's coordinates in the register region (let-bound before the rounds).
fn thread_coords(em: &mut Emitter, p: &RegPlan, rank: usize) -> Vec<LExpr> {
    let mut c = vec![LExpr::i32(0); rank];
    if let Some(k) = p.tid {
        let tid = em.thread_id(k);
        let b = em.builder();
        let tid = b.to_int(tid, DType::I32);
        for g in &p.threads {
            let (d, step) = g.coord;
            let digit = b.rem_c(b.div_c(tid.clone(), g.stride), g.extent);
            c[d] = b.add(c[d].clone(), b.mul(digit, LExpr::i32(step)));
        }
    }
    let mut lets = Vec::new();
    let out = c.into_iter().enumerate().map(|(d, e)| bind(em, &mut lets, &format!("c{d}"), e)).collect();
    em.stmts.extend(lets);
    out
}

/// The coordinates of round `f`'s first lane.
fn round_coords(em: &Emitter, p: &RegPlan, base: &[LExpr], f: &LExpr) -> Vec<LExpr> {
    let b = em.builder();
    let mut c = base.to_vec();
    let mut inner = 1i64;
    for a in p.outer.iter().rev() {
        if a.extent > 1 && a.coord.1 != 0 {
            let digit = b.rem_c(b.div_c(f.clone(), inner), a.extent);
            let (d, step) = a.coord;
            c[d] = b.add(c[d].clone(), b.mul(digit, LExpr::i32(step)));
        }
        inner *= a.extent;
    }
    c
}

/// A round of a guarded copy: the vector access where its deciding lanes hold, else one
/// guarded scalar access per lane (a load writing `other` where it does not read).
fn guarded(
    cx: &CallCx,
    em: &mut Emitter,
    g: &Guard,
    vector: LStmtKind,
    c0: Vec<LExpr>,
    (dst, dst_index, src, src_index): (LBufId, LExpr, LBufId, LExpr),
) -> Result<Vec<LStmt>, Bug> {
    let span = em.span;
    let other = g.fill_value(cx, em, em.builder().bufs[dst.0 as usize].dtype)?;
    let b = em.builder();
    let coords: Vec<Vec<LExpr>> = g
        .lanes
        .iter()
        .map(|lane| c0.iter().zip(lane).map(|(x, o)| b.add(x.clone(), LExpr::i32(*o))).collect())
        .collect();
    let lanes = (0..g.lanes.len())
        .map(|l| {
            let at = |i: &LExpr| b.add(i.clone(), LExpr::Int(l as i64, b.ity(i)));
            let store =
                |value| LStmt::new(LStmtKind::Memory(MemOp::Store { buf: dst, index: at(&dst_index), value }), span);
            Lane { copy: store(LExpr::Load(src, Box::new(at(&src_index)))), fill: other.clone().map(store) }
        })
        .collect();
    g.vector(cx, em, &coords, LStmt::new(vector, span), lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(extent: i64, mem: i64, reg: i64) -> Atom {
        Atom { extent, mem, reg, coord: (0, 0) }
    }

    #[test]
    fn tail_needs_both_sides_contiguous() {
        assert_eq!(contiguous_tail(&[a(2, 64, 8), a(8, 1, 1)]), 8);
        assert_eq!(contiguous_tail(&[a(4, 4, 4), a(4, 1, 1)]), 16);
        // Memory rows padded to 8: only the row is contiguous.
        assert_eq!(contiguous_tail(&[a(4, 8, 4), a(4, 1, 1)]), 4);
        // Registers strided: nothing contiguous.
        assert_eq!(contiguous_tail(&[a(8, 1, 2)]), 1);
    }

    #[test]
    fn vector_split() {
        assert_eq!(split_for_vec(&[a(8, 1, 1)], 4), Some(vec![a(2, 4, 4)]));
        assert_eq!(split_for_vec(&[a(2, 8, 2), a(2, 1, 1)], 4), Some(vec![]));
        assert_eq!(split_for_vec(&[a(6, 1, 1)], 4), None);
    }
}
