//! Scalar semantics, bit-for-bit what the CUDA code computes.
//!
//! Slots hold integers as `i64` normalised to their width and floats as the
//! `f64` of their exact value (see [`crate::value`]). `f32` arithmetic is done
//! in `f32`; f16/bf16/fp8 arithmetic is done in `f32` and rounded once to the
//! type (for `+ - * /` and sqrt an f32 intermediate is exact enough that the
//! double rounding is innocuous: 24 ≥ 2·11 + 2). Integers wrap at their declared
//! width; `Div`/`Rem` truncate (C), `FloorDiv`/`FloorMod` floor (Python). A `uint64`
//! slot holds the value's bit pattern (as `i64`); its division, comparison, `min`/`max`,
//! `>>` and conversions to float are unsigned.
//! Shifts follow PTX `shl`/`shr` on the C-promoted operand (≥ 32 bits): a shift
//! amount ≥ the promoted width gives 0 (or the sign fill for signed `>>`).
//! Float → integer casts truncate, saturate to the 32-bit (or 64-bit) range of
//! the target's signedness and then wrap to the target width, NaN → 0 — what
//! nvcc makes of the C casts the generator prints (see `float_to_int`). Integer division by zero is reported
//! (the GPU returns garbage). Transcendentals (`exp`, `tanh`, `rsqrt`, ...) use
//! Rust's correctly- or nearly-correctly-rounded implementations; CUDA's
//! `expf`/`rsqrtf`/`hexp` may differ by a few ulp, so compare those with a tolerance.
//! `a * b + c` is two roundings here, as the LIR says; nvcc/NVRTC contract it into
//! one FMA by default (`--fmad=true`), also across statements (`gpu/contract.cu`):
//! compile with `--fmad=false` to get the simulator's bits on the GPU. A fused
//! multiply-add (`fma`, packed `fma2`) and directed roundings are `round`'s.

use crate::value::{round_to, wrap_int};
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, PackedOp, RoundMode, RoundOp};
use tirx_ir::DType;

/// An arithmetic fault the GPU would not report but the simulator does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArithFault {
    DivByZero,
}

fn f(v: u64) -> f64 {
    f64::from_bits(v)
}
fn fb(x: f64) -> u64 {
    x.to_bits()
}
fn b(x: bool) -> u64 {
    x as u64
}

/// The common 32-bit integer operations of index arithmetic, without the general dispatch.
#[inline]
pub(crate) fn bin_i32_fast(op: LBinOp, a: u64, b: u64) -> Option<u64> {
    let (x, y) = (a as i32, b as i32);
    let r = match op {
        LBinOp::Add => x.wrapping_add(y),
        LBinOp::Sub => x.wrapping_sub(y),
        LBinOp::Mul => x.wrapping_mul(y),
        LBinOp::Div if y > 0 => x / y,
        LBinOp::Rem if y > 0 => x % y,
        LBinOp::Lt => return Some((x < y) as u64),
        LBinOp::Eq => return Some((x == y) as u64),
        _ => return None,
    };
    Some(r as i64 as u64)
}

pub(crate) fn bin(op: LBinOp, ty: DType, a: u64, bv: u64) -> Result<u64, ArithFault> {
    if op.is_logic() {
        let ta = truthy(ty, a);
        let tb = truthy(ty, bv);
        return Ok(b(if op == LBinOp::And { ta && tb } else { ta || tb }));
    }
    if ty.is_float() {
        Ok(float_bin(op, ty, f(a), f(bv)))
    } else {
        int_bin(op, ty, a as i64, bv as i64)
    }
}

/// The `uint64` operations whose result depends on signedness; the rest are `int_bin`'s bits.
fn u64_bin(op: LBinOp, x: u64, y: u64) -> Option<Result<u64, ArithFault>> {
    use LBinOp::*;
    Some(Ok(match op {
        Div | Rem | FloorDiv | FloorMod if y == 0 => return Some(Err(ArithFault::DivByZero)),
        // Unsigned operands are never negative: floor and truncation agree.
        Div | FloorDiv => x / y,
        Rem | FloorMod => x % y,
        Min => x.min(y),
        Max => x.max(y),
        Lt => b(x < y),
        Le => b(x <= y),
        Gt => b(x > y),
        Ge => b(x >= y),
        Shr if y >= 64 => 0,
        Shr => x >> y,
        _ => return None,
    }))
}

pub(crate) fn truthy(ty: DType, v: u64) -> bool {
    if ty.is_float() {
        f(v) != 0.0
    } else {
        v != 0
    }
}

