//! GPU-vs-simulator comparison of one buffer, element by element.
//!
//! The rule ([`tolerance_for`]):
//! * kernels that only move data (see `tirx_ir::traffic`) and every integer or bool
//!   buffer: **bit-exact** (a copy must not even turn `-0.0` into `0.0` or change a NaN payload);
//! * float buffers of kernels that compute: at most **2 ulp** for `float32`/`float64`,
//!   **1 ulp** for `float16`/`bfloat16`/fp8. CUDA's `sqrtf`, `expf`, ... and the host's libm
//!   may differ in the last bit or two; a wrong index or a wrong op differs by far more.
//!   When such a function runs in a kernel that also reduces across threads (softmax: `exp2f`
//!   terms, their row sum, a quotient by it), the difference compounds: **8 ulp** for
//!   `float32` (each term ≤ 2 ulp, the sum of such terms ≤ 2 ulp relative plus differently
//!   rounded partial sums, the quotient both: GPU runs show 3–4), `docs/numerics.md` §7.
//!   The allowance is kernel-wide: it covers every `float32` output of such a kernel, not
//!   only the reduced ones. When such a function's result is an operand of more arithmetic
//!   in the same expression (`sigmoid`'s `1 / (1 + exp(-x))`, `gelu`'s `0.5·x·erfc(…)`), its
//!   difference passes through that arithmetic and its roundings: **4 ulp** for `float32`
//!   (GPU runs show 3). `float64` stays at 2 (the observed differences are `float32`
//!   `exp2f`), 16-bit types at 1;
//!   NaN equals NaN (any payload), infinities must match exactly, `-0.0 == 0.0`;
//! * float buffers of kernels that run `mma.sync` (tensor-core sums, `docs/numerics.md` §8):
//!   those ulps, **or** a difference of at most 2^-10 × the largest magnitude in the
//!   simulator's buffer. The simulator rounds each instruction's exact sum once; the
//!   tensor cores align the products to the largest term and truncate, which moves a
//!   K-long dot product by up to about K·2^-23 of its largest partial sum: 2^-10 covers
//!   K ≤ 8192. A misplaced fragment element changes results by their own magnitude.
//!
//! Ulp distance: the bit patterns mapped to a monotonic integer line (sign-magnitude →
//! two's complement), so neighbouring floats are 1 apart, across zero too.

use tirx_ir::lir::InexactMath;
use tirx_ir::DType;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    BitExact,
    Ulps(u64),
    /// `Ulps(n)`, or within [`SUMS_SCALE`] × the buffer's largest magnitude (tensor-core sums).
    Sums(u64),
}

/// The relative allowance of [`Tolerance::Sums`]: 2^-10 of the largest magnitude.
pub const SUMS_SCALE: f64 = 1.0 / 1024.0;

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tolerance::BitExact => f.write_str("bit-exact"),
            Tolerance::Ulps(n) => write!(f, "≤ {n} ulp"),
            Tolerance::Sums(n) => write!(f, "≤ {n} ulp or ≤ 2^-10 × max |sim| (tensor-core sums)"),
        }
    }
}

/// The documented rule (module doc); `tensor_sums`: the kernel runs `mma.sync`;
/// `inexact`: how far an inexact function's differences spread in it.
pub fn tolerance_for(dtype: DType, data_only: bool, tensor_sums: bool, inexact: InexactMath) -> Tolerance {
    if data_only || !dtype.is_float() {
        return Tolerance::BitExact;
    }
    let ulps = match (dtype, inexact) {
        (DType::F32, InexactMath::Reduced) => 8,
        (DType::F32, InexactMath::Composed) => 4,
        (DType::F32 | DType::F64, _) => 2,
        _ => 1,
    };
    if tensor_sums {
        Tolerance::Sums(ulps)
    } else {
        Tolerance::Ulps(ulps)
    }
}

