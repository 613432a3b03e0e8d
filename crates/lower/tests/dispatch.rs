//! The dispatcher: forced variants, unknown names, unregistered ops, decline
//! tables, narrowing by `if`, direct indexing of thread-axis buffers, explain JSON.

mod common;
use common::*;
use tirx_ir::op::Family;
use tirx_lower::CommonRule;
use tirx_lower::{lower_with, Registry, Variant};

fn warp_4x6(extra: &str) -> String {
    RoundTrip::full("warp", 32, &[4, 6], "float32").script().replace(
        "Tx.warp.copy(A_smem[0:4, 0:6], A[0:4, 0:6])",
        &format!("Tx.warp.copy(A_smem[0:4, 0:6], A[0:4, 0:6]{extra})"),
    )
}

#[test]
fn forced_fallback_still_warns() {
    let src = RoundTrip::full("warp", 32, &[32, 32], "float32").script().replace(
        "Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
        "Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32], dispatch=\"fallback\")",
    );
    let l = lower(&src);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.forced.as_deref()), (Some("fallback"), Some("fallback")));
    // Every variant is still planned for the record; only the forced one may be used.
    assert!(c.tried.len() > 1, "{}", c.render());
    assert!(c.tried.iter().all(|t| t.skipped == (t.variant != "fallback")), "{}", c.render());
    assert!(tried(c, "gmem_smem").accepted, "{}", c.render());
    assert_eq!(l.warnings.len(), 1);
    assert!(
        l.warnings[0].notes.iter().any(|n| n.starts_with("gmem_smem would accept: vec 4")),
        "{:?}",
        l.warnings[0].notes
    );
    assert_eq!(call(&l, 1).chosen.as_deref(), Some("gmem_smem"));
}

#[test]
fn unknown_variant_lists_registered_ones() {
    let src = warp_4x6(", dispatch=\"vec_512b\"");
    let errs = lower_errors(&src);
    assert_eq!(errs.iter().filter(|d| d.is_error()).count(), 1);
    assert_eq!(errs[0].message, "no variant named 'vec_512b' is registered for `copy`");
    let help = errs[0].help.as_deref().unwrap_or_default();
    assert!(help.starts_with("registered variants: gmem_smem_peel, gmem_smem, "), "{help}");
    assert!(help.contains(", fallback; only when forced: vec_128b, vec_16b, vec_256b, vec_32b, vec_64b"), "{help}");
    assert!(help.ends_with("; groups: vec_auto"), "{help}");
    assert!(render(&errs, &src).contains("k.py:12:5"));
}

#[test]
fn forced_variant_that_declines_is_an_error() {
    let errs = lower_errors(&warp_4x6(", dispatch=\"gmem_smem\""));
    assert_eq!(errs[0].message, "the forced variant 'gmem_smem' does not apply to this `copy`");
    assert!(errs[0].notes[0].contains("region size 24 not divisible by thread_cnt=32"), "{:?}", errs[0].notes);
}

/// The CUDA variants `keep` selects, in a registry of their own.
fn only(keep: impl Fn(&dyn Variant) -> bool) -> Registry {
    let mut reg = Registry::new();
    Registry::cuda().into_variants().into_iter().filter(|v| keep(v.as_ref())).for_each(|v| reg.register(v));
    reg
}

#[test]
fn no_applicable_variant_has_a_table() {
    let reg = only(|v| v.name() == "gmem_smem");
    let src = warp_4x6("");
    let errs = lower_with(&parse(&src), &Default::default(), &reg).unwrap_err();
    assert_eq!(errs[0].message, "no lowering variant applies to this `copy` at warp scope");
    let table = &errs[0].notes[0];
    // The reason carries its rule's name, as explain prints it (a test matching the name finds it).
    assert!(
        table.contains("gmem_smem (prio=10) | region size 24 not divisible by thread_cnt=32 [divides_thread_cnt]"),
        "{table}"
    );
}

#[test]
fn op_without_variants() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    R = T.alloc_buffer((32,), "float32", scope="local")
    Tx.sqrt(R[0:32], R[0:32])
"#;
    // Only the copy variants registered: `sqrt` has none.
    let reg = only(|v| v.family() == Family::Copy);
    let errs = lower_with(&parse(src), &Default::default(), &reg).unwrap_err();
    assert_eq!(errs[0].message, "no variant registered for op `sqrt` yet");
    assert_eq!(errs[0].notes, vec!["ops with variants: copy".to_string()]);
}

