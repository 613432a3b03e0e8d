//! Every example (`examples/*.py`, `examples/bench/*.py`) round-trips through
//! script → lowering → simulator and is value-checked against a reference
//! computed here in plain Rust from the same inputs.
//!
//! The examples are listed at test time: one without an entry in [`spec`] fails
//! the test by name, and so does a table entry whose example is gone. Each
//! example gets deterministic inputs exact in their dtype; its outputs start at
//! [`SENTINEL`] so an element the kernel forgets to write is caught; every other
//! parameter must come back byte-identical. The simulator must report no error
//! (race, bounds, alignment, barrier) and no warning (uninitialised reads).
//!
//! Tolerances: copies, casts, `+ - * /`, `fma` (in any `rounding_mode`), `max`, `sqrt` are IEEE correctly
//! rounded (or exact) both in the simulator and in the reference, so they are
//! compared bit for bit. Transcendentals (`exp`, `exp2`, `log2`, `silu`) are
//! computed here in f64 and rounded once, while the simulator (like CUDA's
//! `expf`) uses an f32 implementation that may be off by an ulp or two: they
//! are allowed [`TRANSCENDENTAL_ULPS`] ulps of their output type.
//!
//! The bench kernels have grids of thousands of CTAs over 64–256 MiB tensors:
//! they run with `grid_limit` = one row of tiles plus one CTA (so both grid
//! axes are exercised), and the check covers exactly the tiles of the CTAs
//! simulated; the rest of the output must stay untouched.

use std::path::{Path, PathBuf};
use tirx_ir::lir::{LKernel, ScalarValue};
use tirx_ir::DType;
use tirx_sim::value::{
    bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits, f32_to_f16_bits, from_bytes, round_to, to_bytes,
};
use tirx_sim::SimOptions;

/// What an output element starts as (exact in f32, f16 and bf16; never a result here).
const SENTINEL: f64 = -1000.0;

/// Allowed distance, in ulps of the output dtype, of a transcendental result (see the module doc).
const TRANSCENDENTAL_ULPS: u32 = 2;

// ---------------------------------------------------------------------------
// The reference table
// ---------------------------------------------------------------------------

/// How one example is checked.
enum Spec {
    /// A small kernel: the whole grid is simulated and every output element compared.
    Whole(Whole),
    /// A big tiled kernel `B[tile] = scale * A[tile]` over 2-D `A`/`B`; only the first
    /// grid row of CTAs plus one is simulated and checked.
    Tiled { tile: [usize; 2], scale: f64 },
}

