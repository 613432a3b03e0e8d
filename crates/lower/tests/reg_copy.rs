//! copy → reg: seed 000 (demo and table), the §5.1 register round-trip matrix
//! (scope × k × dtype × shared/global), padded rows (pitfall 18), swizzled
//! shared memory, fragment layouts, symbolic begins, `cache="nc"`, and the
//! register-layout declines. Values are checked through the simulator.

mod common;
use common::*;
use tirx_ir::lir::{CacheHint, LStmt, LStmtKind, MemOp};
use tirx_ir::DType;
use tirx_lower::CopyRule;
use tirx_lower::Lowered;

fn simulate(l: &Lowered, params: &mut [Vec<u8>], src: &str) {
    if let Err(e) = tirx_sim::simulate(&l.lir, params, &tirx_sim::SimOptions::default()) {
        panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
    }
}

fn scope_call(scope: &str) -> String {
    match scope {
        "thread" => "Tx.copy".into(),
        s => format!("Tx.{s}.copy"),
    }
}

/// §5.1 test_reg_roundtrip: thread t writes row t of the memory tile, the
/// scope copies it to registers (row t in thread t), clears the tile, copies
/// the registers back, and thread t stores row t to B. C receives the same
/// values directly, so B == C checks the round trip bit for bit.
struct RegRoundTrip {
    scope: &'static str,
    n: i64,
    k: i64,
    dtype: &'static str,
    /// The memory side is shared (else the global parameter A).
    shared: bool,
    /// Script layout of the memory tile (default row-major).
    mem_layout: Option<&'static str>,
}

impl RegRoundTrip {
    fn axis(&self) -> &'static str {
        match self.scope {
            "warp" => "laneid",
            "wg" => "tid_in_wg",
            _ => "tx",
        }
    }

    fn script(&self) -> String {
        let (n, k, dt) = (self.n, self.k, self.dtype);
        let layout = self.mem_layout.map(|l| format!(", layout={l}")).unwrap_or_default();
        let (alloc, m) = if self.shared {
            (format!("M = T.alloc_buffer(({n}, {k}), \"{dt}\", scope=\"shared\"{layout})"), "M")
        } else {
            (String::new(), "A")
        };
        let a_layout = if self.shared { String::new() } else { layout };
        let copy = scope_call(self.scope);
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid, tid_in_wg, tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({n}, {k}), "{dt}"{a_layout})
    B = T.match_buffer(B_ptr, ({n}, {k}), "{dt}")
    C = T.match_buffer(C_ptr, ({n}, {k}), "{dt}")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([{n}])
    {alloc}
    R = T.alloc_buffer(({n}, {k}), "{dt}", scope="local", layout=TileLayout(S[({n}, {k}):(1@{axis}, 1)]))
    for kk in range({k}):
        {m}[tid, kk] = T.cast(tid * 100 + kk + 1, "{dt}")
        C[tid, kk] = T.cast(tid * 100 + kk + 1, "{dt}")
    T.cuda.cta_sync()
    {copy}(R[0:{n}, 0:{k}], {m}[0:{n}, 0:{k}])
    T.cuda.cta_sync()
    for kk in range({k}):
        {m}[tid, kk] = T.cast(0, "{dt}")
    T.cuda.cta_sync()
    {copy}({m}[0:{n}, 0:{k}], R[0:{n}, 0:{k}])
    T.cuda.cta_sync()
    for kk in range({k}):
        B[tid, kk] = {m}[tid, kk]
"#,
            axis = self.axis()
        )
    }

    /// Lowers, simulates, checks B == C, and returns the lowering.
    fn check(&self) -> Lowered {
        let src = self.script();
        let l = lower(&src);
        let dt = DType::from_name(self.dtype).unwrap();
        // Storage of A may be larger than n·k (padded layouts).
        let a_elems = l.lir.buf(l.lir.params[0]).elems as usize;
        let bytes = (self.n * self.k) as usize * dt.bytes() as usize;
        let mut params = vec![vec![0u8; a_elems * dt.bytes() as usize], vec![0u8; bytes], vec![0u8; bytes]];
        simulate(&l, &mut params, &src);
        assert_eq!(params[1], params[2], "B != C for {}\n{}\n{src}", self.label(), l.lir);
        assert!(params[2].iter().any(|&b| b != 0), "reference is all zero");
        l
    }

    fn label(&self) -> String {
        format!(
            "{} n={} k={} {} {}",
            self.scope,
            self.n,
            self.k,
            self.dtype,
            if self.shared { "shared" } else { "global" }
        )
    }
}

