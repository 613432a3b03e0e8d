//! C spellings of LIR types and literals, and the headers they need.

use crate::CodegenError;
use tirx_ir::lir::round::round_value;
use tirx_ir::lir::RoundMode;
use tirx_ir::DType;

/// A CUDA header the generated source includes only when a type needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Header {
    Fp16,
    Bf16,
    Fp8,
}

impl Header {
    pub fn file(self) -> &'static str {
        match self {
            Header::Fp16 => "cuda_fp16.h",
            Header::Bf16 => "cuda_bf16.h",
            Header::Fp8 => "cuda_fp8.h",
        }
    }
}

/// The C type of one element.
pub fn c_type(t: DType) -> &'static str {
    match t {
        DType::Bool => "bool",
        DType::I8 => "signed char",
        DType::I16 => "short",
        DType::I32 => "int",
        DType::I64 => "long long",
        DType::U8 => "unsigned char",
        DType::U16 => "unsigned short",
        DType::U32 => "unsigned int",
        DType::U64 => "unsigned long long",
        DType::F16 => "__half",
        DType::BF16 => "__nv_bfloat16",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::F8E4M3 => "__nv_fp8_e4m3",
        DType::F8E5M2 => "__nv_fp8_e5m2",
    }
}

pub fn header_of(t: DType) -> Option<Header> {
    match t {
        DType::F16 => Some(Header::Fp16),
        DType::BF16 => Some(Header::Bf16),
        DType::F8E4M3 | DType::F8E5M2 => Some(Header::Fp8),
        _ => None,
    }
}

/// 16- and 8-bit floats: CUDA types without native C arithmetic semantics, so
/// casts to and from them go through `float`.
pub fn is_narrow_float(t: DType) -> bool {
    matches!(t, DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2)
}

/// 8-bit floats are storage types: every operation on them computes in `float`.
pub fn is_fp8(t: DType) -> bool {
    matches!(t, DType::F8E4M3 | DType::F8E5M2)
}

/// The unsigned vector type that moves `bits` in one access (`uint4` = 128 bits).
pub fn vector_type(bits: u32) -> Option<&'static str> {
    Some(match bits {
        128 => "uint4",
        64 => "uint2",
        32 => "unsigned int",
        16 => "unsigned short",
        8 => "unsigned char",
        _ => return None,
    })
}

/// The packed-pair type of a 16-bit float (`__half2`).
pub fn pair_type(t: DType) -> Option<&'static str> {
    match t {
        DType::F16 => Some("__half2"),
        DType::BF16 => Some("__nv_bfloat162"),
        DType::F32 => Some("float2"),
        DType::F8E4M3 => Some("__nv_fp8x2_e4m3"),
        DType::F8E5M2 => Some("__nv_fp8x2_e5m2"),
        _ => None,
    }
}

/// An integer literal of type `t` (`5`, `5LL`, `5u`); negative values carry
/// a leading minus, so callers treat them as unary expressions.
pub fn int_literal(v: i64, t: DType) -> Result<String, CodegenError> {
    Ok(match t {
        DType::I64 if v == i64::MIN => "(-9223372036854775807LL - 1)".to_string(),
        DType::I64 => format!("{v}LL"),
        DType::I32 if v == i64::from(i32::MIN) => "(-2147483647 - 1)".to_string(),
        DType::U32 => format!("{v}u"),
        DType::U64 => format!("{v}ull"),
        DType::Bool => (if v != 0 { "true" } else { "false" }).to_string(),
        t if t.is_int() => v.to_string(),
        t if t.is_float() => float_literal(v as f64, t)?,
        _ => return Err(CodegenError::Unsupported(format!("integer literal {v} of type {t}"))),
    })
}

/// A float literal of type `t` that round-trips exactly (`1.5f`, `__half(1.5f)`).
pub fn float_literal(v: f64, t: DType) -> Result<String, CodegenError> {
    let f32_lit = |x: f32| -> String {
        if x.is_nan() {
            "__int_as_float(0x7fffffff)".to_string()
        } else if x.is_infinite() {
            let bits = if x > 0.0 { "0x7f800000" } else { "0xff800000" };
            format!("__int_as_float({bits})")
        } else {
            format!("{x:?}f")
        }
    };
    Ok(match t {
        DType::F32 => f32_lit(v as f32),
        DType::F64 => {
            if v.is_nan() {
                "__longlong_as_double(0x7ff8000000000000LL)".to_string()
            } else if v.is_infinite() {
                let bits = if v > 0.0 { "0x7ff0000000000000LL" } else { "(long long)0xfff0000000000000ULL" };
                format!("__longlong_as_double({bits})")
            } else {
                format!("{v:?}")
            }
        }
        // The value of the type, exact as an f32: `__half(0.1f)` would round twice.
        t if is_narrow_float(t) => format!("{}({})", c_type(t), f32_lit(round_value(t, v, RoundMode::Rn) as f32)),
        _ => return Err(CodegenError::Unsupported(format!("float literal {v} of type {t}"))),
    })
}
