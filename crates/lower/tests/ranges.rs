//! Value ranges at a call (docs/tile-primitives.md §1.3, §3.1): `if` on scope ids
//! and loop variables narrows their ranges, and the region bounds check, the
//! alignment and the dispatch use the narrowed ranges; region begins may use
//! `//` and `%` by constants (double buffering, `tid // 4`). Values are
//! checked in the simulator (with its race check).

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::CommonRule;
use tirx_lower::Lowered;

const HEAD: &str = "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\nfrom tvm.tirx.layout import S, TileLayout, laneid\n";

/// Simulates with A = a distinct pattern and B = 0 (all CTAs, races checked); returns B.
fn run(l: &Lowered, src: &str, a_elems: usize, b_elems: usize) -> (Vec<u8>, Vec<u8>) {
    let a = pattern(DType::F32, a_elems);
    let mut params = vec![a.clone(), vec![0u8; b_elems * 4]];
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()) {
        panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
    }
    let b = params.pop().unwrap_or_default();
    (a, b)
}

/// Lowers and checks B == A element for element.
fn identity(src: &str, elems: usize) -> Lowered {
    let l = lower(src);
    let (a, b) = run(&l, src, elems, elems);
    assert_eq!(a, b, "B != A\n{}\n{src}", l.lir);
    l
}

fn chosen(l: &Lowered) -> Vec<&str> {
    l.explain.iter().map(|c| c.chosen.as_deref().unwrap_or("none")).collect()
}

/// The issue's reproducer: warps 1..3 each copy 32 rows at `(w - 1) * 32`.
fn warp_branch(cond: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def w1(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (96, 32), "float32")
    B = T.match_buffer(B_ptr, (96, 32), "float32")
    T.device_entry(); T.cta_id([1]); lane = T.lane_id([32]); w = T.warp_id([4]); tid = T.thread_id([128])
    S1 = T.alloc_buffer((96, 32), "float32", scope="shared")
{cond}
        Tx.warp.copy(S1[(w - 1) * 32: (w - 1) * 32 + 32, 0:32], A[(w - 1) * 32: (w - 1) * 32 + 32, 0:32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:96, 0:32], S1[0:96, 0:32])
"#
    )
}

/// Inside `if w >= 1` the warp copy sees `w in [1, 3]`: the region `(w - 1) * 32`
/// is in bounds, the copy is cooperative, and explain shows the range it used.
#[test]
fn warp_copy_in_a_warp_branch_is_cooperative() {
    let src = warp_branch("    if w >= 1:");
    let l = identity(&src, 96 * 32);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(4), Some(8)), "{}", c.render());
    assert_eq!(c.ranges, vec!["w in [1, 3]".to_string()]);
    let text = c.render();
    assert!(text.contains("inter {warpid [1, 4), cta_id [0, 1)}"), "{text}");
    assert!(text.contains("  ranges: w in [1, 3]\n"), "{text}");
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));
    assert!(l.lir.to_string().contains("w * 1024 - 1024"), "{}", l.lir);
    let mut j = c.clone();
    j.locate("k.py", &src);
    assert_eq!(serde_json::to_value(&j).unwrap()["ranges"], serde_json::json!(["w in [1, 3]"]));
}

/// Every way of writing "warps 1..3" narrows the same: conjunctions, constants on
/// either side, `!=` at an end of the range, products, nested ifs, else-branches,
/// and the thread id.
#[test]
fn narrowing_forms() {
    let forms = [
        "    if w >= 1:",
        "    if 1 <= w:",
        "    if w > 0:",
        "    if 0 < w:",
        "    if w != 0:",
        "    if 0 != w:",
        "    if w - 1 >= 0:",
        "    if 2 * w >= 2:",
        "    if 3 - w <= 2:",
        "    if w >= 1 and w < 4:",
        "    if w >= 1 and 4 > w and lane < 32:",
        "    if w >= 1:\n      if w <= 3:",
        "    if w == 0:\n        pass\n    else:",
        "    if w < 1:\n        pass\n    else:",
        "    if tid >= 32:",
        "    if tid // 32 >= 1:",
        "    if tid // 32 != 0 and tid // 32 > 0:",
    ];
    for cond in forms {
        let src = warp_branch(cond);
        let l = identity(&src, 96 * 32);
        let c = call(&l, 0);
        assert_eq!(c.chosen.as_deref(), Some("gmem_smem"), "{cond}\n{}", c.render());
        assert_eq!(c.ranges, vec!["w in [1, 3]".to_string()], "{cond}");
        assert!(c.threads.contains("warpid [1, 4)"), "{cond}: {}", c.threads);
    }
}

