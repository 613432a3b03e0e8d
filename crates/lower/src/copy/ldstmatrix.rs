//! copy → ldstmatrix (priority 10, docs/tile-primitives.md §3.4).
//!
//! **Accepts** a register ↔ shared copy of 16-bit elements (f16, bf16, i16,
//! u16) at warp, warpgroup or cta scope with every thread active, when both
//! operands fit the m8n8 geometry: the register side is exactly the ldmatrix
//! fragment (lane `l` of a warp holds row `l/4`, column pair `l%4` of every
//! 8×8 tile, the pair in two adjacent registers), the shared side stores each
//! tile row-major (plain form) or column-major (`.trans`), and every 16-byte row
//! address is aligned. A decline names the condition that failed and copy→reg
//! takes the copy. Beyond the reference it checks the dtype, the alignment of the
//! shared region start and of the register pairs, that the register region
//! holds whole fragments (no thread offset), and it refuses a store from
//! registers replicated over warps (every warp would write the same elements).
//!
//! **Algorithm**: slice both operands to the region; group the shared layout by
//! the register iters and permute both so the thread iters come first, then the
//! registers by stride; regroup to `[T/32, 8, 4, M/2, 2]` (T threads, M elements
//! per thread) and check the fragment strides `(32, 4, 1)@thread` and `1` and the
//! shared pattern (`trans`, row stride `p`); then split `M/2` as
//! `[M/(2·num), num]` for the widest `num ∈ {4, 2, 1}` whose tiles stay aligned
//! (pairs in register order, else in shared-stride order).
//! Lane `l` supplies the row `l % 8` of tile `(l / 8) % num`. The fit runs at
//! plan time, so `tirx explain` shows num and trans, or the failed condition,
//! for every call (the reference declines at emit).
//!
//! **Generated code** (seed demo, num 2, one instruction per warp):
//! ```text
//! let s_row = ((lane / 8) % 2) * 8 + (lane % 8) * 16
//! ldmatrix.x2 {R[0], R[2]} <- A_smem[s_row]
//! ```
//! With `M/(2·num) > 1` an unrolled loop issues one instruction per tile group;
//! a swizzled shared side addresses `swizzle(row)`, through the §3.6 walk when
//! it is recognised, else as `swizzle(s_row + ..) + s_row_hi`: the row's terms
//! that are multiples of the swizzle period (stage, warp and tile offsets) are
//! bound apart and added after the swizzle (`addr::swizzle`), e.g.
//! `A_s[(s_row ^ ((s_row >> 6) << 3)) + mm * 1024 + s_row_hi]`.

use super::call::CopyRule;
use super::call::{add_sym, bind, operands, scope_pair};
use super::swizzle_iter::{recognize, Walk};
use crate::addr::{dim_offset, period_bits, split_multiples, swizzle};
use crate::affine::Affine;
use crate::build::Hw;
use crate::lay;
use crate::operand;
use crate::scope::TidKind;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use std::collections::BTreeSet;
use tirx_ir::hir::{BufferRegion, MemScope};
use tirx_ir::lir::{LExpr, LStmt, LStmtKind, MatrixDir, MatrixMove, MatrixOp};
use tirx_ir::op::Family;
use tirx_ir::Arch;
use tirx_ir::DType;
use tirx_layout::apply::split_coord;
use tirx_layout::{Axis, ExecScope, Fusion, Iter, Swizzle, TileLayout};

pub struct LdStMatrix;

const PAIRS: &[(MemScope, MemScope)] = &[(MemScope::Local, MemScope::Shared), (MemScope::Shared, MemScope::Local)];

/// The fragment as scripts write it, for decline hints.
const FRAGMENT_HINT: &str = "the m8n8 fragment of a warp is S[(8, 4, num, 2):(4@laneid, 1@laneid, 2, 1)]";

/// Segments of the coarse geometry `[T/32, 8, 4, M/2, 2]`.
const WARP: usize = 0;
const ROW: usize = 1;
const COLS: usize = 2;
const PAIRS_SEG: usize = 3;
const PAIR: usize = 4;

/// The register operand sliced to its region (canonical).
struct Regs {
    name: String,
    tile: TileLayout,
    axis: Axis,
}

