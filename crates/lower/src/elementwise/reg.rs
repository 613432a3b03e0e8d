//! elementwise → reg (priority 10, docs/tile-primitives.md §3.7).
//!
//! **Accepts** an elementwise op (zero, fill, reciprocal, sqrt, exp, exp2,
//! log2, silu, add, sub, mul, fdiv, maximum, minimum, fma, cast) at thread,
//! warp, warpgroup or cta scope with every thread active, when every region
//! operand is in registers (`local`) with f32/f16/bf16 elements (a `cast` also
//! to or from float8 e4m3/e5m2, saturating, through f32), and the
//! destination (the *anchor*) carries a layout whose thread axes tile the whole
//! scope (`laneid` 32:1, `tid_in_wg` 128:1, `tx`; none at thread scope, where
//! `.local()` views and trivial layouts work). Sources broadcast NumPy-style
//! (right-aligned, each dim equal or 1); scalars are allowed anywhere an op
//! takes a value. Every source must be owned by the same thread as the
//! destination element it feeds: no data moves between threads. A source
//! replicated over threads (a row statistic, `+ R[4:1@laneid]`) is read from each
//! thread's own copy where the destination is broadcast along or replicated over
//! those threads; a replicated destination is written by each of its owners.
//!
//! **Algorithm**: slice and canonicalize the anchor, drop its thread iters;
//! what remains is each thread's bundle, walked by one loop per register iter.
//! Each source is lifted to the destination shape (broadcast dims become
//! stride-0 iters) and grouped by the anchor's iters, giving its register
//! index per loop coordinate. When the destination and every source form
//! aligned consecutive pairs (checked element by element over the bundle),
//! f16/bf16 add/sub/mul/fma/max/min use packed pair arithmetic (`Packed2`,
//! `__hadd2`…; bf16 from sm_80) and f32↔f16/bf16 and f32→float8 casts use pair
//! conversions (`Cast2`, `__float22half2_rn`, `__nv_fp8x2_e4m3`…, to nearest
//! only); otherwise one scalar op
//! per element in the compute type (`docs/numerics.md` §1: f32 for division,
//! sqrt and the transcendentals, else the widest operand type; f32 when f16
//! meets bf16), converted to the destination. `fma` is one rounding on every
//! type (§3); `rounding_mode=` is honoured or declined (`config`, §4), and a
//! bf16 fma declines below sm_80 (`arch`), where CUDA would round twice.
//!
//! **Generated code** (seed: warp sqrt of 32×8 f32, lane i owns row i):
//! ```text
//! for f in 0..8 (unroll) { R[f] = sqrt(R[f]) }
//! ```
//! (loops over bundles up to 256 elements are unrolled: constant register indices).
//! f16 pairs: `for f in 0..4 (unroll) { C[2f..2f+2] = __hadd2(A[2f..], B[2f..]) }`.

use super::call::EwiseRule;
use super::call::{broadcast_shape, convert, numerics, parse, scalar, scalar_values, OpCall, Operand};
use crate::addr::dim_offset;
use crate::lay;
use crate::operand::{self, group_offset, thread_part, UNROLL_ELEMS};
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::{BufferRegion, MemScope};
use tirx_ir::lir::pair::cast2_supported;
use tirx_ir::lir::{LExpr, LStmt, LStmtKind, MemOp, PackedOp, PairOp, PairSrc, RoundMode};
use tirx_ir::op::{ConfigKey, EwiseOp, Family};
use tirx_ir::Arch;
use tirx_ir::DType;
use tirx_layout::{Fusion, Iter, TileLayout};

pub struct EwiseReg;

/// Bundles up to this many elements are checked pair by pair for packing.
const PAIR_CHECK_LIMIT: i64 = 1 << 14;

/// Where a region operand's element lives in its thread's registers, per
/// coordinate of the anchor's register loops: `offset + Σ_k group_k(c_k)`.
#[derive(Clone, Debug, PartialEq)]
struct RegMap {
    offset: i64,
    /// One iter group per anchor loop (stride 0 where broadcast).
    groups: Vec<Vec<Iter>>,
}

