//! copy → gmem_smem: seed 002's table, the §5.2 dispatch matrix as decisions
//! and simulated round trips, alignment limits (pitfalls 15–17), symbolic begins.

mod common;
use common::*;
use tirx_lower::{CommonRule, CopyRule};

fn decided(rt: &RoundTrip, vec: u32, rounds: u64) {
    let l = rt.check();
    for i in 0..2 {
        let c = call(&l, i);
        assert_eq!(c.chosen.as_deref(), Some("gmem_smem"), "{rt:?}\n{}", c.render());
        assert_eq!((c.vec, c.rounds), (Some(vec), Some(rounds)), "{rt:?}\n{}", c.render());
    }
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
}

#[test]
fn seed_002_table() {
    for (dt, vec, rounds) in [("float32", 4, 8), ("float16", 8, 4), ("uint8", 16, 2)] {
        decided(&RoundTrip::full("warp", 32, &[32, 32], dt), vec, rounds);
    }
}

#[test]
fn roundtrip_matrix() {
    let cases: [(&str, i64, [i64; 2]); 7] = [
        ("warp", 32, [32, 32]),
        ("warp", 32, [32, 64]),
        ("wg", 128, [128, 32]),
        ("wg", 128, [128, 64]),
        ("wg", 128, [256, 16]),
        ("cta", 256, [256, 32]),
        ("cta", 256, [512, 16]),
    ];
    for (scope, t, shape) in cases {
        for (dt, bits) in [("float16", 16), ("float32", 32), ("uint8", 8)] {
            let vec = 128 / bits;
            let rounds = (shape[0] * shape[1] / (t * vec)) as u64;
            decided(&RoundTrip::full(scope, t, &shape, dt), vec as u32, rounds);
        }
    }
}

/// §5.2 test_copy_g2s_s2g: regions of bigger global tensors ↔ shared tiles, 6 dtypes, cta (32) and thread scope.
#[test]
fn g2s_s2g_tasks() {
    let swz = "ComposeLayout(3, 3, 3, TileLayout(S[(2, 2, 8, 2, 2, 64):(4096, 1024, 64, 2048, 512, 1)]))";
    // (global shape, region, shared shape, shared layout, contiguous run of the region)
    type Task<'a> = (Vec<i64>, Vec<(i64, i64)>, Vec<i64>, Option<&'a str>, i64);
    let tasks: Vec<Task> = vec![
        (vec![128, 32], vec![(0, 128), (0, 32)], vec![128, 32], None, 4096),
        (vec![64, 64], vec![(32, 32), (32, 32)], vec![32, 32], None, 32),
        (vec![4, 32, 32], vec![(0, 1), (0, 32), (0, 32)], vec![32, 32], None, 1024),
        (vec![16, 16], vec![(0, 8), (0, 8)], vec![8, 8], None, 8),
        (vec![96, 512], vec![(16, 32), (256, 256)], vec![32, 256], Some(swz), 256),
    ];
    for (g_shape, g_region, s_shape, layout, run) in &tasks {
        for dt in ["int8", "float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float32"] {
            for (scope, t) in [("cta", 32), ("thread", 1)] {
                let rt = RoundTrip {
                    scope,
                    threads: t,
                    ctas: 1,
                    dtype: dt,
                    g_shape: g_shape.clone(),
                    g_region: g_region.clone(),
                    s_shape: s_shape.clone(),
                    s_layout: layout.map(str::to_string),
                    dispatch: None,
                };
                let l = rt.check();
                let c = call(&l, 0);
                assert_eq!(c.chosen.as_deref(), Some("gmem_smem"), "{rt:?}\n{}", c.render());
                let bits = tirx_ir::DType::from_name(dt).unwrap().bits();
                // Widest 16-B vector, within a swizzle chunk (8), a contiguous run, and n / threads.
                let n: i64 = g_region.iter().map(|r| r.1).product();
                let chunk = if layout.is_some() { 8 } else { i64::MAX };
                let want = (128 / bits as i64).min(chunk).min(*run).min(n / t);
                assert_eq!(c.vec, Some(want as u32), "{rt:?}\n{}", c.render());
            }
        }
    }
}

