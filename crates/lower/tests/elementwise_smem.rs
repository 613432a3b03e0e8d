//! elementwise → smem (docs/tile-primitives.md §3.15): the reference's shared-memory
//! elementwise tests (test_unary.py / test_binary.py [smem], tile-primitives §3.9)
//! as simulator value checks — full tiles and offset 3-D regions, mixed dtypes,
//! bias/scale, broadcast and scalar operands, `fill`/`zero`, warp and warpgroup
//! calls under `if` — plus the vector widths explain reports and their SASS-visible form.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::Lowered;
use tirx_sim::value::round_to;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

/// Distance in units in the last place of `t` at `want`.
fn ulps(got: f64, want: f64, t: DType) -> f64 {
    let p = match t {
        DType::F32 => 23,
        DType::F16 => 10,
        _ => 7,
    };
    let e = want.abs().max(f64::MIN_POSITIVE).log2().floor();
    (got - want).abs() / 2f64.powf(e - p as f64)
}

fn tup(v: &[i64]) -> String {
    format!("({},)", v.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "))
}

/// Flat index in `shape` of region element `i` (row-major over `ext`) at `begin`.
fn at(shape: &[i64], begin: &[i64], ext: &[i64], mut i: usize) -> usize {
    let mut c = vec![0i64; ext.len()];
    for d in (0..ext.len()).rev() {
        c[d] = begin[d] + (i % ext[d] as usize) as i64;
        i /= ext[d] as usize;
    }
    c.iter().zip(shape).fold(0i64, |acc, (&x, &e)| acc * e + x) as usize
}

/// One shared-memory elementwise call: `A`, `B` (sources) and `C` (destination)
/// in global memory of `shape`, staged through shared memory by `Tx.cta.copy`.
struct Case<'a> {
    shape: &'a [i64],
    a_begin: &'a [i64],
    b_begin: &'a [i64],
    c_begin: &'a [i64],
    ext: &'a [i64],
    b_ext: &'a [i64],
    types: (&'a str, &'a str),
    threads: usize,
}

/// `call` uses `A_smem[ra]`, `B_smem[rb]`, `C_smem[rc]` (formatted in); returns C.
fn smem_call(k: &Case, call: &str, a: &[f64], b: &[f64]) -> (Lowered, Vec<f64>) {
    let (s, d) = k.types;
    let full = region(&vec![0; k.shape.len()], k.shape);
    let call = call
        .replace("{ra}", &region(k.a_begin, k.ext))
        .replace("{rb}", &region(k.b_begin, k.b_ext))
        .replace("{rc}", &region(k.c_begin, k.ext));
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, {sh}, "{s}")
    B = T.match_buffer(B_ptr, {sh}, "{s}")
    C = T.match_buffer(C_ptr, {sh}, "{d}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{th}])
    A_smem = T.alloc_buffer({sh}, "{s}", scope="shared")
    B_smem = T.alloc_buffer({sh}, "{s}", scope="shared")
    C_smem = T.alloc_buffer({sh}, "{d}", scope="shared")
    Tx.cta.copy(A_smem[{full}], A[{full}])
    Tx.cta.copy(B_smem[{full}], B[{full}])
    Tx.cta.copy(C_smem[{full}], C[{full}])
    T.cuda.cta_sync()
    {call}
    Tx.cta.copy(C[{full}], C_smem[{full}])
"#,
        sh = tup(k.shape),
        th = k.threads,
    );
    let n: i64 = k.shape.iter().product();
    let c0 = vec![-7.0; n as usize];
    let (l, out) = run(&src, &[(dt(s), a.to_vec()), (dt(s), b.to_vec()), (dt(d), c0)]);
    (l, out[2].clone())
}

const BASIC: Case = Case {
    shape: &[32, 32],
    a_begin: &[0, 0],
    b_begin: &[0, 0],
    c_begin: &[0, 0],
    ext: &[32, 32],
    b_ext: &[32, 32],
    types: ("float16", "float16"),
    threads: 64,
};

const OFFSET: Case = Case {
    shape: &[32, 8, 12],
    a_begin: &[10, 0, 3],
    b_begin: &[14, 1, 4],
    c_begin: &[20, 0, 2],
    ext: &[5, 6, 7],
    b_ext: &[5, 6, 7],
    types: ("float16", "float16"),
    threads: 64,
};

