//! docs/numerics.md, checked by value through the simulator: `fma` rounds once
//! on every dtype, 16-bit unary math and division compute in f32 and round
//! once, each honoured `rounding_mode` is exact, the others decline with
//! `CommonRule::Config`. References are independent of the simulator's method:
//! Rust's `f32::mul_add`, `half`'s f32 conversions, and exact integer
//! arithmetic rounded by [`round_exact`].

mod common;
use common::*;
use half::{bf16, f16};
use tirx_ir::{Arch, DType};
use tirx_lower::CommonRule;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
";

// ---- element values ----

fn encode(t: DType, v: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &x in v {
        match t {
            DType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16::from_f32(x as f32).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16::from_f32(x as f32).to_le_bytes()),
            other => panic!("no encoding for {other}"),
        }
    }
    out
}

fn decode(t: DType, b: &[u8]) -> Vec<f64> {
    match t {
        DType::F32 => b.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        DType::F16 => b.chunks(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        DType::BF16 => b.chunks(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
        other => panic!("no decoding for {other}"),
    }
}

/// A deterministic stream of bits.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value of type `t` with a random sign and significand and a binary exponent in `[-e, e)`.
    fn float(&mut self, t: DType, e: u64) -> f64 {
        let r = self.next();
        let x = f32::from_bits((r as u32 & 0x807f_ffff) | (((r >> 32) % (2 * e) + 127 - e) as u32) << 23);
        match t {
            DType::F16 => f16::from_f32(x).to_f64(),
            DType::BF16 => bf16::from_f32(x).to_f64(),
            _ => x as f64,
        }
    }
}

// ---- exact reference rounding ----

/// An exact value `num / den · 2^exp` (`den > 0`).
#[derive(Clone, Copy, Debug)]
struct Exact {
    num: i128,
    den: i128,
    exp: i32,
}

impl Exact {
    /// The exact value of a finite f64.
    fn of(x: f64) -> Exact {
        let bits = x.to_bits();
        let field = ((bits >> 52) & 0x7ff) as i32;
        let frac = (bits & ((1 << 52) - 1)) as i128;
        let (m, e) = if field == 0 { (frac, -1074) } else { (frac | 1 << 52, field - 1075) };
        let tz = if m == 0 { 0 } else { m.trailing_zeros() as i32 };
        Exact { num: if x < 0.0 { -(m >> tz) } else { m >> tz }, den: 1, exp: e + tz }
    }

    fn mul(self, o: Exact) -> Exact {
        Exact { num: self.num * o.num, den: self.den * o.den, exp: self.exp + o.exp }
    }

    fn div(self, o: Exact) -> Exact {
        let s = o.num.signum();
        Exact { num: self.num * o.den * s, den: self.den * o.num.abs(), exp: self.exp - o.exp }
    }

    /// A sum of two values with `den == 1` (shifts stay far below 127 bits for the inputs used here).
    fn add(self, o: Exact) -> Exact {
        assert!(self.den == 1 && o.den == 1);
        if o.num == 0 {
            return self;
        }
        if self.num == 0 {
            return o;
        }
        let e = self.exp.min(o.exp);
        Exact { num: (self.num << (self.exp - e)) + (o.num << (o.exp - e)), den: 1, exp: e }
    }
}

/// Significand bits, smallest normal exponent and largest finite value of `t`.
fn geometry(t: DType) -> (i32, i32, f64) {
    match t {
        DType::F32 => (24, -126, f32::MAX as f64),
        DType::F16 => (11, -14, 65504.0),
        DType::BF16 => (8, -126, bf16::MAX.to_f64()),
        other => panic!("{other}"),
    }
}

fn bit_len(x: i128) -> i32 {
    128 - x.leading_zeros() as i32
}

/// `v` rounded once to `t` in `mode` (PTX names), with IEEE overflow; an exact
/// zero gets the sign `zero_negative`.
fn round_exact(v: Exact, t: DType, mode: &str, zero_negative: bool) -> f64 {
    let (p, emin, max) = geometry(t);
    if v.num == 0 {
        return if zero_negative { -0.0 } else { 0.0 };
    }
    let (neg, n, d) = (v.num < 0, v.num.abs(), v.den);
    // floor(log2(n / d)).
    let mut e = bit_len(n) - bit_len(d);
    let below = if e >= 0 { n < d << e } else { n << -e < d };
    if below {
        e -= 1;
    }
    let q = (e + v.exp).max(emin) - (p - 1);
    let shift = v.exp - q;
    let (nn, dd) = if shift >= 0 { (n << shift, d) } else { (n, d << -shift) };
    let (m, r) = (nn / dd, nn % dd);
    let up = match mode {
        "rn" => 2 * r > dd || (2 * r == dd && m % 2 == 1),
        "rz" => false,
        "rp" => r > 0 && !neg,
        "rm" => r > 0 && neg,
        other => panic!("{other}"),
    };
    let toward_zero = mode == "rz" || (mode == "rp" && neg) || (mode == "rm" && !neg);
    let mut x = (m + i128::from(up)) as f64 * 2f64.powi(q);
    if x > max {
        x = if toward_zero { max } else { f64::INFINITY };
    }
    if neg {
        -x
    } else {
        x
    }
}

/// An exact zero sum is −0 toward −∞ (and for −0 + −0), +0 otherwise.
fn zero_sum_negative(a: f64, b: f64, mode: &str) -> bool {
    if mode == "rm" {
        !(a.is_sign_positive() && b.is_sign_positive())
    } else {
        a.is_sign_negative() && b.is_sign_negative()
    }
}

fn exact_fma(a: f64, b: f64, c: f64, t: DType, mode: &str) -> f64 {
    let p = a * b; // only its sign matters for a zero product
    round_exact(Exact::of(a).mul(Exact::of(b)).add(Exact::of(c)), t, mode, zero_sum_negative(p, c, mode))
}

// ---- kernels ----

/// A warp kernel: `A`, `B`, `C` (32×n of `t_in`, lane i owns row i) are loaded
/// into registers, `body` computes `D` (32×n of `t_out`), which is stored.
fn warp_kernel(t_in: DType, t_out: DType, n: usize, body: &str) -> String {
    let lay = format!("layout=TileLayout(S[(32, {n}):(1@laneid, 1)])");
    format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, D_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (32, {n}), "{t_in}")
    Bg = T.match_buffer(B_ptr, (32, {n}), "{t_in}")
    Cg = T.match_buffer(C_ptr, (32, {n}), "{t_in}")
    Dg = T.match_buffer(D_ptr, (32, {n}), "{t_out}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    A = T.alloc_buffer((32, {n}), "{t_in}", scope="local", {lay})
    B = T.alloc_buffer((32, {n}), "{t_in}", scope="local", {lay})
    C = T.alloc_buffer((32, {n}), "{t_in}", scope="local", {lay})
    D = T.alloc_buffer((32, {n}), "{t_out}", scope="local", {lay})
    Tx.warp.copy(A[0:32, 0:{n}], Ag[0:32, 0:{n}])
    Tx.warp.copy(B[0:32, 0:{n}], Bg[0:32, 0:{n}])
    Tx.warp.copy(C[0:32, 0:{n}], Cg[0:32, 0:{n}])
    {body}
    Tx.warp.copy(Dg[0:32, 0:{n}], D[0:32, 0:{n}])
"#
    )
}

