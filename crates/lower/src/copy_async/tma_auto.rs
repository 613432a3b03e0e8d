//! copy_async → tma_auto (priority 10, docs/tile-primitives.md §3.20).
//!
//! **Accepts** a global ↔ shared copy at thread scope (one thread issues it;
//! sm_90) whose regions hold one dtype and as many elements (shapes may differ:
//! elements correspond in row-major order), a load with `mbar=` (its completion
//! barrier), when the largest legal TMA box can be derived from the shared
//! layout: the two regions split along common iters (`layout`), the shared
//! iters form one dense chain of strides from 1 (`shared_chain`), region starts
//! and tensor dims are whole numbers of each descriptor dimension's unit
//! (`coordinate`, `global_shape`), and the descriptor passes the hardware rules
//! (`rank`, `inner_stride`, `global_stride_alignment`, `box_dim`,
//! `inner_box_bytes`, `swizzle_inner_box`, `global_dim`, `global_base_alignment`,
//! `shared_pointer`). The shared layout may carry a TMA swizzle (`swizzle`
//! otherwise). Config: `cache_hint`, `tensormap_l2_promotion`, `use_tma_reduce="add"`
//! (a store that adds into global memory: `cp.reduce.async.bulk.tensor`, f32 / f16 /
//! bf16 / s32 / u32 / u64: `reduce_dtype`; loads: `direction`); `oob=` only with
//! `dispatch="tma_explicit"`. A load in a cluster launch may multicast
//! (`cta_mask=`, an integer; a constant names only CTAs of the cluster: `cluster`,
//! `cta_mask`; `cta_mask=0` is a plain load). When forced (`dispatch="tma_auto"`), its
//! global region may leave the tensor, as `tma_explicit`'s may: zeros are loaded outside
//! it and a store is clipped (`bounds::hardware_bounded`). A global buffer with run-time
//! strides (`strides=`, §7.7) is accepted: a stride is an expression (split modes
//! multiply it), such dimensions are never merged, and the launch checks what a
//! constant stride is checked for here (`global_stride_alignment`).
//!
//! **Algorithm**: the global region's dims (one stride each) and the shared
//! region's layout (sliced, canonical, pre-swizzle) are refined into common
//! *modes* (extent, global stride, shared stride); sorted by shared stride they
//! must chain from 1 — the order the TMA unit writes a box in. Each mode is a
//! descriptor dimension (innermost first); a buffer dim split into several modes
//! gets a dimension per mode, the outer one sized `shape / inner` with coordinate
//! `start / inner`; unit region dims of larger tensor dims stay as coordinate-only
//! dimensions. The first `k` modes form the box, the rest become an unrolled
//! issue loop (shared start and one coordinate advancing); `k` is the largest
//! that gives a legal descriptor after canonicalization (unit dims dropped,
//! chained dims merged) and, where the innermost box is too wide, a promotion of
//! the descriptor unit to u16/u32/u64. The descriptor (`A_tmap`) is built on the
//! host and passed as a kernel parameter; equal descriptors are shared.
//!
//! **Generated code** (a 64×64 f16 tile into `mma_shared_layout(f16, 3, (64, 64))`):
//! ```text
//! tma.load.2d A_s[0] <- A_tmap[0, by * 64] bar=bars[0]
//! ```
//! (`tirx_tma_load_2d(&A_s[0], &A_tmap, 0, by * 64, &bars[0])`, SASS `UTMALDG.2D`;
//! with `cta_mask=3`: `... bar=bars[0] multicast=3`, `tirx_tma_load_2d_multicast`,
//! `.multicast::cluster`, SASS `UTMALDG.2D.MULTICAST`, every instruction of the
//! issue loop to the same CTAs.)
//! The kernel arms the barrier (`mbarrier.arrive.expect_tx` with the copy's bytes)
//! and waits; stores are committed and waited for in bulk groups.
//!
//! Differences from the reference: the shared start of every box is aligned to
//! the swizzle pattern's repeat (256/512/1024 B; the reference checks 32/64/128),
//! a swizzled box's innermost run fills the atom row exactly, and a global dim is
//! one strided iter; the search keeps the largest legal box rather than the
//! first run of legal prefixes.

use super::call::CopyAsyncRule;
use super::tma::{self, Coord, Dim, Issue, TmaConfig, TmaPlan};
use crate::copy::call::CopyOps;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::BufferRegion;
use tirx_ir::lir::SymExpr;
use tirx_ir::op::{ConfigKey, Family};
use tirx_ir::Arch;
use tirx_layout::Axis;

pub struct TmaAuto;

