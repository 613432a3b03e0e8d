//! Scalar parameters, run-time sizes and symbolic grids (tile-primitives.md §7):
//! region bounds that only the launch decides become launch checks (or are proven
//! and dropped, or are an error when no launch can pass), `T.assume` facts feed the
//! proofs and the alignment of vector accesses, explain says what was assumed, and
//! the simulator binds the scalar arguments, checks the launch and sizes buffers by it.

mod common;
use common::*;
use tirx_ir::lir::{LKernel, ScalarValue};
use tirx_sim::{SimErrorKind, SimOptions};

const HEAD: &str = "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\n";

/// B = A over (n, 128) float32 rows, one 64-row tile per CTA of 128 threads; `grid` is the
/// `T.cta_id` extent, `assume` extra lines before `T.device_entry()`.
fn rows(grid: &str, assume: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def rows(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n, 128), "float32")
    B = T.match_buffer(B_ptr, (n, 128), "float32")
{assume}    T.device_entry()
    bx = T.cta_id([{grid}])
    T.thread_id([128])
    S_ = T.alloc_buffer((64, 128), "float32", scope="shared")
    Tx.cta.copy(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])
    T.cuda.cta_sync()
    Tx.cta.copy(B[bx * 64 : bx * 64 + 64, 0:128], S_[0:64, 0:128])
"#
    )
}

fn checks(k: &LKernel) -> Vec<String> {
    k.checks.iter().map(|c| k.sym_text(&c.cond)).collect()
}

/// Simulates `k` with `n` rows (inputs 0, 1, 2, ...); `Ok(B)` or the error.
fn run_rows(k: &LKernel, n: i64) -> Result<Vec<f32>, tirx_sim::SimError> {
    let elems = (n.max(0) * 128) as usize;
    let a: Vec<u8> = (0..elems).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let mut params = vec![a, vec![0u8; elems * 4]];
    tirx_sim::simulate_args(k, &mut params, &[ScalarValue::Int(n)], &SimOptions::default())?;
    Ok(params[1].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect())
}

#[test]
fn undecidable_bounds_become_launch_checks() {
    let src = rows("(n + 63) // 64", "");
    let l = lower(&src);
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));
    assert_eq!(checks(&l.lir), ["(n + 63) // 64 * 64 <= n"]);
    let what = &l.lir.checks[0].what;
    assert_eq!(
        what, "rows of `A[bx * 64:bx * 64 + 64, 0:128]`; rows of `B[bx * 64:bx * 64 + 64, 0:128]`",
        "one check names every region relying on it"
    );
    // explain lists it per call, with the region and the symbolic range of `bx`.
    assert_eq!(l.explain[0].launch, ["(n + 63) // 64 * 64 <= n (rows of `A[bx * 64:bx * 64 + 64, 0:128]`)"]);
    assert_eq!(l.explain[0].ranges, ["bx in [0, (n + 63) // 64 - 1]"]);
    let text = l.explain[0].render();
    assert!(text.contains("assumed at launch: (n + 63) // 64 * 64 <= n (rows of `A[bx * 64"), "{text}");
    assert!(text.contains("inter {cta_id [0, (n + 63) // 64)}"), "{text}");
    assert!(text.contains("(global float32 [n, 128], layout S[(n, 128):(128, 1)])"), "{text}");
    let json = serde_json::to_value(&l.explain[0]).unwrap();
    assert_eq!(json["operands"][1]["shape"], serde_json::json!(["n", 128]));
    assert_eq!(json["launch"][0], "(n + 63) // 64 * 64 <= n (rows of `A[bx * 64:bx * 64 + 64, 0:128]`)");
    // The GPU code has 64-bit global indices (a run-time size may pass 2^31 elements).
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("float* __restrict__ B,\n    int n) {"), "{cuda}");
    assert!(cuda.contains("// launch check: (n + 63) // 64 * 64 <= n"), "{cuda}");
    // Two sizes that pass, value-checked; one that fails names the condition, the
    // argument and the region, and runs nothing.
    for n in [64, 192] {
        let b = run_rows(&l.lir, n).unwrap_or_else(|e| panic!("n = {n}: {e}"));
        assert!(b.iter().enumerate().all(|(i, &x)| x == i as f32), "n = {n}");
    }
    let e = run_rows(&l.lir, 100).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::InvalidLaunch, "{e}");
    assert!(
        e.message.contains("launch check `(n + 63) // 64 * 64 <= n` fails with n = 100 (rows of `A[bx * 64"),
        "{e}"
    );
    assert_eq!(&src[e.span.lo as usize..e.span.hi as usize], "A[bx * 64 : bx * 64 + 64, 0:128]");
}

