//! Exact arithmetic (`docs/numerics.md` §5): the LIR's rounded family
//! (`LExpr::Rounded`: `fma`, directed `add.rz`, `cvt.rp<bfloat16>`, ...)
//! computed as one rounding of the exact result ([`rounded`]; the rounding of
//! an f64 to a type is `tirx_ir::lir::round::round_value`).
//!
//! The exact result is carried as `s + e`: `s` its f64 rounding, `e` the
//! error (or only its sign), both exact — a sum's error by TwoSum, a product
//! of two ≤ 26-bit significands is exact in f64, a quotient's error has the
//! sign of the exact remainder `a − q·b` (one f64 fma). `s` is then rounded
//! to odd (replaced by its odd neighbour toward `e` when inexact), which keeps
//! every bit a rounding to ≤ 51 bits depends on, in any mode (Boldo and
//! Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
//! using rounding to odd", IEEE TC 2008), and rounded once to the target.
//! Plain round-to-nearest of `s` would round twice: a product on an f16
//! midpoint plus a tiny addend would tie to even instead of rounding away.

use tirx_ir::lir::round::round_value as round;
use tirx_ir::lir::{RoundMode, RoundOp};
use tirx_ir::DType;

/// `op` on `a, b, c` (of type `t`; `b`, `c` unused where the op takes fewer)
/// rounded once in `mode` to `t`, or for a conversion to its target type.
pub(crate) fn rounded(op: RoundOp, mode: RoundMode, t: DType, a: f64, b: f64, c: f64) -> f64 {
    let (s, e) = match op {
        RoundOp::Cvt(to) => return round(to, a, mode),
        RoundOp::Add => return sum(t, mode, a, b),
        RoundOp::Sub => return sum(t, mode, a, -b),
        RoundOp::Fma => return sum(t, mode, a * b, c),
        RoundOp::Mul => (a * b, 0.0),
        RoundOp::Div => quotient(a, b),
    };
    round(t, round_to_odd(s, e), mode)
}

/// `x + y` rounded once; an exact zero sum of operands other than two `+0`
/// is `-0` when rounding toward −∞ and `+0` otherwise (IEEE 754 §6.3).
fn sum(t: DType, mode: RoundMode, x: f64, y: f64) -> f64 {
    let s = x + y;
    if !s.is_finite() {
        return round(t, s, mode);
    }
    // TwoSum (Knuth): s + e == x + y exactly.
    let yv = s - x;
    let e = (x - (s - yv)) + (y - yv);
    if s == 0.0 && mode == RoundMode::Rm && !(x.is_sign_positive() && y.is_sign_positive()) {
        return -0.0;
    }
    round(t, round_to_odd(s, e), mode)
}

/// `a / b` as `(q, e)`: `q` the f64 quotient and `e` a value with the sign of `a/b − q`.
fn quotient(a: f64, b: f64) -> (f64, f64) {
    let q = a / b;
    if !q.is_finite() || q == 0.0 {
        return (q, 0.0);
    }
    // a − q·b is exact (q is a correctly rounded quotient), so its sign is the error's.
    let r = (-q).mul_add(b, a);
    (q, r * b.signum())
}

/// The exact value `s + e` rounded to odd in f64: `s` if exact or odd, else its odd neighbour toward `e`.
fn round_to_odd(s: f64, e: f64) -> f64 {
    if e == 0.0 || s.to_bits() & 1 == 1 {
        s
    } else if e > 0.0 {
        next_up(s)
    } else {
        -next_up(-s)
    }
}

