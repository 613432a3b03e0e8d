//! Focused checks of the CUDA printer: precedence, literals, per-dtype
//! functions, names, dead-statement removal, declarations, metadata, and the
//! errors for LIR that breaks its rules.

mod common;

use common::*;
use tirx_cuda::{generate, CodegenError};
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, LExpr, LKernel, LStmt, PackedOp, PairSrc, RoundMode, RoundOp};
use tirx_ir::DType;

fn src(k: &LKernel) -> String {
    generate(k).unwrap_or_else(|e| panic!("generate failed: {e}")).source
}

fn invalid(k: &LKernel) -> String {
    match generate(k) {
        Err(CodegenError::InvalidLir(m)) => m,
        other => panic!("expected InvalidLir, got {other:?}"),
    }
}

/// A one-thread kernel storing `value` (of dtype `t`) into `out[0]`; returns the store line.
fn store_line(t: DType, build: impl FnOnce(&mut Kb) -> LExpr) -> String {
    let mut kb = Kb::new("k", [1, 1, 1], [1, 1, 1]);
    let out = kb.param("out", t, &[4]);
    let value = build(&mut kb);
    let k = kb.finish(vec![store(out, i(0), value)]);
    let s = src(&k);
    s.lines()
        .find(|l| l.trim_start().starts_with("out[0] = "))
        .unwrap_or_else(|| panic!("no store in\n{s}"))
        .trim()
        .trim_start_matches("out[0] = ")
        .trim_end_matches(';')
        .to_string()
}

/// Stores an int32 expression over the int32 inputs `a`, `b`, `c` (loads of `x[0..3]`).
fn int_expr(build: impl FnOnce(LExpr, LExpr, LExpr) -> LExpr) -> String {
    store_line(DType::I32, |kb| {
        let x = kb.param("x", DType::I32, &[3]);
        build(load(x, i(0)), load(x, i(1)), load(x, i(2)))
    })
}

#[test]
fn parentheses_only_where_c_needs_them() {
    assert_eq!(int_expr(|a, b, c| sub(a, sub(b, c))), "x[0] - (x[1] - x[2])");
    assert_eq!(int_expr(|a, b, c| sub(sub(a, b), c)), "x[0] - x[1] - x[2]");
    assert_eq!(int_expr(|a, b, c| mul(add(a, b), c)), "(x[0] + x[1]) * x[2]");
    assert_eq!(int_expr(|a, b, c| add(mul(a, b), c)), "x[0] * x[1] + x[2]");
    assert_eq!(int_expr(|a, _, _| sub(a, i(-3))), "x[0] - -3");
    // Integer + and * regroup freely (they wrap); float ones keep the LIR's grouping.
    assert_eq!(int_expr(|a, b, c| add(a, add(b, c))), "x[0] + x[1] + x[2]");
    assert_eq!(int_expr(|a, b, c| mul(a, mul(b, c))), "x[0] * x[1] * x[2]");
    assert_eq!(int_expr(|a, b, c| sub(a, add(b, c))), "x[0] - (x[1] + x[2])");
    let float_sum = store_line(DType::F32, |kb| {
        let x = kb.param("x", DType::F32, &[3]);
        add(load(x, i(0)), add(load(x, i(1)), load(x, i(2))))
    });
    assert_eq!(float_sum, "x[0] + (x[1] + x[2])");
    assert_eq!(store_line(DType::I32, |_| LExpr::Un(UnOp::Neg, Box::new(i(-3)))), "-(-3)");
    assert_eq!(int_expr(|a, _, _| LExpr::Un(UnOp::Neg, Box::new(LExpr::Un(UnOp::Neg, Box::new(a))))), "-(-x[0])");
    assert_eq!(
        int_expr(|a, b, c| LExpr::Select(Box::new(lt(a.clone(), b.clone())), Box::new(add(a, c)), Box::new(b))),
        "x[0] < x[1] ? x[0] + x[2] : x[1]"
    );
}

#[test]
fn parentheses_for_readability_around_mixed_bit_and_modulo_ops() {
    let (and, or, xor, shl) = (LBinOp::BitAnd, LBinOp::BitOr, LBinOp::BitXor, LBinOp::Shl);
    assert_eq!(int_expr(|a, b, c| bin(and, a, add(b, c))), "x[0] & (x[1] + x[2])");
    assert_eq!(int_expr(|a, b, _| bin(or, bin(shl, a, i(2)), b)), "(x[0] << 2) | x[1]");
    assert_eq!(int_expr(|a, b, c| bin(xor, bin(xor, a, b), c)), "x[0] ^ x[1] ^ x[2]");
    assert_eq!(int_expr(|a, b, _| mul(rem(a, i(16)), b)), "(x[0] % 16) * x[1]");
    assert_eq!(int_expr(|a, b, _| mul(div(a, i(8)), b)), "(x[0] / 8) * x[1]");
    let logic = store_line(DType::Bool, |kb| {
        let x = kb.param("x", DType::I32, &[4]);
        let cmp = |j, k| lt(load(x, i(j)), load(x, i(k)));
        bin(LBinOp::Or, bin(LBinOp::And, cmp(0, 1), cmp(1, 2)), cmp(2, 3))
    });
    assert_eq!(logic, "(x[0] < x[1] && x[1] < x[2]) || x[2] < x[3]");
}