impl Variant for TmaAuto {
    fn name(&self) -> &'static str {
        "tma_auto"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::CopyAsync
    }
    fn honours(&self) -> &'static [ConfigKey] {
        tma::HONOURS
    }
    /// The descriptor takes run-time strides: the launch encodes them.
    fn runtime_strides(&self) -> bool {
        true
    }
    fn min_arch(&self) -> Arch {
        Arch::SM_90
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        let ops = tma::operands(cx)?;
        let cfg = tma::config(cx, &ops)?;
        if cfg.oob.is_some() {
            return Err(Decline::new(
                CommonRule::Config,
                "tma_auto copies boxes inside the tensor; `oob=` (a box partly outside) needs dispatch=\"tma_explicit\"",
            ));
        }
        let p = auto_plan(cx, &ops, cfg)?;
        let mut plan = Plan::new(p.summary(), ());
        plan.rounds = Some(p.instructions() as u64);
        plan.notes.push(p.descriptor_note(cx));
        plan.data = Box::new(p);
        Ok(plan)
    }

    fn emit(&self, plan: &Plan, _cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        tma::emit(plan.data::<TmaPlan>("tma_auto")?, em)
    }
}

/// One common iter of the two regions: extent, global and shared element strides,
/// and the global buffer dim it belongs to.
#[derive(Clone, Debug)]
struct Mode {
    e: i64,
    g: SymExpr,
    sh: i64,
    dim: usize,
}

fn auto_plan(cx: &CallCx, ops: &CopyOps, cfg: TmaConfig) -> Result<TmaPlan, Decline> {
    let (g_reg, s_reg) = if cfg.load { (ops.src, ops.dst) } else { (ops.dst, ops.src) };
    let gb = cx.buf(g_reg.buf);
    let gv = tma::global_view(cx, g_reg.buf)?;
    let swizzle = tma::shared_swizzle(cx, s_reg.buf)?;
    let smem = crate::operand::memory(cx, s_reg)?;
    let dtype = tma::dtype_of(gb.dtype)?;
    if let Some(it) = smem.tile.shard.iter().find(|i| i.axis != Axis::M && i.extent != 1) {
        return Err(Decline::new(
            CommonRule::Layout,
            format!("the shared region lies on the {} axis; TMA writes `m`", it.axis),
        ));
    }
    // Innermost first: the global region's dims, the shared region's iters.
    let global: Vec<(i64, SymExpr, usize)> = (0..g_reg.ranges.len())
        .rev()
        .filter(|&d| g_reg.ranges[d].extent > 1)
        .map(|d| (g_reg.ranges[d].extent, gv.strides[d].clone(), d))
        .collect();
    let shared: Vec<(i64, i64)> =
        smem.tile.shard.iter().rev().filter(|i| i.extent != 1).map(|i| (i.extent, i.stride)).collect();
    let modes = refine(&global, &shared).ok_or_else(|| {
        Decline::new(
            CommonRule::Layout,
            format!(
                "the shared layout of `{}` ({}) and the global region do not split along common iters",
                cx.buf(s_reg.buf).name,
                smem.tile
            ),
        )
    })?;
    let order = shared_chain(&modes)?;
    let elem = i64::from(gb.dtype.bytes());
    let base = TmaPlan {
        cfg,
        global: g_reg.buf,
        dtype,
        base_offset: gv.base * elem,
        dims: vec![],
        issues: vec![],
        swizzle,
        smem,
        elem,
    };
    let dims = mode_dims(cx, g_reg, &gv, &modes)?;
    let extra = coordinate_dims(g_reg, &gv, elem);
    let mut first = None;
    for k in (1..=order.len()).rev() {
        let mut p = base.clone();
        for (pos, &m) in order.iter().enumerate() {
            let mut d = dims[m].clone();
            if pos >= k {
                d.boxed = 1;
                d.issue = Some(p.issues.len());
                p.issues.push(Issue { extent: modes[m].e, smem_stride: modes[m].sh, dim: p.dims.len() });
            }
            p.dims.push(d);
        }
        p.dims.extend(extra.iter().cloned());
        match repaired(cx, p) {
            Ok(p) => return Ok(p),
            Err(d) => {
                first.get_or_insert(d);
            }
        }
    }
    Err(first.unwrap_or_else(|| Decline::new(CopyAsyncRule::Partition, "the copy is empty")))
}

/// The common refinement of two iter lists (innermost first, equal products): each
/// iter split where the other has a boundary. `None` when an extent does not divide.
fn refine(global: &[(i64, SymExpr, usize)], shared: &[(i64, i64)]) -> Option<Vec<Mode>> {
    let (mut gi, mut si) = (global.iter().cloned(), shared.iter().copied());
    let (mut g, mut s) = (gi.next(), si.next());
    let mut out = vec![];
    while let (Some((ge, gs, dim)), Some((se, ss))) = (g.clone(), s) {
        let e = ge.min(se);
        if ge % e != 0 || se % e != 0 {
            return None;
        }
        let split = gs.mul_int(e);
        out.push(Mode { e, g: gs, sh: ss, dim });
        g = if ge == e { gi.next() } else { Some((ge / e, split, dim)) };
        s = if se == e { si.next() } else { Some((se / e, ss * e)) };
    }
    (g.is_none() && s.is_none()).then_some(out)
}