fn float_bin(op: LBinOp, ty: DType, x: f64, y: f64) -> u64 {
    use LBinOp::*;
    if op.is_compare() {
        return b(match op {
            Eq => x == y,
            Ne => x != y,
            Lt => x < y,
            Le => x <= y,
            Gt => x > y,
            _ => x >= y,
        });
    }
    if ty == DType::F64 {
        return fb(f64_arith(op, x, y));
    }
    let r = f32_arith(op, x as f32, y as f32) as f64;
    fb(if ty == DType::F32 { r } else { round_to(ty, r) })
}

fn f32_arith(op: LBinOp, x: f32, y: f32) -> f32 {
    use LBinOp::*;
    match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Div => x / y,
        Rem => x % y,
        FloorDiv => (x / y).floor(),
        FloorMod => x - (x / y).floor() * y,
        // NaN propagates (docs/numerics.md §6), as PTX's max.NaN and PyTorch's max.
        Min | Max if x.is_nan() || y.is_nan() => x + y,
        Min => x.min(y),
        Max => x.max(y),
        // Bit operators on floats are rejected when the program is compiled.
        _ => f32::NAN,
    }
}

fn f64_arith(op: LBinOp, x: f64, y: f64) -> f64 {
    use LBinOp::*;
    match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Div => x / y,
        Rem => x % y,
        FloorDiv => (x / y).floor(),
        FloorMod => x - (x / y).floor() * y,
        Min | Max if x.is_nan() || y.is_nan() => x + y,
        Min => x.min(y),
        Max => x.max(y),
        _ => f64::NAN,
    }
}

/// Width the C operand is promoted to before a shift.
fn promoted_bits(ty: DType) -> u64 {
    ty.bits().max(32) as u64
}

fn int_bin(op: LBinOp, ty: DType, x: i64, y: i64) -> Result<u64, ArithFault> {
    use LBinOp::*;
    if ty == DType::U64 {
        if let Some(r) = u64_bin(op, x as u64, y as u64) {
            return r;
        }
    }
    let r = match op {
        Add => x.wrapping_add(y),
        Sub => x.wrapping_sub(y),
        Mul => x.wrapping_mul(y),
        Div | Rem | FloorDiv | FloorMod if y == 0 => return Err(ArithFault::DivByZero),
        Div => x.wrapping_div(y),
        Rem => x.wrapping_rem(y),
        FloorDiv => {
            let q = x.wrapping_div(y);
            if x.wrapping_rem(y) != 0 && ((x < 0) != (y < 0)) {
                q - 1
            } else {
                q
            }
        }
        FloorMod => {
            let r = x.wrapping_rem(y);
            if r != 0 && ((r < 0) != (y < 0)) {
                r + y
            } else {
                r
            }
        }
        Min => x.min(y),
        Max => x.max(y),
        Eq => return Ok(b(x == y)),
        Ne => return Ok(b(x != y)),
        Lt => return Ok(b(x < y)),
        Le => return Ok(b(x <= y)),
        Gt => return Ok(b(x > y)),
        Ge => return Ok(b(x >= y)),
        BitAnd => x & y,
        BitOr => x | y,
        BitXor => x ^ y,
        Shl => {
            let s = y as u64;
            if s >= promoted_bits(ty) {
                0
            } else {
                x.wrapping_shl(s as u32)
            }
        }
        Shr => {
            let s = y as u64;
            let signed = ty.is_signed();
            if s >= promoted_bits(ty) {
                if signed && x < 0 {
                    -1
                } else {
                    0
                }
            } else {
                // Normalised unsigned values are non-negative, so `>>` is logical for them.
                x >> s
            }
        }
        And => return Ok(b(x != 0 && y != 0)),
        Or => return Ok(b(x != 0 || y != 0)),
    };
    Ok(wrap_int(ty, r) as u64)
}

pub(crate) fn un(op: UnOp, ty: DType, v: u64) -> u64 {
    match op {
        UnOp::Not => b(!truthy(ty, v)),
        UnOp::Neg if ty.is_float() => fb(-f(v)),
        UnOp::Neg => wrap_int(ty, (v as i64).wrapping_neg()) as u64,
        UnOp::BitNot => wrap_int(ty, !(v as i64)) as u64,
    }
}

pub(crate) fn cast(from: DType, to: DType, v: u64) -> u64 {
    if from == to {
        return v;
    }
    if to == DType::Bool {
        return b(truthy(from, v));
    }
    match (from.is_float(), to.is_float()) {
        (true, true) => fb(round_to(to, f(v))),
        (false, true) => {
            let (i, u) = (v as i64, from == DType::U64);
            fb(match to {
                DType::F32 if u => v as f32 as f64,
                DType::F32 => i as f32 as f64,
                DType::F64 if u => v as f64,
                DType::F64 => i as f64,
                // The generator converts integers to 16/8-bit floats through `float`
                // (two roundings, as on the GPU).
                _ if u => round_to(to, v as f32 as f64),
                _ => round_to(to, i as f32 as f64),
            })
        }
        (true, false) => float_to_int(to, f(v)) as u64,
        (false, false) => wrap_int(to, v as i64) as u64,
    }
}