/// One differing element.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Flat element index.
    pub index: usize,
    pub gpu: String,
    pub sim: String,
    /// Ulp distance when both are finite floats.
    pub ulps: Option<u64>,
}

/// The result for one buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferDiff {
    pub elems: usize,
    pub tolerance: Tolerance,
    /// Elements outside the tolerance.
    pub mismatches: usize,
    /// The first few of them.
    pub first: Vec<Mismatch>,
    /// Largest ulp distance among elements within tolerance (0 when bit-identical).
    pub max_ulps_ok: u64,
}

impl BufferDiff {
    pub fn ok(&self) -> bool {
        self.mismatches == 0
    }
}

/// Compares two little-endian buffers of `dtype`, keeping the first `keep` mismatches.
pub fn compare(dtype: DType, gpu: &[u8], sim: &[u8], tolerance: Tolerance, keep: usize) -> BufferDiff {
    let w = dtype.bytes() as usize;
    let elems = gpu.len().min(sim.len()) / w;
    let mut d = BufferDiff { elems, tolerance, mismatches: 0, first: Vec::new(), max_ulps_ok: 0 };
    let allowance = match tolerance {
        Tolerance::Sums(_) => SUMS_SCALE * max_magnitude(dtype, sim),
        _ => 0.0,
    };
    // Equal blocks (the common case) are skipped with a memcmp; only differing blocks are decoded.
    const BLOCK: usize = 1024;
    let blocks = gpu.chunks(BLOCK * w).zip(sim.chunks(BLOCK * w)).enumerate().filter(|(_, (g, s))| g != s);
    let elements = blocks.flat_map(|(bi, (g, s))| {
        g.chunks_exact(w).zip(s.chunks_exact(w)).enumerate().map(move |(j, pair)| (bi * BLOCK + j, pair))
    });
    for (i, (a, b)) in elements {
        let (ga, sb) = (bits(a), bits(b));
        if ga == sb {
            continue;
        }
        let dist = float_distance(dtype, ga, sb);
        let within = match (tolerance, dist) {
            (Tolerance::BitExact, _) => false,
            (Tolerance::Ulps(n) | Tolerance::Sums(n), Distance::Ulps(u)) if u <= n => true,
            (Tolerance::Sums(_), Distance::Ulps(_)) => {
                matches!((value(dtype, ga), value(dtype, sb)), (Some(g), Some(s)) if (g - s).abs() <= allowance)
            }
            (Tolerance::Ulps(_), Distance::Ulps(_)) => false,
            (Tolerance::Ulps(_) | Tolerance::Sums(_), Distance::BothNan) => true,
            (Tolerance::Ulps(_) | Tolerance::Sums(_), Distance::Incomparable) => false,
        };
        if within {
            if let Distance::Ulps(u) = dist {
                d.max_ulps_ok = d.max_ulps_ok.max(u);
            }
            continue;
        }
        d.mismatches += 1;
        if d.first.len() < keep {
            let ulps = if let Distance::Ulps(u) = dist { Some(u) } else { None };
            d.first.push(Mismatch { index: i, gpu: show(dtype, ga), sim: show(dtype, sb), ulps });
        }
    }
    if gpu.len() != sim.len() {
        // Never expected (same param sizes); counted so it cannot pass silently.
        d.mismatches += 1;
    }
    d
}

/// The largest finite magnitude among the elements of a float buffer (0 for other types).
fn max_magnitude(dtype: DType, buf: &[u8]) -> f64 {
    let w = dtype.bytes() as usize;
    buf.chunks_exact(w).filter_map(|c| value(dtype, bits(c))).filter(|v| v.is_finite()).fold(0.0, |m, v| m.max(v.abs()))
}

