//! The arithmetic of `mma.sync` (`docs/numerics.md` §8): each output element is
//! `c + Σ a_k·b_k` with every product exact and the whole sum exact, rounded
//! once to f32 (to nearest, ties to even). No summation order exists to model:
//! the exact sum does not depend on it.
//!
//! Products of f16, bf16 and tf32 values have at most 22 significant bits and
//! lie in `[2^-298, 2^256)`, so each is exact in f64. The sum is exact in f64
//! too when the terms' bits span at most 53 positions (the common case,
//! checked); otherwise it is accumulated exactly in a fixed-point integer
//! covering every f64 (last bit 2^-1074, 2112 bits), so no input can overflow it. Either way the exact value is rounded
//! to odd on 53 bits and then to f32, which rounds it once (rounding to odd on
//! ≥ p + 2 bits keeps every bit a later rounding to p bits needs).

use tirx_ir::lir::round::round_value;
use tirx_ir::lir::RoundMode;
use tirx_ir::DType;

/// Limbs of the fixed-point accumulator, least significant first: 2^-1074 up to
/// 2^1037 in two's complement, room for 2^13 terms of the largest f64.
const LIMBS: usize = 33;
/// The weight of the accumulator's last bit is 2^LSB (the smallest f64 bit).
const LSB: i32 = -1074;

/// An f32 value rounded to tf32 as `cvt.rna.tf32.f32` does: 10 fraction bits,
/// to nearest with ties away from zero (NaN and infinities unchanged).
pub(crate) fn to_tf32(x: f64) -> f64 {
    let f = x as f32;
    if !f.is_finite() {
        return x;
    }
    let bits = (f.to_bits() + 0x1000) & !0x1fff;
    f32::from_bits(bits) as f64
}

/// An f32 value read as tf32 by truncation (the low 13 fraction bits ignored), as
/// `wgmma` reads float32 multiplicands from shared memory (`docs/numerics.md` §10).
pub(crate) fn to_tf32_trunc(x: f64) -> f64 {
    let f = x as f32;
    if !f.is_finite() {
        return x;
    }
    f32::from_bits(f.to_bits() & !0x1fff) as f64
}

/// `Σ terms` (finite or not) rounded once to nearest f32, as an f64 holding the f32 value.
pub(crate) fn sum_rn_f32(terms: &[f64]) -> f64 {
    sum_rn(terms, DType::F32)
}

/// `Σ terms` rounded once to nearest `t` (float32 or float16), as an f64 holding that value.
pub(crate) fn sum_rn(terms: &[f64], t: DType) -> f64 {
    if let Some(special) = special_sum(terms) {
        return special;
    }
    let nonzero: Vec<f64> = terms.iter().copied().filter(|x| *x != 0.0).collect();
    if nonzero.is_empty() {
        // An exact zero: −0 only if every term is −0 (IEEE 754 §6.3, to nearest).
        let all_negative = terms.iter().all(|x| x.is_sign_negative());
        return if all_negative && !terms.is_empty() { -0.0 } else { 0.0 };
    }
    let exact = match fast_sum(&nonzero) {
        Some(s) => s,
        None => Fixed::sum(&nonzero).round_to_odd(),
    };
    round_value(t, exact, RoundMode::Rn)
}

/// NaN when a term is NaN or infinities of both signs meet; the infinity otherwise.
fn special_sum(terms: &[f64]) -> Option<f64> {
    if terms.iter().any(|x| x.is_nan()) {
        return Some(f64::NAN);
    }
    let pos = terms.contains(&f64::INFINITY);
    let neg = terms.contains(&f64::NEG_INFINITY);
    match (pos, neg) {
        (true, true) => Some(f64::NAN),
        (true, false) => Some(f64::INFINITY),
        (false, true) => Some(f64::NEG_INFINITY),
        (false, false) => None,
    }
}

/// `(integer significand, exponent)` with `x = ±m·2^e`, for a finite non-zero f64.
fn parts(x: f64) -> (u64, i32) {
    let bits = x.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let frac = bits & ((1 << 52) - 1);
    if exp == 0 {
        (frac, -1074)
    } else {
        (frac | (1 << 52), exp - 1075)
    }
}

/// The f64 sum when it is exact: every partial sum is a multiple of the
/// smallest term's last bit and below `n·2^(top+1)`, so 53 bits hold it when
/// the terms span ≤ 53 − ⌈log2 n⌉ − 1 bit positions.
fn fast_sum(terms: &[f64]) -> Option<f64> {
    let (mut lo, mut hi) = (i32::MAX, i32::MIN);
    for &x in terms {
        let (m, e) = parts(x);
        lo = lo.min(e + m.trailing_zeros() as i32);
        hi = hi.max(e + 63 - m.leading_zeros() as i32);
    }
    let growth = (usize::BITS - terms.len().leading_zeros()) as i32;
    (hi + 1 + growth - lo <= 53).then(|| terms.iter().sum())
}

/// A two's-complement fixed-point number of `LIMBS` words, last bit 2^LSB.
struct Fixed([u64; LIMBS]);

impl Fixed {
    fn sum(terms: &[f64]) -> Fixed {
        let mut acc = Fixed([0; LIMBS]);
        for &x in terms {
            let (m, e) = parts(x);
            acc.add_shifted(m, (e - LSB) as u32, x < 0.0);
        }
        acc
    }