#[test]
fn provable_bounds_are_not_emitted() {
    // `n // 64` CTAs never pass the last whole tile: 64·⌊n/64⌋ ≤ n.
    let l = lower(&rows("n // 64", ""));
    assert!(checks(&l.lir).is_empty(), "{:?}", checks(&l.lir));
    assert!(l.explain.iter().all(|c| c.launch.is_empty()));
    // With `n % 64 == 0` assumed, `(n + 63) // 64` is `n // 64`: only the assumption is checked.
    let l = lower(&rows("(n + 63) // 64", "    T.assume(n % 64 == 0)\n"));
    assert_eq!(checks(&l.lir), ["n % 64 == 0"]);
    assert_eq!(l.lir.checks[0].what, "T.assume(n % 64 == 0)");
    assert_eq!(l.explain[0].assumes, ["T.assume(n % 64 == 0)"]);
    assert!(l.explain[0].render().contains("  assumed: T.assume(n % 64 == 0)\n"));
    assert!(run_rows(&l.lir, 128).is_ok());
    let e = run_rows(&l.lir, 96).unwrap_err();
    assert!(e.message.contains("launch check `n % 64 == 0` fails with n = 96 (T.assume(n % 64 == 0))"), "{e}");
    // The last row of `n`: (n - 1) + 1 ≤ n always, and n - 1 ≥ 0 because a launch has n ≥ 1.
    let src = format!(
        r#"{HEAD}
@T.prim_func
def last(A_ptr: T.handle, B_ptr: T.handle, n: T.int64):
    A = T.match_buffer(A_ptr, (n, 4), "int32")
    B = T.match_buffer(B_ptr, (4,), "int32")
    T.device_entry()
    t = T.thread_id([4])
    B[t] = A[n - 1, t]
"#
    );
    let l = lower(&src);
    assert!(checks(&l.lir).is_empty() && l.warnings.is_empty(), "{:?}", checks(&l.lir));
}

#[test]
fn a_region_no_launch_can_keep_inside_is_an_error() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def past(A_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n, 128), "float32")
    T.device_entry()
    T.thread_id([128])
    S_ = T.alloc_buffer((64, 128), "float32", scope="shared")
    Tx.cta.copy(S_[0:64, 0:128], A[n : n + 64, 0:128])
"#
    );
    let errs = lower_errors(&src);
    assert_eq!(errs.len(), 1, "{}", render(&errs, &src));
    let e = &errs[0];
    assert_eq!(e.message, "`A[n:n + 64, 0:128]` is out of bounds of `A` (shape (n, 128)) for every launch");
    assert_eq!(&src[e.span().lo as usize..e.span().hi as usize], "A[n : n + 64, 0:128]");
    assert!(e.notes.iter().any(|n| n.contains("its rows end at n + 64 of n")), "{:?}", e.notes);
    // Deferred: a warning, and the simulator finds the first access past the rows of this launch.
    let opts = tirx_lower::LowerOptions { defer_bounds: true, ..Default::default() };
    let l = tirx_lower::lower_kernel(&parse(&src), &opts).unwrap();
    assert!(l.warnings[0].message.ends_with("for every launch; lowered anyway (bounds deferred to the simulator)"));
    let mut p = vec![vec![0u8; 64 * 512]];
    let e = tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(64)], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::OutOfBounds);
    assert!(e.message.contains("read of element (64, 0) of `A` (global, shape (64, 128))"), "{e}");
}

/// `A[off : off + 256]` of a 1024-element f16 buffer, copied by one warp.
fn window(assume: &str) -> String {
    format!(
        r#"{HEAD}
@T.prim_func
def window(A_ptr: T.handle, B_ptr: T.handle, off: T.int32):
    A = T.match_buffer(A_ptr, (1024,), "float16")
    B = T.match_buffer(B_ptr, (256,), "float16")
{assume}    T.device_entry()
    T.lane_id([32]); T.thread_id([32])
    S_ = T.alloc_buffer((256,), "float16", scope="shared")
    Tx.warp.copy(S_[0:256], A[off : off + 256])
    T.cuda.cta_sync()
    Tx.warp.copy(B[0:256], S_[0:256])
"#
    )
}