/// As nvcc compiles a C cast: a saturating `cvt.rzi` to the 32-bit integer of the same
/// signedness (64-bit for `int64`), then wrap-around to the target width — so
/// `(int8_t)300.0f == 44` but `(uint8_t)-5.0f == 0` (checked on an H200, `gpu/casts.cu`).
fn float_to_int(to: DType, x: f64) -> i64 {
    if x.is_nan() {
        return 0;
    }
    if to == DType::U64 {
        // `cvt.rzi.u64` saturates to 0..=2^64-1 (Rust's `as` does the same).
        return x as u64 as i64;
    }
    let via = match to {
        DType::I8 | DType::I16 | DType::I32 => DType::I32,
        DType::U8 | DType::U16 | DType::U32 => DType::U32,
        _ => DType::I64,
    };
    let (lo, hi) = int_range(via);
    wrap_int(to, x.trunc().clamp(lo as f64, hi as f64) as i64)
}

fn int_range(t: DType) -> (i64, i64) {
    match t {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U8 => (0, u8::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        _ => (i64::MIN, i64::MAX),
    }
}

/// Unary math; integer arguments only reach here for `abs` (the compiler casts the rest to f32).
pub(crate) fn math(fun: MathFn, ty: DType, v: u64) -> u64 {
    if !ty.is_signed() {
        return v;
    }
    if !ty.is_float() {
        return wrap_int(ty, (v as i64).wrapping_abs()) as u64;
    }
    if ty == DType::F64 {
        return fb(math_f64(fun, f(v)));
    }
    let r = math_f32(fun, f(v) as f32) as f64;
    fb(if ty == DType::F32 { r } else { round_to(ty, r) })
}

fn math_f32(fun: MathFn, x: f32) -> f32 {
    match fun {
        MathFn::Sqrt => x.sqrt(),
        MathFn::Rsqrt => 1.0 / x.sqrt(),
        MathFn::Exp => x.exp(),
        MathFn::Exp2 => x.exp2(),
        MathFn::Log => x.ln(),
        MathFn::Log2 => x.log2(),
        MathFn::Abs => x.abs(),
        MathFn::Floor => x.floor(),
        MathFn::Ceil => x.ceil(),
        MathFn::Tanh => x.tanh(),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Erf => libm::erff(x),
        MathFn::Erfc => libm::erfcf(x),
        MathFn::Log1p => x.ln_1p(),
        // Subnormal operands read as 0 (2^0 = 1, as 2^x of them rounds to), results flush to 0.
        MathFn::Exp2Ftz if x.is_subnormal() => 1.0,
        MathFn::Exp2Ftz => Some(x.exp2()).filter(|r| !r.is_subnormal()).unwrap_or(0.0),
        MathFn::Exp2Fma => exp2_fma(x),
    }
}

/// [`MathFn::Exp2Fma`] as the GPU computes it, step for step (`tirx_exp2_fma`): each
/// operation rounded as its instruction rounds, so the result is the GPU's bit for bit.
fn exp2_fma(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: x + ROUND holds rint(x) in its low bits
    let [c0, c1, c2, c3] = tirx_ir::hir::EXP2_FMA;
    let x = x.clamp(-127.0, 128.0); // (max.NaN, min.NaN: NaN stays NaN)
    let r = x + ROUND;
    let f = x - (r - ROUND);
    let p = c3.mul_add(f, c2).mul_add(f, c1).mul_add(f, c0);
    // 2^n: n + 127 in the exponent field (n = -127: +0; n = 128: +inf)
    let scale = f32::from_bits((r.to_bits() << 23).wrapping_add(0x3f80_0000));
    let y = p * scale;
    if y.is_subnormal() {
        0.0 // (mul.ftz)
    } else {
        y
    }
}

fn math_f64(fun: MathFn, x: f64) -> f64 {
    match fun {
        MathFn::Sqrt => x.sqrt(),
        MathFn::Rsqrt => 1.0 / x.sqrt(),
        MathFn::Exp => x.exp(),
        MathFn::Exp2 => x.exp2(),
        MathFn::Log => x.ln(),
        MathFn::Log2 => x.log2(),
        MathFn::Abs => x.abs(),
        MathFn::Floor => x.floor(),
        MathFn::Ceil => x.ceil(),
        MathFn::Tanh => x.tanh(),
        MathFn::Sin => x.sin(),
        MathFn::Cos => x.cos(),
        MathFn::Erf => libm::erf(x),
        MathFn::Erfc => libm::erfc(x),
        MathFn::Log1p => x.ln_1p(),
        MathFn::Exp2Ftz | MathFn::Exp2Fma => x.exp2(),
    }
}

/// The element-wise op of a packed pair instruction, computed like the `__h*2` intrinsics.
pub(crate) fn packed(op: PackedOp, ty: DType, a: f64, b: f64, c: f64) -> f64 {
    use PackedOp::*;
    let (x, y) = (a as f32, b as f32);
    let r = match op {
        Add => (x + y) as f64,
        Sub => (x - y) as f64,
        Mul => (x * y) as f64,
        Max | Min if x.is_nan() || y.is_nan() => f64::NAN,
        Max => x.max(y) as f64,
        Min => x.min(y) as f64,
        Fma => return crate::round::rounded(RoundOp::Fma, RoundMode::Rn, ty, a, b, c),
    };
    round_to(ty, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(ty: DType, op: LBinOp, x: i64, y: i64) -> i64 {
        bin(op, ty, wrap_int(ty, x) as u64, wrap_int(ty, y) as u64).unwrap() as i64
    }

    #[test]
    fn c_and_python_division() {
        assert_eq!(i(DType::I32, LBinOp::Div, -7, 2), -3);
        assert_eq!(i(DType::I32, LBinOp::Rem, -7, 2), -1);
        assert_eq!(i(DType::I32, LBinOp::FloorDiv, -7, 2), -4);
        assert_eq!(i(DType::I32, LBinOp::FloorMod, -7, 2), 1);
        assert_eq!(i(DType::I32, LBinOp::FloorMod, 7, -2), -1);
        assert_eq!(bin(LBinOp::Div, DType::I32, 1, 0), Err(ArithFault::DivByZero));
    }

    #[test]
    fn wrap_and_shift() {
        assert_eq!(i(DType::I32, LBinOp::Add, i32::MAX as i64, 1), i32::MIN as i64);
        assert_eq!(i(DType::U8, LBinOp::Sub, 0, 1), 255);
        assert_eq!(i(DType::I32, LBinOp::Shl, 1, 31), i32::MIN as i64);
        assert_eq!(i(DType::I32, LBinOp::Shl, 1, 32), 0);
        assert_eq!(i(DType::I32, LBinOp::Shr, -8, 40), -1);
        assert_eq!(i(DType::U32, LBinOp::Shr, 0xffff_ffff, 4), 0x0fff_ffff);
        assert_eq!(i(DType::I8, LBinOp::Shl, 1, 8), 0);
    }

    #[test]
    fn int_to_narrow_float_rounds_through_f32() {
        // 2^24 + 2^16 + 1: f32 rounds to the bf16 tie 2^24 + 2^16, which rounds to even (2^24);
        // rounding the exact value once would give 2^24 + 2^17.
        let i = (1i64 << 24) + (1 << 16) + 1;
        assert_eq!(f64::from_bits(cast(DType::I32, DType::BF16, i as u64)), (1u64 << 24) as f64);
    }

    #[test]
    fn float_to_int_like_nvcc() {
        // Values observed on an H200 with `gpu/casts.cu`.
        let c = |to: DType, x: f64| cast(DType::F32, to, x.to_bits()) as i64;
        assert_eq!(c(DType::I8, 300.0), 44);
        assert_eq!(c(DType::U8, 300.0), 44);
        assert_eq!(c(DType::I8, -300.0), -44);
        assert_eq!(c(DType::U8, -300.0), 0);
        assert_eq!(c(DType::I16, 40000.0), -25536);
        assert_eq!(c(DType::U16, 70000.0), 4464);
        assert_eq!(c(DType::I8, 3e9), -1);
        assert_eq!(c(DType::U8, 3e9), 0);
        assert_eq!(c(DType::U16, 3e9), 24064);
        assert_eq!(c(DType::I8, -3e9), 0);
        assert_eq!(c(DType::U8, 1e20), 255);
        assert_eq!(c(DType::I32, 3e9), i32::MAX as i64);
        assert_eq!(c(DType::I32, -3e9), i32::MIN as i64);
        assert_eq!(c(DType::U32, -3e9), 0);
        assert_eq!(c(DType::U32, 3e9), 3_000_000_000);
        assert_eq!(c(DType::I64, 1e20), i64::MAX);
        assert_eq!(c(DType::I32, -2.7), -2);
        assert_eq!(c(DType::U8, f64::NAN), 0);
    }
}