/// test_swizzled_smem_vec_len_must_fit_chunk: f16 (32, 32), ComposeLayout(p, 3, 3), warp → vec ≤ 2^p.
#[test]
fn swizzled_smem_vec_fits_chunk() {
    for p in [2u32, 1, 0] {
        let mut rt = RoundTrip::full("warp", 32, &[32, 32], "float16");
        rt.s_layout = Some(format!("ComposeLayout({p}, 3, 3, TileLayout(S[(32, 32)]))"));
        let l = rt.check();
        let c = call(&l, 0);
        assert_eq!(c.vec, Some(1 << p), "{}", c.render());
        assert!(
            c.limits.iter().any(|m| m.contains(&format!("swizzle chunk of {} elements", 1 << p))),
            "{:?}",
            c.limits
        );
    }
}

/// test_unaligned_strides_must_clamp_vec_len: g = s = S[(2,16):(20,1)] f16, 4 threads → vec 4.
#[test]
fn unaligned_strides_clamp_vec() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2, 16), "float16", layout=TileLayout(S[(2, 16):(20, 1)]))
    B = T.match_buffer(B_ptr, (2, 16), "float16", layout=TileLayout(S[(2, 16):(20, 1)]))
    T.device_entry()
    T.cta_id([1]); T.thread_id([4])
    A_smem = T.alloc_buffer((2, 16), "float16", scope="shared", layout=TileLayout(S[(2, 16):(20, 1)]))
    Tx.cta.copy(A_smem[0:2, 0:16], A[0:2, 0:16])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:2, 0:16], A_smem[0:2, 0:16])
"#;
    let l = lower(src);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(4), Some(2)), "{}", c.render());
    assert!(c.limits.iter().any(|m| m.contains("stride 20 × 2 B = 40 B is not 16-B aligned")), "{:?}", c.limits);
    // Values: A has 40 elements of storage; the copied ones land at the same places in B.
    // Storage span of S[(2,16):(20,1)]: 1 + 20 + 15 = 36 elements.
    let a = pattern(tirx_ir::DType::F16, 36);
    let mut params = vec![a.clone(), vec![0u8; 72]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    for r in 0..2 {
        for col in 0..16 {
            let i = (r * 20 + col) * 2;
            assert_eq!(params[1][i..i + 2], a[i..i + 2]);
        }
    }
}

/// test_unaligned_region_offset_must_clamp_vec_len and the odd-column rule:
/// a region starting at column c of a (4, 32) f16 tensor, 4 threads.
#[test]
fn region_offset_clamps_vec() {
    for (col, vec) in [(3, 1), (2, 2), (4, 4), (8, 8)] {
        let rt = RoundTrip {
            scope: "cta",
            threads: 4,
            ctas: 1,
            dtype: "float16",
            g_shape: vec![4, 32],
            g_region: vec![(0, 4), (col, 16)],
            s_shape: vec![4, 16],
            s_layout: None,
            dispatch: None,
        };
        let l = rt.check();
        let c = call(&l, 0);
        assert_eq!(c.vec, Some(vec), "column {col}\n{}", c.render());
        if vec < 8 {
            assert!(c.limits.iter().any(|m| m.contains(&format!("region offset {col} × 2 B"))), "{:?}", c.limits);
        }
    }
}

/// The reference loads 8 contiguous f16 per row for a column copy (pitfall 15):
/// here a thread-scope copy of A[0:64, 0:1] moves exactly that column.
#[test]
fn column_copy_moves_only_the_column() {
    let rt = RoundTrip {
        scope: "thread",
        threads: 1,
        ctas: 1,
        dtype: "float16",
        g_shape: vec![64, 64],
        g_region: vec![(0, 64), (0, 1)],
        s_shape: vec![64, 1],
        s_layout: None,
        dispatch: None,
    };
    let l = rt.check();
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(1), Some(64)), "{}", c.render());
    assert!(c.limits.iter().any(|m| m.contains("not contiguous (innermost stride 64)")), "{:?}", c.limits);
}