/// The modes by shared stride, which must chain from 1 (the box is dense).
fn shared_chain(modes: &[Mode]) -> Result<Vec<usize>, Decline> {
    let mut order: Vec<usize> = (0..modes.len()).collect();
    order.sort_by_key(|&i| modes[i].sh);
    let mut next = 1i64;
    for &i in &order {
        if modes[i].sh != next {
            return Err(Decline::new(
                CopyAsyncRule::SharedChain,
                format!(
                    "the shared region is not one dense box: an iter of extent {} has stride {} where {next} follows the iters below it",
                    modes[i].e, modes[i].sh
                ),
            ));
        }
        next = next.saturating_mul(modes[i].e);
    }
    Ok(order)
}

/// A descriptor dimension per mode (in `modes` order): the inner modes of a buffer dim
/// are whole (size = extent, coordinate 0); its outermost mode spans the tensor dim
/// (`shape / inner`) from `start / inner`.
fn mode_dims(cx: &CallCx, r: &BufferRegion, gv: &tma::GlobalView, modes: &[Mode]) -> Result<Vec<Dim>, Decline> {
    let elem = i64::from(cx.buf(r.buf).dtype.bytes());
    let mut dims = vec![];
    for (i, m) in modes.iter().enumerate() {
        let outer = !modes[i + 1..].iter().any(|n| n.dim == m.dim);
        let inner: i64 = modes[..i].iter().filter(|n| n.dim == m.dim).map(|n| n.e).product();
        let (size, coord) = if outer {
            (outer_size(cx, r, gv, m.dim, inner)?, start_coord(cx, r, m.dim, inner)?)
        } else {
            (SymExpr::Int(m.e), Coord::zero())
        };
        dims.push(Dim { size, stride: m.g.mul_int(elem), boxed: m.e, coord, issue: None });
    }
    Ok(dims)
}

/// `shape[d] / inner`, which must divide.
fn outer_size(cx: &CallCx, r: &BufferRegion, gv: &tma::GlobalView, d: usize, inner: i64) -> Result<SymExpr, Decline> {
    match &gv.sizes[d] {
        SymExpr::Int(n) if n % inner == 0 => Ok(SymExpr::Int(n / inner)),
        _ if inner == 1 => Ok(gv.sizes[d].clone()),
        s => Err(Decline::new(
            CopyAsyncRule::GlobalShape,
            format!(
                "dim {d} of `{}` ({}) is not a whole number of the box's {inner}-element runs along it",
                cx.buf(r.buf).name,
                cx.env.sym.text(s)
            ),
        )),
    }
}

/// `start[d] / inner`, which must divide for every value of the start.
fn start_coord(cx: &CallCx, r: &BufferRegion, d: usize, inner: i64) -> Result<Coord, Decline> {
    let begin = &r.ranges[d].begin;
    let a = cx.affine(begin);
    let divides = a.as_ref().is_some_and(|a| {
        let g = cx.divisor(a);
        g == 0 || g % inner == 0
    });
    if !divides {
        return Err(Decline::new(
            CopyAsyncRule::Coordinate,
            format!(
                "dim {d} of the region starts at `{}`, not provably a multiple of the box's {inner}-element runs along it",
                crate::text::top_text(cx.kernel, begin)
            ),
        ));
    }
    Ok(match a {
        Some(a) if a.is_zero() => Coord::zero(),
        _ => Coord::of(begin, inner),
    })
}

/// Unit region dims of larger tensor dims: coordinate-only descriptor dimensions.
fn coordinate_dims(r: &BufferRegion, gv: &tma::GlobalView, elem: i64) -> Vec<Dim> {
    (0..r.ranges.len())
        .filter(|&d| r.ranges[d].extent == 1 && gv.sizes[d] != SymExpr::Int(1))
        .map(|d| Dim {
            size: gv.sizes[d].clone(),
            stride: gv.strides[d].mul_int(elem),
            boxed: 1,
            coord: Coord::of(&r.ranges[d].begin, 1),
            issue: None,
        })
        .collect()
}

/// Canonicalizes and validates `p`, promoting the descriptor unit while that is what fails.
fn repaired(cx: &CallCx, mut p: TmaPlan) -> Result<TmaPlan, Decline> {
    tma::canonicalize(&mut p);
    let mut err = match tma::validate(cx, &p) {
        Ok(()) => return Ok(p),
        Err(e) => e,
    };
    let mut q = p;
    let promotable =
        [CopyAsyncRule::BoxDim, CopyAsyncRule::Rank, CopyAsyncRule::InnerBoxBytes, CopyAsyncRule::GlobalStride];
    while promotable.iter().any(|r| err.rule == *r) {
        let Some(mut w) = tma::promote(&q).filter(|w| tma::coord_divides(cx, &w.dims[0].coord)) else { break };
        tma::canonicalize(&mut w);
        match tma::validate(cx, &w) {
            Ok(()) => return Ok(w),
            Err(e) => {
                err = e;
                q = w;
            }
        }
    }
    Err(err)
}