/// The shared operand sliced to its region (canonical tile, swizzle kept apart).
struct Shared {
    name: String,
    tile: TileLayout,
    swizzle: Option<Swizzle>,
    /// Symbolic part of the region start: Σ coefficient(elements) · var.
    sym: Affine,
    /// What `sym` is always a multiple of (`MemOperand::sym_div`).
    sym_div: i64,
}

/// Both sides split as `[T/32, 8, 4, M/2, 2]`, each segment canonical (unit iters dropped).
struct Coarse {
    r: Vec<Vec<Iter>>,
    s: Vec<Vec<Iter>>,
    warps: i64,
    /// Elements per thread.
    m: i64,
}

/// The `M/2` pairs split as `[M/(2·num), num]` on both sides.
struct Split {
    num: i64,
    r_outer: Vec<Iter>,
    r_tile: Vec<Iter>,
    s_outer: Vec<Iter>,
    s_tile: Vec<Iter>,
}

/// Everything emit needs.
struct MatrixPlan {
    store: bool,
    trans: bool,
    /// Elements between the rows whose addresses lanes supply (`s8`, or `s2` for `.trans`).
    row_stride: i64,
    axis: Axis,
    warps: i64,
    s_warp: Vec<Iter>,
    split: Split,
    r_off: i64,
    s_off: i64,
    swizzle: Option<Swizzle>,
    sym: Affine,
    walk: Option<Walk>,
    /// Elements per 16-bit unit: 1, or 2 for 8-bit operands moved as byte pairs
    /// (everything above counts units; emit scales the indices).
    unit: i64,
}

impl MatrixPlan {
    fn m_outer(&self) -> i64 {
        extent(&self.split.r_outer)
    }
}

impl Variant for LdStMatrix {
    fn name(&self) -> &'static str {
        "ldstmatrix"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Copy
    }
    /// `ldmatrix` exists from sm_75; `stmatrix` needs sm_90 (checked in `plan`).
    fn min_arch(&self) -> Arch {
        Arch::SM_75
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let t = cx.cooperating_threads(&[ExecScope::Warp, ExecScope::Warpgroup, ExecScope::Cta])?;
        let ops = operands(cx)?;
        scope_pair(&ops, PAIRS)?;
        if ops.src_buf.scope == MemScope::Local && !cx.opts.arch.supports(Arch::SM_90) {
            return Err(Decline::arch("stmatrix", Arch::SM_90, cx.opts.arch));
        }
        let dt = ops.src_buf.dtype;
        if !matches!(dt.bits(), 8 | 16) {
            return Err(Decline::new(
                CommonRule::Dtype,
                format!(
                    "ldmatrix/stmatrix move 16-bit elements (.b16), or 8-bit ones in adjacent pairs; `{}` is {dt}",
                    ops.src_buf.name
                ),
            ));
        }
        if t <= 0 || t % 32 != 0 {
            return Err(Decline::new(
                CommonRule::ExecScope,
                format!("the {} scope has {t} threads; ldmatrix/stmatrix need whole warps", cx.scope.kind),
            ));
        }
        let store = ops.src_buf.scope == MemScope::Local;
        let (r_reg, s_reg) = if store { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
        let regs = regs_side(cx, r_reg, store, t)?;
        let shared = shared_side(cx, s_reg)?;
        let (regs, shared, unit) = if dt.bits() == 8 { byte_pairs(regs, shared)? } else { (regs, shared, 1) };
        let (mut p, limits) = fit(regs, shared, store)?;
        p.unit = unit;
        let (text, rounds) = (summary(&p), p.m_outer() as u64);
        let mut plan = Plan::new(text, p);
        plan.rounds = Some(rounds);
        plan.limits = limits;
        Ok(plan)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<MatrixPlan>("ldstmatrix")?;
        let ops = operands(cx)?;
        let (r_reg, s_reg) = if p.store { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
        let (rb, r_ity) = em.lbuf(r_reg.buf)?;
        let (sb, s_ity) = em.lbuf(s_reg.buf)?;
        let mut pre = Vec::new();
        let row = row_address(em, p, s_ity)?;
        // The row's multiples of the swizzle period (stage, warp and tile offsets) go after the
        // swizzle (addr::swizzle), in their own binding: `s_row` stays loop-invariant.
        let (row, row_hi) = match (&p.walk, &p.swizzle) {
            (None, Some(sw)) => split_multiples(em.builder(), &row, period_bits(sw)),
            _ => (row, LExpr::Int(0, s_ity)),
        };
        let row = bind(em, &mut pre, "s_row", row);
        let row_hi = bind(em, &mut pre, "s_row_hi", row_hi);
        let m_outer = p.m_outer();
        let mm_var = (m_outer > 1).then(|| em.var("mm", DType::I32, Some((0, m_outer - 1))));
        let mm = mm_var.map_or(LExpr::i32(0), LExpr::Var);
        let smem_index = match (&p.walk, &p.swizzle) {
            (Some(walk), _) => walk.emit(em, &mut pre, row, &mm),
            (None, sw) => {
                let b = em.builder();
                let at = b.add(row, dim_offset(b, &p.split.s_outer, b.to_int(mm.clone(), s_ity)));
                match sw {
                    Some(sw) => b.add(swizzle(b, sw, at), row_hi),
                    None => at,
                }
            }
        };
        let b = em.builder();
        let r_base = b.add(LExpr::Int(p.r_off, r_ity), dim_offset(b, &p.split.r_outer, b.to_int(mm, r_ity)));
        // (In 16-bit units: an 8-bit operand's element index is twice its pair's.)
        let bytes = |e: LExpr, ity| if p.unit == 1 { e } else { b.mul(e, LExpr::Int(p.unit, ity)) };
        let smem_index = bytes(smem_index, s_ity);
        let reg_index: Vec<LExpr> = (0..p.split.num)
            .map(|i| bytes(b.add(r_base.clone(), dim_offset(b, &p.split.r_tile, LExpr::Int(i, r_ity))), r_ity))
            .collect();
        let num = p.split.num as u8;
        let dir = if p.store { MatrixDir::Store } else { MatrixDir::Load };
        let kind = LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
            dir,
            num,
            trans: p.trans,
            smem: sb,
            smem_index,
            regs: rb,
            reg_index,
        }));
        em.stmts.extend(pre);
        match mm_var {
            Some(v) => {
                let body = vec![LStmt::new(kind, em.span)];
                em.push(LStmtKind::For {
                    var: v,
                    begin: LExpr::i32(0),
                    extent: LExpr::i32(m_outer),
                    unroll: true,
                    body,
                });
            }
            None => em.push(kind),
        }
        Ok(())
    }
}