/// Checks `C` against `f(a, b)` inside the destination region and the sentinel outside.
fn check(k: &Case, out: &[f64], a: &[f64], b: &[f64], tol: f64, f: &dyn Fn(f64, f64) -> f64, what: &str) {
    let d = dt(k.types.1);
    let n: usize = k.ext.iter().product::<i64>() as usize;
    let mut inside = vec![false; out.len()];
    for i in 0..n {
        let ci = at(k.shape, k.c_begin, k.ext, i);
        inside[ci] = true;
        // A broadcast `b` region reads index 0 along its unit dims.
        let mut x = i;
        let mut bc = vec![0usize; k.ext.len()];
        for dd in (0..k.ext.len()).rev() {
            bc[dd] = if k.b_ext[dd] == 1 { 0 } else { x % k.ext[dd] as usize };
            x /= k.ext[dd] as usize;
        }
        let bflat = bc.iter().zip(k.b_ext).fold(0usize, |acc, (&c, &e)| acc * e as usize + c);
        let want = round_to(d, f(a[at(k.shape, k.a_begin, k.ext, i)], b[at(k.shape, k.b_begin, k.b_ext, bflat)]));
        let got = out[ci];
        assert!(ulps(got, want, d) <= tol || got == want, "{what}: element {i}: got {got}, want {want}");
    }
    for (i, &v) in out.iter().enumerate() {
        if !inside[i] {
            assert_eq!(v, -7.0, "{what}: element {i} outside the region was written");
        }
    }
}

/// test_unary_op_shared: zero and sqrt on full and offset regions, three dtype pairs.
#[test]
fn unary_on_shared_tiles() {
    for base in [&BASIC, &OFFSET] {
        for types in [("float16", "float16"), ("float32", "float16"), ("float32", "bfloat16")] {
            let k = Case { types, ..*base };
            let n: usize = k.shape.iter().product::<i64>() as usize;
            let a = values(dt(types.0), n, 1, 0.0, 4.0);
            let (_, out) = smem_call(&k, "Tx.cta.zero(C_smem[{rc}])", &a, &a);
            check(&k, &out, &a, &a, 0.0, &|_, _| 0.0, "zero");
            let (l, out) = smem_call(&k, "Tx.cta.sqrt(C_smem[{rc}], A_smem[{ra}])", &a, &a);
            check(&k, &out, &a, &a, 0.0, &|x, _| round_to(DType::F32, x.sqrt()), &format!("sqrt {types:?}"));
            assert_eq!(l.explain[3].chosen.as_deref(), Some("smem"), "{}", l.explain[3].render());
        }
    }
}

/// The activations on shared tiles (the `smem` variant): within the error
/// docs/numerics.md §2 states of the f64 function, on [-2, 4] (4 ulp; the gelu forms
/// grow with x², 10 ulp here), computed in f32 and rounded once to the destination type.
#[test]
fn activations_on_shared_tiles() {
    let gelu = |x: f64| 0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2));
    let k = std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::SQRT_2 * 0.5;
    let gelu_tanh = |x: f64| 0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh());
    let ops: [(&str, &dyn Fn(f64) -> f64); 7] = [
        ("tanh", &|x| x.tanh()),
        ("sigmoid", &|x| 1.0 / (1.0 + (-x).exp())),
        ("softplus", &|x| x.exp().ln_1p()),
        ("softplus", &|x| (2.0 * x).exp().ln_1p() / 2.0),
        ("erf", &|x| libm::erf(x)),
        ("gelu", &gelu),
        ("gelu", &gelu_tanh),
    ];
    let extras = ["", "", "", ", beta=2.0", "", "", ", approximate=\"tanh\""];
    for base in [&BASIC, &OFFSET] {
        for types in [("float32", "float32"), ("float16", "float16"), ("float32", "bfloat16")] {
            let k = Case { types, ..*base };
            let n: usize = k.shape.iter().product::<i64>() as usize;
            let a = values(dt(types.0), n, 3, -2.0, 4.0);
            for ((op, f), extra) in ops.iter().zip(extras) {
                let call = format!("Tx.cta.{op}(C_smem[{{rc}}], A_smem[{{ra}}]{extra})");
                let (l, out) = smem_call(&k, &call, &a, &a);
                let tol = if *op == "gelu" { 10.0 } else { 4.0 };
                check(&k, &out, &a, &a, tol, &|x, _| f(x), &format!("{op}{extra} {types:?}"));
                assert_eq!(l.explain[3].chosen.as_deref(), Some("smem"), "{}", l.explain[3].render());
            }
        }
    }
}