#[test]
fn literals_carry_their_type() {
    assert_eq!(store_line(DType::I64, |_| l(5)), "5LL");
    assert_eq!(store_line(DType::I32, |_| i(i64::from(i32::MIN))), "(-2147483647 - 1)");
    assert_eq!(store_line(DType::U32, |_| LExpr::Int(7, DType::U32)), "7u");
    assert_eq!(store_line(DType::F32, |_| f(0.1, DType::F32)), "0.1f");
    assert_eq!(store_line(DType::F32, |_| f(1e-7, DType::F32)), "1e-7f");
    assert_eq!(store_line(DType::F64, |_| f(0.1, DType::F64)), "0.1");
    assert_eq!(store_line(DType::F16, |_| f(1.5, DType::F16)), "__half(1.5f)");
    // A 16-bit literal is printed as its value of the type, so that it rounds once.
    assert_eq!(store_line(DType::F16, |_| f(0.1, DType::F16)), "__half(0.099975586f)");
    assert_eq!(
        store_line(DType::BF16, |_| f(1.0 + 2f64.powi(-8) + 2f64.powi(-40), DType::BF16)),
        "__nv_bfloat16(1.0078125f)"
    );
    assert_eq!(store_line(DType::F32, |_| f(f64::INFINITY, DType::F32)), "__int_as_float(0x7f800000)");
    assert_eq!(store_line(DType::Bool, |_| LExpr::Bool(true)), "true");
}

fn unary_math(t: DType, m: MathFn) -> String {
    store_line(t, |kb| {
        let x = kb.param("x", t, &[1]);
        math(m, load(x, i(0)))
    })
}

#[test]
fn math_functions_follow_the_dtype() {
    assert_eq!(unary_math(DType::F32, MathFn::Sqrt), "sqrtf(x[0])");
    assert_eq!(unary_math(DType::F64, MathFn::Exp), "exp(x[0])");
    assert_eq!(unary_math(DType::F16, MathFn::Sqrt), "hsqrt(x[0])");
    assert_eq!(unary_math(DType::F16, MathFn::Exp2), "hexp2(x[0])");
    assert_eq!(unary_math(DType::BF16, MathFn::Rsqrt), "hrsqrt(x[0])");
    assert_eq!(unary_math(DType::F16, MathFn::Tanh), "(__half)tanhf((float)x[0])");
    assert_eq!(unary_math(DType::F8E4M3, MathFn::Exp), "(__nv_fp8_e4m3)expf((float)x[0])");
    assert_eq!(unary_math(DType::I32, MathFn::Abs), "abs(x[0])");
    assert_eq!(unary_math(DType::I64, MathFn::Abs), "llabs(x[0])");
    assert_eq!(unary_math(DType::F32, MathFn::Abs), "fabsf(x[0])");
}

/// `op.mode` on loads of `x[0..]` of type `t`, stored into an `out` of the result type.
fn rounded(op: RoundOp, mode: RoundMode, t: DType) -> String {
    let out_t = if let RoundOp::Cvt(to) = op { to } else { t };
    store_line(out_t, |kb| {
        let x = kb.param("x", t, &[3]);
        LExpr::Rounded(op, mode, (0..op.arity() as i64).map(|j| load(x, i(j))).collect())
    })
}

#[test]
fn rounded_arithmetic_is_one_intrinsic_per_mode() {
    use RoundMode::*;
    assert_eq!(rounded(RoundOp::Fma, Rn, DType::F32), "__fmaf_rn(x[0], x[1], x[2])");
    assert_eq!(rounded(RoundOp::Fma, Rz, DType::F32), "__fmaf_rz(x[0], x[1], x[2])");
    assert_eq!(rounded(RoundOp::Fma, Rn, DType::F16), "__hfma(x[0], x[1], x[2])");
    assert_eq!(rounded(RoundOp::Fma, Rn, DType::BF16), "__hfma(x[0], x[1], x[2])");
    assert_eq!(rounded(RoundOp::Add, Rz, DType::F32), "__fadd_rz(x[0], x[1])");
    assert_eq!(rounded(RoundOp::Sub, Rm, DType::F32), "__fsub_rd(x[0], x[1])");
    assert_eq!(rounded(RoundOp::Mul, Rp, DType::F32), "__fmul_ru(x[0], x[1])");
    assert_eq!(rounded(RoundOp::Div, Rn, DType::F32), "__fdiv_rn(x[0], x[1])");
    assert_eq!(rounded(RoundOp::Cvt(DType::F16), Rm, DType::F32), "__float2half_rd(x[0])");
    assert_eq!(rounded(RoundOp::Cvt(DType::BF16), Rz, DType::F32), "__float2bfloat16_rz(x[0])");
    // 16-bit arithmetic has no directed rounding: invalid LIR.
    let m = invalid(&one_stmt(|kb| {
        let x = kb.param("x", DType::F16, &[2]);
        vec![store(x, i(0), LExpr::Rounded(RoundOp::Add, Rz, vec![load(x, i(0)), load(x, i(1))]))]
    }));
    assert!(m.contains("no add.rz instruction on float16 operands"), "{m}");
}