/// `!=` narrows lanes when it removes an end of the range, and is untracked otherwise.
#[test]
fn not_equal_on_lanes() {
    let src = warp_branch("    if lane != 0:").replace("(w - 1) * 32", "w * 0");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    assert_eq!(rule(&ex[0], "gmem_smem"), CommonRule::AllThreadsActive);
    assert_eq!(tried(&ex[0], "gmem_smem").reason, "laneid narrowed to [1, 32) vs full [0, 32)");
    let src = warp_branch("    if lane != 5:").replace("(w - 1) * 32", "w * 0");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    assert_eq!(rule(&ex[0], "gmem_smem"), CommonRule::AllThreadsActive);
    assert!(tried(&ex[0], "gmem_smem").reason.contains("cannot track"), "{}", ex[0].render());
}

fn cta_branch(cond: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (96, 32), "float32")
    B = T.match_buffer(B_ptr, (96, 32), "float32")
    T.device_entry(); by = T.cta_id([4]); T.lane_id([32]); T.warp_id([4]); T.thread_id([128])
    S1 = T.alloc_buffer((32, 32), "float32", scope="shared")
{cond}
        Tx.cta.copy(S1[0:32, 0:32], A[by * 32: by * 32 + 32, 0:32])
        T.cuda.cta_sync()
        Tx.cta.copy(B[by * 32: by * 32 + 32, 0:32], S1[0:32, 0:32])
"#
    )
}

/// 4 CTAs, 3 tiles: inside `if by < 3` the region `by * 32` is in bounds and
/// cooperative; CTA 3 does nothing. Without the `if`, CTA 3 would read rows
/// 96..128 of a 96-row tensor: provably out of bounds, a user error at the
/// region naming `by = 3`, and no variant is tried.
#[test]
fn cta_copy_in_a_cta_branch() {
    let l = identity(&cta_branch("    if by < 3:"), 96 * 32);
    assert_eq!(chosen(&l), ["gmem_smem", "gmem_smem"]);
    assert_eq!(call(&l, 0).ranges, vec!["by in [0, 2]".to_string()]);
    assert!(call(&l, 0).threads.contains("cta_id [0, 3)"), "{}", call(&l, 0).threads);

    let src = cta_branch("    if True:");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    assert!(ex[0].tried.is_empty(), "{}", ex[0].render());
    assert_eq!(
        ex[0].bounds,
        ["`A[by * 32:by * 32 + 32, 0:32]` is out of bounds: dim 0 of `A` begins at `by * 32`, in [0, 96] here (by in [0, 3]): by = 3 reads rows [96, 128) of 96"]
    );
    assert!(ex[0].render().contains("=> not lowered: a region is out of bounds"), "{}", ex[0].render());
    let errs = lower_errors(&src);
    assert_eq!(
        errs[0].message,
        "`A[by * 32:by * 32 + 32, 0:32]` is out of bounds of `A` (shape (96, 32)): by = 3 reads rows [96, 128) of 96"
    );
    // The write back is out of bounds too, with the same `by`: one error per region.
    assert!(errs[1].message.contains("by = 3 writes rows [96, 128) of 96"), "{}", render(&errs, &src));

    // A 2-D grid: `by` is narrowed by value, `bx` keeps its extent.
    let two_d = |cond: &str| {
        cta_branch(cond)
            .replace("(96, 32)", "(96, 64)")
            .replace("by = T.cta_id([4])", "bx, by = T.cta_id([2, 4])")
            .replace(", 0:32], S1", ", bx * 32:bx * 32 + 32], S1")
            .replace("A[by * 32: by * 32 + 32, 0:32]", "A[by * 32: by * 32 + 32, bx * 32:bx * 32 + 32]")
    };
    let l = identity(&two_d("    if by < 3:"), 96 * 64);
    assert_eq!(chosen(&l), ["gmem_smem", "gmem_smem"]);
    assert_eq!(call(&l, 0).ranges, vec!["by in [0, 2]".to_string(), "bx in [0, 1]".to_string()]);
    let (ex, _) = tirx_lower::explain_kernel(&parse(&two_d("    if bx < 2:")), &Default::default());
    assert!(ex[0].bounds[0].ends_with("by = 3 reads rows [96, 128) of 96"), "{}", ex[0].render());
}