    /// `± m·2^shift` added in place (two's complement: a subtraction adds the negation).
    fn add_shifted(&mut self, m: u64, shift: u32, negative: bool) {
        let mut v = [0u64; LIMBS];
        let (limb, off) = ((shift / 64) as usize, shift % 64);
        v[limb] = m << off;
        if off > 0 && limb + 1 < LIMBS {
            v[limb + 1] = m >> (64 - off);
        }
        if negative {
            negate(&mut v);
        }
        let mut carry = 0u64;
        for (a, b) in self.0.iter_mut().zip(v) {
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(carry);
            *a = s2;
            carry = u64::from(c1) + u64::from(c2);
        }
    }

    /// The value rounded to odd on 53 bits: truncated, and the last bit set when bits were dropped.
    fn round_to_odd(mut self) -> f64 {
        let negative = self.0[LIMBS - 1] >> 63 == 1;
        if negative {
            negate(&mut self.0);
        }
        let Some(top) = (0..LIMBS).rev().find(|&i| self.0[i] != 0) else { return 0.0 };
        let h = top as i32 * 64 + 63 - self.0[top].leading_zeros() as i32;
        let low = (h - 52).max(0);
        let mut m = 0u64;
        for bit in low..=h {
            m |= self.bit(bit) << (bit - low);
        }
        if (0..low).any(|b| self.bit(b) == 1) {
            m |= 1;
        }
        // Exact: m has ≤ 53 bits and the scale is a power of two (f64-subnormal
        // results, far below any f32, may lose bits that no f32 rounding needs).
        let v = m as f64 * 2f64.powi(low + LSB);
        if negative {
            -v
        } else {
            v
        }
    }

    fn bit(&self, b: i32) -> u64 {
        (self.0[(b / 64) as usize] >> (b % 64)) & 1
    }
}

/// Two's-complement negation in place.
fn negate(v: &mut [u64; LIMBS]) {
    let mut carry = 1u64;
    for x in v.iter_mut() {
        let (s, c) = (!*x).overflowing_add(carry);
        *x = s;
        carry = u64::from(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_of(terms: &[f64]) -> f32 {
        sum_rn_f32(terms) as f32
    }

    #[test]
    fn cancellation_keeps_small_terms() {
        // f64 summation in this order loses the 1 entirely.
        assert_eq!(f32_of(&[2f64.powi(200), 1.0, -(2f64.powi(200))]), 1.0);
        assert_eq!(f32_of(&[2f64.powi(-290), 2f64.powi(250), -(2f64.powi(250))]), 0.0);
        assert_eq!(f32_of(&[1e-30, 1e30, -1e30]), 1e-30f32);
    }

    #[test]
    fn rounds_once_to_nearest_even() {
        let ulp = 2f64.powi(-23);
        // 1 + ulp/2 is a tie: even is 1.0; a tiny extra term breaks the tie upwards.
        assert_eq!(f32_of(&[1.0, ulp / 2.0]), 1.0);
        assert_eq!(f32_of(&[1.0, ulp / 2.0, 2f64.powi(-200)]), 1.0 + ulp as f32);
        assert_eq!(f32_of(&[1.0, ulp / 2.0, -(2f64.powi(-200))]), 1.0);
        assert_eq!(f32_of(&[-1.0, -ulp / 2.0, -(2f64.powi(-200))]), -1.0 - ulp as f32);
        // Sequential f32 addition would round twice here: (1 + ulp/2) → 1, then + ulp/2 → 1.
        assert_eq!(f32_of(&[1.0, ulp / 2.0, ulp / 2.0]), 1.0 + ulp as f32);
    }

    #[test]
    fn specials_and_zeros() {
        assert!(sum_rn_f32(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert!(sum_rn_f32(&[1.0, f64::NAN]).is_nan());
        assert_eq!(sum_rn_f32(&[f64::INFINITY, -5.0]), f64::INFINITY);
        assert!(sum_rn_f32(&[-0.0, -0.0]).is_sign_negative());
        assert!(sum_rn_f32(&[-0.0, 0.0]).is_sign_positive());
        assert!(sum_rn_f32(&[2.0, -2.0]).is_sign_positive());
        assert_eq!(sum_rn_f32(&[3e38, 3e38]), f64::INFINITY);
    }

    #[test]
    fn fixed_point_agrees_with_exact_small_sums() {
        // Integers and dyadic values where f64 is exact: both paths must agree.
        let mut seed = 0x9e3779b97f4a7c15u64;
        for _ in 0..2000 {
            let terms: Vec<f64> = (0..17)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    ((seed % 2001) as f64 - 1000.0) * 2f64.powi((seed >> 40) as i32 % 20 - 10)
                })
                .filter(|x| *x != 0.0)
                .collect();
            if terms.is_empty() {
                continue;
            }
            let exact: f64 = terms.iter().sum();
            assert_eq!(Fixed::sum(&terms).round_to_odd(), exact, "{terms:?}");
        }
    }

    #[test]
    fn tf32_rounds_to_nearest_ties_away() {
        let ulp = 2f64.powi(-10);
        assert_eq!(to_tf32(1.0 + ulp / 2.0), 1.0 + ulp);
        assert_eq!(to_tf32(1.0 + ulp / 2.0 - 2f64.powi(-23)), 1.0);
        assert_eq!(to_tf32(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(to_tf32(1.0 + 3.0 * ulp), 1.0 + 3.0 * ulp);
    }
}
