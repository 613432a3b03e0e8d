//! copy_async → dsmem (priority 10, docs/tile-primitives.md §3.21).
//!
//! **Accepts** a shared → shared copy at thread scope (target sm_90) in a kernel
//! launched in clusters, with `mbar=` (an mbarrier of this CTA's shared memory;
//! the copy completes on the barrier at the same offset in the peer) and
//! `remote_cta_id=` (the peer's rank in the cluster; a constant must be below
//! the cluster size, `remote_cta_id`): one dtype, as many elements on each side
//! (`validate_copy_op`; the shapes may differ, elements correspond in row-major
//! order), both regions unswizzled and, once sliced, a sequence of equal chunks
//! that are contiguous on both sides (`bulk_chunk`): each chunk a multiple of 16
//! bytes, at most [`MAX_CHUNKS`] of them, every chunk starting 16-byte aligned on
//! both sides (`alignment`: the region's start, its symbolic steps and every
//! chunk step). No `predicate=`, `cta_mask=` (`config`).
//!
//! **Algorithm** (the reference's stride-gap chunking): each side's sliced layout
//! is read innermost first for its contiguous run (the innermost iters whose
//! strides chain from 1); a chunk is the largest count of elements dividing both
//! runs (their gcd), so every chunk is one contiguous run on both sides. The
//! chunks' steps on the two sides are then refined into common loops (an iter of
//! one side split where the other side's extent divides it; loops whose steps
//! chain on both sides fused back), outermost first: a strided 2-D region is one
//! loop over its rows, a 3-D one two loops, a dense region no loop at all. Where
//! the two sides split the chunks by radices neither of which divides the other
//! (6 × 8 f32 into 4 × 12: 16-byte chunks, two per source row and three per
//! destination row), the rest is one loop whose index is split into each side's
//! digits. Each chunk is one
//! `cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes` of
//! the chunk's bytes, both peer addresses mapped with `mapa`, all completing on
//! the same peer barrier: the peer's expected transaction count is the sum, the
//! region's bytes. The copy only issues: the peer announces the bytes
//! (`mbarrier.arrive.expect_tx`) and waits for the phase; the issuing CTA writes
//! its source through the generic proxy, so it fences
//! (`fence.proxy.async.shared::cta`) before the copy, and it must not exit before
//! the copy completed (a cluster barrier after the peer's wait) — the simulator
//! reports both (docs/lir.md §2.14), and accounts each chunk's bytes on the
//! peer's barrier.
//!
//! **Generated code** (`Tx.copy_async(B_s[0:64, 0:64], A_s[0:64, 0:64], dispatch="dsmem", mbar=bar.ptr_to([0]), remote_cta_id=1)`,
//! f16, one dense chunk):
//! ```text
//! cp.async.bulk.shared::cluster.shared::cta<8192> B_s[0] @ cta 1 <- A_s[0] bar=bar[0]
//! ```
//! A column slice `A_s[0:64, 0:32]` of a (64, 64) f16 buffer into a dense (64, 32)
//! one: 64 chunks of 64 B, one loop over the rows (CUDA: a `for` around one
//! `tirx_bulk_copy_to_peer` call):
//! ```text
//! for chunk in 0..64 {
//!   cp.async.bulk.shared::cluster.shared::cta<64> B_s[chunk * 32] @ cta 1 <- A_s[chunk * 64] bar=bar[0]
//! }
//! ```
//!
//! Differences from the reference: chunks are uniform (the gcd of the two sides'
//! contiguous runs) and a region of more than [`MAX_CHUNKS`] chunks declines
//! (`bulk_chunk`); `remote_cta_id` out of the cluster declines when constant.
//! A swizzled side declines (`bulk_chunk`).

use super::call::CopyAsyncRule;
use super::tma;
use crate::env::RankProblem;
use crate::operand::MemOperand;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::{Expr, TileArg};
use tirx_ir::lir::{AsyncOp, LExpr, LStmt, LStmtKind};
use tirx_ir::op::{self, ConfigKey, Family};
use tirx_ir::{Arch, DType};
use tirx_layout::{Axis, ExecScope};

pub struct Dsmem;

/// The most bulk copies one dsmem call issues (a region of more chunks declines:
/// tiny chunks are slow, and the issuing thread serialises them).
pub const MAX_CHUNKS: i64 = 256;

struct DsPlan {
    src: MemOperand,
    dst: MemOperand,
    /// Bytes of one chunk (one bulk copy).
    chunk_bytes: u32,
    /// The loops over the chunks, outermost first (none: one chunk).
    loops: Vec<ChunkLoop>,
    rank: Expr,
}