#[test]
fn thread_axis_buffer_needs_local_view() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    A[0, 0] = T.float32(1)
"#;
    // The parser rejects `R[0, 0] = ..` itself; lowering checks again for HIR built elsewhere.
    let mut k = parse(src);
    let r = tirx_ir::hir::BufId(k.buffers.iter().position(|b| b.name == "R").unwrap() as u32);
    let last = k.body.iter_mut().rev().find(|s| matches!(s.kind, tirx_ir::hir::StmtKind::Store { .. })).unwrap();
    if let tirx_ir::hir::StmtKind::Store { buf, .. } = &mut last.kind {
        *buf = r;
    }
    let errs = tirx_lower::lower_kernel(&k, &Default::default()).unwrap_err();
    assert!(errs[0].message.contains("cannot be indexed directly"), "{}", errs[0].message);
    assert!(errs[0].message.contains(".local()"), "{}", errs[0].message);
}

#[test]
fn narrowing_by_lane_and_else_branch() {
    let base = RoundTrip::full("warp", 32, &[32, 32], "float32").script();
    let base = base.replace("T.thread_id([32])", "T.thread_id([32]); lane = T.lane_id([32])");
    let src = base.replace(
        "    Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
        // (`pass`: a `__syncwarp()` here would be reached by half the warp, which the simulator rejects.)
        "    if lane < 16:\n        pass\n    else:\n        Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
    );
    let l = lower(&src);
    let c = call(&l, 0);
    assert_eq!(c.chosen.as_deref(), Some("fallback"));
    assert_eq!(rule(c, "gmem_smem"), CommonRule::AllThreadsActive);
    // The narrowed range is what the user needs to see.
    assert_eq!(tried(c, "gmem_smem").reason, "laneid narrowed to [16, 32) vs full [0, 32)");
    assert!(l.lir.to_string().contains("lane == 16"), "{}", l.lir);
    // A condition on thread ids that is not tracked (not affine in the id): nothing can elect a thread.
    let src = base.replace(
        "    Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
        "    if lane * lane < 16:\n        Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
    );
    let errs = lower_errors(&src);
    assert!(errs[0].notes[0].contains("cannot track"), "{:?}", errs[0].notes);
    // A uniform condition does not narrow.
    let src = base.replace(
        "    Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
        "    if A[0, 0] > T.float32(0):\n        Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])",
    );
    assert_eq!(call(&lower(&src), 0).chosen.as_deref(), Some("gmem_smem"));
}

#[test]
fn explain_json_keys() {
    let l = lower(&warp_4x6(""));
    let mut c = l.explain[0].clone();
    c.locate("k.py", &warp_4x6(""));
    let j = serde_json::to_value(&c).unwrap();
    for key in ["op", "scope", "span", "operands", "chosen", "vec", "rounds", "tried", "limits"] {
        assert!(j.get(key).is_some(), "missing {key}: {j}");
    }
    assert_eq!(j["span"]["line"], 12);
    // Trial order: priority descending (gmem_smem_peel 12, gmem_smem 10, ...).
    assert_eq!(j["tried"][0]["variant"], "gmem_smem_peel");
    assert_eq!(j["tried"][0]["accepted"], false);
    assert_eq!(j["tried"][1]["variant"], "gmem_smem");
    assert_eq!(j["tried"][1]["accepted"], false);
    assert_eq!(j["operands"][1]["layout"], "S[(4, 6):(6, 1)]");
}

/// A warp copy whose region depends on the lane has no single meaning: every variant declines.
#[test]
fn lane_dependent_region_is_rejected() {
    let src = RoundTrip::full("warp", 32, &[32, 32], "float32")
        .script()
        .replace("T.thread_id([32])", "lane = T.thread_id([32])")
        .replace("Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])", "Tx.warp.copy(A_smem[0:1, 0:32], A[lane, 0:32])");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    for v in ["gmem_smem", "gmem_smem_predicated", "fallback"] {
        assert_eq!(rule(&ex[0], v), CommonRule::UniformRegion, "{v}");
    }
    let errs = lower_errors(&src);
    assert!(
        errs[0].notes[0]
            .contains("dim 0 of `A` begins at `lane`, which differs between the threads of one warp instance"),
        "{:?}",
        errs[0].notes
    );
}