struct Whole {
    /// The value of element `e` of input parameter `name` (rounded to its dtype).
    fill: fn(name: &str, dt: DType, e: usize) -> f64,
    /// Parameters the kernel writes; each starts at [`SENTINEL`].
    outputs: &'static [&'static str],
    /// The expected contents of every output, from the inputs.
    reference: fn(&Env) -> Expected,
    /// The launches of a kernel with scalar parameters: each its `(name, value)`
    /// arguments (buffer sizes follow from them). Empty: one launch without scalars.
    launches: &'static [&'static [(&'static str, f64)]],
}

/// The expected contents of each output parameter, by name.
type Expected = Vec<(&'static str, Vec<Want>)>;

/// One expected element: its value and how many ulps (of the output dtype) it may be off.
#[derive(Clone, Copy, Debug)]
struct Want {
    v: f64,
    ulps: u32,
}

fn exact(v: f64) -> Want {
    Want { v, ulps: 0 }
}

fn transcendental(v: f64) -> Want {
    Want { v, ulps: TRANSCENDENTAL_ULPS }
}

fn f32r(x: f64) -> f64 {
    round_to(DType::F32, x)
}

fn f16r(x: f64) -> f64 {
    round_to(DType::F16, x)
}

fn whole(
    fill: fn(&str, DType, usize) -> f64,
    outputs: &'static [&'static str],
    reference: fn(&Env) -> Expected,
) -> Option<Spec> {
    Some(Spec::Whole(Whole { fill, outputs, reference, launches: &[] }))
}

/// [`whole`] of a kernel with scalar parameters, run once per entry of `launches`.
fn whole_at(
    fill: fn(&str, DType, usize) -> f64,
    outputs: &'static [&'static str],
    reference: fn(&Env) -> Expected,
    launches: &'static [&'static [(&'static str, f64)]],
) -> Option<Spec> {
    Some(Spec::Whole(Whole { fill, outputs, reference, launches }))
}

/// `B == A` element for element.
fn copy_a_to_b(e: &Env) -> Expected {
    vec![("B", e.map("A", exact))]
}

/// The table `example name → inputs, outputs, reference`.
fn spec(name: &str) -> Option<Spec> {
    match name {
        // Copies: B == A, over distinct values.
        "constructs_swizzle"
        | "copy_fallback"
        | "copy_gmem_smem"
        | "copy_gmem_smem_u8"
        | "copy_ldstmatrix"
        | "copy_reg"
        | "copy_shared_dyn"
        | "copy_vec_forced"
        | "ldstmatrix_wg_trans"
        | "reg_padded_rows"
        | "reg_roundtrip_wg"
        | "reg_swizzle_wg"
        | "tma_copy"
        // Each CTA writes the tile its cluster peer sent at the peer's columns: B = A (a copy
        // landing in the wrong CTA would swap tiles).
        | "dsmem_exchange" => whole(distinct, &["B"], copy_a_to_b),
        // Both CTAs of a cluster receive the band of A both halves of the multicast load bring,
        // and store it at their own columns: B (256 × 256) = [A, A] (A is 256 × 128).
        "tma_multicast" => whole(distinct, &["B"], |e| {
            let a = e.get("A");
            vec![("B", (0..256 * 256).map(|i| exact(a[i / 256 * 128 + i % 128])).collect())]
        }),
        // Each CTA of the cluster copies every band the ring of multicast stages brings into its
        // own B[rank]: B (2 × 384 × 64) = [A, A] (a stage refilled before its consumer read it
        // would show up as a later band's values).
        "multicast_pipeline" => whole(distinct, &["B"], |e| {
            let a = e.get("A");
            vec![("B", (0..2 * a.len()).map(|i| exact(a[i % a.len()])).collect())]
        }),
        // Rows split over groups of 4 CTAs meeting at a grid group barrier: Y = X / (the row's
        // sum); eighths keep every partial sum exact in f32 in any order, so Y is X / sum
        // rounded once; P holds the slices' sums. W (the barrier words) starts at 0 and ends with
        // its top bit set, as the hardware's count leaves it after one phase.
        "grid_group_exchange" => whole(positive_eighths_zero_words, &["Y"], |e| {
            let x = e.get("X");
            let y = x.chunks(1024).flat_map(|row| {
                let s: f64 = row.iter().sum();
                row.iter().map(move |v| exact(f32r(v / s)))
            });
            let p = x.chunks(256).map(|slice| exact(slice.iter().sum())).collect();
            vec![("Y", y.collect()), ("P", p), ("W", vec![exact(f64::from(i32::MIN)); 4])]
        }),
        // A persistent grid drains a queue of rows through an atomic counter: Y = 2 X whichever
        // CTA takes a row, and the counter is back at 0 (a row taken twice, or a wrong reset,
        // shows).
        "work_queue" => whole(distinct_zero_counter, &["Y"], |e| {
            vec![("Y", e.map("X", |v| exact(2.0 * v))), ("C", vec![exact(0.0)])]
        }),
        // B = A; C = A[0:16, 0:16] (A is 64 × 64).
        "layout_helpers" => whole(distinct, &["B", "C"], |e| {
            let a = e.get("A");
            let c = (0..16).flat_map(|r| a[r * 64..r * 64 + 16].iter().map(|&x| exact(x))).collect();
            vec![("B", e.map("A", exact)), ("C", c)]
        }),
        // B = A; C = the first 96 rows (tiles 0..2) of A.
        "copy_double_buffer" => whole(distinct, &["B", "C"], |e| {
            vec![("B", e.map("A", exact)), ("C", e.get("A")[..96 * 32].iter().map(|&a| exact(a)).collect())]
        }),
        // B = A + A, C = A (forced fallback copy).
        "constructs_dispatch" => {
            whole(distinct, &["B", "C"], |e| vec![("B", e.map("A", |a| exact(f32r(a + a)))), ("C", e.map("A", exact))])
        }
        // Row softmax, one CTA of 256 threads per row of 2048 (the flagship layout): the reference
        // folds in the kernel's order (each thread's 8 registers, the warp butterfly, the 8 warp
        // partials' butterfly) with exp2 in f64 rounded once (the simulator's exp2f may differ by
        // an ulp or two per element, and the sum and quotient by a little more).
        "softmax" => whole(softmax_inputs, &["B"], softmax_cta_rows),
        // RMSNorm, bf16: eighths keep every square and the sum of squares exact in f32, so the
        // whole computation is IEEE-exact in f32 and rounded once to bf16.
        "rmsnorm" => whole(small_eighths, &["Y"], |e| {
            let (x, w) = (e.get("X"), e.get("W"));
            let h = w.len();
            let y = x
                .chunks(h)
                .flat_map(|row| {
                    let s: f64 = row.iter().map(|v| v * v).sum();
                    let rstd = f32r(1.0 / f32r(f32r(f32r(s / h as f64) + f32r(1e-6)).sqrt()));
                    row.iter().zip(w).map(move |(v, wj)| exact(round_to(DType::BF16, f32r(f32r(v * rstd) * wj))))
                })
                .collect();
            vec![("Y", y)]
        }),
        "constructs_elementwise" => whole(elementwise_inputs, &["Out"], elementwise_rows),
        "constructs_loops" => whole(quarters, &["B"], |e| {
            let [_, n] = e.dims2("A");
            let a = e.get("A");
            let b = (0..a.len())
                .map(|i| {
                    let (t, j) = (i / n, i % n);
                    let v = a[i] as f32;
                    exact(if t % 2 == 0 {
                        (v * 2.0 - 1.0).max(0.0) as f64
                    } else if t < 32 {
                        (v.abs().sqrt() + (j % 3) as f32) as f64
                    } else {
                        a[t * n + (j + t) % n]
                    })
                })
                .collect();
            vec![("B", b)]
        }),
        // B[r] = 2 A[r] (+ 1 for the second warpgroup's rows r >= 128).
        "constructs_scopes" => whole(distinct, &["B"], |e| {
            let [_, n] = e.dims2("A");
            let b = e.get("A").iter().enumerate();
            vec![("B", b.map(|(i, &a)| exact(f32r(2.0 * a + if i / n >= 128 { 1.0 } else { 0.0 }))).collect())]
        }),
        // B[i, j] = 3 A[i, j] + j, two f32 roundings as written.
        "constructs_views" => whole(quarters, &["B"], |e| {
            let [_, n] = e.dims2("A");
            let b = e.get("A").iter().enumerate();
            vec![("B", b.map(|(i, &a)| exact(((a as f32) * 3.0 + (i % n) as f32) as f64)).collect())]
        }),
        "elementwise_reg" | "ewise_sqrt_warp" => {
            whole(quarters_positive, &["B"], |e| vec![("B", e.map("A", |a| exact((a as f32).sqrt() as f64)))])
        }
        // B = f32(max(f16(A), 0)): RNE rounding, overflow to inf included.
        "ewise_cast_wg" => whole(cast_inputs, &["B"], |e| vec![("B", e.map("A", |a| exact(f16r(a).max(0.0))))]),
        // B = bf16(exp(1.5 A + 0.25)); the argument is exact (A is a multiple of 1/64). The f32
        // exp may be an ulp or two off (module doc), which can flip the bf16 rounding: 1 bf16 ulp.
        "ewise_fragment_exp" => whole(exp_inputs, &["B"], |e| {
            let b = e.map("A", |a| {
                let y = f32r((f32r(a * 1.5) + 0.25).exp());
                Want { v: round_to(DType::BF16, y), ulps: 1 }
            });
            vec![("B", b)]
        }),
        // C = fma((A + B) * B, 0.5, A), each packed op rounded once to f16 (the f64 sums are exact here).
        "ewise_packed_f16" => whole(packed_inputs, &["Cg"], |e| {
            let (a, b) = (e.get("Ag"), e.get("Bg"));
            let c = (0..a.len()).map(|i| exact(f16r(f16r(f16r(a[i] + b[i]) * b[i]) * 0.5 + a[i]))).collect();
            vec![("Cg", c)]
        }),
        "ewise_rounding" => whole(significands, &["Cg", "Hg"], rounding_rows),
        // B = A + A through ldmatrix / stmatrix on swizzled tiles.
        "ldstmatrix_swizzle_x4" => whole(distinct, &["B"], |e| vec![("B", e.map("A", |a| exact(f16r(a + a))))]),
        // C = A @ B on tensor cores; the inputs keep every partial sum exact in f32.
        "gemm_mma" | "gemm_mma_bf16" | "gemm_mma_pipelined" | "gemm_mma_pipelined_bf16" | "gemm_mma_pipelined_bk64"
        | "gemm_mma_tma" | "gemm_hopper" => {
            whole(eighths, &["C"], matmul)
        }
        // Row softmax, one warp per row: the reference follows the kernel's order (each lane folds
        // its 32 registers, then the xor butterfly 16..1) with exp in f64 rounded once; the
        // simulator's f32 exp may differ by an ulp or two per element (module doc).
        "reduce_softmax_warp" => whole(softmax_inputs, &["B"], softmax_rows),
        // Row max / row sum (accum onto the sentinel) of mma accumulators, every quad lane:
        // quarter inputs keep every f32 sum exact, so any order gives these values.
        "reduce_mma_rows" => whole(small_quarters, &["Mx", "Sm"], |e| {
            let a = e.get("A");
            let row = |r: usize| &a[r * 128..r * 128 + 128];
            let mx = (0..128).map(|i| exact(row(i / 4).iter().copied().fold(f64::NEG_INFINITY, f64::max))).collect();
            let sm = (0..128).map(|i| exact(SENTINEL + row(i / 4).iter().sum::<f64>())).collect();
            vec![("Mx", mx), ("Sm", sm)]
        }),
        // Column sums over axes (0, 2) and row maxima (accum onto the sentinel), exact.
        "reduce_shared_cta" => whole(small_quarters, &["Cs", "Rm"], |e| {
            let a = e.get("A");
            let at = |i: usize, j: usize, k: usize| a[(i * 16 + j) * 12 + k];
            let cs = (0..16)
                .map(|j| exact((0..4).flat_map(|i| (0..12).map(move |k| (i, k))).map(|(i, k)| at(i, j, k)).sum()))
                .collect();
            let rm = (0..64).map(|x| exact((0..12).map(|k| at(x / 16, x % 16, k)).fold(SENTINEL, f64::max))).collect();
            vec![("Cs", cs), ("Rm", rm)]
        }),
        // Per-warpgroup row sums (f32 sums of f16 eighths: exact, one rounding to f16) and minima.
        "reduce_warpgroup_shared" => whole(small_eighths, &["Sm", "Mn"], |e| {
            let a = e.get("A");
            let row = |r: usize| &a[r * 40..r * 40 + 40];
            let sm = (0..128).map(|r| exact(f16r(row(r).iter().sum()))).collect();
            let mn = (0..128).map(|r| exact(row(r).iter().copied().fold(f64::INFINITY, f64::min))).collect();
            vec![("Sm", sm), ("Mn", mn)]
        }),
        // Raw collectives on quarters (exact sums): 8-lane sums, the xor-1 neighbour, and
        // (v - max) / sum(v - max + 1) over the CTA, one f32 rounding.
        "collective_warp_cta" => whole(small_quarters, &["Out"], |e| {
            let x = e.get("X");
            let m = x.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = x.iter().map(|v| v - m + 1.0).sum();
            let s8 = (0..256).map(|t| exact(x[t / 8 * 8..t / 8 * 8 + 8].iter().sum()));
            let nb = (0..256).map(|t| exact(x[t ^ 1]));
            let q = (0..256).map(|t| exact(f32r((x[t] - m) / z)));
            vec![("Out", s8.chain(nb).chain(q).collect())]
        }),
        // C = f16(f16(f16(exp(f32(1.5 A) + B[0, j])) * S[i, 0]) + 0.25); D = 0. The exp is f32
        // (an ulp or two from f64), which can move the f16 roundings after it: 2 f16 ulps.
        "ewise_smem_pipeline" => whole(pipeline_inputs, &["C", "D"], |e| {
            let (a, b, s) = (e.get("A"), e.get("B"), e.get("S"));
            let c = (0..4096)
                .map(|x| {
                    let (i, j) = (x / 64, x % 64);
                    let y = f16r(f32r(f32r(a[x] * 1.5) + b[j]).exp());
                    Want { v: f16r(f16r(y * s[i * 64]) + 0.25), ulps: 2 }
                })
                .collect();
            vec![("C", c), ("D", vec![exact(0.0); 4096])]
        }),
        // Scalar parameters and a run-time row count, at two sizes each: B = fma(A, alpha, beta); B = A.
        "scale_rows" => whole_at(
            quarters,
            &["B"],
            scale_rows,
            &[&[("n", 128.0), ("alpha", 0.5), ("beta", 2.0)], &[("n", 384.0), ("alpha", -3.0), ("beta", 0.25)]],
        ),
        "copy_rows_checked" => whole_at(distinct, &["B"], copy_a_to_b, &[&[("n", 64.0)], &[("n", 192.0)]]),
        "reg_stream_f16" => Some(Spec::Tiled { tile: [128, 64], scale: 2.0 }),
        "ragged_copy_f32" | "ragged_copy_f16" => Some(Spec::Tiled { tile: [60, 100], scale: 1.0 }),
        "ragged_copy_f32_96t" => Some(Spec::Tiled { tile: [50, 90], scale: 1.0 }),
        "tiled_copy_f16" | "tiled_copy_f32" => Some(Spec::Tiled { tile: [64, 128], scale: 1.0 }),
        "tma_copy_f16" => Some(Spec::Tiled { tile: [64, 1024], scale: 1.0 }),
        "tma_copy_f32" => Some(Spec::Tiled { tile: [64, 512], scale: 1.0 }),
        _ => None,
    }
}

/// Every name [`spec`] knows, to catch entries whose example was removed.
const TABLE: &[&str] = &[
    "constructs_dispatch",
    "constructs_elementwise",
    "constructs_loops",
    "constructs_scopes",
    "constructs_swizzle",
    "constructs_views",
    "copy_double_buffer",
    "copy_fallback",
    "copy_gmem_smem",
    "copy_gmem_smem_u8",
    "copy_ldstmatrix",
    "copy_reg",
    "copy_rows_checked",
    "copy_shared_dyn",
    "copy_vec_forced",
    "dsmem_exchange",
    "elementwise_reg",
    "ewise_cast_wg",
    "ewise_fragment_exp",
    "ewise_packed_f16",
    "ewise_rounding",
    "ewise_sqrt_warp",
    "gemm_mma",
    "gemm_mma_bf16",
    "gemm_hopper",
    "gemm_mma_pipelined",
    "gemm_mma_pipelined_bf16",
    "gemm_mma_pipelined_bk64",
    "gemm_mma_tma",
    "ldstmatrix_swizzle_x4",
    "ldstmatrix_wg_trans",
    "layout_helpers",
    "reg_padded_rows",
    "reg_roundtrip_wg",
    "reg_stream_f16",
    "reg_swizzle_wg",
    "reduce_mma_rows",
    "reduce_shared_cta",
    "reduce_softmax_warp",
    "reduce_warpgroup_shared",
    "collective_warp_cta",
    "ewise_smem_pipeline",
    "ragged_copy_f32",
    "scale_rows",
    "ragged_copy_f16",
    "ragged_copy_f32_96t",
    "tiled_copy_f16",
    "tiled_copy_f32",
    "tma_copy",
    "tma_multicast",
    "multicast_pipeline",
    "grid_group_exchange",
    "work_queue",
    "tma_copy_f16",
    "tma_copy_f32",
];

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

/// Distinct, finite values exact in `dt` (so a misplaced element is always seen),
/// alternating in sign for floats.
fn distinct(_: &str, dt: DType, e: usize) -> f64 {
    let neg = e % 2 == 1;
    match dt {
        DType::F32 | DType::F64 => (e as f64 + 1.0) * if neg { -0.5 } else { 0.5 },
        DType::F16 => f16_bits_to_f32((0x3C00 + (e % 0x3000) as u16) | if neg { 0x8000 } else { 0 }) as f64,
        DType::BF16 => bf16_bits_to_f32((0x3F80 + (e % 0x3000) as u16) | if neg { 0x8000 } else { 0 }) as f64,
        // 8-bit integers: consecutive blocks of 256 are shifted so rows differ.
        _ => ((e * 37 + e / 256) % 256) as f64,
    }
}

/// Distinct signed multiples of 1/4 (so `2a - 1`, `3a + j` are exact in f32).
fn quarters(_: &str, _: DType, e: usize) -> f64 {
    (e as f64 - 500.0) * 0.25
}

fn quarters_positive(_: &str, _: DType, e: usize) -> f64 {
    e as f64 * 0.25 + 0.5
}

/// `A` positive (reciprocal, log2), with values that are not exact in f16 (one a tie);
/// `B` signed. Every `1.5 a + 0.25`, `a * b + 1` is exact in f32.
fn elementwise_inputs(name: &str, _: DType, e: usize) -> f64 {
    const A: [f64; 8] = [0.5, 1.0, 1.5, 2.0, 3.25, 0.125, 1.0 + 1.0 / 4096.0, 6.0 + 1.0 / 512.0];
    const B: [f64; 8] = [2.0, -1.0, 0.5, -4.0, 1.0, 8.0, -0.25, 3.0];
    if name == "A" {
        A[e]
    } else {
        B[e]
    }
}

/// Signed f32 values in [1, 2) with all 24 significand bits in use, so that
/// every rounding is visible; sums and `s·b + a` of them are exact in f64.
fn significands(name: &str, _: DType, e: usize) -> f64 {
    let h = (e as u32 ^ if name == "Ag" { 0x5bd1_e995 } else { 0x1b87_3593 }).wrapping_mul(0x9e37_79b9);
    let x = f32::from_bits(0x3f80_0000 | (h >> 9));
    if h & 1 == 1 {
        -x as f64
    } else {
        x as f64
    }
}

/// `x` (exact) rounded to f32 toward −∞ (`rm`) or toward zero (`rz`).
fn f32_directed(x: f64, mode: &str) -> f64 {
    let r = x as f32;
    let up = mode == "rz" && x < 0.0;
    if r as f64 == x || (r as f64 > x) == up {
        return r as f64;
    }
    // `r` is on the wrong side of `x`: its neighbour toward `x`.
    let away = (r as f64 > 0.0) == up;
    f32::from_bits(if away { r.to_bits() + 1 } else { r.to_bits() - 1 }) as f64
}

/// An f32 value rounded to bf16 toward +∞.
fn bf16_up(y: f64) -> f64 {
    let b = (y as f32).to_bits();
    let up = b & 0xffff != 0 && b >> 31 == 0;
    f32::from_bits(((b >> 16) + u32::from(up)) << 16) as f64
}

/// `ewise_rounding`: C = rm(rz(A + B)·B + A), H = bf16_rp(fma(C, 0.5, A)).
fn rounding_rows(e: &Env) -> Expected {
    let (a, b) = (e.get("Ag"), e.get("Bg"));
    let c: Vec<f64> = (0..a.len()).map(|i| f32_directed(f32_directed(a[i] + b[i], "rz") * b[i] + a[i], "rm")).collect();
    let h = (0..a.len()).map(|i| exact(bf16_up(f32r(c[i] * 0.5 + a[i])))).collect();
    vec![("Cg", c.into_iter().map(exact).collect()), ("Hg", h)]
}

/// Rows of `constructs_elementwise`'s `Out`, each from `a = A[j]`, `b = B[j]`.
fn elementwise_rows(e: &Env) -> Expected {
    let (a, b) = (e.get("A"), e.get("B"));
    let ex = |f: &dyn Fn(f32, f32) -> f32| (0..a.len()).map(|j| exact(f(a[j] as f32, b[j] as f32) as f64)).collect();
    let tr = |f: &dyn Fn(f64) -> f64| (0..a.len()).map(|j| transcendental(f32r(f(a[j])))).collect::<Vec<_>>();
    let rows: Vec<Vec<Want>> = vec![
        ex(&|_, _| 0.0),
        ex(&|_, _| 2.5),
        ex(&|a, _| 1.0 / a),
        ex(&|a, _| (a * 1.5 + 0.25).sqrt()),
        tr(&|a| a.exp()),
        tr(&|a| a.exp2()),
        tr(&|a| a.log2()),
        tr(&|a| a / (1.0 + (-a).exp())),
        ex(&|a, b| a + b),
        ex(&|a, b| a - b),
        ex(&|a, _| a * 0.5),
        ex(&|a, b| a / b),
        ex(&|a, b| a.max(b)),
        ex(&|a, b| a.min(b)),
        ex(&|a, b| a.mul_add(b, 1.0)),
        ex(&|a, _| f16r(a as f64) as f32),
    ];
    vec![("Out", rows.concat())]
}

/// Signed multiples of 1/4 in [-25, 25]: sums of a few thousand stay exact in f32.
fn small_quarters(_: &str, _: DType, e: usize) -> f64 {
    ((e * 37 + 11) % 201) as f64 * 0.25 - 25.0
}

/// Signed multiples of 1/8 in [-4, 4] (exact in f16; sums of 40 exact in f32).
fn small_eighths(_: &str, _: DType, e: usize) -> f64 {
    ((e * 29 + 5) % 65) as f64 * 0.125 - 4.0
}

/// Positive eighths (0.125 to 8.125: sums of a few thousand exact in f32), and zero barrier
/// words (`W`: a grid group barrier's word starts with its low 31 bits 0).
/// `work_queue`: distinct X, the counter C at 0.
fn distinct_zero_counter(name: &str, dt: DType, e: usize) -> f64 {
    if name == "C" {
        0.0
    } else {
        distinct(name, dt, e)
    }
}

fn positive_eighths_zero_words(name: &str, _: DType, e: usize) -> f64 {
    if name == "W" {
        return 0.0;
    }
    ((e * 29 + 5) % 65 + 1) as f64 * 0.125
}

/// Softmax rows: values in [-8, 8] that use the whole f32 significand.
fn softmax_inputs(_: &str, _: DType, e: usize) -> f64 {
    f32r(((e * 7919 + 17) % 10007) as f64 / 10007.0 * 16.0 - 8.0 + 1.0 / 3.0)
}

/// `reduce_softmax_warp`: per row, the max and the sum in the kernel's order (lane `l` folds
/// columns j with (j / 4) % 32 == l in increasing order, then the butterfly 16, 8, 4, 2, 1).
fn softmax_rows(e: &Env) -> Expected {
    let a = e.get("A");
    let lane_then_butterfly = |v: &[f64], op: &dyn Fn(f64, f64) -> f64| -> f64 {
        let mut lanes: Vec<f64> =
            (0..32).map(|l| (0..1024).filter(|j| (j / 4) % 32 == l).map(|j| v[j]).reduce(op).unwrap()).collect();
        for m in [16, 8, 4, 2, 1] {
            let prev = lanes.clone();
            for (l, x) in lanes.iter_mut().enumerate() {
                *x = op(prev[l], prev[l ^ m]);
            }
        }
        lanes[0]
    };
    let mut out = Vec::with_capacity(a.len());
    for r in 0..8 {
        let row = &a[r * 1024..r * 1024 + 1024];
        let m = lane_then_butterfly(row, &f64::max);
        let ex: Vec<f64> = row.iter().map(|x| f32r(f32r(x - m).exp())).collect();
        let z = lane_then_butterfly(&ex, &|x, y| f32r(x + y));
        out.extend(ex.iter().map(|x| Want { v: f32r(x / z), ulps: TRANSCENDENTAL_ULPS + 2 }));
    }
    vec![("B", out)]
}

/// `softmax`: rows of 2048 over 256 threads holding the 16-byte vectors t and t + 256; the max
/// and the sum fold each thread's registers left to right, then the butterfly 16..1 in each
/// warp, then lanes 0..8 read the 8 warp partials and fold them by the butterfly 4, 2, 1.
fn softmax_cta_rows(e: &Env) -> Expected {
    const N: usize = 2048;
    let a = e.get("A");
    let cta_fold = |v: &[f64], op: &dyn Fn(f64, f64) -> f64, identity: f64| -> f64 {
        let thread = |t: usize| {
            let regs = (0..2).flat_map(|i| (0..4).map(move |k| (i * 256 + t) * 4 + k));
            regs.map(|j| v[j]).reduce(op).unwrap()
        };
        let butterfly = |mut lanes: Vec<f64>, masks: &[usize]| {
            for &m in masks {
                let prev = lanes.clone();
                for (l, x) in lanes.iter_mut().enumerate() {
                    *x = op(prev[l], prev[l ^ m]);
                }
            }
            lanes[0]
        };
        let warps: Vec<f64> =
            (0..8).map(|w| butterfly((0..32).map(|l| thread(w * 32 + l)).collect(), &[16, 8, 4, 2, 1])).collect();
        let lanes = (0..32).map(|l| if l < 8 { warps[l] } else { identity }).collect();
        butterfly(lanes, &[4, 2, 1])
    };
    let c = f32r(std::f64::consts::LOG2_E);
    let mut out = Vec::with_capacity(a.len());
    for row in a.chunks(N) {
        let m = cta_fold(row, &f64::max, f64::NEG_INFINITY);
        let b = f32r(-m * c);
        let y: Vec<f64> = row.iter().map(|x| f32r(f32r(f32r(x * c) + b).exp2())).collect();
        let s = cta_fold(&y, &|p, q| f32r(p + q), -0.0);
        let r = f32r(1.0 / s);
        out.extend(y.iter().map(|v| Want { v: f32r(v * r), ulps: TRANSCENDENTAL_ULPS + 2 }));
    }
    vec![("B", out)]
}

/// `ewise_smem_pipeline`: A in [-2, 2] by 1/64, B in [-1, 1] by 1/16, S in [0.5, 2] by 1/8.
fn pipeline_inputs(name: &str, _: DType, e: usize) -> f64 {
    match name {
        "A" => ((e * 13) % 257) as f64 / 64.0 - 2.0,
        "B" => ((e * 7) % 33) as f64 / 16.0 - 1.0,
        _ => ((e * 5) % 13) as f64 / 8.0 + 0.5,
    }
}

/// Signed values mostly not exact in f16, plus the f16 overflow edge (65520 → inf, 65519 → 65504).
fn cast_inputs(_: &str, _: DType, e: usize) -> f64 {
    match e {
        1000 => 65520.0,
        1001 => 65519.0,
        _ => (e as f64 - 300.0) * 0.3,
    }
}

/// Multiples of 1/8 in [-1, 1], a different sequence per input: products are multiples of
/// 1/64 and sums of a few thousand of them stay exact in f32.
fn eighths(name: &str, _: DType, e: usize) -> f64 {
    let salt = if name == "A" { 3 } else { 11 };
    ((e * 7 + e / 97 + salt) % 17) as f64 / 8.0 - 1.0
}

/// `C = A @ B` (f64, exact here), rounded to C's dtype.
fn matmul(e: &Env) -> Expected {
    let ([m, k], [_, n]) = (e.dims2("A"), e.dims2("B"));
    let (a, b) = (e.get("A"), e.get("B"));
    let dt = e.dtype("C");
    let c =
        (0..m * n).map(|x| exact(round_to(dt, (0..k).map(|j| a[x / n * k + j] * b[j * n + x % n]).sum()))).collect();
    vec![("C", c)]
}

/// Multiples of 1/64 in [-4, 4].
fn exp_inputs(_: &str, _: DType, e: usize) -> f64 {
    ((e % 509) as f64 - 254.0) / 64.0
}

/// Small signed multiples of 1/4 (`Ag`) and 1/8 (`Bg`), different patterns.
fn packed_inputs(name: &str, _: DType, e: usize) -> f64 {
    if name == "Ag" {
        ((e * 7) % 61) as f64 * 0.25 - 7.5
    } else {
        ((e * 5) % 53) as f64 * 0.125 - 3.25
    }
}

// ---------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------

/// `B = fma(A, alpha, beta)` in f32, rounded once.
fn scale_rows(e: &Env) -> Expected {
    let (alpha, beta) = (e.scalar("alpha") as f32, e.scalar("beta") as f32);
    vec![("B", e.map("A", |a| exact((a as f32).mul_add(alpha, beta) as f64)))]
}

/// The kernel parameters' input values, by name.
struct Env {
    /// `(name, shape, values, dtype)` of every parameter.
    bufs: Vec<(String, Vec<i64>, Vec<f64>, DType)>,
    /// The scalar arguments of the launch.
    scalars: Vec<(&'static str, f64)>,
}

impl Env {
    fn find(&self, name: &str) -> &(String, Vec<i64>, Vec<f64>, DType) {
        self.bufs
            .iter()
            .find(|b| b.0 == name)
            .unwrap_or_else(|| panic!("the reference reads `{name}`, not a parameter"))
    }
    fn get(&self, name: &str) -> &[f64] {
        &self.find(name).2
    }
    fn dtype(&self, name: &str) -> DType {
        self.find(name).3
    }
    fn dims2(&self, name: &str) -> [usize; 2] {
        match self.find(name).1[..] {
            [m, n] => [m as usize, n as usize],
            ref s => panic!("`{name}` has shape {s:?}, the reference expects 2-D"),
        }
    }
    fn scalar(&self, name: &str) -> f64 {
        self.scalars.iter().find(|s| s.0 == name).unwrap_or_else(|| panic!("no scalar argument `{name}`")).1
    }
    fn map(&self, name: &str, f: impl Fn(f64) -> Want) -> Vec<Want> {
        self.get(name).iter().map(|&v| f(v)).collect()
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(name, path)` of every example, sorted.
fn examples() -> Vec<(String, PathBuf)> {
    let mut out = vec![];
    for dir in ["examples", "examples/bench"] {
        let dir = repo_root().join(dir);
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("list {}: {e}", dir.display())) {
            let path = entry.expect("read examples entry").path();
            if path.extension().is_some_and(|x| x == "py") {
                out.push((path.file_stem().unwrap().to_string_lossy().into_owned(), path));
            }
        }
    }
    out.sort();
    out
}

/// Parses and lowers an example, rendering diagnostics on failure.
fn lower(path: &Path, src: &str) -> Result<LKernel, String> {
    let file = path.display().to_string();
    let k = tirx_script::parse_kernel(&file, src).map_err(|d| tirx_ir::diag::render(&d, &file, src, false))?;
    let l =
        tirx_lower::lower_kernel(&k, &Default::default()).map_err(|d| tirx_ir::diag::render(&d, &file, src, false))?;
    Ok(l.lir)
}

/// Simulates, turning an error or a warning into a rendered failure.
fn simulate(k: &LKernel, params: &mut [Vec<u8>], opts: &SimOptions, path: &Path, src: &str) -> Result<String, String> {
    simulate_args(k, params, &[], opts, path, src)
}

fn simulate_args(
    k: &LKernel,
    params: &mut [Vec<u8>],
    scalars: &[ScalarValue],
    opts: &SimOptions,
    path: &Path,
    src: &str,
) -> Result<String, String> {
    let file = path.display().to_string();
    let r = tirx_sim::simulate_args(k, params, scalars, opts)
        .map_err(|e| format!("simulator error:\n{}", tirx_ir::diag::render(&[e.to_diagnostic()], &file, src, false)))?;
    if !r.warnings.is_empty() {
        let d: Vec<_> = r.warnings.iter().map(|w| w.to_diagnostic()).collect();
        return Err(format!("simulator warnings:\n{}", tirx_ir::diag::render(&d, &file, src, false)));
    }
    Ok(format!("{} CTA(s), {} instructions, no races/bounds/alignment errors", r.ctas_run, r.instructions))
}

/// Runs one example; `Ok` says what was checked.
fn check_example(name: &str, path: &Path) -> Result<String, String> {
    let src = std::fs::read_to_string(path).map_err(|e| format!("read: {e}"))?;
    let spec = spec(name).ok_or_else(|| {
        format!("no reference: add `{name}` to `spec()` and `TABLE` in crates/lower/tests/examples_sim.rs")
    })?;
    let k = lower(path, &src)?;
    match spec {
        Spec::Whole(w) => check_whole(&k, &w, path, &src),
        Spec::Tiled { tile, scale } => check_tiled(&k, tile, scale, path, &src),
    }
}

fn check_whole(k: &LKernel, w: &Whole, path: &Path, src: &str) -> Result<String, String> {
    if w.launches.is_empty() {
        return check_launch(k, w, &[], path, src);
    }
    let mut done = vec![];
    for args in w.launches {
        let text: Vec<String> = args.iter().map(|(n, v)| format!("{n} = {v}")).collect();
        let what = check_launch(k, w, args, path, src).map_err(|e| format!("with {}: {e}", text.join(", ")))?;
        done.push(format!("[{}] {what}", text.join(", ")));
    }
    Ok(done.join("; "))
}

/// One launch of a whole-grid example with scalar arguments `args` (by name).
fn check_launch(
    k: &LKernel,
    w: &Whole,
    args: &[(&'static str, f64)],
    path: &Path,
    src: &str,
) -> Result<String, String> {
    let mut values = vec![];
    for s in &k.scalars {
        let v = k.var(s.var);
        let x = args.iter().find(|a| a.0 == v.name).ok_or_else(|| format!("no value for scalar `{}`", v.name))?.1;
        values.push(if v.dtype.is_int() { ScalarValue::Int(x as i64) } else { ScalarValue::Float(x) });
    }
    let (spec, values) = tirx_sim::launch(k, &values).map_err(|e| format!("launch: {e}"))?;
    let k = &spec;
    let mut env = Env { bufs: vec![], scalars: args.to_vec() };
    let mut params = vec![];
    for id in &k.params {
        let b = k.buf(*id);
        let vals: Vec<f64> = if w.outputs.contains(&b.name.as_str()) {
            vec![SENTINEL; b.elems as usize]
        } else {
            (0..b.elems as usize).map(|e| round_to_dtype(b.dtype, (w.fill)(&b.name, b.dtype, e))).collect()
        };
        params.push(to_bytes(b.dtype, &vals));
        env.bufs.push((b.name.clone(), b.shape.clone(), vals, b.dtype));
    }
    for o in w.outputs {
        if !env.bufs.iter().any(|b| b.0 == *o) {
            return Err(format!("the table names output `{o}`, which is not a parameter"));
        }
    }
    let given = params.clone();
    let sim = simulate_args(k, &mut params, &values, &SimOptions::default(), path, src)?;
    let expected = (w.reference)(&env);
    let mut checked = vec![];
    for (i, id) in k.params.iter().enumerate() {
        let b = k.buf(*id);
        if let Some((_, want)) = expected.iter().find(|(n, _)| *n == b.name) {
            let got: Vec<f64> = from_bytes(b.dtype, &params[i]);
            let seen = compare(&b.name, b.dtype, &b.shape, &got, want)?;
            let tol = want.iter().map(|w| w.ulps).max().unwrap_or(0);
            checked.push(format!("{} ({} elems, {seen} ulp off at most, {tol} allowed)", b.name, got.len()));
        } else if w.outputs.contains(&b.name.as_str()) {
            return Err(format!("the reference gives no values for output `{}`", b.name));
        } else if params[i] != given[i] {
            return Err(format!("input `{}` was modified", b.name));
        } else {
            checked.push(format!("{} unchanged", b.name));
        }
    }
    Ok(format!("{}; {sim}", checked.join(", ")))
}

fn round_to_dtype(dt: DType, v: f64) -> f64 {
    if dt.is_float() {
        round_to(dt, v)
    } else {
        v
    }
}

/// Compares `got` with `want`, reporting the first mismatches with their coordinates;
/// `Ok` is the largest distance seen, in ulps.
fn compare(name: &str, dt: DType, shape: &[i64], got: &[f64], want: &[Want]) -> Result<u64, String> {
    if got.len() != want.len() {
        return Err(format!("`{name}`: {} elements, the reference has {}", got.len(), want.len()));
    }
    let dist: Vec<u64> = (0..got.len()).map(|i| distance(dt, got[i], want[i].v)).collect();
    let bad: Vec<usize> = (0..got.len()).filter(|&i| dist[i] > want[i].ulps as u64).collect();
    if bad.is_empty() {
        return Ok(dist.into_iter().max().unwrap_or(0));
    }
    let lines: Vec<String> = bad
        .iter()
        .take(8)
        .map(|&i| format!("  {name}{:?}: got {}, want {} (±{} ulp)", coords(i, shape), got[i], want[i].v, want[i].ulps))
        .collect();
    Err(format!("`{name}`: {} of {} elements wrong:\n{}", bad.len(), got.len(), lines.join("\n")))
}

fn coords(mut i: usize, shape: &[i64]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = i % shape[d] as usize;
        i /= shape[d] as usize;
    }
    c
}

/// How many ulps of `dt` apart two values are: 0 when equal (NaN equals NaN),
/// `u64::MAX` when not comparable (a NaN against a number, integers that differ).
fn distance(dt: DType, got: f64, want: f64) -> u64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0;
    }
    match (ordered(dt, got), ordered(dt, want)) {
        (Some(g), Some(w)) if got.is_finite() && want.is_finite() => g.abs_diff(w),
        _ => u64::MAX,
    }
}

/// The float's position on the number line of its dtype (adjacent values differ by 1).
fn ordered(dt: DType, v: f64) -> Option<i64> {
    let (bits, width) = match dt {
        DType::F32 => ((v as f32).to_bits() as u64, 32),
        DType::F16 => (f32_to_f16_bits(v as f32) as u64, 16),
        DType::BF16 => (f32_to_bf16_bits(v as f32) as u64, 16),
        DType::F64 => (v.to_bits(), 64),
        _ => return None,
    };
    let sign = 1u64 << (width - 1);
    let magnitude = (bits & (sign - 1)) as i64;
    Some(if bits & sign != 0 { -magnitude } else { magnitude })
}

// ----- big tiled kernels -----

/// Byte that fills `A` outside the window of simulated tiles: a finite, nonzero value
/// in every float dtype, so a read from a wrong tile shows up in `B`.
const FAR: u8 = 0x3C;

fn check_tiled(k: &LKernel, tile: [usize; 2], scale: f64, path: &Path, src: &str) -> Result<String, String> {
    let (a, b) = match k.params[..] {
        [a, b] => (k.buf(a), k.buf(b)),
        _ => return Err(format!("a tiled bench kernel takes (A, B); this one takes {} parameters", k.params.len())),
    };
    let (dt, [m, n]) = match b.shape[..] {
        [m, n] if a.shape == b.shape && a.dtype == b.dtype => (a.dtype, [m as usize, n as usize]),
        _ => return Err("a tiled bench kernel takes A and B of one 2-D shape and dtype".into()),
    };
    let grid = [n / tile[1], m / tile[0]];
    if k.grid != [grid[0] as u32, grid[1] as u32, 1] || m % tile[0] != 0 || n % tile[1] != 0 {
        return Err(format!("grid {:?} does not tile {m}x{n} by the table's {tile:?}", k.grid));
    }
    // One full row of tiles, plus the first tile of the next row (so `by` varies too).
    let ctas = grid[0] + 1;
    let window = 2 * tile[0] * n;
    let bytes = dt.bytes() as usize;
    let near: Vec<f64> = (0..window).map(|e| distinct("A", dt, e)).collect();
    let mut a_bytes = vec![FAR; m * n * bytes];
    a_bytes[..window * bytes].copy_from_slice(&to_bytes(dt, &near));
    let mut params = vec![a_bytes, vec![0u8; m * n * bytes]];
    let opts = SimOptions { grid_limit: Some(ctas as u64), ..Default::default() };
    let sim = simulate(k, &mut params, &opts, path, src)?;

    let simulated = |r: usize, c: usize| (r / tile[0]) * grid[0] + c / tile[1] < ctas;
    let want: Vec<Want> =
        (0..window).map(|e| exact(if simulated(e / n, e % n) { round_to(dt, scale * near[e]) } else { 0.0 })).collect();
    let got: Vec<f64> = from_bytes(dt, &params[1][..window * bytes]);
    compare(&b.name, dt, &[2 * tile[0] as i64, n as i64], &got, &want)?;
    if !all_bytes(&params[1][window * bytes..], 0) {
        return Err(format!("`{}` was written beyond the tiles of the {ctas} CTAs simulated", b.name));
    }
    if params[0][..window * bytes] != to_bytes(dt, &near)[..] || !all_bytes(&params[0][window * bytes..], FAR) {
        return Err(format!("input `{}` was modified", a.name));
    }
    Ok(format!(
        "{} == {scale} * {} on the {ctas} of {} CTAs simulated ({} elems), rest of {} untouched, {} unchanged; {sim}",
        b.name,
        a.name,
        grid[0] * grid[1],
        ctas * tile[0] * tile[1],
        b.name,
        a.name
    ))
}

/// Whether every byte is `v` (slice compares are memcmp: fast even unoptimised).
fn all_bytes(s: &[u8], v: u8) -> bool {
    let block = [v; 1 << 16];
    s.chunks(block.len()).all(|c| c == &block[..c.len()])
}

#[test]
fn every_example_matches_its_rust_reference() {
    let found = examples();
    let mut failures = vec![];
    for (name, path) in &found {
        let t = std::time::Instant::now();
        match check_example(name, path) {
            Ok(what) => eprintln!("ok   {name} ({:.2?}): {what}", t.elapsed()),
            Err(e) => failures.push(format!("FAIL {name} ({}):\n{e}", path.display())),
        }
    }
    for name in TABLE {
        if !found.iter().any(|(n, _)| n == name) {
            failures.push(format!("FAIL {name}: in the reference table but no examples/{name}.py exists"));
        }
        assert!(spec(name).is_some(), "TABLE lists `{name}`, which `spec()` does not know");
    }
    assert!(failures.is_empty(), "{} example(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// `src` with its top-level line `prefix…` replaced by `prefix value` (the way
/// python/bench/kernels.py resizes an example); exactly one line must match.
fn set_line(src: &str, prefix: &str, value: &str) -> String {
    let hits = src.lines().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(hits, 1, "`{prefix}` lines in the example");
    let lines: Vec<String> =
        src.lines().map(|l| if l.starts_with(prefix) { format!("{prefix}{value}") } else { l.to_string() }).collect();
    lines.join("\n") + "\n"
}

/// The persistent GEMM example `name` (examples/`name`.py) resized as the bench does, once per
/// `(M, N, K, CTAS, dtype)`, each value-checked against its matmul reference.
fn check_resized(name: &str, cases: &[(&str, &str, &str)]) {
    let path = repo_root().join(format!("examples/{name}.py"));
    let base = std::fs::read_to_string(&path).expect("read the example");
    let Some(Spec::Whole(w)) = spec(name) else { panic!("{name} is a whole-grid example") };
    for (mnk, ctas, dtype) in cases {
        let src = set_line(&set_line(&set_line(&base, "M, N, K = ", mnk), "CTAS = ", ctas), "dtype = ", dtype);
        let what = lower(&path, &src)
            .and_then(|k| check_whole(&k, &w, &path, &src))
            .unwrap_or_else(|e| panic!("{name}: M, N, K = {mnk}, CTAS = {ctas}, dtype = {dtype}:\n{e}"));
        eprintln!("ok   {name} {mnk} CTAS={ctas} {dtype}: {what}");
    }
}

/// examples/gemm_mma_tma.py: two rounds of tiles whose K steps wrap the stage ring within a tile
/// and across tiles (float16), a K of one stage per tile (phases wrap across tiles only), and an
/// idle CTA.
#[test]
fn gemm_mma_tma_shapes() {
    check_resized(
        "gemm_mma_tma",
        &[
            ("256, 512, 640", "2", "\"float16\""),
            ("512, 256, 64", "3", "\"bfloat16\""),
            ("128, 256, 192", "2", "\"bfloat16\""),
        ],
    );
}

/// examples/gemm_hopper.py: float16; one tile row (M = 128) with more CTAs than tiles (an idle
/// CTA) and K steps wrapping the stage ring within a tile; one CTA walking tiles in groups of 4
/// tile rows and three CTAs in groups of 8, both with fewer K steps than stages (the phases wrap
/// across tiles); sizes that are not tile multiples (TMA's zero fill and clipped stores).
#[test]
fn gemm_hopper_shapes() {
    check_resized(
        "gemm_hopper",
        &[
            ("256, 512, 256", "2", "\"float16\""),
            ("128, 512, 640", "3", "\"bfloat16\""),
            ("512, 512, 128", "1", "\"bfloat16\""),
            ("1024, 256, 64", "3", "\"float16\""),
            // Ragged (issue 29): partial tiles on every edge, a K step past K.
            ("200, 264, 200", "2", "\"bfloat16\""),
            ("72, 8, 8", "1", "\"float16\""),
            ("250, 520, 136", "3", "\"bfloat16\""),
        ],
    );
}