/// `ldmatrix.x2: num 2, trans false, 1 instruction per warp, rows 16 elements apart`.
fn summary(p: &MatrixPlan) -> String {
    let instr = if p.store { "stmatrix" } else { "ldmatrix" };
    let t = if p.trans { ".trans" } else { "" };
    let num = p.split.num;
    let n = p.m_outer();
    let swz = match (&p.swizzle, &p.walk) {
        (None, _) => "",
        (Some(_), Some(_)) => ", swizzle fast path",
        (Some(_), None) if n > 1 => ", swizzled with xor/shift per instruction",
        (Some(_), None) => ", swizzled with xor/shift",
    };
    let per = if n == 1 { "instruction" } else { "instructions" };
    let (apart, pairs) = if p.unit == 1 { ("elements", "") } else { ("byte pairs", ", 8-bit elements in pairs") };
    format!(
        "{instr}.x{num}{t}: num {num}, trans {}, {n} {per} per warp, rows {} {apart} apart{swz}{pairs}",
        p.trans, p.row_stride
    )
}

/// Lane's row address with `mm = 0` (before the swizzle):
/// `offset + warp tile + tile (lane / 8) % num + (lane % 8) · p + symbolic begin`.
fn row_address(em: &mut Emitter, p: &MatrixPlan, ity: DType) -> Result<LExpr, Decline> {
    let lane = em.thread_id(TidKind::Lane);
    let warp = match (p.warps, p.axis) {
        (1, _) | (_, Axis::LaneId) => LExpr::i32(0),
        (_, Axis::TidInWg) => em.b.hw(Hw::WarpInWg, "warp_in_wg"),
        _ => em.b.hw(Hw::WarpId, "warp"),
    };
    let b = em.builder();
    let lane = b.to_int(lane, ity);
    let num = p.split.num;
    let tile = if num > 1 { b.rem_c(b.div_c(lane.clone(), 8), num) } else { LExpr::Int(0, ity) };
    let mut at = LExpr::Int(p.s_off, ity);
    at = b.add(at, dim_offset(b, &p.s_warp, b.to_int(warp, ity)));
    at = b.add(at, dim_offset(b, &p.split.s_tile, tile));
    at = b.add(at, b.mul(b.rem_c(lane, 8), LExpr::Int(p.row_stride, ity)));
    add_sym(em, at, &p.sym, ity)
}