#[test]
fn assumed_divisibility_keeps_wide_vectors() {
    // Nothing known of `off`: its element offset may be odd, one element per access.
    let l = lower(&window(""));
    assert_eq!(l.explain[0].vec, Some(1), "{}", l.explain[0].render());
    assert_eq!(checks(&l.lir), ["0 <= off", "off <= 768"]);
    // `off % 8 == 0` (16 bytes): 8-element vectors; `off >= 0` drops that check.
    let l = lower(&window("    T.assume(off % 8 == 0 and off >= 0)\n"));
    let c = &l.explain[0];
    assert_eq!(c.vec, Some(8), "{}", c.render());
    assert_eq!(c.assumes, ["T.assume(off % 8 == 0 and off >= 0)"]);
    assert_eq!(c.launch, ["off <= 768 (elements of `A[off:off + 256]`)"]);
    assert_eq!(checks(&l.lir), ["off % 8 == 0 and off >= 0", "off <= 768"]);
    // A value against the assumption is refused; a good one copies its window.
    let a: Vec<u8> = (0..1024u16).flat_map(|i| half::f16::from_f32(i as f32).to_bits().to_le_bytes()).collect();
    let run = |off: i64| {
        let mut p = vec![a.clone(), vec![0u8; 512]];
        tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(off)], &SimOptions::default()).map(|_| p)
    };
    let p = run(512).unwrap();
    assert_eq!(p[1][..], a[1024..1536]);
    let e = run(4).unwrap_err();
    assert!(e.message.contains("`off % 8 == 0 and off >= 0` fails with off = 4"), "{e}");
    let e = run(1024).unwrap_err();
    assert!(e.message.contains("`off <= 768` fails with off = 1024 (elements of `A[off:off + 256]`)"), "{e}");
}

#[test]
fn an_enclosure_keeps_the_simulator_check_sized_by_the_launch() {
    // `if bx < 2:` cuts the CTA range below the grid's bound: an enclosure, not exact,
    // so the region gets a warning and a bounds check against the run-time rows.
    let src = rows("(n + 63) // 64", "").replace(
        "    Tx.cta.copy(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])\n",
        "    if bx < 2:\n        Tx.cta.copy(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])\n",
    );
    let l = lower(&src);
    assert_eq!(l.warnings.len(), 1, "{}", render(&l.warnings, &src));
    let w = &l.warnings[0].message;
    assert!(w.starts_with("cannot prove `A[bx * 64:bx * 64 + 64, 0:128]` inside `A` (shape (n, 128))"), "{w}");
    assert!(w.contains("only an enclosure"), "{w}");
    assert!(l.lir.to_string().contains("bounds.read A[bx * 64 : +64, 0 : +128] in (n, 128)"), "{}", l.lir);
    // The unguarded `B` copy still gets its launch check; with n = 128 both pass.
    assert_eq!(checks(&l.lir), ["(n + 63) // 64 * 64 <= n"]);
    assert!(run_rows(&l.lir, 128).is_ok());
}

#[test]
fn the_simulator_checks_the_scalar_arguments() {
    let l = lower(&rows("n // 64", ""));
    let mut p = vec![vec![0u8; 64 * 512], vec![0u8; 64 * 512]];
    let opts = SimOptions::default();
    let e = tirx_sim::simulate(&l.lir, &mut p, &opts).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BadArgument);
    assert!(e.message.contains("kernel `rows` takes 1 scalar argument(s) (`n`), 0 given"), "{e}");
    let e = tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Float(64.0)], &opts).unwrap_err();
    assert!(e.message.contains("scalar argument `n`: 64.0 is a float; a int32 parameter takes an integer"), "{e}");
    let e = tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(1 << 40)], &opts).unwrap_err();
    assert!(e.message.contains("outside the range of int32"), "{e}");
    // An empty grid is refused, naming the expression and the value.
    let e = tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(10)], &opts).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::InvalidLaunch);
    assert!(e.message.contains("grid dimension x `n // 64` is 0 with n = 10"), "{e}");
    // Buffers are sized by the launch: 64 rows want 64 × 128 floats each.
    let mut small = vec![vec![0u8; 16], vec![0u8; 16]];
    let e = tirx_sim::simulate_args(&l.lir, &mut small, &[ScalarValue::Int(64)], &opts).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BadArgument);
    assert!(e.message.contains("needs 32768 bytes, got 16"), "{e}");
    assert!(tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(64)], &opts).is_ok());
}

#[test]
fn float_scalars_reach_the_computation() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def axpb(A_ptr: T.handle, n: T.int32, a: T.float32, b: T.float64):
    A = T.match_buffer(A_ptr, (n,), "float32")
    T.device_entry()
    bx = T.cta_id([n])
    T.thread_id([1])
    A[bx] = A[bx] * a + T.cast(b, "float32")