impl RegMap {
    fn at(&self, c: &[i64]) -> i64 {
        self.offset + self.groups.iter().zip(c).map(|(g, &x)| group_offset(g, x)).sum::<i64>()
    }
}

/// How each pair operand of a packed op is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PairKind {
    /// Two consecutive registers, the first at an even index.
    Pair,
    /// One register feeding both lanes (a broadcast dim).
    Splat,
}

#[derive(Clone, Debug, PartialEq)]
enum Mode {
    Scalar,
    Packed { op: PackedOp, dtype: DType, kinds: Vec<PairKind> },
    Cast2,
}

/// Where one digit of an element's position in the region comes from: the anchor's shard
/// iters, outermost first, are the mixed-radix digits of its row-major index.
#[derive(Clone, Copy, Debug)]
enum Digit {
    /// Register loop `k`.
    Loop(usize),
    /// `(id(axis) / stride) % extent` of the executing thread.
    Thread(tirx_layout::Axis, i64),
    /// An iter of extent 1.
    Zero,
}

/// Each shard iter's digit and extent, the region's extents, and where the iters of each
/// dim start when no iter spans two dims (each coordinate is then its own iters' digits).
type Coords = (Vec<(Digit, i64)>, Vec<i64>, Option<Vec<usize>>);

struct EwPlan {
    /// Extents of the anchor's register loops, outermost first.
    loops: Vec<i64>,
    /// `masked_fill`: where each element's coordinates come from.
    coords: Option<Coords>,
    dst: RegMap,
    /// Per source: its map when it is a region.
    srcs: Vec<Option<RegMap>>,
    compute: DType,
    /// How arithmetic and the conversion to the destination round.
    rounding: RoundMode,
    mode: Mode,
}

