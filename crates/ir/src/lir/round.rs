//! The **rounded** family: arithmetic whose rounding the LIR states
//! (`LExpr::Rounded`): the fused multiply-add `fma.rn(a, b, c)` (one rounding of
//! the exact `a·b + c`), and `f32` add/sub/mul/div, fma and `f32 → f16/bf16`
//! conversions in a directed rounding mode (`add.rz(a, b)`,
//! `cvt.rp<bfloat16>(x)`). Plain `Bin`/`Cast` round to nearest; this family
//! exists for what they cannot say. Semantics: `docs/numerics.md` §3–§5.
//!
//! Typing: arithmetic operands have one float type, which is the result's;
//! a conversion takes an `f32` operand and gives its target type. Only
//! operations the GPU has as one instruction are valid ([`rounded_supported`]).
//! [`round_value`] is the rounding of a value to a type, which the simulator
//! and the printers of literals share.

use super::check::Checker;
use super::LExpr;
use crate::dtype::DType;
use crate::target::Arch;
use serde::Serialize;

pub use crate::vocab::RoundMode;

/// The operation of a rounded expression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RoundOp {
    Add,
    Sub,
    Mul,
    Div,
    /// `a·b + c`, rounded once.
    Fma,
    /// Conversion of an `f32` to the given type.
    Cvt(DType),
}

impl RoundOp {
    pub fn arity(self) -> usize {
        match self {
            RoundOp::Cvt(_) => 1,
            RoundOp::Fma => 3,
            _ => 2,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RoundOp::Add => "add",
            RoundOp::Sub => "sub",
            RoundOp::Mul => "mul",
            RoundOp::Div => "div",
            RoundOp::Fma => "fma",
            RoundOp::Cvt(_) => "cvt",
        }
    }

    /// The instruction in the pseudo-code: `fma.rn`, `cvt.rz<float16>`.
    pub fn spelled(self, mode: RoundMode) -> String {
        match self {
            RoundOp::Cvt(t) => format!("cvt.{mode}<{t}>"),
            op => format!("{}.{mode}", op.name()),
        }
    }
}

/// Whether the GPU has `op` on `t` operands with rounding `mode` as one
/// instruction: f32 add/sub/mul/div/fma and f32 → f16/bf16 conversions in
/// every mode, f16/bf16 fma to nearest (`docs/numerics.md` §4).
pub fn rounded_supported(op: RoundOp, t: DType, mode: RoundMode) -> Result<(), String> {
    let ok = match op {
        RoundOp::Cvt(to) => t == DType::F32 && matches!(to, DType::F16 | DType::BF16),
        RoundOp::Fma => t == DType::F32 || (matches!(t, DType::F16 | DType::BF16) && mode == RoundMode::Rn),
        RoundOp::Add | RoundOp::Sub | RoundOp::Mul | RoundOp::Div => t == DType::F32,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("no {} instruction on {t} operands", op.spelled(mode)))
    }
}

/// The oldest target with the instruction: bf16 fma is `fma.rn.bf16` from sm_80
/// (older CUDA headers emulate it with two roundings); the rest exist everywhere.
pub fn rounded_min_arch(op: RoundOp, t: DType) -> Arch {
    if op == RoundOp::Fma && t == DType::BF16 {
        Arch::SM_80
    } else {
        Arch::MIN
    }
}

/// A binary float format: significand bits (with the implicit one), the
/// exponent of its smallest normal, its largest finite value.
struct Format {
    p: i32,
    emin: i32,
    max: f64,
}

fn format(t: DType) -> Option<Format> {
    Some(match t {
        DType::F32 => Format { p: 24, emin: -126, max: f32::MAX as f64 },
        DType::F16 => Format { p: 11, emin: -14, max: 65504.0 },
        DType::BF16 => Format { p: 8, emin: -126, max: (2.0 - pow2(-7)) * pow2(127) },
        _ => return None,
    })
}

/// `2^k` for `k` in the normal range of f64.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `floor(log2(a))` for a finite `a > 0` (f64 subnormals included).
fn exponent(a: f64) -> i32 {
    let bits = a.to_bits();
    let field = (bits >> 52) as i32;
    if field == 0 {
        -1074 + 63 - (bits & ((1 << 52) - 1)).leading_zeros() as i32
    } else {
        field - 1023
    }
}

