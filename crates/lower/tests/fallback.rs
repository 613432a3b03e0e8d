//! copy → fallback: seed 003, the §5.3 round trips, the elected-thread gate,
//! scalar regions between local buffers.

mod common;
use common::*;
use tirx_lower::{CommonRule, CopyRule};

/// The reference's fallback cases (a region that does not divide over the
/// threads) now keep every thread working: `gmem_smem_predicated` takes them,
/// with no warning, and `fallback` is still tried and would accept.
fn cooperates(rt: &RoundTrip) -> tirx_lower::Lowered {
    let l = rt.check();
    for i in 0..2 {
        let c = call(&l, i);
        assert_eq!(c.chosen.as_deref(), Some("gmem_smem_predicated"), "{rt:?}\n{}", c.render());
        assert!(!tried(c, "gmem_smem").accepted);
        assert!(tried(c, "fallback").accepted);
    }
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    l
}

/// `dispatch="fallback"`: one thread copies, values are right, and the slow pick warns.
fn falls_back(rt: &RoundTrip) -> tirx_lower::Lowered {
    let l = rt.clone().forced("fallback").check();
    for i in 0..2 {
        assert_eq!(call(&l, i).chosen.as_deref(), Some("fallback"), "{rt:?}\n{}", call(&l, i).render());
    }
    assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
    for w in &l.warnings {
        assert!(w.message.contains("copy/fallback (scalar) picked"), "{}", w.message);
        assert!(w.message.ends_with("forced by dispatch=\"fallback\""), "{}", w.message);
    }
    l
}

/// Seed 003: a warp copies a 4×6 f32 tile; 24 elements do not divide over 32 lanes.
#[test]
fn seed_003_warp_4x6_f32() {
    let rt = RoundTrip::full("warp", 32, &[4, 6], "float32");
    let l = cooperates(&rt);
    let c = call(&l, 0);
    assert_eq!(rule(c, "gmem_smem"), CopyRule::DividesThreadCnt);
    assert_eq!(tried(c, "gmem_smem").predicate.as_deref(), Some("divides_thread_cnt"));
    assert_eq!(tried(c, "gmem_smem").reason, "region size 24 not divisible by thread_cnt=32");
    assert_eq!(tried(c, "fallback").reason, "thread 0 of the warp copies 24 elements one by one");

    let l = falls_back(&rt);
    let w = &l.warnings[0];
    assert_eq!(
        w.message,
        "copy/fallback (scalar) picked for global -> shared at warp scope; forced by dispatch=\"fallback\""
    );
    assert_eq!(
        w.labels[0].message,
        "lowered to a slow scalar loop: thread 0 of the warp copies 24 elements one by one"
    );
    let text = render(&l.warnings, &rt.clone().forced("fallback").script());
    assert!(text.contains("k.py:12:5"), "{text}");
}

/// test_fallback_round_trip's cases: cooperative by default, and still exact through the fallback when forced.
#[test]
fn round_trips() {
    let cases: [(&str, i64, [i64; 2]); 6] = [
        ("warp", 32, [4, 6]),
        ("warp", 32, [1, 8]),
        ("wg", 128, [4, 6]),
        ("wg", 128, [4, 8]),
        ("cta", 256, [4, 8]),
        ("cta", 1024, [8, 8]),
    ];
    for (scope, t, shape) in cases {
        let rt = RoundTrip::full(scope, t, &shape, "float32");
        cooperates(&rt);
        falls_back(&rt);
    }
}

/// When nothing faster applies (a warp copy inside `if lane < 16`), fallback is
/// picked on its own and the warning names why each faster variant declined.
#[test]
fn picked_when_nothing_faster_applies() {
    let script = RoundTrip::full("warp", 32, &[4, 6], "float32")
        .script()
        .replace("T.thread_id([32])", "lane = T.thread_id([32])");
    let guarded = |cond: &str, call: &str| {
        script.replace(
            "    Tx.warp.copy(A_smem[0:4, 0:6], A[0:4, 0:6])",
            &format!("    if {cond}:\n        {call}(A_smem[0:4, 0:6], A[0:4, 0:6])"),
        )
    };
    // One thread alone: a thread-scope copy (every thread of `if lane < 16` copying the tile would race).
    let l = lower(&guarded("lane == 0", "Tx.copy"));
    let c = call(&l, 0);
    assert_eq!(c.chosen.as_deref(), Some("gmem_smem"), "thread scope inside the if: {}", c.render());
    let src = guarded("lane < 16", "Tx.warp.copy");
    let l = lower(&src);
    let c = call(&l, 0);
    assert_eq!(c.chosen.as_deref(), Some("fallback"), "{}", c.render());
    let w = &l.warnings[0];
    assert!(w.message.ends_with("all faster variants declined"), "{}", w.message);
    assert!(
        w.notes.iter().any(|n| n.starts_with("gmem_smem declined: ") && n.contains("laneid narrowed")),
        "{:?}",
        w.notes
    );
    assert!(w.notes.iter().any(|n| n.starts_with("gmem_smem_predicated declined: ")), "{:?}", w.notes);
}