/// One loop over chunks: `extent` iterations, and each side's element step as
/// digits of the loop index, `(extent, stride)` outermost first — one digit
/// `(extent, stride)` unless the two sides split the chunks by incompatible radices.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ChunkLoop {
    extent: i64,
    src: Vec<(i64, i64)>,
    dst: Vec<(i64, i64)>,
}

/// The chunking of a copy: elements per chunk and the loops over the chunks.
#[derive(Debug, PartialEq, Eq)]
struct Chunking {
    elems: i64,
    loops: Vec<ChunkLoop>,
}

impl Chunking {
    fn count(&self) -> i64 {
        self.loops.iter().map(|l| l.extent).product()
    }
}

impl Variant for Dsmem {
    fn name(&self) -> &'static str {
        "dsmem"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::CopyAsync
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[]
    }
    fn min_arch(&self) -> Arch {
        Arch::SM_90
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        if cx.scope.kind != ExecScope::Thread {
            return Err(Decline::new(
                CommonRule::ExecScope,
                format!(
                    "unsupported exec_scope {}, expected single thread: one thread issues a dsmem copy (`if tid == 0: Tx.copy_async(...)`)",
                    cx.scope.kind
                ),
            ));
        }
        let ops = tma::operands(cx)?;
        if !ops.src_buf.scope.is_shared() || !ops.dst_buf.scope.is_shared() {
            return Err(Decline::new(
                CommonRule::ScopeAllowed,
                format!(
                    "dsmem copies shared -> shared (of a peer CTA), not {} -> {}",
                    ops.src_buf.scope.name(),
                    ops.dst_buf.scope.name()
                ),
            ));
        }
        for slot in [&op::PREDICATE, &op::CTA_MASK] {
            if cx.arg(slot).is_some() {
                return Err(Decline::new(CommonRule::Config, format!("a dsmem copy takes no `{}=`", slot.name())));
            }
        }
        if !matches!(cx.arg(&op::MBAR), Some(TileArg::Barrier(_))) {
            return Err(Decline::new(
                CopyAsyncRule::Mbar,
                "a dsmem copy completes on the peer's mbarrier: pass `mbar=bar.ptr_to([i])` (the barrier at the same offset in the peer CTA)",
            ));
        }
        let rank = remote_rank(cx)?;
        let src = crate::operand::memory(cx, ops.src)?;
        let dst = crate::operand::memory(cx, ops.dst)?;
        let esize = i64::from(ops.src_buf.dtype.bytes());
        let (src_name, dst_name) = (&ops.src_buf.name, &ops.dst_buf.name);
        let src_iters = side_iters(&src, src_name)?;
        let dst_iters = side_iters(&dst, dst_name)?;
        let total = crate::copy::call::CopyOps::elems(ops.src);
        let c = chunking(&src_iters, &dst_iters);
        let chunk_bytes = c.elems * esize;
        let bytes = total * esize;
        if chunk_bytes % 16 != 0 || chunk_bytes > i64::from(u32::MAX) {
            let reason = if c.loops.is_empty() {
                format!("the region is one dense chunk of {bytes} B, and a bulk copy moves a multiple of 16 bytes")
            } else {
                format!(
                    "the largest run dense on both sides is {} element(s) ({chunk_bytes} B): `{src_name}` runs {} contiguous \
                     elements ({}), `{dst_name}` {} ({}); a bulk copy moves a multiple of 16 bytes",
                    c.elems,
                    contiguous_run(&src_iters),
                    src.tile,
                    contiguous_run(&dst_iters),
                    dst.tile
                )
            };
            return Err(Decline::new(CopyAsyncRule::BulkChunk, reason));
        }
        let n = c.count();
        if n > MAX_CHUNKS {
            return Err(Decline::new(
                CopyAsyncRule::BulkChunk,
                format!(
                    "the region splits into {n} chunks of {chunk_bytes} B (contiguous runs: `{src_name}` {}, `{dst_name}` {}), \
                     more than the {MAX_CHUNKS} bulk copies one dsmem copy issues; copy wider contiguous rows",
                    contiguous_run(&src_iters),
                    contiguous_run(&dst_iters)
                ),
            ));
        }
        for (m, name, side) in [(&src, src_name, Side::Src), (&dst, dst_name, Side::Dst)] {
            aligned(m, name, side, &c, esize)?;
        }
        let summary = if n == 1 {
            format!("cp.async.bulk shared::cta -> shared::cluster, {bytes} B, one instruction")
        } else {
            let shape: Vec<String> = c.loops.iter().map(|l| l.extent.to_string()).collect();
            let loops = if shape.len() == 1 { "one loop".to_string() } else { format!("loops {}", shape.join(" x ")) };
            format!(
                "cp.async.bulk shared::cta -> shared::cluster, {bytes} B in {n} chunks of {chunk_bytes} B ({loops})"
            )
        };
        Ok(Plan::new(summary, DsPlan { src, dst, chunk_bytes: chunk_bytes as u32, loops: c.loops, rank }))
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<DsPlan>("dsmem")?;
        let (src, src_start) = p.src.start(em)?;
        let (dst, dst_start) = p.dst.start(em)?;
        let Some(TileArg::Barrier(r)) = cx.arg(&op::MBAR) else {
            return Err(Bug("the dsmem plan has no barrier".into()));
        };
        let bar = super::call::mbar(em, r)?;
        let rank = em.expr(&p.rank)?;
        let rank = em.builder().convert(rank, DType::I32);
        let named = p.loops.len() > 1;
        let vars: Vec<_> = p
            .loops
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let name = if named { format!("chunk{k}") } else { "chunk".to_string() };
                em.var(&name, DType::I32, Some((0, l.extent - 1)))
            })
            .collect();
        let (mut src_index, mut dst_index) = (src_start, dst_start);
        for (l, v) in p.loops.iter().zip(&vars) {
            src_index = add_digits(em, src_index, LExpr::Var(*v), &l.src);
            dst_index = add_digits(em, dst_index, LExpr::Var(*v), &l.dst);
        }
        let op = AsyncOp::BulkToPeer { dst, dst_index, src, src_index, bytes: p.chunk_bytes, bar, rank };
        let mut body = vec![LStmt::new(LStmtKind::Async(op), em.span)];
        for (l, v) in p.loops.iter().zip(&vars).rev() {
            let kind =
                LStmtKind::For { var: *v, begin: LExpr::i32(0), extent: LExpr::i32(l.extent), unroll: false, body };
            body = vec![LStmt::new(kind, em.span)];
        }
        em.stmts.extend(body);
        Ok(())
    }
}

