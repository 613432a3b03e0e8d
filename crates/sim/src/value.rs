//! Element values: conversions between the narrow float formats and `f32`, and
//! helpers that build / read little-endian parameter buffers.
//!
//! * f16 / bf16 are decoded and encoded (values already of the type) through the
//!   `half` crate; rounding to them is `tirx_ir`'s `round_value` (exact from any f64).
//! * fp8 (`float8_e4m3fn`, `float8_e5m2`) are written here: round-to-nearest-even,
//!   and *saturating* like CUDA's `__nv_cvt_float_to_fp8(x, __NV_SATFINITE, ..)`
//!   (the `__nv_fp8_*` constructors): a finite overflow or an infinity becomes
//!   ±max-normal (448 for e4m3fn, 57344 for e5m2); NaN stays NaN. Decoding follows
//!   the OCP FP8 spec / ml_dtypes bit patterns (e4m3fn has no infinity; `S.1111.111`
//!   is NaN; e5m2 is IEEE-like with infinities).
//!
//! Inside the simulator every value lives in a 64-bit slot: integers (and bools)
//! as `i64` normalised to their declared width, floats as the `f64` holding the
//! exactly representable value of their type ([`decode`] / [`encode`]).

use half::{bf16, f16};
use tirx_ir::lir::round::round_value;
use tirx_ir::lir::RoundMode;
use tirx_ir::DType;

pub fn f32_to_f16_bits(x: f32) -> u16 {
    f16::from_f32(x).to_bits()
}
pub fn f16_bits_to_f32(b: u16) -> f32 {
    f16::from_bits(b).to_f32()
}
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    bf16::from_f32(x).to_bits()
}
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    bf16::from_bits(b).to_f32()
}

/// Geometry of an 8-bit float format.
#[derive(Clone, Copy)]
struct Fp8 {
    mant_bits: i32,
    bias: i32,
    /// Largest finite value.
    max: f64,
    /// e5m2 has IEEE infinities (exponent field all ones); e4m3fn does not.
    has_inf: bool,
}

const E4M3: Fp8 = Fp8 { mant_bits: 3, bias: 7, max: 448.0, has_inf: false };
const E5M2: Fp8 = Fp8 { mant_bits: 2, bias: 15, max: 57344.0, has_inf: true };

impl Fp8 {
    fn nan(self) -> u8 {
        if self.has_inf {
            0x7e
        } else {
            0x7f
        }
    }

    /// Round `x` (any f64) to this format, RNE, saturating finite overflow and ±inf.
    fn encode(self, x: f64) -> u8 {
        if x.is_nan() {
            return self.nan();
        }
        let sign = if x.is_sign_negative() { 0x80u8 } else { 0 };
        let a = x.abs();
        let min_normal_exp = 1 - self.bias;
        let exp = if a == 0.0 { min_normal_exp } else { exponent_of(a).max(min_normal_exp) };
        let quantum = pow2(exp - self.mant_bits);
        let mut v = (a / quantum).round_ties_even() * quantum;
        if v > self.max {
            v = self.max;
        }
        sign | self.pack(v)
    }

    /// Bits (without sign) of a non-negative value exactly representable in the format.
    fn pack(self, v: f64) -> u8 {
        let min_normal_exp = 1 - self.bias;
        if v < pow2(min_normal_exp) {
            return (v / pow2(min_normal_exp - self.mant_bits)) as u8;
        }
        let e = exponent_of(v);
        let mant = (v / pow2(e - self.mant_bits)) as i32 - (1 << self.mant_bits);
        (((e + self.bias) << self.mant_bits) | mant) as u8
    }

    fn decode(self, b: u8) -> f64 {
        let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
        let e_field = ((b & 0x7f) >> self.mant_bits) as i32;
        let mant = (b & ((1 << self.mant_bits) - 1)) as i32;
        let e_max_field = (1 << (7 - self.mant_bits)) - 1;
        if self.has_inf && e_field == e_max_field {
            return if mant == 0 { sign * f64::INFINITY } else { f64::NAN };
        }
        if !self.has_inf && e_field == e_max_field && mant == (1 << self.mant_bits) - 1 {
            return f64::NAN;
        }
        let v = if e_field == 0 {
            mant as f64 * pow2(1 - self.bias - self.mant_bits)
        } else {
            (mant + (1 << self.mant_bits)) as f64 * pow2(e_field - self.bias - self.mant_bits)
        };
        sign * v
    }
}

fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// floor(log2(a)) for a finite positive f64.
fn exponent_of(a: f64) -> i32 {
    let bits = a.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        // f64 subnormal: far below any fp8 range; scale up and retry.
        exponent_of(a * pow2(64)) - 64
    } else {
        e - 1023
    }
}

pub fn f32_to_e4m3(x: f32) -> u8 {
    E4M3.encode(x as f64)
}
pub fn e4m3_to_f32(b: u8) -> f32 {
    E4M3.decode(b) as f32
}
pub fn f32_to_e5m2(x: f32) -> u8 {
    E5M2.encode(x as f64)
}
pub fn e5m2_to_f32(b: u8) -> f32 {
    E5M2.decode(b) as f32
}

/// Rounds an `f64` to the nearest value of float type `t` (RNE; fp8 saturating),
/// returned as the exact `f64` of that value.
pub fn round_to(t: DType, x: f64) -> f64 {
    match t {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        // Not `half`'s `from_f64`: it ignores the low 32 bits of the f64 (and with
        // F16C rounds through f32), so results that are not f32 values round wrongly.
        DType::F16 | DType::BF16 => round_value(t, x, RoundMode::Rn),
        DType::F8E4M3 => E4M3.decode(E4M3.encode(x)),
        DType::F8E5M2 => E5M2.decode(E5M2.encode(x)),
        _ => x,
    }
}

/// The slot of a float constant of type `t`: `x` rounded to `t`, and a NaN as the bits the
/// CUDA literal has (`tirx_cuda::ctype::float_literal`: `__int_as_float(0x7fffffff)`, narrowed
/// to `0x7fff` in 16 bits; `0x7ff8000000000000` in f64), so that a kernel storing it writes
/// what the GPU writes.
pub fn float_const(t: DType, x: f64) -> u64 {
    if x.is_nan() && t != DType::F64 {
        // Encodes (`encode`) as f32 0x7fffffff, f16 / bf16 0x7fff.
        return 0x7fff_ffff_e000_0000;
    }
    round_to(t, x).to_bits()
}

/// Normalises an integer to the width and signedness of `t` (wrap-around).
pub fn wrap_int(t: DType, v: i64) -> i64 {
    match t {
        DType::Bool => (v != 0) as i64,
        DType::I8 => v as i8 as i64,
        DType::I16 => v as i16 as i64,
        DType::I32 => v as i32 as i64,
        DType::U8 => v as u8 as i64,
        DType::U16 => v as u16 as i64,
        DType::U32 => v as u32 as i64,
        _ => v,
    }
}

/// `a + b` of type `t` (value slots; a TMA reduce-add's element): floats rounded once to `t`,
/// integers wrapping.
pub fn add_elem(t: DType, a: u64, b: u64) -> u64 {
    if t.is_float() {
        round_to(t, f64::from_bits(a) + f64::from_bits(b)).to_bits()
    } else {
        wrap_int(t, (a as i64).wrapping_add(b as i64)) as u64
    }
}

/// Decodes one element (little-endian `b`, at least `t.bytes()` long: panics if
/// shorter) into a value slot.
pub fn decode(t: DType, b: &[u8]) -> u64 {
    let int = |v: i64| v as u64;
    let flt = |v: f64| v.to_bits();
    match t {
        DType::Bool => int((b[0] != 0) as i64),
        DType::I8 => int(b[0] as i8 as i64),
        DType::U8 => int(b[0] as i64),
        DType::I16 => int(i16::from_le_bytes([b[0], b[1]]) as i64),
        DType::U16 => int(u16::from_le_bytes([b[0], b[1]]) as i64),
        DType::I32 => int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
        DType::U32 => int(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64),
        DType::I64 | DType::U64 => int(i64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]))),
        DType::F16 => flt(f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()),
        DType::BF16 => flt(bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f64()),
        DType::F32 => flt(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        DType::F64 => flt(f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]))),
        DType::F8E4M3 => flt(E4M3.decode(b[0])),
        DType::F8E5M2 => flt(E5M2.decode(b[0])),
    }
}