#[test]
fn float_max_and_min_helpers_propagate_nan() {
    let k = |t: DType, op: LBinOp| {
        let mut kb = Kb::new("k", [1, 1, 1], [1, 1, 1]);
        let x = kb.param("x", t, &[2]);
        src(&kb.finish(vec![store(x, i(0), bin(op, load(x, i(0)), load(x, i(1))))]))
    };
    let s = k(DType::F32, LBinOp::Max);
    assert!(s.contains("__device__ __forceinline__ float tirx_max(float a, float b) {"), "{s}");
    assert!(s.contains("#if __CUDA_ARCH__ >= 800\n    float d;\n    asm(\"max.NaN.f32 %0, %1, %2;\""), "{s}");
    assert!(s.contains("return (a != a || b != b) ? a + b : fmaxf(a, b);\n#endif"), "{s}");
    let s = k(DType::F64, LBinOp::Min);
    assert!(
        s.contains("double tirx_min(double a, double b) {\n    return (a != a || b != b) ? a + b : fmin(a, b);\n}"),
        "{s}"
    );
}

fn binary(t: DType, op: LBinOp) -> String {
    store_line(t, |kb| {
        let x = kb.param("x", t, &[2]);
        bin(op, load(x, i(0)), load(x, i(1)))
    })
}

#[test]
fn min_max_rem_and_floor_ops_follow_the_dtype() {
    // Float max and min propagate NaN (docs/numerics.md §6).
    assert_eq!(binary(DType::F32, LBinOp::Min), "tirx_min(x[0], x[1])");
    assert_eq!(binary(DType::F64, LBinOp::Max), "tirx_max(x[0], x[1])");
    assert_eq!(binary(DType::F16, LBinOp::Max), "__hmax_nan(x[0], x[1])");
    assert_eq!(binary(DType::I32, LBinOp::Min), "min(x[0], x[1])");
    assert_eq!(binary(DType::F32, LBinOp::Rem), "fmodf(x[0], x[1])");
    assert_eq!(binary(DType::F32, LBinOp::FloorDiv), "floorf(x[0] / x[1])");
    assert_eq!(binary(DType::U32, LBinOp::FloorDiv), "x[0] / x[1]");
    assert_eq!(binary(DType::U32, LBinOp::FloorMod), "x[0] % x[1]");
    assert_eq!(binary(DType::I64, LBinOp::FloorMod), "tirx_floormod(x[0], x[1])");
    assert_eq!(binary(DType::F8E5M2, LBinOp::Add), "(__nv_fp8_e5m2)((float)x[0] + (float)x[1])");
    assert_eq!(binary(DType::F16, LBinOp::Mul), "x[0] * x[1]");
}

#[test]
fn floor_helpers_are_emitted_once_per_width_and_only_when_used() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I64, &[4]);
    let fd = |a, b| bin(LBinOp::FloorDiv, a, b);
    let k = kb.finish(vec![
        store(out, i(0), fd(l(-7), l(2))),
        store(out, i(1), fd(l(7), l(-2))),
        store(out, i(2), cast(DType::I64, fd(tid(), i(4)))),
    ]);
    let s = src(&k);
    assert_eq!(s.matches("long long tirx_floordiv(long long a, long long b)").count(), 1, "{s}");
    assert_eq!(s.matches("int tirx_floordiv(int a, int b)").count(), 1, "{s}");
    assert!(!s.contains("tirx_floormod"), "{s}");
    let plain = src(&Kb::new("k", [1, 1, 1], [32, 1, 1]).finish(vec![]));
    assert!(!plain.contains("tirx_"), "{plain}");
}

#[test]
fn casts_go_through_float_for_narrow_floats() {
    let c = |from: DType, to: DType| {
        store_line(to, |kb| {
            let x = kb.param("x", from, &[1]);
            cast(to, load(x, i(0)))
        })
    };
    assert_eq!(c(DType::F32, DType::F16), "(__half)x[0]");
    assert_eq!(c(DType::F16, DType::F32), "(float)x[0]");
    assert_eq!(c(DType::F16, DType::BF16), "(__nv_bfloat16)(float)x[0]");
    assert_eq!(c(DType::I32, DType::F16), "(__half)(float)x[0]");
    assert_eq!(c(DType::F16, DType::I32), "(int)(float)x[0]");
    assert_eq!(c(DType::F16, DType::Bool), "(float)x[0] != 0.0f");
    assert_eq!(c(DType::I32, DType::I64), "(long long)x[0]");
    assert_eq!(store_line(DType::I64, |_| cast(DType::I64, bid())), "(long long)blockIdx.x");
    assert_eq!(store_line(DType::F32, |_| cast(DType::F32, add(tid(), i(1)))), "(float)((int)threadIdx.x + 1)");
}

#[test]
fn headers_only_for_the_types_used() {
    let with = |t: DType| {
        let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
        let a = kb.param("A", t, &[32]);
        let b = kb.param("B", t, &[32]);
        src(&kb.finish(vec![vcopy(b, tid(), a, tid(), 1)]))
    };
    assert!(!with(DType::F32).contains("#include"));
    let bf = with(DType::BF16);
    assert!(bf.contains("#include <cuda_bf16.h>") && !bf.contains("cuda_fp16.h"), "{bf}");
    assert!(with(DType::F8E4M3).contains("#include <cuda_fp8.h>"));
}

