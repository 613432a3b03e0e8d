//! Element types.

use serde::Serialize;
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
    F8E4M3,
    F8E5M2,
}

impl DType {
    pub const ALL: [DType; 15] = [
        DType::Bool,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::F8E4M3,
        DType::F8E5M2,
    ];

    /// The TVMScript spelling (`"float16"`).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
        }
    }

    /// Other spellings [`DType::from_name`] accepts, and the dtype each names.
    pub const ALIASES: [(&'static str, DType); 4] = [
        ("float8_e4m3", DType::F8E4M3),
        ("e4m3_float8", DType::F8E4M3),
        ("float8_e4m3fnuz", DType::F8E4M3),
        ("e5m2_float8", DType::F8E5M2),
    ];

    /// Accepts the TVMScript names plus the common aliases ([`DType::ALIASES`]).
    pub fn from_name(s: &str) -> Option<DType> {
        let canonical = DType::ALL.iter().map(|&d| (d.name(), d));
        canonical.chain(DType::ALIASES).find(|(n, _)| *n == s).map(|(_, d)| d)
    }

    pub fn bits(self) -> u32 {
        match self {
            DType::Bool => 8,
            DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 8,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 16,
            DType::I32 | DType::U32 | DType::F32 => 32,
            DType::I64 | DType::U64 | DType::F64 => 64,
        }
    }

    pub fn bytes(self) -> u32 {
        self.bits() / 8
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64 | DType::F8E4M3 | DType::F8E5M2)
    }

    pub fn is_int(self) -> bool {
        matches!(
            self,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 | DType::U64
        )
    }

    /// `(min, max)` of an integer dtype; `None` for bool and the floats. Values are `i64`
    /// throughout (constants, scalar arguments, the simulator's slots), so `uint64`'s range
    /// here is `0..=i64::MAX`: larger constants are refused; its arithmetic is still 64-bit
    /// unsigned (the simulator keeps the bit pattern).
    pub fn int_range(self) -> Option<(i64, i64)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::I64 => (i64::MIN, i64::MAX),
            DType::U8 => (0, u8::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::U64 => (0, i64::MAX),
            _ => return None,
        })
    }

    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64) || self.is_float()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