/// test_layout_permute_copy_preserves_smem_strides: row-major g (128, 64) ↔ K-tiled
/// s S[(128,8,8):(8,1024,1)], f16, 128 threads → vec 8; thread 1 writes s 1024, reads g 8.
#[test]
fn permuted_smem_layout() {
    let mut rt = RoundTrip::full("cta", 128, &[128, 64], "float16");
    rt.s_layout = Some("TileLayout(S[(128, 8, 8):(8, 1024, 1)])".into());
    let l = rt.check();
    let c = call(&l, 0);
    assert_eq!((c.vec, c.rounds), (Some(8), Some(8)), "{}", c.render());
    let text = l.lir.to_string();
    assert!(text.contains("(tid / 8) * 8 + (tid % 8) * 1024"), "{text}");
}

/// test_swizzled_smem_emit_must_be_swizzle_aware: the shared address goes through the swizzle.
#[test]
fn swizzled_smem_is_swizzle_aware() {
    let mut rt = RoundTrip::full("wg", 128, &[128, 32], "float16");
    rt.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[(128, 32)]))".into());
    let l = rt.check();
    assert_eq!(call(&l, 0).vec, Some(8));
    assert!(l.lir.to_string().contains('^'), "{}", l.lir);
}

/// test_gmem_smem_swizzle_fast_path_fires: warp (32, 64) f16 with ComposeLayout(3,3,3):
/// per-thread base and signed bit strides, values checked by the simulator.
#[test]
fn swizzle_fast_path() {
    let mut rt = RoundTrip::full("warp", 32, &[32, 64], "float16");
    rt.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[(32, 64)]))".into());
    let l = rt.check();
    let c = call(&l, 0);
    assert!(tried(c, "gmem_smem").reason.ends_with("swizzle fast path"), "{}", c.render());
    let text = l.lir.to_string();
    assert!(text.contains("let s_base") && text.contains("& 1) * ss"), "{text}");
    // Same partition on the row-major side of a K-tiled swizzle: not recognised → xor path.
    let mut rt = RoundTrip::full("thread", 1, &[8, 64], "float16");
    rt.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))".into());
    let l = rt.check();
    assert!(call(&l, 0).limits.iter().any(|m| m.contains("fast path does not apply")), "{:?}", call(&l, 0).limits);
}

/// A bare swizzle written over one period (`S[512]`) on a larger buffer addresses the
/// whole buffer row-major, so the allocation must cover the buffer, not the period tile.
#[test]
fn bare_swizzle_period_tile_allocates_whole_buffer() {
    let mut rt = RoundTrip::full("warp", 32, &[32, 64], "float16");
    rt.s_layout = Some("ComposeLayout(3, 3, 3, TileLayout(S[512]))".into());
    let l = rt.check();
    let smem = l.lir.bufs.iter().find(|b| b.name == "A_smem").expect("A_smem allocated");
    assert_eq!(smem.elems, 32 * 64, "{}", l.lir);
}

/// Region begins in cta ids: `A[by*16 : by*16 + 16, bx*32 : bx*32 + 32]` per CTA.
#[test]
fn symbolic_region_begins() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 64), "float16")
    B = T.match_buffer(B_ptr, (32, 64), "float16")
    T.device_entry()
    bx, by = T.cta_id([2, 2])
    tx = T.thread_id([32])
    A_smem = T.alloc_buffer((16, 32), "float16", scope="shared")
    Tx.cta.copy(A_smem[0:16, 0:32], A[by * 16 : by * 16 + 16, bx * 32 : bx * 32 + 32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[by * 16 : by * 16 + 16, bx * 32 : bx * 32 + 32], A_smem[0:16, 0:32])
"#;
    let l = lower(src);
    let c = call(&l, 0);
    assert_eq!(
        (c.chosen.as_deref(), c.vec, c.rounds),
        (Some("gmem_smem"), Some(8), Some(2)),
        "{}\n{}",
        c.render(),
        l.lir
    );
    let a = pattern(tirx_ir::DType::F16, 32 * 64);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    assert_eq!(params[1], a);
    // An odd symbolic step limits the vector: gcd(by·16·64, bx·3) = 1 element. Only the
    // load is shifted (overlapping reads between CTAs are fine; overlapping writes would race).
    let odd = src.replacen("bx * 32 : bx * 32 + 32", "bx * 3 : bx * 3 + 32", 1);
    let l = lower(&odd);
    let c = call(&l, 0);
    assert_eq!(c.vec, Some(1), "{}", c.render());
    assert!(c.limits.iter().any(|m| m.contains("symbolic begin step 1 × 2 B")), "{:?}", c.limits);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    for r in 0..32 {
        for col in 0..64 {
            let src_col = if col < 32 { col } else { 3 + col - 32 };
            let (i, j) = (2 * (r * 64 + col), 2 * (r * 64 + src_col));
            assert_eq!(params[1][i..i + 2], a[j..j + 2], "B[{r}, {col}]");
        }
    }
}

