//! CUDA for the **rounded** family (`LExpr::Rounded`): one intrinsic per
//! operation and rounding mode, so that the rounding is the instruction's and
//! never a compiler's choice (`docs/numerics.md` §3–§4): `__fmaf_rn`,
//! `__fadd_rz`, `__fdiv_ru`, `__hfma` (f16 and bf16), `__float2half_rd`,
//! `__float2bfloat16_rz`, ... CUDA spells PTX's `rm`/`rp` as `_rd`/`_ru`.

use crate::CodegenError;
use tirx_ir::lir::{RoundMode, RoundOp};
use tirx_ir::DType;

/// The intrinsic computing `op` on `t` operands rounded in `mode`.
pub(crate) fn intrinsic(op: RoundOp, mode: RoundMode, t: DType) -> Result<String, CodegenError> {
    let suffix = match mode {
        RoundMode::Rn => "rn",
        RoundMode::Rz => "rz",
        RoundMode::Rm => "rd",
        RoundMode::Rp => "ru",
    };
    let base = match (op, t) {
        (RoundOp::Fma, DType::F16 | DType::BF16) if mode == RoundMode::Rn => return Ok("__hfma".into()),
        (RoundOp::Fma, DType::F32) => "__fmaf",
        (RoundOp::Add, DType::F32) => "__fadd",
        (RoundOp::Sub, DType::F32) => "__fsub",
        (RoundOp::Mul, DType::F32) => "__fmul",
        (RoundOp::Div, DType::F32) => "__fdiv",
        (RoundOp::Cvt(DType::F16), DType::F32) => "__float2half",
        (RoundOp::Cvt(DType::BF16), DType::F32) => "__float2bfloat16",
        _ => {
            return Err(CodegenError::InvalidLir(format!("no intrinsic for {} on {t}", op.spelled(mode))));
        }
    };
    Ok(format!("{base}_{suffix}"))
}
