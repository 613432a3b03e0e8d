//! Bounds as facts over ranges (tile-primitives.md §1.3, §3.1): every region and
//! scalar access is checked against its buffer's shape over the full range of
//! the scope ids and loop variables it uses, before dispatch. Provably out of
//! bounds is a user error at the region naming the values; not provable is a
//! warning once and a `BoundsCheck` the simulator runs, dim by dim.

mod common;
use common::*;
use tirx_ir::diag::line_col;
use tirx_ir::{DType, Diagnostic};
use tirx_lower::{LowerOptions, Lowered};
use tirx_sim::{SimErrorKind, SimOptions};

const HEAD: &str = "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\nfrom tvm.tirx.layout import S, TileLayout, laneid\n";

/// The issue's reproducer: on a (16, 32) buffer, CTA `bx` of 2 reads columns
/// `bx * 16 .. bx * 16 + 32`; for bx = 1 that is columns 16..48 of 32.
fn repro(dispatch: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def oob(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 32), "float32")
    B = T.match_buffer(B_ptr, (8, 32), "float32")
    T.device_entry()
    bx = T.cta_id([2]); T.lane_id([32]); T.thread_id([32])
    S_ = T.alloc_buffer((8, 32), "float32", scope="shared")
    Tx.warp.copy(S_[0:8, 0:32], A[0:8, bx * 16 : bx * 16 + 32]{dispatch})
    T.cuda.cta_sync()
    Tx.warp.copy(B[0:8, 0:32], S_[0:8, 0:32])
"#
    )
}

/// (line, col) of the first occurrence of `needle` in `src`.
fn at(src: &str, needle: &str) -> (usize, usize) {
    line_col(src, src.find(needle).unwrap_or_else(|| panic!("`{needle}` not in\n{src}")))
}

fn pos(src: &str, d: &Diagnostic) -> (usize, usize) {
    line_col(src, d.span().lo as usize)
}

fn lower_opts(src: &str, opts: &LowerOptions) -> Result<Lowered, Vec<Diagnostic>> {
    tirx_lower::lower_kernel(&parse(src), opts)
}

fn deferred() -> LowerOptions {
    LowerOptions { defer_bounds: true, ..Default::default() }
}

/// A user error at the region, naming the value of `bx` and the columns it
/// reads; no variant is tried, `fallback` (forced or not) included.
#[test]
fn symbolic_out_of_bounds_region_is_an_error_at_the_region() {
    for dispatch in ["", ", dispatch=\"fallback\"", ", dispatch=\"gmem_smem\""] {
        let src = repro(dispatch);
        let errs = lower_errors(&src);
        assert_eq!(errs.len(), 1, "{}", render(&errs, &src));
        let e = &errs[0];
        assert!(!e.internal);
        assert_eq!(
            e.message,
            "`A[0:8, bx * 16:bx * 16 + 32]` is out of bounds of `A` (shape (16, 32)): bx = 1 reads columns [16, 48) of 32"
        );
        assert_eq!(pos(&src, e), at(&src, "A[0:8, bx * 16"), "{}", render(&errs, &src));
        let text = render(&errs, &src);
        for want in [
            "^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^ bx = 1 reads columns [16, 48) of 32",
            "= dim 1 of `A` begins at `bx * 16`, in [0, 16] here (bx in [0, 1])",
            "= help: every value of bx must keep the columns inside [0, 32)",
        ] {
            assert!(text.contains(want), "missing `{want}` in\n{text}");
        }
        let (ex, _) = tirx_lower::explain_kernel(&parse(&src), &Default::default());
        assert!(ex[0].tried.is_empty() && ex[0].chosen.is_none(), "{}", ex[0].render());
    }
}