/// Encodes a value slot of type `t` into `out` (at least `t.bytes()` long: panics
/// if shorter), little-endian.
/// Float slots hold values already rounded to `t`, so this is exact.
pub fn encode(t: DType, v: u64, out: &mut [u8]) {
    let i = v as i64;
    let f = f64::from_bits(v);
    match t {
        DType::Bool | DType::I8 | DType::U8 => out[0] = i as u8,
        DType::I16 | DType::U16 => out[..2].copy_from_slice(&(i as u16).to_le_bytes()),
        DType::I32 | DType::U32 => out[..4].copy_from_slice(&(i as u32).to_le_bytes()),
        DType::I64 | DType::U64 => out[..8].copy_from_slice(&i.to_le_bytes()),
        DType::F16 => out[..2].copy_from_slice(&f16::from_f64(f).to_bits().to_le_bytes()),
        DType::BF16 => out[..2].copy_from_slice(&bf16::from_f64(f).to_bits().to_le_bytes()),
        DType::F32 => out[..4].copy_from_slice(&(f as f32).to_le_bytes()),
        DType::F64 => out[..8].copy_from_slice(&f.to_le_bytes()),
        DType::F8E4M3 => out[0] = E4M3.encode(f),
        DType::F8E5M2 => out[0] = E5M2.encode(f),
    }
}

/// A host element type that can fill or read a parameter buffer.
pub trait Element: Copy {
    fn to_slot(self, t: DType) -> u64;
    fn from_slot(v: u64, t: DType) -> Self;
}

impl Element for f64 {
    fn to_slot(self, t: DType) -> u64 {
        if t.is_float() {
            round_to(t, self).to_bits()
        } else {
            wrap_int(t, self as i64) as u64
        }
    }
    fn from_slot(v: u64, t: DType) -> f64 {
        if t.is_float() {
            f64::from_bits(v)
        } else {
            v as i64 as f64
        }
    }
}

impl Element for f32 {
    fn to_slot(self, t: DType) -> u64 {
        (self as f64).to_slot(t)
    }
    fn from_slot(v: u64, t: DType) -> f32 {
        f64::from_slot(v, t) as f32
    }
}

impl Element for i64 {
    fn to_slot(self, t: DType) -> u64 {
        if t.is_float() {
            round_to(t, self as f64).to_bits()
        } else {
            wrap_int(t, self) as u64
        }
    }
    fn from_slot(v: u64, t: DType) -> i64 {
        if t.is_float() {
            f64::from_bits(v) as i64
        } else {
            v as i64
        }
    }
}

/// Little-endian bytes of `vals` stored as dtype `t` (floats rounded RNE, ints wrapped).
pub fn to_bytes<E: Element>(t: DType, vals: &[E]) -> Vec<u8> {
    let n = t.bytes() as usize;
    let mut out = vec![0u8; vals.len() * n];
    for (v, chunk) in vals.iter().zip(out.chunks_exact_mut(n)) {
        encode(t, v.to_slot(t), chunk);
    }
    out
}