impl Variant for EwiseReg {
    fn name(&self) -> &'static str {
        "reg"
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
        let t = cx.cooperating_threads(crate::variant::COOPERATIVE_SCOPES)?;
        let kind = cx.scope.kind;
        let call = parse(cx)?;
        check_operands(cx, &call)?;
        let (compute, rounding) = numerics(cx, &call)?;
        let dst_name = &cx.buf(call.dst.buf).name;
        let anchor = operand::register(cx, call.dst).map_err(|m| Decline::new(EwiseRule::AnchorLayout, m))?.tile;
        // A destination replicated over threads (a row statistic) is written by each of its
        // owners, each computing the same value from its own copies of the sources (`align`):
        // its shard and replica thread iters together must tile the scope.
        let owners = TileLayout::new(
            anchor.shard.iter().chain(anchor.replica.iter().filter(|i| i.axis.is_thread())).copied().collect(),
            vec![],
            anchor.offset.clone(),
        );
        thread_part(&owners, dst_name, kind, t, false).map_err(|m| Decline::new(EwiseRule::ScopeLevel, m))?;
        let loop_iters: Vec<Iter> =
            anchor.shard.iter().filter(|i| i.axis.is_memory() && i.extent > 1).copied().collect();
        let dst = RegMap { offset: lay::m_offset(&anchor), groups: loop_iters.iter().map(|i| vec![*i]).collect() };
        let dst_ext: Vec<i64> = call.dst.ranges.iter().map(|r| r.extent).collect();
        let mut srcs = Vec::with_capacity(call.srcs.len());
        let mut shared_copies = Vec::new();
        for s in &call.srcs {
            srcs.push(match s {
                Operand::Region(r) => {
                    let (map, copies) = align(cx, r, &anchor, &dst_ext, dst_name)?;
                    shared_copies.extend(copies);
                    Some(map)
                }
                Operand::Scalar(_) => None,
            });
        }
        let loops: Vec<i64> = loop_iters.iter().map(|i| i.extent).collect();
        let mut limits = Vec::new();
        let mode = choose_mode(cx, &call, (compute, rounding), &loops, &dst, &srcs, &mut limits);
        let bundle: i64 = loops.iter().product();
        let pairs = !matches!(mode, Mode::Scalar);
        let rounds = if pairs { bundle / 2 } else { bundle };
        let mut how = match &mode {
            Mode::Scalar => format!("one {compute} op per element"),
            Mode::Packed { dtype, .. } => format!("packed {dtype} pairs ({} ops)", rounds),
            Mode::Cast2 => format!("pair conversions ({} ops)", rounds),
        };
        if rounding != RoundMode::Rn {
            how += &format!(", rounding {rounding}");
        }
        for c in &shared_copies {
            how += &format!("; {c}");
        }
        let maps: Vec<String> = std::iter::once(map_text(&dst)).chain(srcs.iter().flatten().map(map_text)).collect();
        let summary = format!(
            "per-thread bundle {bundle} element{} (register loops {loops:?}; register strides per loop: dst {}); {how}",
            if bundle == 1 { "" } else { "s" },
            maps.join(", src ")
        );
        let coords = call.mask.map(|_| {
            let mut k = 0;
            let digits = anchor
                .shard
                .iter()
                .map(|it| {
                    let d = if it.axis.is_thread() {
                        Digit::Thread(it.axis, it.stride)
                    } else if it.extent > 1 {
                        k += 1;
                        Digit::Loop(k - 1)
                    } else {
                        Digit::Zero
                    };
                    (d, it.extent)
                })
                .collect();
            let seps = anchor.group(&dst_ext).ok().filter(|(g, _)| g.shard == anchor.shard).map(|(_, seps)| seps);
            (digits, dst_ext.clone(), seps)
        });
        let mut p = Plan::new(summary, EwPlan { loops, coords, dst, srcs, compute, rounding, mode });
        p.vec = Some(if pairs { 2 } else { 1 });
        p.rounds = Some(rounds as u64);
        p.limits = limits;
        Ok(p)
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<EwPlan>("elementwise/reg")?;
        let call = parse(cx)?;
        let value_type = match &p.mode {
            Mode::Packed { dtype, .. } => *dtype,
            _ => p.compute,
        };
        let (scalars, scale) = scalar_values(em, &call, value_type, p.compute)?;
        let pairs = !matches!(p.mode, Mode::Scalar);
        let n = p.loops.len();
        let vars: Vec<_> = p
            .loops
            .iter()
            .enumerate()
            .map(|(k, &e)| {
                let trip = if pairs && k + 1 == n { e / 2 } else { e };
                let name = if n == 1 { "f".to_string() } else { format!("f{k}") };
                // A one-trip dimension is its coordinate 0, not a loop.
                (trip > 1).then(|| (em.var(&name, DType::I32, Some((0, trip - 1))), trip))
            })
            .collect();
        let coords: Vec<LExpr> = vars
            .iter()
            .enumerate()
            .map(|(k, v)| match v {
                None => LExpr::i32(0),
                Some((v, _)) if pairs && k + 1 == n => em.builder().mul(LExpr::Var(*v), LExpr::i32(2)),
                Some((v, _)) => LExpr::Var(*v),
            })
            .collect();
        let (dst_buf, dst_ity) = em.lbuf(call.dst.buf)?;
        let dst_index = index(em, &p.dst, &coords, dst_ity);
        let mut src_refs = Vec::with_capacity(call.srcs.len());
        for (s, map) in call.srcs.iter().zip(&p.srcs) {
            src_refs.push(match (s, map) {
                (Operand::Region(r), Some(m)) => {
                    let (lb, ity) = em.lbuf(r.buf)?;
                    Some((lb, index(em, m, &coords, ity)))
                }
                _ => None,
            });
        }
        let mask = match (&p.coords, call.mask) {
            (Some(c), Some(m)) => Some(mask_at(em, m, c, &coords)?),
            _ => None,
        };
        let kind = match &p.mode {
            Mode::Scalar => {
                let b = em.builder();
                let mut vals: Vec<LExpr> = src_refs
                    .iter()
                    .zip(&scalars)
                    .map(|(r, s)| match (r, s) {
                        (Some((lb, i)), _) => b.convert(LExpr::Load(*lb, Box::new(i.clone())), p.compute),
                        (None, Some(v)) => v.clone(),
                        (None, None) => LExpr::Float(0.0, p.compute),
                    })
                    .collect();
                vals.extend(mask);
                let dst_dtype = b.bufs[dst_buf.0 as usize].dtype;
                let value = scalar(call.op, call.params, &vals, scale, p.compute, p.rounding);
                let value = convert(b, value, dst_dtype, p.rounding);
                LStmtKind::Memory(MemOp::Store { buf: dst_buf, index: dst_index, value })
            }
            Mode::Packed { op, dtype, kinds } => {
                let mut srcs = Vec::with_capacity(src_refs.len());
                let mut kinds = kinds.iter();
                for (r, s) in src_refs.iter().zip(&scalars) {
                    srcs.push(match (r, s) {
                        (Some((lb, i)), _) => match kinds.next() {
                            Some(PairKind::Pair) => PairSrc::Buf(*lb, i.clone()),
                            _ => PairSrc::Scalar(LExpr::Load(*lb, Box::new(i.clone()))),
                        },
                        (None, Some(v)) => PairSrc::Scalar(v.clone()),
                        (None, None) => return Err(Bug("an operand has neither a region nor a value".into())),
                    });
                }
                LStmtKind::Pair(PairOp::Packed2 { op: *op, dtype: *dtype, dst: dst_buf, dst_index, srcs })
            }
            Mode::Cast2 => {
                let Some(Some((src, src_index))) = src_refs.first().cloned() else {
                    return Err(Bug("cast without a source region".into()));
                };
                LStmtKind::Pair(PairOp::Cast2 { dst: dst_buf, dst_index, src, src_index })
            }
        };
        let mut body = vec![LStmt::new(kind, em.span)];
        let unroll = p.loops.iter().product::<i64>() <= UNROLL_ELEMS;
        for (v, trip) in vars.into_iter().rev().flatten() {
            body = vec![LStmt::new(
                LStmtKind::For { var: v, begin: LExpr::i32(0), extent: LExpr::i32(trip), unroll, body },
                em.span,
            )];
        }
        em.stmts.extend(body);
        Ok(())
    }
}