#[test]
fn names_are_sanitized_and_unique() {
    let mut kb = Kb::new("2d-copy", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A.in", DType::F32, &[32]);
    let b = kb.param("A_in", DType::F32, &[32]);
    let c = kb.param("int", DType::F32, &[32]);
    let d = kb.param("threadIdx", DType::F32, &[32]);
    let e = kb.param("uint4", DType::F32, &[32]);
    let f = kb.param("__x", DType::F32, &[32]);
    let t = kb.var("A_in", DType::I32);
    let k = kb.finish(vec![
        let_(t, tid()),
        store(b, v(t), load(a, v(t))),
        store(c, v(t), load(d, v(t))),
        vcopy(e, i(0), f, i(0), 4),
    ]);
    let s = src(&k);
    for want in [
        "v2d_copy(\n",
        "    float* __restrict__ A_in,\n",
        "    float* __restrict__ A_in_1,\n",
        "    float* __restrict__ int_,\n",
        "    float* __restrict__ threadIdx_,\n",
        "    float* __restrict__ uint4_,\n",
        "    float* __restrict__ v__x) {\n",
    ] {
        assert!(s.contains(want), "{want:?} in {s}");
    }
    assert!(s.contains("const int A_in_2 = (int)threadIdx.x;"), "{s}");
    assert_eq!(generate(&k).map(|m| m.meta.kernel).ok().as_deref(), Some("v2d_copy"));
}

#[test]
fn sibling_loops_reuse_a_name_and_nested_ones_do_not() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[64]);
    let (f1, f2, f3) = (kb.var("f", DType::I32), kb.var("f", DType::I32), kb.var("f", DType::I32));
    let k = kb.finish(vec![
        for_(f1, i(2), vec![store(out, v(f1), i(1))]),
        for_(f2, i(2), vec![for_(f3, i(2), vec![store(out, add(v(f2), v(f3)), i(2))])]),
    ]);
    let s = src(&k);
    assert_eq!(s.matches("for (int f = 0; f < 2; ++f)").count(), 2, "{s}");
    assert!(s.contains("for (int f_1 = 0; f_1 < 2; ++f_1)"), "{s}");
    assert!(s.contains("out[f + f_1] = 2;"), "{s}");
}

#[test]
fn dead_statements_are_not_printed() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[32]);
    let scratch = kb.local("scratch", DType::I32, &[4]);
    let (a, b, f1, f2) =
        (kb.var("a", DType::I32), kb.var("b", DType::I32), kb.var("f", DType::I32), kb.var("g", DType::I32));
    let k = kb.finish(vec![
        let_(a, tid()),
        let_(b, mul(v(a), i(2))),
        for_(f1, i(4), vec![comment("nothing here")]),
        for_(f2, i(0), vec![store(out, v(f2), i(0))]),
        if_else(eq(tid(), i(0)), vec![], vec![comment("also nothing")]),
        store(out, tid(), i(7)),
    ]);
    let s = src(&k);
    let body: Vec<&str> = s.lines().skip_while(|l| !l.starts_with("extern")).collect();
    assert_eq!(
        body,
        [
            "extern \"C\" __global__ void __launch_bounds__(32) k(int* __restrict__ out) {",
            "    out[(int)threadIdx.x] = 7;",
            "}"
        ],
        "{s}"
    );
    let _ = scratch;
}

/// A bounds check is for the simulator (`docs/lir.md` §2.7): no code, and a
/// `let` only the check reads is dead. `--emit tir` prints it.
#[test]
fn bounds_checks_print_nothing() {
    let mut kb = Kb::new("k", [2, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[2, 32]);
    let col = kb.var("col", DType::I32);
    let check = tirx_ir::lir::BoundsCheck {
        buf: out,
        name: "out".into(),
        shape: vec![2, 32],
        begins: vec![bid(), v(col)],
        extents: vec![1, 1],
        write: true,
    };
    let k = kb.finish(vec![
        let_(col, mul(tid(), i(2))),
        LStmt::new(tirx_ir::lir::LStmtKind::Bounds(check), Default::default()),
        store(out, tid(), i(7)),
    ]);
    let s = src(&k);
    let body: Vec<&str> = s.lines().skip_while(|l| !l.starts_with("extern")).collect();
    assert_eq!(
        body,
        [
            "extern \"C\" __global__ void __launch_bounds__(32) k(int* __restrict__ out) {",
            "    out[(int)threadIdx.x] = 7;",
            "}"
        ],
        "{s}"
    );
    assert!(k.to_string().contains("  bounds.write out[blockIdx.x : +1, col : +1] in (2, 32)\n"), "{k}");
}

#[test]
fn if_else_chains_and_unroll() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[32]);
    let f = kb.var("f", DType::I32);
    let k = kb.finish(vec![
        if_else(
            lt(tid(), i(8)),
            vec![store(out, tid(), i(1))],
            vec![if_else(lt(tid(), i(16)), vec![store(out, tid(), i(2))], vec![store(out, tid(), i(3))])],
        ),
        unroll(f, i(4), vec![store(out, v(f), i(0))]),
    ]);
    let s = src(&k);
    let want = "    if ((int)threadIdx.x < 8) {
        out[(int)threadIdx.x] = 1;
    } else if ((int)threadIdx.x < 16) {
        out[(int)threadIdx.x] = 2;
    } else {
        out[(int)threadIdx.x] = 3;
    }
    #pragma unroll
    for (int f = 0; f < 4; ++f) {
        out[f] = 0;
    }
