//! Guarded copies (issue 29 items 2 and 3; docs/tile-primitives.md §3.3): `clip=True`
//! (elements past the buffer's end are not touched), `other=` (what a load writes there)
//! and `mask=lambda ...` (a condition on the destination's coordinates), on the register
//! copy. Ragged rows of every length against a padded register tile, rows past a run-time
//! row count, causal masks on an MMA accumulator, both directions, f32/bf16; values
//! checked through the simulator (which also checks every access's bounds and races),
//! whole vectors kept as vector accesses, and the declines.

mod common;
use common::*;
use tirx_ir::lir::{LStmt, LStmtKind, MemOp};
use tirx_ir::DType;
use tirx_lower::Lowered;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid, tx, mma_acc_layout

@T.prim_func
";

fn walk<'a>(stmts: &'a [LStmt], out: &mut Vec<&'a LStmtKind>) {
    for s in stmts {
        out.push(&s.kind);
        match &s.kind {
            LStmtKind::For { body, .. } => walk(body, out),
            LStmtKind::If { then_body, else_body, .. } => {
                walk(then_body, out);
                walk(else_body, out);
            }
            _ => {}
        }
    }
}

fn vector_copies(l: &Lowered) -> Vec<u32> {
    let mut all = Vec::new();
    walk(&l.lir.body, &mut all);
    all.iter()
        .filter_map(|k| match k {
            LStmtKind::Memory(MemOp::VecCopy { lanes, .. }) => Some(*lanes),
            _ => None,
        })
        .collect()
}

const POISON: f64 = -77.0;

/// Softmax's ragged row: a row of `n` elements in a register tile padded to whole vectors
/// of every thread (`clip=True` both ways, `other=-inf` on the load), for row lengths that
/// end inside a vector, on a vector boundary, in the first thread and past half the tile;
/// `m` rows a run-time count. The padding reads -inf and nothing past `n` is written.
#[test]
fn ragged_rows_through_a_padded_register_tile() {
    for (dtype, vec) in [("float32", 4i64), ("bfloat16", 8)] {
        let t = dt(dtype);
        for threads in [32i64, 64] {
            let nt = threads * vec * 2;
            for n in [1, 3, vec, vec + 1, threads * vec - 1, threads * vec + 5, nt - 1, nt] {
                let per = nt / (threads * vec);
                let src = format!(
                    r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, P_ptr: T.handle, m: T.int32):
    A = T.match_buffer(A_ptr, (m, {n}), "{dtype}")
    B = T.match_buffer(B_ptr, (m, {n}), "{dtype}")
    P = T.match_buffer(P_ptr, (m, {nt}), "{dtype}")
    T.device_entry()
    r = T.cta_id([m])
    T.warp_id([{w}]); T.lane_id([32]); T.thread_id([{threads}])
    X = T.alloc_buffer(({nt},), "{dtype}", scope="local", layout=TileLayout(S[({per}, {threads}, {vec}) : ({vec}, 1 @ tx, 1)]))
    Tx.cta.copy(X[0:{nt}], A[r, 0:{nt}], clip=True, other=-float("inf"))
    Tx.cta.copy(P[r, 0:{nt}], X[0:{nt}])
    Tx.cta.copy(B[r, 0:{nt}], X[0:{nt}], clip=True)
"#,
                    w = threads / 32
                );
                let m = 3usize;
                let a = values(t, m * n as usize, 1, -4.0, 4.0);
                let (l, out) = run_with(
                    &src,
                    &[m as i64],
                    &[(t, a.clone()), (t, vec![POISON; m * n as usize]), (t, vec![POISON; m * nt as usize])],
                );
                assert_eq!(out[1], a, "{dtype} {threads} threads n={n}: B");
                for r in 0..m {
                    for j in 0..nt as usize {
                        let want = if j < n as usize { a[r * n as usize + j] } else { f64::NEG_INFINITY };
                        assert_eq!(out[2][r * nt as usize + j], want, "{dtype} n={n}: P[{r}, {j}]");
                    }
                }
                // Whole vectors stay vector accesses (the register-to-P copy is unguarded).
                assert!(vector_copies(&l).iter().all(|&v| v as i64 == vec), "{dtype} n={n}");
                // A row that fills the tile needs no test: the copy is a plain one (no dead branches).
                let text = &tried(&l.explain[0], "reg").reason;
                assert_eq!(text.contains("guarded per vector (its two ends)"), n < nt, "n={n}: {text}");
            }
        }
    }
}