/// `masked_fill`'s condition at the element at register-loop `coords` of the executing
/// thread: each coordinate the mixed-radix number of its dim's digits, or (where an iter
/// spans dims) the row-major index in the region unravelled, bound to the mask's parameters.
/// Where each coordinate is its own dim's digits, the number is also split into its
/// register-loop digits and its thread digits (`expr::lower_split_cond`: a comparison of a
/// coordinate moves its thread part to the other side).
fn mask_at(em: &mut Emitter, m: &tirx_ir::hir::MaskFn, c: &Coords, coords: &[LExpr]) -> Result<LExpr, Bug> {
    let (digits, ext, seps) = c;
    // The number of `its` with only the digits `keep` accepts (the others 0).
    let number = |em: &mut Emitter, its: &[(Digit, i64)], keep: &dyn Fn(&Digit) -> bool| -> Result<LExpr, Bug> {
        let mut n = LExpr::i32(0);
        for (d, e) in its {
            let digit = match *d {
                _ if !keep(d) => LExpr::i32(0),
                Digit::Loop(k) => coords[k].clone(),
                Digit::Thread(axis, stride) => {
                    let id = em.axis_id(axis).ok_or_else(|| Bug(format!("no thread id for {axis}")))?;
                    let b = em.builder();
                    b.rem_c(b.div_c(id, stride), *e)
                }
                Digit::Zero => LExpr::i32(0),
            };
            let b = em.builder();
            n = b.add(b.mul(n, LExpr::i32(*e)), digit);
        }
        Ok(n)
    };
    let all = |_: &Digit| true;
    let mut bound = std::collections::HashMap::new();
    let mut split = std::collections::HashMap::new();
    match seps {
        Some(seps) => {
            for (d, v) in m.params.iter().enumerate() {
                let its = &digits[seps[d]..seps[d + 1]];
                bound.insert(*v, number(em, its, &all)?);
                if its.iter().any(|(d, _)| matches!(d, Digit::Thread(..))) {
                    let reg = number(em, its, &|d| !matches!(d, Digit::Thread(..)))?;
                    let thread = number(em, its, &|d| matches!(d, Digit::Thread(..)))?;
                    split.insert(*v, (reg, thread));
                }
            }
        }
        None => {
            let flat = number(em, digits, &all)?;
            let mut inner: i64 = ext.iter().product();
            for (v, e) in m.params.iter().zip(ext) {
                inner /= e;
                let b = em.builder();
                bound.insert(*v, b.rem_c(b.div_c(flat.clone(), inner), *e));
            }
        }
    }
    crate::expr::lower_split_cond(em.kernel, em.env, em.builder(), &m.cond, &bound, &split)
        .map_err(|d| Bug(format!("the mask does not lower: {}", d.message)))
}

