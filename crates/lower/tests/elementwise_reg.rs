//! elementwise → reg: seed 001 (warp sqrt), the register cases of §5.5–§5.7
//! that apply to sm_90 (unary ops on mma fragments with bias/scale, thread-wise
//! ops, casts with pair conversions, binary ops with broadcasting and scalars,
//! fma, maximum/minimum), packed f16/bf16 pairs, and the §3.7 scope errors.
//! Values are checked through the simulator against a Rust reference.

mod common;
use common::*;
use tirx_ir::lir::{LStmt, LStmtKind, PackedOp, PairOp};
use tirx_ir::DType;
use tirx_lower::Lowered;
use tirx_lower::{CommonRule, EwiseRule, Rule};

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import R, S, TileLayout, laneid, tid_in_wg, tx, warpid, wg_local_layout, wid_in_wg

@T.prim_func
";

// ---- element encodings (round to nearest even) ----

fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 255 {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    let (mant, shift, base) = if e <= 0 {
        if e < -10 {
            return sign;
        }
        (man | 0x80_0000, (14 - e) as u32, 0u32)
    } else {
        (man, 13, (e as u32) << 10)
    };
    let mut h = base | (mant >> shift);
    let rem = mant & ((1 << shift) - 1);
    let mid = 1 << (shift - 1);
    if rem > mid || (rem == mid && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}

fn f16_value(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let man = (h & 0x3ff) as f64;
    sign * match exp {
        0 => man * 2f64.powi(-24),
        31 if man != 0.0 => f64::NAN,
        31 => f64::INFINITY,
        _ => (1.0 + man / 1024.0) * 2f64.powi(exp - 15),
    }
}

fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}

fn encode(dt: DType, v: &[f64]) -> Vec<u8> {
    let mut out = Vec::new();
    for &x in v {
        match dt {
            DType::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
            DType::F16 => out.extend_from_slice(&f16_bits(x as f32).to_le_bytes()),
            DType::BF16 => out.extend_from_slice(&bf16_bits(x as f32).to_le_bytes()),
            other => panic!("no encoding for {other}"),
        }
    }
    out
}

fn decode(dt: DType, b: &[u8]) -> Vec<f64> {
    match dt {
        DType::F32 => b.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect(),
        DType::F16 => b.chunks(2).map(|c| f16_value(u16::from_le_bytes([c[0], c[1]]))).collect(),
        DType::BF16 => {
            b.chunks(2).map(|c| f32::from_bits((u16::from_le_bytes([c[0], c[1]]) as u32) << 16) as f64).collect()
        }
        other => panic!("no decoding for {other}"),
    }
}

/// `x` rounded to `dt` (what the kernel receives for an input value).
fn q(dt: DType, x: f64) -> f64 {
    decode(dt, &encode(dt, &[x]))[0]
}

/// Lowers and simulates with the given parameters; returns them decoded.
fn run(src: &str, params: &[(DType, Vec<f64>)]) -> (Lowered, Vec<Vec<f64>>) {
    let l = lower(src);
    let mut bytes: Vec<Vec<u8>> = params.iter().map(|(t, v)| encode(*t, v)).collect();
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut bytes, &tirx_sim::SimOptions::default()) {
        panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
    }
    let out = params.iter().zip(&bytes).map(|((t, _), b)| decode(*t, b)).collect();
    (l, out)
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g - w).abs() <= tol * (1.0 + w.abs()) || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: element {i}: got {g}, want {w}");
    }
}

/// Inputs in [lo, hi): a deterministic spread.
fn spread(n: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|i| lo + (hi - lo) * (((i * 37 + 11) % 101) as f64 / 101.0)).collect()
}

fn stmts(l: &Lowered) -> Vec<LStmtKind> {
    fn walk(s: &[LStmt], out: &mut Vec<LStmtKind>) {
        for st in s {
            out.push(st.kind.clone());
            match &st.kind {
                LStmtKind::For { body, .. } => walk(body, out),
                LStmtKind::If { then_body, else_body, .. } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&l.lir.body, &mut out);
    out
}

fn packed_ops(l: &Lowered) -> Vec<PackedOp> {
    stmts(l)
        .into_iter()
        .filter_map(|k| if let LStmtKind::Pair(PairOp::Packed2 { op, .. }) = k { Some(op) } else { None })
        .collect()
}

fn cast2_count(l: &Lowered) -> usize {
    stmts(l).into_iter().filter(|k| matches!(k, LStmtKind::Pair(PairOp::Cast2 { .. }))).count()
}

/// The explain record of the first call of `op`.
fn ewise<'a>(l: &'a Lowered, op: &str) -> &'a tirx_lower::CallExplain {
    l.explain.iter().find(|c| c.op == op).unwrap_or_else(|| panic!("no {op} call"))
}

fn chosen_reg(l: &Lowered, op: &str) -> (Option<u32>, Option<u64>) {
    let c = ewise(l, op);
    assert_eq!(c.chosen.as_deref(), Some("reg"), "{}", c.render());
    (c.vec, c.rounds)
}

#[test]
fn seed_001_warp_sqrt() {
    let src =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/ewise_sqrt_warp.py")).unwrap();
    let a = spread(256, 0.0, 50.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 256])]);
    let want: Vec<f64> = a.iter().map(|&x| (x as f32).sqrt() as f64).collect();
    assert_eq!(out[1], want, "B == sqrt(A) exactly");
    assert_eq!(chosen_reg(&l, "sqrt"), (Some(1), Some(8)));
    let summary = &tried(ewise(&l, "sqrt"), "reg").reason;
    assert!(summary.contains("per-thread bundle 8 elements (register loops [8]; register strides per loop: dst [1], src [1]); one float32 op per element"), "{summary}");
}

/// The per-warp 16×128 mma accumulator fragment of §5.5: element (r, c) on lane
/// 4·(r%8) + (c%8)/2, register 32·(r/8) + 2·(c/8) + c%2.
const FRAG: &str = "TileLayout(S[(2, 8, 16, 4, 2):(32, 4@laneid, 2, 1@laneid, 1)])";

fn unary_op(op: &str, x: f64) -> f64 {
    match op {
        "reciprocal" => 1.0 / x,
        "exp" => x.exp(),
        "exp2" => x.exp2(),
        "log2" => x.log2(),
        "sqrt" => x.sqrt(),
        "silu" => x / (1.0 + (-x).exp()),
        "zero" => 0.0,
        other => panic!("{other}"),
    }
}