/// A tile of rows past a run-time row count (`A[by * 8 : by * 8 + 8, 0:32]` with `m` rows):
/// the rows past `m` read `other` and are not written, both dims guarded by `clip`.
#[test]
fn tiles_past_a_run_time_row_count() {
    for m in [1i64, 7, 8, 13, 16] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
    A = T.match_buffer(A_ptr, (m, 30), "float32")
    B = T.match_buffer(B_ptr, (m, 30), "float32")
    T.device_entry()
    by = T.cta_id([(m + 7) // 8])
    T.lane_id([32]); T.thread_id([32])
    X = T.alloc_buffer((8, 32), "float32", scope="local", layout=TileLayout(S[(8, 32) : (1, 1 @ laneid)]))
    Tx.warp.copy(X[0:8, 0:32], A[by * 8 : by * 8 + 8, 0:32], clip=True, other=0.5)
    Tx.warp.copy(B[by * 8 : by * 8 + 8, 0:32], X[0:8, 0:32], clip=True)
"#
        );
        let a = values(DType::F32, (m * 30) as usize, 2, -1.0, 1.0);
        let (_, out) = run_with(&src, &[m], &[(DType::F32, a.clone()), (DType::F32, vec![POISON; (m * 30) as usize])]);
        assert_eq!(out[1], a, "m={m}");
    }
}

/// Rows past a run-time row count into an MMA accumulator whose vectors run along its columns
/// (all inside the buffer): every lane of a vector has the same test, so the vector moves whole
/// or its lanes take `other`, with no lane-by-lane path (no `if` inside the vector's `else`).
#[test]
fn a_vector_whose_lanes_share_the_test_moves_whole_or_fills() {
    for m in [1i64, 9, 16] {
        let src = format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
    A = T.match_buffer(A_ptr, (m, 32), "float32")
    B = T.match_buffer(B_ptr, (m, 32), "float32")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    X = T.alloc_buffer((16, 32), "float32", scope="local", layout=mma_acc_layout(16, 32))
    Tx.warp.copy(X[0:16, 0:32], A[0:16, 0:32], clip=True, other=0.25)
    Tx.warp.copy(B[0:16, 0:32], X[0:16, 0:32], clip=True)
"#
        );
        let a = values(DType::F32, (m * 32) as usize, 3, -1.0, 1.0);
        let (l, out) = run_with(&src, &[m], &[(DType::F32, a.clone()), (DType::F32, vec![POISON; (m * 32) as usize])]);
        assert_eq!(out[1], a, "m={m}");
        assert!(vector_copies(&l).iter().all(|&v| v == 2), "{:?}", vector_copies(&l));
        let mut all = Vec::new();
        walk(&l.lir.body, &mut all);
        for k in all {
            if let LStmtKind::If { else_body, .. } = k {
                assert!(
                    else_body.iter().all(|s| !matches!(s.kind, LStmtKind::If { .. })),
                    "a lane-by-lane path under a vector's test:\n{}",
                    l.lir
                );
            }
        }
    }
}

/// Causal masks on an MMA accumulator (FlashAttention's diagonal block): a masked load with
/// `other=0` and a masked store that leaves the upper triangle as it was; a run-time offset.
#[test]
fn causal_masks_both_ways_on_an_accumulator() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle, Q_ptr: T.handle, off: T.int32):
    A = T.match_buffer(A_ptr, (16, 64), "float32")
    O = T.match_buffer(O_ptr, (16, 64), "float32")
    Q = T.match_buffer(Q_ptr, (16, 64), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32]); T.lane_id([32])
    X = T.alloc_buffer((16, 64), "float32", scope="local", layout=mma_acc_layout(16, 64))
    Tx.warp.fill(X[0:16, 0:64], 9.0)
    Tx.warp.copy(X[0:16, 0:64], A[0:16, 0:64], mask=lambda i, j: j <= i + off, other=0.0)
    Tx.warp.copy(O[0:16, 0:64], X[0:16, 0:64])
    Tx.warp.copy(Q[0:16, 0:64], X[0:16, 0:64], mask=lambda i, j: (j <= i + off) & (i % 2 == 0))