fn rt(scope: &'static str, n: i64, k: i64, dtype: &'static str, shared: bool) -> RegRoundTrip {
    RegRoundTrip { scope, n, k, dtype, shared, mem_layout: None }
}

/// Both copies of a round trip chose `reg` with this vector and round count.
fn decided(l: &Lowered, label: &str, vec: u32, rounds: u64) {
    for i in 0..2 {
        let c = call(l, i);
        assert_eq!(c.chosen.as_deref(), Some("reg"), "{label}\n{}", c.render());
        assert_eq!((c.vec, c.rounds), (Some(vec), Some(rounds)), "{label}\n{}", c.render());
    }
    assert!(l.warnings.is_empty(), "{label}: {:?}", l.warnings);
}

#[test]
fn seed_000_demo_and_table() {
    // dtype × k → (vec, rounds), seed 000's table.
    for (dt, k, vec, rounds) in
        [("float32", 8, 4, 2), ("float32", 16, 4, 4), ("float16", 8, 8, 1), ("float16", 16, 8, 2)]
    {
        let r = rt("warp", 32, k, dt, true);
        let l = r.check();
        decided(&l, &r.label(), vec, rounds);
    }
    // The per-thread bundle and atoms are in the explain summary.
    let l = rt("warp", 32, 8, "float32", true).check();
    let summary = &tried(call(&l, 0), "reg").reason;
    assert!(summary.contains("vec 4 (16 B) × 32 threads, 2 rounds"), "{summary}");
    assert!(summary.contains("per-thread bundle 8 elements as atoms (extent:mem/reg) [(8:1/1)]"), "{summary}");
}

#[test]
fn roundtrip_matrix() {
    let cases: [(&str, i64, i64); 7] = [
        ("wg", 128, 16),
        ("wg", 128, 32),
        ("wg", 128, 8),
        ("warp", 32, 8),
        ("warp", 32, 16),
        ("cta", 256, 8),
        ("cta", 256, 16),
    ];
    for shared in [true, false] {
        for (scope, n, k) in cases {
            for (dt, bits) in [("float16", 16), ("float32", 32), ("uint8", 8)] {
                let vec = (128 / bits).min(k);
                let r = rt(scope, n, k, dt, shared);
                let l = r.check();
                decided(&l, &r.label(), vec as u32, (k / vec) as u64);
            }
        }
    }
}

/// Pitfall 18: rows padded to 20 f16 put thread bases 40 B apart, so 16-B
/// vectors would be misaligned; the simulator checks every access.
#[test]
fn padded_rows_limit_the_vector() {
    for shared in [true, false] {
        let r = RegRoundTrip {
            mem_layout: Some("TileLayout(S[(128, 16):(20, 1)])"),
            ..rt("wg", 128, 16, "float16", shared)
        };
        let l = r.check();
        decided(&l, &r.label(), 4, 4);
        let c = call(&l, 0);
        assert!(
            c.limits
                .iter()
                .any(|m| m.contains("vec 8: memory stride between threads 20 × 2 B = 40 B is not 16-B aligned")),
            "{:?}",
            c.limits
        );
    }
}

/// A swizzled shared tile: vectors stay inside one 8-element chunk.
#[test]
fn swizzled_shared() {
    let r = RegRoundTrip {
        mem_layout: Some("ComposeLayout(3, 3, 3, TileLayout(S[(32, 64)]))"),
        ..rt("warp", 32, 64, "float16", true)
    };
    let l = r.check();
    decided(&l, &r.label(), 8, 8);
    let r = RegRoundTrip {
        mem_layout: Some("ComposeLayout(2, 3, 3, TileLayout(S[(32, 64)]))"),
        ..rt("warp", 32, 64, "float16", true)
    };
    let l = r.check();
    decided(&l, &r.label(), 4, 16);
    assert!(call(&l, 0).limits.iter().any(|m| m.contains("swizzle chunk of 4 elements")), "{:?}", call(&l, 0).limits);
}

fn fragment_script(reg_layout: &str, dt: &str) -> String {
    format!(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 8), "{dt}")
    B = T.match_buffer(B_ptr, (16, 8), "{dt}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((16, 8), "{dt}", scope="local", layout=TileLayout({reg_layout}))
    Tx.warp.copy(R[0:16, 0:8], A[0:16, 0:8])
    Tx.warp.copy(B[0:16, 0:8], R[0:16, 0:8])
"#
    )
}