/// Runs a [`warp_kernel`] on inputs `a, b, c` (of `t_in`, 32·n each; shorter ones are
/// padded with 1.0); returns `D` and the CUDA source.
fn run_warp(t_in: DType, t_out: DType, body: &str, inputs: [&[f64]; 3]) -> (Vec<f64>, String) {
    let len = inputs.iter().map(|v| v.len()).max().unwrap_or(0);
    let n = len.div_ceil(32);
    let src = warp_kernel(t_in, t_out, n, &body.replace("{n}", &n.to_string()));
    let l = lower(&src);
    let pad =
        |v: &[f64]| encode(t_in, &v.iter().copied().chain(std::iter::repeat(1.0)).take(32 * n).collect::<Vec<_>>());
    let mut params = vec![pad(inputs[0]), pad(inputs[1]), pad(inputs[2]), encode(t_out, &vec![0.0; 32 * n])];
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()) {
        panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
    }
    let cuda = tirx_cuda::generate(&l.lir).unwrap_or_else(|e| panic!("{e}\n{}", l.lir)).source;
    (decode(t_out, &params[3])[..len].to_vec(), cuda)
}

fn assert_bits(got: &[f64], want: &[f64], inputs: [&[f64]; 3], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let same = g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
        assert!(
            same,
            "{what}: element {i} of ({}, {}, {}): got {g:e}, want {w:e}",
            inputs[0][i], inputs[1][i], inputs[2][i]
        );
    }
}