/// test_unary_op_local (+ with_bias_scale): warps apply an op to their own
/// fragment, loaded from and stored to global memory by `copy → reg`.
fn fragment_unary(op: &str, src_t: &str, dst_t: &str, warps: i64, extra: &str, bias: Option<f64>) {
    let rows = 16 * warps;
    let bias_decl = if extra.contains("bias=Bi") {
        format!("Bi = T.alloc_buffer((16, 128), \"{src_t}\", scope=\"local\", layout={FRAG})\n    Tx.warp.fill(Bi[0:16, 0:128], 0.25)\n    ")
    } else {
        String::new()
    };
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({rows}, 128), "{src_t}")
    B = T.match_buffer(B_ptr, ({rows}, 128), "{dst_t}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{t}])
    w = T.warp_id([{warps}])
    X = T.alloc_buffer((16, 128), "{src_t}", scope="local", layout={FRAG})
    Y = T.alloc_buffer((16, 128), "{dst_t}", scope="local", layout={FRAG})
    {bias_decl}Tx.warp.copy(X[0:16, 0:128], A[w * 16 : w * 16 + 16, 0:128])
    Tx.warp.{op}(Y[0:16, 0:128], X[0:16, 0:128]{extra})
    Tx.warp.copy(B[w * 16 : w * 16 + 16, 0:128], Y[0:16, 0:128])
"#,
        t = 32 * warps
    );
    let n = (rows * 128) as usize;
    let a: Vec<f64> = spread(n, 0.5, 2.0).into_iter().map(|x| q(dt(src_t), x)).collect();
    let (l, out) = run(&src, &[(dt(src_t), a.clone()), (dt(dst_t), vec![0.0; n])]);
    let scale = if extra.contains("scale=1.5") { 1.5 } else { 1.0 };
    let want: Vec<f64> = a.iter().map(|&x| unary_op(op, x * scale + bias.unwrap_or(0.0))).collect();
    close(&out[1], &want, 1e-2, &format!("{op} {src_t}->{dst_t} warps={warps} {extra}"));
    assert_eq!(chosen_reg(&l, op), (Some(1), Some(64)));
}

#[test]
fn unary_on_fragments() {
    for warps in [1, 4] {
        for op in ["reciprocal", "exp", "exp2", "log2"] {
            for (s, d) in [("float16", "float16"), ("float32", "float16"), ("float32", "bfloat16")] {
                fragment_unary(op, s, d, warps, "", None);
            }
        }
    }
}

#[test]
fn unary_with_bias_and_scale() {
    for op in ["sqrt", "exp"] {
        for (s, d) in [("float32", "float32"), ("float32", "float16"), ("float32", "bfloat16")] {
            fragment_unary(op, s, d, 1, ", bias=0.88, scale=1.5", Some(0.88));
            fragment_unary(op, s, d, 1, ", bias=Bi[0:16, 0:128], scale=1.5", Some(0.25));
        }
    }
}

/// One thread's `exp2` of `n` float32 values, `A` through registers into `B`, with the call's
/// `attrs` (e.g. `, ftz=True`).
fn exp2_kernel(n: usize, attrs: &str) -> String {
    format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({n},), "float32")
    B = T.match_buffer(B_ptr, ({n},), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    X = T.alloc_local(({n},), "float32")
    Tx.copy(X[0:{n}], A[0:{n}])
    Tx.exp2(X[0:{n}], X[0:{n}]{attrs})
    Tx.copy(B[0:{n}], X[0:{n}])
"#
    )
}

/// `exp2(..., ftz=True)` flushes results below 2^-126 to zero (and `exp2` keeps them): float32
/// values whose powers of two are normal, subnormal, or round below the smallest subnormal.
#[test]
fn exp2_flushes_subnormal_results_with_ftz() {
    let xs = [-160.0, -140.0, -127.0, -126.0, -125.5, -1.0, 0.0, 7.25];
    for ftz in [false, true] {
        let src = exp2_kernel(8, if ftz { ", ftz=True" } else { ", ftz=False" });
        let (_, out) = run(&src, &[(DType::F32, xs.to_vec()), (DType::F32, vec![0.0; 8])]);
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| {
                let r = (x as f32).exp2();
                f64::from(if ftz && r.is_subnormal() { 0.0 } else { r })
            })
            .collect();
        assert_eq!(out[1], want, "exp2(ftz={ftz})");
        assert_eq!(out[1][1] == 0.0, ftz, "2^-140 is subnormal: kept by exp2, flushed by ftz");
    }
}

/// `exp2(..., ftz=True, pipe="fma")` (FlashAttention-4's polynomial on the FMA pipe): within
/// 7.5e-5 relative of 2^x where the result is normal, over the softmax's range and the whole
/// float32 one; 0 below 2^-126 (and, at most, within that error of it) and at -inf, +inf from
/// 2^127.5 on, NaN kept; no MUFU in its CUDA; and refused without `ftz=True` (it flushes), the
/// fix named.
#[test]
fn exp2_on_the_fma_pipe() {
    let body = |attrs: &str| exp2_kernel(4096, attrs);
    let special = [f64::NEG_INFINITY, -1000.0, -127.0, -126.5, -126.0, -125.0, 0.0, 8.0, 127.0, 127.6, 128.0, 1e9];
    let mut xs: Vec<f64> = special.to_vec();
    xs.push(f64::NAN);
    // the softmax's weights (x <= 0, FP8's offset 8) densely, then the rest of the range
    xs.extend((0..3000).map(|i| -40.0 + 48.0 * f64::from(i) / 3000.0));
    xs.extend((0..4096 - xs.len()).map(|i| -125.0 + 252.0 * i as f64 / 1083.0));
    let xs: Vec<f64> = xs.into_iter().map(|x| x as f32 as f64).collect();
    let (l, out) = run(&body(", ftz=True, pipe=\"fma\""), &[(DType::F32, xs.clone()), (DType::F32, vec![0.0; 4096])]);
    let mut worst = 0.0f64;
    for (&x, &y) in xs.iter().zip(&out[1]) {
        let exact = x.exp2();
        if x.is_nan() {
            assert!(y.is_nan(), "2^NaN: {y}");
        } else if exact < 2f64.powi(-126) {
            assert_eq!(y, 0.0, "2^{x} is below 2^-126: flushed");
        } else if x >= 127.5 {
            assert_eq!(y, f64::INFINITY, "2^{x}");
        } else if y == 0.0 {
            // (a result within the cubic's error of 2^-126 may fall below it: flushed)
            assert!(exact < 2f64.powi(-126) * (1.0 + 7.5e-5), "2^{x} flushed");
        } else {
            worst = worst.max((y / exact - 1.0).abs());
        }
    }
    assert!(worst < 7.5e-5 && worst > 1e-5, "relative error {worst:e}: the cubic's (7.48e-5)");
    assert_eq!(&out[1][..3], &[0.0, 0.0, 0.0], "-inf, -1000, -127");
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    assert!(cuda.contains("tirx_exp2_fma(") && !cuda.contains("ex2.approx"), "{cuda}");

    let bad = body(", pipe=\"fma\"");
    let text = render(&lower_errors(&bad), &bad);
    assert!(text.contains("`pipe=\"fma\"` flushes results below 2^-126 to zero: pass `ftz=True`"), "{text}");
}

