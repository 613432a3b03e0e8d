//! permute_layout → warp_xor_swizzle (docs/tile-primitives.md §3.22), by value in
//! the simulator: the reference's cases (test_permute_layout.py: generic transposes,
//! the scale-factor blockwise transpose in a pipeline loop, identity, shared ↔
//! shared) and its rejections, each element of the destination checked against
//! the source at the same logical index.

mod common;
use common::*;
use tirx_lower::{CommonRule, PermuteRule, Rule};

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, mma_shared_layout
";

fn tup(v: &[i64]) -> String {
    format!("({},)", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", "))
}

fn full(shape: &[i64]) -> String {
    shape.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ")
}

/// A row-major stride list of `shape`.
fn row_major(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// `B[region] <- A[region]` by one warp, global buffers of `shape` under the two stride lists.
fn global_kernel(dtype: &str, shape: &[i64], a_strides: &[i64], b_strides: &[i64]) -> String {
    let (s, r) = (tup(shape), full(shape));
    format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {s}, "{dtype}", layout=TileLayout(S[{s}:{}]))
    B = T.match_buffer(B_ptr, {s}, "{dtype}", layout=TileLayout(S[{s}:{}]))
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    Tx.warp.permute_layout(B[{r}], A[{r}])
"#,
        tup(a_strides),
        tup(b_strides)
    )
}

/// The element of a buffer under `strides` holding logical index `i` (row-major over `shape`).
fn home(shape: &[i64], strides: &[i64], mut i: i64) -> usize {
    let mut at = 0;
    for d in (0..shape.len()).rev() {
        at += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    at as usize
}

/// Runs a permutation and checks `B`'s element at every logical index against `A`'s.
fn check(src: &str, dtype: &str, shape: &[i64], a_strides: &[i64], b_strides: &[i64]) -> String {
    let t = dt(dtype);
    let n: i64 = shape.iter().product();
    let a: Vec<f64> = (0..n).map(|i| ((i * 37) % 251) as f64).collect();
    let (l, out) = run(src, &[(t, a.clone()), (t, vec![0.0; n as usize])]);
    for i in 0..n {
        let (want, got) = (a[home(shape, a_strides, i)], out[1][home(shape, b_strides, i)]);
        assert_eq!(got, want, "{dtype} {shape:?}: logical element {i}\n{}", l.lir);
    }
    tirx_cuda::generate(&l.lir).expect("cuda").source
}

/// test_generic_transpose: row-major (R, 32) into column-major, u32 / i32 / f32.
#[test]
fn generic_transposes() {
    for dtype in ["uint32", "int32", "float32"] {
        for rows in [8i64, 16] {
            let shape = [rows, 32];
            let (a, b) = (vec![32, 1], vec![1, rows]);
            let cuda = check(&global_kernel(dtype, &shape, &a, &b), dtype, &shape, &a, &b);
            assert!(cuda.contains("__syncwarp();"), "{cuda}");
        }
    }
}

/// test_sf_blockwise_transpose: per pipeline stage, a (high, 4, 32) block of scale
/// factors from (…, 32, 1) strides into (…, 1, 4); the xor factor is k = 2 (`>> 3`).
#[test]
fn scale_factor_blockwise_transpose() {
    for (dtype, high) in [("uint32", 1i64), ("uint32", 2), ("int32", 1), ("float32", 1)] {
        let pipe = 2i64;
        let shape = [pipe, high, 4, 32];
        let a = row_major(&shape);
        let b = vec![high * 128, 128, 1, 4];
        let (s, inner) = (tup(&shape), format!("0:{high}, 0:4, 0:32"));
        let src = format!(
            r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {s}, "{dtype}", layout=TileLayout(S[{s}:{}]))
    B = T.match_buffer(B_ptr, {s}, "{dtype}", layout=TileLayout(S[{s}:{}]))
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    for s in T.serial(0, {pipe}):
        Tx.warp.permute_layout(B[s, {inner}], A[s, {inner}])
"#,
            tup(&a),
            tup(&b)
        );
        let cuda = check(&src, dtype, &shape, &a, &b);
        assert!(cuda.contains(">> 3"), "{dtype} high={high}: the xor factor k = 2\n{cuda}");
    }
}

/// test_identity_passes_through_as_copy: the same layout on both sides is a copy (k = 0).
#[test]
fn identity_is_a_copy() {
    let shape = [4i64, 32];
    let a = row_major(&shape);
    let src = global_kernel("float32", &shape, &a, &a);
    check(&src, "float32", &shape, &a, &a);
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    assert!(ex[0].render().contains("4 registers per lane, no lane swizzle (k = 0)"), "{}", ex[0].render());
    // In place: every element is read before any is written (the simulator checks the order).
    let in_place = src.replace("permute_layout(B[", "permute_layout(A[");
    let (_, out) =
        run(&in_place, &[(dt("float32"), (0..128).map(f64::from).collect()), (dt("float32"), vec![0.0; 128])]);
    assert_eq!(out[0], (0..128).map(f64::from).collect::<Vec<_>>());
}