fn double_buffer(shape: (i64, i64), guard: &str) -> String {
    let (r, c) = shape;
    format!(
        r#"{HEAD}
@T.prim_func
def stage(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, {r}, {c}), "float32")
    B = T.match_buffer(B_ptr, (8, {r}, {c}), "float32")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); T.warp_id([4]); T.thread_id([128])
    S1 = T.alloc_buffer((2, {r}, {c}), "float32", scope="shared")
    Tx.cta.copy(S1[0, 0:{r}, 0:{c}], A[0, 0:{r}, 0:{c}])
    for k in range(8):
        T.cuda.cta_sync()
        if {guard}:
            Tx.cta.copy(S1[(k + 1) % 2, 0:{r}, 0:{c}], A[k + 1, 0:{r}, 0:{c}])
        Tx.cta.copy(B[k, 0:{r}, 0:{c}], S1[k % 2, 0:{r}, 0:{c}])
"#
    )
}

/// Double buffering: stage `(k + 1) % 2` loads while stage `k % 2` stores. The
/// `%` terms are atoms of the affine begin (range [0, 1], step 1024 elements),
/// so every copy stays cooperative; `if k + 1 < 8` narrows `k` to [0, 6], which
/// keeps `A[k + 1]` in bounds. Race-free in the simulator: the load into stage
/// `(k + 2) % 2` follows the `cta_sync` at the loop top.
#[test]
fn double_buffering_with_mod_begins() {
    let src = double_buffer((32, 32), "k + 1 < 8");
    let l = identity(&src, 8 * 32 * 32);
    assert_eq!(chosen(&l), ["gmem_smem"; 3]);
    assert_eq!(call(&l, 1).ranges, vec!["k in [0, 6]".to_string()]);
    assert_eq!(call(&l, 2).ranges, vec!["k in [0, 7]".to_string()]);
    assert_eq!((call(&l, 1).vec, call(&l, 2).vec), (Some(4), Some(4)));
    let text = l.lir.to_string();
    assert!(text.contains("((k + 1) % 2) * 1024"), "{text}");
    assert!(text.contains("(k % 2) * 1024"), "{text}");
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));

    // Ragged stages (30×30 does not divide over 128 threads): the predicated variant.
    let l = identity(&double_buffer((30, 30), "k < 7"), 8 * 30 * 30);
    assert_eq!(chosen(&l), ["gmem_smem_predicated"; 3]);

    // Without the guard, `A[k + 1]` reads row 8 of 8 at k = 7: provably out of bounds.
    let src = double_buffer((32, 32), "True");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
    assert!(ex[1].tried.is_empty(), "{}", ex[1].render());
    assert!(ex[1].bounds[0].ends_with("(k in [0, 7]): k = 7 reads index 8 of dim 0 (size 8)"), "{}", ex[1].render());
    // A guard tirx does not capture leaves k's range an enclosure: nothing is provable,
    // the copy is lowered with a warning and a bounds check the simulator runs (and
    // k <= 6 keeps it in bounds at run time).
    let src = double_buffer((32, 32), "k * k < 49");
    let l = identity(&src, 8 * 32 * 32);
    assert_eq!(chosen(&l), ["gmem_smem"; 3]);
    assert_eq!(call(&l, 1).ranges, vec!["k in [0, 7]".to_string()]);
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &src));
    assert!(
        l.warnings[0].message.starts_with("cannot prove `A[k + 1, 0:32, 0:32]` inside `A`"),
        "{}",
        render(&l.warnings, &src)
    );
    assert!(l.lir.to_string().contains("bounds.read A[k + 1 : +1, 0 : +32, 0 : +32] in (8, 32, 32)"), "{}", l.lir);
}