/// `x` rounded to type `t` (f32, f16 or bf16; any other type: unchanged) in
/// `mode`, exactly from any f64, with IEEE overflow: to ±∞ when rounding away
/// from zero, else to ±max. A literal `Float(v, t)` is `round_value(t, v, Rn)`.
pub fn round_value(t: DType, x: f64, mode: RoundMode) -> f64 {
    let Some(f) = format(t) else { return x };
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let a = x.abs();
    // The grid spacing at `a` (fixed below the smallest normal: subnormals).
    let quantum = pow2(exponent(a).max(f.emin) - (f.p - 1));
    let m = a / quantum;
    let toward_zero = match mode {
        RoundMode::Rn => false,
        RoundMode::Rz => true,
        RoundMode::Rm => x > 0.0,
        RoundMode::Rp => x < 0.0,
    };
    let r = match mode {
        RoundMode::Rn => m.round_ties_even(),
        _ if toward_zero => m.trunc(),
        _ => m.ceil(),
    } * quantum;
    let r = if r <= f.max {
        r
    } else if toward_zero {
        f.max
    } else {
        f64::INFINITY
    };
    r.copysign(x)
}

impl Checker<'_> {
    /// Types `op.mode(args)`: equal float operands (an f32 one for a conversion), a supported instruction.
    pub(super) fn rounded(&self, op: RoundOp, mode: RoundMode, args: &[LExpr]) -> Result<DType, String> {
        if args.len() != op.arity() {
            return Err(format!("{} takes {} operands, got {}", op.name(), op.arity(), args.len()));
        }
        let mut types = Vec::with_capacity(args.len());
        for a in args {
            types.push(self.expr(a)?);
        }
        let t = types[0];
        if types.iter().any(|&u| u != t) {
            return Err(format!("{} of {types:?}; operands must have equal types", op.spelled(mode)));
        }
        rounded_supported(op, t, mode)?;
        Ok(match op {
            RoundOp::Cvt(to) => to,
            _ => t,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RoundMode::*;

    #[test]
    fn directed_conversions() {
        let third = 1.0 / 3.0;
        assert_eq!(round_value(DType::F16, third, Rz), 0.333_251_953_125);
        assert_eq!(round_value(DType::F16, third, Rp), 0.333_496_093_75);
        assert_eq!(round_value(DType::F16, -third, Rm), -0.333_496_093_75);
        assert_eq!(round_value(DType::F16, -third, Rp), -0.333_251_953_125);
        // Overflow: away from zero to infinity, toward zero to the largest finite value.
        assert_eq!(round_value(DType::F16, 70000.0, Rz), 65504.0);
        assert_eq!(round_value(DType::F16, 70000.0, Rp), f64::INFINITY);
        assert_eq!(round_value(DType::F16, -70000.0, Rp), -65504.0);
        assert_eq!(round_value(DType::F16, 65519.0, Rn), 65504.0);
        assert_eq!(round_value(DType::F16, 65520.0, Rn), f64::INFINITY);
        // Underflow keeps the sign; the smallest subnormal is reached from above by rp.
        assert_eq!(round_value(DType::F16, 1e-10, Rp), pow2(-24));
        assert_eq!(round_value(DType::F16, -1e-10, Rz).to_bits(), (-0.0f64).to_bits());
        assert_eq!(round_value(DType::BF16, f32::MAX as f64, Rz), (2.0 - pow2(-7)) * pow2(127));
        assert_eq!(round_value(DType::BF16, f32::MAX as f64, Rn), f64::INFINITY);
    }

    #[test]
    fn supported_instructions() {
        for m in RoundMode::ALL {
            assert_eq!(RoundMode::from_name(m.name()), Some(m));
            for op in [RoundOp::Add, RoundOp::Sub, RoundOp::Mul, RoundOp::Div, RoundOp::Fma] {
                assert!(rounded_supported(op, DType::F32, m).is_ok());
                assert!(rounded_supported(op, DType::F64, m).is_err());
            }
            assert!(rounded_supported(RoundOp::Cvt(DType::BF16), DType::F32, m).is_ok());
            assert!(rounded_supported(RoundOp::Cvt(DType::F32), DType::F16, m).is_err());
        }
        assert!(rounded_supported(RoundOp::Fma, DType::F16, RoundMode::Rn).is_ok());
        let e = rounded_supported(RoundOp::Fma, DType::BF16, RoundMode::Rz).unwrap_err();
        assert_eq!(e, "no fma.rz instruction on bfloat16 operands");
        assert!(rounded_supported(RoundOp::Add, DType::F16, RoundMode::Rn).is_err());
        assert_eq!(RoundMode::from_name("rq"), None);
    }
}