/// A value broadcast from one lane (`T.cuda.shfl(v, 0)`, CUTLASS's way of showing the compiler a
/// warp-uniform value) is uniform within the warp: a warp copy may begin there; a butterfly
/// shuffle's lanes still differ.
#[test]
fn a_value_shuffled_from_one_lane_is_warp_uniform() {
    let with = |def: &str| {
        RoundTrip::full("warp", 32, &[32, 32], "float32")
            .script()
            .replace("T.thread_id([32])", &format!("lane = T.thread_id([32])\n    row = {def}"))
            .replace("Tx.warp.copy(A_smem[0:32, 0:32], A[0:32, 0:32])", "Tx.warp.copy(A_smem[0:1, 0:32], A[row, 0:32])")
    };
    lower(&with("T.cuda.shfl(lane, 0)"));
    let errs = lower_errors(&with("T.cuda.shfl_xor(lane, 1)"));
    assert!(
        errs[0].notes[0]
            .contains("dim 0 of `A` begins at `row`, which differs between the threads of one warp instance"),
        "{:?}",
        errs[0].notes
    );
}

/// Buffers of ≥ 2^31 elements are addressed with 64-bit indices.
#[test]
fn huge_buffers_use_i64_indices() {
    let mut rt = RoundTrip::full("warp", 32, &[32, 64], "float16");
    rt.g_shape = vec![65536, 65536];
    rt.g_region = vec![(65504, 32), (0, 64)];
    rt.s_shape = vec![32, 64];
    let l = lower(&rt.script());
    let text = l.lir.to_string();
    assert!(text.contains("int64"), "{text}");
    assert_eq!(call(&l, 0).vec, Some(8));
    tirx_cuda::generate(&l.lir).unwrap();
}

/// Region begins and scalar indices past 2^31 (`A[3000000000:...]`, `A[tid + 3000000000]`):
/// the literal is int64, the int32 side is widened, and the CUDA uses 64-bit index math
/// for that buffer only.
#[test]
fn int64_literals_in_regions_and_indices() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def big(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (3000000128,), "float32")
    B = T.match_buffer(B_ptr, (129,), "float32")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    S = T.alloc_buffer((128,), "float32", scope="shared")
    Tx.warp.copy(S[0:128], A[3000000000:3000000128])
    T.cuda.cta_sync()
    Tx.warp.copy(B[0:128], S[0:128])
    if tid == 5:
        B[128] = A[tid + 3000000000]
"#;
    let l = lower(src);
    assert_eq!(
        (call(&l, 0).chosen.as_deref(), call(&l, 0).vec),
        (Some("gmem_smem"), Some(4)),
        "{}",
        call(&l, 0).render()
    );
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("&A[(long long)lane * 4LL + 3000000000LL]"), "{cuda}");
    assert!(cuda.contains("A[(long long)tid + 3000000000LL]"), "{cuda}");
    assert!(cuda.contains("&S[lane * 4]"), "the small shared buffer keeps 32-bit indices:\n{cuda}");
}

fn simulate_identity(src: &str, elems: usize) -> tirx_lower::Lowered {
    let l = lower(src);
    let a = pattern(tirx_ir::DType::F32, elems);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap_or_else(|e| panic!("{e:?}\n{}", l.lir));
    assert_eq!(params[1], a, "{}", l.lir);
    l
}

/// Inside `if wg == 1` of a 256-thread CTA, warpgroup 1 is fully active: gmem_smem
/// numbers its threads with `tid_in_wg`; warpgroup 0 copies nothing.
#[test]
fn warpgroup_copy_inside_warpgroup_branch() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 16), "float32")
    B = T.match_buffer(B_ptr, (128, 16), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([256])
    wg = T.warpgroup_id([2])
    A_smem = T.alloc_buffer((128, 16), "float32", scope="shared")
    if wg == 1:
        Tx.wg.copy(A_smem[0:128, 0:16], A[0:128, 0:16])
    T.cuda.cta_sync()
    if wg == 1:
        Tx.wg.copy(B[0:128, 0:16], A_smem[0:128, 0:16])
"#;
    let l = simulate_identity(src, 128 * 16);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(4), Some(4)), "{}", c.render());
    assert!(l.lir.to_string().contains("tid_in_wg"), "{}", l.lir);
}

/// A 2-D thread block numbers CTA threads linearly (`tx + ty·32`).
#[test]
fn two_dimensional_block() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 32), "float32")
    B = T.match_buffer(B_ptr, (64, 32), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32, 4])
    A_smem = T.alloc_buffer((64, 32), "float32", scope="shared")
    Tx.cta.copy(A_smem[0:64, 0:32], A[0:64, 0:32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:64, 0:32], A_smem[0:64, 0:32])
"#;
    let l = simulate_identity(src, 64 * 32);
    assert_eq!(l.lir.block, [32, 4, 1]);
    assert_eq!(call(&l, 0).vec, Some(4));
}