/// test_unary_op_local_thread_wise: 64 threads, each on its own (32,) f16 registers.
#[test]
fn thread_wise_unary() {
    for op in ["zero", "sqrt", "reciprocal", "exp", "silu"] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 32), "float16")
    B = T.match_buffer(B_ptr, (64, 32), "float16")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([64])
    X = T.alloc_local((32,), "float16")
    Tx.copy(X[0:32], A[tid, 0:32])
    Tx.{op}(X[0:32], X[0:32])
    Tx.copy(B[tid, 0:32], X[0:32])
"#
        );
        let a: Vec<f64> = spread(2048, 0.25, 3.0).into_iter().map(|x| q(DType::F16, x)).collect();
        let (l, out) = run(&src, &[(DType::F16, a.clone()), (DType::F16, vec![1.0; 2048])]);
        let want: Vec<f64> = a.iter().map(|&x| unary_op(op, x)).collect();
        close(&out[1], &want, 2e-3, op);
        chosen_reg(&l, op);
    }
}

/// test_cast_thread_local: pair conversions for even bundles, scalar for (5, 5).
#[test]
fn thread_local_casts() {
    for shape in [vec![8i64], vec![16, 16], vec![5, 5]] {
        for (s, d) in [("float16", "float32"), ("float32", "float16"), ("float32", "bfloat16"), ("bfloat16", "float32")]
        {
            let n: i64 = shape.iter().product();
            let tup = format!("({},)", shape.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
            let full = shape.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ");
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {tup}, "{s}")
    B = T.match_buffer(B_ptr, {tup}, "{d}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    X = T.alloc_local({tup}, "{s}")
    Y = T.alloc_local({tup}, "{d}")
    Tx.copy(X[{full}], A[{full}])
    Tx.cast(Y[{full}], X[{full}])
    Tx.copy(B[{full}], Y[{full}])
"#
            );
            let a: Vec<f64> = spread(n as usize, -4.0, 4.0).into_iter().map(|x| q(dt(s), x)).collect();
            let (l, out) = run(&src, &[(dt(s), a.clone()), (dt(d), vec![0.0; n as usize])]);
            let want: Vec<f64> = a.iter().map(|&x| q(dt(d), x)).collect();
            assert_eq!(out[1], want, "cast {s}->{d} {shape:?}");
            let pairs = n % 2 == 0;
            assert_eq!(cast2_count(&l) > 0, pairs, "{shape:?} {s}->{d}\n{}", l.lir);
            assert_eq!(
                chosen_reg(&l, "cast"),
                (Some(if pairs { 2 } else { 1 }), Some(if pairs { n as u64 / 2 } else { n as u64 }))
            );
        }
    }
}

/// test_cast_warpgroup_local_view / test_cast_cta_local_view / sliced columns /
/// mixed axes: the warpgroup- or cta-level layouts convert in pairs.
fn scoped_cast(scope: &str, threads: i64, layout: &str, shape: (i64, i64), cols: (i64, i64), d: &str) {
    let (rows, k) = shape;
    let (c0, c1) = cols;
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({rows}, {k}), "float32")
    B = T.match_buffer(B_ptr, ({rows}, {k}), "{d}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{threads}])
    X = T.alloc_buffer(({rows}, {k}), "float32", scope="local", layout=TileLayout({layout}))
    Y = T.alloc_buffer(({rows}, {k}), "{d}", scope="local", layout=TileLayout({layout}))
    Tx.{scope}.copy(X[0:{rows}, 0:{k}], A[0:{rows}, 0:{k}])
    Tx.{scope}.zero(Y[0:{rows}, 0:{k}])
    Tx.{scope}.cast(Y[0:{rows}, {c0}:{c1}], X[0:{rows}, {c0}:{c1}])
    Tx.{scope}.copy(B[0:{rows}, 0:{k}], Y[0:{rows}, 0:{k}])
"#
    );
    let n = (rows * k) as usize;
    let a = spread(n, -3.0, 3.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (dt(d), vec![1.0; n])]);
    let want: Vec<f64> =
        (0..n).map(|i| if ((i as i64) % k) >= c0 && ((i as i64) % k) < c1 { q(dt(d), a[i]) } else { 0.0 }).collect();
    assert_eq!(out[1], want, "{scope} cast {layout} cols {cols:?} -> {d}");
    assert!(cast2_count(&l) > 0, "{}", l.lir);
    assert_eq!(chosen_reg(&l, "cast").0, Some(2));
}

#[test]
fn scoped_casts() {
    for d in ["float16", "bfloat16"] {
        scoped_cast("wg", 128, "S[(128, 8):(1@tid_in_wg, 1)]", (128, 8), (0, 8), d);
        scoped_cast("cta", 128, "S[(128, 8):(1@tx, 1)]", (128, 8), (0, 8), d);
        for cols in [(0, 4), (2, 6), (4, 8)] {
            scoped_cast("cta", 128, "S[(128, 8):(1@tx, 1)]", (128, 8), cols, d);
        }
    }
    // laneid + warpid canonicalize to a complete 64:1 `tx` chain.
    for cols in [(0, 2), (2, 4)] {
        scoped_cast("cta", 64, "S[(8, 2, 4, 4):(4@laneid, 1@warpid, 1@laneid, 1)]", (64, 4), cols, "float16");
    }
}