/// A float element's value (f64, f32, f16, bf16), `None` for other types.
fn value(dtype: DType, b: u64) -> Option<f64> {
    Some(match dtype {
        DType::F64 => f64::from_bits(b),
        DType::F32 => f32::from_bits(b as u32) as f64,
        DType::F16 => half::f16::from_bits(b as u16).to_f64(),
        DType::BF16 => half::bf16::from_bits(b as u16).to_f64(),
        _ => return None,
    })
}

fn bits(b: &[u8]) -> u64 {
    let mut le = [0u8; 8];
    le[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(le)
}

/// Float format: total bits, exponent bits, and whether all-ones exponent is inf/NaN (IEEE-like).
fn format(dtype: DType) -> Option<(u32, u32)> {
    Some(match dtype {
        DType::F64 => (64, 11),
        DType::F32 => (32, 8),
        DType::F16 => (16, 5),
        DType::BF16 => (16, 8),
        DType::F8E5M2 => (8, 5),
        DType::F8E4M3 => (8, 4),
        _ => return None,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Distance {
    Ulps(u64),
    BothNan,
    /// NaN vs number, infinity vs anything else, or not a float.
    Incomparable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Nan,
    Inf,
    Finite,
}

fn classify(dtype: DType, b: u64) -> Class {
    let Some((total, exp_bits)) = format(dtype) else { return Class::Finite };
    let man_bits = total - 1 - exp_bits;
    let exp = (b >> man_bits) & ((1 << exp_bits) - 1);
    let man = b & ((1 << man_bits) - 1);
    if dtype == DType::F8E4M3 {
        // e4m3fn: no infinities; only S.1111.111 is NaN.
        return if exp == 0xF && man == 0x7 { Class::Nan } else { Class::Finite };
    }
    match (exp == (1 << exp_bits) - 1, man == 0) {
        (true, true) => Class::Inf,
        (true, false) => Class::Nan,
        _ => Class::Finite,
    }
}

fn float_distance(dtype: DType, a: u64, b: u64) -> Distance {
    let Some((total, _)) = format(dtype) else { return Distance::Incomparable };
    match (classify(dtype, a), classify(dtype, b)) {
        (Class::Nan, Class::Nan) => Distance::BothNan,
        (Class::Finite, Class::Finite) => {
            let (ka, kb) = (ordered(a, total), ordered(b, total));
            Distance::Ulps(ka.abs_diff(kb) as u64)
        }
        _ => Distance::Incomparable,
    }
}

/// Sign-magnitude bits → a signed integer that grows with the float's value.
fn ordered(b: u64, total: u32) -> i128 {
    let sign = (b >> (total - 1)) & 1;
    let mag = (b & ((1u64 << (total - 1)) - 1)) as i128;
    if sign == 1 {
        -mag
    } else {
        mag
    }
}

/// The element as a number plus its bit pattern, e.g. `1.5 (0x3fc00000)`.
pub fn show(dtype: DType, b: u64) -> String {
    let hex = format!("0x{:0w$x}", b, w = (dtype.bits() / 4) as usize);
    let value = match dtype {
        DType::F64 => format!("{:?}", f64::from_bits(b)),
        DType::F32 => format!("{:?}", f32::from_bits(b as u32)),
        DType::F16 => format!("{:?}", half::f16::from_bits(b as u16).to_f32()),
        DType::BF16 => format!("{:?}", half::bf16::from_bits(b as u16).to_f32()),
        DType::F8E4M3 | DType::F8E5M2 => format!("{:?}", fp8_to_f32(dtype, b as u8)),
        DType::Bool => format!("{}", b != 0),
        DType::I8 => format!("{}", b as u8 as i8),
        DType::I16 => format!("{}", b as u16 as i16),
        DType::I32 => format!("{}", b as u32 as i32),
        DType::I64 => format!("{}", b as i64),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => format!("{b}"),
    };
    format!("{value} ({hex})")
}

/// fp8 (OCP e4m3fn / e5m2) to f32, for display.
fn fp8_to_f32(dtype: DType, b: u8) -> f32 {
    let (exp_bits, bias) = if dtype == DType::F8E4M3 { (4, 7) } else { (5, 15) };
    let man_bits = 7 - exp_bits;
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b >> man_bits) & ((1 << exp_bits) - 1)) as i32;
    let man = (b & ((1 << man_bits) - 1)) as f32 / (1 << man_bits) as f32;
    match classify(dtype, b as u64) {
        Class::Nan => f32::NAN,
        Class::Inf => sign * f32::INFINITY,
        Class::Finite if exp == 0 => sign * man * 2f32.powi(1 - bias),
        Class::Finite => sign * (1.0 + man) * 2f32.powi(exp - bias),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f16s(v: &[u16]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn next_up(x: f32, n: u32) -> f32 {
        f32::from_bits(x.to_bits() + n)
    }

    #[test]
    fn rule_per_dtype() {
        assert_eq!(tolerance_for(DType::F32, false, false, InexactMath::None), Tolerance::Ulps(2));
        assert_eq!(tolerance_for(DType::F16, false, false, InexactMath::None), Tolerance::Ulps(1));
        assert_eq!(tolerance_for(DType::BF16, false, false, InexactMath::None), Tolerance::Ulps(1));
        assert_eq!(tolerance_for(DType::I32, false, false, InexactMath::None), Tolerance::BitExact);
        assert_eq!(tolerance_for(DType::F32, true, false, InexactMath::None), Tolerance::BitExact);
        assert_eq!(tolerance_for(DType::F32, false, true, InexactMath::None), Tolerance::Sums(2));
        assert_eq!(tolerance_for(DType::I32, false, true, InexactMath::None), Tolerance::BitExact);
        assert_eq!(tolerance_for(DType::F32, false, false, InexactMath::Reduced), Tolerance::Ulps(8));
        assert_eq!(tolerance_for(DType::BF16, false, false, InexactMath::Reduced), Tolerance::Ulps(1));
        assert_eq!(tolerance_for(DType::F32, false, false, InexactMath::Composed), Tolerance::Ulps(4));
        assert_eq!(tolerance_for(DType::F64, false, false, InexactMath::Reduced), Tolerance::Ulps(2));
    }

    #[test]
    fn tensor_sums_allow_a_fraction_of_the_largest_magnitude() {
        // Largest |sim| = 1024: differences up to 1.0 pass, whatever the ulps.
        let sim = f32s(&[1024.0, 0.5, -3.0, 7.0]);
        let gpu = f32s(&[1024.0, 0.5 + 0.75, -3.0 - 1.0, 9.0]);
        let d = compare(DType::F32, &gpu, &sim, Tolerance::Sums(2), 10);
        assert_eq!(d.mismatches, 1, "{d:?}");
        assert_eq!(d.first[0].index, 3);
    }

    #[test]
    fn f32_two_ulps_pass_three_fail() {
        let sim = f32s(&[1.0, 2.0, 3.0]);
        let gpu = f32s(&[next_up(1.0, 2), 2.0, next_up(3.0, 3)]);
        let d = compare(DType::F32, &gpu, &sim, Tolerance::Ulps(2), 10);
        assert_eq!(d.mismatches, 1);
        assert_eq!(d.max_ulps_ok, 2);
        assert_eq!(d.first[0].index, 2);
        assert_eq!(d.first[0].ulps, Some(3));
        assert!(d.first[0].sim.starts_with("3.0 (0x40400000)"), "{}", d.first[0].sim);
    }

    #[test]
    fn ulps_count_across_zero_and_signed_zeros() {
        let tiny = f32::from_bits(1);
        let d = compare(DType::F32, &f32s(&[tiny]), &f32s(&[-tiny]), Tolerance::Ulps(2), 1);
        assert!(d.ok(), "{d:?}"); // +min subnormal to -min subnormal is 2 ulps
        let d = compare(DType::F32, &f32s(&[-0.0]), &f32s(&[0.0]), Tolerance::Ulps(2), 1);
        assert!(d.ok());
        let d = compare(DType::F32, &f32s(&[-0.0]), &f32s(&[0.0]), Tolerance::BitExact, 1);
        assert_eq!(d.mismatches, 1);
    }

    #[test]
    fn nan_and_infinity() {
        let qnan = f32::from_bits(0x7fc0_0000);
        let other_nan = f32::from_bits(0x7fc0_0001);
        let d = compare(DType::F32, &f32s(&[qnan]), &f32s(&[other_nan]), Tolerance::Ulps(2), 1);
        assert!(d.ok());
        // Infinity is one "ulp" above f32::MAX on the integer line, but must match exactly.
        let d = compare(DType::F32, &f32s(&[f32::INFINITY]), &f32s(&[f32::MAX]), Tolerance::Ulps(2), 1);
        assert_eq!(d.mismatches, 1);
        assert_eq!(d.first[0].ulps, None);
        let d = compare(DType::F32, &f32s(&[qnan]), &f32s(&[1.0]), Tolerance::Ulps(2), 1);
        assert_eq!(d.mismatches, 1);
    }

    #[test]
    fn f16_one_ulp() {
        // 1.0 = 0x3c00; next 0x3c01; two up 0x3c02.
        let d = compare(DType::F16, &f16s(&[0x3c01, 0x3c02]), &f16s(&[0x3c00, 0x3c00]), Tolerance::Ulps(1), 4);
        assert_eq!(d.mismatches, 1);
        assert_eq!(d.first[0].index, 1);
        assert_eq!(d.first[0].gpu, "1.0019531 (0x3c02)");
    }

    #[test]
    fn bit_exact_for_copies_and_ints() {
        let d = compare(DType::I32, &[1, 0, 0, 0, 2, 0, 0, 0], &[1, 0, 0, 0, 3, 0, 0, 0], Tolerance::BitExact, 4);
        assert_eq!(d.mismatches, 1);
        assert_eq!(d.first[0].gpu, "2 (0x00000002)");
        let d = compare(DType::F32, &f32s(&[next_up(1.0, 1)]), &f32s(&[1.0]), Tolerance::BitExact, 4);
        assert_eq!(d.mismatches, 1);
    }

    #[test]
    fn keeps_only_the_first_mismatches() {
        let d = compare(DType::U8, &[1; 100], &[2; 100], Tolerance::BitExact, 3);
        assert_eq!(d.mismatches, 100);
        assert_eq!(d.first.iter().map(|m| m.index).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn indices_are_exact_across_skipped_equal_blocks() {
        let sim = vec![0u8; 5000 * 4];
        let mut gpu = sim.clone();
        for i in [1023usize, 1024, 4999] {
            gpu[i * 4] = 1;
        }
        let d = compare(DType::I32, &gpu, &sim, Tolerance::BitExact, 8);
        assert_eq!(d.first.iter().map(|m| m.index).collect::<Vec<_>>(), [1023, 1024, 4999]);
        assert_eq!((d.elems, d.mismatches), (5000, 3));
    }

    #[test]
    fn fp8_classes_and_values() {
        assert_eq!(fp8_to_f32(DType::F8E4M3, 0x38), 1.0);
        assert_eq!(fp8_to_f32(DType::F8E4M3, 0x7e), 448.0);
        assert!(fp8_to_f32(DType::F8E4M3, 0x7f).is_nan());
        assert_eq!(fp8_to_f32(DType::F8E5M2, 0x3c), 1.0);
        assert_eq!(fp8_to_f32(DType::F8E5M2, 0x7c), f32::INFINITY);
        assert_eq!(fp8_to_f32(DType::F8E4M3, 0x01), 2f32.powi(-9));
        let d = compare(DType::F8E4M3, &[0x39], &[0x38], Tolerance::Ulps(1), 1);
        assert!(d.ok());
    }
}