/// test_unary_op_shared_with_bias_scale: op(x·1.5 + bias), bias a constant or a region.
#[test]
fn unary_with_bias_and_scale() {
    for base in [&BASIC, &OFFSET] {
        for types in [("float16", "float16"), ("float32", "float32"), ("float32", "float16"), ("float32", "bfloat16")] {
            for op in ["sqrt", "exp"] {
                let k = Case { types, ..*base };
                let n: usize = k.shape.iter().product::<i64>() as usize;
                let a = values(dt(types.0), n, 2, 0.0, 1.0);
                let b = values(dt(types.0), n, 3, 0.0, 0.5);
                let f32r = |x: f64| round_to(DType::F32, x);
                let apply = |x: f64| if op == "sqrt" { x.sqrt() } else { x.exp() };
                let (_, out) = smem_call(
                    &k,
                    &format!("Tx.cta.{op}(C_smem[{{rc}}], A_smem[{{ra}}], bias=0.88, scale=1.5)"),
                    &a,
                    &b,
                );
                let c = f32r(0.88);
                check(
                    &k,
                    &out,
                    &a,
                    &b,
                    1.0,
                    &|x, _| apply(f32r(f32r(x * 1.5) + c)),
                    &format!("{op} const bias {types:?}"),
                );
                let (_, out) = smem_call(
                    &k,
                    &format!("Tx.cta.{op}(C_smem[{{rc}}], A_smem[{{ra}}], bias=B_smem[{{rb}}], scale=1.5)"),
                    &a,
                    &b,
                );
                check(
                    &k,
                    &out,
                    &a,
                    &b,
                    1.0,
                    &|x, y| apply(f32r(f32r(x * 1.5) + y)),
                    &format!("{op} region bias {types:?}"),
                );
            }
        }
    }
}

/// test_binary_op_shared: add, sub, mul, fdiv on region/region, region/const, const/region (f16).
#[test]
fn binary_on_shared_tiles() {
    let bcast = Case { b_ext: &[1, 6, 1], ..OFFSET };
    for base in [&BASIC, &OFFSET, &bcast] {
        for op in ["add", "sub", "mul", "fdiv"] {
            let k = base;
            let n: usize = k.shape.iter().product::<i64>() as usize;
            let a = values(DType::F16, n, 4, 0.5, 3.0);
            let b = values(DType::F16, n, 5, 0.5, 3.0);
            let f: fn(f64, f64) -> f64 = match op {
                "add" => |x, y| x + y,
                "sub" => |x, y| x - y,
                "mul" => |x, y| x * y,
                _ => |x, y| round_to(DType::F32, x / y),
            };
            let (l, out) =
                smem_call(k, &format!("Tx.cta.{op}(C_smem[{{rc}}], A_smem[{{ra}}], B_smem[{{rb}}])"), &a, &b);
            check(k, &out, &a, &b, 0.0, &f, &format!("{op} region region {:?}", k.b_ext));
            let (_, out) = smem_call(k, &format!("Tx.cta.{op}(C_smem[{{rc}}], A_smem[{{ra}}], 3.0)"), &a, &b);
            check(k, &out, &a, &b, 0.0, &|x, _| f(x, 3.0), &format!("{op} region const"));
            if op == "add" || op == "mul" {
                let (_, out) = smem_call(k, &format!("Tx.cta.{op}(C_smem[{{rc}}], 3.0, A_smem[{{ra}}])"), &a, &b);
                check(k, &out, &a, &b, 0.0, &|x, _| f(3.0, x), &format!("{op} const region"));
            }
            if k.b_ext == [1, 6, 1] {
                let r = &tried(&l.explain[3], "smem").reason;
                assert!(r.contains("chunks of 1") && r.contains("`B_smem` vector"), "{r}");
            }
        }
    }
}