/// `(a, b, c)` triples: random ones, and as many where `c` cancels the rounded
/// product, so that the result is the product's rounding error (lost by `a·b + c`).
fn fma_inputs(t: DType, rng: &mut Rng, n: usize, e: u64) -> [Vec<f64>; 3] {
    let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
    for i in 0..n {
        let (x, y) = (rng.float(t, e), rng.float(t, e));
        let z = if i % 2 == 0 { -exact_fma(x, y, 0.0, t, "rn") } else { rng.float(t, e) };
        a.push(x);
        b.push(y);
        c.push(z);
    }
    [a, b, c]
}

#[test]
fn fma_f32_is_fused() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let [a, b, c] = fma_inputs(DType::F32, &mut rng, 4096, 20);
    let body = "Tx.warp.fma(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}], C[0:32, 0:{n}])";
    let (got, cuda) = run_warp(DType::F32, DType::F32, body, [&a, &b, &c]);
    let want: Vec<f64> = (0..a.len()).map(|i| (a[i] as f32).mul_add(b[i] as f32, c[i] as f32) as f64).collect();
    let unfused = (0..a.len()).filter(|&i| ((a[i] as f32) * (b[i] as f32) + c[i] as f32) as f64 != want[i]).count();
    assert!(unfused > 1000, "the inputs must tell fused from unfused ({unfused} differ)");
    assert_bits(&got, &want, [&a, &b, &c], "f32 fma");
    assert!(cuda.contains("__fmaf_rn("), "{cuda}");
}

/// f16 and bf16 fma, packed (`__hfma2`, even rows) and scalar (`__hfma`, odd
/// rows), against the exact result rounded once; the first cases are
/// products on a midpoint plus a tiny addend, which round the wrong way when
/// the sum is rounded first (in f32, or in f64 for bf16).
#[test]
fn fma_16bit_rounds_once() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for t in [DType::F16, DType::BF16] {
        // f16 exponents stay small enough that no product or sum overflows.
        let e = if t == DType::F16 { 7 } else { 12 };
        let [mut a, mut b, mut c] = fma_inputs(t, &mut rng, 2046, e);
        let tiny = if t == DType::F16 { 2f64.powi(-24) } else { 2f64.powi(-100) };
        let (x, y) = if t == DType::F16 { (3.0, 683.0 / 2048.0) } else { (7.0, 37.0 / 256.0) };
        for (v, w) in [(&mut a, x), (&mut b, y), (&mut c, tiny)] {
            v.insert(0, w);
        }
        a.insert(1, x);
        b.insert(1, y);
        c.insert(1, -tiny);
        let want: Vec<f64> = (0..a.len()).map(|i| exact_fma(a[i], b[i], c[i], t, "rn")).collect();
        for (n, intrinsic) in [(64, "__hfma2("), (63, "__hfma(")] {
            let len = 32 * n;
            let body = "Tx.warp.fma(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}], C[0:32, 0:{n}])";
            let (got, cuda) = run_warp(t, t, body, [&a[..len], &b[..len], &c[..len]]);
            assert_bits(&got, &want[..len], [&a, &b, &c], &format!("{t} fma, {n} per lane"));
            assert!(cuda.contains(intrinsic), "{t}: {intrinsic}\n{cuda}");
        }
    }
}

/// The f32 reference of a unary op, as `docs/numerics.md` §1 computes it.
fn unary_f32(op: &str, x: f32) -> f32 {
    match op {
        "silu" => x / (1.0 + (-x).exp()),
        "exp" => (x * 1.5 + 0.25).exp(),
        "exp2" => x.exp2(),
        "log2" => x.log2(),
        "sqrt" => x.sqrt(),
        "reciprocal" => 1.0 / x,
        other => panic!("{other}"),
    }
}