/// Every region operand is a register buffer of a float type this variant computes in.
fn check_operands(cx: &CallCx, call: &OpCall) -> Result<(), Decline> {
    for r in call.regions() {
        let b = cx.buf(r.buf);
        if b.scope != MemScope::Local {
            return Err(Decline::new(
                CommonRule::OperandScope,
                format!(
                    "operand `{}` is in {} memory; elementwise `reg` needs every operand in registers (scope=\"local\")",
                    b.name,
                    b.scope.name()
                ),
            ));
        }
        // fp8 values are stored, not computed on: a cast converts to or from them (saturating,
        // to nearest even: `docs/numerics.md` §1), through float32.
        let fp8 = matches!(b.dtype, DType::F8E4M3 | DType::F8E5M2);
        if !(matches!(b.dtype, DType::F32 | DType::F16 | DType::BF16) || fp8 && call.op == EwiseOp::Cast) {
            return Err(Decline::new(
                CommonRule::Dtype,
                format!(
                    "operand `{}` is {}; elementwise `reg` computes on float32, float16 and bfloat16 (float8 in `cast` only)",
                    b.name, b.dtype
                ),
            ));
        }
    }
    Ok(())
}

/// Lifts a source region to the destination shape (broadcast dims become
/// stride-0 iters), groups it by the anchor's iters and checks that every
/// thread owns the same elements of both. A thread iter of the anchor (or some of
/// its digits) that the source is broadcast along, and the anchor's own replica, need the source
/// replicated over those threads (each thread reads its own copy: a row statistic
/// over an MMA accumulator); what was broadcast that way is returned, for explain.
fn align(
    cx: &CallCx,
    r: &BufferRegion,
    anchor: &TileLayout,
    dst_ext: &[i64],
    dst_name: &str,
) -> Result<(RegMap, Option<String>), Decline> {
    let name = &cx.buf(r.buf).name;
    let sliced = operand::register(cx, r).map_err(|m| Decline::new(EwiseRule::OperandLayout, m))?.tile;
    let shape = broadcast_shape(r, dst_ext, name).map_err(|m| Decline::new(EwiseRule::Broadcast, m))?;
    let lerr = |e: tirx_layout::LayoutError| {
        Decline::new(
            EwiseRule::Align,
            format!("`{name}` does not split along the register iters of `{dst_name}` ({e})"),
        )
    };
    let (g, seps) = sliced.group(&shape).map_err(lerr)?;
    let mut shard = Vec::new();
    for (d, (&o, &e)) in shape.iter().zip(dst_ext).enumerate() {
        if o == e {
            shard.extend_from_slice(&g.shard[seps[d]..seps[d + 1]]);
        } else {
            shard.push(Iter::m(e, 0));
        }
    }
    let lifted = TileLayout::new(shard, sliced.replica.clone(), sliced.offset.clone());
    let (og, oseps) = lifted.group(&anchor.extents()).map_err(lerr)?;
    let mismatch = |what: String| {
        Decline::new(
            EwiseRule::ThreadPart,
            format!("thread part mismatch between anchor `{dst_name}` and operand `{name}` after alignment: {what}; every thread must own the elements it combines"),
        )
    };
    if let Some((a, v)) = lifted.offset.iter().find(|(a, v)| a.is_thread() && **v != 0) {
        return Err(mismatch(format!("`{name}` is offset by {v}@{a}")));
    }
    let mut groups = Vec::new();
    // Anchor thread iters whose elements all read one source element per thread group.
    let mut copies: Vec<Iter> = anchor.replica.iter().filter(|i| i.axis.is_thread()).copied().collect();
    for (k, it) in anchor.shard.iter().enumerate() {
        let grp = &og.shard[oseps[k]..oseps[k + 1]];
        if it.axis.is_thread() && grp.iter().all(|g| g.axis.is_memory() && g.stride == 0) {
            copies.push(*it);
        } else if it.axis.is_thread() {
            // Digit by digit (innermost first): the source's thread runs are the anchor's own
            // digits; its broadcast digits read each thread's copy (an anchor iter that fused
            // a row's lanes with its columns' lanes, over a row statistic).
            let (mut inner, mut run_end, mut run_inner) = (1, grp.len(), 1);
            for (k, g) in grp.iter().enumerate().rev() {
                if g.axis.is_memory() && g.stride == 0 && g.extent > 1 {
                    if !are_digits_of(&grp[k + 1..run_end], it, run_inner).map_err(lerr)? {
                        return Err(mismatch(meets(it, grp)));
                    }
                    copies.push(Iter::new(g.extent, it.stride * inner, it.axis));
                    (run_end, run_inner) = (k, inner * g.extent);
                }
                inner *= g.extent;
            }
            if !are_digits_of(&grp[..run_end], it, run_inner).map_err(lerr)? {
                return Err(mismatch(meets(it, grp)));
            }
        } else if let Some(t) = grp.iter().find(|i| i.axis.is_thread() && i.extent > 1) {
            return Err(mismatch(format!(
                "register iter {}:{} of the anchor meets thread iter {}:{}@{}",
                it.extent, it.stride, t.extent, t.stride, t.axis
            )));
        } else if it.extent > 1 {
            groups.push(grp.to_vec());
        }
    }
    let held: Vec<Iter> = lifted.replica.iter().filter(|i| i.axis.is_thread()).copied().collect();
    if !offsets(&copies).is_subset(&offsets(&held)) {
        return Err(mismatch(format!(
            "`{dst_name}` needs each element of `{name}` in the threads {} (where it is broadcast or replicated), but `{name}` is replicated over {}; lay `{name}` out replicated there (`+ R[...]`, as a reduction over those lanes leaves it)",
            iters_text(&copies),
            if held.is_empty() { "no threads".to_string() } else { iters_text(&held) }
        )));
    }
    let note =
        (!copies.is_empty()).then(|| format!("`{name}` read from each thread's copy over {}", iters_text(&copies)));
    Ok((RegMap { offset: lay::m_offset(&lifted), groups }, note))
}