"#
    );
    for off in [-3i64, 0, 5, 70] {
        let a = values(DType::F32, 16 * 64, 3, -2.0, 2.0);
        let (l, out) = run_with(
            &src,
            &[off],
            &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 1024]), (DType::F32, vec![POISON; 1024])],
        );
        for idx in 0..1024 {
            let (i, j) = ((idx / 64) as i64, (idx % 64) as i64);
            let causal = j <= i + off;
            assert_eq!(out[1][idx], if causal { a[idx] } else { 0.0 }, "off={off} O[{i}, {j}]");
            let stored = causal && i % 2 == 0;
            assert_eq!(out[2][idx], if stored { a[idx] } else { POISON }, "off={off} Q[{i}, {j}]");
        }
        // `i % 2` is not affine: that store tests every lane of its vectors.
        let summaries: Vec<String> = l.explain.iter().map(|c| tried(c, "reg").reason.clone()).collect();
        assert!(summaries[1].contains("its two ends"), "{summaries:?}");
        assert!(summaries[3].contains("every lane"), "{summaries:?}");
    }
}

/// What a guarded copy refuses, with the reason: `other=` on a store, `other=` alone, a mask
/// of the wrong arity, and a guard on a copy no guarded variant lowers (global ↔ shared).
#[test]
fn guarded_copy_declines() {
    let body = |call: &str| {
        format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32), "float32")
    B = T.match_buffer(B_ptr, (4, 30), "float32")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    X = T.alloc_buffer((32,), "float32", scope="local", layout=TileLayout(S[(32,) : (1 @ laneid,)]))
    S_ = T.alloc_buffer((32,), "float32", scope="shared")
    {call}
"#
        )
    };
    for (call, want) in [
        ("Tx.warp.copy(B[0, 0:32], X[0:32], clip=True, other=0.0)", "`other=` is what a load writes"),
        ("Tx.warp.copy(X[0:32], A[0, 0:32], other=0.0)", "give `mask=` or `clip=True` with it"),
        ("Tx.warp.copy(X[0:32], A[1, 0:32], mask=lambda i, j: j < 3)", "the mask takes 2 coordinate(s)"),
        ("Tx.warp.copy(S_[16:48], A[0, 0:32], clip=True)", "the shared region of `S_` must lie inside it"),
    ] {
        let src = body(call);
        let errs = render(&lower_errors(&src), &src);
        assert!(errs.contains(want), "{call}:\n{errs}");
    }
}

/// Global ↔ shared guarded copies (`gmem_smem_predicated`): a 16 x 64 bf16 tile at a run-time
/// row count and a ragged column count (`clip=True, other=0` on the load, `clip=True` on the
/// store), into plain and 128-byte-swizzled shared tiles, and a causal mask; each shared
/// tile is also stored whole to `P` so the filled elements are checked too.
#[test]
fn global_shared_tiles_past_the_edges() {
    for (layout, swizzled) in [("", false), (", layout=mma_shared_layout(\"bfloat16\", 3, (16, 64))", true)] {
        for (m, n) in [(16i64, 64i64), (13, 64), (16, 50), (5, 9), (1, 1)] {
            let src = format!(
                r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, P_ptr: T.handle, Q_ptr: T.handle, m: T.int32):
    A = T.match_buffer(A_ptr, (m, {n}), "bfloat16")
    B = T.match_buffer(B_ptr, (m, {n}), "bfloat16")
    P = T.match_buffer(P_ptr, (16, 64), "bfloat16")
    Q = T.match_buffer(Q_ptr, (16, 64), "bfloat16")
    T.device_entry()
    T.cta_id([1]); T.warp_id([2]); T.lane_id([32]); T.thread_id([64])
    S_ = T.alloc_buffer((16, 64), "bfloat16", scope="shared"{layout})
    Tx.cta.copy(S_[0:16, 0:64], A[0:16, 0:64], clip=True, other=0.0)
    T.cuda.cta_sync()
    Tx.cta.copy(P[0:16, 0:64], S_[0:16, 0:64])
    Tx.cta.copy(B[0:16, 0:64], S_[0:16, 0:64], clip=True)
    T.cuda.cta_sync()
    Tx.cta.copy(S_[0:16, 0:64], A[0:16, 0:64], clip=True, mask=lambda i, j: j <= i, other=-1.0)
    T.cuda.cta_sync()
    Tx.cta.copy(Q[0:16, 0:64], S_[0:16, 0:64])
"#
            )
            .replace("mma_acc_layout\n", "mma_acc_layout, mma_shared_layout\n");
            let t = DType::BF16;
            let (mu, nu) = (m as usize, n as usize);
            let a = values(t, mu * nu, 4, -2.0, 2.0);
            let (l, out) = run_with(
                &src,
                &[m],
                &[(t, a.clone()), (t, vec![POISON; mu * nu]), (t, vec![POISON; 1024]), (t, vec![POISON; 1024])],
            );
            assert_eq!(out[1], a, "swizzled={swizzled} m={m} n={n}: B");
            for i in 0..16 {
                for j in 0..64 {
                    let inside = i < mu && j < nu;
                    let p = if inside { a[i * nu + j] } else { 0.0 };
                    assert_eq!(out[2][i * 64 + j], p, "swizzled={swizzled} m={m} n={n}: P[{i}, {j}]");
                    let q = if inside && j <= i { a[i * nu + j] } else { -1.0 };
                    assert_eq!(out[3][i * 64 + j], q, "swizzled={swizzled} m={m} n={n}: Q[{i}, {j}]");
                }
            }
            let text = &tried(&l.explain[0], "gmem_smem_predicated").reason;
            assert!(text.contains("guarded per vector (its two ends)"), "{text}");
        }
    }
}