/// 16-bit unary ops (and fdiv) compute in f32 and round once: 0 ulp from the f32 reference rounded by `half`.
#[test]
fn unary_16bit_rounds_once() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for t in [DType::F16, DType::BF16] {
        let a: Vec<f64> = (0..2048).map(|_| rng.float(t, 4).abs()).collect();
        let b: Vec<f64> = (0..2048).map(|_| rng.float(t, 4)).collect();
        let to_t = |x: f32| if t == DType::F16 { f16::from_f32(x).to_f64() } else { bf16::from_f32(x).to_f64() };
        for op in ["silu", "exp", "exp2", "log2", "sqrt", "reciprocal"] {
            let extra = if op == "exp" { ", bias=0.25, scale=1.5" } else { "" };
            let body = format!("Tx.warp.{op}(D[0:32, 0:{{n}}], A[0:32, 0:{{n}}]{extra})");
            let (got, _) = run_warp(t, t, &body, [&a, &b, &b]);
            let want: Vec<f64> = a.iter().map(|&x| to_t(unary_f32(op, x as f32))).collect();
            assert_bits(&got, &want, [&a, &b, &b], &format!("{t} {op}"));
        }
        let body = "Tx.warp.fdiv(D[0:32, 0:{n}], B[0:32, 0:{n}], A[0:32, 0:{n}])";
        let (got, _) = run_warp(t, t, body, [&a, &b, &b]);
        let want: Vec<f64> = (0..a.len()).map(|i| to_t(b[i] as f32 / a[i] as f32)).collect();
        assert_bits(&got, &want, [&b, &a, &a], &format!("{t} fdiv"));
    }
}

/// The f32 formula of an activation (docs/numerics.md §2), as PyTorch computes it.
fn activation_f32(op: &str, x: f32) -> f32 {
    let k = (std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::SQRT_2 * 0.5) as f32;
    match op {
        "tanh" => x.tanh(),
        "sigmoid" => sigmoid_f32(x),
        "softplus" if x > 20.0 => x,
        "softplus" => x.exp().ln_1p(),
        "erf" => libm::erff(x),
        "gelu" => x * 0.5 * libm::erfcf(x * -std::f32::consts::FRAC_1_SQRT_2),
        "gelu_tanh" => x * sigmoid_f32(2.0 * k * (x + 0.044715 * (x * x * x))),
        other => panic!("{other}"),
    }
}

/// `1 / (1 + exp(-t))`, evaluated as docs/numerics.md §2 says (no overflow).
fn sigmoid_f32(t: f32) -> f32 {
    let e = (-t.abs()).exp();
    if t >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    }
}

/// The same in f64: the reference the accuracy is measured against.
fn activation_f64(op: &str, x: f64) -> f64 {
    let k = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::SQRT_2 * 0.5;
    match op {
        "tanh" => x.tanh(),
        "sigmoid" => 1.0 / (1.0 + (-x).exp()),
        "softplus" if x > 20.0 => x,
        "softplus" => x.exp().ln_1p(),
        "erf" => libm::erf(x),
        "gelu" => x * 0.5 * libm::erfc(-x * std::f64::consts::FRAC_1_SQRT_2),
        "gelu_tanh" => x / (1.0 + (-2.0 * k * (x + 0.044715 * x * x * x)).exp()),
        other => panic!("{other}"),
    }
}

/// `op` as a tile call on `A`, writing `D`.
fn activation_call(op: &str) -> String {
    match op {
        "gelu_tanh" => "Tx.warp.gelu(D[0:32, 0:{n}], A[0:32, 0:{n}], approximate=\"tanh\")".into(),
        op => format!("Tx.warp.{op}(D[0:32, 0:{{n}}], A[0:32, 0:{{n}}])"),
    }
}

const ACTIVATIONS: [&str; 6] = ["tanh", "sigmoid", "softplus", "erf", "gelu", "gelu_tanh"];