fn check_identity(src: &str, dt: DType) -> Lowered {
    let l = lower(src);
    let a = pattern(dt, 128);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    simulate(&l, &mut params, src);
    assert_eq!(params[1], a, "B != A\n{}\n{src}", l.lir);
    l
}

/// An mma-style fragment (lane 4·(r%8) + c/2, register 2·(r/8) + c%2): pairs
/// are contiguous on both sides, so f32 moves 8-byte vectors.
#[test]
fn mma_fragment_layout() {
    let src = fragment_script("S[(2, 8, 4, 2):(2, 4@laneid, 1@laneid, 1)]", "float32");
    let l = check_identity(&src, DType::F32);
    decided(&l, "fragment", 2, 2);
}

/// Registers strided by 2 are not contiguous: scalar accesses, still exact.
/// Thread iters listed out of stride order still form the 32:1 chain.
#[test]
fn strided_registers_and_permuted_threads() {
    let src = fragment_script("S[(16, 8):(1@laneid, 2)]", "float32");
    // 16 lanes only: the warp is not tiled (another variant may still take the copy).
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    let t = tried(&ex[0], "reg");
    assert_eq!(rule(&ex[0], "reg"), CopyRule::RegisterLayout);
    assert!(t.reason.contains("thread axes span 16 threads, not the full 32 of the warp"), "{}", t.reason);
    let src = fragment_script("S[(2, 16, 4):(1@laneid, 2@laneid, 2)]", "float32");
    let l = check_identity(&src, DType::F32);
    decided(&l, "strided registers", 1, 4 * 4 / 4);
    assert!(
        call(&l, 0).limits.iter().any(|m| m.contains("only 1 element per thread are contiguous")),
        "{:?}",
        call(&l, 0).limits
    );
}

/// Warps read their own 32-row band of a global tensor at a symbolic offset.
#[test]
fn symbolic_global_begin() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128, 8), "float32")
    B = T.match_buffer(B_ptr, (128, 8), "float32")
    T.device_entry()
    bx = T.cta_id([2]); T.thread_id([64])
    w = T.warp_id([2])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    Tx.warp.copy(R[0:32, 0:8], A[bx * 64 + w * 32 : bx * 64 + w * 32 + 32, 0:8])
    Tx.warp.copy(B[bx * 64 + w * 32 : bx * 64 + w * 32 + 32, 0:8], R[0:32, 0:8])
"#;
    let l = check_identity_n(src, DType::F32, 1024);
    decided(&l, "symbolic", 4, 2);
}

fn check_identity_n(src: &str, dt: DType, n: usize) -> Lowered {
    let l = lower(src);
    let a = pattern(dt, n);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    simulate(&l, &mut params, src);
    assert_eq!(params[1], a, "B != A\n{}\n{src}", l.lir);
    l
}

fn walk<'a>(s: &'a [LStmt], out: &mut Vec<&'a LStmtKind>) {
    for st in s {
        out.push(&st.kind);
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

fn vec_copies(l: &Lowered) -> Vec<(u32, CacheHint)> {
    let mut all = Vec::new();
    walk(&l.lir.body, &mut all);
    all.into_iter()
        .filter_map(|k| match k {
            LStmtKind::Memory(MemOp::VecCopy { lanes, cache, .. }) => Some((*lanes, *cache)),
            _ => None,
        })
        .collect()
}

/// test_vec_auto_reg_honors_cache_nc: a strided int32 view loaded with and without `cache="nc"`.
#[test]
fn cache_nc_on_global_loads() {
    let src = |cfg: &str| {
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 16), "int32")
    B = T.match_buffer(B_ptr, (4, 16), "int32")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([128])
    R = T.alloc_local((4, 4), "int32")
    if tid == 0:
        Tx.copy(R[0:4, 0:4], A[0:4, 0:4]{cfg})
        Tx.copy(B[0:4, 0:4], R[0:4, 0:4])
"#
        )
    };
    let nc = src(", cache=\"nc\"");
    let l = lower(&nc);
    decided(&l, "nc", 4, 4);
    assert_eq!(vec_copies(&l), vec![(4, CacheHint::NonCoherent), (4, CacheHint::Default)]);
    let a = pattern(DType::I32, 64);
    let mut params = vec![a.clone(), vec![0u8; 256]];
    simulate(&l, &mut params, &nc);
    for r in 0..4 {
        for c in 0..16 {
            let i = (r * 16 + c) * 4;
            let want = if c < 4 { &a[i..i + 4] } else { &[0u8; 4][..] };
            assert_eq!(&params[1][i..i + 4], want, "B[{r}, {c}]");
        }
    }
    let plain = lower(&src(""));
    assert_eq!(vec_copies(&plain), vec![(4, CacheHint::Default), (4, CacheHint::Default)]);
}