/// Whether a run of a source's iters (outermost first) within anchor thread iter `it`, starting
/// at its digit `inner`, is exactly those digits of `it` (a run of extent 1 always is).
fn are_digits_of(run: &[Iter], it: &Iter, inner: i64) -> Result<bool, tirx_layout::LayoutError> {
    let extent: i64 = run.iter().map(|i| i.extent).product();
    if extent == 1 {
        return Ok(true);
    }
    let canon = TileLayout::from_shard(run.to_vec()).canonicalize(Fusion::None)?;
    Ok(canon.shard == [Iter::new(extent, it.stride * inner, it.axis)])
}

fn meets(it: &Iter, grp: &[Iter]) -> String {
    format!("anchor thread iter {}:{}@{} meets {}", it.extent, it.stride, it.axis, iters_text(grp))
}

/// The thread offsets a set of thread iters spans: every sum of `k·stride` per axis.
fn offsets(iters: &[Iter]) -> std::collections::HashSet<Vec<(tirx_layout::Axis, i64)>> {
    let mut out = std::collections::HashSet::from([vec![]]);
    for it in iters {
        let mut next = std::collections::HashSet::new();
        for o in &out {
            for k in 0..it.extent {
                let mut v: Vec<(tirx_layout::Axis, i64)> = o.clone();
                match v.iter_mut().find(|(a, _)| *a == it.axis) {
                    Some((_, x)) => *x += k * it.stride,
                    None => v.push((it.axis, k * it.stride)),
                }
                v.retain(|(_, x)| *x != 0);
                v.sort();
                next.insert(v);
            }
        }
        out = next;
    }
    out
}