/// Activations compute their f32 formula and round once: 16-bit results are the
/// f32 formula rounded by `half`, bit for bit; f32 results the formula itself.
#[test]
fn activations_round_once_from_their_f32_formula() {
    let mut rng = Rng(0x0dd1_7ea5_e5c0_ffee);
    for t in [DType::F32, DType::F16, DType::BF16] {
        let mut a: Vec<f64> = (0..2040).map(|_| rng.float(t, 5)).collect();
        // The ends: saturation, softplus's threshold, overflow of exp.
        a.extend([0.0, -0.0, 20.0, 21.0, -30.0, 90.0, f64::INFINITY, f64::NEG_INFINITY]);
        let to_t = |x: f32| match t {
            DType::F16 => f16::from_f32(x).to_f64(),
            DType::BF16 => bf16::from_f32(x).to_f64(),
            _ => x as f64,
        };
        // 16-bit inputs are what the buffer holds.
        let a: Vec<f64> = a.iter().map(|&x| to_t(x as f32)).collect();
        for op in ACTIVATIONS {
            let (got, cuda) = run_warp(t, t, &activation_call(op), [&a, &a, &a]);
            let want: Vec<f64> = a.iter().map(|&x| to_t(activation_f32(op, x as f32))).collect();
            assert_bits(&got, &want, [&a, &a, &a], &format!("{t} {op}"));
            let f = match op {
                "tanh" => "tanhf(",
                "sigmoid" | "gelu_tanh" => "expf(",
                "softplus" => "log1pf(",
                "gelu" => "erfcf(",
                _ => "erff(",
            };
            assert!(cuda.contains(f), "{op}: {f}\n{cuda}");
        }
    }
}

/// The f32 results against the correctly rounded value of the formula, in units in
/// the last place (the simulator's host math; docs/numerics.md §2 states these bounds). Where
/// the function amplifies the rounding of its own argument — erfc(-x/√2) for very
/// negative x, exp(-2u) in the tanh form — the bound grows with the argument's square
/// or size: that error is in every f32 formula, PyTorch's included (its erf form
/// cancels to no correct digit below x ≈ -5). Subnormal results are bounded absolutely.
#[test]
fn activations_f32_accuracy() {
    let mut rng = Rng(0x5eed_0fac_717a_7e00);
    let a: Vec<f64> = (0..4096).map(|_| rng.float(DType::F32, 6)).collect();
    let k = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::SQRT_2;
    let bounds: [(&str, &dyn Fn(f64) -> f64); 6] = [
        ("tanh", &|_| 2.0),
        ("sigmoid", &|_| 3.0),
        ("softplus", &|_| 3.0),
        ("erf", &|_| 2.0),
        ("gelu", &|x| 4.0 + 1.25 * x * x),
        ("gelu_tanh", &|x| 4.0 + 2.0 * (k * (x + 0.044715 * x * x * x)).abs()),
    ];
    for (op, bound) in bounds {
        let (got, _) = run_warp(DType::F32, DType::F32, &activation_call(op), [&a, &a, &a]);
        for (&g, &x) in got.iter().zip(&a) {
            // Ulps between the result and the correctly rounded value, counted on the f32 grid.
            let want = activation_f64(op, x) as f32;
            // Below the normal range only the absolute error is bounded: an overflowing
            // exp(-2u) or an underflowing product may give 0 for a subnormal result.
            if want.abs() < f32::MIN_POSITIVE && (g as f32 - want).abs() < f32::MIN_POSITIVE {
                continue;
            }
            let err = ordered(g as f32).abs_diff(ordered(want)) as f64;
            assert!(err <= bound(x), "f32 {op}({x:e}) = {g:e}: {err} ulp from {want:e} (bound {:.1})", bound(x));
        }
    }
}

/// Activation parameters are checked: `approximate=` names a form (at the keyword, by
/// the script), softplus's `beta`/`threshold` are compile-time numbers and `beta` is
/// non-zero (a `parse` decline of every variant).
#[test]
fn activation_parameters_are_checked() {
    let src = warp_kernel(DType::F32, DType::F32, 1, "Tx.warp.gelu(D[0:32, 0:1], A[0:32, 0:1], approximate=\"fast\")");
    let d = tirx_script::parse_kernel("k.py", &src).unwrap_err();
    assert!(d[0].message.contains("must be one of \"none\", \"tanh\", found a string"), "{}", d[0].message);
    for (call, words) in [
        (
            "Tx.warp.softplus(D[0:32, 0:1], A[0:32, 0:1], beta=0.0)",
            "softplus `beta=0`: beta is a finite non-zero number",
        ),
        (
            "Tx.warp.softplus(D[0:32, 0:1], A[0:32, 0:1], threshold=Ag[0, 0])",
            "softplus `threshold=` must be a compile-time number",
        ),
    ] {
        let (ex, _) =
            tirx_lower::explain_kernel(&parse(&warp_kernel(DType::F32, DType::F32, 1, call)), &Default::default());
        let t = &ex[3].tried[0];
        assert_eq!(t.rule, Some(CommonRule::Parse.into()), "{}", ex[3].render());
        assert!(t.reason.contains(words), "{}", t.reason);
    }
}