/// The thread-scope copy of `.local()` registers into a per-thread row.
#[test]
fn thread_scope_local_view() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([32])
    R = T.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    Tx.warp.copy(R[0:32, 0:8], A[0:32, 0:8])
    R_local = R.local()
    B_flat = B.view(256)
    Tx.copy(B_flat[tid * 8 : tid * 8 + 8], R_local[0:8])
"#;
    let l = check_identity_n(src, DType::F32, 256);
    for i in 0..2 {
        let c = call(&l, i);
        assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("reg"), Some(4), Some(2)), "{}", c.render());
    }
}

/// Register layouts the variant cannot use, each with the reason in the decline table.
#[test]
fn register_layout_declines() {
    let base = |scope: &str, layout: &str, threads: i64| {
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid, tid_in_wg

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([{threads}])
    R = T.alloc_buffer((64, 8), "float32", scope="local", layout=TileLayout({layout}))
    Tx.{scope}.copy(R[0:64, 0:8], A[0:64, 0:8])
"#
        )
    };
    let cases = [
        ("wg", "S[(64, 8):(1@tid_in_wg, 1)]", 128, "thread axes span 64 threads, not the full 128 of the warpgroup"),
        ("warp", "S[(64, 8):(1@tid_in_wg, 1)]", 128, "wider than this warp-scope call"),
        ("warp", "S[(2, 32, 8):(8, 1@laneid, 1)]", 32, "accepted"),
        ("warp", "S[(32, 2, 8):(1@laneid, 8, 1)]", 32, "accepted"),
        (
            "warp",
            "S[(16, 4, 8):(2@laneid, 8, 1)]",
            32,
            "do not tile a complete 32:1 (sorted by stride: expected stride 1, got 2)",
        ),
    ];
    for (scope, layout, threads, want) in cases {
        let src = base(scope, layout, threads);
        let k = parse(&src);
        let (ex, _) = tirx_lower::explain_kernel(&k, &Default::default());
        let t = tried(&ex[0], "reg");
        let got = if t.accepted { "accepted".to_string() } else { t.reason.clone() };
        if want != "accepted" {
            assert_eq!(rule(&ex[0], "reg"), CopyRule::RegisterLayout, "{layout} at {scope}");
        }
        assert!(got.contains(want), "{layout} at {scope}: {got}");
    }
}

/// test_reg_copy_wg_local_to_swizzled_shared_uses_swizzle_fastpath: a
/// warpgroup tile into a 128-B swizzled shared buffer walks the swizzle with
/// per-thread signed strides instead of xor-ing every round.
#[test]
fn swizzle_fast_path() {
    let r = RegRoundTrip {
        mem_layout: Some("ComposeLayout(3, 3, 3, TileLayout(S[(128, 64)]))"),
        ..rt("wg", 128, 64, "float16", true)
    };
    let l = r.check();
    decided(&l, &r.label(), 8, 8);
    for i in 0..2 {
        let summary = &tried(call(&l, i), "reg").reason;
        assert!(summary.contains("8 rounds, swizzle fast path"), "{summary}");
    }
}

/// test_copy_g2l_l2g_vec_load: a thread moves an (8, 8) region of a 3-D global
/// tensor through registers; the region offset (904 elements) bounds the vector.
#[test]
fn thread_region_of_3d_tensor() {
    for (dt, vec) in
        [("int8", 8), ("float8_e4m3fn", 8), ("float8_e5m2", 8), ("float16", 8), ("bfloat16", 8), ("float32", 4)]
    {
        let src = format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 16, 16), "{dt}")
    B = T.match_buffer(B_ptr, (4, 16, 16), "{dt}")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    R = T.alloc_local((8, 8), "{dt}")
    Tx.copy(R[0:8, 0:8], A[3:4, 8:16, 8:16])
    Tx.copy(B[3:4, 8:16, 8:16], R[0:8, 0:8])