/// Vector widths: full f16 rows move 8 at a time; a broadcast row splats along a chunk;
/// an odd region offset and the symbolic begin limit the width (explain's limits say why).
#[test]
fn vector_widths_and_limits() {
    let n = 32 * 32;
    let a = values(DType::F16, n, 6, 0.5, 3.0);
    let (l, out) = smem_call(&BASIC, "Tx.cta.mul(C_smem[{rc}], A_smem[{ra}], B_smem[0:1, 0:32])", &a, &a);
    let c = &l.explain[3];
    assert_eq!(c.vec, Some(8), "{}", c.render());
    assert_eq!(c.rounds, Some(2));
    check(&Case { b_ext: &[1, 32], ..BASIC }, &out, &a, &a, 0.0, &|x, y| x * y, "row broadcast");
    // A column broadcast: one element per row, splat along the chunk.
    let (l, out) = smem_call(&BASIC, "Tx.cta.sub(C_smem[{rc}], A_smem[{ra}], B_smem[0:32, 0:1])", &a, &a);
    let r = &tried(&l.explain[3], "smem").reason;
    assert!(r.contains("chunks of 8") && r.contains("`B_smem` splat"), "{r}");
    check(&Case { b_ext: &[32, 1], ..BASIC }, &out, &a, &a, 0.0, &|x, y| x - y, "column broadcast");
    // Columns 1..31 of each row: chunks would start at odd elements.
    let k = Case { a_begin: &[0, 1], b_begin: &[0, 1], c_begin: &[0, 1], ext: &[32, 31], b_ext: &[32, 31], ..BASIC };
    let (l, out) = smem_call(&k, "Tx.cta.add(C_smem[{rc}], A_smem[{ra}], B_smem[{rb}])", &a, &a);
    let c = &l.explain[3];
    assert_eq!(c.vec, Some(1), "{}", c.render());
    assert!(c.limits.iter().any(|m| m.contains("vec 8: destination: elements 0..8 are neither 8 consecutive aligned elements nor one")), "{:?}", c.limits);
    check(&k, &out, &a, &a, 0.0, &|x, y| x + y, "odd columns");
}

/// test_unary_op_shared_subcta_scope / test_binary_op_shared_subcta_scope: a warp
/// (`if warp_id == 5`) and a warpgroup (`if wg_id == 1`) work on shared tiles alone.
#[test]
fn warp_and_warpgroup_calls_under_if() {
    for (scope, guard, decl, rows, barrier) in [
        ("warp", "w == 5", "w = T.warp_id([8])", 32, "__syncwarp()"),
        ("wg", "g == 1", "g = T.warpgroup_id([2])", 128, "bar.sync 1 + wg_id, 128"),
    ] {
        for op in ["zero", "add", "mul"] {
            let call = match op {
                "zero" => format!("Tx.{scope}.zero(C_smem[0:{rows}, 0:8])"),
                _ => format!("Tx.{scope}.{op}(C_smem[0:{rows}, 0:8], A_smem[0:{rows}, 0:8], B_smem[0:{rows}, 0:8])"),
            };
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({rows}, 8), "float16")
    B = T.match_buffer(B_ptr, ({rows}, 8), "float16")
    C = T.match_buffer(C_ptr, ({rows}, 8), "float16")
    T.device_entry()
    T.cta_id([1]); T.thread_id([256])
    {decl}
    A_smem = T.alloc_buffer(({rows}, 8), "float16", scope="shared")
    B_smem = T.alloc_buffer(({rows}, 8), "float16", scope="shared")
    C_smem = T.alloc_buffer(({rows}, 8), "float16", scope="shared")
    Tx.cta.copy(A_smem[0:{rows}, 0:8], A[0:{rows}, 0:8])
    Tx.cta.copy(B_smem[0:{rows}, 0:8], B[0:{rows}, 0:8])
    T.cuda.cta_sync()
    if {guard}:
        {call}
    T.cuda.cta_sync()
    Tx.cta.copy(C[0:{rows}, 0:8], C_smem[0:{rows}, 0:8])
"#
            );
            let n = rows * 8;
            let a = values(DType::F16, n, 7, 0.5, 2.0);
            let b = values(DType::F16, n, 8, 0.5, 2.0);
            let (l, out) = run(&src, &[(DType::F16, a.clone()), (DType::F16, b.clone()), (DType::F16, vec![0.0; n])]);
            let c = l.explain.iter().find(|c| c.op == op).unwrap();
            assert!(tried(c, "smem").reason.contains(&format!("barrier: {barrier}")), "{}", c.render());
            for i in 0..n {
                let want = match op {
                    "zero" => 0.0,
                    "add" => round_to(DType::F16, a[i] + b[i]),
                    _ => round_to(DType::F16, a[i] * b[i]),
                };
                assert_eq!(out[2][i], want, "{scope} {op} element {i}");
            }
        }
    }
}