/// The matrix: scopes (thread, warp, warpgroup, cta) × float32 / float16 / bfloat16 × fills
/// (-inf, 0, NaN, none) × ragged lengths, a row tile of the scope's threads loaded with
/// `clip=True, other=fill` and stored back clipped; without `other=` the padding keeps what the
/// tile held (a `fill` of 3 first).
#[test]
fn guarded_copies_over_scopes_dtypes_and_fills() {
    let mut checked = 0;
    for (scope, threads, ids) in [
        ("Tx.", 1i64, "T.thread_id([1])"),
        ("Tx.warp.", 32, "T.lane_id([32]); T.thread_id([32])"),
        ("Tx.warpgroup.", 128, "T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id([128])"),
        ("Tx.cta.", 256, "T.warp_id([8]); T.lane_id([32]); T.thread_id([256])"),
    ] {
        let axis = match scope {
            "Tx.warp." => "1 @ laneid",
            "Tx.warpgroup." => "1 @ tid_in_wg",
            _ => "1 @ tx",
        };
        for (dtype, vec) in [("float32", 4i64), ("float16", 8), ("bfloat16", 8)] {
            let nt = threads * vec * 2;
            let layout = if threads == 1 {
                format!("TileLayout(S[({nt},) : (1,)])")
            } else {
                format!("TileLayout(S[(2, {threads}, {vec}) : ({vec}, {axis}, 1)])")
            };
            for (fill, fill_text) in [
                (Some(f64::NEG_INFINITY), "-float(\"inf\")"),
                (Some(0.0), "0.0"),
                (Some(f64::NAN), "float(\"nan\")"),
                (None, ""),
            ] {
                for n in [1, nt / 2 + 3, nt - 1] {
                    let other = if fill.is_some() { format!(", other={fill_text}") } else { String::new() };
                    let src = format!(
                        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, P_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, {n}), "{dtype}")
    B = T.match_buffer(B_ptr, (2, {n}), "{dtype}")
    P = T.match_buffer(P_ptr, (2, {nt}), "{dtype}")
    T.device_entry()
    r = T.cta_id([2])
    {ids}
    X = T.alloc_buffer(({nt},), "{dtype}", scope="local", layout={layout})
    {scope}fill(X[0:{nt}], 3.0)
    {scope}copy(X[0:{nt}], A[r, 0:{nt}], clip=True{other})
    {scope}copy(P[r, 0:{nt}], X[0:{nt}])
    {scope}copy(B[r, 0:{nt}], X[0:{nt}], clip=True)
"#
                    )
                    .replace("laneid, tx,", "laneid, tx, tid_in_wg,");
                    let t = dt(dtype);
                    let (nu, ntu) = (n as usize, nt as usize);
                    let a = values(t, 2 * nu, 5, -4.0, 4.0);
                    let (_, out) =
                        run_with(&src, &[], &[(t, a.clone()), (t, vec![POISON; 2 * nu]), (t, vec![POISON; 2 * ntu])]);
                    assert_eq!(out[1], a, "{scope} {dtype} n={n}: B");
                    for r in 0..2 {
                        for j in 0..ntu {
                            let got = out[2][r * ntu + j];
                            let want = if j < nu { a[r * nu + j] } else { fill.unwrap_or(3.0) };
                            let same = got == want || (got.is_nan() && want.is_nan());
                            assert!(same, "{scope} {dtype} fill {fill_text:?} n={n}: P[{r}, {j}] = {got}, want {want}");
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 4 * 3 * 4 * 3);
}