";
    assert!(s.contains(want), "{s}");
}

#[test]
fn comments_stay_comments() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[32]);
    let k = kb.finish(vec![comment("line one \\\nline two"), store(out, tid(), i(1))]);
    let s = src(&k);
    assert!(s.contains("    // line one\n    // line two\n    out["), "{s}");
}

#[test]
fn shared_memory_declarations_and_metadata() {
    let mut kb = Kb::new("k", [2, 3, 1], [64, 2, 1]);
    let a = kb.param("A", DType::F16, &[8, 16]);
    let s1 = kb.shared_dyn("S1", DType::F16, &[3]);
    let s2 = kb.shared_dyn("S2", DType::F32, &[4]);
    let s3 = kb.shared("S3", DType::F32, &[4]);
    let k = kb.finish(vec![
        store(s1, i(0), load(a, i(0))),
        store(s2, i(0), cast(DType::F32, load(s1, i(0)))),
        store(s3, i(0), load(s2, i(0))),
        store(a, i(1), cast(DType::F16, load(s3, i(0)))),
    ]);
    let m = generate(&k).expect("generates");
    assert!(m.source.contains("    __shared__ alignas(16) float S3[4];\n"), "{}", m.source);
    // Every dynamic buffer starts on 128 bytes (the `align=` of pool allocations).
    assert!(m.source.contains("extern __shared__ __align__(128) unsigned char tirx_dyn_smem[];"), "{}", m.source);
    assert!(m.source.contains("__half* const S1 = reinterpret_cast<__half*>(tirx_dyn_smem);  // 3 elements"));
    assert!(m.source.contains("float* const S2 = reinterpret_cast<float*>(tirx_dyn_smem + 128);  // 4 elements"));
    assert!(m.source.contains("__launch_bounds__(128)"));
    assert_eq!(m.meta.dynamic_smem_bytes, 256);
    let json: serde_json::Value = serde_json::from_str(&m.meta.to_json()).expect("valid JSON");
    assert_eq!(json["kernel"], "k");
    assert_eq!(json["grid"], serde_json::json!([2, 3, 1]));
    assert_eq!(json["block"], serde_json::json!([64, 2, 1]));
    assert_eq!(
        json["params"],
        serde_json::json!([{"name": "A", "kind": "buffer", "dtype": "float16", "shape": [8, 16], "elems": 128, "bytes": 256, "written": true}])
    );
}