/// A 2-D grid with one CTA column too many: an out-of-bounds error at each
/// region (read and write), not a cross-CTA race. Lowered anyway for the
/// simulator (`defer_bounds`), the run stops at the first out-of-bounds
/// element of CTA (2, 0), before its wrapped columns could race with CTA (0, 0).
#[test]
fn one_cta_column_too_many_is_out_of_bounds_not_a_race() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def tiled(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), "float32")
    B = T.match_buffer(B_ptr, (64, 64), "float32")
    T.device_entry()
    bx, by = T.cta_id([3, 2])
    T.lane_id([32]); T.warp_id([4]); T.thread_id([128])
    S_ = T.alloc_buffer((32, 32), "float32", scope="shared")
    Tx.cta.copy(S_[0:32, 0:32], A[by * 32 : by * 32 + 32, bx * 32 : bx * 32 + 32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[by * 32 : by * 32 + 32, bx * 32 : bx * 32 + 32], S_[0:32, 0:32])
"#
    );
    let errs = lower_errors(&src);
    let msgs: Vec<&str> = errs.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(msgs.len(), 2, "{}", render(&errs, &src));
    assert!(msgs[0].ends_with("bx = 2 reads columns [64, 96) of 64"), "{}", msgs[0]);
    assert!(msgs[1].ends_with("bx = 2 writes columns [64, 96) of 64"), "{}", msgs[1]);
    assert_eq!(pos(&src, &errs[1]), at(&src, "B[by * 32"));

    let l = lower_opts(&src, &deferred()).unwrap_or_else(|d| panic!("{}", render(&d, &src)));
    assert_eq!(l.warnings.len(), 2, "{}", render(&l.warnings, &src));
    assert!(l.warnings[0].message.contains("lowered anyway"), "{}", render(&l.warnings, &src));
    let mut params = vec![pattern(DType::F32, 64 * 64), vec![0u8; 64 * 64 * 4]];
    let e = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).expect_err("out of bounds");
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{e}");
    assert_eq!(line_col(&src, e.span.lo as usize), at(&src, "A[by * 32"));
    let m = e.to_string();
    assert!(m.contains("read of element (0, 64) of `A` (global, shape (64, 64))"), "{m}");
    assert!(m.contains("thread 0 (warp 0, lane 0) of CTA (2, 0, 0)"), "{m}");
    // The deferred LIR checks the region before the copy (the default one has no LIR at all).
    assert!(l.lir.to_string().contains("bounds.read A[by * 32 : +32, bx * 32 : +32] in (64, 64)"), "{}", l.lir);
}

/// Independent variables (a CTA id and a loop variable) make the range exact:
/// the corner where the region leaves names both. Correlated ones (two
/// thread ids) give only an enclosure: a warning, and the simulator checks it.
#[test]
fn exact_ranges_are_errors_enclosures_are_warnings() {
    let two = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (120, 16), "float32")
    B = T.match_buffer(B_ptr, (32, 16), "float32")
    T.device_entry()
    by = T.cta_id([2]); T.lane_id([32]); T.thread_id([32])
    S_ = T.alloc_buffer((16, 16), "float32", scope="shared")
    for k in range(4):
        Tx.warp.copy(S_[0:16, 0:16], A[by * 64 + k * 16 : by * 64 + k * 16 + 16, 0:16])
        T.cuda.cta_sync()
    Tx.warp.copy(B[by * 16 : by * 16 + 16, 0:16], S_[0:16, 0:16])
"#
    );
    let errs = lower_errors(&two);
    assert_eq!(errs.len(), 1, "{}", render(&errs, &two));
    assert!(errs[0].message.ends_with(": by = 1, k = 3 reads rows [112, 128) of 120"), "{}", render(&errs, &two));
    assert!(render(&errs, &two).contains("(by in [0, 1], k in [0, 3])"), "{}", render(&errs, &two));
    // Inside `if by == 0` the same begin is in bounds.
    let guarded = two.replace("    for k in range(4):\n", "    for k in range(4):\n      if by == 0:\n");
    let guarded = guarded.replace("\n        T.cuda.cta_sync()", "\n      T.cuda.cta_sync()");
    lower(&guarded);
    // Inside a loop whose trip count is known only at run time nothing is exact: `range(1 - by)`
    // never runs for by = 1, where `by * 112` would read rows 112..128 of 120. A warning, and
    // the check in the loop never fails.
    let runtime_trips = two
        .replace("    for k in range(4):\n", "    for k in range(1 - by):\n")
        .replace("A[by * 64 + k * 16 : by * 64 + k * 16 + 16, 0:16]", "A[by * 112 : by * 112 + 16, 0:16]");
    let l = lower(&runtime_trips);
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &runtime_trips));
    assert!(l.warnings[0].message.contains("only an enclosure"), "{}", render(&l.warnings, &runtime_trips));

    // `tid - lane` is 32 · warp: rows 0..96 + 32 of 128, in bounds; tirx sees two
    // thread ids (correlated) and only knows [-31, 127].
    let corr = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128,), "float32")
    B = T.match_buffer(B_ptr, (128, 32), "float32")
    T.device_entry()
    T.cta_id([1]); lane = T.lane_id([32]); T.warp_id([4]); tid = T.thread_id([128])
    R = T.alloc_buffer((32,), "float32", scope="local")
    Tx.copy(R[0:32], A[tid - lane : tid - lane + 32])
    Tx.copy(B[tid, 0:32], R[0:32])