"#
    );
    let l = lower(&src);
    assert!(checks(&l.lir).is_empty(), "{:?}", checks(&l.lir));
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("    float* __restrict__ A,\n    int n,\n    float a,\n    double b) {"), "{cuda}");
    let mut p = vec![[1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>()];
    let args = [ScalarValue::Int(3), ScalarValue::Float(0.5), ScalarValue::Int(1)];
    tirx_sim::simulate_args(&l.lir, &mut p, &args, &SimOptions::default()).unwrap();
    let got: Vec<f32> = p[0].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, [1.5, 2.0, 2.5]);
}

/// The guarded path: `if row < n:` and `if bx * 64 + 64 <= n:` keep the accesses under
/// them inside the run-time rows (the guard cancels the begin), so a ragged last tile
/// needs no launch check and no simulator check; n = 100 is a valid launch.
#[test]
fn guards_on_the_run_time_size_prove_the_accesses_under_them() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def ragged(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n, 4), "float32")
    B = T.match_buffer(B_ptr, (n, 4), "float32")
    T.device_entry()
    bx = T.cta_id([(n + 63) // 64])
    tid = T.thread_id([64])
    row = bx * 64 + tid
    if row < n:
        for j in range(4):
            B[row, j] = A[row, j] * 2.0
    S_ = T.alloc_buffer((64, 4), "float32", scope="shared")
    if bx * 64 + 64 <= n:
        Tx.cta.copy(S_[0:64, 0:4], A[bx * 64 : bx * 64 + 64, 0:4])
"#
    );
    let l = lower(&src);
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));
    assert!(checks(&l.lir).is_empty(), "{:?}", checks(&l.lir));
    assert!(l.explain[0].launch.is_empty() && l.explain[0].bounds.is_empty());
    assert!(!l.lir.to_string().contains("bounds."), "{}", l.lir);
    let n = 100usize;
    let a: Vec<f32> = (0..n * 4).map(|i| i as f32).collect();
    let mut p = vec![a.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(), vec![0u8; n * 16]];
    tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(n as i64)], &SimOptions::default()).unwrap();
    let b: Vec<f32> = p[1].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(b, a.iter().map(|x| x * 2.0).collect::<Vec<_>>());
}

/// A guard on a `let` value that is no affine form of ids and sizes (`first = bx * rows`,
/// both run-time: rows per CTA given at launch) proves the accesses under it, both ends; with
/// the lower end left out, the access stays unproven (a warning and a simulator check).
#[test]
fn guards_on_a_let_value_prove_the_accesses_under_them() {
    let kernel = |guard: &str| {
        format!(
            r#"{HEAD}
@T.prim_func
def spread(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, rows: T.int32):
    A = T.match_buffer(A_ptr, (n,), "float32")
    B = T.match_buffer(B_ptr, (n,), "float32")
    T.device_entry()
    bx = T.cta_id([(n + rows - 1) // rows])
    T.thread_id([1])
    first = bx * rows
    for j in range(rows):
        r = first + j
        if {guard}:
            B[r] = A[r] * 2.0
"#
        )
    };
    let src = kernel("(0 <= r) & (r < n)");
    let l = lower(&src);
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));
    assert!(checks(&l.lir).is_empty() && !l.lir.to_string().contains("bounds."), "{}", l.lir);
    let n = 7usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let mut p = vec![a.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(), vec![0u8; n * 4]];
    tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(n as i64), ScalarValue::Int(3)], &SimOptions::default())
        .unwrap();
    let b: Vec<f32> = p[1].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(b, a.iter().map(|x| x * 2.0).collect::<Vec<_>>());
    let src = kernel("r < n");
    let l = lower(&src);
    assert!(render(&l.warnings, &src).contains("no known range"), "{}", render(&l.warnings, &src));
}

/// A loop over the run-time rows bounds its variable where it runs: `for i in range(n)`
/// keeps `A[i]` inside `n` rows, `for i in range(1, n)` keeps `B[i - 1]` and `A[i]` inside.
#[test]
fn loops_over_the_run_time_size_prove_their_accesses() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def shift(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (n,), "float32")
    B = T.match_buffer(B_ptr, (n,), "float32")
    T.device_entry()
    T.thread_id([1])
    for i in range(n):
        B[i] = A[i] + 1.0
    for i in range(1, n):
        B[i - 1] = A[i]
"#
    );
    let l = lower(&src);
    assert!(l.warnings.is_empty(), "{}", render(&l.warnings, &src));
    assert!(checks(&l.lir).is_empty() && !l.lir.to_string().contains("bounds."), "{}", l.lir);
    let mut p = vec![[1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(), vec![0u8; 12]];
    tirx_sim::simulate_args(&l.lir, &mut p, &[ScalarValue::Int(3)], &SimOptions::default()).unwrap();
    let b: Vec<f32> = p[1].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(b, [2.0, 3.0, 4.0]);
}
