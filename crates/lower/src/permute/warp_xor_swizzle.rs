//! permute_layout → warp_xor_swizzle (priority 20, docs/tile-primitives.md §3.22).
//!
//! **Accepts** a warp-scope `permute_layout` of one region of `V = 32·P`
//! elements (P a power of two ≤ 32) between global or shared buffers of one
//! dtype of 1, 2, 4 or 8 bytes under plain (unswizzled) layouts, all 32 lanes
//! active. Source and destination may be the same buffer.
//!
//! **Algorithm** (the reference's): lane `l` moves the logical elements
//! `f = l + 32·j` (row-major over the region), `j = r ^ ((l >> (5 − k)) & (2^k − 1))`
//! for `r` in `0..P`, through `P` registers: phase 1 loads all of them from the
//! source, `__syncwarp()`, phase 2 stores them to the destination,
//! `__syncwarp()` (so an in-place permutation reads every element before any is
//! overwritten, and the warp sees the result). The xor factor `k ∈ [0, log2 P]`
//! is the smallest for which, in both phases and for every `r`, no two different
//! 4-byte words that one wavefront of the warp touches lie in the same bank (a
//! wavefront: the 32 lanes, or each half-warp for 8-byte elements; lanes that
//! share a word do not conflict). It is applied to global operands too, where it
//! spreads a warp's accesses the same way (the reference's choice of `k`). When
//! no `k` works, a call with a shared operand declines (`bank_conflict`) and one
//! on global memory only uses `k = 0`. The reference counts a 2-byte element
//! shared by two lanes as a conflict and so declines every stride-1 16-bit
//! permutation; such a warp access is conflict-free on the hardware, and
//! accepted here.
//!
//! **Generated code** (a 4×32 u32 tile transposed, `k = 2`):
//! ```text
//! unroll for r in 0..4 { perm_regs[r] = A[...(lane + 32 * (r ^ ((lane >> 3) & 3)))...] }
//! warp_sync
//! unroll for r in 0..4 { B[...] = perm_regs[r] }
//! warp_sync
//! ```

use super::call::{operands, PermuteOps, PermuteRule};
use crate::operand::{group_offset, MemOperand};
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::hir::BarrierKind;
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind, MemOp, SyncOp};
use tirx_ir::op::Family;
use tirx_ir::DType;
use tirx_layout::{Axis, ExecScope};

pub struct WarpXorSwizzle;

struct XorPlan {
    dst: MemOperand,
    src: MemOperand,
    dtype: DType,
    /// Registers per lane.
    regs: i64,
    /// The xor factor.
    k: u32,
}

impl Variant for WarpXorSwizzle {
    fn name(&self) -> &'static str {
        "warp_xor_swizzle"
    }
    fn priority(&self) -> u8 {
        20
    }
    fn family(&self) -> Family {
        Family::Permute
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        cx.cooperating_threads(&[ExecScope::Warp])?;
        let ops = operands(cx)?;
        let dtype = ops.src_buf.dtype;
        let bytes = dtype.bytes() as i64;
        if ![1, 2, 4, 8].contains(&bytes) {
            return Err(Decline::new(
                PermuteRule::Width,
                format!("{dtype} elements are {bytes} bytes; need 1, 2, 4 or 8"),
            ));
        }
        let regs = ops.volume / 32;
        if ops.volume % 32 != 0 || !(regs as u64).is_power_of_two() || regs > 32 {
            return Err(Decline::new(
                PermuteRule::Volume,
                format!("the region has {} elements; a warp moves 32·P of them, P a power of two ≤ 32", ops.volume),
            ));
        }
        let shared = ops.dst_buf.scope.is_shared() || ops.src_buf.scope.is_shared();
        let k = match xor_factor(&ops, regs, bytes) {
            Some(k) => k,
            None if !shared => 0,
            None => {
                return Err(Decline::new(
                    PermuteRule::BankConflict,
                    format!(
                        "every xor factor k in 0..={} leaves two words of one wavefront in one shared-memory bank",
                        regs.ilog2()
                    ),
                ))
            }
        };
        let swizzle = match k {
            0 => "no lane swizzle (k = 0)".to_string(),
            k => format!("register index xor (lane >> {}) & {}", 5 - k, (1 << k) - 1),
        };
        let mut p = Plan::new(
            format!("{regs} registers per lane, {swizzle}"),
            XorPlan { dst: ops.dst, src: ops.src, dtype, regs, k },
        );
        p.notes.push(format!("{} element(s) of {dtype} per lane, 2 warp barriers", regs));
        Ok(p)
    }

    fn emit(&self, plan: &Plan, _: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        let p = plan.data::<XorPlan>("warp_xor_swizzle")?;
        let lane = em.axis_id(Axis::LaneId).ok_or_else(|| Bug("no lane id".into()))?;
        let regs = em.local_buf("perm_regs", p.dtype, p.regs);
        let (src, src_base) = p.src.start(em)?;
        let (dst, dst_base) = p.dst.start(em)?;
        let load = phase(em, p, &lane, |em, r, f| {
            let at = element(em, &p.src, &src_base, f);
            LStmtKind::Memory(MemOp::Store { buf: regs, index: r, value: LExpr::Load(src, Box::new(at)) })
        });
        let store = phase(em, p, &lane, |em, r, f| {
            let at = element(em, &p.dst, &dst_base, f);
            LStmtKind::Memory(MemOp::Store { buf: dst, index: at, value: LExpr::Load(regs, Box::new(r)) })
        });
        em.stmts.extend(load);
        em.push(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Warp)));
        em.stmts.extend(store);
        em.push(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Warp)));
        Ok(())
    }
}