"#
    );
    let l = lower(&corr);
    assert_eq!(l.warnings.iter().filter(|w| w.message.starts_with("cannot prove")).count(), 1);
    let w = l.warnings.iter().find(|w| w.message.starts_with("cannot prove")).unwrap();
    assert_eq!(pos(&corr, w), at(&corr, "A[tid - lane"));
    assert!(
        w.message.contains("in [-31, 127] here (tid in [0, 127], lane in [0, 31]), which is only an enclosure"),
        "{}",
        w.message
    );
    assert!(l.lir.to_string().contains("bounds.read A[tid - lane : +32] in (128)"), "{}", l.lir);
}

/// A data-dependent region: a warning once at the region and a check the
/// simulator runs dim by dim — columns 30..38 of a 32-column row are caught
/// although their flat indices are inside `A`. The GPU code has no check.
#[test]
fn data_dependent_regions_are_checked_by_the_simulator() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def gather(A_ptr: T.handle, I_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16, 32), "float32")
    I = T.match_buffer(I_ptr, (2,), "int32")
    B = T.match_buffer(B_ptr, (8, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    S_ = T.alloc_buffer((8, 8), "float32", scope="shared")
    for k in range(2):
        Tx.warp.copy(S_[0:8, 0:8], A[I[0] : I[0] + 8, I[1] : I[1] + 8])
        T.cuda.cta_sync()
    Tx.warp.copy(B[0:8, 0:8], S_[0:8, 0:8])
"#
    );
    let l = lower_opts(&src, &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, &src)));
    let warns: Vec<&Diagnostic> = l.warnings.iter().filter(|w| w.message.starts_with("cannot prove")).collect();
    assert_eq!(warns.len(), 1, "{}", render(&l.warnings, &src));
    assert_eq!(pos(&src, warns[0]), at(&src, "A[I[0]"));
    assert!(warns[0].message.contains("dim 0 begins at `I[0]`, which is not affine"), "{}", warns[0].message);
    assert!(l.lir.to_string().contains("bounds.read A[I[0] : +8, I[1] : +8] in (16, 32)"), "{}", l.lir);
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert_eq!(cuda.matches("bounds").count(), 1, "only `__launch_bounds__`:\n{cuda}");

    let run = |i: [i32; 2]| {
        let idx: Vec<u8> = i.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut params = vec![pattern(DType::F32, 16 * 32), idx, vec![0u8; 8 * 8 * 4]];
        tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default())
    };
    run([8, 24]).unwrap_or_else(|e| panic!("{e}"));
    let e = run([0, 30]).expect_err("columns 30..38 of 32");
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{e}");
    assert_eq!(line_col(&src, e.span.lo as usize), at(&src, "A[I[0]"));
    let m = e.to_string();
    assert!(
        m.contains(
            "read of element (0, 32) of `A` (global, shape (16, 32)) by thread 0 (warp 0, lane 0) of CTA (0, 0, 0)"
        ),
        "{m}"
    );
    assert!(m.contains("A[0:8, 30:38]"), "{m}");
}

/// Elementwise ops go through the same check (it runs before dispatch, for every
/// op family): registers `[k * 4, k * 4 + 8)` of 8 at k = 1 is a bounds error at
/// each region, before any variant says that register regions need constant begins.
#[test]
fn elementwise_regions_are_checked_too() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    B = T.match_buffer(B_ptr, (32, 8), "float32")
    T.device_entry(); T.cta_id([1]); T.thread_id([32])
    R = T.alloc_buffer((32, 8), "float32", scope="local", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
    Tx.warp.copy(R[0:32, 0:8], A[0:32, 0:8])
    for k in range(2):
        Tx.warp.sqrt(R[0:32, k * 4 : k * 4 + 8], R[0:32, k * 4 : k * 4 + 8])
    Tx.warp.copy(B[0:32, 0:8], R[0:32, 0:8])
"#
    );
    let errs = lower_errors(&src);
    assert_eq!(errs.len(), 2, "{}", render(&errs, &src));
    assert!(errs[0].message.ends_with("k = 1 writes columns [4, 12) of 8"), "{}", render(&errs, &src));
    assert!(errs[1].message.ends_with("k = 1 reads columns [4, 12) of 8"), "{}", render(&errs, &src));
    // In bounds (k * 4 : k * 4 + 4): the variant's own verdict.
    let errs = lower_errors(&src.replace("k * 4 + 8", "k * 4 + 4"));
    assert_eq!(errs[0].message, "no lowering variant applies to this `sqrt` at warp scope", "{}", render(&errs, &src));
}