/// `+2 [8, 1]`: the offset and each loop's stride (a group as `e:s·e:s`, 0 = broadcast).
fn map_text(m: &RegMap) -> String {
    let loops: Vec<String> = m
        .groups
        .iter()
        .map(|g| match g.as_slice() {
            [it] => it.stride.to_string(),
            g => g.iter().map(|i| format!("{}:{}", i.extent, i.stride)).collect::<Vec<_>>().join("·"),
        })
        .collect();
    let off = if m.offset != 0 { format!("+{} ", m.offset) } else { String::new() };
    format!("{off}[{}]", loops.join(", "))
}

fn iters_text(g: &[Iter]) -> String {
    let parts: Vec<String> = g.iter().map(|i| format!("{}:{}@{}", i.extent, i.stride, i.axis)).collect();
    format!("[{}]", parts.join(", "))
}

/// The packed op for `op`, if one exists.
fn packed_op(op: EwiseOp) -> Option<PackedOp> {
    Some(match op {
        EwiseOp::Add => PackedOp::Add,
        EwiseOp::Sub => PackedOp::Sub,
        EwiseOp::Mul => PackedOp::Mul,
        EwiseOp::Fma => PackedOp::Fma,
        EwiseOp::Maximum => PackedOp::Max,
        EwiseOp::Minimum => PackedOp::Min,
        _ => return None,
    })
}

/// Pair arithmetic or pair conversion when the types and every operand's
/// register pairs allow it; why not goes to `limits`.
fn choose_mode(
    cx: &CallCx,
    call: &OpCall,
    (compute, rounding): (DType, RoundMode),
    loops: &[i64],
    dst: &RegMap,
    srcs: &[Option<RegMap>],
    limits: &mut Vec<String>,
) -> Mode {
    let dst_t = cx.buf(call.dst.buf).dtype;
    let region_types: Vec<DType> = call.regions().skip(1).map(|r| cx.buf(r.buf).dtype).collect();
    let wanted = if call.op == EwiseOp::Cast {
        let pair_cast = region_types.first().is_some_and(|&src| cast2_supported(src, dst_t));
        if !pair_cast {
            return Mode::Scalar;
        }
        if rounding != RoundMode::Rn {
            limits.push(format!(
                "pair conversions: round to nearest only; rounding_mode='{rounding}' converts each element"
            ));
            return Mode::Scalar;
        }
        let bf16 = dst_t == DType::BF16 || region_types.first() == Some(&DType::BF16);
        if bf16 && !cx.opts.arch.supports(Arch::SM_80) {
            limits.push(format!(
                "pair conversions: bfloat16 pair conversion needs {}, target is {}",
                Arch::SM_80,
                cx.opts.arch
            ));
            return Mode::Scalar;
        }
        Mode::Cast2
    } else {
        let Some(op) = packed_op(call.op) else { return Mode::Scalar };
        let min = match dst_t {
            // half2 arithmetic exists from sm_53, older than any target.
            DType::F16 => Arch::MIN,
            DType::BF16 => Arch::SM_80,
            t => {
                limits.push(format!("packed pairs: {t} has no packed arithmetic on {}", cx.opts.arch));
                return Mode::Scalar;
            }
        };
        if !cx.opts.arch.supports(min) {
            limits.push(format!("packed pairs: {dst_t} pair arithmetic needs {min}, target is {}", cx.opts.arch));
            return Mode::Scalar;
        }
        if compute != dst_t {
            limits.push(format!("packed pairs: operands mix types, computed in {compute}"));
            return Mode::Scalar;
        }
        Mode::Packed { op, dtype: dst_t, kinds: vec![] }
    };
    let splat_ok = matches!(wanted, Mode::Packed { .. });
    match pair_kinds(loops, dst, srcs, splat_ok) {
        Ok(kinds) => match wanted {
            Mode::Packed { op, dtype, .. } => Mode::Packed { op, dtype, kinds },
            m => m,
        },
        Err(why) => {
            limits.push(format!("pairs: {why}"));
            Mode::Scalar
        }
    }
}