/// `x`'s place on the f32 grid, in order (adjacent floats differ by 1; ±0 are one place).
fn ordered(x: f32) -> i64 {
    let b = x.to_bits() as i32;
    i64::from(if b < 0 { i32::MIN.wrapping_sub(b) } else { b })
}

/// Inputs for the rounding-mode checks: random, plus exact results, zero sums and ties.
fn mode_inputs(rng: &mut Rng) -> [Vec<f64>; 3] {
    let mut v: [Vec<f64>; 3] = [vec![], vec![], vec![]];
    // x + −x, x − x, fma zeros of equal and of opposite signs, exact results.
    let special = [(2.0, -2.0, 1.0), (1.5, 1.5, 0.25), (-0.0, 1.0, -0.0), (-0.0, 3.0, 0.0), (1.0, 3.0, 7.0)];
    for (x, y, z) in special {
        v[0].push(x);
        v[1].push(y);
        v[2].push(z);
    }
    while v[0].len() < 2048 {
        for (k, e) in [20, 20, 20].into_iter().enumerate() {
            v[k].push(rng.float(DType::F32, e));
        }
    }
    v
}

/// Every honoured `rounding_mode`, bit-exact: f32 add/sub/mul/fdiv/reciprocal/fma,
/// f32 arithmetic into an f16 destination, f16 fdiv, casts to f16 and bf16.
#[test]
fn rounding_modes_are_exact() {
    let mut rng = Rng(0x0000_ddc0_ffee_5eed);
    let [a, b, c] = mode_inputs(&mut rng);
    let ex = Exact::of;
    let (f32t, f16t, bf16t) = (DType::F32, DType::F16, DType::BF16);
    for mode in ["rn", "rz", "rm", "rp"] {
        let rm = format!(", rounding_mode=\"{mode}\"");
        let sum = |x: f64, y: f64, t| round_exact(ex(x).add(ex(y)), t, mode, zero_sum_negative(x, y, mode));
        let quot =
            |x: f64, y: f64, t| round_exact(ex(x).div(ex(y)), t, mode, x.is_sign_negative() != y.is_sign_negative());
        type Case<'a> = (&'a str, DType, &'a dyn Fn(usize) -> f64, &'a str);
        let cases: [Case; 8] = [
            ("add(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}]", f32t, &|i| sum(a[i], b[i], f32t), "__fadd_"),
            ("sub(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}]", f32t, &|i| sum(a[i], -b[i], f32t), "__fsub_"),
            (
                "mul(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}]",
                f32t,
                &|i| {
                    round_exact(ex(a[i]).mul(ex(b[i])), f32t, mode, a[i].is_sign_negative() != b[i].is_sign_negative())
                },
                "__fmul_",
            ),
            ("fdiv(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}]", f32t, &|i| quot(a[i], b[i], f32t), "__fdiv_"),
            ("reciprocal(D[0:32, 0:{n}], B[0:32, 0:{n}]", f32t, &|i| quot(1.0, b[i], f32t), "__fdiv_"),
            (
                "fma(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}], C[0:32, 0:{n}]",
                f32t,
                &|i| exact_fma(a[i], b[i], c[i], f32t, mode),
                "__fmaf_",
            ),
            // f32 arithmetic into f16: the conversion rounds the same way, so the exact sum rounds once.
            ("add(D[0:32, 0:{n}], A[0:32, 0:{n}], B[0:32, 0:{n}]", f16t, &|i| sum(a[i], b[i], f16t), "__float2half_"),
            (
                "cast(D[0:32, 0:{n}], A[0:32, 0:{n}]",
                bf16t,
                &|i| round_exact(ex(a[i]), bf16t, mode, a[i].is_sign_negative()),
                "__float2bfloat16_",
            ),
        ];
        for (call, t_out, want, intrinsic) in cases {
            let body = format!("Tx.warp.{call}{rm})");
            let (got, cuda) = run_warp(f32t, t_out, &body, [&a, &b, &c]);
            let want: Vec<f64> = (0..a.len()).map(want).collect();
            assert_bits(&got, &want, [&a, &b, &c], &format!("{body} -> {t_out}"));
            let suffix = match mode {
                "rm" => "rd",
                "rp" => "ru",
                m => m,
            };
            if mode != "rn" || call.starts_with("fma") {
                assert!(cuda.contains(&format!("{intrinsic}{suffix}(")), "{body}: {intrinsic}{suffix}\n{cuda}");
            }
        }
        // A cast to f16 of values around the f16 range: overflow, subnormals.
        let h: Vec<f64> =
            a.iter().enumerate().map(|(i, x)| x * [1.0, 3000.0, 1e-4, 1e-7][i % 4]).map(|x| x as f32 as f64).collect();
        let (got, _) =
            run_warp(f32t, f16t, &format!("Tx.warp.cast(D[0:32, 0:{{n}}], A[0:32, 0:{{n}}]{rm})"), [&h, &b, &c]);
        let want: Vec<f64> = h.iter().map(|&x| round_exact(ex(x), f16t, mode, x.is_sign_negative())).collect();
        assert_bits(&got, &want, [&h, &b, &c], &format!("cast to f16, {mode}"));
        // f16 division computes in f32: both roundings directed, so once overall.
        let (ha, hb): (Vec<f64>, Vec<f64>) = (0..2048).map(|_| (rng.float(f16t, 12), rng.float(f16t, 12))).unzip();
        let (got, _) = run_warp(
            f16t,
            f16t,
            &format!("Tx.warp.fdiv(D[0:32, 0:{{n}}], A[0:32, 0:{{n}}], B[0:32, 0:{{n}}]{rm})"),
            [&ha, &hb, &hb],
        );
        let want: Vec<f64> = (0..2048).map(|i| quot(ha[i], hb[i], f16t)).collect();
        assert_bits(&got, &want, [&ha, &hb, &hb], &format!("f16 fdiv, {mode}"));
    }
}