/// `index` plus the element step of loop variable `i` on one side: the digits of
/// `i` (outermost first) times their strides.
fn add_digits(em: &Emitter, index: LExpr, i: LExpr, digits: &[(i64, i64)]) -> LExpr {
    let b = em.builder();
    let mut index = index;
    let mut below = 1i64;
    for (k, &(extent, stride)) in digits.iter().enumerate().rev() {
        let q = b.div_c(i.clone(), below);
        let digit = if k == 0 { q } else { b.rem_c(q, extent) };
        index = b.add(index, b.mul(digit, LExpr::i32(stride)));
        below *= extent;
    }
    index
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

/// One side's sliced region as `(extent, stride)` element iters, outermost first
/// (unit iters dropped): unswizzled, on the memory axis `m`.
fn side_iters(m: &MemOperand, name: &str) -> Result<Vec<(i64, i64)>, Decline> {
    if m.swizzle.is_some() {
        return Err(Decline::new(
            CopyAsyncRule::BulkChunk,
            format!(
                "`{name}` has a swizzled layout (the region is {} before the swizzle); a bulk copy moves bytes as they lie, \
                 not one dense unswizzled chunk per run",
                m.tile
            ),
        ));
    }
    let mut out = Vec::new();
    for it in m.tile.shard.iter().filter(|i| i.extent != 1) {
        if it.axis != Axis::M {
            return Err(Decline::new(
                CopyAsyncRule::BulkChunk,
                format!("the region of `{name}` is {} once sliced, with elements on the {} axis; a bulk copy moves memory rows", m.tile, it.axis),
            ));
        }
        out.push((it.extent, it.stride));
    }
    Ok(out)
}

/// How many elements from each multiple of it on are contiguous: the product of
/// the innermost iters whose strides chain from 1.
fn contiguous_run(iters: &[(i64, i64)]) -> i64 {
    contiguous_tail(iters).0
}

/// The contiguous run ([`contiguous_run`]) and how many innermost iters make it.
fn contiguous_tail(iters: &[(i64, i64)]) -> (i64, usize) {
    let mut run = 1i64;
    let mut inner = 0;
    for &(extent, stride) in iters.iter().rev() {
        if stride != run {
            break;
        }
        run = run.saturating_mul(extent);
        inner += 1;
    }
    (run, inner)
}

/// The steps between chunks of `elems` elements on one side, innermost first:
/// the contiguous run split into `run / elems` chunks, then the outer iters.
fn chunk_steps(iters: &[(i64, i64)], elems: i64) -> Vec<(i64, i64)> {
    let (run, inner) = contiguous_tail(iters);
    let mut steps = Vec::with_capacity(iters.len() + 1);
    if run / elems > 1 {
        steps.push((run / elems, elems));
    }
    steps.extend(iters[..iters.len() - inner].iter().rev().copied());
    steps
}

/// Both sides split into the same sequence of chunks, each contiguous on both:
/// `gcd` of the two contiguous runs elements per chunk, and the loops over them.
fn chunking(src: &[(i64, i64)], dst: &[(i64, i64)]) -> Chunking {
    let elems = crate::affine::gcd(contiguous_run(src), contiguous_run(dst)).max(1);
    let (mut a, mut b) = (chunk_steps(src, elems), chunk_steps(dst, elems));
    let (mut ia, mut ib) = (0, 0);
    let mut loops: Vec<ChunkLoop> = Vec::new(); // innermost first
    while ia < a.len() && ib < b.len() {
        let ((ea, sa), (eb, sb)) = (a[ia], b[ib]);
        let e = ea.min(eb);
        if ea.max(eb) % e != 0 {
            break;
        }
        loops.push(ChunkLoop { extent: e, src: vec![(e, sa)], dst: vec![(e, sb)] });
        if ea == e {
            ia += 1;
        } else {
            a[ia] = (ea / e, sa * e);
        }
        if eb == e {
            ib += 1;
        } else {
            b[ib] = (eb / e, sb * e);
        }
    }
    if ia < a.len() || ib < b.len() {
        // Radices neither of which divides the other: the rest is one loop, its index
        // split into each side's digits.
        let outer_first = |v: &[(i64, i64)]| v.iter().rev().copied().collect::<Vec<_>>();
        let extent = a[ia..].iter().map(|s| s.0).product();
        loops.push(ChunkLoop { extent, src: outer_first(&a[ia..]), dst: outer_first(&b[ib..]) });
    }
    // Fuse a loop into the one inside it where both sides' steps chain.
    let mut fused: Vec<ChunkLoop> = Vec::with_capacity(loops.len());
    for l in loops {
        if let Some(inner) = fused.last_mut() {
            if let ([(ei, si)], [(_, di)], [(eo, so)], [(_, dout)]) =
                (&inner.src[..], &inner.dst[..], &l.src[..], &l.dst[..])
            {
                if *so == si * ei && *dout == di * ei {
                    let e = ei * eo;
                    *inner = ChunkLoop { extent: e, src: vec![(e, *si)], dst: vec![(e, *di)] };
                    continue;
                }
            }
        }
        fused.push(l);
    }
    fused.reverse();
    Chunking { elems, loops: fused }
}

/// Every chunk of one side starts 16-byte aligned: the region's start, its symbolic
/// steps and every step between chunks.
fn aligned(m: &MemOperand, name: &str, side: Side, c: &Chunking, esize: i64) -> Result<(), Decline> {
    let off = crate::lay::m_offset(&m.tile) * esize;
    if off % 16 != 0 || (m.sym_div * esize) % 16 != 0 {
        return Err(Decline::new(
            CopyAsyncRule::Alignment,
            format!(
                "the region of `{name}` starts at byte {off} (steps of {} B); a bulk copy starts 16-byte aligned",
                m.sym_div * esize
            ),
        ));
    }
    let mut below = 1i64; // chunks per step of the loop variable
    for l in c.loops.iter().rev() {
        let digits = if side == Side::Src { &l.src } else { &l.dst };
        let mut dbelow = 1i64;
        for &(extent, stride) in digits.iter().rev() {
            let step = stride * esize;
            if step % 16 != 0 {
                return Err(Decline::new(
                    CopyAsyncRule::Alignment,
                    format!(
                        "chunk {} of `{name}` starts at byte {}: its chunks of {} B step by {step} B (the region is {} once \
                         sliced), and a bulk copy starts 16-byte aligned",
                        below * dbelow,
                        off + step,
                        c.elems * esize,
                        m.tile
                    ),
                ));
            }
            dbelow *= extent;
        }
        below *= l.extent;
    }
    Ok(())
}

/// `remote_cta_id=`: present, an integer, and (when constant) a rank of the cluster.
fn remote_rank(cx: &CallCx) -> Result<Expr, Decline> {
    let no_cluster = || {
        Decline::new(
            CopyAsyncRule::Cluster,
            "a dsmem copy writes a peer CTA of the cluster, and this kernel is not launched in clusters (declare `T.cta_id_in_cluster([n])`)",
        )
    };
    if cx.env.cluster_size() == 1 {
        return Err(no_cluster());
    }
    let Some(e) = cx.scalar(&op::REMOTE_CTA) else {
        return Err(Decline::new(
            CopyAsyncRule::RemoteCta,
            "a dsmem copy needs `remote_cta_id=` (the peer's rank in the cluster)",
        ));
    };
    match cx.env.cluster_rank_problem(e) {
        None => Ok(e.clone()),
        Some(RankProblem::NoCluster) => Err(no_cluster()),
        Some(RankProblem::NotInteger) => {
            Err(Decline::new(CopyAsyncRule::RemoteCta, format!("`remote_cta_id=` is an integer rank, not {}", e.dtype)))
        }
        Some(RankProblem::Outside(v, size)) => Err(Decline::new(
            CopyAsyncRule::RemoteCta,
            format!("`remote_cta_id={v}` is not a CTA of the cluster of {size} (ranks 0..{})", size - 1),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(extent: i64, src: i64, dst: i64) -> ChunkLoop {
        ChunkLoop { extent, src: vec![(extent, src)], dst: vec![(extent, dst)] }
    }

    #[test]
    fn runs_and_chunks() {
        // A dense region is one chunk, no loop.
        assert_eq!(chunking(&[(2048, 1)], &[(64, 32), (32, 1)]), Chunking { elems: 2048, loops: vec![] });
        // A column slice: a loop over the rows.
        assert_eq!(chunking(&[(64, 64), (32, 1)], &[(2048, 1)]), Chunking { elems: 32, loops: vec![one(64, 64, 32)] });
        // Runs of 32 and 16: chunks of 16, two per source row.
        assert_eq!(
            chunking(&[(16, 64), (32, 1)], &[(32, 32), (16, 1)]),
            Chunking { elems: 16, loops: vec![one(16, 64, 64), one(2, 16, 32)] }
        );
        // 3-D: two loops; dims whose steps chain on both sides fuse.
        assert_eq!(
            chunking(&[(4, 1024), (8, 64), (32, 1)], &[(4, 384), (8, 48), (32, 1)]),
            Chunking { elems: 32, loops: vec![one(4, 1024, 384), one(8, 64, 48)] }
        );
        assert_eq!(
            chunking(&[(2, 512), (8, 64), (32, 1)], &[(512, 1)]),
            Chunking { elems: 32, loops: vec![one(16, 64, 32)] }
        );
        // Radices neither of which divides the other: one loop, digits per side.
        assert_eq!(
            chunking(&[(6, 16), (8, 1)], &[(4, 16), (12, 1)]),
            Chunking {
                elems: 4,
                loops: vec![ChunkLoop { extent: 12, src: vec![(6, 16), (2, 4)], dst: vec![(4, 16), (3, 4)] }]
            }
        );
        // Row-major into column-major: runs of 1.
        assert_eq!(chunking(&[(256, 1)], &[(4, 1), (64, 4)]).elems, 1);
    }

    /// Every chunk start the loops produce, in chunk order, against a direct walk of the
    /// two sides' layouts.
    #[test]
    fn chunk_starts_follow_both_layouts() {
        type Iters = &'static [(i64, i64)];
        let cases: [(Iters, Iters); 4] = [
            (&[(6, 16), (8, 1)], &[(4, 16), (12, 1)]),
            (&[(4, 1024), (8, 64), (32, 1)], &[(4, 384), (8, 48), (32, 1)]),
            (&[(16, 64), (32, 1)], &[(32, 32), (16, 1)]),
            (&[(3, 100), (4, 20), (10, 1)], &[(2, 70), (6, 10), (5, 2)]),
        ];
        // Element `i` of iters `(extent, stride)` outermost first (also a loop's digits).
        let offset = |iters: &[(i64, i64)], mut i: i64| {
            let mut off = 0;
            for &(e, s) in iters.iter().rev() {
                off += (i % e) * s;
                i /= e;
            }
            off
        };
        for (src, dst) in cases {
            let c = chunking(src, dst);
            let n: i64 = src.iter().map(|s| s.0).product();
            assert_eq!(c.count() * c.elems, n);
            for k in 0..c.count() {
                let (mut rest, mut so, mut d) = (k, 0, 0);
                for l in c.loops.iter().rev() {
                    let i = rest % l.extent;
                    rest /= l.extent;
                    so += offset(&l.src, i);
                    d += offset(&l.dst, i);
                }
                for j in 0..c.elems {
                    let e = k * c.elems + j;
                    assert_eq!(so + j, offset(src, e), "{src:?} chunk {k} element {j}");
                    assert_eq!(d + j, offset(dst, e), "{dst:?} chunk {k} element {j}");
                }
            }
        }
    }
}