/// The §3.7 scope-level checks and other declines, as lowering errors.
#[test]
fn scope_errors() {
    let kernel = |threads: i64, body: &str| {
        format!(
            r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 8), "float32")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([{threads}])
    X = T.alloc_buffer((128, 8), "float32", scope="local", layout=TileLayout(S[(128, 8):(1@tid_in_wg, 1)]))
    Y = T.alloc_buffer((128, 8), "float16", scope="local", layout=TileLayout(S[(128, 8):(1@tid_in_wg, 1)]))
    H = T.alloc_buffer((64, 8), "float16", scope="local", layout=TileLayout(S[(64, 8):(1@tid_in_wg, 1)]))
    Sm = T.alloc_buffer((128, 8), "float32", scope="shared")
    V = T.alloc_local((1, 8), "float32")
{body}
"#
        )
    };
    let cases: [(i64, &str, Rule, &str); 11] = [
        (128, "    X_l = X.local()\n    Y_l = Y.local()\n    Tx.wg.cast(Y_l[0:8], X_l[0:8])", EwiseRule::ScopeLevel.into(), "pass the warpgroup-level tensor, not its `.local()` (per-thread) view"),
        (128, "    X_l = X.local()\n    Y_l = Y.local()\n    Tx.cta.cast(Y_l[0:8], X_l[0:8])", EwiseRule::ScopeLevel.into(), "pass the cta-level tensor, not its `.local()` (per-thread) view"),
        (128, "    Tx.wg.zero(H[0:64, 0:8])", EwiseRule::ScopeLevel.into(), "thread axes span 64 threads, not the full 128 of the warpgroup"),
        (128, "    Tx.wg.cast(Y[0:128, 0:4], X[0:128, 0:8])", EwiseRule::Broadcast.into(), "shape incompat: dim 1: `X` extent 8 vs anchor 4 (need equal or 1)|does not match the destination region (128, 4)"),
        (128, "    Tx.wg.sub(X[0:128, 0:8], 3.0, X[0:128, 0:8])", CommonRule::Parse.into(), "non-commutative op sub cannot have a constant lhs"),
        (128, "    Tx.wg.add(X[0:128, 0:8], X[0:128, 0:8], Sm[0:128, 0:8])", CommonRule::OperandScope.into(), "operand `Sm` is in shared memory"),
        (128, "    Tx.wg.add(X[0:128, 0:8], X[0:128, 0:8], V[0:1, 0:8])", EwiseRule::ThreadPart.into(), "thread part mismatch between anchor `X` and operand `V` after alignment"),
        (128, "    Tx.cast(Y[0:128, 0:8], X[0:128, 0:8])", EwiseRule::ScopeLevel.into(), "a thread-scope op cannot use `Y`, which is distributed over threads"),
        (128, "    Tx.wg.add(X[64:128, 0:8], X[64:128, 0:8], X[64:128, 0:8])", EwiseRule::ScopeLevel.into(), "the region of `X` selects part of the threads (offset 64@tid_in_wg)"),
        (128, "    Tx.wg.add(X[0:64, 0:8], X[0:64, 0:8], X[0:64, 0:8])", EwiseRule::ScopeLevel.into(), "thread axes span 64 threads, not the full 128 of the warpgroup"),
        (128, "    Tx.wg.add(Y[0:128, 0:8], Y[0:128, 0:8], H[0:64, 0:8])", EwiseRule::Broadcast.into(), "shape incompat: dim 0: `H` extent 64 vs anchor 128|does not match the destination region (128, 8)"),
    ];
    for (threads, body, want_rule, want) in cases {
        let src = kernel(threads, body);
        // Broadcast shapes are also checked by the script front end; either diagnostic will do.
        let text = match tirx_script::parse_kernel("k.py", &src) {
            Ok(k) => {
                let (ex, _) = tirx_lower::explain_kernel(&k, &Default::default());
                let c = ex.last().expect("the elementwise call");
                assert_eq!(rule(c, "reg"), want_rule, "{body}");
                render(&lower_errors(&src), &src)
            }
            Err(d) => render(&d, &src),
        };
        assert!(want.split('|').any(|w| text.contains(w)), "want `{want}` in:\n{text}");
    }
    // Accepted: the warpgroup-level layout, and `.local()` views at thread scope.
    lower(&kernel(128, "    Tx.wg.cast(Y[0:128, 0:8], X[0:128, 0:8])"));
    lower(&kernel(128, "    X_l = X.local()\n    Y_l = Y.local()\n    Tx.cast(Y_l[0:8], X_l[0:8])"));
}

fn binary_ref(op: &str, a: f64, b: f64) -> f64 {
    match op {
        "add" => a + b,
        "sub" => a - b,
        "mul" => a * b,
        "fdiv" => a / b,
        "maximum" => a.max(b),
        "minimum" => a.min(b),
        other => panic!("{other}"),
    }
}

/// test_binary_op_local_subcta_trivial: thread-scope ops on (4, 8) f16 locals
/// inside a guard on a sub-CTA scope; rhs a region, a (4, 1) broadcast or a constant.
#[test]
fn thread_binary_under_guards() {
    let guards = [("cta", ""), ("warpgroup", "if wg == 1:"), ("warp", "if wp == 3:")];
    let rhs_kinds = ["region", "broadcast", "const"];
    for (gname, guard) in guards {
        for rhs in rhs_kinds {
            for op in ["add", "sub", "mul", "fdiv", "maximum", "minimum"] {
                let ind = if guard.is_empty() { "    " } else { "        " };
                let (rhs_load, rhs_arg) = match rhs {
                    "region" => {
                        (format!("{ind}Tx.copy(Bl[0:4, 0:8], Bg[tid, 0:4, 0:8])\n"), "Bl[0:4, 0:8]".to_string())
                    }
                    "broadcast" => {
                        (format!("{ind}Tx.copy(Bc[0:4, 0:1], Bg[tid, 0:4, 0:1])\n"), "Bc[0:4, 0:1]".to_string())
                    }
                    _ => (String::new(), "1.25".to_string()),
                };
                let guard_line = if guard.is_empty() { String::new() } else { format!("    {guard}\n") };
                let src = format!(
                    r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (256, 4, 8), "float16")
    Bg = T.match_buffer(B_ptr, (256, 4, 8), "float16")
    Cg = T.match_buffer(C_ptr, (256, 4, 8), "float16")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([256])
    wg = T.warpgroup_id([2]); wp = T.warp_id([8])
    Al = T.alloc_local((4, 8), "float16")
    Bl = T.alloc_local((4, 8), "float16")
    Bc = T.alloc_local((4, 1), "float16")
    Cl = T.alloc_local((4, 8), "float16")
{guard_line}{ind}Tx.copy(Al[0:4, 0:8], Ag[tid, 0:4, 0:8])
{rhs_load}{ind}Tx.{op}(Cl[0:4, 0:8], Al[0:4, 0:8], {rhs_arg})
{ind}Tx.copy(Cg[tid, 0:4, 0:8], Cl[0:4, 0:8])
"#
                );
                let n = 256 * 32;
                let a: Vec<f64> = spread(n, -2.0, 2.0).into_iter().map(|x| q(DType::F16, x)).collect();
                let b: Vec<f64> = spread(n, 0.5, 3.0).iter().rev().map(|&x| q(DType::F16, x)).collect();
                let (l, out) =
                    run(&src, &[(DType::F16, a.clone()), (DType::F16, b.clone()), (DType::F16, vec![0.0; n])]);
                let active = |t: usize| match gname {
                    "warpgroup" => t / 128 == 1,
                    "warp" => t / 32 == 3,
                    _ => true,
                };
                let want: Vec<f64> = (0..n)
                    .map(|i| {
                        let t = i / 32;
                        if !active(t) {
                            return 0.0;
                        }
                        let y = match rhs {
                            "region" => b[i],
                            "broadcast" => b[t * 32 + (i % 32) / 8 * 8],
                            _ => 1.25,
                        };
                        q(DType::F16, binary_ref(op, a[i], y))
                    })
                    .collect();
                close(&out[2], &want, 1e-3, &format!("{op} {rhs} under {gname}"));
                let packs = !matches!(op, "fdiv");
                assert_eq!(!packed_ops(&l).is_empty(), packs, "{op} {rhs}\n{}", l.lir);
            }
        }
    }
}