#[test]
fn too_much_static_shared_memory_is_an_error_with_a_fix() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let s = kb.shared("big", DType::F32, &[128, 128]);
    let out = kb.param("out", DType::F32, &[1]);
    let k = kb.finish(vec![store(out, i(0), load(s, tid()))]);
    match generate(&k) {
        Err(CodegenError::Unsupported(m)) => {
            assert!(m.contains("65536 bytes") && m.contains("shared.dyn"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn packed_scalar_operands_broadcast() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::BF16, &[64]);
    let k = kb.finish(vec![packed2(
        PackedOp::Max,
        DType::BF16,
        a,
        mul(tid(), i(2)),
        vec![PairSrc::Buf(a, mul(tid(), i(2))), PairSrc::Scalar(f(0.0, DType::BF16))],
    )]);
    let s = src(&k);
    assert!(
        s.contains("*reinterpret_cast<__nv_bfloat162*>(&A[(int)threadIdx.x * 2]) = __hmax2_nan(*reinterpret_cast<const __nv_bfloat162*>(&A[(int)threadIdx.x * 2]), __bfloat162bfloat162(__nv_bfloat16(0.0f)));"),
        "{s}"
    );
}

// ---- LIR validation (LKernel::validate, called by generate) ----

fn one_stmt(build: impl FnOnce(&mut Kb) -> Vec<LStmt>) -> LKernel {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let body = build(&mut kb);
    kb.finish(body)
}

#[test]
fn validation_rejects_scoping_errors() {
    let m = invalid(&one_stmt(|kb| {
        let out = kb.param("out", DType::I32, &[4]);
        let x = kb.var("x", DType::I32);
        vec![store(out, i(0), v(x))]
    }));
    assert!(m.contains("`x` is used outside the scope"), "{m}");
    let m = invalid(&one_stmt(|kb| {
        let x = kb.var("x", DType::I32);
        vec![let_(x, i(0)), let_(x, i(1))]
    }));
    assert!(m.contains("`x` is declared again"), "{m}");
    let m = invalid(&one_stmt(|kb| {
        let out = kb.param("out", DType::I32, &[4]);
        let f = kb.var("f", DType::I32);
        vec![for_(f, i(4), vec![]), store(out, v(f), i(0))]
    }));
    assert!(m.contains("`f` is used outside"), "{m}");
}

#[test]
fn validation_rejects_type_errors() {
    let mut cases: Vec<(LKernel, &str)> = vec![
        (
            one_stmt(|kb| {
                let out = kb.param("out", DType::I32, &[4]);
                vec![store(out, i(0), add(i(1), l(2)))]
            }),
            "Add of int32 and int64",
        ),
        (
            one_stmt(|kb| {
                let out = kb.param("out", DType::F32, &[4]);
                vec![store(out, i(0), i(1))]
            }),
            "store of a int32 value into float32 buffer `out`",
        ),
        (
            one_stmt(|kb| {
                let out = kb.param("out", DType::F32, &[4]);
                vec![store(out, f(0.0, DType::F32), f(1.0, DType::F32))]
            }),
            "index into `out` is float32",
        ),
        (
            one_stmt(|kb| {
                let out = kb.param("out", DType::F32, &[1 << 31]);
                vec![store(out, i(0), f(1.0, DType::F32))]
            }),
            "indices must be int64",
        ),
        (
            one_stmt(|kb| {
                let (a, b) = (kb.param("a", DType::F32, &[8]), kb.param("b", DType::F32, &[8]));
                vec![vcopy(a, i(0), b, i(0), 3)]
            }),
            "96 bits",
        ),
        (
            one_stmt(|kb| {
                let (a, b) = (kb.param("a", DType::F32, &[8]), kb.param("b", DType::F16, &[8]));
                vec![vcopy(a, i(0), b, i(0), 2)]
            }),
            "mixes float32 and float16",
        ),
        (
            one_stmt(|kb| {
                let (a, b) = (kb.param("a", DType::F32, &[8]), kb.param("b", DType::F32, &[8]));
                vec![vcopy(a, i(2), b, i(0), 4)]
            }),
            "vector copy of 4 lanes: index 2 into `a` is not a multiple of 4",
        ),
        (
            one_stmt(|kb| {
                let a = kb.param("a", DType::F32, &[8]);
                vec![packed2(PackedOp::Add, DType::F32, a, i(0), vec![PairSrc::Buf(a, i(0)), PairSrc::Buf(a, i(2))])]
            }),
            "packed op on float32",
        ),
        (
            one_stmt(|kb| {
                let a = kb.param("a", DType::F16, &[8]);
                vec![packed2(PackedOp::Fma, DType::F16, a, i(0), vec![PairSrc::Buf(a, i(0)), PairSrc::Buf(a, i(2))])]
            }),
            "takes 3 operands",
        ),
        (
            one_stmt(|kb| {
                let (a, b) = (kb.param("a", DType::F16, &[8]), kb.param("b", DType::BF16, &[8]));
                vec![cast2(b, i(0), a, i(0))]
            }),
            "no pair conversion float16 -> bfloat16",
        ),
        (
            one_stmt(|kb| {
                let s = kb.shared("s", DType::F32, &[64]);
                let r = kb.local("r", DType::F32, &[8]);
                vec![ldmatrix(1, false, s, i(0), r, vec![i(0)])]
            }),
            "move 16-bit elements (8-bit ones in pairs); `s` is float32",
        ),
        (
            one_stmt(|kb| {
                let s = kb.shared("s", DType::F16, &[64]);
                let r = kb.local("r", DType::F16, &[8]);
                vec![stmatrix(4, false, s, i(0), r, vec![i(0), i(2)])]
            }),
            "needs 4 register indices, got 2",
        ),
        (
            one_stmt(|kb| {
                let out = kb.param("out", DType::I32, &[4]);
                vec![store(out, i(1), math(MathFn::Sqrt, i(4)))]
            }),
            "sqrt of a int32 value",
        ),
    ];
    cases.push((
        one_stmt(|kb| {
            let a = kb.param("a", DType::F16, &[8]);
            vec![packed2(PackedOp::Add, DType::F16, a, i(1), vec![PairSrc::Buf(a, i(0)), PairSrc::Buf(a, i(2))])]
        }),
        "packed op: index 1 into `a` is not a multiple of 2",
    ));
    cases.push((
        one_stmt(|kb| {
            let s = kb.shared("s", DType::F16, &[64]);
            let r = kb.local("r", DType::F16, &[8]);
            vec![ldmatrix(1, false, s, i(4), r, vec![i(0)])]
        }),
        "ldmatrix/stmatrix row: index 4 into `s` is not a multiple of 8",
    ));
    for (k, want) in cases {
        let m = invalid(&k);
        assert!(m.contains(want), "expected {want:?} in {m:?}");
    }
}

#[test]
fn validation_rejects_bad_kernel_headers() {
    let mut kb = Kb::new("k", [1, 1, 1], [2048, 1, 1]);
    kb.param("a", DType::F32, &[4]);
    assert!(invalid(&kb.finish(vec![])).contains("at most 1024"));

    let mut k = Kb::new("k", [1, 1, 1], [32, 1, 1]).finish(vec![]);
    k.params.push(tirx_ir::lir::LBufId(3));
    assert!(invalid(&k).contains("buffer id 3 out of range"));

    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let a = kb.param("a", DType::F32, &[4]);
    let mut k = kb.finish(vec![]);
    k.params.retain(|p| *p != a);
    assert!(invalid(&k).contains("global buffer `a` is not a kernel parameter"));
}

#[test]
fn loop_bounds_keep_their_grouping() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    let out = kb.param("out", DType::I32, &[64]);
    let (f, g) = (kb.var("f", DType::I32), kb.var("g", DType::I32));
    let pick = LExpr::Select(Box::new(lt(tid(), i(4))), Box::new(i(1)), Box::new(i(2)));
    let mut from4 = for_(f, pick.clone(), vec![store(out, v(f), i(1))]);
    if let tirx_ir::lir::LStmtKind::For { begin, .. } = &mut from4.kind {
        *begin = i(4);
    }
    let k = kb.finish(vec![from4, for_(g, pick, vec![store(out, v(g), i(2))])]);
    let s = src(&k);
    assert!(s.contains("for (int f = 4; f < 4 + ((int)threadIdx.x < 4 ? 1 : 2); ++f) {"), "{s}");
    assert!(s.contains("for (int g = 0; g < ((int)threadIdx.x < 4 ? 1 : 2); ++g) {"), "{s}");
}

#[test]
fn absurd_shared_sizes_are_an_error_not_an_overflow() {
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    // 2^64 - 8 bytes each: rounding up to 16 B and summing saturate.
    let s = kb.shared("s", DType::F64, &[(1 << 61) - 1]);
    let t = kb.shared("t", DType::F64, &[(1 << 61) - 1]);
    let out = kb.param("out", DType::F64, &[1]);
    let k = kb.finish(vec![store(out, i(0), add(load(s, l(0)), load(t, l(0))))]);
    match generate(&k) {
        Err(CodegenError::Unsupported(m)) => assert!(m.contains("shared.dyn"), "{m}"),
        other => panic!("{other:?}"),
    }
}

// ---- collective and async families ----

/// The line of `src` that calls `what`, trimmed.
fn line_with(src: &str, what: &str) -> String {
    src.lines().find(|l| l.contains(what)).unwrap_or_else(|| panic!("no `{what}` in\n{src}")).trim().to_string()
}

#[test]
fn shuffles_use_the_overload_of_their_type_and_need_its_header() {
    use tirx_ir::lir::ShuffleMode::{Bfly, Down, Idx, Up};
    for (t, ty, header) in [
        (DType::F32, "float", None),
        (DType::F64, "double", None),
        (DType::I32, "int", None),
        (DType::U32, "unsigned int", None),
        (DType::I64, "long long", None),
        (DType::F16, "__half", Some("cuda_fp16.h")),
        (DType::BF16, "__nv_bfloat16", Some("cuda_bf16.h")),
    ] {
        for (mode, f) in
            [(Bfly, "__shfl_xor_sync"), (Down, "__shfl_down_sync"), (Up, "__shfl_up_sync"), (Idx, "__shfl_sync")]
        {
            let k = one_stmt(|kb| {
                let a = kb.param("A", t, &[32]);
                let y = kb.var("y", t);
                vec![shfl(y, load(a, tid()), mode, i(4), 8, 0x0000_ff00), store(a, tid(), v(y))]
            });
            let s = src(&k);
            assert_eq!(line_with(&s, f), format!("const {ty} y = {f}(0x0000ff00u, A[(int)threadIdx.x], 4, 8);"));
            assert_eq!(header.is_some_and(|h| s.contains(&format!("#include <{h}>"))), header.is_some(), "{s}");
        }
    }
}

#[test]
fn an_unread_shuffle_is_still_printed() {
    // Every lane of the mask executes it together, so it is never dropped like a dead `let`.
    let k = one_stmt(|kb| {
        let y = kb.var("y", DType::I32);
        vec![shfl(y, tid(), tirx_ir::lir::ShuffleMode::Bfly, i(1), 32, u32::MAX)]
    });
    assert!(src(&k).contains("__shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1, 32);"));
}

#[test]
fn cp_async_helpers_by_size_and_source_size() {
    let k = one_stmt(|kb| {
        let a = kb.param("A", DType::F16, &[64]);
        let s = kb.shared("S", DType::F16, &[64]);
        vec![
            cp_async(s, i(0), a, i(0), 16, None),
            cp_async(s, i(8), a, i(8), 16, None),
            cp_async(s, i(16), a, i(16), 8, Some(i(4))),
            cp_async(s, i(24), a, i(24), 4, None),
            commit_group(),
            wait_group(2),
        ]
    });
    let s = src(&k);
    // One helper per (size, source size), defined once.
    assert_eq!(s.matches("void tirx_cp_async_16(void* dst, const void* src)").count(), 1, "{s}");
    assert!(s.contains("cp.async.cg.shared.global [%0], [%1], 16;"), "{s}");
    assert!(s.contains("cp.async.ca.shared.global [%0], [%1], 8, %2;"), "{s}");
    assert!(s.contains("cp.async.ca.shared.global [%0], [%1], 4;"), "{s}");
    assert!(s.contains("__cvta_generic_to_shared(dst)"), "{s}");
    assert_eq!(line_with(&s, "tirx_cp_async_8_fill(&"), "tirx_cp_async_8_fill(&S[16], &A[16], 4);");
    assert_eq!(line_with(&s, "\"cp.async.commit_group"), "asm volatile(\"cp.async.commit_group;\" ::: \"memory\");");
    assert_eq!(line_with(&s, "\"cp.async.wait_group"), "asm volatile(\"cp.async.wait_group 2;\" ::: \"memory\");");
}

#[test]
fn mbarrier_operations() {
    let k = one_stmt(|kb| {
        let bars = kb.shared("bars", DType::I64, &[2]);
        vec![
            mbar_init(bars, i(1), i(64)),
            mbar_arrive(bars, i(1)),
            mbar_arrive_expect_tx(bars, i(1), i(4096)),
            mbar_wait(bars, i(1), rem(tid(), i(2))),
            fence_proxy_async(),
        ]
    });
    let s = src(&k);
    assert!(s.contains("__shared__ alignas(16) long long bars[2];"), "{s}");
    for (call, ptx) in [
        ("tirx_mbarrier_init(&bars[1], 64);", "mbarrier.init.shared.b64 [%0], %1;"),
        ("tirx_mbarrier_arrive(&bars[1]);", "mbarrier.arrive.shared.b64 state, [%0];"),
        (
            "tirx_mbarrier_arrive_expect_tx(&bars[1], 4096);",
            "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;",
        ),
        (
            "tirx_mbarrier_wait(&bars[1], (int)threadIdx.x % 2);",
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;",
        ),
    ] {
        assert!(s.contains(&format!("    {call}\n")), "`{call}` not in\n{s}");
        assert!(s.contains(ptx), "`{ptx}` not in\n{s}");
    }
    // Below sm_90 the wait spins on test_wait, which sm_80 has.
    assert!(s.contains("#if __CUDA_ARCH__ >= 900") && s.contains("mbarrier.test_wait.parity.shared.b64"), "{s}");
    assert!(s.contains("asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");"), "{s}");
}

#[test]
fn validation_rejects_bad_family_operands() {
    let m = invalid(&one_stmt(|kb| {
        let y = kb.var("y", DType::F32);
        vec![shfl(y, f(1.0, DType::F32), tirx_ir::lir::ShuffleMode::Bfly, i(1), 6, u32::MAX)]
    }));
    assert!(m.contains("width 6 is not a power of two"), "{m}");
    let m = invalid(&one_stmt(|kb| {
        let a = kb.param("A", DType::F32, &[64]);
        let s = kb.shared("S", DType::F32, &[64]);
        vec![cp_async(s, i(0), a, i(0), 32, None)]
    }));
    assert!(m.contains("cp.async of 32 bytes"), "{m}");
}

/// A TMA copy naming a map the kernel does not declare, or a map over a buffer that is
/// not a parameter, is invalid LIR: validation refuses both before the printer (which
/// itself errs rather than writing `/*no tensor map*/` or a `usize::MAX` parameter index).
#[test]
fn tensor_maps_must_be_declared_and_map_a_parameter() {
    use tirx_ir::lir::{AsyncOp, LStmtKind, SymExpr, TensorMap, TmaCopy, TmapDtype, TmapId};
    let mut kb = Kb::new("k", [1, 1, 1], [32, 1, 1]);
    kb.param("A", DType::F16, &[64]);
    let s = kb.shared("S", DType::F16, &[64]);
    let copy = TmaCopy {
        map: TmapId(0),
        coords: vec![i(0)],
        smem: s,
        smem_index: i(0),
        bar: None,
        multicast: None,
        cache: None,
        reduce: None,
    };
    let mut k = kb.finish(vec![LStmt::new(LStmtKind::Async(AsyncOp::TmaStore(copy)), Default::default())]);
    let m = invalid(&k);
    assert!(m.contains("tensor map #0 does not exist"), "{m}");
    k.tmaps.push(TensorMap {
        name: "S_tmap".into(),
        buf: s,
        dtype: TmapDtype::F16,
        base_offset: 0,
        dims: vec![SymExpr::Int(64)],
        strides: vec![],
        boxes: vec![64],
        elem_strides: vec![1],
        swizzle: 0,
        l2_promotion: 0,
        oob_nan: false,
    });
    let m = invalid(&k);
    assert!(m.contains("`S` is not a global buffer parameter"), "{m}");
}

/// Four byte moves filling a 32-bit word of registers from two words print as one
/// `__byte_perm` (PRMT); other runs print as the moves they are.
#[test]
fn byte_moves_filling_a_word_are_one_byte_perm() {
    let perm = |sources: [i64; 4], n: usize| {
        let mut kb = Kb::new("k", [1, 1, 1], [1, 1, 1]);
        let out = kb.param("out", DType::U8, &[4]);
        let a = kb.local("a", DType::U8, &[12]);
        let b = kb.local("b", DType::U8, &[4]);
        let mut body: Vec<LStmt> = (0..12).map(|x| store(a, i(x), load(out, i(x % 4)))).collect();
        body.extend(sources.iter().take(n).enumerate().map(|(j, &x)| store(b, i(j as i64), load(a, i(x)))));
        body.extend((0..4).map(|x| store(out, i(x), load(b, i(x)))));
        src(&kb.finish(body))
    };
    let s = perm([0, 2, 4, 6], 4);
    assert!(
        s.contains("*reinterpret_cast<unsigned*>(&b[0]) = __byte_perm(*reinterpret_cast<const unsigned*>(&a[0]), *reinterpret_cast<const unsigned*>(&a[4]), 0x6420);"),
        "{s}"
    );
    assert!(perm([9, 8, 11, 10], 4).contains(
        "__byte_perm(*reinterpret_cast<const unsigned*>(&a[8]), *reinterpret_cast<const unsigned*>(&a[8]), 0x2301)"
    ));
    for (sources, n) in [([0, 4, 8, 1], 4), ([0, 1, 2, 3], 3)] {
        let s = perm(sources, n);
        assert!(!s.contains("__byte_perm"), "{sources:?} {n}: {s}");
    }
}