// ---------------------------------------------------------------- operands

/// The register operand: a tile layout over exactly one thread axis that
/// every thread of the axis owns a part of, sliced to whole fragments.
fn regs_side(cx: &CallCx, r: &BufferRegion, store: bool, threads: i64) -> Result<Regs, Decline> {
    let b = cx.buf(r.buf);
    let kind = cx.scope.kind;
    let t =
        operand::register(cx, r).map_err(|m| Decline::new(CopyRule::Fragment, format!("{m}; {FRAGMENT_HINT}")))?.tile;
    if !t.replica.is_empty() {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("`{}` replicates its elements ({t}); ldmatrix needs each element in one register", b.name),
        ));
    }
    let axes: BTreeSet<Axis> = t.shard.iter().filter(|i| i.axis.is_thread() && i.extent > 1).map(|i| i.axis).collect();
    let axis = match axes.iter().collect::<Vec<_>>()[..] {
        [a] => *a,
        [] => {
            return Err(Decline::new(
                CopyRule::Fragment,
                format!("`{}` is not distributed over threads (layout {t}); {FRAGMENT_HINT}", b.name),
            ))
        }
        _ => {
            let names: Vec<&str> = axes.iter().map(|a| a.name()).collect();
            return Err(Decline::new(
                CopyRule::Fragment,
                format!(
                    "`{}` is distributed over several thread axes ({}); ldmatrix needs one of laneid, tid_in_wg, tx",
                    b.name,
                    names.join(", ")
                ),
            ));
        }
    };
    if !matches!(axis, Axis::LaneId | Axis::TidInWg | Axis::Tx) {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("`{}` is distributed over `{axis}`; ldmatrix needs laneid, tid_in_wg or tx", b.name),
        ));
    }
    if let Some((a, v)) = t.offset.iter().find(|(a, v)| a.is_thread() && **v != 0) {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("the region of `{}` selects part of the threads (offset {v}@{a}); copy whole fragments", b.name),
        ));
    }
    if let Some(it) = t.shard.iter().find(|i| i.axis.is_memory() && i.axis != Axis::M && i.extent > 1) {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("`{}` has iters on the `{}` axis; registers are addressed on `m`", b.name, it.axis),
        ));
    }
    let (owner, _) = axis.scopes().unwrap_or((ExecScope::Cta, ExecScope::Thread));
    if owner.wider_than(kind) {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!(
                "`{}` is distributed over `{axis}` (threads of a {owner}) but the copy runs at {kind} scope",
                b.name
            ),
        ));
    }
    let axis_threads = match axis {
        Axis::LaneId => 32,
        Axis::TidInWg => 128,
        _ => cx.scope.cta_threads,
    };
    let tt: i64 = t.shard.iter().filter(|i| i.axis.is_thread()).map(|i| i.extent).product();
    if tt != axis_threads {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("`{}` spreads over {tt} values of `{axis}`, which has {axis_threads}; every lane of every warp must hold a fragment", b.name),
        ));
    }
    if store && axis_threads < threads {
        return Err(Decline::new(
            CopyRule::Replicated,
            format!(
                "`{}` holds one copy per {owner} at {kind} scope: every {owner} would store the same shared elements; copy at {owner} scope",
                b.name
            ),
        ));
    }
    Ok(Regs { name: b.name.clone(), tile: t, axis })
}

/// The shared operand (`operand::memory`), whose swizzle (if any) must keep
/// the 8-element (16-byte) rows of ldmatrix together.
fn shared_side(cx: &CallCx, r: &BufferRegion) -> Result<Shared, Decline> {
    let b = cx.buf(r.buf);
    let m = operand::memory(cx, r)?;
    if let Some(sw) = m.swizzle.filter(|sw| sw.per_element < 3) {
        return Err(Decline::new(
            CopyRule::Swizzle,
            format!(
                "`{}` swizzles chunks of {} elements (per_element={} < 3); ldmatrix rows are 8 elements (16 B) that a swizzle must keep together",
                b.name,
                sw.chunk(),
                sw.per_element
            ),
        ));
    }
    Ok(Shared { name: b.name.clone(), tile: m.tile, swizzle: m.swizzle, sym: m.sym, sym_div: m.sym_div })
}

// ---------------------------------------------------------------- byte pairs