/// One phase: an unrolled loop over the lane's registers `r`, `f = lane + 32·(r ^ swz)`.
fn phase(
    em: &mut Emitter,
    p: &XorPlan,
    lane: &LExpr,
    access: impl Fn(&mut Emitter, LExpr, LExpr) -> LStmtKind,
) -> Vec<LStmt> {
    let r = em.var("r", DType::I32, Some((0, p.regs - 1)));
    let rv = LExpr::Var(r);
    let swz = LExpr::bin(
        LBinOp::BitAnd,
        LExpr::bin(LBinOp::Shr, lane.clone(), LExpr::i32(5 - i64::from(p.k))),
        LExpr::i32((1 << p.k) - 1),
    );
    let j = if p.k == 0 { rv.clone() } else { LExpr::bin(LBinOp::BitXor, rv.clone(), swz) };
    let f = LExpr::bin(LBinOp::Add, lane.clone(), LExpr::bin(LBinOp::Mul, LExpr::i32(32), j));
    let body = vec![LStmt::new(access(em, rv, f), em.span)];
    let unroll = p.regs > 1;
    vec![LStmt::new(LStmtKind::For { var: r, begin: LExpr::i32(0), extent: LExpr::i32(p.regs), unroll, body }, em.span)]
}

/// The index of logical element `f` (row-major over the region) in the operand's array.
fn element(em: &Emitter, m: &MemOperand, base: &LExpr, f: LExpr) -> LExpr {
    let b = em.builder();
    b.add(base.clone(), crate::addr::dim_offset(b, &m.tile.shard, f))
}

/// The smallest xor factor that keeps both phases bank-conflict free.
fn xor_factor(ops: &PermuteOps, regs: i64, bytes: i64) -> Option<u32> {
    (0..=regs.ilog2()).find(|&k| [&ops.src, &ops.dst].iter().all(|m| bank_free(m, regs, bytes, k)))
}

/// For every register `r` and every wavefront of lanes (all 32, or each half of
/// the warp for 8-byte elements), no two different 4-byte words share a bank.
fn bank_free(m: &MemOperand, regs: i64, bytes: i64, k: u32) -> bool {
    let lanes_per_wavefront = if bytes == 8 { 16 } else { 32 };
    (0..regs).all(|r| {
        (0..32 / lanes_per_wavefront).all(|w| {
            let mut word_of_bank = [None::<i64>; 32];
            (w * lanes_per_wavefront..(w + 1) * lanes_per_wavefront).all(|lane| {
                let j = if k == 0 { r } else { r ^ ((lane >> (5 - k)) & ((1 << k) - 1)) };
                let elem = crate::lay::m_offset(&m.tile) + group_offset(&m.tile.shard, lane + 32 * j);
                let first = elem * bytes / 4;
                (first..first + (bytes / 4).max(1)).all(|word| {
                    let slot = &mut word_of_bank[word.rem_euclid(32) as usize];
                    let ok = slot.is_none_or(|w| w == word);
                    *slot = Some(word);
                    ok
                })
            })
        })
    })
}