/// Registers from a stage picked by `(k + 1) % 4`: the reg variant with a `%` begin.
#[test]
fn reg_copy_with_mod_begin() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32, 8), "float32")
    B = T.match_buffer(B_ptr, (4, 32, 8), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8):(1@laneid, 1)]))
    for k in range(4):
        Tx.warp.copy(R[0:32, 0:8], A[(k + 1) % 4, 0:32, 0:8])
        Tx.warp.copy(B[k, 0:32, 0:8], R[0:32, 0:8])
"#
    );
    let l = lower(&src);
    assert_eq!(chosen(&l), ["reg", "reg"]);
    assert_eq!(call(&l, 0).vec, Some(4));
    let (a, b) = run(&l, &src, 4 * 32 * 8, 4 * 32 * 8);
    // B[k] = A[(k + 1) % 4].
    let stage = 32 * 8 * 4;
    for k in 0..4 {
        let from = (k + 1) % 4;
        assert_eq!(b[k * stage..(k + 1) * stage], a[from * stage..(from + 1) * stage], "stage {k}");
    }
}

/// Each thread copies 8 floats at row `tid // 4` (through a `let`), column
/// `(tid % 4) * 8`: thread-scope gmem_smem with 16-byte vectors.
#[test]
fn thread_copy_with_floor_div_and_mod() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 32), "float32")
    B = T.match_buffer(B_ptr, (32, 32), "float32")
    T.device_entry(); T.cta_id([1]); tid = T.thread_id([128])
    S1 = T.alloc_buffer((32, 32), "float32", scope="shared")
    row = tid // 4
    Tx.copy(S1[row, (tid % 4) * 8:(tid % 4) * 8 + 8], A[tid // 4, (tid % 4) * 8:(tid % 4) * 8 + 8])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:32, 0:32], S1[0:32, 0:32])
"#
    );
    let l = identity(&src, 32 * 32);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some("gmem_smem"), Some(4), Some(2)), "{}", c.render());
    assert_eq!(c.ranges, vec!["tid in [0, 127]".to_string()]);
    // Rows past the tensor at some thread: `tid // 2` reaches row 63 of 32.
    let bad = src.replace("A[tid // 4,", "A[tid // 2,");
    let (ex, _) = tirx_lower::explain_kernel(&parse(&bad), &Default::default());
    assert!(ex[0].bounds[0].ends_with("tid = 127 reads row 63 of 32"), "{}", ex[0].render());
}