/// 8-bit operands as 16-bit ones (ldmatrix/stmatrix move `.b16` elements, which
/// of bytes are adjacent pairs): a thread's registers must pair on their
/// innermost iter (stride 1), the shared elements of a pair be adjacent too;
/// that iter is halved and every other `m` stride, offset, swizzle and symbolic
/// begin counted in pairs. The fit and the addresses then run on 16-bit units.
fn byte_pairs(regs: Regs, shared: Shared) -> Result<(Regs, Shared, i64), Decline> {
    let no = |what: String| Decline::new(CopyRule::Fragment, format!("8-bit elements move in pairs: {what}"));
    let r = &regs.tile;
    let inner = r.shard.iter().position(|i| i.axis == Axis::M && i.stride == 1 && i.extent > 1);
    let Some(i) = inner.filter(|&i| r.shard[i].extent % 2 == 0) else {
        return Err(no(format!("the bytes of `{}` ({r}) are not in pairs of adjacent registers", regs.name)));
    };
    let (sg, seps) = shared.tile.group(&r.extents()).map_err(|e| {
        no(format!("the shared layout does not follow the register layout {r} element for element: {e}"))
    })?;
    let last = (seps[i]..seps[i + 1]).rev().find(|&k| sg.shard[k].extent > 1);
    let Some(k) =
        last.filter(|&k| sg.shard[k].axis == Axis::M && sg.shard[k].stride == 1 && sg.shard[k].extent % 2 == 0)
    else {
        return Err(no(format!(
            "the register pairs of `{}` are not adjacent bytes of `{}` ({})",
            regs.name, shared.name, shared.tile
        )));
    };
    let halve = |l: &TileLayout, at: usize, name: &str| -> Result<TileLayout, Decline> {
        let mut out = l.clone();
        for (j, it) in out.shard.iter_mut().enumerate() {
            if j == at {
                it.extent /= 2;
            } else if it.axis == Axis::M && it.extent > 1 {
                if it.stride % 2 != 0 {
                    return Err(no(format!("`{name}` has elements {} apart, which splits a pair", it.stride)));
                }
                it.stride /= 2;
            }
        }
        if let Some(off) = out.offset.get_mut(&Axis::M) {
            if *off % 2 != 0 {
                return Err(no(format!("the region of `{name}` starts at element {off}, inside a pair")));
            }
            *off /= 2;
        }
        Ok(out)
    };
    let swizzle = match shared.swizzle {
        Some(sw) if sw.per_element == 0 => {
            return Err(no(format!("`{}` swizzles single bytes", shared.name)));
        }
        sw => sw.map(|sw| Swizzle { per_element: sw.per_element - 1, ..sw }),
    };
    // (Exact: the begin is a multiple of `sym_div`, which is even.)
    let sym = shared.sym.clone().floor_div(2).filter(|_| shared.sym_div % 2 == 0);
    let Some(sym) = sym else {
        return Err(no(format!("the region of `{}` begins at a symbolic element that may be odd", shared.name)));
    };
    let regs = Regs { tile: halve(r, i, &regs.name)?, ..regs };
    let shared = Shared { tile: halve(&sg, k, &shared.name)?, swizzle, sym, sym_div: shared.sym_div / 2, ..shared };
    Ok((regs, shared, 2))
}

// ---------------------------------------------------------------- the fit

/// Checks the geometry and picks the widest `num`; the limits say why wider ones failed.
fn fit(regs: Regs, shared: Shared, store: bool) -> Result<(MatrixPlan, Vec<String>), Decline> {
    let c = coarse(&regs, &shared)?;
    check_fragment(&c, regs.axis)?;
    let (trans, row_stride) = shared_pattern(&c, (&regs.name, &shared.name))?;
    let s_off = lay::m_offset(&shared.tile);
    let r_off = lay::m_offset(&regs.tile);
    check_alignment(&c, &shared, s_off, r_off)?;
    let mut limits = Vec::new();
    let mut chosen = None;
    for num in [4, 2, 1] {
        match split_pairs(&c, num) {
            Ok(s) => {
                chosen = Some(s);
                break;
            }
            Err(why) => limits.push(format!("num {num}: {why}")),
        }
    }
    let Some(split) = chosen else {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("ldstmatrix layout doesn't fit any num ∈ {{4,2,1}}: {}", limits.join("; ")),
        ));
    };
    let mut p = MatrixPlan {
        store,
        trans,
        row_stride,
        axis: regs.axis,
        warps: c.warps,
        s_warp: c.s[WARP].clone(),
        split,
        r_off,
        s_off,
        swizzle: shared.swizzle,
        sym: shared.sym,
        walk: None,
        unit: 1,
    };
    p.walk = swizzle_walk(&p);
    Ok((p, limits))
}