/// Scalar loads and stores get the same verdicts: a provably out-of-bounds
/// index is an error at the index; a load in a branch of `T.if_then_else` is
/// left to its guard; a data-dependent index is a warning and a simulator check.
#[test]
fn scalar_accesses_are_checked_with_the_same_ranges() {
    let kernel = |body: &str| {
        format!(
            r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, I_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 16), "float32")
    I = T.match_buffer(I_ptr, (32,), "int32")
    B = T.match_buffer(B_ptr, (32, 16), "float32")
    T.device_entry(); T.cta_id([1]); tid = T.thread_id([32])
    for j in range(16):
{body}
"#
        )
    };
    let store = kernel("        B[tid, j + 1] = A[tid, j]");
    let errs = lower_errors(&store);
    assert_eq!(errs.len(), 1, "{}", render(&errs, &store));
    assert_eq!(
        errs[0].message,
        "`B[tid, j + 1]` is out of bounds of `B` (shape (32, 16)): j = 15 writes column 16 of 16"
    );
    assert_eq!(pos(&store, &errs[0]), at(&store, "j + 1]"));
    let load = kernel("        B[tid, j] = A[tid + 1, j]");
    let errs = lower_errors(&load);
    assert_eq!(
        errs[0].message,
        "`A[tid + 1, j]` is out of bounds of `A` (shape (32, 16)): tid = 31 reads row 32 of 32"
    );
    // Guarded by the select: not an error.
    let guarded = kernel("        B[tid, j] = T.if_then_else(j + 1 < 16, A[tid, j + 1], T.float32(0))");
    let l = lower(&guarded);
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &guarded));

    // A data-dependent column: column 16 of row 0 is flat element 16, row 1 column 0.
    let src = kernel("        B[tid, I[tid]] = A[tid, j]");
    let l = lower_opts(&src, &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, &src)));
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &src));
    assert_eq!(pos(&src, &l.warnings[0]), at(&src, "I[tid]]"));
    let run = |col: i32| {
        let idx: Vec<u8> = (0..32).flat_map(|t| if t == 0 { col } else { 0 }.to_le_bytes()).collect();
        let mut params = vec![pattern(DType::F32, 32 * 16), idx, vec![0u8; 32 * 16 * 4]];
        tirx_sim::simulate(&l.lir, &mut params, &SimOptions { check_races: false, ..Default::default() })
    };
    run(15).unwrap_or_else(|e| panic!("{e}"));
    let e = run(16).expect_err("column 16 of 16");
    assert_eq!(e.kind, SimErrorKind::OutOfBounds, "{e}");
    assert!(e.to_string().contains("write of element (0, 16) of `B` (global, shape (32, 16)) by thread 0 "), "{e}");
}

/// A data-dependent index clamped by `T.min` / `T.max` to the buffer is proven
/// inside (no warning, no simulator check); a clamp that reaches out is not.
#[test]
fn clamped_data_dependent_indices_are_proven() {
    let src = |hi: i64| {
        format!(
            r#"{HEAD}
@T.prim_func
def gather(A_ptr: T.handle, I_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (16,), "float32")
    I = T.match_buffer(I_ptr, (2,), "int32")
    B = T.match_buffer(B_ptr, (1,), "float32")
    T.device_entry()
    T.cta_id([1]); T.thread_id([1])
    B[0] = A[T.min(T.max(I[0] + I[1], 0), {hi})]
"#
        )
    };
    let inside = src(15);
    let l = lower_opts(&inside, &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, &inside)));
    assert!(l.warnings.iter().all(|w| !w.message.starts_with("cannot prove")), "{}", render(&l.warnings, &inside));
    let out = src(16);
    let l = lower_opts(&out, &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, &out)));
    assert_eq!(
        l.warnings.iter().filter(|w| w.message.starts_with("cannot prove")).count(),
        1,
        "{}",
        render(&l.warnings, &out)
    );
}
