//! Swizzle iteration fast path (docs/tile-primitives.md §3.6, docs/layout-model.md §3.4).
//!
//! **Accepts** an inner swizzle and the shared-side round iters of a partition
//! when every round offset is a sum of distinct address bits that are zero in
//! every thread's base `M0` (checked over all thread ids) and no two of those
//! bits interact through the swizzle.
//!
//! **Algorithm**: setting a zero bit `b` of `q = m >> p` changes `swizzle(m)` by
//! a signed per-thread stride (`σ_x = 1 − 2·bit_x(q)`, `T_b = 2^(b+p)`):
//! `b < sw`: `σ_{at+b}·T_b`; `at ≤ b < at+sw`: `T_b + σ_{b−at}·T_{b−at}`; else `T_b`.
//! So `swizzle(M0 + Δ_f) = swizzle(M0) + Σ_{bits of Δ_f} stride`, with the
//! base and the strides computed once per thread.
//!
//! **Generated code**: `let s_base = swizzle(M0)`, `let ss0 = ..` per data-dependent
//! stride, and per round `s_off = s_base + ((f >> 2) & 1) * ss0 + ...`.

use crate::variant::Emitter;
use tirx_ir::lir::{LBinOp, LExpr, LStmt, LStmtKind};
use tirx_ir::DType;
use tirx_layout::{Iter, Swizzle};

/// One round iter of the walk, outermost first.
#[derive(Clone, Debug, PartialEq)]
enum WalkIter {
    /// Contributes `c · stride` (a multiple of the swizzle period).
    Linear { extent: i64, stride: i64 },
    /// `extent = 2^k`; bit `j` of the coordinate sets address bit `bits[k-1-j]`.
    Binary { extent: i64, bits: Vec<u32> },
}

/// A recognised swizzle walk over the rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Walk {
    sw: Swizzle,
    iters: Vec<WalkIter>,
}

/// `try_recognize`: `outer` are the round iters of the shared side (outermost
/// first), `m0` every thread's base element offset.
pub fn recognize(sw: &Swizzle, outer: &[Iter], m0: &[i64]) -> Option<Walk> {
    if !sw.inner || sw.swizzle_len == 0 {
        return None;
    }
    let (p, at, len) = (sw.per_element, sw.atom_len, sw.swizzle_len);
    let c = 1i64 << p;
    let pure = 1i64 << (p + at + len);
    let mut iters = Vec::new();
    let mut all_bits = Vec::new();
    for it in outer {
        if it.extent == 1 {
            continue;
        }
        if it.stride <= 0 || it.stride % c != 0 {
            return None;
        }
        if it.extent & (it.extent - 1) != 0 {
            if it.stride % pure != 0 {
                return None;
            }
            iters.push(WalkIter::Linear { extent: it.extent, stride: it.stride });
            continue;
        }
        let k = it.extent.trailing_zeros();
        let mut bits = Vec::new();
        for j in (0..k).rev() {
            let dq = (it.stride << j) / c;
            if dq & (dq - 1) != 0 {
                return None;
            }
            bits.push(dq.trailing_zeros());
        }
        all_bits.extend(bits.iter().copied());
        iters.push(WalkIter::Binary { extent: it.extent, bits });
    }
    let mut sorted = all_bits.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != all_bits.len() {
        return None;
    }
    // (C2) a bit in [at, at+sw) and its partner b−at interact.
    if all_bits.iter().any(|&b| (at..at + len).contains(&b) && all_bits.contains(&(b - at))) {
        return None;
    }
    // (C1) every walked bit is zero in every thread's base.
    if m0.iter().any(|&m| m < 0 || all_bits.iter().any(|&b| (m >> (p + b)) & 1 != 0)) {
        return None;
    }
    Some(Walk { sw: *sw, iters })
}