/// No `[outer, threads, vec]` split exists (iters (2:32, 3:8, 4:1), 8 threads): gmem_smem
/// declines with the reason of each width, and gmem_smem_predicated deals 16-byte vectors
/// (the reference walks one element per thread and round here).
#[test]
fn unstructured_partition() {
    let rt = RoundTrip {
        scope: "cta",
        threads: 8,
        ctas: 1,
        dtype: "float32",
        g_shape: vec![2, 4, 8],
        g_region: vec![(0, 2), (0, 3), (0, 4)],
        s_shape: vec![2, 3, 4],
        s_layout: None,
        dispatch: None,
    };
    let l = rt.check();
    let c = call(&l, 0);
    assert_eq!(
        (c.chosen.as_deref(), c.vec, c.rounds),
        (Some("gmem_smem_predicated"), Some(4), Some(1)),
        "{}",
        c.render()
    );
    let gs = tried(c, "gmem_smem");
    assert_eq!(rule(c, "gmem_smem"), CopyRule::Partition);
    assert!(
        gs.reason.starts_with("no [outer, threads, vec] split of the 24 elements over 8 threads: vec 4: "),
        "{}",
        gs.reason
    );
    assert!(
        gs.reason.contains("vec 1: the region's iters (2:32, 3:8, 4:1) do not split into 8 threads"),
        "{}",
        gs.reason
    );
}

/// A symbolic begin whose element step (`i * 2^48` rows of 2^20) overflows i64
/// is a decline, not a panic. With a known range (`by` in [0, 1]) the region is
/// provably outside the buffer first: an error at the region, no variant tried.
#[test]
fn overflowing_symbolic_begin_declines() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 1048576), "float16")
    T.device_entry()
    by = T.cta_id([2])
    tx = T.thread_id([32])
    A_smem = T.alloc_buffer((1, 32), "float16", scope="shared")
    Tx.cta.copy(A_smem[0:1, 0:32], A[by * 65536 * 65536 * 65536 : by * 65536 * 65536 * 65536 + 1, 0:32])
"#;
    let (calls, lowered) = tirx_lower::explain_kernel(&parse(src), &Default::default());
    assert!(calls[0].tried.is_empty(), "{}", calls[0].render());
    assert!(calls[0].bounds[0].contains("by = 1 reads row 281474976710656 of 4"), "{:?}", calls[0]);
    let errs = lowered.err().unwrap_or_default();
    assert!(errs[0].message.contains("is out of bounds of `A` (shape (4, 1048576))"), "{}", render(&errs, src));
    // A loop bound by a runtime value: the range of `i` is unknown, the step overflows.
    let unknown = src.replace(
        "    Tx.cta.copy(A_smem[0:1, 0:32], A[by",
        "    for i in range(by + 1):\n        Tx.cta.copy(A_smem[0:1, 0:32], A[by",
    );
    let unknown = unknown.replace("by * 65536 * 65536 * 65536", "i * 65536 * 65536 * 65536");
    let (calls, _) = tirx_lower::explain_kernel(&parse(&unknown), &Default::default());
    let t = tried(&calls[0], "gmem_smem");
    assert_eq!(rule(&calls[0], "gmem_smem"), CommonRule::SymbolicBegin);
    assert!(t.reason.contains("overflows i64"), "{t:?}");
    // A coefficient of 2^64 has no affine form in i64.
    let wider = unknown.replace("i * 65536 * 65536 * 65536", "i * 65536 * 65536 * 65536 * 65536");
    let (calls, _) = tirx_lower::explain_kernel(&parse(&wider), &Default::default());
    let t = tried(&calls[0], "gmem_smem");
    assert_eq!(rule(&calls[0], "gmem_smem"), CommonRule::SymbolicBegin);
    assert!(t.reason.contains("not affine"), "{t:?}");
}