/// Warp-level f16 and bf16 tiles: packed pair arithmetic (HADD2/HMUL2/HFMA2 on
/// sm_90), with a per-row broadcast operand feeding both lanes of a pair.
#[test]
fn packed_pairs_on_warp_tiles() {
    for d in ["float16", "bfloat16"] {
        for (op, call) in [
            (PackedOp::Add, "Tx.warp.add(C[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8])"),
            (PackedOp::Mul, "Tx.warp.mul(C[0:32, 0:8], A[0:32, 0:8], Rw[0:32, 0:1])"),
            (PackedOp::Fma, "Tx.warp.fma(C[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8], 0.5)"),
            (PackedOp::Max, "Tx.warp.maximum(C[0:32, 0:8], A[0:32, 0:8], B[0:32, 0:8])"),
            (PackedOp::Min, "Tx.warp.minimum(C[0:32, 0:8], 0.0, A[0:32, 0:8])"),
        ] {
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (32, 8), "{d}")
    Bg = T.match_buffer(B_ptr, (32, 8), "{d}")
    Cg = T.match_buffer(C_ptr, (32, 8), "{d}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    A = T.alloc_buffer((32, 8), "{d}", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    B = T.alloc_buffer((32, 8), "{d}", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    C = T.alloc_buffer((32, 8), "{d}", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    Rw = T.alloc_buffer((32, 1), "{d}", scope="local", layout=TileLayout(S[(32, 1):(1@laneid, 1)]))
    Tx.warp.copy(A[0:32, 0:8], Ag[0:32, 0:8])
    Tx.warp.copy(B[0:32, 0:8], Bg[0:32, 0:8])
    Tx.warp.copy(Rw[0:32, 0:1], Bg[0:32, 0:1])
    {call}
    Tx.warp.copy(Cg[0:32, 0:8], C[0:32, 0:8])
"#
            );
            let t = dt(d);
            let a: Vec<f64> = spread(256, -2.0, 2.0).into_iter().map(|x| q(t, x)).collect();
            let b: Vec<f64> = spread(256, -1.0, 3.0).iter().rev().map(|&x| q(t, x)).collect();
            let (l, out) = run(&src, &[(t, a.clone()), (t, b.clone()), (t, vec![0.0; 256])]);
            let want: Vec<f64> = (0..256)
                .map(|i| {
                    q(
                        t,
                        match op {
                            PackedOp::Add => a[i] + b[i],
                            PackedOp::Mul => a[i] * b[i / 8 * 8],
                            PackedOp::Fma => a[i] * b[i] + 0.5,
                            PackedOp::Max => a[i].max(b[i]),
                            _ => a[i].min(0.0),
                        },
                    )
                })
                .collect();
            close(&out[2], &want, 0.0, &format!("{op:?} {d}"));
            assert_eq!(packed_ops(&l), vec![op], "{d}\n{}", l.lir);
            let c = l.explain.iter().find(|c| c.op != "copy").unwrap();
            assert_eq!((c.vec, c.rounds), (Some(2), Some(4)), "{}", c.render());
        }
    }
}

/// f32 has no packed arithmetic on sm_90; the limit says so.
#[test]
fn f32_add_on_wg_local_layout() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    Ag = T.match_buffer(A_ptr, (128, 16), "float32")
    Bg = T.match_buffer(B_ptr, (128, 16), "float32")
    Cg = T.match_buffer(C_ptr, (128, 16), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    A = T.alloc_buffer((128, 16), "float32", scope="local", layout=wg_local_layout(16))
    B = T.alloc_buffer((128, 16), "float32", scope="local", layout=wg_local_layout(16))
    Tx.wg.copy(A[0:128, 0:16], Ag[0:128, 0:16])
    Tx.wg.copy(B[0:128, 0:16], Bg[0:128, 0:16])
    Tx.wg.add(A[0:128, 0:16], A[0:128, 0:16], B[0:128, 0:16])
    Tx.wg.fma(B[0:128, 0:16], A[0:128, 0:16], 1.5, -0.25)
    Tx.wg.copy(Cg[0:128, 0:16], B[0:128, 0:16])
"#
    );
    let a = spread(2048, -5.0, 5.0);
    let b = spread(2048, 0.0, 7.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, b.clone()), (DType::F32, vec![0.0; 2048])]);
    let want: Vec<f64> = (0..2048).map(|i| (a[i] as f32 + b[i] as f32).mul_add(1.5, -0.25) as f64).collect();
    close(&out[2], &want, 0.0, "fma(add), fused");
    let c = ewise(&l, "add");
    assert!(c.limits.iter().any(|m| m.contains("float32 has no packed arithmetic on sm_90a")), "{:?}", c.limits);
    assert_eq!(chosen_reg(&l, "fma"), (Some(1), Some(16)));
}

/// §5.7 scalar fma cases and the scalar broadcast of a register element.
#[test]
fn fma_and_scalar_operands() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16,), "float32")
    B = T.match_buffer(B_ptr, (23,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    one = T.alloc_local((1,), "float32")
    acc = T.alloc_local((2,), "float32")
    frac = T.alloc_local((2,), "float32")
    v = T.alloc_local((16,), "float32")
    s_local = T.alloc_local((1,), "float32")
    nl = T.alloc_local([4], "float32")
    Tx.copy(one[0:1], A[0:1])
    Tx.fma(one[0:1], one[0:1], 0.5, -1.0)
    Tx.copy(acc[0:2], A[0:2])
    Tx.copy(frac[0:2], A[2:4])
    Tx.fma(acc[0:2], acc[0:2], frac[0:2], 0.695)
    Tx.copy(v[0:16], A[0:16])
    Tx.fill(s_local[0:1], 2.5)
    Tx.mul(v[0:16], v[0:16], s_local[0])
    Tx.copy(nl[0:4], A[0:4])
    Tx.fma(nl[0:4], nl[0:4], 2.0, 1.0)
    Tx.copy(B[0:1], one[0:1])
    Tx.copy(B[1:3], acc[0:2])
    Tx.copy(B[3:19], v[0:16])
    Tx.copy(B[19:23], nl[0:4])
"#
    );
    let a = spread(16, -3.0, 3.0);
    let (_, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 23])]);
    let f = |x: f64| x as f32;
    let mut want = vec![f(a[0]).mul_add(0.5, -1.0) as f64];
    want.extend((0..2).map(|i| f(a[i]).mul_add(f(a[2 + i]), 0.695) as f64));
    want.extend((0..16).map(|i| (f(a[i]) * 2.5) as f64));
    want.extend((0..4).map(|i| f(a[i]).mul_add(2.0, 1.0) as f64));
    close(&out[1], &want, 0.0, "fma / scalar operands");
}