/// The next f64 above a finite `x`.
fn next_up(x: f64) -> f64 {
    let bits = x.to_bits();
    if x == 0.0 {
        f64::from_bits(1)
    } else if x > 0.0 {
        f64::from_bits(bits + 1)
    } else {
        f64::from_bits(bits - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use RoundMode::*;

    fn pow2(k: i32) -> f64 {
        2f64.powi(k)
    }

    /// A deterministic stream of bit patterns.
    fn xorshift(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn nearest_agrees_with_hardware_and_half_on_f32_values() {
        let mut st = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            let x = f32::from_bits(xorshift(&mut st) as u32);
            if x.is_nan() {
                continue;
            }
            let d = x as f64;
            assert_eq!(round(DType::F16, d, Rn), f16::from_f32(x).to_f64(), "{x:e}");
            assert_eq!(round(DType::BF16, d, Rn), bf16::from_f32(x).to_f64(), "{x:e}");
            let y = f64::from_bits(xorshift(&mut st));
            if !y.is_nan() {
                assert_eq!(round(DType::F32, y, Rn).to_bits(), (y as f32 as f64).to_bits(), "{y:e}");
            }
        }
    }

    /// An f32 value on a bf16 tie plus 2^-23 rounds up; half's `bf16::from_f64`
    /// drops the low word of the f64 and ties to even instead.
    #[test]
    fn sticky_bits_below_the_high_word_count() {
        let x = 1.0 + pow2(-8) + pow2(-23);
        assert_eq!(round(DType::BF16, x, Rn), 1.0 + pow2(-7));
        assert_eq!(bf16::from_f64(x).to_f64(), 1.0, "half's f64 conversion (why this module exists)");
        // An f16 tie plus 2^-40, exact only in f64.
        assert_eq!(round(DType::F16, 1.0 + pow2(-11) + pow2(-40), Rn), 1.0 + pow2(-10));
    }

    #[test]
    fn fma_rounds_once() {
        // 3 · (683/2048) = 1 + 2^-11, an f16 midpoint; + 2^-24 must round up.
        let (a, b, c) = (3.0, 683.0 / 2048.0, pow2(-24));
        assert_eq!(rounded(RoundOp::Fma, Rn, DType::F16, a, b, c), 1.0 + pow2(-10));
        assert_eq!(rounded(RoundOp::Fma, Rn, DType::F16, a, b, -c), 1.0);
        // 7 · (37/256) = 1 + 3/256, a bf16 midpoint; + 2^-100 is lost in an f64 sum.
        let (a, b) = (7.0, 37.0 / 256.0);
        assert_eq!(rounded(RoundOp::Fma, Rn, DType::BF16, a, b, pow2(-100)), 1.0 + 2.0 * pow2(-7));
        assert_eq!(rounded(RoundOp::Fma, Rn, DType::BF16, a, b, -pow2(-100)), 1.0 + pow2(-7));
        let mut st = 0x2545_f491_4f6c_dd1d;
        for i in 0..100_000 {
            // Random signs and significands, exponents in [-64, 64), so that sums cancel and overflow rarely.
            let mut f = || {
                let r = xorshift(&mut st);
                f32::from_bits((r as u32 & 0x807f_ffff) | (((r >> 32) as u32 % 128 + 63) << 23))
            };
            let (a, b) = (f(), f());
            // Every other case cancels the product's f32 rounding: the result is its error.
            let c = if i % 2 == 0 { -(a * b) } else { f() };
            let want = a.mul_add(b, c);
            let got = rounded(RoundOp::Fma, Rn, DType::F32, a as f64, b as f64, c as f64);
            assert!(got.to_bits() == (want as f64).to_bits() || want.is_nan(), "fma({a:e}, {b:e}, {c:e})");
        }
    }

    #[test]
    fn directed_arithmetic() {
        let (one, tiny) = (1.0, pow2(-30));
        assert_eq!(rounded(RoundOp::Add, Rz, DType::F32, one, tiny, 0.0), 1.0);
        assert_eq!(rounded(RoundOp::Add, Rp, DType::F32, one, tiny, 0.0), 1.0 + pow2(-23));
        assert_eq!(rounded(RoundOp::Sub, Rm, DType::F32, one, tiny, 0.0), 1.0 - pow2(-24));
        assert_eq!(rounded(RoundOp::Sub, Rz, DType::F32, one, tiny, 0.0), 1.0 - pow2(-24));
        assert_eq!(rounded(RoundOp::Sub, Rn, DType::F32, one, tiny, 0.0), 1.0);
        // 1/3 rounds up to nearest in f32.
        assert_eq!(rounded(RoundOp::Div, Rz, DType::F32, 1.0, 3.0, 0.0), 0.333_333_313_465_118_4);
        assert_eq!(rounded(RoundOp::Div, Rp, DType::F32, 1.0, 3.0, 0.0), (1.0f32 / 3.0) as f64);
        assert_eq!(rounded(RoundOp::Div, Rm, DType::F32, -1.0, 3.0, 0.0), -0.333_333_343_267_440_8);
        assert_eq!(rounded(RoundOp::Mul, Rz, DType::F32, f32::MAX as f64, 2.0, 0.0), f32::MAX as f64);
        // x − x is −0 only toward −∞.
        assert_eq!(rounded(RoundOp::Sub, Rm, DType::F32, 2.0, 2.0, 0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(rounded(RoundOp::Sub, Rz, DType::F32, 2.0, 2.0, 0.0).to_bits(), 0);
        assert_eq!(rounded(RoundOp::Fma, Rm, DType::F32, 2.0, 3.0, -6.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(rounded(RoundOp::Add, Rm, DType::F32, 0.0, 0.0, 0.0).to_bits(), 0);
    }
}
