//! Each helper's definition (`Helper` names them): an LIR instruction family's written by its
//! module, the expressions' (Python's floor division and remainder, NaN-propagating max and min,
//! bf16 pairs, `ex2.approx.ftz`) here. The translation unit prints the ones its kernel calls.

use crate::helpers::{Helper, Num};
use crate::{asynch, matrix, wgmma};

/// The definition of `h`.
pub fn source(h: Helper) -> String {
    match h {
        Helper::FloorDiv { ty } => format!(
            "// Python-style a // b: rounds toward negative infinity.\n\
             __device__ __forceinline__ {t} tirx_floordiv({t} a, {t} b) {{\n    \
             {t} q = a / b;\n    \
             return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;\n}}\n",
            t = ty.c()
        ),
        Helper::FloorMod { ty } => {
            let (rem, zero) = match ty {
                Num::Int | Num::LongLong => ("a % b", "0"),
                Num::Float => ("fmodf(a, b)", "0.0f"),
                Num::Double => ("fmod(a, b)", "0.0"),
            };
            format!(
                "// Python-style a % b: the result has the sign of b.\n\
                 __device__ __forceinline__ {t} tirx_floormod({t} a, {t} b) {{\n    \
                 {t} r = {rem};\n    \
                 return (r != {zero} && (r < {zero}) != (b < {zero})) ? r + b : r;\n}}\n",
                t = ty.c()
            )
        }
        Helper::Matrix { store, num, trans } => matrix::helper_source(store, num, trans),
        Helper::Mma { shape, a, b } => matrix::mma_source(shape, a, b),
        Helper::CpAsync { bytes, fill, prefetch } => asynch::cp_async_source(bytes, fill, prefetch),
        Helper::Mbar(h) => asynch::mbar_source(h),
        Helper::Tma { rank, store, multicast, cache, reduce } => {
            asynch::tma_source(rank, store, multicast, cache, reduce)
        }
        Helper::BulkToPeer => asynch::bulk_to_peer_source(),
        Helper::GridGroupSync => asynch::grid_group_sync_source(),
        Helper::MinMax { max, ty } => min_max_source(max, ty),
        Helper::Bf16x2ToFloat2 => {
            "// A bf16 pair to floats, exactly: each is the top half of its float. Two instructions\n\
             // per pair (a shift, a mask), where `__bfloat1622float2` moves the high half down first.\n\
             __device__ __forceinline__ float2 tirx_bf16x2_to_float2(__nv_bfloat162 v) {\n    \
             const unsigned u = *reinterpret_cast<const unsigned*>(&v);\n    \
             return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));\n}\n"
                .into()
        }
        Helper::Exp2Ftz => "// 2^x, subnormal results flushed to zero: the one MUFU.EX2 (exp2f adds three\n\
             // instructions per value to scale subnormal results).\n\
             __device__ __forceinline__ float tirx_exp2_ftz(float x) {\n    \
             float y;\n    \
             asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n    \
             return y;\n}\n"
            .into(),
        Helper::Exp2Fma => exp2_fma_source(),
        Helper::WgmmaDesc => wgmma::desc_source(),
        Helper::WgmmaFenceOperand { word } => wgmma::fence_operand_source(word),
        Helper::WgmmaFreshOperand { word } => wgmma::fresh_operand_source(word),
        Helper::Wgmma(h) => wgmma::wgmma_source(h),
    }
}

/// `tirx_max`/`tirx_min` of `float` or `double`: NaN if either operand is NaN
/// (`torch.maximum`, IEEE 754-2019 `maximum`), else `fmaxf`/`fminf`. `float`
/// uses PTX's `max.NaN` where the target has it (sm_80+); elsewhere, and for
/// `double` (PTX has no `max.NaN.f64`), a NaN operand gives `a + b`, a NaN.
fn min_max_source(max: bool, ty: Num) -> String {
    let (name, word) = if max { ("tirx_max", "max") } else { ("tirx_min", "min") };
    let t = ty.c();
    let libm = match (max, ty) {
        (true, Num::Float) => "fmaxf",
        (false, Num::Float) => "fminf",
        (true, _) => "fmax",
        (false, _) => "fmin",
    };
    let fallback = format!("return (a != a || b != b) ? a + b : {libm}(a, b);");
    let body = if ty == Num::Float {
        format!(
            "#if __CUDA_ARCH__ >= 800\n    float d;\n    asm(\"{word}.NaN.f32 %0, %1, %2;\" : \"=f\"(d) : \"f\"(a), \"f\"(b));\n    \
             return d;\n#else\n    {fallback}\n#endif"
        )
    } else {
        fallback
    };
    format!(
        "// {word} propagating NaN, as torch.{word}imum does.\n\
         __device__ __forceinline__ {t} {name}({t} a, {t} b) {{\n{indent}{body}\n}}\n",
        indent = if ty == Num::Float { "" } else { "    " }
    )
}

/// `tirx_exp2_fma` (`MathFn::Exp2Fma`; the simulator's `exp2_fma` takes the same steps): no
/// MUFU instruction, each step an explicitly rounded one so that nothing is reassociated.
fn exp2_fma_source() -> String {
    let [c0, c1, c2, c3] = tirx_ir::hir::EXP2_FMA;
    format!(
        "// 2^x on the FMA pipe (FlashAttention-4's emulation), not MUFU: n = rint(x) by adding\n\
         // 1.5 * 2^23, f = x - n in [-0.5, 0.5], 2^f by a minimax cubic (7.5e-5 relative), times 2^n\n\
         // made in the exponent bits (x clamped to [-127, 128]: 2^n of +0 to +inf), flushed below 2^-126.\n\
         __device__ __forceinline__ float tirx_exp2_fma(float x) {{\n    \
         asm(\"max.NaN.f32 %0, %0, 0fC2FE0000;\" : \"+f\"(x));  // -127, NaN kept\n    \
         asm(\"min.NaN.f32 %0, %0, 0f43000000;\" : \"+f\"(x));  // 128\n    \
         const float r = __fadd_rn(x, 12582912.0f);\n    \
         const float f = __fsub_rn(x, __fsub_rn(r, 12582912.0f));\n    \
         const float p = __fmaf_rn(__fmaf_rn(__fmaf_rn({c3:?}f, f, {c2:?}f), f, {c1:?}f), f, {c0:?}f);\n    \
         const float scale = __uint_as_float((__float_as_uint(r) << 23) + 0x3f800000u);\n    \
         float y;\n    \
         asm(\"mul.ftz.f32 %0, %1, %2;\" : \"=f\"(y) : \"f\"(p), \"f\"(scale));\n    \
         return y;\n}}\n"
    )
}