/// Replicated operands (issue 29 item 1): a row statistic of an MMA accumulator, replicated over
/// the 4 lanes of a quad (`+ R[4:1@laneid]`, what the row reduction leaves), is a source broadcast
/// along the accumulator's columns and a destination each owner writes: FlashAttention's
/// `m2 = 2·m`, `X = X - m`, `X = X·0.5 + m2` as tile calls. A statistic held by one lane of the
/// quad only is refused with what to write.
#[test]
fn replicated_row_statistics_broadcast_over_an_accumulator() {
    let kernel = |rows_layout: &str| {
        format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 128), "float32")
    O = T.match_buffer(O_ptr, (16, 128), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32]); T.lane_id([32])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout=TileLayout(S[(2, 8, 16, 4, 2):(32, 4@laneid, 2, 1@laneid, 1)]))
    m = T.alloc_buffer((16, 1), "float32", scope="local", layout=TileLayout(S[(2, 8, 1):(1, 4@laneid, 1)] + R[4:1@laneid]))
    m2 = T.alloc_buffer((16, 1), "float32", scope="local", layout=TileLayout({rows_layout}))
    Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
    Tx.warp.max(m[0:16, 0:1], X[0:16, 0:128])
    Tx.warp.mul(m2[0:16, 0:1], m[0:16, 0:1], 2.0)
    Tx.warp.sub(X[0:16, 0:128], X[0:16, 0:128], m[0:16, 0:1])
    Tx.warp.fma(X[0:16, 0:128], X[0:16, 0:128], 0.5, m2[0:16, 0:1])
    Tx.warp.copy(O[0:16, 0:128], X[0:16, 0:128])
"#
        )
    };
    let src = kernel("S[(2, 8, 1):(1, 4@laneid, 1)] + R[4:1@laneid]");
    let a = spread(16 * 128, -4.0, 4.0);
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 16 * 128])]);
    let want: Vec<f64> = (0..16 * 128)
        .map(|i| {
            let row = &a[i / 128 * 128..i / 128 * 128 + 128];
            let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max) as f32;
            ((a[i] as f32 - m).mul_add(0.5, 2.0 * m)) as f64
        })
        .collect();
    close(&out[1], &want, 0.0, "X·0.5 + 2m after X - m");
    let text = ewise(&l, "sub").render();
    assert!(text.contains("`m` read from each thread's copy over [4:1@laneid]"), "{text}");

    // Held by lane 4r of each quad only: the other lanes of the quad have no copy.
    let bad = kernel("S[(2, 8, 1):(1, 4@laneid, 1)]");
    let text = render(&lower_errors(&bad), &bad);
    assert!(
        text.contains("needs each element of `m2` in the threads [4:1@laneid]")
            && text.contains("replicated over no threads"),
        "{text}"
    );
}

/// The same at warpgroup scope on a wgmma accumulator (64 × 64 over 4 warps) in bfloat16: the
/// row statistic `S[(4, 2, 8, 1):(1@wid_in_wg, 1, 4@laneid, 1)] + R[4:1@laneid]` broadcast along
/// the columns (`O = O · l`, `O = O / l` as FlashAttention's epilogue writes it).
#[test]
fn replicated_row_statistics_on_a_wgmma_accumulator() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, L_ptr: T.handle, O_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), "bfloat16")
    L = T.match_buffer(L_ptr, (64, 4), "float32")
    O = T.match_buffer(O_ptr, (64, 64), "bfloat16")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128]); T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32])
    X = T.alloc_buffer((64, 64), "bfloat16", scope="local", layout=TileLayout(S[(4, 2, 8, 8, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]))
    F = T.alloc_buffer((64, 64), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 8, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]))
    q = T.alloc_buffer((64, 4), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 4):(1@wid_in_wg, 1, 4@laneid, 1@laneid)]))
    l = T.alloc_buffer((64, 1), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 1):(1@wid_in_wg, 1, 4@laneid, 1)] + R[4:1@laneid]))
    Tx.warpgroup.copy(X[0:64, 0:64], A[0:64, 0:64])
    Tx.warpgroup.cast(F[0:64, 0:64], X[0:64, 0:64])
    Tx.warpgroup.copy(q[0:64, 0:4], L[0:64, 0:4])
    Tx.warpgroup.sum(l[0:64, 0:1], q[0:64, 0:4])
    Tx.warpgroup.fdiv(F[0:64, 0:64], F[0:64, 0:64], l[0:64, 0:1])
    Tx.warpgroup.cast(X[0:64, 0:64], F[0:64, 0:64])
    Tx.warpgroup.copy(O[0:64, 0:64], X[0:64, 0:64])
"#
    );
    let a: Vec<f64> = spread(64 * 64, -3.0, 3.0).into_iter().map(|x| q(DType::BF16, x)).collect();
    let lq = spread(64 * 4, 0.5, 2.0);
    let (_, out) = run(&src, &[(DType::BF16, a.clone()), (DType::F32, lq.clone()), (DType::BF16, vec![0.0; 64 * 64])]);
    let want: Vec<f64> = (0..64 * 64)
        .map(|i| {
            let r = i / 64;
            // The quad butterfly's order: masks 2, then 1.
            let v: Vec<f32> = lq[4 * r..4 * r + 4].iter().map(|&x| x as f32).collect();
            let l = (v[0] + v[2]) + (v[1] + v[3]);
            q(DType::BF16, (a[i] as f32 / l) as f64)
        })
        .collect();
    close(&out[2], &want, 0.0, "O / l");
}

/// A row statistic broadcast over a row's per-lane partials (FlashAttention-3's deferred row sum:
/// `l = l alpha + rowsum(P)` kept per lane of the quad): the partials' lane iters fuse the rows'
/// with the columns' (`32:1`), the statistic reads each lane's copy.
#[test]
fn a_row_statistic_scales_a_rows_partials() {
    let src = format!(
        r#"{HEAD}def kernel(L_ptr: T.handle, Q_ptr: T.handle):
    L = T.match_buffer(L_ptr, (64, 4), "float32")
    Q = T.match_buffer(Q_ptr, (64, 4), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128]); T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32])
    q = T.alloc_buffer((64, 4), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 4):(1@wid_in_wg, 1, 4@laneid, 1@laneid)]))
    l = T.alloc_buffer((64, 1), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 1):(1@wid_in_wg, 1, 4@laneid, 1)] + R[4:1@laneid]))
    Tx.warpgroup.copy(q[0:64, 0:4], L[0:64, 0:4])
    Tx.warpgroup.sum(l[0:64, 0:1], q[0:64, 0:4])
    Tx.warpgroup.mul(q[0:64, 0:4], q[0:64, 0:4], l[0:64, 0:1])
    Tx.warpgroup.copy(Q[0:64, 0:4], q[0:64, 0:4])