"#
        );
        let l = lower(&src);
        let t = DType::from_name(dt).unwrap();
        let bytes = t.bytes() as usize;
        let a = pattern(t, 1024);
        let mut params = vec![a.clone(), vec![0u8; a.len()]];
        simulate(&l, &mut params, &src);
        for i in 0..1024usize {
            let (z, y, x) = (i / 256, i / 16 % 16, i % 16);
            let inside = z == 3 && y >= 8 && x >= 8;
            let want = if inside { &a[i * bytes..(i + 1) * bytes] } else { &[0u8; 4][..bytes] };
            assert_eq!(&params[1][i * bytes..(i + 1) * bytes], want, "{dt} element {i}");
        }
        decided(&l, dt, vec, 64 / vec as u64);
    }
}

/// mma-style warp fragments of `o` × `n` 8×8 blocks with every register order
/// (the ldstmatrix property kernels), row-major or transposed, plain or
/// swizzled shared memory, both directions, forced to `reg`: values exact.
#[test]
fn any_register_order_forced() {
    let orders = [[0usize, 1, 2], [1, 0, 2], [0, 2, 1], [2, 0, 1], [1, 2, 0], [2, 1, 0]];
    for (o, n) in [(1i64, 1i64), (1, 2), (2, 3), (3, 4)] {
        for order in orders {
            for store in [false, true] {
                for (trans, swz) in [(false, false), (true, false), (false, true), (true, true)] {
                    let ext = [o, n, 2];
                    let mut stride = [0i64; 3];
                    let mut acc = 1;
                    for &d in order.iter().rev() {
                        stride[d] = acc;
                        acc *= ext[d];
                    }
                    let s = if trans { [8, 1, 64 * o, 16 * o, 8 * o] } else { [64 * n, 8 * n, 8, 2, 1] };
                    let r = format!(
                        "TileLayout(S[({o}, 8, {n}, 4, 2):({}, 4@laneid, {}, 1@laneid, {})])",
                        stride[0], stride[1], stride[2]
                    );
                    let tile = format!(
                        "TileLayout(S[({o}, 8, {n}, 4, 2):({}, {}, {}, {}, {})])",
                        s[0], s[1], s[2], s[3], s[4]
                    );
                    let sl = if swz { format!("ComposeLayout(3, 3, 3, {tile})") } else { tile };
                    let full = format!("0:{o}, 0:8, 0:{n}, 0:4, 0:2");
                    let tup = format!("({o}, 8, {n}, 4, 2)");
                    let (c1, c2) = if store {
                        (format!("Tx.warp.copy(R[{full}], A[{full}], dispatch=\"reg\")"), format!("Tx.warp.copy(A_smem[{full}], R[{full}], dispatch=\"reg\")\n    T.cuda.cta_sync()\n    Tx.warp.copy(B[{full}], A_smem[{full}])"))
                    } else {
                        (format!("Tx.warp.copy(A_smem[{full}], A[{full}])\n    T.cuda.cta_sync()\n    Tx.warp.copy(R[{full}], A_smem[{full}], dispatch=\"reg\")"), format!("Tx.warp.copy(B[{full}], R[{full}], dispatch=\"reg\")"))
                    };
                    let src = format!(
                        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {tup}, "float16")
    B = T.match_buffer(B_ptr, {tup}, "float16")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    A_smem = T.alloc_buffer({tup}, "float16", scope="shared", layout={sl})
    R = T.alloc_buffer({tup}, "float16", scope="local", layout={r})
    {c1}
    {c2}
"#
                    );
                    let l = lower(&src);
                    let nel = (o * n * 64) as usize;
                    let a = pattern(DType::F16, nel);
                    let mut p = vec![a.clone(), vec![0u8; a.len()]];
                    tirx_sim::simulate(&l.lir, &mut p, &Default::default()).unwrap();
                    assert_eq!(p[1], a, "{src}\n{}", l.lir);
                }
            }
        }
    }
}

/// §3.7 for copies: a warp-scope copy needs the warp-level register tensor;
/// its `.local()` view (one thread's registers) is for thread-scope copies.
#[test]
fn warp_copy_of_a_local_view_is_declined() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    R_local = R.local()
    Tx.warp.copy(R_local[0:8], A[0, 0:8])
    Tx.copy(R_local[0:8], A[0, 0:8])
"#;
    let (ex, _) = tirx_lower::explain_kernel(&parse(src), &Default::default());
    let t = tried(&ex[0], "reg");
    assert_eq!(rule(&ex[0], "reg"), CopyRule::RegisterLayout);
    assert!(t.reason.contains("pass the warp-level tensor, not its `.local()` (per-thread) view"), "{}", t.reason);
    assert!(tried(&ex[1], "reg").accepted, "{}", ex[1].render());
}