/// test_unary_op_vectorized [smem]: `fill` on shared memory at thread scope (every
/// thread its own row) and at cta scope, on shapes that do and do not vectorize.
#[test]
fn fill_at_thread_and_cta_scope() {
    for shape in [[128i64, 8, 1], [128, 4, 16], [128, 5, 5]] {
        let inner = region(&[0, 0], &shape[1..]);
        for scope in ["thread", "cta"] {
            let call = if scope == "thread" {
                format!("Tx.fill(S[tid, {inner}], 7.89)")
            } else {
                format!("Tx.cta.fill(S[0:128, {inner}], 7.89)")
            };
            let sh = tup(&shape);
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, {sh}, "float16")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([128])
    S = T.alloc_buffer({sh}, "float16", scope="shared")
    {call}
    T.cuda.cta_sync()
    Tx.cta.copy(A[0:128, {inner}], S[0:128, {inner}])
"#
            );
            let n: usize = shape.iter().product::<i64>() as usize;
            let (l, out) = run(&src, &[(DType::F16, vec![0.0; n])]);
            assert!(out[0].iter().all(|&v| v == round_to(DType::F16, 7.89)), "{scope} {shape:?}");
            assert_eq!(l.explain[0].chosen.as_deref(), Some("smem"), "{}", l.explain[0].render());
        }
    }
}

/// `fill` of a float8 shared tile (a GEMM's operand rows zeroed once): the value rounded once
/// to float8, vector stores through a swizzle-free tile; other ops on float8 still decline.
#[test]
fn fill_of_float8_shared_tiles() {
    for (dtype, name) in [(DType::F8E4M3, "float8_e4m3fn"), (DType::F8E5M2, "float8_e5m2")] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), "{name}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    S = T.alloc_buffer((64, 64), "{name}", scope="shared")
    Tx.cta.fill(S[0:64, 0:64], 7.89)
    Tx.cta.copy(A[0:64, 0:64], S[0:64, 0:64])
"#
        );
        let (l, out) = run(&src, &[(dtype, vec![0.0; 4096])]);
        assert!(out[0].iter().all(|&v| v == 8.0), "{name}: {:?}", &out[0][..4]);
        assert_eq!(l.explain[0].chosen.as_deref(), Some("smem"), "{}", l.explain[0].render());
        let add = src.replace("Tx.cta.fill(S[0:64, 0:64], 7.89)", "Tx.cta.add(S[0:64, 0:64], S[0:64, 0:64], 1.0)");
        let err = render(&lower_errors(&add), &add);
        assert!(err.contains("computes on float32, float16 and bfloat16 (fills float8 too)"), "{err}");
    }
}

/// A mixed pipeline with no register round trip: softmax of shared rows with the
/// shared reduction and shared elementwise ops (max, sub, exp, sum, fdiv).
#[test]
fn shared_pipeline_softmax_rows() {
    let src = format!(
        r#"{HEAD}def kernel(X_ptr: T.handle, Y_ptr: T.handle):
    X = T.match_buffer(X_ptr, (16, 64), "float32")
    Y = T.match_buffer(Y_ptr, (16, 64), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([128])
    S = T.alloc_buffer((16, 64), "float32", scope="shared")
    M = T.alloc_buffer((16, 1), "float32", scope="shared")
    Z = T.alloc_buffer((16, 1), "float32", scope="shared")
    Tx.cta.copy(S[0:16, 0:64], X[0:16, 0:64])
    T.cuda.cta_sync()
    Tx.cta.max(M[0:16, 0:1], S[0:16, 0:64])
    Tx.cta.sub(S[0:16, 0:64], S[0:16, 0:64], M[0:16, 0:1])
    Tx.cta.exp(S[0:16, 0:64], S[0:16, 0:64])
    Tx.cta.sum(Z[0:16, 0:1], S[0:16, 0:64])
    Tx.cta.fdiv(S[0:16, 0:64], S[0:16, 0:64], Z[0:16, 0:1])
    Tx.cta.copy(Y[0:16, 0:64], S[0:16, 0:64])
"#
    );
    let x = values(DType::F32, 1024, 9, -4.0, 4.0);
    let (l, out) = run(&src, &[(DType::F32, x.clone()), (DType::F32, vec![0.0; 1024])]);
    let chosen: Vec<&str> = l.explain.iter().filter_map(|c| c.chosen.as_deref()).collect();
    assert_eq!(chosen, ["gmem_smem", "shared", "smem", "smem", "shared", "smem", "gmem_smem"]);
    for r in 0..16 {
        let row = &x[r * 64..r * 64 + 64];
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..64 {
            let want = (row[c] - m).exp() / z;
            assert!((out[1][r * 64 + c] - want).abs() <= 1e-6 * want.max(1e-2), "({r}, {c})");
        }
    }
}