/// test_fallback_thread_scope: one thread, 24 elements → gmem_smem with vec 4 (no fallback).
#[test]
fn thread_scope_takes_gmem_smem() {
    let l = RoundTrip::full("thread", 1, &[4, 6], "float32").check();
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(4), Some(6)), "{}", c.render());
}

/// test_fallback_emits_gate: only thread 0 of a 256-thread CTA copies.
#[test]
fn emits_gate() {
    let l = falls_back(&RoundTrip::full("cta", 256, &[4, 6], "float32"));
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("threadIdx.x") && cuda.contains("== 0"), "{cuda}");
}

/// A warp copy inside `if warp_id == 1` is done by lane 0 of warp 1 (thread 32).
#[test]
fn elects_first_thread_of_the_narrowed_scope() {
    let src = RoundTrip::full("cta", 64, &[4, 6], "float32").script().replace(
        "    Tx.cta.copy(A_smem[0:4, 0:6], A[0:4, 0:6])",
        "    if tid >= 32:\n        Tx.cta.copy(A_smem[0:4, 0:6], A[0:4, 0:6])",
    );
    let src = src.replace("T.thread_id([64])", "tid = T.thread_id([64])");
    let l = lower(&src);
    let text = l.lir.to_string();
    assert!(text.contains("tid == 32"), "{text}");
    assert_eq!(rule(call(&l, 0), "gmem_smem"), CommonRule::AllThreadsActive);
    assert!(
        tried(call(&l, 0), "gmem_smem").reason.contains("warpid narrowed to [1, 2) vs full [0, 2)"),
        "{:?}",
        call(&l, 0)
    );
}

/// test_copy_fallback_handles_scalar_regions: thread scope `dst[2:3] ← src[0:1]` between locals.
#[test]
fn scalar_regions_between_locals() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    src = T.alloc_buffer((1,), "float32", scope="local")
    dst = T.alloc_buffer((4,), "float32", scope="local")
    src[0] = T.float32(7)
    for i in range(4):
        dst[i] = T.float32(0)
    Tx.copy(dst[2:3], src[0:1])
    for i in range(4):
        A[i] = dst[i]
"#;
    let l = lower(src);
    assert_eq!(call(&l, 0).chosen.as_deref(), Some("fallback"));
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("dst[2] = src[0];"), "{cuda}");
    let mut params = vec![vec![0u8; 16]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap();
    let vals: Vec<f32> = params[0].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(vals, vec![0.0, 0.0, 7.0, 0.0]);
}

/// A warp copy into registers distributed over lanes (`S[(32,8):(1@laneid,1)]`):
/// with only the copy variants registered, every lane copies the row it owns.
#[test]
fn owner_computes_for_distributed_registers() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    Tx.warp.copy(R[0:32, 0:8], A[0:32, 0:8], dispatch="fallback")
    Tx.warp.copy(B[0:32, 0:8], R[0:32, 0:8], dispatch="fallback")
"#;
    let l = lower(src);
    let c = call(&l, 0);
    assert_eq!(tried(c, "fallback").reason, "each thread copies the elements of `R` it owns (256 checked per thread)");
    assert!(l.lir.to_string().contains("if i == lane"), "{}", l.lir);
    let a = pattern(tirx_ir::DType::F32, 256);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap_or_else(|e| panic!("{e:?}\n{}", l.lir));
    assert_eq!(params[1], a);
    // Two distributed sides: nobody owns both.
    let both = src.replace(
        "Tx.warp.copy(B[0:32, 0:8], R[0:32, 0:8], dispatch=\"fallback\")",
        "Tx.warp.copy(R[0:32, 0:8], R[0:32, 0:8], dispatch=\"fallback\")",
    );
    let errs = lower_errors(&both);
    assert!(errs[0].notes[0].contains("no single thread owns both sides"), "{:?}", errs[0].notes);
}
