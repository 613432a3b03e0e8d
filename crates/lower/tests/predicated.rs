//! copy → gmem_smem_predicated: ragged tiles keep every thread working with
//! the widest aligned vector and a guarded last round; explain reports why
//! gmem_smem declined and what was chosen; simulated round trips check values.

mod common;
use common::*;
use tirx_lower::{CommonRule, CopyRule};

const VARIANT: &str = "gmem_smem_predicated";

fn ragged(scope: &'static str, threads: i64, g_shape: &[i64], region: &[(i64, i64)], dtype: &'static str) -> RoundTrip {
    RoundTrip {
        scope,
        threads,
        ctas: 1,
        dtype,
        g_shape: g_shape.to_vec(),
        g_region: region.to_vec(),
        s_shape: region.iter().map(|r| r.1).collect(),
        s_layout: None,
        dispatch: None,
    }
}

/// The issue's tile: 60×100 f32 per 128-thread CTA, symbolic begins in cta ids.
#[test]
fn ragged_tile_is_cooperative() {
    let src =
        include_str!("../../../examples/bench/ragged_copy_f32.py").replace("M, N = 15360, 4000", "M, N = 120, 200");
    let l = lower(&src);
    assert!(l.warnings.is_empty(), "no slow-pick warning expected: {:?}", l.warnings);
    for i in 0..2 {
        let c = call(&l, i);
        assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some(VARIANT), Some(4), Some(12)), "{}", c.render());
        assert_eq!(rule(c, "gmem_smem"), CopyRule::DividesThreadCnt);
        let mine = tried(c, VARIANT);
        assert!(mine.reason.contains("vec 4 (16 B) × 128 threads, 1500 vectors in 12 rounds"), "{}", mine.reason);
        assert!(mine.reason.contains("last round guarded: 92 of 128 threads active"), "{}", mine.reason);
        assert!(c.limits.iter().any(|m| m.contains("36 threads idle in the last round")), "{:?}", c.limits);
    }
    let text = l.lir.to_string();
    assert!(text.contains("tid < 92"), "{text}");
    // 2×2 CTAs of the 120×200 tensor: the whole tensor round-trips.
    let a = pattern(tirx_ir::DType::F32, 120 * 200);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    assert_eq!(params[1], a);
}

/// Vector width follows gmem_smem's alignment rules; thread counts that leave
/// an empty guarded round need no `if`.
#[test]
fn vector_width_and_rounds() {
    // (scope, threads, global shape, region, dtype, vec, rounds)
    type Row = (&'static str, i64, Vec<i64>, Vec<(i64, i64)>, &'static str, u32, u64);
    let rows: Vec<Row> = vec![
        // A whole 30×30 f16 tensor is one contiguous run: vec 4 (8 B, 900 = 225·4), 8 rounds.
        ("warp", 32, vec![30, 30], vec![(0, 30), (0, 30)], "float16", 4, 8),
        // 30×30 f16 out of rows of 32: runs of 60 B → vec 2 (4 B); 450 pairs over 32 lanes → 15 rounds.
        ("warp", 32, vec![30, 32], vec![(0, 30), (0, 30)], "float16", 2, 15),
        // Region at column 3 of f32: only scalars are aligned.
        ("wg", 128, vec![40, 64], vec![(1, 33), (3, 20)], "float32", 1, 6),
        // 1-D 1000 int8 at offset 16: 1000 = 62·16 + 8 has no 16-wide tail → vec 8, 125 vectors.
        ("cta", 96, vec![1100], vec![(16, 1000)], "int8", 8, 2),
        // f64 rows of 7: vec 1.
        ("warp", 32, vec![9, 7], vec![(0, 9), (0, 7)], "float64", 1, 2),
    ];
    for (scope, t, g, region, dt, vec, rounds) in rows {
        // Forced: the first two are moved with 16-byte global vectors by gmem_smem_peel
        // (tests/peel.rs); this is the predicated split's own plan.
        let rt = ragged(scope, t, &g, &region, dt).forced(VARIANT);
        let l = rt.check();
        let c = call(&l, 0);
        assert_eq!(
            (c.chosen.as_deref(), c.vec, c.rounds),
            (Some(VARIANT), Some(vec), Some(rounds)),
            "{rt:?}\n{}",
            c.render()
        );
    }
}