"#
    );
    let lq = spread(64 * 4, 0.5, 2.0);
    let (_, out) = run(&src, &[(DType::F32, lq.clone()), (DType::F32, vec![0.0; 64 * 4])]);
    let want: Vec<f64> = (0..64 * 4)
        .map(|i| {
            let r = i / 4;
            let v: Vec<f32> = lq[4 * r..4 * r + 4].iter().map(|&x| x as f32).collect();
            (lq[i] as f32 * ((v[0] + v[2]) + (v[1] + v[3]))) as f64
        })
        .collect();
    close(&out[1], &want, 0.0, "partials × l");
}

/// Masks (issue 29 item 2): `masked_fill(dst, src, lambda i, j: cond, value)`, the condition on
/// each element's coordinates in the region lowered per register from the layout — a causal mask
/// with a run-time offset on an MMA accumulator (FlashAttention's diagonal block), and a
/// sequence tail on a thread's own registers — against a Rust reference.
#[test]
fn masks_on_an_accumulator_and_a_thread_tile() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle, V_ptr: T.handle, W_ptr: T.handle, off: T.int32, n: T.int32):
    A = T.match_buffer(A_ptr, (16, 128), "float32")
    O = T.match_buffer(O_ptr, (16, 128), "float32")
    V = T.match_buffer(V_ptr, (4, 8), "float32")
    W = T.match_buffer(W_ptr, (4, 8), "float32")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([32]); T.lane_id([32])
    X = T.alloc_buffer((16, 128), "float32", scope="local", layout=mma_acc_layout(16, 128))
    Tx.warp.copy(X[0:16, 0:128], A[0:16, 0:128])
    Tx.warp.masked_fill(X[0:16, 0:128], X[0:16, 0:128], lambda i, j: j > i + off, float("-inf"))
    Tx.warp.copy(O[0:16, 0:128], X[0:16, 0:128])
    if tid < 4:
        v = T.alloc_local((8,), "float32")
        Tx.copy(v[0:8], V[tid, 0:8])
        Tx.masked_fill(v[0:8], v[0:8], lambda c: tid * 8 + c >= n, 0.0)
        Tx.copy(W[tid, 0:8], v[0:8])
"#
    )
    .replace("wid_in_wg\n", "wid_in_wg, mma_acc_layout\n");
    let a = spread(16 * 128, -4.0, 4.0);
    let v = spread(32, 1.0, 2.0);
    let (off, n) = (5i64, 13i64);
    let (_, out) = run_with(
        &src,
        &[off, n],
        &[
            (DType::F32, a.clone()),
            (DType::F32, vec![0.0; 16 * 128]),
            (DType::F32, v.clone()),
            (DType::F32, vec![0.0; 32]),
        ],
    );
    for (idx, got) in out[1].iter().enumerate() {
        let (i, j) = ((idx / 128) as i64, (idx % 128) as i64);
        let want = if j > i + off { f64::NEG_INFINITY } else { a[idx] as f32 as f64 };
        assert_eq!(*got, want, "O[{i}, {j}]");
    }
    let w = &out[3];
    for (idx, got) in w.iter().enumerate() {
        let want = if idx as i64 >= n { 0.0 } else { v[idx] as f32 as f64 };
        assert_eq!(*got, want, "W flat {idx}");
    }
    // The canonical text has the lambda and reads back as the same kernel.
    let k = parse(&src);
    let text = tirx_script::print_kernel(&k);
    assert!(text.contains("lambda i, j: j > i + off"), "{text}");
    let again = tirx_script::parse_kernel("k.py", &text).unwrap_or_else(|d| panic!("{}", render(&d, &text)));
    assert!(tirx_script::same_kernel(&k, &again), "{text}");
}

/// A mask comparing a coordinate with an expression free of it (`j > min(hi, i + lo)`, and the
/// other way round, under `|`, `&` and `not`): the comparison takes the coordinate's register part
/// (a constant once unrolled) against the expression less its thread part, FlashAttention-3's
/// causal mask (a compare with an immediate and a select a score); values against a Rust
/// reference over run-time bounds on both sides of the diagonal, on a wgmma accumulator.
#[test]
fn a_coordinates_thread_part_moves_across_its_comparison() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle, lo: T.int32, hi: T.int32):
    A = T.match_buffer(A_ptr, (64, 64), "float32")
    O = T.match_buffer(O_ptr, (64, 64), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128]); T.lane_id([32]); T.warpgroup_id([1]); T.warp_id_in_wg([4])
    X = T.alloc_buffer((64, 64), "float32", scope="local", layout=wgmma_acc_layout(64))
    Tx.warpgroup.copy(X[0:64, 0:64], A[0:64, 0:64])
    Tx.warpgroup.masked_fill(X[0:64, 0:64], X[0:64, 0:64], lambda i, j: (j > T.min(hi, i + lo)) | (7 > j) & (i != 5) | (not (j != 60)), float("-inf"))
    Tx.warpgroup.copy(O[0:64, 0:64], X[0:64, 0:64])
"#
    )
    .replace("wid_in_wg\n", "wid_in_wg, wgmma_acc_layout\n");
    let a = spread(64 * 64, -4.0, 4.0);
    for (lo, hi) in [(5i64, 40i64), (-9, 70), (0, -1), (30, 12), (100, 100)] {
        let (l, out) = run_with(&src, &[lo, hi], &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 64 * 64])]);
        // Each score's comparison: a constant (the unrolled loops' digits of j) against a bound
        // of the row with the thread's columns (2 (lane % 4)) taken off.
        let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
        let line = cuda.lines().find(|s| s.contains("0xff800000")).expect("the mask's select");
        assert!(line.contains("- (tid_in_wg % 4) * 2"), "{line}");
        for (idx, got) in out[1].iter().enumerate() {
            let (i, j) = ((idx / 64) as i64, (idx % 64) as i64);
            let masked = j > hi.min(i + lo) || 7 > j && i != 5 || j == 60;
            let want = if masked { f64::NEG_INFINITY } else { a[idx] as f32 as f64 };
            assert_eq!(*got, want, "lo {lo} hi {hi}: O[{i}, {j}]");
        }
    }
}