impl Walk {
    /// Emits the per-thread lets (into `pre`, before the round loop) and returns
    /// the shared element offset of round `f`.
    pub fn emit(&self, em: &mut Emitter, pre: &mut Vec<LStmt>, m0: LExpr, f: &LExpr) -> LExpr {
        let (p, at, len) = (self.sw.per_element, self.sw.atom_len, self.sw.swizzle_len);
        let ity = em.builder().ity(&m0);
        let base = crate::addr::swizzle(em.builder(), &self.sw, m0.clone());
        let base = bind(em, pre, "s_base", base);
        let sigma = |em: &Emitter, b: u32| -> LExpr {
            let bit =
                em.builder().bin_c(LBinOp::BitAnd, em.builder().bin_c(LBinOp::Shr, m0.clone(), (p + b) as i64), 1);
            em.builder().sub(LExpr::Int(1, ity), em.builder().mul(bit, LExpr::Int(2, ity)))
        };
        let t = |b: u32| LExpr::Int(1i64 << (b + p), ity);
        let mut off = base;
        let mut below = 1i64;
        let f = em.builder().to_int(f.clone(), ity);
        let mut terms = Vec::new();
        for it in self.iters.iter().rev() {
            let extent = match it {
                WalkIter::Linear { extent, .. } | WalkIter::Binary { extent, .. } => *extent,
            };
            let b = em.builder();
            let coord = b.rem_c(b.div_c(f.clone(), below), extent);
            below *= extent;
            match it {
                WalkIter::Linear { stride, .. } => terms.push(b.mul(coord, LExpr::Int(*stride, ity))),
                WalkIter::Binary { bits, .. } => {
                    let k = bits.len();
                    for (slot, &bj) in bits.iter().enumerate() {
                        let j = (k - 1 - slot) as i64;
                        let stride = if bj < len {
                            em.builder().mul(sigma(em, at + bj), t(bj))
                        } else if (at..at + len).contains(&bj) {
                            em.builder().add(t(bj), em.builder().mul(sigma(em, bj - at), t(bj - at)))
                        } else {
                            t(bj)
                        };
                        let stride = bind(em, pre, "ss", stride);
                        let b = em.builder();
                        let on = b.bin_c(LBinOp::BitAnd, b.bin_c(LBinOp::Shr, coord.clone(), j), 1);
                        terms.push(b.mul(on, stride));
                    }
                }
            }
        }
        for term in terms.into_iter().rev() {
            off = em.builder().add(off, term);
        }
        off
    }
}

/// A per-thread let for a non-constant value.
fn bind(em: &mut Emitter, pre: &mut Vec<LStmt>, name: &str, e: LExpr) -> LExpr {
    if matches!(e, LExpr::Int(..) | LExpr::Var(_)) {
        return e;
    }
    let t: DType = em.builder().ity(&e);
    let v = em.var(name, t, None);
    pre.push(LStmt::new(LStmtKind::Let { var: v, value: e }, em.span));
    LExpr::Var(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::swizzle_const;

    #[test]
    fn walk_matches_the_swizzle() {
        // ComposeLayout(3,3,3) f16 (32, 64), warp: rounds stride 256, lanes 8 per row.
        let sw = Swizzle { per_element: 3, swizzle_len: 3, atom_len: 3, inner: true };
        let m0: Vec<i64> = (0..32).map(|t| (t / 8) * 64 + (t % 8) * 8).collect();
        let outer = [Iter::m(8, 256)];
        let w = recognize(&sw, &outer, &m0).expect("recognised");
        // Check the algebra numerically: swz(M0 + f·256) == swz(M0) + Σ bits·stride.
        for &m in &m0 {
            for f in 0..8i64 {
                let mut off = swizzle_const(&sw, m);
                let WalkIter::Binary { bits, .. } = &w.iters[0] else { panic!() };
                for (slot, &bj) in bits.iter().enumerate() {
                    let j = bits.len() - 1 - slot;
                    if (f >> j) & 1 == 1 {
                        let sig = |b: u32| 1 - 2 * ((m >> (3 + b)) & 1);
                        let t = |b: u32| 1i64 << (b + 3);
                        off += if bj < 3 {
                            sig(3 + bj) * t(bj)
                        } else if bj < 6 {
                            t(bj) + sig(bj - 3) * t(bj - 3)
                        } else {
                            t(bj)
                        };
                    }
                }
                assert_eq!(off, swizzle_const(&sw, m + f * 256), "m0 {m} f {f}");
            }
        }
    }

    #[test]
    fn rejects_interacting_bits() {
        let sw = Swizzle { per_element: 3, swizzle_len: 3, atom_len: 3, inner: true };
        // Strides 8 (bit 0) and 64 (bit 3 = 0 + at) interact.
        assert!(recognize(&sw, &[Iter::m(2, 64), Iter::m(2, 8)], &[0]).is_none());
        // A base with the walked bit set.
        assert!(recognize(&sw, &[Iter::m(2, 256)], &[256]).is_none());
    }
}