/// Rounding modes the GPU has no instruction for, unknown modes, and a bf16 fma
/// on a target without `fma.rn.bf16`, decline with a typed rule.
#[test]
fn unsupported_rounding_declines() {
    let cases = [
        (
            DType::F16,
            "Tx.warp.add(D[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8], rounding_mode=\"rz\")",
            CommonRule::Config,
            "rounding_mode='rz' on float16 add: the GPU has no float16 add with directed rounding",
        ),
        (
            DType::BF16,
            "Tx.warp.fma(D[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8], C[0:32, 0:8], rounding_mode=\"rm\")",
            CommonRule::Config,
            "supported on add, sub, mul, fdiv, reciprocal and fma",
        ),
        (
            DType::F32,
            "Tx.warp.exp(D[0:32, 0:8], A[0:32, 0:8], rounding_mode=\"rn\")",
            CommonRule::Config,
            "rounding_mode='rn' on exp",
        ),
        (
            DType::F32,
            "Tx.warp.maximum(D[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8], rounding_mode=\"rz\")",
            CommonRule::Config,
            "on maximum",
        ),
    ];
    for (t, body, want_rule, want) in cases {
        let src = warp_kernel(t, t, 8, body);
        let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
        let c = ex.iter().find(|c| c.op != "copy").expect("the elementwise call");
        assert_eq!(rule(c, "reg"), want_rule, "{body}");
        let text = render(&lower_errors(&src), &src);
        assert!(text.contains(want), "want `{want}` in:\n{text}");
    }
    // Values that are no rounding mode at all are script errors at the keyword.
    for (v, want) in [("\"rq\"", "`rounding_mode` expects"), ("1", "`rounding_mode` expects")] {
        let body = format!("Tx.warp.add(D[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8], rounding_mode={v})");
        let src = warp_kernel(DType::F32, DType::F32, 8, &body);
        let d = tirx_script::parse_kernel("k.py", &src).expect_err("a bad rounding_mode value");
        assert!(d[0].message.contains(want), "{:?}", d[0].message);
    }
    let src = warp_kernel(DType::BF16, DType::BF16, 8, "Tx.warp.fma(D[0:32, 0:8], A[0:32, 0:8], 2.0, C[0:32, 0:8])");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &tirx_lower::LowerOptions::for_arch(Arch::SM_75));
    let c = ex.iter().find(|c| c.op != "copy").expect("the fma call");
    assert_eq!(rule(c, "reg"), CommonRule::Arch, "{}", c.render());
    assert!(tried(c, "reg").reason.contains("bfloat16 fma needs sm_80"), "{}", c.render());
}