/// test_shared_to_shared: global → shared (row-major), permuted into a column-major
/// shared tile, back to global; and an in-place permutation through a view is not
/// needed: one buffer has one layout.
#[test]
fn shared_to_shared() {
    // 4-byte elements into a column-major tile; 2- and 8-byte ones row-major (a copy: a
    // column-major tile of them has a conflicting lane in every xor pattern).
    for (dtype, col) in [("uint32", "(1, 8)"), ("float32", "(1, 8)"), ("float16", "(32, 1)"), ("float64", "(32, 1)")] {
        let src = format!(
            r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 32), "{dtype}")
    B = T.match_buffer(B_ptr, (8, 32), "{dtype}")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    S_row = T.alloc_buffer((8, 32), "{dtype}", scope="shared")
    S_col = T.alloc_buffer((8, 32), "{dtype}", scope="shared", layout=TileLayout(S[(8, 32):{col}]))
    Tx.warp.copy(S_row[0:8, 0:32], A[0:8, 0:32])
    T.cuda.warp_sync()
    Tx.warp.permute_layout(S_col[0:8, 0:32], S_row[0:8, 0:32])
    Tx.warp.copy(B[0:8, 0:32], S_col[0:8, 0:32])
"#
        );
        let t = dt(dtype);
        let a: Vec<f64> = (0..256).map(|i| ((i * 91) % 257) as f64).collect();
        let (l, out) = run(&src, &[(t, a.clone()), (t, vec![0.0; 256])]);
        assert_eq!(out[1], a, "{dtype}: the round trip through the transposed tile");
        let ex = &l.explain[1];
        assert_eq!(ex.chosen.as_deref(), Some("warp_xor_swizzle"), "{}", ex.render());
    }
}

fn one_call(decl: &str, call: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 32), "float32")
    B = T.match_buffer(B_ptr, (8, 32), "float32", layout=TileLayout(S[(8, 32):(1, 8)]))
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.warp_id([2]); T.thread_id([64])
    {decl}
    {call}
"#
    )
}

/// The reference's rejections (dtype, shape, swizzled layout, not a warp) and ours
/// (volume, bank conflicts on shared memory), each with the words it must carry.
/// (A stride-1 16-bit permutation, which the reference declines, is accepted:
/// lanes sharing a word do not conflict; `shared_to_shared` moves one.)
#[test]
fn rejections_say_why() {
    let script_errors = [
        (
            "H = T.alloc_buffer((8, 32), \"float16\", scope=\"shared\")",
            "Tx.warp.permute_layout(H[0:8, 0:32], A[0:8, 0:32])",
            "permute_layout dtype mismatch",
        ),
        ("", "Tx.warp.permute_layout(B[0:8, 0:16], A[0:8, 0:32])", "permute_layout slice shape mismatch"),
    ];
    for (decl, call, words) in script_errors {
        let src = one_call(decl, call);
        let d = tirx_script::parse_kernel("k.py", &src).unwrap_err();
        assert!(d[0].message.contains(words), "{}", render(&d, &src));
    }
    let swz =
        "Z = T.alloc_buffer((8, 32), \"float32\", scope=\"shared\", layout=mma_shared_layout(\"float32\", 3, (8, 32)))";
    // 32 lanes one bank apart by 32 words: every lane in bank 0, and P = 1 leaves only k = 0.
    let strided = "W = T.alloc_buffer((32,), \"float32\", scope=\"shared\", layout=TileLayout(S[(32,):(32,)]))\n    V = T.alloc_buffer((32,), \"float32\", scope=\"shared\")";
    let declines: [(&str, &str, Rule, &str); 4] = [
        ("", "Tx.cta.permute_layout(B[0:8, 0:32], A[0:8, 0:32])", CommonRule::ExecScope.into(), "need warp"),
        (swz, "Tx.warp.permute_layout(Z[0:8, 0:32], A[0:8, 0:32])", CommonRule::Layout.into(), "plain TileLayout"),
        ("", "Tx.warp.permute_layout(B[0:3, 0:32], A[0:3, 0:32])", PermuteRule::Volume.into(), "96 elements"),
        (strided, "Tx.warp.permute_layout(V[0:32], W[0:32])", PermuteRule::BankConflict.into(), "bank"),
    ];
    for (decl, call, want, words) in declines {
        let src = one_call(decl, call);
        let (ex, lowered) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
        let c = ex.last().expect("the call");
        assert_eq!(rule(c, "warp_xor_swizzle"), want, "{}", c.render());
        let t = tried(c, "warp_xor_swizzle");
        assert!(t.reason.contains(words), "`{words}` not in `{}`", t.reason);
        let errs = lowered.unwrap_err();
        assert!(
            errs[0].message.contains("no lowering variant applies to this `permute_layout`"),
            "{}",
            errs[0].message
        );
    }
}