/// Groups the shared side by the register iters, puts thread iters first
/// (then registers, strides descending) and splits both as `[T/32, 8, 4, M/2, 2]`.
fn coarse(regs: &Regs, shared: &Shared) -> Result<Coarse, Decline> {
    let r = &regs.tile;
    let internal = |e: tirx_layout::LayoutError| Decline::new(CopyRule::Fragment, format!("internal: {e}"));
    let (sg, seps) = shared.tile.group(&r.extents()).map_err(|e| {
        Decline::new(
            CopyRule::Fragment,
            format!("the shared layout does not follow the register layout {r} element for element: {e}"),
        )
    })?;
    let mut perm: Vec<usize> = (0..r.shard.len()).collect();
    perm.sort_by_key(|&i| (r.shard[i].axis.is_memory(), -r.shard[i].stride));
    let r_p = r.permute_dims(&perm).and_then(|l| l.canonicalize(Fusion::Cuda)).map_err(internal)?;
    let s_p = sg.permute_by_groups(&seps, &perm).and_then(|l| l.canonicalize(Fusion::Cuda)).map_err(internal)?;
    let tt: i64 = r.shard.iter().filter(|i| i.axis.is_thread()).map(|i| i.extent).product();
    let m: i64 = r.shard.iter().filter(|i| i.axis.is_memory()).map(|i| i.extent).product();
    if m % 2 != 0 {
        return Err(Decline::new(
            CopyRule::Fragment,
            format!("each thread holds {m} elements of the region; ldmatrix moves pairs of 16-bit elements (32-bit registers)"),
        ));
    }
    let shape = [tt / 32, 8, 4, m / 2, 2];
    let split = |l: &TileLayout, side: &str| {
        segments(l, &shape).ok_or_else(|| {
            Decline::new(
                CopyRule::Fragment,
                format!("the {side} layout {l} does not split as [warps {}, rows 8, column pairs 4, pairs {}, 2]; {FRAGMENT_HINT}", tt / 32, m / 2),
            )
        })
    };
    Ok(Coarse { r: split(&r_p, "register")?, s: split(&s_p, "shared")?, warps: tt / 32, m })
}

/// `l` grouped by `shape`, each segment without unit iters and fused.
fn segments(l: &TileLayout, shape: &[i64]) -> Option<Vec<Vec<Iter>>> {
    let (g, seps) = l.group(shape).ok()?;
    Some(seps.windows(2).map(|w| segment(&g.shard[w[0]..w[1]])).collect())
}

/// Unit iters dropped, adjacent chained iters fused.
fn segment(iters: &[Iter]) -> Vec<Iter> {
    let mut out: Vec<Iter> = Vec::with_capacity(iters.len());
    for it in iters.iter().filter(|i| i.extent != 1) {
        match out.last_mut() {
            Some(last) if last.axis == it.axis && it.extent * it.stride == last.stride => {
                *last = Iter::new(last.extent * it.extent, it.stride, it.axis);
            }
            _ => out.push(*it),
        }
    }
    out
}

fn extent(iters: &[Iter]) -> i64 {
    iters.iter().map(|i| i.extent).product()
}

fn text(iters: &[Iter]) -> String {
    if iters.is_empty() {
        return "nothing".into();
    }
    TileLayout::from_shard(iters.to_vec()).to_string()
}

/// The register side is exactly the fragment: warps `32@t`, rows `4@t`,
/// column pairs `1@t`, element pair `1` (adjacent registers).
fn check_fragment(c: &Coarse, axis: Axis) -> Result<(), Decline> {
    let want = |seg: usize, e: i64, s: i64, a: Axis, what: String| {
        if c.r[seg][..] == [Iter::new(e, s, a)] {
            Ok(())
        } else {
            Err(Decline::new(
                CopyRule::Fragment,
                format!(
                    "register side is not the m8n8 fragment: {what} ({}), got {}; {FRAGMENT_HINT}",
                    text(&[Iter::new(e, s, a)]),
                    text(&c.r[seg])
                ),
            ))
        }
    };
    want(ROW, 8, 4, axis, format!("the 8 rows of a tile must be lanes 4·r, 4 apart on `{axis}`"))?;
    want(COLS, 4, 1, axis, format!("the 4 column pairs of a row must be adjacent lanes on `{axis}`"))?;
    if c.warps > 1 {
        want(
            WARP,
            c.warps,
            32,
            axis,
            format!("the {} warps must own consecutive fragments, 32 apart on `{axis}`", c.warps),
        )?;
    }
    want(PAIR, 2, 1, Axis::M, "the two 16-bit elements of a column pair must be adjacent registers".into())
}