/// The elements of a little-endian buffer of dtype `t` (a trailing partial element is ignored).
pub fn from_bytes<E: Element>(t: DType, bytes: &[u8]) -> Vec<E> {
    bytes.chunks_exact(t.bytes() as usize).map(|c| E::from_slot(decode(t, c), t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3_known_values() {
        assert_eq!(f32_to_e4m3(1.0), 0x38);
        assert_eq!(f32_to_e4m3(448.0), 0x7e);
        assert_eq!(f32_to_e4m3(1e6), 0x7e, "saturates");
        assert_eq!(f32_to_e4m3(f32::INFINITY), 0x7e);
        assert_eq!(f32_to_e4m3(-1e6), 0xfe);
        assert!(e4m3_to_f32(0x7f).is_nan());
        assert_eq!(e4m3_to_f32(0x01), 2f32.powi(-9), "smallest subnormal");
        assert_eq!(f32_to_e4m3(2f32.powi(-10)), 0x00, "half of min subnormal rounds to even (0)");
        assert_eq!(f32_to_e4m3(3.0 * 2f32.powi(-10)), 0x02, "1.5 ulp rounds to even (2)");
        // 1.0625 is halfway between 1.0 (mantissa 000) and 1.125 (001): even → 1.0.
        assert_eq!(f32_to_e4m3(1.0625), 0x38);
        assert_eq!(f32_to_e4m3(1.1875), 0x3a);
    }

    #[test]
    fn e5m2_known_values() {
        assert_eq!(f32_to_e5m2(1.0), 0x3c);
        assert_eq!(f32_to_e5m2(57344.0), 0x7b);
        assert_eq!(f32_to_e5m2(1e9), 0x7b, "saturates");
        assert_eq!(f32_to_e5m2(f32::INFINITY), 0x7b, "SATFINITE maps inf to max too (as on an H200)");
        assert_eq!(f32_to_e4m3(f32::NAN), 0x7f);
        assert_eq!(e5m2_to_f32(0x7c), f32::INFINITY);
        assert!(e5m2_to_f32(0x7d).is_nan());
        assert_eq!(e5m2_to_f32(0x01), 2f32.powi(-16));
    }

    #[test]
    fn fp8_roundtrip_all_codes() {
        for b in 0..=255u8 {
            for (enc, dec) in [(f32_to_e4m3 as fn(f32) -> u8, e4m3_to_f32 as fn(u8) -> f32), (f32_to_e5m2, e5m2_to_f32)]
            {
                let v = dec(b);
                if v.is_nan() || v.is_infinite() {
                    continue;
                }
                let back = enc(v);
                // +0 and -0 are distinct codes and round-trip; everything else exactly.
                assert_eq!(back, b, "code {b:#04x} value {v}");
            }
        }
    }

    /// A NaN constant stores what CUDA's literal stores (the GPU-vs-simulator check of a data
    /// kernel is bit-exact, NaN payloads included).
    #[test]
    fn nan_constants_have_the_cuda_literal_bits() {
        let mut out = [0u8; 8];
        encode(DType::F32, float_const(DType::F32, f64::NAN), &mut out);
        assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()), 0x7fff_ffff);
        for t in [DType::F16, DType::BF16] {
            encode(t, float_const(t, f64::NAN), &mut out);
            assert_eq!(u16::from_le_bytes([out[0], out[1]]), 0x7fff, "{t}");
        }
        encode(DType::F64, float_const(DType::F64, f64::NAN), &mut out);
        assert_eq!(u64::from_le_bytes(out), 0x7ff8_0000_0000_0000);
        assert_eq!(float_const(DType::F16, 0.1), round_to(DType::F16, 0.1).to_bits());
    }

    #[test]
    fn half_rounding_is_rne() {
        // 2049 lies halfway between 2048 and 2050 in f16: ties to even → 2048.
        assert_eq!(f16_bits_to_f32(f32_to_f16_bits(2049.0)), 2048.0);
        assert_eq!(f16_bits_to_f32(f32_to_f16_bits(2051.0)), 2052.0);
        assert_eq!(bf16_bits_to_f32(f32_to_bf16_bits(257.0)), 256.0);
        assert_eq!(round_to(DType::F16, 65520.0), f64::INFINITY);
    }

    #[test]
    fn bytes_roundtrip() {
        let b = to_bytes(DType::I8, &[1i64, 127, 128, -129]);
        assert_eq!(from_bytes::<i64>(DType::I8, &b), vec![1, 127, -128, 127]);
        let b = to_bytes(DType::F16, &[1.0f32, 0.1]);
        assert_eq!(b.len(), 4);
        assert_eq!(from_bytes::<f32>(DType::F16, &b), vec![1.0, f16::from_f32(0.1).to_f32()]);
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// Brute force: the nearest finite code (ties to the even code), saturating at ±max.
    fn nearest(x: f32, decode: fn(u8) -> f32) -> u8 {
        let mut best: Option<(f64, u8)> = None;
        for b in 0..=255u8 {
            let v = decode(b);
            if !v.is_finite() || (v == 0.0 && v.is_sign_negative() != x.is_sign_negative()) {
                continue;
            }
            let d = (v as f64 - x as f64).abs();
            best = match best {
                Some((bd, bb)) if bd < d || (bd == d && bb % 2 == 0) => Some((bd, bb)),
                _ => Some((d, b)),
            };
        }
        best.map_or(0, |(_, b)| b)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn fp8_encoding_is_the_nearest_code(x in -70000.0f32..70000.0, scale in 0i32..4) {
            let x = x / 10f32.powi(scale * 2); // cover tiny (subnormal) magnitudes too
            prop_assert_eq!(f32_to_e4m3(x), nearest(x, e4m3_to_f32), "e4m3 {}", x);
            prop_assert_eq!(f32_to_e5m2(x), nearest(x, e5m2_to_f32), "e5m2 {}", x);
        }
    }
}