/// Checks, element by element, that the destination and every region source
/// form aligned consecutive register pairs (or, with `splat_ok`, a broadcast
/// register) along the innermost loop; returns each source's pair kind.
fn pair_kinds(loops: &[i64], dst: &RegMap, srcs: &[Option<RegMap>], splat_ok: bool) -> Result<Vec<PairKind>, String> {
    let Some(&inner) = loops.last() else { return Err("the bundle is a single element".into()) };
    if inner % 2 != 0 {
        return Err(format!("the innermost register loop has odd extent {inner}"));
    }
    let total: i64 = loops.iter().product();
    if total > PAIR_CHECK_LIMIT {
        return Err(format!("bundle of {total} elements is too large to check pairs"));
    }
    let maps: Vec<&RegMap> = srcs.iter().flatten().collect();
    let mut kinds: Vec<Option<PairKind>> = vec![None; maps.len()];
    let mut c = vec![0i64; loops.len()];
    for pos in (0..total).step_by(2) {
        let mut x = pos;
        for k in (0..loops.len()).rev() {
            c[k] = x % loops[k];
            x /= loops[k];
        }
        let mut c1 = c.clone();
        *c1.last_mut().expect("loops is not empty") += 1;
        let (d0, d1) = (dst.at(&c), dst.at(&c1));
        if d1 != d0 + 1 || d0 % 2 != 0 {
            return Err(format!("destination registers {d0}, {d1} are not an aligned pair"));
        }
        for (i, m) in maps.iter().enumerate() {
            let (s0, s1) = (m.at(&c), m.at(&c1));
            let kind = if s1 == s0 + 1 && s0 % 2 == 0 {
                PairKind::Pair
            } else if s1 == s0 && splat_ok {
                PairKind::Splat
            } else {
                return Err(format!("source {} registers {s0}, {s1} are not an aligned pair", i + 1));
            };
            if *kinds[i].get_or_insert(kind) != kind {
                return Err(format!("source {} mixes register pairs and broadcast registers", i + 1));
            }
        }
    }
    Ok(kinds.into_iter().map(|k| k.unwrap_or(PairKind::Pair)).collect())
}

/// `offset + Σ_k group_k(c_k)` as an index expression.
fn index(em: &Emitter, m: &RegMap, coords: &[LExpr], ity: DType) -> LExpr {
    let b = em.builder();
    let mut acc = LExpr::Int(m.offset, ity);
    for (g, c) in m.groups.iter().zip(coords) {
        acc = b.add(acc, dim_offset(b, g, b.to_int(c.clone(), ity)));
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_contiguous_and_broadcast_operands() {
        let dst = RegMap { offset: 0, groups: vec![vec![Iter::m(4, 8)], vec![Iter::m(8, 1)]] };
        let splat = RegMap { offset: 0, groups: vec![vec![Iter::m(4, 1)], vec![Iter::m(8, 0)]] };
        let kinds = pair_kinds(&[4, 8], &dst, &[Some(dst.clone()), Some(splat.clone())], true).unwrap();
        assert_eq!(kinds, vec![PairKind::Pair, PairKind::Splat]);
        assert!(pair_kinds(&[4, 8], &dst, &[Some(splat)], false).is_err());
        let odd = RegMap { offset: 1, ..dst.clone() };
        assert!(pair_kinds(&[4, 8], &dst, &[Some(odd)], true).is_err());
    }
}