/// Masks over a matrix: scopes (thread, warp, warpgroup, cta) × layouts (mma.sync and wgmma
/// accumulators, a row per thread, a thread's own tile) × float32 / float16 / bfloat16 × fills
/// (-inf, 0, NaN), a pattern that uses both coordinates, against a Rust reference.
#[test]
fn masks_over_scopes_layouts_dtypes_and_fills() {
    // (scope prefix, threads, rows, cols, layout; "" = a thread's own tile)
    let cases = [
        ("Tx.", 1, 4, 8, ""),
        ("Tx.warp.", 32, 32, 16, "mma_acc_layout(32, 16)"),
        ("Tx.warpgroup.", 128, 64, 64, "wgmma_acc_layout(64)"),
        ("Tx.cta.", 128, 128, 8, "TileLayout(S[(128, 8):(1@tx, 1)])"),
        ("Tx.cta.", 64, 64, 8, "TileLayout(S[(64, 4, 2):(1@tx, 2, 1)])"),
    ];
    let mut checked = 0;
    for (scope, threads, rows, cols, layout) in cases {
        for (name, dt) in [("float32", DType::F32), ("float16", DType::F16), ("bfloat16", DType::BF16)] {
            for (fill_text, fill) in
                [("float(\"-inf\")", f64::NEG_INFINITY), ("0.0", 0.0), ("float(\"nan\")", f64::NAN)]
            {
                let layout_arg = if layout.is_empty() { String::new() } else { format!(", layout={layout}") };
                let src = format!(
                    r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({rows}, {cols}), "{name}")
    O = T.match_buffer(O_ptr, ({rows}, {cols}), "{name}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{threads}]); T.lane_id([32]); T.warp_id([{warps}])
    X = T.alloc_buffer(({rows}, {cols}), "{name}", scope="local"{layout_arg})
    {scope}copy(X[0:{rows}, 0:{cols}], A[0:{rows}, 0:{cols}])
    {scope}masked_fill(X[0:{rows}, 0:{cols}], X[0:{rows}, 0:{cols}], lambda i, j: (i * 3 + j) % 5 == 0, {fill_text})
    {scope}copy(O[0:{rows}, 0:{cols}], X[0:{rows}, 0:{cols}])
"#,
                    warps = (threads + 31) / 32
                )
                .replace("wid_in_wg\n", "wid_in_wg, mma_acc_layout, wgmma_acc_layout\n")
                .replace("T.lane_id([32]); T.warp_id([1])", "")
                .replace("T.thread_id([1]); ", "T.thread_id([1])");
                let src = if threads == 128 && scope == "Tx.warpgroup." {
                    src.replace("T.warp_id([4])", "T.warpgroup_id([1]); T.warp_id_in_wg([4])")
                } else {
                    src
                };
                let a: Vec<f64> = spread(rows * cols, -3.0, 3.0).into_iter().map(|x| q(dt, x)).collect();
                let (_, out) = run(&src, &[(dt, a.clone()), (dt, vec![0.0; rows * cols])]);
                for (idx, got) in out[1].iter().enumerate() {
                    let (i, j) = (idx / cols, idx % cols);
                    let want = if (i * 3 + j) % 5 == 0 { fill } else { a[idx] };
                    let same = got == &want || (got.is_nan() && want.is_nan());
                    assert!(same, "{scope}{layout} {name} fill {fill_text}: O[{i}, {j}] = {got}, want {want}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 45);
}

/// The value of FP8 code `b` (OCP FP8: e4m3fn without infinities, its S.1111.111 NaN; e5m2
/// IEEE-like), written from the format's fields.
fn fp8_value(b: u8, man_bits: u32, bias: i32) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = ((b & 0x7f) >> man_bits) as i32;
    let man = (b & ((1 << man_bits) - 1)) as f64 / (1u32 << man_bits) as f64;
    let top = (1 << (7 - man_bits)) - 1;
    if man_bits == 3 && exp == top && man == 7.0 / 8.0 || man_bits == 2 && exp == top && man > 0.0 {
        return f64::NAN;
    }
    if man_bits == 2 && exp == top {
        return sign * f64::INFINITY;
    }
    sign * if exp == 0 { man * 2f64.powi(1 - bias) } else { (1.0 + man) * 2f64.powi(exp - bias) }
}

/// `x` rounded to the FP8 format as CUDA's saturating conversion does: the nearest finite code
/// of `x`'s sign (ties to the even code), ±max where beyond it.
fn fp8_round(x: f64, man_bits: u32, bias: i32) -> f64 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let mut best = (f64::INFINITY, 0u8);
    for b in (0..=127u8).map(|b| b | sign) {
        let v = fp8_value(b, man_bits, bias);
        let d = (v - x).abs();
        if v.is_finite() && (d < best.0 || d == best.0 && b & 1 == 0) {
            best = (d, b);
        }
    }
    fp8_value(best.1, man_bits, bias)
}

/// A cast to and from FP8 in registers (FlashAttention-3's P): f32 → float8 in pairs into a
/// destination whose register order differs from the source's (the cast moves no data between
/// lanes), then back to f32; saturating, to nearest even, as CUDA's `__nv_fp8*` constructors.
#[test]
fn fp8_casts_in_registers() {
    for (name, man_bits, bias, max) in [("float8_e4m3fn", 3, 7, 448.0), ("float8_e5m2", 2, 15, 57344.0)] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32]); T.lane_id([32])
    X = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    P = T.alloc_buffer((32, 8), "{name}", scope="local", layout=TileLayout(S[(32, 2, 2, 2):(1@laneid, 2, 4, 1)]))
    Tx.warp.copy(X[0:32, 0:8], A[0:32, 0:8])
    Tx.warp.cast(P[0:32, 0:8], X[0:32, 0:8])
    Tx.warp.cast(X[0:32, 0:8], P[0:32, 0:8])
    Tx.warp.copy(B[0:32, 0:8], X[0:32, 0:8])
"#
        );
        let mut a: Vec<f64> = spread(256, -1.5 * max, 1.5 * max);
        a[..64]
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i as f64 - 32.0) * 2f64.powi(-bias - 2 - man_bits as i32));
        let a: Vec<f64> = a.into_iter().map(|x| q(DType::F32, x)).collect();
        let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 256])]);
        let want: Vec<f64> = a.iter().map(|&x| fp8_round(x, man_bits, bias)).collect();
        assert_eq!(out[1], want, "{name}");
        // f32 -> float8 in pairs (each pair consecutive in P, the pairs' order changed: one
        // `cast2` in the lane's loop over its 4 pairs), float8 -> f32 one by one
        assert_eq!(cast2_count(&l), 1, "{name}\n{}", l.lir);
        assert!(l.lir.to_string().contains(&format!("cast2<float32 -> {name}>")), "{}", l.lir);
    }
}