/// A variable with one value at the call is that constant: inside `if w == 1`
/// the begin `(w - 1) * 3` is column 0, so 16-byte vectors are aligned (inside
/// `if w == 2` it is column 3: scalars only; gmem_smem is forced, since gmem_smem_peel
/// would peel those rows).
#[test]
fn pinned_variables_are_constants() {
    let src = |cond: &str| {
        format!(
            r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 32), "float32")
    B = T.match_buffer(B_ptr, (32, 16), "float32")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); w = T.warp_id([4]); T.thread_id([128])
    S1 = T.alloc_buffer((32, 16), "float32", scope="shared")
    if {cond}:
        Tx.warp.copy(S1[0:32, 0:16], A[0:32, (w - 1) * 3:(w - 1) * 3 + 16], dispatch="gmem_smem")
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:32, 0:16], S1[0:32, 0:16])
"#
        )
    };
    let pinned = src("w == 1");
    let l = lower(&pinned);
    assert_eq!((call(&l, 0).chosen.as_deref(), call(&l, 0).vec), (Some("gmem_smem"), Some(4)));
    assert_eq!(call(&l, 0).ranges, vec!["w in [1, 1]".to_string()]);
    let (a, b) = run(&l, &pinned, 32 * 32, 32 * 16);
    for r in 0..32 {
        assert_eq!(b[r * 64..(r + 1) * 64], a[r * 128..r * 128 + 64], "row {r}");
    }
    let l = lower(&src("w == 2"));
    assert_eq!((call(&l, 0).chosen.as_deref(), call(&l, 0).vec), (Some("gmem_smem"), Some(1)));
}

/// One warning per slow pick, also inside narrowed branches and loops.
#[test]
fn each_warning_once() {
    let src =
        warp_branch("    if w >= 1:").replace(", 0:32])\n    T.cuda", ", 0:32], dispatch=\"fallback\")\n    T.cuda");
    let l = identity(&src, 96 * 32);
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &src));
    let src = double_buffer((32, 32), "k + 1 < 8")
        .replace("A[k + 1, 0:32, 0:32])", "A[k + 1, 0:32, 0:32], dispatch=\"fallback\")");
    let l = identity(&src, 8 * 32 * 32);
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &src));
}

/// A `T.unroll` loop whose variable indexes registers (`R[kk % 2]`, double buffering in
/// registers) is unrolled by the lowering: each copy sees a constant, the register copies lower
/// to vector moves, and B == A. A `T.unroll` loop that indexes only memory stays a loop.
#[test]
fn unroll_loop_indexing_registers_is_unrolled() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def dbuf(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 16), "float32")
    B = T.match_buffer(B_ptr, (32, 16), "float32")
    T.device_entry(); T.cta_id([1]); tid = T.thread_id([32])
    R = T.alloc_buffer((2, 4), "float32", scope="local")
    Tx.copy(R[0, 0:4], A[tid, 0:4])
    for kk in T.unroll(4):
        if kk + 1 < 4:
            Tx.copy(R[(kk + 1) % 2, 0:4], A[tid, kk * 4 + 4:kk * 4 + 8])
        Tx.copy(B[tid, kk * 4:kk * 4 + 4], R[kk % 2, 0:4])
    for j in T.unroll(4):
        B[tid, j] = B[tid, j] + T.float32(0)
"#
    );
    let l = identity(&src, 32 * 16);
    assert!(chosen(&l).iter().all(|v| *v == "reg"), "{:?}\n{}", chosen(&l), l.lir);
    let lir = l.lir.to_string();
    // Four copies of the first loop's body (no loop over kk), the second loop kept.
    assert!(!lir.contains("for kk"), "{lir}");
    assert!(lir.contains("unroll for j in 0..4"), "{lir}");
}

/// A problem inside an unrolled `T.unroll` body is reported once, not once per copy.
#[test]
fn an_error_in_an_unrolled_loop_is_reported_once() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def dbuf(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 16), "float32")
    B = T.match_buffer(B_ptr, (32, 16), "float32")
    T.device_entry(); T.cta_id([1]); tid = T.thread_id([32])
    R = T.alloc_buffer((2, 4), "float32", scope="local")
    for kk in T.unroll(4):
        Tx.copy(R[kk % 2, 0:4], A[tid, kk * 4:kk * 4 + 4])
        Tx.copy(B[tid, kk * 4:kk * 4 + 4], R[kk % 2, 0:4], dispatch="ldstmatrix")
"#
    );
    let errs = lower_errors(&src);
    assert_eq!(errs.len(), 1, "{}", render(&errs, &src));
    assert!(errs[0].message.contains("forced variant 'ldstmatrix' does not apply"), "{}", render(&errs, &src));
}