/// `(trans, row stride)`: row-major tiles `(s4, s2) = (2, 1)` use the plain
/// form with rows `s8` apart; column-major `s8 = 1, s4 = 2·s2` use `.trans`
/// with rows `s2` apart. Rows must be 16-B aligned (a multiple of 8 elements).
/// The strides are those of the shared elements in the fragment's register
/// order, so a mismatch means the register layout is not the fragment of this
/// shared layout.
fn shared_pattern(c: &Coarse, names: (&str, &str)) -> Result<(bool, i64), Decline> {
    let (r, s) = names;
    let pairing = format!(
        "`{r}` is not the m8n8 fragment of `{s}`: in the fragment's register order (lane l holds row l/4, column pair l%4 of each tile)"
    );
    let one = |seg: usize, what: &str| match c.s[seg][..] {
        [it] => Ok(it.stride),
        _ => Err(Decline::new(
            CopyRule::Fragment,
            format!(
                "{pairing} the {what} of a tile are not evenly strided in `{s}` ({}); {FRAGMENT_HINT}",
                text(&c.s[seg])
            ),
        )),
    };
    let (s8, s4, s2) = (one(ROW, "8 rows")?, one(COLS, "4 column pairs")?, one(PAIR, "2 elements of a column pair")?);
    let misaligned = |p: i64, what: &str| {
        Decline::new(
            CopyRule::Alignment,
            format!(
                "{what} of `{s}` are {p} elements ({} B) apart; ldmatrix/stmatrix rows are 16-B aligned, so that must be a positive multiple of 8 elements",
                2 * p
            ),
        )
    };
    if (s4, s2) == (2, 1) {
        return if s8 > 0 && s8 % 8 == 0 { Ok((false, s8)) } else { Err(misaligned(s8, "the rows (row-major tiles)")) };
    }
    if s8 == 1 && s4 == 2 * s2 {
        return if s2 > 0 && s2 % 8 == 0 {
            Ok((true, s2))
        } else {
            Err(misaligned(s2, "the columns (column-major tiles, .trans)"))
        };
    }
    Err(Decline::new(
        CopyRule::Fragment,
        format!(
            "{pairing} the tiles of `{s}` are neither row-major (column pair stride 2, element stride 1) nor column-major (row stride 1, column pair stride 2 × element stride): strides rows {s8}, column pairs {s4}, elements {s2}; {FRAGMENT_HINT}"
        ),
    ))
}

/// The region start, the warps' tiles and a symbolic begin keep rows 16-B
/// aligned; the register region starts on a whole 32-bit register.
fn check_alignment(c: &Coarse, shared: &Shared, s_off: i64, r_off: i64) -> Result<(), Decline> {
    let bad = |what: String| Decline::new(CopyRule::Alignment, what);
    if s_off % 8 != 0 {
        return Err(bad(format!("the shared region starts at element {s_off} ({} B), not 16-B aligned", 2 * s_off)));
    }
    if let Some(it) = c.s[WARP].iter().find(|i| i.stride % 8 != 0) {
        return Err(bad(format!(
            "the warps' tiles are {} elements apart in shared memory, not a multiple of 8 (16 B)",
            it.stride
        )));
    }
    let k = shared.sym_div;
    if k % 8 != 0 {
        return Err(bad(format!("the symbolic region begin moves by {k} elements, not a multiple of 8 (16 B)")));
    }
    if r_off % 2 != 0 {
        return Err(bad(format!("the register region starts at register element {r_off}, inside a 32-bit pair")));
    }
    Ok(())
}

