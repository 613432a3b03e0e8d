//! Small `__device__ __forceinline__` helpers, each emitted once and only when used.
//! The helpers of an LIR instruction family are written by its module (`matrix`, ...).

/// The C operand type of a floor helper (narrower integers promote to `int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Num {
    Int,
    LongLong,
    Float,
    Double,
}

impl Num {
    fn c(self) -> &'static str {
        match self {
            Num::Int => "int",
            Num::LongLong => "long long",
            Num::Float => "float",
            Num::Double => "double",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Helper {
    /// Python `//` on signed integers.
    FloorDiv { ty: Num },
    /// Python `%` on signed integers and floats.
    FloorMod { ty: Num },
    /// `ldmatrix` (store = false) / `stmatrix`; loads sort first.
    Matrix { store: bool, num: u8, trans: bool },
    /// `mma.sync` of one shape and multiplicand types.
    Mma { shape: tirx_ir::lir::MmaShape, a: tirx_ir::lir::MmaIn, b: tirx_ir::lir::MmaIn },
    /// `cp.async` of `bytes`, with a source size (`fill`) or without, with an L2 prefetch size or without.
    CpAsync { bytes: u32, fill: bool, prefetch: Option<u32> },
    /// An mbarrier operation.
    Mbar(crate::asynch::MbarHelper),
    /// A TMA tensor copy of a `rank`-D box: a load (with a multicast mask or not) or a store,
    /// with an L2 cache policy or not.
    Tma { rank: u8, store: bool, multicast: bool, cache: bool, reduce: bool },
    /// A bulk copy of shared memory into a peer CTA of the cluster (`mapa` + `cp.async.bulk`).
    BulkToPeer,
    /// `max`/`min` of floats propagating NaN (`torch.maximum`); `ty` is `Float` or `Double`.
    MinMax { max: bool, ty: Num },
    /// The wgmma shared-memory descriptor builder.
    WgmmaDesc,
    /// The register fence of wgmma operands (`word`: a 32-bit word of packed elements).
    WgmmaFenceOperand { word: bool },
    /// A wgmma register defined anew at a fence: its old value dead (`word`: as above).
    WgmmaFreshOperand { word: bool },
    /// `wgmma.mma_async` of one form.
    Wgmma(crate::wgmma::WgmmaHelper),
    /// A bf16 pair widened to a float pair by bit placement.
    Bf16x2ToFloat2,
    /// `2^x` with subnormal results flushed to zero (`ex2.approx.ftz.f32`).
    Exp2Ftz,
}

impl Helper {
    pub fn name(self) -> String {
        match self {
            Helper::FloorDiv { .. } => "tirx_floordiv".into(),
            Helper::FloorMod { .. } => "tirx_floormod".into(),
            Helper::Matrix { store, num, trans } => crate::matrix::helper_name(store, num, trans),
            Helper::Mma { shape, a, b } => crate::matrix::mma_name(shape, a, b),
            Helper::CpAsync { bytes, fill, prefetch } => crate::asynch::cp_async_name(bytes, fill, prefetch),
            Helper::Mbar(h) => crate::asynch::mbar_name(h).into(),
            Helper::Tma { rank, store, multicast, cache, reduce } => {
                crate::asynch::tma_name(rank, store, multicast, cache, reduce)
            }
            Helper::BulkToPeer => "tirx_bulk_copy_to_peer".into(),
            Helper::MinMax { max, .. } => if max { "tirx_max" } else { "tirx_min" }.into(),
            Helper::WgmmaDesc => "tirx_wgmma_desc".into(),
            Helper::WgmmaFenceOperand { .. } => "tirx_wgmma_fence_operand".into(),
            Helper::WgmmaFreshOperand { .. } => "tirx_wgmma_fresh_operand".into(),
            Helper::Wgmma(h) => crate::wgmma::wgmma_name(h),
            Helper::Bf16x2ToFloat2 => "tirx_bf16x2_to_float2".into(),
            Helper::Exp2Ftz => "tirx_exp2_ftz".into(),
        }
    }

    /// The helper's definition.
    pub fn source(self) -> String {
        match self {
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
            Helper::Matrix { store, num, trans } => crate::matrix::helper_source(store, num, trans),
            Helper::Mma { shape, a, b } => crate::matrix::mma_source(shape, a, b),
            Helper::CpAsync { bytes, fill, prefetch } => crate::asynch::cp_async_source(bytes, fill, prefetch),
            Helper::Mbar(h) => crate::asynch::mbar_source(h),
            Helper::Tma { rank, store, multicast, cache, reduce } => {
                crate::asynch::tma_source(rank, store, multicast, cache, reduce)
            }
            Helper::BulkToPeer => crate::asynch::bulk_to_peer_source(),
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
            Helper::WgmmaDesc => crate::wgmma::desc_source(),
            Helper::WgmmaFenceOperand { word } => crate::wgmma::fence_operand_source(word),
            Helper::WgmmaFreshOperand { word } => crate::wgmma::fresh_operand_source(word),
            Helper::Wgmma(h) => crate::wgmma::wgmma_source(h),
        }
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