/// Swizzled shared side: vectors stay inside the swizzle chunk, addresses go
/// through the xor swizzle; values checked against the pattern.
#[test]
fn swizzled_shared() {
    let mut rt = ragged("wg", 128, &[40, 72], &[(1, 39), (8, 64)], "float16");
    rt.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[(39, 64)]))".into());
    let l = rt.check();
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some(VARIANT), Some(8), Some(3)), "{}", c.render());
    assert!(l.lir.to_string().contains('^'), "{}", l.lir);
    let mut rt = ragged("warp", 32, &[12, 20], &[(0, 12), (0, 20)], "float32");
    rt.s_layout = Some("ComposeLayout(1, 3, 3, TileLayout(S[(12, 20)]))".into());
    let c = call(&rt.check(), 1).clone();
    assert_eq!(c.vec, Some(2), "{}", c.render());
    assert!(c.limits.iter().any(|m| m.contains("swizzle chunk of 2 elements")), "{:?}", c.limits);
}

/// A shared layout the global order cannot drive (column-major) is walked
/// element by element in logical order, still by all threads.
#[test]
fn permuted_shared_is_scalar_but_cooperative() {
    let mut rt = ragged("cta", 64, &[10, 30], &[(0, 10), (0, 30)], "float32");
    rt.s_layout = Some("TileLayout(S[(10, 30):(1, 10)])".into());
    let l = rt.check();
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some(VARIANT), Some(1), Some(5)), "{}", c.render());
}

/// Divisible copies stay with gmem_smem; forcing the predicated variant gives
/// the same data with no guarded round.
#[test]
fn divisible_copies_keep_gmem_smem() {
    let l = RoundTrip::full("warp", 32, &[32, 32], "float32").check();
    let c = call(&l, 0);
    assert_eq!(c.chosen.as_deref(), Some("gmem_smem"));
    assert!(tried(c, VARIANT).reason.ends_with("no guarded round"), "{}", c.render());
    let forced = ", dispatch=\"gmem_smem_predicated\")";
    let src = RoundTrip::full("warp", 32, &[32, 32], "float32")
        .script()
        .replace("A_smem[0:32, 0:32], A[0:32, 0:32])", &format!("A_smem[0:32, 0:32], A[0:32, 0:32]{forced}"))
        .replace("B[0:32, 0:32], A_smem[0:32, 0:32])", &format!("B[0:32, 0:32], A_smem[0:32, 0:32]{forced}"));
    let l = lower(&src);
    assert_eq!((call(&l, 0).chosen.as_deref(), call(&l, 1).chosen.as_deref()), (Some(VARIANT), Some(VARIANT)), "{src}");
    assert!(!l.lir.to_string().contains("if "), "{}", l.lir);
    let a = pattern(tirx_ir::DType::F32, 1024);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    assert_eq!(params[1], a);
}

/// Narrowed scopes (an `if` on thread ids) are left to the fallback, with the reason.
#[test]
fn narrowed_scope_declines() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (10, 10), "float32")
    B = T.match_buffer(B_ptr, (10, 10), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32]); lid = T.lane_id([32])
    A_smem = T.alloc_buffer((10, 10), "float32", scope="shared")
    if lid < 16:
        Tx.warp.copy(A_smem[0:10, 0:10], A[0:10, 0:10])
"#;
    let l = lower(src);
    let c = call(&l, 0);
    assert_eq!(rule(c, VARIANT), CommonRule::AllThreadsActive);
    assert_eq!(c.chosen.as_deref(), Some("fallback"), "{}", c.render());
}