/// `M/2` pairs as `[M/(2·num), num]` in register order, else in shared order
/// (the reference tries shared order first; both are correct, register order
/// keeps a tile group's registers together).
fn split_pairs(c: &Coarse, num: i64) -> Result<Split, String> {
    let pairs = c.m / 2;
    if pairs % num != 0 {
        return Err(format!("{pairs} register pairs per thread are not a multiple of {num}"));
    }
    let mut why: Vec<String> = Vec::new();
    for (r, s) in pair_orders(c) {
        match split_order(&r, &s, num, pairs) {
            Ok(split) => return Ok(split),
            Err(e) if !why.contains(&e) => why.push(e),
            Err(_) => {}
        }
    }
    Err(why.join("; in shared order, "))
}

/// The pairs segment in register order and, when it differs, in shared order:
/// shared iters by stride descending, the register iters regrouped to follow.
fn pair_orders(c: &Coarse) -> Vec<(Vec<Iter>, Vec<Iter>)> {
    let (r, s) = (&c.r[PAIRS_SEG], &c.s[PAIRS_SEG]);
    let mut out = vec![(r.clone(), s.clone())];
    let ext: Vec<i64> = s.iter().map(|i| i.extent).collect();
    let mut perm: Vec<usize> = (0..s.len()).collect();
    perm.sort_by_key(|&k| -s[k].stride);
    if perm.iter().enumerate().all(|(i, &k)| i == k) {
        return out;
    }
    if let Ok((rg, seps)) = TileLayout::from_shard(r.clone()).group(&ext) {
        let r_sorted: Vec<Iter> = perm.iter().flat_map(|&k| rg.shard[seps[k]..seps[k + 1]].iter().copied()).collect();
        let s_sorted: Vec<Iter> = perm.iter().map(|&k| s[k]).collect();
        out.push((segment(&r_sorted), segment(&s_sorted)));
    }
    out
}

/// One ordering of the pairs split as `[M/(2·num), num]`: tiles and tile groups
/// 16-B aligned in shared memory (tiles at distinct addresses), each pair on a
/// whole register.
fn split_order(r: &[Iter], s: &[Iter], num: i64, pairs: i64) -> Result<Split, String> {
    let shape = [pairs / num, num];
    let fail = || format!("the register pairs do not split into {} groups of {num} tiles", pairs / num);
    let r = segments(&TileLayout::from_shard(r.to_vec()), &shape).ok_or_else(fail)?;
    let s = segments(&TileLayout::from_shard(s.to_vec()), &shape).ok_or_else(fail)?;
    if let Some(it) = r.iter().flatten().find(|i| i.stride % 2 != 0) {
        return Err(format!("register pairs {} apart would start inside a 32-bit register", it.stride));
    }
    if let Some(it) = s[1].iter().find(|i| i.stride <= 0 || i.stride % 8 != 0) {
        return Err(format!(
            "the {num} tiles are {} elements apart in shared memory, not a positive multiple of 8 (16 B)",
            it.stride
        ));
    }
    if let Some(it) = s[0].iter().find(|i| i.stride % 8 != 0) {
        return Err(format!(
            "tile groups are {} elements apart in shared memory, not a multiple of 8 (16 B)",
            it.stride
        ));
    }
    let [r_outer, r_tile] = <[Vec<Iter>; 2]>::try_from(r).map_err(|_| fail())?;
    let [s_outer, s_tile] = <[Vec<Iter>; 2]>::try_from(s).map_err(|_| fail())?;
    Ok(Split { num, r_outer, r_tile, s_outer, s_tile })
}

/// The §3.6 walk over the tile groups, checked for every warp and lane.
fn swizzle_walk(p: &MatrixPlan) -> Option<Walk> {
    let sw = p.swizzle.as_ref()?;
    if !p.sym.is_zero() || p.m_outer() <= 1 {
        return None;
    }
    let num = p.split.num;
    let mut m0 = Vec::with_capacity((p.warps * 32) as usize);
    for w in 0..p.warps {
        for lane in 0..32 {
            let tile = (lane / 8) % num;
            m0.push(p.s_off + offset_at(&p.s_warp, w) + offset_at(&p.split.s_tile, tile) + (lane % 8) * p.row_stride);
        }
    }
    recognize(sw, &p.split.s_outer, &m0)
}

/// `Σ c_k · s_k` of `x` split over the iters (integers).
fn offset_at(iters: &[Iter], x: i64) -> i64 {
    let ext: Vec<i64> = iters.iter().map(|i| i.extent).collect();
    split_coord(x, &ext).iter().zip(iters).map(|(c, i)| c * i.stride).sum()
}
